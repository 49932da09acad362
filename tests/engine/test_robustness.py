"""engine.robustness: METHOD.md 8's reference cases exactly, the stability
intervals against a literal scan of the weight at 1e-6, the crossings and
the lines against the literal reweighting, and invariants (Hypothesis).
Plain pytest, no Django."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import robustness
from engine.robustness import (
    crossings,
    fragility,
    metric_shares,
    metric_weights_from_attributes,
    most_fragile,
    pairwise_winning,
    rank_acceptability,
    sensitivity_lines,
    weight_stability,
    what_if,
)

EXACT = 1e-12

# --- METHOD.md 8's reference cases ------------------------------------------------

HALF = [0.5, 0.5]
FIRST_METRIC = [[0], [1]]
CASE_G = [[0.9, 0.1], [0.2, 0.6], [0.3, 0.4]]
TIED_G = [[0.9, 0.1], [0.2, 0.6], [0.4, 0.4]]


def close(value: float, exact: Fraction) -> bool:
    return abs(value - float(exact)) <= EXACT


def test_reference_case_nothing_vetoed() -> None:
    result = weight_stability(HALF, CASE_G, [False, False, False], groups=FIRST_METRIC)
    assert close(result.share[0], Fraction(1, 2))
    assert close(result.ranking_low[0], Fraction(5, 12))
    assert close(result.ranking_high[0], Fraction(2, 3))
    assert close(result.winner_low[0], Fraction(5, 12))
    assert close(result.winner_high[0], Fraction(1))
    assert np.allclose(what_if(HALF, CASE_G, [False] * 3).cef, [0.5, 0.4, 0.35], atol=EXACT)


def test_reference_case_candidate_one_vetoed() -> None:
    result = weight_stability(HALF, CASE_G, [False, True, False], groups=FIRST_METRIC)
    assert close(result.ranking_low[0], Fraction(1, 3))
    assert close(result.ranking_high[0], Fraction(1))
    assert close(result.winner_low[0], Fraction(1, 3))
    assert close(result.winner_high[0], Fraction(1))


def test_reference_case_tie_with_different_slopes() -> None:
    result = weight_stability(HALF, TIED_G, [False, False, False], groups=FIRST_METRIC)
    assert close(result.ranking_low[0], Fraction(1, 2))
    assert close(result.ranking_high[0], Fraction(1, 2))
    assert close(result.winner_low[0], Fraction(5, 12))
    assert close(result.winner_high[0], Fraction(1))


def test_reference_case_rank_acceptability_and_pairwise() -> None:
    samples = [[1, 0], [0, 1], [1, 1]]
    assert np.allclose(rank_acceptability(samples), [[2 / 3, 1 / 3], [2 / 3, 1 / 3]], atol=EXACT)
    assert np.allclose(pairwise_winning(samples), [[0, 1 / 3], [1 / 3, 0]], atol=EXACT)


def test_default_groups_are_each_metric_alone() -> None:
    by_default = weight_stability(HALF, CASE_G, [False] * 3)
    explicit = weight_stability(HALF, CASE_G, [False] * 3, groups=FIRST_METRIC)
    for field in ("share", "ranking_low", "ranking_high", "winner_low", "winner_high"):
        assert np.array_equal(getattr(by_default, field), getattr(explicit, field))


# --- the literal reference: scan t on a 1e-6 grid ----------------------------------


def literal_weights(a: np.ndarray, group: np.ndarray, t: np.ndarray) -> np.ndarray:
    """METHOD.md 8's weights at each t (T,), shape (T, n), written plainly."""
    n = len(a)
    inside = np.zeros(n, dtype=bool)
    inside[group] = True
    s = a[inside].sum()
    result = np.empty((len(t), n))
    for j in range(n):
        if inside[j]:
            result[:, j] = t / inside.sum() if s == 0 else a[j] * t / s
        else:
            result[:, j] = (1 - t) / (~inside).sum() if s == 1 else a[j] * (1 - t) / (1 - s)
    return result


