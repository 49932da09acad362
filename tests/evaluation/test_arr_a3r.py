"""ARR and A3R (source 004, METHOD.md 7.2): the published values, a slow
literal reference, monotonicity, and the report of ARR's pole."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from evaluation.metrics import a3r, a3r_scores, arr, arr_domain, arr_pole, arr_scores

SETTINGS = settings(max_examples=60, deadline=None)

success_rates = st.floats(0.05, 1.0)
times = st.floats(1e-3, 1e3)


@st.composite
def candidate_tables(draw, max_datasets=3):
    m = draw(st.integers(2, 5))
    n_datasets = draw(st.integers(1, max_datasets))
    success_rate = [draw(st.lists(success_rates, min_size=m, max_size=m)) for _ in range(n_datasets)]
    time = [draw(st.lists(times, min_size=m, max_size=m)) for _ in range(n_datasets)]
    return success_rate, time


def literal_pairwise(success_rate, time, measure):
    """Mean over the datasets of measure(SR_p/SR_q, T_p/T_q), pair by pair."""
    m = len(success_rate[0])
    result = [[0.0] * m for _ in range(m)]
    for p in range(m):
        for q in range(m):
            values = [measure(sr[p] / sr[q], t[p] / t[q]) for sr, t in zip(success_rate, time, strict=True)]
            result[p][q] = sum(values) / len(values)
    return result


def literal_arr(success_rate_ratio, time_ratio, acc_d=0.1):
    return success_rate_ratio / (1 + acc_d * math.log10(time_ratio))


def literal_a3r(success_rate_ratio, time_ratio, root=8):
    return success_rate_ratio / time_ratio ** (1 / root)


def literal_scores(pairwise):
    m = len(pairwise)
    return [sum(pairwise[p][q] for q in range(m) if q != p) / (m - 1) for p in range(m)]


# --------------------------------------------------------------------------
# Published values (source 004 section 3, METHOD.md 7.4)
# --------------------------------------------------------------------------


def test_a3r_of_ten_times_slower_and_faster_with_equal_success_rate():
    pairwise = a3r([0.9, 0.9], [10.0, 1.0], root=8)
    assert pairwise[0, 1] == pytest.approx(0.7499, abs=5e-5)  # ten times slower: 10**(-1/8)
    assert pairwise[1, 0] == pytest.approx(1.3335, abs=5e-5)  # ten times faster: 10**(1/8)
    assert np.diagonal(pairwise).tolist() == [1.0, 1.0]


def test_a3r_rescaling_by_other_roots():
    # Source 004 section 3: the 2nd root turns a time ratio of 10 into 3.16 and 0.1 into 0.31.
    pairwise = a3r([0.5, 0.5], [10.0, 1.0], root=2)
    assert 1 / pairwise[0, 1] == pytest.approx(3.16, abs=5e-3)
    assert 1 / pairwise[1, 0] == pytest.approx(0.316, abs=5e-4)


def test_arr_pole_at_acc_d_0_1_is_reported_not_returned():
    assert arr_pole(acc_d=0.1) == pytest.approx(1e-10, rel=1e-12)
    time = [1e-10, 1.0]  # candidate 0 is 10**10 times faster: exactly at the pole
    with pytest.raises(ValueError) as raised:
        arr([0.9, 0.9], time, acc_d=0.1)
    message = str(raised.value)
    assert "(p=0, q=1) time ratio 1e-10" in message
    assert "10**(-1/acc_d) = 1e-10" in message
    assert "Use a3r, which is monotonic" in message
    domain = arr_domain(time, acc_d=0.1)
    assert domain.pole == pytest.approx(1e-10, rel=1e-12)
    assert domain.region == (0.0, domain.pole)
    assert domain.pairs.tolist() == [[0, 1]]
    assert domain.datasets.tolist() == [0]
    assert domain.time_ratios == pytest.approx([1e-10])
    assert not domain.defined


def test_arr_just_above_the_pole_is_a_large_finite_number():
    value = arr([0.9, 0.9], [2e-10, 1.0], acc_d=0.1)[0, 1]
    assert value == pytest.approx(literal_arr(1.0, 2e-10))
    assert value > 30


def test_arr_is_not_monotonic_across_the_pole_which_is_why_it_is_refused():
    # Source 004 Fig. 1, written out with the formula: just above the pole ARR
    # is huge, just below it negative, so a faster candidate would rank lower.
    acc_d = 0.5
    pole = arr_pole(acc_d=acc_d)
    assert literal_arr(1.0, pole * 1.01, acc_d) > 0 > literal_arr(1.0, pole * 0.99, acc_d)
    assert arr_domain([pole * 0.99, 1.0], acc_d=acc_d).pairs.tolist() == [[0, 1]]
    assert arr_domain([pole * 1.01, 1.0], acc_d=acc_d).defined


def test_a_pole_below_the_smallest_float_is_zero():
    assert arr_pole(acc_d=0.001) == 0.0
    assert arr_domain([1e-300, 1e300], acc_d=0.001).defined


# --------------------------------------------------------------------------
# Against the literal formulas
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pairwise", "scores", "literal", "option", "values"),
    [
        # Time ratios lie in [1e-6, 1e6]; for acc_d <= 0.15 the pole, 10**(-1/acc_d), is below 2.2e-7.
        (arr, arr_scores, literal_arr, "acc_d", st.floats(0.05, 0.15)),
        (a3r, a3r_scores, literal_a3r, "root", st.floats(1, 16)),
    ],
)
@SETTINGS
@given(tables=candidate_tables(), data=st.data())
def test_pairwise_values_and_scores_match_the_literal_formula(pairwise, scores, literal, option, values, tables, data):
    success_rate, time = tables
    parameter = {option: data.draw(values)}
    expected = literal_pairwise(success_rate, time, lambda s, t: literal(s, t, *parameter.values()))
    assert pairwise(success_rate, time, **parameter) == pytest.approx(np.array(expected), rel=1e-12)
    assert scores(success_rate, time, **parameter) == pytest.approx(np.array(literal_scores(expected)), rel=1e-12)


@SETTINGS
@given(candidate_tables(max_datasets=1))
def test_one_dataset_as_a_row_or_a_vector_is_the_same(tables):
    success_rate, time = tables
    assert a3r(success_rate[0], time[0]) == pytest.approx(a3r(success_rate, time), rel=1e-15)
    assert arr(success_rate[0], time[0]) == pytest.approx(arr(success_rate, time), rel=1e-15)


@SETTINGS
@given(candidate_tables(max_datasets=1))
def test_a3r_of_a_pair_and_its_reverse_multiply_to_one(tables):
    success_rate, time = tables
    pairwise = a3r(success_rate, time)
    assert pairwise * pairwise.T == pytest.approx(np.ones_like(pairwise), rel=1e-12)
    assert np.diagonal(pairwise) == pytest.approx(1.0, rel=1e-15)


# --------------------------------------------------------------------------
# Monotonicity
# --------------------------------------------------------------------------


slow_downs = st.floats(1.001, 1000)


@SETTINGS
@given(success_rates, success_rates, times, slow_downs, times, st.floats(1, 16))
def test_a3r_decreases_with_the_time_ratio(sr_p, sr_q, t_p, slow_down, t_q, root):
    faster = a3r([sr_p, sr_q], [t_p, t_q], root=root)[0, 1]
    slower = a3r([sr_p, sr_q], [t_p * slow_down, t_q], root=root)[0, 1]
    assert faster > slower


@SETTINGS
@given(success_rates, st.floats(1.001, 10), success_rates, times, times, st.floats(1, 16))
def test_a3r_increases_with_the_success_rate(sr_p, gain, sr_q, t_p, t_q, root):
    worse = a3r([sr_p, sr_q], [t_p, t_q], root=root)[0, 1]
    better = a3r([sr_p * gain, sr_q], [t_p, t_q], root=root)[0, 1]
    assert better > worse


@SETTINGS
@given(times, slow_downs, times, st.floats(0.05, 0.7))
def test_arr_decreases_with_the_time_ratio_above_the_pole(t_p, slow_down, t_q, acc_d):
    t_other = t_p * slow_down
    # Every pair, the reverse ones too, must lie above the pole for arr to answer.
    assume(arr_domain([t_p, t_q], acc_d=acc_d).defined and arr_domain([t_other, t_q], acc_d=acc_d).defined)
    assert arr([0.8, 0.8], [t_p, t_q], acc_d=acc_d)[0, 1] > arr([0.8, 0.8], [t_other, t_q], acc_d=acc_d)[0, 1]


@SETTINGS
@given(candidate_tables(), st.floats(0.2, 1.0))
def test_arr_domain_lists_exactly_the_pairs_where_arr_raises(tables, acc_d):
    success_rate, time = tables
    literal = sorted(
        (d, p, q)
        for d, row in enumerate(time)
        for p in range(len(row))
        for q in range(len(row))
        if 1 + acc_d * (math.log10(row[p]) - math.log10(row[q])) <= 0
    )
    domain = arr_domain(time, acc_d=acc_d)
    listed = sorted((d, p, q) for d, (p, q) in zip(domain.datasets.tolist(), domain.pairs.tolist(), strict=True))
    assert listed == literal
    assert domain.time_ratios == pytest.approx(np.array([time[d][p] / time[d][q] for d, p, q in listed]))
    if literal:
        with pytest.raises(ValueError, match="ARR is undefined or not monotonic"):
            arr(success_rate, time, acc_d=acc_d)
    else:
        assert np.isfinite(arr(success_rate, time, acc_d=acc_d)).all()


# --------------------------------------------------------------------------
# Undefined cases
# --------------------------------------------------------------------------


@pytest.mark.parametrize("function", [arr, a3r, arr_scores, a3r_scores])
@pytest.mark.parametrize(
    ("success_rate", "time", "message"),
    [
        ([0.9, 0.8], [1.0, 0.0], r"time must be positive \(a ratio to 0 is undefined\): candidate 1 on dataset 0"),
        ([0.9, 0.8], [1.0, -2.0], "time must be positive .*candidate 1 on dataset 0 has -2"),
        ([0.0, 0.8], [1.0, 2.0], "success_rate must be positive .*candidate 0 on dataset 0 has 0"),
        ([0.9, 0.8], [1.0, 2.0, 3.0], "success_rate and time must have the same shape"),
        ([], [], "success_rate must have at least one dataset and one candidate"),
        ([0.9, math.nan], [1.0, 2.0], "success_rate must be finite; NaN or infinity at 1"),
        ([[[0.9]]], [[[1.0]]], "success_rate must be a 1-D or 2-D array"),
    ],
)
def test_pairwise_measures_undefined_cases(function, success_rate, time, message):
    with pytest.raises(ValueError, match=message):
        function(success_rate, time)


@pytest.mark.parametrize("function", [arr_scores, a3r_scores])
def test_a_score_needs_another_candidate(function):
    with pytest.raises(ValueError, match="at least two are needed"):
        function([0.9], [1.0])


def test_arr_and_a3r_parameters_must_be_positive():
    with pytest.raises(ValueError, match="acc_d must be a positive finite number, got 0"):
        arr([0.9, 0.8], [1.0, 2.0], acc_d=0)
    with pytest.raises(ValueError, match="acc_d must be a positive finite number, got -0.1"):
        arr_pole(acc_d=-0.1)
    with pytest.raises(ValueError, match="root must be a positive finite number, got 0"):
        a3r([0.9, 0.8], [1.0, 2.0], root=0)
    with pytest.raises(ValueError, match="acc_d must be a positive number"):
        arr_domain([1.0, 2.0], acc_d="fast")


def test_arr_names_the_dataset_when_there_are_several():
    with pytest.raises(ValueError, match=r"\(p=1, q=0, dataset 1\) time ratio 1e-11"):
        arr([[0.9, 0.9], [0.9, 0.9]], [[1.0, 1.0], [1.0, 1e-11]], acc_d=0.1)


def test_a3r_with_a_root_so_small_that_the_times_leave_floating_point_says_so():
    # 0.0005 ** 1000 is 0 in floating point: the ratios would be 0 / 0.
    with pytest.raises(ValueError, match="A3R is beyond floating point with root 0.001"):
        a3r([0.9, 0.8], [0.0005, 0.001], root=0.001)
    # A root below 1 that stays in range is computed: (1/2) ** (1/0.5) = 1/4.
    assert a3r([0.8, 0.8], [1.0, 2.0], root=0.5)[0, 1] == pytest.approx(4.0)
