"""Consent (issue 11, item 4) at the level of the services: nobody is made
an expert, or has inputs counted in their name, without accepting.

The API side (answers, status codes, the invitee's view) is in
tests/api/test_invitations.py.
"""

import copy
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from engine import snapshot as engine_snapshot
from workspace import invitations, selectors, services
from workspace.bundles import study_import, study_import_bundle
from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import (
    AcceptableRange,
    AttributePrioritisation,
    AttributeVote,
    Invitation,
    Membership,
    PeerWeight,
    Phase,
    Study,
)

pytestmark = pytest.mark.django_db

User = get_user_model()
CASE_EXPERTS = ["statistician", "informatician", "researcher", "clinician"]


def staff(user):
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    return user


def as_phase(bundle, phase):
    bundle["phase"] = phase
    return bundle


# --- adding someone: an invitation, never a membership -------------------------------


def test_the_designer_taking_the_expert_role_is_immediate(make_study, cast):
    built = make_study(Phase.DRAFT, experts=())
    added = invitations.member_add(study=built.study, added_by=cast.alice, username=" alice ")
    assert isinstance(added, Membership)
    assert (added.user, added.role, added.status) == (cast.alice, "expert", "active")
    assert not Invitation.objects.exists()
    assert list(selectors.studies_visible_to(cast.alice)) == [built.study]


@pytest.mark.parametrize("username", ["bob", "nobody"])
def test_adding_someone_else_invites_them_and_creates_nothing_else(make_study, cast, username):
    built = make_study(Phase.DRAFT, experts=())
    users, members = User.objects.count(), Membership.objects.count()
    invitation = invitations.member_add(study=built.study, added_by=cast.alice, username=username)
    assert isinstance(invitation, Invitation)
    assert (invitation.username, invitation.status, invitation.digest, invitation.created_by) == (
        username,
        "pending",
        None,
        cast.alice,
    )
    assert (User.objects.count(), Membership.objects.count()) == (users, members)
    # Again while pending: refused, for a known or an unknown name alike.
    with pytest.raises(InvalidInput) as info:
        invitations.member_add(study=built.study, added_by=cast.alice, username=username)
    assert info.value.errors == {"username": [f"{username} is already invited to this study"]}


def test_inviting_runs_the_same_queries_for_known_and_unknown_usernames(make_study, cast):
    """The account is never looked up: the work (and so the time) cannot
    tell whether it exists. The SQL differs only in the name itself."""
    built = make_study(Phase.DRAFT, experts=())
    statements = {}
    for username in ("bob", "nobody"):
        with CaptureQueriesContext(connection) as queries:
            invitations.invitation_create(study=built.study, created_by=cast.alice, username=username)
        # Savepoint names, ids, times and the name itself vary; the statements may not.
        statements[username] = [
            re.sub(r"\b\d+\b", "#", re.sub(r"'[^']*'", "?", q["sql"]))
            for q in queries.captured_queries
            if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))
        ]
    assert len(statements["bob"]) == len(statements["nobody"]) > 0
    assert statements["bob"] == statements["nobody"]
    # No query reads the accounts table for itself (only memberships of this study, joined).
    assert not any('FROM "auth_user"' in sql for sql in statements["bob"])


def test_invitations_refuse_bad_names_existing_experts_and_a_late_phase(make_study, cast):
    built = make_study(Phase.DRAFT)
    invalid = "'a b' is not a valid username (letters, digits and @.+-_ only)"
    for bad, message in [("", "must be a username"), ("a b", invalid)]:
        with pytest.raises(InvalidInput) as info:
            invitations.invitation_create(study=built.study, created_by=cast.alice, username=bad)
        assert info.value.errors == {"username": [message]}
    with pytest.raises(InvalidInput) as info:
        invitations.invitation_create(study=built.study, created_by=cast.alice, username="carol")
    assert info.value.errors == {"username": ["carol is already an expert of this study"]}
    voting = make_study(Phase.VOTING, title="later")
    with pytest.raises(PhaseConflict, match="Inviting an expert is only possible in the draft phase"):
        invitations.invitation_create(study=voting.study, created_by=cast.alice, username="charlie")
    assert not Invitation.objects.exists()


