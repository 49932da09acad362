"""The priorities step with the keyboard only (issue 16, finding 2): Enter in
a radio group does not submit the form, Save stays the only submit, and the
repair hints' Apply buttons come before Save in the tab order. Fast answers
log no htmx abort in the console (finding 10)."""

import pytest
from playwright.sync_api import Page, expect

from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD, make_study  # noqa: F401  (fixture)
from workspace.models import AttributePrioritisation, Phase


@pytest.fixture
def assessment(make_study):  # noqa: F811
    return make_study(Phase.ASSESSMENT)


def focused(page: Page) -> dict:
    return page.evaluate(
        """() => {
            const el = document.activeElement;
            const label = el.labels && el.labels.length ? el.labels[0].innerText : "";
            return {tag: el.tagName, type: el.type || "", name: el.name || "", value: el.value || "",
                    text: (el.innerText || label || "").replace(/\\s+/g, " ").trim()};
        }"""
    )


def tab_to(page: Page, wanted, *, limit: int = 80, key: str = "Tab") -> dict:
    """Press Tab until the focused element satisfies ``wanted``; return it."""
    for _ in range(limit):
        page.keyboard.press(key)
        element = focused(page)
        if wanted(element):
            return element
    raise AssertionError(f"never reached the wanted element with {key}")


def test_enter_on_a_judgment_does_not_submit_and_apply_comes_before_save(page: Page, assessment) -> None:
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    login(page, "bob", PASSWORD)
    page.goto(f"/studies/{assessment.study.pk}/my/priorities/")
    url = page.url

    # The method: Tab into its radio group, arrows to "AHP".
    tab_to(page, lambda e: e["type"] == "radio" and e["name"].endswith("method"))
    for _ in range(3):
        if focused(page)["value"] == "ahp":
            break
        page.keyboard.press("ArrowRight")
    assert focused(page)["value"] == "ahp"
    expect(page.locator('[data-method-panel="ahp"]').first).to_be_visible()

    # The first pair: Tab into its scale, arrows to a point, then Enter.
    first = tab_to(page, lambda e: e["type"] == "radio" and not e["name"].endswith("method"))
    page.keyboard.press("ArrowLeft")
    answered = focused(page)
    assert answered["name"] == first["name"] and answered["value"] != first["value"]
    page.keyboard.press("Enter")
    page.wait_for_timeout(600)
    assert page.url == url, "Enter on a judgment left the page"
    expect(page.get_by_text("Your priorities were saved.")).to_have_count(0)
    assert not AttributePrioritisation.objects.filter(expert=assessment.bob).exists(), "Enter saved the matrix"
    expect(page.locator(f'input[name="{answered["name"]}"][value="{answered["value"]}"]')).to_be_checked()

    # Answer the other two pairs fast, from the keyboard, to a cycle no single change repairs
    # (the first pair's arrow chose "1/9": B 9 x A; Space on the first point, "9": A 9 x C;
    # the arrow back to the last point, "1/9": C 9 x B).
    names = [first["name"]]
    for key in ("Space", "ArrowLeft"):
        element = tab_to(page, lambda e: e["type"] == "radio" and e["name"] not in names)
        names.append(element["name"])
        page.keyboard.press(key)
        page.keyboard.press("Enter")
    assert page.url == url
    verdict = page.locator("#priorities-result [data-consistency]").first
    expect(verdict).to_have_attribute("data-consistency", "inconsistent")
    expect(page.locator("#priorities-result .hints__intro").first).to_contain_text(
        "No single change makes your judgments consistent"
    )
    assert not AttributePrioritisation.objects.filter(expert=assessment.bob).exists()

    # From the last judgment, Tab reaches the repair hints' Apply before Save.
    reached = tab_to(page, lambda e: e["text"].startswith(("Apply", "Save my priorities")))
    assert reached["text"].startswith("Apply"), f"Save came before the repair hints: {reached}"
    screenshot(page, "expert-priorities-keyboard")
    assert_accessible(page)
    page.keyboard.press("Enter")  # Apply: sets the judgment, saves nothing
    page.wait_for_timeout(600)
    assert not AttributePrioritisation.objects.filter(expert=assessment.bob).exists()
    tab_to(page, lambda e: e["text"].startswith("Save my priorities"))
    with page.expect_navigation():
        page.keyboard.press("Enter")
    # One judgment applied, the other two still disagree: saving inconsistent
    # judgments asks first (issue 16, finding 1), and the keyboard answers too.
    expect(page.locator("#confirm-inconsistent")).to_be_visible()
    assert not AttributePrioritisation.objects.filter(expert=assessment.bob).exists()
    page.locator("#confirm-inconsistent").focus()
    tab_to(page, lambda e: e["text"].startswith("Keep my judgments as they are"))
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.get_by_text("Your priorities were saved.")).to_be_visible()
    saved = AttributePrioritisation.objects.get(expert=assessment.bob)
    assert saved.inconsistency_acknowledged_at is not None
    assert not [e for e in errors if "sendAbort" in e or "htmx" in e], errors


def test_fast_answers_log_no_htmx_abort(page: Page, assessment) -> None:
    """Answers given faster than the preview replies are queued: the console
    shows no htmx:sendAbort error (finding 10), and the result is the last
    answer's."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    login(page, "bob", PASSWORD)
    page.goto(f"/studies/{assessment.study.pk}/my/priorities/")
    page.get_by_label("AHP pairwise comparisons").first.check()
    # Slow every preview down so that the next answer arrives while it is in flight.
    page.route("**/my/priorities/preview/", lambda route: (page.wait_for_timeout(300), route.continue_()))
    for value in ("3", "5", "7", "9", "2", "4"):
        page.locator('[data-method-panel="ahp"] .pair').first.locator(f'input[value="{value}"]').first.check()
    page.locator('[data-method-panel="ahp"] .pair').nth(1).locator('input[value="3"]').first.check()
    page.locator('[data-method-panel="ahp"] .pair').nth(2).locator('input[value="3"]').first.check()
    expect(page.locator("#priorities-result [data-consistency]").first).to_be_visible()
    page.wait_for_timeout(1500)
    assert [e for e in errors if e.startswith("htmx:")] == [], errors


def test_the_result_says_it_updates_only_where_it_does(page: Page, page_nojs: Page, assessment) -> None:
    """With JavaScript the result updates as the expert answers and says so;
    without it nothing updates, and the heading says whose result it shows."""
    for current, live in ((page, True), (page_nojs, False)):
        login(current, "bob", PASSWORD)
        current.goto(f"/studies/{assessment.study.pk}/my/priorities/")
        heading = current.locator("#result-title")
        live_words, static_words = (
            heading.get_by_text("(updates as you answer)"),
            heading.get_by_text("(as saved or checked)"),
        )
        expect(live_words if live else static_words).to_be_visible()
        expect(static_words if live else live_words).to_be_hidden()
