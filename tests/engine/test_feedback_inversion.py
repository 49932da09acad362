"""The inversion attack METHOD.md 9 requires: an expert who knows their own
answers reads a round's feedback and solves it for the other experts'
answers. The attack is exact interval reasoning by linear programming: for
every place one's own answer may take among the sorted answers, the shown
statistics are linear constraints on the unknown sorted answers (an order
statistic, a median, a type-7 quantile, a band), and each unknown's lowest
and highest value under them is a linear programme; the hull over the
places is everything the expert can know of it. With weights, every
colleague's weights sum to 1 across the attributes, so the attack also
solves the attributes together, over every way the colleagues' answers may
pair up across them.

The rules checked (``violations``):
* fewer than five experts: no colleague's answer (the lowest and highest
  included) is known more narrowly than the coarse step;
* from five on: the group's highest answer, when a colleague's, is known no
  better than "between the upper quartile and the top of the scale" (and
  the lowest likewise), so it is not derivable.

The same attack run on the old feedback (type-7 quartiles, every bound
listed sorted) recovers answers: ``violations`` is not empty there, which
proves the check can fail.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from engine import feedback

LOW, HIGH = 0.0, 1.0  # the scale the attacker knows the answers lie on (a weight's, a bound's range)
STEP = feedback.WEIGHT_STEP  # = feedback.bound_step(0, 1)
TOL = 1e-7

# --- what is shown, as linear constraints on the sorted answers -----------------------------
# A constraint is (coefficients over the n sorted answers, low, high): low <= c . x <= high.


def _unit(n: int, *positions_weights: tuple[int, float]) -> np.ndarray:
    c = np.zeros(n)
    for p, w in positions_weights:
        c[p] += w
    return c


def _median(n: int) -> np.ndarray:
    return _unit(n, ((n - 1) // 2, 0.5), (n // 2, 0.5))


def new_constraints(values: list[float]) -> tuple[list[tuple[np.ndarray, float, float]], feedback.Summary]:
    """What ``engine.feedback.summarise`` shows of ``values``, as constraints."""
    n = len(values)
    shown = feedback.summarise(values, step=STEP, origin=LOW, top=HIGH)
    assert shown is not None
    if shown.band is not None:
        assert shown.q1 is None and shown.median is None and shown.q3 is None  # nothing else is shown
        return [(_median(n), shown.band[0], shown.band[1])], shown
    a = feedback.quartile_rank(n)
    assert shown.q1 is not None and shown.median is not None and shown.q3 is not None
    return [
        (_unit(n, (a - 1, 1.0)), shown.q1, shown.q1),
        (_median(n), shown.median, shown.median),
        (_unit(n, (n - a, 1.0)), shown.q3, shown.q3),
    ], shown


def old_type7_constraints(values: list[float]) -> list[tuple[np.ndarray, float, float]]:
    """The old feedback, literally: NumPy's default percentiles 25, 50, 75
    (type 7, linear between neighbours), shown at full precision."""
    n = len(values)
    shown = np.percentile(values, [25, 50, 75])
    out = []
    for p, q in zip((0.25, 0.5, 0.75), shown, strict=True):
        h = (n - 1) * p
        f = math.floor(h)
        c = _unit(n, (f, 1 - (h - f)), *(((f + 1, h - f),) if f + 1 < n else ()))
        out.append((c, float(q), float(q)))
    return out


def old_sorted_list_constraints(values: list[float]) -> list[tuple[np.ndarray, float, float]]:
    """The old ranges' feedback: every bound, sorted."""
    n = len(values)
    return [(_unit(n, (p, 1.0)), v, v) for p, v in enumerate(sorted(values))]


# --- the attack -------------------------------------------------------------------------------


# The attack's answer for one unknown: the intervals it may lie in, one per
# consistent hypothesis (where one's own answer ranks, how the colleagues pair
# up). What the attacker knows is their union; its length is how precisely.
Pieces = list[tuple[float, float]]


def measure(pieces: Pieces) -> float:
    """The length of the union of ``pieces``."""
    total, end = 0.0, -math.inf
    for lo, hi in sorted(pieces):
        if hi > end:
            total += hi - max(lo, end)
            end = hi
    return total


def hull(pieces: Pieces) -> tuple[float, float]:
    return min(lo for lo, _ in pieces), max(hi for _, hi in pieces)


def _rank_constraints(
    own: float, n: int, constraints: list[tuple[np.ndarray, float, float]], r: int
) -> tuple[list[np.ndarray], list[float]]:
    """``A x <= b`` on the colleagues' sorted answers when own is the group's
    (r+1)-th lowest: sorted, own in its place, and what is shown."""
    m = n - 1
    a_ub, b_ub = [], []
    for j in range(m - 1):  # colleagues sorted
        a_ub.append(_unit(m, (j, 1.0), (j + 1, -1.0)))
        b_ub.append(0.0)
    if r > 0:
        a_ub.append(_unit(m, (r - 1, 1.0)))
        b_ub.append(own)
    if r < m:
        a_ub.append(_unit(m, (r, -1.0)))
        b_ub.append(-own)
    for c, lo, hi in constraints:
        others = np.delete(c, r)
        fixed = c[r] * own
        a_ub += [others, -others]
        b_ub += [hi - fixed + TOL, -(lo - fixed) + TOL]
    return a_ub, b_ub


