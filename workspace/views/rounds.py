"""Revision rounds' pages: the designer opens a round from the study home and
closes it after a confirmation; an expert confirms a step (with an optional
reason) from the step's page, which shows the group's anonymised answers
beside their own (``feedback_context``); the study home shows who has
responded and the convergence across closed rounds (``home_context``)."""

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from engine.feedback import Summary

from .. import charts, limits, selectors, services
from ..errors import InvalidInput, PhaseConflict
from ..models import Membership, RevisionRound, RoundStep, Study
from .common import require_designer, require_expert, study_for_member

STEP_PAGES = {
    RoundStep.PRIORITIES: "expert_priorities",
    RoundStep.RANGES: "expert_ranges",
    RoundStep.PEER_WEIGHTS: "expert_peer_weights",
}


def _box(group: Summary | None) -> tuple[float, float | None, float] | None:
    """A weight's box: the quartiles and median, or the median's coarse band."""
    if group is None:
        return None
    if group.band is not None:
        return (group.band[0], None, group.band[1])
    return (cast(float, group.q1), group.median, cast(float, group.q3))


def _percent_rows(items: list[selectors.rounds.WeightFeedback]) -> list[tuple[str, Any, float | None]]:
    return [(item.name, _box(item.group), item.own) for item in items]


def feedback_context(study: Study, expert: Membership, step: str) -> dict[str, Any]:
    """What a step page shows during an open round: the round, the group's
    answers for this step beside the expert's own, the reasons of the round
    before and the expert's response so far. Empty outside a round (and
    without a query outside the assessment, where none can be open)."""
    if not services.phase_allows(study, services.Action.OPEN_ROUND):
        return {}
    current = selectors.round_current(study=study)
    if current is None:
        return {}
    feedback = selectors.round_feedback(study=study, expert=expert, round=current)
    context: dict[str, Any] = {
        "round": current,
        "feedback": feedback,
        "round_step": step,
        "round_reasons": feedback.previous_reasons[step],
        "round_mine": feedback.mine.get(step),
        "round_reason_max": limits.ROUND_REASON_MAX_CHARS,
        "round_min_experts": feedback.min_experts,
        "round_fine_min_experts": feedback.fine_min_experts,
    }
    if step == RoundStep.PRIORITIES:
        context["round_charts"] = [
            charts.box_plot(
                chart_id="round-attributes",
                title="The group's attribute weights and yours",
                description="For each attribute: the group's quartiles and median weight (with fewer than "
                "five experts, the five-point band holding the median) and your own weight as a diamond. "
                "The table below gives the numbers.",
                rows=_percent_rows(feedback.attributes),
            ),
            charts.box_plot(
                chart_id="round-metrics",
                title="The group's metric weights and yours",
                description="For each metric: the group's weights (attribute weight times the metric's share) "
                "as for the attributes, and yours as a diamond. The table below gives the numbers.",
                rows=_percent_rows(feedback.metrics),
            ),
        ]
    return context


@dataclass(frozen=True)
class Revision:
    """The open revision round as an expert's steps read it: its number and
    the steps (``RoundStep`` values) they have not responded to yet
    (``selectors.steps_to_revise``)."""

    number: int
    steps: Collection[str]


def revisions(context: dict[str, Any], mine: Membership | None) -> dict[int, Revision]:
    """From the study home's rounds (``home_context``): per expert id, the
    open round's steps still to revise, for every expert taking part when
    the designer reads the home (their grid of responses, no query), else
    for ``mine`` only (one query). Empty when no round is open."""
    current = context.get("round")
    if current is None:
        return {}
    rows = context["round_responses"]
    if rows is not None:
        return {row.expert.pk: Revision(current.number, row.to_revise) for row in rows if not row.expert.absence}
    return {} if mine is None else {mine.pk: _revision(current, mine)}


def my_revision(study: Study, mine: Membership) -> Revision | None:
    """The open round's steps ``mine`` has still to revise, or None when no
    round is open (no query outside the assessment)."""
    if not services.phase_allows(study, services.Action.OPEN_ROUND):
        return None
    current = selectors.round_current(study=study)
    return None if current is None else _revision(current, mine)


def _revision(current: RevisionRound, expert: Membership) -> Revision:
    responses = selectors.my_round_responses(round=current, expert=expert)
    return Revision(current.number, selectors.steps_to_revise(responses))


