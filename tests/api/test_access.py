"""Who may do what through the REST API (FORMATS.md, "REST API (version 1)").

The access matrix runs every endpoint of the API (``/api/v1/``) against
four actors, in every phase where the endpoint exists:

- ``anonymous``: 401, with ``WWW-Authenticate: Token``;
- ``charlie``, an outsider: 404 on anything of a study or run, never 403, and
  the same body as for a study that does not exist;
- ``bob``, an expert: reads the setup and his own inputs; 403 for what only
  the designer may do (and for other experts' inputs); 409, saying why, for
  his inputs in the wrong phase;
- ``alice``, the designer: manages the study; 409 for changes the phase
  forbids; 403 on ``my/`` (she is not an expert).

Then: bob on a study he is not a member of (404, like an outsider); no leaks
(an outsider never sees a title, an expert never sees another expert's
private inputs outside the results); lists only list one's own studies;
400 with errors per field; and nothing is written on any error.
"""

import io
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from engine import analyses as engine_analyses
from engine import services as engine_services
from engine.models import Analysis, Run
from evaluation import report
from evaluation import services as evaluation_services
from evaluation.models import ElicitationAnswers, ElicitedMetric, MetricComputation, PredictionSet
from evaluation.predictions import read_predictions
from evaluation.services import prediction_set_import
from tests.evaluation.elicited_fixtures import upload as upload_probabilities
from tests.fixtures import api_error, error_fields
from tracking.models import MlflowConnection, MlflowImport
from workspace import services
from workspace.bundles import study_import_bundle
from workspace.models import ApiToken, Metric, Phase, QualityAttribute, RevisionRound, Study

from .conftest import db_snapshot, finish_run, launch_and_finish

pytestmark = pytest.mark.django_db

PHASES = [Phase.DRAFT, Phase.VOTING, Phase.ASSESSMENT, Phase.CLOSED]
ALL = "all"
API = "/api/v1"
NEXT_PHASE = {Phase.DRAFT: "voting", Phase.VOTING: "assessment", Phase.ASSESSMENT: "closed", Phase.CLOSED: "assessment"}
DIRECT_WEIGHTS = {"method": "direct", "weights": {"Accuracy": 5, "Consistency": 3, "Efficiency": 2}}


@dataclass
class Row:
    """One operation of the API, with the status each member gets per phase.

    ``bob`` and ``alice`` are a status for every phase, or ``{phase: status}``.
    ``body`` is a payload, or ``{phase: payload}`` (marked by ``per_phase``).
    ``check(response, world)`` checks the body of a successful answer.
    """

    id: str
    method: str
    path: str
    bob: object
    alice: object
    body: object = None
    per_phase: bool = False
    phases: tuple = tuple(PHASES)
    check: object = None

    def expected(self, who, phase):
        value = getattr(self, who)
        return value[phase] if isinstance(value, dict) else value

    def payload(self, phase):
        return self.body[phase] if self.per_phase else self.body


def only(phases, ok, otherwise=409):
    """``ok`` in the given phases, ``otherwise`` in the rest."""
    return {phase: ok if phase in phases else otherwise for phase in PHASES}


# --- success checks: a 2xx must carry the right body and have done the right thing ---


def _title(response, world):
    assert response.json()["title"] == world.study.title
    assert response.json()["phase"] == world.study.phase


def _renamed(response, world):
    assert response.json()["title"] == "Renamed study"
    assert Study.objects.get(pk=world.study.pk).title == "Renamed study"


def _deleted(response, world):
    assert response.content == b""
    assert not Study.objects.filter(pk=world.study.pk).exists()


def _exported(response, world):
    bundle = response.json()
    assert bundle["format"] == "approve-study/1"
    assert bundle["title"] == world.study.title
    assert bundle["experts"] == ["bob", "carol"]
    assert [a["name"] for a in bundle["attributes"]] == ["Accuracy", "Consistency", "Efficiency", "Flexibility"]


def _copied(response, world):
    body = response.json()
    assert (body["title"], body["phase"], body["designer"], body["experts"]) == ("A copy", "draft", "alice", [])
    assert response["Location"].endswith(f"/api/v1/studies/{body['id']}/")
    copy = Study.objects.get(pk=body["id"])
    assert list(copy.attributes.order_by("position").values_list("name", flat=True)) == list(
        world.study.attributes.order_by("position").values_list("name", flat=True)
    )
    assert not copy.memberships.filter(role="expert").exists()


def _moved(response, world):
    assert response.json()["phase"] == NEXT_PHASE[world.phase]
    assert Study.objects.get(pk=world.study.pk).phase == NEXT_PHASE[world.phase]


def _members(response, world):
    body = response.json()
    assert body["count"] == 3
    present = {"absence": "", "absence_reason": "", "absent_since": None}  # everyone takes part
    assert body["results"] == [
        {"username": "alice", "role": "designer", "status": "active", **present},
        {"username": "bob", "role": "expert", "status": "active", **present},
        {"username": "carol", "role": "expert", "status": "active", **present},
    ]


def _member_invited(response, world):
    # Someone else is invited, never enrolled (tests/api/test_invitations.py).
    body = response.json()
    assert set(body) == {"invitation", "detail"}
    assert (body["invitation"]["username"], body["invitation"]["status"]) == ("charlie", "pending")
    assert not world.study.memberships.filter(user__username="charlie").exists()
    assert world.study.invitations.filter(username="charlie", status="pending").count() == 1


def _member_bob(response, world):
    assert response.json() == {
        "username": "bob",
        "role": "expert",
        "status": "active",
        "absence": "",
        "absence_reason": "",
        "absent_since": None,
    }


def _one_item(name):
    def check(response, world):
        assert response.json()["name"] == name

    return check


def _member_removed(response, world):
    assert not world.study.memberships.filter(user__username="carol").exists()


def _attributes(response, world):
    results = response.json()["results"]
    assert [a["name"] for a in results] == ["Accuracy", "Consistency", "Efficiency", "Flexibility"]
    fixed = world.phase in (Phase.ASSESSMENT, Phase.CLOSED)
    assert [a["selected"] for a in results] == ([True, True, True, False] if fixed else [None] * 4)


def _attribute_added(response, world):
    body = response.json()
    assert (body["name"], body["kind"]) == ("Robustness", "complementary")
    assert world.study.attributes.filter(name="Robustness").exists()


def _attribute_changed(response, world):
    assert response.json()["description"] == "changed"
    assert world.study.attributes.get(name="Flexibility").description == "changed"


def _attribute_removed(response, world):
    assert not world.study.attributes.filter(name="Flexibility").exists()


def _metrics(response, world):
    results = {m["name"]: m for m in response.json()["results"]}
    assert list(results) == [
        "Success rate",
        "AUC",
        "Cost-weighted accuracy",  # the world's elicited metric (position 99 within Accuracy)
        "Fold stdev",
        "Training time",
        "Flexibility score",
    ]
    assert results["Success rate"]["default_range"] == [0.8, 0.95]
    assert results["AUC"]["default_range"] is None
    assert results["Fold stdev"]["better"] == "lower"


def _metric_added(response, world):
    body = response.json()
    assert (body["name"], body["attribute"], body["default_range"]) == ("Kappa", "Accuracy", [0.2, 0.8])


def _metric_changed(response, world):
    assert response.json()["default_range"] == [0.7, 0.99]
    assert world.study.metrics.get(name="Success rate").default_range == (0.7, 0.99)


def _metric_removed(response, world):
    assert not world.study.metrics.filter(name="Flexibility score").exists()


def _candidates(response, world):
    assert [(c["name"], c["description"]) for c in response.json()["results"]] == [
        ("J48", "J48 learner"),
        ("JRip", "JRip learner"),
    ]


def _candidate_added(response, world):
    assert response.json()["name"] == "NaiveBayes"
    assert world.study.candidates.filter(name="NaiveBayes").exists()


def _candidate_changed(response, world):
    assert response.json()["description"] == "changed"


def _candidate_removed(response, world):
    assert list(world.study.candidates.values_list("name", flat=True)) == ["JRip"]


def _measurements(response, world):
    rows = response.json()["results"]
    assert len(rows) == 10
    assert {"candidate": "J48", "metric": "Success rate", "value": 0.847, "standard_error": None} in rows


def _measurements_set(response, world):
    assert response.json() == [{"candidate": "J48", "metric": "AUC", "value": 0.91}]
    assert world.study.candidates.get(name="J48").measurements.get(metric__name="AUC").value == 0.91


def _my_votes(response, world):
    expected = {Phase.DRAFT: {"attributes": [], "metrics": []}}.get(
        world.phase, {"attributes": ["Efficiency"], "metrics": []}
    )
    assert response.json() == expected


