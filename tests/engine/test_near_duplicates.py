"""Crossings from score differences (issue 31, item 10): each pair's CEF
difference is a line of the weight computed from the difference of their
scores, with METHOD.md 6.2's ties (TIE = 1e-12), so two near-duplicate
candidates give the exact ends of the weight scan. Checked on the issue's
example, on cases worked by hand, and against a slow literal reference in
exact fractions (Hypothesis)."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from engine import robustness
from engine.robustness import crossings, fragility, most_fragile, weight_stability
from engine.rules import TIE

HALF = [0.5, 0.5]
EXACT_TIE = Fraction(TIE)


def test_the_issues_near_duplicates_are_stable_over_the_whole_scan():
    # exact answers 0 and 1 (the difference 1e-12 t, or 1e-12 (1 - t), never exceeds TIE)
    result = weight_stability(HALF, [[0.0, 0.25], [1e-12, 0.25]], [False, False])
    for field in ("ranking_low", "winner_low"):
        assert getattr(result, field).tolist() == [0.0, 0.0]
    for field in ("ranking_high", "winner_high"):
        assert getattr(result, field).tolist() == [1.0, 1.0]
    assert crossings(HALF, [[0.0, 0.25], [1e-12, 0.25]], [False, False]) == [[], []]
    assert np.isinf(fragility(result)).all() and most_fragile(result) is None


# A step the floats near 0.25 hold exactly: 2**-40, about 0.91e-12.
U = 2.0**-40


@pytest.mark.parametrize(
    ("g", "ranking", "winner", "found"),
    [
        # CEF_1 - CEF_0 = 4U t: 1 ahead by 2U (1.8e-12) now; the lines meet at
        # t = 0 only within TIE: no crossing
        ([[0.0, 0.25], [4 * U, 0.25]], (0.0, 1.0), (0.0, 1.0), []),
        # 7U t - 3U: tied now (0.5U), untied within the scan: pinned, crossing now
        ([[0.0, 0.25 + 3 * U], [4 * U, 0.25]], (0.5, 0.5), (0.5, 0.5), [(0.5, 1, 0)]),
        # 12U t - 8U: 0 ahead by 2U now; the lines meet at 2/3 and beyond it
        # 1 comes ahead by up to 4U (3.6e-12): a real crossing
        ([[0.0, 0.25 + 8 * U], [4 * U, 0.25]], (0.0, 2 / 3), (0.0, 2 / 3), [(2 / 3, 1, 0)]),
    ],
)
def test_near_duplicates_worked_by_hand(g, ranking, winner, found):
    result = weight_stability(HALF, g, [False, False], groups=[[0], [1]])
    assert (result.ranking_low[0], result.ranking_high[0]) == pytest.approx(ranking, abs=1e-12)
    assert (result.winner_low[0], result.winner_high[0]) == pytest.approx(winner, abs=1e-12)
    got = crossings(HALF, g, [False, False], groups=[[0], [1]])[0]
    assert [(c.t, c.overtaking, c.overtaken) for c in got] == [pytest.approx(f, abs=1e-12) for f in found]


def test_a_first_crossing_past_a_tie_is_found_though_its_pair_is_not_neighbours():
    # k and j tie along the whole scan (their difference U (2t - 1) stays
    # within TIE); i leads both now. i and k cross at 2/3, but i and j, not
    # next to each other in the order (k sits between), cross first, at 9/14.
    i, k, j = [-4 * U, 0.25 + 8 * U], [0.0, 0.25], [U, 0.25 - U]
    result = weight_stability(HALF, [i, k, j], [False] * 3, groups=[[0], [1]])
    assert result.ranking_high[0] == pytest.approx(9 / 14, abs=1e-12)
    assert result.winner_high[0] == pytest.approx(9 / 14, abs=1e-12)
    assert result.ranking_low[1] == pytest.approx(5 / 14, abs=1e-12)
    found = crossings(HALF, [i, k, j], [False] * 3, groups=[[0], [1]])[0]
    assert [(round(c.t, 12), c.overtaking, c.overtaken) for c in found] == [
        (round(9 / 14, 12), 2, 0),
        (round(2 / 3, 12), 1, 0),
    ]


# --- the literal reference, in exact fractions ---------------------------------------


def exact_ends(a, g, vetoed, group):
    """Each candidate's CEF at t = 0 and t = 1 of METHOD.md 8's reweighting,
    in fractions (the weights and scores as the floats they are)."""
    a = [Fraction(x) for x in a]
    inside = [j in group for j in range(len(a))]
    s = sum(x for x, i in zip(a, inside, strict=True) if i)
    at_one, at_zero = [], []
    for row, veto in zip(g, vetoed, strict=True):
        row = [Fraction(x) for x in row]
        if veto:
            at_one.append(Fraction(0))
            at_zero.append(Fraction(0))
            continue
        ins = [x for x, i in zip(row, inside, strict=True) if i]
        outs = [(x, w) for x, w, i in zip(row, a, inside, strict=True) if not i]
        at_one.append(sum(x * w for x, w, i in zip(row, a, inside, strict=True) if i) / s if s else sum(ins) / len(ins))
        if not outs:
            at_zero.append(Fraction(0))
        elif s == 1:
            at_zero.append(sum(x for x, _ in outs) / len(outs))
        else:
            at_zero.append(sum(x * w for x, w in outs) / (1 - s))
    return s, at_zero, at_one


def literal(a, g, vetoed, group):
    """(ranking_low, ranking_high, winner_low, winner_high, crossings) by
    the definitions, over every pair, in exact arithmetic: equal within TIE
    at the current weight; a pair is the same line when it is equal at both
    ends of the scan; lines cross where they meet when one is ahead by more
    than TIE at one end and behind by more than TIE at the other; a pair
    tied now that is not the same line pins the interval (and crosses now)."""
    s, zero, one = exact_ends(a, g, vetoed, group)
    m = len(g)

    def line(c, d):
        return zero[c] - zero[d], one[c] - one[d]

    def now(c, d):
        d0, d1 = line(c, d)
        return d0 + (d1 - d0) * s

    def same(c, d):
        d0, d1 = line(c, d)
        return abs(d0) <= EXACT_TIE and abs(d1) <= EXACT_TIE

    def meets(c, d):
        d0, d1 = line(c, d)
        if (d0 > EXACT_TIE and d1 < -EXACT_TIE) or (d0 < -EXACT_TIE and d1 > EXACT_TIE):
            return d0 / (d0 - d1)
        return None

    def interval(pairs, pinning):
        if any(abs(now(c, d)) <= EXACT_TIE and not same(c, d) for c, d in pinning):
            return s, s
        low, high = Fraction(0), Fraction(1)
        for c, d in pairs:
            t = meets(c, d)
            if abs(now(c, d)) > EXACT_TIE and t is not None:
                if t >= s:
                    high = min(high, t)
                if t <= s:
                    low = max(low, t)
        return low, high

    pairs = [(c, d) for c in range(m) for d in range(c + 1, m)]
    ranking = interval(pairs, pairs)
    cef = [zero[c] + (one[c] - zero[c]) * s for c in range(m)]
    top = [c for c in range(m) if not any(cef[d] > cef[c] + EXACT_TIE for d in range(m))]
    # the first-ranked against every other; two of them tied pin it. (One
    # first and one not are never tied: the first is within TIE of the
    # best, the other is not.)
    winner = interval(
        [(c, d) for c in top for d in range(m) if d not in top], [(c, d) for c in top for d in top if c < d]
    )
    found = []
    for c, d in pairs:
        d0, d1 = line(c, d)
        if abs(now(c, d)) <= EXACT_TIE and not same(c, d):
            found.append((s, c if d1 > d0 else d, d if d1 > d0 else c))
        elif abs(now(c, d)) > EXACT_TIE and (t := meets(c, d)) is not None:
            c_ahead_after = (d1 > d0) if t >= s else (d1 < d0)
            found.append((t, c, d) if c_ahead_after else (t, d, c))
    return (*ranking, *winner), sorted(found)


def near_threshold(a, g, vetoed, group):
    """Whether some difference lies within 1e-14 of TIE (in size), where the
    floats the engine compares and the exact values may disagree."""
    s, zero, one = exact_ends(a, g, vetoed, group)
    values = []
    for c in range(len(g)):
        for d in range(len(g)):
            d0, d1 = zero[c] - zero[d], one[c] - one[d]
            values += [d0, d1, d0 + (d1 - d0) * s]
    return any(abs(abs(v) - EXACT_TIE) < Fraction(1, 10**14) for v in values)


@st.composite
def near_duplicates(draw):
    """Up to six candidates on two or three metrics: a few distinct rows and
    copies of them moved by multiples of 1e-12 (near-duplicates, some
    within TIE of each other), some vetoed; positive weights."""
    n = draw(st.integers(2, 3))
    rows = draw(
        st.lists(
            st.lists(st.sampled_from([0.1, 0.25, 0.4, 0.5, 0.75, 0.9]), min_size=n, max_size=n), min_size=1, max_size=3
        )
    )
    copies = draw(
        st.lists(
            st.tuples(st.integers(0, len(rows) - 1), st.lists(st.integers(-6, 6), min_size=n, max_size=n)),
            min_size=1,
            max_size=4,
        )
    )
    g = rows + [[rows[r][j] + step * 1e-12 for j, step in enumerate(steps)] for r, steps in copies]
    vetoed = draw(
        st.lists(st.booleans(), min_size=len(g), max_size=len(g)).map(
            lambda v: [x and i % 3 == 2 for i, x in enumerate(v)]
        )
    )
    raw = draw(st.lists(st.integers(1, 9), min_size=n, max_size=n))
    a = robustness.what_if([r / sum(raw) for r in raw], g, vetoed).weights.tolist()
    return a, g, vetoed


def check_against_literal(a, g, vetoed):
    n = len(a)
    groups = [[j] for j in range(n)]
    assume(not any(near_threshold(a, g, vetoed, group) for group in groups))
    result = weight_stability(a, g, vetoed, groups=groups)
    found = crossings(a, g, vetoed, groups=groups)
    for k, group in enumerate(groups):
        ends, expected = literal(a, g, vetoed, group)
        got = (result.ranking_low[k], result.ranking_high[k], result.winner_low[k], result.winner_high[k])
        assert got == pytest.approx([float(e) for e in ends], abs=1e-9)
        # crossings at the same exact t may come in either order as floats
        assert sorted((round(c.t, 9), c.overtaking, c.overtaken) for c in found[k]) == sorted(
            (round(float(t), 9), c, d) for t, c, d in expected
        )
        assert [c.t for c in found[k]] == pytest.approx([float(t) for t, _, _ in expected], abs=1e-9)


@settings(max_examples=300, deadline=None)
@example(([0.5, 0.5], [[0.0, 0.25], [1e-12, 0.25]], [False, False]))
@example(([0.5, 0.5], [[0.5, 0.5], [0.5 + 3e-12, 0.5 - 4e-12], [0.9, 0.1], [0.9 + 2e-12, 0.1]], [False] * 4))
@example(([0.5, 0.5], [[-4 * U, 0.25 + 8 * U], [0.0, 0.25], [U, 0.25 - U]], [False] * 3))
@given(near_duplicates())
def test_intervals_and_crossings_equal_the_literal_reference(case):
    check_against_literal(*case)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(2, 6).flatmap(
        lambda m: st.tuples(
            st.lists(st.integers(1, 9), min_size=3, max_size=3),
            st.lists(st.lists(st.floats(0.05, 0.95), min_size=3, max_size=3), min_size=m, max_size=m),
            st.lists(st.booleans(), min_size=m, max_size=m),
        )
    )
)
def test_ordinary_candidates_equal_the_literal_reference(case):
    raw, g, vetoed = case
    a = robustness.what_if([r / sum(raw) for r in raw], g, vetoed).weights.tolist()
    check_against_literal(a, g, vetoed)
