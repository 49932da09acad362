"""Accounts: users named in studies and bundles, personal API tokens."""

import hashlib
import logging
import secrets
import smtplib
import unicodedata
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..errors import InvalidInput
from ..limits import NAME_MAX_LENGTH, USERNAME_MAX_LENGTH
from ..models import ApiToken, EmailConfirmation
from ._checks import subject_line
from ._checks import text as _text

logger = logging.getLogger(__name__)


USERNAME_TAKEN = "this username is taken: choose another, or log in if it is yours"


def username_key(username: str) -> str:
    """What two usernames must not share: the name as Django's
    authentication reads it (NFKC, ``AbstractBaseUser.normalize_username``,
    which the log-in form applies: ``ｖｉｃｔｉｍ`` signs in as ``victim``),
    case-folded (``Victim``), normalised again. The log-in lock-out counts
    failures under this key, and no account is created whose key another
    account already has."""
    normal = AbstractBaseUser.normalize_username(username.strip())
    return unicodedata.normalize("NFKC", normal.casefold())


def username_clean(*, username: object, field: str = "username") -> str:
    """A well-formed username, or InvalidInput naming ``field``: stripped, one
    line of visible characters, in NFKC as Django's forms normalise it (a
    full-width ``ｖｉｃｔｉｍ`` becomes ``victim``), letters, digits and
    @.+-_ only. Says nothing about whether such an account exists."""
    if not isinstance(username, str) or not username.strip():
        raise InvalidInput({field: "must be a username"})
    username = _text(username, field, max_length=USERNAME_MAX_LENGTH * 4)
    username = AbstractBaseUser.normalize_username(username)
    try:
        User.username_validator(username)
    except Exception:
        raise InvalidInput({field: f"{username!r} is not a valid username (letters, digits and @.+-_ only)"}) from None
    if len(username) > USERNAME_MAX_LENGTH:
        raise InvalidInput({field: f"usernames are at most {USERNAME_MAX_LENGTH} characters"})
    return username


def usernames_taken(*, usernames: Iterable[str]) -> dict[str, str]:
    """``{username: existing}`` for each of ``usernames`` whose
    ``username_key`` an account already has (``existing`` is that account's
    username, the same or a look-alike). Reads every username once (keys are
    computed in Python: SQLite's case-insensitive comparisons know ASCII only).
    One query; for names whose key is ASCII it reads only their ASCII case
    variants and the usernames with other characters (``ß`` folds to
    ``ss``), otherwise every username."""
    wanted: dict[str, list[str]] = {}
    for username in usernames:
        wanted.setdefault(username_key(username), []).append(username)
    taken: dict[str, str] = {}
    if not wanted:
        return taken
    rows = User.objects.values_list("username", flat=True)
    if all(key.isascii() for key in wanted):
        # An ASCII username has the key of its lower case; any other holds
        # a character outside printable ASCII (usernames hold no controls).
        near = Q(username__regex=r"[^ -~]")
        for key in wanted:
            near |= Q(username__iexact=key)
        rows = rows.filter(near)
    for existing in rows.iterator(chunk_size=2000):
        for username in wanted.get(username_key(existing), ()):
            # An exact match wins over a look-alike.
            if taken.get(username) != username:
                taken[username] = existing
    return taken


def _look_alike(username: str, existing: str, field: str) -> InvalidInput:
    return InvalidInput(
        {field: f"{username!r} is taken: it reads as the existing account {existing!r} (case and width aside)"}
    )


def user_get_or_create(*, username: str, field: str = "username") -> User:
    """The account for ``username``; a new one has no usable password (an
    invitation or an administrator gives it one). A name that reads as
    another account's (``Alice`` beside ``alice``) is refused, naming
    ``field``: it would be a second account under a look-alike name."""
    username = username_clean(username=username, field=field)
    user = User.objects.filter(username=username).first()
    if user is None:
        existing = usernames_taken(usernames=[username]).get(username)
        if existing is not None:
            raise _look_alike(username, existing, field)
        user = User(username=username)
        user.set_unusable_password()
        user.save()
    return user


