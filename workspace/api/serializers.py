"""Shapes of the API's payloads. Serializers check shape only; the rules
live in the services they hand over to."""

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from engine.disagreement import CONSENSUS_MEASURE, CONSENSUS_WORDING, WeightSpread
from engine.rules import CONSISTENCY_THRESHOLD
from workspace import bundles, limits, services
from workspace.models import (
    AhpWeighting,
    ApiToken,
    Candidate,
    Direction,
    Membership,
    Metric,
    Phase,
    QualityAttribute,
    Study,
)
from workspace.selectors.studies import StudyDetail
from workspace.services.panel import ABSENCES


class StrictCharField(serializers.CharField):
    """Text, and only text: every string field of the API's payloads. DRF's
    CharField turns a number into its digits (``"description": 0`` was
    stored as ``"0"``); this one refuses anything but a string, naming the
    type given (issue 17, finding 8). Form bodies hold strings only."""

    default_error_messages = {"not_text": "must be text, got {type}"}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_text", type=type(data).__name__)
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """true or false, and only those: DRF's BooleanField also takes ``"yes"``,
    ``1`` or ``"off"``."""

    default_error_messages = {"not_boolean": "must be true or false, got {type}"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("not_boolean", type=type(data).__name__)
        return data


class WriteSerializer(serializers.Serializer):
    """A request body: a field it does not know is refused (400 naming it),
    never silently ignored."""

    # Sent by the browsable API's HTML forms with every post; not a field.
    IGNORED = frozenset({"csrfmiddlewaretoken"})

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields) - self.IGNORED)
            if unknown:
                known = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {name: [f"is not a field of this request (the fields are {known})"] for name in unknown}
                )
        return super().to_internal_value(data)


class TokenRequestSerializer(WriteSerializer):
    username = StrictCharField(max_length=limits.USERNAME_MAX_LENGTH)
    password = StrictCharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})
    name = StrictCharField(
        max_length=limits.NAME_MAX_LENGTH, required=False, allow_blank=True, help_text="a label for the token"
    )
    expires_in_days = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text=(
            "the token's lifetime in days, from 1 to the site's maximum (API_TOKEN_MAX_LIFETIME_DAYS, 365 unless "
            "configured); without it, the site's default (API_TOKEN_LIFETIME_DAYS, 90 unless configured)"
        ),
    )
    otp_code = StrictCharField(
        max_length=64,
        required=False,
        allow_blank=True,
        help_text=(
            "a current code from the account's authenticator app, or one of its recovery codes: required when the "
            "account uses two-factor sign-in"
        ),
    )


class TokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "expires_at"]


class NewTokenSerializer(TokenSerializer):
    token = StrictCharField(help_text="the key: shown once, send it as `Authorization: Token <key>`")

    class Meta(TokenSerializer.Meta):
        fields = ["token", *TokenSerializer.Meta.fields]


# --- studies ---------------------------------------------------------------------


class SelectionSerializer(serializers.Serializer):
    attributes = serializers.ListField(child=StrictCharField())
    metrics = serializers.ListField(child=StrictCharField())


