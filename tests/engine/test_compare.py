"""Two runs compared (engine.compare): movements in the ranking, deltas of
weights and influence, and every kind of input change named with who made
it."""

import copy
import random

from hypothesis import given
from hypothesis import strategies as st

from engine.compare import (
    Delta,
    InputChange,
    Movement,
    all_net_passes,
    compare_results,
    compare_runs,
    net_passes,
    snapshot_changes,
)


def snapshot(**changes):
    """A small snapshot as engine.snapshot.study_snapshot writes one: two
    experts, Accuracy with two metrics and Speed with one, three candidates."""
    base = {
        "version": 1,
        "study": {"id": 1, "title": "S"},
        "tolerance": 1e-9,
        "experts": ["bob", "carol"],
        "attributes": ["Accuracy", "Speed"],
        "metrics": [
            {"name": "Success rate", "attribute": "Accuracy", "better": "higher", "unit": ""},
            {"name": "AUC", "attribute": "Accuracy", "better": "higher", "unit": ""},
            {"name": "Time", "attribute": "Speed", "better": "lower", "unit": "ms"},
        ],
        "attribute_weights": [[0.6, 0.4], [0.5, 0.5]],
        "metric_weights": [[0.3, 0.3, 0.4], [0.4, 0.1, 0.5]],
        "peer_weights": [[0.7, 0.3], [0.4, 0.6]],
        "lower": [[0.8, 0.7, 50], [0.82, 0.7, 40]],
        "upper": [[0.95, 0.9, 10], [0.95, 0.9, 10]],
        "candidates": ["J48", "JRip", "Stump"],
        "measurements": [[0.85, 0.8, 20], [0.86, 0.82, 30], [0.5, 0.6, 60]],
    }
    base.update(changes)
    return base


def test_identical_snapshots_have_no_changes():
    assert snapshot_changes(snapshot(), snapshot()) == []


def test_each_experts_changes_are_named_with_them():
    after = snapshot()
    after["attribute_weights"] = [[0.7, 0.3], [0.5, 0.5]]
    after["metric_weights"] = [[0.35, 0.35, 0.3], [0.4, 0.1, 0.5]]  # bob's shares within Accuracy stay 1/2
    after["lower"] = [[0.8, 0.7, 50], [0.85, 0.7, 40]]
    after["peer_weights"] = [[0.7, 0.3], [0.5, 0.5]]
    assert snapshot_changes(snapshot(), after) == [
        InputChange("bob", "weight of Accuracy", "0.6", "0.7"),
        InputChange("bob", "weight of Speed", "0.4", "0.3"),
        InputChange("carol", "acceptable range of Success rate", "[0.82, 0.95]", "[0.85, 0.95]"),
        InputChange("carol", "weight on bob", "0.4", "0.5"),
        InputChange("carol", "weight on carol", "0.6", "0.5"),
    ]


def test_a_local_metric_priority_shows_as_the_share_within_its_attribute():
    after = snapshot()
    after["metric_weights"] = [[0.3, 0.3, 0.4], [0.3, 0.2, 0.5]]
    assert snapshot_changes(snapshot(), after) == [
        InputChange("carol", "share of Success rate within Accuracy", "0.8", "0.6"),
        InputChange("carol", "share of AUC within Accuracy", "0.2", "0.4"),
    ]


def test_design_changes_come_first_without_an_expert():
    after = snapshot(
        experts=["bob", "dave"],
        attribute_weights=[[0.6, 0.4], [0.5, 0.5]],
        metric_weights=[[0.3, 0.3, 0.4], [0.4, 0.1, 0.5]],
        peer_weights=[[0.7, 0.3], [0.4, 0.6]],
        lower=[[0.8, 0.7, 50], [0.82, 0.7, 40]],
        upper=[[0.95, 0.9, 10], [0.95, 0.9, 10]],
        candidates=["J48", "JRip", "RandomForest"],
        measurements=[[0.87, 0.8, 20], [0.86, 0.82, 30], [0.9, 0.9, 90]],
        tolerance=1e-6,
    )
    assert snapshot_changes(snapshot(), after) == [
        InputChange(None, "expert carol", "included", "not included"),
        InputChange(None, "expert dave", "not included", "included"),
        InputChange(None, "candidate Stump", "included", "not included"),
        InputChange(None, "candidate RandomForest", "not included", "included"),
        InputChange(None, "tolerance", "1e-09", "1e-06"),
        InputChange(None, "J48's Success rate", "0.85", "0.87"),
    ]


