"""Metric elicitation from pairwise preferences (METHOD.md 7.3).

Hiranandani, Boodaghians, Mehta, Koyejo: "Multiclass Performance Metric
Elicitation" (source 003). An expert who cannot state class trade-offs as
numbers answers questions "which of these two confusions do you prefer?";
a binary search over a one-parameter family of confusions recovers the
weights of a linear metric of the confusion matrix.

* Diagonal linear metrics ``psi(d) = <a, d>`` (weighted accuracy, ``a >= 0``,
  ``||a||_1 = 1``), source 003 Algorithm 1: :class:`DiagonalElicitation`,
  :func:`elicit_diagonal`, on the restricted Bayes-optimal confusions of
  :func:`restricted_bayes_diagonal`.
* Linear metrics of the off-diagonal confusions ``phi(c) = <a, c>``
  (cost-sensitive errors, ``a <= 0``, ``||a||_2 = 1``), source 003
  Algorithm 2: :class:`OffDiagonalElicitation`, :func:`elicit_offdiagonal`.

``eta`` is always an ``(n_samples, k)`` array of class probabilities
``eta_i(x) = P(Y = i | X = x)``, one row per sample, rows summing to 1; a
confusion is a population quantity, ``C_ij = P(Y = i, h = j)``, estimated as
the mean over the rows of ``eta_i(x) P(h(x) = j)``, so confusions are
fractions of all samples. Classes are 0-based; class 0 is the reference
class of Algorithm 1 (the source's class 1).

Every question is answered with ``True`` ("I prefer the first") or
``False`` ("I prefer the second, or have no preference"): the source's
oracle ``1[phi(first) > phi(second)]``. An elicitation's state is its list
of answers: to resume one (e.g. across web requests), build it again with
the same ``eta`` and replay :attr:`~DiagonalElicitation.answers`.

Pure NumPy; no Django import.
"""

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Self, SupportsFloat, cast

import numpy as np
from numpy.typing import ArrayLike

from ._checks import integer, renormalised_rows

__all__ = [
    "DiagonalElicitation",
    "OffDiagonalElicitation",
    "elicit_diagonal",
    "elicit_offdiagonal",
    "restricted_bayes_diagonal",
    "uniform_offdiagonal",
]

# Above this condition number the second moments of eta are taken as
# singular: the classes cannot be told apart, and no sphere of confusions
# around the uniform classifier exists (source 003, Assumption 2).
_SINGULAR = 1e12

# Each round of the binary search compares, in this order, the five points
# (a, c, d, e, b) = interval start, quarter, middle, three quarters, end:
# Omega(c, a), Omega(d, c), Omega(e, d), Omega(b, e) (source 003, Alg. 1, 2).
_QUERIED_POINTS = ((1, 0), (2, 1), (3, 2), (4, 3))
_QUERIES_PER_ROUND = len(_QUERIED_POINTS)


# --------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------


def _validated_eta(eta: ArrayLike) -> np.ndarray:
    try:
        eta = np.asarray(eta, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"eta must be an (n_samples, k) array of class probabilities: {exc}") from None
    if eta.ndim != 2 or eta.shape[0] == 0 or eta.shape[1] < 2:
        raise ValueError(
            f"eta must be an (n_samples, k) array of class probabilities with n_samples >= 1 and k >= 2, "
            f"got shape {eta.shape}"
        )
    if not np.isfinite(eta).all():
        raise ValueError(f"eta must be finite; row {int(np.argwhere(~np.isfinite(eta))[0, 0])} is not")
    outside = np.flatnonzero(((eta < 0) | (eta > 1)).any(axis=1))
    if len(outside):
        raise ValueError(f"eta must lie in [0, 1]; row {int(outside[0])} does not ({len(outside)} rows in all)")
    return renormalised_rows(eta, "eta")


def _check_epsilon(epsilon: object, interval: float) -> float:
    try:
        # Whatever float() takes; anything else is refused below.
        epsilon = float(cast(SupportsFloat, epsilon))
    except (TypeError, ValueError):
        raise ValueError(f"epsilon must be a positive number, got {epsilon!r}") from None
    if not (math.isfinite(epsilon) and 0 < epsilon < interval):
        raise ValueError(
            f"epsilon must lie in (0, {interval:.6g}), the length of the searched interval; got {epsilon!r}"
        )
    return epsilon


