"""The study's members and experts: who they are, who is still pending, how
far each expert has got, and what each still owes.

What counts as a missing input is written once, in ``input_gaps``, over the
progress ``expert_progress_annotate`` reads in SQL; the dashboard, the study
home's progress grid, the expert's steps and the close-phase check
(``missing_input_list``) all read it there.
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from engine.rules import CONSISTENCY_THRESHOLD, is_consistent

from ..extensions import MISSING_INPUTS, own_values
from ..models import (
    AcceptableRange,
    AttributePrioritisation,
    AttributeVote,
    Direction,
    Membership,
    Metric,
    MetricPrioritisation,
    MetricVote,
    PeerWeight,
    Study,
)
from ._queries import User, count_of
from .design import ranges_needed

# --- members ----------------------------------------------------------------------------


def expert_list(*, study: Study | None) -> QuerySet[Membership]:
    """The study's expert memberships with their users, in the order they
    joined (the rows of V and W in every run). ``study=None`` gives the
    unfiltered queryset, for prefetching."""
    experts = Membership.objects.filter(role=Membership.Role.EXPERT).select_related("user").order_by("id")
    return experts if study is None else experts.filter(study=study)


def panel_list(*, study: Study) -> QuerySet[Membership]:
    """The experts who take part: ``expert_list`` without the excluded and
    abstaining ones (docs/method.md, "Absent experts"), whose inputs are
    kept but not used. The rows of V and W in every run."""
    return expert_list(study=study).filter(absence=Membership.Absence.NONE)


def absent_list(*, study: Study) -> QuerySet[Membership]:
    """The excluded and abstaining experts, in the order they joined."""
    return expert_list(study=study).exclude(absence=Membership.Absence.NONE)


def expert_get(*, study: Study, username: str) -> Membership:
    """The study's expert ``username`` (``Membership.DoesNotExist`` if none).
    A username with a NUL character names nobody; it must not reach the
    query, which PostgreSQL would fail instead of answering."""
    if "\x00" in username:
        raise Membership.DoesNotExist
    return expert_list(study=study).get(user__username=username)


def member_list(*, study: Study) -> QuerySet[Membership]:
    """The designer and the experts, with their users."""
    return Membership.objects.filter(study=study).select_related("user").order_by("role", "id")


def is_expert_of(*, study: Study, user: User) -> bool:
    """Whether ``user`` holds an expert membership (active or pending) of ``study``."""
    return Membership.objects.filter(study=study, user=user.pk, role=Membership.Role.EXPERT).exists()


# --- pending experts (consent): why their inputs do not count yet --------------------------


def _pending_experts(study: Study) -> QuerySet[Membership]:
    return Membership.objects.filter(study=study, role=Membership.Role.EXPERT, status=Membership.Status.PENDING)


def pending_reason(membership: Membership) -> str:
    name = membership.user.get_username()
    if membership.inputs_imported_by is None:
        return f"{name} has not yet accepted the invitation"
    return f"{name} has not yet confirmed the inputs imported by {membership.inputs_imported_by.get_username()}"


def unconfirmed_votes(*, study: Study) -> list[str]:
    """Why closing the vote must wait: pending experts holding imported votes."""
    voted = Q(Exists(AttributeVote.objects.filter(expert=OuterRef("pk")))) | Q(
        Exists(MetricVote.objects.filter(expert=OuterRef("pk")))
    )
    pending = _pending_experts(study).filter(voted, absence=Membership.Absence.NONE)
    return [pending_reason(m) for m in pending.select_related("user", "inputs_imported_by").order_by("id")]


def inputs_pending(*, study: Study) -> dict[int, str]:
    """``{membership id: reason}`` for the study's pending experts."""
    pending = _pending_experts(study)
    return {m.pk: pending_reason(m) for m in pending.select_related("user", "inputs_imported_by")}


# --- progress ----------------------------------------------------------------------------
# Read with subqueries on the expert memberships, so a page reads every
# expert's progress in one query however many experts, studies or inputs.


class Progress(TypedDict):
    votes_cast: int
    prioritised_at: datetime | None
    prioritisation_method: str | None
    ranges_needed: int
    ranges_missing: int
    ranges_given: int
    ranges_defaulted: int
    ranges_to_confirm: int
    peers_rated: int
    experts_total: int
    attribute_consistency: float | None
    metric_consistency: float | None


# An expert membership with its progress annotated (for the type checker:
# WithAnnotations takes its TypedDict only there).
if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    ExpertProgress = WithAnnotations[Membership, Progress]
else:
    ExpertProgress = Membership


