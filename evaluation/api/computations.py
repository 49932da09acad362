"""Study metrics computed from predictions through the API: the REST twins of
the evaluation pages (``evaluation/views.py``), through the same services.

Members read a metric's computation, the catalogue of computations, where
each computed measurement came from and a set's ``approve-evaluation/1``
document; the designer maps a metric to a computation (or stops computing
it) and computes the measurements, in any phase, like measurements.
"""

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation import report, selectors, services
from evaluation.models import MetricComputation
from workspace import limits
from workspace.api.schema import VALIDATION_ERROR, ref
from workspace.api.serializers import BoundedListField, WriteSerializer
from workspace.api.views import PaginatedListMixin, StudyScoped, validated
from workspace.models import Direction, Metric

from .predictions import PredictionSetScoped

DEFAULTS = report.Options()
_POSITIVE = {"type": "number", "minimum": 0, "exclusiveMinimum": True}
# The parameters of every computation (evaluation.services.PARAMETER_FIELDS),
# as the service checks them; each computation takes only its own (the
# catalogue lists them).
PARAMETER_SCHEMAS: dict[str, dict[str, Any]] = {
    "threshold_method": {
        "x-component": "ThresholdMethodEnum",  # (one enum wherever it is: workspace.api.schema)
        "type": "string",
        "enum": list(report.THRESHOLD_METHODS),
        "description": "how a binary candidate's scores become labels when it has no y_pred column "
        f"(default {DEFAULTS.threshold_method})",
    },
    "threshold_value": {"type": "number", "description": f"the fixed threshold (default {DEFAULTS.threshold_value})"},
    "threshold_sensitivity": {
        "type": "number",
        "minimum": 0,
        "exclusiveMinimum": True,
        "maximum": 1,
        "description": f"the sensitivity of fixed_sensitivity (default {DEFAULTS.threshold_sensitivity})",
    },
    "use_threshold": {
        "type": "boolean",
        "description": "derive labels from the scores even where y_pred is given (default false)",
    },
    "alpha": {**_POSITIVE, "description": f"the Relevance Score's alpha (default {DEFAULTS.alpha})"},
    "beta": {**_POSITIVE, "description": f"the Relevance Score's beta (default {DEFAULTS.beta})"},
    "root": {**_POSITIVE, "description": f"A3R's root N (default {DEFAULTS.root})"},
    "acc_d": {**_POSITIVE, "description": f"ARR's AccD, accuracy traded per tenfold time (default {DEFAULTS.acc_d})"},
    "n_parameters": {
        "type": "object",
        "description": "AIC and BIC: {candidate: its number of free parameters}; a candidate left out is not computed",
        "additionalProperties": {"type": "integer", "minimum": 0},
    },
}
assert set(PARAMETER_SCHEMAS) == {name for names in services.PARAMETER_FIELDS.values() for name in names}


# One component (workspace.api.schema.postprocess_components) for every use.
PARAMETERS_SCHEMA = {
    "x-component": "ComputationParameters",
    "type": "object",
    "description": "a computation's parameters by name: only those it takes (a default for each left out)",
    "properties": PARAMETER_SCHEMAS,
    "additionalProperties": False,
}


@extend_schema_field(PARAMETERS_SCHEMA)
class ParametersField(serializers.JSONField):
    """Any JSON: the service checks it and names the parameter it refuses
    (``parameters.threshold_sensitivity``)."""


@extend_schema_field({"type": "string", "enum": list(report.COMPUTATIONS)})
class ComputationKeyField(serializers.CharField):
    """A key of the catalogue, checked by the service (which says which keys there are)."""


# --- payloads --------------------------------------------------------------------


class ComputationWriteSerializer(WriteSerializer):
    computation = ComputationKeyField(max_length=40, help_text="a key of the catalogue (GET .../computations/)")
    parameters = ParametersField(required=False)


class ComputationSerializer(serializers.Serializer):
    computation = ComputationKeyField()
    name = serializers.SerializerMethodField()
    definition = serializers.SerializerMethodField()
    parameters = ParametersField(help_text="as given: the defaults for those left out")

    def get_name(self, mapping: MetricComputation) -> str:
        return report.COMPUTATIONS[mapping.computation].name

    def get_definition(self, mapping: MetricComputation) -> str:
        return report.COMPUTATIONS[mapping.computation].definition


class CatalogueEntrySerializer(serializers.Serializer):
    key = ComputationKeyField()
    name = serializers.CharField()
    definition = serializers.CharField()
    better = serializers.ChoiceField(
        choices=Direction.choices, help_text="only a metric that runs the same way is computed as it"
    )
    needs = serializers.CharField(help_text="the columns of the predictions it needs")
    parameters = serializers.SerializerMethodField()

    @extend_schema_field(PARAMETERS_SCHEMA)
    def get_parameters(self, computation: report.Computation) -> dict[str, Any]:
        return {name: getattr(DEFAULTS, name) for name in services.computation_parameter_names(computation.key)}


