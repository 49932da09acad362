"""The results pages in Chromium (issue 9): a run launched from the runs page
is watched from queued to its ranking; a candidate's breakdown is swapped in
by a click; the CSV is downloaded; two runs before and after an expert's
change are compared; the print layout drops the navigation. A screenshot and
an axe scan of every results page."""

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
from workspace import services
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
    expect(page.get_by_role("heading", name=f"Run {first.pk} → run {second.pk}")).to_be_visible()
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
