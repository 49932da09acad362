"""engine.core checked three ways: METHOD.md's worked examples, a slow literal
reference implementation, and invariants (Hypothesis). Plain pytest, no Django."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import core, layers
from engine.core import (
    aggregate_literal,
    evaluate,
    expert_influence,
    individual_scores,
    layers_needed,
    vetoes_for,
)

# METHOD.md 6.3, case study 1 (prostate cancer, 4 experts).
CASE_1_WEIGHTS = np.array(
    [
        [0.63, 0.20, 0.17],
        [0.56, 0.25, 0.19],
        [0.47, 0.15, 0.38],
        [0.37, 0.31, 0.32],
    ]
)
CASE_1_PEER_WEIGHTS = np.array(
    [
        [0.70, 0.10, 0.10, 0.10],
        [0.10, 0.50, 0.20, 0.20],
        [0.25, 0.25, 0.25, 0.25],
        [0.20, 0.20, 0.20, 0.40],
    ]
)
# Shared ranges of case study 1: success rate [0.8, 0.95], fold accuracy
# stdev [0.15, 0.05] (lower is better), comprehensibility [6, 10].
CASE_1_LOWER = np.tile([0.80, 0.15, 6.0], (4, 1))
CASE_1_UPPER = np.tile([0.95, 0.05, 10.0], (4, 1))


# --------------------------------------------------------------------------
# Slow, obviously correct reference
# --------------------------------------------------------------------------


def literal_individual_score(measured, least_acceptable, desired):
    """Paper eq. 1, written out as the paper does, with the veto decided as
    ``individual_scores`` documents it: by comparing the value with the
    least acceptable (at or beyond it, away from the desired), so a value
    just inside the range whose ``t`` underflows (5e-324 in [0, 2]) keeps
    the smallest positive score instead of becoming a veto."""
    beyond = measured <= least_acceptable if desired > least_acceptable else measured >= least_acceptable
    if beyond:
        return 0.0
    t = (measured - least_acceptable) / (desired - least_acceptable)
    if t > 1:
        return 1.0
    return max(t, 5e-324)


def literal_evaluation(weights, peer_weights, lower, upper, measurements):
    """Per candidate: every expert's m̄ by the formula, the literal recursive
    aggregation, veto if any m̄ == 0 (paper eq. 2)."""
    k, n = np.shape(weights)
    metric_weights, _ = aggregate_literal(peer_weights, weights)
    group_scores, weighted_scores, cef, vetoed = [], [], [], []
    for measured in measurements:
        scores = np.array(
            [[literal_individual_score(measured[j], lower[i][j], upper[i][j]) for j in range(n)] for i in range(k)]
        )
        group, _ = aggregate_literal(peer_weights, scores)
        weighted = float(sum(metric_weights[j] * group[j] for j in range(n)))
        is_vetoed = bool((scores == 0).any())
        group_scores.append(group)
        weighted_scores.append(weighted)
        cef.append(0.0 if is_vetoed else weighted)
        vetoed.append(is_vetoed)
    return {
        "metric_weights": metric_weights,
        "group_scores": np.array(group_scores).reshape(len(measurements), n),
        "weighted_scores": np.array(weighted_scores),
        "cef": np.array(cef),
        "vetoed": np.array(vetoed, dtype=bool),
    }


# --------------------------------------------------------------------------
# Worked examples
# --------------------------------------------------------------------------


def test_case_study_1_consensus_weights_and_influence():
    result = evaluate(
        weights=CASE_1_WEIGHTS,
        peer_weights=CASE_1_PEER_WEIGHTS,
        lower=CASE_1_LOWER,
        upper=CASE_1_UPPER,
        measurements=np.empty((0, 3)),
    )
    np.testing.assert_allclose(result.metric_weights, [0.5295, 0.2273, 0.2432], atol=5e-5)
    np.testing.assert_allclose(result.expert_influence, [0.3681, 0.2454, 0.1718, 0.2147], atol=5e-5)
    assert result.group_scores.shape == (0, 3)
    assert result.cef.shape == (0,)


def test_case_study_1_cef_from_the_papers_group_scores():
    metric_weights = evaluate(
        weights=CASE_1_WEIGHTS,
        peer_weights=CASE_1_PEER_WEIGHTS,
        lower=CASE_1_LOWER,
        upper=CASE_1_UPPER,
        measurements=np.empty((0, 3)),
    ).metric_weights
    assert metric_weights @ [0.475, 0.52, 0.687] == pytest.approx(0.537, abs=5e-4)
    assert metric_weights @ [0.595, 0.66, 1.0] == pytest.approx(0.708, abs=5e-4)


def test_case_study_1_literal_aggregation_agrees_with_influence():
    group, layers = aggregate_literal(CASE_1_PEER_WEIGHTS, CASE_1_WEIGHTS, tolerance=1e-9)
    influence = expert_influence(CASE_1_PEER_WEIGHTS)
    np.testing.assert_allclose(group, influence @ CASE_1_WEIGHTS, atol=1e-9)
    assert layers > 0
    result = evaluate(
        weights=CASE_1_WEIGHTS,
        peer_weights=CASE_1_PEER_WEIGHTS,
        lower=CASE_1_LOWER,
        upper=CASE_1_UPPER,
        measurements=[[0.9, 0.1, 7.0]],
    )
    assert result.iterations == layers


def test_case_study_1_vetoes_zero_comprehensibility():
    # Random Forest and IBk have comprehensibility 0, below the least acceptable 6.
    measurements = [[0.9, 0.1, 7.0], [0.93, 0.06, 0.0]]
    result = evaluate(
        weights=CASE_1_WEIGHTS,
        peer_weights=CASE_1_PEER_WEIGHTS,
        lower=CASE_1_LOWER,
        upper=CASE_1_UPPER,
        measurements=measurements,
    )
    np.testing.assert_array_equal(result.vetoed, [False, True])
    # Shared ranges: g is each expert's (identical) score.
    np.testing.assert_allclose(result.group_scores[0], [2 / 3, 0.5, 0.25])
    assert result.cef[0] == pytest.approx(result.metric_weights @ [2 / 3, 0.5, 0.25])
    assert result.cef[1] == 0.0
    assert result.weighted_scores[1] > 0.0
    assert vetoes_for(CASE_1_LOWER, CASE_1_UPPER, measurements[1]) == [(0, 2), (1, 2), (2, 2), (3, 2)]


def test_section_4_example_lower_is_better():
    # Classification time, range [50 ms, 10 ms].
    assert individual_scores([[50.0]], [[10.0]], [12.3])[0, 0] == pytest.approx(0.9425)
    assert individual_scores([[50.0]], [[10.0]], [9.2])[0, 0] == 1.0
    assert individual_scores([[50.0]], [[10.0]], [50.0])[0, 0] == 0.0
    assert individual_scores([[50.0]], [[10.0]], [60.0])[0, 0] == 0.0


def test_expert_influence_is_stationary_and_matches_matrix_powers():
    influence = expert_influence(CASE_1_PEER_WEIGHTS)
    np.testing.assert_allclose(influence @ CASE_1_PEER_WEIGHTS, influence, atol=1e-15)
    assert influence.sum() == pytest.approx(1.0, abs=1e-15)
    limit = np.linalg.matrix_power(CASE_1_PEER_WEIGHTS, 200)
    np.testing.assert_allclose(limit, np.tile(influence, (4, 1)), atol=1e-12)


def test_single_expert():
    result = evaluate(
        weights=[[0.25, 0.75]],
        peer_weights=[[1.0]],
        lower=[[0.0, 10.0]],
        upper=[[1.0, 0.0]],
        measurements=[[0.5, 2.5], [0.0, 2.5]],
    )
    np.testing.assert_allclose(result.expert_influence, [1.0])
    np.testing.assert_allclose(result.group_scores, [[0.5, 0.75], [0.0, 0.75]])
    np.testing.assert_allclose(result.cef, [0.25 * 0.5 + 0.75 * 0.75, 0.0])
    assert result.iterations == 0


# --------------------------------------------------------------------------
# Vetoes at exact bounds, float edge cases
# --------------------------------------------------------------------------


def test_value_exactly_at_least_acceptable_bound_is_a_veto_in_both_directions():
    lower = [[0.8, 0.15]]
    upper = [[0.95, 0.05]]
    assert vetoes_for(lower, upper, [0.8, 0.1]) == [(0, 0)]
    assert vetoes_for(lower, upper, [0.9, 0.15]) == [(0, 1)]
    assert vetoes_for(lower, upper, [np.nextafter(0.8, 1), np.nextafter(0.15, 0)]) == []
    result = evaluate(
        weights=[[0.5, 0.5]],
        peer_weights=[[1.0]],
        lower=lower,
        upper=upper,
        measurements=[[0.8, 0.1], [0.9, 0.15], [np.nextafter(0.8, 1), np.nextafter(0.15, 0)]],
    )
    np.testing.assert_array_equal(result.vetoed, [True, True, False])
    np.testing.assert_array_equal(result.cef == 0, [True, True, False])


def test_underflowing_score_is_not_a_veto():
    # (x - b^l) / (b^u - b^l) underflows to 0.0 although x is on the good
    # side of b^l: the literal score is positive, so no veto anywhere.
    lower, upper, measured = [[0.0]], [[1e300]], [1e-320]
    scores = individual_scores(lower, upper, measured)
    assert scores[0, 0] > 0.0
    assert vetoes_for(lower, upper, measured) == []
    result = evaluate(weights=[[1.0]], peer_weights=[[1.0]], lower=lower, upper=upper, measurements=[measured])
    assert not result.vetoed[0]


def test_mixed_directions_among_experts_use_two_thresholds():
    # Expert 0 wants high values (veto at or below 2), expert 1 low values
    # (veto at or above 8): only the open interval (2, 8) escapes a veto.
    lower = [[2.0], [8.0]]
    upper = [[6.0], [4.0]]
    measured = np.array([[1.0], [2.0], [2.5], [5.0], [7.9], [8.0], [9.0]])
    result = evaluate(
        weights=[[1.0], [1.0]],
        peer_weights=[[0.5, 0.5], [0.5, 0.5]],
        lower=lower,
        upper=upper,
        measurements=measured,
    )
    np.testing.assert_array_equal(result.vetoed, [True, True, False, False, False, True, True])
    # At 5: expert 0 scores (5-2)/4 = 0.75, expert 1 (5-8)/(4-8) = 0.75.
    assert result.group_scores[3, 0] == pytest.approx(0.75)
    # At 1: expert 0 scores 0, expert 1 scores 1 -> 0.5.
    assert result.group_scores[0, 0] == pytest.approx(0.5)


def test_far_measurements_saturate_exactly():
    lower = [[0.8, 0.15], [0.7, 0.2]]
    upper = [[0.95, 0.05], [0.9, 0.1]]
    result = evaluate(
        weights=[[0.5, 0.5], [0.5, 0.5]],
        peer_weights=[[0.6, 0.4], [0.3, 0.7]],
        lower=lower,
        upper=upper,
        measurements=[[1e9, -1e9], [-1e9, 1e9]],
    )
    np.testing.assert_allclose(result.group_scores, [[1.0, 1.0], [0.0, 0.0]], rtol=0, atol=1e-15)
    assert result.group_scores[1, 0] == 0.0
    assert result.group_scores[1, 1] == 0.0


def test_rows_within_tolerance_are_renormalised():
    nudged = CASE_1_WEIGHTS.copy()
    nudged[0] *= 1 + 5e-7
    peer_nudged = CASE_1_PEER_WEIGHTS.copy()
    peer_nudged[2] *= 1 - 5e-7
    arguments = {"lower": CASE_1_LOWER, "upper": CASE_1_UPPER, "measurements": [[0.9, 0.1, 7.0]]}
    exact = evaluate(weights=CASE_1_WEIGHTS, peer_weights=CASE_1_PEER_WEIGHTS, **arguments)
    nudged_result = evaluate(weights=nudged, peer_weights=peer_nudged, **arguments)
    np.testing.assert_allclose(nudged_result.metric_weights, exact.metric_weights, atol=1e-15)
    np.testing.assert_allclose(nudged_result.expert_influence, exact.expert_influence, atol=1e-15)
    np.testing.assert_allclose(nudged_result.cef, exact.cef, atol=1e-15)


def test_result_is_immutable():
    result = evaluate(
        weights=CASE_1_WEIGHTS,
        peer_weights=CASE_1_PEER_WEIGHTS,
        lower=CASE_1_LOWER,
        upper=CASE_1_UPPER,
        measurements=[[0.9, 0.1, 7.0]],
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.cef = None
    with pytest.raises(ValueError):
        result.cef[0] = 1.0


def test_evaluate_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        evaluate(CASE_1_WEIGHTS, CASE_1_PEER_WEIGHTS, CASE_1_LOWER, CASE_1_UPPER, [[1, 1, 1]])


def test_literal_aggregation_gives_up_with_a_clear_error():
    slow = np.full((3, 3), 0.005)
    np.fill_diagonal(slow, 0.99)
    values = np.eye(3)
    with pytest.raises(ValueError, match="did not reach a spread below 1e-09 within 5 layers"):
        aggregate_literal(slow, values, max_layers=5)


def test_layers_needed_depends_on_the_values_and_matches_aggregate_literal():
    agreeing = np.tile([0.2, 0.8], (4, 1))
    assert layers_needed(CASE_1_PEER_WEIGHTS, agreeing) == 0
    assert (
        layers_needed(CASE_1_PEER_WEIGHTS, CASE_1_WEIGHTS) == aggregate_literal(CASE_1_PEER_WEIGHTS, CASE_1_WEIGHTS)[1]
    )
    # A looser tolerance never needs more layers.
    assert layers_needed(CASE_1_PEER_WEIGHTS, CASE_1_WEIGHTS, tolerance=1e-3) < layers_needed(
        CASE_1_PEER_WEIGHTS, CASE_1_WEIGHTS
    )


# --------------------------------------------------------------------------
# Invalid input
# --------------------------------------------------------------------------


def valid_arguments():
    return {
        "weights": CASE_1_WEIGHTS.copy(),
        "peer_weights": CASE_1_PEER_WEIGHTS.copy(),
        "lower": CASE_1_LOWER.copy(),
        "upper": CASE_1_UPPER.copy(),
        "measurements": np.array([[0.9, 0.1, 7.0], [0.85, 0.08, 9.0]]),
    }


def with_entry(name, position, value):
    def mutate(arguments):
        arguments[name][position] = value

    return mutate


def replaced(name, value):
    def mutate(arguments):
        arguments[name] = value

    return mutate


def peer_row(row, values):
    def mutate(arguments):
        arguments["peer_weights"][row] = values

    return mutate


INVALID_INPUTS = [
    # Shapes.
    ("weights 1-D", replaced("weights", [0.5, 0.5]), r"weights must be a 2-D array"),
    ("weights empty", replaced("weights", np.empty((0, 3))), r"weights must have at least one"),
    (
        "weights other k",
        replaced("weights", CASE_1_WEIGHTS[:3]),
        r"peer_weights must have shape \(3, 3\) .*got \(4, 4\)",
    ),
    (
        "peer_weights not square",
        replaced("peer_weights", CASE_1_PEER_WEIGHTS[:, :3]),
        r"peer_weights must have shape \(4, 4\) .*got \(4, 3\)",
    ),
    ("peer_weights 3-D", replaced("peer_weights", CASE_1_PEER_WEIGHTS[None]), r"peer_weights must be a 2-D array"),
    ("lower wrong shape", replaced("lower", CASE_1_LOWER[:, :2]), r"lower must have shape \(4, 3\) .*got \(4, 2\)"),
    ("upper wrong shape", replaced("upper", CASE_1_UPPER[:3]), r"upper must have shape \(4, 3\) .*got \(3, 3\)"),
    (
        "measurements wrong width",
        replaced("measurements", np.ones((2, 4))),
        r"measurements must have shape \(m, 3\) .*got \(2, 4\)",
    ),
    ("measurements 1-D", replaced("measurements", [0.9, 0.1, 7.0]), r"measurements must be a 2-D array"),
    (
        "measurements ragged",
        replaced("measurements", [[0.9, 0.1, 7.0], [0.9]]),
        r"measurements must be a 2-D array of numbers",
    ),
    # Not finite.
    ("NaN in weights", with_entry("weights", (1, 2), np.nan), r"weights contains NaN or infinity at \(1, 2\)"),
    (
        "NaN in peer_weights",
        with_entry("peer_weights", (2, 0), np.nan),
        r"peer_weights contains NaN or infinity at \(2, 0\)",
    ),
    ("NaN in lower", with_entry("lower", (3, 1), np.nan), r"lower contains NaN or infinity at \(3, 1\)"),
    ("NaN in upper", with_entry("upper", (0, 0), np.nan), r"upper contains NaN or infinity at \(0, 0\)"),
    (
        "NaN in measurements",
        with_entry("measurements", (1, 1), np.nan),
        r"measurements contains NaN or infinity at \(1, 1\)",
    ),
    (
        "inf in measurements",
        with_entry("measurements", (0, 2), np.inf),
        r"measurements contains NaN or infinity at \(0, 2\)",
    ),
    # Peer weights.
    (
        "zero peer weight",
        peer_row(1, [0.0, 0.6, 0.2, 0.2]),
        r"peer_weights entries must lie strictly between 0 and 1.*entry \(1, 0\) is 0",
    ),
    (
        "negative peer weight",
        peer_row(3, [0.3, 0.3, 0.5, -0.1]),
        r"peer_weights entries must lie strictly between 0 and 1.*entry \(3, 3\) is -0.1",
    ),
    (
        "peer weight of 1",
        replaced("peer_weights", np.array([[1.0, 0.0, 0.0, 0.0]] + CASE_1_PEER_WEIGHTS[1:].tolist())),
        r"entry \(0, 0\) is 1",
    ),
    (
        "peer row sums to 0.9",
        peer_row(2, [0.2, 0.2, 0.25, 0.25]),
        r"every row of peer_weights .*must sum to 1 within 1e-06: row 2 sums to 0.9",
    ),
    # Weights.
    ("weights row sums to 0.9", with_entry("weights", (3, 0), 0.27), r"every row of weights .*row 3 sums to 0.9"),
    (
        "zero weight",
        replaced("weights", np.array([[0.8, 0.0, 0.2]] + CASE_1_WEIGHTS[1:].tolist())),
        r"weights must be strictly positive.*\(0, 1\)",
    ),
    (
        "negative weight",
        replaced("weights", np.array([[0.8, 0.3, -0.1]] + CASE_1_WEIGHTS[1:].tolist())),
        r"weights must be strictly positive.*\(0, 2\)",
    ),
    # Ranges.
    ("equal bounds", with_entry("upper", (2, 1), 0.15), r"lower != upper.*\(expert, metric\) \(2, 1\)"),
]


@pytest.mark.parametrize(
    "mutate, message", [case[1:] for case in INVALID_INPUTS], ids=[case[0] for case in INVALID_INPUTS]
)
def test_invalid_input_is_refused_with_a_precise_message(mutate, message):
    arguments = valid_arguments()
    mutate(arguments)
    with pytest.raises(ValueError, match=message):
        evaluate(**arguments)


def test_single_expert_must_rate_themself_1():
    arguments = {"weights": [[1.0]], "lower": [[0.0]], "upper": [[1.0]], "measurements": [[0.5]]}
    with pytest.raises(ValueError, match=r"peer_weights .*row 0 sums to 0.9"):
        evaluate(peer_weights=[[0.9]], **arguments)
    assert evaluate(peer_weights=[[1.0 - 1e-7]], **arguments).cef[0] == 0.5


@pytest.mark.parametrize("tolerance", [0.0, -1e-9, math.nan, "tight"])
def test_invalid_tolerance(tolerance):
    with pytest.raises(ValueError, match="tolerance must be a positive"):
        evaluate(**valid_arguments(), tolerance=tolerance)


def test_all_equal_bounds_are_named():
    arguments = valid_arguments()
    arguments["upper"][0, 0] = arguments["lower"][0, 0]
    arguments["upper"][3, 2] = arguments["lower"][3, 2]
    with pytest.raises(ValueError, match=r"\(0, 0\), \(3, 2\)"):
        evaluate(**arguments)


def test_individual_scores_validates_the_measurement_row():
    with pytest.raises(ValueError, match=r"measurement_row must have shape \(3,\)"):
        individual_scores(CASE_1_LOWER, CASE_1_UPPER, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"measurement_row contains NaN"):
        vetoes_for(CASE_1_LOWER, CASE_1_UPPER, [1.0, np.nan, 2.0])
    with pytest.raises(ValueError, match=r"upper must have shape \(4, 3\)"):
        vetoes_for(CASE_1_LOWER, CASE_1_UPPER[:2], [1.0, 2.0, 3.0])


def test_aggregate_literal_validates_values():
    with pytest.raises(ValueError, match=r"values must have one row per expert, 4 rows"):
        aggregate_literal(CASE_1_PEER_WEIGHTS, np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"peer_weights must be a non-empty square"):
        expert_influence(np.full((2, 3), 1 / 3))


# --------------------------------------------------------------------------
# Property tests against the literal reference
# --------------------------------------------------------------------------

BOUND_GRID = [x / 4 for x in range(-8, 41)]  # -2.0 .. 10.0 in quarters


@st.composite
def studies(draw, max_experts=8, max_metrics=6, max_candidates=10):
    k = draw(st.integers(1, max_experts))
    n = draw(st.integers(1, max_metrics))
    m = draw(st.integers(1, max_candidates))
    positive = st.floats(0.01, 1.0)

    weights = np.array(draw(st.lists(st.lists(positive, min_size=n, max_size=n), min_size=k, max_size=k)))
    weights /= weights.sum(axis=1, keepdims=True)

    if k == 1:
        peer_weights = np.ones((1, 1))
    else:
        peer_weights = np.array(draw(st.lists(st.lists(positive, min_size=k, max_size=k), min_size=k, max_size=k)))
        # Large self-confidence makes V mix slowly (hundreds of layers).
        self_confidence = draw(st.sampled_from([0.0, 1.0, 10.0, 60.0]))
        peer_weights += self_confidence * np.eye(k) * peer_weights.sum(axis=1, keepdims=True)
        peer_weights /= peer_weights.sum(axis=1, keepdims=True)

    lower = np.empty((k, n))
    upper = np.empty((k, n))
    grid = st.sampled_from(BOUND_GRID)
    for i in range(k):
        for j in range(n):
            least, desired = draw(st.tuples(grid, grid).filter(lambda pair: pair[0] != pair[1]))
            lower[i, j], upper[i, j] = least, desired

    measurements = np.empty((m, n))
    for c in range(m):
        for j in range(n):
            bounds = sorted(set(lower[:, j]) | set(upper[:, j]))
            measurements[c, j] = draw(
                st.one_of(
                    st.sampled_from(bounds),  # exactly at some expert's bound
                    st.sampled_from(BOUND_GRID),
                    st.floats(-3.0, 11.0, allow_nan=False),
                )
            )
    return weights, peer_weights, lower, upper, measurements


@settings(max_examples=200, deadline=None)
@given(studies())
def test_evaluate_equals_the_literal_reference(study):
    weights, peer_weights, lower, upper, measurements = study
    result = evaluate(weights=weights, peer_weights=peer_weights, lower=lower, upper=upper, measurements=measurements)
    reference = literal_evaluation(weights, peer_weights, lower, upper, measurements)

    np.testing.assert_array_equal(result.vetoed, reference["vetoed"])
    np.testing.assert_allclose(result.metric_weights, reference["metric_weights"], rtol=0, atol=1e-7)
    np.testing.assert_allclose(result.group_scores, reference["group_scores"], rtol=0, atol=1e-7)
    np.testing.assert_allclose(result.weighted_scores, reference["weighted_scores"], rtol=0, atol=1e-7)
    np.testing.assert_allclose(result.cef, reference["cef"], rtol=0, atol=1e-7)
    assert result.iterations == aggregate_literal(peer_weights, weights)[1]
    for c, measured in enumerate(measurements):
        assert bool(vetoes_for(lower, upper, measured)) == result.vetoed[c]
        assert np.array_equal(individual_scores(lower, upper, measured) == 0, _literal_zeros(lower, upper, measured))


def _literal_zeros(lower, upper, measured):
    k, n = lower.shape
    return np.array(
        [[literal_individual_score(measured[j], lower[i, j], upper[i, j]) == 0 for j in range(n)] for i in range(k)]
    )


@settings(max_examples=150, deadline=None)
@given(studies(), st.randoms(use_true_random=False))
def test_permuting_experts_changes_nothing_but_the_influence_order(study, random):
    weights, peer_weights, lower, upper, measurements = study
    k = len(weights)
    order = list(range(k))
    random.shuffle(order)
    original = evaluate(weights=weights, peer_weights=peer_weights, lower=lower, upper=upper, measurements=measurements)
    permuted = evaluate(
        weights=weights[order],
        peer_weights=peer_weights[np.ix_(order, order)],
        lower=lower[order],
        upper=upper[order],
        measurements=measurements,
    )
    np.testing.assert_allclose(permuted.expert_influence, original.expert_influence[order], atol=1e-12)
    np.testing.assert_allclose(permuted.metric_weights, original.metric_weights, atol=1e-12)
    np.testing.assert_allclose(permuted.group_scores, original.group_scores, atol=1e-12)
    np.testing.assert_allclose(permuted.cef, original.cef, atol=1e-12)
    np.testing.assert_array_equal(permuted.vetoed, original.vetoed)


@settings(max_examples=100, deadline=None)
@given(studies(), st.randoms(use_true_random=False))
def test_permuting_candidates_permutes_the_results(study, random):
    weights, peer_weights, lower, upper, measurements = study
    order = list(range(len(measurements)))
    random.shuffle(order)
    arguments = {"weights": weights, "peer_weights": peer_weights, "lower": lower, "upper": upper}
    original = evaluate(measurements=measurements, **arguments)
    permuted = evaluate(measurements=measurements[order], **arguments)
    np.testing.assert_array_equal(permuted.group_scores, original.group_scores[order])
    np.testing.assert_allclose(permuted.weighted_scores, original.weighted_scores[order], rtol=0, atol=1e-15)
    np.testing.assert_allclose(permuted.cef, original.cef[order], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(permuted.vetoed, original.vetoed[order])
    assert permuted.iterations == original.iterations


@settings(max_examples=200, deadline=None)
@given(studies())
def test_invariants(study):
    weights, peer_weights, lower, upper, measurements = study
    result = evaluate(weights=weights, peer_weights=peer_weights, lower=lower, upper=upper, measurements=measurements)
    assert result.metric_weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert (result.metric_weights > 0).all()
    assert result.expert_influence.sum() == pytest.approx(1.0, abs=1e-12)
    assert (result.expert_influence > 0).all()
    np.testing.assert_allclose(result.expert_influence @ peer_weights, result.expert_influence, atol=1e-12)
    assert ((result.group_scores >= 0) & (result.group_scores <= 1)).all()
    assert ((result.weighted_scores >= 0) & (result.weighted_scores <= 1 + 1e-12)).all()
    np.testing.assert_array_equal(result.cef[result.vetoed], 0.0)
    np.testing.assert_array_equal(result.cef[~result.vetoed], result.weighted_scores[~result.vetoed])


@settings(max_examples=100, deadline=None)
@given(studies(max_candidates=1))
def test_candidate_at_the_shared_desired_value_scores_1(study):
    weights, peer_weights, lower, upper, _ = study
    # Every expert shares expert 0's range.
    shared_lower = np.tile(lower[0], (len(lower), 1))
    shared_upper = np.tile(upper[0], (len(upper), 1))
    result = evaluate(
        weights=weights,
        peer_weights=peer_weights,
        lower=shared_lower,
        upper=shared_upper,
        measurements=[upper[0], lower[0]],
    )
    np.testing.assert_allclose(result.group_scores[0], 1.0, atol=1e-12)
    assert result.cef[0] == pytest.approx(1.0, abs=1e-12)
    assert not result.vetoed[0]
    # And at the shared least acceptable value: every score 0, vetoed.
    np.testing.assert_allclose(result.group_scores[1], 0.0, atol=1e-12)
    assert result.vetoed[1] and result.cef[1] == 0.0


@settings(max_examples=100, deadline=None)
@given(studies(max_candidates=1))
def test_aggregate_literal_converges_to_influence_times_values(study):
    weights, peer_weights, *_ = study
    group, layers = aggregate_literal(peer_weights, weights, tolerance=1e-9)
    np.testing.assert_allclose(group, expert_influence(peer_weights) @ weights, atol=1e-9)
    assert layers == layers_needed(peer_weights, weights)


# --- slowly mixing peer weights and extreme ranges (found in review) -----------


def test_layers_past_the_stepwise_limit_equal_the_literal_count(monkeypatch):
    rng = np.random.default_rng(7)
    for _ in range(25):
        k, n = int(rng.integers(2, 6)), int(rng.integers(1, 4))
        peer = rng.random((k, k)) * 0.1 + np.eye(k) * rng.uniform(1, 20)
        peer /= peer.sum(axis=1, keepdims=True)
        values = rng.random((k, n)) + 0.1
        literal = core.aggregate_literal(peer, values)[1]
        # Count by repeated squaring after only 5 literal layers.
        monkeypatch.setattr(layers, "STEPWISE_LAYERS", 5)
        assert core.layers_needed(peer, values) == literal
        monkeypatch.undo()


def test_valid_but_very_slowly_mixing_peer_weights_still_evaluate():
    # Peer weights of 1e-5 are valid (METHOD.md 5); the literal iteration
    # needs about a million layers. For this symmetric V the spread of a
    # column shrinks by exactly (1 - 2e-5) a layer.
    peer = np.array([[0.99999, 0.00001], [0.00001, 0.99999]])
    weights = np.array([[0.7, 0.3], [0.4, 0.6]])
    result = core.evaluate(
        weights=weights,
        peer_weights=peer,
        lower=np.zeros((2, 2)),
        upper=np.ones((2, 2)),
        measurements=np.array([[0.5, 0.25]]),
    )
    expected = int(np.ceil(np.log(1e-9 / 0.3) / np.log(1 - 2e-5))) - 1  # first s with 0.3 r^s < 1e-9, q = s - 1
    assert abs(result.iterations - expected) <= 1
    np.testing.assert_allclose(result.metric_weights, [0.55, 0.45])
    np.testing.assert_allclose(result.group_scores, [[0.5, 0.25]])


@pytest.mark.parametrize(
    "lower, upper, measured",
    [
        # narrow and very wide ranges far apart: the ramp sums would cancel
        ([[0.0], [-1e14]], [[1.0], [1.0]], [[0.5], [0.9], [-5e13], [1e14]]),
        ([[1e9], [0.0]], [[1e9 + 1], [1.0]], [[1e9 + 0.5], [0.5], [5e8]]),
        # bounds near the largest double
        ([[1e308], [1e308]], [[1.5e308], [1.5e308]], [[1.2e308], [1.4e308], [-1.7e308]]),
        ([[-1e308], [-1e308]], [[1e307], [1e307]], [[0.0], [1.7e308], [-1.7e308]]),
    ],
)
def test_extreme_ranges_agree_with_the_literal_reference(lower, upper, measured):
    lower, upper, measured = np.array(lower), np.array(upper), np.array(measured)
    peer = np.array([[0.6, 0.4], [0.3, 0.7]])
    result = core.evaluate(weights=np.ones((2, 1)), peer_weights=peer, lower=lower, upper=upper, measurements=measured)
    for row, candidate in zip(result.group_scores, measured, strict=False):
        literal, _ = core.aggregate_literal(peer, core.individual_scores(lower, upper, candidate))
        np.testing.assert_allclose(row, literal, atol=1e-12)
    assert np.isfinite(result.cef).all()


def test_a_range_whose_width_overflows_is_refused():
    with pytest.raises(ValueError, match="finite width"):
        core.evaluate(
            weights=np.ones((1, 1)),
            peer_weights=np.ones((1, 1)),
            lower=np.array([[-1e308]]),
            upper=np.array([[1e308]]),
            measurements=np.zeros((1, 1)),
        )


# --- the fast paths at scale: pi, the layer count, interpolation, vetoes ------


def longdouble_layers(peer_weights, values, tolerance=core.DEFAULT_TOLERANCE, max_layers=20_000):
    """The literal aggregation's count in extended precision, for the same
    (validated, float64) V: the reference where float64 rounding decides."""
    transition = core._validated_peer_weights(peer_weights).astype(np.longdouble)
    layer = transition @ np.asarray(values, dtype=np.longdouble)
    for layer_count in range(max_layers):
        if np.all(layer.max(axis=0) - layer.min(axis=0) < tolerance):
            return layer_count
        layer = transition @ layer
    raise AssertionError("the extended-precision reference did not converge")


def assert_literal_count(count, peer_weights, values, tolerance=core.DEFAULT_TOLERANCE):
    literal = aggregate_literal(peer_weights, values, tolerance=tolerance)[1]
    if count != literal:  # only where float64 rounding decides the literal count
        assert count == longdouble_layers(peer_weights, values, tolerance), (count, literal)


def mixing_peer_weights(rng, k, *, self_weight=0.0):
    peer = rng.uniform(0.5, 1.5, (k, k))
    peer /= peer.sum(axis=1, keepdims=True)
    peer = (1 - self_weight) * peer + self_weight * np.eye(k)
    return peer / peer.sum(axis=1, keepdims=True)


def camps_peer_weights(rng, k, *, apart=3e-3):
    camp = rng.integers(0, 2, k)
    peer = rng.uniform(0.5, 1.5, (k, k)) * np.where(camp[:, None] == camp[None, :], 1.0, apart)
    return peer / peer.sum(axis=1, keepdims=True)


def ring_peer_weights(k):
    # Each expert trusts their two neighbours: many eigenvalues near 1.
    peer = np.full((k, k), 1e-3 / k)
    experts = np.arange(k)
    peer[experts, (experts + 1) % k] += 0.3
    peer[experts, (experts - 1) % k] += 0.3
    peer[experts, experts] += 0.4
    return peer / peer.sum(axis=1, keepdims=True)


def random_weights(rng, k, n):
    weights = rng.uniform(0.01, 1.0, (k, n))
    return weights / weights.sum(axis=1, keepdims=True)


@pytest.fixture
def taken_paths(monkeypatch):
    """Names of the counting functions called, to check which path ran."""
    taken = []
    for module, name in (
        (layers, "_count_layers_fast"),
        (layers, "_count_layers_lazy"),
        (layers, "_count_layers_subspace"),
        (layers, "_count_deviations"),
        (layers, "_count_layers_float64"),
        (core, "_stationary_by_solve"),
    ):
        original = getattr(module, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            taken.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)
    return taken


def test_influence_by_power_iteration_equals_the_solve(taken_paths):
    rng = np.random.default_rng(11)
    for peer in (mixing_peer_weights(rng, 200), mixing_peer_weights(rng, 200, self_weight=0.99)):
        taken_paths.clear()
        influence = expert_influence(peer)
        assert "_stationary_by_solve" not in taken_paths  # mixes (the lazy one through V - alpha I)
        np.testing.assert_allclose(influence, core._stationary_by_solve(peer), rtol=1e-12, atol=0)
        np.testing.assert_allclose(influence @ peer, influence, rtol=1e-12, atol=0)


def test_influence_falls_back_to_the_solve_when_iteration_would_cost_more(taken_paths):
    rng = np.random.default_rng(12)
    peer = camps_peer_weights(rng, 120, apart=1e-4)  # mixes over thousands of steps
    assert core._stationary_by_iteration(peer) is None
    taken_paths.clear()
    influence = expert_influence(peer)
    assert taken_paths == ["_stationary_by_solve"]
    np.testing.assert_allclose(influence @ peer, influence, rtol=1e-10, atol=0)


@pytest.mark.parametrize(
    "kind, path",
    [
        ("mixing", None),  # float32 layers only
        ("lazy", "_count_layers_lazy"),
        ("camps", "_count_layers_subspace"),
        ("ring", "_count_layers_float64"),
    ],
)
def test_fast_layer_count_equals_the_literal_count(kind, path, taken_paths):
    rng = np.random.default_rng(13)
    make = {
        "mixing": lambda k: mixing_peer_weights(rng, k),
        "lazy": lambda k: mixing_peer_weights(rng, k, self_weight=0.95),
        "camps": lambda k: camps_peer_weights(rng, k),
        "ring": ring_peer_weights,
    }[kind]
    for _ in range(4):
        k, n = int(rng.integers(layers.FAST_COUNT_MIN_EXPERTS, 90)), int(rng.integers(1, 6))
        peer = make(k)
        values = random_weights(rng, k, n)
        influence = expert_influence(peer)
        taken_paths.clear()
        count = layers.count_layers(core._validated_peer_weights(peer), values, core.DEFAULT_TOLERANCE, influence)
        assert taken_paths[0] == "_count_layers_fast"
        if path is None:
            assert set(taken_paths) <= {"_count_layers_fast", "_count_deviations"}
        else:
            assert path in taken_paths
        assert_literal_count(count, peer, values)


@pytest.mark.parametrize("self_weight", [0.0, 0.6, 0.95])
def test_layer_count_with_the_tolerance_at_a_spread_equals_a_reference(self_weight):
    # The tolerance placed at (or within 1e-12 .. 1e-5 of) a column's spread
    # at some layer: the float32 band, the lazy band and the exact recount
    # must all decide as the literal count does, or as extended precision
    # does where float64 rounding decides the literal one.
    rng = np.random.default_rng(14)
    for case in range(12):
        k, n = int(rng.integers(layers.FAST_COUNT_MIN_EXPERTS, 90)), int(rng.integers(1, 6))
        peer = mixing_peer_weights(rng, k, self_weight=self_weight)
        values = random_weights(rng, k, n)
        layer, spreads = peer @ values, []
        for _ in range(200 if self_weight > 0.9 else 40):
            spreads.append((layer.max(axis=0) - layer.min(axis=0)).max())
            layer = peer @ layer
        at = int(rng.integers(1, 4 if self_weight == 0 else len(spreads)))
        tolerance = spreads[at] * [1.0, 1 + 1e-12, 1 - 1e-12, 1 + 1e-7, 1 - 1e-7, 1 + 1e-5, 1 - 1e-5][case % 7]
        if tolerance < 1e-12:  # below what float64 layers can reach
            continue
        assert_literal_count(layers_needed(peer, values, tolerance=tolerance), peer, values, tolerance)


def test_float32_band_sends_a_close_call_to_the_exact_recount(taken_paths):
    rng = np.random.default_rng(15)
    peer, values = mixing_peer_weights(rng, 64), random_weights(rng, 64, 3)
    layer = peer @ peer @ values
    tolerance = (layer.max(axis=0) - layer.min(axis=0)).max()  # exactly a spread of layer 1
    count = layers.count_layers(peer, values, tolerance, expert_influence(peer))
    assert "_count_deviations" in taken_paths
    assert_literal_count(count, peer, values, tolerance)


def test_tolerance_at_float64_rounding_floor_counts_the_literal_way(taken_paths):
    rng = np.random.default_rng(16)
    peer, values = mixing_peer_weights(rng, 64), random_weights(rng, 64, 2)
    influence = expert_influence(peer)
    taken_paths.clear()
    count = layers.count_layers(peer, values, 1e-15, influence)
    assert taken_paths == ["_count_layers_fast", "_count_layers_float64"]
    assert count == aggregate_literal(peer, values, tolerance=1e-15)[1]


def test_evaluate_at_scale_equals_the_literal_reference():
    rng = np.random.default_rng(17)
    for self_weight in (0.0, 0.9):
        k, n, m = 70, 4, 12
        weights = random_weights(rng, k, n)
        peer = mixing_peer_weights(rng, k, self_weight=self_weight)
        lower = rng.uniform(0, 1, (k, n))
        upper = lower + rng.choice([-1.0, 1.0], (k, n)) * rng.uniform(0.2, 1, (k, n))
        measurements = rng.uniform(-0.5, 1.5, (m, n))
        measurements[0] = lower[3]  # exactly at one expert's least acceptable values
        result = evaluate(weights=weights, peer_weights=peer, lower=lower, upper=upper, measurements=measurements)
        reference = literal_evaluation(weights, peer, lower, upper, measurements)
        np.testing.assert_array_equal(result.vetoed, reference["vetoed"])
        for field in ("metric_weights", "group_scores", "weighted_scores", "cef"):
            # The literal layers stop within the tolerance of their limit pi X.
            np.testing.assert_allclose(getattr(result, field), reference[field], rtol=0, atol=1e-9)
        assert_literal_count(result.iterations, peer, weights)


def test_many_more_candidates_than_experts_are_interpolated_exactly(monkeypatch):
    rng = np.random.default_rng(18)
    k, n, m = 5, 3, 400  # m >= INTERPOLATE_FROM * 2k: breakpoints scored once
    lower = rng.uniform(0, 1, (k, n))
    upper = lower + rng.choice([-1.0, 1.0], (k, n)) * rng.uniform(0.2, 1, (k, n))
    measurements = rng.uniform(-1, 2, (m, n))
    measurements[:k] = lower  # at the bounds
    measurements[k : 2 * k] = upper
    measurements[-2:] = [[-1e300] * n, [1e300] * n]  # far beyond every range
    arguments = {
        "weights": random_weights(rng, k, n),
        "peer_weights": mixing_peer_weights(rng, k),
        "lower": lower,
        "upper": upper,
        "measurements": measurements,
    }
    interpolated = evaluate(**arguments)
    monkeypatch.setattr(core, "INTERPOLATE_FROM", 10**9)
    placed = evaluate(**arguments)
    np.testing.assert_allclose(interpolated.group_scores, placed.group_scores, rtol=0, atol=4e-16)
    influence = expert_influence(arguments["peer_weights"])
    for c in range(0, m, 7):
        expected = influence @ individual_scores(lower, upper, measurements[c])
        np.testing.assert_allclose(interpolated.group_scores[c], expected, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(interpolated.vetoed, placed.vetoed)


@pytest.mark.parametrize(
    "lower, upper, measured",
    [
        ([[0.0], [-1e14]], [[1.0], [1.0]], [[0.5], [0.9], [-5e13], [1e14]]),
        ([[1e308], [1e308]], [[1.5e308], [1.5e308]], [[1.2e308], [1.4e308], [-1.7e308]]),
        ([[-1e308], [-1e308]], [[1e307], [1e307]], [[0.0], [1.7e308], [-1.7e308]]),
        ([[0.0], [1e-300]], [[1e-300], [2e-300]], [[5e-301], [1.5e-300], [1.0]]),
    ],
)
def test_interpolation_of_extreme_ranges_agrees_with_the_literal_reference(lower, upper, measured, monkeypatch):
    monkeypatch.setattr(core, "INTERPOLATE_FROM", 0)  # interpolate whatever m is
    lower, upper, measured = np.array(lower), np.array(upper), np.array(measured)
    peer = np.array([[0.6, 0.4], [0.3, 0.7]])
    result = core.evaluate(weights=np.ones((2, 1)), peer_weights=peer, lower=lower, upper=upper, measurements=measured)
    for row, candidate in zip(result.group_scores, measured, strict=True):
        literal, _ = core.aggregate_literal(peer, core.individual_scores(lower, upper, candidate))
        np.testing.assert_allclose(row, literal, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(studies())
def test_interpolated_group_scores_equal_the_literal_reference(study):
    weights, peer_weights, lower, upper, measurements = study
    saved = core.INTERPOLATE_FROM
    core.INTERPOLATE_FROM = 0
    try:
        result = evaluate(
            weights=weights, peer_weights=peer_weights, lower=lower, upper=upper, measurements=measurements
        )
    finally:
        core.INTERPOLATE_FROM = saved
    influence = expert_influence(peer_weights)
    for c, measured in enumerate(measurements):
        np.testing.assert_allclose(
            result.group_scores[c], influence @ individual_scores(lower, upper, measured), rtol=0, atol=1e-12
        )


def test_vetoing_judgments_list_every_veto_in_one_pass(monkeypatch):
    rng = np.random.default_rng(19)
    k, n, m = 6, 4, 60
    lower = rng.integers(0, 5, (k, n)).astype(float)
    upper = lower + rng.choice([-2.0, 3.0], (k, n))
    measurements = rng.integers(-2, 8, (m, n)).astype(float)
    expected = [(c, *veto) for c in range(m) for veto in vetoes_for(lower, upper, measurements[c])]
    assert [tuple(row) for row in core.vetoing_judgments(lower, upper, measurements).tolist()] == expected
    monkeypatch.setattr(core, "_VETO_BATCH_ENTRIES", 30)  # several batches of whole candidates
    assert [tuple(row) for row in core.vetoing_judgments(lower, upper, measurements).tolist()] == expected
    assert core.vetoing_judgments(lower, upper, np.empty((0, n))).shape == (0, 3)
    with pytest.raises(ValueError, match=r"measurements must have shape \(3, 4\)"):
        core.vetoing_judgments(lower, upper, np.zeros((3, 5)))


@pytest.mark.parametrize("least, desired", [(0.8, 0.95), (50.0, 10.0)])
def test_veto_preview_scores_each_value_as_individual_scores_and_vetoes_exactly_the_zeros(least, desired):
    values = [
        least,
        desired,
        (least + desired) / 2,
        2 * least - desired,
        2 * desired - least,
        math.nextafter(least, desired),
    ]
    previews = core.veto_preview(least, desired, values)
    scores = individual_scores([[least] * len(values)], [[desired] * len(values)], values)[0]
    assert [p.score for p in previews] == scores.tolist()
    assert [p.vetoed for p in previews] == (scores == 0).tolist() == [True, False, False, True, False, False]
    assert core.veto_preview(least, desired, []) == []
    with pytest.raises(ValueError):
        core.veto_preview(least, least, values)


def test_a_value_just_inside_the_range_whose_position_underflows_is_not_a_veto():
    # Found by Hypothesis: (5e-324 - 0) / 2 rounds to 0.0, but 5e-324 lies inside [0, 2].
    assert literal_individual_score(5e-324, 0.0, 2.0) == 5e-324
    assert individual_scores([[0.0]], [[2.0]], [5e-324])[0, 0] == 5e-324
    assert literal_individual_score(0.0, 0.0, 2.0) == 0.0 == individual_scores([[0.0]], [[2.0]], [0.0])[0, 0]
