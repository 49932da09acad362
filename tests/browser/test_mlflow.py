"""The MLflow page in Chromium at phone width (390 px), driven from the
keyboard: connect to a real ``mlflow server`` (the tracking tests' fixture),
preview an experiment's runs with their metrics, map a key and import,
reading the change report. No script on the page: plain forms."""

import re

from playwright.sync_api import Page, expect

from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD, make_study  # noqa: F401  (fixture)
from tests.tracking.conftest import log_models, mlflow_server  # noqa: F401  (fixture)
from workspace.models import Measurement, Phase

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

    page.get_by_label("Experiment").fill(EXPERIMENT)
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
