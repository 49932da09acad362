"""Accounts: users named in studies and bundles, personal API tokens."""

import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser

from ..errors import InvalidInput
from ..models import ApiToken
from ._checks import text as _text

User = get_user_model()


def user_get_or_create(*, username: str, field: str = "username") -> AbstractBaseUser:
    """The account for ``username``; a new one has no usable password (an
    invitation or an administrator gives it one)."""
    if not isinstance(username, str) or not username.strip():
        raise InvalidInput({field: "must be a username"})
    username = username.strip()
    try:
        User.username_validator(username)
    except Exception:
        raise InvalidInput({field: f"{username!r} is not a valid username (letters, digits and @.+-_ only)"}) from None
    if len(username) > 150:
        raise InvalidInput({field: "usernames are at most 150 characters"})
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User(username=username)
        user.set_unusable_password()
        user.save()
    return user


def api_token_create(*, user: AbstractBaseUser, name: str = "") -> tuple[ApiToken, str]:
    """A new token for ``user``: returns ``(token, key)``; the key is not
    stored and cannot be shown again."""
    key = secrets.token_hex(20)
    token = ApiToken.objects.create(
        user=user,
        name=_text(name, "name", max_length=100, required=False),
        digest=hashlib.sha256(key.encode()).hexdigest(),
        prefix=key[:8],
    )
    return token, key


def api_token_revoke(*, token: ApiToken) -> None:
    token.delete()
