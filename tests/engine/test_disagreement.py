"""engine.disagreement checked three ways: examples computed by hand (METHOD.md
6.3's case study among them), a slow literal reference written with plain
loops, and invariants (Hypothesis). Plain pytest, no Django."""

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import core
from engine.disagreement import (
    CONSENSUS_WORDING,
    ahp_consensus,
    consensus_wording,
    veto_shares,
    weight_rows,
    weight_spread,
)

from .test_core import CASE_1_WEIGHTS, literal_individual_score, studies

# --- the slow literal references ---------------------------------------------------------


def literal_s_star(weights, scale_max=9.0):
    """AHP-OS's S* as Goepel writes it, loop by loop, unclipped; None where
    it is undefined (one expert or one item)."""
    k, n = len(weights), len(weights[0])
    if k == 1 or n == 1:
        return None
    alpha = 0.0
    for row in weights:
        alpha += -sum(w * math.log(w) for w in row if w > 0)
    alpha /= k
    means = [sum(row[j] for row in weights) / k for j in range(n)]
    gamma = -sum(w * math.log(w) for w in means if w > 0)
    beta_diversity = math.exp(gamma - alpha)
    top = scale_max / (n + scale_max - 1)
    rest = 1 / (n + scale_max - 1)
    alpha_min = -top * math.log(top) - (n - 1) * rest * math.log(rest)
    correction = math.exp(math.log(n) - alpha_min)
    return (1 / beta_diversity - 1 / correction) / (1 - 1 / correction)


def literal_spread(weights):
    k, n = len(weights), len(weights[0])
    columns = [[weights[i][j] for i in range(k)] for j in range(n)]
    means = [sum(column) / k for column in columns]
    stdevs = [math.sqrt(sum((w - mean) ** 2 for w in column) / k) for column, mean in zip(columns, means, strict=True)]
    return [min(c) for c in columns], [max(c) for c in columns], means, stdevs


@st.composite
def weight_matrices(draw, max_experts=8, max_items=8):
    """Rows of positive weights summing to 1, some of them repeated (experts who agree)."""
    k = draw(st.integers(1, max_experts))
    n = draw(st.integers(1, max_items))
    rows = draw(st.lists(st.lists(st.floats(0.001, 1.0), min_size=n, max_size=n), min_size=k, max_size=k))
    weights = np.array(rows)
    if k > 1 and draw(st.booleans()):
        weights[draw(st.integers(1, k - 1))] = weights[0]
    return weights / weights.sum(axis=1, keepdims=True)


def ahp_extreme(n, top, scale_max=9.0):
    """The AHP-OS extreme priority vector: item ``top`` judged ``scale_max``
    times as important as every other item, the others equal."""
    row = [1 / (n + scale_max - 1)] * n
    row[top] = scale_max / (n + scale_max - 1)
    return row


# --- 1. by hand -------------------------------------------------------------------------------


def test_case_study_1_consensus_by_hand():
    """METHOD.md 6.3's W, S* worked out with plain loops."""
    weights = CASE_1_WEIGHTS.tolist()
    k, n, scale_max = 4, 3, 9
    alpha = 0.0
    for row in weights:
        for w in row:
            alpha -= w * math.log(w) / k
    gamma = 0.0
    for j in range(n):
        mean = (weights[0][j] + weights[1][j] + weights[2][j] + weights[3][j]) / 4
        gamma -= mean * math.log(mean)
    beta_diversity = math.exp(gamma - alpha)
    # H_alpha_min for n = 3, M = 9: the vector (9, 1, 1) / 11.
    alpha_min = -(9 / 11) * math.log(9 / 11) - 2 * (1 / 11) * math.log(1 / 11)
    correction = 3 / math.exp(alpha_min)
    hand = (1 / beta_diversity - 1 / correction) / (1 - 1 / correction)
    assert hand == pytest.approx(0.9196, abs=5e-5)
    assert ahp_consensus(CASE_1_WEIGHTS) == pytest.approx(hand, abs=1e-12)
    assert ahp_consensus(CASE_1_WEIGHTS, scale_max=scale_max) == ahp_consensus(CASE_1_WEIGHTS)
    assert consensus_wording(ahp_consensus(CASE_1_WEIGHTS)) == "very high"


