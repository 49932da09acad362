"""The expert's four steps, one page each: votes, priorities, acceptable
ranges and peer weights (PAGES.md). Each page edits exactly what its API twin
(``PUT /api/v1/studies/{id}/my/...``) edits, through the same service, and
reads through the same selectors. Outside its phase a step is shown
read-only with the reason.

The live feedback (AHP weights, consistency and repair hints; the candidates
a range would veto) comes from preview views that run the services' own
checks and the engine's own functions on what is typed, and save nothing.
"""

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from engine import core
from engine.rules import AHP_WEIGHTINGS, CONSISTENCY_THRESHOLD, PERCENT_TOTAL, PERCENT_TOTAL_SLACK, is_consistent

from .. import charts, extensions, limits, selectors, services
from ..errors import InvalidInput, PhaseConflict
from ..forms.expert import (
    SCALE_POINTS,
    PeerWeightsForm,
    PrioritiesForm,
    RangesForm,
    Section,
    VotesForm,
    point_label,
    scale_point,
)
from ..models import Membership, Metric, RoundStep, Study
from ..services import Action
from . import rounds
from .common import absent_how, require_expert, study_for_member


@dataclass(frozen=True)
class Step:
    key: str  # the section of the expert's inputs (selectors.INPUT_SECTIONS)
    title: str
    url_name: str
    tab: str  # study_base.html's study_tab
    action: Action  # the change the step's service makes (services.PHASE_RULES)
    noun: str

    @property
    def phase(self) -> str:
        """The phase in which the step opens (the first its action is allowed in)."""
        return services.opens_in(self.action)


STEPS = [
    Step("votes", "Votes", "expert_votes", "votes", Action.VOTE, "votes"),
    Step("priorities", "Priorities", "expert_priorities", "priorities", Action.PRIORITISE, "priorities"),
    Step("ranges", "Ranges", "expert_ranges", "ranges", Action.SET_RANGES, "acceptable ranges"),
    Step(
        "peer_weights",
        "Peer weights",
        "expert_peer_weights",
        "peer-weights",
        Action.WEIGH_PEERS,
        "peer weights",
    ),
]
STEP = {step.key: step for step in STEPS}


# --- what every step shares ---------------------------------------------------------


def _expert_study(request: HttpRequest, study_id: int, action: str) -> tuple[Study, Membership]:
    """The study (404 for outsiders) and the user's expert membership in it
    (403 for a member who is not an expert). Two queries."""
    study = study_for_member(request, study_id)
    require_expert(study, action)
    expert = next(m for m in study.my_memberships if m.role == Membership.Role.EXPERT)
    expert.study, expert.user = study, cast(User, request.user)
    return study, expert


def _not_open_yet(study: Study, step: Step) -> bool:
    """The study has not reached the phase in which the step opens."""
    return not services.has_opened(study, step.action)


def readonly_reason(study: Study, step: Step) -> str | None:
    """Why the step cannot be changed now, or None when it can."""
    if services.phase_allows(study, step.action):
        return None
    if step.key == "votes":
        if _not_open_yet(study, step):
            return "Voting has not opened yet: the designer opens it once the setup is ready. You can read the items."
        # No phase timestamp is stored, and the study's updated_at moves with
        # every later edit, so no date is given.
        return "Voting has closed; your votes are shown as cast."
    if _not_open_yet(study, step):
        return "This step opens when voting closes and the selection of attributes and metrics is fixed."
    return f"The assessment has closed; your {step.noun} are shown as saved. Only the designer can reopen it."


def _absent_reason(expert: Membership) -> str | None:
    """Why an excluded or abstaining expert's step is read-only, or None."""
    if not expert.absence:
        return None
    return (
        f"The designer has {absent_how(expert)} this study: “{expert.absence_reason}”. Your inputs are kept "
        "but no longer used, and you cannot change them; the designer can re-admit you until the study closes."
    )