def _votes_set(response, world):
    assert response.json() == {"attributes": ["Flexibility"], "metrics": []}


def _my_priorities(response, world):
    body = response.json()
    if world.phase == Phase.CLOSED:  # bob's inputs of complete_assessment
        assert body["method"] == "direct"
        assert body["weights"] == {"Accuracy": 50, "Consistency": 30, "Efficiency": 20}
        assert body["result"]["weights"] == pytest.approx({"Accuracy": 0.5, "Consistency": 0.3, "Efficiency": 0.2})
    else:
        assert body == {"method": None, "result": None}


def _priorities_set(response, world):
    body = response.json()
    assert body["method"] == "direct"
    assert body["result"]["weights"] == pytest.approx({"Accuracy": 0.5, "Consistency": 0.3, "Efficiency": 0.2})
    assert body["result"]["consistency_ratio"] is None


def _my_ranges(response, world):
    assert response.json() == ({"AUC": [0.7, 0.95]} if world.phase == Phase.CLOSED else {})


def _no_ranges_to_confirm(response, world):
    assert response.json() == {"to_confirm": []}  # no metric of the world is elicited


def _ranges_set(response, world):
    assert response.json() == {"AUC": [0.6, 0.9]}


def _my_peer_weights(response, world):
    assert response.json() == ({"bob": 0.6, "carol": 0.4} if world.phase == Phase.CLOSED else {})


def _peer_weights_set(response, world):
    assert response.json() == {"bob": 0.5, "carol": 0.5}


def _inputs_of(username):
    def check(response, world):
        body = response.json()
        assert set(body) == {"votes", "priorities", "ranges", "peer_weights"}
        if world.phase == Phase.CLOSED:
            expected = {"bob": {"bob": 0.6, "carol": 0.4}, "carol": {"bob": 0.5, "carol": 0.5}}[username]
            assert body["peer_weights"] == expected
        if world.phase != Phase.DRAFT:
            assert body["votes"]["attributes"] == (["Efficiency"] if username == "bob" else [])

    return check


def _runs(response, world):
    body = response.json()
    if world.phase == Phase.CLOSED:
        # newest first: the second run (to compare with), then world.run
        assert body["count"] == 2
        assert [r["id"] for r in body["results"]] == [world.ids["other_run"], world.run.pk]
        assert body["results"][1]["status"] == "succeeded"
    else:
        assert body == {"count": 0, "next": None, "previous": None, "results": []}


def _history(response, world):
    body = response.json()
    # the study's creation at least; every record of the study, none of another's
    assert body["count"] >= 1
    assert {row["kind"] for row in body["results"]} >= {"study"} or body["count"] > len(body["results"])
    assert all(row["expert"] in (None, "bob", "carol") for row in body["results"]), {
        r["expert"] for r in body["results"]
    }


def _launched(response, world):
    body = response.json()
    assert body["status"] == "queued" and body["launched_by"] == "alice"
    assert response["Location"].endswith(f"/api/v1/runs/{body['id']}/")


def _run(response, world):
    body = response.json()
    assert (body["id"], body["study"], body["status"]) == (world.run.pk, world.study.pk, "succeeded")


def _results(response, world):
    document = response.json()
    assert document["format"] == "approve-results/1"
    assert document["run"] == world.run.pk
    assert {c["name"] for c in document["candidates"]} == {"J48", "JRip"}


def _results_csv(response, world):
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="approve-run-{world.run.pk}-results.csv"'
    lines = response.content.decode("utf-8-sig").splitlines()
    assert lines[0].startswith("rank,name,cef,weighted_score,vetoed,veto_reasons,")
    assert {line.split(",")[1] for line in lines[1:]} == {"J48", "JRip"}


def _compared(response, world):
    body = response.json()
    # the earlier run is "before"
    assert (body["before"]["id"], body["after"]["id"]) == (world.run.pk, world.ids["other_run"])
    assert {m["name"] for m in body["candidates"]} == {"J48", "JRip"}
    assert all(m["status"] == "same" and m["cef_delta"] == 0 for m in body["candidates"])
    assert (body["moved"], body["changes"], body["changes_total"]) == (0, [], 0)


def _scores(response, world):
    scores = response.json()
    assert set(scores) == {"bob", "carol"}
    assert set(scores["bob"]) == {"Success rate", "AUC", "Fold stdev", "Training time"}


PREDICTIONS = (
    b"candidate,fold,y_true,y_pred,score\n"
    b"J48,1,spam,spam,0.9\nJ48,2,ham,spam,0.6\nJRip,1,spam,ham,0.4\nJRip,2,ham,ham,0.1\n"
)


@dataclass(frozen=True)
class Upload:
    """A multipart body with a prediction file, made afresh for each request
    (an uploaded file is read once)."""

    fields: dict

    def data(self):
        return {"file": SimpleUploadedFile("holdout.csv", PREDICTIONS, content_type="text/csv"), **self.fields}


def predictions_add(study, name="holdout.csv"):
    return prediction_set_import(
        study=study, stream=io.BytesIO(PREDICTIONS), name=name, uploaded_by=study.designer, positive="spam"
    )


def prediction_set_out(prediction_set, **changes):
    """The representation of a set of ``PREDICTIONS``, but for ``uploaded_at``
    (see ``without_time``)."""
    return {
        "id": prediction_set.pk,
        "name": "holdout.csv",
        "uploaded_by": "alice",
        "positive": "spam",
        "labels": ["spam", "ham"],
        "folds": ["1", "2"],
        "context_columns": [],
        "rows": 4,
        "bytes": len(PREDICTIONS),
        "candidates": [
            {"name": "J48", "instances": 2, "columns": ["y_pred", "score", "fold"]},
            {"name": "JRip", "instances": 2, "columns": ["y_pred", "score", "fold"]},
        ],
        **changes,
    }


def without_time(body):
    return {key: value for key, value in body.items() if key != "uploaded_at"}


def _prediction_sets(response, world):
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (2, None, None)
    assert without_time(body["results"][0]) == prediction_set_out(world.prediction_set)
    # the elicited metric's set (the world's first)
    assert (body["results"][1]["id"], body["results"][1]["name"]) == (world.ids["proba_set"], "tumours.csv")


def _prediction_set(response, world):
    assert without_time(response.json()) == prediction_set_out(world.prediction_set)


def _prediction_set_uploaded(response, world):
    uploaded = PredictionSet.objects.get(pk=response.json()["id"])
    assert without_time(response.json()) == prediction_set_out(uploaded, name="second")
    assert world.study.prediction_sets.count() == 3  # the world's two, and this one


def _prediction_set_deleted(response, world):
    assert response.content == b""
    # the elicited metric's set stays (its deletion is refused while the metric uses it)
    assert list(world.study.prediction_sets.values_list("pk", flat=True)) == [world.ids["proba_set"]]


def _elicitation(response, world):
    assert response.json() == {
        "metric": "Cost-weighted accuracy",
        "kind": "diagonal",
        "prediction_set": world.ids["proba_set"],
        "reference_candidate": "JRip",
        "epsilon": 0.2,
        "labels": ["tumour A", "tumour B", "tumour C"],
    }


def _elicitation_set(response, world):
    assert response.json()["reference_candidate"] == "J48"
    elicited = ElicitedMetric.objects.get(metric_id=world.ids["elicited"])
    assert (elicited.reference_candidate.name, elicited.epsilon) == ("J48", 0.05)


def _elicitation_removed(response, world):
    assert not ElicitedMetric.objects.filter(metric_id=world.ids["elicited"]).exists()


def _progress(response, world):
    answered = 1 if world.phase == Phase.ASSESSMENT else 0
    assert response.json() == [
        {"expert": "bob", "answered": answered, "total": 24, "finished": False, "consistent": None, "weights": None},
        {"expert": "carol", "answered": 0, "total": 24, "finished": False, "consistent": None, "weights": None},
    ]


def _my_elicitation(response, world):
    body = response.json()
    answered = 1 if world.phase == Phase.ASSESSMENT else 0
    assert (body["metric"], body["answered"], body["total"]) == ("Cost-weighted accuracy", answered, 24)
    assert body["question"]["number"] == answered + 1


def _answered(response, world):
    assert response.json()["answers"] == "12"
    assert ElicitationAnswers.objects.get(expert=world.built.bob).answers == "12"


def _answers_are(answers):
    def check(response, world):
        assert response.json()["answers"] == answers
        assert ElicitationAnswers.objects.get(expert=world.built.bob).answers == answers

    return check


def _computation(response, world):
    assert response.json() == {
        "computation": "accuracy",
        "name": "Accuracy (success rate)",
        "definition": "the share of instances whose predicted label is the true one",
        "parameters": {"threshold_method": "max_kappa"},
    }


