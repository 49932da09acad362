"""The MLflow page in Chromium at phone width (390 px), driven from the
keyboard: connect to a real ``mlflow server`` (the tracking tests' fixture),
pick an experiment from the server's list (by name), preview its runs with
their metrics, map a key and import, reading the change report; a run named
like an existing candidate is asked about, and scored artifacts ask for the
positive label. No script on the page: plain forms."""

import re

from mlflow.tracking import MlflowClient
from playwright.sync_api import Page, expect

from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD, make_study  # noqa: F401  (fixture)
from tests.tracking.conftest import log_models, mlflow_server  # noqa: F401  (fixture)
from tests.tracking.test_import_choices import artifact_classes
from workspace import services as workspace_services
from workspace.models import Candidate, Measurement, Phase

EXPERIMENT = "browser-mlflow"


def no_sideways_scrolling(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide at 390 px"


def test_connect_preview_and_import_at_phone_width(page: Page, live_server, make_study, mlflow_server) -> None:  # noqa: F811
    runs = log_models(mlflow_server, experiment=EXPERIMENT)
    study = make_study(Phase.DRAFT).study
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "alice", PASSWORD)
    page.goto(f"/studies/{study.pk}/mlflow/")
    expect(page.get_by_text("Not connected")).to_be_visible()
    page.get_by_label("Tracking URI").fill(mlflow_server)
    with page.expect_navigation():
        page.get_by_label("Tracking URI").press("Enter")
    connected = re.compile(rf"Connected to {re.escape(mlflow_server)}: \d+ experiments found")
    expect(page.get_by_role("status")).to_contain_text(connected)

    # The experiment is picked from the server's experiments, each by its name and id.
    picker = page.get_by_role("combobox", name="Experiment")
    expect(picker.locator("option", has_text=re.compile(rf"^{re.escape(EXPERIMENT)} \(id \d+\)$"))).to_have_count(1)
    expect(picker.locator("option", has_text=re.compile(r"^Default \(id 0\)$"))).to_have_count(1)
    experiment_id = MlflowClient(tracking_uri=mlflow_server).get_experiment_by_name(EXPERIMENT).experiment_id
    picker.select_option(label=f"{EXPERIMENT} (id {experiment_id})")
    page.get_by_label("Filter").fill("tags.stage = 'candidate'")
    with page.expect_navigation():
        page.get_by_label("Filter").press("Enter")
    expect(page.locator("#runs-found")).to_contain_text(f"4 runs of {EXPERIMENT}")
    expect(page.locator("#runs tbody tr")).to_have_count(4)
    no_sideways_scrolling(page)
    screenshot(page, "mlflow-preview-390")
    assert_accessible(page)

    page.get_by_role("combobox", name="AUC").select_option("roc_auc")
    page.get_by_role("button", name="Import").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("4 runs imported: 4 values changed, 0 unchanged.")
    expect(page.locator("#changes tbody tr")).to_have_count(4)
    no_sideways_scrolling(page)
    screenshot(page, "mlflow-report-390")
    assert_accessible(page)
    imported = Measurement.objects.filter(study=study, metric__name="AUC", candidate__name__in=list(runs))
    assert imported.count() == 4


def test_a_run_named_like_a_candidate_is_asked_and_scores_ask_for_the_positive_label(
    page: Page,
    live_server,
    make_study,  # noqa: F811
    mlflow_server,  # noqa: F811
) -> None:
    runs = log_models(mlflow_server, experiment=f"{EXPERIMENT}-match")
    study = make_study(Phase.DRAFT).study
    workspace_services.candidate_add(study=study, name="tree", description="typed before MLflow")
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "alice", PASSWORD)
    page.goto(f"/studies/{study.pk}/mlflow/")
    page.get_by_label("Tracking URI").fill(mlflow_server)
    with page.expect_navigation():
        page.get_by_label("Tracking URI").press("Enter")
    page.get_by_role("combobox", name="Experiment").select_option(f"{EXPERIMENT}-match")
    with page.expect_navigation():
        page.get_by_role("button", name="Show the matching runs").click()
    expect(page.locator("#runs-found")).to_contain_text("4 runs of browser-mlflow-match")
    expect(page.locator("#runs-found")).to_contain_text("1 named like an existing candidate (asked below).")
    expect(page.locator("#runs tbody tr", has_text="tree")).to_contain_text("named like tree: asked below")

    page.get_by_role("combobox", name="AUC").select_option("roc_auc")
    question = page.get_by_role("combobox", name=f"Run tree ({runs['tree'][:8]}) is named like the candidate tree")
    expect(question).to_be_visible()
    question.select_option(label="Update that candidate's measurements")
    page.get_by_label("Prediction artifact pattern").fill("predictions/*.csv")
    with page.expect_navigation():
        page.get_by_role("button", name="Import").click()
    # The artifacts carry scores: the positive label is asked, a choice of their classes.
    positive = page.get_by_role("combobox", name="Positive label")
    expect(positive.locator("option")).to_have_text(["Choose the positive label", *artifact_classes()])
    expect(page.locator("#id_positive_error")).to_contain_text("name the positive label (their classes, in order:")
    expect(question).to_have_value("update")  # the answers given are kept
    no_sideways_scrolling(page)
    screenshot(page, "mlflow-positive-asked-390")
    assert_accessible(page)
    positive.select_option("benign")
    with page.expect_navigation():
        page.get_by_role("button", name="Import").click()
    expect(page.get_by_role("status")).to_contain_text("4 runs imported: 4 values changed, 0 unchanged.")
    expect(page.locator("#report-summary")).to_contain_text(
        "3 new candidates (logistic, naive-bayes, knn), 1 updating the candidate named like it (tree)"
    )
    expect(page.locator("#report-summary")).to_contain_text("4 prediction sets stored")
    no_sideways_scrolling(page)
    screenshot(page, "mlflow-matched-report-390")
    assert_accessible(page)
    names = sorted(Candidate.objects.filter(study=study).values_list("name", flat=True))
    assert names == ["J48", "JRip", "knn", "logistic", "naive-bayes", "tree"]
