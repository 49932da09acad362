"""Shapes of the invitation payloads (workspace.api.invitations). A module
of their own so the study views (members, import) use them too without an
import cycle."""

from collections.abc import Mapping
from typing import Any, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import ReturnList

from workspace import invitations, limits
from workspace.models import Invitation, Study

from . import serializers as s

STATUSES = [*Invitation.Status.values, "expired"]
# ``email``: a link whose key was mailed to ``email`` (issue 32).
KINDS = ["username", "link", "email"]


def _status(invitation: Invitation) -> str:
    return "expired" if invitation.is_expired else invitation.status


class InvitationSerializer(serializers.ModelSerializer):
    """An invitation as its study's designer sees it."""

    kind = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField()
    created_by = s.StrictCharField(source="created_by.username", allow_null=True, default=None)
    accepted_by = s.StrictCharField(source="accepted_by.username", allow_null=True, default=None)
    inputs_imported = serializers.SerializerMethodField()
    email = serializers.SerializerMethodField()

    class Meta:
        model = Invitation
        fields = [
            "id",
            "kind",
            "username",
            "email",
            "status",
            "created_by",
            "created_at",
            "expires_at",
            "decided_at",
            "accepted_by",
            "inputs_imported",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=KINDS))
    def get_kind(self, invitation: Invitation) -> str:
        if invitation.email:
            return "email"
        return "link" if invitation.is_link else "username"

    @extend_schema_field(serializers.ChoiceField(choices=STATUSES))
    def get_status(self, invitation: Invitation) -> str:
        return _status(invitation)

    @extend_schema_field(serializers.EmailField(allow_null=True))
    def get_email(self, invitation: Invitation) -> str | None:
        """The address the link was mailed to (kind ``email``), else null."""
        return invitation.email or None

    def get_inputs_imported(self, invitation: Invitation) -> bool:
        """Whether it points at a membership whose inputs someone imported in the person's name."""
        return invitation.membership is not None and invitation.membership.inputs_imported_by_id is not None


class NewInvitationSerializer(InvitationSerializer):
    key = s.StrictCharField(
        allow_null=True,
        help_text="a link invitation's key: shown once (null for an invitation by username, and for one addressed "
        "to an e-mail address: its key is only in the mail to that address)",
    )

    class Meta(InvitationSerializer.Meta):
        fields = ["key", *InvitationSerializer.Meta.fields]
        read_only_fields = fields


class InvitationWriteSerializer(serializers.Serializer):
    """``{"username": ...}`` invites a username, ``{"email": ...}`` mails a
    link to an address, ``{}`` or ``{"kind": "link"}`` makes a link
    invitation. An empty username is refused (it used to make a link
    invitation; issue 17, finding 8). The API reads JSON only, so the
    form-body cases of that finding now answer 415."""

    kind = serializers.ChoiceField(
        choices=KINDS,
        required=False,
        help_text="`username` (the default when a username is given), `email` (the default when an address is "
        "given) or `link` (the default without either)",
    )
    username = s.StrictCharField(
        max_length=limits.USERNAME_MAX_LENGTH,
        required=False,
        help_text="whom to invite; leave out for a link invitation",
    )
    email = s.StrictCharField(
        max_length=254,
        required=False,
        help_text="the address to mail the invitation link to (the account that confirmed it sees the invitation "
        "too); leave out otherwise",
    )

    def to_internal_value(self, data: object) -> dict[str, Any]:
        # An empty username is not a link invitation: refused, with what to do instead.
        if isinstance(data, Mapping) and "username" in data and data["username"] == "":
            raise serializers.ValidationError(
                {"username": ["must not be empty: give a username, or leave it out with kind=link for a link"]}
            )
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind, has_username, has_email = attrs.get("kind"), "username" in attrs, "email" in attrs
        if has_username and has_email:
            raise serializers.ValidationError({"email": ["give a username or an e-mail address, not both"]})
        if kind in ("link", "email") and has_username:
            what = "a link invitation" if kind == "link" else "an invitation by e-mail"
            raise serializers.ValidationError({"username": [f"{what} has no username: leave it out"]})
        if kind in ("link", "username") and has_email:
            what = "a link invitation" if kind == "link" else "an invitation by username"
            raise serializers.ValidationError({"email": [f"{what} has no e-mail address: leave it out"]})
        if kind == "username" and not has_username:
            raise serializers.ValidationError({"username": ["is required for an invitation of kind username"]})
        if kind == "email" and not has_email:
            raise serializers.ValidationError({"email": ["is required for an invitation of kind email"]})
        return {"kind": "username" if has_username else "email" if has_email else "link", **attrs}


