"""Leave one expert out has one implementation (issue 30, item 2): the
analysis the page, the API and the CSV show (``engine.robustness_kernels``)
is ``engine.robustness.leave_one_out`` cut into chunks of experts. Both are
checked here against a slow literal reference: the engine run by hand on the
study from which the expert was removed (their rows, their peer-weight row
and column, every other row renormalised, their own elicited values), ranks
counted literally, Kendall's tau-b from SciPy with the rule of
docs/method.md 8.2 (1 when the ranks are unchanged, undefined when every
candidate ties in one ranking only)."""

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from engine import analyses, core, robustness
from engine.analyses import RunInputs
from engine.analysis_export import analysis_csv_rows
from engine.models import Analysis
from engine.robustness_kernels import TOP, LeaveOneOut
from engine.snapshot import snapshot_arrays, snapshot_expert_values

from .test_robustness_elicited import study as elicited_study


def literal_ranks(cef):
    return [1 + sum(other > value for other in cef) for value in cef]


def reference_without(expert, W, V, L, U, M, own):
    """The engine on the study without ``expert``, every array reduced by hand."""
    keep = [i for i in range(len(W)) if i != expert]
    V_reduced = np.array([[V[i][j] for j in keep] for i in keep])
    V_reduced = np.array([row / row.sum() for row in V_reduced])
    reduced_own = None
    if own is not None:
        reduced_own = core.ExpertValues(own.columns, own.values[:, keep, :])
    return core.evaluate(
        weights=W[keep], peer_weights=V_reduced, lower=L[keep], upper=U[keep], measurements=M, expert_values=reduced_own
    )


def reference_rows(W, V, L, U, M, own):
    """Per expert left out: (ranks, winner indices, top three, tau or None, winner changed)."""
    full = core.evaluate(weights=W, peer_weights=V, lower=L, upper=U, measurements=M, expert_values=own)
    full_ranks = literal_ranks(full.cef.tolist())
    rows = []
    for expert in range(len(W)):
        result = reference_without(expert, W, V, L, U, M, own)
        cef, weighted = result.cef.tolist(), result.weighted_scores.tolist()
        ranks = literal_ranks(cef)
        order = sorted(range(len(cef)), key=lambda c: (-cef[c], -weighted[c], c))
        if ranks == full_ranks:
            tau = 1.0
        else:
            statistic = kendalltau(full.cef, result.cef).statistic
            tau = float(statistic) if np.isfinite(statistic) else None
        winners = [c for c in order if ranks[c] == 1]
        changed = sorted(winners) != sorted(c for c in range(len(cef)) if full_ranks[c] == 1)
        rows.append((ranks, winners, order[:TOP], tau, changed))
    return rows


def assert_pure_matches(result, rows):
    for row, (ranks, winners, top, tau, changed) in enumerate(rows):
        assert result.ranks[row].tolist() == ranks
        assert [c for c in result.order[row].tolist() if result.ranks[row][c] == 1] == winners
        assert result.order[row][:TOP].tolist() == top
        assert bool(result.winner_changed[row]) is changed
        if tau is None:
            assert np.isnan(result.kendall_tau[row])
        else:
            assert result.kendall_tau[row] == pytest.approx(tau, abs=1e-12)


def pure(inputs, **options):
    """``leave_one_out`` on a test study of tests/engine/test_robustness_elicited.py."""
    return robustness.leave_one_out(
        weights=inputs.weights,
        peer_weights=inputs.peer_weights,
        lower=inputs.lower,
        upper=inputs.upper,
        measurements=inputs.measurements,
        **options,
    )


def test_the_pure_function_with_elicited_values_is_the_hand_reduced_study():
    inputs = elicited_study(3)
    arrays = (inputs.weights, inputs.peer_weights, inputs.lower, inputs.upper, inputs.measurements)
    result = pure(inputs, expert_values=inputs.expert_values)
    assert result.experts.tolist() == [0, 1, 2]
    assert_pure_matches(result, reference_rows(*arrays, inputs.expert_values))
    # Without their own values the elicited column reads M: a different study, a different answer.
    plain = pure(inputs)
    assert not np.allclose(plain.cef, result.cef)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 5), m=st.integers(2, 6), ties=st.booleans())
def test_the_pure_function_is_the_literal_reference(seed, k, m, ties):
    rng = np.random.default_rng(seed)
    n = 3
    W = rng.uniform(0.1, 1, (k, n))
    W /= W.sum(axis=1, keepdims=True)
    V = rng.uniform(0.1, 1, (k, k))
    V /= V.sum(axis=1, keepdims=True)
    L = rng.uniform(0, 0.4, (k, n))
    U = rng.uniform(0.6, 1, (k, n))
    # Measurements on a coarse grid make vetoes and exact ties (CEF 0 for all, or equal rows) common.
    M = rng.choice([0.0, 0.5, 1.0], size=(m, n)) if ties else rng.uniform(0, 1, (m, n))
    subset = sorted(rng.choice(k, size=rng.integers(1, k + 1), replace=False).tolist())
    result = robustness.leave_one_out(weights=W, peer_weights=V, lower=L, upper=U, measurements=M, experts=subset)
    assert result.experts.tolist() == subset
    every = reference_rows(W, V, L, U, M, None)
    assert_pure_matches(result, [every[e] for e in subset])


