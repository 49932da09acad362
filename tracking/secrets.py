"""Tracking tokens encrypted at rest.

A token is sealed with Fernet (``cryptography``: AES-128-CBC and an
HMAC-SHA256 over it, so a token altered in the database is refused rather
than decrypted into garbage) under a key derived from ``SECRET_KEY`` by
HKDF-SHA256 with this module's own label, so the key is never the secret
itself and is used for nothing else. ``django.core.signing`` only signs:
whoever reads the database would read the token. A token sealed under a key
in ``SECRET_KEY_FALLBACKS`` still opens after the key is rotated. Another
use (the webhooks' signing secrets) passes its own ``info`` label, and so
gets a key of its own.
"""

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_SALT = b"approve.tracking.secrets"
_INFO = b"mlflow tracking token v1"


def _fernet(secret: str, info: bytes) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=info).derive(secret.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def _keys(info: bytes) -> MultiFernet:
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_fernet(secret, info) for secret in secrets])


def seal(token: str, *, info: bytes = _INFO) -> str:
    """``token`` encrypted; empty for no token. ``info``: the HKDF label of
    the key's one use (another app's secrets get a key of their own, e.g.
    the webhooks' signing secrets)."""
    return _keys(info).encrypt(token.encode()).decode() if token else ""


def unseal(sealed: str, *, info: bytes = _INFO) -> str:
    """The token ``seal`` encrypted; empty for none. ValueError when it was
    altered or sealed under a key no longer configured."""
    if not sealed:
        return ""
    try:
        return _keys(info).decrypt(sealed.encode()).decode()
    except InvalidToken:
        raise ValueError("the stored tracking token cannot be decrypted (SECRET_KEY changed?)") from None
