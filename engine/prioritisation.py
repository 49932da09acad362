"""How an expert's metric weights are produced (METHOD.md section 3).

Three methods, each giving a weight vector that sums to 1:

* **direct**: positive numbers in any unit (e.g. percentages), normalised;
* **AHP** (Saaty, "The Analytic Hierarchy Process", 1980): a reciprocal
  pairwise comparison matrix ``O`` on the scale 1..9 and reciprocals;
  weights by the study's weighting (:func:`ahp_weights`): the paper's row
  averages of the column-normalised matrix (the default), the principal
  eigenvector (AHP-OS, AHPy, Expert Choice) or the row geometric mean;
* **LPR**, large preference relation (Fodor & Roubens, "Fuzzy Preference
  Modelling and Multicriteria Decision Support", 1994): a reciprocal matrix
  ``R`` on the interval scale 1..9, weights by the formula of METHOD.md.

For AHP the consistency ratio ``CR = CI / RI(n)`` is reported, with
``CI = (lambda_max - n) / (n - 1)``, ``lambda_max`` always the principal
eigenvalue of ``O`` (its Perron root, by the batched power iteration that
also gives the eigenvector weighting, :func:`_perron`), whichever weighting
gives the weights: CR is a property of the judgments, not of the weighting. The
random index ``RI(n)`` is this edition of the table, which is neither
AHPy's (Saaty 2005: 0.52 at n = 3) nor AHP-OS's (0.57 at n = 3):

* n = 1, 2: 0 (every 1x1 and 2x2 reciprocal matrix is consistent);
* n = 3..10: 0.58, 0.90, 1.12, 1.24, 1.32, 1.41, 1.45, 1.49 (Saaty,
  "The Analytic Hierarchy Process", 1980, the table METHOD.md lists);
* n = 11..15: 1.51, 1.48, 1.56, 1.57, 1.59 (Saaty's extended table, e.g.
  Saaty, "Decision making with the analytic hierarchy process", Int. J.
  Services Sciences 1(1), 2008; the dip at n = 12 is in the source);
* n > 15: from the regression of Alonso & Lamata, "Consistency in the
  analytic hierarchy process: a new approach", Int. J. Uncertainty,
  Fuzziness and Knowledge-Based Systems 14(4), 2006:
  ``lambda_bar(n) = 2.7699 n - 4.3513``, ``RI = (lambda_bar - n) / (n - 1)``.

``CR > CONSISTENCY_THRESHOLD`` (engine.rules) is shown as inconsistent: a warning,
never a refusal. Repair hints use Saaty's (2003) error of a judgment against
the weights, ``o_ij w_j / w_i``, with the suggestion rounded to the scale
(:func:`most_inconsistent`); the expert's page offers instead the smallest
change of one judgment that makes the judgments consistent
(:func:`smallest_repairs`), which never moves a judgment further than it
must. Both are this project's presentation, not a copy of any other tool's.

Matrix functions accept one (n, n) matrix or, where stated, a stack
(..., n, n) so that many experts are handled without a Python loop. Indices
in judgments and error messages are 0-based. No Django import here.
"""

import functools
import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, SupportsIndex, cast

import numpy as np
from numpy.typing import ArrayLike

from .arguments import integer
from .rules import (
    AHP_WEIGHTING_DEFAULT,
    AHP_WEIGHTINGS,
    CONSISTENCY_THRESHOLD,
    MIN_DIRECT_SHARE,
    SCALE_ENGINE_SLACK,
    SCALE_MAX,
    SCALE_MIN,
    SCALE_POINTS,
    SCALE_VALUES,
    direct_shares,
    is_consistent,
    nearest_scale_point,
    out_of_proportion,
)

__all__ = [
    "METHODS",
    "Consistency",
    "InconsistentJudgment",
    "Prioritisation",
    "Repair",
    "ahp_priorities",
    "ahp_weights",
    "consistency",
    "consistency_ratios",
    "lpr_weights",
    "most_inconsistent",
    "pairwise_matrix",
    "principal_eigenvectors",
    "prioritise",
    "random_index",
    "smallest_repairs",
]

#: The prioritisation methods of METHOD.md 3.
METHODS = ("direct", "ahp", "lpr")

# o_ij * o_ji must be 1 up to this (relative); matrices built by
# pairwise_matrix are exact, stored or hand-typed ones may be rounded.
_RECIPROCAL_TOLERANCE = 1e-6

_RANDOM_INDEX_TABLE = {
    1: 0.0,
    2: 0.0,
    3: 0.58,
    4: 0.90,
    5: 1.12,
    6: 1.24,
    7: 1.32,
    8: 1.41,
    9: 1.45,
    10: 1.49,
    11: 1.51,
    12: 1.48,
    13: 1.56,
    14: 1.57,
    15: 1.59,
}
_ALONSO_LAMATA_SLOPE = 2.7699
_ALONSO_LAMATA_INTERCEPT = -4.3513


