"""The log-in lock-out against password guessing, shared by the log-in page
and the API's token endpoint.

Failures are counted per (client address, username) and per address:
LOGIN_FAILURE_LIMIT failures for one username lock that username out at that
address, so the other people behind a shared address (an office NAT) still
log in; LOGIN_FAILURE_ADDRESS_LIMIT failures over all usernames lock the
address out (one client trying many usernames). Both last
LOGIN_FAILURE_WINDOW seconds from the first failure.

The username is counted under ``username_key``: the name as Django's
authentication reads it (NFKC, so a full-width ``ｖｉｃｔｉｍ`` signs in as
``victim``), case-folded. Every spelling that could reach an account, or
look like it, counts against the same limit.

With the cache unreachable the lock-out fails open (logged): it must not turn
a cache outage into nobody being able to log in.
"""

import hashlib
from typing import cast

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from .cache_errors import CACHE_ERRORS, log_cache_unreachable
from .services.accounts import username_key


def client_address(request: HttpRequest | Request) -> str:
    """The client's address as the API's throttles see it (NUM_PROXIES).
    ``get_ident`` reads only the request's META, which a Django request has."""
    return BaseThrottle().get_ident(cast(Request, request)) or ""


def _keys(request: HttpRequest | Request, username: object) -> tuple[str, str]:
    """Cache keys of the per-address and the per-(address, username)
    counters. Hashed: both parts come from the client."""
    address = client_address(request)
    name = username_key(username) if isinstance(username, str) else ""
    per_address = hashlib.sha256(address.encode()).hexdigest()
    per_user = hashlib.sha256(f"{address}\x00{name}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"login-failures:address:{per_address}", f"login-failures:user:{per_user}"


def login_refusal(request: HttpRequest | Request, username: object) -> str | None:
    """Why an attempt to log in as ``username`` from this client is refused
    unseen, or None."""
    address_key, user_key = _keys(request, username)
    try:
        counts = cache.get_many([address_key, user_key])
    except CACHE_ERRORS as error:  # fail open, as the API's throttles do
        log_cache_unreachable("log-in lock-out", error)
        return None
    minutes = max(1, settings.LOGIN_FAILURE_WINDOW // 60)
    if counts.get(address_key, 0) >= settings.LOGIN_FAILURE_ADDRESS_LIMIT:
        return f"Too many failed attempts from your address. Try again in {minutes} minutes."
    if counts.get(user_key, 0) >= settings.LOGIN_FAILURE_LIMIT:
        return f"Too many failed attempts for this username from your address. Try again in {minutes} minutes."
    return None


def login_failed(request: HttpRequest | Request, username: object) -> None:
    """Count a failed attempt for ``username`` and for the client's address."""
    try:
        for key in _keys(request, username):
            cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW)
            cache.incr(key)
    except CACHE_ERRORS as error:
        log_cache_unreachable("log-in failure count", error)


def login_succeeded(request: HttpRequest | Request, username: object) -> None:
    """Knowing the password ends that username's count; the address's count
    stays, or one's own account would reset it."""
    try:
        cache.delete(_keys(request, username)[1])
    except CACHE_ERRORS as error:
        log_cache_unreachable("log-in failure reset", error)
