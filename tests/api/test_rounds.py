"""Revision rounds through the API with three experts: the feedback never
reveals an individual's answer, the status shows an expert only their own
responses, and a round opens, is responded to and closes (issue 22)."""

import json

import pytest

from tests.fixtures import api_error
from tests.pages.test_rounds import panel  # noqa: F401  (the three-expert fixture)
from workspace import selectors, services

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
    others = {"bob", "carol", "charlie"} - {reader}
    # no other expert is named anywhere but as the one weighed (peer weights' names)
    weighed = [p["name"] for p in body["peer_weights"]]
    assert sorted(weighed) == ["bob", "carol", "charlie"]
    without_weighed = json.dumps({k: v for k, v in body.items() if k != "peer_weights"})
    assert not any(name in without_weighed for name in others)
    # with three experts only the coarse band of each median: no expert's
    # weight or bound is sent, the lowest and highest least of all
    accuracy = next(a for a in body["attributes"] if a["name"] == "Accuracy")
    assert accuracy["group"].keys() == {"count", "median_band", "q1", "median", "q3"}
    assert accuracy["group"]["count"] == 3 and accuracy["group"]["q1"] is None and accuracy["group"]["median"] is None
    low, high = accuracy["group"]["median_band"]
    assert high - low == pytest.approx(0.05)
    # every number sent is a count, a band's end or a step, or the reader's own
    numbers = []

    def walk(node, key=None):
        if isinstance(node, dict):
            for k, v in node.items():
                if k not in ("own", "round", "mine", "previous_reasons"):
                    walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, int | float) and not isinstance(node, bool):
            numbers.append(key)

    walk(body)
    assert numbers and set(numbers) <= {"count", "median_band", "step"}
    # peer weights: the weights each receives summarised alike, no rater's row
    assert body["peer_weights"][0].keys() == {"name", "group", "own"}
    # ranges: each bound summarised on its own, never the sorted list
    auc = next(r for r in body["ranges"] if r["name"] == "AUC")
    assert auc.keys() == {"name", "better", "unit", "step", "least_acceptable", "desired", "own"}
    for bound, middle in (("least_acceptable", 0.71), ("desired", 0.95)):
        low, high = auc[bound]["median_band"]
        assert low <= middle <= high and high - low == pytest.approx(auc["step"])
    # the same as the pages read (one implementation), kept when the round opened
    page = selectors.round_feedback(
        study=panel.study, expert=panel.experts[reader], round=selectors.round_current(study=panel.study)
    )
    assert [a["group"]["median_band"] for a in body["attributes"]] == [list(a.group.band) for a in page.attributes]
    assert body["ranges"][0]["least_acceptable"] == page.ranges[0].least_acceptable.as_json()


def test_the_designer_reads_no_feedback(panel, api, cast):  # noqa: F811
    services.round_open(study=panel.study, by=cast.alice)
    response = api(cast.alice).get(f"/api/v1/studies/{panel.study.pk}/rounds/feedback/")
    assert response.status_code == 403


def test_re_reading_the_feedback_after_a_colleague_saves_isolates_nothing(panel, api, cast):  # noqa: F811
    services.round_open(study=panel.study, by=cast.alice)
    url = f"/api/v1/studies/{panel.study.pk}/rounds/feedback/"
    before = api(cast.bob).get(url).json()
    saved = api(cast.charlie).put(f"/api/v1/studies/{panel.study.pk}/my/ranges/", {"AUC": [0.1, 0.2]}, format="json")
    assert saved.status_code == 200, saved.json()
    after = api(cast.bob).get(url).json()
    assert after == before  # the feedback the round opened with, to the digit
    # charlie reads his own new range beside the same group figures
    mine = api(cast.charlie).get(url).json()
    auc = next(r for r in mine["ranges"] if r["name"] == "AUC")
    assert auc["own"] == [0.1, 0.2]
    assert auc["least_acceptable"] == next(r for r in before["ranges"] if r["name"] == "AUC")["least_acceptable"]
