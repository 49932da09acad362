"""The runs' serializers: a run, and two runs compared."""

from rest_framework import serializers

from workspace.api.serializers import StrictCharField

from ..models import Run

# --- runs ----------------------------------------------------------------------------


class RunSerializer(serializers.ModelSerializer):
    study = serializers.IntegerField(source="study_id")
    number = serializers.IntegerField(
        read_only=True, help_text="the run's number within its study, 1 for its first run (the pages' 'Run 1')"
    )
    launched_by = StrictCharField(source="launched_by.username", allow_null=True, default=None)

    class Meta:
        model = Run
        fields = [
            "id",
            "number",
            "study",
            "status",
            "launched_by",
            "launched_at",
            "started_at",
            "finished_at",
            "duration_seconds",
            "attempts",
            "tolerance",
            "revision_round",
            "error",
        ]
        read_only_fields = fields


# --- two runs compared (engine.results_export.run_comparison) ---------------------------


class RankMoveSerializer(serializers.Serializer):
    """One candidate's place and scores in both runs (null where absent)."""

    name = StrictCharField()
    status = serializers.ChoiceField(
        choices=["up", "down", "same", "new", "gone"],
        help_text="up or down: it passed or was passed by other candidates (by CEF); same: neither (a tie "
        "forming or breaking may still change the rank number, see tie_only); new: only in the later run; "
        "gone: only in the earlier one",
    )
    places = serializers.IntegerField(help_text="places gained or lost (0 when new, gone or same)")
    tie_only = serializers.BooleanField(help_text="the rank number changed only through a tie")
    before_rank = serializers.IntegerField(allow_null=True)
    after_rank = serializers.IntegerField(allow_null=True)
    before_cef = serializers.FloatField(allow_null=True)
    after_cef = serializers.FloatField(allow_null=True)
    cef_delta = serializers.FloatField(allow_null=True, help_text="after_cef - before_cef")
    before_weighted = serializers.FloatField(allow_null=True, help_text="weighted score without the veto")
    after_weighted = serializers.FloatField(allow_null=True)
    weighted_delta = serializers.FloatField(allow_null=True, help_text="after_weighted - before_weighted")
    before_vetoed = serializers.BooleanField(allow_null=True)
    after_vetoed = serializers.BooleanField(allow_null=True)


class FigureDeltaSerializer(serializers.Serializer):
    """A weight or an expert's influence in both runs (null where absent)."""

    name = StrictCharField()
    before = serializers.FloatField(allow_null=True)
    after = serializers.FloatField(allow_null=True)
    delta = serializers.FloatField(allow_null=True, help_text="after - before; null when either is absent")
    changed = serializers.BooleanField(help_text="differs by more than float noise, or is in one run only")


class InputChangeSerializer(serializers.Serializer):
    what = StrictCharField(help_text="the input, in words")
    before = StrictCharField()
    after = StrictCharField()


class InputChangeGroupSerializer(serializers.Serializer):
    expert = StrictCharField(
        allow_null=True, help_text="whose input changed; null for the study's design (the designer's)"
    )
    changes = InputChangeSerializer(many=True)


class RunComparisonSerializer(serializers.Serializer):
    """Two runs of one study compared, the earlier always ``before``."""

    before = RunSerializer()
    after = RunSerializer()
    moved = serializers.IntegerField(help_text="candidates that moved up or down")
    metrics_are_attributes = serializers.BooleanField(
        help_text="every attribute has one metric in both runs, so metric_weights repeat attribute_weights"
    )
    candidates = RankMoveSerializer(many=True, help_text="in the later run's order, then the gone candidates")
    attribute_weights = FigureDeltaSerializer(many=True)
    metric_weights = FigureDeltaSerializer(many=True)
    expert_influence = FigureDeltaSerializer(many=True)
    changes = InputChangeGroupSerializer(
        many=True, help_text="what changed in the inputs between the snapshots: the design's first, then each expert's"
    )
    changes_total = serializers.IntegerField()
