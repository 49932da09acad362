"""A succeeded run's results as its page shows them, its downloads, one
candidate's breakdown, and two runs of a study compared.

Everything is read from what the run stored when it finished (its results,
and the parts of its snapshot that sentences and individual scores need);
the evaluation is never recomputed on a page view. A candidate's k x n
individual scores are worked out for the one candidate shown, from its
snapshot, exactly as the API's scores endpoint does.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from workspace import charts
from workspace.downloads import download, not_modified
from workspace.models import Study
from workspace.views.common import study_for_member

from .. import selectors as engine_selectors
from .. import snapshot as engine_snapshot
from ..explain import MetricInfo, influence_sentence, join_names, percent, quantity, veto_sentences
from ..models import Run
from ..results_export import (
    RESULTS_CSV_CONTENT_TYPE,
    ComparisonRefused,
    candidate_scores_csv_bytes,
    candidate_scores_csv_filename,
    comparison_csv_bytes,
    comparison_csv_filename,
    metric_infos,
    results_csv_bytes,
    results_csv_filename,
    run_comparison,
)
from .common import run_for_member

# Candidates per page of the ranking (and bars in its chart).
RANKING_PAGE_SIZE = 25

SCORE_SERIES = (charts.Series("CEF", "solid"), charts.Series("Weighted score without the veto", "hatched"))


# --- the ranking -------------------------------------------------------------------------


def _first_words(candidates: list[dict]) -> str:
    """Who ranks first, in a sentence; several when their CEFs are equal
    (within TIE, METHOD.md 6.2: they share the rank)."""
    if not candidates:
        return ""
    first = [candidate["name"] for candidate in candidates if candidate["rank"] == 1]
    cef = f"{candidates[0]['cef']:.4f}"
    if len(first) > 1:
        return f"{', '.join(first[:-1])} and {first[-1]} share the first rank with a CEF of {cef}. "
    return f"{candidates[0]['name']} ranks first with a CEF of {cef}. "


def _ranking(stored: list[dict], document: dict, infos: dict[str, MetricInfo], page_number: str | int | None) -> dict:
    """The ranking's page ``page_number``: ``stored`` is every candidate as
    the run stored them (rank order), ``document`` the results document with
    at least the candidates of that page."""
    candidates = stored
    page = Paginator(candidates, RANKING_PAGE_SIZE).get_page(page_number)
    # Sentences for the page shown only: a ranking may hold a thousand candidates.
    of = {candidate["name"]: candidate for candidate in document["candidates"]}
    shown = [
        {**of[entry["name"]], "veto_sentences": veto_sentences(entry["name"], of[entry["name"]]["vetoes"], infos)}
        for entry in page.object_list
    ]
    vetoed = sum(1 for candidate in candidates if candidate["vetoed"])
    description = (
        f"For each candidate ranked {page.start_index()} to {page.end_index()} of {len(candidates)}, a solid bar "
        "for its CEF and a hatched bar for its weighted score without the veto, on a scale from 0 to 1. "
    )
    description += _first_words(candidates)
    if vetoed:
        description += f"{vetoed} vetoed candidate{'s have' if vetoed != 1 else ' has'} a CEF of 0. "
    description += "The ranking table lists the same numbers."
    chart = charts.bar_chart(
        chart_id="chart-scores",
        title="CEF and weighted score per candidate",
        description=description,
        labels=[c["name"] for c in shown],
        series=SCORE_SERIES,
        values=[[c["cef"] for c in shown], [c["weighted_score"] for c in shown]],
        notes=["vetoed" if c["vetoed"] else "" for c in shown],
    )
    return {"page": page, "candidates": shown, "chart": chart, "count": len(candidates)}


# --- weights and their spread -------------------------------------------------------------


def _weights_block(
    *,
    chart_id: str,
    what: str,
    names: list[str],
    consensus: dict,
    experts: list[str],
    rows: list | None,
    spread: dict | None,
    indicator: dict | None,
) -> dict:
    """Consensus weights of ``names`` with, when the run stored them, each
    expert's own (``rows``: k lists in the order of ``names``) as a dot plot
    and a table, the spread of each item's weights and the group's
    consensus indicator."""
    block: dict[str, Any] = {
        "what": what,
        "names": names,
        "consensus": [consensus[name] for name in names],
        "chart": None,
    }
    block["spread"] = [spread.get(name) for name in names] if spread else None
    block["consensus_indicator"] = indicator
    if not rows:
        return block
    individual = [[(expert, row[j]) for expert, row in zip(experts, rows, strict=True)] for j in range(len(names))]
    widest = max(range(len(names)), key=lambda j: max(v for _, v in individual[j]) - min(v for _, v in individual[j]))
    low = min(v for _, v in individual[widest])
    high = max(v for _, v in individual[widest])
    block["chart"] = charts.dot_plot(
        chart_id=chart_id,
        title=f"Each expert's {what} weights beside the consensus",
        description=(
            f"For each {what}, a hollow circle per expert at the weight they gave it and a filled diamond at the "
            f"consensus weight. The experts disagree most on {names[widest]}, weighted from {low:.2f} to "
            f"{high:.2f}. The table below lists every expert's weights."
        ),
        labels=names,
        individual=individual,
        group=block["consensus"],
        dot_legend="an expert's weight",
        marker_legend="consensus",
    )
    block["experts"] = [{"name": expert, "weights": row} for expert, row in zip(experts, rows, strict=True)]
    return block


def _weights(document: dict, results: dict) -> dict:
    disagreement = document.get("disagreement") or {}
    blocks = {
        what: _weights_block(
            chart_id=f"chart-{what}-weights",
            what=what,
            names=list(document[f"{what}_weights"]),
            consensus=document[f"{what}_weights"],
            experts=results["experts"],
            rows=results.get(f"expert_{what}_weights"),
            spread=disagreement.get(f"{what}_weights"),
            indicator=(disagreement.get("consensus") or {}).get(f"{what}_weights"),
        )
        for what in ("attribute", "metric")
    }
    attributes, metrics = blocks["attribute"], blocks["metric"]
    # With one metric per attribute the two are the same numbers: one is enough.
    same = attributes["consensus"] == metrics["consensus"] and len(attributes["names"]) == len(metrics["names"])
    return {"attributes": attributes, "metrics": None if same else metrics}


# --- influence ----------------------------------------------------------------------------


# Bars in the influence chart: beyond this many experts it shows the most
# influential (the table beside it lists everyone).
INFLUENCE_BARS = 30


def _influence(document: dict) -> dict:
    influence = document["expert_influence"]
    names = list(influence)
    equal = 1 / len(names)
    high = charts.nice_ceiling(max([*influence.values(), equal]) * 1.05)
    strongest = max(names, key=influence.get)
    title, which = "Expert influence", "A bar per expert"
    if len(names) > INFLUENCE_BARS:
        names = sorted(names, key=influence.get, reverse=True)[:INFLUENCE_BARS]
        title = f"Expert influence: the {INFLUENCE_BARS} most influential of {len(influence)} experts"
        which = f"A bar for each of the {INFLUENCE_BARS} most influential experts"
    chart = charts.bar_chart(
        chart_id="chart-influence",
        title=title,
        description=(
            f"{which} for the share of the outcome their opinions carry; a dashed line marks an equal share "
            f"of {percent(equal)}. {strongest} carries the most, {percent(influence[strongest])}. "
            "The table beside the chart lists every share."
        ),
        labels=names,
        series=[charts.Series("Influence", "solid")],
        values=[[influence[name] for name in names]],
        high=high,
        value_format="{:.4f}",
        reference=(equal, "equal share"),
    )
    return {"chart": chart, "sentence": influence_sentence(influence), "rows": list(influence.items())}


# --- one candidate ---------------------------------------------------------------------------


# Experts per page of a candidate's heat table (its CSV download has them all).
HEAT_PAGE_SIZE = 25


def candidate_breakdown(
    document: dict, score_inputs: dict, name: str, infos: dict[str, MetricInfo], page: str | int | None = None
) -> dict | None:
    """Why one candidate scored as it did: per metric its measured value, the
    consensus weight, the group score, the contribution to the weighted
    score and the share of experts vetoing; and each expert's individual
    score (METHOD.md 4), computed from the run's snapshot for this candidate
    only, ``HEAT_PAGE_SIZE`` experts a page (``page``). None if the run has
    no such candidate."""
    entry = next((c for c in document["candidates"] if c["name"] == name), None)
    if entry is None:
        return None
    metrics = document["metrics"]
    inputs = engine_snapshot.ScoreInputs(score_inputs)
    row = inputs.measured(name)
    lower, upper = inputs.lower, inputs.upper
    scores = inputs.score_matrix(name)
    # Elicited metrics (docs/method.md 7.4): each expert's own value; "measured" is their median.
    own = inputs.own_values(name)
    veto_shares = entry.get("veto_shares") or {}
    weights = document["metric_weights"]
    contributions = [
        {
            "metric": metric,
            "measured": quantity(row[j], infos[metric].unit if metric in infos else "", bound=False),
            "weight": weights[metric],
            "group_score": entry["group_scores"][metric],
            "contribution": weights[metric] * entry["group_scores"][metric],
            "veto_share": veto_shares.get(metric),
            "elicited": j in own,
        }
        for j, metric in enumerate(metrics)
    ]
    experts = inputs.experts
    heat_page = Paginator(range(len(experts)), HEAT_PAGE_SIZE).get_page(page)
    heat = [
        {
            "expert": experts[i],
            "cells": [
                charts.HeatCell(
                    score=float(scores[i, j]),
                    step=charts.heat_step(float(scores[i, j])),
                    vetoed=bool(scores[i, j] == 0),
                    range_text=f"{lower[i, j]:.6g} (least acceptable) to {upper[i, j]:.6g} (desired)",
                )
                for j in range(len(metrics))
            ],
        }
        for i in heat_page.object_list
    ]
    own_values = [
        {"expert": experts[i], "values": [quantity(values[i], "", bound=False) for values in own.values()]}
        for i in heat_page.object_list
    ]
    vetoing = sorted({veto["expert"] for veto in entry["vetoes"]}, key=experts.index)
    return {
        "candidate": entry,
        "metrics": metrics,
        "contributions": contributions,
        "heat": heat,
        "heat_page": heat_page,
        "own_metrics": [metrics[j] for j in own],
        "own_values": own_values,
        "experts": len(experts),
        "veto_sentences": veto_sentences(name, entry["vetoes"], infos),
        "vetoing_experts": join_names(vetoing),
    }


# --- the page's whole results context -------------------------------------------------------


# A section of the run page whose table has more cells than this (experts
# times weights, or experts times metrics) is not rendered with the page: a
# placeholder loads it when scrolled into view (htmx), or opens it as a page
# of its own without JavaScript.
ON_DEMAND_CELLS = 400


def results_context(run: Run, *, candidate: str | None = None, page: str | int | None = None) -> dict:
    """Everything the run page shows of a succeeded run: three queries' worth
    (the run's results, already loaded, with "results_ranking" of
    ``run_get``; the entries of the candidates shown,
    ``engine_selectors.run_candidates_get``; the parts of its snapshot read
    by ``engine_selectors.run_score_inputs``). Only the candidates shown are
    read and put in the document's shape. The weights and the breakdown are left out (None)
    when large (``ON_DEMAND_CELLS``): the page then names what it will load
    (``weights_on_demand``, ``breakdown_on_demand``)."""
    results = cast(dict, run.results)  # a succeeded run has results
    # Every candidate's name, rank, veto and CEF (rank order) from the
    # ranking the database extracted; the entries of those shown alone.
    stored = run.results_ranking  # type: ignore[attr-defined]  # annotated by run_get's "results_ranking"
    experts, metrics = len(results["experts"]), len(results["metrics"])
    weights_on_demand = experts * (len(results["selected_attributes"]) + metrics) > ON_DEMAND_CELLS
    breakdown_on_demand = experts * metrics > ON_DEMAND_CELLS
    names = [c["name"] for c in stored]
    chosen = candidate if candidate in names else (names[0] if names else None)
    shown = {c["name"] for c in Paginator(stored, RANKING_PAGE_SIZE).get_page(page).object_list}
    wanted = shown | ({chosen} if chosen else set())
    results["candidates"] = engine_selectors.run_candidates_get(run=run, names=wanted)
    entries = {c["name"]: c for c in results["candidates"]}
    document = engine_selectors.results_document(run=run, candidates=wanted)
    scored = chosen is not None and not breakdown_on_demand
    score_inputs = engine_selectors.run_score_inputs(
        run_id=run.pk, keys=engine_selectors.SCORE_INPUT_KEYS if scored else engine_selectors.METRIC_INPUT_KEYS
    )
    infos = metric_infos(score_inputs)
    return {
        "iterations": document["iterations"],
        "size": {"experts": experts, "metrics": metrics, "candidates": len(names)},
        "ranking": _ranking(stored, document, infos, page),
        "weights": None if weights_on_demand else _weights(document, results),
        "weights_on_demand": weights_on_demand,
        "influence": _influence(document),
        "breakdown": candidate_breakdown(document, score_inputs, chosen, infos) if scored and chosen else None,
        "breakdown_on_demand": entries[chosen] if chosen and breakdown_on_demand else None,
        "ahp_weighting": score_inputs["ahp_weighting"],
    }


# --- token clients -----------------------------------------------------------------------------


def token_clients_to_api(api_name: str) -> Callable[[Callable[..., HttpResponseBase]], Callable[..., HttpResponseBase]]:
    """A page whose data the API also offers sends a request that carries an
    API token (``Authorization: Token <key>``) and no session on to that
    API URL (``api:<api_name>``, the same URL arguments) with 307, so a
    script given a page's address gets the data, authenticated by its token,
    instead of the log-in page."""

    def decorate(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
        @wraps(view)
        def wrapped(request: HttpRequest, **kwargs: Any) -> HttpResponseBase:
            authorization = request.headers.get("Authorization", "")
            if not request.user.is_authenticated and authorization.startswith("Token "):
                location = reverse(f"api:{api_name}", kwargs=kwargs)
                return HttpResponseRedirect(location, status=307)
            return view(request, **kwargs)

        return wrapped

    return decorate


# --- views -----------------------------------------------------------------------------------


def _not_succeeded(request: HttpRequest, run: Run, study: Study, what: str) -> HttpResponse:
    return render(
        request,
        "results/unavailable.html",
        {"run": run, "study": study, "study_tab": "runs", "what": what},
        status=409,
    )


def _section(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    """A section of the run page: alone when htmx asks for it, otherwise as
    a page of its own (the no-JavaScript link's)."""
    if request.headers.get("HX-Request"):
        return render(request, template, context)
    return render(request, "results/section_page.html", {**context, "section_template": template, "study_tab": "runs"})


@login_required
@require_GET
def candidate_page(request: HttpRequest, run_id: int, name: str) -> HttpResponse:
    """One candidate's breakdown, its heat table paged (``?page=``): the
    section alone for htmx, otherwise as a page of its own."""
    try:
        # Of the thousand candidates, the database hands over the one shown.
        run = engine_selectors.run_candidate_get(run_id=run_id, user=request.user, name=name)
    except Run.DoesNotExist:
        raise Http404("No such run.") from None
    study = study_for_member(request, run.study_id)
    if run.status != Run.Status.SUCCEEDED:
        return _not_succeeded(request, run, study, "candidate scores")
    document = engine_selectors.results_document(run=run, candidates={name})
    score_inputs = engine_selectors.run_score_inputs(run_id=run.pk, candidate=name)
    breakdown = candidate_breakdown(
        document, score_inputs, name, metric_infos(score_inputs), page=request.GET.get("page")
    )
    if breakdown is None:
        raise Http404("No such candidate in this run.")
    context = {"run": run, "study": study, "breakdown": breakdown, "section_title": f"Why {name} scored as it did"}
    return _section(request, "results/_candidate.html", context)


@login_required
@require_GET
def candidate_scores_csv(request: HttpRequest, run_id: int, name: str) -> HttpResponseBase:
    """Every expert's score of one candidate (its heat table, all pages)."""
    run, study = run_for_member(request, run_id)
    if run.status != Run.Status.SUCCEEDED:
        return _not_succeeded(request, run, study, "candidate scores")
    content = candidate_scores_csv_bytes(engine_selectors.run_score_inputs(run_id=run.pk), name)
    if content is None:
        raise Http404("No such candidate in this run.")
    return download(content, RESULTS_CSV_CONTENT_TYPE, filename=candidate_scores_csv_filename(run, name))


@login_required
@require_GET
def weights_section(request: HttpRequest, run_id: int) -> HttpResponse:
    """What the experts weighed: the consensus weights beside each expert's
    own (the section the run page loads on demand when it is large)."""
    run, study = run_for_member(request, run_id, results="results_weights")  # no candidates
    if run.status != Run.Status.SUCCEEDED:
        return _not_succeeded(request, run, study, "weights")
    weights = _weights(engine_selectors.results_document(run=run, candidates=()), cast(dict, run.results))
    context = {"run": run, "study": study, "weights": weights, "section_title": "What the experts weighed"}
    return _section(request, "results/_weights_section.html", context)


@token_clients_to_api("run-results")
@login_required
@require_GET
def results_json_download(request: HttpRequest, run_id: int) -> HttpResponseBase:
    """The ``approve-results/1`` document: the bytes the API and
    ``run_validation --json`` give (one ``results_json``)."""
    try:
        run = engine_selectors.run_get(run_id=run_id, user=request.user, fields=())
    except Run.DoesNotExist:
        raise Http404("No such run.") from None
    if run.status != Run.Status.SUCCEEDED:
        return _not_succeeded(request, run, study_for_member(request, run.study_id), "results")
    # Read only when the browser does not have this version already (304).
    tag = engine_selectors.results_version(run)
    return not_modified(request, etag=tag, last_modified=run.finished_at) or download(
        engine_selectors.results_json_read(run=run),
        "application/json",
        filename=f"approve-run-{run.pk}-results.json",
        etag=tag,
        last_modified=run.finished_at,
    )


@token_clients_to_api("run-results-csv")
@login_required
@require_GET
def results_csv_download(request: HttpRequest, run_id: int) -> HttpResponseBase:
    run, study = run_for_member(request, run_id)
    if run.status != Run.Status.SUCCEEDED:
        return _not_succeeded(request, run, study, "results")
    return download(
        results_csv_bytes(run=run),
        RESULTS_CSV_CONTENT_TYPE,
        filename=results_csv_filename(run),
        last_modified=run.finished_at,
    )


# --- comparison -------------------------------------------------------------------------------


# Candidates per page of a comparison's table (its CSV download has them all).
COMPARISON_PAGE_SIZE = 25


@login_required
@require_GET
def compare_choose(request: HttpRequest, run_id: int) -> HttpResponse:
    """Where the run page's "Compare with" form goes (``?other=<run>``)."""
    run, _ = run_for_member(request, run_id)
    other = request.GET.get("other", "")
    if not other.isdigit():
        return redirect("run_page", run_id=run.pk)
    return redirect("run_compare", run_id=run.pk, other_id=int(other))


@token_clients_to_api("run-compare")
@login_required
@require_GET
def compare_page(request: HttpRequest, run_id: int, other_id: int) -> HttpResponse:
    """Two runs of one study side by side, the earlier as "before"."""
    try:
        first, second = engine_selectors.run_pair_get(run_id=run_id, other_id=other_id, user=request.user)
    except Run.DoesNotExist:
        raise Http404("No such run.") from None
    study = study_for_member(request, first.study_id)
    context = {"study": study, "study_tab": "runs", "first": first, "second": second}
    try:
        compared = run_comparison(first, second)
    except ComparisonRefused as refusal:
        context["refusal"] = refusal.message
        return render(request, "results/compare.html", context, status=refusal.status)
    before, after, comparison = compared.before, compared.after, compared.comparison
    moves = Paginator(comparison.candidates, COMPARISON_PAGE_SIZE).get_page(request.GET.get("page"))
    context.update(
        before=before,
        after=after,
        comparison=comparison,
        moves=moves,
        changes=_changes_by_who(comparison.changes),
    )
    return render(request, "results/compare.html", context)


@login_required
@require_GET
def compare_csv(request: HttpRequest, run_id: int, other_id: int) -> HttpResponseBase:
    """Every candidate of two runs compared (the comparison's table, all
    pages), as CSV."""
    try:
        first, second = engine_selectors.run_pair_get(run_id=run_id, other_id=other_id, user=request.user)
    except Run.DoesNotExist:
        raise Http404("No such run.") from None
    study = study_for_member(request, first.study_id)
    try:
        compared = run_comparison(first, second)
    except ComparisonRefused as refusal:
        context = {"study": study, "study_tab": "runs", "first": first, "second": second, "refusal": refusal.message}
        return render(request, "results/compare.html", context, status=refusal.status)
    return download(
        comparison_csv_bytes(compared), RESULTS_CSV_CONTENT_TYPE, filename=comparison_csv_filename(compared)
    )


# A comparison lists at most this many input changes (a study of 100 experts
# whose designer changed a default range changes 100 ranges at once).
CHANGES_SHOWN = 300


def _changes_by_who(changes: list) -> dict:
    """The input changes grouped as the page lists them: the design's first,
    then each expert's, at most ``CHANGES_SHOWN`` in all."""
    groups: dict[str | None, list] = {}
    for change in changes[:CHANGES_SHOWN]:
        groups.setdefault(change.who, []).append(change)
    return {"groups": list(groups.items()), "total": len(changes), "hidden": max(len(changes) - CHANGES_SHOWN, 0)}
