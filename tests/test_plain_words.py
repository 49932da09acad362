"""Pages and API messages speak to the people using them (issue 31,
finding 11): no "source 000", no "the paper's method", no file of the
method's documents (docs/method.md, METHOD.md) in a template's text or in
any string the product shows (labels, help texts, choices, errors, the
API's schema). Comments and docstrings, which only developers read, may
cite them."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("engine", "workspace", "evaluation", "tracking", "approve_site")

# Written for the method's authors, not its users.
FOR_AUTHORS = re.compile(
    r"source 0\d\d|\bthe paper\b|paper's|method's source|method document|(?<![\w/])docs/|\b[\w-]+\.md\b",
    re.IGNORECASE,
)


def _template_text(path: Path) -> str:
    """A template without its Django comments (``{# #}``, ``{% comment %}``)."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"{%\s*comment\s*%}.*?{%\s*endcomment\s*%}", "", text, flags=re.DOTALL)
    return re.sub(r"{#.*?#}", "", text, flags=re.DOTALL)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are docstrings or bare string statements."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def _shown_strings(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_the_pattern_catches_what_the_issue_found():
    for phrase in (
        "(the paper's method, source 000's appendix)",
        "as in the method's source",
        "(the method document, docs/method.md, section 6.2)",
        "The method is in METHOD.md 3",
    ):
        assert FOR_AUTHORS.search(phrase), phrase
    for plain in ("as the method defines", "the method's rule for ties", "/api/docs/", "(the default)"):
        assert not FOR_AUTHORS.search(plain), plain


def test_no_template_names_the_method_documents():
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in sorted((ROOT / "templates").rglob("*"))
        if path.is_file()
        for match in FOR_AUTHORS.finditer(_template_text(path))
    ]
    assert not found, found


def test_no_string_the_product_shows_names_the_method_documents():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}"
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
        for line, text in _shown_strings(path)
        if FOR_AUTHORS.search(text)
    ]
    assert not found, found
