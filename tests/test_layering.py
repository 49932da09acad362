"""Pages and API views read through selectors and write through services:
no module under them touches a model manager (docs/architecture.md).

Read from the source (AST), so an authentication class, a helper or a
serializer in those packages is held to it as much as a view."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The pages and the API of each app: a package (every module under it) or a
# module, counted when it exists (``evaluation/api/`` may still be to come).
LAYERS = (
    "workspace/views",
    "workspace/api",
    "engine/views",
    "engine/api",
    "evaluation/views",
    "evaluation/api",
    "tracking/api",
    "tracking/views",
)

# A model's managers, and the shortcuts that query through them.
MANAGERS = {"objects", "_default_manager", "_base_manager"}
SHORTCUTS = {"get_object_or_404", "get_list_or_404"}


def layer_modules() -> list[Path]:
    modules = []
    for layer in LAYERS:
        package, module = ROOT / layer, ROOT / f"{layer}.py"
        if package.is_dir():
            modules += sorted(package.rglob("*.py"))
        if module.is_file():
            modules.append(module)
    return modules


def manager_uses(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for each manager attribute read and each shortcut
    named in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in MANAGERS:
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Name) and node.id in SHORTCUTS:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.alias) and node.name in SHORTCUTS:
            found.append((getattr(node, "lineno", 0), f"import of {node.name}"))
    return sorted(found)


def test_the_layers_exist() -> None:
    modules = {path.relative_to(ROOT).as_posix() for path in layer_modules()}
    assert "workspace/api/views.py" in modules
    assert "workspace/api/authentication.py" in modules
    assert "workspace/views/studies.py" in modules
    assert "evaluation/views.py" in modules or any(m.startswith("evaluation/views/") for m in modules)


@pytest.mark.parametrize("path", layer_modules(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_no_page_or_api_module_uses_a_model_manager(path: Path) -> None:
    uses = manager_uses(path.read_text(encoding="utf-8"))
    where = ", ".join(f"line {line}: {what}" for line, what in uses)
    assert not uses, f"{path.relative_to(ROOT)} queries a model directly ({where}): add a selector or a service"


@pytest.mark.parametrize(
    "source",
    [
        "Run.objects.filter(pk=1)",
        "self.model._default_manager.all()",
        "token = ApiToken.objects.select_related('user').first()",
        "from django.shortcuts import get_object_or_404",
        "get_object_or_404(Study, pk=1)",
    ],
)
def test_the_check_sees_a_manager(source: str) -> None:
    assert manager_uses(source)


def test_the_check_lets_selectors_and_services_through() -> None:
    source = "run = engine_selectors.run_get(run_id=1, user=user)\nservices.api_token_revoke(token=token)\nobjects = []"
    assert manager_uses(source) == []


def private_service_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` for each import of a private module of a services
    package (``services._checks``): the services' public surface is their
    package."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module or ''}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if any(part == "services" and rest.startswith("_") for part, rest in zip(parts, parts[1:], strict=False)):
                found.append((node.lineno, name))
                break
    return found


@pytest.mark.parametrize("path", layer_modules(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_no_page_or_api_module_imports_a_private_service_module(path: Path) -> None:
    assert not private_service_imports(path.read_text(encoding="utf-8")), path.relative_to(ROOT)


def test_the_private_import_check_sees_one() -> None:
    assert private_service_imports("from ..services._checks import require_phase") == [(1, "services._checks")]
    assert private_service_imports("from workspace.services import _checks")
    assert not private_service_imports("from workspace.services import phase_allows")


# The pure libraries import NumPy (and scikit-learn), never Django: they run in
# a notebook, a worker or a benchmark alike. Each is imported in a fresh
# interpreter, since this one has Django loaded already.
PURE_MODULES = (
    "engine.rules",
    "engine.core",
    "engine.layers",
    "engine.prioritisation",
    "engine.disagreement",
    "engine.feedback",
    "engine.explain",
    "engine.compare",
    "engine.arguments",
    "engine.robustness",
    "engine.sensitivity",
    "evaluation.metrics",
    "evaluation.bootstrap",
    "evaluation.elicitation",
    "evaluation.report",
    "evaluation.predictions",
    "evaluation.arrays",
    "workspace.charts",
)


def django_importers(modules: tuple[str, ...]) -> str:
    """The first of ``modules`` that loads Django, with the Django module it
    loaded, imported in order in a fresh interpreter; "" when none does."""
    probe = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module(name)\n"
        "    loaded = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        "    if loaded:\n"
        "        print(name, loaded[0])\n"
        "        break\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, "-c", probe, *modules], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout


def test_the_pure_modules_import_no_django() -> None:
    assert django_importers(PURE_MODULES) == ""


def test_the_purity_probe_finds_a_module_that_imports_django() -> None:
    assert django_importers(("engine.rules", "django.utils.text")) == "django.utils.text django\n"


# --- the layers contract (.importlinter) ---------------------------------------------


def _layers_contract() -> tuple[list[list[str]], list[str]]:
    """The layers contract's layers (top first, each a list of modules) and its ignored imports."""
    import configparser

    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    contract = config["importlinter:contract:layers"]
    layers = [
        [module.strip() for module in re.split(r"[:|]", line)]
        for line in contract["layers"].split("\n")
        if line.strip()
    ]
    ignored = [line.strip() for line in contract.get("ignore_imports", "").split("\n") if line.strip()]
    return layers, ignored


