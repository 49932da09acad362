"""The second step of every sign-in: a signed-in session whose user has a
confirmed device (or must set one up) reaches only the code page (or the
set-up page), logging out and the static files until it is verified.

It acts on the session, not on how the session began, so every way of
signing in goes through it: the password form, single sign-on, an
invitation link that signs the invitee in, the admin's own login form.
API requests that carry ``Authorization: Token ...`` are left to the API's
token authentication (tokens never ask for a code); an API request
authenticated by an unverified session is refused with 403 in the API's
error envelope rather than redirected.
"""

from collections.abc import Callable
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse

from workspace.api.exceptions import envelope

from . import services

API_PREFIX = "/api/"
API_REFUSAL = (
    "This session has not finished two-factor sign-in: enter your code on the site's code page "
    "({verify}), or authenticate with an API token (Authorization: Token <key>)."
)
API_SETUP_REFUSAL = (
    "Your account must set up two-factor sign-in before this session can use the API: set it up on the site "
    "({setup}), or authenticate with an API token (Authorization: Token <key>)."
)


def _token_authorization(request: HttpRequest) -> bool:
    """The request authenticates with an API token (the API's token
    authentication goes first and never falls back to the session)."""
    words = request.META.get("HTTP_AUTHORIZATION", "").split()
    return bool(words) and words[0].lower() == "token"


class TwoFactorMiddleware:
    """After ``django_otp.middleware.OTPMiddleware`` (which tells whether
    the session was verified with a code)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if path.startswith(f"/{settings.STATIC_URL.lstrip('/')}") or path == "/health/":
            return self.get_response(request)
        if not request.user.is_authenticated:
            return self.get_response(request)
        refusal = self.refusal(request, request.user)
        return refusal if refusal is not None else self.get_response(request)

    def refusal(self, request: HttpRequest, user: User) -> HttpResponse | None:
        state = services.session_state(request, user)
        if state == services.FREE:
            return None
        is_verified = getattr(user, "is_verified", None)
        if state == services.VERIFY and is_verified is not None and is_verified():
            return None
        target = reverse("two_factor_verify") if state == services.VERIFY else reverse("two_factor")
        # reverse() includes the script prefix, as request.path does.
        if request.path in {target, reverse("logout")}:
            return None
        if request.path_info.startswith(API_PREFIX):
            if _token_authorization(request):
                return None
            message = (
                API_REFUSAL.format(verify=target)
                if state == services.VERIFY
                else API_SETUP_REFUSAL.format(setup=target)
            )
            return JsonResponse(envelope("two_factor_required", message), status=403)
        if request.method in {"GET", "HEAD"}:
            target += "?" + urlencode({"next": request.get_full_path()})
        return HttpResponseRedirect(target)
