"""Self sign-up through the API (docs/accounts.md "Self sign-up"): ask for
the link by e-mail, then create the account with the link's token. Neither
needs credentials; both are throttled (the page's counters)."""

from django.contrib.auth.models import User
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workspace.api.schema import error
from workspace.api.views import validated

from .. import signup
from . import serializers as s

CLOSED = error(
    "Sign-up is not open on this site (closed, invitation only, single sign-on only), or no longer to this "
    "address: code `signup_closed`, the detail says who to ask."
)
THROTTLED = error("Too many sign-up requests from this client, or for this address: try after `Retry-After` seconds.")


def _closed(refusal: signup.SignUpClosed) -> exceptions.PermissionDenied:
    return exceptions.PermissionDenied(refusal.message, code="signup_closed")


def _site(request: Request) -> str:
    return request.build_absolute_uri("/").rstrip("/")


class SignUpRequestView(APIView):
    """Ask for a sign-up link: mailed to the address if it may sign up. The
    answer is the same (202, same body) whether or not an account has the
    address; such an address is mailed that it has one instead."""

    schema_tag = "accounts"
    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Ask for a sign-up link by e-mail",
        request=s.SignUpRequestSerializer,
        responses={202: s.SignUpSentSerializer, 403: CLOSED, 429: THROTTLED},
        auth=[],
    )
    def post(self, request: Request) -> Response:
        data = validated(s.SignUpRequestSerializer, request.data)
        try:
            email = signup.signup_request(request=request, email=data["email"], site=_site(request))
        except signup.SignUpClosed as refusal:
            raise _closed(refusal) from None
        return Response(
            {"detail": signup.SENT, "email": email},
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": request.build_absolute_uri(reverse("api:signup-complete"))},
        )


class SignUpCompleteView(APIView):
    """Create the account with the mailed link's token: its address is
    confirmed. A used, expired or unknown token is refused naming ``token``;
    ``Location`` is the token request, where the new account gets an API
    token."""

    schema_tag = "accounts"
    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Create your account with the mailed sign-up token",
        request=s.SignUpCompleteSerializer,
        responses={201: s.SignedUpSerializer, 403: CLOSED, 429: THROTTLED},
        auth=[],
    )
    def post(self, request: Request) -> Response:
        data = validated(s.SignUpCompleteSerializer, request.data)
        signup.throttle_client(request)
        try:
            user = signup.signup_complete(
                token=data["token"], username=data["username"], password=data["password"], name=data.get("name", "")
            )
        except signup.SignUpClosed as refusal:
            raise _closed(refusal) from None
        return Response(
            _signed_up(user),
            status=status.HTTP_201_CREATED,
            headers={"Location": request.build_absolute_uri(reverse("api:token-create"))},
        )


def _signed_up(user: User) -> dict[str, object]:
    return {"username": user.username, "email": user.email, "name": user.get_full_name(), "email_confirmed": True}
