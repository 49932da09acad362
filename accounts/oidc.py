"""Single sign-on with OpenID Connect, on mozilla-django-oidc
(docs/accounts.md "Single sign-on"): the provider's endpoints by discovery,
the ID token validated here in full, the account found by ``services``,
provider logout, and the middleware that turns password sign-in off."""

import hmac
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import absolutify, import_from_settings

from .services import SignInRefused, oidc_user_sign_in

# The settings read from the provider's discovery document when unset.
_DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_END_SESSION_ENDPOINT": "end_session_endpoint",
}
_discovery: dict[str, dict[str, Any]] = {}
_discovery_lock = threading.Lock()


def enabled() -> bool:
    """Single sign-on is on: an issuer is configured."""
    return bool(settings.OIDC_ISSUER)


def discovery() -> dict[str, Any]:
    """The issuer's ``/.well-known/openid-configuration``, fetched once per
    process (and per issuer); its ``issuer`` must be the configured one."""
    issuer = settings.OIDC_ISSUER
    with _discovery_lock:
        if issuer not in _discovery:
            response = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=settings.OIDC_TIMEOUT)
            response.raise_for_status()
            document = response.json()
            if not isinstance(document, dict) or document.get("issuer") != issuer:
                raise SignInRefused(
                    "The identity provider's configuration names another issuer; single sign-on is unavailable."
                )
            _discovery[issuer] = document
        return _discovery[issuer]


def discovery_forget() -> None:
    """Drop the fetched discovery documents (tests; a provider that moved)."""
    with _discovery_lock:
        _discovery.clear()


def setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, the provider's endpoints discovered
    when not set explicitly."""
    if attr in _DISCOVERED and not getattr(settings, attr, ""):
        value = discovery().get(_DISCOVERED[attr])
        if value:
            return value
        if default:
            return default[0]
        raise SignInRefused(f"The identity provider does not publish its {_DISCOVERED[attr]}.")
    return import_from_settings(attr, *default)


def _refusal_for(error: jwt.PyJWTError) -> SignInRefused:
    provider = settings.OIDC_PROVIDER_NAME
    if isinstance(error, jwt.ExpiredSignatureError):
        return SignInRefused(f"The sign-in from {provider} had expired (its ID token is out of date). Try again.")
    if isinstance(error, jwt.InvalidAudienceError):
        return SignInRefused(
            f"The answer from {provider} was meant for another application (wrong audience); you were not signed in."
        )
    if isinstance(error, jwt.InvalidIssuerError):
        return SignInRefused(f"The answer did not come from {provider} (wrong issuer); you were not signed in.")
    if isinstance(error, jwt.ImmatureSignatureError):
        return SignInRefused(f"The answer from {provider} is dated in the future; check the clocks, then try again.")
    return SignInRefused(f"The answer from {provider} failed its checks ({error}); you were not signed in.")


class Backend(OIDCAuthenticationBackend):
    """Signs in whom the provider's code (exchanged with PKCE) names, after
    validating the ID token here: RS256 signature by a key of the provider's
    JWKS, ``iss``, ``aud`` containing our client id (``azp`` ours when there
    are several audiences, or whenever present), ``exp`` and ``iat`` with
    ``OIDC_LEEWAY`` seconds, the nonce; the userinfo must name the same
    ``sub``. A refusal raises SignInRefused, which the callback shows."""

    get_settings = staticmethod(setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.UserModel = User
        if enabled():
            super().__init__(*args, **kwargs)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        if not enabled() or request is None or "code" not in request.GET:
            return None
        user: User | None = super().authenticate(request, **kwargs)
        return user

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            token: dict[str, Any] = super().get_token(payload)
        except requests.HTTPError as error:
            raise SignInRefused(
                f"{settings.OIDC_PROVIDER_NAME} refused to complete the sign-in (the code was used already, or "
                "expired). Try again."
            ) from error
        return token

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        if not isinstance(token, str) or not token:
            raise SignInRefused("The identity provider sent no ID token; you were not signed in.")
        client_id = settings.OIDC_RP_CLIENT_ID
        try:
            key = self.retrieve_matching_jwk(token)
            payload: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=client_id,
                issuer=settings.OIDC_ISSUER,
                leeway=settings.OIDC_LEEWAY,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.PyJWTError as error:
            raise _refusal_for(error) from error
        except Exception as error:  # no matching key, an unreachable JWKS
            raise SignInRefused(f"The ID token's signature could not be checked ({error}).") from error
        audiences = payload["aud"] if isinstance(payload["aud"], list) else [payload["aud"]]
        azp = payload.get("azp")
        if (len(audiences) > 1 or azp is not None) and azp != client_id:
            raise SignInRefused(
                f"The answer from {settings.OIDC_PROVIDER_NAME} was meant for another application "
                "(wrong authorized party); you were not signed in."
            )
        nonce = kwargs.get("nonce")
        if not isinstance(nonce, str) or not hmac.compare_digest(nonce, str(payload.get("nonce", ""))):
            raise SignInRefused("The sign-in answer does not match the request (nonce); you were not signed in.")
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> User | None:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload["sub"]:
            raise SignInRefused("The identity provider's user information names someone else; not signed in.")
        return oidc_user_sign_in(issuer=settings.OIDC_ISSUER, claims={**payload, **userinfo})


def provider_logout_url(request: HttpRequest) -> str:
    """Where signing out sends the browser: the provider's
    end_session_endpoint (with id_token_hint, client_id and our sign-in
    page as post_logout_redirect_uri) when it has one, else our sign-in
    page. Called before the local session ends (OIDC_OP_LOGOUT_URL_METHOD)."""
    back = absolutify(request, reverse(settings.LOGOUT_REDIRECT_URL))
    try:
        end_session = setting("OIDC_OP_END_SESSION_ENDPOINT", "")
    except (SignInRefused, requests.RequestException):
        end_session = ""
    if not end_session:
        return reverse(settings.LOGOUT_REDIRECT_URL)
    query = {"client_id": settings.OIDC_RP_CLIENT_ID, "post_logout_redirect_uri": back}
    id_token = request.session.get("oidc_id_token")
    if id_token:
        query["id_token_hint"] = id_token
    return f"{end_session}?{urlencode(query)}"


def sign_in_context(request: HttpRequest) -> dict[str, Any]:
    """For the sign-in page: the SSO button (its label and URL, ``next``
    passed on), and whether the password form is shown."""
    sso = None
    if enabled():
        url = reverse("oidc_authentication_init")
        next_url = request.GET.get("next", "")
        sso = {
            "name": settings.OIDC_PROVIDER_NAME,
            "url": f"{url}?{urlencode({'next': next_url})}" if next_url else url,
        }
    return {"sso_sign_in": sso, "password_sign_in": settings.PASSWORD_SIGN_IN}


class SignInMiddleware:
    """Signing out of an SSO session also ends the provider's (when it says
    how); with PASSWORD_SIGN_IN=false, the password form's POST is refused
    (403, the sign-in page with a message) and the password-reset pages are
    gone (404). API requests are untouched."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self._sso_logout(request):
            target = provider_logout_url(request)
            auth.logout(request)
            response = HttpResponse(status=302)
            response["Location"] = target
            return response
        if not settings.PASSWORD_SIGN_IN:
            refused = self._password_refused(request)
            if refused is not None:
                return refused
        return self.get_response(request)

    @staticmethod
    def _sso_logout(request: HttpRequest) -> bool:
        return bool(
            request.method == "POST"
            and request.path == reverse("logout")
            and enabled()
            and request.user.is_authenticated
            and request.session.get("oidc_id_token")
        )

    def _password_refused(self, request: HttpRequest) -> HttpResponse | None:
        if request.path == reverse("login") and request.method == "POST":
            messages.error(
                request,
                f"Password sign-in is turned off on this site: sign in with {settings.OIDC_PROVIDER_NAME}.",
            )
            return render(request, "registration/login.html", {"next": request.POST.get("next", "")}, status=403)
        if request.path.startswith(reverse("password_reset")):
            raise Http404("Password sign-in is turned off.")
        return None