@dataclass(frozen=True)
class Consistency:
    """Saaty's consistency measures of one pairwise comparison matrix."""

    lambda_max: float
    consistency_index: float
    random_index: float
    ratio: float

    @property
    def is_consistent(self) -> bool:
        return is_consistent(self.ratio)


@dataclass(frozen=True)
class InconsistentJudgment:
    """A judged pair ``(row, column)``, ``row < column``, and its repair hint."""

    row: int
    column: int
    value: float
    error: float
    suggested_value: float


@dataclass(frozen=True, eq=False)
class Prioritisation:
    """An expert's weights and, for AHP/LPR, the consistency diagnostics."""

    weights: np.ndarray
    consistency_ratio: float | None = None
    most_inconsistent: list["InconsistentJudgment"] = field(default_factory=list)
    # The smallest single-judgment repairs (:func:`smallest_repairs`), when asked for.
    repairs: list["Repair"] = field(default_factory=list)


# --------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------


def _check_size(n: object, name: str = "n") -> int:
    return integer(n, name, minimum=1)


def _validated_matrices(given: ArrayLike, name: str = "matrix", *, stack: bool = True) -> np.ndarray:
    """Shape (..., n, n), finite, positive and reciprocal; returned as float."""
    try:
        matrices = np.asarray(given, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of numbers: {exc}") from None
    if matrices.ndim < 2 or (not stack and matrices.ndim != 2):
        expected = "(..., n, n)" if stack else "(n, n)"
        raise ValueError(f"{name} must have shape {expected}, got {matrices.shape}")
    n = matrices.shape[-1]
    if n == 0 or matrices.shape[-2] != n:
        raise ValueError(f"{name} must be square with n >= 1, got shape {matrices.shape}")

    if _surely_valid(matrices):
        return matrices

    def where(position: Iterable[Any]) -> str:
        return f"{name}[{', '.join(str(int(i)) for i in position)}]"

    bad = np.argwhere(~np.isfinite(matrices))
    if len(bad):
        raise ValueError(f"{where(bad[0])} is not finite")
    bad = np.argwhere(matrices <= 0)
    if len(bad):
        raise ValueError(f"{where(bad[0])} must be positive, got {matrices[tuple(bad[0])]:.10g}")
    products = matrices * np.swapaxes(matrices, -1, -2)
    bad = np.argwhere(np.abs(products - 1.0) > _RECIPROCAL_TOLERANCE)
    if len(bad):
        *batch, row, column = (int(i) for i in bad[0])
        prefix = f"{name}[{', '.join(map(str, batch))}]" if batch else name
        if row == column:
            raise ValueError(
                f"{prefix} must have 1 on the diagonal, entry ({row}, {row}) is {matrices[tuple(bad[0])]:.10g}"
            )
        raise ValueError(
            f"{prefix} is not reciprocal: entries ({row}, {column}) and ({column}, {row}) "
            f"multiply to {products[tuple(bad[0])]:.10g}, expected 1"
        )
    return matrices


def _surely_valid(matrices: np.ndarray) -> bool:
    """The checks of :func:`_validated_matrices` as a few whole-array
    reductions: True exactly when they find nothing (NaN fails every
    comparison), so only a defective stack pays for locating its first
    defect. Each pair's product is formed once (``o_ij o_ji`` and ``o_ji
    o_ij`` are the same product), the diagonal's too."""
    n = matrices.shape[-1]
    if not matrices.size:
        return True
    if not (matrices.min() > 0 and np.isfinite(matrices.max())):
        return False
    diagonal = np.diagonal(matrices, axis1=-2, axis2=-1)
    if not np.abs(diagonal * diagonal - 1.0).max() <= _RECIPROCAL_TOLERANCE:
        return False
    if n == 1:
        return True
    rows, columns = _upper_pairs(n)
    products = matrices[..., rows, columns] * matrices[..., columns, rows]
    return bool(np.abs(products - 1.0).max() <= _RECIPROCAL_TOLERANCE)


@functools.lru_cache(maxsize=64)
def _upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the pairs ``i < j`` of an n x n matrix."""
    return np.triu_indices(n, k=1)


def _on_scale(value: float) -> bool:
    return SCALE_MIN * (1 - SCALE_ENGINE_SLACK) <= value <= SCALE_MAX * (1 + SCALE_ENGINE_SLACK)


# --------------------------------------------------------------------------
# Pairwise comparison matrices
# --------------------------------------------------------------------------


def pairwise_matrix(n: object, judgments: Iterable[Any]) -> np.ndarray:
    """Build a reciprocal pairwise comparison matrix from upper-triangle judgments.

    ``o_ii = 1``; a judgment ``(i, j, v)`` sets ``o_ij = v`` and
    ``o_ji = 1 / v`` (METHOD.md 3). Every unordered pair ``{i, j}`` must be
    judged exactly once, in either orientation.

    Parameters
    ----------
    n : int
        Number of attributes, ``n >= 1``.
    judgments : iterable of (int, int, float)
        ``(row_index, col_index, value)``, 0-based indices, value in
        [1/9, 9] (a relative slack of 1e-9 accepts rounded reciprocals such
        as 0.1111111111).

    Returns
    -------
    ndarray of shape (n, n)

    Raises
    ------
    ValueError
        For an index out of range, ``row == col``, a pair judged twice, a
        value that is not finite or off the scale, and for missing pairs
        (all listed).
    """
    size = _check_size(n)
    matrix = np.eye(size)
    judged: dict[tuple[int, int], tuple[int, int]] = {}
    try:
        listed = list(judgments)
    except TypeError:
        raise ValueError("judgments must be an iterable of (row, column, value)") from None
    for position, judgment in enumerate(listed):
        try:
            row, column, value = judgment
            row, column = operator.index(row), operator.index(column)
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"judgment {position} must be (row index, column index, value), got {judgment!r}"
            ) from None
        for index_name, index in (("row", row), ("column", column)):
            if not 0 <= index < size:
                raise ValueError(f"judgment {position}: {index_name} index {index} is out of range 0..{size - 1}")
        if row == column:
            raise ValueError(f"judgment {position}: row == column ({row}); the diagonal is always 1")
        pair = (min(row, column), max(row, column))
        if pair in judged:
            raise ValueError(
                f"judgment {position}: pair {pair} is judged twice (first as {judged[pair]}, again as {(row, column)})"
            )
        if not math.isfinite(value):
            raise ValueError(f"judgment {position} ({row}, {column}): value {value} is not finite")
        if not _on_scale(value):
            raise ValueError(f"judgment {position} ({row}, {column}): value {value:.10g} is outside the scale 1/9..9")
        judged[pair] = (row, column)
        matrix[row, column] = value
        matrix[column, row] = 1.0 / value
    missing = [(i, j) for i in range(size) for j in range(i + 1, size) if (i, j) not in judged]
    if missing:
        raise ValueError(
            f"every pair of the {size} attributes must be judged once; missing pairs: " + ", ".join(map(str, missing))
        )
    return matrix


def ahp_weights(matrix: ArrayLike, weighting: str = AHP_WEIGHTING_DEFAULT) -> np.ndarray:
    """AHP weights of one matrix or a stack, by one of ``AHP_WEIGHTINGS``.

    * ``"column_means"`` (the default, the paper's method, source 000's
      appendix): row averages of the column-normalised matrix,
      ``w_i = (1/n) sum_j o_ij / sum_k o_kj`` (Saaty 1980's approximation of
      the principal eigenvector, exact for a consistent matrix
      ``o_ij = w_i / w_j``);
    * ``"eigenvector"``: the principal (Perron) eigenvector, as AHP-OS, AHPy
      and Expert Choice compute it (:func:`principal_eigenvectors`);
    * ``"geometric_mean"``: the row geometric mean method (Crawford &
      Williams 1985; offered by AHP-OS), ``w_i ∝ (prod_j o_ij)^(1/n)``.

    All three agree on a consistent matrix. Vectorised: a stack (..., n, n)
    gives (..., n) weights without a Python loop over the matrices.

    Parameters
    ----------
    matrix : array-like of shape (..., n, n)
        Positive reciprocal matrices (a stack gives one weight vector each).
    weighting : one of ``engine.rules.AHP_WEIGHTINGS``

    Returns
    -------
    ndarray of shape (..., n), each vector summing to 1.
    """
    _check_weighting(weighting)
    return _ahp_arrays(_validated_matrices(matrix), weighting, with_ratios=False)[0]


def ahp_priorities(matrices: ArrayLike, weighting: str = AHP_WEIGHTING_DEFAULT) -> tuple[np.ndarray, np.ndarray]:
    """AHP weights and consistency ratios of a stack, in one pass.

    What ``(ahp_weights(matrices, weighting), consistency_ratios(matrices))``
    gives, validating once and running the Perron kernel once: the
    eigenvector weighting's weights are the vectors whose roots give the
    ratios.

    Parameters
    ----------
    matrices : array-like of shape (..., n, n)
    weighting : one of ``engine.rules.AHP_WEIGHTINGS``

    Returns
    -------
    weights : ndarray of shape (..., n), each vector summing to 1
    ratios : ndarray of shape (...)
    """
    _check_weighting(weighting)
    weights, ratios = _ahp_arrays(_validated_matrices(matrices, "matrices"), weighting, with_ratios=True)
    return weights, cast(np.ndarray, ratios)


def _check_weighting(weighting: str) -> None:
    if weighting not in AHP_WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(AHP_WEIGHTINGS)}, got {weighting!r}")


def _ahp_arrays(checked: np.ndarray, weighting: str, *, with_ratios: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Weights by ``weighting`` and, if asked, the consistency ratios, of validated matrices."""
    n = checked.shape[-1]
    flat = checked.reshape(-1, n, n)
    # Geometric mean: exp of the mean log, the n-th root of the row product
    # without overflowing (9^n) for large n.
    weights = np.exp(np.log(flat).mean(axis=-1)) if weighting == "geometric_mean" else _column_means(flat)
    roots = np.full(len(flat), float(n))  # lambda_max = n for n <= 2
    if weighting == "eigenvector" or (with_ratios and n > 2):
        vectors, roots = _perron(flat, weights, vectors=weighting == "eigenvector")
        if weighting == "eigenvector":
            weights = vectors
    ratios = None
    if with_ratios:
        ratios = _consistency_of_roots(roots, n)[2] if n > 2 else np.zeros(len(flat))
    # The sum is 1 mathematically; dividing makes it 1 to the last bit too.
    weights = weights / weights.sum(axis=-1, keepdims=True)
    batch = checked.shape[:-2]
    return weights.reshape(*batch, n), None if ratios is None else ratios.reshape(batch)


#: The Perron kernel (:func:`_perron`). A weight vector has settled when
#: its step moved it by at most _POWER_TOLERANCE (Euclidean norm, so no
#: weight moved by more); a root is known when its Collatz-Wielandt bracket
#: is within _ROOT_TOLERANCE of it (relative). A matrix not done within
#: _POWER_MAX_STEPS steps is finished by an eigensolve. The iteration first
#: steps with ``O^(2^_POWER_SQUARINGS)`` down to _POWER_COARSE_TOLERANCE.
_POWER_TOLERANCE = 1e-15
_ROOT_TOLERANCE = 1e-13
_POWER_MAX_STEPS = 1000
_POWER_SQUARINGS = 4
_POWER_COARSE_TOLERANCE = 1e-13


def _power_iteration(
    matrices: np.ndarray, start: np.ndarray, *, tolerance: float | None, bracket: bool, max_steps: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``w <- M w / sum(M w)`` on a stack (m, n, n) at once, from ``start`` (m, n).

    ``start`` sums to 1 per matrix, and so does every step. A matrix is done
    when its step moved ``w`` by at most ``tolerance`` (Euclidean norm; not
    asked if None) and, with ``bracket``, when the Collatz-Wielandt bracket
    ``[min_i (M w)_i / w_i, max_i (M w)_i / w_i]``, which holds the Perron
    root of a positive ``M`` for any positive ``w``, is narrower than
    ``_ROOT_TOLERANCE`` times ``sum(M w)``, the root reported (a weighted
    mean of those ratios; the bracket also bounds every weight's relative
    move). The done leave the batch together, once they are a quarter of
    it, so each step stays one batched ``matmul``; those kept a few steps
    longer only move within rounding. A root is the one of the step whose
    bracket first closed, so it does not depend on what else is in the
    batch, nor on whether the weights were asked to settle further: the
    weightings' ratios agree to the last bit.

    Returns the weights (where the iteration left them, ``start`` where a
    product stopped being finite), the roots (NaN where not done) and the
    indices of the matrices not done.
    """
    count, n = start.shape
    ones = np.ones(n)
    squared_tolerance = 0.0 if tolerance is None else tolerance * tolerance
    weights = start.copy()
    found = np.full(count, np.nan)
    index = np.arange(count)
    active_matrices, active, roots = matrices, start, np.full(count, np.nan)
    done = np.zeros(count, dtype=bool)
    broken = np.zeros(count, dtype=bool)
    unfinished = [np.empty(0, dtype=np.intp)]
    for _ in range(max_steps):
        step = np.matmul(active_matrices, active[..., None])[..., 0]
        totals = step @ ones
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            settled = np.isfinite(totals)
            if bracket:
                ratios = step / active
                settled &= ratios.max(axis=-1) - ratios.min(axis=-1) <= _ROOT_TOLERANCE * totals
                first = settled & np.isnan(roots)
                roots[first] = totals[first]
            step /= totals[:, None]
            moved = step - active
            change = (moved * moved) @ ones
        if tolerance is not None:
            settled &= change <= squared_tolerance
        done |= settled
        broken = ~np.isfinite(change) & ~done  # an overflowing product
        active = step
        leaving = done | broken
        if 4 * np.count_nonzero(leaving) >= len(leaving):
            weights[index[done]] = active[done]
            found[index[done]] = roots[done]
            unfinished.append(index[broken])
            index, active_matrices, active = index[~leaving], active_matrices[~leaving], active[~leaving]
            roots, done, broken = roots[~leaving], done[~leaving], broken[~leaving]
            if not len(index):
                break
    weights[index[done]] = active[done]
    found[index[done]] = roots[done]
    left = ~done & ~broken
    weights[index[left]] = active[left]
    unfinished.append(index[~done])
    return weights, found, np.sort(np.concatenate(unfinished))


def _perron(matrices: np.ndarray, start: np.ndarray, *, vectors: bool) -> tuple[np.ndarray, np.ndarray]:
    """Perron vectors (summing to 1) and Perron roots of positive matrices.

    The one kernel behind the eigenvector weighting and every consistency
    ratio. ``matrices`` (m, n, n) validated positive, ``start`` (m, n)
    positive (the column-means weights). A positive matrix has a simple
    dominant eigenvalue, real and positive, with a positive eigenvector
    (Perron), so the power iteration ``w <- O w / sum(O w)`` converges for
    every matrix, at the rate ``|lambda_2| / lambda_max``. It runs batched,
    first on ``O^16`` (four squarings, one batched ``matmul`` each, scaled
    so they cannot grow), which has ``O``'s eigenvectors and converges 16
    times faster, to 1e-13; then on ``O`` itself, which gives the root
    ``lambda_max = sum(O w)``, until the Collatz-Wielandt bracket pins the
    root to 1e-13 (relative; one step, mostly) and, if ``vectors`` are
    wanted, the weights settle (1e-15). A matrix still moving
    after 1000 steps of either (a second eigenvalue nearly as large, never
    met on the 1..9 scale) or whose products overflow (entries far off the
    scale) is finished by ``numpy.linalg.eig``. Agrees with numpy's
    eigensolve to 1e-12 in the weights and in ``lambda_max`` (tests).
    Without ``vectors`` the returned weights are only as settled as the
    root needed.
    """
    count, n = start.shape
    start = start / start.sum(axis=-1, keepdims=True)
    if count == 0:
        return start, np.empty(0)
    power = matrices
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(_POWER_SQUARINGS):
            power = np.matmul(power, power)
            # Any positive scale will do (only directions matter); a fresh
            # array, not a view of power, keeps this one cheap pass.
            power *= (1.0 / power[:, 0, 0])[:, None, None]
    coarse, _, _ = _power_iteration(
        power, start, tolerance=_POWER_COARSE_TOLERANCE, bracket=False, max_steps=_POWER_MAX_STEPS
    )
    weights, roots, unfinished = _power_iteration(
        matrices, coarse, tolerance=_POWER_TOLERANCE if vectors else None, bracket=True, max_steps=_POWER_MAX_STEPS
    )
    for m in unfinished.tolist():
        values, eigenvectors = np.linalg.eig(matrices[m])
        principal = int(np.argmax(values.real))
        vector = np.abs(eigenvectors[:, principal].real)
        weights[m] = vector / vector.sum()
        roots[m] = values.real[principal]
    return weights / weights.sum(axis=-1, keepdims=True), roots


def _column_means(matrices: np.ndarray) -> np.ndarray:
    """Row averages of the column-normalised matrices (m, n, n), not yet
    summing to 1 exactly: ``w_i = (1/n) sum_j o_ij / s_j`` with the column
    sums ``s``, as two batched products (no (m, n, n) temporary)."""
    n = matrices.shape[-1]
    column_sums = np.matmul(np.ones(n), matrices)  # (m, n)
    return np.matmul(matrices, (1.0 / column_sums)[..., None])[..., 0] / n


def principal_eigenvectors(matrices: ArrayLike) -> np.ndarray:
    """The principal (Perron) eigenvectors of a stack of positive matrices,
    normalised to sum 1, by the batched power iteration of :func:`_perron`
    (from the column-means weights). Agrees with numpy's principal
    eigenvector to 1e-12 (tests).

    Parameters
    ----------
    matrices : array-like of shape (..., n, n), positive

    Returns
    -------
    ndarray of shape (..., n)
    """
    stack = np.asarray(matrices, dtype=np.float64)
    n = stack.shape[-1]
    flat = stack.reshape(-1, n, n)
    weights, _ = _perron(flat, _column_means(flat), vectors=True)
    return weights.reshape(stack.shape[:-1])


def lpr_weights(matrix: ArrayLike) -> np.ndarray:
    """Large preference relation weights (Fodor & Roubens; METHOD.md 3).

    METHOD.md writes ``w_i = sum_j r_ij / (n * sum_k r_kj)``. Read literally,
    the index ``j`` of the denominator is bound by the outer sum, so the
    formula is ``w_i = sum_j [ r_ij / (n * sum_k r_kj) ]``: every column is
    divided by ``n`` times its sum and the rows are added up. That is what is
    computed. Summed over ``i`` it gives ``sum_j (1/n) = 1`` for any positive
    matrix, so these weights sum to 1 up to rounding; checked numerically on
    10,000 random reciprocal matrices (n = 2..12, entries on the 1/9..9
    scale, seed 0) the largest deviation was 2.2e-16. The result is
    nevertheless divided by its sum so that it is exactly 1, as for every
    weight vector of the method.

    The other conceivable reading, ``(sum_j r_ij) / (n * sum_k r_ki)`` (row
    sum over ``n`` times the column sum of the same index), is not used: it
    does not sum to 1 (2.347 for Saaty's 3x3 example [[1, 3, 5], [1/3, 1, 3],
    [1/5, 1/3, 1]]; between 0.98 and 5.78 on the matrices above), and even after renormalising it returns ``w_i^2 / sum
    w^2`` instead of ``w`` on a consistent matrix ``r_ij = w_i / w_j``.

    With the literal reading the LPR weights of a matrix coincide with its
    AHP weights; the methods differ in how the expert reads the scale
    (interval scale of preference intensity vs Saaty's ordinal scale).

    Parameters
    ----------
    matrix : array-like of shape (..., n, n)
        Positive reciprocal matrices ``r_ji = 1 / r_ij``.

    Returns
    -------
    ndarray of shape (..., n), each vector summing to 1.
    """
    checked = _validated_matrices(matrix)
    n = checked.shape[-1]
    column_sums = checked.sum(axis=-2, keepdims=True)
    weights = (checked / (n * column_sums)).sum(axis=-1)
    return weights / weights.sum(axis=-1, keepdims=True)


# --------------------------------------------------------------------------
# Consistency
# --------------------------------------------------------------------------


def random_index(n: object) -> float:
    """Saaty's random consistency index ``RI(n)``.

    n = 1, 2: 0. n = 3..10: 0.58, 0.90, 1.12, 1.24, 1.32, 1.41, 1.45, 1.49
    (Saaty 1980). n = 11..15: 1.51, 1.48, 1.56, 1.57, 1.59 (Saaty's extended
    table). n > 15: Alonso & Lamata (2006) regression
    ``lambda_bar = 2.7699 n - 4.3513``, ``RI = (lambda_bar - n) / (n - 1)``
    (1.598 at n = 16, tending to 1.7699).
    """
    size = _check_size(n)
    if size in _RANDOM_INDEX_TABLE:
        return _RANDOM_INDEX_TABLE[size]
    mean_lambda_max = _ALONSO_LAMATA_SLOPE * size + _ALONSO_LAMATA_INTERCEPT
    return (mean_lambda_max - size) / (size - 1)


def _consistency_of_roots(lambda_max: np.ndarray, n: int) -> tuple[np.ndarray, float, np.ndarray]:
    """``CI`` (clamped at 0), ``RI(n)`` and ``CR`` from the principal eigenvalues."""
    # lambda_max >= n for every positive reciprocal matrix (Saaty), so a
    # negative index can only be rounding of a consistent matrix.
    consistency_index = np.maximum((lambda_max - n) / (n - 1), 0.0)
    index = random_index(n)
    return consistency_index, index, consistency_index / index


def _consistency_arrays(matrices: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    n = matrices.shape[-1]
    batch = matrices.shape[:-2]
    if n <= 2:
        lambda_max = np.full(batch, float(n))
        return lambda_max, np.zeros(batch), 0.0, np.zeros(batch)
    # The Perron root of a positive matrix is its principal eigenvalue:
    # real, simple and the largest in modulus (the kernel of _perron).
    flat = matrices.reshape(-1, n, n)
    _, lambda_max = _perron(flat, _column_means(flat), vectors=False)
    consistency_index, index, ratio = _consistency_of_roots(lambda_max, n)
    return lambda_max.reshape(batch), consistency_index.reshape(batch), index, ratio.reshape(batch)


def consistency(matrix: ArrayLike) -> Consistency:
    """Saaty's consistency of one pairwise comparison matrix.

    ``lambda_max`` is the principal eigenvalue of ``O``,
    ``CI = (lambda_max - n) / (n - 1)`` (clamped at 0 against rounding),
    ``CR = CI / RI(n)`` with :func:`random_index`; ``CR = 0`` for ``n <= 2``.

    Parameters
    ----------
    matrix : array-like of shape (n, n)

    Returns
    -------
    Consistency
    """
    checked = _validated_matrices(matrix, stack=False)
    lambda_max, consistency_index, index, ratio = _consistency_arrays(checked)
    return Consistency(
        lambda_max=float(lambda_max),
        consistency_index=float(consistency_index),
        random_index=float(index),
        ratio=float(ratio),
    )


def consistency_ratios(matrices: ArrayLike) -> np.ndarray:
    """Consistency ratios of a stack of matrices, batched (no Python loop).

    Same definition as :func:`consistency`, for ``matrices`` of shape
    (..., n, n); returns an ndarray of shape (...) (0-d for one matrix).
    """
    return _consistency_arrays(_validated_matrices(matrices, "matrices"))[3]


def _top(top: object) -> int:
    """How many hints are asked for: a non-negative integer (ValueError otherwise)."""
    if isinstance(top, bool):
        raise ValueError(f"top must be a non-negative integer, got {top!r}")
    try:
        count = operator.index(cast(SupportsIndex, top))  # a TypeError otherwise, caught
    except TypeError:
        raise ValueError(f"top must be a non-negative integer, got {top!r}") from None
    if count < 0:
        raise ValueError(f"top must be a non-negative integer, got {count}")
    return count


def most_inconsistent(matrix: ArrayLike, weights: ArrayLike, *, top: object = 3) -> list[InconsistentJudgment]:
    """The judgments that disagree most with the weights, with repair hints.

    For each judged pair ``i < j``, ``eps_ij = o_ij * w_j / w_i`` and
    ``error = max(eps_ij, 1 / eps_ij)`` (1 means fully consistent). Pairs are
    sorted by error, largest first (ties in row, column order), and the first
    ``top`` returned, each with ``suggested_value``: ``w_i / w_j`` rounded to
    the nearest value of Saaty's scale {1/9, ..., 1/2, 1, 2, ..., 9},
    nearest in log space, a tie to the smaller value
    (:func:`engine.rules.nearest_scale_point`; Saaty 2003).

    Parameters
    ----------
    matrix : array-like of shape (n, n)
    weights : array-like of shape (n,)
        Positive weights, normally derived from ``matrix``.
    top : int, default 3

    Returns
    -------
    list of InconsistentJudgment (empty for n < 2 or top == 0).
    """
    checked = _validated_matrices(matrix, stack=False)
    n = checked.shape[0]
    try:
        positive = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"weights must be an array of numbers: {exc}") from None
    if positive.shape != (n,):
        raise ValueError(f"weights must have shape ({n},) as the matrix, got {positive.shape}")
    bad = np.flatnonzero(~np.isfinite(positive) | (positive <= 0))
    if len(bad):
        raise ValueError(f"weights must be positive and finite; position {bad[0]} is {positive[bad[0]]:.10g}")
    count = _top(top)

    rows, columns = np.triu_indices(n, k=1)
    deviation = checked[rows, columns] * positive[columns] / positive[rows]
    errors = np.maximum(deviation, 1.0 / deviation)
    order = np.argsort(-errors, kind="stable")[:count]
    return [
        InconsistentJudgment(
            row=int(rows[p]),
            column=int(columns[p]),
            value=float(checked[rows[p], columns[p]]),
            error=float(errors[p]),
            suggested_value=float(nearest_scale_point(positive[rows[p]] / positive[columns[p]])),
        )
        for p in order
    ]


#: The judged pairs :func:`smallest_repairs` tries, each at the 16 other
#: points of the scale: every pair up to 10 items (45 pairs), beyond that
#: the 45 of largest Saaty error, so a page's live check stays fast.
REPAIR_PAIRS_SEARCHED = 45


@dataclass(frozen=True)
class Repair:
    """One judgment ``(row, column)``, ``row < column``, moved from ``value``
    to the scale point ``suggested_value``, ``steps`` points of the scale
    away (1/2 to 1 is one step, 5 to 1/4 seven), and the consistency ratio
    ``ratio`` the judgments would have with that one change."""

    row: int
    column: int
    value: float
    suggested_value: float
    steps: int
    ratio: float

    @property
    def is_consistent(self) -> bool:
        return is_consistent(self.ratio)


def smallest_repairs(matrix: ArrayLike, *, top: object = 3) -> list[Repair]:
    """The smallest changes of one judgment each that make ``matrix`` consistent.

    Every judged pair ``i < j`` is tried at each other point of Saaty's
    scale (its reciprocal mirrored) and the consistency ratio recomputed, in
    one batch (:func:`consistency_ratios`). A pair's repair is the point
    nearest its judgment, in steps of the scale, among those giving a
    consistent matrix (``CR <= CONSISTENCY_THRESHOLD``; equal steps: the
    lower ratio). Repairs come fewest steps first, then lower ratio, then
    row and column order, so the first is the least the expert must change.
    When no single change makes the judgments consistent, each pair's point
    of lowest ratio (equal ratios: the nearer) stands in, lowest ratio
    first, if it lowers the ratio at all.

    Unlike :func:`most_inconsistent`, which names the judgments that
    disagree most with the weights and the value the weights imply (for a
    cyclic matrix, whose weights are near equal, "equally important" for
    each, however strong the judgment), this never suggests more change
    than consistency needs. Pairs beyond ``REPAIR_PAIRS_SEARCHED`` (more
    than 10 items) are tried in order of Saaty's error, largest first.

    Parameters
    ----------
    matrix : array-like of shape (n, n)
    top : int, default 3

    Returns
    -------
    list of Repair (empty for a consistent matrix, n < 3 or top == 0).
    """
    checked = _validated_matrices(matrix, stack=False)
    count = _top(top)
    n = checked.shape[0]
    before = float(consistency_ratios(checked))
    if n < 3 or count == 0 or is_consistent(before):
        return []
    rows, columns = np.triu_indices(n, k=1)
    if len(rows) > REPAIR_PAIRS_SEARCHED:
        weights = _column_means(checked[None])[0]
        deviation = checked[rows, columns] * weights[columns] / weights[rows]
        worst = np.argsort(-np.maximum(deviation, 1.0 / deviation), kind="stable")[:REPAIR_PAIRS_SEARCHED]
        rows, columns = rows[np.sort(worst)], columns[np.sort(worst)]
    points = len(SCALE_VALUES)
    pairs = len(rows)
    stack = np.repeat(checked[None], pairs * points, axis=0)
    which = np.arange(pairs * points)
    pair_of, point_of = which // points, which % points
    stack[which, rows[pair_of], columns[pair_of]] = SCALE_VALUES[point_of]
    stack[which, columns[pair_of], rows[pair_of]] = 1.0 / SCALE_VALUES[point_of]
    ratios = consistency_ratios(stack).reshape(pairs, points)
    current = np.array([_scale_index(v) for v in checked[rows, columns]])
    steps = np.abs(np.arange(points)[None, :] - current[:, None])
    ratios[np.arange(pairs), current] = np.inf  # the judgment as it is: no change
    repairs = []
    for p in range(pairs):
        good = np.flatnonzero(ratios[p] <= CONSISTENCY_THRESHOLD)
        if len(good):
            k = min(good.tolist(), key=lambda k: (steps[p, k], ratios[p, k]))
        else:
            k = min(range(points), key=lambda k: (ratios[p, k], steps[p, k]))
        repairs.append(
            Repair(
                row=int(rows[p]),
                column=int(columns[p]),
                value=float(checked[rows[p], columns[p]]),
                suggested_value=float(SCALE_VALUES[k]),
                steps=int(steps[p, k]),
                ratio=float(ratios[p, k]),
            )
        )
    consistent = [r for r in repairs if r.is_consistent]
    if consistent:
        return sorted(consistent, key=lambda r: (r.steps, r.ratio, r.row, r.column))[:count]
    better = [r for r in repairs if r.ratio < before]
    return sorted(better, key=lambda r: (r.ratio, r.steps, r.row, r.column))[:count]


def _scale_index(value: float) -> int:
    """The position of the scale point nearest ``value`` (0 for 1/9, 16 for 9)."""
    return SCALE_POINTS.index(nearest_scale_point(value))


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def _direct_weights(n: int, given: Iterable[Any]) -> np.ndarray:
    try:
        weights = list(given)
    except TypeError:
        raise ValueError("weights must be a sequence of positive numbers") from None
    if len(weights) != n:
        raise ValueError(f"weights must have {n} values, one per attribute, got {len(weights)}")
    values = []
    for position, weight in enumerate(weights):
        try:
            if isinstance(weight, bool):
                raise TypeError
            value = float(weight)
        except (TypeError, ValueError):
            raise ValueError(f"weight at position {position} is not a number: {weight!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"weight at position {position} is not finite: {weight!r}")
        if value <= 0:
            raise ValueError(f"weight at position {position} must be positive (no zero weights), got {weight!r}")
        values.append(value)
    normalised = direct_shares(values)
    # A share that rounds to 0 (or to 1, leaving the others nothing) is
    # refused, not stored.
    extreme = out_of_proportion(normalised)
    if len(extreme):
        raise ValueError(
            f"weight at position {int(extreme[0])} is out of proportion with the others: "
            f"its share of the total would be {normalised[extreme[0]]:.3g}, but every share "
            f"must lie strictly between 0 and 1 (at least {MIN_DIRECT_SHARE:g})"
        )
    return normalised


def prioritise(
    method: str,
    n: object,
    judgments: Iterable[Any] | None = None,
    weights: Iterable[Any] | None = None,
    *,
    weighting: str = AHP_WEIGHTING_DEFAULT,
    repairs: bool = False,
) -> Prioritisation:
    """An expert's weights over ``n`` attributes by one of the METHOD.md 3 methods.

    Parameters
    ----------
    method : {"direct", "ahp", "lpr"}
    n : int
        Number of attributes, ``n >= 1``.
    judgments : iterable of (int, int, float), for "ahp" and "lpr"
        Upper-triangle judgments, see :func:`pairwise_matrix`.
    weights : sequence of n numbers, for "direct"
        Positive and finite in any unit (e.g. percentages); normalised to 1.
    weighting : one of ``engine.rules.AHP_WEIGHTINGS``, for "ahp"
        How the weights come from the matrix (:func:`ahp_weights`); the
        study's setting. LPR keeps its own formula.
    repairs : bool, default False
        Also compute :func:`smallest_repairs` (the expert's page does; a
        save does not need them).

    Returns
    -------
    Prioritisation
        ``weights`` (n,) summing to 1. For "direct" ``consistency_ratio`` is
        None and ``most_inconsistent`` empty; for "ahp" and "lpr" they are
        the matrix's :func:`consistency` ratio and the top three of
        :func:`most_inconsistent` against the method's weights, and with
        ``repairs`` the top three of :func:`smallest_repairs`.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    size = _check_size(n)
    if method == "direct":
        if judgments is not None:
            raise ValueError("direct prioritisation takes weights, not judgments")
        if weights is None:
            raise ValueError("direct prioritisation needs weights")
        return Prioritisation(weights=_direct_weights(size, weights))

    if weights is not None:
        raise ValueError(f"{method} prioritisation takes judgments, not weights")
    if judgments is None:
        if size > 1:
            raise ValueError(f"{method} prioritisation needs judgments")
        judgments = ()
    matrix = pairwise_matrix(size, judgments)
    if method == "ahp":
        method_weights, ratio = ahp_priorities(matrix, weighting)
    else:
        method_weights, ratio = lpr_weights(matrix), consistency_ratios(matrix)
    return Prioritisation(
        weights=method_weights,
        consistency_ratio=float(ratio),
        most_inconsistent=most_inconsistent(matrix, method_weights, top=3),
        repairs=smallest_repairs(matrix, top=3) if repairs else [],
    )