def _check_answer(prefers_first: object) -> bool:
    if not isinstance(prefers_first, bool | np.bool_):
        raise ValueError(
            f"prefers_first must be True (first preferred) or False (second preferred, or no preference), "
            f"got {prefers_first!r}"
        )
    return bool(prefers_first)


def _rounds(interval: float, epsilon: float) -> int:
    """Halvings until the interval is no longer than epsilon (the while loops of Alg. 1, 2)."""
    rounds = 0
    while interval > epsilon:
        interval /= 2
        rounds += 1
    return rounds


def _shrink(low: float, high: float, responses: list[bool]) -> tuple[float, float]:
    """ShrinkInterval (source 003, Alg. 1 and 2): halve [low, high] around the maximum.

    The metric is unimodal along the searched boundary (source 003, Lemma
    2), so the first point that is not better than its left neighbour bounds
    the maximum on the right; the interval kept is always half as long.
    Once e beats d the maximum lies right of d whether or not b beats e: the
    source's rule asks that fourth question (its counts of questions include
    it) but never moves on its answer, and neither does this one.
    """
    quarter, middle, three_quarters = (3 * low + high) / 4, (low + high) / 2, (low + 3 * high) / 4
    c_over_a, d_over_c, e_over_d, _ = responses
    if not c_over_a or not d_over_c:
        return low, middle
    if not e_over_d:
        return quarter, three_quarters
    return middle, high


def _search_points(low: float, high: float) -> np.ndarray:
    return np.array([low, (3 * low + high) / 4, (low + high) / 2, (low + 3 * high) / 4, high])


# --------------------------------------------------------------------------
# Diagonal linear metrics (source 003, Algorithm 1)
# --------------------------------------------------------------------------


def _restricted_bayes_diagonal(eta: np.ndarray, m: float, i: int) -> np.ndarray:
    predicts_reference = m * eta[:, 0] >= (1 - m) * eta[:, i]
    diagonal = np.zeros(eta.shape[1])
    diagonal[0] = eta[predicts_reference, 0].sum() / len(eta)
    diagonal[i] = eta[~predicts_reference, i].sum() / len(eta)
    return diagonal


def restricted_bayes_diagonal(eta: ArrayLike, m: float, i: int) -> np.ndarray:
    """Diagonal confusions of the restricted Bayes-optimal classifier for classes 0 and ``i``.

    The classifier predicts class 0 when ``m eta_0(x) >= (1 - m) eta_i(x)``
    and class ``i`` otherwise (source 003, Proposition 2, with weights
    ``a_0 = m``, ``a_i = 1 - m``). Its diagonal confusions
    ``d_j = P(Y = j, h = j)`` are the means over the samples of
    ``eta_j(x) [h(x) = j]``; ``d`` is 0 outside classes 0 and ``i``. As
    ``m`` runs over [0, 1] this traces the upper boundary of the confusions
    restricted to the two classes, ``nu(m; 0, i)`` of source 003 section 3.1.

    Parameters
    ----------
    eta : array-like of shape (n_samples, k)
        Class probabilities, rows summing to 1.
    m : float in [0, 1]
    i : int in 1..k-1

    Returns
    -------
    ndarray of shape (k,)
    """
    eta = _validated_eta(eta)
    try:
        m = float(m)
    except (TypeError, ValueError):
        raise ValueError(f"m must be a number in [0, 1], got {m!r}") from None
    if not 0 <= m <= 1:
        raise ValueError(f"m must be a number in [0, 1], got {m!r}")
    k = eta.shape[1]
    i = integer(i, "i", minimum=1)
    if i >= k:
        raise ValueError(f"i must be a class index in 1..{k - 1} (class 0 is the reference), got {i}")
    return _restricted_bayes_diagonal(eta, m, i)


