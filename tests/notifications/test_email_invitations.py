"""Invitations addressed to an e-mail address (issue 32, item 1): the link
mailed to the address (its key nowhere else), the account that confirmed the
address seeing and accepting it, a sign-up through the mailed link
confirming the address; and the attacks: an unconfirmed address, another
address, a key in a designer's answer."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from workspace import invitations
from workspace.errors import InvalidInput
from workspace.models import EmailConfirmation, Invitation, Membership, Phase
from workspace.services.accounts import email_confirmed_set

from .test_notifications import SITE, parts

pytestmark = pytest.mark.django_db
User = get_user_model()
API = "/api/v1"
ADDRESS = "Newcomer@Example.ORG"
STORED = "Newcomer@example.org"  # the domain lower-cased, as every address is stored


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _mailed_key(message) -> str:
    plain, html = parts(message)
    found = re.search(rf"{re.escape(SITE)}/invitations/([\w-]+)/", plain)
    assert found, plain
    assert f'href="{SITE}/invitations/{found.group(1)}/"' in html
    return found.group(1)


def test_the_designer_invites_an_address_on_the_page_and_it_gets_the_link(make_study, cast, after_commit):
    built = make_study(Phase.DRAFT)
    designer = Client()
    designer.force_login(cast.alice, backend="django.contrib.auth.backends.ModelBackend")
    with after_commit():
        response = designer.post(f"/studies/{built.study.pk}/experts/invite-email/", {"email": ADDRESS})
    assert response.status_code == 302 and response["Location"] == f"/studies/{built.study.pk}/experts/"
    invitation = Invitation.objects.get(study=built.study)
    assert (invitation.email, invitation.username, invitation.status) == (STORED, None, "pending")
    (message,) = mail.outbox
    assert message.to == [STORED] and message.subject == "Invitation to Choosing a classifier"
    key = _mailed_key(message)
    assert invitation.digest == invitations._digest(key)
    page = designer.get(f"/studies/{built.study.pk}/experts/").content.decode()
    assert STORED in page and "link mailed to this address" in page
    assert key not in page  # the key is only in the mail

    # The mailed link signs a newcomer up; holding it proves the address.
    joined = Client().post(
        f"/invitations/{key}/", {"username": "newcomer", "password1": "a-Long-pass-7", "password2": "a-Long-pass-7"}
    )
    assert joined.status_code == 302, joined.content.decode()[:2000]
    newcomer = User.objects.get(username="newcomer")
    assert newcomer.email == STORED
    assert EmailConfirmation.objects.get(user=newcomer).email == STORED
    assert Membership.objects.filter(study=built.study, user=newcomer, role="expert", status="active").exists()


def test_refusals_name_the_field_and_write_nothing(make_study, cast, unchanged):
    built = make_study(Phase.DRAFT)
    designer = Client()
    designer.force_login(cast.alice, backend="django.contrib.auth.backends.ModelBackend")
    with unchanged():
        page = designer.post(f"/studies/{built.study.pk}/experts/invite-email/", {"email": "not an address"})
        assert page.status_code == 200 and "is not an e-mail address" in page.content.decode()
        client = _api(cast.alice)
        for body, field, words in [
            ({"email": "nobody"}, "email", "is not an e-mail address"),
            ({"email": "a@example.org", "username": "bob"}, "email", "not both"),
            ({"kind": "email"}, "email", "is required for an invitation of kind email"),
            ({"kind": "link", "email": "a@example.org"}, "email", "has no e-mail address"),
        ]:
            answer = client.post(f"{API}/studies/{built.study.pk}/invitations/", body, format="json")
            assert answer.status_code == 400, (body, answer.content)
            assert words in str(answer.json()["fields"][field]), answer.json()
    invitations.invitation_create(study=built.study, created_by=cast.alice, email=ADDRESS)
    with pytest.raises(InvalidInput, match="already invited"):
        invitations.invitation_create(study=built.study, created_by=cast.alice, email=STORED.upper())


def test_the_api_never_shows_the_key_and_the_confirmed_account_accepts_without_it(make_study, cast, after_commit):
    built = make_study(Phase.DRAFT)
    with after_commit():
        answer = _api(cast.alice).post(
            f"{API}/studies/{built.study.pk}/invitations/", {"email": ADDRESS}, format="json"
        )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["kind"], body["email"], body["username"], body["key"]) == ("email", STORED, None, None)
    key = _mailed_key(mail.outbox[0])
    assert key not in answer.content.decode()
    listed = _api(cast.alice).get(f"{API}/studies/{built.study.pk}/invitations/").json()["results"]
    assert [(i["kind"], i["email"]) for i in listed] == [("email", STORED)]

    owner = User.objects.create_user("owner", email=STORED.lower())
    # Not confirmed yet: anyone can type an address into their account.
    assert _api(owner).get(f"{API}/invitations/").json()["count"] == 0
    assert _api(owner).post(f"{API}/invitations/{body['id']}/accept/", {}, format="json").status_code == 404
    email_confirmed_set(user=owner, email=owner.email)
    mine = _api(owner).get(f"{API}/invitations/").json()
    assert [i["id"] for i in mine["results"]] == [body["id"]]
    accepted = _api(owner).post(f"{API}/invitations/{body['id']}/accept/", {}, format="json")
    assert accepted.status_code == 200 and accepted.json()["role"] == "expert"
    assert Invitation.objects.get(pk=body["id"]).accepted_by == owner


def test_a_confirmation_of_an_old_address_or_another_address_matches_nothing(make_study, cast):
    built = make_study(Phase.DRAFT)
    invitation, key = invitations.invitation_create(study=built.study, created_by=cast.alice, email=ADDRESS)
    assert key is None
    moved = User.objects.create_user("moved", email=STORED)
    email_confirmed_set(user=moved, email=STORED)
    moved.email = "elsewhere@example.org"  # changed since: the confirmation is of the old address
    moved.save()
    other = User.objects.create_user("other", email="other@example.org")
    email_confirmed_set(user=other, email=other.email)
    for user in (moved, other, cast.bob):
        assert list(invitations.invitation_list_for_user(user=user)) == []
        assert invitations.invitation_get_for_user(user=user, pk=invitation.pk) is None


def test_joining_with_the_key_but_another_address_does_not_confirm_it(make_study, cast, after_commit):
    built = make_study(Phase.DRAFT)
    with after_commit():
        invitations.invitation_create(study=built.study, created_by=cast.alice, email=ADDRESS)
    key = _mailed_key(mail.outbox[0])
    invitations.invitation_accept_with_signup(
        key=key, username="forwarded", password="a-Long-pass-7", email="friend@example.org"
    )
    forwarded = User.objects.get(username="forwarded")
    assert forwarded.email == "friend@example.org"
    assert not EmailConfirmation.objects.filter(user=forwarded).exists()


def test_revoking_an_address_invitation_names_the_address(make_study, cast):
    built = make_study(Phase.DRAFT)
    invitation, _ = invitations.invitation_create(study=built.study, created_by=cast.alice, email=ADDRESS)
    designer = Client()
    designer.force_login(cast.alice, backend="django.contrib.auth.backends.ModelBackend")
    page = designer.get(f"/studies/{built.study.pk}/experts/invitations/{invitation.pk}/revoke/")
    assert f"Revoke the invitation of {STORED}?" in page.content.decode()
    assert designer.post(f"/studies/{built.study.pk}/experts/invitations/{invitation.pk}/revoke/").status_code == 302
    assert Invitation.objects.get(pk=invitation.pk).status == "revoked"
    assert not invitations.invitation_pending_for_email(email=STORED)
