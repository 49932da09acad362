"""Each rule's value is written once, where it is named (``engine/rules.py``,
``workspace/limits.py``); everything else refers to the name. This test
fails when one of these literals reappears in product code (``*.py``
outside tests, migrations and bench), in a template or in our static
JavaScript: e.g. ``0.10`` typed into a template instead of
``CONSISTENCY_THRESHOLD`` passed to it.

Table-driven: each ``Rule`` is a regular expression, the kinds of files it
is searched in, and the files that are its home (where the name is
defined). Python is searched without its comments and docstrings, which
may quote a value to explain it.
"""

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Directories never searched: tests, the frozen migrations, benchmarks,
# vendored third-party code.
SKIPPED_PARTS = frozenset({"tests", "migrations", "bench", "vendor", "node_modules", ".venv", ".venv-mlflow", ".git"})
SKIPPED_FILES = frozenset({"conftest.py"})


@dataclass(frozen=True)
class Rule:
    name: str  # the rule, and the name to use instead
    pattern: str
    kinds: frozenset[str]  # file suffixes searched: "py", "html", "js"
    homes: tuple[str, ...] = ()  # files (relative to the root) that define it
    within: tuple[str, ...] = ()  # only these directories, when the value means other things elsewhere


PY, TEMPLATES, JS = frozenset({"py"}), frozenset({"html"}), frozenset({"js"})

RULES = [
    Rule(
        "the consistency threshold: engine.rules.CONSISTENCY_THRESHOLD (pass it to the template)",
        r"(?<![\w.])0?\.10?(?![\w.])",
        TEMPLATES | JS,
    ),
    Rule(
        "the consistency threshold: compare with engine.rules.is_consistent / CONSISTENCY_THRESHOLD",
        r"(?i:\b(?:ratio|cr|consistency\w*))\s*[<>]=?\s*0?\.10?\b",
        PY,
        homes=("engine/rules.py",),
    ),
    Rule(
        "the slack of a typed percentage total: engine.rules.PERCENT_TOTAL_SLACK (data-total-slack)",
        r"(?<![\w.])1e-0?9(?![\w.])",
        TEMPLATES | JS,
    ),
    Rule(
        "the percentage total: engine.rules.PERCENT_TOTAL (compare in the view)",
        r"[=!]=\s*100(?![\w.])",
        TEMPLATES,
    ),
    Rule(
        "the percentage total: engine.rules.PERCENT_TOTAL (the live total's data-total)",
        r"(?:[-+]\s*100(?![\w.])|be 100\b|to 100 when)",
        JS,
    ),
    Rule(
        "a name's length: workspace.limits.NAME_MAX_LENGTH",
        r"max_length\s*=\s*100\b",
        PY,
    ),
    Rule(
        "a study description's length: workspace.limits.STUDY_DESCRIPTION_MAX_LENGTH",
        r"(?<![\w.])20_?000(?![\w.])",
        PY,
        homes=("workspace/limits.py",),
    ),
    Rule(
        "a username's length: workspace.limits.USERNAME_MAX_LENGTH",
        r"(?:max_length\s*=\s*150\b|>\s*150\b)",
        PY,
        homes=("workspace/limits.py",),
    ),
    Rule(
        "a metric unit's length: workspace.limits.UNIT_MAX_LENGTH",
        r"max_length\s*=\s*50\b",
        PY,
    ),
    Rule(
        "the vote thresholds' defaults: workspace.limits.ATTRIBUTE_THRESHOLD_DEFAULT / METRIC_THRESHOLD_DEFAULT",
        r"(?:attribute|metric)_threshold\b[\"']?(?:\s*:\s*int)?\s*(?:[=:,]\s*|=\s*models\.\w+\(\s*default\s*=\s*)[01]\b",
        PY,
    ),
    Rule(
        "the largest vote threshold: workspace.limits.MAX_THRESHOLD",
        r"(?<![\w.])10_?000(?![\w.])",
        PY,
        homes=("workspace/limits.py",),
        within=("workspace",),
    ),
    Rule(
        "the largest vote threshold: workspace.limits.MAX_THRESHOLD",
        r"(?<![\w.])10_?000(?![\w.])",
        TEMPLATES | JS,
    ),
]

# Literals not yet replaced because their file belongs to another part of
# the refactor, each with what is left to do. Remove an entry once done.
PENDING: dict[tuple[str, str], str] = {}