def email_clean(*, email: object, field: str = "email") -> str:
    """A well-formed e-mail address (stripped, domain lower-cased), or ""
    for none; InvalidInput naming ``field`` otherwise."""
    if email is None:
        return ""
    if not isinstance(email, str):
        raise InvalidInput({field: "must be an e-mail address, or empty for none"})
    email = email.strip()
    if not email:
        return ""
    longest = User._meta.get_field("email").max_length or 254
    if len(email) > longest:
        raise InvalidInput({field: f"e-mail addresses are at most {longest} characters"})
    try:
        validate_email(email)
    except ValidationError:
        raise InvalidInput({field: f"{email!r} is not an e-mail address (name@example.org)"}) from None
    return User.objects.normalize_email(email)


def user_email_set(*, user: User, email: object) -> str:
    """Give ``user`` the e-mail address ``email`` ("" removes it), where
    reminders and password resets go. Returns the address as stored."""
    email = email_clean(email=email)
    user.email = email
    user.save(update_fields=["email"])
    return email


_CONFIRM_SALT = "approve.email-confirmation"


def email_confirmation_token(*, user: User) -> str:
    """A signed token confirming ``user``'s current address, for the link
    mailed to it; valid for settings.PASSWORD_RESET_TIMEOUT seconds."""
    return signing.dumps({"user": user.pk, "email": user.email}, salt=_CONFIRM_SALT)


@transaction.atomic
def email_confirm(*, user: User, token: str) -> EmailConfirmation:
    """``user`` followed the link mailed to their address: record that it
    reaches them. Refused (naming ``token``) when the link is malformed,
    expired, someone else's, or for an address that is no longer theirs."""
    try:
        claim = signing.loads(token, salt=_CONFIRM_SALT, max_age=settings.PASSWORD_RESET_TIMEOUT)
    except signing.SignatureExpired:
        raise InvalidInput(
            {"token": "this confirmation link has expired: save your address again for a new one"}
        ) from None
    except signing.BadSignature:
        raise InvalidInput(
            {"token": "this confirmation link is not valid: copy the whole link from the message"}
        ) from None
    if claim.get("user") != user.pk:
        raise InvalidInput({"token": "this confirmation link is for another account: sign in as its owner"})
    if not user.email or claim.get("email") != user.email:
        raise InvalidInput(
            {"token": "this link confirms an address that is no longer yours; your current one has its own link"}
        )
    confirmation, _ = EmailConfirmation.objects.update_or_create(
        user=user, defaults={"email": user.email, "confirmed_at": timezone.now()}
    )
    return confirmation


def confirmed_email(*, user: User) -> str:
    """The account's e-mail address when its owner confirmed it (the
    confirmation is of the address it has now), else "". What an
    invitation addressed to an address matches (workspace.invitations) and
    single sign-on links an account by (accounts.services)."""
    if not user.email:
        return ""
    confirmation = EmailConfirmation.objects.filter(user=user.pk).first()
    if confirmation is None or confirmation.email.casefold() != user.email.casefold():
        return ""
    return user.email


def email_confirmed_set(*, user: User, email: str) -> EmailConfirmation:
    """Record that ``email``, ``user``'s address, reaches them: proven
    otherwise than by the confirmation link (single sign-on's verified
    address, the key of an invitation mailed to it)."""
    confirmation, _ = EmailConfirmation.objects.update_or_create(
        user=user, defaults={"email": email, "confirmed_at": timezone.now()}
    )
    return confirmation


def email_change_notify(*, user: User, old: str, account_link: str, confirm_link: str = "") -> str | None:
    """Tell ``user``'s new address (and the old one, if any) that it was set,
    through the configured mail backend (``EMAIL_URL``). Returns None when
    sent, or why the mail server refused it."""
    username = user.get_username()
    new = user.email
    messages = []
    if new:
        body = (
            f"Hello {username},\n\nThis address is now the e-mail address of your approve account "
            f"“{username}”. Study designers' reminders and password resets are sent here.\n\n"
            + (
                f"Confirm that it reaches you by opening this link (signed in as {username}):\n{confirm_link}\n\n"
                if confirm_link
                else ""
            )
            + f"If you did not set it, sign in and change it (and your password): {account_link}\n\napprove"
        )
        messages.append(("Your e-mail address on approve", body, new))
    if old and old != new:
        now = f"changed to {new}" if new else "removed"
        body = (
            f"Hello {username},\n\nThe e-mail address of your approve account “{username}” was {now}; "
            f"reminders and password resets no longer come to this address.\n\n"
            f"If you did not change it, sign in and change it back (and your password): {account_link}\n\napprove"
        )
        messages.append(("Your e-mail address on approve was changed", body, old))
    for subject, body, address in messages:
        try:
            send_mail(subject_line(subject), body, settings.DEFAULT_FROM_EMAIL, [address])
        except (smtplib.SMTPException, OSError) as error:
            logger.warning("e-mail change notice to %s not sent: %s", address, error)
            return str(error) or type(error).__name__
    return None