class MemberInvitedSerializer(serializers.Serializer):
    invitation = InvitationSerializer()
    detail = s.StrictCharField()


def member_invited(invitation: Invitation) -> dict:
    """The answer to adding someone else: the same whether or not the account exists."""
    return {
        "invitation": InvitationSerializer(invitation).data,
        "detail": f"{invitation.username} is invited to be an expert of this study and becomes one by accepting.",
    }


class ImportedStudySerializer(s.StudyDetailSerializer):
    """The imported study; the context's ``imported`` (``bundles.Imported``)
    says what the import left out."""

    invitations = serializers.SerializerMethodField()
    inputs_left_out = serializers.SerializerMethodField()
    notes = serializers.SerializerMethodField()

    class Meta(s.StudyDetailSerializer.Meta):
        fields = [*s.StudyDetailSerializer.Meta.fields, "invitations", "inputs_left_out", "notes"]
        read_only_fields = fields

    def get_inputs_left_out(self, study: Study) -> list[str]:
        """The other experts whose inputs the bundle held and the import left out (only staff import
        them); the study is then a draft."""
        return list(self.context["imported"].inputs_left_out)

    def get_notes(self, study: Study) -> list[str]:
        """What the import did otherwise than the bundle says, in sentences (the inputs left out, the
        designer the bundle named); empty when nothing."""
        return list(self.context["imported"].notes)

    @extend_schema_field(InvitationSerializer(many=True))
    def get_invitations(self, study: Study) -> ReturnList:
        """The experts the import invited, in the bundle's order (they become experts by accepting)."""
        listed = InvitationSerializer(invitations.invitation_list(study=study).order_by("id"), many=True)
        return cast(ReturnList, listed.data)  # many=True makes a ListSerializer (the stubs cannot tell)


class StudyBriefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = s.StrictCharField()
    designer = s.StrictCharField(source="designer.username")


class ImportedInputsSerializer(s.ExpertInputsSerializer):
    imported_by = s.StrictCharField(allow_null=True, help_text="who imported them in your name")
    elicitation_answers = serializers.DictField(
        child=s.StrictCharField(),
        help_text="{elicited metric: your answers' codes in order, 1 the first outcome, 2 the second, 0 no preference}",
    )


class MyInvitationSerializer(serializers.ModelSerializer):
    """An invitation as the invited person sees it."""

    study = StudyBriefSerializer()
    invited_by = s.StrictCharField(source="created_by.username", allow_null=True, default=None)
    status = serializers.SerializerMethodField()
    inputs = serializers.SerializerMethodField()

    class Meta:
        model = Invitation
        fields = ["id", "study", "invited_by", "status", "created_at", "expires_at", "inputs"]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=STATUSES))
    def get_status(self, invitation: Invitation) -> str:
        return _status(invitation)

    @extend_schema_field(ImportedInputsSerializer(allow_null=True))
    def get_inputs(self, invitation: Invitation) -> dict | None:
        """The inputs someone imported in your name, as saved; accepting confirms them (null: none)."""
        return invitations.invitation_inputs(invitation=invitation)


class AcceptSerializer(serializers.Serializer):
    confirm_inputs = serializers.BooleanField(
        default=False, help_text="required true when the invitation carries inputs imported in your name"
    )


class AcceptLinkSerializer(serializers.Serializer):
    key = s.StrictCharField(max_length=200, help_text="the link invitation's key")


class AcceptedSerializer(serializers.Serializer):
    study = serializers.IntegerField(source="study_id")
    title = s.StrictCharField(source="study.title")
    role = s.StrictCharField()
    inputs_confirmed_at = serializers.DateTimeField(allow_null=True)
