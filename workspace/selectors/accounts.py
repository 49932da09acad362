"""A user's API tokens (the key itself is never stored, only its digest)."""

from django.db.models import QuerySet

from ..models import ApiToken, EmailConfirmation
from ._queries import User


def api_token_list(*, user: User) -> QuerySet[ApiToken]:
    """The user's tokens, expired ones included (until revoked)."""
    return ApiToken.objects.filter(user=user.pk)


def api_token_get(*, user: User, token_id: int) -> ApiToken:
    """One of the user's tokens (``ApiToken.DoesNotExist`` if not theirs)."""
    return api_token_list(user=user).get(pk=token_id)


def api_token_by_digest(*, digest: str) -> ApiToken | None:
    """The token whose key has this SHA-256 ``digest``, with its user: one
    query (``None`` if no token has it)."""
    return ApiToken.objects.select_related("user").filter(digest=digest).first()


def email_confirmation_get(*, user: User) -> EmailConfirmation | None:
    """When the user last confirmed an address, and which (one query)."""
    return EmailConfirmation.objects.filter(user=user.pk).first()
