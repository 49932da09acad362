"""engine.robustness's Monte Carlo beyond 200 experts (issue 33, item 3):
the peer weights of a block drawn in streams of its samples and held a
memory budget at a time. The samples never depend on the budget (Hypothesis
over budgets down to one byte), each sample's influence is the stationary
distribution of its drawn chain (``engine.core.expert_influence``, and the
literal aggregation), the counts are those of a literal per-sample
``evaluate``, and the memory a block takes follows the budget, not the
block. The stream size is a constant of the module (``PEER_STREAM_ENTRIES``,
200 experts' worth), made small here so that small studies take the
streamed path. Plain pytest, no Django."""

import tracemalloc
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import robustness
from engine.core import aggregate_literal, evaluate, expert_influence
from engine.robustness import (
    SAMPLE_BLOCK,
    MonteCarloInputs,
    SamplingSpec,
    monte_carlo_chunk,
    monte_carlo_counts,
    monte_carlo_prepare,
    peer_stream_samples,
)
from engine.rules import TIE

from .test_robustness_monte_carlo import same, study

PEERS = SamplingSpec(peer_weights=True)
EVERYTHING = SamplingSpec(judgments=True, peer_weights=True, range_fraction=0.1, measurements=True)


def streams_of(samples: int, k: int):
    """PEER_STREAM_ENTRIES for streams of ``samples`` samples at ``k`` experts."""
    return mock.patch.object(robustness, "PEER_STREAM_ENTRIES", samples * k * k)


def test_up_to_two_hundred_experts_a_block_is_one_stream() -> None:
    assert [peer_stream_samples(k) for k in (1, 2, 100, 200)] == [SAMPLE_BLOCK] * 4
    # beyond, the largest power of two whose peer weights fit, at least 1
    assert [peer_stream_samples(k) for k in (201, 282, 283, 400, 1000, 1131, 1132, 5000)] == [
        32,
        32,
        16,
        16,
        2,
        2,
        1,
        1,
    ]
    with streams_of(3, 5):
        assert peer_stream_samples(5) == 2


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    k=st.integers(2, 6),
    stream=st.sampled_from([1, 2, 4, 8, 16, 32]),
    budget=st.integers(1, 2**16),
)
def test_the_samples_do_not_depend_on_the_memory_budget(seed: int, k: int, stream: int, budget: int) -> None:
    inputs = study(seed % 1000, k=k, n=3, m=6)
    with streams_of(stream, k):
        assert peer_stream_samples(k) == stream
        held_all = monte_carlo_chunk(inputs, EVERYTHING, seed, 5, SAMPLE_BLOCK + 40, memory_budget=2**30)
        held_some = monte_carlo_chunk(inputs, EVERYTHING, seed, 5, SAMPLE_BLOCK + 40, memory_budget=budget)
    assert same(held_all, held_some)


def test_streamed_chunks_merged_equal_one_unchunked_run() -> None:
    inputs = study(4, k=5, ahp=True)
    with streams_of(4, 5):
        whole = monte_carlo_chunk(inputs, EVERYTHING, seed=7, start=0, count=200, memory_budget=4096)
        bounds = [0, 1, 3, 50, SAMPLE_BLOCK, SAMPLE_BLOCK + 3, 2 * SAMPLE_BLOCK + 10, 200]
        parts = [
            monte_carlo_chunk(inputs, EVERYTHING, seed=7, start=start, count=end - start, memory_budget=700)
            for start, end in zip(bounds[:-1], bounds[1:], strict=True)
        ]
    assert same(robustness.merge(parts[::-1]), whole)


