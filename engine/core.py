"""The APPrOVE validation engine as pure numpy functions (METHOD.md section 6).

Symbols follow METHOD.md and the paper (Lavesson, Boeva, Tsiporkova,
Davidsson: "A Method for Evaluation of Learning Components"):

* ``k`` experts, ``n`` selected metrics, ``m`` candidates;
* ``W`` (k, n): each expert's metric weights, rows sum to 1 (section 3);
* ``V`` (k, k): peer weights, row-stochastic, entries in (0, 1) (section 5);
* ``b^l``, ``b^u`` (k, n): each expert's least acceptable and desired value
  per metric; ``b^l > b^u`` for lower-is-better metrics (section 4);
* ``M`` (m, n): the candidates' measured values.

Every index in an error message is 0-based, like the arrays.

The literal recursive aggregation of Tsiporkova & Boeva (section 6.1) is kept
as :func:`aggregate_literal`, the reference. :func:`evaluate` uses its limit
``pi X`` (``pi`` the stationary distribution of ``V``, :func:`expert_influence`)
and never builds the (m, k, n) tensor of individual scores: each group score
``g_j(x) = sum_i pi_i clip((x - b^l_ij) / (b^u_ij - b^l_ij), 0, 1)`` is a
piecewise linear function of the measured value ``x`` whose breakpoints are
the experts' bounds, so every candidate is scored by a binary search over
those breakpoints (or, with many more candidates than experts, the
breakpoints are scored once and the candidates interpolated).

Workers and web processes should run BLAS single-threaded
(``OPENBLAS_NUM_THREADS=1``): the products here are small enough that
threads competing for two cores make them many times slower, not faster.

No Django import here: this module is called by the engine's services on
arrays built from a run's snapshot.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .arguments import positive_number
from .layers import FAST_COUNT_MIN_EXPERTS, LAZY_MIN_DIAGONAL, count_layers
from .rules import range_width_invalid

__all__ = [
    "ROW_SUM_TOLERANCE",
    "DEFAULT_TOLERANCE",
    "MAX_LAYERS",
    "Evaluation",
    "ExpertValues",
    "aggregate_literal",
    "evaluate",
    "expert_influence",
    "individual_scores",
    "layers_needed",
    "own_scores",
    "sums_to_one",
    "vetoes_for",
    "vetoing_judgments",
]

#: METHOD.md intro: a sum that must equal 1 is checked to within this, then
#: the row is renormalised exactly.
ROW_SUM_TOLERANCE = 1e-6

# Numbers typed to sum to 1 +- ROW_SUM_TOLERANCE add up, in floating point, a
# few ulps either side of that bound (0.6 + 0.399999 lands just outside it,
# 0.6 + 0.400001 just inside); this absorbs the rounding so the rule is the
# same on both sides of 1.
_SUM_ROUNDING = 1e-12


def sums_to_one(sums: np.ndarray | float) -> np.ndarray:
    """Where ``|sum - 1| <= ROW_SUM_TOLERANCE`` (elementwise, scalars too):
    the one check of every sum that must equal 1 (METHOD.md intro)."""
    return np.abs(np.asarray(sums, dtype=np.float64) - 1.0) <= ROW_SUM_TOLERANCE + _SUM_ROUNDING


#: METHOD.md 6.1 Decision: default spread tolerance of the literal aggregation.
DEFAULT_TOLERANCE = 1e-9

#: Cap on the layers of the literal aggregation. Strictly positive ``V``
#: always converges, but a nearly reducible one (off-diagonal weights close
#: to 0) can take arbitrarily long; better a clear error than a hung worker.
MAX_LAYERS = 100_000

# The smallest positive double. An individual score whose measured value lies
# strictly inside the acceptable side of b^l is mathematically > 0; if the
# division underflows to 0 it would look like a veto, so it is kept at this
# value instead, which keeps "m̄ == 0" and "vetoed" the same statement.
_SMALLEST_POSITIVE = float(np.finfo(np.float64).smallest_subnormal)

# Above this estimated error amplification (relative to eps, about 2e-16),
# a metric's fast group scores could miss METHOD.md's 1e-9 tolerance by
# cancellation; it is scored by the direct formula instead.
_ILL_CONDITIONED = 1e4
# Range widths beyond this make the ramp slopes subnormal.
_HUGE = 1e300

_FLOAT64_EPS = float(np.finfo(np.float64).eps)

# How many offending positions an error message lists before "...".
_MAX_LISTED = 10


class ExpertValues(NamedTuple):
    """Each expert's own value of some metrics (elicited metrics, docs/method.md
    7.4): ``columns`` (e,) the metrics' indices, ``values`` (m, k, e) expert
    i's value of candidate c on metric ``columns[e]``. For those metrics the
    individual score is ``m̄_cij = r(x_cij; b^l_ij, b^u_ij)`` in place of
    ``r(m_cj; ...)``; ``M``'s column is then not read. An ordinary metric is
    the case ``x_cij = m_cj`` for every i."""

    columns: np.ndarray
    values: np.ndarray


def _validated_expert_values(expert_values: "ExpertValues | None", shape: tuple[int, int, int]) -> ExpertValues | None:
    """None when there is nothing to override, else the checked arrays."""
    if expert_values is None or len(expert_values.columns) == 0:
        return None
    m, k, n = shape
    columns = np.asarray(expert_values.columns, dtype=np.intp)
    if columns.ndim != 1 or len(set(columns.tolist())) != len(columns) or not ((columns >= 0) & (columns < n)).all():
        raise ValueError(f"expert_values.columns must be distinct metric indices in [0, {n}), got {columns.tolist()}")
    values = _as_finite_array(expert_values.values, "expert_values.values", 3)
    _check_shape(values, "expert_values.values", (m, k, len(columns)), "one value per candidate, expert and column")
    return ExpertValues(columns, values)


def _own_scores(lower: np.ndarray, upper: np.ndarray, expert_values: ExpertValues) -> np.ndarray:
    """``m̄_cij`` (..., m, k, e) of the overridden metrics, from each expert's
    own value: bounds (..., k, n) and values (..., m, k, e), one problem or a
    stack of them (the Monte Carlo analysis's samples, engine.robustness)."""
    columns = expert_values.columns
    return _individual_scores(lower[..., None, :, columns], upper[..., None, :, columns], expert_values.values)


def own_scores(lower: ArrayLike, upper: ArrayLike, values: ArrayLike) -> np.ndarray:
    """Each expert's ``m̄_ij`` of one candidate on one metric from their own
    value: ``lower``, ``upper`` and ``values`` of shape (k,)."""
    lower, upper, values = (np.asarray(a, dtype=float) for a in (lower, upper, values))
    return _individual_scores(lower, upper, values)


def with_own_scores(scores: np.ndarray, influence: np.ndarray, own: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``scores`` (..., m, n), the group scores of the metrics as if shared,
    with the overridden metrics' ``columns`` scored from each expert's own
    ``m̄_cij`` (``_own_scores``, (..., m, k, e)) instead:
    ``clip(sum_i pi_i m̄_cij, 0, 1)``, O(m k e). Influence (..., k): one
    problem or a stack (the Monte Carlo's samples; written in place)."""
    scores[..., columns] = np.clip(np.einsum("...mke,...k->...me", own, influence), 0.0, 1.0)
    return scores


def group_scores_with(
    influence: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    measurements: np.ndarray,
    expert_values: ExpertValues | None,
) -> np.ndarray:
    """``g = pi M̄`` (m, n) with the overridden metrics scored from each
    expert's own value (``sum_i pi_i m̄_cij``, O(m k e)); the others exactly
    as without (the same call)."""
    scores = _group_scores(influence, lower, upper, measurements)
    if expert_values is None:
        return scores
    own = _own_scores(lower, upper, expert_values)
    return with_own_scores(scores.copy(), influence, own, expert_values.columns)


def vetoed_with(
    lower: np.ndarray,
    upper: np.ndarray,
    measurements: np.ndarray,
    expert_values: ExpertValues | None,
    own: np.ndarray | None = None,
) -> np.ndarray:
    """Candidates with some ``m̄ == 0`` (..., m), the overridden metrics judged
    on each expert's own value: one problem or a stack (as ``with_own_scores``).
    ``own``, the own ``m̄`` when already computed (``_own_scores``: 0 exactly
    where the value vetoes), saves comparing again."""
    if expert_values is None:
        return _vetoed(lower, upper, measurements)
    shared = np.ones(lower.shape[-1], dtype=bool)
    shared[expert_values.columns] = False
    columns = expert_values.columns
    if own is None:
        vetoing = _vetoing_mask(lower[..., None, :, columns], upper[..., None, :, columns], expert_values.values)
    else:
        vetoing = own == 0.0
    return _vetoed(lower[..., shared], upper[..., shared], measurements[..., shared]) | vetoing.any(axis=(-2, -1))


class VetoingJudgment(NamedTuple):
    """An (expert, metric) pair whose individual score m̄ is 0."""

    expert: int
    metric: int


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Result of :func:`evaluate`. Arrays are read-only.

    Attributes
    ----------
    metric_weights : ndarray of shape (n,)
        Consensus weights ``a = pi W`` (METHOD.md 6.2); they sum to 1.
    expert_influence : ndarray of shape (k,)
        Stationary distribution ``pi`` of the peer weights (METHOD.md 6.1).
    group_scores : ndarray of shape (m, n)
        Group metric score ``g`` of every candidate, in [0, 1].
    weighted_scores : ndarray of shape (m,)
        ``sum_j a_j g_j``, reported for vetoed candidates too.
    cef : ndarray of shape (m,)
        Candidate Evaluation Function (paper eq. 2): 0 where vetoed, else
        the weighted score.
    vetoed : ndarray of bool, shape (m,)
        True when some expert's individual score of some metric is 0.
    iterations : int
        Layers ``q`` the literal aggregation of ``W`` needs to reach the
        tolerance: what ``aggregate_literal(V, W)`` reports, except where
        float64 rounding decides that count (a spread within rounding of
        the tolerance), where it is what the same iteration in extended
        precision reports.
    """

    metric_weights: np.ndarray
    expert_influence: np.ndarray
    group_scores: np.ndarray
    weighted_scores: np.ndarray
    cef: np.ndarray
    vetoed: np.ndarray
    iterations: int


# --------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------


def _format_positions(positions: np.ndarray) -> str:
    listed = ", ".join(str(tuple(int(i) for i in p)) for p in positions[:_MAX_LISTED])
    if len(positions) > _MAX_LISTED:
        listed += f", ... ({len(positions)} in all)"
    return listed


def _as_array(value: ArrayLike, name: str, ndim: int) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a {ndim}-D array of numbers: {exc}") from None
    if array.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got {array.ndim}-D with shape {array.shape}")
    return array


def _check_finite(array: np.ndarray, name: str) -> None:
    # One summing pass decides almost always: a finite sum has no NaN or
    # infinity in it; only a sum that overflows needs the element-wise look.
    with np.errstate(over="ignore", invalid="ignore"):
        surely_finite = bool(np.isfinite(np.add.reduce(array, axis=None)))
    if not surely_finite and not np.isfinite(array).all():
        not_finite = np.argwhere(~np.isfinite(array))
        raise ValueError(f"{name} contains NaN or infinity at {_format_positions(not_finite)}")


def _as_finite_array(value: ArrayLike, name: str, ndim: int) -> np.ndarray:
    array = _as_array(value, name, ndim)
    _check_finite(array, name)
    return array


def _check_shape(array: np.ndarray, name: str, expected: tuple[int, ...], meaning: str) -> None:
    if array.shape != expected:
        raise ValueError(f"{name} must have shape {expected} ({meaning}), got {array.shape}")


def _check_tolerance(tolerance: object) -> float:
    return positive_number(tolerance, "tolerance")


def _renormalised_rows(array: np.ndarray, name: str, row_meaning: str) -> np.ndarray:
    """Check every row sums to 1 within ROW_SUM_TOLERANCE, then make it exact."""
    row_sums = array.sum(axis=1)
    bad_rows = np.flatnonzero(~sums_to_one(row_sums))
    if len(bad_rows):
        described = ", ".join(f"row {row} sums to {row_sums[row]:.10g}" for row in bad_rows[:_MAX_LISTED])
        raise ValueError(f"every row of {name} ({row_meaning}) must sum to 1 within {ROW_SUM_TOLERANCE:g}: {described}")
    return array / row_sums[:, None]


def peer_weights_kept(peer_weights: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """V among the experts ``keep`` selects (a boolean mask): the others' rows
    and columns removed and each remaining row divided by its sum, so what an
    expert gave the removed ones is shared out in proportion over the rest.
    The one rule for an expert left out: leave-one-expert-out
    (``engine.robustness.without_expert``) and the excluded and abstaining
    experts of a study (docs/method.md, "Absent experts"). A row left
    summing to 0 (or holding NaN, a gap) stays 0 (or NaN), for the
    validation of V to refuse."""
    reduced = np.asarray(peer_weights, dtype=np.float64)[np.ix_(keep, keep)]
    sums = reduced.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sums > 0, reduced / np.where(sums > 0, sums, 1.0), reduced)


def _validated_peer_weights(
    peer_weights: ArrayLike, name: str = "peer_weights", *, expected_experts: int | None = None
) -> np.ndarray:
    """Validate V (METHOD.md 5) and return it with rows renormalised exactly."""
    peer_weights = _as_array(peer_weights, name, 2)
    if expected_experts is not None:
        _check_shape(
            peer_weights, name, (expected_experts, expected_experts), "one row and column per expert, as in weights"
        )
    k = peer_weights.shape[0]
    if k == 0 or peer_weights.shape != (k, k):
        raise ValueError(
            f"{name} must be a non-empty square (k, k) matrix, one row and column "
            f"per expert, got shape {peer_weights.shape}"
        )
    # A lone expert rates only themself, with weight 1; (0, 1) cannot hold.
    # Two reductions (NaN fails both comparisons, infinity the second) rather
    # than element-wise masks, which only name the entry.
    if k == 1 or not (peer_weights.min() > 0 and peer_weights.max() < 1):
        _check_finite(peer_weights, name)
    if k > 1 and not (peer_weights.min() > 0 and peer_weights.max() < 1):
        outside = np.argwhere((peer_weights <= 0) | (peer_weights >= 1))
        row, column = outside[0]
        raise ValueError(
            f"{name} entries must lie strictly between 0 and 1 (no expert may "
            f"silence another); entry ({row}, {column}) is "
            f"{peer_weights[row, column]:.10g}" + (f" (and {len(outside) - 1} more)" if len(outside) > 1 else "")
        )
    return _renormalised_rows(peer_weights, name, "each expert's ratings of the experts")


def _validated_weights(weights: ArrayLike) -> np.ndarray:
    weights = _as_finite_array(weights, "weights", 2)
    k, n = weights.shape
    if k == 0 or n == 0:
        raise ValueError(
            f"weights must have at least one expert (row) and one metric (column), got shape {weights.shape}"
        )
    not_positive = np.argwhere(weights <= 0) if weights.min() <= 0 else np.empty((0, 2), dtype=np.intp)
    if len(not_positive):
        raise ValueError(
            "weights must be strictly positive (the method allows no zero weight); "
            f"(expert, metric) {_format_positions(not_positive)} "
            f"{'is' if len(not_positive) == 1 else 'are'} not"
        )
    return _renormalised_rows(weights, "weights", "each expert's metric weights")


def _validated_ranges(lower: ArrayLike, upper: ArrayLike, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    lower = _as_finite_array(lower, "lower", 2)
    upper = _as_finite_array(upper, "upper", 2)
    _check_shape(lower, "lower", shape, "one least acceptable value per expert and metric")
    _check_shape(upper, "upper", shape, "one desired value per expert and metric")
    unbounded_mask, equal_mask = range_width_invalid(lower, upper)
    unbounded = np.argwhere(unbounded_mask)
    if len(unbounded):
        raise ValueError(
            "an acceptable range must have a finite width upper - lower; it overflows "
            f"for (expert, metric) {_format_positions(unbounded)}"
        )
    equal = np.argwhere(equal_mask)
    if len(equal):
        raise ValueError(
            f"an acceptable range needs lower != upper; equal bounds for (expert, metric) {_format_positions(equal)}"
        )
    return lower, upper


# --------------------------------------------------------------------------
# Aggregation (METHOD.md 6.1)
# --------------------------------------------------------------------------


def _iterate_layers(
    peer_weights: np.ndarray, values: np.ndarray, tolerance: float, max_layers: int
) -> tuple[np.ndarray, int]:
    # Small problems check their layers a batch at a time: the same layers,
    # the same test, the same first layer found, with less Python overhead
    # per layer (a few computed past the answer cost next to nothing). Large
    # ones check every layer, where each product is the cost.
    k, n = values.shape
    batch_cap = 32 if k * k * n <= 4096 else 1
    layer = peer_weights @ values
    first, batch = 0, 1
    while first <= max_layers:
        layers = [layer]
        for _ in range(min(batch, max_layers + 1 - first) - 1):
            layers.append(peer_weights @ layers[-1])
        stacked = np.stack(layers)
        spreads = stacked.max(axis=1) - stacked.min(axis=1)
        converged = np.flatnonzero((spreads < tolerance).all(axis=1))
        if len(converged):
            return stacked[converged[0]], first + int(converged[0])
        first += len(layers)
        layer = peer_weights @ layers[-1]
        batch = min(2 * batch, batch_cap)
    raise ValueError(
        f"the recursive aggregation did not reach a spread below {tolerance:g} "
        f"within {max_layers} layers (largest spread left: {spreads[-1].max():.3g}); "
        "the peer weights mix too slowly or the values are too large for an "
        "absolute tolerance"
    )


def aggregate_literal(
    peer_weights: ArrayLike, values: ArrayLike, *, tolerance: float = DEFAULT_TOLERANCE, max_layers: int = MAX_LAYERS
) -> tuple[np.ndarray, int]:
    """Recursive aggregation of Tsiporkova & Boeva, computed literally.

    ``X^0 = V X``, ``X^q = V X^(q-1)`` (so ``X^q = V^(q+1) X``); stop at the
    first ``q`` where every column's spread ``max_i x^q_ij - min_i x^q_ij`` is
    below ``tolerance``; the group result is the column mean of ``X^q``
    (METHOD.md 6.1). This is the reference that :func:`evaluate` and
    :func:`expert_influence` must agree with; it costs ``O(q k^2 n)``.

    Parameters
    ----------
    peer_weights : array-like of shape (k, k)
        ``V``: row-stochastic, entries in (0, 1) (``[[1.0]]`` for one expert).
        Rows summing to 1 within 1e-6 are renormalised exactly.
    values : array-like of shape (k, n)
        ``X``: one row per expert (scores or weights).
    tolerance : float, default 1e-9
        Absolute spread below which a column counts as converged.
    max_layers : int, default 100000
        Give up (ValueError) after this many layers.

    Returns
    -------
    group : ndarray of shape (n,)
        Column mean of the last layer.
    layers : int
        The number of layers ``q`` (0 when ``V X`` already agrees).
    """
    peer_weights = _validated_peer_weights(peer_weights)
    k = peer_weights.shape[0]
    values = _as_finite_array(values, "values", 2)
    if values.shape[0] != k:
        raise ValueError(f"values must have one row per expert, {k} rows as in peer_weights, got shape {values.shape}")
    tolerance = _check_tolerance(tolerance)
    layer, layers = _iterate_layers(peer_weights, values, tolerance, int(max_layers))
    return layer.mean(axis=0), layers


def layers_needed(peer_weights: ArrayLike, values: ArrayLike, *, tolerance: float = DEFAULT_TOLERANCE) -> int:
    """Number of layers ``q`` the literal aggregation of ``values`` needs.

    The count depends on ``X`` as well as on ``V``: a column whose experts
    already agree converges at once whatever ``V`` is, and the spread of a
    column scales with the spread of its values. A count derived from the
    convergence of ``V^q`` alone would not be the number
    :func:`aggregate_literal` reports, so this iterates on ``values``
    directly (``O(q k^2 n)``, cheap for ``X = W``) and returns exactly the
    ``q`` of ``aggregate_literal(peer_weights, values, tolerance=...)``.
    :func:`evaluate` reports it for ``X = W`` as ``Evaluation.iterations``.
    Unlike the literal reference it has no cap: past 10,000 layers it counts
    by repeated squaring (see ``engine.layers.count_layers``).
    """
    peer_weights = _validated_peer_weights(peer_weights)
    values = _as_finite_array(values, "values", 2)
    if values.shape[0] != peer_weights.shape[0]:
        raise ValueError(f"values must have one row per expert, got shape {values.shape}")
    tolerance = _check_tolerance(tolerance)
    influence = _stationary_distribution(peer_weights) if len(peer_weights) >= FAST_COUNT_MIN_EXPERTS else None
    return count_layers(peer_weights, values, tolerance, influence)


def _stationary_distribution(peer_weights: np.ndarray) -> np.ndarray:
    influence = _stationary_by_iteration(peer_weights)
    if influence is None:
        influence = _stationary_by_solve(peer_weights)
    # pi is strictly positive for a positive V; a rounding-level negative
    # would only appear for a near-reducible V and must not flip a sign.
    influence = np.clip(influence, 0.0, None)
    return influence / influence.sum()


def _stationary_by_iteration(peer_weights: np.ndarray) -> np.ndarray | None:
    """``pi`` by power iteration, or None when a solve would cost less.

    One step is a vector-matrix product (``k^2``); the LU solve costs about
    ``k^3 / 3`` at several times the speed, so iteration pays for at most
    about ``k / 8`` steps. A well-mixing V converges in a handful. A lazy V
    (heavy diagonal, slow mixing) is iterated as ``P = (V - alpha I) / (1 - alpha)``,
    which has the same ``pi`` and mixes ``1 / (1 - alpha)`` times faster.
    Stops when the step's change, extrapolated over the remaining steps of
    a geometric convergence, is at the rounding level.
    """
    k = len(peer_weights)
    if k == 1:
        return np.ones(1)
    budget = max(8, k // 8)
    alpha = float(peer_weights.diagonal().min())
    chain = peer_weights
    if alpha >= LAZY_MIN_DIAGONAL:
        chain = peer_weights.copy()
        chain[np.diag_indices(k)] -= alpha  # exact: both entries lie within a factor 2
    influence = np.full(k, 1.0 / k)
    previous = np.inf
    for step in range(budget):
        following = influence @ chain
        following /= following.sum()
        change = float(np.abs(following - influence).sum())
        influence = following
        rate = change / previous
        previous = change
        if change == 0.0 or (step and rate < 1.0 and change * rate / (1.0 - rate) <= 2 * _FLOAT64_EPS):
            return influence
        if step >= 2 and (rate >= 1.0 or change * rate ** (budget - step) > 2 * _FLOAT64_EPS):
            # Changes that stopped shrinking at the rounding level: converged.
            # Otherwise (slow mixing, or changes that oscillate) the solve.
            return influence if rate >= 1.0 and change <= 16 * _FLOAT64_EPS else None
    return None


def _stationary_by_solve(peer_weights: np.ndarray) -> np.ndarray:
    k = peer_weights.shape[0]
    # pi V = pi  <=>  (V^T - I) pi^T = 0. That system has rank k - 1 for an
    # irreducible V, so one (redundant) equation is replaced by sum(pi) = 1.
    # A plain copy viewed transposed is Fortran-ordered, the layout LAPACK
    # wants: no strided transpose copy of the k x k matrix.
    system = peer_weights.copy().T
    system[np.diag_indices(k)] -= 1.0
    system[-1, :] = 1.0
    right_hand_side = np.zeros(k)
    right_hand_side[-1] = 1.0
    try:
        return np.linalg.solve(system, right_hand_side)
    except np.linalg.LinAlgError:  # pragma: no cover - excluded by positivity of V
        raise ValueError("peer_weights has no unique stationary distribution") from None


def expert_influence(peer_weights: ArrayLike) -> np.ndarray:
    """Stationary distribution ``pi`` of the peer weights: ``pi V = pi``, ``sum pi = 1``.

    METHOD.md 6.1: since ``V`` is row-stochastic with strictly positive
    entries, ``V^q`` converges to a matrix whose rows all equal ``pi``, so the
    recursive aggregation of any ``X`` converges to ``pi X``. ``pi`` is each
    expert's influence on the outcome. Computed by power iteration
    (``O(k^2)`` a step, a handful of steps when V mixes; a lazy V, with a
    heavy diagonal, is iterated through ``V - alpha I``, which has the same
    ``pi`` and mixes faster), else by one linear solve of ``(V^T - I) pi^T = 0``
    with one equation replaced by ``sum(pi) = 1`` (``O(k^3)``) when iterating
    would cost more.

    Parameters
    ----------
    peer_weights : array-like of shape (k, k)

    Returns
    -------
    ndarray of shape (k,)
    """
    return _stationary_distribution(_validated_peer_weights(peer_weights))


# --------------------------------------------------------------------------
# Individual scores (METHOD.md 4)
# --------------------------------------------------------------------------


def _vetoing_mask(lower: np.ndarray, upper: np.ndarray, measured: np.ndarray) -> np.ndarray:
    # t <= 0 exactly when the measured value is at or beyond b^l on the side
    # away from b^u. Deciding it by comparing with b^l, not by the sign of a
    # rounded quotient, lets the fast path and the literal path agree bit for
    # bit on which candidates are vetoed.
    return np.where(upper > lower, measured <= lower, measured >= lower)


def _individual_scores(lower: np.ndarray, upper: np.ndarray, measured: np.ndarray) -> np.ndarray:
    # A value far beyond a bound near the largest double overflows to +-inf,
    # which the clip turns into the right 0 or 1.
    with np.errstate(over="ignore"):
        position = (measured - lower) / (upper - lower)
    vetoing = _vetoing_mask(lower, upper, measured)
    return np.where(vetoing, 0.0, np.clip(position, _SMALLEST_POSITIVE, 1.0))


def _validated_candidate(
    lower: ArrayLike, upper: ArrayLike, measurement_row: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lower = _as_finite_array(lower, "lower", 2)
    if lower.shape[0] == 0 or lower.shape[1] == 0:
        raise ValueError(f"lower must have at least one expert and one metric, got shape {lower.shape}")
    lower, upper = _validated_ranges(lower, upper, lower.shape)
    measurement_row = _as_finite_array(measurement_row, "measurement_row", 1)
    _check_shape(
        measurement_row,
        "measurement_row",
        (lower.shape[1],),
        "one measured value per metric, as in lower",
    )
    return lower, upper, measurement_row


def individual_scores(lower: ArrayLike, upper: ArrayLike, measurement_row: ArrayLike) -> np.ndarray:
    """Every expert's score ``m̄_ij`` of one candidate (paper eq. 1, METHOD.md 4).

    ``t = (m_j - b^l_ij) / (b^u_ij - b^l_ij)``; ``m̄_ij = 1`` if ``t > 1``,
    ``0`` if ``t < 0``, else ``t``. One formula for both directions: for a
    lower-is-better metric ``b^l > b^u``. Example (METHOD.md 4): range
    [50, 10], 12.3 -> 0.9425, 9.2 -> 1.

    ``m̄_ij == 0`` (a veto) exactly when the measured value is at or beyond
    ``b^l`` on the side away from ``b^u``; this is decided by comparing the
    values, so a positive ``t`` that underflows is kept positive (at the
    smallest positive double) rather than turned into a veto.

    Parameters
    ----------
    lower, upper : array-like of shape (k, n)
        ``b^l`` (least acceptable) and ``b^u`` (desired); ``lower != upper``.
    measurement_row : array-like of shape (n,)
        One candidate's measured values.

    Returns
    -------
    ndarray of shape (k, n), values in [0, 1].
    """
    lower, upper, measurement_row = _validated_candidate(lower, upper, measurement_row)
    return _individual_scores(lower, upper, measurement_row[None, :])


def vetoes_for(lower: ArrayLike, upper: ArrayLike, measurement_row: ArrayLike) -> list[VetoingJudgment]:
    """The (expert, metric) pairs whose individual score ``m̄_ij`` is 0.

    A candidate with any such pair gets ``CEF = 0`` (paper eq. 2, METHOD.md
    6.2). Same arguments as :func:`individual_scores`; returns a list of
    ``VetoingJudgment(expert, metric)`` named tuples, ordered by expert then
    metric (empty when the candidate is not vetoed).
    """
    lower, upper, measurement_row = _validated_candidate(lower, upper, measurement_row)
    vetoing = _vetoing_mask(lower, upper, measurement_row[None, :])
    return [VetoingJudgment(int(expert), int(metric)) for expert, metric in np.argwhere(vetoing)]


class RangeOutcome(NamedTuple):
    """One candidate under one range: its individual score and whether the
    range vetoes it (the score is 0)."""

    score: float
    vetoed: bool


def veto_preview(least_acceptable: float, desired: float, measured: ArrayLike) -> list[RangeOutcome]:
    """What one range ``[least_acceptable, desired]`` of one metric does to
    each candidate's measured value of it: the individual score ``m̄``
    (:func:`individual_scores`) and whether it is a veto (``m̄ == 0``,
    decided as :func:`vetoes_for` decides it). The expert's ranges page
    shows this for a range as typed.

    Parameters
    ----------
    least_acceptable, desired : float
        ``b^l`` and ``b^u``; not equal.
    measured : array-like of shape (c,)
        The candidates' measured values.

    Returns
    -------
    list of RangeOutcome(score, vetoed), one per value, in order.
    """
    scores, vetoing = veto_preview_arrays(least_acceptable, desired, measured)
    return [RangeOutcome(float(score), bool(veto)) for score, veto in zip(scores, vetoing, strict=True)]


def veto_preview_arrays(least_acceptable: float, desired: float, measured: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """:func:`veto_preview` as two arrays of shape (c,): the individual
    scores (float) and the vetoes (bool), for the ranges step of a study of
    a thousand candidates, where one object per candidate would cost more
    than the mathematics."""
    measured = _as_finite_array(measured, "measured", 1)
    if measured.size == 0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    lower = np.full((1, measured.size), least_acceptable, dtype=np.float64)
    upper = np.full((1, measured.size), desired, dtype=np.float64)
    lower, upper, measured = _validated_candidate(lower, upper, measured)
    scores = _individual_scores(lower, upper, measured[None, :])[0]
    vetoing = _vetoing_mask(lower, upper, measured[None, :])[0]
    return scores, vetoing


#: Candidates whose (k, n) veto masks are built at once by vetoing_judgments
#: are chosen so that one batch holds about this many entries.
_VETO_BATCH_ENTRIES = 4_000_000


def vetoing_judgments(
    lower: ArrayLike, upper: ArrayLike, measurements: ArrayLike, expert_values: ExpertValues | None = None
) -> np.ndarray:
    """Every (candidate, expert, metric) whose individual score ``m̄`` is 0.

    What :func:`vetoes_for` gives for one candidate, for all ``m`` at once:
    an integer array of shape (v, 3), rows ``(candidate, expert, metric)``
    ordered by candidate, then expert, then metric. Only vetoed candidates
    are expanded to (k, n) masks, in batches of whole candidates so memory
    stays bounded; no per-candidate Python loop. With ``expert_values``
    (as :func:`evaluate` takes it) those metrics are judged on each
    expert's own value.
    """
    lower = _as_finite_array(lower, "lower", 2)
    k, n = lower.shape
    lower, upper = _validated_ranges(lower, upper, (k, n))
    measurements = _as_finite_array(measurements, "measurements", 2)
    _check_shape(measurements, "measurements", (len(measurements), n), "one measured value per metric, as in lower")
    vetoed = np.flatnonzero(_vetoed(lower, upper, measurements))
    batch = max(1, _VETO_BATCH_ENTRIES // (k * n))
    found = [np.empty((0, 3), dtype=np.intp)]
    for first in range(0, len(vetoed), batch):
        chosen = vetoed[first : first + batch]
        candidate, expert, metric = np.nonzero(_vetoing_mask(lower, upper, measurements[chosen][:, None, :]))
        found.append(np.column_stack([chosen[candidate], expert, metric]))
    own = _validated_expert_values(expert_values, (len(measurements), k, n))
    if own is None:
        return np.concatenate(found)
    shared = np.concatenate(found)
    shared = shared[~np.isin(shared[:, 2], own.columns)]
    columns = own.columns
    candidate, expert, column = np.nonzero(_vetoing_mask(lower[None, :, columns], upper[None, :, columns], own.values))
    both = np.concatenate([shared, np.column_stack([candidate, expert, columns[column]])])
    return both[np.lexsort((both[:, 2], both[:, 1], both[:, 0]))]


# --------------------------------------------------------------------------
# Fast group scores
# --------------------------------------------------------------------------


#: From this many candidates per breakpoint (2 per expert) on, each metric's
#: group score is computed at its breakpoints once and interpolated.
INTERPOLATE_FROM = 2

# Breakpoint gaps below this make the interpolation slopes overflow.
_TINY_GAP = 1e-290


def _group_scores(influence: np.ndarray, lower: np.ndarray, upper: np.ndarray, measurements: np.ndarray) -> np.ndarray:
    """``g = pi M̄`` for every candidate, shape (m, n), without the (m, k, n) tensor
    (:func:`_group_scores_batch` of one problem)."""
    return _group_scores_batch(influence[None], lower[None], upper[None], measurements[None])[0]


def _group_scores_batch(
    influence: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    measurements: np.ndarray,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """``g = pi M̄`` of S problems at once: influence (S, k), bounds (S, k, n),
    measurements (S, m, n); returns (S, m, n), each problem's exactly as
    alone (every step works per metric of a problem, a "row").

    ``g_j`` is linear between consecutive breakpoints of metric j (the
    experts' bounds) and constant beyond them. With many more candidates
    than breakpoints it is scored at the breakpoints (and just outside them)
    and interpolated, ``O(k n log k + m n log k)`` with a small constant;
    otherwise each candidate is placed among the breakpoints directly
    (``_group_scores_at``). The Monte Carlo analysis scores a block of
    samples in one call (engine.robustness), so only the interpolation
    loops over its rows. ``order`` (n, m), optional, is per metric an order
    of the candidates in which their measurements are nearly sorted (the
    run's, for samples that move them a little): interpolated in that order,
    np.interp finds each value next to the previous one. The scores do not
    depend on it.
    """
    samples, m, n = measurements.shape
    k = influence.shape[1]
    rows = samples * n
    # Row r = s n + j: problem s's metric j, with its problem's weights.
    weights = np.repeat(influence, n, axis=0)  # (rows, k)
    lower = lower.transpose(1, 0, 2).reshape(k, rows)
    upper = upper.transpose(1, 0, 2).reshape(k, rows)
    measured = measurements.transpose(1, 0, 2).reshape(m, rows)

    def problems(scores: np.ndarray) -> np.ndarray:  # (m, rows) -> (S, m, n)
        return scores.reshape(m, samples, n).transpose(1, 0, 2)

    if m < INTERPOLATE_FROM * 2 * k:
        return problems(_group_scores_at(weights, lower, upper, measured))
    bounds = np.sort(np.concatenate([lower, upper]), axis=0)  # (2k, rows)
    with np.errstate(over="ignore", invalid="ignore"):
        points = np.concatenate([np.nextafter(bounds[:1], -np.inf), bounds, np.nextafter(bounds[-1:], np.inf)], axis=0)
        gaps = np.diff(bounds, axis=0)
    at_points = np.ascontiguousarray(_group_scores_at(weights, lower, upper, points).T)
    # Interpolation needs finite breakpoints and no span that overflows or
    # gap that underflows (then there are no slopes): checked for every row
    # at once, such rows scored directly.
    positive = gaps > 0
    interpolable = (
        np.isfinite(points).all(axis=0)
        & ~(positive & ~np.isfinite(gaps)).any(axis=0)
        & (np.where(positive, gaps, np.inf).min(axis=0, initial=np.inf) > _TINY_GAP)
    ).tolist()
    points = np.ascontiguousarray(points.T)
    # Row-major: each row's candidates contiguous for np.interp.
    measured = np.ascontiguousarray(measured.T)
    scores = np.empty((rows, m))
    for row in range(rows):
        if interpolable[row] and order is not None:
            by_value = order[row % n]
            scores[row, by_value] = np.interp(measured[row, by_value], points[row], at_points[row])
        elif interpolable[row]:
            scores[row] = np.interp(measured[row], points[row], at_points[row])
        else:
            scores[row] = _group_scores_at(
                weights[row], lower[:, row : row + 1], upper[:, row : row + 1], measured[row][:, None]
            )[:, 0]
    return problems(scores.T)


def _group_scores_at(
    influence: np.ndarray, lower: np.ndarray, upper: np.ndarray, measurements: np.ndarray
) -> np.ndarray:
    """``g = pi M̄`` for every candidate without the (m, k, n) tensor.
    ``influence`` is ``pi`` (k,), or (n, k) a ``pi`` per metric.

    For metric j, expert i contributes ``pi_i`` times a clamped ramp of the
    measured value x: constant below ``start = min(b^l, b^u)``, linear
    ``pi_i (x - b^l) / (b^u - b^l)`` on [start, end), constant from
    ``end = max(b^l, b^u)`` on (0 then 1 for an increasing range, 1 then 0
    for a decreasing one). The sum is piecewise linear with the 2k bounds as
    breakpoints. Per metric the starts and the ends are sorted once, prefix
    sums are taken over each, and a candidate's position among them is found
    by binary search (``searchsorted``):

    * constants before the ramps: ``pi_i`` of the decreasing experts whose
      start is above x (suffix sums over the sorted starts);
    * constants after the ramps: ``pi_i`` of the increasing experts whose
      end is at or below x (prefix sums over the sorted ends);
    * ramps in progress (started, not ended): ``slope * x + offset`` with
      ``slope = sum pi_i / (b^u - b^l)``, ``offset = -sum pi_i b^l /
      (b^u - b^l)``, the sums over started experts minus those over ended
      ones (every ended expert has started, as start < end).

    Sums of non-negative constants never cancel, and where no ramp is in
    progress (an exact integer count) the linear part is exactly 0, so a
    candidate beyond every range scores exactly what the literal formula
    gives. O((m + k) n log k) time, O((m + k) n) memory.
    """
    k, n = lower.shape
    # Metric-major (n, k) layout: each metric's experts are contiguous, which
    # makes the per-metric sorts and binary searches cache-friendly.
    lower = np.ascontiguousarray(lower.T)
    upper = np.ascontiguousarray(upper.T)
    increasing = upper > lower
    start = np.minimum(lower, upper)
    end = np.maximum(lower, upper)
    # Shifting each metric to the middle of its breakpoints keeps the ramp
    # offsets (-slope * b^l) of the order of the ranges, so measurements far
    # from zero (timestamps, sizes) do not cancel catastrophically.
    # Bounds and values near the largest double can overflow in the shifted
    # sums below; such metrics are recomputed by the direct formula.
    with np.errstate(over="ignore", invalid="ignore"):
        # Halves first: the sum of two bounds near the largest double overflows.
        centre = (0.5 * start.min(axis=1) + 0.5 * end.max(axis=1))[:, None]
        start -= centre
        end -= centre
        measured = np.ascontiguousarray(measurements.T) - centre  # (n, m)

        # (n, k): the same weights for every metric, or a row per metric
        # (_group_scores_batch's rows, each a problem's metric).
        weight = np.broadcast_to(influence, (n, k))
        ramp_slope = weight / (upper - lower)  # negative for decreasing ranges
        ramp_offset = -ramp_slope * (lower - centre)
        zeros = np.zeros((n, 1))

        def prefix_sums(values: np.ndarray, order: np.ndarray) -> np.ndarray:
            sorted_values = np.take_along_axis(values, order, axis=1)
            return np.concatenate([zeros, np.cumsum(sorted_values, axis=1)], axis=1)

        start_order = np.argsort(start, axis=1)
        sorted_starts = np.take_along_axis(start, start_order, axis=1)
        before = np.take_along_axis(np.where(increasing, 0.0, weight), start_order, axis=1)
        # Per metric and number of experts started, in one table so that a
        # single gather fetches all three: the constants of the experts not yet
        # started (suffix sums, accumulated from the right so that past the last
        # decreasing expert they are exactly 0), and the slope and offset sums of
        # the started ramps.
        by_started = np.stack(
            [
                np.concatenate([np.cumsum(before[:, ::-1], axis=1)[:, ::-1], zeros], axis=1),
                prefix_sums(ramp_slope, start_order),
                prefix_sums(ramp_offset, start_order),
            ],
            axis=-1,
        )  # (n, k + 1, 3)

        end_order = np.argsort(end, axis=1)
        sorted_ends = np.take_along_axis(end, end_order, axis=1)
        # Per metric and number of experts ended: constants of the ended
        # experts, and the slope and offset sums of the ended ramps.
        by_ended = np.stack(
            [
                prefix_sums(np.where(increasing, weight, 0.0), end_order),
                prefix_sums(ramp_slope, end_order),
                prefix_sums(ramp_offset, end_order),
            ],
            axis=-1,
        )  # (n, k + 1, 3)

        started = np.empty(measured.shape, dtype=np.intp)
        ended = np.empty(measured.shape, dtype=np.intp)
        # A loop over metrics, not a vectorised search: its Python overhead
        # is ~2 % of this function, and finding every metric's positions at
        # once (a merged stable argsort) is 3-6 times slower than these
        # searches (bench/engine.py, section "kernels").
        for metric in range(n):
            # side="right": an expert whose start equals x is on its ramp, one
            # whose end equals x has left it; g is continuous, so this only
            # decides which sums carry the (equal) value.
            started[metric] = np.searchsorted(sorted_starts[metric], measured[metric], side="right")
            ended[metric] = np.searchsorted(sorted_ends[metric], measured[metric], side="right")
        # One flat gather per table (each metric's k + 1 entries in turn).
        started += np.arange(0, n * (k + 1), k + 1)[:, None]
        ended += np.arange(0, n * (k + 1), k + 1)[:, None]
        at_start = np.take(by_started.reshape(-1, 3), started, axis=0)  # (n, m, 3)
        at_end = np.take(by_ended.reshape(-1, 3), ended, axis=0)
        ramps = (at_start[..., 1] - at_end[..., 1]) * measured + (at_start[..., 2] - at_end[..., 2])
        group_scores = at_start[..., 0] + at_end[..., 0] + np.where(started > ended, ramps, 0.0)

    # The ramp sums cancel: their rounding error is about eps times
    # sum_i pi_i (|x - c| + |b^l_i - c|) / |b^u_i - b^l_i|, which is large when
    # narrow ranges lie far apart or bounds reach the limits of a double.
    # Such metrics are scored by the direct formula instead (O(m k) each).
    width = np.abs(upper - lower)
    with np.errstate(over="ignore", invalid="ignore"):
        reach = np.abs(measured).max(axis=1, initial=0.0)[:, None] + np.abs(lower - centre)
        condition = (weight * reach / width).sum(axis=1)
    unreliable = ~(condition <= _ILL_CONDITIONED) | (width.max(axis=1) > _HUGE) | ~np.isfinite(group_scores).all(axis=1)
    for metric in np.flatnonzero(unreliable).tolist():
        group_scores[metric] = _group_scores_direct(
            weight[metric], lower[metric], upper[metric], measurements[:, metric]
        )
    # The exact g lies in [0, 1]; clipping only removes rounding overshoot.
    return np.clip(group_scores.T, 0.0, 1.0)


def _group_scores_direct(
    influence: np.ndarray, lower: np.ndarray, upper: np.ndarray, measured: np.ndarray, *, chunk: int = 100_000
) -> np.ndarray:
    """One metric's group scores by the literal formula ``pi . m̄``, a chunk
    of candidates at a time so memory stays O(chunk) whatever m and k."""
    scores = np.empty(len(measured))
    step = max(1, chunk // max(len(influence), 1))
    for first in range(0, len(measured), step):
        block = measured[first : first + step, None]
        with np.errstate(over="ignore"):  # +-inf positions clip to 0 or 1
            positions = (block - lower) / (upper - lower)
        scores[first : first + step] = np.clip(positions, 0.0, 1.0) @ influence
    return scores


def _vetoed(lower: np.ndarray, upper: np.ndarray, measurements: np.ndarray) -> np.ndarray:
    """Candidates with some expert's ``m̄ == 0``, from two thresholds per metric.

    Experts may disagree on a metric's direction, so each metric has an
    increasing-range threshold (vetoed at or below the largest b^l) and a
    decreasing-range one (vetoed at or above the smallest b^l). The
    comparisons are those of :func:`_vetoing_mask`, so both agree exactly.
    """
    increasing = upper > lower
    # Bounds (..., k, n) and measurements (..., m, n): one problem or a stack.
    at_or_below = np.where(increasing, lower, -np.inf).max(axis=-2)[..., None, :]
    at_or_above = np.where(increasing, np.inf, lower).min(axis=-2)[..., None, :]
    return np.any((measurements <= at_or_below) | (measurements >= at_or_above), axis=-1)


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def evaluate(
    *,
    weights: ArrayLike,
    peer_weights: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    measurements: ArrayLike,
    tolerance: float = DEFAULT_TOLERANCE,
    expert_values: ExpertValues | None = None,
) -> Evaluation:
    """Score every candidate by the APPrOVE method (METHOD.md 6).

    * expert influence ``pi``: ``pi V = pi``, ``sum pi = 1`` (6.1);
    * consensus weights ``a = pi W`` (6.2), the limit of the recursive
      aggregation of ``W``;
    * group scores ``g = pi M̄`` per candidate, ``M̄`` the individual scores
      of paper eq. 1 (METHOD.md 4);
    * ``CEF = 0`` if some expert's ``m̄_ij = 0``, else ``sum_j a_j g_j``
      (paper eq. 2).

    The results agree with the literal iteration (:func:`aggregate_literal`)
    to within ``tolerance``; ``iterations`` is the number of layers that
    iteration needs for ``W`` (or, where float64 rounding decides that
    count, the count of exact arithmetic). Cost ``O((m + k) n log k)`` for
    the scores, ``O(k^2)`` a step for ``pi`` and ``O(k^2 n)`` a layer for the
    count, both with few steps when V mixes (float32 layers, see
    ``engine.layers``); a solve or repeated squaring (``O(k^3)``) only
    where V mixes so slowly that stepping would cost more. No per-candidate
    loop and no (m, k, n) array.

    Parameters
    ----------
    weights : array-like of shape (k, n)
        Each expert's metric weights, strictly positive, rows summing to 1.
    peer_weights : array-like of shape (k, k)
        ``V``, row-stochastic, entries in (0, 1); ``[[1.0]]`` for one expert.
    lower, upper : array-like of shape (k, n)
        Each expert's least acceptable ``b^l`` and desired ``b^u`` value per
        metric; ``b^l > b^u`` where lower is better; never equal.
    measurements : array-like of shape (m, n)
        Each candidate's measured values (``m`` may be 0).
    tolerance : float, default 1e-9
        Spread tolerance of the literal aggregation (METHOD.md 6.1).

    expert_values : ExpertValues, optional
        Each expert's own value of some metrics (elicited metrics): their
        individual scores, group scores and vetoes use ``x_cij`` in place
        of ``m_cj`` (docs/method.md 7.4); everything else is unchanged, and
        without it (or with no columns) the computation is exactly as before.

    Rows of ``weights`` and ``peer_weights`` that sum to 1 within 1e-6 are
    renormalised exactly; any other defect raises ValueError naming the
    argument and position.

    Returns
    -------
    Evaluation
    """
    weights = _validated_weights(weights)
    k, n = weights.shape
    peer_weights = _validated_peer_weights(peer_weights, expected_experts=k)
    lower, upper = _validated_ranges(lower, upper, (k, n))
    measurements = _as_finite_array(measurements, "measurements", 2)
    if measurements.shape[1] != n:
        raise ValueError(
            f"measurements must have shape (m, {n}) (one column per metric, as in weights), got {measurements.shape}"
        )
    tolerance = _check_tolerance(tolerance)
    own = _validated_expert_values(expert_values, (len(measurements), k, n))

    influence = _stationary_distribution(peer_weights)
    # Only reported: the results come from pi, so a slowly mixing V must
    # not fail the evaluation for want of layers.
    iterations = count_layers(peer_weights, weights, tolerance, influence)
    metric_weights = influence @ weights
    metric_weights = metric_weights / metric_weights.sum()

    group_scores = group_scores_with(influence, lower, upper, measurements, own)
    # A row-wise sum rather than a BLAS product: each candidate's score is
    # then computed the same way wherever its row sits, so reordering the
    # candidates cannot change a score in the last bit.
    weighted_scores = (group_scores * metric_weights).sum(axis=1)
    vetoed = vetoed_with(lower, upper, measurements, own)
    cef = np.where(vetoed, 0.0, weighted_scores)

    return Evaluation(
        metric_weights=_read_only(metric_weights),
        expert_influence=_read_only(influence),
        group_scores=_read_only(group_scores),
        weighted_scores=_read_only(weighted_scores),
        cef=_read_only(cef),
        vetoed=_read_only(vetoed),
        iterations=int(iterations),
    )
