"""What the robustness page and API show of a run's weights, from what the
run stored (never the live inputs): each weight's stability intervals
(``engine.robustness.weight_stability``, METHOD.md 8), who overtakes whom
where, the most fragile weight, and the ranking at other weights (what-if).

Pure: no Django. Every CEF of an unvetoed candidate is ``g_c · a``, with
``a`` the per-metric consensus weights and ``g_c`` its group scores, both
stored by the run; vetoes do not depend on the weights.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import robustness

__all__ = [
    "Crossing",
    "StoredRanking",
    "WeightReport",
    "WhatIfRow",
    "attribute_weights_to_metric_weights",
    "fragility_sentence",
    "most_fragile",
    "ranking_at",
    "stored_ranking",
    "weight_reports",
    "what_if",
]


@dataclass(frozen=True)
class StoredRanking:
    """A run's stored scores, candidates in the run's rank order."""

    candidates: list[str]
    metrics: list[str]
    attributes: list[str]
    metric_attribute: np.ndarray  # (n,) index into ``attributes``
    weights: np.ndarray  # (n,) per-metric consensus weights ``a``
    scores: np.ndarray  # (m, n) group scores ``g``
    vetoed: np.ndarray  # (m,) bool

    @property
    def attribute_weights(self) -> np.ndarray:
        return np.bincount(self.metric_attribute, weights=self.weights, minlength=len(self.attributes))


def stored_ranking(results: Mapping, metrics: Sequence[Mapping]) -> StoredRanking:
    """From a run's stored ``results`` and its snapshot's ``metrics`` (each
    with its ``attribute``)."""
    attributes = list(results["selected_attributes"])
    attribute_index = {name: i for i, name in enumerate(attributes)}
    candidates = results["candidates"]
    return StoredRanking(
        candidates=[c["name"] for c in candidates],
        metrics=list(results["metrics"]),
        attributes=attributes,
        metric_attribute=np.array([attribute_index[m["attribute"]] for m in metrics], dtype=np.intp),
        weights=np.asarray(results["metric_weights"], dtype=float),
        scores=np.asarray([c["group_scores"] for c in candidates], dtype=float).reshape(len(candidates), -1),
        vetoed=np.array([c["vetoed"] for c in candidates], dtype=bool),
    )


def ranking_at(stored: StoredRanking, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CEFs and competition ranks (METHOD.md 8) at per-metric ``weights``."""
    result = robustness.what_if(weights, stored.scores, stored.vetoed)
    return result.cef, result.ranks


def attribute_weights_to_metric_weights(stored: StoredRanking, attribute_weights: Sequence[float]) -> np.ndarray:
    """Per-metric weights for the given attribute weights (any non-negative
    numbers, not all 0, taken relative to each other), each attribute's
    metrics keeping their shares of it."""
    shares = robustness.metric_shares(stored.weights, stored.metric_attribute)
    return robustness.metric_weights_from_attributes(attribute_weights, shares, stored.metric_attribute)


def attribute_shares(attribute_weights: Sequence[float]) -> list[float]:
    """The attribute weights asked for (any non-negative finite numbers,
    not all 0, taken relative to each other) as shares summing to 1; the
    what-if page and API's one check (``ValueError`` with the reason)."""
    return robustness.relative_weights(attribute_weights, "attribute weight").tolist()


@dataclass(frozen=True)
class Crossing:
    at: float  # the weight at which ``overtaker`` passes ``overtaken``
    overtaker: str
    overtaken: str


@dataclass(frozen=True)
class WeightReport:
    """One weight (an attribute's, or a metric's): its value, the closed
    intervals on which the ranking and the winner stay as they are, who
    overtakes the winner at each end, and each candidate's CEF as a line
    ``intercept + slope t`` of the weight ``t``."""

    kind: str  # "attribute" or "metric"
    name: str
    share: float
    ranking: tuple[float, float]
    winner: tuple[float, float]
    below: Crossing | None  # who passes the winner as the weight falls below winner[0]
    above: Crossing | None
    intercepts: np.ndarray
    slopes: np.ndarray
    # How far the weight can move before the ranking or the winner changes
    # (engine.robustness.fragility; infinity when nothing changes from 0 to 1).
    fragility: float
    # What first_change is found from: the ranking, the weight's metrics and
    # the interval end that far away (None when nothing changes).
    _stored: "StoredRanking" = field(repr=False, compare=False)
    _group: np.ndarray = field(repr=False, compare=False)
    _at: float | None = field(repr=False, compare=False)

    @cached_property
    def first_change(self) -> Crossing | None:
        """The first change ``fragility`` away: who overtakes whom, and
        where. Found when asked (a page asks it of the most fragile weight
        only; each is a search among the candidates' lines)."""
        if self._at is None:
            return None
        return _first_change(self._stored, self._group, self.share, self._at, self.intercepts, self.slopes)


