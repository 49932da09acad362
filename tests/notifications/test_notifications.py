"""Events become notifications for the right people, in the app and by
e-mail (both parts, the links, the unsubscribe headers), as their
preferences say (docs/notifications.md)."""

import re
import smtplib

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from engine import services as engine_services
from notifications import services as notification_services
from notifications.models import Notification, NotificationPreference
from notifications.tasks import digests_send
from workspace import invitations, reminders, selectors, services
from workspace.bundles import study_import_bundle
from workspace.models import Membership, Phase

from ..engine.test_runs import case_study_bundle
from ..pages.test_consistency import CYCLE

User = get_user_model()
SITE = "https://approve.example.org"


def addresses(**people) -> None:
    for name, address in people.items():
        User.objects.filter(username=name).update(email=address)


def told(kind: str) -> list[tuple[str, str]]:
    """``(username, text)`` of each notification of ``kind``."""
    rows = Notification.objects.filter(kind=kind).order_by("recipient__username")
    return [(n.recipient.username, n.text) for n in rows.select_related("recipient")]


def parts(message) -> tuple[str, str]:
    (html, mimetype), *_ = message.alternatives
    assert mimetype == "text/html"
    return message.body, html


def unsubscribe_path(message) -> str:
    found = re.search(re.escape(SITE) + r"(/notifications/unsubscribe/[^/\s]+/)", message.body)
    assert found, message.body
    return found.group(1)


# --- who is told, in what words -------------------------------------------------------------


def test_voting_opening_tells_each_expert_by_the_app_and_mail(make_study, cast, after_commit) -> None:
    built = make_study(Phase.DRAFT)
    addresses(bob="bob@example.org", carol="carol@example.org")
    with after_commit():
        services.study_open_voting(study=built.study)
    text = "Voting opened in “Choosing a classifier”: please vote on the complementary attributes and the metrics."
    assert told("phase.changed") == [("bob", text), ("carol", text)]
    assert sorted(m.to[0] for m in mail.outbox) == ["bob@example.org", "carol@example.org"]
    message = next(m for m in mail.outbox if m.to == ["bob@example.org"])
    assert message.subject == "Choosing a classifier: a phase changed"
    plain, html = parts(message)
    assert text in plain and f"Open it: {SITE}/studies/{built.study.pk}/" in plain
    assert "Voting opened in “Choosing a classifier”" in html and f'href="{SITE}/studies/{built.study.pk}/"' in html
    # Each expert gets only their own mail: no other address anywhere in it.
    assert "carol" not in plain and "carol" not in html and message.cc == [] and message.bcc == []


def test_closing_the_assessment_tells_only_the_experts_with_steps_left(make_study, cast, after_commit) -> None:
    built = make_study(Phase.ASSESSMENT, inputs=True)
    # Nothing may be missing at the close; what is left is to review: bob's priorities are inconsistent.
    services.prioritisation_set(expert=built.bob, method="ahp", judgments=CYCLE)
    notes = {name for name, found in selectors.input_note_list(study=built.study).items() if found}
    assert notes and notes < {"bob", "carol"}
    with after_commit():
        services.study_close_assessment(study=built.study)
    assert told("phase.changed") == [
        (
            name,
            "The assessment of “Choosing a classifier” closed while you still had steps to review: your inputs are "
            "used as you left them.",
        )
        for name in sorted(notes)
    ]


def test_the_assessment_opening_tells_the_experts_who_have_steps(make_study, cast, after_commit) -> None:
    built = make_study(Phase.VOTING)
    with after_commit():
        services.study_close_voting(study=built.study)
    assert told("phase.changed") == [
        (
            name,
            "The assessment of “Choosing a classifier” opened: please give your priorities, ranges and peer weights.",
        )
        for name in ("bob", "carol")
    ]
    assert mail.outbox == []  # nobody has an address: told in the app only
    assert set(Notification.objects.values_list("mail", flat=True)) == {Notification.Mail.NONE}


