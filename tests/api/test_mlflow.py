"""The MLflow link through the API, against a local ``file:`` store (the
real tracking server is tests/tracking's): connect, preview, import, read the
provenance, publish; refusals in the error envelope."""

import pytest
from mlflow.tracking import MlflowClient

from tests.fixtures import complete_assessment
from tests.tracking.conftest import EXPERIMENT, free_port, log_models, mlflow_server  # noqa: F401  (fixture)
from tracking import remote
from tracking.models import MlflowConnection
from workspace import services
from workspace.models import Measurement, Phase

from .conftest import launch_and_finish

pytestmark = pytest.mark.django_db
MAPPING = [
    {"key": "accuracy", "metric": "Success rate"},
    {"key": "roc_auc", "metric": "AUC"},
    {"key": "fold_std", "metric": "Fold stdev"},
    {"key": "fit_seconds", "metric": "Training time", "unit": "s"},
]


@pytest.fixture
def store(tmp_path, settings, monkeypatch):
    """A file: store under the allowed roots, with the four models logged: ``(uri, {name: run id})``."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    uri = f"file:{tmp_path / 'mlruns'}"
    return uri, log_models(uri)


def test_connect_preview_import_and_publish(make_study, api, cast, store):
    uri, runs = store
    built = make_study(Phase.DRAFT)
    base = f"/api/v1/studies/{built.study.pk}/mlflow"
    alice = api(cast.alice)
    assert alice.get(f"{base}/connection/").json() == {
        "connected": False,
        "tracking_uri": None,
        "has_token": False,
        "experiment_count": None,
        "checked_at": None,
    }
    answer = alice.put(f"{base}/connection/", {"tracking_uri": uri}, format="json")
    assert answer.status_code == 200, answer.content
    assert (answer.json()["connected"], answer.json()["experiment_count"], answer.json()["has_token"]) == (
        True,
        2,
        False,
    )

    # The picker's list: the store's experiments by name, as many as the check found.
    listed = alice.get(f"{base}/experiments/").json()
    assert listed["more"] is False
    assert sorted(e["name"] for e in listed["experiments"]) == sorted(["Default", EXPERIMENT])
    assert [e["name"] for e in listed["experiments"]] == sorted(
        (e["name"] for e in listed["experiments"]), key=str.casefold
    )
    named = {e["name"]: e["experiment_id"] for e in listed["experiments"]}
    assert named[EXPERIMENT] == MlflowClient(tracking_uri=uri).get_experiment_by_name(EXPERIMENT).experiment_id

    preview = alice.get(f"{base}/runs/", {"experiment": EXPERIMENT, "filter": "tags.stage = 'candidate'"}).json()
    assert sorted(run["name"] for run in preview["runs"]) == sorted(runs)
    assert preview["metric_keys"] == ["accuracy", "fit_seconds", "fold_std", "roc_auc"]

    body = {"experiment": EXPERIMENT, "mapping": MAPPING, "artifact_pattern": "predictions/*.csv", "positive": "benign"}
    answer = alice.post(f"{base}/imports/", body, format="json")
    assert answer.status_code == 200, answer.content
    outcome = answer.json()
    assert sorted(outcome["created"]) == sorted(runs) and len(outcome["changes"]) == 16
    assert len(outcome["prediction_sets"]) == 4
    sources = alice.get(f"{base}/sources/").json()
    assert sources["count"] == 16
    first = sources["results"][0]
    assert (first["tracking_uri"], first["experiment_id"]) == (uri, outcome["experiment_id"])
    assert (
        first["value"]
        == Measurement.objects.get(candidate__name=first["candidate"], metric__name=first["metric"]).value
    )
    records = alice.get(f"{base}/imports/").json()
    assert records["count"] == 1 and records["results"][0]["outcome"]["created"] == outcome["created"]

    # Bob reads the provenance, but neither imports nor publishes.
    bob = api(cast.bob)
    assert bob.get(f"{base}/sources/").status_code == 200
    assert bob.post(f"{base}/imports/", body, format="json").status_code == 403
    assert bob.get(f"{base}/connection/").status_code == 403

    services.study_open_voting(study=built.study)
    services.votes_set(expert=built.bob, attributes=["Efficiency"], metrics=[])
    services.study_close_voting(study=built.study)
    complete_assessment(built.refresh())
    services.study_close_assessment(study=built.study)
    run = launch_and_finish(built, cast.alice)
    assert alice.get(f"/api/v1/runs/{run.pk}/mlflow/").json()["published"] is False
    assert bob.post(f"/api/v1/runs/{run.pk}/mlflow/").status_code == 403
    answer = alice.post(f"/api/v1/runs/{run.pk}/mlflow/")
    assert answer.status_code == 200, answer.content
    publication = answer.json()
    assert publication["tagged"] == runs and (publication["published"], publication["times"]) == (True, 1)
    tags = MlflowClient(tracking_uri=uri).get_run(runs["tree"]).data.tags
    rank = next(c["rank"] for c in run.results["candidates"] if c["name"] == "tree")
    assert tags["approve.rank"] == str(rank)
    assert tags["approve.run_url"] == f"http://testserver/runs/{run.pk}/"
    assert bob.get(f"/api/v1/runs/{run.pk}/mlflow/").json()["summary_run_id"] == publication["summary_run_id"]


def test_refusals_in_the_envelope(make_study, api, cast, store, unchanged):
    uri, _ = store
    built = make_study(Phase.DRAFT)
    base = f"/api/v1/studies/{built.study.pk}/mlflow"
    alice = api(cast.alice)
    answer = alice.post(f"{base}/imports/", {"experiment": EXPERIMENT, "mapping": MAPPING}, format="json")
    assert answer.status_code == 409 and answer.json()["code"] == "mlflow_not_connected"
    with unchanged():
        answer = alice.put(f"{base}/connection/", {"tracking_uri": f"http://127.0.0.1:{free_port()}"}, format="json")
    assert answer.status_code == 502
    assert answer.json()["code"] == "mlflow_unreachable"
    assert answer.json()["detail"] == remote.UNREACHABLE
    assert not MlflowConnection.objects.exists()
    alice.put(f"{base}/connection/", {"tracking_uri": uri}, format="json")
    with unchanged():
        answer = alice.post(f"{base}/imports/", {"experiment": "nope", "mapping": MAPPING}, format="json")
    assert answer.status_code == 400
    assert answer.json()["fields"] == {"experiment": [f"unknown experiment 'nope' at {uri}"]}
    answer = alice.get(f"{base}/runs/")
    assert answer.status_code == 400 and "experiment" in answer.json()["fields"]


def test_the_page_s_choices_through_the_api(make_study, api, cast, mlflow_server):  # noqa: F811
    """Issue 31, item 4: the API takes the page's positive label and its per-run (or global) choice for a run
    named like a candidate, says which runs are, and names the experiment beside its id."""
    from tests.tracking.test_import_choices import artifact_classes

    runs = log_models(mlflow_server, experiment="api-choices")
    experiment_id = MlflowClient(tracking_uri=mlflow_server).get_experiment_by_name("api-choices").experiment_id
    built = make_study(Phase.DRAFT)
    services.candidate_add(study=built.study, name="tree", description="typed")
    base = f"/api/v1/studies/{built.study.pk}/mlflow"
    alice = api(cast.alice)
    assert alice.put(f"{base}/connection/", {"tracking_uri": mlflow_server}, format="json").status_code == 200
    # Typing the id stays possible.
    preview = alice.get(f"{base}/runs/", {"experiment": experiment_id}).json()
    assert (preview["experiment_name"], preview["named_like"], preview["linked"]) == (
        "api-choices",
        {runs["tree"]: "tree"},
        {},
    )
    assert alice.get(f"{base}/runs/", {"experiment": experiment_id, "name_tag": "family"}).json()["named_like"] == {}

    body = {"experiment": experiment_id, "mapping": MAPPING, "artifact_pattern": "predictions/*.csv"}
    answer = alice.post(f"{base}/imports/", body, format="json")
    assert answer.status_code == 400
    assert answer.json()["fields"] == {
        f"on_existing.{runs['tree']}": [
            f"run 'tree' ({runs['tree']}) is named like the candidate 'tree': choose update (that candidate's "
            "measurements), new (another candidate) or skip"
        ]
    }
    answer = alice.post(f"{base}/imports/", body | {"on_existing": {runs["tree"]: "skip"}}, format="json")
    assert answer.status_code == 400
    listed = ", ".join(f"'{label}'" for label in artifact_classes())
    assert answer.json()["fields"] == {
        "positive": [
            "the prediction artifacts have a score column, which is the positive label's score: name the positive "
            f"label (their classes, in order: {listed})"
        ]
    }
    assert not Measurement.objects.filter(study=built.study, candidate__name__in=list(runs)).exists()

    answer = alice.post(
        f"{base}/imports/", body | {"on_existing": {runs["tree"]: "skip"}, "positive": "benign"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    outcome = answer.json()
    assert (outcome["experiment_id"], outcome["experiment_name"], outcome["runs"]) == (experiment_id, "api-choices", 3)
    assert outcome["skipped"] == [{"run_id": runs["tree"], "name": "tree", "candidate": "tree"}]
    assert outcome["matched"] == [] and sorted(outcome["created"]) == ["knn", "logistic", "naive-bayes"]
    assert len(outcome["changes"]) == 12 and len(outcome["prediction_sets"]) == 3
    record = alice.get(f"{base}/imports/").json()["results"][0]
    assert (record["experiment_id"], record["experiment_name"]) == (experiment_id, "api-choices")
    assert alice.get(f"{base}/imports/{record['id']}/").json()["experiment_name"] == "api-choices"
    assert {s["experiment_name"] for s in alice.get(f"{base}/sources/").json()["results"]} == {"api-choices"}

    # One choice for every such run; a choice that is none of the three is refused.
    answer = alice.post(f"{base}/imports/", body | {"on_existing": "merge", "positive": "benign"}, format="json")
    assert answer.json()["fields"] == {
        "on_existing": ["must be update, new or skip, or an object {run id: update, new or skip}"]
    }
    answer = alice.post(f"{base}/imports/", body | {"on_existing": "update", "positive": "benign"}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["matched"] == [{"run_id": runs["tree"], "name": "tree", "candidate": "tree"}]
    tree_auc = MlflowClient(tracking_uri=mlflow_server).get_run(runs["tree"]).data.metrics["roc_auc"]
    assert Measurement.objects.get(candidate__name="tree", metric__name="AUC").value == tree_auc
