"""Two-factor sign-in: who must use it, setting it up, checking a code,
recovery codes, turning it off and an administrator's reset.

A user's devices are django-otp's: one ``TOTPDevice`` (an authenticator
app) and one ``StaticDevice`` holding the recovery codes. Only confirmed
devices count: this module makes a TOTP device only once a code from it was
checked, and django-otp's middleware and ``user_has_device`` ignore
unconfirmed ones (an administrator may make such a device in the admin).

Recovery codes are stored as keyed digests (HMAC-SHA256 under the site's
``SECRET_KEY``, in ``StaticToken.token``), never as the codes themselves:
the database alone gives none away (docs/accounts.md, threat model).

Codes are counted like passwords (``workspace.lockout``'s counting and its
client address): per account, whatever the address, since whoever types a
code already has the password, and per client address.
"""

import base64
import binascii
import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.backends.base import SessionBase
from django.core.cache import cache
from django.db import transaction
from django.http import HttpRequest
from django.utils.crypto import salted_hmac
from django_otp import DEVICE_ID_SESSION_KEY, device_classes, user_has_device
from django_otp import login as otp_login
from django_otp.models import Device
from django_otp.oath import TOTP
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice
from django_otp.util import random_hex

from accounts.models import SitePolicy
from workspace import lockout
from workspace.cache_errors import CACHE_ERRORS, log_cache_unreachable
from workspace.errors import InvalidInput
from workspace.models import Membership

# --- who must use it ----------------------------------------------------------------

# A session's state, kept in the session (``SESSION_STATE_KEY``): FREE, the
# user has no device and need not have one; VERIFY, the user has a device
# (the session must be verified with a code); SETUP, the user must set one
# up first.
FREE, VERIFY, SETUP = "free", "verify", "setup"
SESSION_STATE_KEY = "two_factor_state"
# The secret being set up, until a code from it is confirmed (hex).
SESSION_SETUP_KEY = "two_factor_setup_key"

TOTP_NAME = "Authenticator app"
RECOVERY_NAME = "Recovery codes"
RECOVERY_CODE_COUNT = 10
# 12 symbols of 32 (no l, o, 0, 1): 60 random bits, shown as xxxx-xxxx-xxxx.
RECOVERY_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
RECOVERY_CODE_LENGTH = 12
TOTP_DIGITS = 6


def is_required(user: User) -> bool:
    """Staff always; designers (a designer membership of any study) when
    the site policy says so."""
    if user.is_staff or user.is_superuser:
        return True
    # Read without creating the policy row: signing in writes nothing here.
    designers = SitePolicy.objects.filter(pk=1).values_list("designers_need_two_factor", flat=True).first()
    return bool(designers) and Membership.objects.filter(user=user, role=Membership.Role.DESIGNER).exists()


def is_enabled(user: User) -> bool:
    """Whether the user has a confirmed device."""
    return user_has_device(user, confirmed=True)


def state_of(user: User) -> str:
    if is_enabled(user):
        return VERIFY
    return SETUP if is_required(user) else FREE


def state_remember(session: SessionBase, user: User, state: str) -> None:
    session[SESSION_STATE_KEY] = {"user": user.pk, "state": state, "at": time.time()}


def session_state(request: HttpRequest, user: User, *, fresh: bool = False) -> str:
    """The state of this session's user: as remembered in the session (at
    sign-in, or by the last check), looked up again when older than
    TWO_FACTOR_RECHECK_SECONDS, when ``fresh``, or when a user with no
    device has become staff (read from the user, at no cost)."""
    stored = request.session.get(SESSION_STATE_KEY)
    if not fresh and isinstance(stored, dict) and stored.get("user") == user.pk:
        age = time.time() - float(stored.get("at", 0))
        staff_now = stored.get("state") == FREE and (user.is_staff or user.is_superuser)
        if (
            0 <= age < settings.TWO_FACTOR_RECHECK_SECONDS
            and not staff_now
            and stored.get("state") in {FREE, VERIFY, SETUP}
        ):
            return str(stored["state"])
    state = state_of(user)
    state_remember(request.session, user, state)
    return state


def session_verified(request: HttpRequest, device: Device) -> None:
    """Mark the session verified by ``device``, under a new session key (so
    a session id known before the code, e.g. planted, is worth nothing after)."""
    otp_login(request, device)
    request.session.cycle_key()
    state_remember(request.session, device.user, VERIFY)


# --- setting it up --------------------------------------------------------------------


def setup_key(session: SessionBase) -> str:
    """The secret being set up in this session (made the first time): it
    stays the same across reloads until confirmed or replaced."""
    key = session.get(SESSION_SETUP_KEY)
    if not isinstance(key, str) or not re.fullmatch(r"[0-9a-f]{40}", key):
        key = random_hex(20)
        session[SESSION_SETUP_KEY] = key
    return key


def secret_text(key: str) -> str:
    """The secret as authenticator apps take it typed in: base32, in groups of 4."""
    text = base64.b32encode(binascii.unhexlify(key)).decode().rstrip("=")
    return " ".join(text[i : i + 4] for i in range(0, len(text), 4))


