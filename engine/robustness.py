"""How sure is a ranking? Weight sensitivity, what-if, leave-one-expert-out
and rank probabilities (METHOD.md section 8; docs/method.md, "Robustness").

Everything here is pure NumPy (no Django) and works on arrays a run's
snapshot gives (``engine.snapshot.snapshot_arrays``) or on the results'
consensus weights ``a`` (n,), group scores ``g`` (m, n) and veto mask
``vetoed`` (m,). A candidate's CEF is ``0`` when vetoed, else
``sum_j a_j g_cj``; ranks are competition ranks, ``1 + #{d : CEF_d > CEF_c}``
(equal scores share a rank).

The three functions METHOD.md 8 binds, exactly as defined there:

* :func:`weight_stability` - per group of metrics (default: each metric),
  the closed intervals of its weight ``t`` in [0, 1] (the others rescaled
  proportionally) on which the ranking, and separately the winner, stays;
* :func:`rank_acceptability` - from sampled CEFs (S, m), the share of
  samples in which each candidate takes each rank (SMAA-2's rank
  acceptability indices);
* :func:`pairwise_winning` - the share of samples in which candidate ``c``
  scores strictly above ``d``.

Around them, for the pages: :func:`sensitivity_lines` (each CEF as an affine
function of a group's weight), :func:`crossings` (where two lines cross,
who overtakes whom), :func:`fragility` and :func:`most_fragile`,
:func:`what_if` (the ranking for given weights) with
:func:`metric_weights_from_attributes` and :func:`metric_shares`.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import kendalltau

from . import core

__all__ = [
    "Crossing",
    "LeaveOneOut",
    "SensitivityLines",
    "WeightStability",
    "WhatIf",
    "competition_ranks",
    "crossings",
    "fragility",
    "leave_one_out",
    "metric_shares",
    "metric_weights_from_attributes",
    "most_fragile",
    "pairwise_winning",
    "rank_acceptability",
    "sensitivity_lines",
    "weight_stability",
    "what_if",
]

# Two lines tied at a group's current weight count as identical (the same
# line, so never untied) when their slopes differ by at most this, relative
# to the largest slope: below it the difference is the rounding of the sums.
_SAME_SLOPE = 1e-12

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
        listed = [np.asarray(group) for group in groups]  # type: ignore[attr-defined]
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


def _lines(
    weights: np.ndarray, scores: np.ndarray, vetoed: np.ndarray, groups: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(share (G,), intercept (G, m), slope (G, m)) of METHOD.md 8's
    reweighting: in-group weights ``a_j t / s_k``, the others
    ``a_j (1 - t) / (1 - s_k)`` (equal splits when ``s_k`` is 0 or 1)."""
    n = len(weights)
    members = np.zeros((len(groups), n))
    for k, group in enumerate(groups):
        members[k, group] = 1.0
    share = members @ weights
    inside = scores @ (members * weights).T  # (m, G): sum_{j in S_k} a_j g_cj
    outside = scores @ ((1.0 - members) * weights).T
    size_inside = members.sum(axis=1)
    size_outside = n - size_inside
    mean_inside = scores @ members.T / size_inside
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_outside = np.where(size_outside > 0, scores @ (1.0 - members).T / np.maximum(size_outside, 1), 0.0)
        per_unit_inside = np.where(share > 0, inside / share, mean_inside)  # CEF at t = 1
        per_unit_outside = np.where((share < 1) & (size_outside > 0), outside / (1.0 - share), mean_outside)  # t = 0
    intercept = np.where(vetoed[:, None], 0.0, per_unit_outside).T
    slope = np.where(vetoed[:, None], 0.0, per_unit_inside - per_unit_outside).T
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


def _same_slope(difference: np.ndarray, slope: np.ndarray) -> np.ndarray:
    scale = np.abs(slope).max(axis=-1, keepdims=True) if slope.size else np.zeros(1)
    return np.abs(difference) <= _SAME_SLOPE * np.maximum(scale, 1.0)


