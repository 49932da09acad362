"""Invitations (workspace.invitations) over the API.

- the designer: ``GET, POST studies/{id}/invitations/`` (a username, or ``{}``
  for a link whose key is returned once) and ``DELETE .../invitations/{pk}/``;
  adding someone else at ``POST studies/{id}/members/`` invites them too;
- the invited person: ``GET invitations/`` (with the inputs imported in their
  name, if any), ``POST invitations/{id}/accept/`` and ``.../decline/``, and
  ``POST invitations/accept/`` with a link's ``{"key"}``.

Answers about a username never depend on whether the account exists.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workspace import invitations
from workspace.models import Invitation

from . import invitation_serializers as inv
from .idempotency import idempotent
from .schema import error
from .views import PaginatedListMixin, StudyScoped, location, signed_in, validated

CONFLICT = error(
    "The invitation can no longer be answered, or the study's phase does not allow it; the detail says why."
)


def _only(request: Request, allowed: set[str]) -> None:
    """Unknown fields are refused, not ignored."""
    if isinstance(request.data, dict):
        unknown = sorted(set(request.data) - allowed)
        if unknown:
            raise exceptions.ValidationError({name: ["is not a field of this request"] for name in unknown})


class StudyInvitationListView(StudyScoped, PaginatedListMixin, APIView):
    schema_tag = "invitations"

    @extend_schema(summary="List the study's invitations", responses=inv.InvitationSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """The study's invitations, newest first (designer)."""
        self.require_designer("see the invitations")
        return self.paginated(invitations.invitation_list(study=self.study()), inv.InvitationSerializer)

    @extend_schema(
        summary="Invite an expert",
        request=inv.InvitationWriteSerializer,
        responses={201: inv.NewInvitationSerializer},
    )
    @idempotent
    def post(self, request: Request, study_id: int) -> Response:
        """Invite a username; mail a link to an ``email`` address (its key is
        only in that mail, and the account that confirmed the address sees
        the invitation among its own); or, with ``{}`` (or ``{"kind":
        "link"}``), create a link invitation whose ``key`` is shown in this
        answer only (draft phase). An empty username is refused. The answer
        is the same whether or not an account of that name or address
        exists."""
        self.require_designer("invite experts")
        _only(request, {"username", "email", "kind"})
        data = validated(inv.InvitationWriteSerializer, request.data)
        invitation, key = invitations.invitation_create(
            study=self.study(), created_by=request.user, username=data.get("username"), email=data.get("email")
        )
        return Response(
            {"key": key, **inv.InvitationSerializer(invitation).data},
            status=status.HTTP_201_CREATED,
            headers=location(request, "study-invitation-detail", study_id=study_id, pk=invitation.pk),
        )


class StudyInvitationDetailView(StudyScoped, APIView):
    schema_tag = "invitations"

    @extend_schema(
        summary="Get one of the study's invitations and its status (designer)", responses=inv.InvitationSerializer
    )
    def get(self, request: Request, study_id: int, pk: int) -> Response:
        """One of the study's invitations and its status (designer; a link
        invitation's key is never shown again)."""
        self.require_designer("see the invitations")
        invitation = invitations.invitation_list(study=self.study()).filter(pk=pk).first()
        if invitation is None:
            raise exceptions.NotFound("No such invitation.")
        return Response(inv.InvitationSerializer(invitation).data)

    @extend_schema(summary="Revoke a pending invitation", responses={204: None})
    def delete(self, request: Request, study_id: int, pk: int) -> Response:
        """Revoke a pending invitation (designer, any phase); a pending
        membership it points at goes with the inputs imported for it.
        409 once it has been answered."""
        self.require_designer("revoke invitations")
        invitation = invitations.invitation_list(study=self.study()).filter(pk=pk).first()
        if invitation is None:
            raise exceptions.NotFound("No such invitation.")
        invitations.invitation_revoke(invitation=invitation)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MyInvitationListView(PaginatedListMixin, APIView):
    schema_tag = "invitations"

    @extend_schema(summary="List the invitations addressed to you", responses=inv.MyInvitationSerializer(many=True))
    def get(self, request: Request) -> Response:
        """Pending invitations addressed to you: the study, who invited you,
        until when, and the inputs someone imported in your name, if any."""
        return self.paginated(invitations.invitation_list_for_user(user=signed_in(request)), inv.MyInvitationSerializer)


class MyInvitationScoped(APIView):
    schema_tag = "invitations"

    def invitation(self) -> Invitation:
        invitation = invitations.invitation_get_for_user(user=signed_in(self.request), pk=self.kwargs["invitation_id"])
        if invitation is None:
            raise exceptions.NotFound("No such invitation.")
        return invitation


class MyInvitationAcceptView(MyInvitationScoped, APIView):
    @extend_schema(
        summary="Accept an invitation",
        request=inv.AcceptSerializer,
        responses={200: inv.AcceptedSerializer, 409: CONFLICT},
    )
    def post(self, request: Request, invitation_id: int) -> Response:
        """Accept: you become an expert of the study (a new membership only
        while it is in draft, 409 otherwise). When someone imported inputs in
        your name, ``{"confirm_inputs": true}`` confirms them (any phase)."""
        invitation = self.invitation()
        _only(request, {"confirm_inputs"})
        data = validated(inv.AcceptSerializer, request.data)
        membership = invitations.invitation_accept(
            invitation=invitation, user=signed_in(request), confirm_inputs=data["confirm_inputs"]
        )
        return Response(inv.AcceptedSerializer(membership).data)


class MyInvitationDeclineView(MyInvitationScoped, APIView):
    @extend_schema(summary="Decline an invitation", request=None, responses={204: None, 409: CONFLICT})
    def post(self, request: Request, invitation_id: int) -> Response:
        """Decline: nothing of yours stays in the study (inputs imported in
        your name are deleted)."""
        invitations.invitation_decline(invitation=self.invitation())
        return Response(status=status.HTTP_204_NO_CONTENT)


class LinkAcceptView(APIView):
    schema_tag = "invitations"

    @extend_schema(
        summary="Accept a link invitation with its key",
        operation_id="v1_invitations_accept_link",
        request=inv.AcceptLinkSerializer,
        responses={200: inv.AcceptedSerializer, 409: CONFLICT},
    )
    def post(self, request: Request) -> Response:
        """Accept a link invitation with its key: you become an expert of the
        study (draft phase). A used, revoked, expired or unknown key is
        refused naming ``key``."""
        _only(request, {"key"})
        data = validated(inv.AcceptLinkSerializer, request.data)
        membership = invitations.invitation_accept_link(key=data["key"], user=signed_in(request))
        return Response(inv.AcceptedSerializer(membership).data)
