"""Live progress in Chromium (issue 32, item 6): the designer keeps the
study home open while an expert votes; the progress grid and the header's
phase badge change by themselves, without the page reloading, at 1280 and
390 px."""

import pytest
from playwright.sync_api import Page, expect

from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD, make_study  # noqa: F401  (the study factory)
from workspace import services
from workspace.models import Phase


@pytest.mark.parametrize("width", [1280, 390])
def test_the_designers_grid_follows_an_experts_vote_without_a_reload(
    page: Page,
    make_study,  # noqa: F811
    cast,
    settings,
    width: int,
) -> None:
    settings.LIVE_POLL_SECONDS = 1
    page.set_viewport_size({"width": width, "height": 900})
    built = make_study(Phase.VOTING, votes={})
    login(page, "alice", PASSWORD)
    page.goto(f"/studies/{built.study.pk}/")
    bob = page.locator("table.progress-grid tbody tr", has_text="bob")
    expect(bob).to_contain_text("No vote cast yet")
    page.evaluate("window.keptSinceLoad = true")

    services.votes_set(expert=built.experts["bob"], attributes=["Efficiency"], metrics=[])
    expect(bob).to_contain_text("1 vote cast", timeout=10_000)
    assert page.evaluate("window.keptSinceLoad") is True  # swapped in place, not reloaded

    services.study_transition(study=built.study, to=Phase.ASSESSMENT)
    expect(page.locator("#study-phase")).to_have_text("Phase: Assessment", timeout=10_000)
    expect(page.locator('[aria-current="step"]')).to_contain_text("Assessment")
    assert page.evaluate("window.keptSinceLoad") is True
    screenshot(page, f"live-progress-home-{width}")
    assert_accessible(page)


def test_what_the_designer_is_typing_is_never_swapped_away(
    page: Page,
    make_study,  # noqa: F811
    cast,
    settings,
) -> None:
    settings.LIVE_POLL_SECONDS = 1
    built = make_study(Phase.ASSESSMENT)
    login(page, "alice", PASSWORD)
    page.goto(f"/studies/{built.study.pk}/")
    message = page.get_by_label("Message to the experts (optional)")
    message.fill("Efficiency looks far apart")
    services.study_update(study=built.study, description="Now with a description")
    page.wait_for_timeout(3_000)  # three polls, each answered with the changed part
    expect(message).to_have_value("Efficiency looks far apart")
    expect(page.get_by_text("Now with a description")).to_have_count(0)
    message.fill("")
    page.locator("h2#progress-title").click()  # the focus leaves the field
    expect(page.locator(".study-description")).to_have_text("Now with a description", timeout=10_000)
