"""The evaluation pages in Chromium (issue 10): the designer of the demo
uploads its predictions file, maps Success rate to accuracy, computes, sees
the measurements change with where they came from, closes the reopened
assessment and launches a run that ranks by the computed values; a
candidate's report and a set's comparison; a refused file. A screenshot and
an axe scan of every page."""

import io
import re

from playwright.sync_api import Page, expect

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine.models import Run
from evaluation.models import PredictionSet
from evaluation.predictions import read_predictions
from evaluation.report import metric_value
from tests.browser.support import assert_accessible, login, screenshot, screenshot_dir
from tests.browser.test_journey import change_phase, click_link, submit, tab
from tests.fixtures import PASSWORD
from workspace.models import Measurement
from workspace.templatetags.numbers import significant

PREDICTIONS = "workspace/demo/case-study-1-predictions.csv"


def check(page: Page, name: str) -> None:
    screenshot(page, f"evaluation-{name}")
    assert_accessible(page)


def upload_demo_predictions(page: Page, *, shoot: bool = False) -> None:
    tab(page, "Predictions")
    expect(page.get_by_text("No predictions yet.")).to_be_visible()
    if shoot:
        check(page, "predictions-empty")
    page.get_by_label("Predictions file (CSV or Parquet)").set_input_files(PREDICTIONS)
    page.get_by_label("Positive label").fill("tumour")
    submit(page, "Upload")
    expect(page.get_by_role("status")).to_contain_text(
        "case-study-1-predictions.csv was stored: 408 rows for 4 candidates."
    )


def test_predictions_to_measurements_to_the_next_run(page: Page, live_server, demo) -> None:
    study = demo.study
    first = engine_services.run_launch(study=study, launched_by=study.designer)
    engine_services.run_execute(run_id=first.pk)
    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{study.pk}/")
    upload_demo_predictions(page, shoot=True)
    check(page, "predictions")

    click_link(page, re.compile(r"Compute from predictions for Success rate"))
    expect(page.get_by_role("heading", name="Compute Success rate from predictions")).to_be_visible()
    check(page, "computation")
    page.get_by_label("Compute from predictions").select_option(label="Accuracy (success rate)")
    submit(page, "Save")
    expect(page.get_by_role("status")).to_contain_text("Success rate will be computed as Accuracy (success rate).")

    submit(page, "Compute the measurements now")
    accuracy = metric_value(read_predictions(PREDICTIONS, positive="tumour"), "J48", "accuracy")
    expect(page.get_by_role("heading", name="4 measurements computed, 4 changed")).to_be_visible()
    j48 = page.locator("tbody tr", has_text="J48")
    expect(j48.locator("td")).to_have_text(["J48", "0.847", significant(accuracy), "case-study-1-predictions.csv"])
    check(page, "computed")
    click_link(page, "See the measurements")
    expect(page.get_by_role("heading", name="Computed from predictions")).to_be_visible()
    expect(page.locator(".cell__source")).to_have_count(4)
    check(page, "measurements-computed")
    assert Measurement.objects.get(candidate__name="J48", metric__name="Success rate").value == accuracy

    change_phase(page, "Reopen assessment", "Reopen the assessment?", "assessment", name="reopen")
    change_phase(
        page, "Close assessment", "Close the assessment?", "The assessment is closed: inputs are frozen.", name="close"
    )
    tab(page, "Runs")
    submit(page, "Launch a validation run")
    second = Run.objects.exclude(pk=first.pk).get(study=study)
    rows = page.locator("table.ranking tbody tr")
    expect(rows.first).to_contain_text("J48")  # more accurate by its predictions than JRip now
    before = [c["name"] for c in engine_selectors.results_document(run=Run.objects.get(pk=first.pk))["candidates"]]
    after = [c["name"] for c in engine_selectors.results_document(run=second)["candidates"]]
    assert before[:2] == ["JRip", "J48"] and after[:2] == ["J48", "JRip"]
    screenshot(page, "evaluation-run-after-predictions")


