"""Revision rounds through the API: the study's rounds (members read them,
the designer opens one), a round's status (who has responded, for the
designer; your own responses for an expert), closing the open round
(designer), and an expert's feedback view and response.

The feedback is the step pages' own (``workspace.selectors.round_feedback``,
``engine.feedback``), kept when the round opened: each weight, each bound on
its own and the weights each expert receives, summarised by the coarse band
of the median below five experts and by the median and quartiles from five
(never the lowest or highest), and the previous round's reasons without
their authors.
"""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workspace import limits, selectors, services
from workspace.models import Membership, RevisionRound, RoundResponse, RoundStep

from .idempotency import idempotent
from .serializers import StrictCharField, WriteSerializer
from .views import StudyScoped, location, validated

# --- payloads --------------------------------------------------------------------


class RoundSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="1 for the study's first round")
    message = StrictCharField(help_text="the designer's message to the experts (may be empty)")
    is_open = serializers.BooleanField()
    opened_at = serializers.DateTimeField()
    opened_by = StrictCharField(source="opened_by.username", allow_null=True, default=None)
    closed_at = serializers.DateTimeField(allow_null=True, help_text="null while the round is open")
    closed_by = StrictCharField(source="closed_by.username", allow_null=True, default=None)


class RoundOpenSerializer(WriteSerializer):
    message = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=limits.ROUND_MESSAGE_MAX_CHARS,
        help_text=f"optional, at most {limits.ROUND_MESSAGE_MAX_CHARS} characters",
    )


class RoundResponseSerializer(serializers.Serializer):
    step = serializers.ChoiceField(choices=RoundStep.choices)
    action = serializers.ChoiceField(
        choices=RoundResponse.Action.choices, help_text="`revised`: saved during the round; `confirmed`: kept"
    )
    reason = StrictCharField(help_text="the expert's reason (may be empty)")
    responded_at = serializers.DateTimeField()


class ExpertResponsesSerializer(serializers.Serializer):
    expert = StrictCharField(source="expert.user.username")
    responded = serializers.BooleanField(help_text="responded for every step")
    steps = serializers.SerializerMethodField(help_text="`{step: revised | confirmed | null}`")

    def get_steps(self, row: selectors.ExpertResponses) -> dict[str, str | None]:
        return {step: (response.action if response else None) for step, response in row.cells()}


class RoundStatusSerializer(RoundSerializer):
    responses = ExpertResponsesSerializer(
        many=True, allow_null=True, help_text="who has responded, per step (designer; null for an expert)"
    )
    mine = RoundResponseSerializer(many=True, allow_null=True, help_text="your own responses (expert; null otherwise)")
    to_revise = serializers.ListField(
        child=serializers.ChoiceField(choices=RoundStep.choices),
        allow_null=True,
        help_text="the steps of this round you have not responded to yet, neither saved during it nor "
        "confirmed: they read 'to revise', not done, until you do ([] once the round has closed; expert; "
        "null otherwise)",
    )


class SummarySerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="how many experts gave this input")
    median_band = serializers.ListField(
        source="band",
        child=serializers.FloatField(),
        min_length=2,
        max_length=2,
        allow_null=True,
        help_text=f"with fewer than {limits.ROUND_FEEDBACK_FINE_MIN_EXPERTS} experts: the coarse step "
        "`[low, high]` holding the median (five percentage points for a weight, a twentieth of the "
        "metric's range for a bound), and nothing else; null from "
        f"{limits.ROUND_FEEDBACK_FINE_MIN_EXPERTS} on",
    )
    q1 = serializers.FloatField(
        allow_null=True,
        help_text=f"from {limits.ROUND_FEEDBACK_FINE_MIN_EXPERTS} experts: the lower quartile, the order "
        "statistic x(a), a = max(2, (n+3)//4), never the lowest answer; null below",
    )
    median = serializers.FloatField(
        allow_null=True, help_text=f"from {limits.ROUND_FEEDBACK_FINE_MIN_EXPERTS} experts; null below"
    )
    q3 = serializers.FloatField(
        allow_null=True,
        help_text=f"from {limits.ROUND_FEEDBACK_FINE_MIN_EXPERTS} experts: the upper quartile x(n+1-a), "
        "never the highest answer; null below",
    )


_NOT_SHOWN = f"null when fewer than {limits.ROUND_FEEDBACK_MIN_EXPERTS} experts gave one"


class WeightFeedbackSerializer(serializers.Serializer):
    name = StrictCharField()
    attribute = StrictCharField(allow_null=True, help_text="a metric's attribute; null for an attribute")
    group = SummarySerializer(allow_null=True, help_text=f"the group's weights, as the round opened; {_NOT_SHOWN}")
    own = serializers.FloatField(allow_null=True, help_text="your weight now; null if you gave none")


class RangeFeedbackSerializer(serializers.Serializer):
    name = StrictCharField()
    better = StrictCharField()
    unit = StrictCharField()
    step = serializers.FloatField(
        allow_null=True,
        help_text="the bounds' coarse step, a twentieth of the metric's range (its candidates' measured values "
        "and default range; [0, 1] for an elicited metric); null when nothing gives the metric a range, and "
        f"then nothing is shown below {limits.ROUND_FEEDBACK_FINE_MIN_EXPERTS} experts",
    )
    least_acceptable = SummarySerializer(
        allow_null=True, help_text=f"the group's least acceptable values, on their own (never paired); {_NOT_SHOWN}"
    )
    desired = SummarySerializer(allow_null=True, help_text=f"the group's desired values, on their own; {_NOT_SHOWN}")
    own = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="yours now: [least acceptable, desired]"
    )


