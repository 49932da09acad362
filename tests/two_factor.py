"""Two-factor sign-in in tests: enrol a user (a confirmed TOTP device, as
the set-up page makes it), codes from a real generator (pyotp), and a test
client whose session is verified through the code page, for staff users
(who must use two-factor sign-in) in any test."""

import base64
import binascii
import time

import pyotp
from django.test import Client
from django.urls import reverse
from django_otp.plugins.otp_totp.models import TOTPDevice

from accounts.otp import services


def secret_of(device: TOTPDevice) -> str:
    """django-otp stores the key in hex; authenticator apps (and pyotp) take base32."""
    return base64.b32encode(binascii.unhexlify(device.key)).decode()


def enrol(user) -> str:
    """Give ``user`` a confirmed TOTP device and recovery codes; its base32 secret."""
    device = TOTPDevice.objects.create(user=user, name=services.TOTP_NAME, confirmed=True)
    services.recovery_codes_replace(user=user)
    return secret_of(device)


def current_code(secret: str) -> str:
    return pyotp.TOTP(secret).now()


def wrong_code(secret: str) -> str:
    """A 6-digit code that no time step within django-otp's tolerance accepts."""
    totp = pyotp.TOTP(secret)
    near = {totp.at(time.time(), counter_offset=offset) for offset in (-2, -1, 0, 1, 2)}
    candidate = 123456
    while f"{candidate:06d}" in near:
        candidate += 1
    return f"{candidate:06d}"


def verified_client(user, client: Client | None = None) -> Client:
    """A client signed in as ``user`` whose session is verified with a real
    code (the user is enrolled first if they have no device)."""
    client = client or Client()
    device = TOTPDevice.objects.filter(user=user, confirmed=True).first()
    if device is None:
        secret = enrol(user)
    else:
        secret = secret_of(device)
        # A second verified client in the same 30 seconds: the code would be
        # a replay (refused, as it must be); start the device's steps afresh.
        TOTPDevice.objects.filter(pk=device.pk).update(last_t=-1)
    client.force_login(user)
    response = client.post(reverse("two_factor_verify"), {"code": current_code(secret)})
    assert response.status_code == 302, response.content.decode()[:2000]
    return client
