"""Pages and API views read through selectors and write through services:
no module under them touches a model manager (docs/architecture.md).

Read from the source (AST), so an authentication class, a helper or a
serializer in those packages is held to it as much as a view."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The pages and the API of each app: a package (every module under it) or a
# module, counted when it exists (``evaluation/api/`` may still be to come).
LAYERS = ("workspace/views", "workspace/api", "evaluation/views", "evaluation/api")

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
    source = "run = selectors.run_get(run_id=1, user=user)\nservices.api_token_revoke(token=token)\nobjects = []"
    assert manager_uses(source) == []