def test_a_round_tells_the_experts_taking_part_and_nothing_of_the_others(make_study, cast, after_commit) -> None:
    built = make_study(Phase.ASSESSMENT, inputs=True)
    addresses(bob="bob@example.org", carol="carol@example.org")
    services.expert_absence_set(
        study=built.study, expert=built.carol, absence="excluded", reason="x", acting=cast.alice
    )
    with after_commit():
        services.round_open(study=built.study, by=cast.alice, message="")
    assert [name for name, _ in told("round.opened")] == ["bob"]  # carol is excluded
    (message,) = mail.outbox
    plain, html = parts(message)
    assert "Revision round 1 of “Choosing a classifier” opened" in plain
    for other in ("carol", "carol@example.org", "0.75", "Success rate"):  # her name, address, answers
        assert other not in plain and other not in html
    with after_commit():
        services.round_close(study=built.study, by=cast.alice)
    assert [name for name, _ in told("round.closed")] == ["bob"]


def test_an_excluded_expert_is_told_with_the_reason(make_study, cast, after_commit) -> None:
    built = make_study(Phase.VOTING)
    addresses(bob="bob@example.org")
    with after_commit():
        services.expert_absence_set(
            study=built.study, expert=built.bob, absence="excluded", reason="on leave", acting=cast.alice
        )
    assert told("expert.excluded") == [
        (
            "bob",
            "The designer has excluded you from “Choosing a classifier”: “on leave”. Your inputs are kept but no "
            "longer used; you can still read the study.",
        )
    ]
    assert [(m.to, m.subject) for m in mail.outbox] == [(["bob@example.org"], "Your part in Choosing a classifier")]


def test_an_invitation_tells_the_account_invited(make_study, cast, after_commit) -> None:
    built = make_study(Phase.DRAFT)
    addresses(charlie="charlie@example.org")
    with after_commit():
        invitations.invitation_create(study=built.study, created_by=cast.alice, username="charlie")
        invitations.invitation_create(study=built.study, created_by=cast.alice, username="nobody-yet")
        invitations.invitation_create(study=built.study, created_by=cast.alice)  # a link: told to nobody
    assert told("invitation.created") == [
        (
            "charlie",
            "You are invited to be an expert of “Choosing a classifier”: accept or decline on your studies page.",
        )
    ]
    (message,) = mail.outbox
    assert message.subject == "Invitation to Choosing a classifier" and f"Open it: {SITE}/\n" in message.body


def test_a_run_tells_the_designer(db, after_commit) -> None:
    study = study_import_bundle(bundle=case_study_bundle())
    addresses(**{study.designer.username: "designer@example.org"})
    with after_commit():
        run = engine_services.run_launch(study=study, launched_by=study.designer)
    assert told("run.succeeded") == [
        (study.designer.username, f"Run {run.number} of “{study.title}” succeeded: its results are ready.")
    ]
    (message,) = mail.outbox
    assert f"{SITE}/runs/{run.pk}/" in message.body and message.subject == f"{study.title}: a run succeeded"
    experts = set(Membership.objects.filter(study=study, role="expert").values_list("user__username", flat=True))
    assert not experts & {n.recipient.username for n in Notification.objects.all()}


def test_a_failed_run_says_why(db, after_commit, monkeypatch) -> None:
    study = study_import_bundle(bundle=case_study_bundle())

    def broken(snapshot):
        raise RuntimeError("boom")

    monkeypatch.setattr(engine_services, "evaluate_snapshot", broken)
    with after_commit():
        run = engine_services.run_launch(study=study, launched_by=study.designer)
    assert told("run.failed") == [
        (study.designer.username, f"Run {run.number} of “{study.title}” failed: Internal error: RuntimeError: boom")
    ]


# --- reminders: sent by the task, the report true ---------------------------------------------------