def _step_state(study: Study, step: Step, done: dict[str, bool], *, absent: bool = False) -> str:
    """later, missing, done, or "not confirmed" (the designer's default
    ranges the expert has not saved or confirmed yet); for an excluded or
    abstaining expert, a step not given is not needed, not missing."""
    if _not_open_yet(study, step):
        return "later"
    if not done[step.key]:
        return "not-needed" if absent else "missing"
    if step.key == "ranges" and done["ranges_unconfirmed"]:
        return "unconfirmed"
    return "done"


def _step_context(study: Study, expert: Membership, step: Step) -> dict[str, Any]:
    """The frame of a step: the step indicator (one query) and its state."""
    done = selectors.expert_steps_get(expert=expert)
    position = STEPS.index(step)
    return {
        "study": study,
        "study_tab": step.tab,
        "step": step,
        "steps": [
            {
                "number": n,
                "step": s,
                "current": s == step,
                "url": _url(s, study),
                # A step whose phase has not come yet is neither done nor missing.
                "state": _step_state(study, s, done, absent=bool(expert.absence)),
                # Once voting has closed, a ballot without a vote is final, not missing.
                "voted_nothing": s.key == "votes" and not done[s.key] and not services.phase_allows(study, s.action),
            }
            for n, s in enumerate(STEPS, start=1)
        ],
        "next_step": STEPS[position + 1] if position + 1 < len(STEPS) else None,
        "next_url": _url(STEPS[position + 1], study) if position + 1 < len(STEPS) else None,
        "readonly": _absent_reason(expert) or readonly_reason(study, step),
        "elicitations": extensions.question_steps(study=study, expert=expert),
    }


def _freeze(form: Any, context: dict[str, Any]) -> None:
    """Outside the step's phase every field is shown disabled, as stored."""
    if context["readonly"]:
        for field in form.fields.values():
            field.disabled = True


def _url(step: Step, study: Study) -> str:
    return reverse(step.url_name, args=[study.pk])


def _stored(study: Study, expert: Membership, section: str, *, with_results: bool = False) -> Any:
    """The expert's own input of one section, exactly as the API's GET reads it."""
    inputs = selectors.expert_inputs_list(study=study, experts=[expert], sections=[section], with_results=with_results)
    return inputs[expert.user.get_username()][section]


def _submit(
    request: HttpRequest, form: Any, step: Step, study: Study, save: Callable[[], object]
) -> HttpResponse | int:
    """On a POST that saves and a form of the right shape, call the step's
    service (``save``). Saved: back to the page (so a reload does not post
    again). Otherwise the status to render the page with; a refusal is shown
    under its fields (nothing was written)."""
    if not _wants_save(request) or not form.is_valid():
        return 200
    try:
        save()
    except InvalidInput as error:
        form.add_service_errors(error)
        return 200
    except PhaseConflict as error:
        form.add_error(None, str(error))
        return 409
    messages.success(request, f"Your {step.noun} were saved.")
    return HttpResponseRedirect(_url(step, study))


def _form_data(request: HttpRequest) -> Any:
    return request.POST if request.method == "POST" else None


def _wants_save(request: HttpRequest) -> bool:
    """A POST saves unless it asks for a preview (the no-JavaScript way to
    check the result, or apply a repair, before saving)."""
    return request.method == "POST" and "preview" not in request.POST and "apply" not in request.POST