class StudySerializer(serializers.ModelSerializer):
    designer = StrictCharField(source="designer.username", read_only=True)
    my_roles = serializers.SerializerMethodField()

    class Meta:
        model = Study
        fields = [
            "id",
            "title",
            "description",
            "phase",
            "attribute_threshold",
            "metric_threshold",
            "quorum",
            "ahp_weighting",
            "designer",
            "my_roles",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_my_roles(self, study: Study) -> list[str]:
        return sorted(m.role for m in getattr(study, "my_memberships", []))


class StudyDetailSerializer(StudySerializer):
    experts = serializers.SerializerMethodField()
    selection = serializers.SerializerMethodField()

    class Meta(StudySerializer.Meta):
        fields = [*StudySerializer.Meta.fields, "experts", "selection"]
        read_only_fields = fields

    # The study comes from selectors.study_detail_get, which lists its
    # experts and selection.
    def get_experts(self, study: StudyDetail) -> list[str]:
        return [m.user.username for m in study.experts]

    @extend_schema_field(SelectionSerializer(allow_null=True))
    def get_selection(self, study: StudyDetail) -> dict[str, list[str]] | None:
        """The selected attributes and metrics, fixed when voting closes (null before)."""
        if not services.selection_fixed(study):
            return None
        return {
            "attributes": [a.name for a in study.selected_attributes],
            "metrics": [m.name for m in study.selected_metrics],
        }


class StudyCopySerializer(WriteSerializer):
    title = StrictCharField(
        required=False, max_length=limits.TITLE_MAX_LENGTH, help_text='the copy\'s title (default "Copy of <title>")'
    )
    measurements = StrictBooleanField(
        required=False, default=True, help_text="copy the measurements and their standard errors (default true)"
    )
    predictions = StrictBooleanField(
        required=False,
        default=False,
        help_text="copy every prediction set, with the elicited metrics' designs (default false: an elicited "
        "metric becomes an ordinary one)",
    )


class StudyWriteSerializer(WriteSerializer):
    title = StrictCharField(max_length=limits.TITLE_MAX_LENGTH)
    description = StrictCharField(required=False, allow_blank=True, max_length=limits.STUDY_DESCRIPTION_MAX_LENGTH)
    attribute_threshold = serializers.IntegerField(required=False, min_value=0, max_value=limits.MAX_THRESHOLD)
    metric_threshold = serializers.IntegerField(required=False, min_value=0, max_value=limits.MAX_THRESHOLD)
    quorum = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=limits.QUORUM_MAX,
        help_text="the fewest experts who must take part (not excluded or abstaining) to close the assessment; "
        "0: any number",
    )
    ahp_weighting = serializers.ChoiceField(
        choices=AhpWeighting.choices,
        required=False,
        help_text="How AHP weights come from judgments (default column_means, the method's own); "
        "changes only in the draft phase",
    )


class TransitionSerializer(WriteSerializer):
    to = serializers.ChoiceField(choices=Phase.choices)


class MemberSerializer(serializers.ModelSerializer):
    username = StrictCharField(source="user.username")
    absence = serializers.ChoiceField(
        choices=list(ABSENCES),
        allow_blank=True,
        help_text="'' while they take part; excluded or abstaining: their inputs are kept but not used",
    )
    absence_reason = StrictCharField(help_text="why, as the designer gave it ('' while they take part)")
    absent_since = serializers.DateTimeField(allow_null=True)

    class Meta:
        model = Membership
        fields = ["username", "role", "status", "absence", "absence_reason", "absent_since"]
        read_only_fields = fields


class AbsenceWriteSerializer(WriteSerializer):
    absence = serializers.ChoiceField(
        choices=list(ABSENCES),
        help_text="excluded: they no longer take part; abstaining: for the rest of the study",
    )
    reason = StrictCharField(max_length=limits.ABSENCE_REASON_MAX_CHARS, help_text="recorded, shown to them")


class MemberWriteSerializer(WriteSerializer):
    username = StrictCharField(max_length=limits.USERNAME_MAX_LENGTH)
    role = serializers.ChoiceField(choices=[Membership.Role.EXPERT], default=Membership.Role.EXPERT)


# --- setup -------------------------------------------------------------------------


def _selected(obj: QualityAttribute | Metric) -> bool | None:
    return obj.is_selected if services.selection_fixed(obj.study) else None


class AttributeSerializer(serializers.ModelSerializer):
    selected = serializers.SerializerMethodField()

    class Meta:
        model = QualityAttribute
        fields = ["id", "name", "kind", "description", "position", "selected"]
        read_only_fields = fields

    def get_selected(self, attribute: QualityAttribute) -> bool | None:
        return _selected(attribute)


class AttributeWriteSerializer(WriteSerializer):
    name = StrictCharField(max_length=limits.NAME_MAX_LENGTH)
    kind = serializers.ChoiceField(choices=QualityAttribute.Kind.choices, default=QualityAttribute.Kind.MAIN)
    description = StrictCharField(required=False, allow_blank=True, max_length=limits.ITEM_DESCRIPTION_MAX_LENGTH)


