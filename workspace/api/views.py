"""REST API v1 (FORMATS.md, "REST API"). Views are thin: they resolve the
study for the requesting user (404 for outsiders), check the role, check the
payload's shape and call one service.

Access: members read the setup, discussion and results; each expert reads
and changes only their own inputs; the designer manages the study and reads
every input. An outsider never learns a study exists.
"""

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, NoReturn, TypeVar, cast

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpResponseBase
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, generics, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView

from workspace import extensions, invitations, limits, lockout, selectors, services
from workspace.bundles import study_copy, study_export_json, study_import
from workspace.downloads import download
from workspace.models import ApiToken, Candidate, Membership, Metric, QualityAttribute, Study
from workspace.selectors.design import SetupItems, SetupModel
from workspace.selectors.studies import StudyWithRoles
from workspace.services.roles import require_role

from . import invitation_serializers as inv_s
from . import presenters
from . import serializers as s
from .exceptions import ThrottledFor
from .idempotency import idempotent
from .schema import error, pagination_class, ref
from .throttling import (
    IMPORT_SCOPE,
    FailOpenScopedRateThrottle,
    RateLimitHeadersMixin,
    import_refusal,
)

# --- access ------------------------------------------------------------------------


def signed_in(request: Request) -> User:
    """The requesting user: every API view needs one signed in
    (REST_FRAMEWORK's DEFAULT_PERMISSION_CLASSES, IsAuthenticated)."""
    return cast(User, request.user)


class StudyScoped(APIView):
    """Resolves ``study_id`` from the URL for the requesting user.

    The lookup is the permission check: a study the user is not a member of
    does not exist for them (404).
    """

    _study: StudyWithRoles

    def study(self) -> StudyWithRoles:
        if not hasattr(self, "_study"):
            try:
                self._study = selectors.study_get(study_id=self.kwargs["study_id"], user=self.request.user)
            except Study.DoesNotExist:
                raise exceptions.NotFound("No such study.") from None
        return self._study

    def member(self) -> User:
        """The requesting user, a member of the study: signed in."""
        return cast(User, self.request.user)

    def roles(self) -> set[str]:
        return {m.role for m in self.study().my_memberships}

    def require_designer(self, action: str = "do this") -> None:
        """403 unless the requesting user designs the study (the one role check, ``require_role``)."""
        require_role(study=self.study(), user=self.request.user, role=Membership.Role.DESIGNER, action=action)

    def expert(self) -> Membership:
        """The requesting user's expert membership, or 403."""
        membership = next((m for m in self.study().my_memberships if m.role == Membership.Role.EXPERT), None)
        if membership is None:
            raise exceptions.PermissionDenied("You are not an expert of this study.")
        membership.study = self.study()
        membership.user = self.member()
        return membership


class PaginatedListMixin(APIView):
    """Lists are paginated: ``{"count", "next", "previous", "results"}``."""

    paginated_list = True  # read by the OpenAPI schema (schema.ApproveAutoSchema)

    def paginated(self, queryset: QuerySet[Any] | Sequence[Any], serializer_class: type[BaseSerializer]) -> Response:
        paginator = pagination_class()
        page = paginator.paginate_queryset(queryset, self.request, view=self)
        return paginator.get_paginated_response(serializer_class(page, many=True).data)


def validated(serializer_class: type[BaseSerializer], data: Any, **kwargs: Any) -> Any:
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _body(request: Request, kind: type | tuple[type, ...], description: str) -> Any:
    """The JSON body when it must be a free-form object or list (the services
    check its contents)."""
    if not isinstance(request.data, kind):
        raise exceptions.ValidationError({"non_field_errors": [f"The body must be {description}."]})
    return request.data


def location(request: Request, name: str, **kwargs: Any) -> dict[str, str]:
    """The ``Location`` header of a 201 (or 202): the API URL of what was
    made (``api:<name>``), absolute, where a GET answers it."""
    return {"Location": request.build_absolute_uri(reverse(f"api:{name}", kwargs=kwargs))}


def _study_detail(
    study_id: int, user: User, status_code: int = status.HTTP_200_OK, headers: dict[str, str] | None = None
) -> Response:
    """The study detail response (raises ``Study.DoesNotExist``, a 404)."""
    study = selectors.study_detail_get(study_id=study_id, user=user)
    return Response(s.StudyDetailSerializer(study).data, status=status_code, headers=headers)


