"""The production install: what the project imports at run time is pinned in
requirements.in and locked, with hashes, in requirements.txt, which alone runs
production (issue 29, finding 1: two selectors imported django_stubs_ext, a
development package, so `pip install -r requirements.txt` gave an image that
did not start). `.ci/run` proves it by installing requirements.txt alone in a
fresh virtualenv and serving; these tests say why, offline, in a second.
"""

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# The code that runs in production: the Django project and its apps, and the
# two files gunicorn and manage.py read. Not the tests, the benchmarks or the
# documentation's examples, which run with the development requirements.
PACKAGES = ("approve_site", "workspace", "engine", "evaluation", "tracking", "accounts", "notifications", "webhooks")
FILES = ("manage.py", "gunicorn.conf.py")
LOCAL = set(PACKAGES)


def _pins(path: Path) -> dict[str, str]:
    """The ``name==version`` lines of a requirements file, by canonical name
    (options, ``-r``/``-c`` lines, comments and hashes skipped)."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip().rstrip("\\").strip()
        if not line or line.startswith("-"):
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{path.name}: {line!r} is not pinned with =="
        pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def _locked(path: Path) -> dict[str, list[str]]:
    """A lock's packages, by canonical name, with the hashes listed for each."""
    entries: dict[str, list[str]] = {}
    name = None
    for line in path.read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9._-]+)==", line)
        if pin:
            name = canonicalize_name(pin[1])
            entries[name] = []
        elif name and (digest := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            entries[name].append(digest[1])
    return entries


def _runtime_imports(tree: ast.Module) -> set[str]:
    """The top-level names a module imports when it runs: every import, in a
    function or not (a function's runs when it is called), except those under
    ``if TYPE_CHECKING:``, which the type checker alone reads."""
    return {module.split(".")[0] for module in _runtime_modules(tree)}


def _runtime_modules(tree: ast.Module) -> set[str]:
    """The modules (dotted names) a module imports when it runs, as ``_runtime_imports``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _production_modules() -> list[Path]:
    modules = [ROOT / name for name in FILES]
    for package in PACKAGES:
        modules += sorted((ROOT / package).rglob("*.py"))
    return modules


def _third_party_imports() -> dict[str, set[str]]:
    """Each imported distribution (canonical name) -> the modules that import it."""
    distributions = importlib.metadata.packages_distributions()
    imports: dict[str, set[str]] = {}
    for path in _production_modules():
        for module in _runtime_modules(ast.parse(path.read_text(), filename=str(path))):
            name = module.split(".")[0]
            if name in sys.stdlib_module_names or name in LOCAL or name == "__future__":
                continue
            assert name in distributions, (
                f"{path.relative_to(ROOT)} imports {name!r}, which no installed package provides"
            )
            for distribution in _providers(module, distributions[name]):
                imports.setdefault(canonicalize_name(distribution), set()).add(str(path.relative_to(ROOT)))
    return imports


def _providers(module: str, candidates: list[str]) -> list[str]:
    """The distributions that provide ``module``: of a namespace package that
    several distributions share (``opentelemetry``), those holding the
    module's own files (``opentelemetry.sdk.trace``: opentelemetry-sdk)."""
    if len(candidates) == 1 or "." not in module:
        return candidates
    path = module.replace(".", "/")
    holding = [
        distribution
        for distribution in candidates
        if any(
            str(file).startswith(f"{path}/") or str(file) == f"{path}.py"
            for file in importlib.metadata.files(distribution) or []
        )
    ]
    return holding or candidates


def test_a_namespace_packages_module_is_counted_for_the_distribution_that_holds_it():
    providers = importlib.metadata.packages_distributions()["opentelemetry"]
    assert len(providers) > 1
    assert _providers("opentelemetry.sdk.trace", providers) == ["opentelemetry-sdk"]
    assert _providers("opentelemetry.instrumentation.django", providers) == ["opentelemetry-instrumentation-django"]


def test_the_project_imports_at_run_time_only_what_requirements_in_pins():
    direct = _pins(ROOT / "requirements.in")
    locked = _locked(ROOT / "requirements.txt")
    imports = _third_party_imports()
    assert {"django", "celery", "numpy", "mlflow-skinny", "dj-database-url"} <= set(imports)  # the walk sees them
    missing = {name: sorted(paths) for name, paths in imports.items() if name not in direct}
    assert not missing, f"imported at run time but not pinned in requirements.in: {missing}"
    unlocked = sorted(set(imports) - set(locked))
    assert not unlocked, f"imported at run time but not in requirements.txt: {unlocked}"


def test_type_only_imports_are_not_counted_but_the_else_branch_is():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "import typing\n"
        "if TYPE_CHECKING:\n    from django_stubs_ext import WithAnnotations\n"
        "else:\n    import numpy\n"
        "if typing.TYPE_CHECKING:\n    import mypy\n"
        "def f():\n    import scipy.stats\n"
    )
    assert _runtime_imports(tree) == {"typing", "numpy", "scipy"}


def test_the_development_packages_are_absent_from_the_production_lock():
    # What the development lock adds must not creep into production's, or
    # the first test would pass for a package production never meant to carry.
    production = _locked(ROOT / "requirements.txt")
    for name in ("django-stubs-ext", "pytest", "hypothesis", "mypy", "playwright", "uv"):
        assert name in _locked(ROOT / "requirements-dev.txt")
        assert name not in production


@pytest.mark.parametrize(
    ("source", "lock"),
    [
        ("requirements.in", "requirements.txt"),
        ("requirements-dev.in", "requirements-dev.txt"),
        ("requirements-mlflow-server.in", "requirements-mlflow-server.txt"),
    ],
)
def test_each_lock_has_every_pin_of_its_source_and_a_hash_for_every_package(source, lock):
    pins = _pins(ROOT / source)
    if source == "requirements-dev.in":
        pins |= _pins(ROOT / "requirements.in")  # its -r line
    entries = _locked(ROOT / lock)
    text = (ROOT / lock).read_text()
    for name, version in pins.items():
        assert re.search(rf"^{re.escape(name)}=={re.escape(version)}\b", text, re.MULTILINE | re.IGNORECASE), (
            f"{lock} does not lock {name}=={version} of {source}: run `make lock`"
        )
    assert len(entries) > len(pins)  # what the pins bring is locked too
    assert all(entries.values()), [name for name, hashes in entries.items() if not hashes]


def test_the_development_lock_agrees_with_the_production_lock():
    production = _locked(ROOT / "requirements.txt")
    development = _locked(ROOT / "requirements-dev.txt")
    assert _pins(ROOT / "requirements.txt").items() <= _pins(ROOT / "requirements-dev.txt").items()
    for name, hashes in production.items():
        assert set(hashes) <= set(development[name]), name


def test_the_image_and_make_install_check_the_hashes():
    assert "pip install --require-hashes -r requirements.txt" in (ROOT / "Dockerfile").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes -r requirements-dev.txt" in makefile
    assert "--require-hashes -r requirements-mlflow-server.txt" in makefile
