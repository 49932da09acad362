"""The notifications' Celery tasks: an event's notifications written
(``event_notify``, enqueued by the listener after the change commits),
each mail sent with retries (``notification_mail_send``), the daily digests
(``digests_send``, from Celery beat or ``manage.py notifications_digest``)
and the mail of an invitation addressed to an e-mail address."""

import logging
from datetime import datetime
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.template import loader

from workspace import reminders
from workspace import selectors as workspace_selectors
from workspace.events import Event
from workspace.mail_retries import MAIL_ERRORS, mail_send_with_retries
from workspace.models import Study
from workspace.services._checks import subject_line

from . import mail, selectors, services
from .models import Notification

logger = logging.getLogger(__name__)


def event_enqueue(event: Event) -> None:
    """The listener (workspace.events): enqueue the event's task, nothing else."""
    event_notify.delay(
        kind=event.kind, study_id=event.study_id, actor_id=event.actor_id, data=event.data, at=event.at.isoformat()
    )


@shared_task(name="notifications.tasks.event_notify", ignore_result=True)
def event_notify(*, kind: str, study_id: int, actor_id: int | None, data: dict[str, Any], at: str) -> int:
    """Write the event's notifications and enqueue the mails to send now
    (after they commit). Returns how many notifications were written."""
    event = Event(kind=kind, study_id=study_id, data=data, actor_id=actor_id, at=datetime.fromisoformat(at))
    if kind == "invitation.created" and data.get("email") and data.get("key"):
        transaction.on_commit(lambda: invitation_mail_send.delay(invitation_id=data["invitation_id"], key=data["key"]))
    ids = services.event_record(event=event)
    for pk in ids:
        transaction.on_commit(lambda pk=pk: notification_mail_send.delay(notification_id=pk))  # type: ignore[misc]
    return len(ids)


def _refused(notification: Notification, reason: str) -> None:
    services.mail_failed(notification=notification, reason=reason)
    if notification.kind == "reminder.sent" and notification.study is not None:
        expert = (
            workspace_selectors.expert_list(study=notification.study).filter(user=notification.recipient_id).first()
        )
        if expert is not None:
            reminders.reminder_unreached_set(membership_id=expert.pk, reason=reason)


@shared_task(bind=True, name="notifications.tasks.notification_mail_send", ignore_result=True)
def notification_mail_send(self: Task, *, notification_id: int) -> str:
    """E-mail one notification, retried on a mail server's error with
    exponential back-off, NOTIFICATIONS_MAIL_MAX_RETRIES times; refused
    for good, the notification notes why (and a reminder's expert row)."""
    notification = Notification.objects.select_related("recipient", "study").filter(pk=notification_id).first()
    if notification is None or notification.mail != Notification.Mail.PENDING or not notification.recipient.email:
        return "nothing to send"
    refused = mail_send_with_retries(self, mail.notification_message(notification), f"notification {notification_id}")
    if refused is not None:
        _refused(notification, refused)
        return "failed"
    services.mail_sent(notifications=[notification])
    return "sent"


@shared_task(bind=True, name="notifications.tasks.digests_send", ignore_result=True)
def digests_send(self: Task) -> int:
    """Send each person with notifications waiting for the digest one mail
    with all of them, grouped by study. Returns how many digests were sent;
    one a mail server refuses stays waiting for the next day's."""
    waiting: dict[int, list[Notification]] = {}
    for notification in selectors.digest_due():
        waiting.setdefault(notification.recipient_id, []).append(notification)
    sent = 0
    for notifications in waiting.values():
        user = notifications[0].recipient
        if not user.email:
            continue
        try:
            mail.digest_message(user, notifications).send()
        except MAIL_ERRORS as error:
            logger.warning("digest for user %s not sent: %s", user.pk, error)
            continue
        services.mail_sent(notifications=notifications)
        sent += 1
    return sent


@shared_task(bind=True, name="notifications.tasks.invitation_mail_send", ignore_result=True)
def invitation_mail_send(self: Task, *, invitation_id: int, key: str) -> str:
    """Mail an invitation link addressed to an e-mail address
    (``Invitation.email``) its link, retried like every notification mail."""
    invitation = selectors.pending_invitation(invitation_id)
    address = invitation.email if invitation else ""
    if invitation is None or not address:
        return "nothing to send"
    study: Study = invitation.study
    context = {"study": study, "link": mail.absolute(f"/invitations/{key}/"), "days": settings.INVITATION_LIFETIME_DAYS}
    message = EmailMultiAlternatives(
        subject_line(f"Invitation to {study.title}"),
        loader.render_to_string("notifications/invitation.txt", context),
        settings.DEFAULT_FROM_EMAIL,
        [address],
    )
    message.attach_alternative(loader.render_to_string("notifications/invitation.html", context), "text/html")
    return "sent" if mail_send_with_retries(self, message, f"invitation {invitation_id}") is None else "failed"
