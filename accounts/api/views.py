"""Self sign-up through the API (docs/accounts.md "Self sign-up"): the
policy, ask for the link by e-mail, then create the account with the link's
token (none needs credentials; the two writes are throttled, the page's
counters); and your account."""

from django.conf import settings
from django.contrib.auth.models import User
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workspace import selectors as workspace_selectors
from workspace.api.schema import error
from workspace.api.views import signed_in, validated

from .. import signup
from ..models import SitePolicy
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
        summary="Get who may sign up here",
        responses={200: s.SignUpPolicySerializer, 406: error("No representation matches the `Accept` header.")},
        auth=[],
    )
    def get(self, request: Request) -> Response:
        """The site's sign-up policy: whether sign-up is open here, to which
        e-mail domains, and how long a mailed link works."""
        policy = SitePolicy.current()
        return Response(
            {
                "signup": policy.signup,
                "open": signup.policy_refusal(policy) is None,
                "domains": policy.domains() if policy.signup == SitePolicy.SignUp.DOMAINS else [],
                "link_hours": settings.SIGNUP_LINK_HOURS,
            }
        )

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
            {"detail": signup.SENT, "email": email, "link_hours": settings.SIGNUP_LINK_HOURS},
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": request.build_absolute_uri(reverse("api:signup"))},
        )


class SignUpCompleteView(APIView):
    """Create the account with the mailed link's token: its address is
    confirmed. A used, expired or unknown token is refused naming ``token``;
    ``Location`` is the account (``GET /api/v1/accounts/me/``, once signed in
    or with a token)."""

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
            headers={"Location": request.build_absolute_uri(reverse("api:account-me"))},
        )


def _signed_up(user: User) -> dict[str, object]:
    return {"username": user.username, "email": user.email, "name": user.get_full_name(), "email_confirmed": True}


class MeView(APIView):
    """Your account: its username, e-mail address, display name, and
    whether that address is confirmed (its owner followed a link mailed to it)."""

    schema_tag = "accounts"

    @extend_schema(summary="Get your account", responses={200: s.SignedUpSerializer})
    def get(self, request: Request) -> Response:
        user = signed_in(request)
        confirmation = workspace_selectors.email_confirmation_get(user=user)
        confirmed = bool(user.email) and confirmation is not None and confirmation.email == user.email
        return Response({**_signed_up(user), "email_confirmed": confirmed})
