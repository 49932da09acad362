"""Revision rounds: the rounds of a study, who has responded in the open
one, the group's anonymised feedback an expert reads, and the convergence
across closed rounds.

The feedback (docs/method.md, "Revision-round feedback"; METHOD.md 9) is
``engine.feedback.round_feedback``, computed once when the round opens
(``round_feedback_frozen``, stored in ``RevisionRound.feedback``) and read
unchanged for the whole round, beside the expert's own answers as they are
now. It names no expert and keeps no expert's order: each input (a weight,
a least acceptable or a desired value, the weight an expert receives) is
summarised on its own, with fewer than five answers only by the coarse band
of its median, from five on by its median and quartiles, never by the
lowest or highest answer; reasons without their author, sorted by their text.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from django.db.models import Max, Min, QuerySet

from engine import feedback as group_feedback
from engine.disagreement import ahp_consensus, weight_spread
from engine.feedback import Summary

from ..models import Measurement, Membership, Metric, RevisionRound, RoundResponse, RoundStep, Study
from .design import selected_metrics
from .experts import expert_list
from .snapshot import inputs_snapshot


def round_list(*, study: Study) -> QuerySet[RevisionRound]:
    """The study's rounds, first first, without their snapshots and feedback."""
    return RevisionRound.objects.filter(study=study).defer("snapshot", "feedback").order_by("number")


def round_current(*, study: Study) -> RevisionRound | None:
    """The study's open round, or None."""
    return RevisionRound.objects.filter(study=study).open().defer("snapshot").first()


def round_get(*, study: Study, number: int) -> RevisionRound:
    """The study's round ``number`` (``RevisionRound.DoesNotExist`` if none)."""
    return RevisionRound.objects.defer("snapshot").get(study=study, number=number)


def round_latest_number(*, study: Study) -> int | None:
    """The number of the study's latest round, open or closed (None: none yet)."""
    return RevisionRound.objects.filter(study=study).order_by("-number").values_list("number", flat=True).first()


_WeightGrid = Literal["attribute_weights", "metric_weights", "peer_weights"]


@dataclass
class ExpertResponses:
    """One expert's responses to a round, by step (``{step: RoundResponse}``)."""

    expert: Membership
    steps: dict[str, RoundResponse] = field(default_factory=dict)

    @property
    def responded(self) -> bool:
        return len(self.steps) == len(RoundStep.values)

    @property
    def to_revise(self) -> list[str]:
        return steps_to_revise(self.steps)

    def cells(self) -> list[tuple[str, RoundResponse | None]]:
        return [(step, self.steps.get(step)) for step in RoundStep.values]


def steps_to_revise(responses: Mapping[str, object]) -> list[str]:
    """The open round's steps (``RoundStep`` order) an expert has not
    responded to, given their ``responses`` by step: neither saved during
    the round nor confirmed unchanged. Until they respond, a step the round
    reopens reads "to revise", not "done" (the study home, the step pages,
    the API's round status)."""
    return [step for step in RoundStep.values if step not in responses]


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


def metric_spans(*, study: Study, metrics: list[Metric]) -> list[tuple[float, float] | None]:
    """Each metric's range as the bounds' coarse step reads it: the span of
    its candidates' measured values and its default range (what every expert
    sees without another's bounds); an elicited metric's is [0, 1] (its
    values are the experts' own, and a metric of a confusion matrix lies
    there); None when nothing is known. One query."""
    measured = {
        row["metric"]: (row["low"], row["high"])
        for row in Measurement.objects.filter(study=study, metric__in=metrics)
        .values("metric")
        .annotate(low=Min("value"), high=Max("value"))
    }
    elicited = set(
        Metric.objects.filter(pk__in=[m.pk for m in metrics], elicitation__isnull=False).values_list("pk", flat=True)
    )
    spans: list[tuple[float, float] | None] = []
    for metric in metrics:
        if metric.pk in elicited:
            spans.append((0.0, 1.0))
            continue
        known = [
            v
            for v in (*measured.get(metric.pk, ()), metric.default_least_acceptable, metric.default_desired)
            if v is not None
        ]
        spans.append((min(known), max(known)) if known else None)
    return spans


def round_feedback_frozen(*, study: Study) -> dict[str, Any]:
    """The group feedback of a round opening now (``engine.feedback.round_feedback``
    of the inputs as they stand): what ``round_open`` keeps with the round."""

    return group_feedback.round_feedback(
        inputs_snapshot(study=study), metric_spans(study=study, metrics=list(selected_metrics(study)))
    )


