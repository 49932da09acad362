"""Self sign-up under the site's policy (docs/accounts.md "Self sign-up").

No account exists until its address is verified. Step 1 (``signup_request``)
takes an e-mail address and answers the same whether or not an account has
it: it checks the policy and the address, counts the throttles and enqueues
the mail task (``accounts.tasks.signup_mail_send``), which looks the address
up. To a new address the task mails a link carrying a random token (only its
SHA-256 digest is stored, in a ``SignUpRequest``); to an address that has an
account, a mail saying so, with the sign-in and password-reset links. Step 2
(``signup_complete``), the link followed, creates the account with its
address confirmed, once, before the link expires, if the policy still allows.
"""

import hashlib
import math
import secrets
import unicodedata
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, cast

from django.conf import settings
from django.contrib.auth import password_validation
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from workspace.errors import InvalidInput, RateLimited
from workspace.lockout import client_address
from workspace.models import EmailConfirmation
from workspace.services._checks import text as _text
from workspace.services.accounts import USERNAME_TAKEN, email_clean, username_clean, username_key, usernames_taken

from .models import SignUpRequest, SitePolicy, domain_key

OPEN_POLICIES = (SitePolicy.SignUp.DOMAINS, SitePolicy.SignUp.OPEN)
NAME_MAX_LENGTH = 150


