"""Issue 17, finding 8: payloads whose types do not match the schema are
refused, not coerced (``"description": 0`` was stored as ``"0"``), and an
empty username no longer makes a link invitation (a form body is refused
with 415: the API reads JSON only).
Pagination's ``?page=`` is in test_csrf_tokens_pagination.py."""

import pathlib
import re

import pytest

from tests.fixtures import error_fields
from workspace.models import Candidate, Invitation, Phase, Study

pytestmark = pytest.mark.django_db

API = "/api/v1"
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value, kind", [(0, "int"), (1.5, "float"), (True, "bool"), ({"a": 1}, "dict"), ([], "list")])
def test_a_study_description_must_be_text(api, cast, value, kind):
    client = api(cast.alice)
    created = client.post(f"{API}/studies/", {"title": "T", "description": value}, format="json")
    assert created.status_code == 400
    assert error_fields(created) == {"description": [f"must be text, got {kind}"]}
    assert not Study.objects.exists()


def test_every_text_field_refuses_numbers(api, cast, make_study):
    built = make_study(Phase.DRAFT)
    study = built.study
    client = api(cast.alice)
    answers = {
        "title": client.post(f"{API}/studies/", {"title": 7}, format="json"),
        "patch description": client.patch(f"{API}/studies/{study.pk}/", {"description": 0}, format="json"),
        "candidate": client.post(f"{API}/studies/{study.pk}/candidates/", {"name": 12}, format="json"),
        "attribute": client.post(
            f"{API}/studies/{study.pk}/attributes/", {"name": "X", "description": 3}, format="json"
        ),
        "metric unit": client.post(
            f"{API}/studies/{study.pk}/metrics/", {"name": "M", "attribute": "Accuracy", "unit": 1}, format="json"
        ),
        "member": client.post(f"{API}/studies/{study.pk}/members/", {"username": 5}, format="json"),
        "invitation": client.post(f"{API}/studies/{study.pk}/invitations/", {"username": 5}, format="json"),
        "token name": api(None).post(
            f"{API}/auth/token/", {"username": "alice", "password": "x", "name": 1}, format="json"
        ),
    }
    for label, response in answers.items():
        assert response.status_code == 400, label
        assert "must be text, got int" in str(response.json()), (label, response.json())
    study.refresh_from_db()
    assert study.description == built.study.description
    assert not Candidate.objects.filter(study=study, name="12").exists()
    assert not Invitation.objects.filter(study=study).exists()


def test_votes_name_items_as_text(api, cast, make_study):
    built = make_study(Phase.VOTING)
    response = api(cast.bob).put(
        f"{API}/studies/{built.study.pk}/my/votes/", {"attributes": [0], "metrics": []}, format="json"
    )
    assert response.status_code == 400
    assert error_fields(response) == {"attributes.0": ["must be text, got int"]}


def test_text_still_passes(api, cast):
    created = api(cast.alice).post(f"{API}/studies/", {"title": "T", "description": "0"}, format="json")
    assert created.status_code == 201 and created.json()["description"] == "0"


def test_the_api_has_one_text_field_class():
    """Every string field of the API's serializers is StrictCharField."""
    offenders = [
        f"{path.name}:{number}"
        for path in sorted((ROOT / "workspace" / "api").glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"serializers\.CharField\(", line)
    ]
    assert offenders == []


# --- invitations: form bodies -------------------------------------------------------------
# An empty username in a form body used to make a link invitation (finding 8);
# the API now reads JSON only, so a form body is refused before it is read.


def test_a_form_body_is_refused_not_a_link(clients, make_study):
    study = make_study(Phase.DRAFT).study.pk
    response = clients["alice"].post(
        f"{API}/studies/{study}/invitations/", "username=", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    assert "reads application/json only" in response.json()["detail"]
    multipart = clients["alice"].post(f"{API}/studies/{study}/invitations/", {"username": ""}, format="multipart")
    assert multipart.status_code == 415
    assert not Invitation.objects.filter(study_id=study).exists()


@pytest.mark.parametrize(
    "body, status, expected",
    [
        ({}, 201, ("link", None)),
        ({"kind": "link"}, 201, ("link", None)),
        ({"username": "dora"}, 201, ("username", "dora")),
        ({"kind": "username", "username": "dora"}, 201, ("username", "dora")),
        (
            {"username": ""},
            400,
            {"username": ["must not be empty: give a username, or leave it out with kind=link for a link"]},
        ),
        ({"kind": "link", "username": "dora"}, 400, {"username": ["a link invitation has no username: leave it out"]}),
        ({"kind": "username"}, 400, {"username": ["is required for an invitation of kind username"]}),
        ({"kind": "email"}, 400, {"email": ["is required for an invitation of kind email"]}),
        ({"kind": "mail"}, 400, {"kind": ['"mail" is not a valid choice.']}),
    ],
)
def test_json_clients_keep_working(clients, make_study, body, status, expected):
    study = make_study(Phase.DRAFT).study.pk
    response = clients["alice"].post(f"{API}/studies/{study}/invitations/", body, format="json")
    assert response.status_code == status, response.content
    if status == 201:
        assert (response.json()["kind"], response.json()["username"]) == expected
    else:
        assert error_fields(response) == expected
        assert not Invitation.objects.filter(study_id=study).exists()
