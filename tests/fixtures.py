"""The shared fixtures of every test directory (registered by the root conftest.py): the fixed cast and a study factory.

The cast: a designer ``alice``, two experts ``bob`` and ``carol``, and an
outsider ``charlie`` who belongs to no study. Every study the factory builds
goes through the services, phase by phase, exactly as a person would.
"""

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache

from workspace import services
from workspace.models import (
    AcceptableRange,
    AttributeJudgment,
    AttributePrioritisation,
    AttributeVote,
    AttributeWeight,
    Candidate,
    Invitation,
    Measurement,
    Membership,
    Metric,
    MetricJudgment,
    MetricPrioritisation,
    MetricVote,
    MetricWeight,
    PeerWeight,
    Phase,
    QualityAttribute,
    RevisionRound,
    RoundResponse,
    Study,
)

PASSWORD = "a-long-test-password-47"
# The example study of FORMATS.md, as the app ships it (the demo loads it too).
CASE_STUDY_PATH = Path(__file__).resolve().parents[1] / "workspace" / "demo" / "case-study-1.json"

# Every table a study writes to; ``db_snapshot`` counts them all.
TABLES = [
    get_user_model(),
    Study,
    Membership,
    QualityAttribute,
    Metric,
    Candidate,
    Measurement,
    AttributeVote,
    MetricVote,
    AttributePrioritisation,
    AttributeJudgment,
    AttributeWeight,
    MetricPrioritisation,
    MetricJudgment,
    MetricWeight,
    AcceptableRange,
    PeerWeight,
    Invitation,
    RevisionRound,
    RoundResponse,
]


def db_snapshot():
    """Everything a service could have written, as comparable data: the row
    count of every table and the values of the rows that can be updated in
    place (studies, attributes, metrics, measurements)."""
    return {
        "counts": {model.__name__: model.objects.count() for model in TABLES},
        "studies": list(
            Study.objects.order_by("pk").values_list(
                "pk", "title", "description", "phase", "attribute_threshold", "metric_threshold"
            )
        ),
        "attributes": list(
            QualityAttribute.objects.order_by("pk").values_list("pk", "name", "kind", "description", "is_selected")
        ),
        "metrics": list(
            Metric.objects.order_by("pk").values_list(
                "pk", "name", "better", "unit", "default_least_acceptable", "default_desired", "is_selected"
            )
        ),
        "candidates": list(Candidate.objects.order_by("pk").values_list("pk", "name", "description")),
        "measurements": list(
            Measurement.objects.order_by("pk").values_list("pk", "candidate_id", "metric_id", "value")
        ),
        "votes": sorted(AttributeVote.objects.values_list("expert_id", "attribute_id"))
        + sorted(MetricVote.objects.values_list("expert_id", "metric_id")),
        "weights": sorted(
            AttributeWeight.objects.values_list("prioritisation__expert_id", "attribute_id", "given", "weight")
        ),
        "judgments": sorted(
            AttributeJudgment.objects.values_list("prioritisation__expert_id", "row_id", "column_id", "value")
        ),
        "ranges": sorted(AcceptableRange.objects.values_list("expert_id", "metric_id", "least_acceptable", "desired")),
        "peer_weights": sorted(PeerWeight.objects.values_list("rater_id", "ratee_id", "weight")),
    }


@pytest.fixture
def unchanged(db):
    """``with unchanged(): ...`` fails unless the block leaves the database
    exactly as it found it."""
    from contextlib import contextmanager

    @contextmanager
    def check():
        before = db_snapshot()
        yield
        after = db_snapshot()
        assert after == before, "the refused call wrote to the database"

    return check


@pytest.fixture(autouse=True)
def test_host_and_clean_cache(settings):
    """Pages answer the test client's ``Host: testserver``; the log-in
    lock-out counts failures in the cache, so every test starts with none."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """The cast has real passwords; hash them cheaply (the hasher is not under test)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@dataclass
class Cast:
    alice: object
    bob: object
    carol: object
    charlie: object


@pytest.fixture
def cast(db):
    User = get_user_model()
    people = {
        name: User.objects.create_user(username=name, password=PASSWORD)
        for name in ("alice", "bob", "carol", "charlie")
    }
    return Cast(**people)


@dataclass
class Built:
    """A study built by ``make_study`` with handles on its parts."""

    study: Study
    experts: dict  # username -> expert Membership
    attributes: dict = field(default_factory=dict)  # name -> QualityAttribute
    metrics: dict = field(default_factory=dict)  # name -> Metric
    candidates: dict = field(default_factory=dict)  # name -> Candidate

    @property
    def bob(self):
        return self.experts["bob"]

    @property
    def carol(self):
        return self.experts["carol"]

    def refresh(self):
        self.study.refresh_from_db()
        for collection in (self.attributes, self.metrics, self.candidates):
            for item in collection.values():
                item.refresh_from_db()
        for membership in self.experts.values():
            membership.refresh_from_db()
        return self