def _rank_possible(own: float, n: int, constraints: list[tuple[np.ndarray, float, float]], r: int) -> bool:
    a_ub, b_ub = _rank_constraints(own, n, constraints, r)
    return linprog(np.zeros(n - 1), A_ub=a_ub, b_ub=b_ub, bounds=[(LOW, HIGH)] * (n - 1), method="highs").status == 0


def attack_column(own: float, n: int, constraints: list[tuple[np.ndarray, float, float]]) -> list[Pieces]:
    """For each rank j of the n-1 colleagues' sorted answers, where the
    attacker can pin it: for every rank own may hold, the least and greatest
    value consistent with what is shown."""
    m = n - 1
    intervals: list[Pieces] = [[] for _ in range(m)]
    for r in range(n):
        a_ub, b_ub = _rank_constraints(own, n, constraints, r)
        bounds = [(LOW, HIGH)] * m
        if linprog(np.zeros(m), A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs").status != 0:
            continue  # own cannot hold this rank
        for j in range(m):
            low = linprog(_unit(m, (j, 1.0)), A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs").fun
            high = -linprog(_unit(m, (j, -1.0)), A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs").fun
            intervals[j].append((low, high))
    return intervals


def attack_weights(own: np.ndarray, columns: list[list[tuple[np.ndarray, float, float]]]) -> list[list[Pieces]]:
    """The attributes together: each colleague's weights sum to 1. Over every
    rank own may hold in each attribute and every way the colleagues may be
    ordered in each attribute (colleagues named by their rank in the first),
    the interval of each attribute's j-th lowest colleague answer.
    Returns ``[attribute][j] = [low, high]``."""
    k = len(columns)
    n = len(columns[0][0][0])
    m = n - 1
    var = lambda i, c: i * k + c  # noqa: E731 - colleague i's weight of attribute c
    size = m * k
    intervals: list[list[Pieces]] = [[[] for _ in range(m)] for _ in range(k)]
    orderings = list(itertools.product(*([[tuple(range(m))]] + [list(itertools.permutations(range(m)))] * (k - 1))))
    a_eq = [np.array([1.0 if v // k == i else 0.0 for v in range(size)]) for i in range(m)]
    b_eq = [1.0] * m
    bounds = [(0.0, 1.0)] * size
    # the ranks own may hold in each attribute on its own (the others cannot
    # hold together either): a column's attack without its pieces
    possible = [[r for r in range(n) if _rank_possible(own[c], n, columns[c], r)] for c in range(k)]
    for ranks in itertools.product(*possible):
        for ordering in orderings:
            a_ub, b_ub = [], []
            for c in range(k):
                order, r = ordering[c], ranks[c]
                for t in range(m - 1):
                    a_ub.append(_unit(size, (var(order[t], c), 1.0), (var(order[t + 1], c), -1.0)))
                    b_ub.append(0.0)
                if r > 0:
                    a_ub.append(_unit(size, (var(order[r - 1], c), 1.0)))
                    b_ub.append(own[c])
                if r < m:
                    a_ub.append(_unit(size, (var(order[r], c), -1.0)))
                    b_ub.append(-own[c])
                for coef, lo, hi in columns[c]:
                    row = np.zeros(size)
                    for t, p in enumerate([p for p in range(n) if p != r]):
                        row[var(order[t], c)] += coef[p]
                    fixed = coef[r] * own[c]
                    a_ub += [row, -row]
                    b_ub += [hi - fixed + TOL, -(lo - fixed) + TOL]
            args = {"A_ub": a_ub, "b_ub": b_ub, "A_eq": a_eq, "b_eq": b_eq, "bounds": bounds, "method": "highs"}
            if linprog(np.zeros(size), **args).status != 0:
                continue
            for c in range(k):
                for t in range(m):
                    v = var(ordering[c][t], c)
                    low = linprog(_unit(size, (v, 1.0)), **args).fun
                    high = -linprog(_unit(size, (v, -1.0)), **args).fun
                    intervals[c][t].append((low, high))
    return intervals


# --- the rules --------------------------------------------------------------------------------


def violations(values: list[float], intervals: list[Pieces]) -> list[str]:
    """What the attack recovered beyond METHOD.md 9 (values[0] is own):
    below five experts, any colleague's answer known within less than the
    step (the union of where it may lie is shorter); from five, the group's
    highest answer (when a colleague's) known within less than the step or
    than the distance from the inner order statistic x(n+1-a) to the top of
    the scale (the lowest likewise)."""
    n = len(values)
    own, colleagues, ordered = values[0], sorted(values[1:]), sorted(values)
    for j, pieces in enumerate(intervals):
        assert any(lo - 1e-6 <= colleagues[j] <= hi + 1e-6 for lo, hi in pieces), "the attack is sound"
    if n < feedback.FINE_MIN_EXPERTS:
        return [
            f"colleague answer {j} pinned to {hull(pieces)} (length {measure(pieces):.4f}), below the step {STEP}"
            for j, pieces in enumerate(intervals)
            if measure(pieces) < STEP - 1e-6
        ]
    a = feedback.quartile_rank(n)
    found = []
    if colleagues[-1] > own and measure(intervals[-1]) < min(STEP, HIGH - ordered[n - a]) - 1e-6:
        found.append(f"the highest answer pinned to {hull(intervals[-1])}")
    if colleagues[0] < own and measure(intervals[0]) < min(STEP, ordered[a - 1] - LOW) - 1e-6:
        found.append(f"the lowest answer pinned to {hull(intervals[0])}")
    return found


def attack_new(values: list[float]) -> list[str]:
    constraints, _ = new_constraints(values)
    return violations(values, attack_column(values[0], len(values), constraints))


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(3, 9))
def test_the_attack_recovers_nothing_the_rules_forbid_from_random_answers(n):
    rng = np.random.default_rng(20261202 + n)
    for _ in range(6):
        values = rng.uniform(LOW, HIGH, n).round(3).tolist()
        assert attack_new(values) == [], values
        # answers on a coarse grid, with ties, at the ends of the scale
        values = rng.choice([0.0, 0.05, 0.3, 0.35, 0.95, 1.0], n).tolist()
        assert attack_new(values) == [], values


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 8).flatmap(lambda n: st.lists(st.floats(LOW, HIGH), min_size=n, max_size=n)))
def test_no_answers_let_the_attack_recover_more_than_the_rules_allow(values):
    assert attack_new(values) == []


@pytest.mark.parametrize("n", [3, 4])
def test_the_same_attack_recovers_answers_from_the_old_type7_quartiles(n):
    """Type 7 with 3 answers is (a+b)/2, b, (b+c)/2; with 4 three equations
    and one's own answer give the other three: the check fails there."""
    rng = np.random.default_rng(7 + n)
    broken = 0
    for _ in range(10):
        values = rng.uniform(LOW, HIGH, n).tolist()
        found = violations(values, attack_column(values[0], n, old_type7_constraints(values)))
        broken += bool(found)
        # each consistent rank of one's own answer pins every colleague's
        # answer to a point: the answers are known up to at most n alternatives
        intervals = attack_column(values[0], n, old_type7_constraints(values))
        assert all(measure(pieces) < 1e-5 for pieces in intervals)
    assert broken == 10


@pytest.mark.parametrize("n", range(3, 9))
def test_the_same_attack_recovers_the_extremes_from_the_old_sorted_bounds(n):
    values = np.random.default_rng(n).uniform(LOW, HIGH, n).tolist()
    found = violations(values, attack_column(values[0], n, old_sorted_list_constraints(values)))
    assert found, values
    if n >= feedback.FINE_MIN_EXPERTS:
        assert any("highest" in f or "lowest" in f for f in found)


def _weight_rows(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    return rng.dirichlet(np.ones(k), n).round(4)


@pytest.mark.parametrize("n", [3, 4])
def test_weights_solved_together_across_attributes_stay_coarse(n):
    """Every colleague's weights sum to 1: solving the three attributes
    together (every pairing of the colleagues' answers) pins nothing finer
    than the step."""
    rng = np.random.default_rng(29 + n)
    for _ in range(2 if n == 3 else 1):
        rows = _weight_rows(rng, n, 3)
        rows[:, -1] = 1 - rows[:, :-1].sum(axis=1)
        columns = [new_constraints(rows[:, c].tolist())[0] for c in range(3)]
        for c, intervals in enumerate(attack_weights(rows[0], columns)):
            column = rows[:, c].tolist()
            assert violations(column, intervals) == [], (rows, c, intervals)


def test_the_same_joint_attack_pairs_the_old_quartiles_into_whole_weight_vectors():
    rows = np.array([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.25, 0.15, 0.6]])
    columns = [old_type7_constraints(rows[:, c].tolist()) for c in range(3)]
    recovered = attack_weights(rows[0], columns)
    for c in range(3):
        assert [measure(pieces) for pieces in recovered[c]] == pytest.approx([0, 0], abs=1e-6)
        assert [hull(pieces)[0] for pieces in recovered[c]] == pytest.approx(sorted(rows[1:, c]), abs=1e-6)


def test_from_five_experts_only_inner_order_statistics_are_shown():
    values = [0.1, 0.9, 0.3, 0.5, 0.2]
    shown = feedback.summarise(values, step=STEP)
    assert shown == feedback.Summary(5, q1=0.2, median=0.3, q3=0.5)
    for n in range(5, 30):
        a = feedback.quartile_rank(n)
        assert a >= 2 and n + 1 - a <= n - 1  # neither quartile is an extreme
    shown = feedback.summarise([0.31, 0.34, 0.9], step=STEP)
    assert shown == feedback.Summary(3, band=(0.3, 0.35))
    assert feedback.summarise([1.0, 1.0, 1.0], step=STEP, top=1.0) == feedback.Summary(3, band=(0.95, 1.0))
    assert feedback.summarise([0.4, 0.6], step=STEP) is None