# --- tokens ------------------------------------------------------------------------


class TokenCreateView(RateLimitHeadersMixin, APIView):
    """Exchange a username and password for a new API token (throttled)."""

    schema_tag = "accounts"
    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = [FailOpenScopedRateThrottle]
    throttle_scope = "login"

    @extend_schema(
        summary="Create an API token with a username and password",
        request=s.TokenRequestSerializer,
        responses={
            201: s.NewTokenSerializer,
            403: error("The account must set up two-factor sign-in on the site first."),
            429: error("Too many attempts: try again after `Retry-After` seconds."),
        },
        auth=[],
    )
    def post(self, request: Request) -> Response:
        data = validated(s.TokenRequestSerializer, request.data)
        # The log-in page's lock-out, counted under the same key: guesses
        # cannot move to the API, nor to a look-alike of the username.
        refusal = lockout.login_refusal(request, data["username"])
        if refusal is not None:
            raise ThrottledFor(refusal, settings.LOGIN_FAILURE_WINDOW)
        # NFKC, as the log-in form reads a username.
        username = User.normalize_username(data["username"])
        user = authenticate(request, username=username, password=data["password"])
        if user is None:
            lockout.login_failed(request, data["username"])
            raise exceptions.ValidationError({"non_field_errors": ["Unable to log in with those credentials."]})
        lockout.login_succeeded(request, data["username"])
        # A second factor (two-factor sign-in, in the accounts app) may refuse it.
        for check in extensions.TOKEN_SECOND_FACTORS:
            check(request=request, user=user, code=data.get("otp_code", ""))
        token, key = services.api_token_create(
            user=user, name=data.get("name", ""), expires_in_days=data.get("expires_in_days")
        )
        return Response(
            {"token": key, **s.TokenSerializer(token).data},
            status=status.HTTP_201_CREATED,
            headers=location(request, "token-detail", token_id=token.pk),
        )


@extend_schema_view(get=extend_schema(summary="List your API tokens"))
class TokenListView(generics.ListAPIView):
    """Your API tokens (keys are never shown again), with when each expires;
    expired ones are listed until revoked."""

    schema_tag = "accounts"
    serializer_class = s.TokenSerializer

    def get_queryset(self) -> QuerySet[ApiToken]:
        return selectors.api_token_list(user=signed_in(self.request))


class TokenDetailView(APIView):
    schema_tag = "accounts"

    def token(self) -> ApiToken:
        try:
            return selectors.api_token_get(user=self.request.user, token_id=self.kwargs["token_id"])
        except ApiToken.DoesNotExist:
            raise exceptions.NotFound("No such token.") from None

    @extend_schema(summary="Get one of your tokens (its key is never shown again)", responses=s.TokenSerializer)
    def get(self, request: Request, token_id: int) -> Response:
        """One of your tokens (its key is never shown again)."""
        return Response(s.TokenSerializer(self.token()).data)

    @extend_schema(summary="Revoke one of your tokens", responses={204: None})
    def delete(self, request: Request, token_id: int) -> Response:
        """Revoke one of your tokens."""
        services.api_token_revoke(token=self.token())
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- studies -----------------------------------------------------------------------


class StudyListView(PaginatedListMixin, APIView):
    schema_tag = "studies"

    @extend_schema(summary="List your studies", responses=s.StudySerializer(many=True))
    def get(self, request: Request) -> Response:
        """Studies you are a member of."""
        return self.paginated(selectors.studies_with_my_roles(request.user), s.StudySerializer)

    @extend_schema(summary="Create a study", request=s.StudyWriteSerializer, responses={201: s.StudyDetailSerializer})
    @idempotent
    def post(self, request: Request) -> Response:
        """Create a study; you become its designer."""
        data = validated(s.StudyWriteSerializer, request.data)
        study = services.study_create(designer=signed_in(request), **data)
        return _study_detail(
            study.pk, signed_in(request), status.HTTP_201_CREATED, location(request, "study-detail", study_id=study.pk)
        )


