"""engine.robustness.leave_one_out against the engine run on a snapshot
from which the expert was removed, built literally (engine.snapshot's
arrays, engine.core.evaluate)."""

import copy

import numpy as np
import pytest
from scipy.stats import kendalltau

from engine.core import evaluate
from engine.robustness import leave_one_out
from engine.snapshot import snapshot_arrays


def make_snapshot(seed: int, k: int = 5, n: int = 3, m: int = 6) -> dict:
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.1, 1.0, size=(k, n))
    peer = rng.uniform(0.1, 1.0, size=(k, k))
    lower = rng.uniform(0.0, 0.3, size=(k, n))
    upper = rng.uniform(0.7, 1.0, size=(k, n))
    measured = rng.uniform(0.05, 1.0, size=(m, n))
    return {
        "experts": [f"expert{i}" for i in range(k)],
        "metrics": [{"name": f"metric{j}"} for j in range(n)],
        "candidates": [f"candidate{c}" for c in range(m)],
        "metric_weights": (weights / weights.sum(axis=1, keepdims=True)).tolist(),
        "peer_weights": (peer / peer.sum(axis=1, keepdims=True)).tolist(),
        "lower": lower.tolist(),
        "upper": upper.tolist(),
        "measurements": measured.tolist(),
        "tolerance": 1e-9,
    }


def snapshot_without(snapshot: dict, expert: int) -> dict:
    """The snapshot as if the expert had never taken part: their name,
    weights and ranges gone, their row and column of the peer weights gone
    and each remaining row rescaled to sum 1, written out plainly."""
    reduced = copy.deepcopy(snapshot)
    del reduced["experts"][expert]
    for key in ("metric_weights", "lower", "upper"):
        del reduced[key][expert]
    rows = []
    for i, row in enumerate(snapshot["peer_weights"]):
        if i == expert:
            continue
        kept = [value for j, value in enumerate(row) if j != expert]
        total = sum(kept)
        rows.append([value / total for value in kept])
    reduced["peer_weights"] = rows
    return reduced


def run(snapshot: dict):
    weights, peer_weights, lower, upper, measurements = snapshot_arrays(snapshot)
    return evaluate(weights=weights, peer_weights=peer_weights, lower=lower, upper=upper, measurements=measurements)


@pytest.mark.parametrize("seed", range(4))
def test_leave_one_out_equals_a_run_without_that_expert(seed: int) -> None:
    snapshot = make_snapshot(seed)
    weights, peer_weights, lower, upper, measurements = snapshot_arrays(snapshot)
    result = leave_one_out(
        weights=weights, peer_weights=peer_weights, lower=lower, upper=upper, measurements=measurements
    )
    full = run(snapshot)
    assert np.allclose(result.full_cef, full.cef, atol=1e-12)
    for expert in range(len(snapshot["experts"])):
        alone = run(snapshot_without(snapshot, expert))
        assert np.allclose(result.cef[expert], alone.cef, atol=1e-9)
        ranks = [1 + sum(1 for other in alone.cef if other > value) for value in alone.cef]
        assert result.ranks[expert].tolist() == ranks
        best_first = sorted(range(len(ranks)), key=lambda c: (-alone.cef[c], -alone.weighted_scores[c], c))
        assert result.order[expert].tolist() == best_first
        full_winners = {c for c, value in enumerate(full.cef) if value == full.cef.max()}
        winners = {c for c, value in enumerate(alone.cef) if value == alone.cef.max()}
        assert bool(result.winner_changed[expert]) == (winners != full_winners)
        assert result.kendall_tau[expert] == pytest.approx(kendalltau(full.cef, alone.cef).statistic)


def test_the_expert_whose_veto_decides_the_winner_is_found() -> None:
    # Two candidates; expert 0 (lower is better for them) vetoes candidate 0, the better one
    # for everybody else. Without expert 0 candidate 0 wins.
    snapshot = make_snapshot(0, k=3, n=1, m=2)
    snapshot["lower"] = [[0.4], [0.1], [0.1]]
    snapshot["upper"] = [[0.1], [0.9], [0.9]]
    snapshot["measurements"] = [[0.45], [0.3]]
    arrays = dict(
        zip(("weights", "peer_weights", "lower", "upper", "measurements"), snapshot_arrays(snapshot), strict=True)
    )
    result = leave_one_out(**arrays)
    assert result.full_ranks.tolist() == [2, 1]
    assert result.winner_changed.tolist() == [True, False, False]
    assert result.order[0].tolist() == [0, 1] and result.kendall_tau[0] == pytest.approx(-1.0)
    assert result.kendall_tau[1] == 1.0 and result.kendall_tau[2] == 1.0


def test_leave_one_out_needs_two_experts() -> None:
    with pytest.raises(ValueError, match="two experts"):
        leave_one_out(weights=[[1.0]], peer_weights=[[1.0]], lower=[[0.0]], upper=[[1.0]], measurements=[[0.5]])
