"""``POST /api/v1/studies/{id}/copy/`` (issue 31, item 3): the designer gets
a new draft study with the setup (201, ``Location``); an expert 403, an
outsider 404, nothing written. And a designer's own export imported back
through the API is a copy that says what it left out."""

import pytest

from tests.fixtures import api_error, error_fields
from workspace.bundles import study_export_bundle
from workspace.models import Measurement, Phase, Study

pytestmark = pytest.mark.django_db

API = "/api/v1"


def copy_url(study: Study) -> str:
    return f"{API}/studies/{study.pk}/copy/"


def test_the_designer_gets_the_new_study_and_its_location(make_study, clients) -> None:
    built = make_study(Phase.CLOSED)
    response = clients["alice"].post(copy_url(built.study), {}, format="json")
    assert response.status_code == 201, response.content
    copy = Study.objects.exclude(pk=built.study.pk).get()
    assert response.json() == {
        "id": copy.pk,
        "title": "Copy of Choosing a classifier",
        "description": "which learner to deploy",
        "phase": "draft",
        "designer": "alice",
        "my_roles": ["designer"],
        "attribute_threshold": 1,
        "metric_threshold": 0,
        "ahp_weighting": "column_means",
        "quorum": 0,
        "created_at": response.json()["created_at"],
        "updated_at": response.json()["updated_at"],
        "experts": [],
        "selection": None,
    }
    assert response["Location"] == f"http://testserver{API}/studies/{copy.pk}/"
    assert clients["alice"].get(response["Location"]).json() == response.json()
    assert Measurement.objects.filter(study=copy).count() == Measurement.objects.filter(study=built.study).count() > 0


def test_the_options_are_honoured(make_study, clients) -> None:
    built = make_study(Phase.DRAFT)
    body = {"title": "Second panel", "measurements": False, "predictions": False}
    response = clients["alice"].post(copy_url(built.study), body, format="json")
    assert response.status_code == 201 and response.json()["title"] == "Second panel"
    copy = Study.objects.get(pk=response.json()["id"])
    assert not Measurement.objects.filter(study=copy).exists()
    assert [c["name"] for c in study_export_bundle(study=copy)["candidates"]] == ["J48", "JRip"]


def test_an_expert_gets_403_an_outsider_404_and_nothing_is_written(make_study, clients, unchanged) -> None:
    built = make_study(Phase.CLOSED)
    with unchanged():
        expert = clients["bob"].post(copy_url(built.study), {}, format="json")
        outsider = clients["charlie"].post(copy_url(built.study), {}, format="json")
    assert (expert.status_code, expert.json()) == (
        403,
        api_error("permission_denied", "Only the designer of this study can copy the study."),
    )
    assert (outsider.status_code, outsider.json()) == (404, api_error("not_found", "No such study."))


@pytest.mark.parametrize(
    "body, errors",
    [
        ({"title": "x" * 201}, {"title": ["Ensure this field has no more than 200 characters."]}),
        (
            {"title": "Copy\u200bof"},
            {"title": ["must be a single line of visible text: it contains an invisible character (U+200B)"]},
        ),
        ({"title": 7}, {"title": ["must be text, got int"]}),
        ({"measurements": "yes"}, {"measurements": ["must be true or false, got str"]}),
        (
            {"runs": True},
            {"runs": ["is not a field of this request (the fields are title, measurements, predictions)"]},
        ),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field_and_nothing_is_written(make_study, clients, unchanged, body, errors):
    built = make_study(Phase.DRAFT)
    with unchanged():
        response = clients["alice"].post(copy_url(built.study), body, format="json")
    assert response.status_code == 400
    assert error_fields(response) == errors


def test_the_designer_imports_her_own_export_back_as_a_draft_without_the_others_inputs(make_study, clients) -> None:
    built = make_study(Phase.CLOSED)
    exported = clients["alice"].get(f"{API}/studies/{built.study.pk}/export/").json()
    response = clients["alice"].post(f"{API}/studies/import/", exported, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["phase"], body["designer"], body["inputs_left_out"]) == ("draft", "alice", ["bob", "carol"])
    assert body["notes"] == [
        "The inputs of 2 experts (bob, carol) were left out: only staff can import inputs entered by someone "
        "else. The study was imported as a draft, without anyone's inputs; the experts are invited and give "
        "their own."
    ]
    assert [(i["username"], i["status"]) for i in body["invitations"]] == [("bob", "pending"), ("carol", "pending")]
    again = clients["alice"].get(f"{API}/studies/{body['id']}/export/").json()
    assert again["candidates"] == exported["candidates"] and again["metrics"] == exported["metrics"]
    assert (again["priorities"], again["peer_weights"]) == ({}, {})
