"""Revision rounds: the rounds of a study, who has responded in the open
one, the group's anonymised feedback an expert reads, and the convergence
across closed rounds.

Anonymity (docs/method.md, "Revision rounds"): the feedback names no expert
and keeps no expert's order. Weights are told as quartiles only (never the
lowest or highest, which are one expert's own); ranges as
the group's least acceptable and desired values each sorted on their own (so
a bound is not paired with its other bound); peer weights as the mean weight
each expert receives; reasons without their author, sorted by their text. An
input fewer than ``ROUND_FEEDBACK_MIN_EXPERTS`` experts gave is not described
at all (with two, the median and one's own answer give the other's away).
"""

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from engine.disagreement import Quartiles, ahp_consensus, quartiles, weight_spread

from ..limits import ROUND_FEEDBACK_MIN_EXPERTS
from ..models import Membership, RevisionRound, RoundResponse, RoundStep, Study
from .experts import expert_list


def round_list(*, study: Study) -> QuerySet[RevisionRound]:
    """The study's rounds, first first, without their snapshots."""
    return RevisionRound.objects.filter(study=study).defer("snapshot").order_by("number")


def round_current(*, study: Study) -> RevisionRound | None:
    """The study's open round, or None."""
    return RevisionRound.objects.filter(study=study, closed_at__isnull=True).defer("snapshot").first()


def round_get(*, study: Study, number: int) -> RevisionRound:
    """The study's round ``number`` (``RevisionRound.DoesNotExist`` if none)."""
    return RevisionRound.objects.defer("snapshot").get(study=study, number=number)


def round_latest_number(*, study: Study) -> int | None:
    """The number of the study's latest round, open or closed (None: none yet)."""
    return RevisionRound.objects.filter(study=study).order_by("-number").values_list("number", flat=True).first()


@dataclass
class ExpertResponses:
    """One expert's responses to a round, by step (``{step: RoundResponse}``)."""

    expert: Membership
    steps: dict[str, RoundResponse] = field(default_factory=dict)

    @property
    def responded(self) -> bool:
        return len(self.steps) == len(RoundStep.values)

    def cells(self) -> list[tuple[str, RoundResponse | None]]:
        return [(step, self.steps.get(step)) for step in RoundStep.values]


def round_responses(*, study: Study, round: RevisionRound) -> list[ExpertResponses]:
    """Who has responded to ``round``, step by step, every expert in the
    order they joined (the designer's grid: names, never reasons). Two queries."""
    rows = {expert.pk: ExpertResponses(expert) for expert in expert_list(study=study)}
    for response in RoundResponse.objects.filter(round=round):
        if response.expert_id in rows:
            rows[response.expert_id].steps[response.step] = response
    return list(rows.values())


def my_round_responses(*, round: RevisionRound, expert: Membership) -> dict[str, RoundResponse]:
    """The expert's own responses to ``round``, by step."""
    return {r.step: r for r in RoundResponse.objects.filter(round=round, expert=expert)}


# --- the group's feedback --------------------------------------------------------------


@dataclass(frozen=True)
class WeightFeedback:
    """The group's weights of one attribute or metric: ``group`` None when
    fewer than ROUND_FEEDBACK_MIN_EXPERTS experts gave one."""

    name: str
    group: Quartiles | None
    own: float | None
    attribute: str | None = None  # a metric's attribute


@dataclass(frozen=True)
class RangeFeedback:
    """The group's bounds of one metric, each sorted on its own."""

    name: str
    better: str
    unit: str
    least_acceptable: list[float] | None
    desired: list[float] | None
    own: tuple[float, float] | None


@dataclass(frozen=True)
class PeerFeedback:
    """How much the group trusts one expert, on average, and how much you do."""

    name: str
    mean: float | None
    raters: int
    own: float | None


def _column(grid: list[list[Any]], j: int) -> list[float]:
    return [row[j] for row in grid if row[j] is not None]


def _weights(names: list[Any], grid: list[list[Any]], me: int | None) -> list[WeightFeedback]:
    out = []
    for j, name in enumerate(names):
        values = _column(grid, j)
        shown = quartiles(values) if len(values) >= ROUND_FEEDBACK_MIN_EXPERTS else None
        own = grid[me][j] if me is not None else None
        if isinstance(name, dict):  # a metric
            out.append(WeightFeedback(name["name"], shown, own, name["attribute"]))
        else:
            out.append(WeightFeedback(name, shown, own))
    return out


def _ranges(snapshot: dict, me: int | None) -> list[RangeFeedback]:
    out = []
    for j, metric in enumerate(snapshot["metrics"]):
        pairs = [(lo[j], up[j]) for lo, up in zip(snapshot["lower"], snapshot["upper"], strict=True)]
        given = [pair for pair in pairs if pair[0] is not None and pair[1] is not None]
        enough = len(given) >= ROUND_FEEDBACK_MIN_EXPERTS
        out.append(
            RangeFeedback(
                name=metric["name"],
                better=metric["better"],
                unit=metric["unit"],
                least_acceptable=sorted(p[0] for p in given) if enough else None,
                desired=sorted(p[1] for p in given) if enough else None,
                own=pairs[me] if me is not None and None not in pairs[me] else None,
            )
        )
    return out