def _changing_range(eta: np.ndarray, i: int) -> tuple[float, float]:
    """The range of ``m`` over which the restricted classifier of classes 0 and ``i`` changes.

    A sample switches from class ``i`` to class 0 at ``m = eta_i / (eta_0 +
    eta_i)``; below the smallest such ``m`` every sample is predicted ``i``,
    from the largest on every one 0, so ``nu(m; 0, i)`` is constant there.
    The source's Assumption 1 rules such flat ends out, but finitely many
    samples always have them, and on a flat end the oracle's "no
    preference" reads as "the second": a search over all of [0, 1] can then
    walk away from the maximum (with source 003's own synthetic set-up and
    ``a_1 / a_0 = 5``, it ends 0.28 off). Searching this range instead finds
    the same maximum, since every confusion of the boundary is reached in it.
    """
    weight = eta[:, 0] + eta[:, i]
    informative = weight > 0
    if not informative.any():
        raise ValueError(f"eta gives classes 0 and {i} no probability in any sample: no question can compare them")
    switch_at = eta[informative, i] / weight[informative]
    low, high = float(switch_at.min()), float(switch_at.max())
    if low == high:
        raise ValueError(
            f"eta has the same ratio of classes {i} and 0 in every sample, so every classifier restricted to them "
            "predicts all one class or all the other: no question can weigh them"
        )
    return low, high