def test_a_metric_leaving_the_selection_is_one_change():
    before = snapshot()
    after = copy.deepcopy(before)
    after["metrics"] = after["metrics"][:2]
    for key in ("metric_weights", "lower", "upper"):
        after[key] = [row[:2] for row in after[key]]
    after["measurements"] = [row[:2] for row in after["measurements"]]
    after["attributes"] = ["Accuracy"]
    after["attribute_weights"] = [[0.6], [0.5]]
    changes = snapshot_changes(before, after)
    assert changes == [
        InputChange(None, "attribute Speed", "included", "not included"),
        InputChange(None, "metric Time", "included", "not included"),
    ]


@given(st.data())
def test_changes_are_found_wherever_a_number_moves(data):
    """Changing any one number of any grid is reported once, as that
    number's before and after."""
    grid = data.draw(st.sampled_from(["lower", "upper", "peer_weights", "measurements", "attribute_weights"]))
    before = snapshot()
    after = copy.deepcopy(before)
    i = data.draw(st.integers(0, len(after[grid]) - 1))
    j = data.draw(st.integers(0, len(after[grid][i]) - 1))
    after[grid][i][j] = after[grid][i][j] + data.draw(st.sampled_from([0.01, -0.01, 1.5]))
    changes = snapshot_changes(before, after)
    # An attribute weight also moves the implied share of its metrics.
    assert len(changes) >= 1
    first = changes[0]
    assert first.before != first.after
    who = None if grid == "measurements" else before["experts"][i]
    assert first.who == who


def results(*candidates, weights=(0.6, 0.4), influence=(0.5, 0.5)):
    return {
        "candidates": [
            {"name": name, "rank": rank, "cef": cef, "weighted_score": weighted, "vetoed": cef == 0}
            for name, rank, cef, weighted in candidates
        ],
        "attribute_weights": dict(zip(["Accuracy", "Speed"], weights, strict=True)),
        "metric_weights": dict(zip(["Success rate", "Time"], weights, strict=True)),
        "expert_influence": dict(zip(["bob", "carol"], influence, strict=True)),
    }


def test_movements_in_the_later_runs_order_then_those_gone():
    before = results(("J48", 1, 0.5, 0.5), ("JRip", 2, 0.4, 0.4), ("Stump", 3, 0.0, 0.3), ("NB", 4, 0.0, 0.2))
    after = results(("JRip", 1, 0.6, 0.6), ("J48", 2, 0.5, 0.5), ("Forest", 3, 0.1, 0.1), ("Stump", 4, 0.0, 0.3))
    comparison = compare_results(before, after)
    summary = [(m.name, m.status, m.places, m.cef_delta) for m in comparison.candidates]
    assert summary == [
        ("JRip", "up", 1, 0.6 - 0.4),
        ("J48", "down", 1, 0.0),
        ("Forest", "new", 0, None),
        ("Stump", "down", 1, 0.0),
        ("NB", "gone", 0, None),
    ]
    assert comparison.moved == 3


def test_movements_are_built_when_read_and_moved_is_counted_from_the_gains():
    before = results(("J48", 1, 0.5, 0.5), ("JRip", 2, 0.4, 0.4), ("Stump", 3, 0.0, 0.3), ("NB", 4, 0.0, 0.2))
    after = results(("JRip", 1, 0.6, 0.6), ("J48", 2, 0.5, 0.5), ("Forest", 3, 0.1, 0.1), ("Stump", 4, 0.0, 0.3))
    movements = compare_results(before, after).candidates
    every = list(movements)
    assert len(movements) == 5 and all(isinstance(m, Movement) for m in every)
    # an index, a slice (what a page of the paginator reads) and iteration agree
    assert movements[1] == every[1] and movements[-1] == every[-1] and movements[1:3] == every[1:3]
    assert movements[2] == Movement("Forest", None, 3, None, 0.1, None, 0.1, None, False, 0)
    assert movements.moved == sum(m.status in ("up", "down") for m in every) == 3
    assert movements == every and movements == compare_results(before, after).candidates
    assert movements != every[:-1]


def test_weight_and_influence_deltas():
    comparison = compare_results(results(weights=(0.6, 0.4)), results(weights=(0.5, 0.5), influence=(0.7, 0.3)))
    assert comparison.attribute_weights == [Delta("Accuracy", 0.6, 0.5), Delta("Speed", 0.4, 0.5)]
    assert [round(d.delta, 12) for d in comparison.expert_influence] == [0.2, -0.2]
    assert all(d.changed for d in comparison.attribute_weights)


