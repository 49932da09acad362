"""Issue 31, finding 12, in Chromium: at 390 px the run page's consistency
table fits (it made the page 565 px wide), and the AHP scale's points are
targets of at least 24 × 24 px (WCAG 2.5.8) at 390, 1000 and 1280 px.
Screenshots at each width."""

import copy
import json

import pytest
from playwright.sync_api import Page, expect

from engine import services as engine_services
from engine.models import Run
from tests.browser.support import assert_accessible, login, screenshot, screenshot_dir
from tests.fixtures import CASE_STUDY_PATH, PASSWORD, make_study  # noqa: F401  (fixture)
from workspace.bundles import study_import_bundle
from workspace.models import Phase

PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1280, "height": 800}

# Each expert's AHP judgments of the three selected attributes (Accuracy,
# Consistency, Comprehensibility: A, C, K); the clinician's are a cycle,
# inconsistent, which adds the badge.
A, C, K = "Accuracy", "Consistency", "Comprehensibility"
JUDGMENTS = {
    "statistician": [[A, C, 3], [A, K, 2], [C, K, 0.5]],
    "informatician": [[A, C, 2], [A, K, 4], [C, K, 2]],
    "researcher": [[A, C, 1], [A, K, 3], [C, K, 3]],
    "clinician": [[A, C, 5], [C, K, 3], [K, A, 3]],
}


@pytest.fixture
def ahp_run(transactional_db, django_user_model):
    """The case study with every expert's priorities as AHP judgments, run."""
    bundle = copy.deepcopy(json.loads(CASE_STUDY_PATH.read_text(encoding="utf-8")))
    for expert, judgments in JUDGMENTS.items():
        bundle["priorities"][expert] = {"method": "ahp", "judgments": judgments}
    study = study_import_bundle(bundle=bundle)
    for user in django_user_model.objects.filter(username__in=[bundle["designer"], *bundle["experts"]]):
        user.set_password(PASSWORD)
        user.save(update_fields=["password"])
    run = engine_services.run_launch(study=study, launched_by=study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    return run


def page_width(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_the_consistency_table_fits_a_phone(page: Page, ahp_run) -> None:
    login(page, ahp_run.study.designer.username, PASSWORD)
    page.set_viewport_size(PHONE)
    page.goto(f"/runs/{ahp_run.pk}/")
    table = page.locator(".run-consistency table")
    expect(table.locator("tbody tr")).to_have_count(4)
    expect(table).to_contain_text("Inconsistent")
    assert page_width(page) <= PHONE["width"]
    box = table.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    screenshot(page, "issue31-run-consistency-390")
    page.locator(".run-consistency").screenshot(path=screenshot_dir() / "issue31-run-consistency-390-card.png")
    assert_accessible(page)
    page.set_viewport_size(WIDE)
    screenshot(page, "issue31-run-consistency-1280")
    page.locator(".run-consistency").screenshot(path=screenshot_dir() / "issue31-run-consistency-1280-card.png")


# The smallest box of the scale's points (the label each radio sits in,
# which is what a tap or a click hits) and of the radios themselves.
SMALLEST_TARGETS = """() => {
    const labels = [...document.querySelectorAll('[data-method-panel="ahp"] .pair__point')]
        .filter((el) => el.getClientRects().length);
    const radios = labels.map((label) => label.querySelector("input"));
    const smallest = (els) => Math.min(...els.map((el) => {
        const box = el.getBoundingClientRect();
        return Math.min(box.width, box.height);
    }));
    return {count: labels.length, label: smallest(labels), radio: smallest(radios)};
}"""


# 1000 px: the questions beside the result column, narrower than the window.
@pytest.mark.parametrize("viewport", [PHONE, {"width": 1000, "height": 800}, WIDE], ids=["390", "1000", "1280"])
def test_the_ahp_scale_points_are_24_px_targets(page: Page, make_study, viewport) -> None:  # noqa: F811
    built = make_study(Phase.ASSESSMENT)
    page.set_viewport_size(viewport)
    login(page, "bob", PASSWORD)
    page.goto(f"/studies/{built.study.pk}/my/priorities/")
    page.get_by_label("AHP pairwise comparisons").first.check()
    measured = page.evaluate(SMALLEST_TARGETS)
    assert measured["count"] == 3 * 17
    assert measured["label"] >= 24 and measured["radio"] >= 24, measured
    assert page_width(page) <= viewport["width"]
    screenshot(page, f"issue31-ahp-scale-{viewport['width']}")
    panel = page.locator('[data-method-panel="ahp"]').first
    panel.screenshot(path=screenshot_dir() / f"issue31-ahp-scale-{viewport['width']}-panel.png")
    assert_accessible(page)
