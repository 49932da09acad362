"""The sign-up mail, sent by a Celery task outside the request
(docs/accounts.md "Self sign-up"): the request never looks the address up,
so its answer and its work are the same whether or not an account has it."""

import logging

from celery import Task, shared_task
from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template import loader

from workspace.mail_retries import mail_send_with_retries
from workspace.services._checks import subject_line

from . import signup
from .models import SitePolicy

logger = logging.getLogger(__name__)


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
    refused = mail_send_with_retries(self, message, "sign-up mail")
    return "sent" if refused is None else f"refused: {refused}"
