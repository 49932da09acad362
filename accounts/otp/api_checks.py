"""The API's token endpoint (``POST /api/v1/tokens/``, username and
password) and two-factor sign-in: a password alone must not get a token
that a code would have been needed for on the site."""

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest
from rest_framework import exceptions

from workspace.api.exceptions import ThrottledFor

from . import services


def api_token_second_factor(*, request: HttpRequest, user: User, code: str) -> None:
    """Refuse (a DRF error) a token to ``user``, who gave the right password,
    unless two-factor sign-in is off for them or ``code`` is a current code
    (or a recovery code). A user who must set it up gets none until then."""
    state = services.state_of(user)
    if state == services.FREE:
        return
    if state == services.SETUP:
        raise exceptions.PermissionDenied(
            "Your account must set up two-factor sign-in before it can create API tokens: sign in on the site, "
            "which asks you to set it up."
        )
    if not code.strip():
        raise exceptions.ValidationError(
            {
                "otp_code": [
                    "Your account uses two-factor sign-in: send a current code from your app (or a recovery code) "
                    "as otp_code."
                ]
            }
        )
    try:
        services.code_verify(request=request, user=user, code=code)
    except services.CodeRefused as refused:
        if refused.locked:
            raise ThrottledFor(refused.message, settings.TWO_FACTOR_FAILURE_WINDOW) from None
        raise exceptions.ValidationError({"otp_code": [refused.message]}) from None