class ComputeRequestSerializer(WriteSerializer):
    metrics = BoundedListField(
        child=serializers.CharField(max_length=limits.NAME_MAX_LENGTH),
        required=False,
        allow_empty=False,
        max_length=limits.MAX_METRICS,
        noun="metrics",
        help_text="the metrics to compute, by name, each mapped to a computation (default: every mapped metric)",
    )


class ComputedSerializer(serializers.Serializer):
    metric = serializers.CharField()
    candidate = serializers.CharField()
    before = serializers.FloatField(allow_null=True, help_text="the measurement before, or null")
    value = serializers.FloatField()
    prediction_set = serializers.CharField(help_text="the name of the set it was computed from")


class NotComputedSerializer(serializers.Serializer):
    metric = serializers.CharField()
    candidate = serializers.CharField()
    reason = serializers.CharField(help_text="why; the measurement was left as it was")


class ComputeOutcomeSerializer(serializers.Serializer):
    computed = ComputedSerializer(many=True)
    not_computed = NotComputedSerializer(many=True)


class MeasurementSourceSerializer(serializers.Serializer):
    candidate = serializers.CharField(source="candidate.name")
    metric = serializers.CharField(source="metric.name")
    prediction_set = serializers.CharField(source="prediction_set_name", help_text="the name of the set")
    prediction_set_id = serializers.IntegerField(allow_null=True, help_text="null once the set is deleted")
    computation = ComputationKeyField()
    parameters = ParametersField()
    computed_at = serializers.DateTimeField()
    value = serializers.FloatField(help_text="the value computed")
    edited = serializers.SerializerMethodField()

    def get_edited(self, source: selectors.MeasurementSourceNow) -> bool:
        """The measurement's value is no longer the one computed (typed over since)."""
        return source.edited_since(source.current_value)


