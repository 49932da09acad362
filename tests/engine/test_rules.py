"""engine.rules and the sum rule of engine.core, at the edge of every
tolerance: each test here fails if a bound moves or a comparison flips
(``<=`` to ``<``, ``>`` to ``>=``)."""

import math

import numpy as np
import pytest

from engine import core, rules
from engine.prioritisation import Consistency, pairwise_matrix, prioritise

ABOVE_THRESHOLD = math.nextafter(rules.CONSISTENCY_THRESHOLD, 1.0)


def test_a_consistency_ratio_of_exactly_0_10_is_consistent_and_above_it_is_not():
    assert rules.CONSISTENCY_THRESHOLD == 0.10
    assert rules.is_consistent(0.10) is True
    assert rules.is_consistent(ABOVE_THRESHOLD) is False
    assert rules.is_consistent(0.0) is True


@pytest.mark.parametrize("ratio, consistent", [(0.10, True), (ABOVE_THRESHOLD, False), (0.0999, True)])
def test_consistency_reports_the_same_verdict(ratio, consistent):
    consistency = Consistency(lambda_max=3.0, consistency_index=0.0, random_index=0.58, ratio=ratio)
    assert consistency.is_consistent is consistent


@pytest.mark.parametrize(
    "row",
    [
        [0.6, 0.399999],
        [0.6, 0.400001],
        [0.999999],
        [1.000001],
        [0.5, 0.499999],
        [0.5, 0.500001],
        [0.1] * 9 + [0.099999],
    ],
)
def test_sums_one_millionth_away_from_1_pass_on_both_sides(row):
    # Both 0.999999 and 1.000001 are exactly 1e-6 from 1; their float sums
    # land on either side of that bound, which the rule absorbs.
    assert core.sums_to_one(math.fsum(row))
    assert core.sums_to_one(np.array(row).sum())


@pytest.mark.parametrize("total", [1.0000011, 0.9999989, 1.00001, 0.9])
def test_sums_further_from_1_are_refused(total):
    assert not core.sums_to_one(total)


def test_the_engine_accepts_peer_weight_rows_just_inside_the_tolerance_on_both_sides():
    influence = core.expert_influence(np.array([[0.6, 0.399999], [0.400001, 0.6]]))
    assert influence.sum() == pytest.approx(1.0, abs=1e-15)
    with pytest.raises(ValueError, match="row 0 sums to 0.9999989"):
        core.expert_influence(np.array([[0.6, 0.3999989], [0.4, 0.6]]))


def test_the_input_slack_below_1_9_stays_inside_the_databases():
    assert rules.SCALE_MIN * rules.SCALE_INPUT_SLACK < rules.SCALE_DATABASE_SLACK
    assert rules.SCALE_ENGINE_SLACK < rules.SCALE_INPUT_SLACK


def test_the_input_scale_at_its_edges():
    lowest = rules.SCALE_MIN * (1 - rules.SCALE_INPUT_SLACK)
    assert rules.on_input_scale(lowest) and rules.on_input_scale(rules.SCALE_MAX)
    assert not rules.on_input_scale(math.nextafter(lowest, 0))
    assert not rules.on_input_scale(math.nextafter(rules.SCALE_MAX, 10))
    assert rules.to_scale(lowest) == rules.SCALE_MIN and rules.to_scale(0.5) == 0.5


def test_the_engine_scale_at_its_edges():
    lowest = rules.SCALE_MIN * (1 - rules.SCALE_ENGINE_SLACK)
    highest = rules.SCALE_MAX * (1 + rules.SCALE_ENGINE_SLACK)
    assert pairwise_matrix(2, [(0, 1, lowest)])[0, 1] == lowest
    assert pairwise_matrix(2, [(0, 1, highest)])[0, 1] == highest
    for outside in (lowest * (1 - 1e-12), highest * (1 + 1e-12)):
        with pytest.raises(ValueError, match="outside the scale 1/9..9"):
            pairwise_matrix(2, [(0, 1, outside)])


def test_direct_shares_at_the_smallest_share():
    smallest = rules.MIN_DIRECT_SHARE
    assert list(rules.out_of_proportion([smallest, 1 - smallest])) == []
    assert list(rules.out_of_proportion([math.nextafter(smallest, 0), 0.5])) == [0]
    assert list(rules.out_of_proportion([1.0, 0.0])) == [0, 1]
    assert list(rules.out_of_proportion([1.0])) == []  # one item takes the whole weight


def test_direct_shares_are_normalised_without_overflow():
    np.testing.assert_allclose(rules.direct_shares([1e308, 1e308, 5e307]), [0.4, 0.4, 0.2], rtol=1e-15)
    assert rules.direct_shares([63, 20, 17]).sum() == pytest.approx(1.0, abs=1e-15)


def test_the_engine_refuses_direct_weights_out_of_proportion_by_the_same_rule():
    ratio = 1 / rules.MIN_DIRECT_SHARE
    assert prioritise("direct", 2, weights=[1, ratio / 2]).weights[0] == pytest.approx(2 / (ratio + 2))
    with pytest.raises(ValueError, match=r"position 0 is out of proportion.*at least 1e-06"):
        prioritise("direct", 2, weights=[1, ratio * 2])


def test_range_width_at_its_edges():
    unbounded, empty = rules.range_width_invalid([0.0, 1.0, -1e308, -8e307], [1.0, 1.0, 1e308, 8e307])
    assert list(unbounded) == [False, False, True, False]
    assert list(empty) == [False, True, False, False]
    assert rules.range_direction_problem(0.2, 0.8, "higher") is None
    assert rules.range_direction_problem(0.8, 0.2, "lower") is None
    assert "must be below the desired value" in rules.range_direction_problem(0.8, 0.2, "higher")
    assert "must be above the desired value" in rules.range_direction_problem(0.2, 0.8, "lower")


def test_the_smallest_peer_weight_keeps_the_layer_count_bounded():
    # Off-diagonal weights at the minimum: the slowest mixing V an expert
    # can enter. It is counted, not iterated, and the run's engine finishes.
    smallest = rules.MIN_PEER_WEIGHT
    peer_weights = np.array([[1 - smallest, smallest], [smallest, 1 - smallest]])
    weights = np.array([[0.9, 0.1], [0.1, 0.9]])
    layers = core.layers_needed(peer_weights, weights)
    # The spread of each column (0.8) shrinks by a factor 1 - 2e-6 per layer.
    assert layers == pytest.approx(math.log(1e-9 / 0.8) / math.log(1 - 2 * smallest), rel=1e-3)
    evaluation = core.evaluate(
        weights=weights,
        peer_weights=peer_weights,
        lower=np.zeros((2, 2)),
        upper=np.ones((2, 2)),
        measurements=np.array([[0.5, 0.5]]),
    )
    assert evaluation.iterations == layers
    np.testing.assert_allclose(evaluation.metric_weights, [0.5, 0.5], atol=1e-9)