def _bounds(
    lead: np.ndarray, slope_gap: np.ndarray, share: np.ndarray, moving: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The interval of t around s on which ``lead + slope_gap (t - s) >= 0``
    for every pair (last axis), intersected with [0, 1].

    ``lead`` (>= 0) is each pair's CEF difference at s and ``moving``
    marks the pairs whose lines differ in slope (the others never cross).
    A tied pair whose lines differ is untied on both sides of s, which pins
    the interval to ``[s, s]``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        # Measured from s, so a crossing is never placed on the wrong side.
        distance = lead / np.abs(slope_gap)
    falling = (slope_gap < 0) & moving
    rising = (slope_gap > 0) & moving
    share = np.asarray(share)
    high = np.minimum(1.0, share + np.where(falling, distance, np.inf).min(axis=-1, initial=np.inf))
    low = np.maximum(0.0, share - np.where(rising, distance, np.inf).min(axis=-1, initial=np.inf))
    pinned = ((lead == 0) & moving).any(axis=-1)
    high = np.where(pinned, share, np.maximum(high, share))
    low = np.where(pinned, share, np.minimum(low, share))
    return low, high


def weight_stability(a: ArrayLike, g: ArrayLike, vetoed: ArrayLike, *, groups: object = None) -> WeightStability:
    """Stability intervals of each group's weight (METHOD.md 8, binding).

    For group ``k`` with share ``s_k = sum_{j in S_k} a_j`` the weights at
    ``t`` in [0, 1] are ``a_j t / s_k`` inside the group (an equal split if
    ``s_k = 0``) and ``a_j (1 - t) / (1 - s_k)`` outside it (an equal split
    if ``s_k = 1``), so each unvetoed CEF is affine in ``t``
    (:func:`sensitivity_lines`) and a vetoed one stays 0.

    * ranking interval: the closed interval around ``s_k`` on which no pair
      ordered ``CEF_c > CEF_d`` at ``s_k`` reverses, and no pair tied at
      ``s_k`` whose lines differ is untied (then it is ``[s_k, s_k]``);
      pairs may tie at its ends. By continuity the first pair to cross
      going away from ``s_k`` is adjacent in the order at ``s_k``, so only
      adjacent pairs are checked: ``O(m log m + G m)`` after the
      ``O(G m n)`` lines.
    * winner interval: the same for every candidate ranked first at ``s_k``
      against every other candidate.

    Ties are exact equality of the CEFs computed as ``engine.core`` computes
    them (so they match the run's competition ranks); two tied lines are
    the same line when their slopes differ by at most 1e-12 (relative).

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
    share, _, slope = _lines(weights, scores, mask, _groups(groups, len(weights)))
    cef = _cef(weights, scores, mask)
    m = len(cef)
    if m < 2:
        whole = (np.zeros_like(share), np.ones_like(share))
        return WeightStability(share, *whole, *whole)
    # Ranking: adjacent pairs of the order at s (ties broken by slope, so a
    # tie's lines sit next to each other whatever their indices).
    order = np.lexsort((slope[0], -cef))
    sorted_cef = cef[order]
    lead = sorted_cef[:-1] - sorted_cef[1:]  # >= 0
    slope_gap = slope[:, order[:-1]] - slope[:, order[1:]]  # (G, m - 1)
    ranking_low, ranking_high = _bounds(lead, slope_gap, share, ~_same_slope(slope_gap, slope))
    # Winner: each first-ranked candidate against every other candidate.
    top = np.flatnonzero(cef == cef.max())
    winner_lead = cef[top[0]] - cef  # (m,), the same for every tied winner
    winner_low, winner_high = share.copy(), share.copy()
    first = True
    for best in top:
        others = np.arange(m) != best
        gap = slope[:, [best]] - slope[:, others]
        low, high = _bounds(winner_lead[others], gap, share, ~_same_slope(gap, slope))
        winner_low = low if first else np.maximum(winner_low, low)
        winner_high = high if first else np.minimum(winner_high, high)
        first = False
    return WeightStability(
        share=share,
        ranking_low=ranking_low,
        ranking_high=ranking_high,
        winner_low=winner_low,
        winner_high=winner_high,
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
    crossings per group; default all. Identical lines (the same intercept
    and slope, e.g. two vetoed candidates) never cross; lines tied at the
    current weight with different slopes cross there.
    """
    weights, scores, mask = _problem(a, g, vetoed)
    share, intercept, slope = _lines(weights, scores, mask, _groups(groups, len(weights)))
    cef = _cef(weights, scores, mask)
    chosen = np.arange(len(cef)) if candidates is None else np.unique(np.asarray(candidates, dtype=np.intp))
    if len(chosen) and (chosen.min() < 0 or chosen.max() >= len(cef)):
        raise ValueError(f"candidates must be indices in 0..{len(cef) - 1}")
    first, second = np.triu_indices(len(chosen), k=1)
    c, d = chosen[first], chosen[second]
    lead = cef[c] - cef[d]  # difference at s
    result: list[list[Crossing]] = []
    for k in range(len(share)):
        slope_gap = slope[k, c] - slope[k, d]
        moving = ~_same_slope(slope_gap, slope[k])
        with np.errstate(divide="ignore", invalid="ignore"):
            t = share[k] - lead / slope_gap
        inside = moving & (t >= 0.0) & (t <= 1.0)
        found = []
        for t_cross, c_index, d_index, gap in zip(
            t[inside].tolist(), c[inside].tolist(), d[inside].tolist(), slope_gap[inside].tolist(), strict=True
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


def competition_ranks(cef: ArrayLike) -> np.ndarray:
    """Competition ranks ``1 + #{d : CEF_d > CEF_c}`` of one CEF vector
    (m,) or of each row of a stack (S, m), vectorised."""
    values = np.asarray(cef, dtype=np.float64)
    stack = np.atleast_2d(values)
    samples, m = stack.shape
    order = np.argsort(-stack, axis=1, kind="stable")
    ordered = np.take_along_axis(stack, order, axis=1)
    positions = np.broadcast_to(np.arange(m), (samples, m))
    starts = np.ones((samples, m), dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    first_of_tie = np.maximum.accumulate(np.where(starts, positions, 0), axis=1)
    ranks = np.empty((samples, m), dtype=np.int64)
    np.put_along_axis(ranks, order, first_of_tie + 1, axis=1)
    return ranks if values.ndim == 2 else ranks[0]


@dataclass(frozen=True, eq=False)
class WhatIf:
    """Result of :func:`what_if`: ``weights`` (n,) as used (renormalised),
    ``cef`` and ``weighted_scores`` (m,), competition ``ranks`` (m,) and
    ``order`` (m,), candidates best first (ties by the higher weighted
    score, then index, as ``engine.results.competition_ranks`` lists them)."""

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
    order = np.lexsort((np.arange(len(cef)), -weighted, -cef))
    return WhatIf(weights=weights, weighted_scores=weighted, cef=cef, ranks=competition_ranks(cef), order=order)


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
    attribute = _float_array(attribute_weights, "attribute_weights", 1)
    if len(attribute) and attribute.min() < 0:
        raise ValueError(f"attribute_weights must be non-negative; entry {int(np.argmin(attribute))} is not")
    share = _float_array(shares, "shares", 1)
    if len(share) and share.min() < 0:
        raise ValueError(f"shares must be non-negative; entry {int(np.argmin(share))} is not")
    index = _attribute_index(attribute_of, len(share), len(attribute))
    share_totals = np.bincount(index, weights=share, minlength=len(attribute))
    if (share_totals[index] <= 0).any():
        raise ValueError("every attribute's metric shares must have a positive sum")
    weights = attribute[index] * share / share_totals[index]
    total = weights.sum()
    if not total > 0:
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


def pairwise_counts(ranks: np.ndarray, *, block: int = 1 << 22) -> np.ndarray:
    """(m, m) integer counts: entry [c, d] the number of rows of ``ranks``
    (S, m) with rank_c < rank_d, i.e. CEF_c > CEF_d (competition ranks)."""
    samples, m = ranks.shape
    counts = np.zeros((m, m), dtype=np.int64)
    step = max(1, block // max(m * m, 1))
    small = ranks.astype(np.int32)
    for first in range(0, samples, step):
        part = small[first : first + step]
        counts += (part[:, :, None] < part[:, None, :]).sum(axis=0, dtype=np.int64)
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
    ``CEF_c > CEF_d`` (strictly; diagonal 0), so ``p[c, d] + p[d, c]`` plus
    the share of ties is 1.
    """
    values = _samples(cef)
    return pairwise_counts(competition_ranks(values)) / len(values)


# --------------------------------------------------------------------------
# Leave one expert out
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LeaveOneOut:
    """Result of :func:`leave_one_out`; row ``i`` of each (k, ...) array is
    the run without expert ``i``.

    Attributes
    ----------
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
        Kendall's tau-b between the full CEFs and the CEFs without the
        expert (ties counted as tau-b counts them); 1.0 when the two
        rankings are identical, NaN when undefined otherwise (a ranking in
        which every candidate ties).
    """

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
    reduced = peer_weights[np.ix_(keep, keep)]
    return weights[keep], reduced / reduced.sum(axis=1, keepdims=True), lower[keep], upper[keep]


def leave_one_out(
    *,
    weights: ArrayLike,
    peer_weights: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    measurements: ArrayLike,
    tolerance: float = core.DEFAULT_TOLERANCE,
) -> LeaveOneOut:
    """The ranking without each expert in turn (docs/method.md, "Robustness").

    Same arguments as ``engine.core.evaluate`` (the arrays of
    ``engine.snapshot.snapshot_arrays``). For each expert ``i`` the engine
    runs on the study without them (:func:`without_expert`): their weights
    and ranges dropped, their row and column of the peer weights removed
    and the other rows renormalised, so their influence is shared out as
    the method shares it (the stationary distribution of the reduced
    ``V``); their vetoes go with them. Cost: ``k`` evaluations. Needs at
    least two experts.
    """
    W = np.asarray(weights, dtype=np.float64)
    V = np.asarray(peer_weights, dtype=np.float64)
    L = np.asarray(lower, dtype=np.float64)
    U = np.asarray(upper, dtype=np.float64)
    M = np.asarray(measurements, dtype=np.float64)
    full = core.evaluate(weights=W, peer_weights=V, lower=L, upper=U, measurements=M, tolerance=tolerance)
    k = W.shape[0]
    if k < 2:
        raise ValueError("leave-one-out needs at least two experts (weights has one row)")
    m = len(full.cef)
    full_ranks = competition_ranks(full.cef)
    full_top = full_ranks == 1
    cef = np.empty((k, m))
    ranks = np.empty((k, m), dtype=np.int64)
    order = np.empty((k, m), dtype=np.intp)
    changed = np.zeros(k, dtype=bool)
    tau = np.full(k, np.nan)
    # The same checks evaluate makes, once, before rows are dropped.
    V = core._validated_peer_weights(V, expected_experts=k)
    for expert in range(k):
        W_i, V_i, L_i, U_i = without_expert(expert, W, V, L, U)
        result = core.evaluate(weights=W_i, peer_weights=V_i, lower=L_i, upper=U_i, measurements=M, tolerance=tolerance)
        cef[expert] = result.cef
        ranks[expert] = competition_ranks(result.cef)
        order[expert] = np.lexsort((np.arange(m), -result.weighted_scores, -result.cef))
        changed[expert] = bool((ranks[expert] == 1).tolist() != full_top.tolist())
        if np.array_equal(ranks[expert], full_ranks):
            tau[expert] = 1.0
        elif m >= 2:
            tau[expert] = _kendall_tau_b(full.cef, result.cef)
    return LeaveOneOut(
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
    return float(kendalltau(first, second).statistic)
