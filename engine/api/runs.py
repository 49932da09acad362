"""REST API v1 for validation runs (FORMATS.md, "REST API"): launch and
list a study's runs, read one run, its results (JSON and CSV), one
candidate's individual scores, and two runs compared. Members read; the
designer launches. An outsider never learns a run exists."""

from collections.abc import Iterable
from typing import NoReturn

from django.conf import settings
from django.http import HttpResponse, HttpResponseBase
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from workspace.api.exceptions import Conflict
from workspace.api.idempotency import idempotent
from workspace.api.schema import VALIDATION_ERROR, error, ref
from workspace.api.throttling import (
    INDIVIDUAL_SCOPE,
    FailOpenScopedRateThrottle,
    RateLimitHeadersMixin,
    individual_scores_refusal,
)
from workspace.api.views import PaginatedListMixin, StudyScoped, signed_in
from workspace.downloads import download, not_modified

from .. import results_export, selectors
from .. import services as engine_services
from ..models import Run
from ..results_export import RESULTS_CSV_CONTENT_TYPE
from . import serializers as s

# --- runs ------------------------------------------------------------------------------


class RunListView(StudyScoped, PaginatedListMixin, APIView):
    schema_tag = "runs"

    @extend_schema(summary="List the study's runs", responses=s.RunSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """The study's validation runs, newest first."""
        return self.paginated(selectors.run_list(study=self.study()), s.RunSerializer)

    @extend_schema(summary="Launch a validation run", request=None, responses={202: s.RunSerializer})
    @idempotent
    def post(self, request: Request, study_id: int) -> Response:
        """Launch a validation run of the closed study. 202 with the run's
        ``Location``; poll it until ``succeeded`` or ``failed``."""
        self.require_designer("launch validation runs")
        run = engine_services.run_launch(study=self.study(), launched_by=signed_in(request))
        # Read again: an eager worker may already have finished it.
        run = selectors.run_get(run_id=run.pk, user=request.user, fields=())
        location = request.build_absolute_uri(reverse("api:run-detail", kwargs={"run_id": run.pk}))
        return Response(s.RunSerializer(run).data, status=status.HTTP_202_ACCEPTED, headers={"Location": location})


class RunScoped(APIView):
    _run: Run

    def run(self, *, fields: Iterable[str] = ()) -> Run:
        """The run, if the user is a member of its study (404 otherwise),
        with ``fields`` of its JSON (``selectors.RUN_FIELDS``; default
        neither)."""
        if not hasattr(self, "_run"):
            try:
                self._run = selectors.run_get(run_id=self.kwargs["run_id"], user=self.request.user, fields=fields)
            except Run.DoesNotExist:
                raise exceptions.NotFound("No such run.") from None
        return self._run

    def succeeded_run(self, *, fields: Iterable[str] = ()) -> Run:
        run = self.run(fields=fields)
        if run.status != Run.Status.SUCCEEDED:
            detail = f"{run.label} is {run.status}; results exist once it has succeeded."
            if run.status == Run.Status.FAILED:
                detail += f" It failed: {run.error}"
            raise Conflict(detail, code="run_not_finished")
        return run


class RunDetailView(RunScoped, APIView):
    schema_tag = "runs"

    @extend_schema(summary="Get a run's status, timings and error", responses=s.RunSerializer)
    def get(self, request: Request, run_id: int) -> Response:
        """A run's status, timings and error."""
        return Response(s.RunSerializer(self.run()).data)


def _flag(request: Request, name: str) -> bool:
    """A boolean query parameter: ``true`` or ``false`` (default false)."""
    value = request.query_params.get(name, "false")
    if value not in ("true", "false"):
        raise exceptions.ValidationError({name: [f"must be true or false, got {value!r}"]})
    return value == "true"


def _cursor(request: Request, individual: bool) -> int:
    """``?cursor=``: the position of a page's first candidate in rank order
    (the ``next`` link's), 0 by default; only with individual scores."""
    value = request.query_params.get("cursor")
    if value is None:
        return 0
    if not individual:
        raise exceptions.ValidationError({"cursor": ["only with individual=true (the document alone is one page)"]})
    if not (value.isascii() and value.isdigit()) or len(value) > 9:
        raise exceptions.ValidationError({"cursor": [f"must be a whole number from 0, got {value[:40]!r}"]})
    return int(value)


class RunResultsView(RateLimitHeadersMixin, RunScoped, APIView):
    # Only the pages of individual scores are throttled (get_throttles): the
    # document alone is its stored text, served without parsing it.
    throttle_classes = [FailOpenScopedRateThrottle]
    throttle_scope = INDIVIDUAL_SCOPE
    schema_tag = "runs"

    def get_throttles(self) -> list[BaseThrottle]:
        if self.request.query_params.get("individual") != "true":
            return []
        return super().get_throttles()

    def throttled(self, request: Request, wait: float | None) -> NoReturn:
        raise exceptions.Throttled(wait=wait, detail=individual_scores_refusal())

    @extend_schema(
        summary="Get a run's results document",
        parameters=[
            OpenApiParameter(
                "individual",
                bool,
                default=False,
                description="add every candidate's individual scores, expert x metric; the document is then served "
                "in pages of at most `RESULTS_INDIVIDUAL_PAGE_MAX_BYTES` (2 MiB) holding whole candidates in rank "
                'order, the next page linked by the `Link` header (`rel="next"`, absent on the last page), and '
                "each user may ask for `RESULTS_INDIVIDUAL_THROTTLE_RATE` pages (60 a minute; beyond, 429). One "
                "candidate's are at candidates/{name}/scores/",
            ),
            OpenApiParameter(
                "cursor",
                int,
                description="with individual=true: the position (from 0, in rank order) of the page's first "
                "candidate, as the `Link` header's next URL gives it; default 0, the first page",
            ),
        ],
        responses={
            200: OpenApiResponse(
                response=ref("ResultsDocument"),
                description="an approve-results/1 document; with individual=true, one page of it: every key, "
                "the candidates those of the page",
            ),
            400: VALIDATION_ERROR,
            429: error("Too many pages of individual scores: try again after `Retry-After` seconds."),
        },
    )
    def get(self, request: Request, run_id: int) -> HttpResponseBase:
        """The ``approve-results/1`` document (409 until the run has succeeded),
        as compact JSON: the same bytes ``run_validation --json`` prints.
        With individual scores, in pages of whole candidates (a page that
        is not the last links to the next in ``Link``), their bytes those
        of ``run_validation --json --individual`` when one page holds all."""
        individual = _flag(request, "individual")
        cursor = _cursor(request, individual)
        if not individual:
            # The document's stored text alone, read only when the client
            # does not have this version already (304).
            run = self.succeeded_run()
            tag = selectors.results_version(run)
            return not_modified(request, etag=tag, last_modified=run.finished_at) or download(
                selectors.results_json_read(run=run), "application/json", etag=tag, last_modified=run.finished_at
            )
        # The individual scores are computed from the snapshot and the results
        # (without the stored text of the document).
        run = self.succeeded_run(fields=("snapshot", "results_core"))
        try:
            page, following = selectors.results_individual_page(
                run=run, start=cursor, max_bytes=settings.RESULTS_INDIVIDUAL_PAGE_MAX_BYTES
            )
        except ValueError as error:
            raise exceptions.ValidationError({"cursor": [str(error)]}) from None
        response = HttpResponse(page, content_type="application/json")
        if following is not None:
            url = request.build_absolute_uri(request.path) + f"?individual=true&cursor={following}"
            response["Link"] = f'<{url}>; rel="next"'
        return response


class CandidateScoresView(RunScoped, APIView):
    schema_tag = "runs"

    @extend_schema(
        summary="Get one candidate's individual scores in a run",
        responses={200: OpenApiResponse(response=ref("CandidateScores"))},
    )
    def get(self, request: Request, run_id: int, name: str) -> Response:
        """One candidate's individual scores, ``{expert: {metric: score}}``,
        computed from the run's snapshot for that candidate only."""
        run = self.succeeded_run(fields=("snapshot",))
        scores = selectors.candidate_individual_scores(run=run, candidate_name=name)
        if scores is None:
            raise exceptions.NotFound(f"No candidate named {name!r} in this run.")
        return Response(scores)


class _IgnoreAccept(DefaultContentNegotiation):
    """Answers in JSON whatever ``Accept`` asks for (the CSV itself is
    written by the view): ``Accept: text/csv`` is not refused with 406, and
    an error is still the JSON the schema documents."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))  # the view's one renderer
        return first, first.media_type


class RunResultsCsvView(RunScoped, APIView):
    schema_tag = "runs"
    content_negotiation_class = _IgnoreAccept

    @extend_schema(
        summary="Download a run's results as CSV",
        # the path's ".csv" would put a dot in the generated name
        operation_id="v1_runs_results_csv_retrieve",
        responses={
            (200, "text/csv"): OpenApiResponse(
                response={"type": "string"},
                description="One row per candidate in rank order (the page's download, byte for byte: a UTF-8 "
                "byte-order mark, then rank, name, cef, weighted_score, vetoed, veto_reasons and each metric's "
                'group score); `Content-Disposition: attachment; filename="approve-run-{id}-results.csv"`',
            ),
            409: error("The run has not succeeded (yet); the detail says why."),
        },
    )
    def get(self, request: Request, run_id: int) -> HttpResponseBase:
        """The results as CSV: the same bytes as the run page's download
        ``/runs/{run}/results.csv`` (409 until the run has succeeded)."""
        run = self.succeeded_run(fields=("document",))
        return download(
            results_export.results_csv_bytes(run=run),
            RESULTS_CSV_CONTENT_TYPE,
            filename=results_export.results_csv_filename(run),
            last_modified=run.finished_at,
        )


class RunCompareView(APIView):
    schema_tag = "runs"

    @extend_schema(
        summary="Compare two runs of one study (rank moves, deltas, changed inputs)",
        responses={
            200: OpenApiResponse(
                response=s.RunComparisonSerializer, description="the two runs compared, the earlier as before"
            ),
            400: OpenApiResponse(
                response=VALIDATION_ERROR.response,
                description="The two runs belong to different studies (`other_id`: the reason).",
            ),
            409: error("A run compared with itself, or one of the two has no results (not succeeded)."),
        },
    )
    def get(self, request: Request, run_id: int, other_id: int) -> Response:
        """Two runs of one study compared, as the page
        ``/runs/{run}/compare/{other}/`` shows them: the earlier run is
        always ``before``, whichever order the two are given in. Each
        candidate's rank move (by the candidates it passed), CEF and
        weighted-score deltas, the weights' and influences' deltas, and the
        inputs that changed between the two snapshots, grouped by expert.
        404 unless you are a member of both runs' studies."""
        try:
            first, second = selectors.run_pair_get(run_id=run_id, other_id=other_id, user=request.user)
        except Run.DoesNotExist:
            raise exceptions.NotFound("No such run.") from None
        try:
            compared = results_export.run_comparison(first, second)
        except results_export.ComparisonRefused as refusal:
            if refusal.status == status.HTTP_400_BAD_REQUEST:
                raise exceptions.ValidationError({"other_id": [refusal.message]}) from None
            raise Conflict(refusal.message, code=refusal.code) from None
        comparison = compared.comparison
        groups: dict[str | None, list] = {}
        for change in comparison.changes:
            groups.setdefault(change.who, []).append(change)
        body = {
            "before": compared.before,
            "after": compared.after,
            "moved": comparison.moved,
            "metrics_are_attributes": comparison.metrics_are_attributes,
            "candidates": comparison.candidates,
            "attribute_weights": comparison.attribute_weights,
            "metric_weights": comparison.metric_weights,
            "expert_influence": comparison.expert_influence,
            "changes": [{"expert": who, "changes": changes} for who, changes in groups.items()],
            "changes_total": len(comparison.changes),
        }
        return Response(s.RunComparisonSerializer(body).data)
