"""The results pages in Chromium (issue 9): a run launched from the runs page
is watched from queued to its ranking; a candidate's breakdown is swapped in
by a click; the CSV is downloaded; two runs before and after an expert's
change are compared; the print layout drops the navigation. A screenshot and
an axe scan of every results page."""

import copy
import csv
import io
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine import snapshot as engine_snapshot
from engine.models import Run
from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD
from tests.pages.test_results import reopen_change_close, wide_bundle
from workspace import services
from workspace.bundles import study_import_bundle
from workspace.models import Membership


def executed(run: Run) -> Run:
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def test_a_launched_run_turns_from_queued_to_its_ranking(page: Page, live_server, demo, monkeypatch) -> None:
    # No worker takes the run: its message is dropped, so the page shows it
    # queued until the test executes it (as a worker would).
    monkeypatch.setattr(engine_services, "_send", lambda run_id, priority=None: None)
    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{demo.study.pk}/runs/")
    page.get_by_role("button", name="Launch a validation run").click()
    page.wait_for_url(f"{live_server.url}/runs/*/")  # the launch answers with the run's page
    run = Run.objects.get(study=demo.study)
    assert page.url == f"{live_server.url}/runs/{run.pk}/"
    expect(page.get_by_role("heading", name="Status: Queued")).to_be_visible()
    expect(page.locator("table.ranking")).to_have_count(0)
    screenshot(page, "results-run-queued")
    assert_accessible(page)

    executed(run)
    expect(page.get_by_role("heading", name="Status: Succeeded")).to_be_visible()
    rows = page.locator("table.ranking tbody tr")
    expect(rows).to_have_count(4)
    names = [rows.nth(i).locator("th").inner_text() for i in range(4)]
    assert names == ["JRip", "J48", "IBk", "RandomForest"]
    expect(rows.nth(2)).to_contain_text("Vetoed")
    expect(rows.nth(2)).to_contain_text(
        "For statistician, informatician, researcher and clinician the least acceptable Comprehensibility rating"
    )
    # the charts came with the swapped-in results, and the print button with them
    expect(page.get_by_role("img", name="CEF and weighted score per candidate")).to_be_visible()
    expect(page.get_by_role("img", name="Expert influence")).to_be_visible()
    expect(page.get_by_role("button", name="Print")).to_be_visible()
    screenshot(page, "results-run-succeeded")
    assert_accessible(page)


