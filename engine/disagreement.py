"""How far the experts lie apart: measures stored with every run's results
(docs/method.md section 6.4), so that a results page shows where the experts
disagree without computing anything on view.

* :func:`weight_spread`: per attribute or metric, the lowest, highest and
  mean weight the experts gave it and the standard deviation of their weights;
* :func:`veto_shares`: per candidate and metric, the share of the experts
  whose acceptable range vetoes the candidate on that metric;
* :func:`ahp_consensus`: the AHP group consensus indicator ``S*`` of AHP-OS
  (Goepel), one number in [0, 1] for a whole weight matrix, with
  :func:`consensus_wording`, its word scale.

Symbols as in ``engine.core``: ``k`` experts, ``n`` weighted items
(attributes or metrics), ``m`` candidates. No Django import here.
"""

import math
import numbers
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from . import core
from .rules import SCALE_MAX

__all__ = [
    "CONSENSUS_MEASURE",
    "CONSENSUS_WORDING",
    "WeightSpread",
    "ahp_consensus",
    "consensus_wording",
    "veto_shares",
    "weight_rows",
    "weight_spread",
]

#: The name the results give the consensus measure (``ahp_consensus``).
CONSENSUS_MEASURE = "ahp_os_s_star"

#: BPMSG's word scale for the AHP consensus indicator (Goepel, "AHP
#: consensus word scale", bpmsg.com, from 140 hierarchy nodes of 35 group
#: projects): the range from 0.5 to 1 in four equal bands, "very low" below.
#: Each band holds its lower bound: ``(lower bound, wording)``, ascending.
CONSENSUS_WORDING = (
    (0.0, "very low"),
    (0.5, "low"),
    (0.625, "moderate"),
    (0.75, "high"),
    (0.875, "very high"),
)


class WeightSpread(NamedTuple):
    """Per column of a weight matrix, over its experts (arrays of shape (n,))."""

    min: np.ndarray
    max: np.ndarray
    mean: np.ndarray
    stdev: np.ndarray


def weight_rows(weights: ArrayLike) -> np.ndarray:
    """The (k, n) weight matrix as the measures read it: finite, no negative
    weight, every row summing to 1 within ``core.ROW_SUM_TOLERANCE`` and then
    divided by its sum, exactly as ``engine.core`` renormalises the weights it
    evaluates (so the rows a run stores are those its engine used).

    Zero weights are accepted here (the product never has them, METHOD.md 3,
    but the measures are defined with them); ValueError names ``weights``.
    """
    weights = core._as_finite_array(weights, "weights", 2)
    if 0 in weights.shape:
        raise ValueError(f"weights must have at least one expert (row) and one item (column), got {weights.shape}")
    if weights.min() < 0:
        negative = np.argwhere(weights < 0)
        raise ValueError(f"weights must not be negative; (expert, item) {core._format_positions(negative)}")
    return core._renormalised_rows(weights, "weights", "each expert's weights")


def weight_spread(weights: ArrayLike) -> WeightSpread:
    """Lowest, highest and mean weight of each column, and the population
    standard deviation of the column (``ddof = 0``: it describes this group
    of experts and estimates nothing beyond it):

        stdev_j = sqrt((1/k) sum_i (w_ij - mean_j)^2)

    Parameters
    ----------
    weights : array-like of shape (k, n)
        One row per expert, rows summing to 1 (see :func:`weight_rows`).

    Returns
    -------
    WeightSpread
        ``min``, ``max``, ``mean``, ``stdev``: arrays of shape (n,). One
        expert: min = max = mean = that expert's weights, stdev 0.
    """
    weights = weight_rows(weights)
    return WeightSpread(
        min=weights.min(axis=0), max=weights.max(axis=0), mean=weights.mean(axis=0), stdev=weights.std(axis=0)
    )


def veto_shares(
    lower: ArrayLike, upper: ArrayLike, measurements: ArrayLike, expert_values: core.ExpertValues | None = None
) -> np.ndarray:
    """The share of the experts who veto each candidate on each metric.

    Expert ``i`` vetoes candidate ``c`` on metric ``j`` when their individual
    score ``m̄_ij`` of it is 0: the measured value lies at or beyond their
    least acceptable value ``b^l_ij``, on the side away from ``b^u_ij``
    (METHOD.md 4 and 6.2). The share is the number of such experts over
    ``k``. The vetoing judgments are those of ``core.vetoing_judgments``, the
    engine's own comparison, so a candidate has a share above 0 exactly when
    the engine vetoes it. They come one row per veto (only vetoed candidates
    are expanded, in batches) and are counted with one ``bincount``: nothing
    of shape (m, k, n) is built.

    Parameters
    ----------
    lower, upper : array-like of shape (k, n)
        Each expert's least acceptable and desired value per metric.
    measurements : array-like of shape (m, n)
        Each candidate's measured values (``m`` may be 0).
    expert_values : core.ExpertValues, optional
        Each expert's own value of the elicited metrics (as ``core.evaluate``).

    Returns
    -------
    ndarray of shape (m, n), values in {0, 1/k, ..., 1}.
    """
    judgments = core.vetoing_judgments(lower, upper, measurements, expert_values)
    k, n = np.shape(lower)
    m = np.shape(measurements)[0]  # checked by vetoing_judgments
    candidate, _, metric = judgments.T
    counts = np.bincount(candidate * n + metric, minlength=m * n).reshape(m, n)
    return counts / k