def test_case_study_1_spread_by_hand():
    spread = weight_spread(CASE_1_WEIGHTS)
    np.testing.assert_allclose(spread.min, [0.37, 0.15, 0.17], atol=1e-15)
    np.testing.assert_allclose(spread.max, [0.63, 0.31, 0.38], atol=1e-15)
    np.testing.assert_allclose(spread.mean, [(0.63 + 0.56 + 0.47 + 0.37) / 4, 0.91 / 4, 1.06 / 4], atol=1e-15)
    # Accuracy: deviations from 0.5075 are 0.1225, 0.0525, -0.0375, -0.1375.
    accuracy = math.sqrt((0.1225**2 + 0.0525**2 + 0.0375**2 + 0.1375**2) / 4)
    assert spread.stdev[0] == pytest.approx(accuracy, abs=1e-15)
    assert spread.stdev[0] == pytest.approx(0.09756, abs=5e-6)  # ddof=0, not the sample's 0.11266
    assert list(spread._fields) == ["min", "max", "mean", "stdev"]


def test_identical_experts_agree_fully():
    row = [0.1, 0.2, 0.7]
    weights = [row] * 3  # their mean rounds: without the rule for equal rows, S* would be 1 - 6e-16
    assert ahp_consensus(weights) == 1.0
    spread = weight_spread(weights)
    np.testing.assert_allclose(spread.stdev, 0.0, rtol=0, atol=1e-15)  # the mean 2.1 / 3 rounds
    np.testing.assert_array_equal(spread.min, spread.max)
    np.testing.assert_allclose(spread.mean, row, atol=1e-16)


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_experts_at_opposite_ends_of_the_scale_have_no_consensus(n):
    """n experts, each judging a different item 9 times as important as each
    other one: every H_alpha is H_alpha_min and the group mean is uniform,
    so D_beta = n / exp(H_alpha_min) = cor and S* = 0."""
    weights = [ahp_extreme(n, top) for top in range(n)]
    assert literal_s_star(weights) == pytest.approx(0.0, abs=1e-12)
    assert ahp_consensus(weights) == pytest.approx(0.0, abs=1e-12)
    assert consensus_wording(ahp_consensus(weights)) == "very low"


def test_the_same_pair_on_a_smaller_scale_still_has_some_consensus():
    weights = [ahp_extreme(2, 0), ahp_extreme(2, 1)]  # 0.9 / 0.1 and 0.1 / 0.9
    # On a scale up to 3 the most extreme vector is 0.75 / 0.25; 0.9 / 0.1 lies beyond it.
    assert ahp_consensus(weights, scale_max=3) == 0.0
    assert ahp_consensus(weights, scale_max=20) == pytest.approx(literal_s_star(weights, 20), abs=1e-12)
    assert 0 < ahp_consensus(weights, scale_max=20) < 0.5


def test_weights_beyond_the_scale_are_clipped_to_no_consensus():
    weights = [[0.99, 0.01], [0.01, 0.99]]  # direct weights, 99 : 1
    assert literal_s_star(weights) < -0.1
    assert ahp_consensus(weights) == 0.0


def test_one_expert_or_one_item_is_full_consensus():
    assert ahp_consensus([[0.2, 0.3, 0.5]]) == 1.0
    assert ahp_consensus([[1.0], [1.0], [1.0]]) == 1.0
    assert weight_spread([[0.2, 0.3, 0.5]]).stdev.tolist() == [0.0, 0.0, 0.0]


def test_zero_weights_count_as_zero_entropy():
    assert ahp_consensus([[1.0, 0.0], [1.0, 0.0]]) == 1.0
    assert ahp_consensus([[1.0, 0.0], [0.0, 1.0]]) == 0.0
    weights = [[0.6, 0.4, 0.0], [0.5, 0.3, 0.2], [0.5, 0.5, 0.0]]
    assert ahp_consensus(weights) == pytest.approx(literal_s_star(weights), abs=1e-12)


