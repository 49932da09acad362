"""Phases (METHOD.md sections 2-5): which change each phase allows, and the
transitions between them: draft → voting → assessment → closed, and back
from closed to assessment.

``PHASE_RULES`` is the one table of which phase allows which change. The
services refuse a change outside its phases (``require_phase``); pages ask
the same table before anyone tries (``phase_refusal``, ``phase_allows``,
and the ``allows`` template filter), and the API calls the services.
"""

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.db import transaction
from django.db.models import Count

from .. import history
from ..errors import InvalidInput, PhaseConflict
from ..events import event_publish
from ..models import Membership, Metric, Phase, QualityAttribute, RevisionRound, Study
from ..selectors import expert_list, missing_input_list, unconfirmed_votes, vote_selection_get
from ._checks import locked

DRAFT, VOTING, ASSESSMENT, CLOSED = Phase.DRAFT, Phase.VOTING, Phase.ASSESSMENT, Phase.CLOSED


class Action(StrEnum):
    """A change to a study whose phase decides whether it is allowed."""

    OPEN_VOTING = "open_voting"
    CLOSE_VOTING = "close_voting"
    CLOSE_ASSESSMENT = "close_assessment"
    REOPEN_ASSESSMENT = "reopen_assessment"
    CHANGE_THRESHOLD = "change_threshold"
    ADD_EXPERT = "add_expert"
    REMOVE_EXPERT = "remove_expert"
    EXCLUDE_EXPERT = "exclude_expert"
    READMIT_EXPERT = "readmit_expert"
    INVITE_EXPERT = "invite_expert"
    JOIN_AS_EXPERT = "join_as_expert"
    ADD_ATTRIBUTE = "add_attribute"
    CHANGE_ATTRIBUTE = "change_attribute"
    REMOVE_ATTRIBUTE = "remove_attribute"
    ADD_METRIC = "add_metric"
    CHANGE_METRIC = "change_metric"
    REMOVE_METRIC = "remove_metric"
    CHANGE_DEFAULT_RANGE = "change_default_range"
    CHANGE_CANDIDATES = "change_candidates"
    VOTE = "vote"
    PRIORITISE = "prioritise"
    SET_RANGES = "set_ranges"
    WEIGH_PEERS = "weigh_peers"
    CHANGE_ELICITATION = "change_elicitation"
    ELICIT = "elicit"
    OPEN_ROUND = "open_round"
    CLOSE_ROUND = "close_round"
    LAUNCH_RUN = "launch_run"


@dataclass(frozen=True)
class PhaseRule:
    phases: tuple[str, ...]  # the phases that allow the change
    doing: str  # the change in words, as refusals name it


#: Which phase allows which change (METHOD.md 2-5), the one table.
PHASE_RULES: dict[Action, PhaseRule] = {
    Action.OPEN_VOTING: PhaseRule((DRAFT,), "Opening the vote"),
    Action.CLOSE_VOTING: PhaseRule((VOTING,), "Closing the vote"),
    Action.CLOSE_ASSESSMENT: PhaseRule((ASSESSMENT,), "Closing the assessment"),
    Action.REOPEN_ASSESSMENT: PhaseRule((CLOSED,), "Reopening the assessment"),
    # The thresholds decide the selection when voting closes.
    Action.CHANGE_THRESHOLD: PhaseRule((DRAFT, VOTING), "Changing a vote threshold"),
    # Opening the vote fixes the experts, the attributes and the metrics.
    Action.ADD_EXPERT: PhaseRule((DRAFT,), "Adding an expert"),
    Action.REMOVE_EXPERT: PhaseRule((DRAFT,), "Removing an expert"),
    # Once the panel is fixed, an absent expert is excluded instead (their inputs kept, not used).
    Action.EXCLUDE_EXPERT: PhaseRule((VOTING, ASSESSMENT), "Excluding an expert"),
    Action.READMIT_EXPERT: PhaseRule((VOTING, ASSESSMENT), "Re-admitting an expert"),
    Action.INVITE_EXPERT: PhaseRule((DRAFT,), "Inviting an expert"),
    Action.JOIN_AS_EXPERT: PhaseRule((DRAFT,), "Joining a study as an expert"),
    Action.ADD_ATTRIBUTE: PhaseRule((DRAFT,), "Adding an attribute"),
    Action.CHANGE_ATTRIBUTE: PhaseRule((DRAFT,), "Changing an attribute"),
    Action.REMOVE_ATTRIBUTE: PhaseRule((DRAFT,), "Removing an attribute"),
    Action.ADD_METRIC: PhaseRule((DRAFT,), "Adding a metric"),
    Action.CHANGE_METRIC: PhaseRule((DRAFT,), "Changing a metric"),
    Action.REMOVE_METRIC: PhaseRule((DRAFT,), "Removing a metric"),
    # A metric's default range (only) changes until voting closes.
    Action.CHANGE_DEFAULT_RANGE: PhaseRule((DRAFT, VOTING), "Changing a metric"),
    # Candidates and measurements change in any phase.
    Action.CHANGE_CANDIDATES: PhaseRule((DRAFT, VOTING, ASSESSMENT, CLOSED), "Changing candidates"),
    Action.VOTE: PhaseRule((VOTING,), "Voting"),
    Action.PRIORITISE: PhaseRule((ASSESSMENT,), "Prioritising"),
    Action.SET_RANGES: PhaseRule((ASSESSMENT,), "Setting acceptable ranges"),
    Action.WEIGH_PEERS: PhaseRule((ASSESSMENT,), "Weighting experts"),
    # How a metric's values are obtained, like its computation from
    # predictions, may change while the experts' inputs may: in the
    # assessment a change clears the answers given (the page asks first).
    Action.CHANGE_ELICITATION: PhaseRule((DRAFT, VOTING, ASSESSMENT), "Changing an elicited metric"),
    Action.ELICIT: PhaseRule((ASSESSMENT,), "Answering an elicited metric's questions"),
    # Revision rounds happen while the experts' inputs may change.
    Action.OPEN_ROUND: PhaseRule((ASSESSMENT,), "Opening a revision round"),
    Action.CLOSE_ROUND: PhaseRule((ASSESSMENT,), "Closing a revision round"),
    # Runs validate frozen inputs.
    Action.LAUNCH_RUN: PhaseRule((CLOSED,), "Launching a run"),
}