@pytest.mark.parametrize("app", ["engine", "evaluation"])
def test_every_module_of_a_split_app_stands_in_exactly_one_layer(app: str) -> None:
    """engine and evaluation each hold pure modules (the bottom layer) and
    Django ones (their app's layer): each module is listed, so a new one
    cannot slip past the contract unlisted."""
    layers, _ = _layers_contract()
    listed = [module for layer in layers for module in layer if module.startswith(f"{app}.")]
    present = sorted(
        f"{app}.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / app).iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").is_file()
    )
    assert sorted(listed) == present


def test_the_layers_run_from_the_site_down_to_the_pure_method() -> None:
    layers, ignored = _layers_contract()
    tops = [layer[0].split(".")[0] if len(layer) == 1 else layer[0] for layer in layers]
    assert tops[:3] == ["approve_site.urls", "accounts", "tracking"]
    # Accounts, notifications and webhooks: siblings, none imports another.
    assert layers[1] == ["accounts", "notifications", "webhooks"]
    assert layers[5] == ["workspace"]
    assert "engine.core" in layers[-1] and "evaluation.metrics" in layers[-1]
    assert "engine.services" in layers[3] and "evaluation.services" in layers[4]
    # No exception: nothing is ignored.
    assert ignored == []


def test_lint_imports_fails_on_an_import_up_the_layers(tmp_path: Path) -> None:
    """The contract bites: a workspace module importing the engine's runs
    is reported (the check run on a copy of the tree with one such import)."""
    import shutil

    copy = tmp_path / "tree"
    for name in (
        "approve_site",
        "engine",
        "evaluation",
        "tracking",
        "workspace",
        "accounts",
        "notifications",
        "webhooks",
    ):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", copy / ".importlinter")
    (copy / "workspace" / "upward.py").write_text("from engine import services\n")
    # The three siblings are independent: accounts may not import notifications.
    (copy / "accounts" / "sideways.py").write_text("from notifications import services\n")
    lint = Path(sys.executable).with_name("lint-imports")
    found = subprocess.run(
        [str(lint), "--no-cache"], cwd=copy, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(copy)}
    )
    assert found.returncode == 1, found.stdout
    assert "workspace.upward -> engine.services" in found.stdout
    assert "accounts.sideways -> notifications.services" in found.stdout


def test_every_module_of_workspace_is_kernel_or_domain() -> None:
    """The kernel contract names workspace's kernel modules and forbids them
    every other module of workspace: each module stands in one list, so a
    new domain module is forbidden to the kernel from the start."""
    import configparser

    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    contract = config["importlinter:contract:kernel"]
    kernel = contract["source_modules"].split()
    domain = contract["forbidden_modules"].split()
    assert not set(kernel) & set(domain)
    present = set()
    for package in (ROOT / "workspace", ROOT / "workspace" / "api"):
        prefix = "workspace" if package.name == "workspace" else "workspace.api"
        for path in package.iterdir():
            if path.name == "api" or path.name == "__init__.py":
                continue
            if (path.suffix == ".py") or (path / "__init__.py").is_file():
                present.add(f"{prefix}.{path.stem if path.is_file() else path.name}")
    assert sorted(kernel + domain) == sorted(present)
    assert {"workspace.errors", "workspace.limits", "workspace.history", "workspace.api.pagination"} <= set(kernel)


def test_every_type_ignore_names_its_error_and_says_why() -> None:
    """``# type: ignore[code]  # why`` everywhere in the apps (migrations
    aside): an ignore without its reason is a finding, not a fix."""
    import re

    bare = []
    for app in ("approve_site", "engine", "evaluation", "tracking", "workspace"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if "type: ignore" in line and not re.search(r"# type: ignore\[[\w\-, ]+\]\s+# \S", line):
                    bare.append(f"{path.relative_to(ROOT)}:{number}")
    assert bare == []
