"""Issue 31, item 4 (MLflow from the page), on the page against the real
tracking server: the experiment picker, the key lists after a refusal, the
positive label of scored artifacts, the question for a run named like a
candidate, counts that add up, and the experiment named wherever it
appears. Each test failed before its fix (the finding it covers is named)."""

import html
import re

import pytest
from django.test import Client
from mlflow.tracking import MlflowClient

from evaluation.models import PredictionSet
from tracking import services
from workspace import services as workspace_services
from workspace.models import Candidate, Measurement, Phase
from workspace.selectors import history as history_selectors

from .conftest import log_models
from .test_import_choices import artifact_classes
from .test_services import close_and_run

EXPERIMENT = "page-choices"
KEYS = ["accuracy", "fit_seconds", "fold_std", "roc_auc"]


@pytest.fixture(scope="module")
def logged(mlflow_server):
    """The four models logged once to their own experiment: ``{name: run id}``."""
    return log_models(mlflow_server, experiment=EXPERIMENT)


@pytest.fixture
def experiment_id(mlflow_server, logged):
    return MlflowClient(tracking_uri=mlflow_server).get_experiment_by_name(EXPERIMENT).experiment_id


def designer(cast):
    client = Client()
    client.force_login(cast.alice)
    return client


def connected(make_study, uri):
    built = make_study(Phase.DRAFT)
    services.connection_set(study=built.study, tracking_uri=uri)
    return built


def options(page, name):
    """The (value, label) options of the select ``name``, and which is selected."""
    select = re.search(rf'<select name="{re.escape(name)}"[^>]*>(.*?)</select>', page, re.DOTALL)
    assert select is not None, f"no select {name}"
    found = re.findall(r'<option value="([^"]*)"([^>]*)>([^<]*)</option>', select[1])
    return [(html.unescape(value), html.unescape(label)) for value, _, label in found]


def selected(page, name):
    select = re.search(rf'<select name="{re.escape(name)}"[^>]*>(.*?)</select>', page, re.DOTALL)
    return [
        html.unescape(v)
        for v, attrs in re.findall(r'<option value="([^"]*)"([^>]*)>', select[1])
        if "selected" in attrs
    ]


def form(study, **fields):
    """The mapping form's fields: ``key_<metric>`` from ``keys`` ({metric name: key}), then ``fields``."""
    keys = fields.pop("keys", {})
    data = {"experiment": EXPERIMENT, "filter": "", "step": "", "name_tag": "", "artifact_pattern": "", "positive": ""}
    for metric in study.metrics.all():
        data[f"key_{metric.pk}"] = keys.get(metric.name, "")
        data[f"unit_{metric.pk}"] = ""
    return data | fields


def test_the_experiment_is_picked_from_the_server_s_list_by_name(
    make_study, cast, mlflow_server, logged, experiment_id
):
    study = make_study(Phase.DRAFT).study
    client = designer(cast)
    page = client.post(f"/studies/{study.pk}/mlflow/connection/", {"tracking_uri": mlflow_server}, follow=True)
    page = page.content.decode()
    every = MlflowClient(tracking_uri=mlflow_server).search_experiments()
    assert f"Connected to {mlflow_server}: {len(every)} experiments found." in page
    # Before: a text box ("Its name or id.") though the page had just counted them.
    listed = options(page, "experiment")
    assert listed[0] == ("", "Choose an experiment")
    assert sorted(listed[1:]) == sorted((e.name, f"{e.name} (id {e.experiment_id})") for e in every)
    assert (EXPERIMENT, f"{EXPERIMENT} (id {experiment_id})") in listed
    assert f"The server&#x27;s {len(every)} experiments, by name." in page

    page = client.get(f"/studies/{study.pk}/mlflow/", {"experiment": EXPERIMENT}).content.decode()
    assert f"4 runs of {EXPERIMENT} (id {experiment_id}) match." in page
    assert selected(page, "experiment") == [EXPERIMENT]
    # An id typed in the address still works (the picker keeps it).
    page = client.get(f"/studies/{study.pk}/mlflow/", {"experiment": experiment_id}).content.decode()
    assert f"4 runs of {EXPERIMENT} (id {experiment_id}) match." in page
    assert selected(page, "experiment") == [experiment_id]


