"""Validation runs: a study's list with the launch, and one run's page.

While a run is queued or running, its status is polled every two seconds
(htmx) from a small partial that stops polling once nothing is active;
without JavaScript the pages offer a refresh link. Results are read from
what the run stored when it finished (``views.results``), never
recomputed on a page view."""

from typing import TYPE_CHECKING, TypedDict, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from workspace import services
from workspace.errors import PhaseConflict
from workspace.models import Study
from workspace.views.common import require_designer, signed_in_user, study_for_member

from .. import selectors as engine_selectors
from .. import services as engine_services
from ..models import Run
from . import results
from .common import run_for_member

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class PreviousSucceeded(TypedDict):
    previous_succeeded: int | None  # the succeeded run before it, to compare with (its id)
    previous_number: int | None  # ... and its number in the study


if TYPE_CHECKING:
    RunRow = WithAnnotations[Run, PreviousSucceeded]

ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


def _runs_context(study: Study) -> dict:
    runs = cast("list[RunRow]", list(engine_selectors.run_list(study=study)))  # previous_succeeded set below
    # Each succeeded run links to a comparison with the succeeded run before it.
    previous: Run | None = None
    for run in reversed(runs):
        before = previous if run.status == Run.Status.SUCCEEDED else None
        run.previous_succeeded = before.pk if before else None
        run.previous_number = before.number if before else None
        if run.status == Run.Status.SUCCEEDED:
            previous = run
    return {"study": study, "runs": runs, "polling": any(run.status in ACTIVE for run in runs)}


@login_required
@require_http_methods(["GET", "POST"])
def runs_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """The study's runs; POST (the designer) launches one."""
    study = study_for_member(request, study_id)
    refusal = None
    if request.method == "POST":
        require_designer(study, "launch validation runs")
        try:
            run = engine_services.run_launch(study=study, launched_by=signed_in_user(request))
        except PhaseConflict as error:
            refusal = str(error)
        else:
            messages.success(request, f"Run {run.number} was launched.")
            return redirect("run_page", run_id=run.pk)
    context = {
        **_runs_context(study),
        "study_tab": "runs",
        "refusal": refusal,
        "can_launch": services.phase_allows(study, services.Action.LAUNCH_RUN),
    }
    return render(request, "studyhome/runs.html", context, status=409 if refusal else 200)


@login_required
@require_GET
def runs_status(request: HttpRequest, study_id: int) -> HttpResponse:
    """The run table alone, polled by the runs page while a run is active."""
    study = study_for_member(request, study_id)
    return render(request, "studyhome/_runs_table.html", _runs_context(study))


def _run_context(request: HttpRequest, run: Run, study: Study) -> dict:
    context = {"run": run, "study": study, "polling": run.status in ACTIVE}
    if run.status == Run.Status.SUCCEEDED:
        context["results"] = results.results_context(
            run, candidate=request.GET.get("candidate"), page=request.GET.get("page")
        )
        context["comparable"] = list(engine_selectors.run_comparable_list(run=run))
        # The robustness analyses' sentences, if any ran (the page /runs/{run}/robustness/ has the rest).
        context["robustness"] = engine_selectors.analysis_sentences(run=run)
        # The consistency ratios recorded in the run's snapshot (absent from
        # runs launched before they were): never recomputed from live inputs.
        consistency = cast(dict, run.results).get("consistency")
        context["consistency"] = consistency
        flagged = [p["expert"] for p in (consistency or {}).get("prioritisations", []) if p["inconsistent"]]
        context["inconsistent_experts"] = list(dict.fromkeys(flagged))
    return context


@login_required
@require_GET
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    """One run: its status (live while queued or running), its error when it
    failed, its ranking and weights when it succeeded."""
    run, study = run_for_member(request, run_id, results="results_ranking")  # 25 candidates' entries of 1,000
    return render(request, "studyhome/run.html", {**_run_context(request, run, study), "study_tab": "runs"})


@login_required
@require_GET
def run_status(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's status alone, polled while it is queued or running: never
    its results (not even read). Once the run has succeeded the answer loads
    the run page's live part, results and all, once (htmx)."""
    try:
        run = engine_selectors.run_get(run_id=run_id, user=request.user, fields=())
    except Run.DoesNotExist:
        raise Http404("No such run.") from None
    study = study_for_member(request, run.study_id)
    context = {"run": run, "study": study, "polling": run.status in ACTIVE, "status_only": True}
    return render(request, "studyhome/_run_live.html", context)
