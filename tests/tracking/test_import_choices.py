"""Issue 31, item 4 (MLflow from the page), the services against the real
tracking server: a run named like an existing candidate is asked about
(update, new or skip; matched by name or by a chosen tag), prediction
artifacts with a score column ask for the positive label naming their
classes, the server's experiments are listed by name, and the experiment's
name is kept wherever its id is."""

import numpy as np
import pyarrow as pa
import pytest
from mlflow.tracking import MlflowClient
from pyarrow import parquet
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from evaluation.models import PredictionSet
from tracking import remote, services
from tracking.models import MlflowImport, MlflowRunLink, MlflowValueSource
from workspace import services as workspace_services
from workspace.errors import InvalidInput
from workspace.models import Candidate, Measurement, Phase

from .conftest import log_models
from .test_services import close_and_run

AUC = [{"key": "roc_auc", "metric": "AUC"}]


def artifact_classes():
    """The artifacts' classes in the predictions reader's order: y_true's
    labels as they first appear (log_models' split)."""
    x, y = load_breast_cancer(return_X_y=True)
    y_test = train_test_split(x, y, test_size=0.3, random_state=1, stratify=y)[3]
    first = ["malignant" if label == 0 else "benign" for label in y_test]
    return list(dict.fromkeys(first))


@pytest.fixture(scope="module")
def choices(mlflow_server):
    """The four models logged once to their own experiment of the session's server."""
    return "choices", log_models(mlflow_server, experiment="choices")


def connected(make_study, uri):
    built = make_study(Phase.DRAFT)
    services.connection_set(study=built.study, tracking_uri=uri)
    return built


def importing(study, **overrides):
    arguments = {"study": study, "imported_by": study.designer, "experiment": "choices", "mapping": AUC}
    return services.mlflow_import(**{**arguments, **overrides})


def auc(run_id, uri):
    return MlflowClient(tracking_uri=uri).get_run(run_id).data.metrics["roc_auc"]


def test_a_run_named_like_a_candidate_is_asked_then_updates_it(make_study, mlflow_server, choices, unchanged):
    _, runs = choices
    built = connected(make_study, mlflow_server)
    study = built.study
    workspace_services.candidate_add(study=study, name="logistic", description="typed by hand")
    workspace_services.measurements_set(
        study=study, measurements=[{"candidate": "logistic", "metric": "AUC", "value": 0.5}]
    )
    preview = services.import_preview(study=study, experiment="choices")
    assert preview.named_like == {runs["logistic"]: "logistic"} and preview.linked == {}

    # Before: a second candidate "logistic (149b846f)" without a word. Now: asked, nothing written.
    with unchanged(), pytest.raises(InvalidInput) as refused:
        importing(study)
    assert refused.value.errors == {
        f"on_existing.{runs['logistic']}": [
            f"run 'logistic' ({runs['logistic']}) is named like the candidate 'logistic': choose update (that "
            "candidate's measurements), new (another candidate) or skip"
        ]
    }

    outcome = importing(study, on_existing={runs["logistic"]: "update"})
    assert sorted(outcome.created) == ["knn", "naive-bayes", "tree"]
    assert outcome.matched == [{"run_id": runs["logistic"], "name": "logistic", "candidate": "logistic"}]
    assert outcome.skipped == [] and outcome.runs == 4
    logistic = Candidate.objects.get(study=study, name="logistic")
    assert Measurement.objects.get(candidate=logistic, metric__name="AUC").value == auc(runs["logistic"], mlflow_server)
    assert logistic.description == "typed by hand"
    assert not Candidate.objects.filter(study=study, name__startswith="logistic (").exists()
    assert MlflowRunLink.objects.get(candidate=logistic).run_id == runs["logistic"]
    change = next(c for c in outcome.changes if c["candidate"] == "logistic")
    assert (change["before"], change["value"]) == (0.5, auc(runs["logistic"], mlflow_server))

    # Linked now: imported again without a question, and updating the same candidate.
    again = importing(study)
    assert again.created == [] and again.matched == [] and again.runs == 4
    assert services.import_preview(study=study, experiment="choices").linked[runs["logistic"]] == "logistic"