def test_a_candidates_report_and_the_sets_comparison(page: Page, live_server, demo) -> None:
    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{demo.study.pk}/")
    upload_demo_predictions(page)
    prediction_set = PredictionSet.objects.get()
    click_link(page, "J48")
    assert page.url == f"{live_server.url}/studies/{demo.study.pk}/predictions/{prediction_set.pk}/candidates/J48/"
    expect(page.get_by_role("heading", name="J48: 102 predictions")).to_be_visible()
    for chart in (re.compile(r"ROC curve of J48 \(AUC"), "Cumulative gain of J48", "Lift of J48"):
        expect(page.get_by_role("img", name=chart)).to_be_visible()
    expect(page.locator("table.confusion tbody tr")).to_have_count(2)
    check(page, "report-j48")

    page.get_by_label("Threshold method").select_option(label="Highest kappa")
    submit(page, "Apply")  # a method chosen is applied, y_pred or not (issue 16, finding 6)
    expect(
        page.get_by_text(re.compile(r"Labels shown: derived from the scores: tumour where it is at least"))
    ).to_be_visible()

    tab(page, "Predictions")
    click_link(page, "Compare the candidates (A3R, ARR)")
    expect(page.get_by_role("img", name="A3R against the time ratio")).to_be_visible()
    expect(page.locator("section").first.locator("tbody tr")).to_have_count(4)  # one row per candidate
    check(page, "compare")
    page.get_by_label("AccD (ARR)").fill("1")
    submit(page, "Apply")
    expect(page.locator(".message--warning")).to_contain_text("ARR is undefined at and below its pole")
    screenshot(page, "evaluation-compare-arr-undefined")


def test_a_refused_file_lists_its_lines(page: Page, live_server, demo, tmp_path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("candidate,y_true,y_pred,time\nJ48,tumour,tumour,0.1\nC4.5,normal,normal,-1\n", encoding="utf-8")
    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{demo.study.pk}/predictions/")
    page.get_by_label("Predictions file (CSV or Parquet)").set_input_files(str(bad))
    submit(page, "Upload")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("The file was refused; nothing was stored.")
    expect(alert).to_contain_text("line 3, column candidate")
    expect(alert).to_contain_text("line 3, column time")
    assert not PredictionSet.objects.exists()
    check(page, "refused")


def test_labels_past_the_limit_are_refused_and_a_wide_set_reads_at_both_widths(
    page: Page, live_server, demo, tmp_path
) -> None:
    """Issue 17, finding 1: the count and the limit; a set at the limit
    (100 labels) listed in brief and reported with its 100 x 100 confusion
    matrix; a set stored before the limit says it is not evaluated."""
    from evaluation import services
    from workspace import limits

    limit = limits.PREDICTIONS_MAX_CLASSES
    wide = tmp_path / "wide.csv"
    wide.write_text(
        "candidate,y_true,y_pred\n" + "".join(f"J48,class {i % 2_000},class 0\n" for i in range(4_000)),
        encoding="utf-8",
    )
    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{demo.study.pk}/predictions/")
    page.get_by_label("Predictions file (CSV or Parquet)").set_input_files(str(wide))
    submit(page, "Upload")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text(f"the file has 2,000 distinct labels; at most {limit} are allowed")
    assert not PredictionSet.objects.exists()
    check(page, "refused-labels")

    rows = "".join(f"J48,class {i % limit},class {(i * 7) % limit}\n" for i in range(3 * limit))
    stored = services.prediction_set_import(
        study=demo.study, stream=io.BytesIO(f"candidate,y_true,y_pred\n{rows}".encode()), name="wide", uploaded_by=None
    )
    page.goto(f"/studies/{demo.study.pk}/predictions/")
    expect(page.get_by_text("and 90 more")).to_be_visible()
    check(page, "wide-set-listed")
    page.goto(f"/studies/{demo.study.pk}/predictions/{stored.pk}/candidates/J48/")
    expect(page.locator("table.confusion tbody tr")).to_have_count(limit)
    check(page, "report-100-classes")
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.locator("#confusion-title").scroll_into_view_if_needed()
        # The viewport only: the whole page is 100 rows of the matrix long.
        page.screenshot(path=str(screenshot_dir() / f"evaluation-report-100-classes-{width}.png"))
    page.set_viewport_size({"width": 1280, "height": 800})

    PredictionSet.objects.filter(pk=stored.pk).update(labels=[f"class {i}" for i in range(2 * limit)])
    page.goto(f"/studies/{demo.study.pk}/predictions/{stored.pk}/compare/")
    expect(page.get_by_role("heading", name="This set is not evaluated")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text(f"This set has 200 distinct labels; at most {limit} can be")
    check(page, "not-evaluated")