def test_rows_are_renormalised_as_the_engine_does():
    weights = np.array([[0.6, 0.4000004], [0.3, 0.7]])
    rows = weight_rows(weights)
    np.testing.assert_array_equal(rows, weights / weights.sum(axis=1)[:, None])
    np.testing.assert_array_equal(rows, core._validated_weights(weights))
    assert ahp_consensus(weights) == ahp_consensus(rows)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([0.5, 0.5], r"weights must be a 2-D array"),
        (np.empty((0, 3)), r"weights must have at least one expert"),
        (np.empty((2, 0)), r"weights must have at least one expert"),
        ([[0.5, math.nan]], r"weights contains NaN or infinity at \(0, 1\)"),
        ([[1.2, -0.2]], r"weights must not be negative; \(expert, item\) \(0, 1\)"),
        ([[0.5, 0.4]], r"every row of weights .* row 0 sums to 0.9"),
        ([[0.0, 0.0]], r"every row of weights .* row 0 sums to 0"),
        ([["a", "b"]], r"weights must be a 2-D array of numbers"),
    ],
)
def test_bad_weights_are_refused_naming_the_argument(weights, message):
    for measure in (weight_spread, ahp_consensus, weight_rows):
        with pytest.raises(ValueError, match=message):
            measure(weights)


@pytest.mark.parametrize("scale_max", [1, 0.5, -9, math.inf, math.nan, "9", None, True])
def test_a_bad_scale_maximum_is_refused(scale_max):
    with pytest.raises(ValueError, match="scale_max must be a finite number above 1"):
        ahp_consensus(CASE_1_WEIGHTS, scale_max=scale_max)


def test_scale_maximum_may_be_any_real_number():
    assert ahp_consensus(CASE_1_WEIGHTS, scale_max=np.int64(9)) == ahp_consensus(CASE_1_WEIGHTS)
    assert ahp_consensus(CASE_1_WEIGHTS, scale_max=9.0) == ahp_consensus(CASE_1_WEIGHTS)


@pytest.mark.parametrize(
    ("value", "wording"),
    [
        (0.0, "very low"),
        (0.4999, "very low"),
        (0.5, "low"),
        (0.6249, "low"),
        (0.625, "moderate"),
        (0.7499, "moderate"),
        (0.75, "high"),
        (0.8749, "high"),
        (0.875, "very high"),
        (1, "very high"),
        (np.float64(0.9196), "very high"),
    ],
)
def test_consensus_wording(value, wording):
    assert consensus_wording(value) == wording


@pytest.mark.parametrize("value", [-0.01, 1.01, math.nan, "high", None, True])
def test_consensus_wording_refuses_what_is_not_a_consensus(value):
    with pytest.raises(ValueError, match="value must be a consensus in"):
        consensus_wording(value)


def test_the_word_scale_is_ascending_and_starts_at_zero():
    bounds = [bound for bound, _ in CONSENSUS_WORDING]
    assert bounds == sorted(bounds) and bounds[0] == 0
    assert len({wording for _, wording in CONSENSUS_WORDING}) == len(CONSENSUS_WORDING)


def test_veto_shares_of_the_case_study():
    """All four experts share the ranges: comprehensibility [6, 10] vetoes a
    rating of 0 (RandomForest, IBk) for every one of them."""
    k = 4
    lower = [[0.80, 0.15, 6.0]] * k
    upper = [[0.95, 0.05, 10.0]] * k
    measurements = [[0.847, 0.106, 7], [0.865, 0.100, 8], [0.9, 0.12, 0], [0.91, 0.11, 0]]  # J48, JRip, RF, IBk
    shares = veto_shares(lower, upper, measurements)
    assert shares.tolist() == [[0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 1]]


