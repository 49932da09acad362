"""Issue 31 in Chromium: a metric made elicited after the experts set their
ranges. The expert's ranges page shows their own values against their old
range and asks them to confirm or change it; they type a new range and
save, and the run that follows is not all-vetoed."""

import re

from playwright.sync_api import Page, expect

from tests.api.conftest import launch_and_finish
from tests.browser.support import assert_accessible, login
from tests.evaluation.test_elicited_ranges import UNIT, made_elicited, ready_study
from tests.fixtures import PASSWORD
from workspace import selectors, services
from workspace.models import AcceptableRange


def test_an_expert_confirms_a_new_range_against_their_own_values(page: Page, live_server, make_study):
    built, prediction_set = ready_study(make_study)
    made_elicited(built, prediction_set)
    login(page, "bob", PASSWORD)
    page.goto(f"/studies/{built.study.pk}/my/ranges/")
    auc = built.metrics["AUC"]
    notice = page.locator(f"#range-confirm-{auc.pk}")
    expect(page.locator("#ranges-to-confirm")).to_contain_text("Ranges to confirm: AUC.")
    expect(notice).to_contain_text("Your range, 0.95 to 0.7, was set before AUC")
    expect(notice).to_contain_text(f"run from 0.24 to 0.26 {UNIT}")
    # His own values, in the table beside the old range: nothing vetoed by it.
    table = page.get_by_role("region", name="Candidates measured on AUC")
    expect(table.get_by_role("row", name="J48")).to_contain_text("0.26")
    assert_accessible(page)
    # A phone: the notices wrap, nothing scrolls sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_label(f"AUC: least acceptable ({UNIT})").fill("0.25")
    page.get_by_label(f"AUC: desired ({UNIT})").fill("0.2")
    page.get_by_role("button", name=re.compile("^(Confirm these ranges|Save my ranges)$")).click()
    expect(page.locator("#ranges-to-confirm")).to_have_count(0)
    stored = AcceptableRange.objects.get(expert=built.bob, metric=auc)
    assert (stored.least_acceptable, stored.desired, stored.needs_confirmation) == (0.25, 0.2, False)
    [carol] = selectors.ranges_to_confirm_list(study=built.study, expert=built.carol)
    services.ranges_set(expert=built.carol, ranges={"AUC": carol.proposed})
    services.study_close_assessment(study=built.study)
    run = launch_and_finish(built, built.study.designer)
    vetoed = [c["vetoed"] for c in run.results["candidates"]]
    assert vetoed.count(True) == 1 and len(vetoed) == 2  # bob's J48 (0.26) alone
