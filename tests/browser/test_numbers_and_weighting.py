"""Issue 16, findings 8, 9 and 13 in the browser: rounded numbers keep the
measurements card inside a phone's width, the comparison moves nobody when
a tie forms, the setup page offers the AHP weighting (read-only once the
draft is over) and the priorities page names it."""

from playwright.sync_api import Page, expect

from engine import services as engine_services
from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD
from workspace import services
from workspace.models import Measurement, Membership, Study

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def executed(study: Study):
    run = engine_services.run_launch(study=study, launched_by=study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def widest_card(page: Page) -> int:
    """The widest card's right edge in the main content (the page's own
    width also depends on the study's tabs, issue 16 finding 3)."""
    return page.evaluate(
        "Math.max(...[...document.querySelectorAll('main .card')].map(c => c.getBoundingClientRect().right))"
    )


def test_measurements_are_rounded_and_fit_a_phone(page: Page, demo) -> None:
    Measurement.objects.filter(study=demo.study, metric__name="Success rate", candidate__name="J48").update(
        value=0.9019607843137255
    )
    login(page, demo.experts[0], PASSWORD)  # an expert reads the values (the designer edits them in fields)
    for name, size in (("phone", PHONE), ("desktop", DESKTOP)):
        page.set_viewport_size(size)
        page.goto(f"/studies/{demo.study.pk}/measurements/")
        expect(page.locator("main")).to_contain_text("0.902")
        expect(page.locator("main")).not_to_contain_text("0.9019607843137255")
        assert widest_card(page) <= size["width"]
        screenshot(page, f"i16d-measurements-{name}")
    assert_accessible(page)


def test_the_comparison_moves_nobody_when_a_tie_forms(page: Page, demo) -> None:
    study = demo.study
    first = executed(study)
    statistician = Membership.objects.get(study=study, user__username="statistician", role=Membership.Role.EXPERT)
    services.study_reopen_assessment(study=study)
    services.ranges_set(expert=statistician, ranges={"Success rate": [0.86, 0.95]})
    services.study_close_assessment(study=study)
    second = executed(study)
    login(page, demo.designer, PASSWORD)
    for name, size in (("phone", PHONE), ("desktop", DESKTOP)):
        page.set_viewport_size(size)
        page.goto(f"/runs/{first.pk}/compare/{second.pk}/")
        expect(page.locator("main")).to_contain_text("0 candidates changed rank")
        expect(page.locator("table").first).to_contain_text("= tie")
        screenshot(page, f"i16d-compare-{name}")
    assert_accessible(page)


def test_the_setup_page_shows_the_weighting_and_the_priorities_page_names_it(page: Page, demo) -> None:
    Study.objects.filter(pk=demo.study.pk).update(ahp_weighting="eigenvector")
    login(page, demo.designer, PASSWORD)
    for name, size in (("phone", PHONE), ("desktop", DESKTOP)):
        page.set_viewport_size(size)
        page.goto(f"/studies/{demo.study.pk}/setup/")
        field = page.get_by_label("AHP weights computed by")
        expect(field).to_be_disabled()
        expect(field).to_have_value("eigenvector")
        expect(page.locator("#study")).to_contain_text("Changing the AHP weighting is only possible in the draft phase")
        assert widest_card(page) <= size["width"]
        screenshot(page, f"i16d-setup-weighting-{name}")
    assert_accessible(page)


def test_the_priorities_page_names_the_weighting(page: Page, demo) -> None:
    Study.objects.filter(pk=demo.study.pk).update(ahp_weighting="geometric_mean", phase="assessment")
    login(page, demo.experts[0], PASSWORD)
    for name, size in (("phone", PHONE), ("desktop", DESKTOP)):
        page.set_viewport_size(size)
        page.goto(f"/studies/{demo.study.pk}/my/priorities/")
        page.get_by_label("AHP pairwise comparisons").first.check()
        sentence = page.locator(".ahp-weighting").first
        expect(sentence).to_have_text(
            "Weights from your judgments are computed by the normalised geometric means of the rows "
            "(the row geometric mean method, as AHP-OS offers)."
        )
        sentence.scroll_into_view_if_needed()
        screenshot(page, f"i16d-priorities-weighting-{name}")
    assert_accessible(page)
