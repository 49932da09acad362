import hashlib
from datetime import timedelta

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from workspace import selectors, services
from workspace.models import ApiToken


class ApiTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>`` against the digests of ``ApiToken``;
    an expired token is refused (401) and says so."""

    model = ApiToken

    def authenticate_credentials(self, key: str) -> tuple:
        digest = hashlib.sha256(key.encode()).hexdigest()
        token = selectors.api_token_by_digest(digest=digest)
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        if token.expires_at <= now:
            raise exceptions.AuthenticationFailed(
                f"Token expired at {token.expires_at:%Y-%m-%d %H:%M} UTC; create a new one."
            )
        # Record use at most once a minute: a write on every request is waste.
        if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
            services.api_token_record_use(token=token, at=now)
        return token.user, token