def test_a_reminder_is_mailed_by_the_task_with_what_is_still_missing(make_study, cast, after_commit) -> None:
    built = make_study(Phase.ASSESSMENT)
    addresses(bob="bob@example.org")
    with after_commit():
        report = reminders.reminders_send(
            study=built.study, experts=[built.bob, built.carol], link="http://testserver/studies/1/", note="Friday."
        )
        assert mail.outbox == []  # nothing is sent before the request's change commits
    assert report.sent == [("bob", "bob@example.org")] and report.unreached == [("carol", "no e-mail address")]
    (message,) = mail.outbox
    assert message.to == ["bob@example.org"] and message.subject == "Reminder: Choosing a classifier"
    assert "- prioritisation of the attributes" in message.body and "Friday." in message.body
    assert [name for name, _ in told("reminder.sent")] == ["bob", "carol"]  # carol in the app


def test_a_reminder_the_mail_server_refuses_for_good_is_noted_on_the_expert(
    make_study, cast, after_commit, monkeypatch
):
    built = make_study(Phase.VOTING)
    addresses(bob="bob@example.org")
    attempts = []

    def refuse(self, *args, **kwargs):
        attempts.append(1)
        raise smtplib.SMTPRecipientsRefused({"bob@example.org": (550, b"mailbox unavailable")})

    monkeypatch.setattr("django.core.mail.EmailMessage.send", refuse)
    with after_commit():
        reminders.reminders_send(study=built.study, experts=[built.bob], link="http://x.test/", note="")
    assert len(attempts) == 1 + 5  # NOTIFICATIONS_MAIL_MAX_RETRIES retries (eager: at once)
    notification = Notification.objects.get(kind="reminder.sent")
    assert notification.mail == Notification.Mail.FAILED and "mailbox unavailable" in notification.mail_error
    built.bob.refresh_from_db()
    assert built.bob.last_reminder_unreached.startswith("the mail server refused the message (")