def _render_step(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    _round_states(context)
    return render(request, f"expert/{template}", context, status=status)


def _round_states(context: dict[str, Any]) -> None:
    """During an open round (its ``feedback`` in the context, with the
    expert's responses), the steps it reopens that they have not responded
    to read "to revise" instead of done in the step indicator."""
    feedback = context.get("feedback")
    if feedback is None:
        return
    to_revise = selectors.steps_to_revise(feedback.mine)
    for item in context["steps"]:
        if item["state"] == "done" and item["step"].key in to_revise:
            item["state"] = "revise"


# --- 1. votes ---------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def votes_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """Vote for complementary attributes and for metrics; once voting has
    closed, the tallies against the thresholds and the selection."""
    study, expert = _expert_study(request, study_id, "vote")
    step = STEP["votes"]
    tallies = services.selection_fixed(study)
    ballot = selectors.ballot_list(study=study, with_tallies=tallies)
    form = VotesForm(_form_data(request), ballot=ballot, initial=_stored(study, expert, "votes"))
    status = _submit(request, form, step, study, lambda: services.votes_set(expert=expert, **form.payload()))
    if isinstance(status, HttpResponse):
        return status
    context = _step_context(study, expert, step)
    _freeze(form, context)
    attribute_boxes = {box.data["value"]: box for box in form["attributes"]}
    metric_boxes = {box.data["value"]: box for box in form["metrics"]}
    chosen_attributes, chosen_metrics = form.chosen("attributes"), form.chosen("metrics")
    groups = [
        {
            "attribute": attribute,
            "box": attribute_boxes.get(attribute.name),
            "mine": attribute.name in chosen_attributes,
            "metrics": [
                {"metric": m, "box": metric_boxes[m.name], "mine": m.name in chosen_metrics}
                for m in attribute.ballot_metrics
            ],
        }
        for attribute in ballot
    ]
    main = [group["attribute"] for group in groups if group["box"] is None]
    context.update(form=form, groups=groups, tallies=tallies, main_attributes=main)
    return _render_step(request, "votes.html", context, status)


# --- 2. priorities ------------------------------------------------------------------------


def consistency_statement(ratio: float) -> str:
    """ "consistent (CR 0.04 ≤ 0.10)" / "inconsistent (CR 0.23 > 0.10)",
    with a third decimal when two would hide which side of 0.10 it is."""
    consistent = is_consistent(ratio)
    shown = f"{ratio:.2f}"
    if (float(shown) <= CONSISTENCY_THRESHOLD) != consistent:
        shown = f"{ratio:.3f}" if (float(f"{ratio:.3f}") <= CONSISTENCY_THRESHOLD) == consistent else f"{ratio:.4g}"
    if consistent:
        return f"consistent (CR {shown} ≤ {CONSISTENCY_THRESHOLD:.2f})"
    return f"inconsistent (CR {shown} > {CONSISTENCY_THRESHOLD:.2f})"


def _section_result(form: PrioritiesForm, section: Section, weighting: str) -> dict[str, Any]:
    """The live result of one prioritisation on the page: what the service
    would store for what is typed (services.prioritisation_preview, i.e.
    engine.prioritisation.prioritise and most_inconsistent), or how much is
    still to answer."""
    payload, given, needed = form.answered(section)
    method = getattr(form, "cleaned_data", {}).get(section.method_field) or form[section.method_field].value()
    entry: dict[str, Any] = {"section": section, "method": method, "given": given, "needed": needed}
    if payload is None:
        return entry
    try:
        result = services.prioritisation_preview(items=section.names, weighting=weighting, **payload)
    except InvalidInput as error:
        entry["problems"] = [message for messages_ in error.errors.values() for message in messages_]
        return entry
    by_name = {item.name: item for item in section.items}
    entry["weights"] = [{"name": name, "percent": 100 * w} for name, w in result["weights"].items()]
    if result["consistency_ratio"] is not None:
        entry["consistency_ratio"] = result["consistency_ratio"]
        entry["consistent"] = is_consistent(result["consistency_ratio"])
        entry["statement"] = consistency_statement(result["consistency_ratio"])
        entry["hints"] = _hints(section, method, result, by_name, consistent=entry["consistent"])
        # Inconsistent judgments: the smallest repairs, which say whether one
        # change is enough ("repair"), or the changes that help most ("improve").
        # Consistent ones: the judgments closest to inconsistent ("tune").
        if entry["consistent"]:
            entry["hint_kind"] = "tune"
        else:
            entry["hint_kind"] = "repair" if all(h["consistent_after"] for h in entry["hints"]) else "improve"
    return entry


def _hints(
    section: Section, method: str, result: dict[str, Any], by_name: dict[str, Any], *, consistent: bool
) -> list[dict[str, Any]]:
    """The repair hints of one prioritisation, each saying which of the
    expert's judgments it replaces by what: for inconsistent judgments the
    smallest changes of one judgment that make them consistent, the least
    change first (``result["repairs"]``, engine.prioritisation.smallest_repairs);
    for consistent ones the judgments that disagree most with the weights,
    with the value the weights imply (``most_inconsistent``)."""
    hints = []
    for hint in result["most_inconsistent"] if consistent else result["repairs"]:
        row, column = by_name[hint["row"]], by_name[hint["column"]]
        current, suggested = scale_point(hint["value"])[0], scale_point(hint["suggested_value"])[0]
        if current == suggested:
            continue
        after = hint.get("consistency_ratio")
        hints.append(
            {
                "row": row.name,
                "column": column.name,
                "field": section.pair_field(method, row, column),
                "current": current,
                "current_label": point_label(method, row.name, column.name, current),
                "suggested": suggested,
                "suggested_label": point_label(method, row.name, column.name, suggested),
                "steps": hint.get("steps"),
                "statement_after": consistency_statement(after) if after is not None else "",
                "consistent_after": after is not None and is_consistent(after),
            }
        )
    return hints


def _priorities_form(request: HttpRequest, study: Study, expert: Membership, *, stored: bool) -> PrioritiesForm:
    """The form on what was posted (a repair applied when asked), on the
    selected attributes and metrics (two queries; a third reads what is
    stored when ``stored``)."""
    attributes = list(selectors.selected_attributes(study))
    metrics = list(selectors.selected_metrics(study))
    data = _form_data(request)
    if data is not None and "apply" in data:
        field, _, point = data["apply"].partition("=")
        data = data.copy()
        if point in SCALE_POINTS:
            data[field] = point
    return PrioritiesForm(
        data,
        attributes=attributes,
        metrics=metrics,
        stored=_stored(study, expert, "priorities") if stored else None,
    )


def _priority_results(form: PrioritiesForm, study: Study) -> list[dict[str, Any]]:
    """Each section's live result, AHP weights by the study's weighting."""
    if form.is_bound:
        form.is_valid()
        checked = form
    else:
        # The stored inputs, checked as if posted: what the page shows is
        # what saving them would store.
        checked = PrioritiesForm(
            {name: form[name].value() for name in form.fields if form[name].value() is not None},
            attributes=form.main.items,
            metrics=[m for s in form.locals for m in s.items],
        )
        checked.is_valid()
    return [_section_result(checked, section, study.ahp_weighting) for section in checked.sections]


def _pair_rows(form: PrioritiesForm, section: Section, method: str) -> list[dict[str, Any]]:
    """The rows of one pairwise section: each pair once, with the point
    chosen (its 17 points are written, labelled in words for screen readers,
    by chart_marks.pair_points)."""
    rows = []
    for a, b in section.pairs:
        name = section.pair_field(method, a, b)
        rows.append(
            {
                "name": name,
                "method": method,
                "left": a.name,
                "right": b.name,
                "value": form[name].value(),
                "errors": form.errors.get(name, []),
            }
        )
    return rows


# The key above a pairwise section's points: the odd points' meanings.
SCALE_WORDS = {
    "ahp": ["extreme", "very strong", "strong", "moderate", "equal", "moderate", "strong", "very strong", "extreme"],
    "lpr": ["strictest", "", "", "", "indifferent", "", "", "", "strictest"],
}


def typed_total(values: list[Any]) -> float | None:
    """The sum of the numbers typed (as posted or stored), None while one
    is missing or not a number: the total shown before any script runs."""
    try:
        numbers = [float(value) for value in values]
    except (TypeError, ValueError):
        return None
    return math.fsum(numbers) if numbers and all(map(math.isfinite, numbers)) else None


def _sections_for_template(form: PrioritiesForm) -> list[dict[str, Any]]:
    sections = []
    for section in form.sections:
        direct = [form[section.direct_field(item)] for item in section.items]
        sections.append(
            {
                "section": section,
                "method": form[section.method_field],
                "chosen": form[section.method_field].value(),
                "direct": direct,
                "direct_total": typed_total([field.value() for field in direct]),
                "pairwise": [
                    (method, _pair_rows(form, section, method), SCALE_WORDS[method]) for method in ("ahp", "lpr")
                ],
            }
        )
    return sections


def _inconsistent_results(form: PrioritiesForm, study: Study) -> list[dict[str, Any]]:
    """The prioritisations of a valid posted form whose consistency ratio is
    above the threshold (none when the form is invalid: its errors come first)."""
    if not form.is_valid():
        return []
    return [result for result in _priority_results(form, study) if result.get("consistent") is False]


@login_required
@require_http_methods(["GET", "POST"])
def priorities_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """Prioritise the selected attributes (direct, AHP or LPR) and, locally,
    the metrics of attributes with several; the live result beside them."""
    study, expert = _expert_study(request, study_id, "prioritise")
    step = STEP["priorities"]
    form = _priorities_form(request, study, expert, stored=True)
    keep = request.method == "POST" and request.POST.get("keep_inconsistent") == "1"
    inconsistent = _inconsistent_results(form, study) if _wants_save(request) and not keep else []
    if inconsistent:
        # METHOD.md 3 (Decision): inconsistent judgments are saved only once
        # the expert chooses to keep them; nothing is written before.
        status: HttpResponse | int = 200
    else:
        status = _submit(
            request,
            form,
            step,
            study,
            lambda: services.priorities_set(expert=expert, **form.payload(), acknowledge_inconsistency=keep),
        )
    if isinstance(status, HttpResponse):
        return status
    context = _step_context(study, expert, step)
    _freeze(form, context)
    context.update(
        form=form,
        confirm_inconsistent=inconsistent,
        sections=_sections_for_template(form),
        results=_priority_results(form, study),
        ahp_weighting=AHP_WEIGHTINGS[study.ahp_weighting],
        previewed=request.method == "POST" and not _wants_save(request),
        off_scale=form.off_scale,
        threshold=CONSISTENCY_THRESHOLD,
        percent_total=PERCENT_TOTAL,
        total_slack=PERCENT_TOTAL_SLACK,
        **rounds.feedback_context(study, expert, RoundStep.PRIORITIES),
    )
    return _render_step(request, "priorities.html", context, status)


@login_required
@require_POST
def priorities_preview(request: HttpRequest, study_id: int) -> HttpResponse:
    """The live result of what is typed on the priorities page (htmx): the
    weights, the consistency and the repair hints. Saves nothing."""
    study, expert = _expert_study(request, study_id, "prioritise")
    form = _priorities_form(request, study, expert, stored=False)
    context = {"study": study, "results": _priority_results(form, study), "threshold": CONSISTENCY_THRESHOLD}
    return render(request, "expert/_priorities_result.html", context)


# --- 3. ranges ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """One selected metric's measured candidates, in the study's order:
    ``rows`` index ``candidates`` (every measured candidate's name, shared
    by the metrics), ``values`` their measured values."""

    candidates: list[str]
    rows: np.ndarray
    values: np.ndarray
    # An elicited metric: "own" (the expert's own values, which a run reads
    # for them), or "unanswered" (none until they finish its questions).
    elicited: str = ""

    @property
    def names(self) -> list[str]:
        return [self.candidates[i] for i in self.rows]


def _vetoes(pair: list[float] | None, metric: Metric, values: np.ndarray) -> np.ndarray | None:
    """The candidates a valid range ``pair`` vetoes, None for no or a refused range."""
    if pair is None:
        return None
    try:
        least, desired = services.range_check(metric=metric, value=pair)
    except InvalidInput:
        return None
    return core.veto_preview_arrays(least, desired, values)[1]


def outcome_key(pair: list[float] | None, page: int) -> str:
    """What an outcome on the page was drawn for: the range as typed and the
    page of its newly vetoed candidates. The preview sends back only the
    outcomes whose key changed."""
    return f"{pair[0]!r} {pair[1]!r} {page}" if pair else f"- {page}"


def range_outcome(
    metric: Metric,
    pair: list[float] | None,
    measured: Measured,
    saved: list[float] | None = None,
    page: int = 1,
) -> dict[str, Any]:
    """Where each candidate's measured value falls in the range ``pair`` and
    which it would veto: the range checked as ranges_set checks it, then each
    candidate's individual score and veto by engine.core.veto_preview_arrays
    (METHOD.md 4). Up to limits.STRIP_MARKS_MAX candidates every one is
    listed; beyond, the strip is binned. Either way the candidates vetoed
    by ``pair`` and not by ``saved`` (the range as stored, or the default),
    the newly vetoed, are named, limits.CANDIDATES_PER_PAGE at a time."""
    outcome: dict[str, Any] = {
        "metric": metric,
        "pair": pair,
        "candidates": [],
        "vetoed": np.zeros(len(measured.candidates), dtype=bool),  # by candidate (Measured.candidates)
        "vetoed_count": 0,
        "candidates_all": measured.candidates,
        "count": len(measured.rows),
        "key": outcome_key(pair, page),
        "elicited": measured.elicited,
    }
    if pair is None:
        outcome["problem"] = "Give both values to see which candidates this range would veto."
        return outcome
    try:
        least, desired = services.range_check(metric=metric, value=pair)
    except InvalidInput as error:
        outcome["problem"] = " ".join(m for messages_ in error.errors.values() for m in messages_)
        return outcome
    values = measured.values
    if not values.size:
        return outcome
    outcome["span"] = (float(values.min()), float(values.max()))
    scores, vetoed = core.veto_preview_arrays(least, desired, values)
    outcome["vetoed"][measured.rows[vetoed]] = True
    outcome["vetoed_count"] = int(np.count_nonzero(vetoed))
    before = vetoed if saved == [least, desired] else _vetoes(saved, metric, values)
    newly = vetoed if before is None else vetoed & ~before
    named = [measured.candidates[i] for i in measured.rows[newly]]
    outcome["newly"] = Paginator(named, limits.CANDIDATES_PER_PAGE).get_page(page)
    outcome["freed"] = 0 if before is None else int(np.count_nonzero(before & ~vetoed))
    outcome["against_saved"] = saved is not None
    listed = values.size <= limits.STRIP_MARKS_MAX
    names = measured.names if listed else None
    if names is not None:
        outcome["candidates"] = [
            {"name": name, "value": float(value), "score": float(score), "vetoed": bool(veto)}
            for name, value, score, veto in zip(names, values, scores, vetoed, strict=True)
        ]
    outcome["strip"] = charts.range_strip(
        least=least,
        desired=desired,
        values=values,
        vetoed=vetoed,
        names=names,
        bins=limits.STRIP_BINS,
    )
    return outcome


def _measured(study: Study, metrics: list[Metric], expert: Membership) -> dict[int, Measured]:
    """Each selected metric's measured candidates (one query, 20,000 rows at
    the documented limits: split by metric with NumPy, not row by row); an
    elicited metric's are the expert's own values, as a run reads them
    (``workspace.extensions.own_values``: evaluation's), not the typed ones."""
    metric_ids, position, values, candidates = selectors.selected_measurement_arrays(study=study)
    own = extensions.own_values(study=study, expert=expert)
    index = {name: i for i, name in enumerate(candidates)}
    measured = {}
    for metric in metrics:
        if metric.pk in own:
            mine_values = own[metric.pk] or {}
            for name in mine_values:
                if name not in index:  # a candidate with predictions and no typed measurement
                    index[name] = len(candidates)
                    candidates.append(name)
            rows = np.array([index[name] for name in mine_values], dtype=np.int64)
            state = "unanswered" if own[metric.pk] is None else "own"
            measured[metric.pk] = Measured(candidates, rows, np.array(list(mine_values.values())), state)
            continue
        mine = metric_ids == metric.pk
        measured[metric.pk] = Measured(candidates, position[mine], values[mine])
    return measured


def _typed_values(form: RangesForm) -> Mapping[str, Any]:
    if form.is_bound:
        form.is_valid()
        return {name: value for name, value in getattr(form, "cleaned_data", {}).items() if name not in form.errors}
    return form.initial


def _newly_page(request: HttpRequest, metric: Metric) -> int:
    """The page of a metric's newly vetoed candidates asked for by a pager
    button (``vetoed-page`` = ``<metric pk>-<page>``), else the first."""
    if request.method != "POST":
        return 1
    pk, _, number = request.POST.get("vetoed-page", "").partition("-")
    return int(number) if pk == str(metric.pk) and number.isdigit() else 1


def _range_outcomes(
    request: HttpRequest,
    form: RangesForm,
    metrics: list[Metric],
    study: Study,
    saved: Mapping[str, Any],
    expert: Membership,
) -> list[dict[str, Any]]:
    measured = _measured(study, metrics, expert)
    pairs, saved_pairs = form.pairs(_typed_values(form)), form.pairs(saved)
    return [
        range_outcome(
            metric, pairs.get(metric), measured[metric.pk], saved_pairs.get(metric), _newly_page(request, metric)
        )
        for metric in metrics
    ]


def _ranges_context(request: HttpRequest, study: Study, expert: Membership) -> dict[str, Any]:
    """The form on what was posted, or on the stored ranges (or the defaults),
    and those stored ranges, against which the newly vetoed are counted."""
    metrics = list(selectors.selected_metrics(study))
    saved = RangesForm.initial_from(_stored(study, expert, "ranges"), metrics)
    form = RangesForm(_form_data(request), metrics=metrics, initial=saved)
    return {"form": form, "metrics": metrics, "saved": saved}


def _to_confirm(metric: Metric, stored: list[float] | None, outcome: dict[str, Any]) -> dict[str, Any] | None:
    """What the page says of a range to confirm (``selectors.to_confirm``:
    the metric's values changed under it): the range as stored, the span of
    the expert's own values, and the range proposed from them
    (``selectors.proposed_range``); None for a range not to confirm."""
    if stored is None:
        return None
    span = outcome.get("span")
    return {
        "stored": "{:g} to {:g}".format(*stored),
        "span": span,
        "proposed": selectors.proposed_range(span, metric.better) if span else None,
    }


def _range_rows(
    form: RangesForm, outcomes: list[dict[str, Any]], confirming: Mapping[int, list[float]] | None = None
) -> list[dict[str, Any]]:
    confirming = confirming or {}
    return [
        {
            "outcome": outcome,
            "metric": metric,
            "least": form[f"least-{metric.pk}"],
            "desired": form[f"desired-{metric.pk}"],
            "default": metric.default_range and "{:g} to {:g}".format(*metric.default_range),
            "confirm": _to_confirm(metric, confirming.get(metric.pk), outcome),
        }
        for outcome in outcomes
        for metric in [outcome["metric"]]
    ]


def _confirming(expert: Membership) -> dict[int, list[float]]:
    """The expert's ranges to confirm, by metric id, as stored (one query)."""
    rows = selectors.to_confirm().filter(expert=expert).values_list("metric_id", "least_acceptable", "desired")
    return {metric: [least, desired] for metric, least, desired in rows}


def _wants_ranges_save(request: HttpRequest) -> bool:
    """A pager button of the newly vetoed candidates checks, it does not save."""
    return "vetoed-page" not in request.POST


@login_required
@require_http_methods(["GET", "POST"])
def ranges_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """An acceptable range per selected metric, with where each candidate
    falls and which the range would veto."""
    study, expert = _expert_study(request, study_id, "set acceptable ranges")
    step = STEP["ranges"]
    context = _ranges_context(request, study, expert)
    form = context["form"]
    status: HttpResponse | int = 200
    if _wants_ranges_save(request):
        status = _submit(request, form, step, study, lambda: services.ranges_set(expert=expert, ranges=form.payload()))
    if isinstance(status, HttpResponse):
        return status
    context.update(_step_context(study, expert, step))
    _freeze(form, context)  # before the outcomes: a frozen form reads its stored values
    outcomes = _range_outcomes(request, form, context["metrics"], study, context["saved"], expert)
    unconfirmed = any(s["state"] == "unconfirmed" for s in context["steps"] if s["step"] == step)
    confirming = _confirming(expert)
    context.update(
        rows=_range_rows(form, outcomes, confirming),
        vetoes=_veto_summary(outcomes),
        ranges_unconfirmed=unconfirmed,
        ranges_to_confirm=[metric.name for metric in context["metrics"] if metric.pk in confirming],
        marks_max=limits.STRIP_MARKS_MAX,
        **rounds.feedback_context(study, expert, RoundStep.RANGES),
    )
    return _render_step(request, "ranges.html", context, status)


def _veto_summary(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """Who the ranges as typed would veto, and by which metrics: ``count``,
    ``newly`` (vetoed by a range as typed and not as saved), and ``listed``
    (``[{candidate, metrics}]``) when they are few enough to name
    (limits.CANDIDATES_PER_PAGE); each metric's outcome names its newly vetoed."""
    masks = [outcome["vetoed"] for outcome in outcomes]
    vetoed = np.logical_or.reduce(masks) if masks else np.zeros(0, dtype=bool)
    newly = {name for outcome in outcomes if outcome.get("newly") for name in outcome["newly"].paginator.object_list}
    count = int(np.count_nonzero(vetoed))
    listed = None
    if count <= limits.CANDIDATES_PER_PAGE:
        candidates = outcomes[0]["candidates_all"] if outcomes else []
        listed = [
            {
                "candidate": candidates[i],
                "metrics": [outcome["metric"].name for outcome in outcomes if outcome["vetoed"][i]],
            }
            for i in np.flatnonzero(vetoed)
        ]
    return {"count": count, "candidates": vetoed.size, "newly": len(newly), "listed": listed}


@login_required
@require_POST
def ranges_preview(request: HttpRequest, study_id: int) -> HttpResponse:
    """The live veto preview of the ranges page (htmx): the summary, and
    swapped out of band, the strip of each metric whose range changed since
    the page drew it (its ``shown-<pk>`` key). Saves nothing."""
    study, expert = _expert_study(request, study_id, "set acceptable ranges")
    context = _ranges_context(request, study, expert)
    outcomes = _range_outcomes(request, context["form"], context["metrics"], study, context["saved"], expert)
    rows = _range_rows(context["form"], outcomes)
    changed = [row for row in rows if request.POST.get(f"shown-{row['metric'].pk}") != row["outcome"]["key"]]
    context.update(study=study, rows=changed, vetoes=_veto_summary(outcomes))
    return render(request, "expert/_ranges_preview.html", context)


# --- 4. peer weights ------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def peer_weights_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """A percentage for every expert, oneself included (self-confidence),
    with a running total."""
    study, expert = _expert_study(request, study_id, "weigh the experts")
    step = STEP["peer_weights"]
    experts = list(selectors.expert_list(study=study))
    initial = PeerWeightsForm.initial_from(_stored(study, expert, "peer_weights"), experts)
    form = PeerWeightsForm(_form_data(request), experts=experts, me=expert, initial=initial)
    save = lambda: services.peer_weights_set(expert=expert, weights=form.payload())  # noqa: E731
    status = _submit(request, form, step, study, save)
    if isinstance(status, HttpResponse):
        return status
    total = typed_total([form[name].value() for name in form.fields])
    context = _step_context(study, expert, step)
    _freeze(form, context)
    context.update(
        form=form,
        total=total,
        total_complete=PeerWeightsForm.total_complete(total),
        percent_total=PERCENT_TOTAL,
        total_slack=PERCENT_TOTAL_SLACK,
        **rounds.feedback_context(study, expert, RoundStep.PEER_WEIGHTS),
    )
    return _render_step(request, "peer_weights.html", context, status)
