"""The MLflow link's services against a real tracking server and a local
``file:`` store: connect, preview, import, run, publish, re-import."""

import http.server
import threading

import pytest
from mlflow.tracking import MlflowClient

from engine import services as engine_services
from engine.models import Run
from evaluation.models import PredictionSet
from tests.fixtures import complete_assessment
from tracking import remote, secrets, services
from tracking.models import MlflowConnection, MlflowImport, MlflowRunLink, MlflowValueSource
from tracking.remote import TrackerError
from workspace import services as workspace_services
from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import Measurement, Phase

from .conftest import EXPERIMENT, free_port, log_models

MAPPING = [
    {"key": "accuracy", "metric": "Success rate"},
    {"key": "roc_auc", "metric": "AUC"},
    {"key": "fold_std", "metric": "Fold stdev"},
    {"key": "fit_seconds", "metric": "Training time", "unit": "s"},
]


@pytest.fixture(scope="module")
def logged(mlflow_server):
    """The four models logged once to the session's server: ``{name: run id}``."""
    return log_models(mlflow_server, experiment=f"{EXPERIMENT}-services")


def value_of(candidate, metric):
    return Measurement.objects.get(candidate__name=candidate, metric__name=metric).value


def import_all(study, **overrides):
    arguments = {
        "study": study,
        "imported_by": study.designer,
        "experiment": f"{EXPERIMENT}-services",
        "filter": "tags.stage = 'candidate'",
        "mapping": MAPPING,
        "artifact_pattern": "predictions/*.csv",
        "positive": "benign",
        **overrides,
    }
    return services.mlflow_import(**arguments)


