"""The API's side of the rules and reads: the consistency verdict at the
threshold, stored prioritisation results, unknown fields refused on every
write, bounded duplicate checks, and query counts pinned on the reads of an
expert's inputs, the export and the study detail."""

import math
import time

import pytest
from django.contrib.auth import get_user_model

from engine import prioritisation as engine_prioritisation
from engine.rules import CONSISTENCY_THRESHOLD
from tests.fixtures import error_fields
from workspace import limits, services
from workspace.models import AttributePrioritisation, MetricPrioritisation, Phase, Study

from .conftest import client_with_token, token_key

pytestmark = pytest.mark.django_db

API = "/api/v1"
ABOVE_THRESHOLD = math.nextafter(CONSISTENCY_THRESHOLD, 1.0)
JUDGMENTS = [["Accuracy", "Consistency", 3], ["Accuracy", "Efficiency", 5], ["Consistency", "Efficiency", 2]]
LOCAL = {"Accuracy": {"method": "ahp", "judgments": [["Success rate", "AUC", 2]]}}


def _priorities_url(built):
    return f"{API}/studies/{built.study.pk}/my/priorities/"


# --- the consistency verdict ----------------------------------------------------------------------


@pytest.mark.parametrize("ratio, inconsistent", [(CONSISTENCY_THRESHOLD, False), (ABOVE_THRESHOLD, True), (0.5, True)])
def test_the_api_calls_a_ratio_of_exactly_0_10_consistent(make_study, api, cast, ratio, inconsistent):
    built = make_study(Phase.ASSESSMENT)
    services.priorities_set(expert=built.carol, method="ahp", judgments=JUDGMENTS, metric_priorities=LOCAL)
    for model in (AttributePrioritisation, MetricPrioritisation):
        row = model.objects.get(expert=built.carol)
        row.result = {**row.result, "consistency_ratio": ratio}
        row.save(update_fields=["result"])
    body = api(cast.carol).get(_priorities_url(built)).json()
    assert (body["result"]["consistency_ratio"], body["result"]["inconsistent"]) == (ratio, inconsistent)
    local = body["metric_results"]["Accuracy"]
    assert (local["consistency_ratio"], local["inconsistent"]) == (ratio, inconsistent)


def test_direct_weights_have_no_consistency_verdict(make_study, api, cast):
    built = make_study(Phase.ASSESSMENT)
    client = api(cast.bob)
    weights = {"Accuracy": 2, "Consistency": 1, "Efficiency": 1}
    body = client.put(_priorities_url(built), {"method": "direct", "weights": weights}, format="json").json()
    assert body["result"] == {
        "weights": {"Accuracy": 0.5, "Consistency": 0.25, "Efficiency": 0.25},
        "consistency_ratio": None,
        "inconsistent": None,
        "most_inconsistent": [],
    }


# --- stored results ---------------------------------------------------------------------------------


def test_reading_priorities_shows_what_was_stored_without_recomputing(make_study, api, cast, monkeypatch):
    built = make_study(Phase.ASSESSMENT)
    client = api(cast.carol)
    body = {"method": "ahp", "judgments": JUDGMENTS, "metric_priorities": LOCAL}
    saved = client.put(_priorities_url(built), body, format="json").json()
    matrix = engine_prioritisation.pairwise_matrix(3, [(0, 1, 3), (0, 2, 5), (1, 2, 2)])
    weights = engine_prioritisation.ahp_weights(matrix)
    assert list(saved["result"]["weights"].values()) == pytest.approx(list(weights), rel=1e-12)
    assert saved["result"]["consistency_ratio"] == pytest.approx(engine_prioritisation.consistency(matrix).ratio)
    local_weights = saved["metric_results"]["Accuracy"]["weights"]
    assert local_weights == {"Success rate": pytest.approx(2 / 3), "AUC": pytest.approx(1 / 3)}

    def no_recomputing(*args, **kwargs):
        raise AssertionError("a read recomputed a prioritisation")

    monkeypatch.setattr(engine_prioritisation, "prioritise", no_recomputing)
    monkeypatch.setattr("workspace.services.inputs.prioritise", no_recomputing)
    assert client.get(_priorities_url(built)).json() == saved
    assert saved["judgments"] == JUDGMENTS and saved["metric_priorities"] == LOCAL