def test_compare_runs_fills_in_the_changes():
    before_snapshot, after_snapshot = snapshot(), snapshot(tolerance=1e-6)
    comparison = compare_runs(results(), results(), before_snapshot, after_snapshot)
    assert comparison.changes == [InputChange(None, "tolerance", "1e-09", "1e-06")]
    assert comparison.moved == 0


def test_metric_weights_repeat_the_attribute_weights_with_one_metric_each():
    assert compare_results(results(), results()).metrics_are_attributes
    different = results()
    different["metric_weights"] = {"Success rate": 0.3, "AUC": 0.3, "Time": 0.4}
    assert not compare_results(results(), different).metrics_are_attributes


def test_a_tie_forming_around_vetoed_candidates_is_no_move():
    # issue 16, finding 8: J48 is vetoed in the later run and joins the tie of
    # the two vetoed candidates at CEF 0; their rank number changes 3 -> 2,
    # but nobody passed anybody.
    before = results(("JRip", 1, 0.46, 0.46), ("J48", 2, 0.33, 0.33), ("IBk", 3, 0.0, 0.58), ("Forest", 3, 0.0, 0.57))
    after = results(("JRip", 1, 0.39, 0.39), ("Forest", 2, 0.0, 0.55), ("IBk", 2, 0.0, 0.552), ("J48", 2, 0.0, 0.27))
    comparison = compare_results(before, after)
    summary = [(m.name, m.before_rank, m.after_rank, m.status, m.places, m.tie_only) for m in comparison.candidates]
    assert summary == [
        ("JRip", 1, 1, "same", 0, False),
        ("Forest", 3, 2, "same", 0, True),
        ("IBk", 3, 2, "same", 0, True),
        ("J48", 2, 2, "same", 0, False),
    ]
    assert comparison.moved == 0
    # and the other way round (a veto lifted breaks the tie): still no move
    assert compare_results(after, before).moved == 0


def _ranked(cefs: dict[str, float]) -> dict:
    ordered = sorted(cefs, key=lambda name: -cefs[name])
    return results(*((name, 1 + sum(v > cefs[name] for v in cefs.values()), cefs[name], 0.0) for name in ordered))


@given(
    st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.4, 0.5]), min_size=5, max_size=5),
    st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.4, 0.5]), min_size=5, max_size=5),
)
def test_moves_are_passes_and_equal_scores_never_move(before_cefs, after_cefs):
    names = ["a", "b", "c", "d", "e"]
    before = _ranked(dict(zip(names, before_cefs, strict=True)))
    comparison = compare_results(before, _ranked(dict(zip(names, after_cefs, strict=True))))
    if before_cefs == after_cefs:
        assert comparison.moved == 0
    for move in comparison.candidates:
        passed = sum(
            (before_cefs[k] > before_cefs[i] and after_cefs[k] < after_cefs[i])
            - (before_cefs[k] < before_cefs[i] and after_cefs[k] > after_cefs[i])
            for k in range(5)
            for i in [names.index(move.name)]
        )
        assert move.places == abs(passed)
        if len(set(before_cefs)) == 5 and len(set(after_cefs)) == 5:
            # without ties a move is exactly the change of rank
            assert passed == move.before_rank - move.after_rank


def test_a_change_of_ahp_weighting_is_named_and_old_snapshots_used_the_papers_method():
    # issue 16, finding 13: runs keep their method, the comparison names a change
    old = snapshot()  # no "ahp_weighting": taken before the setting existed
    eigen = snapshot(ahp_weighting="eigenvector")
    assert snapshot_changes(old, eigen) == [InputChange(None, "AHP weighting", "column means", "eigenvector")]
    assert snapshot_changes(old, snapshot(ahp_weighting="column_means")) == []


# --- issue 19: every candidate's net passes at once -------------------------------------------

CEFS = st.dictionaries(
    st.sampled_from([f"c{i}" for i in range(40)]),
    st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 0.9]),  # few values: many ties
    max_size=40,
)


@given(CEFS, CEFS)
def test_all_net_passes_counts_as_net_passes_for_each_candidate(before, after):
    expected = {name: net_passes(name, before, after) for name in after if name in before}
    assert all_net_passes(before, after) == expected


def test_all_net_passes_beyond_one_block_of_rows():
    rng = random.Random(19)
    names = [f"c{i}" for i in range(600)]  # more rows than one block of comparisons
    before = {name: rng.choice([0.0, rng.random()]) for name in names[:550]}
    after = {name: rng.choice([0.0, rng.random()]) for name in names[50:]}
    expected = {name: net_passes(name, before, after) for name in after if name in before}
    got = all_net_passes(before, after)
    assert got == expected and len(got) == 500 and any(got.values())
