"""The MLflow pages: connect, preview, map and import with the change
report, publish a run; refusals named on the form, nothing written; the
designer's only."""

import pytest
from django.test import Client
from mlflow.tracking import MlflowClient

from tracking import services
from tracking.models import MlflowConnection, MlflowImport, MlflowPublication
from workspace.models import Measurement, Phase
from workspace.selectors import history as history_selectors

from .conftest import EXPERIMENT, log_models
from .test_services import close_and_run


@pytest.fixture
def store(tmp_path, settings):
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    uri = f"file:{tmp_path / 'mlruns'}"
    return uri, log_models(uri)


def designer_client(cast):
    client = Client()
    client.force_login(cast.alice)
    return client


def form_values(study, **keys):
    """The mapping form's fields: ``keys`` as {metric name: MLflow key}."""
    data = {"experiment": EXPERIMENT, "filter": "tags.stage = 'candidate'", "step": "", "name_tag": ""}
    for metric in study.metrics.all():
        data[f"key_{metric.pk}"] = keys.get(metric.name, "")
    return data


def test_connect_preview_import_and_reimport_through_the_page(make_study, cast, store):
    uri, runs = store
    study = make_study(Phase.DRAFT).study
    client = designer_client(cast)
    page = client.get(f"/studies/{study.pk}/mlflow/").content.decode()
    assert "Not connected" in page and 'name="csrfmiddlewaretoken"' in page

    answer = client.post(f"/studies/{study.pk}/mlflow/connection/", {"tracking_uri": uri, "token": ""}, follow=True)
    page = answer.content.decode()
    assert f"Connected to {uri}: 2 experiments found." in page  # Default and ours
    assert MlflowConnection.objects.get(study=study).experiment_count == 2

    page = client.get(
        f"/studies/{study.pk}/mlflow/", {"experiment": EXPERIMENT, "filter": "tags.stage = 'candidate'"}
    ).content.decode()
    assert "4 runs of breast-cancer" in page
    table = page.split('id="runs"')[1].split("</table>")[0]
    for name in runs:
        assert name in table
    tree_auc = MlflowClient(tracking_uri=uri).get_run(runs["tree"]).data.metrics["roc_auc"]
    assert f"{tree_auc:g}" in table
    # The mapping form guesses keys spelled like a metric ("Success rate" has none).
    assert '<option value="roc_auc"' in page

    answer = client.post(f"/studies/{study.pk}/mlflow/import/", form_values(study, AUC="roc_auc"), follow=True)
    page = answer.content.decode()
    assert "4 runs imported: 4 values changed, 0 unchanged." in page
    assert "4 new candidates" in page
    assert Measurement.objects.get(candidate__name="tree", metric__name="AUC").value == tree_auc

    MlflowClient(tracking_uri=uri).log_metric(runs["tree"], "roc_auc", 0.5)
    answer = client.post(f"/studies/{study.pk}/mlflow/import/", form_values(study, AUC="roc_auc"), follow=True)
    page = answer.content.decode()
    assert "4 runs imported: 1 value changed, 3 unchanged." in page
    changes = page.split('id="changes"')[1].split("</table>")[0]
    assert changes.count("<tr>") == 2  # the header and the one change
    assert "tree" in changes and f"{tree_auc:g}" in changes and ">0.5<" in changes
    assert MlflowImport.objects.filter(study=study).count() == 2


def test_refusals_are_named_and_write_nothing(make_study, cast, store, tmp_path):
    uri, _ = store
    study = make_study(Phase.DRAFT).study
    client = designer_client(cast)
    answer = client.post(f"/studies/{study.pk}/mlflow/connection/", {"tracking_uri": "ftp://x"})
    assert answer.status_code == 200
    assert "must be http://…, https://… or file:/…" in answer.content.decode()
    answer = client.post(f"/studies/{study.pk}/mlflow/connection/", {"tracking_uri": f"file:{tmp_path / 'none'}"})
    assert "Could not read the MLflow store" in answer.content.decode()
    assert not MlflowConnection.objects.filter(study=study).exists()

    services.connection_set(study=study, tracking_uri=uri)
    measured = sorted(Measurement.objects.filter(study=study).values_list("candidate__name", "metric__name", "value"))
    page = client.get(f"/studies/{study.pk}/mlflow/", {"experiment": "nope"}).content.decode()
    assert "field--invalid" in page and "nope" in page
    # A key no run has: named by run, nothing written.
    answer = client.post(f"/studies/{study.pk}/mlflow/import/", form_values(study, AUC="missing_key"))
    page = answer.content.decode()
    assert answer.status_code == 200
    assert "runs[0]: run" in page and "has no metric &#x27;missing_key&#x27;" in page
    # A unit other than the metric's: said under that metric's unit field.
    training = study.metrics.get(name="Training time")
    values = form_values(study, **{"Training time": "fit_seconds"}) | {f"unit_{training.pk}": "ms"}
    page = client.post(f"/studies/{study.pk}/mlflow/import/", values).content.decode()
    unit_field = page.split(f'id="id_unit_{training.pk}"')[1].split("</div>")[1]
    assert "Training time is measured in s, but fit_seconds is declared in ms" in unit_field
    # No key mapped at all: said under the first metric.
    answer = client.post(f"/studies/{study.pk}/mlflow/import/", form_values(study))
    assert "map at least one MLflow metric key" in answer.content.decode()
    after = sorted(Measurement.objects.filter(study=study).values_list("candidate__name", "metric__name", "value"))
    assert after == measured
    assert not MlflowImport.objects.filter(study=study).exists()