def test_accepting_makes_an_expert_and_declining_leaves_nothing(make_study, cast):
    built = make_study(Phase.DRAFT, experts=())
    invitation = invitations.member_add(study=built.study, added_by=cast.alice, username="bob")
    assert list(selectors.studies_visible_to(cast.bob)) == []
    membership = invitations.invitation_accept(invitation=invitation, user=cast.bob)
    assert (membership.user, membership.role, membership.status) == (cast.bob, "expert", "active")
    invitation.refresh_from_db()
    assert (invitation.status, invitation.accepted_by, invitation.membership) == ("accepted", cast.bob, membership)
    assert list(selectors.studies_visible_to(cast.bob)) == [built.study]
    with pytest.raises(PhaseConflict, match="This invitation is accepted"):
        invitations.invitation_accept(invitation=invitation, user=cast.bob)

    other = invitations.member_add(study=built.study, added_by=cast.alice, username="carol")
    invitations.invitation_decline(invitation=other)
    other.refresh_from_db()
    assert other.status == "declined" and other.decided_at is not None
    assert not Membership.objects.filter(study=built.study, user=cast.carol).exists()
    with pytest.raises(PhaseConflict, match="This invitation was declined"):
        invitations.invitation_accept(invitation=other, user=cast.carol)


def test_a_new_membership_needs_the_draft_phase(make_study, cast):
    built = make_study(Phase.DRAFT)
    invitation = invitations.member_add(study=built.study, added_by=cast.alice, username="charlie")
    services.study_open_voting(study=built.study)
    with pytest.raises(PhaseConflict, match="Joining a study as an expert is only possible in the draft phase"):
        invitations.invitation_accept(invitation=invitation, user=cast.charlie)
    assert not Membership.objects.filter(user=cast.charlie).exists()
    invitation.refresh_from_db()
    assert invitation.status == "pending"


# --- link invitations ----------------------------------------------------------------


def test_a_link_is_single_use_and_its_key_is_not_stored(make_study, cast):
    built = make_study(Phase.DRAFT, experts=())
    invitation, key = invitations.invitation_create(study=built.study, created_by=cast.alice)
    assert invitation.username is None and len(key) >= 32
    assert key not in invitation.digest and invitation.digest == invitations._digest(key)
    membership = invitations.invitation_accept_link(key=key, user=cast.charlie)
    assert (membership.user, membership.status) == (cast.charlie, "active")
    with pytest.raises(InvalidInput) as info:
        invitations.invitation_accept_link(key=key, user=cast.bob)
    assert info.value.errors == {"key": ["this invitation link has already been used"]}
    assert not Membership.objects.filter(user=cast.bob).exists()


def test_expired_revoked_and_unknown_links_are_refused_naming_the_key(make_study, cast, unchanged):
    built = make_study(Phase.DRAFT, experts=())
    expired, expired_key = invitations.invitation_create(study=built.study, created_by=cast.alice)
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    revoked, revoked_key = invitations.invitation_create(study=built.study, created_by=cast.alice)
    invitations.invitation_revoke(invitation=revoked)
    with unchanged():
        for key, message in [
            (expired_key, "this invitation expired on "),
            (revoked_key, "this invitation was revoked by the study's designer"),
            ("not-a-key", "no invitation has this key: check the link, or ask the study's designer for a new one"),
            ("\ud800", "no invitation has this key"),
            (None, "must be the invitation's key"),
        ]:
            with pytest.raises(InvalidInput) as info:
                invitations.invitation_accept_link(key=key, user=cast.bob)
            assert list(info.value.errors) == ["key"]
            assert info.value.errors["key"][0].startswith(message)
    with pytest.raises(PhaseConflict, match="This invitation was revoked"):
        invitations.invitation_revoke(invitation=revoked)


def test_the_default_lifetime_comes_from_the_settings(make_study, cast, settings):
    settings.INVITATION_LIFETIME_DAYS = 3
    built = make_study(Phase.DRAFT, experts=())
    invitation, _ = invitations.invitation_create(study=built.study, created_by=cast.alice)
    assert timedelta(days=3) - timedelta(minutes=1) < invitation.expires_at - timezone.now() <= timedelta(days=3)


# --- imports ---------------------------------------------------------------------------


