"""Case study 1 (METHOD.md 6.3, shared/examples/case-study-1.json) done
entirely through the REST API, as a script would: five people get tokens
with their passwords, the designer sets the study up and moves it through
its phases, each expert gives their inputs, a run is launched and polled,
and the results carry the paper's figures. The export then gives back the
case-study bundle.
"""

import copy

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from engine import prioritisation as engine
from engine.rules import CONSISTENCY_THRESHOLD
from workspace.bundles import study_import_bundle
from workspace.models import Study

from .conftest import PASSWORD, client_with_token, finish_run

pytestmark = pytest.mark.django_db

API = "/api/v1"
EXPERTS = ["statistician", "informatician", "researcher", "clinician"]
ATTRIBUTES = ["Accuracy", "Consistency", "Comprehensibility"]
METRICS = ["Success rate", "Fold accuracy stdev", "Comprehensibility rating"]
# The clinician first tries AHP (the judgments of FORMATS.md), then settles
# on the direct weights of the case study.
AHP_JUDGMENTS = [
    ["Accuracy", "Consistency", 3],
    ["Accuracy", "Comprehensibility", 0.5],
    ["Consistency", "Comprehensibility", 0.25],
]


def ok(response, status=200):
    assert response.status_code == status, f"{response.status_code}: {response.content[:500]!r}"
    return response.json() if response.content else None


def login(username):
    """POST /auth/token/ with the password: the key is shown once."""
    anonymous = client_with_token(None)
    body = ok(
        anonymous.post(
            API + "/auth/token/", {"username": username, "password": PASSWORD, "name": "script"}, format="json"
        ),
        201,
    )
    assert len(body["token"]) == 40 and body["prefix"] == body["token"][:8] and body["name"] == "script"
    return client_with_token(body["token"])


@pytest.fixture
def people(db):
    User = get_user_model()
    for username in ["designer", *EXPERTS]:
        User.objects.create_user(username=username, password=PASSWORD)
    return {username: login(username) for username in ["designer", *EXPERTS]}


def normalised_votes(bundle):
    """``votes`` without empty ballots: the case-study file leaves out the
    (empty) metric votes an export lists per expert."""
    return {kind: {name: v for name, v in ballots.items() if v} for kind, ballots in bundle["votes"].items()}