def drawn_chains(inputs: MonteCarloInputs, seed: int, block: int, stream: int) -> np.ndarray:
    """The block's peer weights as its streams draw them, stream ``s`` from
    a generator seeded (seed, block, peers, s), written out one stream at a time."""
    alpha = PEERS.peer_concentration * np.asarray(inputs.peer_weights)
    chains = []
    for s in range(SAMPLE_BLOCK // stream):
        rng = np.random.default_rng([seed, block, robustness._PEERS, s])
        chains.append(robustness._Dirichlet(alpha, stream).draw(rng).copy())
    return np.concatenate(chains)


@pytest.mark.parametrize("budget", [1, 3000, 2**30])
def test_each_sampled_influence_is_the_stationary_distribution_of_its_chain(budget: int) -> None:
    inputs = study(8, k=6)
    with streams_of(4, 6):
        prepared = monte_carlo_prepare(inputs, PEERS, memory_budget=budget)
        influence = prepared.influence_of(seed=3, block=2, size=SAMPLE_BLOCK)
        chains = drawn_chains(inputs, seed=3, block=2, stream=4)
    assert len(np.unique(chains.round(12), axis=0)) == SAMPLE_BLOCK  # every sample draws its own
    for chain, found in zip(chains, influence, strict=True):
        assert np.allclose(found, expert_influence(chain), atol=1e-12, rtol=0)
        # pi V: the literal aggregation of the identity is pi in every row
        rows, _ = aggregate_literal(chain, np.eye(6), tolerance=1e-13)
        assert np.allclose(found, rows, atol=1e-11, rtol=0)


def test_a_chain_s_distribution_does_not_depend_on_the_others_in_its_batch() -> None:
    rng = np.random.default_rng(1)
    chains = rng.uniform(0.01, 1.0, size=(12, 7, 7))
    chains[:4] += np.eye(7) * 300  # slowly mixing: the solve, not the steps
    chains[4:6] += np.eye(7) * 5  # a few more steps than the rest
    chains /= chains.sum(axis=-1, keepdims=True)
    start = expert_influence(chains[-1])
    together = robustness._stationary_batch(chains.copy(), start, each_alone=True)
    for i, chain in enumerate(chains):
        alone = robustness._stationary_batch(chain[None].copy(), start, each_alone=True)[0]
        assert alone.tobytes() == together[i].tobytes()
        assert np.allclose(alone, expert_influence(chain), atol=1e-12, rtol=0)


def literal_counts(inputs: MonteCarloInputs, chains: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rank counts (m, m), consensus weights summed where first (m, n)) of
    one evaluate per sample, its peer weights the sample's chain, and
    competition ranks counted one candidate at a time."""
    m, n = np.shape(inputs.measurements)
    ranks = np.zeros((m, m), dtype=np.int64)
    central = np.zeros((m, n))
    for chain in chains:
        run = evaluate(
            weights=inputs.weights,
            peer_weights=chain,
            lower=inputs.lower,
            upper=inputs.upper,
            measurements=inputs.measurements,
        )
        for c in range(m):
            rank = 1 + sum(1 for d in range(m) if run.cef[d] > run.cef[c] + TIE)
            ranks[c, rank - 1] += 1
            if rank == 1:
                central[c] += run.metric_weights
    return ranks, central


def test_streamed_counts_are_those_of_an_evaluate_per_sample() -> None:
    inputs = study(9, k=5, n=3, m=6)
    with streams_of(2, 5):
        counts = monte_carlo_chunk(inputs, PEERS, seed=4, start=0, count=2 * SAMPLE_BLOCK, memory_budget=2000)
        chains = np.concatenate([drawn_chains(inputs, seed=4, block=b, stream=2) for b in (0, 1)])
    ranks, central = literal_counts(inputs, chains)
    assert counts.ranks.tolist() == ranks.tolist()
    summed = np.ldexp(counts.central_weights.astype(np.float64), -robustness.CENTRAL_WEIGHT_BITS)
    assert np.allclose(summed, central, atol=1e-9, rtol=0)


def peak_bytes(function) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        function()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before


def test_a_block_s_memory_follows_the_budget_not_the_block() -> None:
    k = 60
    inputs = study(10, k=k, n=2, m=4)
    chain_bytes = 8 * k * k
    stream_bytes = robustness._Dirichlet.BYTES_PER_DRAW * 2 * k * k  # one stream's sampler, 2 samples
    peaks = []
    with streams_of(2, k):
        for budget in (stream_bytes + 8 * chain_bytes, stream_bytes + 24 * chain_bytes):
            prepared = monte_carlo_prepare(inputs, PEERS, memory_budget=budget)
            prepared.influence_of(seed=1, block=0, size=SAMPLE_BLOCK)  # buffers allocated once
            prepared.release_buffers()
            peaks.append(
                peak_bytes(lambda prepared=prepared: prepared.influence_of(seed=1, block=0, size=SAMPLE_BLOCK))
            )
            # the budget, and a few chains' worth of small arrays (pi, its steps, the rejected draws)
            assert peaks[-1] <= budget + 2 * chain_bytes
    assert peaks[1] - peaks[0] >= 12 * chain_bytes  # the larger budget holds 16 chains more
    # One stream of the whole block (k <= 200): its sampler's buffers, 36 bytes a peer weight
    # (no shape below 1 here), for every sample of the block.
    prepared = monte_carlo_prepare(inputs, PEERS)
    assert peak_bytes(lambda: prepared.influence_of(seed=1, block=0, size=SAMPLE_BLOCK)) >= 36 * SAMPLE_BLOCK * k * k


def test_kept_and_released_a_prepared_analysis_gives_the_same_counts() -> None:
    inputs = study(11, k=5, ahp=True)
    prepared = monte_carlo_prepare(inputs, EVERYTHING)
    first = monte_carlo_counts(prepared, 3, 0, 100)
    prepared.release_buffers()
    again = monte_carlo_counts(prepared, 3, 0, 100)
    later = monte_carlo_counts(prepared, 3, 100, 50)
    assert same(first, again)
    assert same(later, monte_carlo_chunk(inputs, EVERYTHING, 3, 100, 50))


@pytest.mark.parametrize("budget", [0, -1, 1.5, True])
def test_a_bad_memory_budget_is_refused(budget) -> None:
    with pytest.raises(ValueError, match="memory_budget"):
        monte_carlo_prepare(study(1), PEERS, memory_budget=budget)