class MetricSerializer(serializers.ModelSerializer):
    attribute = StrictCharField(source="attribute.name")
    default_range = serializers.SerializerMethodField()
    selected = serializers.SerializerMethodField()

    class Meta:
        model = Metric
        fields = ["id", "name", "attribute", "better", "unit", "default_range", "position", "selected"]
        read_only_fields = fields

    @extend_schema_field(
        serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2, allow_null=True)
    )
    def get_default_range(self, metric: Metric) -> list[float] | None:
        return list(metric.default_range) if metric.default_range else None

    def get_selected(self, metric: Metric) -> bool | None:
        return _selected(metric)


class MetricWriteSerializer(WriteSerializer):
    name = StrictCharField(max_length=limits.NAME_MAX_LENGTH)
    attribute = StrictCharField(max_length=limits.NAME_MAX_LENGTH, help_text="the attribute's name")
    better = serializers.ChoiceField(choices=Direction.choices, default=Direction.HIGHER)
    unit = StrictCharField(required=False, allow_blank=True, max_length=limits.UNIT_MAX_LENGTH)
    default_range = serializers.ListField(
        child=serializers.FloatField(),
        min_length=2,
        max_length=2,
        required=False,
        allow_null=True,
        help_text="[least acceptable, desired]",
    )


class CandidateSerializer(serializers.ModelSerializer):
    class Meta:
        model = Candidate
        fields = ["id", "name", "description", "position"]
        read_only_fields = fields


class CandidateWriteSerializer(WriteSerializer):
    name = StrictCharField(max_length=limits.NAME_MAX_LENGTH)
    description = StrictCharField(required=False, allow_blank=True, max_length=limits.ITEM_DESCRIPTION_MAX_LENGTH)


class MeasurementSerializer(serializers.Serializer):
    candidate = StrictCharField(max_length=limits.NAME_MAX_LENGTH)
    metric = StrictCharField(max_length=limits.NAME_MAX_LENGTH)
    value = serializers.FloatField()
    standard_error = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="The value's standard error (>= 0), sampled by a Monte Carlo analysis; null: none. "
        "On PUT, omitted leaves it as it is, null removes it.",
    )


class MeasurementRowSerializer(MeasurementSerializer):
    """A row of selectors.measurement_list."""

    candidate = StrictCharField(source="candidate__name")
    metric = StrictCharField(source="metric__name")


# --- an expert's inputs (each exactly that expert's section of a bundle) ---------


class BoundedListField(serializers.ListField):
    """A list refused by its length before any item is validated."""

    def __init__(self, *, noun: str, **kwargs: Any) -> None:
        self.noun = noun
        super().__init__(**kwargs)

    def to_internal_value(self, data: list[Any]) -> list[Any]:
        # ListField refuses what is not a list; the length is checked first.
        if isinstance(data, list) and self.max_length is not None and len(data) > self.max_length:
            raise serializers.ValidationError(limits.too_many(self.noun, len(data), self.max_length))
        return super().to_internal_value(data)


class VotesSerializer(WriteSerializer):
    attributes = BoundedListField(
        child=StrictCharField(max_length=limits.NAME_MAX_LENGTH),
        default=list,
        max_length=limits.MAX_ATTRIBUTES,
        noun="attributes voted for",
    )
    metrics = BoundedListField(
        child=StrictCharField(max_length=limits.NAME_MAX_LENGTH),
        default=list,
        max_length=limits.MAX_METRICS,
        noun="metrics voted for",
    )


class InconsistentJudgmentSerializer(serializers.Serializer):
    row = StrictCharField()
    column = StrictCharField()
    value = serializers.FloatField()
    error = serializers.FloatField(help_text="max(ε, 1/ε) with ε = o_ij · w_j / w_i; 1 is perfectly consistent")
    suggested_value = serializers.FloatField(help_text="the scale value consistent with the current weights")


