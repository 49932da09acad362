"""A mistyped username (issue 16, finding 5): inviting answers the same
whether or not the account exists, the experts page says that every pending
username invitation waits for that name to sign in (or be created), and the
designer revokes it from its row after a confirmation."""

import re

from django.contrib.auth import get_user_model

from tests.pages.test_designer import body, client_for
from workspace.models import Invitation, Phase

User = get_user_model()


def invite(client, study, username: str):
    return client.post(f"/studies/{study.pk}/experts/invite/", {"username": username}, follow=True)


def row_of(page: str, username: str) -> str:
    rows = re.findall(r"<tr>.*?</tr>", page.split('id="invitations-title"')[1], flags=re.S)
    return next(row for row in rows if f'<span class="table__title">{username}</span>' in row)


def wait_note(username: str) -> str:
    return (
        f"Waits for “{username}” to sign in and accept; if no account has that name yet, it waits until one is created."
    )


def test_an_existing_and_a_missing_account_get_the_same_answer_and_the_same_hint(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    existing = invite(client, built.study, "charlie")
    missing = invite(client, built.study, "charly")
    assert not User.objects.filter(username="charly").exists()
    said = [[str(m) for m in response.context["messages"]] for response in (existing, missing)]
    assert said[0] == [
        "charlie is invited: the invitation waits for “charlie” to sign in and accept; if no account has that "
        "name yet, it waits until one is created. Check the spelling below: a mistyped name can be revoked. "
        "Once they accept, the experts' list shows their e-mail address, or that they have none and reminders "
        "can't reach them."
    ]
    assert said[1] == [said[0][0].replace("charlie", "charly")]
    page = body(client.get(f"/studies/{built.study.pk}/experts/"))
    for username in ("charlie", "charly"):
        row = row_of(page, username)
        assert wait_note(username) in row
        assert "Mistyped? Revoke it and invite the right name." in row

    # The rows differ only by the name: nothing tells which account exists.
    def neutral(row: str, username: str) -> str:
        row = re.sub(r"<time[^>]*>[^<]*</time>", "", row)
        return re.sub(r"/invitations/\d+/", "/invitations/N/", row).replace(username, "X")

    assert neutral(row_of(page, "charlie"), "charlie") == neutral(row_of(page, "charly"), "charly")


def test_the_mistyped_invitation_is_revoked_from_its_row_after_a_confirmation(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    invite(client, built.study, "charly")
    invitation = Invitation.objects.get(study=built.study, username="charly")
    page = body(client.get(f"/studies/{built.study.pk}/experts/"))
    revoke = f"/studies/{built.study.pk}/experts/invitations/{invitation.pk}/revoke/"
    assert f'href="{revoke}">Revoke…' in row_of(page, "charly")
    confirm = client.get(revoke)
    assert confirm.context["title"] == "Revoke the invitation of charly?"
    assert confirm.context["consequences"] == [
        "“charly” can no longer accept it.",
        "You can invite again afterwards (the right username, if this one was mistyped).",
    ]
    assert Invitation.objects.get(pk=invitation.pk).status == "pending"  # asking writes nothing
    response = client.post(revoke, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["The invitation of charly was revoked."]
    assert Invitation.objects.get(pk=invitation.pk).status == "revoked"
    row = row_of(body(response), "charly")
    assert "Revoked" in row and "Waits for" not in row and "Revoke…" not in row
    # The right name can now be invited.
    assert invite(client, built.study, "charlie").status_code == 200
    assert Invitation.objects.get(study=built.study, username="charlie").status == "pending"


def test_links_and_answered_invitations_carry_no_wait_note(make_study, cast) -> None:
    built = make_study(Phase.DRAFT, experts=())
    client = client_for(cast.alice)
    client.post(f"/studies/{built.study.pk}/experts/link/")
    invite(client, built.study, "bob")
    Invitation.objects.filter(username="bob").update(status="declined")
    page = body(client.get(f"/studies/{built.study.pk}/experts/"))
    assert "Waits for" not in page
