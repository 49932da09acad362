"""Revision rounds through the API with three experts: the feedback never
reveals an individual's answer, the status shows an expert only their own
responses, and a round opens, is responded to and closes (issue 22)."""

import json

import pytest

from engine.snapshot import inputs_snapshot
from tests.fixtures import api_error
from tests.pages.test_rounds import panel  # noqa: F401  (the three-expert fixture)
from workspace import services

pytestmark = pytest.mark.django_db


def test_a_round_through_the_api(panel, api, cast):  # noqa: F811
    base = f"/api/v1/studies/{panel.study.pk}/rounds"
    alice, bob = api(cast.alice), api(cast.bob)
    assert bob.get(f"{base}/feedback/").json()["detail"] == "No revision round is open."
    opened = alice.post(f"{base}/", {"message": "Check Accuracy"}, format="json")
    assert opened.status_code == 201 and opened.json()["number"] == 1
    again = alice.post(f"{base}/", {}, format="json")
    assert again.status_code == 409 and again.json() == api_error(
        "round_open", "Round 1 is open: close it before opening another."
    )
    answered = bob.post(f"{base}/feedback/", {"step": "ranges", "reason": "Clinic's range"}, format="json")
    assert answered.status_code == 200
    assert (answered.json()["action"], answered.json()["reason"]) == ("confirmed", "Clinic's range")
    bad = bob.post(f"{base}/feedback/", {"step": "votes"}, format="json")
    assert bad.status_code == 400 and "step" in bad.json()["fields"]
    # the expert reads only their own responses; the designer who responded, without reasons
    status = bob.get(f"{base}/1/").json()
    assert status["responses"] is None and [r["step"] for r in status["mine"]] == ["ranges"]
    grid = alice.get(f"{base}/1/").json()
    assert grid["mine"] is None
    assert grid["responses"][0] == {
        "expert": "bob",
        "responded": False,
        "steps": {"priorities": None, "ranges": "confirmed", "peer_weights": None},
    }
    assert "Clinic's range" not in json.dumps(grid)
    closed = alice.post(f"{base}/close/", format="json")
    assert closed.status_code == 200 and closed.json()["is_open"] is False
    assert alice.post(f"{base}/close/", format="json").json()["code"] == "no_open_round"


@pytest.mark.parametrize("reader", ["bob", "carol", "charlie"])
def test_the_feedback_never_reveals_an_individuals_answer(panel, api, cast, reader):  # noqa: F811
    services.round_open(study=panel.study, by=cast.alice)
    body = api(getattr(cast, reader)).get(f"/api/v1/studies/{panel.study.pk}/rounds/feedback/").json()
    text = json.dumps(body)
    others = {"bob", "carol", "charlie"} - {reader}
    # no other expert is named anywhere but as the one weighed (peer weights' names)
    weighed = [p["name"] for p in body["peer_weights"]]
    assert sorted(weighed) == ["bob", "carol", "charlie"]
    without_weighed = json.dumps({k: v for k, v in body.items() if k != "peer_weights"})
    assert not any(name in without_weighed for name in others)
    # the lowest and highest weight of an attribute (one expert's own) are never sent
    accuracy = next(a for a in body["attributes"] if a["name"] == "Accuracy")
    assert set(accuracy["group"]) == {"count", "q1", "median", "q3"}
    assert accuracy["group"]["count"] == 3
    column = inputs_snapshot(study=panel.study)["attribute_weights"]
    experts = inputs_snapshot(study=panel.study)["experts"]
    accuracy_of = {name: row[0] for name, row in zip(experts, column, strict=True)}
    for name, value in accuracy_of.items():
        if name != reader and value in (min(accuracy_of.values()), max(accuracy_of.values())):
            assert str(value) not in text, name
    # peer weights: the mean each receives, no rater's row
    assert set(body["peer_weights"][0]) == {"name", "mean", "raters", "own"}
    # ranges: each bound sorted on its own
    auc = next(r for r in body["ranges"] if r["name"] == "AUC")
    assert auc["least_acceptable"] == [0.6, 0.71, 0.75] and auc["desired"] == [0.91, 0.95, 0.99]


def test_the_designer_reads_no_feedback(panel, api, cast):  # noqa: F811
    services.round_open(study=panel.study, by=cast.alice)
    response = api(cast.alice).get(f"/api/v1/studies/{panel.study.pk}/rounds/feedback/")
    assert response.status_code == 403