def test_a_non_staff_import_leaves_out_another_persons_inputs_and_imports_a_draft(case_study, cast):
    """The designer's own download comes back as a copy: the other experts'
    inputs left out and said so, the experts invited, the study a draft."""
    imported = study_import(bundle=copy.deepcopy(case_study), importer=cast.charlie)
    study = imported.study
    assert imported.inputs_left_out == CASE_EXPERTS
    assert imported.designer_named == "designer"
    assert imported.notes == [
        "The inputs of 4 experts (statistician, informatician, researcher, clinician) were left out: only staff "
        "can import inputs entered by someone else. The study was imported as a draft, without anyone's inputs; "
        "the experts are invited and give their own.",
        "The bundle named designer as its designer; you design the imported study.",
    ]
    assert (study.phase, study.designer, study.title) == (Phase.DRAFT, cast.charlie, case_study["title"])
    # Nothing written in anyone's name, no account made; the setup whole.
    assert not User.objects.filter(username__in=[*CASE_EXPERTS, "designer"]).exists()
    assert not Membership.objects.filter(study=study, role="expert").exists()
    assert not AttributePrioritisation.objects.filter(expert__study=study).exists()
    assert not PeerWeight.objects.filter(rater__study=study).exists()
    assert sorted(study.invitations.values_list("username", flat=True)) == sorted(CASE_EXPERTS)
    assert list(study.attributes.order_by("position").values_list("name", flat=True)) == [
        a["name"] for a in case_study["attributes"]
    ]
    assert study.candidates.count() == len(case_study["candidates"]) == 4


def test_one_experts_inputs_left_out_are_said_in_the_singular(case_study, cast):
    as_phase(case_study, "voting")
    for section in ("priorities", "ranges", "peer_weights"):
        del case_study[section]
    case_study["votes"] = {"attributes": {"clinician": ["Efficiency"]}, "metrics": {}}
    imported = study_import(bundle=case_study, importer=cast.charlie)
    assert imported.inputs_left_out == ["clinician"] and imported.study.phase == Phase.DRAFT
    assert imported.notes[0].startswith("The inputs of 1 expert (clinician) were left out: only staff can import")


def test_a_non_staff_import_invites_the_other_experts_without_creating_accounts(case_study, cast):
    """The importer's own sections are theirs; everyone else is invited."""
    del case_study["designer"]
    as_phase(case_study, "voting")
    for section in ("priorities", "ranges", "peer_weights"):
        del case_study[section]
    case_study["experts"].append("charlie")
    case_study["votes"]["attributes"]["charlie"] = ["Efficiency"]
    given = copy.deepcopy(case_study)
    study = study_import_bundle(bundle=case_study, importer=cast.charlie)
    assert case_study == given  # the others' (empty) votes are dropped from a copy only
    assert not User.objects.filter(username__in=CASE_EXPERTS).exists()
    experts = Membership.objects.filter(study=study, role="expert")
    assert [(m.user.username, m.status) for m in experts] == [("charlie", "active")]
    votes = AttributeVote.objects.filter(expert__study=study).values_list("expert__user__username", "attribute__name")
    assert list(votes) == [("charlie", "Efficiency")]
    assert sorted(study.invitations.values_list("username", "status", "membership")) == sorted(
        (name, "pending", None) for name in CASE_EXPERTS
    )


def test_the_command_line_imports_as_before(case_study):
    study = study_import_bundle(bundle=case_study)
    assert study.phase == Phase.CLOSED
    assert set(Membership.objects.filter(study=study, role="expert").values_list("status", "inputs_imported_by")) == {
        ("active", None)
    }
    assert not Invitation.objects.exists()


