"""REST API for how sure a run's ranking is (the page is
``/runs/{run}/robustness/``): the weights' stability, the what-if ranking,
and the run's robustness analyses (launch, status, cancel, CSV).

Members of the run's study read everything; only its designer launches and
cancels analyses. All of it is computed from what the run stored, never
from the live inputs, and the what-if writes nothing."""

from typing import Any, cast

from django.http import HttpResponseBase
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from workspace import selectors
from workspace.api.exceptions import Conflict
from workspace.api.idempotency import idempotent
from workspace.api.schema import error
from workspace.api.serializers import StrictCharField
from workspace.api.views import PaginatedListMixin, signed_in
from workspace.downloads import download
from workspace.errors import InvalidInput
from workspace.limits import ANALYSIS_SAMPLES_MAX
from workspace.models import Membership, Study
from workspace.selectors.studies import StudyWithRoles
from workspace.services.roles import require_role

from .. import analyses as engine_analyses
from .. import selectors as engine_selectors
from .. import sensitivity
from ..analysis_export import ANALYSIS_CSV_CONTENT_TYPE, analysis_csv, analysis_csv_filename
from ..analysis_words import with_words
from ..models import Analysis
from .runs import RunScoped

# --- serializers -------------------------------------------------------------------


class CrossingSerializer(serializers.Serializer):
    at = serializers.FloatField(help_text="the weight at which the overtaker passes the run's winner")
    overtaker = StrictCharField()
    overtaken = StrictCharField()


class WeightStabilitySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["attribute", "metric"])
    name = StrictCharField()
    share = serializers.FloatField(help_text="the weight in the run")
    ranking = serializers.ListField(
        child=serializers.FloatField(),
        min_length=2,
        max_length=2,
        help_text="[low, high]: the closed interval of the weight on which the whole ranking stays as it is",
    )
    winner = serializers.ListField(
        child=serializers.FloatField(),
        min_length=2,
        max_length=2,
        help_text="[low, high]: the closed interval on which the winner stays first",
    )
    below = CrossingSerializer(allow_null=True, help_text="who is first just below winner[0]; null when it is 0")
    above = CrossingSerializer(allow_null=True, help_text="who is first just above winner[1]; null when it is 1")


class RobustnessSerializer(serializers.Serializer):
    winner = StrictCharField(help_text="the run's first candidate")
    sentence = StrictCharField(help_text="the most fragile weight, in words")
    most_fragile = StrictCharField(allow_null=True, help_text="its name; null when no weight changes the winner")
    weights = WeightStabilitySerializer(many=True, help_text="every attribute weight, then every metric weight")


class WhatIfRequestSerializer(serializers.Serializer):
    attribute_weights = serializers.DictField(
        child=serializers.FloatField(min_value=0),
        help_text="weights of selected attributes by name, non-negative, taken relative to each other; "
        "an attribute left out keeps its weight in the run",
    )


class WhatIfRowSerializer(serializers.Serializer):
    name = StrictCharField()
    rank = serializers.IntegerField()
    run_rank = serializers.IntegerField(help_text="its rank in the run")
    cef = serializers.FloatField()
    vetoed = serializers.BooleanField()


class WhatIfSerializer(serializers.Serializer):
    attribute_weights = serializers.DictField(
        child=serializers.FloatField(), help_text="the weights used, summing to 1"
    )
    candidates = WhatIfRowSerializer(many=True, help_text="best first")


class AnalysisLaunchSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Analysis.Kind.choices)
    samples = serializers.IntegerField(
        required=False, min_value=1, max_value=ANALYSIS_SAMPLES_MAX, help_text="Monte Carlo only; default 2000"
    )
    seed = serializers.IntegerField(
        required=False, min_value=0, max_value=2**63 - 1, help_text="Monte Carlo only; a random one when absent"
    )
    judgments = serializers.BooleanField(required=False, help_text="Monte Carlo: sample the experts' judgments")
    peer_weights = serializers.BooleanField(required=False, help_text="Monte Carlo: sample the peer weights")
    ranges_percent = serializers.FloatField(
        required=False, min_value=0, max_value=100, help_text="Monte Carlo: move each range bound by up to ± this %"
    )
    measurements = serializers.BooleanField(required=False, help_text="Monte Carlo: sample the measurements")