def setup_uri(user: User, key: str) -> str:
    """The otpauth:// URI the QR code holds (issuer TWO_FACTOR_ISSUER)."""
    return str(TOTPDevice(user=user, key=key, name=TOTP_NAME).config_url)


def _digits(code: str) -> str:
    return re.sub(r"[\s-]", "", code)


@dataclass(frozen=True)
class Enabled:
    device: TOTPDevice
    recovery_codes: list[str]


@transaction.atomic
def two_factor_enable(*, user: User, key: str, code: str) -> Enabled:
    """Confirm the secret ``key`` with a current ``code`` from the app: only
    then is the device stored (confirmed, with the code's time step used up,
    so it cannot sign in again), with new recovery codes. A wrong code
    stores nothing."""
    if is_enabled(user):
        raise InvalidInput({"code": ["Two-factor sign-in is already on for your account."]})
    digits = _digits(code)
    if not re.fullmatch(rf"\d{{{TOTP_DIGITS}}}", digits):
        raise InvalidInput({"code": [f"Enter the {TOTP_DIGITS}-digit code your app shows."]})
    totp = TOTP(binascii.unhexlify(key), step=30, t0=0, digits=TOTP_DIGITS, drift=0)
    totp.time = time.time()
    if not totp.verify(int(digits), tolerance=1):
        raise InvalidInput(
            {
                "code": [
                    "That code does not match: check that the app shows approve's entry and that its clock is right."
                ]
            }
        )
    device = TOTPDevice.objects.create(
        user=user, name=TOTP_NAME, key=key, confirmed=True, last_t=totp.t(), drift=totp.drift
    )
    return Enabled(device=device, recovery_codes=recovery_codes_replace(user=user))


# --- recovery codes -------------------------------------------------------------------


def _recovery_normal(code: str) -> str:
    return _digits(code).lower()