class PeerFeedbackSerializer(serializers.Serializer):
    name = StrictCharField(help_text="the expert weighed")
    group = SummarySerializer(allow_null=True, help_text=f"the weights the group gives them; {_NOT_SHOWN}")
    own = serializers.FloatField(allow_null=True, help_text="the weight you give them now")


class ReasonsSerializer(serializers.Serializer):
    priorities = serializers.ListField(child=StrictCharField())
    ranges = serializers.ListField(child=StrictCharField())
    peer_weights = serializers.ListField(child=StrictCharField())


class FeedbackSerializer(serializers.Serializer):
    """The group's answers as they stood when the round opened (a change
    made during the round shows in the next round's), beside yours now."""

    round = RoundSerializer()
    attributes = WeightFeedbackSerializer(many=True)
    metrics = WeightFeedbackSerializer(many=True)
    ranges = RangeFeedbackSerializer(many=True)
    peer_weights = PeerFeedbackSerializer(many=True)
    previous_reasons = ReasonsSerializer(help_text="the reasons given in the round before, without authors, sorted")
    mine = serializers.SerializerMethodField(help_text="your responses to this round")

    def get_mine(self, feedback: selectors.Feedback) -> list[dict[str, Any]]:
        return list(RoundResponseSerializer(list(feedback.mine.values()), many=True).data)


class RespondSerializer(WriteSerializer):
    step = serializers.ChoiceField(choices=RoundStep.choices)
    reason = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=limits.ROUND_REASON_MAX_CHARS,
        help_text=f"optional, at most {limits.ROUND_REASON_MAX_CHARS} characters",
    )


class NoBodySerializer(WriteSerializer):
    """An action without parameters: any field sent is refused."""


# --- views ----------------------------------------------------------------------------


class RoundsScoped(StudyScoped):
    schema_tag = "studies"

    def round_obj(self) -> RevisionRound:
        try:
            return selectors.round_get(study=self.study(), number=self.kwargs["number"])
        except RevisionRound.DoesNotExist:
            raise exceptions.NotFound("No such round in this study.") from None

    def open_round(self) -> RevisionRound:
        current = selectors.round_current(study=self.study())
        if current is None:
            raise exceptions.NotFound("No revision round is open.")
        return current

    def status_data(self, round: RevisionRound) -> dict[str, Any]:
        data = dict(RoundSerializer(round).data)
        designer = Membership.Role.DESIGNER in self.roles()
        rows = selectors.round_responses(study=self.study(), round=round) if designer else None
        data["responses"] = ExpertResponsesSerializer(rows, many=True).data if rows is not None else None
        expert = next((m for m in self.study().my_memberships if m.role == Membership.Role.EXPERT), None)
        mine = list(selectors.my_round_responses(round=round, expert=expert).values()) if expert else None
        data["mine"] = RoundResponseSerializer(mine, many=True).data if mine is not None else None
        if mine is None:
            data["to_revise"] = None
        else:
            data["to_revise"] = selectors.steps_to_revise({r.step: r for r in mine}) if round.is_open else []
        return data


class RoundListView(RoundsScoped, APIView):
    @extend_schema(summary="List the study's revision rounds", responses=RoundSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """The study's revision rounds, first first (any member)."""
        return Response(RoundSerializer(list(selectors.round_list(study=self.study())), many=True).data)

    @extend_schema(summary="Open a revision round", request=RoundOpenSerializer, responses={201: RoundStatusSerializer})
    @idempotent
    def post(self, request: Request, study_id: int) -> Response:
        """Open the next revision round (designer; assessment phase; 409
        ``round_open`` while one is open)."""
        self.require_designer("open a revision round")
        data = validated(RoundOpenSerializer, request.data)
        opened = services.round_open(study=self.study(), by=self.member(), message=data.get("message", ""))
        return Response(
            self.status_data(opened),
            status=status.HTTP_201_CREATED,
            headers=location(request, "round-detail", study_id=study_id, number=opened.number),
        )


class RoundDetailView(RoundsScoped, APIView):
    @extend_schema(summary="Get a revision round's status", responses=RoundStatusSerializer)
    def get(self, request: Request, study_id: int, number: int) -> Response:
        """A round's status: for the designer, who has responded per step;
        for an expert, their own responses (never another's)."""
        return Response(self.status_data(self.round_obj()))


class RoundCloseView(RoundsScoped, APIView):
    @extend_schema(summary="Close the open revision round", request=None, responses=RoundStatusSerializer)
    def post(self, request: Request, study_id: int) -> Response:
        """Close the open round, keeping every expert's inputs as its
        snapshot (designer; 409 ``no_open_round`` when none is open)."""
        self.require_designer("close a revision round")
        validated(NoBodySerializer, request.data)
        return Response(self.status_data(services.round_close(study=self.study(), by=self.member())))


class RoundFeedbackView(RoundsScoped, APIView):
    @extend_schema(summary="Get the group's anonymised answers beside yours", responses=FeedbackSerializer)
    def get(self, request: Request, study_id: int) -> Response:
        """The open round's anonymised group feedback, kept when it opened,
        beside your own answers (expert; 404 when no round is open)."""
        expert = self.expert()
        feedback = selectors.round_feedback(study=self.study(), expert=expert, round=self.open_round())
        return Response(FeedbackSerializer(feedback).data)

    @extend_schema(
        summary="Confirm a step for the open revision round",
        request=RespondSerializer,
        responses=RoundResponseSerializer,
    )
    def post(self, request: Request, study_id: int) -> Response:
        """Confirm a step for the open round, with an optional reason shown to
        the group, without your name, in the next round (expert; a step you
        saved during the round stays ``revised``)."""
        expert = self.expert()
        data = validated(RespondSerializer, request.data)
        response = services.round_respond(expert=expert, step=data["step"], reason=data.get("reason", ""))
        return Response(RoundResponseSerializer(response).data)