class StudyImportView(RateLimitHeadersMixin, APIView):
    schema_tag = "studies"
    max_body_bytes = limits.IMPORT_BODY_MAX_BYTES  # a whole study (limits.BodySizeLimitMiddleware)
    # A few imports an hour per user, with the page's (throttling.IMPORT_SCOPE).
    throttle_classes = [FailOpenScopedRateThrottle]
    throttle_scope = IMPORT_SCOPE

    def throttled(self, request: Request, wait: float | None) -> NoReturn:
        raise exceptions.Throttled(wait=wait, detail=import_refusal())

    @extend_schema(
        summary="Import a study bundle",
        request={"application/json": ref("StudyBundle")},
        responses={
            201: inv_s.ImportedStudySerializer,
            429: error("Too many imports: try again after `Retry-After` seconds."),
        },
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Import an ``approve-study/1`` bundle; you become its designer,
        whoever the bundle names. Your own inputs are yours; other experts
        are invited (listed in ``invitations``). Only a staff user may import
        their inputs: they then await each expert's confirmation. Anyone
        else's import leaves them out (``inputs_left_out``, said in
        ``notes``) and makes the study a draft: a designer's own download
        comes back as a copy. Each user may import ``IMPORT_THROTTLE_RATE``
        studies (20 an hour), with the page's imports: beyond, 429 with
        ``Retry-After``."""
        bundle = _body(request, dict, "an approve-study/1 bundle (a JSON object)")
        limits.bundle_check_limits(bundle)
        imported = study_import(bundle=bundle, importer=signed_in(request))
        study = selectors.study_detail_get(study_id=imported.study.pk, user=request.user)
        return Response(
            inv_s.ImportedStudySerializer(study, context={"imported": imported}).data,
            status=status.HTTP_201_CREATED,
            headers=location(request, "study-detail", study_id=study.pk),
        )


class StudyVersionView(StudyScoped, APIView):
    schema_tag = "studies"

    @extend_schema(
        summary="Whether a study changed (its version)",
        parameters=[
            OpenApiParameter(
                "If-None-Match",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                required=False,
                description="the `ETag` of an earlier answer: `304` while the study has not changed",
            )
        ],
        responses={
            200: s.StudyVersionSerializer,
            304: OpenApiResponse(description="not changed since the version of `If-None-Match`"),
        },
    )
    def get(self, request: Request, study_id: int) -> Response:
        """The study's version, which grows with every change (an expert's
        save, an invitation answered, a phase, a round): what the study
        home polls. Poll it with the answer's ``ETag`` in ``If-None-Match``:
        ``304`` with no body while nothing changed (members)."""
        study = self.study()
        tag = f'"study-{study.pk}-v{study.input_version}"'
        if tag in [value.strip() for value in request.headers.get("If-None-Match", "").split(",")]:
            response = Response(status=status.HTTP_304_NOT_MODIFIED)
        else:
            response = Response({"study": study.pk, "version": study.input_version, "phase": study.phase})
        response["ETag"] = tag
        response["Cache-Control"] = "private, no-cache"
        return response


class StudyDetailView(StudyScoped, APIView):
    schema_tag = "studies"

    @extend_schema(summary="Get a study", responses=s.StudyDetailSerializer)
    def get(self, request: Request, study_id: int) -> Response:
        """The study's setup, phase, selection and thresholds."""
        try:
            return _study_detail(study_id, signed_in(request))
        except Study.DoesNotExist:
            raise exceptions.NotFound("No such study.") from None

    @extend_schema(
        summary="Change a study's title, description or thresholds",
        request=s.StudyWriteSerializer(partial=True),
        responses=s.StudyDetailSerializer,
    )
    def patch(self, request: Request, study_id: int) -> Response:
        """Change the title, description or (until voting closes) the vote thresholds."""
        self.require_designer("change the study")
        data = validated(s.StudyWriteSerializer, request.data, partial=True)
        services.study_update(study=self.study(), **data)
        return _study_detail(study_id, signed_in(request))

    @extend_schema(summary="Delete a study with everything in it", responses={204: None})
    def delete(self, request: Request, study_id: int) -> Response:
        """Delete the study with everything in it, runs included."""
        self.require_designer("delete the study")
        services.study_delete(study=self.study())
        return Response(status=status.HTTP_204_NO_CONTENT)