def scan(a: np.ndarray, g: np.ndarray, vetoed: np.ndarray, group: np.ndarray) -> tuple[float, float, float, float]:
    """The ranking and winner intervals found by evaluating every t of a
    grid of step 1e-6 (and s itself) and walking out from s while the
    definition holds."""
    s = float(a[group].sum())
    grid = np.union1d(np.linspace(0.0, 1.0, 1_000_001), [s])
    cef_t = np.where(vetoed[None, :], 0.0, literal_weights(a, group, grid) @ g.T)  # (T, m)
    cef_s = np.where(vetoed, 0.0, (g * a).sum(axis=1))
    m = len(cef_s)
    ranking_ok = np.ones(len(grid), dtype=bool)
    winner_ok = np.ones(len(grid), dtype=bool)
    top = [c for c in range(m) if cef_s[c] == cef_s.max()]
    for c in range(m):
        for d in range(m):
            if c == d:
                continue
            identical = np.allclose(cef_t[:, c], cef_t[:, d], rtol=0, atol=1e-13)
            if cef_s[c] > cef_s[d]:
                ranking_ok &= cef_t[:, c] >= cef_t[:, d] - 1e-13
            elif cef_s[c] == cef_s[d] and not identical:
                ranking_ok &= np.abs(cef_t[:, c] - cef_t[:, d]) <= 1e-13
            if c in top and not identical:
                winner_ok &= cef_t[:, c] >= cef_t[:, d] - 1e-13
    at = int(np.searchsorted(grid, s))

    def walk(ok: np.ndarray) -> tuple[float, float]:
        low = at
        while low > 0 and ok[low - 1]:
            low -= 1
        high = at
        while high < len(grid) - 1 and ok[high + 1]:
            high += 1
        return float(grid[low]), float(grid[high])

    return (*walk(ranking_ok), *walk(winner_ok))