#: The phases in which the selection of attributes and metrics is fixed
#: (from closing the vote on): tallies and "selected" are shown then.
SELECTION_FIXED_PHASES = (ASSESSMENT, CLOSED)


def phase_allows(study: Study, action: Action | str) -> bool:
    """The study's phase allows ``action`` (``PHASE_RULES``)."""
    return study.phase in PHASE_RULES[Action(action)].phases


def phase_refusal(study: Study, action: Action | str, doing: str | None = None) -> str | None:
    """Why the study's phase refuses ``action``, in the words of
    ``require_phase`` (``doing`` names the change when a page says it its
    own way), or None when the phase allows it."""
    rule = PHASE_RULES[Action(action)]
    if study.phase in rule.phases:
        return None
    phases = " or ".join(Phase(p).label.lower() for p in rule.phases)
    return (
        f"{doing or rule.doing} is only possible in the {phases} phase; "
        f"the study is in the {Phase(study.phase).label.lower()} phase"
    )


def require_phase(study: Study, action: Action | str, doing: str | None = None) -> None:
    """``PhaseConflict`` unless the study's phase allows ``action``."""
    refusal = phase_refusal(study, action, doing)
    if refusal is not None:
        raise PhaseConflict(refusal)


def opens_in(action: Action | str) -> str:
    """The first phase that allows ``action`` (the phase order is Phase's)."""
    return PHASE_RULES[Action(action)].phases[0]


def has_opened(study: Study, action: Action | str) -> bool:
    """The study has reached the first phase that allows ``action`` (it may
    have moved past it since)."""
    order = list(Phase.values)
    return order.index(study.phase) >= order.index(opens_in(action))


def selection_fixed(study: Study) -> bool:
    """The selection of attributes and metrics is fixed (voting has closed)."""
    return study.phase in SELECTION_FIXED_PHASES


@transaction.atomic
def study_open_voting(*, study: Study) -> Study:
    study = locked(study)
    require_phase(study, Action.OPEN_VOTING)
    problems = []
    if not expert_list(study=study).exists():
        problems.append("invite at least one expert")
    attributes = QualityAttribute.objects.filter(study=study).annotate(metric_count=Count("metrics"))
    if not attributes:
        problems.append("add at least one quality attribute")
    bare = [a.name for a in attributes if a.metric_count == 0]
    if bare:
        problems.append(f"give every attribute at least one metric (none yet: {', '.join(bare)})")
    if problems:
        raise PhaseConflict("Voting cannot open yet: " + "; ".join(problems) + ".", code="transition_blocked")
    return _move(study, Phase.VOTING)