def test_a_candidates_breakdown_is_swapped_in_and_the_csv_downloads(page: Page, live_server, demo) -> None:
    run = executed(engine_services.run_launch(study=demo.study, launched_by=demo.study.designer))
    login(page, demo.experts[0], PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    expect(page.get_by_role("heading", name="Why JRip scored 0.4647")).to_be_visible()
    with page.expect_response(f"{live_server.url}/runs/{run.pk}/candidates/IBk/"):
        page.locator("table.ranking").get_by_role("link", name="IBk").click()
    heading = page.get_by_role("heading", name="Why IBk scored 0", exact=True)
    expect(heading).to_be_visible()
    assert page.url == f"{live_server.url}/runs/{run.pk}/?candidate=IBk"
    expect(page.locator("#candidate")).to_be_focused()
    heat = page.locator(".heat-table tbody tr")
    expect(heat).to_have_count(4)
    expect(page.locator(".heat-table td.heat--veto")).to_have_count(4)
    screenshot(page, "results-candidate-ibk")
    assert_accessible(page)

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download CSV").click()
    download = download_info.value
    assert download.suggested_filename == f"approve-run-{run.pk}-results.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text(encoding="utf-8-sig"))))
    assert [row["name"] for row in rows] == ["JRip", "J48", "IBk", "RandomForest"]
    document = engine_selectors.results_document(run=run)
    assert [float(row["cef"]) for row in rows] == [c["cef"] for c in document["candidates"]]


def test_the_same_candidate_breakdown_without_javascript(page_nojs: Page, live_server, demo) -> None:
    run = executed(engine_services.run_launch(study=demo.study, launched_by=demo.study.designer))
    login(page_nojs, demo.designer, PASSWORD)
    page_nojs.goto(f"/runs/{run.pk}/")
    page_nojs.locator("table.ranking").get_by_role("link", name="RandomForest").click()
    expect(page_nojs.get_by_role("heading", name="Why RandomForest scored 0", exact=True)).to_be_visible()
    assert page_nojs.url == f"{live_server.url}/runs/{run.pk}/?candidate=RandomForest#candidate"
    expect(page_nojs.get_by_role("button", name="Print")).to_be_hidden()


def test_two_runs_before_and_after_an_experts_change(page: Page, live_server, demo) -> None:
    study = demo.study
    first = executed(engine_services.run_launch(study=study, launched_by=study.designer))
    services.study_reopen_assessment(study=study)
    clinician = Membership.objects.get(study=study, user__username="clinician", role=Membership.Role.EXPERT)
    services.ranges_set(expert=clinician, ranges={"Comprehensibility rating": [0, 10]})
    services.study_close_assessment(study=study)
    second = executed(engine_services.run_launch(study=study, launched_by=study.designer))

    login(page, demo.designer, PASSWORD)
    page.goto(f"/runs/{second.pk}/")
    page.get_by_label("Run of this study").select_option(str(first.pk))
    page.get_by_role("button", name="Compare").click()
    assert page.url == f"{live_server.url}/runs/{second.pk}/compare/{first.pk}/"
    expect(page.get_by_role("heading", name=f"Run {first.number} → run {second.number}")).to_be_visible()
    changes = page.locator(".changes table")
    expect(changes).to_have_count(1)
    expect(changes).to_contain_text("clinician's inputs")
    expect(changes).to_contain_text("acceptable range of Comprehensibility rating")
    expect(changes).to_contain_text("[6, 10]")
    expect(changes).to_contain_text("[0, 10]")
    # a measured 0 at the clinician's new least acceptable 0 still scores 0: IBk and RandomForest stay vetoed
    expect(page.locator(".compare-table tbody tr")).to_have_count(4)
    screenshot(page, "results-compare")
    assert_accessible(page)

    page.goto(f"/runs/{first.pk}/compare/{first.pk}/")
    expect(page.get_by_role("alert")).to_contain_text("compared with itself changes nothing")
    screenshot(page, "results-compare-refused")
    assert_accessible(page)


def test_a_failed_run_says_why(page: Page, live_server, demo) -> None:
    run = Run.objects.create(
        study=demo.study,
        launched_by=demo.study.designer,
        snapshot=engine_snapshot.study_snapshot(study=demo.study),
        status=Run.Status.FAILED,
        error="The inputs cannot be evaluated: clinician's acceptable range for Success rate has equal bounds (0.9).",
    )
    login(page, demo.designer, PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    expect(page.get_by_text("The run failed.")).to_be_visible()
    expect(page.get_by_text("clinician's acceptable range for Success rate has equal bounds")).to_be_visible()
    screenshot(page, "results-run-failed")
    assert_accessible(page)


@pytest.mark.parametrize("media", ["print"])
def test_the_print_layout_drops_the_navigation(page: Page, live_server, demo, media) -> None:
    run = executed(engine_services.run_launch(study=demo.study, launched_by=demo.study.designer))
    login(page, demo.designer, PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    expect(page.locator(".site-header")).to_be_visible()
    page.emulate_media(media=media)
    for hidden in (".site-header", ".site-footer", ".study-tabs", ".downloads", ".compare-form, #compare-title"):
        expect(page.locator(hidden).first).to_be_hidden()
    expect(page.get_by_role("img", name="CEF and weighted score per candidate")).to_be_visible()
    expect(page.locator("table.ranking")).to_be_visible()
    screenshot(page, "results-run-print")


# --- issue 19: a large study's run page ---------------------------------------------------------


@pytest.fixture
def wide(transactional_db):
    """tests/pages/test_results.py's wide study (30 experts x 15 metrics x 30
    candidates, past the on-demand threshold) with two runs, its designer's
    password PASSWORD."""
    bundle = wide_bundle()
    study = study_import_bundle(bundle=copy.deepcopy(bundle))
    study.designer.set_password(PASSWORD)
    study.designer.save(update_fields=["password"])
    first = executed(engine_services.run_launch(study=study, launched_by=study.designer))
    expert = Membership.objects.get(study=study, user__username="expert00")
    stricter = {**bundle["ranges"]["expert00"], "metric 0.0": [0.5, 0.9]}
    reopen_change_close(study, lambda: services.ranges_set(expert=expert, ranges=stricter))
    return study, first, executed(engine_services.run_launch(study=study, launched_by=study.designer))


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_a_large_studys_sections_load_when_reached_and_page(page: Page, live_server, wide, viewport) -> None:
    study, first, run = wide
    page.set_viewport_size(viewport)
    login(page, study.designer.username, PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    expect(page.locator(".weights-table")).to_have_count(0)  # not with the page
    best = run.results["candidates"][0]["name"]
    # scrolled into view, each section loads in place
    with page.expect_response(f"{live_server.url}/runs/{run.pk}/weights/"):
        page.get_by_role("heading", name="What the experts weighed").scroll_into_view_if_needed()
    expect(page.locator(".weights-table")).to_have_count(2)
    expect(page.locator(".weights-table").first.locator("tbody tr")).to_have_count(3 + 30)
    page.get_by_role("heading", name=f"Why {best} scored").scroll_into_view_if_needed()
    heat = page.locator(".heat-table tbody tr")
    expect(heat).to_have_count(25)
    expect(page.get_by_text("Experts 1–25 of 30")).to_be_visible()
    # the heat table pages in place
    page.get_by_role("navigation", name="Pages of the experts' scores").get_by_role("link", name="Next").click()
    expect(page.get_by_text("Experts 26–30 of 30")).to_be_visible()
    expect(heat).to_have_count(5)
    assert page.url == f"{live_server.url}/runs/{run.pk}/"
    name = "1280" if viewport["width"] == 1280 else "390"
    screenshot(page, f"results-large-run-{name}")
    assert_accessible(page)

    page.goto(f"/runs/{run.pk}/compare/{first.pk}/")
    expect(page.locator(".compare-table tbody tr")).to_have_count(25)
    page.get_by_role("navigation", name="Pages of the comparison").get_by_role("link", name="Next").click()
    expect(page.locator(".compare-table tbody tr")).to_have_count(5)
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download every candidate (CSV)").click()
    rows = list(csv.DictReader(io.StringIO(Path(download_info.value.path()).read_text(encoding="utf-8-sig"))))
    assert len(rows) == 30
    screenshot(page, f"results-large-compare-{name}")
    assert_accessible(page)
    # a section as a page of its own (the no-JavaScript link's)
    page.goto(f"/runs/{run.pk}/weights/")
    expect(page.get_by_role("heading", name=f"Run {run.number}: What the experts weighed")).to_be_visible()
    screenshot(page, f"results-large-weights-{name}")
    assert_accessible(page)


def test_a_large_studys_sections_without_javascript(page_nojs: Page, live_server, wide) -> None:
    study, _, run = wide
    login(page_nojs, study.designer.username, PASSWORD)
    page_nojs.goto(f"/runs/{run.pk}/")
    page_nojs.get_by_role("link", name="Show what the experts weighed").click()
    assert page_nojs.url == f"{live_server.url}/runs/{run.pk}/weights/"
    expect(page_nojs.locator(".weights-table")).to_have_count(2)
    page_nojs.get_by_role("link", name=f"Back to run {run.number}").click()
    best = run.results["candidates"][0]["name"]
    page_nojs.get_by_role("link", name=f"Show why {best} scored as it did").click()
    expect(page_nojs.locator(".heat-table tbody tr")).to_have_count(25)
    page_nojs.get_by_role("link", name="Next").click()
    expect(page_nojs.locator(".heat-table tbody tr")).to_have_count(5)
    expect(page_nojs.get_by_text("Experts 26–30 of 30")).to_be_visible()
    screenshot(page_nojs, "results-large-breakdown-nojs")