def random_problem(seed: int, m: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.dirichlet(np.ones(n))
    g = rng.uniform(0.05, 1.0, size=(m, n))
    vetoed = rng.random(m) < 0.2
    if m > 3:
        g[3] = g[1]  # identical lines: tied everywhere, never untied
    return a, g, vetoed


@pytest.mark.parametrize("seed", range(6))
def test_intervals_equal_a_literal_scan_at_1e_6(seed: int) -> None:
    a, g, vetoed = random_problem(seed, m=5, n=3)
    groups = [np.array([0]), np.array([1, 2])] if seed % 2 else None
    result = weight_stability(a, g, vetoed, groups=groups)
    for k, group in enumerate(groups or [np.array([j]) for j in range(3)]):
        ranking_low, ranking_high, winner_low, winner_high = scan(a, g, vetoed, group)
        # The grid finds each end to within one step.
        assert abs(result.ranking_low[k] - ranking_low) <= 1.01e-6
        assert abs(result.ranking_high[k] - ranking_high) <= 1.01e-6
        assert abs(result.winner_low[k] - winner_low) <= 1.01e-6
        assert abs(result.winner_high[k] - winner_high) <= 1.01e-6


def test_scan_of_the_reference_tie_and_of_a_tie_at_the_top() -> None:
    a, g = np.array(HALF), np.array(TIED_G)
    vetoed = np.zeros(3, dtype=bool)
    result = weight_stability(a, g, vetoed, groups=FIRST_METRIC)
    assert scan(a, g, vetoed, np.array([0])) == pytest.approx(
        (result.ranking_low[0], result.ranking_high[0], result.winner_low[0], result.winner_high[0]), abs=1.01e-6
    )
    # Two winners tied with different slopes: the winner interval is pinned too.
    top_tie = np.array([[0.3, 0.5], [0.5, 0.3], [0.1, 0.1]])
    result = weight_stability(a, top_tie, vetoed, groups=FIRST_METRIC)
    assert (result.winner_low[0], result.winner_high[0]) == (0.5, 0.5)
    assert scan(a, top_tie, vetoed, np.array([0]))[2:] == pytest.approx((0.5, 0.5), abs=1.01e-6)


def test_shares_of_zero_and_one_split_equally() -> None:
    # Metric 0 has no weight: moving it up from 0 splits t equally inside
    # the group; the whole weight on one group leaves the others an equal split.
    g = np.array([[0.9, 0.2, 0.3], [0.1, 0.6, 0.5], [0.5, 0.5, 0.1]])
    vetoed = np.zeros(3, dtype=bool)
    for a in (np.array([0.0, 0.6, 0.4]), np.array([1.0, 0.0, 0.0])):
        result = weight_stability(a, g, vetoed)
        for k in range(3):
            expected = scan(a, g, vetoed, np.array([k]))
            got = (result.ranking_low[k], result.ranking_high[k], result.winner_low[k], result.winner_high[k])
            assert got == pytest.approx(expected, abs=1.01e-6)


def test_one_group_holding_every_metric_scales_all_cefs_together() -> None:
    result = weight_stability(HALF, CASE_G, [False] * 3, groups=[[0, 1]])
    assert (result.share[0], result.ranking_low[0], result.ranking_high[0]) == pytest.approx((1.0, 0.0, 1.0))
    lines = sensitivity_lines(HALF, CASE_G, [False] * 3, groups=[[0, 1]])
    assert np.allclose(lines.intercept, 0.0) and np.allclose(lines.slope[0], [0.5, 0.4, 0.35])


def test_single_candidate_is_stable_everywhere() -> None:
    result = weight_stability(HALF, [[0.3, 0.4]], [False])
    assert np.array_equal(result.ranking_low, [0, 0]) and np.array_equal(result.winner_high, [1, 1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a": [0.5, 0.6], "g": CASE_G, "vetoed": [0, 0, 0]}, "a must sum to 1"),
        ({"a": [1.5, -0.5], "g": CASE_G, "vetoed": [0, 0, 0]}, "non-negative"),
        ({"a": HALF, "g": [[0.1, 0.2, 0.3]], "vetoed": [0]}, "g must have shape"),
        ({"a": HALF, "g": CASE_G, "vetoed": [0, 0]}, "vetoed must have shape"),
        ({"a": HALF, "g": CASE_G, "vetoed": [0, 0, 0], "groups": [[0]]}, "partition"),
        ({"a": HALF, "g": CASE_G, "vetoed": [0, 0, 0], "groups": [[0, 1], [1]]}, "partition"),
        ({"a": HALF, "g": CASE_G, "vetoed": [0, 0, 0], "groups": [[0], [2]]}, "outside"),
        ({"a": HALF, "g": [[np.nan, 0.1]], "vetoed": [0]}, "NaN"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        weight_stability(**kwargs)


# --- lines, crossings, fragility -----------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_lines_equal_the_literal_reweighting(seed: int) -> None:
    a, g, vetoed = random_problem(seed, m=6, n=4)
    groups = [np.array([0, 2]), np.array([1]), np.array([3])]
    lines = sensitivity_lines(a, g, vetoed, groups=groups)
    t = np.linspace(0, 1, 11)
    for k, group in enumerate(groups):
        literal = np.where(vetoed[None, :], 0.0, literal_weights(a, group, t) @ g.T)
        assert np.allclose(lines.intercept[k][None, :] + lines.slope[k][None, :] * t[:, None], literal, atol=1e-12)
        assert lines.share[k] == pytest.approx(a[group].sum())


@pytest.mark.parametrize("seed", range(4))
def test_crossings_are_the_sign_changes_of_a_literal_scan(seed: int) -> None:
    a, g, vetoed = random_problem(seed + 10, m=5, n=3)
    found = crossings(a, g, vetoed)
    grid = np.linspace(0, 1, 100_001)
    for k in range(3):
        cef_t = np.where(vetoed[None, :], 0.0, literal_weights(a, np.array([k]), grid) @ g.T)
        s = a[k]
        expected = []
        for c in range(5):
            for d in range(c + 1, 5):
                difference = cef_t[:, c] - cef_t[:, d]
                if np.allclose(difference, 0, atol=1e-13):
                    continue  # identical lines
                change = np.flatnonzero(np.sign(difference[1:]) != np.sign(difference[:-1]))
                for i in change:
                    t = grid[i]
                    after = i + 1 if t >= s else i  # the grid point beyond the crossing, away from s
                    ahead = c if difference[after] > 0 else d
                    expected.append((t, ahead, d if ahead == c else c))
        expected.sort()
        assert len(found[k]) == len(expected)
        for crossing, (t, overtaking, overtaken) in zip(found[k], expected, strict=True):
            assert abs(crossing.t - t) <= 1.01e-5
            assert (crossing.overtaking, crossing.overtaken) == (overtaking, overtaken)


def test_crossings_reference_and_among_chosen_candidates() -> None:
    found = crossings(HALF, CASE_G, [False] * 3, groups=FIRST_METRIC)[0]
    assert [(round(c.t, 12), c.overtaking, c.overtaken) for c in found] == [
        (round(1 / 3, 12), 2, 0),
        (round(5 / 12, 12), 1, 0),
        (round(2 / 3, 12), 2, 1),
    ]
    only = crossings(HALF, CASE_G, [False] * 3, groups=FIRST_METRIC, candidates=[0, 1])[0]
    assert [(c.overtaking, c.overtaken) for c in only] == [(1, 0)]
    with pytest.raises(ValueError, match="candidates"):
        crossings(HALF, CASE_G, [False] * 3, candidates=[5])


def test_fragility_and_most_fragile() -> None:
    result = weight_stability(HALF, CASE_G, [False] * 3)
    # Group 0: ranking [5/12, 2/3]: 1/12 away; group 1 (mirror): [1/3, 7/12]: 1/12 away.
    assert fragility(result) == pytest.approx([1 / 12, 1 / 12])
    assert most_fragile(result) in (0, 1)
    # Three metrics: the candidates cross where metric 0 falls to 0.2841 or
    # metric 1 rises to 0.5066; metric 2 scores both alike (no crossing).
    g = [[0.9, 0.1, 0.5], [0.2, 0.6, 0.5]]
    result = weight_stability([0.55, 0.25, 0.2], g, [False, False])
    # metric 0: 0.9 t + (1 - t) 0.125 / 0.45 = 0.2 t + (1 - t) 0.25 / 0.45  ->  t = 0.125 / 0.44
    # metric 1: 0.1 t + (1 - t) 0.595 / 0.75 = 0.6 t + (1 - t) 0.21 / 0.75  ->  t = 0.385 / 0.76
    assert fragility(result)[:2] == pytest.approx([0.55 - 0.125 / 0.44, 0.385 / 0.76 - 0.25])
    assert np.isinf(fragility(result)[2])
    assert most_fragile(result) == 1
    stable = weight_stability(HALF, [[0.9, 0.9], [0.1, 0.1]], [False, False])
    assert np.isinf(fragility(stable)).all() and most_fragile(stable) is None


# --- what-if ------------------------------------------------------------------------------


def test_what_if_ranks_for_given_weights() -> None:
    result = what_if([0.2, 0.8], CASE_G, [False, False, False])
    assert np.allclose(result.cef, [0.26, 0.52, 0.38])
    assert result.ranks.tolist() == [3, 1, 2]
    assert result.order.tolist() == [1, 2, 0]
    vetoed = what_if([0.2, 0.8], CASE_G, [False, True, False])
    assert vetoed.cef[1] == 0 and vetoed.weighted_scores[1] == pytest.approx(0.52)
    assert vetoed.ranks.tolist() == [2, 3, 1]


def test_what_if_ties_share_a_rank_and_list_the_higher_weighted_score_first() -> None:
    result = what_if(HALF, [[0.2, 0.2], [0.9, 0.9], [0.2, 0.2], [0.1, 0.1]], [False, True, False, False])
    assert result.ranks.tolist() == [1, 4, 1, 3]
    assert result.order.tolist() == [0, 2, 3, 1]


def test_metric_weights_from_attributes_and_back() -> None:
    attribute_of = np.array([0, 0, 1, 2])
    a = np.array([0.1, 0.3, 0.4, 0.2])
    shares = metric_shares(a, attribute_of)
    assert np.allclose(shares, [0.25, 0.75, 1.0, 1.0])
    assert np.allclose(metric_weights_from_attributes([0.4, 0.4, 0.2], shares, attribute_of), a)
    # Slider positions in any unit; an attribute at 0 gives its metrics 0.
    assert np.allclose(metric_weights_from_attributes([50, 0, 50], shares, attribute_of), [0.125, 0.375, 0, 0.5])
    assert np.allclose(metric_shares([0.0, 0.0, 1.0], [0, 0, 1]), [0.5, 0.5, 1.0])
    with pytest.raises(ValueError, match="at least one attribute weight must be above 0"):
        metric_weights_from_attributes([0, 0, 0], shares, attribute_of)
    with pytest.raises(ValueError, match="attribute_of"):
        metric_weights_from_attributes([1, 1], shares, attribute_of)
    # The largest finite numbers: their sum overflows, their ratios do not (issue 29).
    equal = [1 / 12, 3 / 12, 1 / 3, 1 / 3]  # each attribute a third, shared by its metrics' shares
    assert np.allclose(metric_weights_from_attributes([1e308, 1e308, 1e308], shares, attribute_of), equal)
    with pytest.raises(ValueError, match="every attribute weight must be a finite number"):
        metric_weights_from_attributes([np.inf, 1, 1], shares, attribute_of)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=0, allow_nan=False, allow_infinity=False), min_size=1, max_size=8))
def test_relative_weights_of_any_finite_numbers_sum_to_1_or_are_refused_as_all_0(values) -> None:
    if not any(values):
        with pytest.raises(ValueError, match="at least one weight must be above 0"):
            robustness.relative_weights(values)
        return
    weights = robustness.relative_weights(values)
    assert np.isfinite(weights).all() and (weights >= 0).all()
    assert weights.sum() == pytest.approx(1)
    largest = max(values)
    # Each weight is its number's share, computed exactly with fractions of the scaled numbers.
    exact = [Fraction(value / largest) / sum(Fraction(v / largest) for v in values) for value in values]
    assert weights.tolist() == pytest.approx([float(share) for share in exact], abs=1e-12)


# --- rank probabilities -----------------------------------------------------------------


def literal_ranks(row: np.ndarray) -> list[int]:
    return [1 + sum(1 for other in row if other > value) for value in row]


@settings(max_examples=60, deadline=None)
@given(
    samples=st.integers(1, 30),
    m=st.integers(1, 7),
    levels=st.integers(2, 50),
    seed=st.integers(0, 2**32 - 1),
)
def test_rank_probabilities_sum_to_one(samples: int, m: int, levels: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cef = rng.integers(0, levels, size=(samples, m)) / levels  # few levels: ties happen
    acceptability = rank_acceptability(cef)
    assert np.allclose(acceptability.sum(axis=1), 1.0)
    pairwise = pairwise_winning(cef)
    ties = (cef[:, :, None] == cef[:, None, :]).mean(axis=0)
    assert np.allclose(pairwise + pairwise.T + ties, 1.0)
    assert np.all(np.diag(pairwise) == 0)
    # Against the definition, literally.
    expected = np.zeros((m, m))
    for row in cef:
        for c, rank in enumerate(literal_ranks(row)):
            expected[c, rank - 1] += 1 / samples
    assert np.allclose(acceptability, expected)
    assert np.array_equal(robustness.competition_ranks(cef), [literal_ranks(row) for row in cef])


@settings(max_examples=30, deadline=None)
@given(samples=st.integers(1, 30), m=st.integers(1, 7), seed=st.integers(0, 2**32 - 1))
def test_without_ties_every_rank_is_taken_once_per_sample(samples: int, m: int, seed: int) -> None:
    cef = np.random.default_rng(seed).random((samples, m))
    acceptability = rank_acceptability(cef)
    assert np.allclose(acceptability.sum(axis=0), 1.0) and np.allclose(acceptability.sum(axis=1), 1.0)


def test_rank_probabilities_refuse_bad_samples() -> None:
    with pytest.raises(ValueError, match="cef must be a 2-D"):
        rank_acceptability([0.1, 0.2])
    with pytest.raises(ValueError, match="at least one sample"):
        pairwise_winning(np.empty((0, 3)))


def test_what_if_at_the_runs_weights_is_the_run_to_the_bit() -> None:
    from engine.core import evaluate

    rng = np.random.default_rng(5)
    k, n, m = 4, 3, 30
    weights = rng.uniform(0.1, 1, (k, n))
    peer = rng.uniform(0.1, 1, (k, k))
    run = evaluate(
        weights=weights / weights.sum(axis=1, keepdims=True),
        peer_weights=peer / peer.sum(axis=1, keepdims=True),
        lower=rng.uniform(0, 0.3, (k, n)),
        upper=rng.uniform(0.7, 1, (k, n)),
        measurements=rng.uniform(0.1, 1, (m, n)),
    )
    result = what_if(run.metric_weights, run.group_scores, run.vetoed)
    assert result.cef.tobytes() == run.cef.tobytes()
    assert result.weighted_scores.tobytes() == run.weighted_scores.tobytes()
    lines = sensitivity_lines(run.metric_weights, run.group_scores, run.vetoed)
    assert lines.cef.tobytes() == run.cef.tobytes()
    # Every line passes through the run's CEF at the run's weight.
    at_share = lines.intercept + lines.slope * lines.share[:, None]
    assert np.allclose(at_share, run.cef[None, :], atol=1e-12)