def close_and_run(built):
    study = built.study
    workspace_services.study_open_voting(study=study)
    for username, ballot in {"bob": {"attributes": ["Efficiency"], "metrics": []}}.items():
        workspace_services.votes_set(expert=built.experts[username], **ballot)
    workspace_services.study_close_voting(study=study)
    built.refresh()
    complete_assessment(built)
    workspace_services.study_close_assessment(study=study)
    run = engine_services.run_launch(study=study, launched_by=study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def test_import_run_publish_and_reimport_against_a_real_server(make_study, mlflow_server, logged):
    built = make_study(Phase.DRAFT)
    study = built.study
    connection = services.connection_set(study=study, tracking_uri=mlflow_server + "/", token="s3cret-token")
    assert connection.tracking_uri == mlflow_server
    assert connection.experiment_count >= 2  # Default and ours
    assert "s3cret" not in connection.token_encrypted
    assert secrets.unseal(connection.token_encrypted) == "s3cret-token"

    preview = services.import_preview(
        study=study, experiment=f"{EXPERIMENT}-services", filter="tags.stage = 'candidate'"
    )
    assert sorted(run.name for run in preview.runs) == sorted(logged)
    assert preview.metric_keys == ["accuracy", "fit_seconds", "fold_std", "roc_auc"]
    # A metric at a step, through the server's metric history (logged at steps 0 and 1).
    stored = services.connection_of(study)
    assert remote.metric_at_step(stored, logged["tree"], "accuracy", 0) == 0.5
    tree = next(run for run in preview.runs if run.name == "tree")
    assert remote.metric_at_step(stored, logged["tree"], "accuracy", 1) == tree.metrics["accuracy"] != 0.5
    assert remote.metric_at_step(stored, logged["tree"], "accuracy", 7) is None

    outcome = import_all(study)
    assert sorted(outcome.created) == sorted(logged)
    assert outcome.runs == 4 and outcome.unchanged == 0
    assert len(outcome.changes) == 16 and all(change["before"] is None for change in outcome.changes)
    client = MlflowClient(tracking_uri=mlflow_server)
    for name, run_id in logged.items():
        metrics = client.get_run(run_id).data.metrics
        assert value_of(name, "Success rate") == metrics["accuracy"]
        assert value_of(name, "AUC") == metrics["roc_auc"]
        assert value_of(name, "Training time") == metrics["fit_seconds"]
        source = MlflowValueSource.objects.get(candidate__name=name, metric__name="AUC")
        assert (source.tracking_uri, source.run_id, source.metric_key, source.step) == (
            mlflow_server,
            run_id,
            "roc_auc",
            None,
        )
        assert MlflowRunLink.objects.get(candidate__name=name).run_id == run_id
    sets = PredictionSet.objects.filter(study=study)
    assert sets.count() == 4 and {s.row_count for s in sets} == {171}
    assert MlflowImport.objects.get(pk=outcome.import_id).outcome["created"] == outcome.created

    # The run ranks them; publishing tags each candidate's MLflow run.
    run = close_and_run(built)
    publication = services.mlflow_publish(run=run, published_by=study.designer, run_url="http://approve.test/runs/1/")
    ranked = {entry["name"]: entry for entry in run.results["candidates"]}
    for name, run_id in logged.items():
        tags = client.get_run(run_id).data.tags
        assert tags["approve.rank"] == str(ranked[name]["rank"])
        assert float(tags["approve.cef"]) == ranked[name]["cef"]
        assert tags["approve.vetoed"] == ("true" if ranked[name]["vetoed"] else "false")
        assert tags["approve.study"] == f"Choosing a classifier (study {study.pk})"
        assert tags["approve.run_url"] == "http://approve.test/runs/1/"
    summary = client.get_run(publication.summary_run_id)
    assert summary.data.tags["approve.summary_of"] == f"{study.pk}/{run.pk}"
    assert sorted(a.path for a in client.list_artifacts(publication.summary_run_id, "approve")) == [
        "approve/results.csv",
        "approve/results.json",
    ]
    # Idempotent: the same summary run, recorded twice.
    again = services.mlflow_publish(run=run, published_by=study.designer, run_url="http://approve.test/runs/1/")
    assert (again.summary_run_id, again.times) == (publication.summary_run_id, 2)
    experiment_id = publication.experiment_id
    summaries = client.search_runs([experiment_id], filter_string="tags.`approve.summary_of` != ''")
    assert len(summaries) == 1

    # One metric changes in MLflow: the re-import reports exactly that.
    before = value_of("tree", "AUC")
    client.log_metric(logged["tree"], "roc_auc", 0.5)
    outcome = import_all(study)
    assert outcome.created == [] and outcome.prediction_sets == []
    assert outcome.changes == [
        {
            "candidate": "tree",
            "metric": "AUC",
            "before": before,
            "value": 0.5,
            "run_id": logged["tree"],
            "metric_key": "roc_auc",
        }
    ]
    assert outcome.unchanged == 15
    assert value_of("tree", "AUC") == 0.5


def test_a_chosen_step_and_a_tag_name_the_values_and_candidates(make_study, tmp_path, settings):
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    uri = f"file:{tmp_path / 'mlruns'}"
    runs = log_models(uri)
    study = make_study(Phase.DRAFT).study
    services.connection_set(study=study, tracking_uri=uri)
    outcome = services.mlflow_import(
        study=study,
        imported_by=None,
        experiment=EXPERIMENT,
        mapping=[{"key": "accuracy", "metric": "Success rate"}],
        step=0,
        name_tag="family",
    )
    assert sorted(outcome.created) == sorted(name.upper() for name in runs)
    assert {value_of(name.upper(), "Success rate") for name in runs} == {0.5}
    assert MlflowValueSource.objects.filter(step=0).count() == 4


def test_a_run_named_like_a_candidate_is_asked_about_and_new_gets_the_run_id(make_study, tmp_path, settings, unchanged):
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    uri = f"file:{tmp_path / 'mlruns'}"
    runs = log_models(uri, models={"J48": lambda: __import__("sklearn.naive_bayes").naive_bayes.GaussianNB()})
    study = make_study(Phase.DRAFT).study  # has a typed candidate J48
    services.connection_set(study=study, tracking_uri=uri)
    arguments = {
        "study": study,
        "imported_by": None,
        "experiment": EXPERIMENT,
        "mapping": [{"key": "accuracy", "metric": "AUC"}],
    }
    # Never silently a second J48: asked (it was "J48 (5758d413)" without a word).
    with unchanged(), pytest.raises(InvalidInput) as refused:
        services.mlflow_import(**arguments)
    assert refused.value.errors == {
        f"on_existing.{runs['J48']}": [
            f"run 'J48' ({runs['J48']}) is named like the candidate 'J48': choose update (that candidate's "
            "measurements), new (another candidate) or skip"
        ]
    }
    outcome = services.mlflow_import(**arguments, on_existing="new")
    assert outcome.created == [f"J48 ({runs['J48'][:8]})"]


def test_refusals_write_nothing(make_study, tmp_path, settings, unchanged):
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    uri = f"file:{tmp_path / 'mlruns'}"
    log_models(uri)
    study = make_study(Phase.DRAFT).study
    services.connection_set(study=study, tracking_uri=uri)
    cases = [
        ({"experiment": "nope"}, "experiment", "unknown experiment 'nope'"),
        ({"filter": "tags.stage = "}, "filter", "MLflow refused it"),
        ({"mapping": [{"key": "missing", "metric": "AUC"}]}, "runs[0]", "has no metric 'missing'"),
        (
            {"mapping": [{"key": "fit_seconds", "metric": "Training time", "unit": "ms"}]},
            "mapping[0].unit",
            "measured in s",
        ),
        ({"mapping": [{"key": "roc_auc", "metric": "Nope"}]}, "mapping[0].metric", "no metric named 'Nope'"),
        ({"artifact_pattern": "*.parquet"}, "runs[0].artifact", "no artifact matching"),
        ({"artifact_pattern": "predictions/*.csv", "positive": "nonsense"}, "runs[0].artifact.file", ""),
    ]
    for overrides, field, words in cases:
        arguments = {"experiment": EXPERIMENT, "mapping": [{"key": "roc_auc", "metric": "AUC"}], **overrides}
        with unchanged(), pytest.raises(InvalidInput) as refused:
            services.mlflow_import(study=study, imported_by=None, **arguments)
        assert field in refused.value.errors, (field, refused.value.errors)
        assert words in " ".join(refused.value.errors[field])


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(401)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"unauthorised")

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


