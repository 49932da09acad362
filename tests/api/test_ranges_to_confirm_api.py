"""Issue 31: the ranges an expert must confirm once a metric is made
elicited, through the API: listed with their own values and a proposal,
named by the close refusal, confirmed by saving the ranges."""

import pytest

from tests.evaluation.test_elicited_ranges import made_elicited, ready_study

pytestmark = pytest.mark.django_db

API = "/api/v1"


def test_the_ranges_to_confirm_are_listed_named_on_closing_and_confirmed_by_saving(make_study, api):
    built, prediction_set = ready_study(make_study)
    made_elicited(built, prediction_set)
    bob, alice = api(built.bob.user), api(built.study.designer)
    study = f"{API}/studies/{built.study.pk}"
    listed = bob.get(f"{study}/my/ranges/to-confirm/")
    assert listed.status_code == 200
    [entry] = listed.json()["to_confirm"]
    assert entry == {
        "metric": "AUC",
        "better": "lower",
        "unit": "expected cost per instance",
        "range": [0.95, 0.7],
        "own_values": {"J48": pytest.approx(0.26), "JRip": pytest.approx(0.24)},
        "proposed": [0.262, 0.24],
    }
    closing = alice.post(f"{study}/transitions/", {"to": "closed"}, format="json")
    assert closing.status_code == 409
    assert "bob: confirmation of their acceptable range for AUC" in closing.json()["detail"]
    assert "carol: confirmation of their acceptable range for AUC" in closing.json()["detail"]
    assert bob.put(f"{study}/my/ranges/", {"AUC": entry["proposed"]}, format="json").status_code == 200
    assert bob.get(f"{study}/my/ranges/to-confirm/").json() == {"to_confirm": []}
    closing = alice.post(f"{study}/transitions/", {"to": "closed"}, format="json")
    assert "bob:" not in closing.json()["detail"] and "carol: confirmation" in closing.json()["detail"]
