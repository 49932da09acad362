"""Saaty's scale has one home, engine.rules (SCALE_POINTS, SCALE_VALUES,
nearest_scale_point): the engine's repair hints and the expert's page round
the same way, ties included, and the migrations' frozen copies of the scale
agree with it."""

import ast
import inspect
import math
from fractions import Fraction
from importlib import import_module

import numpy as np
import pytest

from engine import rules
from engine.prioritisation import most_inconsistent, pairwise_matrix
from workspace.forms import expert as expert_forms

# The geometric midpoints of neighbouring points, as doubles: ties.
TIES = [
    (math.sqrt(12), Fraction(3)),
    (math.sqrt(72), Fraction(8)),
]


def test_the_scale_is_saatys_seventeen_points_ascending():
    assert (*(Fraction(1, v) for v in range(9, 1, -1)), *(Fraction(v) for v in range(1, 10))) == rules.SCALE_POINTS
    assert rules.SCALE_VALUES.tolist() == [float(point) for point in rules.SCALE_POINTS]
    assert rules.SCALE_VALUES[0] == rules.SCALE_MIN and rules.SCALE_VALUES[-1] == rules.SCALE_MAX


@pytest.mark.parametrize(
    "value, point",
    [(1.0, 1), (1.4, 1), (1.45, 2), (2.9, 3), (100.0, 9), (0.7, Fraction(1, 2)), (0.72, 1), (0.01, Fraction(1, 9))],
)
def test_nearest_point_is_nearest_in_log_space(value, point):
    assert rules.nearest_scale_point(value) == point


@pytest.mark.parametrize("value, point", TIES)
def test_a_tie_goes_to_the_smaller_point(value, point):
    below, above = (p for p in rules.SCALE_POINTS if p in (point, point + 1))
    # A true tie of the doubles the rule compares.
    assert abs(math.log(below) - math.log(value)) == abs(math.log(above) - math.log(value))
    assert rules.nearest_scale_point(value) == point


@pytest.mark.parametrize("value, point", TIES)
def test_the_repair_hint_rounds_a_tie_down(value, point):
    hint = most_inconsistent(pairwise_matrix(2, [(0, 1, 1)]), [value, 1.0])[0]
    assert hint.suggested_value == float(point)


@pytest.mark.parametrize("value, point", TIES)
def test_the_form_rounds_a_tie_as_the_engine_does(value, point):
    assert expert_forms.scale_point(value) == (str(point), False)


def _ratios():
    """Every point, every geometric midpoint (as double and a step either
    side), and a log-spaced sweep past both ends."""
    points = [float(p) for p in rules.SCALE_POINTS]
    midpoints = [math.sqrt(a * b) for a, b in zip(points, points[1:], strict=False)]
    nudged = [math.nextafter(m, d) for m in midpoints for d in (0.0, math.inf)]
    return [*points, *midpoints, *nudged, *np.geomspace(1 / 20, 20, 401).tolist()]


def test_the_form_and_the_engine_choose_the_same_point_for_every_ratio():
    for ratio in _ratios():
        engine_point = most_inconsistent(pairwise_matrix(2, [(0, 1, 1)]), [ratio, 1.0])[0].suggested_value
        form_point, exact = expert_forms.scale_point(ratio)
        assert Fraction(form_point) == rules.nearest_scale_point(ratio), ratio
        assert float(Fraction(form_point)) == engine_point, ratio
        if ratio in rules.SCALE_VALUES:
            assert exact, ratio


def test_the_form_shows_the_engine_points_from_9_to_1_9():
    assert [str(p) for p in sorted(rules.SCALE_POINTS, reverse=True)] == expert_forms.SCALE_POINTS
    assert expert_forms.SCALE_POINTS[0] == "9" and expert_forms.SCALE_POINTS[-1] == "1/9"


# --- the migrations' frozen copies ------------------------------------------------------


def test_the_disagreement_migration_froze_the_scale_top_of_the_engine():
    migration = import_module("engine.migrations.0003_results_disagreement")
    assert migration.SCALE_MAX == rules.SCALE_MAX


def test_the_prioritisation_result_migration_clamps_to_the_engine_scale():
    """0004 moves each stored judgment onto the scale by
    ``min(max(value, 1 / 9), 9.0)``: the bounds are rules.to_scale's."""
    migration = import_module("workspace.migrations.0004_prioritisation_result")
    tree = ast.parse(inspect.getsource(migration))
    clamps = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "min"
        and isinstance(node.args[0], ast.Call)
        and isinstance(node.args[0].func, ast.Name)
        and node.args[0].func.id == "max"
    ]
    assert len(clamps) == 1
    low = eval(compile(ast.Expression(clamps[0].args[0].args[1]), "0004", "eval"))  # a literal such as 1 / 9
    high = eval(compile(ast.Expression(clamps[0].args[1]), "0004", "eval"))
    assert (low, high) == (rules.SCALE_MIN, rules.SCALE_MAX)
    for value in (low / 2, low, 1.0, high, high * 2):
        assert min(max(value, low), high) == rules.to_scale(value)