def test_a_staff_import_holds_the_inputs_until_each_expert_confirms(case_study, cast):
    staff(cast.alice)
    case_study["designer"] = "alice"
    study = study_import_bundle(bundle=as_phase(case_study, "assessment"), importer=cast.alice)
    assert study.phase == Phase.ASSESSMENT
    experts = list(Membership.objects.filter(study=study, role="expert").select_related("user").order_by("id"))
    assert [(m.user.username, m.status, m.inputs_imported_by) for m in experts] == [
        (name, "pending", cast.alice) for name in CASE_EXPERTS
    ]
    assert all(not m.user.has_usable_password() for m in experts)
    # The inputs are stored (as they would be saved) but the study is not theirs yet.
    assert AttributePrioritisation.objects.filter(expert__study=study).count() == 4
    assert PeerWeight.objects.filter(rater__study=study).count() == 16
    clinician = experts[3].user
    assert list(selectors.studies_visible_to(clinician)) == []
    assert invitations.invitation_inputs(invitation=study.invitations.get(username="clinician")) == {
        "imported_by": "alice",
        "votes": {"attributes": [], "metrics": []},
        "priorities": case_study["priorities"]["clinician"],
        "ranges": {},
        "peer_weights": case_study["peer_weights"]["clinician"],
        "elicitation_answers": {},
    }

    # Closing the assessment names every expert still to confirm.
    with pytest.raises(PhaseConflict) as info:
        services.study_close_assessment(study=study)
    assert "clinician: clinician has not yet confirmed the inputs imported by alice" in str(info.value)
    for membership in experts[:3]:
        invitation = study.invitations.get(membership=membership)
        with pytest.raises(InvalidInput) as refused:
            invitations.invitation_accept(invitation=invitation, user=membership.user)
        assert list(refused.value.errors) == ["confirm_inputs"]
        invitations.invitation_accept(invitation=invitation, user=membership.user, confirm_inputs=True)
    assert selectors.missing_input_list(study=study) == {
        "clinician": ["clinician has not yet confirmed the inputs imported by alice"]
    }
    invitations.invitation_accept(
        invitation=study.invitations.get(username="clinician"), user=clinician, confirm_inputs=True
    )
    membership = Membership.objects.get(study=study, user=clinician)
    assert membership.status == "active" and membership.inputs_confirmed_at is not None
    assert list(selectors.studies_visible_to(clinician)) == [study]

    # Now it closes, and a run takes everyone's inputs exactly as the command line's import does.
    services.study_close_assessment(study=study)
    trusted = study_import_bundle(bundle=as_phase(copy.deepcopy(case_study), "closed"))
    snapshot, expected = engine_snapshot.study_snapshot(study=study), engine_snapshot.study_snapshot(study=trusted)
    assert snapshot["experts"] == CASE_EXPERTS
    assert {k: v for k, v in snapshot.items() if k != "study"} == {k: v for k, v in expected.items() if k != "study"}


def test_a_staff_import_of_a_phase_that_needs_unconfirmed_inputs_is_refused(case_study, cast, unchanged):
    staff(cast.alice)
    case_study["designer"] = "alice"
    with unchanged(), pytest.raises(InvalidInput) as info:
        study_import_bundle(bundle=copy.deepcopy(case_study), importer=cast.alice)
    assert list(info.value.errors) == ["phase"]
    assert info.value.errors["phase"][0].startswith("cannot import the study as closed: Assessment cannot close")
    reason = "statistician: statistician has not yet confirmed the inputs imported by alice"
    assert reason in info.value.errors["phase"][0]

    # Votes decide the selection: a pending expert's votes hold the vote open.
    case_study["votes"]["attributes"]["researcher"] = ["Efficiency"]
    with unchanged(), pytest.raises(InvalidInput) as info:
        study_import_bundle(bundle=as_phase(case_study, "assessment"), importer=cast.alice)
    assert info.value.errors == {
        "phase": [
            "cannot import the study as assessment: Voting cannot close: researcher has not yet confirmed "
            "the inputs imported by alice (their votes count once confirmed)."
        ]
    }
    assert not Study.objects.exists()


def test_declining_or_revoking_a_pending_membership_deletes_the_imported_inputs(case_study, cast):
    staff(cast.alice)
    case_study["designer"] = "alice"
    case_study["ranges"] = {"clinician": {"Success rate": [0.8, 0.9]}}
    study = study_import_bundle(bundle=as_phase(case_study, "assessment"), importer=cast.alice)
    invitations.invitation_decline(invitation=study.invitations.get(username="clinician"))
    assert not Membership.objects.filter(study=study, user__username="clinician").exists()
    assert not AcceptableRange.objects.filter(expert__study=study).exists()
    assert not PeerWeight.objects.filter(rater__study=study, rater__user__username="clinician").exists()
    # The others' peer weights for the clinician went too; they are still pending anyway.
    assert not PeerWeight.objects.filter(ratee__study=study, ratee__user__username="clinician").exists()
    reason = "statistician has not yet confirmed the inputs imported by alice"
    assert selectors.missing_input_list(study=study)["statistician"] == [reason]
    invitations.invitation_revoke(invitation=study.invitations.get(username="researcher"))
    assert study.invitations.get(username="researcher").status == "revoked"
    assert not Membership.objects.filter(study=study, user__username="researcher").exists()
    assert AttributePrioritisation.objects.filter(expert__study=study).count() == 2
    # The accounts the staff import created stay (they may be invited elsewhere).
    assert User.objects.filter(username__in=["clinician", "researcher"]).count() == 2
