"""One error envelope everywhere (issue 18, item 4): every error answer of
the API is ``{"code", "detail", "fields"}``, with the codes of docs/api.md's
table (``workspace.api.exceptions.CODES``)."""

import re
from pathlib import Path

import pytest
from django.test import RequestFactory

from approve_site.urls import server_error
from tests.fixtures import api_error
from workspace.api.exceptions import CODES, summary
from workspace.models import Phase, Study

from .conftest import client_with_token

pytestmark = pytest.mark.django_db

API = "/api/v1"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_the_documented_codes_are_the_codes_answered():
    rows = re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", DOCS.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert {code: int(status) for code, status in rows} == CODES


def test_a_400_sums_its_fields_up_in_one_sentence(api, cast):
    response = api(cast.alice).post(f"{API}/studies/", {"attribute_threshold": -1}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "code": "invalid_input",
        "detail": "2 fields are invalid: title, attribute_threshold (each field's messages are in fields).",
        "fields": {
            "title": ["This field is required."],
            "attribute_threshold": ["Ensure this value is greater than or equal to 0."],
        },
    }
    one = api(cast.alice).post(f"{API}/studies/", {}, format="json")
    assert one.json() == {
        "code": "invalid_input",
        "detail": "title: This field is required.",
        "fields": {"title": ["This field is required."]},
    }
    assert not Study.objects.exists()


def test_the_summary_of_many_fields_names_five():
    fields = {f"f{i}": ["bad"] for i in range(7)}
    assert (
        summary(fields) == "7 fields are invalid: f0, f1, f2, f3, f4 and 2 more (each field's messages are in fields)."
    )
    assert summary({"non_field_errors": ["a", "b"]}) == "The request is invalid (2 problems; see fields)."
    assert summary({"non_field_errors": ["Only this."]}) == "Only this."


def test_a_body_that_is_not_json_is_a_parse_error(api, cast):
    response = api(cast.alice).post(f"{API}/studies/", "{oops", content_type="application/json")
    message = "JSON parse error - Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    assert response.status_code == 400
    assert response.json() == {"code": "parse_error", "detail": message, "fields": {"non_field_errors": [message]}}


def test_authentication_errors(api):
    missing = api(None).get(f"{API}/studies/")
    assert (missing.status_code, missing.json()) == (
        401,
        api_error("not_authenticated", "Authentication credentials were not provided."),
    )
    wrong = client_with_token("not-a-token").get(f"{API}/studies/")
    assert (wrong.status_code, wrong.json()) == (401, api_error("authentication_failed", "Invalid or revoked token."))


def test_permission_not_found_method_accept_and_media_type(api, cast, make_study):
    study = make_study(Phase.DRAFT).study
    bob = api(cast.bob)
    denied = bob.get(f"{API}/studies/{study.pk}/export/")
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"
    assert denied.json()["fields"] == {} and denied.json()["detail"].startswith("Only the designer of this study")
    assert api(cast.charlie).get(f"{API}/studies/{study.pk}/").json() == api_error("not_found", "No such study.")
    assert bob.get(f"{API}/no-such-thing/").json() == api_error("not_found", "Not found.")
    method = bob.put(f"{API}/studies/", {}, format="json")
    assert (method.status_code, method.json()) == (405, api_error("method_not_allowed", 'Method "PUT" not allowed.'))
    accept = bob.get(f"{API}/studies/", HTTP_ACCEPT="application/xml")
    assert accept.status_code == 406 and accept.json()["code"] == "not_acceptable"
    media = api(cast.alice).post(f"{API}/studies/", "title=x", content_type="text/plain")
    assert (media.status_code, media.json()) == (
        415,
        api_error(
            "unsupported_media_type",
            'Unsupported media type "text/plain": this operation reads application/json only '
            "(send the body with that Content-Type).",
        ),
    )


def test_conflicts_carry_their_own_code(api, cast, make_study):
    draft = make_study(Phase.DRAFT).study
    alice = api(cast.alice)
    wrong_phase = alice.post(f"{API}/studies/{draft.pk}/runs/")
    assert (wrong_phase.status_code, wrong_phase.json()["code"]) == (409, "phase_conflict")
    no_such_move = alice.post(f"{API}/studies/{draft.pk}/transitions/", {"to": "closed"}, format="json")
    assert no_such_move.json() == api_error("phase_conflict", "A study in the draft phase cannot move to closed.")
    empty = alice.post(f"{API}/studies/", {"title": "Empty"}, format="json").json()["id"]
    blocked = alice.post(f"{API}/studies/{empty}/transitions/", {"to": "voting"}, format="json")
    assert blocked.status_code == 409 and blocked.json()["code"] == "transition_blocked"
    assert blocked.json()["detail"].startswith("Voting cannot open yet: invite at least one expert")


def test_a_body_over_the_limit_is_a_413_in_the_envelope(api, cast, settings):
    response = api(cast.alice).generic(
        "POST", f"{API}/studies/", b"x", content_type="application/json", CONTENT_LENGTH=str(2 * 1024 * 1024)
    )
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large" and response.json()["fields"] == {}


def test_a_server_error_under_the_api_is_in_the_envelope():
    response = server_error(RequestFactory().get(f"{API}/studies/"))
    assert response.status_code == 500
    assert response.content == (
        b'{"code": "server_error", "detail": "Server error: the request failed; it has been logged.", "fields": {}}'
    )
    page = server_error(RequestFactory().get("/studies/"))
    assert page.status_code == 500 and not page.content.startswith(b"{")
