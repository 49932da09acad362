"""The sign-up mail, sent by a Celery task outside the request
(docs/accounts.md "Self sign-up"): the request never looks the address up,
so its answer and its work are the same whether or not an account has it."""

import logging
import smtplib

from celery import Task, shared_task
from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template import loader

from workspace.services._checks import subject_line

from . import signup
from .models import SitePolicy

logger = logging.getLogger(__name__)

#: What a mail server's refusal or an unreachable server raises.
MAIL_ERRORS = (smtplib.SMTPException, OSError)


def _retry_in(retries: int) -> int:
    """Exponential back-off: 1, 2, 4 ... times NOTIFICATIONS_MAIL_RETRY_SECONDS, at most an hour."""
    return min(settings.NOTIFICATIONS_MAIL_RETRY_SECONDS * 2**retries, 3600)


def _send(task: Task, message: EmailMultiAlternatives) -> str | None:
    """Send ``message``: None once sent, or why the mail server refused it
    for good. Under a worker a refusal is retried later (``task.retry``,
    exponential back-off), NOTIFICATIONS_MAIL_MAX_RETRIES times; in eager
    mode (no worker) the tries follow at once. (The notifications app's
    policy; accounts does not import it.)"""
    retries = task.request.retries or 0
    while True:
        try:
            message.send()
        except MAIL_ERRORS as error:
            reason = str(error) or type(error).__name__
            if retries >= settings.NOTIFICATIONS_MAIL_MAX_RETRIES:
                logger.error("sign-up mail not sent, giving up after %s tries: %s", retries + 1, reason)
                return reason
            logger.warning("sign-up mail not sent (try %s): %s", retries + 1, reason)
            if not task.request.is_eager:
                raise task.retry(exc=error, countdown=_retry_in(retries)) from error
            retries += 1
        else:
            return None


def signup_message(*, email: str, site: str) -> EmailMultiAlternatives | None:
    """The mail to ``email``: the sign-up link (a new ``SignUpRequest``) to
    an address no account has, else "you already have an account" with the
    sign-in and password-reset links. None when the policy no longer lets
    the address sign up (it changed since the request)."""
    policy = SitePolicy.current()
    if signup.policy_refusal(policy) is not None or not signup.domain_allowed(policy=policy, email=email):
        return None
    context = {**signup.signup_links(site=site), "email": email, "site": site, "hours": settings.SIGNUP_LINK_HOURS}
    token = signup.signup_link_make(email=email)
    if token is None:
        template, subject = "accounts/signup_exists_email", "You already have an account on approve"
    else:
        template, subject = "accounts/signup_email", "Create your account on approve"
        context["link"] = site + signup.signup_path(token)
    message = EmailMultiAlternatives(
        subject_line(subject), loader.render_to_string(f"{template}.txt", context), settings.DEFAULT_FROM_EMAIL, [email]
    )
    message.attach_alternative(loader.render_to_string(f"{template}.html", context), "text/html")
    return message


@shared_task(bind=True, name="accounts.tasks.signup_mail_send", ignore_result=True)
def signup_mail_send(self: Task, *, email: str, site: str) -> str:
    """Mail ``email`` its sign-up link, or that it has an account already,
    retried on a mail server's error with exponential back-off."""
    message = signup_message(email=email, site=site)
    if message is None:
        logger.info("sign-up mail not sent: the site policy no longer lets this address sign up")
        return "not allowed"
    refused = _send(self, message)
    return "sent" if refused is None else f"refused: {refused}"