def test_a_refused_import_keeps_every_key_offered(make_study, cast, mlflow_server, logged):
    study = connected(make_study, mlflow_server).study
    client = designer(cast)
    auc, training = study.metrics.get(name="AUC"), study.metrics.get(name="Training time")
    page = client.get(f"/studies/{study.pk}/mlflow/", {"experiment": EXPERIMENT}).content.decode()
    assert [value for value, _ in options(page, f"key_{auc.pk}")] == ["", *KEYS]
    data = form(study, keys={"AUC": "roc_auc", "Training time": "fit_seconds"}) | {f"unit_{training.pk}": "ms"}
    answer = client.post(f"/studies/{study.pk}/mlflow/import/", data)
    page = answer.content.decode()
    assert answer.status_code == 200
    assert "Training time is measured in s, but fit_seconds is declared in ms" in page
    # Before: each list shrank to the keys chosen ("", fit_seconds, roc_auc).
    for metric in study.metrics.all():
        assert [value for value, _ in options(page, f"key_{metric.pk}")] == ["", *KEYS], metric.name
    assert selected(page, f"key_{auc.pk}") == ["roc_auc"]
    # The runs are listed again too.
    assert len(re.findall(r'<tr><th scope="row">', page.split('id="runs"')[1].split("</table>")[0])) == 4
    assert not Measurement.objects.filter(study=study, candidate__name__in=list(logged)).exists()


def test_scored_artifacts_ask_for_the_positive_label_on_the_page(make_study, cast, mlflow_server, logged):
    study = connected(make_study, mlflow_server).study
    client = designer(cast)
    page = client.get(f"/studies/{study.pk}/mlflow/", {"experiment": EXPERIMENT}).content.decode()
    # Before: no such field (and the upload page's field was the only way to name one).
    assert 'name="positive"' in page and "Needed when the artifacts have a score column" in page
    data = form(study, keys={"AUC": "roc_auc"}, artifact_pattern="predictions/*.csv")
    page = client.post(f"/studies/{study.pk}/mlflow/import/", data).content.decode()
    classes = artifact_classes()
    assert options(page, "positive") == [("", "Choose the positive label"), *((c, c) for c in classes)]
    field = page.split('id="id_positive"')[1].split("</div>")[1]
    listed = ", ".join(f"&#x27;{label}&#x27;" for label in classes)
    assert (
        "the prediction artifacts have a score column, which is the positive label&#x27;s score: name the positive "
        f"label (their classes, in order: {listed})"
    ) in field
    assert f"Their classes, in order: {', '.join(classes)}." in page
    assert not PredictionSet.objects.filter(study=study).exists()

    answer = client.post(f"/studies/{study.pk}/mlflow/import/", data | {"positive": "benign"}, follow=True)
    page = answer.content.decode()
    assert "4 runs imported: 4 values changed, 0 unchanged." in page and "4 prediction sets stored" in page
    assert {s.positive_label for s in PredictionSet.objects.filter(study=study)} == {"benign"}


