"""How sure a run's ranking is (``/runs/{run}/robustness/``): each weight's
stability interval with its chart, the what-if sliders, and the run's
robustness analyses (leave one expert out, Monte Carlo), launched by the
designer and computed by the workers (``engine.analyses``), their progress
polled while they run.

Everything is computed from what the run stored (``engine.sensitivity``),
never from the live inputs; the what-if writes nothing."""

from typing import Any, cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from workspace import charts
from workspace.downloads import download
from workspace.errors import InvalidInput, PhaseConflict, RateLimited
from workspace.limits import ANALYSIS_SAMPLES_DEFAULT, ANALYSIS_SAMPLES_MAX
from workspace.views.common import form_add_service_errors, require_designer, signed_in_user, study_for_member

from .. import analyses as engine_analyses
from .. import analysis_export, sensitivity
from .. import selectors as engine_selectors
from ..models import Analysis, Run
from ..robustness import ranking_order

# Candidates drawn in each weight's chart (the run's best, and whoever
# overtakes the winner), and shown in the what-if ranking.
CHART_CANDIDATES = 5
WHAT_IF_ROWS = 10
# The Monte Carlo table: candidates (most often best first) and ranks shown.
ACCEPTABILITY_ROWS = 10
ACCEPTABILITY_RANKS = 5


class MonteCarloForm(forms.Form):
    samples = forms.IntegerField(
        min_value=1,
        max_value=ANALYSIS_SAMPLES_MAX,
        initial=ANALYSIS_SAMPLES_DEFAULT,
        help_text=f"From 1 to {ANALYSIS_SAMPLES_MAX:,}; more samples, smaller standard errors.",
    )
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=2**63 - 1,
        help_text=(
            "Leave empty for a new random seed; the seed used is recorded, and the same seed repeats the analysis "
            "exactly."
        ),
    )
    judgments = forms.BooleanField(required=False, initial=True, label="Experts' weights and judgments")
    peer_weights = forms.BooleanField(required=False, initial=True, label="Peer weights")
    ranges_percent = forms.FloatField(
        required=False,
        min_value=0,
        max_value=100,
        initial=0,
        label="Acceptable ranges, ± % of their width",
        help_text="0 keeps every range as the experts set it.",
    )
    measurements = forms.BooleanField(
        required=False,
        initial=False,
        label="Measurements",
        help_text="Bootstrap of the prediction sets for computed metrics; typed values with a standard error.",
    )


def _succeeded(request: HttpRequest, run_id: int) -> tuple[Run, Any]:
    """The run with what its stored ranking is read from (a thousand
    candidates' group scores, not their vetoes and sentences)."""
    try:
        run = engine_selectors.run_ranking_get(run_id=run_id, user=request.user)
    except Run.DoesNotExist:
        raise Http404("No such run.") from None
    study = study_for_member(request, run.study_id)
    if run.status != Run.Status.SUCCEEDED:
        raise Http404("This run has no results: robustness needs a succeeded run.")
    return run, study


def _weight_chart(stored: sensitivity.StoredRanking, report: sensitivity.WeightReport, index: int) -> charts.LineChart:
    cef = report.intercepts + report.slopes * report.share
    # the best first, equal CEFs (within TIE, METHOD.md 6.2) in the run's order
    shown = [int(i) for i in ranking_order(cef, cef)[:CHART_CANDIDATES]]
    for crossing in (report.below, report.above):
        if crossing and stored.candidates.index(crossing.overtaker) not in shown:
            shown.append(stored.candidates.index(crossing.overtaker))
    styles = ("solid", "dashed", "dotted")
    lines = [
        (
            stored.candidates[c],
            styles[n % len(styles)],
            [0.0, report.share, 1.0],
            [float(report.intercepts[c] + report.slopes[c] * t) for t in (0.0, report.share, 1.0)],
            True,
        )
        for n, c in enumerate(shown)
    ]
    high = max(max(line[3]) for line in lines) if lines else 1.0
    return charts.line_chart(
        chart_id=f"weight-{index}",
        title=f"CEF against {report.name}'s weight",
        description=(
            f"Each line is a candidate's CEF as {report.name}'s weight goes from 0 to 1 with the other weights "
            f"rescaled in proportion; the dots mark today's weight {report.share:.3f}. The shaded band is where "
            f"the winner stays first: {report.winner[0]:.3f} to {report.winner[1]:.3f}."
        ),
        lines=lines,
        x_range=(0.0, 1.0),
        y_range=(0.0, charts.nice_ceiling(high) if high > 0 else 1.0),
        x_label=f"{report.name}'s weight",
        y_label="CEF",
        shade=(report.winner[0], report.winner[1], "winner stays first"),
    )