def expert_progress_annotate(memberships: QuerySet[Membership]) -> QuerySet[ExpertProgress]:
    """Expert memberships with what each has given so far, as annotations:

    - ``votes_cast``: attribute and metric votes;
    - ``prioritised_at`` / ``prioritisation_method``: the attribute
      prioritisation's last change and method (null: none yet);
    - ``ranges_needed``: the metrics ``design.ranges_needed`` (the ones
      closing the assessment needs a range for); ``ranges_missing``: those
      the expert has no range for; ``ranges_given``: the expert's ranges on
      selected metrics;
    - ``ranges_defaulted``: selected metrics with a default range the
      expert has no range of their own for (unconfirmed while
      ``ranges_confirmed_at`` is null); ``ranges_to_confirm``: the
      expert's ranges on selected metrics whose values changed under them
      (``AcceptableRange.needs_confirmation``: the metric became elicited);
    - ``peers_rated`` / ``experts_total``: peer weights given, and the
      study's experts (complete when equal: one weight per expert);
    - ``attribute_consistency`` / ``metric_consistency``: the consistency
      ratio of the attribute prioritisation and the highest of the local
      (metric) prioritisations (null: none, or direct weights).

    ``input_gaps`` reads from these what the expert still owes.
    """
    needed = ranges_needed().filter(study=OuterRef("study_id"))
    ranged = AcceptableRange.objects.filter(expert=OuterRef(OuterRef("pk")), metric=OuterRef("pk"))
    prioritisation = AttributePrioritisation.objects.filter(expert=OuterRef("pk"))
    local = MetricPrioritisation.objects.filter(expert=OuterRef("pk"), consistency_ratio__isnull=False)
    defaulted = Metric.objects.filter(
        study=OuterRef("study_id"), is_selected=True, default_least_acceptable__isnull=False
    ).exclude(Exists(ranged))
    return memberships.annotate(
        votes_cast=count_of(AttributeVote.objects.filter(expert=OuterRef("pk")))
        + count_of(MetricVote.objects.filter(expert=OuterRef("pk"))),
        prioritised_at=Subquery(prioritisation.values("updated_at")[:1]),
        prioritisation_method=Subquery(prioritisation.values("method")[:1]),
        ranges_needed=count_of(needed),
        ranges_missing=count_of(needed.exclude(Exists(ranged))),
        ranges_given=count_of(AcceptableRange.objects.filter(expert=OuterRef("pk"), metric__is_selected=True)),
        ranges_defaulted=count_of(defaulted),
        ranges_to_confirm=count_of(to_confirm().filter(expert=OuterRef("pk"))),
        attribute_consistency=Subquery(prioritisation.values("consistency_ratio")[:1]),
        metric_consistency=Subquery(local.order_by("-consistency_ratio").values("consistency_ratio")[:1]),
        peers_rated=count_of(PeerWeight.objects.filter(rater=OuterRef("pk"))),
        experts_total=count_of(Membership.objects.filter(study=OuterRef("study_id"), role=Membership.Role.EXPERT)),
    )


def expert_progress_list(*, study: Study) -> QuerySet[ExpertProgress]:
    """The study's experts (pending ones too) with their users, who imported
    their inputs, and their progress (``expert_progress_annotate``): one
    query."""
    experts = expert_list(study=study).select_related("inputs_imported_by")
    return expert_progress_annotate(experts)


# --- what is missing ----------------------------------------------------------------------

# The inputs an expert gives during the assessment, each needed to close it.
ASSESSMENT_INPUTS = ("priorities", "ranges", "peer_weights")


def input_gaps(expert: ExpertProgress) -> list[str]:
    """The assessment inputs (``ASSESSMENT_INPUTS``, in that order) that
    ``expert``, annotated by ``expert_progress_annotate``, has not given:
    no prioritisation of the attributes; no range for a metric of
    ``design.ranges_needed``, or a range still to confirm (``to_confirm``);
    not a weight for every expert of the study. The one definition of a
    missing input."""
    missing = {
        "priorities": expert.prioritised_at is None,
        "ranges": expert.ranges_missing > 0 or expert.ranges_to_confirm > 0,
        "peer_weights": expert.peers_rated != expert.experts_total,
    }
    return [key for key in ASSESSMENT_INPUTS if missing[key]]


# What does not block closing the assessment but is shown beside the gaps
# (METHOD.md 3 and 4, Decisions): judgments above the consistency threshold
# (kept as given), and default ranges the expert has not confirmed.
INPUT_NOTES = ("priorities_inconsistent", "ranges_unconfirmed")