def home_context(study: Study) -> dict[str, Any]:
    """The study home's rounds: the open one (with who has responded, for
    the designer), the closed ones and their convergence chart. No query
    before the assessment, when there can be none."""
    if not services.has_opened(study, services.Action.OPEN_ROUND):
        return {"rounds": None}
    rounds = list(selectors.round_list(study=study).select_related("opened_by", "closed_by"))
    current = next((r for r in rounds if r.is_open), None)
    convergence = selectors.round_convergence(study=study) if any(not r.is_open for r in rounds) else []
    context: dict[str, Any] = {
        "rounds": rounds,
        "round": current,
        "round_responses": selectors.round_responses(study=study, round=current)
        if current is not None and study.is_designer
        else None,
        "round_steps": RoundStep.choices,
        "convergence": convergence,
        "round_message_max": limits.ROUND_MESSAGE_MAX_CHARS,
        "can_open_round": services.phase_allows(study, services.Action.OPEN_ROUND) and current is None,
    }
    points = [c for c in convergence if c.attribute_consensus is not None]
    if points:
        context["convergence_chart"] = _convergence_chart(points)
    return context


def _convergence_chart(points: list[selectors.RoundConvergence]) -> charts.LineChart:
    """The line chart of the closed rounds' convergence (``points``, each
    with its attribute consensus): the consensus S* and the largest weight
    spread per round."""
    numbers = [c.number for c in points]
    return charts.line_chart(
        chart_id="round-convergence",
        title="Convergence across revision rounds",
        description="For each closed round: the AHP-OS consensus S* of the attribute weights (1: the experts "
        "agree) and the largest spread (standard deviation) of an attribute's weight. The table gives the numbers.",
        lines=[
            ("Consensus S*", "solid", numbers, [c.attribute_consensus or 0.0 for c in points], True),
            ("Largest weight spread", "dashed", numbers, [c.largest_spread or 0.0 for c in points], True),
        ],
        x_range=(min(numbers) - 0.5, max(numbers) + 0.5),
        x_whole=True,
        y_range=(0.0, 1.0),
        x_label="Round",
        y_label="Value",
        value_format="{:.3g}",
    )


@login_required
def rounds_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """Every revision round of the study (members): the open one with who
    has responded (the designer's grid), each round's message and times,
    the convergence per closed round; the designer opens and closes them
    here and on the study home."""
    study = study_for_member(request, study_id)
    context = {"study": study, "study_tab": "home", **home_context(study)}
    return render(request, "studyhome/rounds.html", context)


@login_required
@require_POST
def round_open_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """Open the next revision round with the message typed (designer)."""
    study = study_for_member(request, study_id)
    require_designer(study, "open a revision round")
    try:
        opened = services.round_open(study=study, by=cast(User, request.user), message=request.POST.get("message", ""))
    except InvalidInput as error:
        messages.error(request, f"The round was not opened: {error.message}")
    except PhaseConflict as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Revision round {opened.number} is open: the experts now see the group's answers.")
    return redirect("study_home", study_id=study.pk)


@login_required
@require_http_methods(["GET", "POST"])
def round_close_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """Close the open round: GET says who has responded and asks to confirm,
    POST closes it, freezing every expert's inputs (designer)."""
    study = study_for_member(request, study_id)
    require_designer(study, "close a revision round")
    current = selectors.round_current(study=study)
    refusal = None
    if request.method == "POST":
        try:
            closed = services.round_close(study=study, by=cast(User, request.user))
        except PhaseConflict as error:
            refusal = str(error)
        else:
            messages.success(request, f"Revision round {closed.number} is closed; its inputs are kept.")
            return redirect("study_home", study_id=study.pk)
    elif current is None:
        refusal = "No revision round is open."
    context = {
        "study": study,
        "study_tab": "home",
        "round": current,
        "round_responses": selectors.round_responses(study=study, round=current) if current else [],
        "round_steps": RoundStep.choices,
        "refusal": refusal,
    }
    return render(request, "studyhome/round_close.html", context, status=409 if refusal else 200)


@login_required
@require_POST
def round_respond_page(request: HttpRequest, study_id: int, step: str) -> HttpResponse:
    """Confirm a step for the open round, with an optional reason (expert);
    back to the step's page."""
    if step not in STEP_PAGES:
        raise Http404("No such step.")
    study = study_for_member(request, study_id)
    require_expert(study, "respond to a revision round")
    expert = next(m for m in study.my_memberships if m.role == Membership.Role.EXPERT)
    expert.study = study
    try:
        response = services.round_respond(expert=expert, step=step, reason=request.POST.get("reason", ""))
    except InvalidInput as error:
        messages.error(request, f"Your response was not saved: {error.message}")
    except PhaseConflict as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Your response to round {response.round.number} was saved ({response.action}).")
    return redirect(STEP_PAGES[RoundStep(step)], study_id=study.pk)