def _computation_set(response, world):
    assert response.json()["computation"] == "balanced_accuracy"
    mapping = MetricComputation.objects.get(metric=world.built.metrics["Success rate"])
    assert (mapping.computation, mapping.parameters) == ("balanced_accuracy", {"threshold_method": "fixed"})


def _computation_removed(response, world):
    assert response.content == b""
    assert list(MetricComputation.objects.filter(metric__study=world.study).values_list("metric__name")) == [("AUC",)]


def _catalogue(response, world):
    assert [entry["key"] for entry in response.json()] == list(report.COMPUTATIONS)


def _computed(response, world):
    # Each candidate has one instance right out of two.
    assert response.json() == {
        "computed": [
            {
                "metric": "Success rate",
                "candidate": name,
                "before": before,
                "value": 0.5,
                "prediction_set": "holdout.csv",
            }
            for name, before in (("J48", 0.847), ("JRip", 0.865))
        ],
        "not_computed": [],
    }
    assert set(world.study.measurements.filter(metric__name="Success rate").values_list("value", flat=True)) == {0.5}


def _sources(response, world):
    body = response.json()
    assert body["count"] == 2
    assert [{k: v for k, v in row.items() if k != "computed_at"} for row in body["results"]] == [
        {
            "candidate": name,
            "metric": "AUC",
            "prediction_set": "holdout.csv",
            "prediction_set_id": world.prediction_set.pk,
            "computation": "roc_auc",
            "parameters": {},
            "value": 1.0,  # each ranks its positive above its negative
            "edited": False,
        }
        for name in ("J48", "JRip")
    ]


def _evaluation(response, world):
    assert response.json() == report.evaluation_document(read_predictions(io.BytesIO(PREDICTIONS), positive="spam"))


def _robustness(response, world):
    body = response.json()
    document = world.run.results
    assert body["winner"] == document["candidates"][0]["name"]
    kinds = [(w["kind"], w["name"]) for w in body["weights"]]
    assert kinds == [("attribute", a) for a in document["selected_attributes"]] + [
        ("metric", m) for m in document["metrics"]
    ]
    for weight in body["weights"]:
        assert weight["ranking"][0] <= weight["share"] <= weight["ranking"][1]
        assert weight["winner"][0] <= weight["share"] <= weight["winner"][1]


def _what_if(response, world):
    body = response.json()
    # Accuracy's weight set to 2, the others kept as in the run, then normalised
    stored = dict(zip(world.run.results["selected_attributes"], world.run.results["attribute_weights"], strict=True))
    others = sum(w for name, w in stored.items() if name != "Accuracy")
    assert body["attribute_weights"] == pytest.approx(
        {name: (2 if name == "Accuracy" else w) / (2 + others) for name, w in stored.items()}
    )
    assert {c["name"] for c in body["candidates"]} == {"J48", "JRip"}
    assert [c["rank"] for c in body["candidates"]] in ([1, 2], [1, 1])


def _analyses(response, world):
    body = response.json()
    assert [a["id"] for a in body["results"]] == [world.analysis.pk]
    assert body["results"][0]["summary"]["rows"][0]["expert"] in ("bob", "carol")


def _analysis_launched(response, world):
    body = response.json()
    assert (body["kind"], body["status"], body["launched_by"]) == ("leave_one_out", "queued", "alice")
    assert response["Location"].endswith(f"/api/v1/analyses/{body['id']}/")


def _analysis(response, world):
    body = response.json()
    assert (body["id"], body["run"], body["status"]) == (world.analysis.pk, world.run.pk, "succeeded")
    assert [row["expert"] for row in body["summary"]["rows"]] == ["bob", "carol"]


def _analysis_cancel_refused(response, world):
    raise AssertionError("a finished analysis cannot be cancelled")


def _analysis_csv(response, world):
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    lines = response.content.decode().splitlines()
    assert lines[0] == "expert_left_out,winner,top_three,kendall_tau,changes_winner"
    assert [line.split(",")[0] for line in lines[1:]] == ["bob", "carol"]


def _rounds(response, world):
    expected = [1] if world.phase == Phase.CLOSED else []
    assert [r["number"] for r in response.json()] == expected


def _round_opened(response, world):
    body = response.json()
    assert (body["number"], body["message"], body["is_open"]) == (1, "Check units", True)
    assert [row["expert"] for row in body["responses"]] == ["bob", "carol"]
    assert world.study.rounds.get().is_open


def _round_status(response, world):
    body = response.json()
    assert body["number"] == 1 and body["is_open"] is False
    # the designer reads who responded; an expert only their own responses
    assert body["responses"] is None or [r["expert"] for r in body["responses"]] == ["bob", "carol"]
    assert body["mine"] is None or body["mine"] == []


S = API + "/studies/{study}"
# An empty local MLflow store the designer may connect to (made by the world fixture).
MLFLOW_STORE = Path(tempfile.gettempdir()) / "approve-access-mlruns"


def _mlflow_not_connected(response, world):
    assert response.json()["connected"] is False and response.json()["tracking_uri"] is None


def _mlflow_connected(response, world):
    body = response.json()
    assert (body["connected"], body["tracking_uri"], body["experiment_count"]) == (True, f"file:{MLFLOW_STORE}", 0)
    assert MlflowConnection.objects.get(study=world.study).tracking_uri == f"file:{MLFLOW_STORE}"


def _mlflow_disconnected(response, world):
    assert not MlflowConnection.objects.filter(study=world.study).exists()


def _mlflow_unpublished(response, world):
    assert response.json()["published"] is False and response.json()["run"] == world.run.pk


def _one_failed_import(response, world):
    assert [(r["id"], r["experiment_id"]) for r in response.json()["results"]] == [(world.ids["mlflow_import"], "7")]


def _failed_import(response, world):
    body = response.json()
    assert (body["id"], body["status"], body["runs_read"], body["runs_total"]) == (
        world.ids["mlflow_import"],
        "failed",
        3,
        60,
    )
    assert body["outcome"] is None and body["error"]["code"] == "mlflow_unreachable"


def _empty_list(response, world):
    assert response.json()["count"] == 0 and response.json()["results"] == []


