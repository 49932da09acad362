"""The expert's four steps in a real browser: the live AHP result and its
repair, the ranges' veto preview, the peer weights' running total, and the
same steps with JavaScript off. A screenshot and an axe scan of every page."""

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD, make_study  # noqa: F401  (fixture)
from workspace import selectors, services
from workspace.models import AttributePrioritisation, Phase


def inputs_of(built, username):
    expert = built.experts[username]
    return selectors.expert_inputs_list(study=built.study, experts=[expert])[username]


def step_url(built, step):
    return f"/studies/{built.study.pk}/my/{step}/"


def point(page: Page, label: str):
    """A point of a pair's scale, found by its spoken label."""
    return page.get_by_role("radio", name=label, exact=True)


def choose(page: Page, label: str) -> None:
    point(page, label).check()


@pytest.fixture
def assessment(make_study):  # noqa: F811
    return make_study(Phase.ASSESSMENT)


def test_inconsistent_ahp_is_flagged_and_repaired_before_saving(page: Page, assessment) -> None:
    login(page, "bob", PASSWORD)
    page.goto(step_url(assessment, "priorities"))
    expect(page.get_by_role("heading", name="Priorities")).to_be_visible()
    page.get_by_label("AHP pairwise comparisons").first.check()
    # Accuracy 3 × Consistency, Accuracy 5 × Efficiency, but Efficiency 2 × Consistency: CR 0.14.
    choose(page, "Accuracy moderately more important than Consistency (3)")
    choose(page, "Accuracy strongly more important than Efficiency (5)")
    choose(page, "Efficiency equally to moderately more important than Consistency (2)")
    verdict = page.locator("#priorities-result [data-consistency]").first
    expect(verdict).to_have_attribute("data-consistency", "inconsistent")
    expect(verdict).to_contain_text("Judgments: inconsistent (CR 0.14 > 0.10)")
    screenshot(page, "expert-priorities-inconsistent")
    assert_accessible(page)

    # The first hint is the smallest change that makes them consistent, and says what it replaces
    # (issue 31, finding 6): one point along the scale, 2 to 1.
    expect(page.locator("#priorities-result .hint").first).to_contain_text(
        "Consistency / Efficiency: replaces your “Efficiency equally to moderately more important than "
        "Consistency (2)” by “Consistency and Efficiency equally important (1)” (1 point along the scale); "
        "your judgments would then be consistent (CR 0.03 ≤ 0.10)."
    )
    page.get_by_role("button", name="Apply 1 to Consistency / Efficiency").click()
    expect(verdict).to_have_attribute("data-consistency", "consistent")
    expect(verdict).to_contain_text("Judgments: consistent (CR 0.03 ≤ 0.10)")
    expect(point(page, "Consistency and Efficiency equally important (1)")).to_be_checked()
    assert not AttributePrioritisation.objects.filter(expert=assessment.bob).exists(), "nothing is saved before Save"
    screenshot(page, "expert-priorities-repaired")

    with page.expect_navigation():
        page.get_by_role("button", name="Save my priorities").click()
    expect(page.get_by_text("Your priorities were saved.")).to_be_visible()
    saved = inputs_of(assessment, "bob")["priorities"]
    assert saved == {
        "method": "ahp",
        "judgments": [["Accuracy", "Consistency", 3], ["Accuracy", "Efficiency", 5], ["Consistency", "Efficiency", 1]],
    }
    # Back on the page: the answers are kept and the step is marked done.
    page.goto(step_url(assessment, "priorities"))
    expect(point(page, "Consistency and Efficiency equally important (1)")).to_be_checked()
    expect(page.get_by_role("link", name=re.compile("Step 2: Priorities"))).to_contain_text("done")
    screenshot(page, "expert-priorities-saved")
    assert_accessible(page)