def test_veto_shares_count_experts():
    lower = [[0.5, 10.0], [0.6, 12.0], [0.7, 8.0], [0.4, 10.0]]  # the second metric: lower is better
    upper = [[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0]]
    measurements = [[0.6, 10.0], [0.9, 3.0], [0.3, 13.0]]
    # Candidate 0: 0.6 <= 0.6 (expert 1) and <= 0.7 (expert 2); 10 >= 10 (experts 0, 3) and >= 8 (expert 2).
    assert veto_shares(lower, upper, measurements).tolist() == [[0.5, 0.75], [0.0, 0.0], [1.0, 1.0]]
    assert veto_shares(lower, upper, np.empty((0, 2))).shape == (0, 2)


@pytest.mark.parametrize(
    ("lower", "upper", "measurements", "message"),
    [
        ([[0.0, 1.0]], [[1.0]], [[0.5, 0.5]], r"upper must have shape \(1, 2\)"),
        ([[0.0, 1.0]], [[1.0, 0.0]], [[0.5]], r"measurements must have shape"),
        ([[0.0, 1.0]], [[0.0, 0.0]], [[0.5, 0.5]], r"lower != upper"),
        ([[0.0, 1.0]], [[1.0, 0.0]], [[math.nan, 0.5]], r"measurements contains NaN"),
    ],
)
def test_veto_shares_refuse_bad_input_naming_the_argument(lower, upper, measurements, message):
    with pytest.raises(ValueError, match=message):
        veto_shares(lower, upper, measurements)


def test_veto_shares_of_a_large_study_match_the_engine_candidate_by_candidate(monkeypatch):
    """m = 1000, k = 100, n = 20: counted from the engine's judgments, in
    batches, with no (m, k, n) array; a sample checked against vetoes_for."""
    monkeypatch.setattr(core, "_VETO_BATCH_ENTRIES", 100 * 20 * 64)  # 64 candidates a batch
    rng = np.random.default_rng(11)
    k, n, m = 100, 20, 1000
    lower = rng.uniform(0, 0.3, (k, n))
    upper = rng.uniform(0.7, 1, (k, n))
    measurements = rng.uniform(0.25, 1, (m, n))
    shares = veto_shares(lower, upper, measurements)
    assert shares.shape == (m, n)
    vetoed = core.evaluate(
        weights=np.full((k, n), 1 / n),
        peer_weights=np.full((k, k), 1 / k),
        lower=lower,
        upper=upper,
        measurements=measurements,
    ).vetoed
    assert 0 < vetoed.sum() < m
    np.testing.assert_array_equal(shares.max(axis=1) > 0, vetoed)
    for c in rng.choice(m, 40, replace=False):
        counts = Counter(metric for _, metric in core.vetoes_for(lower, upper, measurements[c]))
        assert shares[c].tolist() == [counts[j] / k for j in range(n)]