# The standard study: two main attributes, two complementary ones.
# "Success rate", "Fold stdev" and "Training time" have default ranges;
# "AUC" and "Flexibility score" have none.
ATTRIBUTES = [
    ("Accuracy", "main"),
    ("Consistency", "main"),
    ("Efficiency", "complementary"),
    ("Flexibility", "complementary"),
]
METRICS = [
    ("Success rate", "Accuracy", "higher", "", [0.8, 0.95]),
    ("AUC", "Accuracy", "higher", "", None),
    ("Fold stdev", "Consistency", "lower", "", [0.15, 0.05]),
    ("Training time", "Efficiency", "lower", "s", [60, 1]),
    ("Flexibility score", "Flexibility", "higher", "1-10", None),
]
MEASUREMENTS = {
    "J48": {"Success rate": 0.847, "AUC": 0.88, "Fold stdev": 0.106, "Training time": 4.1, "Flexibility score": 7},
    "JRip": {"Success rate": 0.865, "AUC": 0.9, "Fold stdev": 0.1, "Training time": 6.3, "Flexibility score": 5},
}
# Votes that select Efficiency (1 vote, threshold 1) but not Flexibility.
VOTES = {"bob": {"attributes": ["Efficiency"], "metrics": []}, "carol": {"attributes": [], "metrics": []}}
# After voting: Accuracy, Consistency, Efficiency selected;
# Success rate, AUC, Fold stdev, Training time selected.
SELECTED_ATTRIBUTES = ["Accuracy", "Consistency", "Efficiency"]
SELECTED_METRICS = ["Success rate", "AUC", "Fold stdev", "Training time"]
CAROL_JUDGMENTS = [["Accuracy", "Consistency", 3], ["Accuracy", "Efficiency", 5], ["Consistency", "Efficiency", 2]]


def complete_assessment(built):
    """Give every expert every input assessment needs."""
    services.prioritisation_set(
        expert=built.bob, method="direct", weights={"Accuracy": 50, "Consistency": 30, "Efficiency": 20}
    )
    services.prioritisation_set(expert=built.carol, method="ahp", judgments=copy.deepcopy(CAROL_JUDGMENTS))
    services.ranges_set(expert=built.bob, ranges={"AUC": [0.7, 0.95]})
    services.ranges_set(expert=built.carol, ranges={"AUC": [0.75, 0.9], "Success rate": [0.82, 0.9]})
    services.peer_weights_set(expert=built.bob, weights={"bob": 0.6, "carol": 0.4})
    services.peer_weights_set(expert=built.carol, weights={"bob": 0.5, "carol": 0.5})


@pytest.fixture
def make_study(cast):
    """Build the standard study in ``phase`` through the services.

    ``experts``: usernames of the experts (default bob and carol).
    ``votes``: per-expert votes cast in the voting phase (default ``VOTES``).
    ``inputs``: in assessment, also give every expert's inputs (closed always does).
    """

    def make(
        phase=Phase.DRAFT,
        *,
        experts=("bob", "carol"),
        votes=None,
        inputs=False,
        attribute_threshold=1,
        metric_threshold=0,
        title="Choosing a classifier",
    ):
        study = services.study_create(
            designer=cast.alice,
            title=title,
            description="which learner to deploy",
            attribute_threshold=attribute_threshold,
            metric_threshold=metric_threshold,
        )
        built = Built(study=study, experts={})
        for username in experts:
            built.experts[username] = services.expert_add(study=study, user=getattr(cast, username))
        for name, kind in ATTRIBUTES:
            built.attributes[name] = services.attribute_add(
                study=study, name=name, kind=kind, description=f"{name} matters"
            )
        for name, attribute, better, unit, default_range in METRICS:
            built.metrics[name] = services.metric_add(
                study=study,
                attribute=built.attributes[attribute],
                name=name,
                better=better,
                unit=unit,
                default_range=default_range,
            )
        for name in MEASUREMENTS:
            built.candidates[name] = services.candidate_add(study=study, name=name, description=f"{name} learner")
        services.measurements_set(
            study=study,
            measurements=[
                {"candidate": c, "metric": m, "value": v}
                for c, values in MEASUREMENTS.items()
                for m, v in values.items()
            ],
        )
        if phase == Phase.DRAFT:
            return built.refresh()
        services.study_open_voting(study=study)
        for username, ballot in (VOTES if votes is None else votes).items():
            services.votes_set(expert=built.experts[username], **ballot)
        if phase == Phase.VOTING:
            return built.refresh()
        services.study_close_voting(study=study)
        built.refresh()
        if phase == Phase.ASSESSMENT and not inputs:
            return built
        complete_assessment(built)
        if phase == Phase.CLOSED:
            services.study_close_assessment(study=study)
        return built.refresh()

    return make


@pytest.fixture
def case_study():
    """A fresh copy of the example study (workspace/demo/case-study-1.json)."""
    return json.loads(CASE_STUDY_PATH.read_text(encoding="utf-8"))


def error_fields(response) -> dict:
    """The per-field messages of an API error answer, whatever the error body's shape
    (``{"field": [...]}`` or an envelope with ``"fields"``)."""
    body = response.json()
    return body["fields"] if isinstance(body, dict) and "fields" in body else body


def api_error(code: str, detail: str) -> dict:
    """The whole body of an API error other than a 400: its code, its message
    and no fields (docs/api.md, "Errors")."""
    return {"code": code, "detail": detail, "fields": {}}
