"""The single sign-on pages: start the sign-in at the provider, and its
callback (docs/accounts.md "Single sign-on"). Every refusal comes back to
the sign-in page with a message saying why."""

from typing import Any

import requests
from django.contrib import messages
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from . import oidc
from .services import SignInRefused

UNREACHABLE = "The identity provider could not be reached; try again later, or sign in another way."


def _back_to_sign_in(request: HttpRequest, message: str) -> HttpResponse:
    messages.error(request, message)
    return HttpResponseRedirect(reverse("login"))


class SignInStart(OIDCAuthenticationRequestView):
    """Redirects to the provider's authorization endpoint: code flow, with a
    fresh state, nonce and PKCE verifier kept in the session; ``next`` kept
    only if it points to this site."""

    get_settings = staticmethod(oidc.setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        View.__init__(self, *args, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc.setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
            self.OIDC_RP_CLIENT_ID = oidc.setting("OIDC_RP_CLIENT_ID")
        except SignInRefused as refusal:
            return _back_to_sign_in(request, refusal.message)
        except requests.RequestException:
            return _back_to_sign_in(request, UNREACHABLE)
        response: HttpResponse = super().get(request)
        return response


class SignInCallback(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back. An unknown or already
    used ``state`` (a replayed callback), an error from the provider, and
    every failed check come back to the sign-in page with a message."""

    get_settings = staticmethod(oidc.setting)

    @property
    def failure_url(self) -> str:
        return reverse("login")

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            raise Http404("Single sign-on is not configured.")
        if request.GET.get("error"):
            super().get(request)  # forgets the state
            reason = request.GET.get("error_description") or request.GET["error"]
            return _back_to_sign_in(request, f"The identity provider did not sign you in: {reason[:200]}")
        state = request.GET.get("state")
        if not state or "code" not in request.GET or state not in request.session.get("oidc_states", {}):
            return _back_to_sign_in(
                request,
                "This sign-in answer is unknown or was already used (it may have been replayed, or your session "
                "ended). Sign in again.",
            )
        try:
            response: HttpResponse = super().get(request)
        except SignInRefused as refusal:
            return _back_to_sign_in(request, refusal.message)
        except (requests.RequestException, SuspiciousOperation, ValueError):
            return _back_to_sign_in(request, UNREACHABLE)
        if not request.user.is_authenticated:
            return _back_to_sign_in(request, "Your account here is deactivated; ask an administrator.")
        return response