class StudyExportView(StudyScoped, APIView):
    schema_tag = "studies"

    @extend_schema(
        summary="Export the study as a bundle",
        responses={200: OpenApiResponse(response=ref("StudyBundle"), description="an approve-study/1 bundle")},
    )
    def get(self, request: Request, study_id: int) -> HttpResponseBase:
        """The whole study as an ``approve-study/1`` bundle."""
        self.require_designer("export the study")
        # The bytes the page's download gives, versioned by their digest (304 when unchanged).
        return download(study_export_json(study=self.study()), "application/json")


class StudyCopyView(StudyScoped, APIView):
    schema_tag = "studies"

    @extend_schema(
        summary="Copy the study's setup into a new draft study",
        request=s.StudyCopySerializer,
        responses={201: s.StudyDetailSerializer},
    )
    @idempotent
    def post(self, request: Request, study_id: int) -> Response:
        """A new draft study that you design, with this one's setup
        (attributes, metrics, candidates, thresholds, AHP weighting, quorum),
        its measurements unless ``measurements`` is false, and its prediction
        sets when ``predictions`` is true. Never anyone's inputs, nor the
        experts: invite them again. Only the study's designer copies it."""
        self.require_designer("copy the study")
        data = validated(s.StudyCopySerializer, request.data)
        copy = study_copy(study=self.study(), designer=signed_in(request), **data)
        return _study_detail(
            copy.pk, signed_in(request), status.HTTP_201_CREATED, location(request, "study-detail", study_id=copy.pk)
        )


class StudyTransitionView(StudyScoped, APIView):
    schema_tag = "studies"

    @extend_schema(
        summary="Move the study to another phase",
        request=s.TransitionSerializer,
        responses={200: s.StudyDetailSerializer},
    )
    def post(self, request: Request, study_id: int) -> Response:
        """Move the study to the next phase (or back to assessment from closed).
        409 with the reason when its inputs do not allow it."""
        self.require_designer("change the study's phase")
        data = validated(s.TransitionSerializer, request.data)
        services.study_transition(study=self.study(), to=data["to"])
        return _study_detail(study_id, signed_in(request))


# --- members ---------------------------------------------------------------------