def test_a_mail_that_fails_once_is_sent_on_retry(make_study, cast, after_commit, monkeypatch) -> None:
    built = make_study(Phase.DRAFT)
    addresses(bob="bob@example.org")
    real_send = mail.EmailMessage.send
    calls = []

    def flaky(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionRefusedError("connection refused")
        return real_send(self, *args, **kwargs)

    monkeypatch.setattr("django.core.mail.EmailMessage.send", flaky)
    with after_commit():
        services.study_open_voting(study=built.study)
    assert len(calls) == 2 and len(mail.outbox) == 1
    assert Notification.objects.get(recipient=cast.bob).mail == Notification.Mail.SENT


# --- preferences, digest, unsubscribe ----------------------------------------------------------


def test_a_kind_turned_off_is_not_mailed_but_listed(make_study, cast, after_commit) -> None:
    built = make_study(Phase.DRAFT)
    addresses(bob="bob@example.org", carol="carol@example.org")
    notification_services.preferences_set(user=cast.bob, email_off=["phase.changed"], digest=False)
    with after_commit():
        services.study_open_voting(study=built.study)
    assert [m.to for m in mail.outbox] == [["carol@example.org"]]
    assert Notification.objects.get(recipient=cast.bob).mail == Notification.Mail.NONE


def test_the_reminder_report_says_who_turned_reminders_off_or_chose_the_digest(make_study, cast, after_commit):
    built = make_study(Phase.VOTING)
    addresses(bob="bob@example.org", carol="carol@example.org")
    notification_services.preferences_set(user=cast.bob, email_off=["reminder.sent"], digest=False)
    notification_services.preferences_set(user=cast.carol, email_off=[], digest=True)
    with after_commit():
        report = reminders.reminders_send(
            study=built.study, experts=[built.bob, built.carol], link="http://x/", note=""
        )
    assert report.sent == [] and report.digest == ["carol"]
    assert report.unreached == [("bob", "they turned reminder e-mails off")]
    assert mail.outbox == []
    assert dict(Notification.objects.values_list("recipient__username", "mail")) == {"bob": "none", "carol": "digest"}


def test_the_digest_groups_by_study_and_goes_once(make_study, cast, after_commit) -> None:
    first = make_study(Phase.DRAFT)
    second = make_study(Phase.DRAFT, title="Second study")
    addresses(bob="bob@example.org")
    notification_services.preferences_set(user=cast.bob, email_off=[], digest=True)
    with after_commit():
        services.study_open_voting(study=first.study)
        services.study_open_voting(study=second.study)
    assert mail.outbox == []
    assert digests_send.apply().get() == 1
    (message,) = mail.outbox
    plain, html = parts(message)
    assert message.subject == "Your approve digest: 2 notifications"
    assert plain.index("Choosing a classifier\n- Voting opened") < plain.index("Second study\n- Voting opened")
    assert f"{SITE}/studies/{first.study.pk}/" in plain and f'href="{SITE}/studies/{second.study.pk}/"' in html
    assert message.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert digests_send.apply().get() == 0 and len(mail.outbox) == 1  # sent once


def test_the_digest_command_sends_now(make_study, cast, after_commit) -> None:
    from django.core.management import call_command

    built = make_study(Phase.DRAFT)
    addresses(bob="bob@example.org")
    notification_services.preferences_set(user=cast.bob, email_off=[], digest=True)
    with after_commit():
        services.study_open_voting(study=built.study)
    call_command("notifications_digest")
    assert [m.to for m in mail.outbox] == [["bob@example.org"]]


def test_every_mail_carries_a_one_click_unsubscribe_that_works_without_signing_in(make_study, cast, after_commit):
    built = make_study(Phase.DRAFT)
    addresses(bob="bob@example.org")
    with after_commit():
        services.study_open_voting(study=built.study)
    (message,) = mail.outbox
    path = unsubscribe_path(message)
    assert message.extra_headers["List-Unsubscribe"] == f"<{SITE}{path}>"
    assert message.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    anonymous = Client(enforce_csrf_checks=True)
    page = anonymous.get(path)
    assert page.status_code == 200 and "Stop e-mails of “A phase opens or closes" in page.content.decode()
    assert "bob@example.org" not in page.content.decode()
    assert not NotificationPreference.objects.filter(user=cast.bob).exists()  # GET changes nothing
    # What a mail client's one-click POST sends (RFC 8058): no session, no CSRF token.
    done = anonymous.post(path, {"List-Unsubscribe": "One-Click"})
    assert done.status_code == 200 and 'id="unsubscribed"' in done.content.decode()
    assert NotificationPreference.objects.get(user=cast.bob).email_off == ["phase.changed"]
    with after_commit():
        services.study_close_voting(study=built.study)
    assert len(mail.outbox) == 1  # the next phase change is not mailed


def test_an_unsubscribe_token_cannot_be_forged_or_turned_on_another_user(cast) -> None:
    token = notification_services.unsubscribe_token(user=cast.bob, kind="phase.changed")
    client = Client(enforce_csrf_checks=True)
    # Another user's id in a payload the attacker signs themselves, a changed signature, another salt.
    from django.core import signing

    forged = [
        token[:-2] + ("AA" if not token.endswith("AA") else "BB"),
        signing.dumps({"u": cast.carol.pk, "k": "all"}, salt="another.salt", compress=True),
        signing.dumps({"u": cast.carol.pk, "k": "all"}, key="not-the-secret", salt="notifications.unsubscribe"),
        "not-a-token",
        signing.dumps({"u": cast.carol.pk, "k": "no.such.kind"}, salt="notifications.unsubscribe"),
    ]
    for bad in forged:
        response = client.post(f"/notifications/unsubscribe/{bad}/")
        assert response.status_code == 400 and 'id="unsubscribe-invalid"' in response.content.decode()
    assert not NotificationPreference.objects.exists()
    # bob's own token stops bob's e-mails only.
    client.post(f"/notifications/unsubscribe/{token}/")
    assert list(NotificationPreference.objects.values_list("user__username", "email_off")) == [
        ("bob", ["phase.changed"])
    ]


def test_an_expired_unsubscribe_link_is_refused(cast, settings) -> None:
    token = notification_services.unsubscribe_token(user=cast.bob, kind="all")
    settings.NOTIFICATIONS_UNSUBSCRIBE_MAX_AGE = -1
    assert Client().post(f"/notifications/unsubscribe/{token}/").status_code == 400


def test_a_study_title_with_a_line_break_makes_a_one_line_subject(make_study, cast, after_commit) -> None:
    built = make_study(Phase.DRAFT)
    type(built.study).objects.filter(pk=built.study.pk).update(title="Trial\r\nBcc: victim@example.org")
    addresses(bob="bob@example.org")
    built.study.refresh_from_db()
    with after_commit():
        services.study_open_voting(study=built.study)
    (message,) = mail.outbox
    assert message.subject == "Trial Bcc: victim@example.org: a phase changed"
    headers = message.message()
    assert headers["Bcc"] is None and headers["Subject"] == "Trial Bcc: victim@example.org: a phase changed"
    assert message.recipients() == ["bob@example.org"]


@pytest.mark.parametrize("digest", [True, False])
def test_unsubscribing_from_all_stops_what_is_waiting(make_study, cast, after_commit, digest) -> None:
    built = make_study(Phase.DRAFT)
    addresses(bob="bob@example.org")
    notification_services.preferences_set(user=cast.bob, email_off=[], digest=digest)
    with after_commit():
        services.study_open_voting(study=built.study)
    notification_services.unsubscribe(user=cast.bob, kind="all")
    assert NotificationPreference.objects.get(user=cast.bob).email_off == list(notification_services.KINDS)
    digests_send.apply()
    assert len(mail.outbox) == (0 if digest else 1)


# --- the worker's retries, an invitation addressed to an e-mail address ----------------------------


def test_under_a_worker_a_refused_mail_is_retried_later_with_growing_waits(cast, monkeypatch, settings) -> None:
    from celery.exceptions import Retry

    from notifications.tasks import notification_mail_send

    cast.bob.email = "bob@example.org"
    cast.bob.save()
    notification = Notification.objects.create(
        recipient=cast.bob, kind="run.failed", text="x", link="/", mail=Notification.Mail.PENDING
    )

    def refuse(self, *args, **kwargs):
        raise smtplib.SMTPServerDisconnected("gone")

    monkeypatch.setattr("django.core.mail.EmailMessage.send", refuse)
    waits = []

    def retry(exc=None, countdown=None, **kwargs):
        waits.append(countdown)
        return Retry(exc=exc, when=countdown)

    monkeypatch.setattr(notification_mail_send, "retry", retry)
    for retries in range(settings.NOTIFICATIONS_MAIL_MAX_RETRIES):
        notification_mail_send.push_request(retries=retries, is_eager=False)
        try:
            with pytest.raises(Retry):
                notification_mail_send.run(notification_id=notification.pk)
        finally:
            notification_mail_send.pop_request()
    assert waits == [60, 120, 240, 480, 960]
    notification.refresh_from_db()
    assert notification.mail == Notification.Mail.PENDING  # still to be tried
    notification_mail_send.push_request(retries=settings.NOTIFICATIONS_MAIL_MAX_RETRIES, is_eager=False)
    try:
        assert notification_mail_send.run(notification_id=notification.pk) == "failed"
    finally:
        notification_mail_send.pop_request()
    notification.refresh_from_db()
    assert notification.mail == Notification.Mail.FAILED and notification.mail_error == "gone"


def test_an_invitation_addressed_to_an_email_address_mails_its_link(make_study, cast, after_commit):
    """The key travels only in the task's message, to the address; no
    account is told (none is looked up by the address)."""
    built = make_study(Phase.DRAFT)
    with after_commit():
        link, key = invitations.invitation_create(
            study=built.study, created_by=cast.alice, email="newcomer@example.org"
        )
    assert key is None
    (message,) = mail.outbox
    plain, html = parts(message)
    assert message.to == ["newcomer@example.org"] and message.subject == "Invitation to Choosing a classifier"
    mailed = re.search(rf"{re.escape(SITE)}/invitations/([\w-]+)/", plain).group(1)
    assert link.digest == invitations._digest(mailed) and f'href="{SITE}/invitations/{mailed}/"' in html
    assert not Notification.objects.exists()  # no account to list it for