def test_direct_weights_show_a_live_total(page: Page, assessment) -> None:
    login(page, "bob", PASSWORD)
    page.goto(step_url(assessment, "priorities"))
    page.get_by_label("Direct weights").first.check()
    expect(page.get_by_label("Weight of Accuracy (%)")).to_be_visible()
    expect(point(page, "Accuracy moderately more important than Consistency (3)")).to_be_hidden()
    for name, value in (("Accuracy", "50"), ("Consistency", "30"), ("Efficiency", "10")):
        page.get_by_label(f"Weight of {name} (%)").fill(value)
    total = page.locator('[data-total-prefix="direct-"]')
    expect(total).to_contain_text("Total: 90 % (scaled to 100 when saved)")
    expect(page.locator("#priorities-result .weights").first).to_contain_text("55.6 %")
    page.get_by_label("Weight of Efficiency (%)").fill("20")
    expect(total).to_contain_text("Total: 100 % ✓")
    screenshot(page, "expert-priorities-direct")
    assert_accessible(page)


def test_ranges_preview_shows_the_veto_as_typed(page: Page, assessment) -> None:
    login(page, "bob", PASSWORD)
    page.goto(step_url(assessment, "ranges"))
    summary = page.locator("#veto-summary")
    expect(summary).to_contain_text("no candidate would be vetoed")
    # Training time (lower is better), default [60, 1]: J48 took 4.1 s, JRip 6.3 s.
    page.get_by_label("Training time: least acceptable (s)").fill("5")
    expect(summary).to_contain_text("1 candidate would be vetoed: JRip (by Training time)")
    outcome = page.locator(f"#range-outcome-{assessment.metrics['Training time'].pk}")
    expect(outcome.get_by_role("row", name=re.compile("JRip"))).to_contain_text("vetoed")
    expect(outcome.get_by_role("row", name=re.compile("J48"))).not_to_contain_text("vetoed")
    screenshot(page, "expert-ranges-veto")
    assert_accessible(page)


def test_peer_weights_total_runs_live(page: Page, assessment) -> None:
    login(page, "bob", PASSWORD)
    page.goto(step_url(assessment, "peer-weights"))
    page.get_by_label("bob, self-confidence (%)").fill("70")
    page.get_by_label("carol (%)").fill("20")
    total = page.locator(".live-total")
    expect(total).to_contain_text("Total: 90 % (must be 100)")
    page.get_by_label("carol (%)").fill("30")
    expect(total).to_contain_text("Total: 100 % ✓")
    screenshot(page, "expert-peer-weights")
    assert_accessible(page)
    with page.expect_navigation():
        page.get_by_role("button", name="Save my peer weights").click()
    assert inputs_of(assessment, "bob")["peer_weights"] == {"bob": 0.7, "carol": 0.3}


def test_votes_page_and_its_tallies(page: Page, make_study) -> None:  # noqa: F811
    voting = make_study(Phase.VOTING)
    login(page, "bob", PASSWORD)
    page.goto(step_url(voting, "votes"))
    expect(page.get_by_role("checkbox", name="Efficiency", exact=True)).to_be_checked()  # bob's stored vote
    screenshot(page, "expert-votes")
    assert_accessible(page)
    services.study_close_voting(study=voting.study)
    page.goto(step_url(voting, "votes"))
    expect(page.get_by_role("status").filter(has_text="Read-only")).to_contain_text(
        "Voting has closed; your votes are shown as cast."
    )
    screenshot(page, "expert-votes-tallies")
    assert_accessible(page)