_DOCUMENT_VALUES = {key: {"type": "number", "nullable": True} for key in report.DOCUMENT_KEYS}
EVALUATION_SCHEMA = {
    "type": "object",
    "description": "An approve-evaluation/1 document, compact JSON.",
    "required": ["format", "positive", "candidates", "notes"],
    "properties": {
        "format": {"x-component": "EvaluationFormat", "type": "string", "enum": [report.FORMAT]},
        "positive": {"type": "string", "nullable": True, "description": "the set's positive label, or null"},
        "candidates": {
            "type": "object",
            "description": "{candidate: {metric: value}}: every metric its columns allow; null where one is undefined",
            "additionalProperties": {
                "x-component": "EvaluationMetrics",
                "type": "object",
                "description": "{metric: value}: every metric the candidate's columns allow; null where undefined",
                "properties": _DOCUMENT_VALUES,
                "additionalProperties": False,
            },
        },
        "notes": {
            "type": "object",
            "description": "{candidate: {metric: why it is undefined}}",
            "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
}
# The report's options as query parameters: every parameter but AIC's and
# BIC's numbers of parameters (the document has neither).
REPORT_QUERY = [
    OpenApiParameter(
        name,
        # an enum: its component's schema; otherwise the plain type
        PARAMETER_SCHEMAS[name]
        if "enum" in PARAMETER_SCHEMAS[name]
        else {"string": str, "boolean": bool}.get(PARAMETER_SCHEMAS[name]["type"], float),
        description=PARAMETER_SCHEMAS[name]["description"],
    )
    for name in services.REPORT_PARAMETERS
]


def _query_value(name: str, text: str) -> Any:
    """A query parameter as the value the service checks: a number or true
    and false where the parameter is one; as given when it is not (the
    service then refuses it, naming the parameter)."""
    kind = PARAMETER_SCHEMAS[name]["type"] if name in PARAMETER_SCHEMAS else "string"
    if kind == "boolean":
        return {"true": True, "false": False}.get(text, text)
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            return text
    return text


# --- views ----------------------------------------------------------------------------


class MetricComputationView(StudyScoped, APIView):
    """What one study metric is computed from (the page
    ``/studies/{id}/predictions/metrics/{metric}/``)."""

    schema_tag = "evaluation"

    def metric(self) -> Metric:
        try:
            return selectors.metric_with_computation_get(study=self.study(), metric_id=self.kwargs["pk"])
        except Metric.DoesNotExist:
            raise exceptions.NotFound("No such metric in this study.") from None

    def mapping(self, metric: Metric) -> MetricComputation:
        mapping = getattr(metric, "computation", None)
        if mapping is None:
            raise exceptions.NotFound(
                f"{metric.name} is not computed from predictions: PUT a computation here to compute it."
            )
        return mapping

    @extend_schema(summary="Get a metric's computation from predictions", responses=ComputationSerializer)
    def get(self, request: Request, study_id: int, pk: int) -> Response:
        """The metric's computation from predictions and its parameters; 404
        when the metric is not computed (its values are typed)."""
        return Response(ComputationSerializer(self.mapping(self.metric())).data)

    @extend_schema(
        summary="Compute a metric from predictions",
        request=ComputationWriteSerializer,
        responses=ComputationSerializer,
    )
    def put(self, request: Request, study_id: int, pk: int) -> Response:
        """Compute the metric from predictions (designer, any phase),
        replacing its computation if it had one: a computation of the
        catalogue that runs the metric's way, with its parameters. Nothing
        is computed yet (POST .../measurements/compute/)."""
        self.require_designer("map metrics to computations")
        metric = self.metric()
        data = validated(ComputationWriteSerializer, request.data)
        mapping = services.metric_computation_set(
            metric=metric, computation=data["computation"], parameters=data.get("parameters")
        )
        return Response(ComputationSerializer(mapping).data)

    @extend_schema(summary="Stop computing a metric from predictions", responses={204: None})
    def delete(self, request: Request, study_id: int, pk: int) -> Response:
        """Stop computing the metric from predictions (designer); its values stay."""
        self.require_designer("stop computing metrics")
        metric = self.metric()
        self.mapping(metric)  # 404 when there is nothing to remove, as GET says
        services.metric_computation_remove(metric=metric)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ComputationListView(StudyScoped, APIView):
    schema_tag = "evaluation"

    @extend_schema(
        summary="List the computations a metric can take from predictions",
        responses=CatalogueEntrySerializer(many=True),
    )
    def get(self, request: Request, study_id: int) -> Response:
        """Every computation a metric can take from predictions, with its
        definition, which way it runs, what it needs and its parameters."""
        self.study()  # the same for every study, but shown to its members only
        return Response(CatalogueEntrySerializer(report.COMPUTATIONS.values(), many=True).data)


class MeasurementComputeView(StudyScoped, APIView):
    schema_tag = "evaluation"

    @extend_schema(
        summary="Compute the measurements from predictions",
        request=ComputeRequestSerializer,
        responses=ComputeOutcomeSerializer,
    )
    def post(self, request: Request, study_id: int) -> Response:
        """Compute every mapped metric now (or those named), for every
        candidate from its newest prediction set (designer, any phase). Each
        value goes through the measurements like a typed one; a candidate
        whose value cannot be computed is listed with the reason and its
        measurement left as it was."""
        self.require_designer("compute measurements")
        data = validated(ComputeRequestSerializer, request.data)
        outcome = services.measurements_compute(study=self.study(), metrics=data.get("metrics"))
        return Response(ComputeOutcomeSerializer(outcome).data)


class MeasurementSourceListView(StudyScoped, PaginatedListMixin, APIView):
    schema_tag = "evaluation"

    @extend_schema(
        summary="List where each computed measurement came from", responses=MeasurementSourceSerializer(many=True)
    )
    def get(self, request: Request, study_id: int) -> Response:
        """Where each computed measurement came from: the set, the
        computation and its parameters, when, the value computed, and
        whether it was typed over since."""
        return self.paginated(selectors.measurement_source_list(study=self.study()), MeasurementSourceSerializer)


class PredictionSetEvaluationView(PredictionSetScoped, APIView):
    @extend_schema(
        summary="Evaluate a prediction set",
        parameters=REPORT_QUERY,
        responses={
            200: OpenApiResponse(response=ref("EvaluationDocument"), description="an approve-evaluation/1 document"),
            400: VALIDATION_ERROR,
        },
    )
    def get(self, request: Request, study_id: int, pk: int) -> HttpResponse:
        """Every metric the set's columns allow, per candidate: the
        ``approve-evaluation/1`` document, as compact JSON (the text
        ``evaluate_predictions --json`` prints for the same file). The
        query's parameters are the report's options; any other is refused.
        Computed once for each choice of options, then kept until the set is
        deleted: asking again reads what was kept."""
        self.study()
        options = services.report_options(
            {name: _query_value(name, text) for name, text in request.query_params.dict().items()}
        )
        # Computed the first time these options are asked for, then kept with the set.
        # (The set's contexts are read only when the document is computed.)
        document = services.prediction_set_evaluation(prediction_set=self.prediction_set(), options=options)
        return HttpResponse(report.document_json(document), content_type="application/json")