def test_a_prioritisation_saved_before_results_were_stored_gets_its_result(make_study):
    # Migration 0004 computes the result of every prioritisation saved before it.
    import importlib

    from django.apps import apps

    store_results = importlib.import_module("workspace.migrations.0004_prioritisation_result").store_results
    built = make_study(Phase.ASSESSMENT)
    services.priorities_set(expert=built.carol, method="ahp", judgments=JUDGMENTS, metric_priorities=LOCAL)
    weights = {"Accuracy": 5, "Consistency": 3, "Efficiency": 2}
    services.prioritisation_set(expert=built.bob, method="direct", weights=weights)
    rows = [*AttributePrioritisation.objects.all(), *MetricPrioritisation.objects.all()]
    expected = {(type(row), row.pk): row.result_record for row in rows}
    AttributePrioritisation.objects.update(result=None)
    MetricPrioritisation.objects.update(result=None)
    store_results(apps, None)
    rows = [*AttributePrioritisation.objects.all(), *MetricPrioritisation.objects.all()]
    assert len(rows) == 3
    for row in rows:
        stored, recomputed = expected[(type(row), row.pk)], row.result_record
        assert recomputed["weights"] == pytest.approx(stored["weights"], rel=1e-12)
        assert recomputed["most_inconsistent"] == stored["most_inconsistent"]
        assert recomputed["consistency_ratio"] == stored["consistency_ratio"]


# --- unknown fields are refused on every write ----------------------------------------------------------


def _write_requests(built):
    study = f"{API}/studies/{built.study.pk}"
    attribute, metric, candidate = (
        built.attributes["Accuracy"].pk,
        built.metrics["AUC"].pk,
        built.candidates["J48"].pk,
    )
    return [
        ("alice", "patch", f"{study}/", {"title": "New", "phase": "closed"}, "phase"),
        ("alice", "patch", f"{study}/", {"designer": "bob"}, "designer"),
        ("alice", "post", f"{API}/studies/", {"title": "Another", "phase": "closed"}, "phase"),
        ("alice", "post", f"{study}/transitions/", {"to": "voting", "force": True}, "force"),
        ("alice", "post", f"{study}/members/", {"username": "charlie", "admin": True}, "admin"),
        ("alice", "post", f"{study}/attributes/", {"name": "Speed", "selected": True}, "selected"),
        ("alice", "patch", f"{study}/attributes/{attribute}/", {"position": 9}, "position"),
        ("alice", "post", f"{study}/metrics/", {"name": "F1", "attribute": "Accuracy", "id": 1}, "id"),
        ("alice", "patch", f"{study}/metrics/{metric}/", {"selected": True}, "selected"),
        ("alice", "post", f"{study}/candidates/", {"name": "SVM", "study": 1}, "study"),
        ("alice", "patch", f"{study}/candidates/{candidate}/", {"position": 1}, "position"),
        (None, "post", f"{API}/auth/token/", {"username": "alice", "password": "x", "expires": 1}, "expires"),
    ]


@pytest.mark.parametrize("index", range(12))
def test_an_unknown_field_is_refused_naming_it(make_study, api, cast, unchanged, index):
    built = make_study(Phase.DRAFT)
    actor, method, url, body, field = _write_requests(built)[index]
    client = api(None if actor is None else getattr(cast, actor))
    with unchanged():
        response = getattr(client, method)(url, body, format="json")
    assert response.status_code == 400
    assert list(error_fields(response)) == [field]
    assert error_fields(response)[field][0].startswith("is not a field of this request (the fields are ")


def test_unknown_vote_fields_are_refused(make_study, api, cast, unchanged):
    built = make_study(Phase.VOTING)
    with unchanged():
        response = api(cast.bob).put(
            f"{API}/studies/{built.study.pk}/my/votes/", {"attributes": [], "abstain": True}, format="json"
        )
    assert response.status_code == 400 and list(error_fields(response)) == ["abstain"]


def test_known_fields_still_change_the_study(make_study, api, cast):
    built = make_study(Phase.DRAFT)
    response = api(cast.alice).patch(f"{API}/studies/{built.study.pk}/", {"title": "Renamed"}, format="json")
    assert response.status_code == 200 and response.json()["title"] == "Renamed"
    assert Study.objects.get(pk=built.study.pk).phase == Phase.DRAFT


# --- duplicate checks stay linear ---------------------------------------------------------------------


def test_repeated_vote_names_at_the_list_limit_get_a_400_naming_them(make_study, api, cast):
    """The list limit (tests/api/test_limits.py) refuses 40,000 names before
    any work; a list at the limit reaches the service's duplicate check,
    which names the repeats (linear: tests/workspace/test_rules_at_input.py)."""
    built = make_study(Phase.VOTING)
    client = api(cast.bob)
    url = f"{API}/studies/{built.study.pk}/my/votes/"
    names = [f"metric {i % (limits.MAX_METRICS // 2)}" for i in range(limits.MAX_METRICS)]
    started = time.perf_counter()
    response = client.put(url, {"attributes": [], "metrics": names}, format="json")
    elapsed = time.perf_counter() - started
    assert response.status_code == 400
    assert error_fields(response)["metrics"][0].startswith("names given twice: metric 0, metric 1, metric 10,")
    assert elapsed < 5  # the quadratic check took minutes; a loaded CI machine must not fail this


# --- query counts -------------------------------------------------------------------------------------