def test_the_four_steps_without_javascript(page_nojs: Page, make_study) -> None:  # noqa: F811
    page = page_nojs
    built = make_study(Phase.VOTING)
    login(page, "carol", PASSWORD)

    page.goto(step_url(built, "votes"))
    page.get_by_role("checkbox", name="Flexibility", exact=True).check()
    page.get_by_role("checkbox", name="AUC", exact=True).check()
    with page.expect_navigation():
        page.get_by_role("button", name="Save my votes").click()
    expect(page.get_by_text("Your votes were saved.")).to_be_visible()
    assert inputs_of(built, "carol")["votes"] == {"attributes": ["Flexibility"], "metrics": ["AUC"]}
    screenshot(page, "expert-votes-nojs")

    services.study_close_voting(study=built.study)
    page.goto(step_url(built, "priorities"))
    # Without JavaScript every method's fields are shown; the chosen one's are used.
    expect(page.get_by_label("Weight of Accuracy (%)")).to_be_visible()
    page.get_by_label("Direct weights").first.check()
    # Carol's vote selected Flexibility too.
    for name, value in (("Accuracy", "40"), ("Consistency", "30"), ("Efficiency", "20"), ("Flexibility", "10")):
        page.get_by_label(f"Weight of {name} (%)").fill(value)
    with page.expect_navigation():
        page.get_by_role("button", name="Check without saving").click()
    expect(page.locator("#priorities-result")).to_contain_text("40.0 %")
    assert inputs_of(built, "carol")["priorities"] is None
    with page.expect_navigation():
        page.get_by_role("button", name="Save my priorities").click()
    expect(page.get_by_text("Your priorities were saved.")).to_be_visible()
    assert inputs_of(built, "carol")["priorities"] == {
        "method": "direct",
        "weights": {"Accuracy": 40, "Consistency": 30, "Efficiency": 20, "Flexibility": 10},
    }
    screenshot(page, "expert-priorities-nojs")

    page.goto(step_url(built, "ranges"))
    page.get_by_label("AUC: least acceptable").fill("0.7")
    page.get_by_label("AUC: desired").fill("0.95")
    with page.expect_navigation():
        page.get_by_role("button", name="Save my ranges").click()
    expect(page.get_by_text("Your acceptable ranges were saved.")).to_be_visible()
    ranges = inputs_of(built, "carol")["ranges"]
    assert ranges["AUC"] == [0.7, 0.95]
    assert ranges["Training time"] == [60, 1]  # the default, accepted as shown
    screenshot(page, "expert-ranges-nojs")

    page.goto(step_url(built, "peer-weights"))
    page.get_by_label("bob (%)").fill("40")
    page.get_by_label("carol, self-confidence (%)").fill("0")
    with page.expect_navigation():
        page.get_by_role("button", name="Save my peer weights").click()
    expect(page.get_by_role("alert")).to_contain_text("carol, self-confidence (%)")
    assert inputs_of(built, "carol")["peer_weights"] == {}
    page.get_by_label("carol, self-confidence (%)").fill("60")
    with page.expect_navigation():
        page.get_by_role("button", name="Save my peer weights").click()
    expect(page.get_by_text("Your peer weights were saved.")).to_be_visible()
    assert inputs_of(built, "carol")["peer_weights"] == {"bob": 0.4, "carol": 0.6}
    screenshot(page, "expert-peer-weights-nojs")


def test_a_closed_step_is_read_only(page: Page, make_study) -> None:  # noqa: F811
    closed = make_study(Phase.CLOSED)
    login(page, "carol", PASSWORD)
    page.goto(step_url(closed, "priorities"))
    expect(page.get_by_role("status").filter(has_text="Read-only")).to_contain_text(
        "The assessment has closed; your priorities are shown as saved."
    )
    expect(point(page, "Accuracy moderately more important than Consistency (3)")).to_be_checked()
    expect(point(page, "Accuracy moderately more important than Consistency (3)")).to_be_disabled()
    expect(page.get_by_role("button", name="Save my priorities")).to_have_count(0)
    screenshot(page, "expert-priorities-closed")
    assert_accessible(page)
    page.goto(step_url(closed, "ranges"))
    expect(page.get_by_label("AUC: least acceptable")).to_be_disabled()
    screenshot(page, "expert-ranges-closed")
    assert_accessible(page)