ROWS = [
    Row("study-get", "get", S + "/", 200, 200, check=_title),
    Row("study-patch", "patch", S + "/", 403, 200, body={"title": "Renamed study"}, check=_renamed),
    Row("study-delete", "delete", S + "/", 403, 204, check=_deleted),
    Row("export", "get", S + "/export/", 403, 200, check=_exported),
    Row("study-copy", "post", S + "/copy/", 403, 201, body={"title": "A copy"}, check=_copied),
    Row(
        "transition",
        "post",
        S + "/transitions/",
        403,
        # Assessment cannot close: the experts have given no inputs yet.
        {Phase.DRAFT: 200, Phase.VOTING: 200, Phase.ASSESSMENT: 409, Phase.CLOSED: 200},
        body={phase: {"to": to} for phase, to in NEXT_PHASE.items()},
        per_phase=True,
        check=_moved,
    ),
    Row("members-get", "get", S + "/members/", 200, 200, check=_members),
    Row(
        "members-post",
        "post",
        S + "/members/",
        403,
        only([Phase.DRAFT], 202),
        body={"username": "charlie"},
        check=_member_invited,
    ),
    Row("member-get", "get", S + "/members/bob/", 200, 200, check=_member_bob),
    Row("attribute-get", "get", S + "/attributes/{attribute}/", 200, 200, check=_one_item("Flexibility")),
    Row("metric-get", "get", S + "/metrics/{metric}/", 200, 200, check=_one_item("Success rate")),
    Row("candidate-get", "get", S + "/candidates/{candidate}/", 200, 200, check=_one_item("J48")),
    Row("member-delete", "delete", S + "/members/carol/", 403, only([Phase.DRAFT], 204), check=_member_removed),
    Row("attributes-get", "get", S + "/attributes/", 200, 200, check=_attributes),
    Row(
        "attributes-post",
        "post",
        S + "/attributes/",
        403,
        only([Phase.DRAFT], 201),
        body={"name": "Robustness", "kind": "complementary"},
        check=_attribute_added,
    ),
    Row(
        "attribute-patch",
        "patch",
        S + "/attributes/{attribute}/",
        403,
        only([Phase.DRAFT], 200),
        body={"description": "changed"},
        check=_attribute_changed,
    ),
    Row(
        "attribute-delete",
        "delete",
        S + "/attributes/{attribute}/",
        403,
        only([Phase.DRAFT], 204),
        check=_attribute_removed,
    ),
    Row("metrics-get", "get", S + "/metrics/", 200, 200, check=_metrics),
    Row(
        "metrics-post",
        "post",
        S + "/metrics/",
        403,
        only([Phase.DRAFT], 201),
        body={"name": "Kappa", "attribute": "Accuracy", "default_range": [0.2, 0.8]},
        check=_metric_added,
    ),
    # A default range may change until assessment starts (experts fall back on it).
    Row(
        "metric-patch",
        "patch",
        S + "/metrics/{metric}/",
        403,
        only([Phase.DRAFT, Phase.VOTING], 200),
        body={"default_range": [0.7, 0.99]},
        check=_metric_changed,
    ),
    Row(
        "metric-delete",
        "delete",
        S + "/metrics/{unvoted_metric}/",
        403,
        only([Phase.DRAFT], 204),
        check=_metric_removed,
    ),
    Row("candidates-get", "get", S + "/candidates/", 200, 200, check=_candidates),
    # Candidates and measurements are the designer's, in any phase.
    Row("candidates-post", "post", S + "/candidates/", 403, 201, body={"name": "NaiveBayes"}, check=_candidate_added),
    Row(
        "candidate-patch",
        "patch",
        S + "/candidates/{candidate}/",
        403,
        200,
        body={"description": "changed"},
        check=_candidate_changed,
    ),
    Row("candidate-delete", "delete", S + "/candidates/{candidate}/", 403, 204, check=_candidate_removed),
    Row("measurements-get", "get", S + "/measurements/", 200, 200, check=_measurements),
    Row(
        "measurements-put",
        "put",
        S + "/measurements/",
        403,
        200,
        body=[{"candidate": "J48", "metric": "AUC", "value": 0.91}],
        check=_measurements_set,
    ),
    Row("votes-get", "get", S + "/my/votes/", 200, 403, check=_my_votes),
    Row(
        "votes-put",
        "put",
        S + "/my/votes/",
        only([Phase.VOTING], 200),
        403,
        body={"attributes": ["Flexibility"], "metrics": []},
        check=_votes_set,
    ),
    Row("rounds-get", "get", S + "/rounds/", 200, 200, check=_rounds),
    Row(
        "rounds-post",
        "post",
        S + "/rounds/",
        403,
        only([Phase.ASSESSMENT], 201),
        body={"message": "Check units"},
        check=_round_opened,
    ),
    Row("round-get", "get", S + "/rounds/1/", 200, 200, phases=(Phase.CLOSED,), check=_round_status),
    # No round is open in the world: closing, the feedback and responding say so.
    Row("round-close", "post", S + "/rounds/close/", 403, 409),
    Row("round-feedback", "get", S + "/rounds/feedback/", 404, 403),
    Row("round-respond", "post", S + "/rounds/feedback/", 409, 403, body={"step": "ranges"}),
    Row("priorities-get", "get", S + "/my/priorities/", 200, 403, check=_my_priorities),
    Row(
        "priorities-put",
        "put",
        S + "/my/priorities/",
        only([Phase.ASSESSMENT], 200),
        403,
        body=DIRECT_WEIGHTS,
        check=_priorities_set,
    ),
    Row("ranges-get", "get", S + "/my/ranges/", 200, 403, check=_my_ranges),
    Row("ranges-to-confirm-get", "get", S + "/my/ranges/to-confirm/", 200, 403, check=_no_ranges_to_confirm),
    Row(
        "ranges-put",
        "put",
        S + "/my/ranges/",
        only([Phase.ASSESSMENT], 200),
        403,
        body={"AUC": [0.6, 0.9]},
        check=_ranges_set,
    ),
    Row("peer-weights-get", "get", S + "/my/peer-weights/", 200, 403, check=_my_peer_weights),
    Row(
        "peer-weights-put",
        "put",
        S + "/my/peer-weights/",
        only([Phase.ASSESSMENT], 200),
        403,
        body={"bob": 0.5, "carol": 0.5},
        check=_peer_weights_set,
    ),
    # Only the designer reads an expert's inputs, even the expert's own here.
    Row("inputs-own", "get", S + "/inputs/bob/", 403, 200, check=_inputs_of("bob")),
    Row("inputs-other", "get", S + "/inputs/carol/", 403, 200, check=_inputs_of("carol")),
    # Predictions: members read, the designer uploads and deletes, in any phase.
    Row("predictions-get", "get", S + "/predictions/", 200, 200, check=_prediction_sets),
    Row(
        "predictions-post",
        "post",
        S + "/predictions/",
        403,
        201,
        body=Upload({"positive": "spam", "name": "second"}),
        check=_prediction_set_uploaded,
    ),
    Row("prediction-get", "get", S + "/predictions/{prediction_set}/", 200, 200, check=_prediction_set),
    Row("prediction-delete", "delete", S + "/predictions/{prediction_set}/", 403, 204, check=_prediction_set_deleted),
    Row("prediction-evaluation", "get", S + "/predictions/{prediction_set}/evaluation/", 200, 200, check=_evaluation),
    # Metrics computed from predictions: members read, the designer maps and computes, in any phase.
    Row("computation-get", "get", S + "/metrics/{metric}/computation/", 200, 200, check=_computation),
    Row(
        "computation-put",
        "put",
        S + "/metrics/{metric}/computation/",
        403,
        200,
        body={"computation": "balanced_accuracy", "parameters": {"threshold_method": "fixed"}},
        check=_computation_set,
    ),
    Row("computation-delete", "delete", S + "/metrics/{metric}/computation/", 403, 204, check=_computation_removed),
    Row("computations-get", "get", S + "/computations/", 200, 200, check=_catalogue),
    # Elicited metrics: members read the design, the designer sets it until the assessment closes and
    # sees the progress; only the expert answers their own questions, in the assessment.
    Row("elicitation-get", "get", S + "/metrics/{elicited}/elicitation/", 200, 200, check=_elicitation),
    Row(
        "elicitation-put",
        "put",
        S + "/metrics/{elicited}/elicitation/",
        403,
        # In the assessment only a selected metric's design changes: the world's is not selected.
        {**only([Phase.DRAFT, Phase.VOTING], 200), Phase.ASSESSMENT: 400},
        body=lambda w: {"kind": "diagonal", "prediction_set": w.ids["proba_set"], "reference_candidate": "J48"},
        check=_elicitation_set,
    ),
    Row(
        "elicitation-delete",
        "delete",
        S + "/metrics/{elicited}/elicitation/",
        403,
        only([Phase.DRAFT, Phase.VOTING, Phase.ASSESSMENT], 204),
        check=_elicitation_removed,
    ),
    Row("elicitation-progress", "get", S + "/metrics/{elicited}/elicitation/progress/", 403, 200, check=_progress),
    Row("my-elicitation", "get", S + "/my/elicitation/{elicited}/", 200, 403, check=_my_elicitation),
    Row(
        "my-elicitation-answer",
        "post",
        S + "/my/elicitation/{elicited}/answers/",
        only([Phase.ASSESSMENT], 200),
        403,
        body={"answer": "second"},
        check=_answered,
    ),
    Row(
        # Nothing is finished in the world, so a typed ratio is refused (400, the field named).
        "my-elicitation-ratio",
        "post",
        S + "/my/elicitation/{elicited}/ratio/",
        only([Phase.ASSESSMENT], 400),
        403,
        body={"class_label": "B", "ratio": 5},
    ),
    Row(
        "my-elicitation-back",
        "post",
        S + "/my/elicitation/{elicited}/back/",
        only([Phase.ASSESSMENT], 200),
        403,
        check=_answers_are(""),
    ),
    Row(
        "my-elicitation-reset",
        "post",
        S + "/my/elicitation/{elicited}/reset/",
        only([Phase.ASSESSMENT], 200),
        403,
        check=_answers_are(""),
    ),
    Row(
        "measurements-compute",
        "post",
        S + "/measurements/compute/",
        403,
        200,
        body={"metrics": ["Success rate"]},
        check=_computed,
    ),
    Row("measurement-sources", "get", S + "/measurements/sources/", 200, 200, check=_sources),
    Row("runs-get", "get", S + "/runs/", 200, 200, check=_runs),
    Row("history-get", "get", S + "/history/", 200, 200, check=_history),
    Row("runs-post", "post", S + "/runs/", 403, only([Phase.CLOSED], 202), check=_launched),
    Row("run-get", "get", API + "/runs/{run}/", 200, 200, phases=(Phase.CLOSED,), check=_run),
    Row("run-results", "get", API + "/runs/{run}/results/", 200, 200, phases=(Phase.CLOSED,), check=_results),
    Row(
        "run-scores", "get", API + "/runs/{run}/candidates/J48/scores/", 200, 200, phases=(Phase.CLOSED,), check=_scores
    ),
    Row(
        "run-results-csv", "get", API + "/runs/{run}/results.csv", 200, 200, phases=(Phase.CLOSED,), check=_results_csv
    ),
    Row(
        "run-compare",
        "get",
        API + "/runs/{run}/compare/{other_run}/",
        200,
        200,
        phases=(Phase.CLOSED,),
        check=_compared,
    ),
    Row("run-robustness", "get", API + "/runs/{run}/robustness/", 200, 200, phases=(Phase.CLOSED,), check=_robustness),
    Row(
        "run-what-if",
        "post",
        API + "/runs/{run}/robustness/what-if/",
        200,
        200,
        body={"attribute_weights": {"Accuracy": 2}},
        phases=(Phase.CLOSED,),
        check=_what_if,
    ),
    Row("run-analyses", "get", API + "/runs/{run}/analyses/", 200, 200, phases=(Phase.CLOSED,), check=_analyses),
    Row(
        "run-analyses-post",
        "post",
        API + "/runs/{run}/analyses/",
        403,
        202,
        body={"kind": "leave_one_out"},
        phases=(Phase.CLOSED,),
        check=_analysis_launched,
    ),
    Row("analysis-get", "get", API + "/analyses/{analysis}/", 200, 200, phases=(Phase.CLOSED,), check=_analysis),
    Row(
        "analysis-cancel",
        "post",
        API + "/analyses/{analysis}/cancel/",
        403,
        409,
        phases=(Phase.CLOSED,),
        check=_analysis_cancel_refused,
    ),
    Row(
        "analysis-csv",
        "get",
        API + "/analyses/{analysis}/result.csv",
        200,
        200,
        phases=(Phase.CLOSED,),
        check=_analysis_csv,
    ),
    # MLflow: the designer connects, previews, imports and publishes in any phase; members read the provenance.
    Row("mlflow-connection-get", "get", S + "/mlflow/connection/", 403, 200, check=_mlflow_not_connected),
    Row(
        "mlflow-connection-put",
        "put",
        S + "/mlflow/connection/",
        403,
        200,
        body={"tracking_uri": f"file:{MLFLOW_STORE}"},
        check=_mlflow_connected,
    ),
    Row("mlflow-connection-delete", "delete", S + "/mlflow/connection/", 403, 204, check=_mlflow_disconnected),
    Row("mlflow-experiments", "get", S + "/mlflow/experiments/", 403, 409),
    Row("mlflow-runs", "get", S + "/mlflow/runs/?experiment=candidates", 403, 409),
    Row("mlflow-imports-get", "get", S + "/mlflow/imports/", 403, 200, check=_one_failed_import),
    Row("mlflow-import-get", "get", S + "/mlflow/imports/{mlflow_import}/", 403, 200, check=_failed_import),
    Row(
        "mlflow-imports-post",
        "post",
        S + "/mlflow/imports/",
        403,
        409,
        body={"experiment": "candidates", "mapping": [{"key": "auc", "metric": "AUC"}]},
    ),
    Row("mlflow-sources", "get", S + "/mlflow/sources/", 200, 200, check=_empty_list),
    Row(
        "mlflow-publication-get",
        "get",
        API + "/runs/{run}/mlflow/",
        200,
        200,
        phases=(Phase.CLOSED,),
        check=_mlflow_unpublished,
    ),
    Row("mlflow-publication-post", "post", API + "/runs/{run}/mlflow/", 403, 409, phases=(Phase.CLOSED,)),
]
CASES = [pytest.param(row, phase, id=f"{row.id}-{phase}") for row in ROWS for phase in row.phases]


