"""Reaching experts by e-mail (issue 16, finding 4): the link sign-up asks
for an optional address (explained), the account page changes it and mails
the new address (and the old one) through the configured backend (locmem in
tests), and a reminder lists whom it could not reach and why."""

import re

from django.contrib.auth import get_user_model
from django.core import mail
from django.core.mail import EmailMessage
from django.test import Client

from tests.pages.test_designer import body, client_for, form_errors, new_link
from workspace import services
from workspace.models import EmailConfirmation, Membership, Phase

User = get_user_model()
EXPLAINED = "Reminders and password resets go here; without it the designer cannot reach you."


def join(path: str, **extra: str):
    client = Client()
    data = {"username": "dana", "password1": "a-fresh-passphrase-31", "password2": "a-fresh-passphrase-31", **extra}
    return client, client.post(path, data)


# --- sign-up ---------------------------------------------------------------------------------


def test_the_sign_up_asks_for_an_optional_address_and_explains_it(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    page = body(Client().get(path))
    assert 'name="email"' in page and 'autocomplete="email"' in page and EXPLAINED in page
    client, response = join(path, email=" dana@Example.ORG ")
    assert response.status_code == 302
    assert User.objects.get(username="dana").email == "dana@example.org"
    # The new address gets its confirmation link, and following it confirms it.
    assert [(m.to, m.subject) for m in mail.outbox] == [(["dana@example.org"], "Your e-mail address on approve")]
    said = [str(m) for m in client.get(response["Location"]).context["messages"]]
    assert said[-1] == "A message with a link to confirm dana@example.org was sent there."
    client.get(confirm_link(mail.outbox[0]))
    assert EmailConfirmation.objects.get(user__username="dana").email == "dana@example.org"


def test_the_sign_up_works_without_an_address(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    _client, response = join(path)
    assert response.status_code == 302 and User.objects.get(username="dana").email == ""
    assert mail.outbox == []


def test_a_malformed_address_is_refused_naming_the_field_and_nothing_is_written(make_study, cast, unchanged) -> None:
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    with unchanged():
        _client, response = join(path, email="dana-at-example")
    assert response.status_code == 200
    assert form_errors(response, "form") == {"email": ["Enter a valid email address."]}


# --- the account page ------------------------------------------------------------------------


def test_the_account_page_sets_the_address_and_mails_it(cast) -> None:
    client = client_for(cast.bob)
    page = client.get("/accounts/email/")
    assert page.status_code == 200
    assert "You have no e-mail address" in body(page) and EXPLAINED in body(page)
    assert 'href="/accounts/email/" aria-current="page">E-mail address</a>' in body(page)
    response = client.post("/accounts/email/", {"email": "bob@example.org"}, follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        "Your e-mail address is now bob@example.org. A message with a confirmation link was sent there: "
        "open it to confirm the address; if it does not arrive, check the address."
    ]
    assert User.objects.get(username="bob").email == "bob@example.org"
    assert '<strong id="current-email">bob@example.org</strong>' in body(response)
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["bob@example.org"] and message.subject == "Your e-mail address on approve"
    assert "This address is now the e-mail address of your approve account “bob”." in message.body
    assert "http://testserver/accounts/email/" in message.body


def test_changing_the_address_tells_the_new_and_the_old_one(cast) -> None:
    User.objects.filter(username="bob").update(email="bob@old.example")
    client = client_for(cast.bob)
    client.post("/accounts/email/", {"email": "bob@new.example"})
    assert [(m.to, m.subject) for m in mail.outbox] == [
        (["bob@new.example"], "Your e-mail address on approve"),
        (["bob@old.example"], "Your e-mail address on approve was changed"),
    ]
    assert "was changed to bob@new.example" in mail.outbox[1].body


def test_removing_the_address_says_what_it_means(cast) -> None:
    User.objects.filter(username="bob").update(email="bob@old.example")
    response = client_for(cast.bob).post("/accounts/email/", {"email": ""}, follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        "Your e-mail address was removed: reminders and password resets cannot reach you."
    ]
    assert User.objects.get(username="bob").email == ""
    assert [m.to for m in mail.outbox] == [["bob@old.example"]] and "was removed" in mail.outbox[0].body


def test_the_same_address_again_changes_nothing_and_sends_nothing(cast) -> None:
    User.objects.filter(username="bob").update(email="bob@example.org")
    response = client_for(cast.bob).post("/accounts/email/", {"email": "bob@example.org"}, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["Nothing changed: that is already your e-mail address."]
    assert mail.outbox == []


def test_a_malformed_address_is_refused_and_nothing_changes(cast) -> None:
    User.objects.filter(username="bob").update(email="bob@example.org")
    response = client_for(cast.bob).post("/accounts/email/", {"email": "not an address"})
    assert response.status_code == 200
    assert form_errors(response, "form") == {"email": ["Enter a valid email address."]}
    assert User.objects.get(username="bob").email == "bob@example.org" and mail.outbox == []


def test_a_refused_message_is_said_on_the_page(cast, monkeypatch) -> None:
    def refuse(*args, **kwargs) -> None:
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr("workspace.services.accounts.send_mail", refuse)
    response = client_for(cast.bob).post("/accounts/email/", {"email": "bob@example.org"}, follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        "Your e-mail address is now bob@example.org, but the mail server refused the message to it "
        "(connection refused): check the address."
    ]


def test_the_account_page_needs_a_log_in(db) -> None:
    response = Client().get("/accounts/email/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")


def test_the_account_page_makes_a_fixed_number_of_queries(cast, django_assert_num_queries) -> None:
    client = client_for(cast.bob)
    # the session, the user, the header's unread notifications, the address's confirmation
    with django_assert_num_queries(4):
        assert client.get("/accounts/email/").status_code == 200


def confirm_link(message) -> str:
    found = re.search(r"http://testserver(/accounts/email/confirm/[^/\s]+/)", message.body)
    assert found, message.body
    return found.group(1)


def test_the_link_mailed_to_the_new_address_confirms_it(cast) -> None:
    client = client_for(cast.bob)
    client.post("/accounts/email/", {"email": "bob@example.org"})
    page = body(client.get("/accounts/email/"))
    assert 'id="email-unconfirmed">Not confirmed yet</span>' in page
    link = confirm_link(mail.outbox[0])
    assert "Confirm that it reaches you by opening this link (signed in as bob):" in mail.outbox[0].body
    # Someone else's session cannot confirm bob's address.
    other = client_for(cast.carol).get(link, follow=True)
    assert [str(m) for m in other.context["messages"]] == [
        "This confirmation link is for another account: sign in as its owner."
    ]
    assert not EmailConfirmation.objects.exists()
    response = client.get(link, follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        "Your e-mail address bob@example.org is confirmed: reminders reach you there."
    ]
    assert EmailConfirmation.objects.get(user=cast.bob).email == "bob@example.org"
    assert 'id="email-confirmed">Confirmed</span>' in body(response)
    # A new address is unconfirmed again, and the old link no longer confirms anything.
    client.post("/accounts/email/", {"email": "bob@new.example"})
    assert 'id="email-unconfirmed">' in body(client.get("/accounts/email/"))
    stale = client.get(link, follow=True)
    assert [str(m) for m in stale.context["messages"]] == [
        "This link confirms an address that is no longer yours; your current one has its own link."
    ]
    assert EmailConfirmation.objects.get(user=cast.bob).email == "bob@example.org"
    client.get(confirm_link(mail.outbox[1]))
    assert EmailConfirmation.objects.get(user=cast.bob).email == "bob@new.example"


def test_a_tampered_or_expired_link_confirms_nothing(cast, settings) -> None:
    client = client_for(cast.bob)
    client.post("/accounts/email/", {"email": "bob@example.org"}, follow=True)
    link = confirm_link(mail.outbox[0])
    tampered = client.get(link[:-3] + "xx/", follow=True)
    assert [str(m) for m in tampered.context["messages"]] == [
        "This confirmation link is not valid: copy the whole link from the message."
    ]
    settings.PASSWORD_RESET_TIMEOUT = -1
    expired = client.get(link, follow=True)
    assert [str(m) for m in expired.context["messages"]] == [
        "This confirmation link has expired: save your address again for a new one."
    ]
    assert not EmailConfirmation.objects.exists()
    assert Client().get(link)["Location"].startswith("/accounts/login/?next=")


# --- reminders ---------------------------------------------------------------------------------


def refusing(address: str):
    """``EmailMessage.send`` refusing every mail to ``address``."""
    real_send = EmailMessage.send

    def send(self, *args, **kwargs):
        if self.to == [address]:
            raise ConnectionRefusedError("mailbox unavailable")
        return real_send(self, *args, **kwargs)

    return send


def test_a_reminder_names_whom_it_could_not_reach_and_why(
    make_study, cast, monkeypatch, django_capture_on_commit_callbacks, eager_celery
) -> None:
    built = make_study(Phase.VOTING, experts=("bob", "carol", "charlie"))
    User.objects.filter(username="bob").update(email="bob@example.org")
    User.objects.filter(username="charlie").update(email="charlie@example.org")
    monkeypatch.setattr("django.core.mail.EmailMessage.send", refusing("charlie@example.org"))
    client = client_for(cast.alice)
    # The mails are sent by a task once the request's change commits (notifications.tasks).
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/studies/{built.study.pk}/experts/remind/", {"experts": ["bob", "carol", "charlie"]})
    report = body(response).split('id="reminder-report"')[1].split("</div>")[0]
    assert (
        "Reminder being e-mailed to bob (bob@example.org), charlie (charlie@example.org). "
        "If the mail server refuses one, the Members table says so." in report
    )
    assert response.context["sent"].unreached == [("carol", "no e-mail address")]
    assert "<li><strong>carol</strong>: no e-mail address</li>" in report
    assert "ask them to add their address on their account page" in report
    assert [m.to for m in mail.outbox] == [["bob@example.org"]]
    assert "message--warning" in body(response).split('id="reminder-report"')[0].rsplit("<div", 1)[1]
    # The refusal, known once the task gave up, is on the experts page.
    page = body(client.get(f"/studies/{built.study.pk}/experts/"))
    assert "<strong>not reached</strong>, the mail server refused the message (mailbox unavailable)" in page


def test_an_expert_who_joined_with_an_address_is_reached(
    make_study, cast, django_capture_on_commit_callbacks, eager_celery
) -> None:
    built = make_study(Phase.DRAFT, experts=())
    path = new_link(client_for(cast.alice), built.study)
    join(path, email="dana@example.org")
    services.study_open_voting(study=built.study)
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(cast.alice).post(f"/studies/{built.study.pk}/experts/remind/", {"experts": ["dana"]})
    assert response.context["sent"].sent == [("dana", "dana@example.org")]
    assert response.context["sent"].unreached == []
    sent = [m for m in mail.outbox if m.subject.startswith("Reminder")]
    assert [m.to for m in sent] == [["dana@example.org"]] and "Hello dana," in sent[0].body


def test_the_experts_page_keeps_each_experts_last_reminder(
    make_study, cast, monkeypatch, django_capture_on_commit_callbacks, eager_celery
) -> None:
    built = make_study(Phase.VOTING, experts=("bob", "carol", "charlie"))
    User.objects.filter(username="bob").update(email="bob@example.org")
    User.objects.filter(username="charlie").update(email="charlie@example.org")
    monkeypatch.setattr("django.core.mail.EmailMessage.send", refusing("charlie@example.org"))
    client = client_for(cast.alice)
    page = body(client.get(f"/studies/{built.study.pk}/experts/"))
    assert "Last reminder" not in page
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/studies/{built.study.pk}/experts/remind/", {"experts": ["bob", "carol", "charlie"]})
    stored = dict(
        Membership.objects.filter(study=built.study, role="expert").values_list(
            "user__username", "last_reminder_unreached"
        )
    )
    assert stored == {
        "bob": "",
        "carol": "no e-mail address",
        "charlie": "the mail server refused the message (mailbox unavailable)",
    }
    # Later, on the page as it loads: who was reached and who was not, and why.
    page = body(client.get(f"/studies/{built.study.pk}/experts/"))
    row = r'<span class="table__title">(\w+)</span>.*?<span class="table__sub last-reminder">(.*?)</span>'
    notes = dict(re.findall(row, page))
    notes = {name: re.sub(r"<time[^>]*>[^<]*</time>", "T", note) for name, note in notes.items()}
    assert notes == {
        "bob": "Last reminder T: sent",
        "carol": "Last reminder T: <strong>not reached</strong>, no e-mail address",
        "charlie": "Last reminder T: <strong>not reached</strong>, the mail server refused the message "
        "(mailbox unavailable)",
    }
    # A later reminder that reaches carol replaces her note.
    User.objects.filter(username="carol").update(email="carol@example.org")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/studies/{built.study.pk}/experts/remind/", {"experts": ["carol"]})
    assert Membership.objects.get(study=built.study, user__username="carol").last_reminder_unreached == ""
    assert Membership.objects.get(study=built.study, user__username="charlie").last_reminder_unreached != ""


def test_the_reminder_form_ticks_only_the_experts_an_e_mail_can_reach(make_study, cast) -> None:
    built = make_study(Phase.VOTING, experts=("bob", "carol"))
    User.objects.filter(username="bob").update(email="bob@example.org")
    form = client_for(cast.alice).get(f"/studies/{built.study.pk}/experts/").context["remind_form"]
    assert form["experts"].initial == ["bob"]
    # carol stays listed, to be chosen knowingly.
    assert dict(form.fields["experts"].choices)["carol"] == "carol (no e-mail address)"
