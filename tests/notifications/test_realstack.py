"""Notification mails through a real SMTP server the test starts
(aiosmtpd), read back as the server received them: Django's SMTP backend,
the task that sends them, the headers and both parts.

The first test sends through an eager task (no broker needed: it runs with
the embedded defaults too); the second through a real Celery worker on
Redis and PostgreSQL (.ci/run sets DATABASE_URL and REDIS_URL; skipped
without them, for that stated reason)."""

import time

import pytest
from django.test import Client

from notifications import tasks
from notifications.models import Notification, NotificationPreference
from tests.realstack_support import POSTGRES_AND_REDIS, worker_taking
from tests.redis_server import free_port
from workspace import services
from workspace.models import Phase

SITE = "https://approve.example.org"

pytestmark = pytest.mark.realstack


def check_message(recipients: list[str], message, study_pk: int) -> None:
    assert recipients == ["bob@example.org"]
    assert message["To"] == "bob@example.org" and message["Subject"] == "Choosing a classifier: a phase changed"
    assert message.get_content_type() == "multipart/alternative"
    plain = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    sentence = "Voting opened in “Choosing a classifier”: please vote on the complementary attributes and the metrics."
    assert sentence in plain and sentence in html
    assert f"Open it: {SITE}/studies/{study_pk}/" in plain and f'href="{SITE}/studies/{study_pk}/"' in html
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    unsubscribe = str(message["List-Unsubscribe"]).strip().strip("<>")
    assert unsubscribe.startswith(f"{SITE}/notifications/unsubscribe/") and unsubscribe in plain
    assert "carol" not in plain and "carol" not in html  # the other expert: neither name nor address
    return unsubscribe


def test_a_notification_mail_through_a_real_smtp_server(
    make_study, cast, smtp_server, settings, django_capture_on_commit_callbacks
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp_server.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.NOTIFICATIONS_SITE_URL = SITE
    built = make_study(Phase.DRAFT)
    cast.bob.email, cast.carol.email = "bob@example.org", "carol@example.org"
    cast.bob.save(), cast.carol.save()
    with django_capture_on_commit_callbacks(execute=True):
        services.study_open_voting(study=built.study)
    smtp_server.inbox.wait(2, timeout=10)
    received = {tuple(rcpt): message for rcpt, message in smtp_server.inbox.messages}
    unsubscribe = check_message(["bob@example.org"], received[("bob@example.org",)], built.study.pk)
    assert Notification.objects.get(recipient=cast.bob).mail == Notification.Mail.SENT
    # The header's one-click POST, as a mail client sends it, turns these off.
    response = Client(enforce_csrf_checks=True).post(
        unsubscribe.removeprefix(SITE), "List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 200
    assert NotificationPreference.objects.get(user=cast.bob).email_off == ["phase.changed"]


def test_an_invitation_to_an_address_through_a_real_smtp_server(
    make_study, cast, smtp_server, settings, django_capture_on_commit_callbacks
) -> None:
    """The link of an invitation addressed to an e-mail address, as the
    SMTP server received it: to that address only, both parts, the key
    whose digest the invitation stores."""
    from workspace import invitations

    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp_server.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.NOTIFICATIONS_SITE_URL = SITE
    built = make_study(Phase.DRAFT)
    with django_capture_on_commit_callbacks(execute=True):
        invitation, _ = invitations.invitation_create(
            study=built.study, created_by=cast.alice, email="dr.ng@hospital.example"
        )
    smtp_server.inbox.wait(1, timeout=10)
    ((recipients, message),) = smtp_server.inbox.messages
    assert recipients == ["dr.ng@hospital.example"] and message["Subject"] == "Invitation to Choosing a classifier"
    plain = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    key = plain.split(f"{SITE}/invitations/", 1)[1].split("/", 1)[0]
    assert invitations._digest(key) == invitation.digest and f'href="{SITE}/invitations/{key}/"' in html


def test_a_smtp_server_that_is_down_leaves_the_notification_refused(make_study, cast, settings, after_commit) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    settings.NOTIFICATIONS_MAIL_MAX_RETRIES = 2
    built = make_study(Phase.DRAFT)
    cast.bob.email = "bob@example.org"
    cast.bob.save()
    with after_commit():
        services.study_open_voting(study=built.study)  # the request's change stands
    notification = Notification.objects.get(recipient=cast.bob)
    assert notification.mail == Notification.Mail.FAILED and notification.mail_error


@POSTGRES_AND_REDIS
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_sends_the_mail_through_smtp(make_study, cast, smtp_server, tmp_path, monkeypatch) -> None:
    log_path = tmp_path / "worker.log"
    env = {"EMAIL_URL": f"smtp://127.0.0.1:{smtp_server.port}", "NOTIFICATIONS_SITE_URL": SITE}
    with worker_taking(tasks, "event_notify", log_path=log_path, monkeypatch=monkeypatch, env=env):
        built = make_study(Phase.DRAFT)
        type(cast.bob).objects.filter(username="bob").update(email="bob@example.org")
        services.study_open_voting(study=built.study)  # committed: the listener enqueues at once
        smtp_server.inbox.wait(1, timeout=60, logs=log_path.read_text)
        ((recipients, message),) = smtp_server.inbox.messages
        check_message(recipients, message, built.study.pk)
        deadline = time.monotonic() + 10
        while Notification.objects.get(recipient=cast.bob).mail != Notification.Mail.SENT:
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