def leave_one_out(run, user):
    """A finished leave-one-expert-out analysis of the run."""
    analysis = engine_analyses.analysis_launch(run=run, kind=Analysis.Kind.LEAVE_ONE_OUT, launched_by=user)
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        engine_analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    assert analysis.status == Analysis.Status.SUCCEEDED
    return analysis


@dataclass
class World:
    """A study of alice (experts bob and carol) in ``phase`` with a
    prediction set, Success rate to be computed as accuracy and AUC computed
    as ROC AUC from it; closed studies have one succeeded run."""

    phase: str
    study: Study
    built: object
    run: Run | None = None
    analysis: Analysis | None = None
    prediction_set: PredictionSet | None = None
    ids: dict = field(default_factory=dict)

    def url(self, template):
        return template.format(**self.ids)


@pytest.fixture
def world(make_study, cast, settings):
    MLFLOW_STORE.mkdir(exist_ok=True)
    settings.TRACKING_FILE_ROOTS = [str(MLFLOW_STORE)]

    def build(phase):
        built = make_study(phase)
        run = launch_and_finish(built, cast.alice) if phase == Phase.CLOSED else None
        # a second run of the same inputs, to compare the first with
        other_run = launch_and_finish(built, cast.alice) if phase == Phase.CLOSED else None
        analysis = leave_one_out(run, cast.alice) if run else None
        # The elicited metric's set first, so that the other is every candidate's newest.
        proba_set = upload_probabilities(built.study)
        if phase == Phase.CLOSED:  # a round kept from the assessment
            RevisionRound.objects.create(
                study=built.study, number=1, opened_by=cast.alice, closed_at=timezone.now(), snapshot={}
            )
        prediction_set = predictions_add(built.study)
        evaluation_services.metric_computation_set(
            metric=built.metrics["Success rate"], computation="accuracy", parameters={"threshold_method": "max_kappa"}
        )
        evaluation_services.metric_computation_set(metric=built.metrics["AUC"], computation="roc_auc")
        evaluation_services.measurements_compute(study=built.study, metrics=["AUC"])
        # An elicited metric (written directly: a metric is added in the draft only), not
        # selected, so that runs are unchanged; bob has answered its first question.
        elicited = Metric.objects.create(
            study=built.study, attribute=built.attributes["Accuracy"], name="Cost-weighted accuracy", position=99
        )
        ElicitedMetric.objects.create(
            metric=elicited,
            kind="diagonal",
            prediction_set=proba_set,
            reference_candidate=built.candidates["JRip"],  # J48 is the candidate the matrix deletes
            epsilon=0.2,
        )
        if phase == Phase.ASSESSMENT:
            ElicitationAnswers.objects.create(elicited_metric=elicited.elicitation, expert=built.bob, answers="1")
        # A queued MLflow import that failed (the server went away after 3 of its 60 runs).
        failed_import = MlflowImport.objects.create(
            study=built.study,
            imported_at=timezone.now(),
            experiment_id="7",
            status=MlflowImport.Status.FAILED,
            runs_total=60,
            runs_read=3,
            error={"code": "mlflow_unreachable", "detail": "The MLflow server did not answer.", "fields": {}},
        )
        ids = {
            "mlflow_import": failed_import.pk,
            "study": built.study.pk,
            "attribute": built.attributes["Flexibility"].pk,
            "metric": built.metrics["Success rate"].pk,
            "unvoted_metric": built.metrics["Flexibility score"].pk,
            "candidate": built.candidates["J48"].pk,
            "run": run.pk if run else 0,
            "other_run": other_run.pk if other_run else 0,
            "prediction_set": prediction_set.pk,
            "analysis": analysis.pk if analysis else 0,
            "elicited": elicited.pk,
            "proba_set": proba_set.pk,
        }
        return World(
            phase=phase,
            study=built.study,
            built=built,
            run=run,
            analysis=analysis,
            prediction_set=prediction_set,
            ids=ids,
        )

    return build


def send(client, method, url, body=None):
    if body is None:
        return getattr(client, method)(url)
    if isinstance(body, Upload):
        return getattr(client, method)(url, body.data(), format="multipart")
    return getattr(client, method)(url, body, format="json")


def assert_refusal(response, status, row, phase):
    """The body of every refusal says what happened."""
    assert response["Content-Type"].startswith("application/json"), response.content
    detail = response.json()["detail"]
    if status == 401:
        assert response["WWW-Authenticate"] == "Token"
        assert detail == "Authentication credentials were not provided."
    elif status == 409 and row.id.startswith("mlflow"):
        # Not connected: said in words.
        assert "MLflow" in detail, detail
    elif row.id.startswith("round-") and status in (404, 409) and "phase" not in detail and "study" not in detail:
        assert detail.startswith("No revision round is open"), detail
    elif status == 404:
        assert detail == (
            "No such run."
            if "/runs/{run}" in row.path
            else "No such analysis."
            if "/analyses/{analysis}" in row.path
            else "No such study."
        )
    elif status == 403:
        assert "designer" in detail or "not an expert" in detail, detail
    elif status == 409 and row.id == "analysis-cancel":
        assert detail.startswith("Analysis ") and detail.endswith(" has already succeeded."), detail
    elif status == 409 and row.id == "transition":
        # The body says why: what is missing.
        assert detail.startswith("Assessment cannot close, inputs are missing: bob: prioritisation"), detail
    elif status == 409:
        # The body says why: the phase the study is in.
        assert f"{phase} phase" in detail.lower(), detail


