"""Absent experts through the API (issue 31, item 1): the designer excludes
or re-admits an expert at ``members/{username}/absence/``; members read the
absence on the member; the study's ``quorum`` is read and written with it."""

import pytest

from tests.fixtures import error_fields
from workspace.models import Membership, Phase

pytestmark = pytest.mark.django_db

API = "/api/v1"


def test_the_designer_excludes_and_readmits_an_expert(make_study, api, cast):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    url = f"{API}/studies/{built.study.pk}/members/carol/absence/"
    alice = api(cast.alice)

    excluded = alice.put(url, {"absence": "excluded", "reason": "on leave until March"}, format="json")
    assert excluded.status_code == 200, excluded.content
    body = excluded.json()
    assert (body["username"], body["absence"], body["absence_reason"]) == ("carol", "excluded", "on leave until March")
    assert body["absent_since"] is not None
    member = api(cast.bob).get(f"{API}/studies/{built.study.pk}/members/carol/").json()
    assert member["absence"] == "excluded"

    readmitted = alice.delete(url)
    assert readmitted.status_code == 200
    assert readmitted.json()["absence"] == "" and readmitted.json()["absent_since"] is None
    assert Membership.objects.get(pk=built.carol.pk).absence == ""


def test_only_the_designer_in_voting_or_assessment_with_a_reason(make_study, api, cast):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    url = f"{API}/studies/{built.study.pk}/members/carol/absence/"
    by_expert = api(cast.bob).put(url, {"absence": "excluded", "reason": "x"}, format="json")
    assert by_expert.status_code == 403
    assert api(cast.charlie).put(url, {"absence": "excluded", "reason": "x"}, format="json").status_code == 404
    bad = api(cast.alice).put(url, {"absence": "gone"}, format="json")
    assert bad.status_code == 400
    assert set(error_fields(bad)) == {"absence", "reason"}
    assert (
        api(cast.alice).put(f"{API}/studies/{built.study.pk}/members/dave/absence/", {}, format="json").status_code
        == 404
    )
    draft = make_study(Phase.DRAFT, title="Draft")
    refused = api(cast.alice).put(
        f"{API}/studies/{draft.study.pk}/members/carol/absence/", {"absence": "excluded", "reason": "x"}, format="json"
    )
    assert refused.status_code == 409
    assert "Excluding an expert" in refused.json()["detail"]
    assert not Membership.objects.get(pk=built.carol.pk).absence


def test_the_quorum_is_read_and_written_with_the_study(make_study, api, cast):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    study_url = f"{API}/studies/{built.study.pk}/"
    changed = api(cast.alice).patch(study_url, {"quorum": 2}, format="json")
    assert changed.status_code == 200 and changed.json()["quorum"] == 2
    api(cast.alice).put(
        f"{API}/studies/{built.study.pk}/members/carol/absence/",
        {"absence": "abstaining", "reason": "x"},
        format="json",
    )
    closing = api(cast.alice).post(f"{study_url}transitions/", {"to": "closed"}, format="json")
    assert closing.status_code == 409
    assert "at least 2 experts must take part" in closing.json()["detail"]
    assert api(cast.alice).patch(study_url, {"quorum": -1}, format="json").status_code == 400