class AnalysisSerializer(serializers.ModelSerializer):
    run = serializers.IntegerField(source="run_id")
    launched_by = StrictCharField(source="launched_by.username", allow_null=True, default=None)
    summary = serializers.SerializerMethodField(help_text="the result, once succeeded; null before")

    class Meta:
        model = Analysis
        fields = [
            "id",
            "run",
            "kind",
            "status",
            "spec",
            "seed",
            "units",
            "units_done",
            "launched_by",
            "launched_at",
            "finished_at",
            "error",
            "summary",
        ]
        read_only_fields = fields

    def get_summary(self, analysis: Analysis) -> dict[str, Any] | None:
        if analysis.status != Analysis.Status.SUCCEEDED:
            return None
        # The stored numbers and names, with the sentences written now (engine.analysis_words).
        return with_words(analysis.kind, cast(dict, analysis.result)["summary"])


# --- views ---------------------------------------------------------------------------


def _pair(interval: tuple[float, float]) -> list[float]:
    return [interval[0], interval[1]]


def _crossing(crossing: sensitivity.Crossing | None) -> dict | None:
    return None if crossing is None else vars(crossing)


class RunRobustnessView(RunScoped):
    schema_tag = "runs"

    @extend_schema(
        summary="How far each weight of a run can move before its ranking changes", responses=RobustnessSerializer
    )
    def get(self, request: Request, run_id: int) -> Response:
        """Each weight's stability intervals (METHOD.md 8,
        ``engine.robustness.weight_stability``): attribute weights, then
        metric weights, with who overtakes the winner beyond each end."""
        stored = engine_selectors.run_stored_ranking(run=self.succeeded_run(fields=("results",)))
        reports = sensitivity.weight_reports(stored)
        fragile = sensitivity.most_fragile(reports)
        leader = stored.candidates[0] if stored.candidates else ""
        body = {
            "winner": leader,
            "sentence": sensitivity.fragility_sentence(reports, leader),
            "most_fragile": fragile.name if fragile else None,
            "weights": [
                {
                    "kind": report.kind,
                    "name": report.name,
                    "share": report.share,
                    "ranking": _pair(report.ranking),
                    "winner": _pair(report.winner),
                    "below": _crossing(report.below),
                    "above": _crossing(report.above),
                }
                for report in reports
            ],
        }
        return Response(RobustnessSerializer(body).data)


class RunWhatIfView(RunScoped):
    schema_tag = "runs"

    @extend_schema(
        summary="Rank a run's candidates at other attribute weights (writes nothing)",
        request=WhatIfRequestSerializer,
        responses={200: WhatIfSerializer},
    )
    def post(self, request: Request, run_id: int) -> Response:
        """The ranking at other attribute weights, from the run's stored
        scores: every candidate best first. Writes nothing."""
        stored = engine_selectors.run_stored_ranking(run=self.succeeded_run(fields=("results",)))
        serializer = WhatIfRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        wanted = serializer.validated_data["attribute_weights"]
        unknown = sorted(set(wanted) - set(stored.attributes))
        if unknown:
            raise InvalidInput(
                {f"attribute_weights.{name}": "not a selected attribute of this run" for name in unknown}
            )
        weights = [
            wanted.get(name, float(current))
            for name, current in zip(stored.attributes, stored.attribute_weights, strict=True)
        ]
        try:
            shares = sensitivity.attribute_shares(weights)
        except ValueError as error:
            raise InvalidInput({"attribute_weights": str(error)}) from None
        rows = sensitivity.what_if(stored, weights)
        body = {
            "attribute_weights": dict(zip(stored.attributes, shares, strict=True)),
            "candidates": [vars(row) for row in rows],
        }
        return Response(WhatIfSerializer(body).data)


class RunStudyScoped(RunScoped):
    """A run's view that also needs the requester's roles in its study."""

    schema_tag = "runs"

    def study_of_run(self) -> StudyWithRoles:
        try:
            return selectors.study_get(study_id=self.run().study_id, user=self.request.user)
        except Study.DoesNotExist:
            raise exceptions.NotFound("No such run.") from None

    def require_designer(self, study: StudyWithRoles, action: str) -> None:
        require_role(study=study, user=self.request.user, role=Membership.Role.DESIGNER, action=action)