def users_get_or_create(*, usernames: list[str], fields: list[str] | None = None) -> list[User]:
    """``user_get_or_create`` for well-formed usernames (``username_clean``),
    in two queries however many (and one read of the usernames when some are
    new): the accounts, in this order. A new name that reads as an existing
    account's is refused as ``user_get_or_create`` refuses it, naming
    ``fields[i]`` (default ``usernames[i]``); then nothing is written."""
    users = {user.get_username(): user for user in User.objects.filter(username__in=usernames)}
    missing = [username for username in dict.fromkeys(usernames) if username not in users]
    if missing:
        taken = usernames_taken(usernames=missing)
        for position, username in enumerate(usernames):
            if username in taken:
                field = fields[position] if fields is not None else f"usernames[{position}]"
                raise _look_alike(username, taken[username], field)
        seen: dict[str, str] = {}
        for position, username in enumerate(usernames):
            if username in missing:
                first = seen.setdefault(username_key(username), username)
                if first != username:
                    field = fields[position] if fields is not None else f"usernames[{position}]"
                    raise _look_alike(username, first, field)
    new = []
    for username in missing:
        users[username] = User(username=username)
        users[username].set_unusable_password()
        new.append(users[username])
    User.objects.bulk_create(new)
    return [users[username] for username in usernames]


def _token_lifetime(expires_in_days: object) -> timedelta:
    """A token's lifetime: the default, or ``expires_in_days`` within 1 and
    settings.API_TOKEN_MAX_LIFETIME_DAYS."""
    if expires_in_days is None:
        return timedelta(days=settings.API_TOKEN_LIFETIME_DAYS)
    longest = settings.API_TOKEN_MAX_LIFETIME_DAYS
    if isinstance(expires_in_days, bool) or not isinstance(expires_in_days, int):
        raise InvalidInput({"expires_in_days": f"must be a whole number of days, got {expires_in_days!r}"})
    if not 1 <= expires_in_days <= longest:
        raise InvalidInput({"expires_in_days": f"must be between 1 and {longest} days, got {expires_in_days}"})
    return timedelta(days=expires_in_days)


def api_token_create(*, user: User, name: str = "", expires_in_days: int | None = None) -> tuple[ApiToken, str]:
    """A new token for ``user``: returns ``(token, key)``; the key is not
    stored and cannot be shown again. It expires after ``expires_in_days``
    (default settings.API_TOKEN_LIFETIME_DAYS)."""
    name = _text(name, "name", max_length=NAME_MAX_LENGTH, required=False)
    lifetime = _token_lifetime(expires_in_days)
    key = secrets.token_hex(20)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        digest=hashlib.sha256(key.encode()).hexdigest(),
        prefix=key[:8],
        expires_at=timezone.now() + lifetime,
    )
    return token, key


def api_token_record_use(*, token: ApiToken, at: datetime) -> None:
    """Record that ``token`` authenticated a request ``at`` that time (one
    UPDATE of that column, whatever else changed)."""
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=at)


def api_token_revoke(*, token: ApiToken) -> None:
    token.delete()


def api_tokens_revoke_all(*, user: User) -> int:
    """Revoke every API token of ``user``; returns how many there were."""
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    return deleted


@transaction.atomic
def user_password_set(*, user: User, password: str) -> int:
    """Give ``user`` a new password (already checked by the password
    validators) and revoke all their API tokens: whoever knew the old password
    may have made one. Sessions other than the one the caller keeps (with
    ``update_session_auth_hash``) end because the password hash changed.
    Returns the number of tokens revoked."""
    user.set_password(password)
    user.save(update_fields=["password"])
    return api_tokens_revoke_all(user=user)
