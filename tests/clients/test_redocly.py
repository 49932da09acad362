"""The live schema linted by Redocly CLI with its recommended rules (issue
18, item 5): no error and no warning, each rule turned off in
``redocly.yaml`` having its reason written above it."""

import json
import re

from .conftest import HERE, run_tool

CONFIG = HERE / "redocly.yaml"


def test_the_schema_passes_redocly_recommended_rules(live_schema, node_tool):
    redocly = node_tool("redocly")
    linted = run_tool([redocly, "lint", live_schema, "--config", CONFIG, "--format", "json"], merge_stderr=False)
    report = json.loads(linted.stdout)
    problems = [
        f"{problem['severity']} {problem['ruleId']}: {problem['message']} "
        f"({', '.join(location['pointer'] for location in problem['location'])})"
        for problem in report["problems"]
    ]
    assert (report["totals"]["errors"], report["totals"]["warnings"]) == (0, 0), "\n".join(problems)
    assert linted.returncode == 0, linted.stderr


def test_every_rule_turned_off_says_why():
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    assert "extends:" in lines and "  - recommended" in lines
    turned_off = [number for number, line in enumerate(lines) if re.fullmatch(r"\s+[\w-]+:\s*off\s*", line)]
    for number in turned_off:
        above = lines[number - 1].strip()
        assert above.startswith("#") and len(above) > 20, f"redocly.yaml: {lines[number].strip()} gives no reason"