def _first_at(intercepts: np.ndarray, slopes: np.ndarray, t: float) -> int:
    """The candidate listed first at weight ``t`` (clipped to [0, 1]): the
    best CEF, equal CEFs (within TIE) by the run's order."""
    cef = intercepts + slopes * min(max(t, 0.0), 1.0)
    return int(robustness.ranking_order(cef, cef)[0])


def _first_beyond(stored: StoredRanking, intercepts: np.ndarray, slopes: np.ndarray, t: float) -> str:
    """Who is first just beyond ``t`` (past an end of the winner's interval)."""
    return stored.candidates[_first_at(intercepts, slopes, t)]


# How far past an interval's end the overtaker is looked for: well below any
# weight a page shows, well above the CEFs' rounding.
_BEYOND = 1e-9
# How many neighbouring pairs are handed to robustness.crossings as the ones
# that may cross at an interval's end.
_GUESSES = 3
# An interval end this close to 0 or 1 is the end of the scan, reached by rounding.
_EDGE = 1e-12


def _first_change(
    stored: StoredRanking, group: np.ndarray, share: float, at: float, intercepts: np.ndarray, slopes: np.ndarray
) -> Crossing | None:
    """The crossing of two candidates' lines at ``at`` (an end of the
    ranking's or the winner's interval). The first pair to cross as the
    weight moves is adjacent in the ranking at the current weight, so only
    adjacent pairs, and the leader with whoever is first just beyond, are
    handed to ``engine.robustness.crossings``: O(m), not O(m^2)."""
    cef = intercepts + slopes * share
    order = robustness.ranking_order(cef, cef)
    ahead, behind = order[:-1], order[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = share - (cef[ahead] - cef[behind]) / (slopes[ahead] - slopes[behind])
    distance = np.where(np.isfinite(t), np.abs(t - at), np.inf)
    chosen = {int(order[0]), _first_at(intercepts, slopes, at + np.sign(at - share) * _BEYOND)}
    # The pairs whose lines, as drawn, cross nearest: a guess (the lines'
    # rounding can move two near-duplicates' crossing anywhere), which
    # robustness.crossings then computes from their scores' difference.
    for pair in np.argsort(distance, kind="stable")[:_GUESSES].tolist():
        if np.isfinite(distance[pair]):
            chosen |= {int(ahead[pair]), int(behind[pair])}
    rest = np.setdiff1d(np.arange(len(stored.weights)), group)
    partition = [group, rest] if len(rest) else [group]  # crossings take groups that partition the metrics
    found = robustness.crossings(
        stored.weights, stored.scores, stored.vetoed, groups=partition, candidates=sorted(chosen)
    )[0]
    if not found:
        return None
    crossing = min(found, key=lambda c: (abs(c.t - at), abs(c.t - share)))
    return Crossing(crossing.t, stored.candidates[crossing.overtaking], stored.candidates[crossing.overtaken])


def _reports(stored: StoredRanking, kind: str, names: list[str], groups: list[np.ndarray]) -> list[WeightReport]:
    stability = robustness.weight_stability(stored.weights, stored.scores, stored.vetoed, groups=groups)
    lines = robustness.sensitivity_lines(stored.weights, stored.scores, stored.vetoed, groups=groups)
    fragility = robustness.fragility(stability)
    reports = []
    for k, name in enumerate(names):
        share, intercepts, slopes = float(stability.share[k]), lines.intercept[k], lines.slope[k]
        ranking = (float(stability.ranking_low[k]), float(stability.ranking_high[k]))
        winner = (float(stability.winner_low[k]), float(stability.winner_high[k]))
        leader = stored.candidates[_first_at(intercepts, slopes, share)]
        below = Crossing(winner[0], _first_beyond(stored, intercepts, slopes, winner[0] - _BEYOND), leader)
        above = Crossing(winner[1], _first_beyond(stored, intercepts, slopes, winner[1] + _BEYOND), leader)
        nearest = float(fragility[k])
        # the interval end that far away (an end at 0 or 1 is no change)
        ends = [end for end in (*ranking, *winner) if 0.0 < end < 1.0 or end == share]
        at = min(ends, key=lambda end: abs(abs(end - share) - nearest), default=share)
        if min(at, 1.0 - at) < _EDGE and at != share:
            # a tie reached at the very end of the scan, within rounding: no change inside [0, 1]
            nearest = float("inf")
        reports.append(
            WeightReport(
                kind=kind,
                name=name,
                share=share,
                ranking=ranking,
                winner=winner,
                below=below if winner[0] > 0 else None,
                above=above if winner[1] < 1 else None,
                intercepts=intercepts,
                slopes=slopes,
                fragility=nearest,
                _stored=stored,
                _group=groups[k],
                _at=at if np.isfinite(nearest) else None,
            )
        )
    return reports


def weight_reports(stored: StoredRanking) -> list[WeightReport]:
    """Every attribute weight (its metrics together), then every metric
    weight (each alone)."""
    attribute_groups = [np.flatnonzero(stored.metric_attribute == i) for i in range(len(stored.attributes))]
    metric_groups = [np.array([j]) for j in range(len(stored.metrics))]
    return _reports(stored, "attribute", stored.attributes, attribute_groups) + _reports(
        stored, "metric", stored.metrics, metric_groups
    )


def most_fragile(reports: Sequence[WeightReport]) -> WeightReport | None:
    """The weight whose smallest move changes the ranking or the winner
    (the first on a tie); None when no weight from 0 to 1 changes either."""
    finite = [report for report in reports if np.isfinite(report.fragility)]
    return min(finite, key=lambda report: report.fragility) if finite else None


def fragility_sentence(reports: Sequence[WeightReport], leader: str) -> str:
    """One sentence on the most fragile weight: how far it can move and
    who would overtake whom first ("if Accuracy's weight fell below 0.310,
    J48 would overtake JRip")."""
    report = most_fragile(reports)
    if report is None or report.first_change is None:
        return f"No single weight changes the ranking: {leader} stays first whatever any weight is, from 0 to 1."
    change = report.first_change
    if change.at == report.share:
        # a tie (METHOD.md 6.2: within TIE) that any move of the weight breaks
        return (
            f"The most fragile weight is {report.name}'s ({report.share:.3f}): {change.overtaker} and "
            f"{change.overtaken} tie there, and if it moved at all the tie would break "
            f"({change.overtaker} ahead if it rose, {change.overtaken} if it fell)."
        )
    moved = f"fell below {change.at:.3f}" if change.at < report.share else f"rose above {change.at:.3f}"
    return (
        f"The most fragile weight is {report.name}'s ({report.share:.3f}): if it {moved}, "
        f"{change.overtaker} would overtake {change.overtaken}."
    )


@dataclass(frozen=True)
class WhatIfRow:
    name: str
    rank: int
    run_rank: int
    cef: float
    vetoed: bool


def what_if(stored: StoredRanking, attribute_weights: Sequence[float]) -> list[WhatIfRow]:
    """Every candidate's rank and CEF at the given attribute weights (any
    non-negative numbers, taken relative to each other), best first, beside
    its rank in the run."""
    result = robustness.what_if(
        attribute_weights_to_metric_weights(stored, attribute_weights), stored.scores, stored.vetoed
    )
    run_ranks = robustness.competition_ranks(np.where(stored.vetoed, 0.0, stored.scores @ stored.weights))
    return [
        WhatIfRow(
            stored.candidates[c], int(result.ranks[c]), int(run_ranks[c]), float(result.cef[c]), bool(stored.vetoed[c])
        )
        for c in result.order.tolist()
    ]
