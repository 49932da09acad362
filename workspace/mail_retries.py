"""The one retry policy of every mail a Celery task sends (notifications,
invitations, sign-up links): exponential back-off under a worker, the tries
at once in eager mode. A module of its own so that importing it (the apps'
tasks do, at start) does not import ``workspace.mail``, whose task workers
find through CELERY_IMPORTS."""

import logging
import smtplib

from celery import Task
from django.conf import settings
from django.core.mail import EmailMultiAlternatives

logger = logging.getLogger(__name__)


#: What a mail server's refusal or an unreachable server raises.
MAIL_ERRORS = (smtplib.SMTPException, OSError)
#: The longest wait between two tries of a mail.
MAIL_RETRY_MAX_SECONDS = 3600


def mail_retry_in(retries: int) -> int:
    """Exponential back-off: 1, 2, 4 ... times NOTIFICATIONS_MAIL_RETRY_SECONDS, at most an hour."""
    return min(settings.NOTIFICATIONS_MAIL_RETRY_SECONDS * 2**retries, MAIL_RETRY_MAX_SECONDS)


def mail_send_with_retries(task: Task, message: EmailMultiAlternatives, what: str) -> str | None:
    """Send ``message`` from ``task`` (a bound Celery task): None once sent,
    or why the mail server refused it for good. Under a worker a refusal is
    retried later (``task.retry``, ``mail_retry_in``),
    NOTIFICATIONS_MAIL_MAX_RETRIES times; in eager mode (no worker: tests, a
    site without Redis) the tries follow at once. The one retry policy of
    every mail a task sends (notifications, invitations, sign-up links)."""
    retries = task.request.retries or 0
    while True:
        try:
            message.send()
        except MAIL_ERRORS as error:
            reason = str(error) or type(error).__name__
            if retries >= settings.NOTIFICATIONS_MAIL_MAX_RETRIES:
                logger.error("%s not sent, giving up after %s tries: %s", what, retries + 1, reason)
                return reason
            logger.warning("%s not sent (try %s): %s", what, retries + 1, reason)
            if not task.request.is_eager:
                raise task.retry(exc=error, countdown=mail_retry_in(retries)) from error
            retries += 1
        else:
            return None
