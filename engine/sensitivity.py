"""What the robustness page and API show of a run's weights, from what the
run stored (never the live inputs): each weight's stability intervals
(``engine.robustness.weight_stability``, METHOD.md 8), who overtakes whom
where, the most fragile weight, and the ranking at other weights (what-if).

Pure: no Django. Every CEF of an unvetoed candidate is ``g_c · a``, with
``a`` the per-metric consensus weights and ``g_c`` its group scores, both
stored by the run; vetoes do not depend on the weights.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
    cef = np.where(stored.vetoed, 0.0, (stored.scores * weights).sum(axis=1))
    ranks = 1 + (cef[None, :] > cef[:, None]).sum(axis=1)
    return cef, ranks


def attribute_weights_to_metric_weights(stored: StoredRanking, attribute_weights: Sequence[float]) -> np.ndarray:
    """Per-metric weights for the given attribute weights (normalised to sum
    to 1), each attribute's metrics keeping their shares of it."""
    wanted = np.asarray(attribute_weights, dtype=float)
    if wanted.shape != (len(stored.attributes),) or not np.isfinite(wanted).all() or (wanted < 0).any():
        raise ValueError("one non-negative weight per selected attribute")
    if wanted.sum() <= 0:
        raise ValueError("at least one attribute weight must be above 0")
    wanted = wanted / wanted.sum()
    totals = stored.attribute_weights[stored.metric_attribute]
    counts = np.bincount(stored.metric_attribute, minlength=len(stored.attributes))[stored.metric_attribute]
    shares = np.divide(stored.weights, totals, out=1.0 / counts, where=totals > 0)
    return wanted[stored.metric_attribute] * shares


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

    @property
    def fragility(self) -> float:
        """How far the weight can move before the winner changes (infinity
        when no value from 0 to 1 changes it)."""
        distances = [self.share - self.winner[0]] if self.below else []
        distances += [self.winner[1] - self.share] if self.above else []
        return min(distances, default=float("inf"))


def _lines(stored: StoredRanking, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate's CEF at weight ``t`` of ``group``, METHOD.md 8's
    rescaling, as intercept and slope."""
    a, n = stored.weights, len(stored.weights)
    inside = np.zeros(n, dtype=bool)
    inside[group] = True
    share = a[inside].sum()
    in_weights = a * inside / share if share > 0 else inside / inside.sum()
    outside = ~inside
    out_weights = a * outside / (1 - share) if share < 1 else outside / max(outside.sum(), 1)
    at_one = stored.scores @ in_weights
    at_zero = stored.scores @ out_weights
    intercepts = np.where(stored.vetoed, 0.0, at_zero)
    slopes = np.where(stored.vetoed, 0.0, at_one - at_zero)
    return intercepts, slopes


def _report(
    stored: StoredRanking, kind: str, name: str, group: np.ndarray, stability: robustness.WeightStability, k: int
) -> WeightReport:
    intercepts, slopes = _lines(stored, group)
    share = float(stability.share[k])
    ranking = (float(stability.ranking_low[k]), float(stability.ranking_high[k]))
    winner = (float(stability.winner_low[k]), float(stability.winner_high[k]))
    leader = stored.candidates[int(np.argmax(intercepts + slopes * share))]

    def first_beyond(t: float) -> str:
        return stored.candidates[int(np.argmax(intercepts + slopes * min(max(t, 0.0), 1.0)))]

    # Just beyond an end of the winner's interval, another candidate is first.
    below = Crossing(winner[0], first_beyond(winner[0] - _BEYOND), leader) if winner[0] > 0 else None
    above = Crossing(winner[1], first_beyond(winner[1] + _BEYOND), leader) if winner[1] < 1 else None
    return WeightReport(kind, name, share, ranking, winner, below, above, intercepts, slopes)


# How far past an interval's end the overtaker is looked for: well below any
# weight a page shows, well above the CEFs' rounding.
_BEYOND = 1e-9


def weight_reports(stored: StoredRanking) -> list[WeightReport]:
    """Every attribute weight, then every metric weight (each alone)."""
    reports = []
    attribute_groups = [np.flatnonzero(stored.metric_attribute == i) for i in range(len(stored.attributes))]
    stability = robustness.weight_stability(stored.weights, stored.scores, stored.vetoed, groups=attribute_groups)
    for k, name in enumerate(stored.attributes):
        reports.append(_report(stored, "attribute", name, attribute_groups[k], stability, k))
    metric_groups = [np.array([j]) for j in range(len(stored.metrics))]
    stability = robustness.weight_stability(stored.weights, stored.scores, stored.vetoed, groups=metric_groups)
    for j, name in enumerate(stored.metrics):
        reports.append(_report(stored, "metric", name, metric_groups[j], stability, j))
    return reports


def most_fragile(reports: Sequence[WeightReport]) -> WeightReport | None:
    """The weight whose smallest move changes the winner; None when no
    weight from 0 to 1 changes it."""
    finite = [report for report in reports if report.fragility != float("inf")]
    return min(finite, key=lambda report: report.fragility) if finite else None


def fragility_sentence(reports: Sequence[WeightReport], leader: str) -> str:
    """One sentence on the most fragile weight, naming who would overtake
    the run's winner ``leader`` beyond its interval."""
    report = most_fragile(reports)
    if report is None:
        return f"No single weight changes the winner: {leader} stays first whatever any weight is, from 0 to 1."
    parts = []
    if report.below:
        parts.append(f"fell below {report.below.at:.3f}, {report.below.overtaker} would overtake {leader}")
    if report.above:
        parts.append(f"rose above {report.above.at:.3f}, {report.above.overtaker} would overtake {leader}")
    return f"The most fragile weight is {report.name}'s ({report.share:.3f}): if it " + "; if it ".join(parts) + "."


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
    cef, ranks = ranking_at(stored, attribute_weights_to_metric_weights(stored, attribute_weights))
    run_ranks = ranking_at(stored, stored.weights)[1]
    order = sorted(range(len(cef)), key=lambda c: (ranks[c], run_ranks[c], c))
    return [
        WhatIfRow(stored.candidates[c], int(ranks[c]), int(run_ranks[c]), float(cef[c]), bool(stored.vetoed[c]))
        for c in order
    ]