@dataclass(frozen=True)
class WeightFeedback:
    """The group's weights of one attribute or metric (``group`` None when
    fewer than engine.feedback.MIN_EXPERTS experts gave one), and yours."""

    name: str
    group: Summary | None
    own: float | None
    attribute: str | None = None  # a metric's attribute


@dataclass(frozen=True)
class RangeFeedback:
    """The group's least acceptable and desired values of one metric, each
    summarised on its own (never paired), and your range."""

    name: str
    better: str
    unit: str
    step: float | None  # the coarse step of the bounds (a twentieth of the metric's range)
    least_acceptable: Summary | None
    desired: Summary | None
    own: tuple[float, float] | None


@dataclass(frozen=True)
class PeerFeedback:
    """The weights the group gives one expert, and the weight you give them."""

    name: str
    group: Summary | None
    own: float | None


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
    min_experts: int = group_feedback.MIN_EXPERTS
    fine_min_experts: int = group_feedback.FINE_MIN_EXPERTS


def _frozen(study: Study, round: RevisionRound) -> dict[str, Any]:
    """The round's kept feedback. A round opened before feedback was kept, or
    imported open from a bundle, has none: it is computed at its first read
    and kept from then on (only if still none, so two first reads agree)."""
    if round.feedback is None:
        computed = round_feedback_frozen(study=study)
        RevisionRound.objects.filter(pk=round.pk, feedback__isnull=True).update(feedback=computed)
        round.feedback = RevisionRound.objects.values_list("feedback", flat=True).get(pk=round.pk)
    return cast(dict[str, Any], round.feedback)


def _own(grid: list[list[Any]], me: int | None, j: int) -> Any:
    return grid[me][j] if me is not None and grid[me] else None


def round_feedback(*, study: Study, expert: Membership, round: RevisionRound) -> Feedback:
    """What ``expert`` reads in ``round``: the group's feedback kept when the
    round opened (``RevisionRound.feedback``; a save during the round shows
    in the next round's) beside their own answers as they are now, and the
    reasons given in the round before, anonymised (module docstring)."""

    frozen = _frozen(study, round)
    live = inputs_snapshot(study=study)
    username = expert.user.get_username()
    me = live["experts"].index(username) if username in live["experts"] else None
    attributes = {name: j for j, name in enumerate(live["attributes"])}
    metrics = {m["name"]: j for j, m in enumerate(live["metrics"])}
    experts = {name: j for j, name in enumerate(live["experts"])}

    def own_weight(
        grid: Literal["attribute_weights", "metric_weights", "peer_weights"], index: dict[str, int], name: str
    ) -> float | None:
        return _own(live[grid], me, index[name]) if name in index else None

    def own_range(name: str) -> tuple[float, float] | None:
        if name not in metrics:
            return None
        pair = (_own(live["lower"], me, metrics[name]), _own(live["upper"], me, metrics[name]))
        return None if pair[0] is None or pair[1] is None else (pair[0], pair[1])

    previous = RevisionRound.objects.filter(study=study, number=round.number - 1).defer("snapshot", "feedback").first()
    return Feedback(
        round=round,
        attributes=[
            WeightFeedback(
                a["name"], Summary.from_json(a["group"]), own_weight("attribute_weights", attributes, a["name"])
            )
            for a in frozen["attributes"]
        ],
        metrics=[
            WeightFeedback(
                m["name"],
                Summary.from_json(m["group"]),
                own_weight("metric_weights", metrics, m["name"]),
                m["attribute"],
            )
            for m in frozen["metrics"]
        ],
        ranges=[
            RangeFeedback(
                name=r["name"],
                better=r["better"],
                unit=r["unit"],
                step=r["step"],
                least_acceptable=Summary.from_json(r["least_acceptable"]),
                desired=Summary.from_json(r["desired"]),
                own=own_range(r["name"]),
            )
            for r in frozen["ranges"]
        ],
        peer_weights=[
            PeerFeedback(p["name"], Summary.from_json(p["group"]), own_weight("peer_weights", experts, p["name"]))
            for p in frozen["peer_weights"]
        ],
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
    closed = RevisionRound.objects.filter(study=study).closed().order_by("number")
    # A closed round always has its snapshot (constraint round_closed_has_snapshot).
    return [convergence_of(number, snapshot or {}) for number, snapshot in closed.values_list("number", "snapshot")]