def _peers(snapshot: dict, me: int | None) -> list[PeerFeedback]:
    grid = snapshot["peer_weights"]
    raters = [row for row in grid if None not in row]
    enough = len(raters) >= ROUND_FEEDBACK_MIN_EXPERTS
    return [
        PeerFeedback(
            name=name,
            mean=sum(row[j] for row in raters) / len(raters) if enough else None,
            raters=len(raters),
            own=grid[me][j] if me is not None else None,
        )
        for j, name in enumerate(snapshot["experts"])
    ]


def _reasons(round: RevisionRound | None) -> dict[str, list[str]]:
    """The reasons given in ``round`` (the previous one), by step, without
    their authors, sorted by their text."""
    found: dict[str, list[str]] = {step: [] for step in RoundStep.values}
    if round is not None:
        for step, reason in RoundResponse.objects.filter(round=round).exclude(reason="").values_list("step", "reason"):
            found[step].append(reason)
    return {step: sorted(reasons) for step, reasons in found.items()}


@dataclass(frozen=True)
class Feedback:
    round: RevisionRound
    attributes: list[WeightFeedback]
    metrics: list[WeightFeedback]
    ranges: list[RangeFeedback]
    peer_weights: list[PeerFeedback]
    previous_reasons: dict[str, list[str]]  # by step, from the round before
    mine: dict[str, RoundResponse]  # the expert's responses to this round, by step
    min_experts: int = ROUND_FEEDBACK_MIN_EXPERTS


def round_feedback(*, study: Study, expert: Membership, round: RevisionRound) -> Feedback:
    """What ``expert`` reads in ``round``: every step's group distribution
    (from the experts' inputs as they are now) beside their own answer, and
    the reasons given in the round before, anonymised (module docstring)."""
    from engine.snapshot import inputs_snapshot  # engine.snapshot reads workspace: imported when used

    snapshot = inputs_snapshot(study=study)
    username = expert.user.get_username()
    me = snapshot["experts"].index(username) if username in snapshot["experts"] else None
    previous = RevisionRound.objects.filter(study=study, number=round.number - 1).defer("snapshot").first()
    return Feedback(
        round=round,
        attributes=_weights(snapshot["attributes"], snapshot["attribute_weights"], me),
        metrics=_weights(snapshot["metrics"], snapshot["metric_weights"], me),
        ranges=_ranges(snapshot, me),
        peer_weights=_peers(snapshot, me),
        previous_reasons=_reasons(previous),
        mine=my_round_responses(round=round, expert=expert),
    )


# --- convergence across rounds --------------------------------------------------------


@dataclass(frozen=True)
class RoundConvergence:
    """One closed round's agreement: AHP-OS's consensus S* of the attribute
    and of the metric weights (None without two complete rows), and each
    attribute's weight spread (population standard deviation)."""

    number: int
    experts: int  # the experts whose attribute weights count
    attribute_consensus: float | None
    metric_consensus: float | None
    attribute_spread: dict[str, float]

    @property
    def largest_spread(self) -> float | None:
        return max(self.attribute_spread.values()) if self.attribute_spread else None


def _complete(grid: list[list[Any]]) -> list[list[float]]:
    return [row for row in grid if row and None not in row]


def convergence_of(number: int, snapshot: dict) -> RoundConvergence:
    """A round's convergence from its snapshot (``engine.disagreement``).
    Kept inputs the measures refuse (a bundle's, edited by hand) give no
    figures rather than an error."""
    try:
        attributes = _complete(snapshot["attribute_weights"])
        metrics = _complete(snapshot["metric_weights"])
        spread = weight_spread(attributes).stdev.tolist() if attributes else []
        return RoundConvergence(
            number=number,
            experts=len(attributes),
            attribute_consensus=ahp_consensus(attributes) if len(attributes) >= 2 else None,
            metric_consensus=ahp_consensus(metrics) if len(metrics) >= 2 else None,
            attribute_spread=dict(zip(snapshot["attributes"], spread, strict=False)),
        )
    except (KeyError, TypeError, ValueError):
        return RoundConvergence(number, 0, None, None, {})


def round_convergence(*, study: Study) -> list[RoundConvergence]:
    """Each closed round's convergence, first first. One query."""
    closed = RevisionRound.objects.filter(study=study, closed_at__isnull=False).order_by("number")
    # A closed round always has its snapshot (constraint round_closed_has_snapshot).
    return [convergence_of(number, snapshot or {}) for number, snapshot in closed.values_list("number", "snapshot")]