class SignUpClosed(Exception):
    """The site's policy lets no one sign up here (closed, invitation only,
    or single sign-on only), or no longer lets this address: ``message`` says
    so and who to ask. The API answers 403 ``signup_closed``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- the policy ---------------------------------------------------------------------


def policy_refusal(policy: SitePolicy) -> SignUpClosed | None:
    """Why nobody may sign up under ``policy``, or None (domains, open)."""
    if not settings.PASSWORD_SIGN_IN:
        return SignUpClosed(
            f"Accounts on this site come through single sign-on: sign in with {settings.OIDC_PROVIDER_NAME} "
            "on the sign-in page."
        )
    if policy.signup == SitePolicy.SignUp.CLOSED:
        return SignUpClosed(
            "Sign-up is closed on this site: accounts are created by an administrator. "
            "Ask your study's designer or the site's administrator for an account."
        )
    if policy.signup == SitePolicy.SignUp.INVITATION:
        return SignUpClosed(
            "Accounts on this site come through a study's invitation: ask the study's designer to invite you, "
            "then open the link in their invitation to create your account."
        )
    return None


def domain_allowed(*, policy: SitePolicy, email: str) -> bool:
    """Whether ``email`` (well-formed, ``email_clean``) may sign up under
    ``policy``: always when it is open; under "listed domains" when the part
    after the last "@" is exactly one of them (``domain_key``: case, IDNA
    and a trailing dot aside). A subdomain is not its parent."""
    if policy.signup == SitePolicy.SignUp.OPEN:
        return True
    if policy.signup != SitePolicy.SignUp.DOMAINS:
        return False
    return domain_key(email.rsplit("@", 1)[1]) in policy.domains()


def _domains_named(policy: SitePolicy) -> str:
    listed = policy.domains()
    return ", ".join(listed[:10]) + (f" and {len(listed) - 10} more" if len(listed) > 10 else "")


def sign_up_context(request: HttpRequest) -> dict[str, Any]:
    """For the sign-in page: ``signup_open``, whether to offer "Sign up"
    (read only by the pages that show it: a callable, called by the template)."""
    return {"signup_open": lambda: policy_refusal(SitePolicy.current()) is None}


# --- throttles ---------------------------------------------------------------------


class _SignUpThrottle(SimpleRateThrottle):
    """DRF's sliding-window throttle over one identity (a client address, or
    an address asked for), its rate read from ``setting`` on each use."""

    setting = ""

    def __init__(self, scope: str, setting: str, ident: str) -> None:
        self.scope, self.setting, self.ident = scope, setting, ident
        super().__init__()

    def get_rate(self) -> str:
        return cast(str, getattr(settings, self.setting))

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.ident}


def _wait(throttle: _SignUpThrottle) -> float | None:
    """Count a request against ``throttle``: None when within its rate, else
    the seconds to wait. Fails open when the cache is unreachable."""
    from workspace.cache_errors import CACHE_ERRORS, log_cache_unreachable

    try:
        if throttle.allow_request(cast(Request, None), cast(APIView, SimpleNamespace())):
            return None
    except CACHE_ERRORS as error:
        log_cache_unreachable(f"sign-up throttle {throttle.scope!r}", error)
        return None
    return max(1.0, throttle.wait() or 1.0)


def _later(wait: float) -> str:
    seconds = max(1, math.ceil(wait))
    return f"{seconds} second{'s' if seconds != 1 else ''}" if seconds < 120 else f"{math.ceil(seconds / 60)} minutes"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def throttle_client(request: HttpRequest | Request) -> None:
    """Count one sign-up request from this client (both steps, page and API):
    RateLimited over SIGNUP_CLIENT_RATE."""
    wait = _wait(_SignUpThrottle("signup_client", "SIGNUP_CLIENT_RATE", _digest(client_address(request))))
    if wait is not None:
        raise RateLimited(
            f"Too many sign-up requests from your network (at most {settings.SIGNUP_CLIENT_RATE}). "
            f"Try again in {_later(wait)}.",
            wait,
        )


def throttle_address(email: str) -> None:
    """Count one sign-up request for ``email`` (case and width aside, as
    the password reset compares addresses): RateLimited over
    SIGNUP_ADDRESS_RATE, whether or not an account has the address."""
    folded = unicodedata.normalize("NFKC", email).casefold()
    wait = _wait(_SignUpThrottle("signup_address", "SIGNUP_ADDRESS_RATE", _digest(folded)))
    if wait is not None:
        raise RateLimited(
            f"Too many sign-up requests for this address (at most {settings.SIGNUP_ADDRESS_RATE}). "
            f"Check the mail already sent to it, or try again in {_later(wait)}.",
            wait,
        )


# --- step 1: the address -------------------------------------------------------------

SENT = (
    "If this address may sign up, we sent it a link to create your account; if it already has an account, "
    "we sent it a reminder with the sign-in and password-reset links instead. Check your mailbox."
)


def signup_request(*, request: HttpRequest | Request, email: object, site: str) -> str:
    """Someone asks to sign up with ``email``, from the site at ``site``
    (``https://host``, for the mail's links). SignUpClosed when the policy
    lets no one; InvalidInput naming ``email`` for a malformed address or
    one outside the listed domains; RateLimited over a throttle. Otherwise
    the mail task is enqueued once the transaction commits, the same
    whether or not an account has the address (the task looks it up).
    Returns the address as cleaned."""
    policy = SitePolicy.current()
    refusal = policy_refusal(policy)
    if refusal is not None:
        raise refusal
    throttle_client(request)
    address = email_clean(email=email)
    if not address:
        raise InvalidInput({"email": "must be an e-mail address (name@example.org)"})
    if not domain_allowed(policy=policy, email=address):
        raise InvalidInput(
            {
                "email": f"sign-up here is open only to addresses at {_domains_named(policy)}: "
                "ask the site's administrator if you need an account with another address"
            }
        )
    throttle_address(address)
    transaction.on_commit(lambda: _enqueue(email=address, site=site))
    return address


def _enqueue(*, email: str, site: str) -> None:
    from . import tasks

    try:
        tasks.signup_mail_send.delay(email=email, site=site)
    except Exception as error:  # the broker is down: the person asks again, the page must not fail
        tasks.logger.warning("sign-up mail not enqueued: %s: %s", type(error).__name__, error)


def signup_link_make(*, email: str) -> str | None:
    """For the mail task: a new sign-up token for ``email`` (its digest
    stored, valid SIGNUP_LINK_HOURS), or None when an account already has
    the address (case aside: the mail then says so instead)."""
    if User.objects.filter(email__iexact=email).exists():
        return None
    token = secrets.token_urlsafe(32)
    SignUpRequest.objects.create(
        email=email,
        digest=_digest(token),
        expires_at=timezone.now() + timedelta(hours=settings.SIGNUP_LINK_HOURS),
    )
    return token


# --- step 2: the link followed -------------------------------------------------------

UNKNOWN_LINK = "this sign-up link is not valid: copy the whole link from the message, or ask for a new one"
USED_LINK = "this sign-up link was already used: sign in with the account it created"
EXPIRED_LINK = "this sign-up link has expired: ask for a new one on the sign-up page"


def signup_request_get(*, token: object) -> SignUpRequest:
    """The pending request of ``token``, or InvalidInput naming ``token``
    (unknown, used or expired). Reads only."""
    if not isinstance(token, str) or not token or len(token) > 200:
        raise InvalidInput({"token": UNKNOWN_LINK})
    found = SignUpRequest.objects.filter(digest=_digest(token)).first()
    if found is None:
        raise InvalidInput({"token": UNKNOWN_LINK})
    if found.used_at is not None:
        raise InvalidInput({"token": USED_LINK})
    if found.expires_at <= timezone.now():
        raise InvalidInput({"token": EXPIRED_LINK})
    return found


def _names(name: object) -> tuple[str, str]:
    full = _text(name, "name", max_length=NAME_MAX_LENGTH, required=False) if name not in (None, "") else ""
    first, _, last = " ".join(full.split()).partition(" ")
    return first, last


def _username_lock(username: str) -> None:
    """On PostgreSQL, hold a transaction-long lock on the name as
    ``username_key`` reads it: two sign-ups at once for ``Dana`` and ``dana``
    (which the unique constraint tells apart) take turns, so the second sees
    the first's account in its look-alike check. (SQLite writes one
    transaction at a time anyway.)"""
    if connection.vendor != "postgresql":
        return
    digest = hashlib.sha256(f"approve.username:{username_key(username)}".encode("utf-8", "surrogatepass")).digest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(digest[:8], "big", signed=True)])


@transaction.atomic
def signup_complete(*, token: object, username: object, password: object, name: object = "") -> User:
    """The link followed: create the account ``username`` (``password``
    checked by the password validators, an optional display ``name``) with
    the request's address, recorded as confirmed, and use the link up.
    InvalidInput naming ``token`` (unknown, used, expired, or the address
    has an account by now), ``username`` (malformed, or taken also by a
    look-alike), ``password`` or ``name``; SignUpClosed when the policy no
    longer lets the address sign up. Nothing is written on a refusal."""
    policy = SitePolicy.current()
    refusal = policy_refusal(policy)
    if refusal is not None:
        raise refusal
    pending = signup_request_get(token=token)
    # Locked: two tabs posting the same link create one account.
    pending = SignUpRequest.objects.select_for_update().get(pk=pending.pk)
    if pending.used_at is not None:
        raise InvalidInput({"token": USED_LINK})
    if not domain_allowed(policy=policy, email=pending.email):
        raise SignUpClosed(
            f"Sign-up is no longer open to {pending.email}: only addresses at {_domains_named(policy)} may sign up. "
            "Ask the site's administrator for an account."
        )
    if User.objects.filter(email__iexact=pending.email).exists():
        raise InvalidInput({"token": f"an account with {pending.email} exists by now: sign in, or reset its password"})
    errors: dict[str, str | list[str]] = {}
    try:
        clean = username_clean(username=username)
    except InvalidInput as error:
        errors.update(error.errors)
        clean = ""
    if clean:
        _username_lock(clean)
    if clean and usernames_taken(usernames=[clean]):
        errors["username"] = USERNAME_TAKEN
    try:
        first, last = _names(name)
    except InvalidInput as error:
        errors.update(error.errors)
        first = last = ""
    user = User(username=clean, email=pending.email, first_name=first, last_name=last)
    if not isinstance(password, str) or not password:
        errors["password"] = "must be a password"
    else:
        try:
            password_validation.validate_password(password, user)
        except ValidationError as error:
            errors["password"] = error.messages
    if errors:
        raise InvalidInput(errors)
    user.set_password(cast(str, password))
    try:
        with transaction.atomic():
            user.save()
    except IntegrityError:  # created meanwhile under this very name
        raise InvalidInput({"username": USERNAME_TAKEN}) from None
    now = timezone.now()
    EmailConfirmation.objects.create(user=user, email=pending.email, confirmed_at=now)
    # This link, and any other still pending for the address, are used up.
    SignUpRequest.objects.filter(email__iexact=pending.email, used_at__isnull=True).update(used_at=now)
    return user


def signup_path(token: str) -> str:
    """The path of the sign-up link of ``token`` (its page)."""
    return reverse("signup_complete", args=[token])


def signup_links(*, site: str) -> dict[str, str]:
    """The links the mails give (absolute, on ``site``)."""
    return {
        "signup": site + reverse("signup"),
        "login": site + reverse("login"),
        "password_reset": site + reverse("password_reset"),
    }