def recovery_digests(code: str) -> list[str]:
    """The stored forms of a recovery code: its HMAC under SECRET_KEY (the
    first) and under each of SECRET_KEY_FALLBACKS, so that rotating the key
    keeps the codes working while the old key is a fallback."""
    normal = _recovery_normal(code)
    return [
        base64.urlsafe_b64encode(
            salted_hmac("accounts.otp.recovery-code", normal, secret=secret, algorithm="sha256").digest()
        ).decode()[:16]
        for secret in [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    ]


def _recovery_code_new() -> str:
    return "".join(secrets.choice(RECOVERY_ALPHABET) for _ in range(RECOVERY_CODE_LENGTH))


def recovery_code_shown(code: str) -> str:
    return "-".join(code[i : i + 4] for i in range(0, len(code), 4))


@transaction.atomic
def recovery_codes_replace(*, user: User) -> list[str]:
    """New recovery codes (shown once: returned, stored only as digests);
    the old ones stop working."""
    device = StaticDevice.objects.filter(user=user, name=RECOVERY_NAME).first()
    if device is None:
        device = StaticDevice.objects.create(user=user, name=RECOVERY_NAME, confirmed=True)
    device.token_set.all().delete()
    codes = [_recovery_code_new() for _ in range(RECOVERY_CODE_COUNT)]
    StaticToken.objects.bulk_create([StaticToken(device=device, token=recovery_digests(code)[0]) for code in codes])
    return [recovery_code_shown(code) for code in codes]


def recovery_codes_left(*, user: User) -> int:
    return StaticToken.objects.filter(device__user=user, device__confirmed=True).count()


# --- checking a code, with its lock-out -------------------------------------------------


class CodeRefused(Exception):
    """A code not accepted: ``message`` says why; ``locked`` when it is the
    lock-out (no code is checked until it lapses)."""

    def __init__(self, message: str, *, locked: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.locked = locked


WRONG_CODE = "That code is not right. Enter the current code from your app, or one of your recovery codes."
THROTTLED = "Wait a few seconds before trying another code."


def _lockout_keys(request: HttpRequest, user: User) -> tuple[str, str]:
    address = hashlib.sha256(lockout.client_address(request).encode()).hexdigest()
    return f"two-factor-failures:address:{address}", f"two-factor-failures:user:{user.pk}"


def code_refusal(request: HttpRequest, user: User) -> str | None:
    """Why no code of ``user`` is checked from this client now, or None.
    The cache unreachable: None (django-otp's own back-off, in the
    database, still slows guessing down)."""
    address_key, user_key = _lockout_keys(request, user)
    try:
        counts = cache.get_many([address_key, user_key])
    except CACHE_ERRORS as error:
        log_cache_unreachable("two-factor lock-out", error)
        return None
    minutes = max(1, settings.TWO_FACTOR_FAILURE_WINDOW // 60)
    if counts.get(user_key, 0) >= settings.TWO_FACTOR_FAILURE_LIMIT:
        return (
            f"Too many wrong codes for this account: entering codes is locked for up to {minutes} minutes. "
            "If they were not yours, someone knows your password: change it once you are signed in."
        )
    if counts.get(address_key, 0) >= settings.TWO_FACTOR_FAILURE_ADDRESS_LIMIT:
        return f"Too many wrong codes from your address. Try again in {minutes} minutes."
    return None


def _code_failed(request: HttpRequest, user: User) -> None:
    try:
        for key in _lockout_keys(request, user):
            cache.add(key, 0, timeout=settings.TWO_FACTOR_FAILURE_WINDOW)
            cache.incr(key)
    except CACHE_ERRORS as error:
        log_cache_unreachable("two-factor failure count", error)


def _code_succeeded(request: HttpRequest, user: User) -> None:
    try:
        cache.delete(_lockout_keys(request, user)[1])
    except CACHE_ERRORS as error:
        log_cache_unreachable("two-factor failure reset", error)


def _totp_match(user: User, digits: str) -> Device | None:
    """The TOTP device that accepts ``digits`` (each time step once: django-otp's
    ``last_t``); locked for update, so two requests cannot both use one code."""
    for device in TOTPDevice.objects.select_for_update().filter(user=user, confirmed=True):
        allowed, _ = device.verify_is_allowed()
        if not allowed:
            raise CodeRefused(THROTTLED)
        if device.verify_token(digits):
            return device
    return None


def _recovery_match(user: User, code: str) -> Device | None:
    """The recovery-code device holding ``code``, which is used up."""
    digests = recovery_digests(code)
    for device in StaticDevice.objects.select_for_update().filter(user=user, confirmed=True):
        allowed, _ = device.verify_is_allowed()
        if not allowed:
            raise CodeRefused(THROTTLED)
        token = device.token_set.filter(token__in=digests).first()
        if token is not None:
            token.delete()
            device.throttle_reset(commit=False)
            device.set_last_used_timestamp(commit=False)
            device.save()
            return device
        device.throttle_increment(commit=True)
    return None


def code_verify(*, request: HttpRequest, user: User, code: str) -> Device:
    """The device that accepts ``code`` (a TOTP code or a recovery code),
    or ``CodeRefused``: locked out, throttled, or wrong (counted)."""
    refusal = code_refusal(request, user)
    if refusal is not None:
        raise CodeRefused(refusal, locked=True)
    text = _recovery_normal(code)
    if not text or len(text) > 64:
        raise CodeRefused(WRONG_CODE)
    with transaction.atomic():
        device = _totp_match(user, text) if re.fullmatch(rf"\d{{{TOTP_DIGITS}}}", text) else _recovery_match(user, text)
    if device is None:
        _code_failed(request, user)
        refusal = code_refusal(request, user)
        raise CodeRefused(refusal or WRONG_CODE, locked=refusal is not None)
    _code_succeeded(request, user)
    return device


# --- confirming a change: a current code or the password --------------------------------


def confirm_with_code_or_password(*, request: HttpRequest, user: User, code: str, password: str) -> None:
    """A change to the devices (new recovery codes, turning it off) needs a
    current code or the password, each under its own lock-out; raises
    ``InvalidInput`` naming the field."""
    if code.strip():
        try:
            code_verify(request=request, user=user, code=code)
        except CodeRefused as refused:
            raise InvalidInput({"code": [refused.message]}) from None
        return
    if not password:
        raise InvalidInput({"code": ["Enter a current code from your app, a recovery code, or your password."]})
    username = user.get_username()
    refusal = lockout.login_refusal(request, username)
    if refusal is not None:
        raise InvalidInput({"password": [refusal]})
    if not user.check_password(password):
        lockout.login_failed(request, username)
        raise InvalidInput({"password": ["That is not your password."]})
    lockout.login_succeeded(request, username)


def devices_delete(*, user: User) -> int:
    """Remove every device of ``user`` (any kind django-otp knows); how many."""
    removed = 0
    with transaction.atomic():
        for model in device_classes():
            removed += model.objects.filter(user=user).delete()[1].get(model._meta.label, 0)
    return removed


def two_factor_disable(*, request: HttpRequest, user: User, code: str, password: str) -> None:
    """Turn two-factor sign-in off for the signed-in user (refused when it is
    required), confirmed by a current code or the password. Not one
    transaction: a wrong code's count (django-otp's back-off) must stay."""
    if is_required(user):
        raise InvalidInput(
            {
                "code": [
                    "Your account must use two-factor sign-in: it cannot be turned off (an administrator can reset it)."
                ]
            }
        )
    if not is_enabled(user):
        raise InvalidInput({"code": ["Two-factor sign-in is not on for your account."]})
    confirm_with_code_or_password(request=request, user=user, code=code, password=password)
    devices_delete(user=user)
    request.session.pop(DEVICE_ID_SESSION_KEY, None)
    state_remember(request.session, user, FREE)


def two_factor_reset(*, user: User) -> int:
    """An administrator's reset (someone lost their phone and their codes):
    every device of ``user`` goes; they sign in with their password and, if
    two-factor sign-in is required of them, set it up again at once."""
    return devices_delete(user=user)


def enabled_since(*, user: User) -> datetime | None:
    device = TOTPDevice.objects.filter(user=user, confirmed=True).order_by("created_at").first()
    return device.created_at if device is not None else None