def _weights_context(stored: sensitivity.StoredRanking) -> dict:
    reports = sensitivity.weight_reports(stored)
    leader = stored.candidates[0] if stored.candidates else ""
    attributes = [r for r in reports if r.kind == "attribute"]
    return {
        "attributes": [(report, _weight_chart(stored, report, i)) for i, report in enumerate(attributes)],
        "metrics": [r for r in reports if r.kind == "metric"],
        "sentence": sensitivity.fragility_sentence(reports, leader),
        "leader": leader,
    }


def _what_if_weights(request: HttpRequest, stored: sensitivity.StoredRanking) -> tuple[list[float], list[str]]:
    """The attribute weights asked for (``w0``, ``w1``, … in percent), the
    run's own where absent; errors name the field."""
    current = [100 * float(w) for w in stored.attribute_weights]
    wanted, errors = [], []
    for i, name in enumerate(stored.attributes):
        raw = request.GET.get(f"w{i}")
        if raw in (None, ""):
            wanted.append(current[i])
            continue
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not 0 <= value <= 100:
            errors.append(f"{name}: a weight from 0 to 100")
            value = current[i]
        wanted.append(value)
    if not errors:
        try:
            sensitivity.attribute_shares(wanted)  # (the API's check)
        except ValueError as error:
            errors.append(f"{str(error)[:1].upper()}{str(error)[1:]}.")
    return wanted, errors


def _what_if_context(request: HttpRequest, run: Run, stored: sensitivity.StoredRanking) -> dict:
    wanted, errors = _what_if_weights(request, stored)
    rows = sensitivity.what_if(stored, wanted)[:WHAT_IF_ROWS] if not errors else []
    try:
        shares = sensitivity.attribute_shares(wanted)
    except ValueError:  # (listed in errors already)
        shares = [0.0] * len(wanted)
    at_run = [100 * float(w) for w in stored.attribute_weights]
    return {
        "run": run,
        "sliders": [
            {"index": i, "name": name, "value": round(value, 1), "share": share, "run_value": round(at_run[i], 1)}
            for i, (name, value, share) in enumerate(zip(stored.attributes, wanted, shares, strict=True))
        ],
        "what_if_rows": rows,
        "what_if_errors": errors,
        "changed": any(request.GET.get(f"w{i}") not in (None, "") for i in range(len(stored.attributes))),
    }


def _analysis_context(run: Run) -> dict:
    latest = {kind: engine_selectors.analysis_latest(run=run, kind=kind) for kind in Analysis.Kind.values}
    monte_carlo = latest[Analysis.Kind.MONTE_CARLO]
    return {
        "leave_one_out": latest[Analysis.Kind.LEAVE_ONE_OUT],
        "monte_carlo": monte_carlo,
        **_acceptability_context(monte_carlo),
        "analyses": list(engine_selectors.analysis_list(run=run)),
    }