def test_unreachable_and_unauthorised_servers_are_named(make_study):
    study = make_study(Phase.DRAFT).study
    port = free_port()
    with pytest.raises(TrackerError) as refused:
        services.connection_set(study=study, tracking_uri=f"http://127.0.0.1:{port}")
    assert refused.value.code == "mlflow_unreachable"
    assert str(refused.value) == remote.UNREACHABLE  # whatever the cause (tests/tracking/test_attacks.py)
    with pytest.raises(TrackerError) as refused:
        services.connection_set(study=study, tracking_uri="http://mlflow.invalid")
    assert str(refused.value) == remote.UNREACHABLE
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(TrackerError) as refused:
            services.connection_set(study=study, tracking_uri=f"http://127.0.0.1:{server.server_port}", token="wrong")
        assert (refused.value.code, str(refused.value)) == ("mlflow_unauthorised", remote.UNAUTHORISED)
    finally:
        server.shutdown()
    assert not MlflowConnection.objects.filter(study=study).exists()
    with pytest.raises(PhaseConflict):
        services.import_preview(study=study, experiment="x")


def test_file_stores_only_under_the_allowed_roots(make_study, tmp_path, settings):
    study = make_study(Phase.DRAFT).study
    settings.TRACKING_FILE_ROOTS = []
    with pytest.raises(InvalidInput) as refused:
        services.connection_set(study=study, tracking_uri=f"file:{tmp_path}")
    assert "TRACKING_FILE_ROOTS" in refused.value.errors["tracking_uri"][0]
    with pytest.raises(InvalidInput):
        services.connection_set(study=study, tracking_uri="ftp://example")
