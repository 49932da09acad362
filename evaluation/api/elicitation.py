"""Elicited metrics through the API: the REST twins of the design page
(``/studies/{id}/predictions/metrics/{metric}/elicitation/``) and of the
expert's step (``/studies/{id}/my/elicitation/{metric}/``), through the same
services and selectors.

Members read how a metric is elicited; the designer sets it (draft and
voting) and sees each expert's progress, and their results once the
assessment has closed. Only the expert answers their own questions
(assessment): ``GET`` the state (the next question, or the result), ``POST``
an answer, ``POST`` back one question or reset, ``POST`` a typed ratio
where a search stopped at the edge of what the reference can show.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from evaluation import elicited as elicited_domain
from evaluation import selectors, services
from evaluation.models import ElicitedMetric
from workspace import selectors as workspace_selectors
from workspace.api.serializers import WriteSerializer
from workspace.api.views import StudyScoped, validated
from workspace.models import Metric, Phase

# --- payloads --------------------------------------------------------------------


class ElicitationDesignWriteSerializer(WriteSerializer):
    kind = serializers.ChoiceField(choices=ElicitedMetric.Kind.choices)
    prediction_set = serializers.IntegerField(help_text="the id of the study's prediction set the questions come from")
    reference_candidate = serializers.CharField(
        max_length=200, help_text="the candidate whose class probabilities in the set make the questions"
    )
    epsilon = serializers.FloatField(
        required=False,
        default=services.ELICITATION_EPSILON_DEFAULT,
        help_text=f"the tolerance (default {services.ELICITATION_EPSILON_DEFAULT}): smaller asks more questions",
    )


class ElicitationDesignSerializer(serializers.Serializer):
    metric = serializers.CharField(source="metric.name")
    kind = serializers.ChoiceField(choices=ElicitedMetric.Kind.choices)
    prediction_set = serializers.IntegerField(source="prediction_set_id")
    reference_candidate = serializers.CharField(source="reference_candidate.name")
    epsilon = serializers.FloatField()
    labels = serializers.ListField(
        child=serializers.CharField(), source="prediction_set.labels", help_text="the classes, in the weights' order"
    )


class OutcomeSerializer(serializers.Serializer):
    rows = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="per true class (labels), per column: how many of 100 instances of the class, as shown",
    )
    labels = serializers.ListField(child=serializers.CharField(), help_text="each row's true class")


class QuestionSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="1-based: answer it with this number")
    total = serializers.IntegerField(help_text="the most questions the elicitation asks")
    classes = serializers.ListField(child=serializers.CharField())
    columns = serializers.ListField(child=serializers.CharField())
    first = OutcomeSerializer()
    second = OutcomeSerializer()
    sentence_first = serializers.CharField()
    sentence_second = serializers.CharField()
    first_values = serializers.ListField(
        child=serializers.FloatField(), help_text="the first outcome's confusions, fractions of all instances"
    )
    second_values = serializers.ListField(child=serializers.FloatField())
    check = serializers.IntegerField(
        allow_null=True, help_text="1 or 2: a consistency check (a question asked again); null for the search's"
    )


class CheckAnswerSerializer(serializers.Serializer):
    question = serializers.IntegerField(help_text="the number of the search's question asked again")
    original = serializers.CharField(help_text="its answer then (1 first, 2 second, 0 no preference)")
    answer = serializers.CharField(allow_null=True, help_text="the answer now; null until given")


class PairSerializer(serializers.Serializer):
    reference = serializers.CharField(help_text="the reference class (the set's first label), weighed as 1")
    class_label = serializers.CharField(
        source="label", help_text="the class compared with it: type a ratio for it with this class_label"
    )
    ratio = serializers.FloatField(
        help_text="1 : ratio, per 100 cases of each class as the questions are asked: finding one more of 100 with "
        "class_label is worth ratio times finding one more of 100 with the reference class"
    )
    per_instance = serializers.FloatField(
        help_text="the same at the study's prevalence, one instance against one (the ratio of the weights)"
    )
    at_edge = serializers.BooleanField(
        help_text="the search stopped at the edge of what the reference candidate's probabilities can show and no "
        "typed ratio replaces it: ratio is then not a value, bound is all the answers tell"
    )
    bound = serializers.ChoiceField(
        choices=["at least", "at most"],
        allow_null=True,
        help_text="at the edge: the true ratio is at least (or at most) bound_ratio; null inside the range",
    )
    bound_ratio = serializers.FloatField(allow_null=True, help_text="per 100 cases of each class; null inside")
    typed = serializers.BooleanField(help_text="ratio is the one the expert typed (POST .../ratio/)")
    shown = serializers.ListField(
        child=serializers.FloatField(),
        min_length=2,
        max_length=2,
        allow_null=True,
        help_text="the smallest and largest ratio (per 100 cases of each class) the reference candidate's "
        "probabilities can show",
    )


class ResultSerializer(serializers.Serializer):
    labels = serializers.ListField(child=serializers.CharField(), help_text="what each value weighs")
    values = serializers.ListField(
        child=serializers.FloatField(), help_text="the weights (diagonal) or costs (off-diagonal), >= 0"
    )
    sentence = serializers.CharField(help_text="the result per 100 cases of each class, as the questions are asked")
    per_instance = serializers.CharField(
        allow_blank=True, help_text="diagonal: the same per instance, at the study's prevalence; empty otherwise"
    )
    pairs = PairSerializer(
        many=True, help_text="diagonal: each class against the reference class; empty for off-diagonal"
    )
    at_edge = serializers.BooleanField(help_text="some pair is at the edge (see pairs[].at_edge)")


class ElicitationStateSerializer(serializers.Serializer):
    metric = serializers.CharField(source="elicited.metric.name")
    kind = serializers.ChoiceField(source="elicited.kind", choices=ElicitedMetric.Kind.choices)
    answered = serializers.IntegerField(help_text="the answers given, the consistency check's included")
    total = serializers.IntegerField(help_text="the search's questions; 2 check questions follow them")
    finished = serializers.BooleanField()
    answers = serializers.CharField(
        allow_blank=True, help_text="the answers so far, one character each: 1 first, 2 second, 0 no preference"
    )
    question = QuestionSerializer(allow_null=True, help_text="the next question; null once finished")
    result = ResultSerializer(allow_null=True, help_text="null until finished")
    weights = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="the recovered metric's weights; null until finished (the consistency check answered)",
    )
    check = CheckAnswerSerializer(
        many=True, help_text="the consistency check once the search is finished: two questions asked again"
    )
    consistent = serializers.BooleanField(
        allow_null=True, help_text="whether the check's answers agree with the originals; null until both are given"
    )


class ElicitationAnswerSerializer(WriteSerializer):
    answer = serializers.ChoiceField(choices=list(elicited_domain.ANSWER_CHOICES))
    question = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="the number of the question answered: a repeated request is refused rather than taken as the next",
    )


class ElicitationRatioSerializer(WriteSerializer):
    class_label = serializers.CharField(
        max_length=200, help_text="the class whose ratio to the reference class is typed (a pair at the edge)"
    )
    ratio = serializers.FloatField(
        allow_null=True,
        help_text="1 : ratio, per 100 cases of each class; it must agree with the answers' bound (at least or at "
        "most); null takes a typed ratio back",
    )


class ElicitationProgressSerializer(serializers.Serializer):
    expert = serializers.CharField()
    answered = serializers.IntegerField(help_text="the answers given, the consistency check's included")
    total = serializers.IntegerField(help_text="the search's questions, without the check's")
    finished = serializers.BooleanField()
    consistent = serializers.BooleanField(
        allow_null=True, help_text="whether the check's answers agree with the originals; null until given"
    )
    weights = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="null until the assessment has closed"
    )


# --- views ----------------------------------------------------------------------------


class _ElicitedScoped(StudyScoped):
    def elicited(self) -> ElicitedMetric:
        try:
            return selectors.elicited_metric_get(study=self.study(), metric_id=self.kwargs["metric_id"])
        except ElicitedMetric.DoesNotExist:
            raise exceptions.NotFound("No such elicited metric in this study.") from None


class ElicitationDesignView(_ElicitedScoped):
    """How one study metric is elicited (the page ``.../predictions/metrics/{metric}/elicitation/``)."""

    schema_tag = "setup"

    def metric(self) -> Metric:
        try:
            return selectors.metric_with_computation_get(study=self.study(), metric_id=self.kwargs["metric_id"])
        except Metric.DoesNotExist:
            raise exceptions.NotFound("No such metric in this study.") from None

    @extend_schema(responses=ElicitationDesignSerializer)
    def get(self, request: Request, study_id: int, metric_id: int) -> Response:
        """How the metric is elicited; 404 when it is not."""
        return Response(ElicitationDesignSerializer(self.elicited()).data)

    @extend_schema(request=ElicitationDesignWriteSerializer, responses=ElicitationDesignSerializer)
    def put(self, request: Request, study_id: int, metric_id: int) -> Response:
        """Elicit the metric from each expert (designer; draft and voting),
        or change how: any change clears the experts' answers."""
        self.require_designer("elicit metrics")
        metric = self.metric()
        data = validated(ElicitationDesignWriteSerializer, request.data)
        elicited = services.elicited_metric_set(metric=metric, **data)
        return Response(
            ElicitationDesignSerializer(
                selectors.elicited_metric_get(study=self.study(), metric_id=elicited.metric_id)
            ).data
        )

    @extend_schema(responses={204: None})
    def delete(self, request: Request, study_id: int, metric_id: int) -> Response:
        """Stop eliciting the metric (designer; draft and voting): the experts' answers go."""
        self.require_designer("stop eliciting metrics")
        elicited = self.elicited()
        services.elicited_metric_remove(metric=elicited.metric)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ElicitationProgressView(_ElicitedScoped):
    schema_tag = "setup"

    @extend_schema(responses=ElicitationProgressSerializer(many=True))
    def get(self, request: Request, study_id: int, metric_id: int) -> Response:
        """Each expert's progress (designer); their weights once the assessment has closed."""
        self.require_designer("see the experts' progress")
        elicited = self.elicited()
        total = elicited_domain.elicitation_replayed(elicited, "").total_queries
        answered = selectors.elicitation_progress(study=self.study())
        closed = self.study().phase == Phase.CLOSED
        rows = []
        for expert in workspace_selectors.expert_list(study=self.study()):
            row = answered.get((elicited.metric_id, expert.pk))
            weights = row.weights if row is not None else None
            rows.append(
                {
                    "expert": expert.user.get_username(),
                    "answered": len(row.answers) if row is not None else 0,
                    "total": total,
                    "finished": weights is not None,
                    "consistent": elicited_domain.consistent(row.answers, total) if row is not None else None,
                    "weights": weights if closed else None,
                }
            )
        return Response(ElicitationProgressSerializer(rows, many=True).data)