def test_only_the_designer_reaches_the_pages(make_study, cast, store):
    study = make_study(Phase.DRAFT).study
    for user, status in ((cast.bob, 403), (cast.charlie, 404)):
        client = Client()
        client.force_login(user)
        assert client.get(f"/studies/{study.pk}/mlflow/").status_code == status
        answer = client.post(f"/studies/{study.pk}/mlflow/connection/", {"tracking_uri": store[0]})
        assert answer.status_code == status
    assert not MlflowConnection.objects.filter(study=study).exists()


def test_publish_a_succeeded_run_from_its_page(make_study, cast, store):
    uri, runs = store
    built = make_study(Phase.DRAFT)
    study = built.study
    services.connection_set(study=study, tracking_uri=uri)
    mapping = [{"key": "accuracy", "metric": "Success rate"}, {"key": "roc_auc", "metric": "AUC"}]
    mapping += [{"key": "fold_std", "metric": "Fold stdev"}, {"key": "fit_seconds", "metric": "Training time"}]
    services.mlflow_import(study=study, imported_by=None, experiment=EXPERIMENT, mapping=mapping)
    run = close_and_run(built)
    client = designer_client(cast)
    assert f'href="/runs/{run.pk}/mlflow/publish/"' in client.get(f"/runs/{run.pk}/").content.decode()
    page = client.get(f"/runs/{run.pk}/mlflow/publish/").content.decode()
    assert "approve.rank" in page and ">Publish<" in page
    assert not MlflowPublication.objects.filter(run=run).exists()  # a GET only asks
    page = client.post(f"/runs/{run.pk}/mlflow/publish/", follow=True).content.decode()
    publication = MlflowPublication.objects.get(run=run)
    assert f"4 runs tagged, summary run {publication.summary_run_id}" in page
    assert ">Publish again<" in page
    ranks = {entry["name"]: str(entry["rank"]) for entry in run.results["candidates"] if entry["name"] in runs}
    mlflow = MlflowClient(tracking_uri=uri)
    assert {name: mlflow.get_run(run_id).data.tags["approve.rank"] for name, run_id in runs.items()} == ranks
    expert = Client()
    expert.force_login(cast.bob)
    assert expert.post(f"/runs/{run.pk}/mlflow/publish/").status_code == 403
    assert MlflowPublication.objects.get(run=run).times == 1


def test_connection_changes_imports_and_publications_are_in_the_history(make_study, cast, store, tmp_path):
    uri, _ = store
    built = make_study(Phase.DRAFT)
    study = built.study
    client = designer_client(cast)
    client.post(f"/studies/{study.pk}/mlflow/connection/", {"tracking_uri": uri, "token": ""})
    other = tmp_path / "other"
    log_models(f"file:{other}", models={})
    client.post(f"/studies/{study.pk}/mlflow/connection/", {"tracking_uri": f"file:{other}", "token": ""})
    client.post(f"/studies/{study.pk}/mlflow/connection/", {"tracking_uri": uri, "token": ""})
    client.post(f"/studies/{study.pk}/mlflow/import/", form_values(study, AUC="roc_auc"))
    mapping = [{"key": "accuracy", "metric": "Success rate"}, {"key": "fold_std", "metric": "Fold stdev"}]
    mapping += [{"key": "fit_seconds", "metric": "Training time"}]
    services.mlflow_import(study=study, imported_by=None, experiment=EXPERIMENT, mapping=mapping)
    run = close_and_run(built)
    client.post(f"/runs/{run.pk}/mlflow/publish/")

    def entries(kind, user=cast.alice):
        filters = history_selectors.HistoryFilter(kind=kind)
        return history_selectors.history_list(study=study, user=user, filters=filters)

    connection = entries("mlflow_connection")
    assert [(e.action, e.source, e.user) for e in reversed(connection)] == [
        ("created", "page", "alice"),
        ("changed", "page", "alice"),
        ("changed", "page", "alice"),
    ]
    uris = [change.new for e in reversed(connection) for change in e.changes if change.field == "tracking_uri"]
    assert uris[-2:] == [f"file:{other}", uri]
    assert all(change.field != "token_encrypted" for e in connection for change in e.changes)
    imports = entries("mlflow_import")
    assert [(e.action, e.user) for e in imports] == [("created", None), ("created", "alice")]
    assert [(e.action, e.source) for e in entries("mlflow_publication")] == [("created", "page")]
    page = client.get(f"/studies/{study.pk}/history/", {"kind": "mlflow_publication"}).content.decode()
    # In words (issue 31): who published which run, no kind's code or record number.
    assert "published run " in page and " to MLflow." in page and "mlflow_publication #" not in page
    # An expert sees none of them (the designer's link, not a public event).
    assert entries("mlflow_connection", user=cast.bob) == []