def code_only(source: str) -> str:
    """Python ``source`` with comments and docstrings blanked out (line
    numbers and columns kept), so only code is searched."""
    lines = source.splitlines(keepends=True)
    spans = []
    previous = tokenize.NEWLINE
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT or (
                token.type == tokenize.STRING
                and previous in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
            ):
                spans.append((token.start, token.end))
            if token.type not in (tokenize.COMMENT, tokenize.NL):
                previous = token.type
    except tokenize.TokenError:
        return source
    for (start_row, start_col), (end_row, end_col) in reversed(spans):
        for row in range(start_row, end_row + 1):
            line = lines[row - 1]
            first = start_col if row == start_row else 0
            last = end_col if row == end_row else len(line.rstrip("\r\n"))
            lines[row - 1] = line[:first] + " " * (last - first) + line[last:]
    return "".join(lines)


def product_files(root: Path) -> list[Path]:
    files = []
    for suffix in ("py", "html", "js"):
        for path in root.rglob(f"*.{suffix}"):
            relative = path.relative_to(root)
            if SKIPPED_PARTS.intersection(relative.parts) or relative.name in SKIPPED_FILES:
                continue
            if suffix == "js" and relative.parts[0] != "static":
                continue
            files.append(path)
    return sorted(files)


def findings(root: Path, rules: list[Rule] = RULES) -> list[str]:
    """``path:line: literal (rule)`` for every rule literal outside its home."""
    found = []
    for path in product_files(root):
        relative = path.relative_to(root).as_posix()
        suffix = path.suffix.lstrip(".")
        applicable = [
            rule
            for rule in rules
            if suffix in rule.kinds
            and relative not in rule.homes
            and (not rule.within or relative.startswith(tuple(f"{d}/" for d in rule.within)))
            and (relative, rule.name) not in PENDING
        ]
        if not applicable:
            continue
        text = path.read_text(encoding="utf-8")
        if suffix == "py":
            text = code_only(text)
        for rule in applicable:
            for match in re.finditer(rule.pattern, text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{relative}:{line}: {match.group(0)!r} ({rule.name})")
    return found


def test_no_rule_literal_outside_its_home():
    assert findings(ROOT) == []


def test_the_pending_entries_are_still_needed():
    """An entry of PENDING whose literal is gone must be removed."""
    for (relative, name), todo in PENDING.items():
        rule = next(r for r in RULES if r.name == name)
        text = (ROOT / relative).read_text(encoding="utf-8")
        assert re.search(rule.pattern, text), f"{relative}: done ({todo}); remove it from PENDING"


# --- the checker can fail ---------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("templates/x.html", '<span class="status">consistent</span> (at most 0.10)'),
        ("templates/x.html", "{% if total == 100 %} ✓{% endif %}"),
        ("static/js/x.js", "var off = Math.abs(sum - 100) > 1e-9;"),
        ("workspace/x.py", "name = models.CharField(max_length=100)\n"),
        ("evaluation/x.py", 'candidate = text(value, "candidate", max_length = 100)\n'),
        ("workspace/x.py", "description = forms.CharField(max_length=20000)\n"),
        ("workspace/x.py", "def study_create(*, attribute_threshold: int = 1) -> None: ...\n"),
        ("workspace/x.py", 'initial = {"attribute_threshold": 1, "metric_threshold": 0}\n'),
        ("workspace/x.py", 'value = bundle.get("metric_threshold", 0)\n'),
        ("workspace/x.py", "attribute_threshold = models.PositiveIntegerField(default=1)\n"),
        ("workspace/x.py", "if value > 10000:\n    pass\n"),
        ("workspace/x.py", "consistent = ratio <= 0.1\n"),
    ],
)
def test_a_rule_literal_is_found(tmp_path, relative, text):
    assert findings(_tree(tmp_path, {relative: text}))


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        # Explained in a comment or a docstring: not code.
        ("workspace/x.py", '"""Names are at most 100 characters (max_length=100)."""\n'),
        ("workspace/x.py", "x = 1  # max_length=100 in the column\n"),
        # Tests, migrations, benchmarks and vendored code are not searched.
        ("tests/x.py", "name = models.CharField(max_length=100)\n"),
        ("workspace/migrations/0001_initial.py", "name = models.CharField(max_length=100)\n"),
        ("bench/x.py", '{"attribute_threshold": 1}\n'),
        ("static/vendor/x.js", "var eps = 1e-9;"),
        # A rule's home defines it.
        ("workspace/limits.py", "MAX_THRESHOLD = 10000\nSTUDY_DESCRIPTION_MAX_LENGTH = 20_000\n"),
        # The name, not the value.
        ("workspace/x.py", "name = models.CharField(max_length=NAME_MAX_LENGTH)\n"),
        ("templates/x.html", "(at most {{ consistency_threshold|floatformat:2 }}) 10.10 0.105"),
    ],
)
def test_what_is_not_a_rule_literal(tmp_path, relative, text):
    assert findings(_tree(tmp_path, {relative: text})) == []