class _MyElicitation(_ElicitedScoped):
    schema_tag = "inputs"

    def state(self) -> Response:
        state = selectors.elicitation_state(elicited_metric=self.elicited(), expert=self.expert())
        return Response(ElicitationStateSerializer(state).data)


class MyElicitationView(_MyElicitation):
    """The expert's own questions of one elicited metric (the page ``/studies/{id}/my/elicitation/{metric}/``)."""

    @extend_schema(responses=ElicitationStateSerializer)
    def get(self, request: Request, study_id: int, metric_id: int) -> Response:
        """Where you stand: the next question, or once finished your recovered metric."""
        self.expert()
        return self.state()


class MyElicitationAnswerView(_MyElicitation):
    @extend_schema(request=ElicitationAnswerSerializer, responses=ElicitationStateSerializer)
    def post(self, request: Request, study_id: int, metric_id: int) -> Response:
        """Answer the next question: ``first``, ``second`` or ``none`` (no
        preference, which counts as not preferring the first); assessment phase."""
        expert = self.expert()
        data = validated(ElicitationAnswerSerializer, request.data)
        services.elicitation_answer(elicited_metric=self.elicited(), expert=expert, **data)
        return self.state()


class MyElicitationRatioView(_MyElicitation):
    @extend_schema(
        summary="Type a ratio where your search reached the edge",
        request=ElicitationRatioSerializer,
        responses=ElicitationStateSerializer,
    )
    def post(self, request: Request, study_id: int, metric_id: int) -> Response:
        """Where a search stopped at the edge of what the reference
        candidate's probabilities can show (``result.pairs[].at_edge``),
        type the ratio you mean for that class against the reference class,
        per 100 cases of each class: it replaces the bound in your stored
        weights. Once every question is answered; assessment phase. The
        other way on is a wider reference: the designer chooses another
        reference candidate (``PUT .../elicitation/``, which clears every
        expert's answers)."""
        expert = self.expert()
        data = validated(ElicitationRatioSerializer, request.data)
        services.elicitation_ratio_type(elicited_metric=self.elicited(), expert=expert, **data)
        return self.state()


class MyElicitationBackView(_MyElicitation):
    @extend_schema(request=None, responses=ElicitationStateSerializer)
    def post(self, request: Request, study_id: int, metric_id: int) -> Response:
        """Take back your last answer (assessment phase)."""
        services.elicitation_back(elicited_metric=self.elicited(), expert=self.expert())
        return self.state()


class MyElicitationResetView(_MyElicitation):
    @extend_schema(request=None, responses=ElicitationStateSerializer)
    def post(self, request: Request, study_id: int, metric_id: int) -> Response:
        """Clear your answers and start again (assessment phase)."""
        services.elicitation_reset(elicited_metric=self.elicited(), expert=self.expert())
        return self.state()