class PrioritisationResultSerializer(serializers.Serializer):
    weights = serializers.DictField(child=serializers.FloatField())
    consistency_ratio = serializers.FloatField(allow_null=True)
    inconsistent = serializers.BooleanField(
        allow_null=True,
        help_text=f"consistency ratio above {CONSISTENCY_THRESHOLD:.2f} (a warning); null for direct weights",
    )
    most_inconsistent = InconsistentJudgmentSerializer(many=True)


PRIORITISATION_METHODS = ["direct", "ahp", "lpr"]

# A pairwise judgment: ``[row, column, value]`` (OpenAPI 3.0 has no
# prefixItems: three items, each a name or a number), or the same as an
# object, which the services read alike (workspace.services.inputs).
JUDGMENT_SCHEMA = {
    "type": "array",
    "description": "[row, column, value]: how much more important row is than column, value in 1/9..9 (the "
    "reciprocal is implied); row and column name items to prioritise",
    "minItems": 3,
    "maxItems": 3,
    "items": {"oneOf": [{"type": "string"}, {"type": "number"}]},
    "example": ["Accuracy", "Efficiency", 3],
}
JUDGMENT_OBJECT_SCHEMA = {
    "type": "object",
    "description": "a judgment as an object, the same as [row, column, value]",
    "required": ["row", "column", "value"],
    "properties": {"row": {"type": "string"}, "column": {"type": "string"}, "value": {"type": "number"}},
    "additionalProperties": False,
}
JUDGMENT_INPUT = {"oneOf": [{"$ref": "#/components/schemas/Judgment"}, {"$ref": "#/components/schemas/JudgmentObject"}]}


@extend_schema_field(
    {
        "type": "array",
        "description": "every pair of items once, each as [row, column, value] or {row, column, value}",
        "items": JUDGMENT_INPUT,
    }
)
class JudgmentsInField(serializers.ListField):
    """Judgments as a request gives them (the services check them)."""

    child = serializers.JSONField()


@extend_schema_field(
    {
        "type": "array",
        "description": "as stored: [row, column, value]",
        "items": {"$ref": "#/components/schemas/Judgment"},
    }
)
class JudgmentsOutField(serializers.ListField):
    """Judgments as stored: ``[row, column, value]``."""

    child = serializers.JSONField()


class LocalPrioritySerializer(serializers.Serializer):
    method = serializers.ChoiceField(choices=PRIORITISATION_METHODS)
    weights = serializers.DictField(child=serializers.FloatField(), required=False)
    judgments = JudgmentsInField(required=False)


class PrioritiesSerializer(LocalPrioritySerializer):
    metric_priorities = serializers.DictField(child=LocalPrioritySerializer(), required=False)


class LocalPriorityResponseSerializer(serializers.Serializer):
    """A prioritisation as stored (judgments as triples)."""

    method = serializers.ChoiceField(choices=PRIORITISATION_METHODS)
    weights = serializers.DictField(child=serializers.FloatField(), required=False)
    judgments = JudgmentsOutField(required=False)


class PrioritiesResponseSerializer(serializers.Serializer):
    method = serializers.ChoiceField(choices=PRIORITISATION_METHODS, allow_null=True)
    weights = serializers.DictField(child=serializers.FloatField(), required=False)
    judgments = JudgmentsOutField(required=False)
    metric_priorities = serializers.DictField(child=LocalPriorityResponseSerializer(), required=False)
    result = PrioritisationResultSerializer(allow_null=True)
    metric_results = serializers.DictField(child=PrioritisationResultSerializer(), required=False)


# Maps keyed by names have no serializer form; their OpenAPI schemas are given as is.
RANGES_SCHEMA = {
    "type": "object",
    "description": "{metric: [least acceptable, desired]}",
    "additionalProperties": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
}
PEER_WEIGHTS_SCHEMA = {
    "type": "object",
    "description": "{username: weight}: every expert of the study, yourself included",
    "additionalProperties": {"type": "number"},
}
SCORES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "{expert: {metric: individual score in [0, 1]}}",
    "additionalProperties": {"type": "object", "additionalProperties": {"type": "number"}},
}