def _ranks_shown(analysis: Analysis | None) -> int:
    """How many ranks the Monte Carlo card shows: ACCEPTABILITY_RANKS, or
    fewer when the run has fewer candidates (four candidates have no rank 5)."""
    if analysis is None or not analysis.result:
        return ACCEPTABILITY_RANKS
    return min(ACCEPTABILITY_RANKS, len(cast(dict, analysis.result)["summary"]["candidates"]))


def _acceptability_context(analysis: Analysis | None) -> dict:
    """The Monte Carlo card's chart and table sizes: the ranks that exist."""
    ranks = _ranks_shown(analysis)
    return {
        "monte_carlo_chart": _acceptability_chart(analysis) if analysis is not None and analysis.result else None,
        "rows_shown": ACCEPTABILITY_ROWS,
        "ranks_shown": range(1, ranks + 1),
        "ranks_sliced": f":{ranks}",
    }


def _launch_refused(request: HttpRequest, run: Run, study: Any) -> dict:
    """For the designer, why each kind's launch button is disabled (the
    limit that a launch now would meet, named: engine.analyses.launch_refusal);
    a kind that may be launched is left out."""
    if not study.is_designer:
        return {"launch_refused": {}}
    user = signed_in_user(request)
    refusals = engine_analyses.launch_refusals(run=run, launched_by=user)
    return {"launch_refused": {kind: str(refusal) for kind, refusal in refusals.items() if refusal is not None}}


def _acceptability_chart(analysis: Analysis) -> charts.StackedBarChart:
    summary = cast(dict, analysis.result)["summary"]
    rows = summary["candidates"][:ACCEPTABILITY_ROWS]
    shown = _ranks_shown(analysis)
    # Only ranks that exist: with as many candidates as ranks shown there is no "or lower".
    rest = f"rank {shown + 1} or lower" if len(summary["candidates"]) > shown else None
    return charts.stacked_bar_chart(
        chart_id=f"acceptability-{analysis.pk}",
        title="How often each candidate takes each rank",
        description=(
            "One bar per candidate, the share of the samples in which it ranked first, second and so on"
            + (f"; the rest of the bar is {rest}." if rest else ".")
            + " The table below gives the numbers."
        ),
        labels=[row["name"] for row in rows],
        parts=[f"rank {r + 1}" for r in range(shown)],
        values=[row["ranks"][:shown] for row in rows],
        rest_label=rest,
    )


def _page_context(request: HttpRequest, run: Run, study: Any, form: MonteCarloForm | None = None) -> dict:
    stored = engine_selectors.run_stored_ranking(run=run)
    return {
        "run": run,
        "study": study,
        "study_tab": "runs",
        "weights": _weights_context(stored),
        **_what_if_context(request, run, stored),
        **_analysis_context(run),
        **_launch_refused(request, run, study),
        "form": form or MonteCarloForm(),
    }


