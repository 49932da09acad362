"""Two revision rounds with three experts in Chromium (issue 22): the
designer opens a round from the study home with a message; charlie, far
from the group on Efficiency, sees it on the box plot beside his own
weight and keeps it, giving a reason; bob confirms his ranges; the designer
sees who responded and closes the round (after its confirmation); in the
second round the reason reaches the group without its author, charlie
revises with a reason, and the study home shows the group converging."""

from playwright.sync_api import Browser, Page, expect

from tests.browser.support import TIMEOUT_MS, VIEWPORT, assert_accessible, login, screenshot
from tests.fixtures import PASSWORD
from tests.pages.test_rounds import CHARLIE, panel  # noqa: F401  (the three experts' study)
from workspace import selectors
from workspace.models import RevisionRound, RoundResponse
from workspace.templatetags.numbers import significant


def as_user(browser: Browser, live_server, username: str) -> Page:
    context = browser.new_context(base_url=live_server.url, viewport=VIEWPORT, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    login(page, username, PASSWORD)
    return page


def test_two_rounds_with_three_experts_converge_on_the_study_home(
    page: Page,
    browser: Browser,
    live_server,
    panel,  # noqa: F811
) -> None:
    study = panel.study
    home = f"/studies/{study.pk}/"
    login(page, "alice", PASSWORD)
    page.goto(home)
    page.get_by_label("Message to the experts (optional)").fill("Efficiency looks far apart: check it")
    page.get_by_role("button", name="Open revision round 1").click()
    expect(page.get_by_text("Revision round 1 is open")).to_be_visible()
    expect(page.get_by_role("table", name="Who has responded in round 1")).to_contain_text("not yet")
    screenshot(page, "rounds-home-open")
    assert_accessible(page)

    charlie = as_user(browser, live_server, "charlie")
    charlie.goto(f"/studies/{study.pk}/my/priorities/")
    feedback = charlie.locator("#round")
    expect(feedback).to_contain_text("Efficiency looks far apart: check it")
    expect(feedback.locator("svg.chart--box").first).to_be_visible()
    expect(feedback.get_by_role("row", name="Efficiency").first).to_contain_text(f"{CHARLIE['Efficiency']:.1f} %")
    screenshot(charlie, "rounds-feedback-priorities")
    assert_accessible(charlie)
    # In round 1 charlie keeps his answer, and says why.
    charlie.get_by_label("Your reason (optional").fill("Training cost matters most in our clinic")
    charlie.get_by_role("button", name="Confirm my answer as it is").click()
    expect(charlie.get_by_text("Your response to round 1 was saved (confirmed).")).to_be_visible()

    bob = as_user(browser, live_server, "bob")
    bob.goto(f"/studies/{study.pk}/my/ranges/")
    # each bound only as the band of its median, never the sorted list
    auc = next(r for r in RevisionRound.objects.get(study=study, number=1).feedback["ranges"] if r["name"] == "AUC")
    low, high = auc["least_acceptable"]["median_band"]
    expect(bob.locator("#round")).to_contain_text(f"median between {significant(low)} and {significant(high)}")
    expect(bob.locator("#round")).not_to_contain_text("0.6 · 0.71")
    bob.get_by_role("button", name="Confirm my answer as it is").click()
    expect(bob.get_by_text("Your response to round 1 was saved (confirmed).")).to_be_visible()

    page.goto(home)
    grid = page.get_by_role("table", name="Who has responded in round 1")
    expect(grid.get_by_role("row", name="charlie")).to_contain_text("confirmed")
    expect(grid.get_by_role("row", name="bob")).to_contain_text("confirmed")
    page.get_by_role("link", name="Close round 1…").click()
    expect(page.get_by_role("heading", name="Close revision round 1?")).to_be_visible()
    assert_accessible(page)
    page.get_by_role("button", name="Close round 1").click()
    expect(page.get_by_text("Revision round 1 is closed")).to_be_visible()

    page.get_by_role("button", name="Open revision round 2").click()
    carol = as_user(browser, live_server, "carol")
    carol.goto(f"/studies/{study.pk}/my/priorities/")
    reasons = carol.locator("#round .round-reasons")
    expect(reasons).to_contain_text("Training cost matters most in our clinic")
    expect(carol.locator("#round")).not_to_contain_text("charlie")  # the reason, not its author
    carol.get_by_role("button", name="Confirm my answer as it is").click()
    # In round 2 charlie revises towards the group, with a reason.
    charlie.goto(f"/studies/{study.pk}/my/priorities/")
    charlie.get_by_label("Direct weights").first.check()
    for name, value in (("Accuracy", "45"), ("Consistency", "30"), ("Efficiency", "25")):
        charlie.get_by_label(f"Weight of {name} (%)").fill(value)
    # the live preview answers before the save is sent
    expect(charlie.locator('[data-total-prefix="direct-"]')).to_contain_text("Total: 100 % ✓")
    expect(charlie.locator("#priorities-result .weights").first).to_contain_text("25.0 %")
    charlie.wait_for_load_state("networkidle")
    charlie.get_by_role("button", name="Save my priorities").click()
    expect(charlie.get_by_text("Your priorities were saved.")).to_be_visible()
    charlie.get_by_label("Your reason (optional").fill("I had typed training cost as if it were accuracy")
    charlie.get_by_role("button", name="Save my reason").click()
    expect(charlie.get_by_text("Your response to round 2 was saved (revised).")).to_be_visible()
    page.goto(home)
    page.get_by_role("link", name="Close round 2…").click()
    page.get_by_role("button", name="Close round 2").click()

    expect(page.get_by_role("heading", name="Convergence across rounds")).to_be_visible()
    chart = page.locator("svg#round-convergence, svg[aria-labelledby^='round-convergence']")
    expect(chart).to_be_visible()
    rows = page.locator("table.convergence-table tbody tr")
    expect(rows).to_have_count(2)
    convergence = selectors.round_convergence(study=study)
    assert [c.number for c in convergence] == [1, 2]
    # Each round's S* as engine.disagreement computes it, as the page rounds it;
    # charlie's revision in round 2 brought the group closer.
    for row, measured in zip(rows.all(), convergence, strict=True):
        expect(row).to_contain_text(significant(measured.attribute_consensus))
    assert convergence[1].attribute_consensus > convergence[0].attribute_consensus
    assert convergence[1].largest_spread < convergence[0].largest_spread
    assert RevisionRound.objects.filter(study=study, closed_at__isnull=False).count() == 2
    charlie_said = RoundResponse.objects.get(round__study=study, round__number=2, expert=panel.experts["charlie"])
    assert (charlie_said.action, charlie_said.reason) == ("revised", "I had typed training cost as if it were accuracy")
    screenshot(page, "rounds-home-convergence")
    assert_accessible(page)
    for other in (charlie, bob, carol):
        other.context.close()


def test_the_round_pages_fit_a_phone_and_are_accessible(browser: Browser, live_server, panel, cast) -> None:  # noqa: F811
    from tests.browser.test_phone_layout import PHONE, overflowing
    from workspace import services

    services.round_open(study=panel.study, by=cast.alice, message="A first look")
    services.round_respond(expert=panel.bob, step="priorities", reason="Accuracy first")
    services.round_close(study=panel.study, by=cast.alice)
    services.round_open(study=panel.study, by=cast.alice, message="A second look")
    base = f"/studies/{panel.study.pk}"
    for username, paths in (
        ("alice", [f"{base}/", f"{base}/rounds/", f"{base}/rounds/close/"]),
        (
            "bob",
            [
                f"{base}/",
                f"{base}/rounds/",
                *(f"{base}/my/{step}/" for step in ("priorities", "ranges", "peer-weights")),
            ],
        ),
    ):
        context = browser.new_context(base_url=live_server.url, viewport=PHONE, locale="en-GB")
        context.set_default_timeout(TIMEOUT_MS)
        phone = context.new_page()
        login(phone, username, PASSWORD)
        problems = overflowing(phone, paths, f"rounds-{username}")
        context.close()
        assert not problems, "pages wider than 390 px or not accessible there:\n" + "\n".join(problems)