def _numbers_by_name(description: str) -> dict:
    return {"type": "object", "description": description, "additionalProperties": {"type": "number"}}


def _strings(description: str) -> dict:
    return {"type": "array", "description": description, "items": {"type": "string"}}


# "x-component": the name of the component a nested schema becomes (hoisted by
# workspace.api.schema.postprocess_components), so that generated clients name
# its class after it rather than after where it is.
_WEIGHT_SPREAD_SCHEMA = {
    "x-component": "WeightSpreads",
    "type": "object",
    "description": "{name: the experts' weights of it}: lowest, highest, mean and population standard deviation",
    "additionalProperties": {
        "x-component": "WeightSpread",
        "type": "object",
        "required": list(WeightSpread._fields),
        "properties": {field: {"type": "number"} for field in WeightSpread._fields},
    },
}
_CONSENSUS_SCHEMA = {
    "x-component": "Consensus",
    "type": "object",
    "required": ["value", "wording"],
    "properties": {
        "value": {"type": "number", "minimum": 0, "maximum": 1},
        "wording": {"type": "string", "enum": [wording for _, wording in CONSENSUS_WORDING]},
    },
}
_VETO_SCHEMA = {
    "x-component": "Veto",
    "type": "object",
    "required": ["expert", "metric", "value", "range"],
    "properties": {
        "expert": {"type": "string"},
        "metric": {"type": "string"},
        "value": {"type": "number", "description": "the measured value"},
        "range": {
            "type": "array",
            "description": "that expert's [least acceptable, desired]",
            "items": {"type": "number"},
            "minItems": 2,
            "maxItems": 2,
        },
    },
}
_RESULTS_CANDIDATE_SCHEMA = {
    "x-component": "ResultsCandidate",
    "type": "object",
    "required": ["name", "rank", "cef", "weighted_score", "vetoed", "vetoes", "group_scores"],
    "properties": {
        "name": {"type": "string"},
        "rank": {"type": "integer", "minimum": 1, "description": "equal CEFs share a rank"},
        "cef": {"type": "number"},
        "weighted_score": {"type": "number", "description": "sum of a_j g_j, without the veto"},
        "vetoed": {"type": "boolean"},
        "vetoes": {"type": "array", "items": _VETO_SCHEMA},
        "group_scores": _numbers_by_name("{metric: group score g_j in [0, 1]}"),
        "veto_shares": _numbers_by_name(
            "optional (absent from runs stored before it existed): {metric: share of the experts whose "
            "acceptable range vetoes the candidate on it, 0 to 1}; above 0 somewhere exactly when vetoed"
        ),
        "individual_scores": {
            **SCORES_SCHEMA,
            "description": "only with ?individual=true: " + SCORES_SCHEMA["description"],
        },
    },
}
RESULTS_SCHEMA = {
    "type": "object",
    "description": "An approve-results/1 document: keys in this order, compact JSON. A reader "
    "ignores keys it does not know; the optional ones are absent from runs stored before they existed.",
    "required": [
        "format",
        "study",
        "run",
        "launched_at",
        "tolerance",
        "iterations",
        "selected_attributes",
        "metrics",
        "attribute_weights",
        "metric_weights",
        "expert_influence",
        "candidates",
    ],
    "properties": {
        "format": {"x-component": "ResultsFormat", "type": "string", "enum": ["approve-results/1"]},
        "study": {"type": "string", "description": "the study's title"},
        "run": {"type": "integer"},
        "launched_at": {"type": "string", "format": "date-time"},
        "tolerance": {"type": "number"},
        "iterations": {"type": "integer", "description": "layers q of the literal recursive aggregation of W"},
        "selected_attributes": _strings("the selected attributes, in the study's order"),
        "metrics": _strings("the selected metrics, in the study's order: the columns of every score"),
        "attribute_weights": _numbers_by_name("{attribute: consensus weight}"),
        "metric_weights": _numbers_by_name("{metric: consensus weight a_j}"),
        "expert_influence": _numbers_by_name("{expert: influence pi_i}"),
        "disagreement": {
            "x-component": "Disagreement",
            "type": "object",
            "description": "optional (absent from runs stored before it existed): how far the experts' weights "
            "lie apart",
            "required": ["attribute_weights", "metric_weights", "consensus"],
            "properties": {
                "attribute_weights": _WEIGHT_SPREAD_SCHEMA,
                "metric_weights": _WEIGHT_SPREAD_SCHEMA,
                "consensus": {
                    "x-component": "GroupConsensus",
                    "type": "object",
                    "description": "the AHP-OS group consensus S* (Goepel 2018) of the experts' attribute and "
                    "metric weights, 0 (none) to 1 (full), with BPMSG's wording",
                    "required": ["measure", "scale_max", "attribute_weights", "metric_weights"],
                    "properties": {
                        "measure": {"type": "string", "enum": [CONSENSUS_MEASURE]},
                        "scale_max": {"type": "number", "description": "M, the top of the AHP scale S* assumes"},
                        "attribute_weights": _CONSENSUS_SCHEMA,
                        "metric_weights": _CONSENSUS_SCHEMA,
                    },
                },
            },
        },
        "consistency": {
            "x-component": "ConsistencyReport",
            "type": "object",
            "description": "optional (absent from runs stored before it existed): the consistency ratio of each "
            "prioritisation from pairwise judgments (AHP, LPR) as the run's snapshot recorded it",
            "required": ["threshold", "prioritisations"],
            "properties": {
                "threshold": {"type": "number", "description": "a ratio above it is inconsistent (a warning)"},
                "prioritisations": {
                    "type": "array",
                    "description": "experts in the order they joined, the attributes' prioritisation first",
                    "items": {
                        "x-component": "PrioritisationConsistency",
                        "type": "object",
                        "required": [
                            "expert",
                            "attribute",
                            "method",
                            "consistency_ratio",
                            "inconsistent",
                            "acknowledged_at",
                        ],
                        "properties": {
                            "expert": {"type": "string"},
                            "attribute": {
                                "type": ["string", "null"],
                                "description": "null: the prioritisation of the attributes; a name: of its metrics",
                            },
                            "method": {"x-component": "PairwiseMethodEnum", "type": "string", "enum": ["ahp", "lpr"]},
                            "consistency_ratio": {"type": "number"},
                            "inconsistent": {"type": "boolean", "description": "consistency_ratio above threshold"},
                            "acknowledged_at": {
                                "type": ["string", "null"],
                                "format": "date-time",
                                "description": "when the expert chose to keep inconsistent judgments on the "
                                "priorities page; null otherwise (the API and bundles accept them as given)",
                            },
                        },
                    },
                },
            },
        },
        "candidates": {"type": "array", "description": "best first", "items": _RESULTS_CANDIDATE_SCHEMA},
    },
}