def test_skip_leaves_the_run_out_and_new_adds_another_candidate(make_study, mlflow_server, choices):
    _, runs = choices
    built = connected(make_study, mlflow_server)
    study = built.study
    workspace_services.candidate_add(study=study, name="tree", description="")
    workspace_services.candidate_add(study=study, name="knn", description="")
    outcome = importing(study, on_existing="skip")
    assert sorted(outcome.created) == ["logistic", "naive-bayes"]
    assert sorted(entry["candidate"] for entry in outcome.skipped) == ["knn", "tree"]
    assert outcome.runs == 2 and len(outcome.changes) == 2
    assert not Measurement.objects.filter(study=study, candidate__name__in=["tree", "knn"], metric__name="AUC").exists()
    assert not MlflowRunLink.objects.filter(run_id__in=[runs["tree"], runs["knn"]]).exists()
    record = MlflowImport.objects.get(pk=outcome.import_id)
    assert (record.runs_total, record.outcome["runs"], len(record.outcome["skipped"])) == (4, 2, 2)

    outcome = importing(study, on_existing={runs["tree"]: "new", runs["knn"]: "skip"})
    assert outcome.created == [f"tree ({runs['tree'][:8]})"]
    assert [entry["name"] for entry in outcome.skipped] == ["knn"]


def test_runs_are_matched_by_a_chosen_tag_and_one_candidate_is_updated_once(
    make_study, mlflow_server, choices, unchanged
):
    _, runs = choices
    built = connected(make_study, mlflow_server)
    study = built.study
    # Each run's "family" tag is its name in capitals (log_models): TREE matches the candidate TREE.
    workspace_services.candidate_add(study=study, name="TREE", description="")
    preview = services.import_preview(study=study, experiment="choices", name_tag="family")
    assert preview.named_like == {runs["tree"]: "TREE"}
    assert services.import_preview(study=study, experiment="choices").named_like == {}
    outcome = importing(study, name_tag="family", on_existing="update")
    assert sorted(outcome.created) == ["KNN", "LOGISTIC", "NAIVE-BAYES"]
    assert Measurement.objects.get(candidate__name="TREE", metric__name="AUC").value == auc(runs["tree"], mlflow_server)

    # In another study, every run (tagged stage=candidate) matches the candidate "candidate": only
    # one may update it (the runs come oldest first: logistic, tree, naive-bayes, knn).
    other = connected(make_study, mlflow_server).study
    workspace_services.candidate_add(study=other, name="candidate", description="")
    with unchanged(), pytest.raises(InvalidInput) as refused:
        importing(other, name_tag="stage", on_existing="update")
    first = runs["logistic"]
    assert refused.value.errors == {
        f"on_existing.{runs[name]}": [
            f"run {name!r} ({runs[name]}) would update the candidate 'candidate', which run 'logistic' ({first}) "
            "updates already: choose new or skip"
        ]
        for name in ("tree", "naive-bayes", "knn")
    }
    outcome = importing(
        other, name_tag="stage", on_existing={first: "update", **dict.fromkeys(list(runs.values())[1:], "new")}
    )
    assert outcome.created == [f"candidate ({runs[name][:8]})" for name in ("tree", "naive-bayes", "knn")]


def test_on_existing_is_checked(make_study, mlflow_server, choices, unchanged):
    built = connected(make_study, mlflow_server)
    cases = [
        ("always", {"on_existing": ["must be update, new or skip, or an object {run id: update, new or skip}"]}),
        (["update"], {"on_existing": ["must be update, new or skip, or an object {run id: update, new or skip}"]}),
        ({"abc": "merge"}, {"on_existing.abc": ["must be update, new or skip"]}),
    ]
    for value, errors in cases:
        with unchanged(), pytest.raises(InvalidInput) as refused:
            importing(built.study, on_existing=value)
        assert refused.value.errors == errors