@transaction.atomic
def study_close_voting(*, study: Study) -> Study:
    """Fix the selection and move to assessment; refused while a selected
    attribute would have no selected metric."""
    study = locked(study)
    require_phase(study, Action.CLOSE_VOTING)
    unconfirmed = unconfirmed_votes(study=study)
    if unconfirmed:
        raise PhaseConflict(
            f"Voting cannot close: {'; '.join(unconfirmed)} (their votes count once confirmed).",
            code="transition_blocked",
        )
    attribute_ids, metric_ids = vote_selection_get(study=study)
    if not attribute_ids:
        raise PhaseConflict(
            "Voting cannot close: no attribute is selected "
            f"(no main attribute, and none has {study.attribute_threshold} votes).",
            code="transition_blocked",
        )
    metric_attributes = set(Metric.objects.filter(pk__in=metric_ids).values_list("attribute_id", flat=True))
    orphans = QualityAttribute.objects.filter(pk__in=attribute_ids - metric_attributes).order_by("position", "id")
    if orphans:
        names = ", ".join(repr(a.name) for a in orphans)
        raise PhaseConflict(
            f"Voting cannot close: the selected attribute(s) {names} would have no selected metric "
            f"(none reaches the metric threshold of {study.metric_threshold} votes). "
            "Lower the metric threshold or ask the experts to vote on these metrics.",
            code="transition_blocked",
        )
    # Only the rows whose selection changes are written, each with its record.
    history.update(QualityAttribute.objects.filter(study=study).exclude(pk__in=attribute_ids), is_selected=False)
    history.update(QualityAttribute.objects.filter(study=study, pk__in=attribute_ids), is_selected=True)
    history.update(Metric.objects.filter(study=study).exclude(pk__in=metric_ids), is_selected=False)
    history.update(Metric.objects.filter(study=study, pk__in=metric_ids), is_selected=True)
    return _move(study, Phase.ASSESSMENT)


@transaction.atomic
def study_close_assessment(*, study: Study) -> Study:
    study = locked(study)
    require_phase(study, Action.CLOSE_ASSESSMENT)
    open_round = RevisionRound.objects.filter(study=study).open().values_list("number", flat=True)
    for number in open_round:
        raise PhaseConflict(
            f"Assessment cannot close while revision round {number} is open: close the round first.",
            code="transition_blocked",
        )
    taking_part = expert_list(study=study).filter(absence=Membership.Absence.NONE).count()
    short = quorum_problem(study=study, taking_part=taking_part)
    if short:
        raise PhaseConflict(f"Assessment cannot close: {short}.", code="transition_blocked")
    gaps = missing_input_list(study=study)
    if gaps:
        detail = "; ".join(f"{name}: {', '.join(items)}" for name, items in gaps.items())
        raise PhaseConflict(f"Assessment cannot close, inputs are missing: {detail}.", code="transition_blocked")
    return _move(study, Phase.CLOSED)


def quorum_problem(*, study: Study, taking_part: int, absent: int | None = None) -> str | None:
    """Why the assessment cannot close for want of experts, or None: at least
    one expert, and at least the study's quorum, must take part. ``absent``:
    how many are excluded or abstaining, when the caller knows (else read)."""
    needed = max(study.quorum, 1)
    if taking_part >= needed:
        return None
    if absent is None:
        absent = expert_list(study=study).exclude(absence=Membership.Absence.NONE).count()
    left_out = f" ({absent} excluded or abstaining)" if absent else ""
    return (
        f"at least {needed} expert{'s' if needed != 1 else ''} must take part to close the assessment; "
        f"{taking_part} do{'es' if taking_part == 1 else ''}{left_out}"
    )


@transaction.atomic
def study_reopen_assessment(*, study: Study) -> Study:
    study = locked(study)
    require_phase(study, Action.REOPEN_ASSESSMENT)
    return _move(study, Phase.ASSESSMENT)


def _move(study: Study, phase: str) -> Study:
    was, study.phase = study.phase, phase
    study.save(update_fields=["phase", "updated_at"])
    changed: dict[str, Any] = {"from": was, "to": phase}  # "from" is a Python keyword
    event_publish("phase.changed", study_id=study.pk, **changed)
    return study


TRANSITIONS: dict[tuple[str, str], Callable[..., Study]] = {
    (Phase.DRAFT, Phase.VOTING): study_open_voting,
    (Phase.VOTING, Phase.ASSESSMENT): study_close_voting,
    (Phase.ASSESSMENT, Phase.CLOSED): study_close_assessment,
    (Phase.CLOSED, Phase.ASSESSMENT): study_reopen_assessment,
}


def study_transition(*, study: Study, to: str) -> Study:
    """Move the study to phase ``to`` by the one transition that leads there."""
    if to not in Phase.values:
        raise InvalidInput({"to": f"must be one of {', '.join(Phase.values)}, got {to!r}"})
    transition = TRANSITIONS.get((study.phase, to))
    if transition is None:
        raise PhaseConflict(f"A study in the {study.phase} phase cannot move to {to}.")
    return transition(study=study)
