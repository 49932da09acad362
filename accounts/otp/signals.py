"""Two-factor sign-in hooked into the rest of the site at start-up
(``AccountsConfig.ready``)."""

from typing import Any

from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_logged_in
from django.http import HttpRequest

from workspace import extensions

from . import services


def _signed_in(sender: object, request: HttpRequest | None, user: User, **kwargs: Any) -> None:
    """Every sign-in (password, single sign-on, an invitation link, the
    admin's form) notes in the session whether the user has a device or
    must set one up: the middleware reads it on each request at no cost."""
    if request is not None and hasattr(request, "session"):
        services.state_remember(request.session, user, services.state_of(user))


def _admin_needs_verified_session() -> None:
    """The admin lets in only staff whose session was verified with a code
    (the middleware already sends them to the code page; this holds even
    without it)."""
    allowed = admin.site.has_permission

    def has_permission(request: HttpRequest) -> bool:
        is_verified = getattr(request.user, "is_verified", None)
        return allowed(request) and is_verified is not None and bool(is_verified())

    admin.site.has_permission = has_permission  # type: ignore[method-assign]


def _api_token_second_factor(*, request: HttpRequest, user: User, code: str) -> None:
    """``api_checks.api_token_second_factor``, for the token endpoint."""
    # imported on first use: it raises DRF's errors, and importing DRF's
    # responses and views costs 0.1 s at every command's start.
    from .api_checks import api_token_second_factor

    api_token_second_factor(request=request, user=user, code=code)


def connect() -> None:
    user_logged_in.connect(_signed_in, dispatch_uid="accounts.otp.signed_in")
    _admin_needs_verified_session()
    extensions.token_second_factor_register(_api_token_second_factor)