def _by_expert(description: str, value: dict) -> dict:
    return {"type": "object", "description": description, "additionalProperties": value}


_NAMES = {"type": "array", "items": {"type": "string"}}
_LOCAL_PRIORITY_SCHEMA: dict[str, Any] = {
    "x-component": "BundleLocalPrioritisation",
    "type": "object",
    "description": "`direct` with `weights` (positive numbers in any unit, normalised), or `ahp`/`lpr` with "
    "`judgments` (every pair of items once)",
    "required": ["method"],
    "properties": {
        "method": {"$ref": "#/components/schemas/PrioritisationMethodEnum"},
        "weights": _numbers_by_name("{item: weight}"),
        "judgments": {"type": "array", "items": JUDGMENT_INPUT},
    },
}
# The approve-study/1 bundle (docs/formats.md): what export writes and import
# reads. The importer checks every rule and names the field it refuses; the
# schema gives the shape.
BUNDLE_SCHEMA = {
    "type": "object",
    "description": "An approve-study/1 bundle: a study's setup and every expert's inputs, "
    "by name. Import refuses a field not listed here.",
    "required": ["format", "title"],
    "additionalProperties": False,
    "properties": {
        "format": {"x-component": "BundleFormat", "type": "string", "enum": [bundles.FORMAT]},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "phase": {"$ref": "#/components/schemas/PhaseEnum"},
        "attribute_threshold": {"type": "integer", "minimum": 0, "description": "default 1"},
        "metric_threshold": {"type": "integer", "minimum": 0, "description": "default 0"},
        "quorum": {
            "type": "integer",
            "minimum": 0,
            "maximum": limits.QUORUM_MAX,
            "description": "default 0: the fewest experts who must take part to close the assessment",
        },
        "ahp_weighting": {"$ref": "#/components/schemas/AhpWeightingEnum"},
        "designer": {"type": "string", "description": "a username; through the API, your own or left out"},
        "experts": {**_NAMES, "description": "distinct usernames"},
        "absent": {
            "type": "object",
            "description": "optional, from voting on: {username: {absence, reason}}, the experts who do not take "
            "part (their inputs kept but not used)",
            "additionalProperties": {
                "x-component": "Absence",
                "type": "object",
                "required": ["absence", "reason"],
                "additionalProperties": False,
                "properties": {
                    "absence": {"type": "string", "enum": [str(absence) for absence in ABSENCES]},
                    "reason": {"type": "string", "minLength": 1, "maxLength": limits.ABSENCE_REASON_MAX_CHARS},
                },
            },
        },
        "attributes": {
            "type": "array",
            "items": {
                "x-component": "BundleAttribute",
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "kind": {"$ref": "#/components/schemas/AttributeKindEnum"},
                    "description": {"type": "string"},
                },
            },
        },
        "metrics": {
            "type": "array",
            "items": {
                "x-component": "BundleMetric",
                "type": "object",
                "required": ["name", "attribute"],
                "properties": {
                    "name": {"type": "string"},
                    "attribute": {"type": "string", "description": "the attribute's name"},
                    "better": {"$ref": "#/components/schemas/MetricBetterEnum"},
                    "unit": {"type": "string"},
                    "default_range": {
                        "type": "array",
                        "nullable": True,
                        "description": "[least acceptable, desired], or null",
                        "items": {"type": "number"},
                        "minItems": 2,
                        "maxItems": 2,
                    },
                },
            },
        },
        "candidates": {
            "type": "array",
            "items": {
                "x-component": "BundleCandidate",
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "measurements": _numbers_by_name("{metric: measured value}"),
                    "standard_errors": _numbers_by_name(
                        "{metric: standard error of the measured value}, only for metrics with one (optional)"
                    ),
                },
            },
        },
        "votes": {
            "x-component": "BundleVotes",
            "type": "object",
            "properties": {
                "attributes": _by_expert("{expert: the attributes voted for}", _NAMES),
                "metrics": _by_expert("{expert: the metrics voted for}", _NAMES),
            },
        },
        "priorities": _by_expert(
            "{expert: prioritisation of the selected attributes}",
            {
                **_LOCAL_PRIORITY_SCHEMA,
                "x-component": "BundlePrioritisation",
                "properties": {
                    **_LOCAL_PRIORITY_SCHEMA["properties"],
                    "metric_priorities": _by_expert(
                        "{attribute: prioritisation of its selected metrics}", _LOCAL_PRIORITY_SCHEMA
                    ),
                },
            },
        ),
        "ranges": _by_expert(
            "{expert: {metric: [least acceptable, desired]}}", {"$ref": "#/components/schemas/Ranges"}
        ),
        "ranges_to_confirm": _by_expert(
            "{expert: [metric, ...]}: the ranges in `ranges` still to confirm, their metric made elicited since "
            "(optional: written only while some are)",
            _NAMES,
        ),
        "peer_weights": _by_expert("{expert: {expert: weight}}", _numbers_by_name("{expert: weight}")),
        "prediction_sets": {
            "type": "array",
            "description": "the prediction sets the elicited metrics need, oldest first: each elicited metric's and "
            "each candidate's newest, whole (optional: written only with elicited metrics)",
            "items": {
                "x-component": "BundlePredictionSet",
                "type": "object",
                "required": ["name", "uploaded_at", "labels", "candidates"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string"},
                    "uploaded_at": {"type": "string", "format": "date-time"},
                    "positive": {"type": "string", "nullable": True, "description": "the positive label, or null"},
                    "labels": {**_strings("the labels, distinct, in the order the codes index"), "minItems": 1},
                    "folds": _strings("the folds the codes index"),
                    "context_columns": _strings("the names of the context:<name> columns"),
                    "contexts": {
                        "type": "array",
                        "description": "each context's values, one per context column, in the order the codes index",
                        "items": {"type": "array", "items": {"type": "string"}},
                    },
                    "candidates": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "x-component": "BundlePredictionArrays",
                            "type": "object",
                            "required": ["candidate", "arrays"],
                            "additionalProperties": False,
                            "properties": {
                                "candidate": {"type": "string", "description": "a candidate's name"},
                                "columns": _strings(
                                    "the optional arrays it holds (y_pred, score, proba, fold, time, context, instance)"
                                ),
                                "arrays": {
                                    "type": "string",
                                    "description": "base64 of the candidate's arrays as a NumPy .npz archive "
                                    "(read without pickle)",
                                },
                            },
                        },
                    },
                },
            },
        },
        "elicited_metrics": {
            "type": "object",
            "description": "{metric: how each expert's own value is elicited, and their answers} (optional: "
            "written only with elicited metrics)",
            "additionalProperties": {
                "x-component": "BundleElicitedMetric",
                "type": "object",
                "required": ["kind", "epsilon", "prediction_set", "reference_candidate"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"$ref": "#/components/schemas/ElicitationKindEnum"},
                    "epsilon": {"type": "number", "description": "the search's tolerance"},
                    "prediction_set": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "the index, in prediction_sets, of the set whose reference candidate's class "
                        "probabilities make the questions",
                    },
                    "reference_candidate": {"type": "string"},
                    "answers": _by_expert(
                        "{expert: the answers' codes in order, 1 the first outcome, 2 the second, 0 no preference} "
                        "(the weights are recomputed from them)",
                        {"type": "string", "pattern": "^[012]*$"},
                    ),
                },
            },
        },
        "rounds": {
            "type": "array",
            "description": "the study's revision rounds, in order (optional)",
            "items": {
                "type": "object",
                "x-component": "BundleRound",
                "required": ["number", "opened_at"],
                "additionalProperties": False,
                "properties": {
                    "number": {"type": "integer", "minimum": 1},
                    "message": {"type": "string"},
                    "opened_at": {"type": "string", "format": "date-time"},
                    "closed_at": {"type": ["string", "null"], "format": "date-time"},
                    "inputs": {
                        "type": "object",
                        "description": "the experts' inputs kept at the round's close (a run snapshot's layout "
                        "without the candidates)",
                    },
                    "responses": {
                        "type": "object",
                        "description": "{expert: {step: {action, reason}}}",
                        "additionalProperties": {"type": "object"},
                    },
                },
            },
        },
    },
}


class RangeToConfirmSerializer(serializers.Serializer):
    metric = StrictCharField()
    better = serializers.ChoiceField(choices=Direction.choices)
    unit = StrictCharField(allow_blank=True)
    range = serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2)
    own_values = serializers.DictField(child=serializers.FloatField(), allow_null=True)
    proposed = serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2, allow_null=True)


class RangesToConfirmSerializer(serializers.Serializer):
    to_confirm = RangeToConfirmSerializer(many=True)


class ExpertInputsSerializer(serializers.Serializer):
    votes = VotesSerializer()
    priorities = PrioritiesResponseSerializer(allow_null=True)
    ranges = serializers.DictField(child=serializers.ListField(child=serializers.FloatField()))
    peer_weights = serializers.DictField(child=serializers.FloatField())


class StudyVersionSerializer(serializers.Serializer):
    """A study's version (``Study.input_version``), for polling."""

    study = serializers.IntegerField()
    version = serializers.IntegerField(help_text="grows whenever anything in the study changes")
    phase = serializers.ChoiceField(choices=Phase.choices)