def test_experts_outside_the_study_are_refused():
    inputs = elicited_study(0)
    with pytest.raises(ValueError, match="indices of the 3 experts"):
        pure(inputs, experts=[3])


def kernel_rows(snapshot, results, chunk):
    """The production kernel, chunk by chunk, merged and summarised."""
    kernel = LeaveOneOut()
    k = len(snapshot["experts"])
    counts = [
        kernel.compute(RunInputs(snapshot, results), {}, 0, start, min(chunk, k - start))
        for start in range(0, k, chunk)
    ]
    return kernel.summary(RunInputs(snapshot, results), {}, kernel.merge(counts))


def assert_kernel_matches(summary, snapshot):
    W, V, L, U, M = snapshot_arrays(snapshot)
    rows = reference_rows(W, V, L, U, M, snapshot_expert_values(snapshot))
    names = snapshot["candidates"]
    assert [row["expert"] for row in summary["rows"]] == snapshot["experts"]
    for shown, (_, winners, top, tau, changed) in zip(summary["rows"], rows, strict=True):
        assert shown["winner"] == [names[c] for c in winners]
        assert shown["top_three"] == [names[c] for c in top]
        assert shown["changes_winner"] is changed
        assert shown["tau"] == (None if tau is None else pytest.approx(tau, abs=1e-12))
    assert summary["changed"] == [row["expert"] for row in summary["rows"] if row["changes_winner"]]


def test_the_stored_analysis_is_the_reference(run, settings):
    settings.ENGINE_ANALYSIS_CHUNK_EXPERTS = 3
    analysis = analyses.analysis_launch(
        run=run, kind=Analysis.Kind.LEAVE_ONE_OUT, launched_by=run.study.designer, samples=None, seed=1
    )
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    assert analysis.status == Analysis.Status.SUCCEEDED
    assert_kernel_matches(analysis.result["summary"], run.snapshot)
    csv_rows = analysis_csv_rows(analysis)
    assert [row[3] for row in csv_rows[1:]] == [row["tau"] for row in analysis.result["summary"]["rows"]]


def test_an_expert_who_vetoes_the_winner_changes_it_when_left_out(run):
    """Expert 0's range now vetoes the run's winner: without them it wins again."""
    snapshot = copy.deepcopy(run.snapshot)
    W, V, L, U, M = snapshot_arrays(snapshot)
    full = core.evaluate(weights=W, peer_weights=V, lower=L, upper=U, measurements=M)
    best = int(np.argmax(full.cef))
    metric = int(np.argmax(W[0]))
    increasing = U[0, metric] > L[0, metric]
    # x <= b^l scores 0 on an increasing range (x >= b^l on a decreasing one): the best is vetoed by expert 0.
    snapshot["lower"][0][metric] = float(M[best, metric]) + (1e-9 if increasing else -1e-9)
    W, V, L, U, M = snapshot_arrays(snapshot)
    vetoed = core.evaluate(weights=W, peer_weights=V, lower=L, upper=U, measurements=M)
    assert vetoed.cef[best] == 0
    ranks = literal_ranks(vetoed.cef.tolist())
    results = {
        "candidates": [{"name": name, "rank": rank} for name, rank in zip(snapshot["candidates"], ranks, strict=True)]
    }
    summary = kernel_rows(snapshot, results, chunk=2)
    assert summary["rows"][0]["changes_winner"] is True
    assert snapshot["candidates"][best] in summary["rows"][0]["winner"]
    assert summary["changed"][0] == snapshot["experts"][0]
    assert_kernel_matches(summary, snapshot)


def test_a_ranking_where_every_candidate_ties_has_no_tau(run):
    """Every expert's range vetoes every candidate, but for expert 1's, whose
    absence then leaves all tied at 0 while the full run ties too: ranks
    unchanged, tau 1. Without expert 0 the others still veto all: 1 again.
    Where only one ranking is all ties, tau is undefined (None)."""
    snapshot = copy.deepcopy(run.snapshot)
    W, V, L, U, M = snapshot_arrays(snapshot)
    # Expert 0 alone vetoes every candidate: the full run ties all at 0.
    metric = 0
    increasing = U[0, metric] > L[0, metric]
    snapshot["lower"][0][metric] = float(M[:, metric].max() + 1) if increasing else float(M[:, metric].min() - 1)
    if not increasing:
        snapshot["upper"][0][metric] = snapshot["lower"][0][metric] - 1
    else:
        snapshot["upper"][0][metric] = snapshot["lower"][0][metric] + 1
    results = {"candidates": [{"name": name, "rank": 1} for name in snapshot["candidates"]]}
    summary = kernel_rows(snapshot, results, chunk=4)
    rows = summary["rows"]
    # Without expert 0 the ranking is no longer all ties: tau-b undefined; with them gone nobody vetoes all.
    assert rows[0]["tau"] is None
    assert rows[0]["changes_winner"] is True
    # Without any other expert, expert 0 still vetoes every candidate: unchanged ranks, tau 1.
    assert all(row["tau"] == 1.0 and row["changes_winner"] is False for row in rows[1:])
    assert_kernel_matches(summary, snapshot)
