"""The harness itself: the fixtures do what their names say and the checks
can fail."""

import pytest
from playwright.sync_api import Page

from tests.browser.support import assert_accessible, axe_violations, describe_violations, login, page_problems

PROBE = "/probe-not-served-by-the-app/"
INLINE = """<!doctype html><html lang="en"><head><title>before</title></head><body><main>
<h1>Probe</h1><img src="/static/img/favicon.svg"><p style="color: red">styled</p>
<script>document.title = "script ran"</script></main></body></html>"""
POLICY = "script-src 'self'; style-src 'self'"


BROKEN = INLINE.replace("</main>", '<script>throw new Error("boom")</script></main>')


def serve_probe(page: Page, headers: dict | None = None, body: str = INLINE) -> None:
    page.route(
        f"**{PROBE}",
        lambda route: route.fulfill(status=200, body=body, headers={"content-type": "text/html", **(headers or {})}),
    )
    page.goto(PROBE)


def test_page_runs_scripts_and_page_nojs_does_not(page: Page, page_nojs: Page) -> None:
    serve_probe(page, body=BROKEN)
    serve_probe(page_nojs, body=BROKEN)
    assert page.title() == "script ran"
    assert page_nojs.title() == "before"
    assert page_problems(page_nojs) == []
    problems = page_problems(page)
    assert len(problems) == 1 and problems[0].startswith("JavaScript error:") and "boom" in problems[0], problems
    problems.clear()  # provoked on purpose


def test_the_page_keeps_its_content_security_policy_and_reports_refusals(page: Page) -> None:
    serve_probe(page, {"content-security-policy": POLICY})
    assert page.title() == "before", "the inline script ran despite script-src 'self'"
    problems = page_problems(page)
    assert any(p.startswith("CSP:") and "script-src" in p for p in problems), problems
    assert any(p.startswith("CSP:") and "style-src" in p for p in problems), problems
    problems.clear()  # provoked on purpose: the teardown check would fail the test


def test_axe_runs_under_the_policy_and_names_rule_impact_and_target(page: Page) -> None:
    serve_probe(page, {"content-security-policy": POLICY})
    page_problems(page).clear()
    violations = axe_violations(page)
    assert [(v["id"], v["impact"], [n["target"] for n in v["nodes"]]) for v in violations] == [
        ("image-alt", "critical", ["img"])
    ]
    assert describe_violations(violations).startswith(
        "- image-alt (critical): Images must have alternative text\n    on img: Fix any of the following:"
    )


def test_assert_accessible_lists_violations_and_keeps_known_ones_honest(page: Page) -> None:
    serve_probe(page)  # no policy: the red paragraph's style applies and fails contrast
    both = frozenset({("image-alt", "img"), ("color-contrast", "p")})
    with pytest.raises(AssertionError, match=r"2 serious or critical .*\n- color-contrast .*\n.*\n- image-alt"):
        assert_accessible(page)
    with pytest.raises(AssertionError, match=r"1 serious or critical .*\n- color-contrast \(serious\)") as failed:
        assert_accessible(page, frozenset({("image-alt", "img")}))
    assert "image-alt" not in str(failed.value)
    assert_accessible(page, both)
    with pytest.raises(AssertionError, match=r"no longer found .*\[\('region', 'main'\)\]"):
        assert_accessible(page, both | {("region", "main")})


def test_axe_refuses_a_page_without_javascript(page_nojs: Page) -> None:
    serve_probe(page_nojs)
    with pytest.raises(RuntimeError, match="axe needs JavaScript"):
        axe_violations(page_nojs)


def test_login_helper_fails_with_the_pages_error(page: Page, cast) -> None:
    with pytest.raises(AssertionError, match="logging in as 'alice' failed: Please enter a correct username"):
        login(page, "alice", "wrong")