def inputs_study(size, designer):
    """An assessment study where everything comes ``size`` times: experts,
    attributes (half complementary, voted for, each with two metrics),
    candidates; every expert has votes, AHP priorities with local ones for
    every attribute, a range for every metric and peer weights."""
    User = get_user_model()
    study = services.study_create(designer=designer, title=f"Inputs {size}")
    users = [User.objects.create(username=f"in{size}x{i}") for i in range(size)]
    experts = [services.expert_add(study=study, user=user) for user in users]
    attributes = [
        services.attribute_add(study=study, name=f"A{i}", kind="complementary" if i % 2 else "main")
        for i in range(size)
    ]
    metrics = {
        a.name: [services.metric_add(study=study, attribute=a, name=f"{a.name} m{j}") for j in range(2)]
        for a in attributes
    }
    candidates = [services.candidate_add(study=study, name=f"C{i}") for i in range(size)]
    services.measurements_set(
        study=study,
        measurements=[
            {"candidate": c.name, "metric": m.name, "value": 0.5}
            for c in candidates
            for pair in metrics.values()
            for m in pair
        ],
    )
    services.study_open_voting(study=study)
    complementary = [a.name for a in attributes if a.kind == "complementary"]
    every_metric = [m.name for pair in metrics.values() for m in pair]
    for expert in experts:
        services.votes_set(expert=expert, attributes=complementary, metrics=every_metric)
    services.study_close_voting(study=study)
    names = [a.name for a in attributes]
    judgments = [[a, b, 2] for i, a in enumerate(names) for b in names[i + 1 :]]
    local = {a: {"method": "ahp", "judgments": [[m[0].name, m[1].name, 3]]} for a, m in metrics.items()}
    for expert in experts:
        services.priorities_set(expert=expert, method="ahp", judgments=judgments, metric_priorities=local)
        services.ranges_set(expert=expert, ranges={m: [0.1, 0.9] for m in every_metric})
        services.peer_weights_set(expert=expert, weights={u.username: 1 / size for u in users})
    return study, users[0]


# Every request below starts with the same three queries (tests/api/
# test_csrf_tokens_pagination.py, SCOPED): the token with its user; the study
# among the user's; the user's memberships of it (their roles).
SCOPED = 3
INPUT_QUERIES = {
    # SCOPED; the expert's attribute votes with their attributes; metric votes with metrics
    "my/votes/": SCOPED + 2,
    # SCOPED; the prioritisation (with its stored result); its weights with
    # attributes; its judgments with rows and columns; the local
    # prioritisations with their attributes; their weights with metrics;
    # their judgments with rows and columns
    "my/priorities/": SCOPED + 6,
    # SCOPED; the ranges with their metrics
    "my/ranges/": SCOPED + 1,
    # SCOPED; the peer weights with the rated experts' users
    "my/peer-weights/": SCOPED + 1,
    # SCOPED; the expert named in the URL with their user; then all four
    # sections as above (2 + 6 + 1 + 1)
    "inputs/{expert}/": SCOPED + 1 + 10,
    # SCOPED; the experts with their users; the attributes; the metrics with
    # their attributes; the candidates; their measurements (plain values,
    # one query); then every expert's four sections (2 + 6 + 1 + 1); the
    # revision rounds (1; none here, so no responses are read); the ranges to
    # confirm (1)
    "export/": SCOPED + 5 + 10 + 1 + 1,
}


@pytest.mark.parametrize("path", list(INPUT_QUERIES))
def test_input_reads_take_a_fixed_number_of_queries(path, cast, django_assert_num_queries):
    seen = {}
    for size in (2, 6):
        study, expert = inputs_study(size, cast.alice)
        reader = expert if path.startswith("my/") else cast.alice
        client = client_with_token(token_key(reader))
        url = f"{API}/studies/{study.pk}/" + path.format(expert=expert.username)
        with django_assert_num_queries(INPUT_QUERIES[path]):
            response = client.get(url)
        assert response.status_code == 200, response.json()
        seen[size] = response.json()
    small, large = seen[2], seen[6]
    # The bigger study really is bigger in the answer.
    sizes = {
        "my/votes/": lambda body: len(body["metrics"]),
        "my/priorities/": lambda body: len(body["metric_results"]),
        "my/ranges/": len,
        "my/peer-weights/": len,
        "inputs/{expert}/": lambda body: len(body["priorities"]["judgments"]),
        "export/": lambda body: (len(body["priorities"]), len(body["candidates"][0]["measurements"])),
    }[path]
    assert sizes(small) < sizes(large)


def test_the_study_detail_reads_the_study_once(cast, django_assert_num_queries):
    study, expert = inputs_study(3, cast.alice)
    client = client_with_token(token_key(expert))
    # the token; the study, among mine, with its designer; my memberships;
    # its experts with their users; the selected attributes; the selected metrics
    with django_assert_num_queries(6):
        body = client.get(f"{API}/studies/{study.pk}/").json()
    assert body["my_roles"] == ["expert"] and len(body["experts"]) == 3
    assert body["selection"]["attributes"] == ["A0", "A1", "A2"]
    assert body["selection"]["metrics"] == ["A0 m0", "A0 m1", "A1 m0", "A1 m1", "A2 m0", "A2 m1"]