class RunAnalysesView(RunStudyScoped, PaginatedListMixin):
    @extend_schema(summary="List a run's robustness analyses", responses=AnalysisSerializer(many=True))
    def get(self, request: Request, run_id: int) -> Response:
        """The run's robustness analyses, newest first (each with its
        summary once succeeded)."""
        run = self.run()
        return self.paginated(engine_selectors.analysis_list(run=run, with_result=True), AnalysisSerializer)

    @extend_schema(
        summary="Launch a robustness analysis of a run (designer)",
        request=AnalysisLaunchSerializer,
        responses={
            202: AnalysisSerializer,
            409: error(
                "The run has not succeeded, or a cap on queued or running analyses (per run, study or user) is "
                "reached (`analysis_limit`); the detail names the cap and its setting."
            ),
            429: error(
                "Too many launches by you in the last hour, or the study's Monte Carlo samples of the last hour "
                "would exceed its budget; the detail names the limit and its setting."
            ),
        },
    )
    @idempotent
    def post(self, request: Request, run_id: int) -> Response:
        """Launch a robustness analysis of the succeeded run (the designer):
        ``leave_one_out``, or ``monte_carlo`` with what to sample. 202 with
        its ``Location``; poll it until ``succeeded``, ``failed`` or
        ``cancelled``. Bounded (docs/api.md, "Robustness analyses"): at most
        ``ANALYSES_ACTIVE_PER_RUN_MAX`` (3) queued or running per run,
        ``ANALYSES_ACTIVE_PER_STUDY_MAX`` (10) per study and
        ``ANALYSES_ACTIVE_PER_USER_MAX`` (10) per user, else 409
        ``analysis_limit``; ``ANALYSIS_LAUNCHES_PER_USER_PER_HOUR`` (30)
        launches per user and ``ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR``
        (500,000) Monte Carlo samples per study in the last hour, else 429
        with ``Retry-After``."""
        self.require_designer(self.study_of_run(), "launch robustness analyses")
        serializer = AnalysisLaunchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        kind = data.pop("kind")
        samples, seed = data.pop("samples", None), data.pop("seed", None)
        run = self.succeeded_run(fields=("results",))
        analysis = engine_analyses.analysis_launch(
            run=run, kind=kind, launched_by=signed_in(request), spec=data, samples=samples, seed=seed
        )
        analysis = engine_selectors.analysis_get(analysis_id=analysis.pk, user=request.user)
        location = request.build_absolute_uri(reverse("api:analysis-detail", kwargs={"analysis_id": analysis.pk}))
        return Response(
            AnalysisSerializer(analysis).data, status=status.HTTP_202_ACCEPTED, headers={"Location": location}
        )


class AnalysisScoped(RunStudyScoped):
    _analysis: Analysis

    def analysis(self) -> Analysis:
        if not hasattr(self, "_analysis"):
            try:
                self._analysis = engine_selectors.analysis_get(
                    analysis_id=self.kwargs["analysis_id"], user=self.request.user
                )
            except Analysis.DoesNotExist:
                raise exceptions.NotFound("No such analysis.") from None
            self.kwargs["run_id"] = self._analysis.run_id
        return self._analysis


class AnalysisDetailView(AnalysisScoped):
    @extend_schema(summary="Get a robustness analysis: status, progress, summary", responses=AnalysisSerializer)
    def get(self, request: Request, analysis_id: int) -> Response:
        """An analysis's status, progress (``units_done`` of ``units``) and,
        once succeeded, its summary."""
        return Response(AnalysisSerializer(self.analysis()).data)


class AnalysisCancelView(AnalysisScoped):
    @extend_schema(summary="Cancel a robustness analysis (designer)", request=None, responses={200: AnalysisSerializer})
    def post(self, request: Request, analysis_id: int) -> Response:
        """Cancel an unfinished analysis (the designer): chunks not yet
        started never run. 409 when it has already finished."""
        analysis = self.analysis()
        self.require_designer(self.study_of_run(), "cancel robustness analyses")
        if not engine_analyses.analysis_cancel(analysis=analysis):
            raise Conflict(f"Analysis {analysis.pk} has already {analysis.status}.", code="analysis_finished")
        return Response(
            AnalysisSerializer(engine_selectors.analysis_get(analysis_id=analysis.pk, user=request.user)).data
        )


class AnalysisCsvView(AnalysisScoped):
    @extend_schema(
        summary="Download a robustness analysis's summary as CSV",
        operation_id="v1_analyses_result_csv_retrieve",
        responses={(200, "text/csv"): OpenApiResponse(description="the summary, one row per candidate or expert")},
    )
    def get(self, request: Request, analysis_id: int) -> HttpResponseBase:
        """A succeeded analysis's summary as CSV: Monte Carlo, one row per
        candidate (probability of being best with its standard error, of
        each rank, central weights); leave-one-out, one row per expert."""
        analysis = self.analysis()
        if analysis.status != Analysis.Status.SUCCEEDED:
            raise Conflict(
                f"Analysis {analysis.pk} is {analysis.status}; its CSV exists once it has succeeded.",
                code="analysis_not_finished",
            )
        return download(
            analysis_csv(analysis).encode(),
            ANALYSIS_CSV_CONTENT_TYPE,
            filename=analysis_csv_filename(analysis.run_id, analysis),
            last_modified=analysis.finished_at,
        )