def consistency_worst(expert: ExpertProgress) -> float | None:
    """The highest consistency ratio of the expert's prioritisations
    (attributes and local ones), or None without judgments."""
    ratios = [r for r in (expert.attribute_consistency, expert.metric_consistency) if r is not None]
    return max(ratios) if ratios else None


def input_notes(expert: ExpertProgress) -> list[str]:
    """The notes (``INPUT_NOTES``, in that order) on ``expert``'s inputs,
    annotated by ``expert_progress_annotate``: a prioritisation with a
    consistency ratio above engine.rules.CONSISTENCY_THRESHOLD; the
    designer's default ranges, not yet saved or confirmed by the expert
    (for metrics with a default, when no range is missing). Neither blocks
    closing the assessment; ``input_gaps`` is what does."""
    worst = consistency_worst(expert)
    notes = {
        "priorities_inconsistent": worst is not None and not is_consistent(worst),
        "ranges_unconfirmed": expert.ranges_confirmed_at is None
        and expert.ranges_defaulted > 0
        and expert.ranges_missing == 0,
    }
    return [key for key in INPUT_NOTES if notes[key]]


def consistency_words(ratio: float) -> str:
    """ "consistency ratio of 0.29 (at most 0.10)": the reminder's and the
    lists' wording (a third decimal when two would hide which side of the
    threshold the ratio is)."""
    shown = f"{ratio:.2f}"
    if (float(shown) <= CONSISTENCY_THRESHOLD) != is_consistent(ratio):
        shown = f"{ratio:.3f}"
    return f"consistency ratio of {shown} (at most {CONSISTENCY_THRESHOLD:.2f})"


def input_note_list(*, study: Study) -> dict[str, dict[str, float]]:
    """The notes (``input_notes``) on each active expert's inputs, as the
    close-assessment confirmation and the reminders give them:
    ``{username: {"priorities_inconsistent": highest consistency ratio,
    "ranges_unconfirmed": metrics on default ranges}}``, only experts with
    notes, in the order they joined. One query."""
    notes: dict[str, dict[str, float]] = {}
    for expert in expert_progress_list(study=study).filter(status=Membership.Status.ACTIVE):
        values = {
            "priorities_inconsistent": consistency_worst(expert) or 0.0,
            "ranges_unconfirmed": float(expert.ranges_defaulted),
        }
        found = {note: values[note] for note in input_notes(expert)}
        if found:
            notes[expert.user.get_username()] = found
    return notes


def note_words(note: str, value: float, *, to_expert: bool) -> str:
    """One note of ``input_note_list`` in words, to the expert ("Your
    priorities have ...": the reminder) or about them (the designer's lists)."""
    if note == "priorities_inconsistent":
        if to_expert:
            return f"Your priorities have a {consistency_words(value)}: please revise them"
        return f"judgments inconsistent, {consistency_words(value)}"
    count = int(value)
    if to_expert:
        return "Your acceptable ranges are the designer's defaults, not confirmed: please confirm or change them"
    return f"default ranges not confirmed ({count} metric{'' if count == 1 else 's'})"


def to_confirm() -> QuerySet[AcceptableRange]:
    """The ranges on selected metrics that their experts must confirm or
    change before the assessment can close (filter it to a study or an
    expert): the metric's values changed under them
    (``AcceptableRange.needs_confirmation``, docs/method.md 7.4)."""
    return AcceptableRange.objects.filter(needs_confirmation=True, metric__is_selected=True)


def proposed_range(values: Iterable[float], better: str) -> list[float] | None:
    """The range proposed to an expert for a metric whose values are their
    own (an elicited metric, docs/method.md 7.4), from the spread of their
    values over the candidates: the desired value is their best value, the
    least acceptable one a tenth of the spread beyond their worst, so that
    the proposal vetoes no candidate (the expert narrows it); both rounded
    to two digits below the spread's first. None with fewer than two
    distinct values (no spread to propose from)."""
    found = [float(value) for value in values]
    if len(set(found)) < 2:
        return None
    low, high = min(found), max(found)
    spread = high - low
    digits = 2 - math.floor(math.log10(spread))
    margin = spread / 10
    pair = [low - margin, high] if better == Direction.HIGHER else [high + margin, low]
    return [round(bound, digits) for bound in pair]


@dataclass(frozen=True)
class RangeToConfirm:
    """One of the expert's ranges to confirm or change: the metric, the
    range as stored, the expert's own value of each candidate (None until
    they finish its questions), and the range proposed from them."""

    metric: Metric
    range: list[float]
    own_values: dict[str, float] | None
    proposed: list[float] | None


