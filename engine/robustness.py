"""How sure is a ranking? Weight sensitivity, what-if, leave-one-expert-out
and rank probabilities (METHOD.md section 8; docs/method.md, "Robustness").

Everything here is pure NumPy (no Django) and works on arrays a run's
snapshot gives (``engine.snapshot.snapshot_arrays``) or on the results'
consensus weights ``a`` (n,), group scores ``g`` (m, n) and veto mask
``vetoed`` (m,). A candidate's CEF is ``0`` when vetoed, else
``sum_j a_j g_cj``; ranks are competition ranks, ``1 + #{d : CEF_d > CEF_c +
TIE}`` (equal scores share a rank; two CEFs within ``engine.rules.TIE`` =
1e-12 are equal, METHOD.md 6.2), and every comparison here of who beats whom
is ``engine.rules.beats``.

The three functions METHOD.md 8 binds, exactly as defined there:

* :func:`weight_stability` - per group of metrics (default: each metric),
  the closed intervals of its weight ``t`` in [0, 1] (the others rescaled
  proportionally) on which the ranking, and separately the winner, stays;
* :func:`rank_acceptability` - from sampled CEFs (S, m), the share of
  samples in which each candidate takes each rank (SMAA-2's rank
  acceptability indices);
* :func:`pairwise_winning` - the share of samples in which candidate ``c``
  scores above ``d`` by more than TIE.

Around them, for the pages: :func:`sensitivity_lines` (each CEF as an affine
function of a group's weight), :func:`crossings` (where two lines cross,
who overtakes whom), :func:`fragility` and :func:`most_fragile`,
:func:`what_if` (the ranking for given weights) with
:func:`metric_weights_from_attributes` and :func:`metric_shares`.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from evaluation.bootstrap import bootstrap_counts, weighted_accuracy, weighted_roc_auc

from . import core
from .prioritisation import _ahp_arrays, _validated_matrices
from .rules import AHP_WEIGHTINGS, SCALE_VALUES, TIE, beats

if TYPE_CHECKING:
    from scipy import sparse

__all__ = [
    "BOOTSTRAP_KINDS",
    "CENTRAL_WEIGHT_BITS",
    "CONCENTRATION_MIN",
    "PAIRWISE_ALL",
    "PAIRWISE_TOP",
    "SAMPLE_BLOCK",
    "BootstrapColumn",
    "Counts",
    "Crossing",
    "LeaveOneOut",
    "MonteCarloInputs",
    "SamplingSpec",
    "Summary",
    "SensitivityLines",
    "WeightStability",
    "WhatIf",
    "bootstrap_seed",
    "competition_ranks",
    "ranking_order",
    "crossings",
    "fragility",
    "leave_one_out",
    "merge",
    "monte_carlo_chunk",
    "monte_carlo_counts",
    "monte_carlo_prepare",
    "MEMORY_BUDGET",
    "PEER_STREAM_ENTRIES",
    "peer_stream_samples",
    "pairwise_counts",
    "rank_counts",
    "metric_shares",
    "metric_weights_from_attributes",
    "most_fragile",
    "pairwise_winning",
    "rank_acceptability",
    "sensitivity_lines",
    "summary",
    "weight_stability",
    "what_if",
    "WILSON_Z",
    "wilson_interval",
    "relative_weights",
    "without_expert",
]

# A consensus weight vector must sum to 1 within this before it is
# renormalised exactly (METHOD.md intro; engine.core.ROW_SUM_TOLERANCE).
_SUM_TOLERANCE = 1e-6


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------


def _float_array(value: ArrayLike, name: str, ndim: int) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a {ndim}-D array of numbers: {exc}") from None
    if array.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(
            f"{name} contains NaN or infinity at {tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])}"
        )
    return array


def _weights(a: ArrayLike, name: str = "a") -> np.ndarray:
    """Non-negative weights summing to 1 within 1e-6, renormalised exactly."""
    weights = _float_array(a, name, 1)
    if not len(weights):
        raise ValueError(f"{name} must have at least one weight")
    if weights.min() < 0:
        raise ValueError(f"{name} must be non-negative; {name}[{int(np.argmin(weights))}] is {weights.min():.10g}")
    total = weights.sum()
    if abs(total - 1.0) > _SUM_TOLERANCE + 1e-12:
        raise ValueError(f"{name} must sum to 1 within {_SUM_TOLERANCE:g}, got {total:.10g}")
    return weights / total


def relative_weights(values: ArrayLike, noun: str = "weight") -> np.ndarray:
    """Non-negative numbers taken relative to each other (slider positions,
    an API's weights) as weights summing to 1. Scaled by the largest first,
    so that no sum overflows (1e308 twice is half and half, not inf / inf),
    and the sum is checked finite and positive before it divides. A
    ``ValueError`` says why, of ``noun`` ("attribute weight"): not finite
    numbers, negative, or all 0."""
    try:
        weights = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"every {noun} must be a number") from None
    if weights.ndim != 1:
        raise ValueError(f"the {noun}s must be a list of numbers")
    if not np.isfinite(weights).all():
        raise ValueError(f"every {noun} must be a finite number")
    if len(weights) and weights.min() < 0:
        raise ValueError(f"an {noun} cannot be negative" if noun[0] in "aeiou" else f"a {noun} cannot be negative")
    largest = weights.max(initial=0.0)
    if not largest > 0:
        raise ValueError(f"at least one {noun} must be above 0")
    scaled = weights / largest
    total = scaled.sum()
    if not (np.isfinite(total) and total > 0):  # (between 1 and the count: a guard)
        raise ValueError(f"the {noun}s must have a finite positive sum")
    return scaled / total


def _problem(a: ArrayLike, g: ArrayLike, vetoed: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    weights = _weights(a)
    scores = _float_array(g, "g", 2)
    if scores.shape[1] != len(weights):
        raise ValueError(f"g must have shape (m, {len(weights)}) (one column per metric, as in a), got {scores.shape}")
    mask = np.asarray(vetoed)
    if mask.shape != (scores.shape[0],):
        raise ValueError(f"vetoed must have shape ({scores.shape[0]},) (one flag per candidate), got {mask.shape}")
    if mask.dtype != np.bool_:
        if not np.isin(mask, (0, 1)).all():
            raise ValueError("vetoed must hold booleans (or 0 and 1)")
        mask = mask.astype(bool)
    return weights, scores, mask


def _groups(groups: object, n: int) -> list[np.ndarray]:
    """Index arrays partitioning range(n); default each metric alone."""
    if groups is None:
        return [np.array([j]) for j in range(n)]
    try:
        listed = [np.asarray(group) for group in groups]  # type: ignore[attr-defined]  # groups may be any iterable; a non-iterable is refused below
    except TypeError:
        raise ValueError("groups must be a sequence of index arrays") from None
    seen = np.zeros(n, dtype=np.int64)
    for position, group in enumerate(listed):
        if group.ndim != 1 or not len(group) or not np.issubdtype(group.dtype, np.integer):
            raise ValueError(f"groups[{position}] must be a non-empty 1-D array of metric indices")
        if group.min() < 0 or group.max() >= n:
            raise ValueError(f"groups[{position}] has an index outside 0..{n - 1}")
        np.add.at(seen, group, 1)
    if (seen != 1).any():
        bad = int(np.flatnonzero(seen != 1)[0])
        raise ValueError(
            f"groups must partition the {n} metrics (each index in exactly one group); "
            f"metric {bad} is in {int(seen[bad])}"
        )
    return [group.astype(np.intp) for group in listed]


def _cef(weights: np.ndarray, scores: np.ndarray, vetoed: np.ndarray) -> np.ndarray:
    # A row-wise sum, as engine.core.evaluate computes the weighted scores,
    # so a run's CEFs and these agree to the last bit.
    return np.where(vetoed, 0.0, (scores * weights).sum(axis=1))


# --------------------------------------------------------------------------
# Weight sensitivity (METHOD.md 8)
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class WeightStability:
    """Result of :func:`weight_stability`: arrays of len(groups).

    Attributes
    ----------
    share : ndarray
        ``s_k``, the group's current share of the weight.
    ranking_low, ranking_high : ndarray
        The closed interval of ``t`` around ``s_k`` on which the ranking
        stays (METHOD.md 8); ``[s_k, s_k]`` when two candidates tied at
        ``s_k`` would be untied by any change.
    winner_low, winner_high : ndarray
        The closed interval of ``t`` around ``s_k`` on which every candidate
        ranked first at ``s_k`` keeps a CEF at least every other's.
    """

    share: np.ndarray
    ranking_low: np.ndarray
    ranking_high: np.ndarray
    winner_low: np.ndarray
    winner_high: np.ndarray


@dataclass(frozen=True, eq=False)
class SensitivityLines:
    """Every candidate's CEF as an affine function of each group's weight
    ``t``: ``CEF_c(t) = intercept[k, c] + slope[k, c] * t`` (arrays of
    shape (len(groups), m)); vetoed candidates have both 0. ``share`` is
    each group's current weight ``s_k`` (where the lines meet the run's
    CEFs) and ``cef`` the CEFs at the current weights (m,)."""

    share: np.ndarray
    intercept: np.ndarray
    slope: np.ndarray
    cef: np.ndarray


def _ends(weights: np.ndarray, rows: np.ndarray, groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(share (G,), at_zero (r, G), at_one (r, G)) of METHOD.md 8's
    reweighting, for each row of ``rows`` (r, n): ``rows @ a(t)`` at t = 0
    and t = 1, with in-group weights ``a_j t / s_k`` and the others
    ``a_j (1 - t) / (1 - s_k)`` (equal splits when ``s_k`` is 0 or 1).
    Linear in ``rows``: the rows may be scores (a CEF's line) or differences
    of two candidates' scores (the line of their CEFs' difference)."""
    n = len(weights)
    members = np.zeros((len(groups), n))
    for k, group in enumerate(groups):
        members[k, group] = 1.0
    share = members @ weights
    inside = rows @ (members * weights).T  # (r, G): sum_{j in S_k} a_j x_j
    outside = rows @ ((1.0 - members) * weights).T
    size_inside = members.sum(axis=1)
    size_outside = n - size_inside
    with np.errstate(divide="ignore", invalid="ignore"):
        at_one = inside / share
        at_zero = outside / (1.0 - share)
    # The equal splits, only where a group's share is 0 or 1 (rare).
    empty, whole = share <= 0, (share >= 1) | (size_outside == 0)
    if empty.any():
        at_one[:, empty] = rows @ members[empty].T / size_inside[empty]
    if whole.any():
        split = np.where(size_outside[whole] > 0, size_outside[whole], 1.0)
        at_zero[:, whole] = np.where(size_outside[whole] > 0, rows @ (1.0 - members[whole]).T / split, 0.0)
    return share, at_zero, at_one