class MemberListView(StudyScoped, PaginatedListMixin, APIView):
    schema_tag = "setup"

    @extend_schema(summary="List the study's members", responses=s.MemberSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """The designer and the experts."""
        return self.paginated(selectors.member_list(study=self.study()), s.MemberSerializer)

    @extend_schema(
        summary="Take the expert role, or invite an expert",
        request=s.MemberWriteSerializer,
        responses={201: s.MemberSerializer, 202: inv_s.MemberInvitedSerializer},
    )
    @idempotent
    def post(self, request: Request, study_id: int) -> Response:
        """Take the expert role yourself (201), or invite someone else, who
        becomes an expert by accepting (202, the same answer whether or not
        the account exists). Draft phase."""
        self.require_designer("add experts")
        data = validated(s.MemberWriteSerializer, request.data)
        added = invitations.member_add(study=self.study(), added_by=request.user, username=data["username"])
        if isinstance(added, Membership):
            return Response(
                s.MemberSerializer(added).data,
                status=status.HTTP_201_CREATED,
                headers=location(request, "member-detail", study_id=study_id, username=added.user.get_username()),
            )
        return Response(
            inv_s.member_invited(added),
            status=status.HTTP_202_ACCEPTED,
            headers=location(request, "study-invitation-detail", study_id=study_id, pk=added.pk),
        )


class MemberDetailView(StudyScoped, APIView):
    schema_tag = "setup"

    @extend_schema(summary="Get one expert of the study", responses=s.MemberSerializer)
    def get(self, request: Request, study_id: int, username: str) -> Response:
        """One expert of the study: their role and status (``pending``
        until they confirm inputs imported in their name)."""
        try:
            membership = selectors.expert_get(study=self.study(), username=username)
        except Membership.DoesNotExist:
            raise exceptions.NotFound("No such expert in this study.") from None
        return Response(s.MemberSerializer(membership).data)

    @extend_schema(summary="Remove an expert", responses={204: None})
    def delete(self, request: Request, study_id: int, username: str) -> Response:
        """Remove an expert, with all their inputs (draft phase)."""
        self.require_designer("remove experts")
        membership = selectors.expert_get(study=self.study(), username=username)
        services.expert_remove(study=self.study(), user=membership.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemberAbsenceView(StudyScoped, APIView):
    """An expert's absence (docs/method.md, "Absent experts"): in voting
    and the assessment the designer excludes an expert or marks them
    abstaining, and re-admits them until the study closes."""

    schema_tag = "setup"

    def _expert(self, username: str) -> Membership:
        self.require_designer("exclude or re-admit experts")
        try:
            return selectors.expert_get(study=self.study(), username=username)
        except Membership.DoesNotExist:
            raise exceptions.NotFound("No such expert in this study.") from None

    @extend_schema(
        summary="Exclude an expert, or mark them abstaining",
        request=s.AbsenceWriteSerializer,
        responses={200: s.MemberSerializer, 409: error("The phase does not allow it (draft or closed).")},
    )
    def put(self, request: Request, study_id: int, username: str) -> Response:
        """Exclude the expert (``absence: excluded``) or mark them abstaining
        for the rest of the study, with a ``reason`` recorded in the history
        and shown to them. Their inputs are kept but not used: their votes
        are not counted, no run and no revision round uses their inputs,
        the assessment closes without them (given the study's ``quorum``).
        Giving it again changes the kind or the reason."""
        expert = self._expert(username)
        data = validated(s.AbsenceWriteSerializer, request.data)
        changed = services.expert_absence_set(
            study=self.study(), expert=expert, absence=data["absence"], reason=data["reason"], acting=signed_in(request)
        )
        return Response(s.MemberSerializer(changed).data)

    @extend_schema(
        summary="Re-admit an excluded or abstaining expert",
        request=None,
        responses={200: s.MemberSerializer, 409: error("The phase does not allow it (draft or closed).")},
    )
    def delete(self, request: Request, study_id: int, username: str) -> Response:
        """The expert takes part again: their kept inputs count again."""
        expert = self._expert(username)
        changed = services.expert_readmit(study=self.study(), expert=expert, acting=signed_in(request))
        return Response(s.MemberSerializer(changed).data)


# --- setup: attributes, metrics, candidates -----------------------------------------


class SetupScoped(StudyScoped):
    """What the views of one kind of setup item (attributes, metrics,
    candidates) name: its model, its serializers and its noun."""

    schema_tag = "setup"
    model: SetupModel
    read_serializer: type[BaseSerializer]
    write_serializer: type[BaseSerializer]
    noun = ""

    @property
    def detail_name(self) -> str:
        """The URL name of one item (``attribute-detail``...)."""
        return f"{self.noun}-detail"


#: The kind of item a setup view lists or holds.
SetupItem = TypeVar("SetupItem", QualityAttribute, Metric, Candidate)


class SetupListView(SetupScoped, PaginatedListMixin, APIView, ABC, Generic[SetupItem]):
    """Members list the items; the designer adds them (each kind's ``create``)."""

    @abstractmethod
    def create(self, data: dict[str, Any]) -> SetupItem:
        """Add the item through its service."""

    def queryset(self) -> SetupItems:
        return selectors.setup_item_list(study=self.study(), model=self.model)

    def get(self, request: Request, study_id: int) -> Response:
        return self.paginated(self.queryset(), self.read_serializer)

    @idempotent
    def post(self, request: Request, study_id: int) -> Response:
        self.require_designer(f"add {self.noun}s")
        data = validated(self.write_serializer, request.data)
        item = self.create(data)
        item.study = self.study()
        return Response(
            self.read_serializer(item).data,
            status=status.HTTP_201_CREATED,
            headers=location(request, self.detail_name, study_id=study_id, pk=item.pk),
        )


class SetupDetailView(SetupScoped, APIView, ABC, Generic[SetupItem]):
    """One item: members read it; the designer changes or removes it (each kind's ``update`` and ``remove``)."""

    @abstractmethod
    def update(self, item: SetupItem, data: dict[str, Any]) -> SetupItem:
        """Change the item through its service."""

    @abstractmethod
    def remove(self, item: SetupItem) -> None:
        """Remove the item through its service."""

    def item(self) -> SetupItem:
        try:
            # Of this view's model, so of its kind.
            return cast(SetupItem, selectors.setup_item_get(study=self.study(), model=self.model, pk=self.kwargs["pk"]))
        except self.model.DoesNotExist:
            # get_object_or_404's message, as before
            raise exceptions.NotFound(f"No {self.model._meta.object_name} matches the given query.") from None

    def get(self, request: Request, study_id: int, pk: int) -> Response:
        return Response(self.read_serializer(self.item()).data)

    def patch(self, request: Request, study_id: int, pk: int) -> Response:
        self.require_designer(f"change {self.noun}s")
        item = self.item()
        data = validated(self.write_serializer, request.data, partial=True)
        item = self.update(item, data)
        return Response(self.read_serializer(item).data)

    def delete(self, request: Request, study_id: int, pk: int) -> Response:
        self.require_designer(f"remove {self.noun}s")
        self.remove(self.item())
        return Response(status=status.HTTP_204_NO_CONTENT)


def setup_list_schema(read: type[BaseSerializer], write: type[BaseSerializer], noun: str, article: str) -> Any:
    """The schema of a list of ``noun``s: its summaries ("Add an attribute") and bodies."""
    return extend_schema_view(
        get=extend_schema(summary=f"List the study's {noun}s", responses=read(many=True)),
        post=extend_schema(summary=f"Add {article} {noun}", request=write, responses={201: read}),
    )


def setup_detail_schema(read: type[BaseSerializer], write: type[BaseSerializer], noun: str, article: str) -> Any:
    """The schema of one ``noun``: its summaries ("Change an attribute") and bodies."""
    return extend_schema_view(
        get=extend_schema(summary=f"Get one {noun} of the study", responses=read),
        patch=extend_schema(summary=f"Change {article} {noun}", request=write(partial=True), responses=read),
        delete=extend_schema(summary=f"Remove {article} {noun}", responses={204: None}),
    )


def _attribute_by_name(study: Study, name: str) -> QualityAttribute:
    try:
        return selectors.attribute_get(study=study, name=name)
    except QualityAttribute.DoesNotExist:
        raise exceptions.ValidationError({"attribute": [f"no attribute named {name!r} in this study"]}) from None


@setup_list_schema(s.AttributeSerializer, s.AttributeWriteSerializer, "attribute", "an")
class AttributeListView(SetupListView[QualityAttribute]):
    model, read_serializer, write_serializer, noun = (
        QualityAttribute,
        s.AttributeSerializer,
        s.AttributeWriteSerializer,
        "attribute",
    )

    def create(self, data: dict[str, Any]) -> QualityAttribute:
        return services.attribute_add(study=self.study(), **data)


@setup_detail_schema(s.AttributeSerializer, s.AttributeWriteSerializer, "attribute", "an")
class AttributeDetailView(SetupDetailView[QualityAttribute]):
    model, read_serializer, write_serializer, noun = (
        QualityAttribute,
        s.AttributeSerializer,
        s.AttributeWriteSerializer,
        "attribute",
    )

    def update(self, attribute: QualityAttribute, data: dict[str, Any]) -> QualityAttribute:
        return services.attribute_update(attribute=attribute, **data)

    def remove(self, attribute: QualityAttribute) -> None:
        services.attribute_remove(attribute=attribute)


@setup_list_schema(s.MetricSerializer, s.MetricWriteSerializer, "metric", "a")
class MetricListView(SetupListView[Metric]):
    model, read_serializer, write_serializer, noun = Metric, s.MetricSerializer, s.MetricWriteSerializer, "metric"

    def create(self, data: dict[str, Any]) -> Metric:
        data["attribute"] = _attribute_by_name(self.study(), data["attribute"])
        return services.metric_add(study=self.study(), **data)


@setup_detail_schema(s.MetricSerializer, s.MetricWriteSerializer, "metric", "a")
class MetricDetailView(SetupDetailView[Metric]):
    model, read_serializer, write_serializer, noun = Metric, s.MetricSerializer, s.MetricWriteSerializer, "metric"

    def update(self, metric: Metric, data: dict[str, Any]) -> Metric:
        if "attribute" in data:
            data["attribute"] = _attribute_by_name(self.study(), data["attribute"])
        return services.metric_update(metric=metric, **data)

    def remove(self, metric: Metric) -> None:
        services.metric_remove(metric=metric)


@setup_list_schema(s.CandidateSerializer, s.CandidateWriteSerializer, "candidate", "a")
class CandidateListView(SetupListView[Candidate]):
    model, read_serializer, write_serializer, noun = (
        Candidate,
        s.CandidateSerializer,
        s.CandidateWriteSerializer,
        "candidate",
    )

    def create(self, data: dict[str, Any]) -> Candidate:
        return services.candidate_add(study=self.study(), **data)


@setup_detail_schema(s.CandidateSerializer, s.CandidateWriteSerializer, "candidate", "a")
class CandidateDetailView(SetupDetailView[Candidate]):
    model, read_serializer, write_serializer, noun = (
        Candidate,
        s.CandidateSerializer,
        s.CandidateWriteSerializer,
        "candidate",
    )

    def update(self, candidate: Candidate, data: dict[str, Any]) -> Candidate:
        return services.candidate_update(candidate=candidate, **data)

    def remove(self, candidate: Candidate) -> None:
        services.candidate_remove(candidate=candidate)


class MeasurementView(StudyScoped, PaginatedListMixin, APIView):
    schema_tag = "inputs"

    @extend_schema(summary="List the measured values", responses=s.MeasurementSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """Every candidate's measured values, ``{candidate, metric, value,
        standard_error}`` (``standard_error`` null when none is given)."""
        return self.paginated(selectors.measurement_list(study=self.study()), s.MeasurementRowSerializer)

    @extend_schema(
        summary="Set measured values",
        request=s.MeasurementSerializer(many=True),
        responses=s.MeasurementSerializer(many=True),
    )
    def put(self, request: Request, study_id: int) -> Response:
        """Bulk upsert: set each listed value; others are left as they are.
        An entry's optional ``standard_error`` sets the value's standard
        error (null removes it; omitted leaves it as it is)."""
        self.require_designer("change measurements")
        measurements = _body(request, list, "a list of {candidate, metric, value}")
        limits.check_size(
            measurements, field="measurements", limit=limits.MEASUREMENTS_PER_PUT_MAX, noun="measurements"
        )
        services.measurements_set(study=self.study(), measurements=measurements)
        return Response(measurements)


# --- an expert's own inputs -------------------------------------------------------


class MyInputView(StudyScoped, APIView):
    schema_tag = "inputs"
    section = ""

    def current(self) -> Any:
        expert = self.expert()
        inputs = selectors.expert_inputs_list(
            study=self.study(), experts=[expert], sections=[self.section], with_results=self.section == "priorities"
        )
        return inputs[self.request.user.get_username()][self.section]


class MyVotesView(MyInputView):
    section = "votes"

    @extend_schema(summary="Get your votes", responses=s.VotesSerializer)
    def get(self, request: Request, study_id: int) -> Response:
        """Your votes: the complementary attributes and metrics you vote for."""
        return Response(self.current())

    @extend_schema(summary="Set your votes", request=s.VotesSerializer, responses=s.VotesSerializer)
    def put(self, request: Request, study_id: int) -> Response:
        """Replace your votes (voting phase)."""
        expert = self.expert()
        data = validated(s.VotesSerializer, request.data)
        services.votes_set(expert=expert, attributes=data["attributes"], metrics=data["metrics"])
        return Response(self.current())


class MyPrioritiesView(MyInputView):
    section = "priorities"

    @extend_schema(summary="Get your prioritisation", responses=s.PrioritiesResponseSerializer)
    def get(self, request: Request, study_id: int) -> Response:
        """Your prioritisation of the selected attributes, with its result."""
        return Response(presenters.priorities_out(self.current()))

    @extend_schema(
        summary="Set your prioritisation", request=s.PrioritiesSerializer, responses=s.PrioritiesResponseSerializer
    )
    def put(self, request: Request, study_id: int) -> Response:
        """Set your prioritisation (assessment phase): ``direct`` weights, or
        ``ahp``/``lpr`` judgments over every pair. The response adds the
        resulting weights, the consistency ratio (above 0.10 is a warning)
        and the most inconsistent judgments."""
        expert = self.expert()
        body = _body(request, dict, "an object {method, weights | judgments}")
        unknown = sorted(set(body) - {"method", "weights", "judgments", "metric_priorities"})
        if unknown:
            raise exceptions.ValidationError({name: ["is not a field of a prioritisation"] for name in unknown})
        if "method" not in body:
            raise exceptions.ValidationError({"method": ["This field is required."]})
        limits.priorities_check_limits(body)
        services.priorities_set(expert=expert, **body)
        return Response(presenters.priorities_out(self.current()))


class MyRangesView(MyInputView):
    section = "ranges"

    @extend_schema(summary="Get your acceptable ranges", responses={200: OpenApiResponse(response=ref("Ranges"))})
    def get(self, request: Request, study_id: int) -> Response:
        """Your acceptable ranges ``{metric: [least acceptable, desired]}``;
        a metric left out uses its default range."""
        return Response(self.current())

    @extend_schema(
        summary="Set your acceptable ranges",
        request={"application/json": ref("Ranges")},
        responses={200: OpenApiResponse(response=ref("Ranges"))},
    )
    def put(self, request: Request, study_id: int) -> Response:
        """Replace your acceptable ranges (assessment phase)."""
        expert = self.expert()
        ranges = _body(request, dict, "an object {metric: [least acceptable, desired]}")
        limits.check_size(ranges, field="ranges", limit=limits.MAX_METRICS, noun="ranges")
        services.ranges_set(expert=expert, ranges=ranges)
        return Response(self.current())


class MyRangesToConfirmView(MyInputView):
    @extend_schema(summary="Get your ranges to confirm", responses=s.RangesToConfirmSerializer)
    def get(self, request: Request, study_id: int) -> Response:
        """Your acceptable ranges whose metric's values changed under them (it
        was made elicited, or its elicitation changed: docs/method.md 7.4),
        which the assessment cannot close without: each with the range as
        stored, your own value of each candidate (null until you finish its
        questions) and the range proposed from their spread (null with fewer
        than two distinct values). Saving your ranges
        (``PUT .../my/ranges/``) confirms them, changed or not."""
        found = selectors.ranges_to_confirm_list(study=self.study(), expert=self.expert())
        return Response(
            {
                "to_confirm": [
                    {
                        "metric": item.metric.name,
                        "better": item.metric.better,
                        "unit": item.metric.unit,
                        "range": [selectors.number_out(bound) for bound in item.range],
                        "own_values": item.own_values,
                        "proposed": item.proposed,
                    }
                    for item in found
                ]
            }
        )


class MyPeerWeightsView(MyInputView):
    section = "peer_weights"

    @extend_schema(summary="Get your peer weights", responses={200: OpenApiResponse(response=ref("PeerWeights"))})
    def get(self, request: Request, study_id: int) -> Response:
        """Your weights for every expert, yourself included."""
        return Response(self.current())

    @extend_schema(
        summary="Set your peer weights",
        request={"application/json": ref("PeerWeights")},
        responses={200: OpenApiResponse(response=ref("PeerWeights"))},
    )
    def put(self, request: Request, study_id: int) -> Response:
        """Set your row of peer weights (assessment phase): every expert, each
        in (0, 1), summing to 1."""
        expert = self.expert()
        weights = _body(request, dict, "an object {username: weight}")
        limits.check_size(weights, field="weights", limit=limits.MAX_EXPERTS, noun="peer weights")
        services.peer_weights_set(expert=expert, weights=weights)
        return Response(self.current())


class ExpertInputsView(StudyScoped, APIView):
    schema_tag = "inputs"

    @extend_schema(summary="Get one expert's inputs", responses=s.ExpertInputsSerializer)
    def get(self, request: Request, study_id: int, username: str) -> Response:
        """One expert's votes, priorities (with their ``result``: weights,
        consistency ratio, ``inconsistent``), ranges and peer weights
        (designer only)."""
        self.require_designer("read other experts' inputs")
        expert = selectors.expert_get(study=self.study(), username=username)
        inputs = selectors.expert_inputs_list(study=self.study(), experts=[expert], with_results=True)[username]
        if inputs["priorities"] is not None:
            # With its result: the consistency ratio and the inconsistent flag (issue 16).
            inputs["priorities"] = presenters.priorities_out(inputs["priorities"])
        return Response(inputs)