def ranges_to_confirm_list(*, study: Study, expert: Membership) -> list[RangeToConfirm]:
    """The expert's ranges to confirm (``to_confirm``), in the metrics'
    order, each with their own values of the metric
    (``workspace.extensions.own_values``) and the proposal
    (``proposed_range``). One query when there is none."""
    rows = list(
        to_confirm()
        .filter(expert=expert)
        .select_related("metric")
        .order_by("metric__attribute__position", "metric__attribute_id", "metric__position", "metric_id")
    )
    own = own_values(study=study, expert=expert) if rows else {}
    out = []
    for row in rows:
        values = own.get(row.metric_id)
        proposed = proposed_range(values.values(), row.metric.better) if values else None
        out.append(RangeToConfirm(row.metric, [row.least_acceptable, row.desired], values, proposed))
    return out


def _range_gaps(
    expert_id: int, needed: list[tuple[int, str]], ranged: set[tuple[int, int]], confirming: list[str]
) -> list[str]:
    """The expert's missing ranges in words: the metrics of ``needed``
    without one of theirs, and those whose range they must confirm."""
    gaps = []
    unranged = [name for pk, name in needed if (expert_id, pk) not in ranged]
    if unranged:
        gaps.append(f"acceptable range for {', '.join(unranged)}")
    if confirming:
        gaps.append(
            f"confirmation of their acceptable range for {', '.join(confirming)} (its values changed: it was "
            "made elicited, or its elicitation changed or stopped)"
        )
    return gaps


def missing_input_list(*, study: Study) -> dict[str, list[str]]:
    """What each expert still has to give before assessment can close:
    ``{username: [what is missing, ...]}``, only experts with gaps (a pending
    expert's gap is their consent: imported inputs count once confirmed).
    Five queries (the ranges to confirm, ``to_confirm``, one of them), six
    with selected elicited metrics: those an expert
    has not finished answering (issue 21, docs/method.md 7.4). Excluded and
    abstaining experts owe nothing."""
    experts = list(expert_progress_list(study=study).filter(absence=Membership.Absence.NONE))
    # The apps above add theirs (evaluation: the elicited metrics not yet answered).
    others = [provider(study=study, experts=[expert.pk for expert in experts]) for provider in MISSING_INPUTS]
    needed = ranges_needed().filter(study=study).order_by("attribute__position", "attribute__id", "position", "id")
    needed_names = list(needed.values_list("pk", "name"))
    ranged = set(AcceptableRange.objects.filter(expert__study=study).values_list("expert_id", "metric_id"))
    confirming: dict[int, list[str]] = {}
    for expert_id, name in (
        to_confirm()
        .filter(expert__study=study)
        .order_by("metric__attribute__position", "metric__attribute_id", "metric__position", "metric_id")
        .values_list("expert_id", "metric__name")
    ):
        confirming.setdefault(expert_id, []).append(name)
    words = {"priorities": "prioritisation of the attributes", "peer_weights": "weights for fellow experts"}
    gaps = {}
    for expert in experts:
        if expert.status == Membership.Status.PENDING:
            gaps[expert.user.get_username()] = [pending_reason(expert)]
            continue
        missing = []
        for gap in input_gaps(expert):
            if gap == "ranges":
                missing += _range_gaps(expert.pk, needed_names, ranged, confirming.get(expert.pk, []))
            else:
                missing.append(words[gap])
        missing += [gap for provided in others for gap in provided.get(expert.pk, ())]
        if missing:
            gaps[expert.user.get_username()] = missing
    return gaps


def expert_steps_get(*, expert: Membership) -> dict[str, bool]:
    """Which of the expert's four steps hold an input (one query), from the
    progress the study home shows (``expert_progress_annotate``); the
    ranges step is done with unconfirmed defaults too, and the notes of
    ``input_notes`` are given beside the steps (``priorities_inconsistent``,
    ``ranges_unconfirmed``).

    votes: at least one vote stored (a ballot with no vote leaves no row, so
    it reads as missing); the assessment's three steps: not among the
    expert's ``input_gaps`` (peer weights: ``peer_weights_set`` stores whole
    rows only).
    """
    progress = expert_progress_annotate(Membership.objects.filter(pk=expert.pk)).get()
    gaps, notes = input_gaps(progress), input_notes(progress)
    return {
        "votes": progress.votes_cast > 0,
        **{key: key not in gaps for key in ASSESSMENT_INPUTS},
        **{key: key in notes for key in INPUT_NOTES},
    }
