"""engine.prioritisation: AHP, LPR, direct weights and Saaty's consistency.
Plain pytest, no Django."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prioritisation import (
    Consistency,
    ahp_priorities,
    ahp_weights,
    consistency,
    consistency_ratios,
    lpr_weights,
    most_inconsistent,
    pairwise_matrix,
    principal_eigenvectors,
    prioritise,
    random_index,
)
from engine.rules import AHP_WEIGHTING_DEFAULT, AHP_WEIGHTINGS, CONSISTENCY_THRESHOLD, SCALE_VALUES

# Saaty's textbook 3x3 example.
SAATY_3 = np.array([[1, 3, 5], [1 / 3, 1, 3], [1 / 5, 1 / 3, 1]])


def consistent_matrix(weights):
    weights = np.asarray(weights, dtype=float)
    return weights[:, None] / weights[None, :]


def upper_judgments(matrix):
    n = len(matrix)
    return [(i, j, matrix[i][j]) for i in range(n) for j in range(i + 1, n)]


def bisect_root(function, low, high, steps=200):
    for _ in range(steps):
        middle = (low + high) / 2
        if (function(low) < 0) == (function(middle) < 0):
            low = middle
        else:
            high = middle
    return (low + high) / 2


# --------------------------------------------------------------------------
# pairwise_matrix
# --------------------------------------------------------------------------


def test_pairwise_matrix_fills_diagonal_and_reciprocals_in_either_orientation():
    matrix = pairwise_matrix(3, [(0, 1, 3), (2, 0, 5), (1, 2, 1 / 7)])
    np.testing.assert_allclose(matrix, [[1, 3, 1 / 5], [1 / 3, 1, 1 / 7], [5, 7, 1]], rtol=1e-15)
    assert np.array_equal(np.diag(matrix), [1, 1, 1])


def test_pairwise_matrix_single_attribute():
    np.testing.assert_array_equal(pairwise_matrix(1, []), [[1.0]])


def test_rounded_reciprocal_at_the_end_of_the_scale_passes():
    matrix = pairwise_matrix(2, [(0, 1, 0.1111111111)])
    assert matrix[1, 0] == pytest.approx(9.0, rel=1e-9)
    pairwise_matrix(2, [(0, 1, 9.0)])


INVALID_JUDGMENTS = [
    ("missing pairs listed", 3, [(0, 1, 2)], r"missing pairs: \(0, 2\), \(1, 2\)"),
    ("no judgments", 2, [], r"missing pairs: \(0, 1\)"),
    ("duplicate pair", 2, [(0, 1, 2), (0, 1, 3)], r"pair \(0, 1\) is judged twice"),
    (
        "duplicate reversed",
        3,
        [(0, 1, 2), (1, 0, 0.5), (0, 2, 1), (1, 2, 1)],
        r"judgment 1: pair \(0, 1\) is judged twice .*again as \(1, 0\)",
    ),
    ("above 9", 2, [(0, 1, 10)], r"judgment 0 \(0, 1\): value 10 is outside the scale 1/9..9"),
    ("below 1/9", 2, [(0, 1, 0.1)], r"value 0.1 is outside the scale"),
    ("just above 9", 2, [(0, 1, 9.0000001)], r"outside the scale"),
    ("zero", 2, [(0, 1, 0)], r"outside the scale"),
    ("NaN", 2, [(0, 1, math.nan)], r"value nan is not finite"),
    ("infinite", 2, [(0, 1, math.inf)], r"value inf is not finite"),
    ("row == column", 2, [(1, 1, 3)], r"judgment 0: row == column \(1\)"),
    ("index out of range", 3, [(0, 3, 2)], r"column index 3 is out of range 0..2"),
    ("negative index", 3, [(-1, 2, 2)], r"row index -1 is out of range 0..2"),
    ("float index", 3, [(0.0, 1, 2)], r"judgment 0 must be \(row index, column index, value\)"),
    ("not a triple", 2, [(0, 1)], r"judgment 0 must be"),
    ("value not a number", 2, [(0, 1, "strong")], r"judgment 0 must be"),
    ("n is zero", 0, [], r"n must be a positive integer"),
]


@pytest.mark.parametrize(
    "n, judgments, message", [case[1:] for case in INVALID_JUDGMENTS], ids=[case[0] for case in INVALID_JUDGMENTS]
)
def test_invalid_judgments_are_refused(n, judgments, message):
    with pytest.raises(ValueError, match=message):
        pairwise_matrix(n, judgments)


# --------------------------------------------------------------------------
# AHP and LPR weights
# --------------------------------------------------------------------------


def test_ahp_recovers_the_weights_of_a_consistent_matrix():
    matrix = consistent_matrix([0.5, 0.3, 0.2])
    np.testing.assert_allclose(ahp_weights(matrix), [0.5, 0.3, 0.2], atol=1e-15)
    np.testing.assert_allclose(lpr_weights(matrix), [0.5, 0.3, 0.2], atol=1e-15)
    result = consistency(matrix)
    assert result.lambda_max == pytest.approx(3.0, abs=1e-12)
    assert result.consistency_index == pytest.approx(0.0, abs=1e-12)
    assert 0.0 <= result.ratio < 1e-12


def test_saaty_textbook_3x3():
    # Column sums 23/15, 13/3, 9; row averages of the normalised columns:
    # w1 = (15/23 + 9/13 + 5/9) / 3 = 0.6333, w2 = (5/23 + 3/13 + 3/9) / 3 = 0.2605,
    # w3 = (3/23 + 1/13 + 1/9) / 3 = 0.1062.
    expected_weights = [
        (15 / 23 + 9 / 13 + 5 / 9) / 3,
        (5 / 23 + 3 / 13 + 3 / 9) / 3,
        (3 / 23 + 1 / 13 + 1 / 9) / 3,
    ]
    np.testing.assert_allclose(ahp_weights(SAATY_3), expected_weights, rtol=1e-14)
    np.testing.assert_allclose(ahp_weights(SAATY_3), [0.633, 0.260, 0.106], atol=5e-4)
    # Independent lambda_max: a 3x3 reciprocal matrix [[1, a, b], [1/a, 1, c],
    # [1/b, 1/c, 1]] has characteristic polynomial
    # lambda^3 - 3 lambda^2 - (K + 1/K - 2) with K = a c / b; its root above 3
    # by bisection, no eigensolver involved.
    K = 3 * 3 / 5
    expected_lambda = bisect_root(lambda x: x**3 - 3 * x**2 - (K + 1 / K - 2), 3.0, 4.0)
    result = consistency(SAATY_3)
    assert result.lambda_max == pytest.approx(expected_lambda, abs=1e-12)
    assert result.lambda_max == pytest.approx(3.039, abs=5e-4)
    assert result.consistency_index == pytest.approx((expected_lambda - 3) / 2, abs=1e-12)
    assert result.random_index == 0.58
    assert result.ratio == pytest.approx((expected_lambda - 3) / 2 / 0.58, abs=1e-12)
    assert result.ratio == pytest.approx(0.033, abs=5e-4)
    assert result.is_consistent


def test_lpr_weights_hand_computed():
    # R = [[1, 3, 1/2], [1/3, 1, 1/4], [2, 4, 1]], n = 3.
    # Column sums: 1 + 1/3 + 2 = 10/3, 3 + 1 + 4 = 8, 1/2 + 1/4 + 1 = 7/4.
    # w_i = sum_j r_ij / (3 * colsum_j):
    #   w1 = 1/10 + 3/24 + (1/2)/(21/4) = 1/10 + 1/8 + 2/21 = 269/840
    #   w2 = (1/3)/10 + 1/24 + (1/4)/(21/4) = 1/30 + 1/24 + 1/21 = 103/840
    #   w3 = 2/10 + 4/24 + 1/(21/4) = 1/5 + 1/6 + 4/21 = 468/840
    matrix = [[1, 3, 1 / 2], [1 / 3, 1, 1 / 4], [2, 4, 1]]
    np.testing.assert_allclose(lpr_weights(matrix), [269 / 840, 103 / 840, 468 / 840], rtol=1e-14)


@st.composite
def reciprocal_matrices(draw, min_n=1, max_n=9):
    n = draw(st.integers(min_n, max_n))
    matrix = np.ones((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            value = draw(st.sampled_from(list(SCALE_VALUES)) | st.floats(1 / 9, 9))
            matrix[i, j], matrix[j, i] = value, 1 / value
    return matrix


@settings(max_examples=200, deadline=None)
@given(reciprocal_matrices())
def test_lpr_and_ahp_weights_sum_to_one_and_are_positive(matrix):
    for weights in (ahp_weights(matrix), lpr_weights(matrix)):
        assert weights.sum() == pytest.approx(1.0, abs=1e-15)
        assert (weights > 0).all()
    # Literal LPR formula (j bound by the sum) is the column normalisation of AHP.
    np.testing.assert_allclose(lpr_weights(matrix), ahp_weights(matrix), rtol=1e-13)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.05, 1.0), min_size=1, max_size=12))
def test_consistent_matrices_give_back_their_weights(raw_weights):
    weights = np.array(raw_weights) / sum(raw_weights)
    matrix = consistent_matrix(weights)
    np.testing.assert_allclose(ahp_weights(matrix), weights, rtol=1e-12)
    assert consistency(matrix).ratio == pytest.approx(0.0, abs=1e-12)
    for judgment in most_inconsistent(matrix, ahp_weights(matrix), top=100):
        assert judgment.error == pytest.approx(1.0, abs=1e-12)


def random_pairwise_matrix(rng, n):
    rows, columns = np.triu_indices(n, 1)
    values = rng.choice(SCALE_VALUES, size=len(rows))
    return pairwise_matrix(n, zip(rows.tolist(), columns.tolist(), values, strict=False))


def test_weights_of_a_stack():
    rng = np.random.default_rng(7)
    stack = np.array([[random_pairwise_matrix(rng, 4) for _ in range(5)] for _ in range(2)])
    assert ahp_weights(stack).shape == (2, 5, 4)
    for index in np.ndindex(2, 5):
        np.testing.assert_allclose(ahp_weights(stack)[index], ahp_weights(stack[index]), rtol=1e-15)
        np.testing.assert_allclose(lpr_weights(stack)[index], lpr_weights(stack[index]), rtol=1e-15)


INVALID_MATRICES = [
    ("not square", np.ones((2, 3)), r"must be square"),
    ("1-D", np.ones(3), r"must have shape \((\.\.\., )?n, n\), got \(3,\)"),
    ("zero entry", [[1, 0], [0, 1]], r"matrix\[0, 1\] must be positive"),
    ("NaN", [[1, math.nan], [2, 1]], r"matrix\[0, 1\] is not finite"),
    ("not reciprocal", [[1, 3], [0.5, 1]], r"not reciprocal: entries \(0, 1\) and \(1, 0\) multiply to 1.5"),
    ("diagonal not 1", [[2, 1], [1, 1]], r"must have 1 on the diagonal, entry \(0, 0\) is 2"),
]


@pytest.mark.parametrize(
    "matrix, message", [case[1:] for case in INVALID_MATRICES], ids=[case[0] for case in INVALID_MATRICES]
)
@pytest.mark.parametrize("function", [ahp_weights, lpr_weights, consistency])
def test_invalid_matrices_are_refused(function, matrix, message):
    with pytest.raises(ValueError, match=message):
        function(matrix)


def test_invalid_matrix_in_a_stack_is_located():
    stack = np.stack([SAATY_3, SAATY_3, SAATY_3])
    stack[2, 1, 0] = 0.5
    with pytest.raises(
        ValueError, match=r"matrices\[2\] is not reciprocal: entries \(0, 1\) and \(1, 0\) multiply to 1.5"
    ):
        consistency_ratios(stack)


# --------------------------------------------------------------------------
# Consistency
# --------------------------------------------------------------------------


def test_random_index_table():
    assert [random_index(n) for n in range(1, 16)] == [
        0.0,
        0.0,
        0.58,
        0.90,
        1.12,
        1.24,
        1.32,
        1.41,
        1.45,
        1.49,
        1.51,
        1.48,
        1.56,
        1.57,
        1.59,
    ]
    # Alonso & Lamata (2006): lambda_bar = 2.7699 n - 4.3513.
    assert random_index(16) == pytest.approx((2.7699 * 16 - 4.3513 - 16) / 15)
    assert random_index(16) == pytest.approx(1.5978, abs=1e-4)
    assert random_index(100) == pytest.approx((2.7699 * 100 - 4.3513 - 100) / 99)
    values = [random_index(n) for n in range(16, 60)]
    assert values == sorted(values) and values[-1] < 1.7699
    with pytest.raises(ValueError, match="n must be a positive integer"):
        random_index(0)


@pytest.mark.parametrize("n", [1, 2])
def test_consistency_of_tiny_matrices_is_zero(n):
    matrix = pairwise_matrix(n, [(0, 1, 7)] if n == 2 else [])
    assert consistency(matrix) == Consistency(lambda_max=float(n), consistency_index=0.0, random_index=0.0, ratio=0.0)


def test_batched_consistency_ratios_equal_one_by_one():
    rng = np.random.default_rng(3)
    matrices = [random_pairwise_matrix(rng, 6) for _ in range(50)]
    matrices += [consistent_matrix(rng.uniform(0.1, 1.0, size=6)) for _ in range(10)]
    stack = np.array(matrices)
    batched = consistency_ratios(stack)
    assert batched.shape == (60,)
    np.testing.assert_allclose(batched, [consistency(m).ratio for m in matrices], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(consistency_ratios(stack.reshape(3, 20, 6, 6)), batched.reshape(3, 20), rtol=0, atol=0)
    np.testing.assert_allclose(batched[50:], 0.0, atol=1e-12)
    assert (batched[:50] > CONSISTENCY_THRESHOLD).all()  # random judgments


def test_consistency_ratio_of_one_matrix_is_0_d():
    assert consistency_ratios(SAATY_3).shape == ()
    assert float(consistency_ratios(SAATY_3)) == pytest.approx(consistency(SAATY_3).ratio)


@settings(max_examples=100, deadline=None)
@given(reciprocal_matrices(min_n=3))
def test_consistency_ratio_is_non_negative_and_lambda_at_least_n(matrix):
    result = consistency(matrix)
    assert result.lambda_max >= len(matrix) - 1e-9
    assert result.ratio >= 0.0


# --------------------------------------------------------------------------
# Repair hints
# --------------------------------------------------------------------------


def test_most_inconsistent_finds_a_corrupted_judgment_and_repair_restores_consistency():
    true_weights = np.array([8, 4, 2, 2, 1]) / 17
    matrix = consistent_matrix(true_weights)
    assert matrix[1, 3] == 2
    matrix[1, 3], matrix[3, 1] = 1 / 5, 5  # should be 2
    weights = ahp_weights(matrix)
    assert consistency(matrix).ratio > CONSISTENCY_THRESHOLD

    hints = most_inconsistent(matrix, weights)
    assert len(hints) == 3
    assert (hints[0].row, hints[0].column, hints[0].value) == (1, 3, 0.2)
    assert hints[0].error > 2 * hints[1].error
    assert [h.error for h in hints] == sorted((h.error for h in hints), reverse=True)
    # The hint is w_1 / w_3 of the current (corrupted) weights, which the bad
    # judgment itself drags down: 0.79, on the scale 1, already on the
    # consistent side of the bad value.
    assert hints[0].suggested_value == 1.0
    # Saaty's repair: apply the hint, recompute, repeat. It lands on the
    # consistent value 2 and restores the consistent matrix.
    for _ in range(5):
        hint = most_inconsistent(matrix, ahp_weights(matrix), top=1)[0]
        if hint.error < 1 + 1e-12:
            break
        matrix[hint.row, hint.column] = hint.suggested_value
        matrix[hint.column, hint.row] = 1 / hint.suggested_value
    assert matrix[1, 3] == 2
    np.testing.assert_allclose(ahp_weights(matrix), true_weights, rtol=1e-12)


def test_most_inconsistent_suggests_the_consistent_value_for_a_mild_slip():
    true_weights = np.array([8, 4, 2, 2, 1]) / 17
    matrix = consistent_matrix(true_weights)
    matrix[2, 3], matrix[3, 2] = 2, 1 / 2  # should be 1
    hint = most_inconsistent(matrix, ahp_weights(matrix))[0]
    assert (hint.row, hint.column, hint.value, hint.suggested_value) == (2, 3, 2.0, 1.0)
    # error = o_23 * w_3 / w_2 with the current weights.
    weights = ahp_weights(matrix)
    assert hint.error == pytest.approx(max(2 * weights[3] / weights[2], weights[2] / (2 * weights[3])))


@pytest.mark.parametrize(
    "ratio, suggestion",
    [
        (1.0, 1.0),
        (1.4, 1.0),
        (1.45, 2.0),
        (2.9, 3.0),
        (100.0, 9.0),
        (0.7, 0.5),
        (0.72, 1.0),
        (0.01, 1 / 9),
        (5.45, 5.0),
        (5.5, 6.0),
    ],
)
def test_suggestion_is_nearest_scale_value_in_log_space(ratio, suggestion):
    matrix = pairwise_matrix(2, [(0, 1, 1)])
    hint = most_inconsistent(matrix, [ratio, 1.0])[0]
    assert hint.suggested_value == pytest.approx(suggestion)
    assert hint.error == pytest.approx(max(ratio, 1 / ratio))


def test_most_inconsistent_edge_cases():
    assert most_inconsistent([[1.0]], [1.0]) == []
    two = most_inconsistent(pairwise_matrix(2, [(0, 1, 4)]), [0.8, 0.2])
    assert len(two) == 1 and two[0].error == pytest.approx(1.0) and two[0].suggested_value == 4.0
    assert most_inconsistent(SAATY_3, ahp_weights(SAATY_3), top=0) == []
    assert len(most_inconsistent(SAATY_3, ahp_weights(SAATY_3), top=10)) == 3
    with pytest.raises(ValueError, match=r"weights must have shape \(3,\)"):
        most_inconsistent(SAATY_3, [0.5, 0.5])
    with pytest.raises(ValueError, match=r"position 1 is 0$"):
        most_inconsistent(SAATY_3, [0.5, 0.0, 0.5])
    with pytest.raises(ValueError, match=r"top must be a non-negative integer"):
        most_inconsistent(SAATY_3, ahp_weights(SAATY_3), top=-1)


# --------------------------------------------------------------------------
# prioritise
# --------------------------------------------------------------------------


def test_direct_percentages_are_normalised():
    result = prioritise("direct", 3, weights=[63, 20, 17])
    np.testing.assert_allclose(result.weights, [0.63, 0.20, 0.17], rtol=1e-15)
    assert result.weights.sum() == pytest.approx(1.0, abs=1e-15)
    assert result.consistency_ratio is None
    assert result.most_inconsistent == []


@pytest.mark.parametrize(
    "weights, message",
    [
        ([63, 0, 17], r"weight at position 1 must be positive"),
        ([63, 20, -17], r"weight at position 2 must be positive"),
        ([math.nan, 20, 17], r"weight at position 0 is not finite"),
        ([63, math.inf, 17], r"weight at position 1 is not finite"),
        ([63, 20], r"weights must have 3 values, one per attribute, got 2"),
        ([63, 20, 17, 1], r"got 4"),
        ([63, "a lot", 17], r"weight at position 1 is not a number"),
        ([True, 20, 17], r"weight at position 0 is not a number"),
    ],
)
def test_invalid_direct_weights(weights, message):
    with pytest.raises(ValueError, match=message):
        prioritise("direct", 3, weights=weights)


def test_ahp_prioritisation():
    result = prioritise("ahp", 3, judgments=upper_judgments(SAATY_3))
    np.testing.assert_allclose(result.weights, ahp_weights(SAATY_3))
    assert result.consistency_ratio == pytest.approx(consistency(SAATY_3).ratio)
    assert len(result.most_inconsistent) == 3
    assert {(h.row, h.column) for h in result.most_inconsistent} == {(0, 1), (0, 2), (1, 2)}


def test_lpr_prioritisation():
    matrix = [[1, 3, 1 / 2], [1 / 3, 1, 1 / 4], [2, 4, 1]]
    result = prioritise("lpr", 3, judgments=upper_judgments(matrix))
    np.testing.assert_allclose(result.weights, [269 / 840, 103 / 840, 468 / 840], rtol=1e-14)
    assert result.consistency_ratio == pytest.approx(consistency(matrix).ratio)
    assert result.consistency_ratio > 0


def test_single_attribute_needs_no_judgments():
    result = prioritise("ahp", 1)
    np.testing.assert_array_equal(result.weights, [1.0])
    assert result.consistency_ratio == 0.0 and result.most_inconsistent == []


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: prioritise("smart", 3, weights=[1, 1, 1]), r"method must be one of direct, ahp, lpr, got 'smart'"),
        (lambda: prioritise("direct", 3), r"direct prioritisation needs weights"),
        (lambda: prioritise("direct", 2, judgments=[(0, 1, 3)]), r"takes weights, not judgments"),
        (lambda: prioritise("ahp", 2, weights=[1, 1]), r"ahp prioritisation takes judgments, not weights"),
        (lambda: prioritise("lpr", 3), r"lpr prioritisation needs judgments"),
        (lambda: prioritise("ahp", 3, judgments=[(0, 1, 3), (0, 2, 5)]), r"missing pairs: \(1, 2\)"),
        (lambda: prioritise("ahp", 0, judgments=[]), r"n must be a positive integer"),
    ],
)
def test_invalid_prioritisation_calls(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_results_are_frozen():
    result = prioritise("direct", 2, weights=[1, 3])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.weights = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        consistency(SAATY_3).ratio = 0


# --- AHP weightings (issue 16, finding 13) ---------------------------------------------------

_SCALE = [1 / 9, 1 / 8, 1 / 7, 1 / 6, 1 / 5, 1 / 4, 1 / 3, 1 / 2, 1, 2, 3, 4, 5, 6, 7, 8, 9]


def _reciprocal(n: int, values: list[float]) -> np.ndarray:
    matrix = np.ones((n, n))
    rows, columns = np.triu_indices(n, k=1)
    matrix[rows, columns] = values
    matrix[columns, rows] = 1 / np.asarray(values)
    return matrix


@st.composite
def reciprocal_stacks(draw):
    n = draw(st.integers(min_value=2, max_value=9))
    count = draw(st.integers(min_value=1, max_value=6))
    pairs = n * (n - 1) // 2
    return np.stack(
        [_reciprocal(n, draw(st.lists(st.sampled_from(_SCALE), min_size=pairs, max_size=pairs))) for _ in range(count)]
    )


def _numpy_principal(matrix: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eig(matrix)
    vector = np.abs(vectors[:, np.argmax(values.real)].real)
    return vector / vector.sum()


@settings(max_examples=200, deadline=None)
@given(reciprocal_stacks())
def test_the_eigenvector_weighting_agrees_with_numpys_principal_eigenvector(stack):
    batched = ahp_weights(stack, "eigenvector")
    for matrix, weights in zip(stack, batched, strict=True):
        np.testing.assert_allclose(weights, _numpy_principal(matrix), rtol=0, atol=1e-12)
    assert np.allclose(batched.sum(axis=-1), 1.0, rtol=0, atol=1e-15)


@settings(max_examples=200, deadline=None)
@given(reciprocal_stacks())
def test_the_geometric_mean_weighting_is_the_normalised_row_geometric_mean(stack):
    batched = ahp_weights(stack, "geometric_mean")
    for matrix, weights in zip(stack, batched, strict=True):
        n = len(matrix)
        literal = [math.prod(row) ** (1 / n) for row in matrix.tolist()]
        expected = [g / sum(literal) for g in literal]
        np.testing.assert_allclose(weights, expected, rtol=1e-12, atol=0)


def test_the_paper_method_is_the_default_and_the_three_agree_on_a_consistent_matrix():
    assert AHP_WEIGHTING_DEFAULT == "column_means"
    saaty = [[1, 3, 5], [1 / 3, 1, 3], [1 / 5, 1 / 3, 1]]
    np.testing.assert_array_equal(ahp_weights(saaty), ahp_weights(saaty, "column_means"))
    # published example values (Saaty's 3x3): column means vs eigenvector differ in the third digit
    np.testing.assert_allclose(ahp_weights(saaty, "column_means"), [0.63335, 0.26050, 0.10616], atol=5e-6)
    np.testing.assert_allclose(ahp_weights(saaty, "eigenvector"), [0.63699, 0.25828, 0.10473], atol=5e-6)
    # for 3x3 the geometric mean is the eigenvector (a known identity)
    np.testing.assert_allclose(ahp_weights(saaty, "geometric_mean"), ahp_weights(saaty, "eigenvector"), atol=1e-15)
    consistent = np.outer([0.5, 0.3, 0.2], 1 / np.array([0.5, 0.3, 0.2]))
    for weighting in AHP_WEIGHTINGS:
        np.testing.assert_allclose(ahp_weights(consistent, weighting), [0.5, 0.3, 0.2], atol=1e-15)
    with pytest.raises(ValueError, match="weighting must be one of column_means, eigenvector, geometric_mean"):
        ahp_weights(saaty, "mean")


def test_prioritise_uses_the_weighting_and_keeps_cr_by_the_principal_eigenvalue():
    judgments = [(0, 1, 3), (0, 2, 5), (1, 2, 3)]
    paper = prioritise("ahp", 3, judgments=judgments)
    eigen = prioritise("ahp", 3, judgments=judgments, weighting="eigenvector")
    assert paper.consistency_ratio == eigen.consistency_ratio  # CR: lambda_max of O, whatever the weighting
    np.testing.assert_allclose(eigen.weights, principal_eigenvectors(np.array(pairwise_matrix(3, judgments))))
    assert not np.allclose(paper.weights, eigen.weights, rtol=0, atol=1e-3)


# --- The Perron kernel (issue 19, finding 2) -------------------------------------------------
# lambda_max, CR and the eigenvector weighting come from one batched power iteration
# (engine.prioritisation._perron), not from an eigensolve of every matrix. The reference is
# what the code did before: numpy's eigenvalues, the largest real part.


def _eigensolve_ratio(matrix: np.ndarray) -> float:
    n = len(matrix)
    if n <= 2:
        return 0.0
    lambda_max = np.linalg.eigvals(matrix).real.max()
    return max((lambda_max - n) / (n - 1), 0.0) / random_index(n)


@st.composite
def kernel_matrices(draw):
    """Reciprocal matrices n = 3..15: on the scale, anywhere in [1/9, 9], nearly consistent
    (w_i / w_j times a small slip), or as inconsistent as the scale allows (cyclic: every
    attribute 9 times the next)."""
    n = draw(st.integers(3, 15))
    pairs = n * (n - 1) // 2
    kind = draw(st.sampled_from(["scale", "continuous", "near_consistent", "cyclic"]))
    if kind == "scale":
        values = draw(st.lists(st.sampled_from(_SCALE), min_size=pairs, max_size=pairs))
    elif kind == "continuous":
        values = draw(st.lists(st.floats(1 / 9, 9), min_size=pairs, max_size=pairs))
    elif kind == "near_consistent":
        weights = np.array(draw(st.lists(st.floats(0.1, 1.0), min_size=n, max_size=n)))
        slips = np.exp(np.array(draw(st.lists(st.floats(-1e-3, 1e-3), min_size=pairs, max_size=pairs))))
        rows, columns = np.triu_indices(n, k=1)
        values = list(weights[rows] / weights[columns] * slips)
    else:
        rows, columns = np.triu_indices(n, k=1)
        values = [
            9.0 if column == row + 1 else (1 / 9 if (row, column) == (0, n - 1) else 1.0)
            for row, column in zip(rows.tolist(), columns.tolist(), strict=True)
        ]
    return _reciprocal(n, values)


@settings(max_examples=300, deadline=None)
@given(st.lists(kernel_matrices(), min_size=1, max_size=4))
def test_perron_kernel_agrees_with_the_eigensolve(matrices):
    for matrix in matrices:
        ratio = _eigensolve_ratio(matrix)
        found = consistency(matrix)
        assert abs(found.ratio - ratio) <= 1e-12
        assert abs(found.lambda_max - np.linalg.eigvals(matrix).real.max()) <= 1e-12 * len(matrix)
        np.testing.assert_allclose(ahp_weights(matrix, "eigenvector"), _numpy_principal(matrix), rtol=0, atol=1e-12)
    same_size = [m for m in matrices if len(m) == len(matrices[0])]
    stack = np.stack(same_size)
    weights, ratios = ahp_priorities(stack, "eigenvector")
    np.testing.assert_allclose(ratios, [_eigensolve_ratio(m) for m in same_size], rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, [_numpy_principal(m) for m in same_size], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(consistency_ratios(stack), ratios)


def test_perron_kernel_on_a_thousand_random_judges_of_nine_criteria():
    rng = np.random.default_rng(19)
    rows, columns = np.triu_indices(9, k=1)
    stack = np.ones((1000, 9, 9))
    values = rng.choice(_SCALE, size=(1000, len(rows)))
    stack[:, rows, columns], stack[:, columns, rows] = values, 1 / values
    weights, ratios = ahp_priorities(stack)
    np.testing.assert_allclose(ratios, [_eigensolve_ratio(m) for m in stack], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(weights, ahp_weights(stack))
    eigen_weights, eigen_ratios = ahp_priorities(stack, "eigenvector")
    np.testing.assert_array_equal(eigen_ratios, ratios)  # CR does not depend on the weighting
    np.testing.assert_allclose(eigen_weights, [_numpy_principal(m) for m in stack], rtol=0, atol=1e-12)


def test_perron_kernel_falls_back_to_the_eigensolve(monkeypatch):
    import engine.prioritisation as prioritisation

    rng = np.random.default_rng(5)
    inconsistent = [_reciprocal(9, list(rng.choice(_SCALE, size=36))) for _ in range(2)]
    stack = np.stack([*inconsistent, consistent_matrix(np.arange(1.0, 10.0))])
    expected_ratios = [_eigensolve_ratio(m) for m in stack]
    expected_weights = [_numpy_principal(m) for m in stack]
    calls = []
    real_eig = np.linalg.eig
    monkeypatch.setattr(prioritisation.np.linalg, "eig", lambda m: calls.append(m) or real_eig(m))
    # One step of each phase: only a matrix the start already fits (the consistent one)
    # finishes by iterating; the others are finished by the eigensolve, as one that never
    # settles would be.
    monkeypatch.setattr(prioritisation, "_POWER_MAX_STEPS", 1)
    weights, ratios = ahp_priorities(stack, "eigenvector")
    assert len(calls) == 2
    np.testing.assert_allclose(ratios, expected_ratios, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, expected_weights, rtol=0, atol=1e-12)


def test_perron_kernel_survives_products_that_overflow():
    # Far off the scale (the functions accept any positive reciprocal matrix): O^16
    # overflows, so the iteration on O itself, or the eigensolve, takes over.
    matrix = _reciprocal(4, [1e120, 1e-60, 3.0, 1e90, 1e-100, 7.0])
    lambda_max = np.linalg.eigvals(matrix).real.max()
    found = consistency(matrix)
    assert np.isfinite(found.lambda_max)
    assert found.lambda_max == pytest.approx(lambda_max, rel=1e-9)
    np.testing.assert_allclose(ahp_weights(matrix, "eigenvector"), _numpy_principal(matrix), rtol=1e-9, atol=1e-300)


def test_an_empty_stack_gives_empty_results():
    weights, ratios = ahp_priorities(np.ones((0, 4, 4)), "eigenvector")
    assert weights.shape == (0, 4) and ratios.shape == (0,)
    assert consistency_ratios(np.ones((0, 4, 4))).shape == (0,)


def test_the_ratios_do_not_depend_on_the_weighting_to_the_last_bit():
    # The eigenvector weighting iterates until its weights settle, longer than the
    # ratios need; each root is the one of the step whose bracket first closed, so
    # both give the same ratios bit for bit (randomised Hypothesis once found a
    # stack 3e-15 apart; 47 of these 3,000 stacks were before the fix).
    rng = np.random.default_rng(0)
    for _ in range(3000):
        n, m = int(rng.integers(3, 10)), int(rng.integers(1, 6))
        rows, columns = np.triu_indices(n, k=1)
        stack = np.ones((m, n, n))
        values = rng.choice(_SCALE, size=(m, len(rows)))
        stack[:, rows, columns], stack[:, columns, rows] = values, 1 / values
        np.testing.assert_array_equal(ahp_priorities(stack, "eigenvector")[1], consistency_ratios(stack))