# --- 2. against the literal reference ------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(weight_matrices())
def test_consensus_equals_the_literal_reference(weights):
    reference = literal_s_star(weights.tolist())
    value = ahp_consensus(weights)
    if reference is None:
        assert value == 1.0
    else:
        assert value == pytest.approx(min(max(reference, 0.0), 1.0), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(weight_matrices())
def test_spread_equals_the_literal_reference(weights):
    spread = weight_spread(weights)
    low, high, means, stdevs = literal_spread(weight_rows(weights).tolist())
    assert spread.min.tolist() == low and spread.max.tolist() == high
    np.testing.assert_allclose(spread.mean, means, rtol=0, atol=1e-15)
    np.testing.assert_allclose(spread.stdev, stdevs, rtol=0, atol=1e-15)


def exact_score_is_zero(measured, least_acceptable, desired):
    """Paper eq. 1 in exact arithmetic: m̄ = 0 where t <= 0. (In floating
    point a positive t can underflow to 0; the engine keeps that score
    positive, METHOD.md 4, so the reference must not round either.)"""
    t = (Fraction(measured) - Fraction(least_acceptable)) / (Fraction(desired) - Fraction(least_acceptable))
    return t <= 0


def test_a_score_that_underflows_is_no_veto():
    # t = 5e-324 / 10 rounds to 0 in floating point; exactly it is positive, and the
    # literal reference (test_core) keeps it positive as the engine does.
    assert (5e-324 - 0.0) / (10.0 - 0.0) == 0.0
    assert literal_individual_score(5e-324, 0.0, 10.0) == 5e-324
    assert not exact_score_is_zero(5e-324, 0.0, 10.0)
    assert veto_shares([[0.0], [0.0]], [[10.0], [-1.0]], [[5e-324], [0.0]]).tolist() == [[0.5], [1.0]]


@settings(max_examples=200, deadline=None)
@given(studies())
def test_veto_shares_equal_the_literal_reference(study):
    """Counting, by paper eq. 1 written out, the experts whose m̄ is 0."""
    _, _, lower, upper, measurements = study
    k, n = lower.shape
    literal = [
        [sum(exact_score_is_zero(measured[j], lower[i, j], upper[i, j]) for i in range(k)) / k for j in range(n)]
        for measured in measurements
    ]
    assert veto_shares(lower, upper, measurements).tolist() == literal


# --- 3. invariants ------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(weight_matrices(), st.randoms(use_true_random=False))
def test_reordering_experts_or_items_changes_nothing(weights, random):
    k, n = weights.shape
    experts, items = list(range(k)), list(range(n))
    random.shuffle(experts)
    random.shuffle(items)
    assert ahp_consensus(weights[experts]) == pytest.approx(ahp_consensus(weights), abs=1e-12)
    assert ahp_consensus(weights[:, items]) == pytest.approx(ahp_consensus(weights), abs=1e-12)
    original, permuted = weight_spread(weights), weight_spread(weights[experts])
    np.testing.assert_array_equal(permuted.min, original.min)
    np.testing.assert_array_equal(permuted.max, original.max)
    np.testing.assert_allclose(permuted.mean, original.mean, rtol=0, atol=1e-15)
    np.testing.assert_allclose(permuted.stdev, original.stdev, rtol=0, atol=1e-15)


@settings(max_examples=200, deadline=None)
@given(weight_matrices())
def test_consensus_and_spread_stay_in_range(weights):
    value = ahp_consensus(weights)
    assert 0 <= value <= 1
    assert consensus_wording(value) in {wording for _, wording in CONSENSUS_WORDING}
    spread = weight_spread(weights)
    assert (spread.min <= spread.mean + 1e-15).all() and (spread.mean <= spread.max + 1e-15).all()
    assert (spread.stdev >= 0).all() and (spread.stdev <= (spread.max - spread.min) / 2 + 1e-15).all()
    assert spread.mean.sum() == pytest.approx(1, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(weight_matrices())
def test_the_same_group_twice_has_the_same_consensus(weights):
    """S* describes how the experts' opinions are spread, not how many they are."""
    doubled = np.concatenate([weights, weights])
    assert ahp_consensus(doubled) == pytest.approx(ahp_consensus(weights), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(studies(), st.randoms(use_true_random=False))
def test_veto_shares_are_the_engines_vetoes(study, random):
    weights, peer_weights, lower, upper, measurements = study
    k, n = lower.shape
    shares = veto_shares(lower, upper, measurements)
    counts = Counter((int(c), int(j)) for c, _, j in core.vetoing_judgments(lower, upper, measurements))
    assert shares.tolist() == [[counts[c, j] / k for j in range(n)] for c in range(len(measurements))]
    vetoed = core.evaluate(
        weights=weights, peer_weights=peer_weights, lower=lower, upper=upper, measurements=measurements
    ).vetoed
    np.testing.assert_array_equal((shares > 0).any(axis=1), vetoed)
    np.testing.assert_array_equal(shares[~vetoed], 0.0)
    assert ((shares >= 0) & (shares <= 1)).all()
    experts = list(range(k))
    random.shuffle(experts)
    np.testing.assert_array_equal(veto_shares(lower[experts], upper[experts], measurements), shares)
    candidates = list(range(len(measurements)))
    random.shuffle(candidates)
    np.testing.assert_array_equal(veto_shares(lower, upper, measurements[candidates]), shares[candidates])