def _entropies(shares: np.ndarray) -> np.ndarray:
    """Shannon entropy ``-sum_j p_j ln p_j`` along the last axis, 0 ln 0 = 0."""
    return -(shares * np.log(np.where(shares > 0, shares, 1.0))).sum(axis=-1)


def ahp_consensus(weights: ArrayLike, *, scale_max: float = SCALE_MAX) -> float:
    """The AHP group consensus indicator ``S*`` of AHP-OS, in [0, 1].

    Goepel's indicator partitions Shannon entropy into alpha (within each
    expert), gamma (of the group's mean) and beta (between the experts) and
    rescales the between-expert diversity so that 1 means the experts agree
    and 0 that they are as far apart as the AHP scale lets them be.
    For ``k`` experts with weight rows ``w_i`` over ``n`` items:

        H_alpha = (1/k) sum_i (- sum_j w_ij ln w_ij)    mean of the experts' entropies
        H_gamma = - sum_j wbar_j ln wbar_j              wbar = (1/k) sum_i w_i
        D_beta  = exp(H_gamma - H_alpha)                between-expert diversity, in [1, k]

    The least entropy an AHP priority vector can have belongs to an expert
    who judges one item ``M`` times (the scale's maximum) as important as
    each of the others, ``w = (M, 1, ..., 1) / (n + M - 1)``:

        H_alpha_min = - (M/(n+M-1)) ln(M/(n+M-1)) - (n-1) (1/(n+M-1)) ln(1/(n+M-1))
        cor         = exp(ln n - H_alpha_min) = n / exp(H_alpha_min)
        S*          = (1/D_beta - 1/cor) / (1 - 1/cor)

    Sources: K. D. Goepel, "Implementation of an Online Software Tool for the
    Analytic Hierarchy Process (AHP-OS)", International Journal of the
    Analytic Hierarchy Process 10(3), 2018, and Goepel, ISAHP 2013 (Kuala
    Lumpur); the formulas are those of AHP-OS's group module (the consensus
    of a node with ``M = 9``, the standard scale). The mean ``wbar`` is the
    arithmetic mean, as in AHP-OS, whatever the peer weights.

    Undefined or out-of-range cases:

    * one expert, or experts whose rows are all equal: 1.0 (nothing to
      disagree on; exactly 1, where the entropies' rounding would leave a
      few ulps below it);
    * one item (``n = 1``, so ``cor = 1``): 1.0 (every weight is 1);
    * weights more extreme than the scale allows (direct weights can be):
      ``S*`` would drop below 0; it is clipped to 0 (and rounding that
      lifts it a hair above 1 is clipped to 1);
    * a zero weight contributes ``0 ln 0 = 0``.

    Parameters
    ----------
    weights : array-like of shape (k, n)
        One row per expert, rows summing to 1 (see :func:`weight_rows`).
    scale_max : float, default 9
        ``M``, the largest value of the pairwise comparison scale; above 1.

    Returns
    -------
    float in [0, 1].
    """
    weights = weight_rows(weights)
    if isinstance(scale_max, bool) or not isinstance(scale_max, numbers.Real) or not 1 < scale_max < math.inf:
        raise ValueError(f"scale_max must be a finite number above 1, got {scale_max!r}")
    k, n = weights.shape
    if k == 1 or n == 1 or (weights == weights[0]).all():
        return 1.0
    alpha = float(_entropies(weights).mean())
    gamma = float(_entropies(weights.mean(axis=0)))
    diversity = math.exp(gamma - alpha)
    top, rest = scale_max / (n + scale_max - 1), 1 / (n + scale_max - 1)
    alpha_min = -top * math.log(top) - (n - 1) * rest * math.log(rest)
    correction = n / math.exp(alpha_min)
    consensus = (1 / diversity - 1 / correction) / (1 - 1 / correction)
    return min(max(consensus, 0.0), 1.0)


def consensus_wording(value: float) -> str:
    """BPMSG's words for an AHP consensus value (:data:`CONSENSUS_WORDING`):
    below 0.5 "very low", then "low" from 0.5, "moderate" from 0.625, "high"
    from 0.75 and "very high" from 0.875."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 1:
        raise ValueError(f"value must be a consensus in [0, 1], got {value!r}")
    return next(wording for bound, wording in reversed(CONSENSUS_WORDING) if value >= bound)