@login_required
@require_http_methods(["GET", "POST"])
def robustness_page(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's robustness; POST (the designer) launches an analysis:
    ``kind=leave_one_out``, or a Monte Carlo with the form's choices."""
    run, study = _succeeded(request, run_id)
    form = None
    if request.method == "POST":
        require_designer(study, "launch robustness analyses")
        kind = request.POST.get("kind", Analysis.Kind.MONTE_CARLO)
        form = MonteCarloForm(request.POST) if kind == Analysis.Kind.MONTE_CARLO else None
        if form is None or form.is_valid():
            launched = _analysis_launch(request, run, kind, form)
            if launched is not None:
                return launched
    context = _page_context(request, run, study, form)
    status = 400 if form is not None and form.errors else 200
    return render(request, "studyhome/robustness.html", context, status=status)


def _analysis_launch(request: HttpRequest, run: Run, kind: str, form: MonteCarloForm | None) -> HttpResponse | None:
    """Launches the analysis (a Monte Carlo with the valid ``form``'s
    choices, else leave-one-out): the redirect to its card, or None with
    the refusal on the form or in a message (404 for a refused
    leave-one-out)."""
    data = form.cleaned_data if form else {}
    spec: dict[str, object] = {key: data[key] for key in ("judgments", "peer_weights", "measurements") if key in data}
    if form:
        spec["ranges_percent"] = data["ranges_percent"] or 0.0
    try:
        analysis = engine_analyses.analysis_launch(
            run=run,
            kind=kind,
            launched_by=signed_in_user(request),
            spec=spec,
            samples=data.get("samples"),
            seed=data.get("seed"),
        )
    except InvalidInput as error:
        if form is None:
            raise Http404(str(error)) from None
        form_add_service_errors(form, error)
    except (PhaseConflict, RateLimited) as error:  # RateLimited: a throttle or the budget
        messages.error(request, str(error))
    else:
        messages.success(request, f"{analysis.get_kind_display()} {analysis.pk} was launched.")
        return redirect(reverse("run_robustness", args=[run.pk]) + f"#analysis-{analysis.kind}")
    return None


@login_required
@require_GET
def robustness_what_if(request: HttpRequest, run_id: int) -> HttpResponse:
    """The ranking at the weights asked for (``w0``…, percent), from the
    run's stored scores; writes nothing. htmx swaps the fragment in; without
    JavaScript the form submits to the page, which shows the same."""
    run, study = _succeeded(request, run_id)
    context = _what_if_context(request, run, engine_selectors.run_stored_ranking(run=run))
    if request.headers.get("HX-Request"):
        return render(request, "studyhome/_what_if_ranking.html", context)
    query = request.META.get("QUERY_STRING", "")
    return redirect(reverse("run_robustness", args=[run.pk]) + (f"?{query}" if query else "") + "#what-if")


def _analysis_for_member(request: HttpRequest, run_id: int, analysis_id: int) -> tuple[Analysis, Any]:
    try:
        analysis = engine_selectors.analysis_get(analysis_id=analysis_id, user=request.user, run_id=run_id)
    except Analysis.DoesNotExist:
        raise Http404("No such analysis.") from None
    return analysis, study_for_member(request, analysis.run.study_id)


@login_required
@require_GET
def analysis_status(request: HttpRequest, run_id: int, analysis_id: int) -> HttpResponse:
    """One analysis's card, polled while it runs."""
    analysis, study = _analysis_for_member(request, run_id, analysis_id)
    context = {
        "analysis": analysis,
        "run": analysis.run,
        "study": study,
        "form": MonteCarloForm(),
        **_launch_refused(request, analysis.run, study),
        **_acceptability_context(analysis if analysis.kind == Analysis.Kind.MONTE_CARLO else None),
    }
    return render(request, f"studyhome/_analysis_{analysis.kind}.html", context)


@login_required
@require_POST
def analysis_cancel(request: HttpRequest, run_id: int, analysis_id: int) -> HttpResponse:
    analysis, study = _analysis_for_member(request, run_id, analysis_id)
    require_designer(study, "cancel robustness analyses")
    if engine_analyses.analysis_cancel(analysis=analysis):
        messages.success(request, f"{analysis.get_kind_display()} {analysis.pk} was cancelled.")
    else:
        messages.info(request, f"{analysis.get_kind_display()} {analysis.pk} had already finished.")
    return redirect(reverse("run_robustness", args=[run_id]) + f"#analysis-{analysis.kind}")


@login_required
@require_GET
def analysis_csv(request: HttpRequest, run_id: int, analysis_id: int) -> HttpResponseBase:
    analysis, _ = _analysis_for_member(request, run_id, analysis_id)
    if analysis.status != Analysis.Status.SUCCEEDED:
        raise Http404("This analysis has no result yet.")
    return download(
        analysis_export.analysis_csv(analysis).encode(),
        analysis_export.ANALYSIS_CSV_CONTENT_TYPE,
        filename=analysis_export.analysis_csv_filename(run_id, analysis),
        last_modified=analysis.finished_at,
    )