def test_a_run_named_like_a_candidate_is_asked_on_the_page(make_study, cast, mlflow_server, logged):
    study = connected(make_study, mlflow_server).study
    workspace_services.candidate_add(study=study, name="logistic", description="")
    client = designer(cast)
    page = client.get(f"/studies/{study.pk}/mlflow/", {"experiment": EXPERIMENT}).content.decode()
    run_id = logged["logistic"]
    assert "4 runs of page-choices" in page and "match, 1 named like an existing candidate (asked below)." in page
    runs = page.split('id="runs"')[1].split("</table>")[0]
    assert "named like logistic: asked below" in runs and runs.count('<td class="small">new</td>') == 3
    name = f"on_existing_{run_id}"
    assert f"Run logistic ({run_id[:8]}) is named like the candidate logistic" in page
    assert [value for value, _ in options(page, name)] == ["", "update", "new", "skip"]

    # Not answered: asked again, nothing written (before: "logistic (149b846f)" was added without a word).
    data = form(study, keys={"AUC": "roc_auc"})
    page = client.post(f"/studies/{study.pk}/mlflow/import/", data).content.decode()
    assert "choose: update that candidate, import it as a new one, or skip it" in page.split(f'id="id_{name}"')[1]
    assert sorted(Candidate.objects.filter(study=study).values_list("name", flat=True)) == ["J48", "JRip", "logistic"]

    answer = client.post(f"/studies/{study.pk}/mlflow/import/", data | {name: "update"}, follow=True)
    page = answer.content.decode()
    assert "4 runs imported: 4 values changed, 0 unchanged." in page
    assert "3 new candidates (tree, naive-bayes, knn), 1 updating the candidate named like it (logistic)" in page
    assert not Candidate.objects.filter(study=study, name__startswith="logistic (").exists()
    auc = MlflowClient(tracking_uri=mlflow_server).get_run(run_id).data.metrics["roc_auc"]
    assert Measurement.objects.get(candidate__name="logistic", metric__name="AUC").value == auc
    # Imported now: it updates its candidate without a question.
    page = client.get(f"/studies/{study.pk}/mlflow/", {"experiment": EXPERIMENT}).content.decode()
    assert "updates logistic (imported from this run)" in page and f'name="{name}"' not in page


def test_the_imports_counts_add_up(make_study, cast, mlflow_server, logged):
    study = connected(make_study, mlflow_server).study
    client = designer(cast)
    keys = {"AUC": "roc_auc", "Success rate": "accuracy", "Fold stdev": "fold_std"}
    page = client.post(f"/studies/{study.pk}/mlflow/import/", form(study, keys=keys), follow=True).content.decode()
    assert "4 runs imported: 12 values changed, 0 unchanged." in page
    imports = page.split('id="imports-title"')[1].split("</table>")[0]
    # Before: "12 of 4 runs" (the values changed counted against the runs).
    assert '<td data-label="Changed">4 runs: 12 values changed, 0 unchanged</td>' in imports
    assert "12 of 4" not in imports

    MlflowClient(tracking_uri=mlflow_server).log_metric(logged["knn"], "fold_std", 0.5)
    page = client.post(f"/studies/{study.pk}/mlflow/import/", form(study, keys=keys), follow=True).content.decode()
    imports = page.split('id="imports-title"')[1].split("</table>")[0]
    rows = re.findall(r'<td data-label="Changed">([^<]*)</td>', imports)
    assert rows == ["4 runs: 1 value changed, 11 unchanged", "4 runs: 12 values changed, 0 unchanged"]


def test_the_experiment_is_named_where_it_appears(make_study, cast, mlflow_server, logged, experiment_id):
    built = connected(make_study, mlflow_server)
    study = built.study
    client = designer(cast)
    shown = f"{EXPERIMENT} (id {experiment_id})"
    keys = {"AUC": "roc_auc", "Success rate": "accuracy", "Fold stdev": "fold_std", "Training time": "fit_seconds"}
    page = client.post(f"/studies/{study.pk}/mlflow/import/", form(study, keys=keys), follow=True).content.decode()
    # Before: "experiment 1", its id alone, in the report and the list of imports.
    assert f"4 runs of experiment {shown} imported, 4 new candidates" in page
    imports = page.split('id="imports-title"')[1].split("</table>")[0]
    assert f'<span class="table__sub">experiment {shown}</span>' in imports
    # The measurements page's provenance, the history, and the run's publication.
    page = client.get(f"/studies/{study.pk}/measurements/").content.decode()
    assert f"of run {logged['tree']}, experiment {shown}, {mlflow_server}" in page
    filters = history_selectors.HistoryFilter(kind="mlflow_import")
    entry = history_selectors.history_list(study=study, user=cast.alice, filters=filters)[0]
    assert {change.field: change.new for change in entry.changes}["experiment_name"] == EXPERIMENT
    run = close_and_run(built)
    client.post(f"/runs/{run.pk}/mlflow/publish/")
    page = client.get(f"/runs/{run.pk}/mlflow/publish/").content.decode()
    assert f"<code>{mlflow_server}</code>, experiment {shown}</dd>" in page