def test_scores_ask_for_the_positive_label_naming_the_classes(make_study, mlflow_server, choices, unchanged):
    built = connected(make_study, mlflow_server)
    study = built.study
    classes = artifact_classes()
    assert sorted(classes) == ["benign", "malignant"]
    # Before: each run's artifact refused under runs[i].artifact.file ("name the positive label"), and
    # the page had no field for it. Now: one refusal under positive, naming the classes in order.
    with unchanged(), pytest.raises(services.PositiveLabelNeeded) as refused:
        importing(study, artifact_pattern="predictions/*.csv")
    listed = ", ".join(f"'{label}'" for label in classes)
    assert refused.value.errors == {
        "positive": [
            "the prediction artifacts have a score column, which is the positive label's score: "
            f"name the positive label (their classes, in order: {listed})"
        ]
    }
    assert refused.value.classes == classes

    outcome = importing(study, artifact_pattern="predictions/*.csv", positive="benign")
    assert len(outcome.prediction_sets) == 4
    sets = PredictionSet.objects.filter(study=study)
    assert {s.positive_label for s in sets} == {"benign"} and {tuple(s.labels) for s in sets} == {tuple(classes)}


def test_a_parquet_artifact_with_scores_names_its_classes(make_study, tmp_path, settings):
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    uri = f"file:{tmp_path / 'mlruns'}"
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment("scored")
    run_id = client.create_run(experiment_id, run_name="forest").info.run_id
    client.log_metric(run_id, "roc_auc", 0.9)
    table = pa.table(
        {
            "y_true": ["spam", "ham", "spam", "eggs"],
            "y_pred": ["spam", "ham", "ham", "eggs"],
            "score": np.linspace(0, 1, 4),
        }
    )
    parquet.write_table(table, tmp_path / "test.parquet")
    client.log_artifact(run_id, str(tmp_path / "test.parquet"), "predictions")
    study = connected(make_study, uri).study
    with pytest.raises(services.PositiveLabelNeeded) as refused:
        services.mlflow_import(
            study=study, imported_by=None, experiment="scored", mapping=AUC, artifact_pattern="predictions/*.parquet"
        )
    assert refused.value.classes == ["spam", "ham", "eggs"]


def test_the_server_s_experiments_are_listed_by_name(make_study, mlflow_server, choices):
    study = connected(make_study, mlflow_server).study
    client = MlflowClient(tracking_uri=mlflow_server)
    listed, more = services.experiment_list(study=study)
    assert more is False
    every = client.search_experiments()
    assert [(e.experiment_id, e.name) for e in listed] == sorted(
        ((e.experiment_id, e.name) for e in every), key=lambda pair: (pair[1].casefold(), pair[1])
    )
    assert ("0", "Default") in [(e.experiment_id, e.name) for e in listed]
    # As many as the connection's check found ("N experiments found").
    assert len(listed) == study.mlflow_connection.experiment_count
    # A deleted experiment is not offered; at most max_results are read.
    gone = client.create_experiment("choices-deleted")
    client.delete_experiment(gone)
    assert gone not in [e.experiment_id for e in services.experiment_list(study=study)[0]]
    assert len(remote.experiments(services.connection_of(study), 1)) == 1


def test_the_experiment_s_name_is_kept_beside_its_id(make_study, mlflow_server, choices):
    built = connected(make_study, mlflow_server)
    study = built.study
    experiment_id = MlflowClient(tracking_uri=mlflow_server).get_experiment_by_name("choices").experiment_id
    outcome = importing(
        study,
        mapping=[
            *AUC,
            {"key": "accuracy", "metric": "Success rate"},
            {"key": "fold_std", "metric": "Fold stdev"},
            {"key": "fit_seconds", "metric": "Training time"},
        ],
    )
    assert (outcome.experiment_id, outcome.experiment_name) == (experiment_id, "choices")
    record = MlflowImport.objects.get(pk=outcome.import_id)
    assert (record.experiment_name, record.experiment_shown) == ("choices", f"choices (id {experiment_id})")
    assert {(s.experiment_id, s.experiment_name) for s in MlflowValueSource.objects.filter(study=study)} == {
        (experiment_id, "choices")
    }
    assert {link.experiment_name for link in MlflowRunLink.objects.filter(candidate__study=study)} == {"choices"}
    run = close_and_run(built)
    publication = services.mlflow_publish(run=run, published_by=None, run_url="http://approve.test/runs/1/")
    assert publication.experiment_shown == f"choices (id {experiment_id})"