@pytest.mark.parametrize("row, phase", CASES)
def test_access_matrix(row, phase, world, clients):
    w = world(phase)
    url, body = w.url(row.path), row.payload(phase)
    body = body(w) if callable(body) else body
    expected = {
        "anonymous": 401,
        "charlie": 404,
        "bob": row.expected("bob", phase),
        "alice": row.expected("alice", phase),
    }
    # Writes that succeed come last (bob's own inputs, then the designer's changes).
    for actor in ("anonymous", "charlie", "bob", "alice"):
        response = send(clients[actor], row.method, url, body)
        assert response.status_code == expected[actor], f"{actor}: {response.status_code} {response.content[:300]!r}"
        if response.status_code >= 400:
            assert_refusal(response, response.status_code, row, phase)
        else:
            row.check(response, w)


# --- endpoints outside any study ------------------------------------------------------


def test_anonymous_gets_401_with_token_challenge_everywhere_but_the_token_endpoint(clients, cast):
    token, _ = services.api_token_create(user=cast.alice)
    anonymous = clients["anonymous"]
    for method, url in [
        ("get", "/auth/tokens/"),
        ("delete", f"/auth/tokens/{token.pk}/"),
        ("get", "/studies/"),
        ("post", "/studies/"),
        ("post", "/studies/import/"),
    ]:
        response = getattr(anonymous, method)(API + url, {}, format="json")
        assert response.status_code == 401, url
        assert response["WWW-Authenticate"] == "Token"
        assert response.json() == api_error("not_authenticated", "Authentication credentials were not provided.")
    assert ApiToken.objects.filter(pk=token.pk).exists()
    # A wrong or revoked token is 401 too, with the same challenge.
    bad = anonymous.get(API + "/studies/", HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert bad.status_code == 401 and bad["WWW-Authenticate"] == "Token"
    assert bad.json() == api_error("authentication_failed", "Invalid or revoked token.")
    # The token endpoint is open to anyone: a bad payload is 400, not 401.
    response = anonymous.post(API + "/auth/token/", {}, format="json")
    assert response.status_code == 400
    assert set(error_fields(response)) == {"username", "password"}


def test_any_user_may_create_and_import_studies_and_becomes_their_designer(clients, case_study):
    charlie = clients["charlie"]
    created = charlie.post(API + "/studies/", {"title": "Charlie's own"}, format="json")
    assert created.status_code == 201
    assert created.json()["designer"] == "charlie" and created.json()["my_roles"] == ["designer"]
    case_study["designer"] = "charlie"
    # A draft: the experts' inputs could be imported by staff only (test_invitations.py).
    case_study["phase"] = "draft"
    for section in ("votes", "priorities", "ranges", "peer_weights"):
        del case_study[section]
    imported = charlie.post(API + "/studies/import/", case_study, format="json")
    assert imported.status_code == 201, imported.content
    assert imported.json()["experts"] == []
    assert [i["username"] for i in imported.json()["invitations"]] == [
        "statistician",
        "informatician",
        "researcher",
        "clinician",
    ]
    assert Study.objects.get(pk=imported.json()["id"]).designer.username == "charlie"
    # Nobody imports a study in someone else's name: the importer designs it, whoever the bundle names.
    case_study["designer"] = "alice"
    with_other = charlie.post(API + "/studies/import/", case_study, format="json")
    assert with_other.status_code == 201
    assert (with_other.json()["designer"], with_other.json()["inputs_left_out"]) == ("charlie", [])
    assert with_other.json()["notes"] == ["The bundle named alice as its designer; you design the imported study."]
    listed = charlie.get(API + "/studies/").json()
    assert sorted(s["title"] for s in listed["results"]) == [
        "Cancer diagnosis from microarray data",
        "Cancer diagnosis from microarray data",
        "Charlie's own",
    ]
    assert Study.objects.filter(designer__username="alice").count() == 0


def test_tokens_of_another_user_are_not_found(clients, cast):
    token, _ = services.api_token_create(user=cast.alice, name="alice's laptop")
    response = clients["charlie"].delete(f"{API}/auth/tokens/{token.pk}/")
    assert response.status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()
    listed = clients["charlie"].get(API + "/auth/tokens/").json()
    assert "alice's laptop" not in json.dumps(listed)
    assert all(t["name"] == "test" for t in listed["results"])


# --- a study bob is not a member of -----------------------------------------------


SECRET_TITLE = "Secret merger study of carol"


@pytest.fixture
def secret(make_study, cast, case_study):
    """A study of alice with carol as its only expert, and a closed imported
    study with a succeeded run, neither with bob or charlie in it."""
    draft = make_study(Phase.DRAFT, experts=("carol",), title=SECRET_TITLE)
    case_study["title"] = SECRET_TITLE + " (closed)"
    closed = study_import_bundle(bundle=case_study)  # the command line's path: the experts' inputs count
    run = finish_run(engine_services.run_launch(study=closed, launched_by=closed.designer).pk)
    assert run.status == "succeeded"
    return draft, closed, run


def test_non_member_expert_and_outsider_get_404_on_every_endpoint_of_a_study(secret, clients):
    draft, closed, run = secret
    ids = {
        "study": draft.study.pk,
        "attribute": draft.attributes["Flexibility"].pk,
        "metric": draft.metrics["Success rate"].pk,
        "unvoted_metric": draft.metrics["Flexibility score"].pk,
        "candidate": draft.candidates["J48"].pk,
        "run": run.pk,
        "other_run": run.pk,
        "prediction_set": predictions_add(draft.study).pk,
        "analysis": leave_one_out(run, run.study.designer).pk,
        "elicited": draft.metrics["Success rate"].pk,
        "proba_set": 0,
        "mlflow_import": MlflowImport.objects.create(
            study=draft.study, imported_at=timezone.now(), experiment_id="7"
        ).pk,
    }
    before = db_snapshot()
    for row in ROWS:
        url, body = row.path.format(**ids), row.payload(Phase.DRAFT)
        body = body(World(Phase.DRAFT, draft.study, draft, ids=ids)) if callable(body) else body
        for actor in ("bob", "charlie"):
            response = send(clients[actor], row.method, url, body)
            assert response.status_code == 404, f"{row.id} {actor}: {response.status_code}"
            assert SECRET_TITLE not in response.content.decode()
            assert_refusal(response, 404, row, Phase.DRAFT)
    # The closed study's own endpoints too.
    for url in [f"/studies/{closed.pk}/", f"/studies/{closed.pk}/export/", f"/studies/{closed.pk}/runs/"]:
        assert clients["bob"].get(API + url).status_code == 404
    assert db_snapshot() == before
    assert Run.objects.count() == 1


def test_404_for_an_outsider_is_the_same_as_for_a_study_that_does_not_exist(secret, clients):
    draft, closed, run = secret
    missing_study = Study.objects.order_by("-pk").first().pk + 1000
    missing_run = run.pk + 1000
    charlie = clients["charlie"]
    for existing, missing in [
        (f"/studies/{draft.study.pk}/", f"/studies/{missing_study}/"),
        (f"/studies/{draft.study.pk}/attributes/", f"/studies/{missing_study}/attributes/"),
        (f"/studies/{closed.pk}/my/votes/", f"/studies/{missing_study}/my/votes/"),
        (f"/runs/{run.pk}/results/", f"/runs/{missing_run}/results/"),
        (f"/runs/{run.pk}/candidates/J48/scores/", f"/runs/{missing_run}/candidates/J48/scores/"),
        (f"/runs/{run.pk}/results.csv", f"/runs/{missing_run}/results.csv"),
        (f"/runs/{run.pk}/compare/{run.pk}/", f"/runs/{missing_run}/compare/{run.pk}/"),
    ]:
        a, b = charlie.get(API + existing), charlie.get(API + missing)
        assert (a.status_code, a.json()) == (b.status_code, b.json()) == (404, b.json())
        # A write with a bad body tells nothing more: the payload is never looked at.
        c, d = (
            charlie.put(API + existing, {"attributes": 7}, format="json"),
            charlie.put(API + missing, {"attributes": 7}, format="json"),
        )
        assert (c.status_code, c.json()) == (d.status_code, d.json())
        assert c.status_code in (404, 405)


# --- no leaks ----------------------------------------------------------------------

# Carol's private inputs, with values that appear nowhere else.
CAROL_PRIORITIES = {"method": "direct", "weights": {"Accuracy": 0.4171, "Consistency": 0.3329, "Efficiency": 0.25}}
CAROL_RANGES = {"AUC": [0.7313, 0.9137], "Training time": [58.61937, 1.773917]}
CAROL_PEER_WEIGHTS = {"bob": 0.3172, "carol": 0.6828}
# Digits unlikely to turn up by chance (a timestamp's "…:51.77…" once did
# for a shorter marker).
CAROL_MARKERS = ["0.4171", "0.3329", "0.7313", "0.9137", "58.61937", "1.773917", "0.3172", "0.6828"]
# Endpoints bob may read; the results (which aggregate everyone) are not in this list.
BOB_READS = [
    "/studies/",
    "/studies/{study}/",
    "/studies/{study}/members/",
    "/studies/{study}/attributes/",
    "/studies/{study}/metrics/",
    "/studies/{study}/candidates/",
    "/studies/{study}/measurements/",
    "/studies/{study}/my/votes/",
    "/studies/{study}/my/priorities/",
    "/studies/{study}/my/ranges/",
    "/studies/{study}/my/ranges/to-confirm/",
    "/studies/{study}/my/peer-weights/",
    "/studies/{study}/runs/",
    "/studies/{study}/history/?page_size=200",
    "/auth/tokens/",
]
# Endpoints bob may not read: they must refuse without a body that leaks.
BOB_REFUSED = ["/studies/{study}/inputs/carol/", "/studies/{study}/export/"]


def test_an_expert_never_reads_another_experts_private_inputs(make_study, clients, cast, secret):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    carol = built.carol
    services.priorities_set(expert=carol, **CAROL_PRIORITIES)
    services.ranges_set(expert=carol, ranges=CAROL_RANGES)
    services.peer_weights_set(expert=carol, weights=CAROL_PEER_WEIGHTS)

    def everything_bob_reads():
        bodies = []
        for template in BOB_READS:
            response = clients["bob"].get(API + template.format(study=built.study.pk))
            assert response.status_code == 200, template
            bodies.append(response.content.decode())
        for template in BOB_REFUSED:
            response = clients["bob"].get(API + template.format(study=built.study.pk))
            assert response.status_code == 403, template
            bodies.append(response.content.decode())
        return "\n".join(bodies)

    # Positive control: the designer does read carol's values in this form.
    alice_reads = clients["alice"].get(f"{API}/studies/{built.study.pk}/inputs/carol/")
    assert alice_reads.json()["peer_weights"] == CAROL_PEER_WEIGHTS
    assert alice_reads.json()["ranges"] == CAROL_RANGES
    read = alice_reads.json()["priorities"]
    read.pop("result"), read.pop("metric_results", None)  # with their result since issue 16
    assert read == CAROL_PRIORITIES
    assert all(marker in alice_reads.content.decode() for marker in CAROL_MARKERS)
    # and in the study's history, which bob reads too (his own inputs only)
    alice_history = clients["alice"].get(f"{API}/studies/{built.study.pk}/history/?page_size=200").content.decode()
    assert all(marker in alice_history for marker in CAROL_MARKERS)

    for phase in (Phase.ASSESSMENT, Phase.CLOSED):
        if phase == Phase.CLOSED:
            services.study_close_assessment(study=built.study)
            launch_and_finish(built, cast.alice)
        seen = everything_bob_reads()
        leaked = [marker for marker in CAROL_MARKERS if marker in seen]
        assert not leaked, f"bob reads carol's {leaked} in the {phase} phase"
        assert SECRET_TITLE not in seen
        # And bob's own inputs are his, not carol's.
        mine = clients["bob"].get(f"{API}/studies/{built.study.pk}/my/peer-weights/").json()
        assert mine == {"bob": 0.6, "carol": 0.4}
        assert clients["bob"].get(f"{API}/studies/{built.study.pk}/my/ranges/").json() == {"AUC": [0.7, 0.95]}


def test_lists_only_list_the_users_own_studies(make_study, clients, secret):
    shared = make_study(Phase.DRAFT, title="Shared study")
    draft, closed, run = secret

    def titles(actor):
        body = clients[actor].get(API + "/studies/").json()
        assert body["count"] == len(body["results"])
        return sorted(s["title"] for s in body["results"])

    assert titles("charlie") == []
    assert titles("bob") == ["Shared study"]
    # The closed one was imported with its own designer ("designer").
    assert titles("alice") == sorted(["Shared study", SECRET_TITLE])
    assert titles("carol") == titles("alice")
    roles = {s["title"]: s["my_roles"] for s in clients["bob"].get(API + "/studies/").json()["results"]}
    assert roles == {"Shared study": ["expert"]}
    assert shared.study.pk in [s["id"] for s in clients["alice"].get(API + "/studies/").json()["results"]]
    # Runs of other studies are not reachable through any list either.
    assert clients["bob"].get(f"{API}/studies/{shared.study.pk}/runs/").json()["count"] == 0


# --- 400: errors per field, and nothing written ------------------------------------


def counts():
    """db_snapshot plus the API's own tables."""
    return {**db_snapshot(), "runs": Run.objects.count(), "tokens": ApiToken.objects.count()}


@pytest.fixture
def nothing_written(db):
    from contextlib import contextmanager

    @contextmanager
    def check():
        before = counts()
        yield
        assert counts() == before, "a refused request wrote to the database"

    return check


INVALID = [
    # (phase, actor, method, path, body, expected errors)
    (Phase.DRAFT, "alice", "post", "/studies/", {"title": ""}, {"title": ["This field may not be blank."]}),
    (
        Phase.DRAFT,
        "alice",
        "post",
        "/studies/{study}/metrics/",
        {"name": "Kappa", "attribute": "Nope"},
        {"attribute": ["no attribute named 'Nope' in this study"]},
    ),
    (
        Phase.DRAFT,
        "alice",
        "post",
        "/studies/{study}/metrics/",
        {"name": "Kappa", "attribute": "Accuracy", "default_range": [0.9, 0.1]},
        {
            "default_range": [
                "higher is better, so the least acceptable value (0.9) must be below the desired value (0.1)"
            ]
        },
    ),
    (
        Phase.DRAFT,
        "alice",
        "post",
        "/studies/{study}/attributes/",
        {"name": "Accuracy"},
        {"name": ["quality attribute 'Accuracy' already exists in this study"]},
    ),
    (
        Phase.DRAFT,
        "alice",
        "post",
        "/studies/{study}/members/",
        {"username": "bob"},
        {"username": ["bob is already an expert of this study"]},
    ),
    (
        Phase.DRAFT,
        "alice",
        "put",
        "/studies/{study}/measurements/",
        [
            {"candidate": "J48", "metric": "AUC", "value": 0.5},
            {"candidate": "J48", "metric": "AUC", "value": "high"},
            {"candidate": "C4.5", "metric": "AUC", "value": 1},
        ],
        {
            "measurements[1].value": ["must be a number, got 'high'"],
            "measurements[2].candidate": ["no candidate named 'C4.5' in this study"],
        },
    ),
    (
        Phase.DRAFT,
        "alice",
        "post",
        "/studies/{study}/transitions/",
        {"to": "archived"},
        {"to": ['"archived" is not a valid choice.']},
    ),
    (
        Phase.VOTING,
        "bob",
        "put",
        "/studies/{study}/my/votes/",
        {"attributes": ["Accuracy", "Nope"]},
        {
            "attributes": [
                "'Accuracy' is a main attribute, always selected: no vote needed",
                "no attribute named 'Nope' in this study",
            ]
        },
    ),
    (
        Phase.ASSESSMENT,
        "bob",
        "put",
        "/studies/{study}/my/peer-weights/",
        {"bob": 0.6, "carol": 0.3},
        {"weights": ["row sums to 0.9, must be 1"]},
    ),
    (
        Phase.ASSESSMENT,
        "bob",
        "put",
        "/studies/{study}/my/peer-weights/",
        {"bob": 0, "carol": 1, "charlie": 0.5},
        {
            "weights.bob": ["must be positive (no expert may silence another), got 0"],
            "weights.carol": ["must be below 1, got 1"],
            "weights.charlie": ["not an expert of this study"],
        },
    ),
    (
        Phase.ASSESSMENT,
        "bob",
        "put",
        "/studies/{study}/my/priorities/",
        {"method": "direct", "weights": {"Accuracy": -1, "Consistency": 1}},
        {"weights": ["missing weights for Efficiency"], "weights.Accuracy": ["must be positive, got -1"]},
    ),
    (
        Phase.ASSESSMENT,
        "bob",
        "put",
        "/studies/{study}/my/priorities/",
        {"method": "ahp", "judgments": [["Accuracy", "Consistency", 12], ["Accuracy", "Efficiency"]]},
        {"judgments[0]": ["value 12 is outside the scale 1/9..9"], "judgments[1]": ["must be [row, column, value]"]},
    ),
    (
        Phase.ASSESSMENT,
        "bob",
        "put",
        "/studies/{study}/my/priorities/",
        {"method": "direct", "weights": {"Accuracy": 1, "Consistency": 1, "Efficiency": 1}, "colour": "red"},
        {"colour": ["is not a field of a prioritisation"]},
    ),
    (
        Phase.ASSESSMENT,
        "bob",
        "put",
        "/studies/{study}/my/ranges/",
        {"AUC": [0.9, 0.6], "Flexibility score": [1, 2]},
        {
            "ranges.AUC": [
                "higher is better, so the least acceptable value (0.9) must be below the desired value (0.6)"
            ],
            "ranges.Flexibility score": ["not a selected metric of this study"],
        },
    ),
    (
        Phase.ASSESSMENT,
        "bob",
        "put",
        "/studies/{study}/my/ranges/",
        ["AUC", 0.9],
        {"non_field_errors": ["The body must be an object {metric: [least acceptable, desired]}."]},
    ),
]


@pytest.mark.parametrize("phase, actor, method, path, body, errors", INVALID, ids=lambda v: None)
def test_invalid_input_is_400_with_errors_per_field_and_writes_nothing(
    phase, actor, method, path, body, errors, make_study, clients, nothing_written
):
    built = make_study(phase)
    with nothing_written():
        response = send(clients[actor], method, API + path.format(study=built.study.pk), body)
    assert response.status_code == 400, response.content
    assert error_fields(response) == errors


def test_a_failing_part_of_a_prioritisation_rolls_back_the_whole_of_it(make_study, clients, nothing_written):
    """The attributes' weights are valid, a local prioritisation is not:
    bob's earlier prioritisation stays exactly as it was."""
    built = make_study(Phase.ASSESSMENT)
    url = f"{API}/studies/{built.study.pk}/my/priorities/"
    assert clients["bob"].put(url, DIRECT_WEIGHTS, format="json").status_code == 200
    with nothing_written():
        response = clients["bob"].put(
            url,
            {
                "method": "direct",
                "weights": {"Accuracy": 1, "Consistency": 1, "Efficiency": 1},
                "metric_priorities": {"Accuracy": {"method": "direct", "weights": {"Success rate": 1, "AUC": -2}}},
            },
            format="json",
        )
    assert response.status_code == 400
    assert error_fields(response) == {"metric_priorities.Accuracy.weights.AUC": ["must be positive, got -2"]}
    assert clients["bob"].get(url).json()["weights"] == {"Accuracy": 5, "Consistency": 3, "Efficiency": 2}


# --- 403 / 404 / 409 write nothing either --------------------------------------------


REFUSED_WRITES = [
    # (phase, actor, method, path, body, status, detail fragment)
    (Phase.DRAFT, "anonymous", "post", "/studies/{study}/attributes/", {"name": "X"}, 401, "not provided"),
    (Phase.DRAFT, "charlie", "patch", "/studies/{study}/", {"title": "Mine now"}, 404, "No such study."),
    (Phase.DRAFT, "charlie", "delete", "/studies/{study}/", None, 404, "No such study."),
    (
        Phase.DRAFT,
        "bob",
        "post",
        "/studies/{study}/attributes/",
        {"name": "X"},
        403,
        "Only the designer of this study can add attributes.",
    ),
    (
        Phase.DRAFT,
        "bob",
        "delete",
        "/studies/{study}/",
        None,
        403,
        "Only the designer of this study can delete the study.",
    ),
    (Phase.DRAFT, "bob", "post", "/studies/{study}/transitions/", {"to": "voting"}, 403, "designer"),
    (
        Phase.DRAFT,
        "alice",
        "put",
        "/studies/{study}/my/votes/",
        {"attributes": []},
        403,
        "You are not an expert of this study.",
    ),
    (
        Phase.VOTING,
        "alice",
        "post",
        "/studies/{study}/attributes/",
        {"name": "Robustness"},
        409,
        "Adding an attribute is only possible in the draft phase; the study is in the voting phase",
    ),
    (
        Phase.VOTING,
        "alice",
        "delete",
        "/studies/{study}/members/carol/",
        None,
        409,
        "Removing an expert is only possible in the draft phase; the study is in the voting phase",
    ),
    (
        Phase.DRAFT,
        "bob",
        "put",
        "/studies/{study}/my/votes/",
        {"attributes": ["Efficiency"]},
        409,
        "Voting is only possible in the voting phase; the study is in the draft phase",
    ),
    (
        Phase.CLOSED,
        "bob",
        "put",
        "/studies/{study}/my/peer-weights/",
        {"bob": 0.5, "carol": 0.5},
        409,
        "Weighting experts is only possible in the assessment phase; the study is in the closed phase",
    ),
    (
        Phase.ASSESSMENT,
        "alice",
        "post",
        "/studies/{study}/transitions/",
        {"to": "closed"},
        409,
        "Assessment cannot close, inputs are missing: bob: prioritisation of the attributes, acceptable range for AUC, "
        "weights for fellow experts; carol:",
    ),
    (
        Phase.DRAFT,
        "alice",
        "post",
        "/studies/{study}/transitions/",
        {"to": "closed"},
        409,
        "A study in the draft phase cannot move to closed.",
    ),
    (
        Phase.ASSESSMENT,
        "alice",
        "post",
        "/studies/{study}/runs/",
        None,
        409,
        "Validation runs need a closed study; this one is in the assessment phase.",
    ),
]


@pytest.mark.parametrize("phase, actor, method, path, body, status, detail", REFUSED_WRITES, ids=lambda v: None)
def test_refused_writes_write_nothing(
    phase, actor, method, path, body, status, detail, make_study, clients, nothing_written
):
    built = make_study(phase)
    with nothing_written():
        response = send(clients[actor], method, API + path.format(study=built.study.pk), body)
    assert response.status_code == status, response.content
    assert detail in response.json()["detail"]


def test_a_rejected_import_writes_nothing(clients, cast, case_study, nothing_written):
    del case_study["designer"]  # the importing user, charlie, designs it
    cast.charlie.is_staff = True  # only staff may import the experts' inputs
    cast.charlie.save(update_fields=["is_staff"])
    case_study["peer_weights"]["clinician"]["clinician"] = 0.3  # the row sums to 0.9
    with nothing_written():
        response = clients["charlie"].post(API + "/studies/import/", case_study, format="json")
    assert response.status_code == 400
    assert error_fields(response) == {"peer_weights.clinician": ["row sums to 0.9, must be 1"]}
    # Import creates accounts for unknown experts; none was kept.
    assert not QualityAttribute.objects.exists()


# --- runs: results only once a run has succeeded ------------------------------------


def test_results_are_409_until_the_run_has_succeeded(make_study, clients, django_capture_on_commit_callbacks):
    built = make_study(Phase.CLOSED)
    with django_capture_on_commit_callbacks(execute=False):
        launched = clients["alice"].post(f"{API}/studies/{built.study.pk}/runs/")
    assert launched.status_code == 202
    run_id = launched.json()["id"]
    assert Run.objects.get(pk=run_id).status == Run.Status.QUEUED
    for actor in ("alice", "bob"):
        for url in (f"{API}/runs/{run_id}/results/", f"{API}/runs/{run_id}/candidates/J48/scores/"):
            response = clients[actor].get(url)
            assert response.status_code == 409
            assert response.json() == api_error(
                "run_not_finished",
                f"{Run.objects.get(pk=run_id).label} is queued; results exist once it has succeeded.",
            )
        assert clients[actor].get(f"{API}/runs/{run_id}/").json()["status"] == "queued"
    assert clients["charlie"].get(f"{API}/runs/{run_id}/results/").status_code == 404

    # A failed run says why.
    Run.objects.filter(pk=run_id).update(status=Run.Status.FAILED, error="The inputs cannot be evaluated: boom.")
    failed = clients["bob"].get(f"{API}/runs/{run_id}/results/")
    assert failed.status_code == 409
    assert failed.json()["detail"] == (
        f"{Run.objects.get(pk=run_id).label} is failed; results exist once it has succeeded. "
        "It failed: The inputs cannot be evaluated: boom."
    )

    # Once it has run, every member reads the results; an unknown candidate is 404.
    run = launch_and_finish(built, built.study.designer)
    assert clients["bob"].get(f"{API}/runs/{run.pk}/results/").status_code == 200
    unknown = clients["bob"].get(f"{API}/runs/{run.pk}/candidates/C4.5/scores/")
    assert unknown.status_code == 404 and unknown.json() == api_error(
        "not_found", "No candidate named 'C4.5' in this run."
    )