def test_case_study_1_through_the_api(people, case_study, quiet_on_commit):
    designer = people["designer"]

    # --- setup (draft) -------------------------------------------------------------------
    study = ok(
        designer.post(
            API + "/studies/",
            {
                "title": case_study["title"],
                "description": case_study["description"],
                "attribute_threshold": case_study["attribute_threshold"],
                "metric_threshold": case_study["metric_threshold"],
            },
            format="json",
        ),
        201,
    )
    assert (study["phase"], study["designer"], study["my_roles"], study["experts"]) == (
        "draft",
        "designer",
        ["designer"],
        [],
    )
    assert study["selection"] is None
    base = f"{API}/studies/{study['id']}"

    for position, attribute in enumerate(case_study["attributes"], start=1):
        created = ok(designer.post(base + "/attributes/", attribute, format="json"), 201)
        assert created == {**attribute, "id": created["id"], "position": position, "selected": None}
    for metric in case_study["metrics"]:
        created = ok(designer.post(base + "/metrics/", metric, format="json"), 201)
        assert {k: created[k] for k in metric} == metric  # default ranges included
    for candidate in case_study["candidates"]:
        ok(
            designer.post(
                base + "/candidates/",
                {"name": candidate["name"], "description": candidate["description"]},
                format="json",
            ),
            201,
        )
    measurements = [
        {"candidate": c["name"], "metric": metric, "value": value}
        for c in case_study["candidates"]
        for metric, value in c["measurements"].items()
    ]
    assert ok(designer.put(base + "/measurements/", measurements, format="json")) == measurements
    listed = ok(designer.get(base + "/measurements/"))
    assert listed["count"] == 16
    key = lambda row: (row["candidate"], row["metric"])  # noqa: E731
    # every row has its standard error, null: none was given
    assert sorted(listed["results"], key=key) == sorted(
        ({**row, "standard_error": None} for row in measurements), key=key
    )

    # Each expert is invited and joins by accepting (issue 11: consent).
    for username in EXPERTS:
        invited = ok(designer.post(base + "/members/", {"username": username}, format="json"), 202)
        assert (invited["invitation"]["username"], invited["invitation"]["status"]) == (username, "pending")
        mine = ok(people[username].get(API + "/invitations/"))["results"]
        assert [(i["study"]["id"], i["invited_by"], i["inputs"]) for i in mine] == [(study["id"], "designer", None)]
        accepted = ok(people[username].post(f"{API}/invitations/{mine[0]['id']}/accept/", {}, format="json"))
        assert (accepted["study"], accepted["role"]) == (study["id"], "expert")
    assert ok(designer.get(base + "/"))["experts"] == EXPERTS

    # --- voting ----------------------------------------------------------------------------
    assert ok(designer.post(base + "/transitions/", {"to": "voting"}, format="json"))["phase"] == "voting"
    for username in EXPERTS:
        ballot = ok(people[username].put(base + "/my/votes/", {"attributes": [], "metrics": []}, format="json"))
        assert ballot == {"attributes": [], "metrics": []}
    detail = ok(designer.post(base + "/transitions/", {"to": "assessment"}, format="json"))
    assert detail["phase"] == "assessment"
    # Efficiency is complementary and nobody voted for it: not selected.
    assert detail["selection"] == {"attributes": ATTRIBUTES, "metrics": METRICS}

    # --- assessment ------------------------------------------------------------------------
    clinician = people["clinician"]
    ahp = ok(clinician.put(base + "/my/priorities/", {"method": "ahp", "judgments": AHP_JUDGMENTS}, format="json"))
    expected = engine.prioritise(
        "ahp", 3, judgments=[(ATTRIBUTES.index(r), ATTRIBUTES.index(c), float(v)) for r, c, v in AHP_JUDGMENTS]
    )
    assert (ahp["method"], ahp["judgments"]) == ("ahp", AHP_JUDGMENTS)
    result = ahp["result"]
    assert list(result["weights"]) == ATTRIBUTES
    assert list(result["weights"].values()) == pytest.approx(expected.weights.tolist(), abs=1e-12)
    assert sum(result["weights"].values()) == pytest.approx(1)
    assert result["consistency_ratio"] == pytest.approx(expected.consistency_ratio, abs=1e-12)
    assert result["inconsistent"] == (expected.consistency_ratio > CONSISTENCY_THRESHOLD)
    assert result["most_inconsistent"] == [
        {
            "row": ATTRIBUTES[j.row],
            "column": ATTRIBUTES[j.column],
            "value": pytest.approx(j.value),
            "error": pytest.approx(j.error),
            "suggested_value": pytest.approx(j.suggested_value),
        }
        for j in expected.most_inconsistent
    ]
    assert len(result["most_inconsistent"]) == 3
    # Reading it back recomputes the same result.
    assert ok(clinician.get(base + "/my/priorities/")) == ahp

    for username in EXPERTS:
        section = case_study["priorities"][username]
        body = ok(people[username].put(base + "/my/priorities/", section, format="json"))
        assert (body["method"], body["weights"]) == ("direct", section["weights"])
        assert body["result"]["weights"] == pytest.approx(section["weights"])  # they already sum to 1
        assert body["result"]["consistency_ratio"] is None and body["result"]["most_inconsistent"] == []
        row = case_study["peer_weights"][username]
        assert ok(people[username].put(base + "/my/peer-weights/", row, format="json")) == row
        # No ranges given: every expert falls back on the default ranges.
        assert ok(people[username].get(base + "/my/ranges/")) == {}

    inputs = ok(designer.get(base + "/inputs/clinician/"))
    # The priorities come with their result (issue 16: the consistency ratio and its flag).
    assert inputs["priorities"].pop("result")["inconsistent"] is None  # direct weights: no ratio
    assert inputs == {
        "votes": {"attributes": [], "metrics": []},
        "priorities": case_study["priorities"]["clinician"],
        "ranges": {},
        "peer_weights": case_study["peer_weights"]["clinician"],
    }
    assert ok(designer.post(base + "/transitions/", {"to": "closed"}, format="json"))["phase"] == "closed"

    # --- the run ---------------------------------------------------------------------------
    with quiet_on_commit():
        launch = designer.post(base + "/runs/")
    run = ok(launch, 202)
    assert (run["status"], run["launched_by"], run["study"]) == ("queued", "designer", study["id"])
    location = launch["Location"]
    assert location == f"http://testserver{API}/runs/{run['id']}/"
    for _ in range(20):
        polled = ok(designer.get(location))
        if polled["status"] in ("succeeded", "failed"):
            break
        # No worker runs in the tests: do its job (a no-op once the run has
        # executed, as it has with Celery eager).
        finish_run(run["id"])
    assert polled["status"] == "succeeded", polled["error"]
    assert polled["finished_at"] and polled["duration_seconds"] >= 0 and polled["attempts"] == 1

    results = ok(designer.get(f"{API}/runs/{run['id']}/results/"))
    # Every member reads the same document.
    assert ok(people["researcher"].get(f"{API}/runs/{run['id']}/results/")) == results
    assert results["format"] == "approve-results/1"
    assert (results["study"], results["run"]) == (case_study["title"], run["id"])
    assert results["selected_attributes"] == ATTRIBUTES and results["metrics"] == METRICS
    weights = results["attribute_weights"]
    assert weights == pytest.approx({"Accuracy": 0.5295, "Consistency": 0.2273, "Comprehensibility": 0.2432}, abs=5e-5)
    assert sum(weights.values()) == pytest.approx(1)
    assert list(results["metric_weights"].values()) == pytest.approx(list(weights.values()))  # one metric per attribute
    assert results["expert_influence"] == pytest.approx(
        {"statistician": 0.3681, "informatician": 0.2454, "researcher": 0.1718, "clinician": 0.2147}, abs=5e-5
    )

    by_name = {c["name"]: c for c in results["candidates"]}
    assert [c["name"] for c in results["candidates"]][:2] == ["JRip", "J48"]
    assert (by_name["JRip"]["rank"], by_name["J48"]["rank"]) == (1, 2)
    assert by_name["JRip"]["cef"] == pytest.approx(0.4647, abs=5e-5)
    assert by_name["J48"]["cef"] == pytest.approx(0.3267, abs=5e-5)
    for name in ("JRip", "J48"):
        assert not by_name[name]["vetoed"] and by_name[name]["vetoes"] == []
    for name in ("RandomForest", "IBk"):
        candidate = by_name[name]
        assert candidate["vetoed"] and candidate["cef"] == 0.0 and candidate["rank"] == 3
        # Vetoed by all four experts, on the comprehensibility rating (0 < 6).
        assert sorted(v["expert"] for v in candidate["vetoes"]) == sorted(EXPERTS)
        assert all(
            (v["metric"], v["value"], v["range"]) == ("Comprehensibility rating", 0, [6, 10])
            for v in candidate["vetoes"]
        )
    # CEF of the paper's own group scores with the consensus weights (METHOD.md 6.3).
    a = np.array([weights[name] for name in ATTRIBUTES])
    assert a @ np.array([0.475, 0.52, 0.687]) == pytest.approx(0.537, abs=5e-4)
    assert a @ np.array([0.595, 0.66, 1.0]) == pytest.approx(0.708, abs=5e-4)
    # A candidate's individual scores, expert by metric, as in the document
    # asked for with them (FORMATS.md "Size": left out by default).
    assert all("individual_scores" not in c for c in results["candidates"])
    full = ok(people["statistician"].get(f"{API}/runs/{run['id']}/results/?individual=true"))
    scores = ok(people["statistician"].get(f"{API}/runs/{run['id']}/candidates/J48/scores/"))
    assert scores == {c["name"]: c for c in full["candidates"]}["J48"]["individual_scores"]
    assert set(scores) == set(EXPERTS) and all(list(row) == METRICS for row in scores.values())

    # --- the export is the case-study bundle -------------------------------------------------
    bundle = ok(designer.get(base + "/export/"))
    assert bundle["experts"] == case_study["experts"]
    assert bundle["priorities"] == case_study["priorities"]
    assert bundle["peer_weights"] == case_study["peer_weights"]
    for key in set(case_study) - {"votes"}:
        assert bundle[key] == case_study[key], key
    assert normalised_votes(bundle) == normalised_votes(case_study)
    # And it imports back into the same study, by the command line's path: an
    # API import by anyone but staff may not carry the experts' inputs, and
    # a staff import's await their confirmation (tests/api/test_invitations.py).
    again = study_import_bundle(bundle=copy.deepcopy(bundle))
    again = ok(designer.get(f"{API}/studies/{again.pk}/"))
    assert again["phase"] == "closed" and again["id"] != study["id"]
    assert ok(designer.get(f"{API}/studies/{again['id']}/export/")) == bundle
    assert Study.objects.filter(title=case_study["title"]).count() == 2