class _BinarySearchElicitation(ABC):
    """The question-and-answer loop shared by Algorithms 1 and 2 of source 003.

    A sequence of binary searches, each over an interval of one parameter
    that is halved every four answers, ``ceil(log2(length / epsilon))``
    times. Subclasses say which interval comes next, which query point a
    parameter value stands for, and what the final midpoint means.
    """

    def __init__(self, interval_length: float, n_searches: int, epsilon: object):
        self.epsilon = _check_epsilon(epsilon, interval_length)
        # The number of rounds is the source's for the full interval, so the
        # number of questions is known from the start, whatever interval a
        # search actually covers (never a longer one).
        self._rounds_per_search = _rounds(interval_length, self.epsilon)
        self._n_searches = n_searches
        self._answers: list[bool] = []
        self._search = 0
        self._start_search()

    # What each algorithm provides.
    @abstractmethod
    def _interval(self, search: int) -> tuple[float, float]:
        """Provided by each algorithm."""

    @abstractmethod
    def _query_point(self, search: int, value: float) -> np.ndarray:
        """Provided by each algorithm."""

    @abstractmethod
    def _found(self, search: int, value: float) -> None:
        """Provided by each algorithm."""

    @abstractmethod
    def _result(self) -> np.ndarray:
        """Provided by each algorithm."""

    @abstractmethod
    def _restart(self) -> None:
        """Provided by each algorithm: its own state as before the first answer."""

    def unanswered(self) -> "Self":
        """A new elicitation of the same probabilities and settings, before
        any answer: what the constructor would build, without checking and
        preparing ``eta`` again (that shares it, read-only). To resume a
        stored elicitation cheaply: ``prepared.unanswered()``, then
        :meth:`replay` the answers."""
        fresh = copy.copy(self)
        fresh._answers = []
        fresh._search = 0
        fresh._restart()
        fresh._start_search()
        return fresh

    def _start_search(self) -> None:
        self._responses: list[bool] = []
        self._round = 0
        if not self.finished:
            self._low, self._high = self._interval(self._search)
            self._load_points()

    def _load_points(self) -> None:
        # Computed when a question is asked, not when an answer moves the
        # search on: replaying stored answers computes no confusion at all,
        # only the two of the question asked after them (a web request's few
        # milliseconds).
        self._points: dict[int, np.ndarray] | None = None

    @property
    def n_queries(self) -> int:
        return len(self._answers)

    @property
    def total_queries(self) -> int:
        return _QUERIES_PER_ROUND * self._rounds_per_search * self._n_searches

    @property
    def finished(self) -> bool:
        return self._search >= self._n_searches

    @property
    def answers(self) -> tuple[bool, ...]:
        return tuple(self._answers)

    @property
    def search(self) -> int:
        """The search under way (0-based; ``n_searches`` when finished)."""
        return self._search

    def replay(self, answers: "Iterable[object]") -> None:
        """Record stored answers in order, as :meth:`answer` does each one."""
        for prefers_first in answers:
            self.answer(cast(bool, prefers_first))

    @property
    def weights(self) -> np.ndarray:
        self._require_finished()
        return self._result()

    def _require_finished(self) -> None:
        if not self.finished:
            raise ValueError(f"the elicitation is not finished: {self.total_queries - self.n_queries} questions remain")

    def next_query(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The pair of confusions ``(first, second)`` to compare, or None when finished."""
        if self.finished:
            return None
        first, second = _QUERIED_POINTS[len(self._responses)]
        return self._point(first).copy(), self._point(second).copy()

    def _point(self, index: int) -> np.ndarray:
        """Point ``index`` of the round's five, computed when first asked for."""
        if self._points is None:
            self._points = {}
        if index not in self._points:
            self._points[index] = self._query_point(self._search, _search_points(self._low, self._high)[index])
        return self._points[index]

    def answer(self, prefers_first: bool) -> None:
        """Record the answer to :meth:`next_query`: True when the first is preferred.

        False means the second is preferred, or neither.
        """
        if self.finished:
            raise ValueError("the elicitation is finished: there is no question to answer")
        prefers_first = _check_answer(prefers_first)
        self._answers.append(prefers_first)
        self._responses.append(prefers_first)
        if len(self._responses) < _QUERIES_PER_ROUND:
            return
        self._low, self._high = _shrink(self._low, self._high, self._responses)
        self._responses = []
        self._round += 1
        if self._round < self._rounds_per_search:
            self._load_points()
            return
        self._found(self._search, (self._low + self._high) / 2)
        self._search += 1
        self._start_search()


class DiagonalElicitation(_BinarySearchElicitation):
    """Elicit a diagonal linear metric (weighted accuracy) question by question.

    Source 003, Algorithm 1. For each class ``i = 1..k-1`` in turn, a
    binary search on ``m`` over the restricted Bayes-optimal confusions
    ``nu(m; 0, i)`` (:func:`restricted_bayes_diagonal`) finds the ``m`` the
    expert likes best; then ``a_i / a_0 = (1 - m) / m``. Each round asks
    four questions and halves the interval, ``ceil(log2(1 / epsilon))``
    times: ``4 (k - 1) ceil(log2(1 / epsilon))`` questions in all (56 for
    ``k = 3``, 84 for ``k = 4`` at ``epsilon = 0.01``; source 003, Table 2).
    The result is ``a / ||a||_1``.

    One departure from the source: the search covers the part of [0, 1]
    over which the restricted classifier changes with ``m`` (the ratios
    ``eta_i / (eta_0 + eta_i)`` of the samples), not all of [0, 1]; see
    ``_changing_range``. A ratio ``a_i / a_0`` outside what the samples can
    show is returned at the nearest end of that range, and said so: a search
    whose final interval still holds an end of the range is *at the edge*
    (:attr:`bounds`), its ratio only known to be at least (or at most) the
    ratio at the interval's other end. Every ratio beyond the edge gives the
    same answers, so no more questions on these probabilities can tell them
    apart (:attr:`ratio_ranges` says what they can show).

    Parameters
    ----------
    eta : array-like of shape (n_samples, k)
        Class probabilities, rows summing to 1 (e.g. a model's
        ``predict_proba`` on held-out data).
    epsilon : float, default 0.01
        In (0, 1): the final interval of ``m`` is at most this long.

    Attributes
    ----------
    n_queries : int
        Questions answered so far.
    total_queries : int
        Questions the whole elicitation asks.
    finished : bool
    weights : ndarray of shape (k,)
        The elicited ``a``: non-negative, summing to 1 (only when finished).
    ratios : ndarray of shape (k,)
        ``a_i / a_0`` as found (``ratios[0]`` is 1; only when finished).
    bounds : tuple of (str, float) or None, one per class 1..k-1
        None where the search ended inside the range the probabilities can
        show; ``("at least", r)`` where it ended at the edge of the largest
        ratios ``a_i / a_0`` they show (the true ratio is ``>= r``), ``("at
        most", r)`` at the edge of the smallest (only when finished).
    ratio_ranges : tuple of (float, float), one per class 1..k-1
        The smallest and largest ratio ``a_i / a_0`` the probabilities can
        show (the ends of the searched range of ``m``).
    answers : tuple of bool
        The answers so far, to replay on a new instance.
    """

    def __init__(self, eta: ArrayLike, *, epsilon: float = 0.01):
        # Column by column in memory: each question reads two whole columns.
        self._eta = np.asfortranarray(_validated_eta(eta))
        self._eta.setflags(write=False)
        self._k = self._eta.shape[1]
        self._ratios = np.ones(self._k)
        self._bounds: list[tuple[str, float] | None] = []
        # All checked now, rather than when the search reaches the class.
        self._ranges = [_changing_range(self._eta, i) for i in range(1, self._k)]
        super().__init__(1.0, self._k - 1, epsilon)

    def _restart(self) -> None:
        self._ratios = np.ones(self._k)
        self._bounds = []

    # Search s is over m for the pair of classes (0, s + 1).
    def _interval(self, search: int) -> tuple[float, float]:
        return self._ranges[search]

    def _query_point(self, search: int, value: float) -> np.ndarray:
        return _restricted_bayes_diagonal(self._eta, value, search + 1)

    def _found(self, search: int, value: float) -> None:
        self._ratios[search + 1] = (1 - value) / value
        self._bounds.append(_edge(self._ranges[search], self._low, self._high))

    def _result(self) -> np.ndarray:
        return self._ratios / self._ratios.sum()

    @property
    def ratios(self) -> np.ndarray:
        self._require_finished()
        return self._ratios.copy()

    @property
    def bounds(self) -> tuple[tuple[str, float] | None, ...]:
        self._require_finished()
        return tuple(self._bounds)

    @property
    def ratio_ranges(self) -> tuple[tuple[float, float], ...]:
        return tuple((_ratio_at(high), _ratio_at(low)) for low, high in self._ranges)


def _ratio_at(m: float) -> float:
    """The ratio ``a_i / a_0 = (1 - m) / m`` a restricted classifier's ``m`` stands for."""
    return (1 - m) / m if m > 0 else math.inf


def _edge(searched: tuple[float, float], low: float, high: float) -> tuple[str, float] | None:
    """Whether a search over ``searched`` that ended on ``[low, high]`` is at
    an edge of it, and the bound on ``a_i / a_0`` it then shows (module
    ``DiagonalElicitation.bounds``). Halving keeps an end of the range
    exactly, so the comparison is exact."""
    if low == searched[0]:
        return ("at least", _ratio_at(high))
    if high == searched[1]:
        return ("at most", _ratio_at(low))
    return None


def _run(
    elicitation: _BinarySearchElicitation, oracle: Callable[[np.ndarray, np.ndarray], bool]
) -> tuple[np.ndarray, int]:
    while (query := elicitation.next_query()) is not None:
        elicitation.answer(oracle(*query))
    return elicitation.weights, elicitation.n_queries


def elicit_diagonal(
    oracle: Callable[[np.ndarray, np.ndarray], bool], eta: ArrayLike, *, epsilon: float = 0.01
) -> tuple[np.ndarray, int]:
    """Run :class:`DiagonalElicitation` (source 003, Algorithm 1) against an oracle.

    ``oracle(d_first, d_second)`` returns True when ``d_first`` is preferred
    (a bool). Returns ``(weights, n_queries)``.
    """
    return _run(DiagonalElicitation(eta, epsilon=epsilon), oracle)


# --------------------------------------------------------------------------
# Linear metrics of the off-diagonal confusions (source 003, Algorithm 2)
# --------------------------------------------------------------------------


def _offdiagonal_mask(k: int) -> np.ndarray:
    return ~np.eye(k, dtype=bool)


def uniform_offdiagonal(eta: ArrayLike) -> np.ndarray:
    """Off-diagonal confusions ``o`` of the classifier predicting each class with probability 1/k.

    ``o_ij = zeta_i / k`` with ``zeta_i`` the mean of ``eta_i``, in the
    source's row-major order of the off-diagonal entries ``(0, 1), (0, 2),
    ..., (1, 0), (1, 2), ...`` (source 003, Proposition 3). The centre of the
    sphere of Algorithm 2.
    """
    eta = _validated_eta(eta)
    k = eta.shape[1]
    prior = eta.mean(axis=0)
    return np.broadcast_to(prior[:, None] / k, (k, k))[_offdiagonal_mask(k)]


def _spherical_point(angles: np.ndarray) -> np.ndarray:
    """Unit vector of the angles (source 003, section 3.2):
    ``a_i = prod_{j<i} sin(theta_j) cos(theta_i)``, ``a_q = prod_j sin(theta_j)``."""
    sines = np.concatenate([[1.0], np.cumprod(np.sin(angles))])
    return sines * np.append(np.cos(angles), 1.0)


def _feasible_radius(eta: np.ndarray) -> float:
    """A radius whose whole sphere around ``o`` consists of achievable confusions.

    Every point ``o + v`` with ``||v||_2 <= radius`` is the confusion of the
    randomised classifier ``h(x) = 1/k + B eta(x)``: with ``G = E[eta eta^T]``
    and ``M`` the matrix with off-diagonal ``v`` and rows summing to 0,
    ``B^T = G^{-1} M`` gives exactly ``E[eta_i(x) h_j(x)] = o_ij + v_ij``,
    and ``h_j(x) = 1/k + sum_i u_i(x) M_ij`` with ``u(x) = G^{-1} eta(x)``.
    By Cauchy-Schwarz ``|h_j(x) - 1/k| <= ||v|| sqrt(||u(x)||^2 + (k - 2)
    u_j(x)^2)``, so ``h`` stays a probability vector while that is at most
    1/k. (The source's Algorithm 3, in an appendix not among our sources,
    finds a larger radius by a search; this bound is closed-form.)
    """
    n_samples, k = eta.shape
    second_moments = eta.T @ eta / n_samples
    if np.linalg.cond(second_moments) > _SINGULAR:
        raise ValueError(
            "eta does not separate the classes (its second-moment matrix is singular), so no sphere of "
            "confusions around the uniform classifier exists, as the method requires; pass radius"
        )
    u = np.linalg.solve(second_moments, eta.T)
    squared_norms = (u * u).sum(axis=0)
    amplification = np.sqrt(squared_norms[None, :] + (k - 2) * u * u).max()
    return 1.0 / (k * amplification)


class OffDiagonalElicitation(_BinarySearchElicitation):
    """Elicit a linear metric of the off-diagonal confusions question by question.

    Source 003, Algorithm 2. The questions compare points of the lower
    boundary of a sphere of radius ``radius`` around the uniform classifier's
    confusions ``o`` (:func:`uniform_offdiagonal`): for a unit ``a <= 0``,
    the point ``o + radius a`` is the best on the sphere for the metric
    ``<a, c>`` (Lemma 1). ``a`` is given by ``q - 1`` angles (``q = k(k -
    1)``): ``a_i = prod_{j<i} sin(theta_j) cos(theta_i)``, ``a_q = prod
    sin(theta_j)``, the first ``q - 2`` angles in ``[pi/2, pi]``, the last in
    ``[pi, 3 pi/2]``. A binary search on one angle at a time, the others
    fixed, cycles ``cycles`` times over the angles (the source uses two:
    ``T = 2 (q - 1)``), from the angles of the equal-cost metric (all
    ``a_i`` equal). Each search asks ``4 ceil(log2(pi / (2 epsilon)))``
    questions: 320 in all for ``k = 3`` and 704 for ``k = 4`` at ``epsilon
    = 0.01`` (source 003, Table 3).

    Queries are off-diagonal confusion vectors of length ``q`` in row-major
    order (fractions of all samples; :meth:`confusion_matrix` completes one
    to a k x k matrix).

    Parameters
    ----------
    eta : array-like of shape (n_samples, k)
        Class probabilities, rows summing to 1.
    epsilon : float, default 0.01
        In (0, pi/2): the final interval of each angle is at most this long.
    radius : float, optional
        Radius of the sphere. By default the largest one for which this
        module can show that every point is the confusion of some
        (randomised) classifier (a closed-form bound, see
        ``_feasible_radius``). A given radius must not exceed
        ``min_i zeta_i / k``, beyond which the sphere holds negative
        confusions.
    cycles : int, default 2
        Passes over the angles.

    Attributes
    ----------
    n_queries, total_queries, finished, answers
        As for :class:`DiagonalElicitation`.
    radius : float
    center : ndarray of shape (q,)
        ``o``.
    weights : ndarray of shape (q,)
        The elicited ``a``: ``<= 0``, unit Euclidean norm (only when finished).
    weight_matrix : ndarray of shape (k, k)
        The same weights in a matrix with a zero diagonal.
    """

    def __init__(self, eta: ArrayLike, *, epsilon: float = 0.01, radius: float | None = None, cycles: int = 2):
        self._eta = _validated_eta(eta)
        self._k = self._eta.shape[1]
        self._class_prior = self._eta.mean(axis=0)
        self.center = uniform_offdiagonal(self._eta)
        self.radius = _feasible_radius(self._eta) if radius is None else self._checked_radius(radius)
        cycles = integer(cycles, "cycles", minimum=1)
        q = self._k * (self._k - 1)
        self._n_angles = q - 1
        # The equal-cost metric a = -(1, ..., 1) / sqrt(q), in angles.
        self._start_angles = np.append(np.arccos(-1.0 / np.sqrt(np.arange(q, 2, -1))), 1.25 * math.pi)
        self._angles = self._start_angles.copy()
        super().__init__(math.pi / 2, cycles * self._n_angles, epsilon)

    def _restart(self) -> None:
        self._angles = self._start_angles.copy()

    def _checked_radius(self, radius: object) -> float:
        try:
            # Whatever float() takes; anything else is refused below.
            radius = float(cast(SupportsFloat, radius))
        except (TypeError, ValueError):
            raise ValueError(f"radius must be a positive number, got {radius!r}") from None
        largest = float(self.center.min())
        if not (math.isfinite(radius) and 0 < radius <= largest):
            raise ValueError(
                f"radius must lie in (0, {largest:.6g}]: beyond min_i zeta_i / k the sphere around the uniform "
                f"classifier holds negative confusions; got {radius!r}"
            )
        return radius

    # Search s is over the angle s mod (q - 1), the others as last found.
    def _interval(self, search: int) -> tuple[float, float]:
        last = search % self._n_angles == self._n_angles - 1
        return (math.pi, 1.5 * math.pi) if last else (math.pi / 2, math.pi)

    def _query_point(self, search: int, value: float) -> np.ndarray:
        angles = self._angles.copy()
        angles[search % self._n_angles] = value
        return self.center + self.radius * _spherical_point(angles)

    def _found(self, search: int, value: float) -> None:
        self._angles[search % self._n_angles] = value

    def _result(self) -> np.ndarray:
        # Rounding can leave a zero weight a few ulps above 0.
        return np.minimum(_spherical_point(self._angles), 0.0)

    @property
    def weight_matrix(self) -> np.ndarray:
        matrix = np.zeros((self._k, self._k))
        matrix[_offdiagonal_mask(self._k)] = self.weights
        return matrix

    def confusion_matrix(self, offdiagonal: ArrayLike) -> np.ndarray:
        """The k x k confusion matrix of a queried off-diagonal vector.

        The diagonal follows from the class prior ``zeta`` (the mean of
        ``eta``): ``C_ii = zeta_i - sum_{j != i} C_ij`` (source 003, eq. 2).
        """
        offdiagonal = np.asarray(offdiagonal, dtype=np.float64)
        q = self._k * (self._k - 1)
        if offdiagonal.shape != (q,):
            raise ValueError(f"offdiagonal must have shape ({q},), got {offdiagonal.shape}")
        matrix = np.zeros((self._k, self._k))
        matrix[_offdiagonal_mask(self._k)] = offdiagonal
        matrix[np.diag_indices(self._k)] = self._class_prior - matrix.sum(axis=1)
        return matrix


def elicit_offdiagonal(
    oracle: Callable[[np.ndarray, np.ndarray], bool],
    eta: ArrayLike,
    *,
    epsilon: float = 0.01,
    radius: float | None = None,
    cycles: int = 2,
) -> tuple[np.ndarray, int]:
    """Run :class:`OffDiagonalElicitation` (source 003, Algorithm 2) against an oracle.

    ``oracle(c_first, c_second)`` returns True when ``c_first`` is preferred
    (a bool). Returns ``(weights, n_queries)``.
    """
    return _run(OffDiagonalElicitation(eta, epsilon=epsilon, radius=radius, cycles=cycles), oracle)