def _lines(
    weights: np.ndarray, scores: np.ndarray, vetoed: np.ndarray, groups: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(share (G,), intercept (G, m), slope (G, m)) of every candidate's CEF
    line (:func:`_ends`); a vetoed candidate's is 0."""
    share, at_zero, at_one = _ends(weights, scores, groups)
    intercept = np.where(vetoed[:, None], 0.0, at_zero).T
    slope = np.where(vetoed[:, None], 0.0, at_one - at_zero).T
    return share, intercept, slope


def sensitivity_lines(a: ArrayLike, g: ArrayLike, vetoed: ArrayLike, *, groups: object = None) -> SensitivityLines:
    """Each candidate's CEF as an affine function of each group's weight.

    Same arguments and reweighting as :func:`weight_stability`: for group
    ``k`` at weight ``t``, ``CEF_c(t) = intercept[k, c] + slope[k, c] t``
    (0 for a vetoed candidate: vetoes do not depend on weights). The line
    chart of a weight draws these over ``t`` in [0, 1] with the current
    weight ``share[k]`` marked.
    """
    weights, scores, mask = _problem(a, g, vetoed)
    share, intercept, slope = _lines(weights, scores, mask, _groups(groups, len(weights)))
    return SensitivityLines(share=share, intercept=intercept, slope=slope, cef=_cef(weights, scores, mask))


class _Differences:
    """The lines of CEF differences ``D(t) = CEF_c(t) - CEF_d(t)`` of pairs
    of candidates, per group, computed from the differences of their
    scores (not as a difference of two CEF lines, whose rounding, about
    1e-17 of each CEF, swamps two near-duplicates' difference of 1e-12).

    ``at_zero`` and ``at_one`` (G, P) are D(0) and D(1). A pair is *the same
    line* in a group when they tie (within TIE) over the whole scan, and
    the lines *cross* at ``t = D(0) / (D(0) - D(1))`` when, beyond that,
    the candidate behind comes to beat the other (by more than TIE) before
    the end of the scan: lines that only meet within TIE never cross."""

    def __init__(
        self,
        weights: np.ndarray,
        effective: np.ndarray,
        first: np.ndarray,
        second: np.ndarray,
        groups: list[np.ndarray],
    ):
        _, at_zero, at_one = _ends(weights, effective[first] - effective[second], groups)
        self.at_zero, self.at_one = at_zero.T, at_one.T

    @property
    def same_line(self) -> np.ndarray:
        return (np.abs(self.at_zero) <= TIE) & (np.abs(self.at_one) <= TIE)

    def crossing(self) -> np.ndarray:
        """(G, P) where D(t) = 0: NaN unless one end is above TIE and the
        other below -TIE (a real crossing inside [0, 1])."""
        zero, one = self.at_zero, self.at_one
        real = ((zero > TIE) & (one < -TIE)) | ((zero < -TIE) & (one > TIE))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(real, zero / (zero - one), np.nan)


def _effective(scores: np.ndarray, vetoed: np.ndarray) -> np.ndarray:
    """Scores whose weighted sum is the CEF: a vetoed candidate's are 0."""
    return np.where(vetoed[:, None], 0.0, scores)


def _tied_pairs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(i, j)``, ``i < j``, of the pairs of ``values`` (sorted
    best first) within TIE of each other. Such pairs lie in runs of
    neighbours each within TIE of the next, usually none."""
    close = np.flatnonzero(~beats(values[:-1], values[1:]))
    first, second = [np.array([], dtype=np.intp)], [np.array([], dtype=np.intp)]
    if len(close):
        # runs of neighbours: starts where a close pair does not follow another
        starts = close[np.diff(close, prepend=-2) > 1]
        ends = close[np.diff(close, append=len(values) + 1) > 1] + 2
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            i, j = np.triu_indices(end - start, k=1)
            keep = ~beats(values[start + i], values[start + j])
            first.append(start + i[keep])
            second.append(start + j[keep])
    return np.concatenate(first), np.concatenate(second)


def _nearest_crossings(share: np.ndarray, crossing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group (rows of ``crossing``, (G, P)), the nearest crossing at or
    above its share and at or below it (1 and 0 when there is none)."""
    share = share[:, None]
    above = np.where(crossing >= share, crossing, np.inf).min(axis=1, initial=1.0)
    below = np.where(crossing <= share, crossing, -np.inf).max(axis=1, initial=0.0)
    return np.minimum(above, 1.0), np.maximum(below, 0.0)


class _Scan:
    """What :func:`weight_stability` computes once: the candidates with
    distinct lines (two candidates with the same scores, or both vetoed,
    have the same line in every scan and stay tied), best first at the
    current weights, their competition ranks and their lines."""

    def __init__(self, weights: np.ndarray, scores: np.ndarray, vetoed: np.ndarray, groups: list[np.ndarray]):
        effective = _effective(scores, vetoed)
        _, distinct = np.unique(effective, axis=0, return_index=True)
        cef = _cef(weights, scores, vetoed)[distinct]
        order = np.argsort(-cef, kind="stable")
        self.weights, self.groups = weights, groups
        self.effective = effective[distinct][order]
        self.cef = cef[order]
        self.ranks = competition_ranks(self.cef)  # ascending along the order
        self.share, self.intercept, self.slope = _lines(
            weights, self.effective, np.zeros(len(order), dtype=bool), groups
        )

    def differences(self, first: np.ndarray, second: np.ndarray) -> _Differences:
        return _Differences(self.weights, self.effective, first, second, self.groups)

    def pinned(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """(G,): some pair tied now (positions ``first``, ``second``) is not
        tied along the whole scan, so any move of the weight unties it."""
        if not len(first):
            return np.zeros(len(self.share), dtype=bool)
        return np.asarray((~self.differences(first, second).same_line).any(axis=1))

    def ranking(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of the ranking interval: the nearest real crossing of
        a pair ordered now. A first guess from the pairs next to each other
        in the order (the first to cross, unless ties within TIE reorder
        their neighbours), then the pairs the lines show reversed at the
        guess: their crossings come before it, if any does."""
        ahead = np.flatnonzero(beats(self.cef[:-1], self.cef[1:]))
        high, low = _nearest_crossings(self.share, self.differences(ahead, ahead + 1).crossing())
        behind = np.flatnonzero(self.ranks > 1)
        # Each candidate q against those ahead of it now (the positions
        # before its rank), but for q - 1 when it is one of them: that pair
        # of neighbours is the guess's.
        last = self.ranks[behind] - 2 - (self.ranks[behind] - 1 == behind)
        behind, last = behind[last >= 0], last[last >= 0]
        for end in (high, low):
            at_end = self.intercept + self.slope * end[:, None]  # (G, m)
            lowest = np.minimum.accumulate(at_end, axis=1)
            reversed_ = at_end[:, behind] > lowest[:, last] - TIE
            for k in np.flatnonzero(reversed_.any(axis=1)).tolist():
                pairs = self._reversed_pairs(at_end[k], behind[reversed_[k]], last[reversed_[k]], k)
                above, below = _nearest_crossings(self.share[k : k + 1], pairs.crossing())
                end[k] = min(end[k], above[0]) if end is high else max(end[k], below[0])
        return low, high

    def _reversed_pairs(self, at_end: np.ndarray, behind: np.ndarray, last: np.ndarray, k: int) -> _Differences:
        """The differences, in group ``k``, of each candidate of ``behind``
        and those ahead of it (positions up to ``last``) whose line is below
        or within TIE of its own at the guess."""
        first, second = [], []
        for q, up_to in zip(behind.tolist(), last.tolist(), strict=True):
            ahead_of_q = np.flatnonzero(at_end[: up_to + 1] < at_end[q] + TIE)
            first.append(ahead_of_q)
            second.append(np.full(len(ahead_of_q), q))
        return _Differences(
            self.weights, self.effective, np.concatenate(first), np.concatenate(second), [self.groups[k]]
        )

    def winner(self, pinned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of the winner interval: the nearest real crossing of
        a first-ranked candidate with any other."""
        top = np.flatnonzero(self.ranks == 1)
        others = np.flatnonzero(self.ranks > 1)
        first, second = np.repeat(top, len(others)), np.tile(others, len(top))
        high, low = _nearest_crossings(self.share, self.differences(first, second).crossing())
        return np.where(pinned, self.share, low), np.where(pinned, self.share, high)


def weight_stability(a: ArrayLike, g: ArrayLike, vetoed: ArrayLike, *, groups: object = None) -> WeightStability:
    """Stability intervals of each group's weight (METHOD.md 8, binding).

    For group ``k`` with share ``s_k = sum_{j in S_k} a_j`` the weights at
    ``t`` in [0, 1] are ``a_j t / s_k`` inside the group (an equal split if
    ``s_k = 0``) and ``a_j (1 - t) / (1 - s_k)`` outside it (an equal split
    if ``s_k = 1``), so each unvetoed CEF is affine in ``t``
    (:func:`sensitivity_lines`) and a vetoed one stays 0.

    Equal is METHOD.md 6.2's: two CEFs within ``engine.rules.TIE`` (1e-12)
    are equal, as in the run's competition ranks. Each pair's difference
    ``CEF_c(t) - CEF_d(t)`` is a line of ``t`` computed from the
    difference of their scores, so two near-duplicates give exact ends.

    * ranking interval: the closed interval around ``s_k`` on which no pair
      ordered ``CEF_c > CEF_d + TIE`` at ``s_k`` crosses (the lines meet,
      and beyond, d comes to beat c by more than TIE before the end of the
      scan: lines that only meet within TIE never cross), and no pair tied
      at ``s_k`` that is not tied along the whole scan exists (then it is
      ``[s_k, s_k]``: any move unties it); pairs may tie at its ends. Cost:
      ``O(G m n)`` for the pairs next to each other in the order at
      ``s_k``, and more only for pairs within TIE of each other.
    * winner interval: the same for every candidate ranked first at ``s_k``
      against every other candidate (two of them tied, and not along the
      whole scan, pin it to ``[s_k, s_k]``).

    Parameters
    ----------
    a : array-like (n,)
        Final per-metric consensus weights, non-negative, summing to 1
        (within 1e-6; renormalised).
    g : array-like (m, n)
        Group metric scores.
    vetoed : array-like of bool (m,)
    groups : sequence of integer index arrays, optional
        A partition of range(n) (e.g. an attribute's metrics); default each
        metric alone.

    Returns
    -------
    WeightStability
    """
    weights, scores, mask = _problem(a, g, vetoed)
    scan = _Scan(weights, scores, mask, _groups(groups, len(weights)))
    share = scan.share
    if len(scan.cef) < 2:
        whole = (np.zeros_like(share), np.ones_like(share))
        return WeightStability(share, *whole, *whole)
    first, second = _tied_pairs(scan.cef)
    ranking_pinned = scan.pinned(first, second)
    on_top = (scan.ranks[first] == 1) & (scan.ranks[second] == 1)
    winner_pinned = scan.pinned(first[on_top], second[on_top])
    ranking_low, ranking_high = scan.ranking()
    winner_low, winner_high = scan.winner(winner_pinned)
    return WeightStability(
        share=share,
        ranking_low=np.where(ranking_pinned, share, np.minimum(ranking_low, share)),
        ranking_high=np.where(ranking_pinned, share, np.maximum(ranking_high, share)),
        winner_low=np.minimum(winner_low, share),
        winner_high=np.maximum(winner_high, share),
    )


class Crossing(NamedTuple):
    """Two candidates' CEF lines crossing at weight ``t`` of a group.

    ``overtaking`` ranks below ``overtaken`` at the group's current weight
    ``s`` and above it beyond ``t`` going away from ``s``: "if the weight
    fell below t" when ``t < s``, "rose above t" when ``t > s``. For a pair
    tied at ``s`` (``t == s``) ``overtaking`` is the one ahead above ``s``.
    """

    t: float
    overtaking: int
    overtaken: int


def crossings(
    a: ArrayLike, g: ArrayLike, vetoed: ArrayLike, *, groups: object = None, candidates: ArrayLike | None = None
) -> list[list[Crossing]]:
    """Every crossing of two CEF lines inside [0, 1], per group, ordered by
    ``t`` (then by the candidates' indices).

    ``candidates`` (indices) limits the pairs to those among them, e.g. the
    top ten of the run, since ``m`` candidates have up to ``m (m - 1) / 2``
    crossings per group; default all. Equal is METHOD.md 6.2's (within
    TIE), and each pair's difference is a line computed from the
    difference of their scores: lines tied along the whole scan (the same
    scores, two vetoed candidates, two near-duplicates) never cross; lines
    tied at the current weight and not along the whole scan cross there;
    other lines cross where they meet, when beyond it the one behind comes
    to beat the other by more than TIE before the end of the scan.
    """
    weights, scores, mask = _problem(a, g, vetoed)
    group_list = _groups(groups, len(weights))
    cef = _cef(weights, scores, mask)
    chosen = np.arange(len(cef)) if candidates is None else np.unique(np.asarray(candidates, dtype=np.intp))
    if len(chosen) and (chosen.min() < 0 or chosen.max() >= len(cef)):
        raise ValueError(f"candidates must be indices in 0..{len(cef) - 1}")
    first, second = np.triu_indices(len(chosen), k=1)
    c, d = chosen[first], chosen[second]
    share, _, _ = _ends(weights, np.zeros((0, len(weights))), group_list)
    pairs = _Differences(weights, _effective(scores, mask), c, d, group_list)
    tied = ~beats(cef[c], cef[d]) & ~beats(cef[d], cef[c])
    slope = pairs.at_one - pairs.at_zero
    t = np.where(tied[None, :] & ~pairs.same_line, share[:, None], pairs.crossing())
    result: list[list[Crossing]] = []
    for k in range(len(share)):
        inside = np.isfinite(t[k])
        found = []
        for t_cross, c_index, d_index, gap in zip(
            t[k, inside].tolist(), c[inside].tolist(), d[inside].tolist(), slope[k, inside].tolist(), strict=True
        ):
            # Beyond the crossing (away from s) c leads when its slope is the
            # larger going up, the smaller going down.
            c_ahead_after = gap > 0 if t_cross >= share[k] else gap < 0
            winner, loser = (c_index, d_index) if c_ahead_after else (d_index, c_index)
            found.append(Crossing(float(t_cross), winner, loser))
        found.sort()
        result.append(found)
    return result


def fragility(stability: WeightStability) -> np.ndarray:
    """Per group, the distance from its weight ``s_k`` to the nearest end
    of its ranking or winner interval where something changes; an end at
    0 or 1 is the end of the scan, not a change, and does not count.
    ``inf`` where the ranking holds over all of [0, 1]."""
    share = stability.share
    distances = []
    for low, high in (
        (stability.ranking_low, stability.ranking_high),
        (stability.winner_low, stability.winner_high),
    ):
        distances.append(np.where(low > 0.0, share - low, np.inf))
        distances.append(np.where(high < 1.0, high - share, np.inf))
    return np.min(distances, axis=0)


def most_fragile(stability: WeightStability) -> int | None:
    """The group whose weight is closest to changing the ranking or the
    winner (:func:`fragility`; the first on a tie), or None when no weight
    changes anything anywhere in [0, 1]."""
    distances = fragility(stability)
    if not len(distances) or not np.isfinite(distances).any():
        return None
    return int(np.argmin(distances))


# --------------------------------------------------------------------------
# What-if
# --------------------------------------------------------------------------


def _competition_ranks(stack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ranks (S, m), chained (S,)) of a stack of CEF vectors: ``chained``
    marks the rows where equality within TIE is no equivalence there
    (0, 0.8e-12, 1.6e-12). In the other rows the equal CEFs form groups,
    each more than TIE from the next, so ``rank_c < rank_d`` exactly when
    ``CEF_c > CEF_d + TIE``."""
    samples, m = stack.shape
    order = np.argsort(-stack, axis=1, kind="stable")
    ordered = np.take_along_axis(stack, order, axis=1)
    # Best first, a run of values each within TIE of the one before shares
    # the position of its first member: everything before the run beats
    # all of it, nothing in it or after it does ...
    positions = np.broadcast_to(np.arange(m), (samples, m))
    starts = np.ones((samples, m), dtype=bool)
    starts[:, 1:] = beats(ordered[:, :-1], ordered[:, 1:])
    first_of_tie = np.maximum.accumulate(np.where(starts, positions, 0), axis=1)
    sorted_ranks = first_of_tie + 1
    # ... unless the run spans more than TIE. Such rows, rare, are counted literally.
    head = np.take_along_axis(ordered, first_of_tie, axis=1)
    chained = np.asarray(beats(head, ordered).any(axis=1))
    for row in np.flatnonzero(chained).tolist():
        ascending = ordered[row, ::-1]
        sorted_ranks[row] = 1 + m - np.searchsorted(ascending, ordered[row] + TIE, side="right")
    ranks = np.empty((samples, m), dtype=np.int64)
    np.put_along_axis(ranks, order, sorted_ranks, axis=1)
    return ranks, chained


def competition_ranks(cef: ArrayLike) -> np.ndarray:
    """Competition ranks ``1 + #{d : CEF_d > CEF_c + TIE}`` (METHOD.md 6.2
    and 8: two CEFs within ``engine.rules.TIE`` are equal) of one CEF vector
    (m,) or of each row of a stack (S, m), vectorised."""
    values = np.asarray(cef, dtype=np.float64)
    ranks, _ = _competition_ranks(np.atleast_2d(values))
    return ranks if values.ndim == 2 else ranks[0]


def ranking_order(cef: ArrayLike, weighted: ArrayLike) -> np.ndarray:
    """Candidates best first: by competition rank (:func:`competition_ranks`,
    equal CEFs share one), within a rank the higher weighted score first
    (weighted scores within TIE are equal too), so a vetoed candidate's
    distance from the others stays visible, then by index. The one order
    the results, the what-if and the analyses list candidates in."""
    return _ranking_order(competition_ranks(cef), weighted)


def _ranking_order(ranks: np.ndarray, weighted: ArrayLike) -> np.ndarray:
    """:func:`ranking_order` from the CEFs' competition ranks."""
    weighted_ranks = competition_ranks(np.asarray(weighted, dtype=np.float64))
    return np.lexsort((np.arange(len(ranks)), weighted_ranks, ranks))


@dataclass(frozen=True, eq=False)
class WhatIf:
    """Result of :func:`what_if`: ``weights`` (n,) as used (renormalised),
    ``cef`` and ``weighted_scores`` (m,), competition ``ranks`` (m,) and
    ``order`` (m,), candidates best first (ties by the higher weighted
    score, then index: :func:`ranking_order`)."""

    weights: np.ndarray
    weighted_scores: np.ndarray
    cef: np.ndarray
    ranks: np.ndarray
    order: np.ndarray


def what_if(a: ArrayLike, g: ArrayLike, vetoed: ArrayLike) -> WhatIf:
    """The ranking for given per-metric weights ``a`` (non-negative, summing
    to 1 within 1e-6), with the run's group scores and vetoes (which do not
    depend on weights). ``O(m n + m log m)``: no engine run, no database."""
    weights, scores, mask = _problem(a, g, vetoed)
    weighted = (scores * weights).sum(axis=1)
    cef = np.where(mask, 0.0, weighted)
    ranks = competition_ranks(cef)
    return WhatIf(
        weights=weights, weighted_scores=weighted, cef=cef, ranks=ranks, order=_ranking_order(ranks, weighted)
    )


def _attribute_index(attribute_of: ArrayLike, n: int, attributes: int | None = None) -> np.ndarray:
    index = np.asarray(attribute_of)
    if index.shape != (n,) or not np.issubdtype(index.dtype, np.integer):
        raise ValueError(f"attribute_of must be {n} integer attribute indices, one per metric")
    if n and index.min() < 0:
        raise ValueError("attribute_of must hold non-negative attribute indices")
    if attributes is not None and n and index.max() >= attributes:
        raise ValueError(f"attribute_of has index {int(index.max())}, but there are {attributes} attribute weights")
    return index.astype(np.intp)


def metric_shares(a: ArrayLike, attribute_of: ArrayLike) -> np.ndarray:
    """Each metric's share of its attribute's weight, ``a_j / sum_{l in
    attribute(j)} a_l`` (an equal split inside an attribute of weight 0):
    with :func:`metric_weights_from_attributes` it turns a run's metric
    weights into attribute sliders and back."""
    weights = _float_array(a, "a", 1)
    index = _attribute_index(attribute_of, len(weights))
    totals = np.bincount(index, weights=weights)
    sizes = np.bincount(index)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(totals[index] > 0, weights / totals[index], 1.0 / sizes[index])


def metric_weights_from_attributes(
    attribute_weights: ArrayLike, shares: ArrayLike, attribute_of: ArrayLike
) -> np.ndarray:
    """Per-metric weights ``a_j = w_attribute(j) * share_j`` (METHOD.md 3),
    normalised to sum 1.

    Parameters
    ----------
    attribute_weights : array-like (A,)
        Non-negative, not all 0, in any unit (e.g. slider positions).
    shares : array-like (n,)
        Each metric's share of its attribute (:func:`metric_shares`); the
        shares of an attribute are normalised to sum 1.
    attribute_of : array-like of int (n,)
        Each metric's attribute index.
    """
    attribute = relative_weights(attribute_weights, "attribute weight")
    share = _float_array(shares, "shares", 1)
    if len(share) and share.min() < 0:
        raise ValueError(f"shares must be non-negative; entry {int(np.argmin(share))} is not")
    index = _attribute_index(attribute_of, len(share), len(attribute))
    share_totals = np.bincount(index, weights=share, minlength=len(attribute))
    if (share_totals[index] <= 0).any():
        raise ValueError("every attribute's metric shares must have a positive sum")
    weights = attribute[index] * share / share_totals[index]
    total = weights.sum()
    if not (np.isfinite(total) and total > 0):
        raise ValueError("the attribute weights of the metrics' attributes must not all be 0")
    return weights / total


# --------------------------------------------------------------------------
# Rank probabilities from samples (METHOD.md 8)
# --------------------------------------------------------------------------


def _samples(cef: ArrayLike) -> np.ndarray:
    values = _float_array(cef, "cef", 2)
    if values.shape[0] == 0:
        raise ValueError("cef must hold at least one sample (row)")
    return values


def rank_counts(ranks: np.ndarray) -> np.ndarray:
    """(m, m) integer counts: entry [c, r] the number of rows of ``ranks``
    (S, m) in which candidate c has rank r + 1."""
    samples, m = ranks.shape
    flat = (np.arange(m) * m)[None, :] + (ranks - 1)
    return np.bincount(flat.ravel(), minlength=m * m).reshape(m, m)


def pairwise_counts(cef: np.ndarray, *, block: int = 1 << 22) -> np.ndarray:
    """(m, m) integer counts: entry [c, d] the number of rows of ``cef``
    (S, m) with ``CEF_c > CEF_d + TIE`` (``engine.rules.beats``)."""
    ranks, chained = _competition_ranks(cef)
    return _pairwise_counts(ranks, cef, chained, block=block)


def _pairwise_counts(ranks: np.ndarray, cef: np.ndarray, chained: np.ndarray, *, block: int = 1 << 22) -> np.ndarray:
    """:func:`pairwise_counts` from the rows' competition ranks (S, p) (of
    all the row's candidates: ``_competition_ranks``), their CEFs and which
    rows are chained: there the ranks do not say who beats whom (0,
    0.8e-12 and 1.6e-12 rank 2, 1, 1, yet only the last beats the first),
    so those rows, rare, compare the CEFs."""
    samples, m = ranks.shape
    counts = np.zeros((m, m), dtype=np.int64)
    step = max(1, block // max(m * m, 1))
    small = ranks.astype(np.int32)
    small[chained] = 0  # compared below
    for first in range(0, samples, step):
        part = small[first : first + step]
        counts += (part[:, :, None] < part[:, None, :]).sum(axis=0, dtype=np.int64)
    for row in np.flatnonzero(chained).tolist():
        counts += beats(cef[row, :, None], cef[row, None, :])
    return counts


def rank_acceptability(cef: ArrayLike) -> np.ndarray:
    """Rank acceptability indices (METHOD.md 8, binding; SMAA-2).

    ``cef``: (S, m) sampled CEFs. Entry [c, r] is the share of samples in
    which candidate c has competition rank r + 1; rows sum to 1 (columns
    too when no sample has a tie: a tie gives several candidates the same
    rank and leaves the next ranks empty).
    """
    values = _samples(cef)
    return rank_counts(competition_ranks(values)) / len(values)


def pairwise_winning(cef: ArrayLike) -> np.ndarray:
    """Pairwise winning indices (METHOD.md 8, binding).

    ``cef``: (S, m) sampled CEFs. Entry [c, d] is the share of samples with
    ``CEF_c > CEF_d + TIE`` (strictly; diagonal 0), so ``p[c, d] + p[d, c]``
    plus the share of ties (CEFs within TIE) is 1.
    """
    values = _samples(cef)
    return pairwise_counts(values) / len(values)


# --------------------------------------------------------------------------
# Leave one expert out
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LeaveOneOut:
    """Result of :func:`leave_one_out`; row ``r`` of each (e, ...) array is
    the run without expert ``experts[r]`` (row ``i`` without expert ``i``
    when every expert is left out in turn).

    Attributes
    ----------
    experts : ndarray (e,)
        The experts left out, one per row.
    full_cef, full_ranks : ndarray (m,)
        The CEFs and competition ranks with every expert.
    cef, ranks : ndarray (k, m)
        The same without each expert.
    order : ndarray (k, m)
        Candidates best first without each expert (ties by the higher
        weighted score, then index, as the results list them): ``order[i,
        0]`` is the winner and ``order[i, :3]`` the top three.
    winner_changed : ndarray of bool (k,)
        The set of first-ranked candidates differs from the full run's.
    kendall_tau : ndarray (k,)
        Kendall's tau-b between the full ranking and the ranking without
        the expert (their competition ranks, so CEFs within TIE are ties,
        counted as tau-b counts them); 1.0 when the two
        rankings are identical, NaN when undefined otherwise (a ranking in
        which every candidate ties).
    """

    experts: np.ndarray
    full_cef: np.ndarray
    full_ranks: np.ndarray
    cef: np.ndarray
    ranks: np.ndarray
    order: np.ndarray
    winner_changed: np.ndarray
    kendall_tau: np.ndarray


def without_expert(
    expert: int, weights: np.ndarray, peer_weights: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(W, V, L, U)`` without expert ``expert``: their row of ``W``, ``L``
    and ``U`` removed, their row and column of ``V`` removed and every
    remaining row of ``V`` divided by its sum (METHOD.md: a row that must
    sum to 1 is renormalised exactly)."""
    keep = np.arange(len(weights)) != expert
    return weights[keep], core.peer_weights_kept(peer_weights, keep), lower[keep], upper[keep]


def leave_one_out(
    *,
    weights: ArrayLike,
    peer_weights: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    measurements: ArrayLike,
    tolerance: float = core.DEFAULT_TOLERANCE,
    expert_values: core.ExpertValues | None = None,
    experts: Sequence[int] | None = None,
) -> LeaveOneOut:
    """The ranking without each expert in turn (docs/method.md, "Robustness").

    Same arguments as ``engine.core.evaluate`` (the arrays of
    ``engine.snapshot.snapshot_arrays``, and the experts' own values of the
    elicited metrics). For each expert ``i`` the engine runs on the study
    without them (:func:`without_expert`): their weights, ranges and own
    values dropped, their row and column of the peer weights removed and
    the other rows renormalised, so their influence is shared out as the
    method shares it (the stationary distribution of the reduced ``V``);
    their vetoes go with them. ``experts``: the experts to leave out, in
    that order (default every expert; the analyses' chunks pass a range).
    Cost: one evaluation with everyone, then one per expert left out. Needs
    at least two experts. This is the one implementation: the robustness
    page, the API and the analysis CSV show what it returns.
    """
    W = np.asarray(weights, dtype=np.float64)
    V = np.asarray(peer_weights, dtype=np.float64)
    L = np.asarray(lower, dtype=np.float64)
    U = np.asarray(upper, dtype=np.float64)
    M = np.asarray(measurements, dtype=np.float64)
    full = core.evaluate(
        weights=W, peer_weights=V, lower=L, upper=U, measurements=M, tolerance=tolerance, expert_values=expert_values
    )
    k = W.shape[0]
    if k < 2:
        raise ValueError("leave-one-out needs at least two experts (weights has one row)")
    left_out = np.arange(k) if experts is None else np.asarray(experts, dtype=np.intp).reshape(-1)
    if left_out.size and (left_out.min() < 0 or left_out.max() >= k):
        raise ValueError(f"experts must be indices of the {k} experts")
    m = len(full.cef)
    full_ranks = competition_ranks(full.cef)
    full_top = full_ranks == 1
    e = len(left_out)
    cef = np.empty((e, m))
    ranks = np.empty((e, m), dtype=np.int64)
    order = np.empty((e, m), dtype=np.intp)
    changed = np.zeros(e, dtype=bool)
    tau = np.full(e, np.nan)
    # The same checks evaluate makes, once, before rows are dropped.
    V = core._validated_peer_weights(V, expected_experts=k)
    for row, expert in enumerate(left_out.tolist()):
        W_i, V_i, L_i, U_i = without_expert(expert, W, V, L, U)
        own = None
        if expert_values is not None:
            own = core.ExpertValues(expert_values.columns, np.delete(expert_values.values, expert, axis=1))
        result = core.evaluate(
            weights=W_i, peer_weights=V_i, lower=L_i, upper=U_i, measurements=M, tolerance=tolerance, expert_values=own
        )
        cef[row] = result.cef
        ranks[row] = competition_ranks(result.cef)
        order[row] = _ranking_order(ranks[row], result.weighted_scores)
        changed[row] = bool((ranks[row] == 1).tolist() != full_top.tolist())
        if np.array_equal(ranks[row], full_ranks):
            tau[row] = 1.0
        elif m >= 2:
            # On the competition ranks, not the CEFs: CEFs within TIE are a tie.
            tau[row] = _kendall_tau_b(-full_ranks, -ranks[row])
    return LeaveOneOut(
        experts=left_out,
        full_cef=np.asarray(full.cef),
        full_ranks=full_ranks,
        cef=cef,
        ranks=ranks,
        order=order,
        winner_changed=changed,
        kendall_tau=tau,
    )


def _kendall_tau_b(first: np.ndarray, second: np.ndarray) -> float:
    if np.ptp(first) == 0 or np.ptp(second) == 0:
        return float("nan")  # a ranking where every candidate ties: undefined
    # imported on first use: scipy costs 0.4 s at every command's start.
    from scipy.stats import kendalltau

    return float(kendalltau(first, second).statistic)


# --------------------------------------------------------------------------
# Monte Carlo rank probabilities (SMAA-2 style)
# --------------------------------------------------------------------------

#: Samples are drawn in blocks of this many: block ``b`` (samples
#: ``b * SAMPLE_BLOCK`` ...) draws from generators seeded by
#: ``(seed, b, part)``, so a sample's values never depend on how the
#: samples are split into chunks (a chunk that starts inside a block draws
#: the whole block and keeps its part).
SAMPLE_BLOCK = 64

#: Central weights are summed as integers in units of 2**-CENTRAL_WEIGHT_BITS,
#: so merged chunks add exactly whatever their order (float sums would not).
CENTRAL_WEIGHT_BITS = 40

#: Without a ``SamplingSpec.pairwise`` list, pairwise wins are counted among
#: all candidates up to this many, else among the run's PAIRWISE_TOP best.
PAIRWISE_ALL = 100
PAIRWISE_TOP = 20

# Independent streams per block, one per sampled input, so switching one
# input's sampling on or off never changes another's draws.
_JUDGMENTS, _DIRICHLET, _PEERS, _RANGES, _MEASUREMENTS = range(5)

#: The most peer weights one random stream draws: a block's peer weights are
#: drawn from one stream, seeded ``(seed, block, _PEERS)``, up to
#: SAMPLE_BLOCK samples of 200 experts (the site's most,
#: ``workspace.limits.MAX_EXPERTS``); beyond, the block is cut into streams
#: of ``peer_stream_samples(k)`` samples (a power of two), stream ``s``
#: seeded ``(seed, block, _PEERS, s)``. A function of ``k`` only, so that
#: the samples never depend on the memory budget.
PEER_STREAM_ENTRIES = SAMPLE_BLOCK * 200 * 200

#: The default memory budget of a block's sampled peer weights, in bytes
#: (the setting ``ENGINE_ANALYSIS_MEMORY_BYTES``): how many samples' k x k
#: chains are held at once (at least one stream's).
MEMORY_BUDGET = 256 * 2**20


def peer_stream_samples(k: int) -> int:
    """The samples of one stream of peer weights at ``k`` experts: the
    whole block up to ``PEER_STREAM_ENTRIES``, else the largest power of
    two whose peer weights fit in it (at least 1)."""
    fits = PEER_STREAM_ENTRIES // max(1, k * k)
    return SAMPLE_BLOCK if fits >= SAMPLE_BLOCK else 1 << max(0, fits.bit_length() - 1)


# A Dirichlet draw whose entry underflows to 0 is lifted to this before the
# row is renormalised: peer weights must stay positive (METHOD.md 5).
_TINY = 1e-300

#: The smallest Dirichlet concentration ``SamplingSpec`` takes (weights and
#: peer weights). A row's gammas all fall below _TINY, and the draw becomes
#: the centre (every entry lifted alike) instead of near a vertex, with
#: probability about ``_TINY ** concentration = e^(-690.8 concentration)``
#: whatever the row's length: 1e-30 at 0.1, but one draw in 1,000 at 0.01
#: and one in two at 0.001 (docs/method.md 8.3).
CONCENTRATION_MIN = 0.1


@dataclass(frozen=True)
class SamplingSpec:
    """What a Monte Carlo analysis samples (recorded with it; docs/method.md,
    "Robustness"). Everything off samples nothing: every sample is the run.

    Attributes
    ----------
    judgments : bool
        Experts' attribute prioritisations: each AHP judgment moved by -1, 0
        or +1 step of Saaty's 17-point scale (1/9, ..., 1/2, 1, 2, ..., 9),
        each with probability 1/3, independently, clipped at 1/9 and 9; direct
        and LPR weights drawn from ``Dirichlet(weight_concentration * w)``,
        ``w`` the expert's attribute weights. Each metric keeps its share of
        its attribute.
    weight_concentration : float
        The Dirichlet concentration ``kappa`` of direct and LPR weights:
        mean ``w``, variance ``w (1 - w) / (kappa + 1)``; at least
        ``CONCENTRATION_MIN`` (0.1).
    peer_weights : bool
        Each expert's row of peer weights from ``Dirichlet(peer_concentration * v_i)``.
    peer_concentration : float
    range_fraction : float
        ``p`` in [0, 0.5): each bound of each acceptable range moved by
        ``u p |b^u - b^l|``, ``u`` uniform on [-1, 1], independently (the
        bounds cannot meet below 0.5). 0: ranges fixed.
    measurements : bool
        Typed measurements drawn from ``Normal(value, standard error)`` where
        a standard error is given (``MonteCarloInputs.standard_errors``).
    bootstrap : bool
        Metrics computed from prediction sets (``MonteCarloInputs.bootstrap``)
        recomputed on a paired bootstrap replicate of their set in every
        sample: sample ``i`` uses replicate ``i`` of
        ``evaluation.bootstrap`` seeded :func:`bootstrap_seed` ``(seed, set)``.
        The same switch recomputes the experts' own values of the elicited
        metrics (``MonteCarloInputs.elicited``) from each candidate's
        confusion matrix on that replicate of its set.
    pairwise : tuple of int, optional
        The candidates whose pairwise wins are counted. None: all of them up
        to ``PAIRWISE_ALL`` (100) candidates, else the run's ``PAIRWISE_TOP``
        (20) best (``m`` candidates need ``m^2`` counts per sample).
    """

    judgments: bool = False
    weight_concentration: float = 100.0
    peer_weights: bool = False
    peer_concentration: float = 100.0
    range_fraction: float = 0.0
    measurements: bool = False
    bootstrap: bool = False
    pairwise: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("weight_concentration", "peer_concentration"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, int | float) and np.isfinite(value)):
                raise ValueError(f"{name} must be a number, got {value!r}")
            if not value >= CONCENTRATION_MIN:
                raise ValueError(
                    f"{name} must be at least {CONCENTRATION_MIN:g}, got {float(value)!r}: below it some "
                    "Dirichlet draws fall on the centre instead of near a corner (one in a thousand at 0.01)"
                )
        if not (isinstance(self.range_fraction, int | float) and 0 <= self.range_fraction < 0.5):
            raise ValueError(f"range_fraction must lie in [0, 0.5), got {self.range_fraction!r}")


@dataclass(frozen=True, eq=False)
class MonteCarloInputs:
    """A run's inputs for :func:`monte_carlo_chunk`.

    Attributes
    ----------
    weights, peer_weights, lower, upper, measurements
        As ``engine.core.evaluate`` takes them (``snapshot_arrays``).
    attribute_of : ndarray of int (n,), optional
        Each metric's attribute (default: each metric its own attribute).
        An expert's attribute weight is the sum of their weights of its
        metrics; each metric keeps its share of it when weights are sampled.
    ahp_matrices : ndarray (k, A, A), optional
        Each expert's pairwise comparison matrix of the attributes; only the
        rows of ``ahp_experts`` are read.
    ahp_experts : ndarray of bool (k,), optional
        The experts who prioritised the attributes by AHP (default none:
        every expert's weights are sampled from the Dirichlet).
    ahp_weighting : str
        How AHP weights come from a matrix (``engine.rules.AHP_WEIGHTINGS``),
        the study's setting.
    standard_errors : ndarray (m, n), optional
        Each typed measurement's standard error; 0 or NaN: fixed.
    bootstrap : tuple of BootstrapColumn
        The metrics computed from prediction sets, to resample.
    expert_values : engine.core.ExpertValues, optional
        Each expert's own value of the elicited metrics (docs/method.md
        7.4), as ``engine.core.evaluate`` takes them: every sample scores
        each expert on their own value, as the run does.
    elicited : tuple of ElicitedColumn
        The elicited metrics whose own values are recomputed on each
        sample's bootstrap replicate (with ``SamplingSpec.bootstrap``).
    """

    weights: ArrayLike
    peer_weights: ArrayLike
    lower: ArrayLike
    upper: ArrayLike
    measurements: ArrayLike
    attribute_of: ArrayLike | None = None
    ahp_matrices: ArrayLike | None = None
    ahp_experts: ArrayLike | None = None
    ahp_weighting: str = "column_means"
    standard_errors: ArrayLike | None = None
    bootstrap: tuple["BootstrapColumn", ...] = ()
    expert_values: core.ExpertValues | None = None
    elicited: tuple["ElicitedColumn", ...] = ()


@dataclass(frozen=True, eq=False)
class BootstrapColumn:
    """A metric column computed from a prediction set (docs/method.md 8.4).

    Attributes
    ----------
    metric : int
        The column of ``measurements`` it fills.
    kind : {"accuracy", "roc_auc"}
    y_true : array-like (N,)
        The set's true labels.
    predictions : array-like (m, N)
        Every candidate's predicted labels ("accuracy") or scores of the
        positive class ("roc_auc"), in the order of the candidates.
    prediction_set : int
        Which set: columns of one set resample the same instances; different
        sets resample independently.
    pos_label : object
        The positive class, for "roc_auc".
    """

    metric: int
    kind: str
    y_true: ArrayLike
    predictions: ArrayLike
    prediction_set: int = 0
    pos_label: object = 1


#: The kinds of metric a BootstrapColumn may hold.
BOOTSTRAP_KINDS = ("accuracy", "roc_auc")


@dataclass(frozen=True, eq=False)
class ElicitedColumn:
    """An elicited metric recomputed from its candidates' predictions
    (docs/method.md 7.4 and 8.3): each expert's own value is their linear
    metric of the candidate's confusion matrix, ``sum_cell w_cell C_cell``
    with ``C`` as fractions of the instances.

    Attributes
    ----------
    metric : int
        Its column of ``measurements``, one of ``expert_values.columns``.
    cell_weights : array-like (k, L * L)
        Each expert's weight of each cell of the confusion matrix (true
        class ``t``, predicted ``p`` at ``t * L + p``, the classes in the
        elicited set's order).
    cells : tuple of (array-like (N_c,) of int, or None), one per candidate
        The cell of each of the candidate's instances in its newest
        prediction set; None: its values stay as in the run.
    prediction_sets : tuple of int, one per candidate
        The set the candidate's instances come from: candidates of one set
        with as many instances resample the same instances, as the
        ``BootstrapColumn``s of that set do.
    """

    metric: int
    cell_weights: ArrayLike
    cells: tuple[ArrayLike | None, ...]
    prediction_sets: tuple[int, ...]


def bootstrap_seed(seed: int, prediction_set: int) -> int:
    """The ``evaluation.bootstrap`` seed of a prediction set's replicates in
    the Monte Carlo analysis seeded ``seed``: sample ``i`` uses replicate ``i``."""
    return int(np.random.SeedSequence([seed, 0xB007, prediction_set]).generate_state(1, np.uint64)[0] >> 1)


@dataclass(frozen=True, eq=False)
class Counts:
    """What a chunk of samples leaves (all integers, so merging is exact).

    Attributes
    ----------
    samples : int
    ranks : ndarray of int64 (m, m)
        [c, r]: samples in which candidate c has competition rank r + 1.
    pairwise : ndarray of int64 (p, p)
        [c, d]: samples with CEF_c > CEF_d + TIE, among ``pairwise_candidates``.
    pairwise_candidates : ndarray of int (p,)
    central_weights : ndarray of int64 (m, n)
        Sum of the consensus metric weights of the samples in which c is
        ranked first, in units of ``2**-CENTRAL_WEIGHT_BITS``.
    """

    samples: int
    ranks: np.ndarray
    pairwise: np.ndarray
    pairwise_candidates: np.ndarray
    central_weights: np.ndarray

    @property
    def best(self) -> np.ndarray:
        """Samples in which each candidate is ranked first (ties included)."""
        return self.ranks[:, 0]

    def to_dict(self) -> dict:
        """Plain JSON, what a chunk returns and an analysis stores: the rank
        counts as ``[candidate, rank, count]`` triples of the non-zero
        entries (most of a large study's m × m are 0), the rest as lists of
        ints. The one counts format (:meth:`from_dict` reads it back)."""
        nonzero = np.argwhere(self.ranks > 0)
        # Built by NumPy, not a loop: a chunk of a 1,000-candidate study has
        # tens of thousands of entries, and its worker packs them (and the last
        # chunk's worker unpacks every chunk's) before anything is stored.
        triples = np.column_stack((nonzero, self.ranks[nonzero[:, 0], nonzero[:, 1]])).astype(np.int64)
        return {
            "samples": int(self.samples),
            "m": int(self.ranks.shape[0]),
            "ranks": triples.tolist(),
            "pairwise": self.pairwise.tolist(),
            "pairwise_candidates": self.pairwise_candidates.tolist(),
            "central_weights": self.central_weights.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Counts":
        m = int(data["m"])
        ranks = np.zeros((m, m), dtype=np.int64)
        triples = np.array(data["ranks"], dtype=np.int64).reshape(-1, 3)
        ranks[triples[:, 0], triples[:, 1]] = triples[:, 2]
        p = len(data["pairwise_candidates"])
        return cls(
            samples=int(data["samples"]),
            ranks=ranks,
            pairwise=np.array(data["pairwise"], dtype=np.int64).reshape(p, p),
            pairwise_candidates=np.array(data["pairwise_candidates"], dtype=np.intp),
            central_weights=np.array(data["central_weights"], dtype=np.int64).reshape(m, -1),
        )


class _Prepared:
    """Validated inputs and what every block reuses (``monte_carlo_prepare``):
    a chunk's work is ``monte_carlo_counts`` of it, so that a worker that
    keeps it computes a run's next chunks without validating or evaluating
    the run again. Its buffers are reused from block to block: one
    computation at a time."""

    def __init__(self, inputs: MonteCarloInputs, spec: SamplingSpec, memory_budget: int = MEMORY_BUDGET):
        base = core.evaluate(
            weights=inputs.weights,
            peer_weights=inputs.peer_weights,
            lower=inputs.lower,
            upper=inputs.upper,
            measurements=inputs.measurements,
            expert_values=inputs.expert_values,
        )
        self.spec = spec
        self.base = base
        W = core._validated_weights(inputs.weights)
        k, n = W.shape
        self.weights = W
        self.peer_weights = core._validated_peer_weights(inputs.peer_weights, expected_experts=k)
        self.lower = np.asarray(inputs.lower, dtype=np.float64)
        self.upper = np.asarray(inputs.upper, dtype=np.float64)
        self.measurements = np.asarray(inputs.measurements, dtype=np.float64)
        m = len(self.measurements)
        attributes = self._set_attributes(inputs.attribute_of, n)
        self._set_ahp(inputs, k, attributes)
        self.scale_values = SCALE_VALUES
        self._matrix_buffer: np.ndarray | None = None
        self._samplers: dict[str, _Dirichlet] = {}
        self.memory_budget = int(memory_budget)
        self._chains: np.ndarray | None = None
        self._scores_buffer: np.ndarray | None = None
        self._counts: dict[tuple[int, int], np.ndarray] = {}
        self._counts_block: tuple[int, int, int] | None = None
        self.standard_errors = self._standard_errors(inputs.standard_errors, m, n)
        self.pairwise_candidates = self._pairwise_candidates(spec.pairwise, base, m)
        self.bootstrap = self._bootstrap_columns(inputs.bootstrap, m, n) if spec.bootstrap else []
        # Each expert's own values of the elicited metrics (validated as evaluate does), and
        # those resampled: the run's override, in every sample (core.with_own_scores).
        self.expert_values = core._validated_expert_values(inputs.expert_values, (m, k, n))
        self.elicited = self._elicited_columns(inputs.elicited, self.expert_values, k) if spec.bootstrap else []
        self.scores_vary = (
            spec.range_fraction > 0
            or (spec.measurements and bool(self.standard_errors.any()))
            or bool(self.bootstrap)
            or bool(self.elicited)
        )
        self.influence = np.asarray(base.expert_influence)
        # Per metric, the candidates in the order of their measurements:
        # sampled measurements stay nearly in it (core._group_scores_batch).
        self.measured_order = np.ascontiguousarray(np.argsort(self.measurements, axis=0).T)
        if not self.scores_vary:
            self._fix_individual_scores(spec, k)

    def release_buffers(self) -> None:
        """Drops the buffers blocks reuse (samplers, the chains' stack, the
        scores and matrices, the replicate counts): kept between chunks, a
        prepared analysis holds its inputs and evaluated run only."""
        self._samplers = {}
        self._chains = None
        self._scores_buffer = None
        self._matrix_buffer = None
        self._counts, self._counts_block = {}, None

    def _set_attributes(self, attribute_of: ArrayLike | None, n: int) -> int:
        """Decides which attribute each metric belongs to (each metric its own
        when none is given), refusing a numbering that skips an attribute, and
        sets each expert's attribute weights and each metric's share of its
        attribute's weight; returns the number of attributes."""
        self.attribute_of = _attribute_index(np.arange(n) if attribute_of is None else attribute_of, n)
        attributes = int(self.attribute_of.max()) + 1 if n else 0
        if set(self.attribute_of.tolist()) != set(range(attributes)):
            raise ValueError("attribute_of must number the attributes 0..A-1 with every attribute used")
        self.attribute_weights = np.stack([np.bincount(self.attribute_of, row, attributes) for row in self.weights])
        self.shares = self.weights / self.attribute_weights[:, self.attribute_of]
        return attributes

    def _set_ahp(self, inputs: MonteCarloInputs, k: int, attributes: int) -> None:
        """Decides which experts are sampled by AHP judgments (the others by
        Dirichlet weights) and with which weighting, validated; for AHP experts
        also their judgments as scale points and the cells of their matrices."""
        ahp = np.zeros(k, dtype=bool) if inputs.ahp_experts is None else np.asarray(inputs.ahp_experts, dtype=bool)
        if ahp.shape != (k,):
            raise ValueError(f"ahp_experts must have shape ({k},) (one flag per expert), got {ahp.shape}")
        self.ahp_experts = np.flatnonzero(ahp)
        self.dirichlet_experts = np.flatnonzero(~ahp)
        if inputs.ahp_weighting not in AHP_WEIGHTINGS:
            raise ValueError(f"ahp_weighting must be one of {', '.join(AHP_WEIGHTINGS)}")
        self.ahp_weighting = inputs.ahp_weighting
        self.pairs = np.triu_indices(attributes, k=1)
        if len(self.ahp_experts):
            self._set_judgments(inputs.ahp_matrices, k, attributes)

    def _set_judgments(self, ahp_matrices: ArrayLike | None, k: int, attributes: int) -> None:
        """Decides, from the AHP experts' validated attribute matrices, each
        judgment's nearest scale point, and the gather that rebuilds a sampled
        matrix from a sample's judgments."""
        if ahp_matrices is None:
            raise ValueError("ahp_matrices are needed for the experts in ahp_experts")
        matrices = _validated_matrices(ahp_matrices, "ahp_matrices")
        if matrices.shape != (k, attributes, attributes):
            raise ValueError(
                f"ahp_matrices must have shape ({k}, {attributes}, {attributes}) (an attribute matrix "
                f"per expert), got {matrices.shape}"
            )
        upper_values = matrices[self.ahp_experts][:, self.pairs[0], self.pairs[1]]
        distance = np.abs(np.log(upper_values)[..., None] - np.log(SCALE_VALUES))
        # (k_ahp, pairs) index into the scale
        self.judgment_points = np.argmin(distance, axis=-1).astype(np.int8)
        # Each cell of a matrix as an index into a sample's judgments
        # extended by their reciprocals and the diagonal's 1, so that one
        # gather builds every sampled matrix (SCALE_VALUES is symmetric:
        # the reciprocal of point p is point 16 - p, exactly as stored).
        count = len(self.pairs[0])
        cells = np.full((attributes, attributes), 2 * count, dtype=np.intp)
        cells[self.pairs] = np.arange(count)
        cells[self.pairs[::-1]] = count + np.arange(count)
        self.judgment_cells = cells.ravel()

    @staticmethod
    def _standard_errors(standard_errors: ArrayLike | None, m: int, n: int) -> np.ndarray:
        """Decides each measurement's standard error: zero when none is given
        or for a NaN, refusing a wrong shape, a negative or an infinite one."""
        if standard_errors is None:
            return np.zeros((m, n))
        errors = np.asarray(standard_errors, dtype=np.float64)
        if errors.shape != (m, n):
            raise ValueError(f"standard_errors must have shape ({m}, {n}) (one per measurement)")
        errors = np.where(np.isnan(errors), 0.0, errors)
        if not np.isfinite(errors).all() or errors.min() < 0:
            raise ValueError("standard_errors must be non-negative and finite (or NaN for none)")
        return errors

    @staticmethod
    def _pairwise_candidates(pairwise: tuple[int, ...] | None, base: core.Evaluation, m: int) -> np.ndarray:
        """Decides the candidates whose pairwise orders are counted: those
        chosen (distinct indices, validated), else all up to PAIRWISE_ALL and
        beyond, the run's best PAIRWISE_TOP."""
        if pairwise is None:
            # All candidates up to PAIRWISE_ALL; beyond, the run's best
            # PAIRWISE_TOP (m^2 counts per sample would dominate the cost).
            best_first = np.lexsort((np.arange(m), -np.asarray(base.weighted_scores), -np.asarray(base.cef)))
            return np.arange(m) if m <= PAIRWISE_ALL else np.sort(best_first[:PAIRWISE_TOP])
        chosen = np.asarray(pairwise, dtype=np.intp)
        if len(chosen) and (chosen.min() < 0 or chosen.max() >= m or len(np.unique(chosen)) != len(chosen)):
            raise ValueError(f"pairwise must list distinct candidate indices in 0..{m - 1}")
        return chosen

    def _fix_individual_scores(self, spec: SamplingSpec, k: int) -> None:
        """With the individual scores fixed (nothing resamples them), sets
        the run's vetoes and, when peer weights are sampled, the experts'
        individual scores as one single-precision (k, m * n) matrix."""
        # Fixed individual scores: g = pi Mbar is one product per sample.
        self.vetoed = np.asarray(self.base.vetoed)
        if spec.peer_weights:
            # In single precision: the product below is most of such a
            # sample, and sgemm takes half dgemm's time. Each g is then
            # within about 1e-7 of its double value (far below what
            # sampled weights move); the CEF is summed in double.
            individual = self._individual(np.arange(len(self.measurements)))
            self.individual = individual.transpose(1, 0, 2).astype(np.float32, order="C").reshape(k, -1)
            # Candidates tied in the run (within TIE, METHOD.md 6.2) are
            # scored in double in every sample: single precision would order
            # two roundings of one exact value (6/25 as 0.24 and
            # 0.24000000000000002) by its own rounding. A tie that holds in
            # the samples holds in the run, whose weights are one of them.
            self.tied = _tied_candidates(np.where(self.vetoed, np.nan, np.asarray(self.base.cef)))
            self.tied_individual = individual[self.tied].transpose(1, 0, 2).reshape(k, -1)

    def _individual(self, candidates: np.ndarray) -> np.ndarray:
        """(len(candidates), k, n) the fixed individual scores ``m̄_cij`` of
        the candidates, in double."""
        position = (self.measurements[candidates][:, None, :] - self.lower) / (self.upper - self.lower)
        individual = np.clip(position, 0.0, 1.0)
        if self.expert_values is not None:
            own = core.ExpertValues(self.expert_values.columns, self.expert_values.values[candidates])
            individual[:, :, own.columns] = core._own_scores(self.lower, self.upper, own)
        return individual

    # --- one block of samples ---------------------------------------------------

    @staticmethod
    def _bootstrap_columns(columns: tuple[BootstrapColumn, ...], m: int, n: int) -> list[tuple]:
        """(metric, kind, truth, predictions, set, pos_label), validated."""
        checked = []
        sizes: dict[int, int] = {}
        for position, column in enumerate(columns):
            where = f"bootstrap[{position}]"
            if column.kind not in BOOTSTRAP_KINDS:
                raise ValueError(f"{where}.kind must be one of {', '.join(BOOTSTRAP_KINDS)}, got {column.kind!r}")
            if not (isinstance(column.metric, int | np.integer) and 0 <= column.metric < n):
                raise ValueError(f"{where}.metric must be a metric index in 0..{n - 1}")
            truth = np.asarray(column.y_true)
            predictions = np.asarray(column.predictions)
            if truth.ndim != 1 or not len(truth) or predictions.shape != (m, len(truth)):
                raise ValueError(
                    f"{where} needs y_true (N,) and predictions ({m}, N), one row per candidate; "
                    f"got {truth.shape} and {predictions.shape}"
                )
            if sizes.setdefault(column.prediction_set, len(truth)) != len(truth):
                raise ValueError(f"{where}: the columns of prediction set {column.prediction_set} differ in size")
            if column.kind == "roc_auc":
                positive = truth == column.pos_label
                if positive.all() or not positive.any():
                    raise ValueError(f"{where}: y_true must hold the positive class and another")
            checked.append(
                (int(column.metric), column.kind, truth, predictions, column.prediction_set, column.pos_label)
            )
        if len({c[0] for c in checked}) != len(checked):
            raise ValueError("bootstrap: each metric may be filled by one column only")
        return checked

    def bootstrapped(self, seed: int, block: int, size: int, measured: np.ndarray) -> np.ndarray:
        """``measured`` (size, m, n) with the bootstrapped columns replaced by
        their values on the block's replicates (the run's value where a
        replicate leaves a metric undefined, e.g. an AUC with one class)."""
        measured = np.array(measured, dtype=np.float64)
        for metric, kind, truth, predictions, prediction_set, pos_label in self.bootstrap:
            counts = self.counts(seed, block, size, prediction_set, len(truth))
            if kind == "accuracy":
                values = weighted_accuracy(truth, predictions, counts)
            else:
                values = weighted_roc_auc(truth, predictions, counts, pos_label=pos_label)
            measured[:, :, metric] = np.where(np.isfinite(values), values, self.measurements[:, metric])
        return measured

    @staticmethod
    def _elicited_columns(
        columns: tuple[ElicitedColumn, ...], own: core.ExpertValues | None, k: int
    ) -> list[tuple[int, np.ndarray, list[tuple[int, int, np.ndarray, "sparse.csr_matrix"]]]]:
        """Per column: (its position in ``own.columns``, the cell weights
        (L * L, k), and per (set, N) group of candidates (set, N, the
        candidates, their cells as a (candidates * L * L, N) 0/1 matrix)),
        validated."""
        checked = []
        for position, column in enumerate(columns):
            where = f"elicited[{position}]"
            if own is None or column.metric not in own.columns.tolist():
                raise ValueError(f"{where}.metric must be a column of expert_values")
            weights, cells_count = _Prepared._elicited_weights(where, column, k)
            m = own.values.shape[0]
            if len(column.cells) != m or len(column.prediction_sets) != m:
                raise ValueError(f"{where} needs cells and prediction_sets for each of the {m} candidates")
            groups = _Prepared._elicited_groups(where, column, cells_count)
            matrices = _Prepared._elicited_matrices(groups, cells_count)
            checked.append((own.columns.tolist().index(column.metric), np.ascontiguousarray(weights.T), matrices))
        if len({c[0] for c in checked}) != len(checked):
            raise ValueError("elicited: each metric may be filled by one column only")
        return checked

    @staticmethod
    def _elicited_weights(where: str, column: ElicitedColumn, k: int) -> tuple[np.ndarray, int]:
        """Decides whether a column's cell weights are a finite (k, L * L)
        array; returns them and their number of cells L * L."""
        weights = np.asarray(column.cell_weights, dtype=np.float64)
        cells_count = weights.shape[1] if weights.ndim == 2 else 0
        if weights.ndim != 2 or weights.shape[0] != k or round(np.sqrt(cells_count)) ** 2 != cells_count:
            raise ValueError(f"{where}.cell_weights must have shape ({k}, L * L), got {weights.shape}")
        if not np.isfinite(weights).all():
            raise ValueError(f"{where}.cell_weights must be finite")
        return weights, cells_count

    @staticmethod
    def _elicited_groups(
        where: str, column: ElicitedColumn, cells_count: int
    ) -> dict[tuple[int, int], list[tuple[int, np.ndarray]]]:
        """Decides whether each candidate's cells are cell indices, one per
        instance, and groups the candidates that have cells by (prediction
        set, number of instances), each with its cells."""
        groups: dict[tuple[int, int], list[tuple[int, np.ndarray]]] = {}
        for c, cells in enumerate(column.cells):
            if cells is None:
                continue
            cells = np.asarray(cells)
            if cells.ndim != 1 or not len(cells) or ((cells < 0) | (cells >= cells_count)).any():
                raise ValueError(f"{where}.cells[{c}] must be cell indices in 0..{cells_count - 1}, one per instance")
            groups.setdefault((int(column.prediction_sets[c]), len(cells)), []).append((c, cells.astype(np.intp)))
        return groups

    @staticmethod
    def _elicited_matrices(
        groups: dict[tuple[int, int], list[tuple[int, np.ndarray]]], cells_count: int
    ) -> list[tuple[int, int, np.ndarray, "sparse.csr_matrix"]]:
        """Per group: (set, N, the candidates, their cells as a
        (candidates * L * L, N) 0/1 matrix)."""
        # imported on first use: scipy costs 0.4 s at every command's start.
        from scipy import sparse

        matrices = []
        for (prediction_set, size), members in groups.items():
            rows = np.concatenate([g * cells_count + cells for g, (_, cells) in enumerate(members)])
            instances = np.tile(np.arange(size), len(members))
            matrix = sparse.csr_matrix(
                (np.ones(len(rows)), (rows, instances)), shape=(len(members) * cells_count, size)
            )
            candidates = np.array([c for c, _ in members], dtype=np.intp)
            matrices.append((prediction_set, size, candidates, matrix))
        return matrices

    def counts(self, seed: int, block: int, size: int, prediction_set: int, instances: int) -> np.ndarray:
        """(size, N) the block's replicate counts of a set's N instances, drawn
        once per block and shared by every column of that set (paired)."""
        if self._counts_block != (seed, block, size):
            self._counts_block, self._counts = (seed, block, size), {}  # the previous block's are not read again
        key = (prediction_set, instances)
        if key not in self._counts:
            self._counts[key] = bootstrap_counts(
                instances, bootstrap_seed(seed, prediction_set), block * SAMPLE_BLOCK, size
            )
        return self._counts[key]

    def own_values(self, seed: int, block: int, size: int) -> core.ExpertValues | None:
        """The experts' own values of the elicited metrics in the block's
        samples: values (m, k, e) when none is resampled, else (size, m, k,
        e) with each resampled candidate's from its replicate's confusion
        matrix (its instances counted by the set's replicate counts)."""
        own = self.expert_values
        if own is None or not self.elicited:
            return own
        values = np.array(np.broadcast_to(own.values, (size, *own.values.shape)))
        for position, weights, groups in self.elicited:
            cells_count = len(weights)
            for prediction_set, instances, candidates, matrix in groups:
                counts = self.counts(seed, block, size, prediction_set, instances)
                confusion = (matrix @ counts.T).reshape(len(candidates), cells_count, size)  # counts, not fractions
                # Weighted counts, then one division: an all-ones weighting
                # is the accuracy's count over N, to the bit.
                values[..., position][:, candidates] = np.matmul(confusion.transpose(2, 0, 1), weights) / instances
        return core.ExpertValues(own.columns, values)

    def _dirichlet(self, name: str, alpha: np.ndarray, size: int) -> "_Dirichlet":
        """The sampler of ``alpha``'s rows for blocks of ``size``, built once."""
        sampler = self._samplers.get(name)
        if sampler is None or sampler.shape[0] != size:
            sampler = self._samplers[name] = _Dirichlet(alpha, size)
        return sampler

    def _matrices(self, size: int) -> np.ndarray:
        """A reused (size, k_ahp, A, A) buffer for the sampled matrices."""
        if self._matrix_buffer is None or len(self._matrix_buffer) != size:
            count = self.attribute_weights.shape[1]
            self._matrix_buffer = np.empty((size, len(self.ahp_experts), count, count))
        return self._matrix_buffer

    def metric_weights(self, seed: int, block: int, size: int) -> np.ndarray:
        """(size, k, n) each expert's metric weights per sample."""
        W = self.weights
        if not self.spec.judgments:
            return np.broadcast_to(W, (size, *W.shape))
        attribute = np.broadcast_to(self.attribute_weights, (size, *self.attribute_weights.shape)).copy()
        if len(self.dirichlet_experts):
            rng = np.random.default_rng([seed, block, _DIRICHLET])
            alpha = self.spec.weight_concentration * self.attribute_weights[self.dirichlet_experts]
            attribute[:, self.dirichlet_experts] = self._dirichlet("weights", alpha, size).draw(rng)
        if len(self.ahp_experts) and len(self.pairs[0]):
            rng = np.random.default_rng([seed, block, _JUDGMENTS])
            steps = rng.integers(-1, 2, size=(size, *self.judgment_points.shape), dtype=np.int8)
            top = len(self.scale_values) - 1
            count = self.judgment_points.shape[1]
            points = np.empty((size, len(self.ahp_experts), 2 * count + 1), dtype=np.int8)
            np.add(self.judgment_points, steps, out=points[..., :count])
            np.clip(points[..., :count], 0, top, out=points[..., :count])
            np.subtract(top, points[..., :count], out=points[..., count : 2 * count])
            points[..., -1] = top // 2  # the scale's 1
            matrices = self._matrices(size)
            cells = np.take(points, self.judgment_cells, axis=-1)
            np.take(self.scale_values, cells, out=matrices.reshape(cells.shape), mode="clip")
            # Built reciprocal and on the scale: no validation needed.
            weights, _ = _ahp_arrays(matrices, self.ahp_weighting, with_ratios=False)
            attribute[:, self.ahp_experts] = weights
        return attribute[..., self.attribute_of] * self.shares

    def influence_of(self, seed: int, block: int, size: int) -> np.ndarray:
        """(size, k) stationary distributions of the sampled peer weights.

        Up to 200 experts the block is one stream (``peer_stream_samples``)
        and its chains one batch. Beyond, each stream of the block draws
        from its own generator, and as many samples' chains as the memory
        budget holds (whole streams, at least one) are solved at a time,
        in place: the samples are those of any other budget."""
        k = len(self.peer_weights)
        if not self.spec.peer_weights or k == 1:
            return np.broadcast_to(self.influence, (size, k))
        alpha = self.spec.peer_concentration * self.peer_weights
        stream = peer_stream_samples(k)
        if stream >= size:
            rng = np.random.default_rng([seed, block, _PEERS])
            return _stationary_batch(self._dirichlet("peers", alpha, size).draw(rng), self.influence)
        sampler = self._dirichlet("peers", alpha, stream)
        chains = self._peer_chains(k, stream, size)
        influence = np.empty((size, k))
        held = stream if chains is None else len(chains)
        for first in range(0, size, held):
            count = min(held, size - first)
            batch = None if chains is None else chains[: -(-count // stream) * stream]
            for position in range(0, count, stream):
                rng = np.random.default_rng([seed, block, _PEERS, (first + position) // stream])
                drawn = sampler.draw(rng, None if batch is None else batch[position : position + stream])
            batch = drawn if batch is None else batch
            influence[first : first + count] = _stationary_batch(batch, self.influence, each_alone=True)[:count]
        return influence

    def _peer_chains(self, k: int, stream: int, size: int) -> np.ndarray | None:
        """The reused (samples, k, k) stack of the chains solved at once:
        whole streams, as many as the memory budget holds beside one
        stream's sampler; None when that is one stream (its sampler's buffer
        is the stack)."""
        sampler_bytes = (_Dirichlet.BYTES_PER_DRAW * stream + 3 * 8) * k * k
        streams = max(1, (self.memory_budget - sampler_bytes) // (8 * k * k * stream))
        held = min(-(-size // stream), streams) * stream
        if held <= stream:
            return None
        if self._chains is None or len(self._chains) != held:
            self._chains = np.empty((held, k, k))
        return self._chains

    def cef(self, seed: int, block: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(CEF (size, m), consensus metric weights (size, n)) of a block."""
        W = self.metric_weights(seed, block, size)
        influence = self.influence_of(seed, block, size)
        a = np.einsum("sk,skn->sn", influence, W)
        a /= a.sum(axis=-1, keepdims=True)
        m, n = self.measurements.shape
        if not self.scores_vary:
            if self.spec.peer_weights:
                # Into a buffer kept from block to block (size x m n, 5 MB at
                # 1,000 candidates x 20 metrics: a fresh array each block
                # costs its page faults).
                if self._scores_buffer is None or len(self._scores_buffer) != size:
                    self._scores_buffer = np.empty((size, m * n), dtype=np.float32)
                g = np.matmul(influence.astype(np.float32), self.individual, out=self._scores_buffer)
                weighted = np.matmul(g.reshape(size, m, n).astype(np.float64), a[:, :, None])[..., 0]
                if len(self.tied):
                    tied = (influence @ self.tied_individual).reshape(size, len(self.tied), n)
                    weighted[:, self.tied] = np.matmul(tied, a[:, :, None])[..., 0]
            else:
                weighted = a @ np.asarray(self.base.group_scores).T
            return np.where(self.vetoed, 0.0, weighted), a
        lower = np.broadcast_to(self.lower, (size, *self.lower.shape))
        upper = np.broadcast_to(self.upper, (size, *self.upper.shape))
        if self.spec.range_fraction > 0:
            rng = np.random.default_rng([seed, block, _RANGES])
            width = np.abs(self.upper - self.lower) * self.spec.range_fraction
            moves = rng.uniform(-1.0, 1.0, size=(2, size, *self.lower.shape))
            lower = self.lower + moves[0] * width
            upper = self.upper + moves[1] * width
        measured = np.broadcast_to(self.measurements, (size, m, n))
        if self.spec.measurements and self.standard_errors.any():
            rng = np.random.default_rng([seed, block, _MEASUREMENTS])
            measured = self.measurements + self.standard_errors * _normals(rng, size * m * n).reshape(size, m, n)
        if self.bootstrap:
            measured = self.bootstrapped(seed, block, size, measured)
        # The whole block at once: every step is per sample and metric, as
        # one evaluate's, so each sample's CEF is what evaluate gives.
        influence = np.ascontiguousarray(influence)
        g = core._group_scores_batch(influence, lower, upper, measured, self.measured_order)
        own = self.own_values(seed, block, size)
        own_scores = None
        if own is not None:
            # The elicited metrics scored on each expert's own value, as the run's (core.evaluate).
            own_scores = core._own_scores(lower, upper, own)
            g = core.with_own_scores(g, influence, own_scores, own.columns)
        vetoed = core.vetoed_with(lower, upper, measured, own, own_scores)
        return np.where(vetoed, 0.0, (g * a[:, None, :]).sum(axis=-1)), a


def _normals(
    rng: np.random.Generator, count: int, out: np.ndarray | None = None, uniform: np.ndarray | None = None
) -> np.ndarray:
    """``count`` standard normal draws (float64, into ``out`` if given, with
    ``uniform`` a float32 buffer of the same even length) by
    the Box-Muller transform in single precision: three times faster than
    numpy's ziggurat here, for the Dirichlet draws that dominate a sample.
    Their tails stop at ``sqrt(-2 log 2^-24)`` = 5.77 (a probability of
    8e-9 beyond) and each is rounded to 6e-8 relative: nothing a Monte
    Carlo of perturbed weights can see, so the gammas below are exact to
    that precision."""
    half = (count + 1) // 2
    if uniform is None or len(uniform) != 2 * half:
        uniform = np.empty(2 * half, dtype=np.float32)
    rng.random(2 * half, dtype=np.float32, out=uniform)
    normals = np.empty(2 * half) if out is None or len(out) != 2 * half else out
    for first in range(0, half, _TILE):  # elementwise: tiles change no value
        last = min(half, first + _TILE)
        radius = uniform[first:last]
        np.subtract(np.float32(1.0), radius, out=radius)  # (0, 1]: log is finite
        np.log(radius, out=radius)
        radius *= np.float32(-2.0)
        np.sqrt(radius, out=radius)
        angle = uniform[half + first : half + last]
        angle *= np.float32(2.0 * np.pi)
        np.multiply(radius, np.cos(angle), out=normals[first:last])
        np.multiply(radius, np.sin(angle), out=normals[half + first : half + last])
    return normals[:count]


#: Entries per tile of the samplers' elementwise work: a tile's dozen
#: passes stay in the cache (over a 1,000-expert block's 2 million peer
#: weights at once, each pass went to memory: 2.5 times slower).
_TILE = 1 << 15


def _tiles(rows: int, columns: int) -> list[tuple[int | slice, slice]]:
    """``(rows, columns)`` cut into tiles of about ``_TILE`` entries: parts
    of a row when a row holds more, else whole rows."""
    if columns >= _TILE:
        return [(row, slice(first, first + _TILE)) for row in range(rows) for first in range(0, columns, _TILE)]
    step = max(1, _TILE // max(1, columns))
    return [(slice(first, first + step), slice(None)) for first in range(0, rows, step)]


class _Dirichlet:
    """Draws of ``Dirichlet(alpha_r)`` for every row ``r`` of ``alpha``,
    ``size`` (the block, or a stream of it) at a time: normalised
    Gamma(alpha) draws, each entry kept positive.

    The gammas are drawn by Marsaglia & Tsang's method (2000, ACM TOMS 26,
    "A simple method for generating gamma variables"), vectorised over the
    whole block: one array of normals (:func:`_normals`) and one of
    uniforms, the method's acceptance test in double precision, and another
    round for the few rejected (about 3 % at the shapes of a concentration
    of 100). A shape below 1 draws Gamma(alpha + 1) and multiplies it by
    ``U^(1/alpha)`` (their section 6). Numpy's ``standard_gamma`` takes the
    same method one entry at a time with its ziggurat normals, and at 10,000
    entries per sample (100 experts' peer weights) that cost most of a
    sample. What depends on ``alpha`` only is computed once, for ``alpha``'s
    entries (not for every draw of them), and the first round works in
    buffers kept from block to block: ``BYTES_PER_DRAW`` bytes a drawn
    entry."""

    #: The buffers' bytes per drawn entry: four of float64, one of float32
    #: and, for shapes below 1, one more float64 (the boost).
    BYTES_PER_DRAW = 4 * 8 + 4 + 8

    def __init__(self, alpha: np.ndarray, size: int):
        alpha = np.asarray(alpha, dtype=np.float64)
        self.shape = (size, *alpha.shape)
        flat = alpha.ravel()
        boosted = flat < 1.0
        self.d = flat + boosted - 1.0 / 3.0
        self.c = 1.0 / np.sqrt(9.0 * self.d)
        # The entries of alpha below 1, in each draw of the block (all of them: no gather)
        self.boosted = slice(None) if boosted.all() else np.flatnonzero(boosted)
        with np.errstate(divide="ignore"):
            self.inverse_alpha = 1.0 / flat[self.boosted]  # inf for a shape 0: U^inf = 0, as numpy's gamma(0)
        count = size * flat.size
        self.buffers = np.empty((4, count + count % 2))  # normals (even length), cube, bound, log U
        self.uniform = np.empty(count + count % 2, dtype=np.float32)
        self.boost = np.empty((size, len(self.inverse_alpha)))

    def _round(self, rng: np.random.Generator, pending: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(d v^3, accepted) for every entry (``pending`` None, in the
        buffers, shaped (size, alpha entries) so that ``d`` and ``c``
        broadcast) or for the entries ``pending`` (flat indices)."""
        if pending is None:
            size, entries = self.shape[0], self.d.size
            count = size * entries
            x = _normals(rng, count, self.buffers[0], self.uniform).reshape(size, entries)
            cube, bound, log_u = (b[:count].reshape(size, entries) for b in self.buffers[1:])
            rng.random(count, out=log_u.reshape(-1))
            accepted = np.empty((size, entries), dtype=bool)
            for rows, columns in _tiles(size, entries):
                tile = (rows, columns)
                _gamma_test(x[tile], self.d[columns], self.c[columns], cube[tile], bound[tile], log_u[tile])
                np.less(log_u[tile], bound[tile], out=accepted[tile])
            return cube.reshape(-1), accepted.reshape(-1)
        entry = pending % self.d.size
        count = len(pending)
        normals, cube, bound, log_u = np.empty((4, count))
        x = _normals(rng, count, normals)
        rng.random(count, out=log_u)
        _gamma_test(x, self.d[entry], self.c[entry], cube, bound, log_u)
        return cube, log_u < bound

    def _gammas(self, rng: np.random.Generator) -> np.ndarray:
        """The block's gammas, in a buffer the next call overwrites."""
        with np.errstate(invalid="ignore", divide="ignore"):
            draws, accepted = self._round(rng, None)
            pending = np.flatnonzero(~accepted)
            while len(pending):
                values, accepted = self._round(rng, pending)
                draws[pending[accepted]] = values[accepted]
                pending = pending[~accepted]
            if self.boost.size:
                boost = rng.random(self.boost.size, out=self.boost.reshape(-1)).reshape(self.boost.shape)
                gammas = draws.reshape(self.shape[0], -1)
                for rows, columns in _tiles(*boost.shape):
                    part = boost[rows, columns]
                    np.log(part, out=part)
                    part *= self.inverse_alpha[columns]
                    np.exp(part, out=part)
                    if isinstance(self.boosted, slice):
                        gammas[rows, columns] *= part
                    else:
                        gammas[rows, self.boosted[columns]] *= part
        return draws.reshape(self.shape)

    def draw(self, rng: np.random.Generator, out: np.ndarray | None = None) -> np.ndarray:
        """(size, *alpha.shape), each row summing to 1: into ``out`` if
        given, else into a buffer the next draw overwrites."""
        if out is None:
            out = self.buffers[1, : self.d.size * self.shape[0]].reshape(self.shape)
        draws = np.maximum(self._gammas(rng), _TINY, out=out)
        draws /= draws.sum(axis=-1, keepdims=True)
        return draws


def _gamma_test(
    x: np.ndarray, d: np.ndarray, c: np.ndarray, cube: np.ndarray, bound: np.ndarray, log_u: np.ndarray
) -> None:
    """Marsaglia & Tsang's step, elementwise (``d`` and ``c`` broadcast):
    ``cube`` = d v^3 with v = 1 + c x, and accepted where ``log_u`` (U's
    log, taken here) < ``bound``; ``x`` is overwritten."""
    np.multiply(c, x, out=cube)
    cube += 1.0
    np.multiply(cube, cube, out=bound)
    cube *= bound  # v^3
    # log U < x^2/2 + d (1 - v^3 + log v^3); v <= 0 gives NaN or -inf on
    # the right, so such a draw is rejected, as it must be.
    np.log(cube, out=bound)
    bound -= cube
    bound += 1.0
    bound *= d
    x *= x
    x *= 0.5
    bound += x
    np.log(log_u, out=log_u)
    cube *= d


#: Power steps tried per block before the samples not yet converged are solved.
_POWER_STEPS = 64


def _stationary_batch(chains: np.ndarray, start: np.ndarray, *, each_alone: bool = False) -> np.ndarray:
    """Stationary distributions (S, k) of row-stochastic positive (S, k, k),
    which are overwritten (no copy of the stack is made).

    Power iteration from ``start`` (the run's ``pi``, close to every
    sample's), batched, on the lazy chains ``(V - alpha I) / (1 - alpha)``
    (``alpha`` each chain's smallest diagonal entry: the same ``pi``, faster
    mixing; formed in place), until a step moves no entry by more than
    1e-15; a chain not there within ``_POWER_STEPS`` steps is solved
    directly, as ``engine.core`` solves ``pi V = pi``, ``sum pi = 1`` (for
    its lazy chain, which has the same ``pi``).

    ``each_alone``: each chain steps until *its* step moves none of its
    entries by more than 1e-15 and is then left as it is while the others
    go on, so that its distribution is a function of that chain alone,
    whatever else is in the batch (beyond 200 experts, where the memory
    budget decides how many samples a batch holds). Otherwise the whole
    batch steps until every chain is there (a block of up to 200 experts,
    always one batch: the samples drawn before batches were budgeted)."""
    size, k, _ = chains.shape
    diagonal = np.arange(k)
    alpha = chains[:, diagonal, diagonal].min(axis=-1)
    lazy = chains
    lazy[:, diagonal, diagonal] -= alpha[:, None]
    lazy /= (1.0 - alpha)[:, None, None]
    influence = np.broadcast_to(start, (size, k)).copy()[:, None, :]
    done = np.zeros(size, dtype=bool)
    for _ in range(_POWER_STEPS):
        following = np.matmul(influence, lazy)
        following /= following.sum(axis=-1, keepdims=True)
        still = np.abs(following - influence).max(axis=(1, 2)) <= 1e-15
        if each_alone:
            going = np.flatnonzero(~done)
            influence[going] = following[going]
            done[going] = still[going]
        else:
            influence, done = following, still
        if done.all():
            break
    influence = influence[:, 0, :]
    slow = np.flatnonzero(~done)
    if len(slow):
        system = np.swapaxes(lazy[slow], -1, -2).copy()
        system[:, diagonal, diagonal] -= 1.0
        system[:, -1, :] = 1.0
        right = np.zeros((len(slow), k, 1))
        right[:, -1, 0] = 1.0
        influence[slow] = np.linalg.solve(system, right)[..., 0]
    influence = np.clip(influence, 0.0, None)
    return influence / influence.sum(axis=-1, keepdims=True)


def _tied_candidates(cef: np.ndarray) -> np.ndarray:
    """The candidates whose CEF is within TIE of another's (NaN: left out),
    in index order."""
    order = np.argsort(cef, kind="stable")
    ordered = cef[order]
    close = ~beats(ordered[1:], ordered[:-1]) & ~np.isnan(ordered[1:]) & ~np.isnan(ordered[:-1])
    near = np.zeros(len(cef), dtype=bool)
    near[:-1] |= close
    near[1:] |= close
    return np.sort(order[near])


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def monte_carlo_chunk(
    inputs: MonteCarloInputs,
    spec: SamplingSpec,
    seed: int,
    start: int,
    count: int,
    *,
    memory_budget: int = MEMORY_BUDGET,
) -> Counts:
    """Samples ``start .. start + count - 1`` of a seeded Monte Carlo
    analysis, counted (docs/method.md, "Robustness"; SMAA-2, Lahdelma &
    Salminen 2001).

    Each sample draws the inputs ``spec`` names, evaluates every candidate
    (vectorised over the samples of a block: one batched solve for the
    peer weights' stationary distributions, one product for the group
    scores when ranges and measurements are fixed) and counts each
    candidate's competition rank, the pairwise wins and, where it ranks
    first, the consensus weights. Sample ``i`` draws from generators seeded
    by ``(seed, i // SAMPLE_BLOCK, part)``, so the counts of any split into
    chunks, merged (:func:`merge`), equal those of one chunk, to the bit.
    Beyond 200 experts the peer weights of a block are drawn in streams of
    its samples (:func:`peer_stream_samples`) and held ``memory_budget``
    bytes at a time: neither changes a sample.

    ``monte_carlo_counts(monte_carlo_prepare(inputs, spec), ...)``: a
    caller computing several chunks of one analysis keeps the prepared
    inputs and calls :func:`monte_carlo_counts` for each.
    """
    return monte_carlo_counts(monte_carlo_prepare(inputs, spec, memory_budget=memory_budget), seed, start, count)


def monte_carlo_prepare(
    inputs: MonteCarloInputs, spec: SamplingSpec, *, memory_budget: int = MEMORY_BUDGET
) -> _Prepared:
    """A Monte Carlo analysis's inputs validated, its run evaluated and what
    every block reuses: what :func:`monte_carlo_counts` computes chunks of."""
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, int | np.integer) or memory_budget < 1:
        raise ValueError(f"memory_budget must be a positive number of bytes, got {memory_budget!r}")
    return _Prepared(inputs, spec, memory_budget=int(memory_budget))


def monte_carlo_counts(prepared: _Prepared, seed: int, start: int, count: int) -> Counts:
    """Samples ``start .. start + count - 1`` of the analysis ``prepared``
    (:func:`monte_carlo_prepare`) seeded ``seed``, counted: what
    :func:`monte_carlo_chunk` returns for its inputs."""
    seed = _check_seed(seed)
    if isinstance(start, bool) or not isinstance(start, int | np.integer) or start < 0:
        raise ValueError(f"start must be a non-negative integer, got {start!r}")
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
        raise ValueError(f"count must be a non-negative integer, got {count!r}")
    m, n = prepared.measurements.shape
    chosen = prepared.pairwise_candidates
    ranks_total = np.zeros((m, m), dtype=np.int64)
    pairwise_total = np.zeros((len(chosen), len(chosen)), dtype=np.int64)
    central_total = np.zeros((m, n), dtype=np.int64)
    end = start + count
    for block in range(start // SAMPLE_BLOCK, (end + SAMPLE_BLOCK - 1) // SAMPLE_BLOCK if count else 0):
        first = block * SAMPLE_BLOCK
        cef, a = prepared.cef(seed, block, SAMPLE_BLOCK)
        keep = slice(max(start, first) - first, min(end, first + SAMPLE_BLOCK) - first)
        cef, a = cef[keep], a[keep]
        ranks, chained = _competition_ranks(cef)
        ranks_total += rank_counts(ranks)
        if len(chosen):
            pairwise_total += _pairwise_counts(ranks[:, chosen], cef[:, chosen], chained)
        fixed = np.rint(np.ldexp(a, CENTRAL_WEIGHT_BITS)).astype(np.int64)
        central_total += (ranks == 1).T.astype(np.int64) @ fixed
    return Counts(
        samples=int(count),
        ranks=ranks_total,
        pairwise=pairwise_total,
        pairwise_candidates=chosen.copy(),
        central_weights=central_total,
    )


def merge(counts_list: list[Counts]) -> Counts:
    """The counts of several chunks of one analysis, added (exact)."""
    if not counts_list:
        raise ValueError("merge needs at least one Counts")
    first = counts_list[0]
    for other in counts_list[1:]:
        if (
            other.ranks.shape != first.ranks.shape
            or other.central_weights.shape != first.central_weights.shape
            or not np.array_equal(other.pairwise_candidates, first.pairwise_candidates)
        ):
            raise ValueError("merge needs counts of the same analysis (same candidates, metrics and pairwise set)")
    # Added in place, one chunk at a time (not np.sum of a stacked list: at
    # 1,000 candidates each chunk's ranks are 1,000 x 1,000, and a stack of
    # 40 chunks would be 320 MB).
    ranks = np.array(first.ranks, dtype=np.int64)
    pairwise = np.array(first.pairwise, dtype=np.int64)
    central_weights = np.array(first.central_weights, dtype=np.int64)
    for other in counts_list[1:]:
        ranks += other.ranks
        pairwise += other.pairwise
        central_weights += other.central_weights
    return Counts(
        samples=sum(c.samples for c in counts_list),
        ranks=ranks,
        pairwise=pairwise,
        pairwise_candidates=first.pairwise_candidates.copy(),
        central_weights=central_weights,
    )


#: The normal quantile of the Wilson score intervals: 95 % two-sided,
#: ``float(scipy.stats.norm.ppf(0.975))`` written out (scipy is imported on
#: first use; tests/test_lean_setup.py checks the value).
WILSON_Z = 1.959963984540054


@dataclass(frozen=True, eq=False)
class Summary:
    """Probabilities from merged counts, each with its Monte Carlo standard
    error ``sqrt(p (1 - p) / S)`` (binomial) and its 95 % Wilson score
    interval (:func:`wilson_interval`: where the standard error says "0 ± 0"
    after no success, the interval says how high it may still be).

    Attributes
    ----------
    samples : int
    rank_acceptability, rank_acceptability_se : ndarray (m, m)
        [c, r]: the probability that candidate c has rank r + 1.
    rank_acceptability_low, rank_acceptability_high : ndarray (m, m)
        Its Wilson interval.
    best, best_se, best_low, best_high : ndarray (m,)
        The probability that c is ranked first (column 0 of the above).
    pairwise, pairwise_se, pairwise_low, pairwise_high : ndarray (p, p)
        [c, d]: the probability that ``CEF_c > CEF_d + TIE`` among
        ``pairwise_candidates``.
    pairwise_candidates : ndarray (p,)
    central_weights : ndarray (m, n)
        The mean consensus metric weights over the samples in which c is
        ranked first (SMAA-2's central weight vector); NaN rows for a
        candidate never first.
    """

    samples: int
    rank_acceptability: np.ndarray
    rank_acceptability_se: np.ndarray
    rank_acceptability_low: np.ndarray
    rank_acceptability_high: np.ndarray
    best: np.ndarray
    best_se: np.ndarray
    best_low: np.ndarray
    best_high: np.ndarray
    pairwise: np.ndarray
    pairwise_se: np.ndarray
    pairwise_low: np.ndarray
    pairwise_high: np.ndarray
    pairwise_candidates: np.ndarray
    central_weights: np.ndarray


def _binomial_se(probability: np.ndarray, samples: int) -> np.ndarray:
    return np.sqrt(probability * (1.0 - probability) / samples)


def wilson_interval(successes: ArrayLike, samples: int, z: float = WILSON_Z) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval (E. B. Wilson, JASA 22, 1927) of a binomial
    probability from ``successes`` of ``samples`` (integers, elementwise):
    ``(p + z²/2S ± z sqrt(p (1 - p)/S + z²/4S²)) / (1 + z²/S)`` with
    ``p = successes / S``, 95 % two-sided at the default ``z``. Unlike
    ``p ± z SE`` it stays inside [0, 1] and is not empty at 0 or S
    successes: 0 of 1,000 gives [0, 0.00383]."""
    if isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    count = np.asarray(successes, dtype=np.float64)
    if ((count < 0) | (count > samples) | (count != np.round(count))).any():
        raise ValueError(f"successes must be integers from 0 to {samples}")
    p = count / samples
    z2 = z * z
    centre = (p + z2 / (2 * samples)) / (1 + z2 / samples)
    half = z / (1 + z2 / samples) * np.sqrt(p * (1 - p) / samples + z2 / (4 * samples * samples))
    # At 0 and S successes the ends are exactly 0 and 1 (the formula's
    # rounding would leave them a few ulps off).
    low = np.where(count == 0, 0.0, np.clip(centre - half, 0.0, 1.0))
    high = np.where(count == samples, 1.0, np.clip(centre + half, 0.0, 1.0))
    return low, high


def summary(counts: Counts) -> Summary:
    """Rank acceptability indices, probability of being best, pairwise
    winning indices and central weights, with standard errors and Wilson
    intervals."""
    if counts.samples < 1:
        raise ValueError("summary needs at least one sample")
    S = counts.samples
    acceptability = counts.ranks / S
    pairwise = counts.pairwise / S
    best = counts.best
    with np.errstate(invalid="ignore", divide="ignore"):
        central = np.ldexp(counts.central_weights.astype(np.float64), -CENTRAL_WEIGHT_BITS) / best[:, None]
    central = np.where(best[:, None] > 0, central, np.nan)
    rank_low, rank_high = wilson_interval(counts.ranks, S)
    pairwise_low, pairwise_high = wilson_interval(counts.pairwise, S)
    return Summary(
        samples=S,
        rank_acceptability=acceptability,
        rank_acceptability_se=_binomial_se(acceptability, S),
        rank_acceptability_low=rank_low,
        rank_acceptability_high=rank_high,
        best=acceptability[:, 0],
        best_se=_binomial_se(acceptability[:, 0], S),
        best_low=rank_low[:, 0],
        best_high=rank_high[:, 0],
        pairwise=pairwise,
        pairwise_se=_binomial_se(pairwise, S),
        pairwise_low=pairwise_low,
        pairwise_high=pairwise_high,
        pairwise_candidates=counts.pairwise_candidates.copy(),
        central_weights=central,
    )
