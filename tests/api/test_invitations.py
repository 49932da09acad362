"""Consent through the API (issue 11, item 4): invitations by username and by
link, what the invited person sees, and imports that carry other people's
inputs. The services' side is in tests/workspace/test_consent.py."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from engine.models import Run
from tests.fixtures import api_error, error_fields
from workspace.models import Invitation, Membership, Phase, Study

from .conftest import finish_run

pytestmark = pytest.mark.django_db

API = "/api/v1"
User = get_user_model()
CASE_EXPERTS = ["statistician", "informatician", "researcher", "clinician"]


def ok(response, status=200):
    assert response.status_code == status, f"{response.status_code}: {response.content[:600]!r}"
    return response.json() if response.content else None


def invite(client, study_id, username):
    return client.post(f"{API}/studies/{study_id}/members/", {"username": username}, format="json")


# --- invited by username ---------------------------------------------------------------


def test_consent_flow_invite_see_accept_or_decline(make_study, clients, cast):
    built = make_study(Phase.DRAFT, experts=("carol",))
    study = built.study.pk
    alice, bob = clients["alice"], clients["bob"]
    sent = ok(invite(alice, study, "bob"), 202)
    assert sent["detail"] == "bob is invited to be an expert of this study and becomes one by accepting."
    assert not Membership.objects.filter(study=study, user=cast.bob).exists()

    # Bob sees the invitation, but not the study, until he accepts.
    mine = ok(bob.get(API + "/invitations/"))
    assert mine["count"] == 1
    invitation = mine["results"][0]
    assert invitation["id"] == sent["invitation"]["id"]
    assert (invitation["study"], invitation["invited_by"], invitation["status"], invitation["inputs"]) == (
        {"id": study, "title": "Choosing a classifier", "designer": "alice"},
        "alice",
        "pending",
        None,
    )
    assert invitation["expires_at"] > invitation["created_at"]
    assert bob.get(f"{API}/studies/{study}/").status_code == 404
    assert study not in [s["id"] for s in ok(bob.get(API + "/studies/"))["results"]]
    # Nobody else can answer it.
    stranger = clients["charlie"].post(f"{API}/invitations/{invitation['id']}/accept/", {}, format="json")
    assert stranger.status_code == 404

    accepted = ok(bob.post(f"{API}/invitations/{invitation['id']}/accept/", {}, format="json"))
    assert accepted == {"study": study, "title": "Choosing a classifier", "role": "expert", "inputs_confirmed_at": None}
    assert ok(bob.get(f"{API}/studies/{study}/"))["my_roles"] == ["expert"]
    assert ok(bob.get(API + "/invitations/"))["count"] == 0
    listed = ok(alice.get(f"{API}/studies/{study}/invitations/"))["results"]
    assert [(i["username"], i["status"], i["accepted_by"]) for i in listed] == [("bob", "accepted", "bob")]
    again = bob.post(f"{API}/invitations/{invitation['id']}/accept/", {}, format="json")
    assert (again.status_code, again.json()) == (
        409,
        api_error("invitation_closed", "This invitation is accepted."),
    )

    # Charlie declines: nothing of his is left in the study.
    declined_id = ok(invite(alice, study, "charlie"), 202)["invitation"]["id"]
    assert clients["charlie"].post(f"{API}/invitations/{declined_id}/decline/").status_code == 204
    assert not Membership.objects.filter(study=study, user=cast.charlie).exists()
    assert Invitation.objects.get(pk=declined_id).status == "declined"
    assert clients["charlie"].get(f"{API}/studies/{study}/").status_code == 404


def test_answers_about_a_username_do_not_reveal_whether_the_account_exists(make_study, clients):
    study = make_study(Phase.DRAFT).study.pk
    answers, queries = {}, {}
    for username in ("charlie", "no-such-person"):
        with CaptureQueriesContext(connection) as captured:
            response = invite(clients["alice"], study, username)
        answers[username] = response
        queries[username] = len(captured.captured_queries)
    known, unknown = answers["charlie"], answers["no-such-person"]
    assert known.status_code == unknown.status_code == 202
    assert set(known.json()) == set(unknown.json()) == {"invitation", "detail"}
    assert set(known.json()["invitation"]) == set(unknown.json()["invitation"])
    varying = ("id", "username", "created_at", "expires_at")
    strip = lambda body: {k: v for k, v in body["invitation"].items() if k not in varying}  # noqa: E731
    assert strip(known.json()) == strip(unknown.json())
    assert known.json()["detail"].replace("charlie", "X") == unknown.json()["detail"].replace("no-such-person", "X")
    assert queries["charlie"] == queries["no-such-person"]
    assert not User.objects.filter(username="no-such-person").exists()


def test_the_designer_can_still_take_the_expert_role_at_once(make_study, clients, cast):
    built = make_study(Phase.DRAFT)
    added = ok(invite(clients["alice"], built.study.pk, "alice"), 201)
    assert added == {
        "username": "alice",
        "role": "expert",
        "status": "active",
        "absence": "",
        "absence_reason": "",
        "absent_since": None,
    }
    detail = ok(clients["alice"].get(f"{API}/studies/{built.study.pk}/"))
    assert detail["my_roles"] == ["designer", "expert"] and "alice" in detail["experts"]
    assert not Invitation.objects.exists()


def test_invitation_endpoints_are_the_designers(make_study, clients):
    study = make_study(Phase.DRAFT).study.pk
    for actor in ("bob", "carol"):
        assert clients[actor].get(f"{API}/studies/{study}/invitations/").status_code == 403
        assert clients[actor].post(f"{API}/studies/{study}/invitations/", {}, format="json").status_code == 403
    assert clients["charlie"].get(f"{API}/studies/{study}/invitations/").status_code == 404
    body = {"username": "bob", "role": "x"}
    refused = clients["alice"].post(f"{API}/studies/{study}/invitations/", body, format="json")
    assert (refused.status_code, error_fields(refused)) == (400, {"role": ["is not a field of this request"]})
    assert not Invitation.objects.exists()


# --- invited by link ---------------------------------------------------------------------


def test_link_invitations_single_use_expired_revoked(make_study, clients):
    study = make_study(Phase.DRAFT).study.pk
    alice = clients["alice"]
    created = ok(alice.post(f"{API}/studies/{study}/invitations/", {}, format="json"), 201)
    assert created["kind"] == "link" and created["username"] is None and len(created["key"]) >= 32
    listed = ok(alice.get(f"{API}/studies/{study}/invitations/"))["results"]
    assert [i["id"] for i in listed] == [created["id"]] and "key" not in listed[0]

    joined = ok(clients["charlie"].post(API + "/invitations/accept/", {"key": created["key"]}, format="json"))
    assert (joined["study"], joined["role"]) == (study, "expert")
    assert ok(clients["charlie"].get(f"{API}/studies/{study}/"))["my_roles"] == ["expert"]

    def refused(key, client=clients["bob"]):
        response = client.post(API + "/invitations/accept/", {"key": key}, format="json")
        assert response.status_code == 400, response.content
        return error_fields(response)["key"][0]

    assert refused(created["key"]) == "this invitation link has already been used"
    expired = ok(alice.post(f"{API}/studies/{study}/invitations/", {}, format="json"), 201)
    Invitation.objects.filter(pk=expired["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert refused(expired["key"]).startswith("this invitation expired on ")
    assert ok(alice.get(f"{API}/studies/{study}/invitations/"))["results"][0]["status"] == "expired"
    revoked = ok(alice.post(f"{API}/studies/{study}/invitations/", {}, format="json"), 201)
    assert alice.delete(f"{API}/studies/{study}/invitations/{revoked['id']}/").status_code == 204
    assert refused(revoked["key"]) == "this invitation was revoked by the study's designer"
    assert refused("x" * 40).startswith("no invitation has this key")
    # Revoking twice, or an accepted invitation, is a conflict.
    again = alice.delete(f"{API}/studies/{study}/invitations/{created['id']}/")
    assert (again.status_code, again.json()) == (
        409,
        api_error("invitation_closed", "This invitation link has already been used."),
    )


def test_a_link_joins_only_while_the_study_is_in_draft(make_study, clients):
    built = make_study(Phase.DRAFT)
    key = ok(clients["alice"].post(f"{API}/studies/{built.study.pk}/invitations/", {}, format="json"), 201)["key"]
    ok(clients["alice"].post(f"{API}/studies/{built.study.pk}/transitions/", {"to": "voting"}, format="json"))
    response = clients["charlie"].post(API + "/invitations/accept/", {"key": key}, format="json")
    assert response.status_code == 409
    assert response.json() == api_error(
        "phase_conflict",
        "Joining a study as an expert is only possible in the draft phase; the study is in the voting phase",
    )
    assert not Membership.objects.filter(user__username="charlie").exists()


# --- imports -------------------------------------------------------------------------------


def test_a_non_staff_import_leaves_out_other_peoples_inputs_and_says_so(clients, case_study):
    del case_study["designer"]
    response = clients["charlie"].post(API + "/studies/import/", case_study, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["phase"], body["designer"], body["experts"]) == ("draft", "charlie", [])
    assert body["inputs_left_out"] == CASE_EXPERTS
    assert body["notes"] == [
        "The inputs of 4 experts (statistician, informatician, researcher, clinician) were left out: only staff "
        "can import inputs entered by someone else. The study was imported as a draft, without anyone's inputs; "
        "the experts are invited and give their own."
    ]
    assert [i["username"] for i in body["invitations"]] == CASE_EXPERTS
    assert not User.objects.filter(username__in=CASE_EXPERTS).exists()


@pytest.fixture
def staff_import(clients, cast, case_study):
    """alice, staff, imports the case study in assessment through the API."""
    cast.alice.is_staff = True
    cast.alice.save(update_fields=["is_staff"])
    case_study["designer"], case_study["phase"] = "alice", "assessment"
    imported = ok(clients["alice"].post(API + "/studies/import/", case_study, format="json"), 201)
    return imported, case_study


def test_a_staff_import_waits_for_each_expert_to_confirm(staff_import, clients, api, quiet_on_commit):
    imported, bundle = staff_import
    study, alice = imported["id"], clients["alice"]
    assert [(i["username"], i["status"], i["inputs_imported"]) for i in imported["invitations"]] == [
        (name, "pending", True) for name in CASE_EXPERTS
    ]
    memberships = Membership.objects.filter(study=study, role="expert").select_related("user", "inputs_imported_by")
    assert {(m.status, m.inputs_imported_by.username) for m in memberships} == {("pending", "alice")}
    people = {name: api(User.objects.get(username=name)) for name in CASE_EXPERTS}

    # The clinician sees what was imported in their name, and nothing of the study yet.
    clinician = people["clinician"]
    [invitation] = ok(clinician.get(API + "/invitations/"))["results"]
    assert invitation["inputs"] == {
        "imported_by": "alice",
        "votes": {"attributes": [], "metrics": []},
        "priorities": bundle["priorities"]["clinician"],
        "ranges": {},
        "peer_weights": bundle["peer_weights"]["clinician"],
        "elicitation_answers": {},
    }
    assert clinician.get(f"{API}/studies/{study}/my/priorities/").status_code == 404
    assert clinician.get(f"{API}/studies/{study}/").status_code == 404

    # The assessment cannot close while anyone has to confirm.
    refused = alice.post(f"{API}/studies/{study}/transitions/", {"to": "closed"}, format="json")
    assert refused.status_code == 409
    assert "clinician: clinician has not yet confirmed the inputs imported by alice" in refused.json()["detail"]

    unconfirmed = clinician.post(f"{API}/invitations/{invitation['id']}/accept/", {}, format="json")
    assert unconfirmed.status_code == 400 and list(error_fields(unconfirmed)) == ["confirm_inputs"]
    for client in people.values():
        [mine] = ok(client.get(API + "/invitations/"))["results"]
        confirmed = ok(client.post(f"{API}/invitations/{mine['id']}/accept/", {"confirm_inputs": True}, format="json"))
        assert confirmed["inputs_confirmed_at"] is not None
    mine = ok(clinician.get(f"{API}/studies/{study}/my/priorities/"))
    assert mine["weights"] == bundle["priorities"]["clinician"]["weights"]

    assert ok(alice.post(f"{API}/studies/{study}/transitions/", {"to": "closed"}, format="json"))["phase"] == "closed"
    with quiet_on_commit():
        launched = ok(alice.post(f"{API}/studies/{study}/runs/"), 202)
    run = finish_run(launched["id"])
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.snapshot["experts"] == CASE_EXPERTS
    results = ok(alice.get(f"{API}/runs/{run.pk}/results/"))
    assert set(results["expert_influence"]) == set(CASE_EXPERTS)


def test_declining_an_imported_membership_deletes_its_inputs(staff_import, api):
    imported, _ = staff_import
    researcher = api(User.objects.get(username="researcher"))
    [mine] = ok(researcher.get(API + "/invitations/"))["results"]
    assert researcher.post(f"{API}/invitations/{mine['id']}/decline/").status_code == 204
    assert not Membership.objects.filter(study=imported["id"], user__username="researcher").exists()
    assert Study.objects.get(pk=imported["id"]).memberships.filter(role="expert").count() == 3
    assert ok(researcher.get(API + "/invitations/"))["count"] == 0


def test_the_invitation_endpoints_are_in_the_schema(clients):
    schema = ok(clients["alice"].get("/api/schema/?format=json"))
    paths = schema["paths"]
    for path, method, codes in [
        ("/api/v1/invitations/", "get", {"200", "401"}),
        ("/api/v1/invitations/accept/", "post", {"200", "400", "409"}),
        ("/api/v1/invitations/{invitation_id}/accept/", "post", {"200", "400", "404", "409"}),
        ("/api/v1/invitations/{invitation_id}/decline/", "post", {"204", "404", "409"}),
        ("/api/v1/studies/{study_id}/invitations/", "post", {"201", "400", "403", "404", "409"}),
        ("/api/v1/studies/{study_id}/invitations/{id}/", "delete", {"204", "404", "409"}),
        ("/api/v1/studies/{study_id}/members/", "post", {"201", "202", "400", "409"}),
    ]:
        assert codes <= set(paths[path][method]["responses"]), (path, set(paths[path][method]["responses"]))
