"""Accounts' writes: the account behind an OpenID Connect sign-in
(docs/accounts.md "Single sign-on")."""

import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from workspace.errors import InvalidInput
from workspace.invitations import invitation_pending_for_email
from workspace.limits import USERNAME_MAX_LENGTH
from workspace.models import EmailConfirmation
from workspace.services.accounts import email_clean, email_confirmed_set, username_clean, usernames_taken

from .models import OidcIdentity


class SignInRefused(Exception):
    """The provider's answer does not sign anyone in here; ``message`` says
    why, in words for the person signing in (shown on the sign-in page)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _claim(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name) if name else None
    return value.strip() if isinstance(value, str) else ""


def verified_email(*, claims: Mapping[str, Any]) -> str:
    """The e-mail address the provider says it verified, normalised; refused
    (SignInRefused) when it sent none, or did not verify it (``email_verified``
    must be the JSON value true, not a string)."""
    provider = settings.OIDC_PROVIDER_NAME
    try:
        email = email_clean(email=_claim(claims, settings.OIDC_CLAIM_EMAIL))
    except InvalidInput:
        email = ""
    if not email:
        raise SignInRefused(
            f"{provider} did not tell us your e-mail address, so you could not be signed in. "
            "Ask your identity provider's administrator to share it (the “email” scope)."
        )
    if claims.get("email_verified") is not True:
        raise SignInRefused(
            f"Your identity provider has not verified your e-mail address ({email}), so you were not signed in. "
            "Verify it with your identity provider, then sign in again."
        )
    return email


def _confirmed_accounts(email: str) -> list[User]:
    """The accounts whose current address is ``email`` (case aside) AND was
    confirmed by its owner (workspace's EmailConfirmation of that address)."""
    rows = EmailConfirmation.objects.filter(email__iexact=email, user__email__iexact=email).select_related("user")
    return [row.user for row in rows if row.email.casefold() == row.user.email.casefold()]


def _may_create(*, email: str, claims: Mapping[str, Any]) -> bool:
    """Whether a first sign-in with the verified ``email`` may create an
    account: its domain or a group claim is allowed, or a study's pending
    invitation is addressed to that address (the designer asked for them)."""
    if invitation_pending_for_email(email=email):
        return True
    domain = email.rsplit("@", 1)[1].lower()
    domains = settings.OIDC_ALLOWED_DOMAINS
    if "*" in domains or domain in domains:
        return True
    groups = claims.get(settings.OIDC_GROUPS_CLAIM) if settings.OIDC_GROUPS_CLAIM else None
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list):
        return False
    return bool({group for group in groups if isinstance(group, str)} & set(settings.OIDC_ALLOWED_GROUPS))


def _username_for(claims: Mapping[str, Any], email: str) -> str:
    """A free, well-formed username from the provider's username claim (else
    the address's local part): cleaned as every username is
    (workspace.services.accounts.username_clean), characters outside
    letters, digits and @.+-_ dropped, and "-2", "-3"... added while it reads
    as an existing account (the look-alike check)."""
    wanted = _claim(claims, settings.OIDC_CLAIM_USERNAME) or email.split("@", 1)[0]
    try:
        base = username_clean(username=wanted)
    except InvalidInput:
        base = re.sub(r"[^\w.@+-]", "", wanted, flags=re.ASCII)
    base = base[: USERNAME_MAX_LENGTH - 6] or "user"
    for number in range(1, 1000):
        candidate = base if number == 1 else f"{base}-{number}"
        if not usernames_taken(usernames=[candidate]):
            return candidate
    raise SignInRefused("No free username could be made for you; ask an administrator to create your account.")


def _names(claims: Mapping[str, Any]) -> tuple[str, str]:
    first = _claim(claims, settings.OIDC_CLAIM_FIRST_NAME)
    last = _claim(claims, settings.OIDC_CLAIM_LAST_NAME)
    if not first and not last:
        first, _, last = _claim(claims, settings.OIDC_CLAIM_NAME).partition(" ")
    return first[:150], last[:150]


def _identity_sign_in(identity: OidcIdentity, email: str) -> User:
    if not identity.user.is_active:
        raise SignInRefused("Your account here is deactivated; ask an administrator.")
    identity.email, identity.last_login_at = email, timezone.now()
    identity.save(update_fields=["email", "last_login_at"])
    return identity.user


@transaction.atomic
def oidc_user_sign_in(*, issuer: str, claims: Mapping[str, Any]) -> User:
    """The account that the provider's validated claims sign in (the ID
    token's claims with the userinfo's over them), or SignInRefused:

    1. an account already linked to (issuer, sub) (OidcIdentity);
    2. else, the provider having verified the address, the one account whose
       own address is that one AND confirmed here: linked now. Never by
       username or name. An account with that address unconfirmed is not
       linked (its address may be a typo, or a recycled mailbox's);
    3. else a new account, if the address's domain or the person's groups
       may have one: the username made free, the address recorded as
       confirmed, no usable password."""
    subject = _claim(claims, "sub")
    if not subject:
        raise SignInRefused("The identity provider's answer named no one (no “sub”); you were not signed in.")
    email = verified_email(claims=claims)
    identity = OidcIdentity.objects.filter(issuer=issuer, subject=subject).select_related("user").first()
    if identity is not None:
        return _identity_sign_in(identity, email)
    confirmed = _confirmed_accounts(email)
    if len(confirmed) > 1:
        raise SignInRefused(f"Several accounts here use {email}; ask an administrator to link yours.")
    if confirmed and OidcIdentity.objects.filter(user=confirmed[0], issuer=issuer).exists():
        raise SignInRefused(
            f"The account here that uses {email} is linked to another identity at this provider; ask an administrator."
        )
    if confirmed:
        identity = OidcIdentity.objects.create(user=confirmed[0], issuer=issuer, subject=subject, email=email)
        return _identity_sign_in(identity, email)
    if User.objects.filter(email__iexact=email).exists():
        raise SignInRefused(
            f"An account here uses {email} but has not confirmed it, so single sign-on cannot use it. "
            "Sign in with your password, confirm your address on your account page, then use single sign-on."
        )
    if not _may_create(email=email, claims=claims):
        raise SignInRefused(
            f"No account here uses {email}, and new accounts through single sign-on are open only to some "
            "e-mail domains or groups, which yours is not among. Ask your study's designer or an administrator."
        )
    first, last = _names(claims)
    user = User(username=_username_for(claims, email), email=email, first_name=first, last_name=last)
    user.set_unusable_password()
    user.save()
    email_confirmed_set(user=user, email=email)
    identity = OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject, email=email)
    return _identity_sign_in(identity, email)
