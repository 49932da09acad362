"""The password-reset mail, sent by a task outside the request (its subject
made by ``services._checks.subject_line``, as every mail's is).

Password resets are throttled three ways, each over
PASSWORD_RESET_MAIL_WINDOW seconds: per address asked for
(PASSWORD_RESET_MAIL_LIMIT, case aside), per account the mail would go to
(the same limit: one account reached under several spellings of its
address), and per client address (PASSWORD_RESET_CLIENT_LIMIT). The request
only counts the first and the last and enqueues the task; it never looks an
account up, so its answer and its work are the same whether or not an
account has the address. The task looks the accounts up, counts them, and
sends. Over a limit nothing is sent and the page answers as usual (the
refusal is logged). With the cache unreachable the throttle fails open, as
the log-in lock-out does.
"""

import hashlib
import logging
import smtplib
import unicodedata
from collections.abc import Iterator
from typing import cast

from celery import shared_task
from django.conf import settings
from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.mail import EmailMultiAlternatives
from django.http import HttpRequest
from django.template import loader

from .cache_errors import CACHE_ERRORS, log_cache_unreachable
from .lockout import client_address
from .services._checks import subject_line

logger = logging.getLogger(__name__)

# --- password reset ----------------------------------------------------------------


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _within(key: str, limit: int) -> bool:
    """Count one more against ``key``; whether the count is still within
    ``limit`` for the window. Fails open when the cache is unreachable."""
    try:
        cache.add(key, 0, timeout=settings.PASSWORD_RESET_MAIL_WINDOW)
        return cache.incr(key) <= limit
    except CACHE_ERRORS as error:
        log_cache_unreachable("password-reset throttle", error)
        return True
    except ValueError:  # the key expired between add and incr: a new window
        cache.add(key, 1, timeout=settings.PASSWORD_RESET_MAIL_WINDOW)
        return True


def password_reset_allowed(*, request: HttpRequest, email: str) -> bool:
    """Whether this request may have a reset mail sent to ``email``: within
    the limits per address asked for and per client. Both are counted either
    way, and neither looks at accounts."""
    # Compared as Django's reset form compares addresses (NFKC, case folded).
    folded = unicodedata.normalize("NFKC", email).casefold()
    per_email = _within(f"password-reset:email:{_digest(folded)}", settings.PASSWORD_RESET_MAIL_LIMIT)
    per_client = _within(
        f"password-reset:client:{_digest(client_address(request))}", settings.PASSWORD_RESET_CLIENT_LIMIT
    )
    if not (per_email and per_client):
        logger.warning(
            "password reset not sent: over the limit %s",
            "per address asked for" if not per_email else "per client address",
        )
        return False
    return True


class _ThrottledResetForm(PasswordResetForm):
    """Django's reset form with one more policy, the limit per account, and
    a subject made by ``subject_line``; ``sent`` counts the mails sent."""

    sent = 0

    def get_users(self, email: str) -> Iterator[User]:
        for user in super().get_users(email):
            if _within(f"password-reset:account:{user.pk}", settings.PASSWORD_RESET_MAIL_LIMIT):
                yield user
            else:
                logger.warning("password reset not sent to account %s: over the limit per account", user.pk)

    def send_mail(
        self,
        subject_template_name: str,
        email_template_name: str,
        context: dict,
        from_email: str | None,
        to_email: str,
        html_email_template_name: str | None = None,
    ) -> None:
        subject = subject_line(loader.render_to_string(subject_template_name, context))
        body = loader.render_to_string(email_template_name, context)
        try:
            EmailMultiAlternatives(subject, body, from_email, [to_email]).send()
        except (smtplib.SMTPException, OSError) as error:
            logger.warning("password reset to account %s not sent: %s", context["user"].pk, error)
        else:
            self.sent += 1


@shared_task(name="workspace.mail.password_reset_mail_send", ignore_result=True)
def password_reset_mail_send(*, email: str, domain: str, use_https: bool) -> int:
    """Mail a reset link to each active account with a usable password whose
    address is ``email`` (within the per-account limit), for the site at
    ``domain``. Returns how many were sent (0 for no account: nothing tells
    the person who asked)."""
    form = _ThrottledResetForm({"email": email})
    if not form.is_valid():
        return 0
    form.save(
        domain_override=domain,
        use_https=use_https,
        subject_template_name="accounts/password_reset_subject.txt",
        email_template_name="accounts/password_reset_email.txt",
        extra_email_context=cast(dict[str, str], {"valid_hours": max(1, settings.PASSWORD_RESET_TIMEOUT // 3600)}),
    )
    return form.sent
