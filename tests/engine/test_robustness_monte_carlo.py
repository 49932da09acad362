"""engine.robustness's Monte Carlo: known answers (symmetric candidates
50/50 within 3 standard errors, a dominating candidate 100 %), seeds that
reproduce bytes, chunks merged that equal one run, and invariants
(Hypothesis). Plain pytest, no Django."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import robustness
from engine.core import evaluate, expert_influence
from engine.robustness import (
    CENTRAL_WEIGHT_BITS,
    SAMPLE_BLOCK,
    Counts,
    MonteCarloInputs,
    SamplingSpec,
    merge,
    monte_carlo_chunk,
    summary,
)
from engine.rules import SCALE_VALUES

EVERYTHING = SamplingSpec(judgments=True, peer_weights=True, range_fraction=0.1, measurements=True)


def study(seed: int, k: int = 4, n: int = 3, m: int = 5, *, ahp: bool = False) -> MonteCarloInputs:
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.1, 1.0, size=(k, n))
    weights /= weights.sum(axis=1, keepdims=True)
    peer = rng.uniform(0.1, 1.0, size=(k, k))
    peer /= peer.sum(axis=1, keepdims=True)
    matrices = None
    if ahp:
        matrices = np.ones((k, n, n))
        for i in range(k):
            for a in range(n):
                for b in range(a + 1, n):
                    value = SCALE_VALUES[rng.integers(0, len(SCALE_VALUES))]
                    matrices[i, a, b], matrices[i, b, a] = value, 1 / value
        from engine.prioritisation import ahp_weights

        weights = ahp_weights(matrices)
    return MonteCarloInputs(
        weights=weights,
        peer_weights=peer,
        lower=rng.uniform(0.0, 0.2, size=(k, n)),
        upper=rng.uniform(0.8, 1.0, size=(k, n)),
        measurements=rng.uniform(0.1, 1.0, size=(m, n)),
        ahp_matrices=matrices,
        ahp_experts=np.arange(k) % 2 == 0 if ahp else None,
        standard_errors=np.full((m, n), 0.05),
    )


def same(first: Counts, second: Counts) -> bool:
    return first.to_dict() == second.to_dict() and all(
        getattr(first, name).tobytes() == getattr(second, name).tobytes()
        for name in ("ranks", "pairwise", "central_weights")
    )


def test_nothing_sampled_gives_the_run_every_time() -> None:
    inputs = study(1)
    run = evaluate(
        weights=inputs.weights,
        peer_weights=inputs.peer_weights,
        lower=inputs.lower,
        upper=inputs.upper,
        measurements=inputs.measurements,
    )
    counts = monte_carlo_chunk(inputs, SamplingSpec(), seed=3, start=0, count=10)
    ranks = robustness.competition_ranks(run.cef)
    assert counts.samples == 10
    for c, rank in enumerate(ranks):
        assert counts.ranks[c].tolist() == [10 if r == rank - 1 else 0 for r in range(5)]
    result = summary(counts)
    winner = int(np.argmax(run.cef))
    assert np.allclose(result.central_weights[winner], run.metric_weights, atol=2.0**-CENTRAL_WEIGHT_BITS)
    assert np.isnan(result.central_weights[ranks != 1]).all()
    assert result.best_se.tolist() == [0.0] * 5


def symmetric_study() -> MonteCarloInputs:
    """Two candidates mirror each other over two metrics that every expert
    weighs equally, with symmetric ranges: any sample and its mirror image
    (metrics swapped) are equally likely, so each wins half the time."""
    k = 3
    return MonteCarloInputs(
        weights=np.full((k, 2), 0.5),
        peer_weights=np.full((k, k), 1 / k),
        lower=np.zeros((k, 2)),
        upper=np.ones((k, 2)),
        measurements=np.array([[0.8, 0.4], [0.4, 0.8]]),
    )


@pytest.mark.parametrize(
    "spec",
    [SamplingSpec(judgments=True), SamplingSpec(judgments=True, peer_weights=True, range_fraction=0.2)],
    ids=["judgments", "judgments-peers-ranges"],
)
def test_two_symmetric_candidates_split_fifty_fifty_within_three_standard_errors(spec: SamplingSpec) -> None:
    result = summary(monte_carlo_chunk(symmetric_study(), spec, seed=11, start=0, count=2000))
    assert abs(result.best[0] - 0.5) <= 3 * np.sqrt(0.25 / 2000)
    assert result.best[0] + result.best[1] == pytest.approx(1.0)  # continuous draws: no ties
    assert result.best_se[0] == pytest.approx(np.sqrt(result.best[0] * (1 - result.best[0]) / 2000))
    assert result.pairwise[0, 1] == result.best[0]


def test_a_dominating_candidate_is_best_in_every_sample() -> None:
    inputs = study(2)
    measured = np.array(inputs.measurements)
    measured[2] = 0.99  # above every expert's desired value on every metric
    dominating = MonteCarloInputs(**{**inputs.__dict__, "measurements": measured})
    result = summary(monte_carlo_chunk(dominating, EVERYTHING, seed=5, start=0, count=300))
    assert result.best[2] == 1.0 and result.rank_acceptability[2, 0] == 1.0
    assert result.pairwise[2, [0, 1, 3, 4]].tolist() == [1.0] * 4


def test_the_same_seed_reproduces_the_bytes_and_another_seed_does_not() -> None:
    inputs = study(3, ahp=True)
    first = monte_carlo_chunk(inputs, EVERYTHING, seed=42, start=0, count=150)
    again = monte_carlo_chunk(inputs, EVERYTHING, seed=42, start=0, count=150)
    other = monte_carlo_chunk(inputs, EVERYTHING, seed=43, start=0, count=150)
    assert same(first, again)
    assert not same(first, other)


@pytest.mark.parametrize("spec", [EVERYTHING, SamplingSpec(judgments=True, peer_weights=True)])
def test_chunks_merged_equal_one_unchunked_run(spec: SamplingSpec) -> None:
    inputs = study(4, ahp=True)
    whole = monte_carlo_chunk(inputs, spec, seed=7, start=0, count=200)
    # Splits inside blocks and across them, in any order.
    bounds = [0, 1, 50, SAMPLE_BLOCK, SAMPLE_BLOCK + 3, 2 * SAMPLE_BLOCK + 10, 200]
    parts = [
        monte_carlo_chunk(inputs, spec, seed=7, start=start, count=end - start)
        for start, end in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    assert same(merge(parts[::-1]), whole)
    assert same(Counts.from_dict(whole.to_dict()), whole)


def test_each_input_draws_from_its_own_stream() -> None:
    # Turning measurement sampling on does not change which judgments are drawn:
    # with the measurements' standard errors 0 the two analyses are equal.
    inputs = study(5)
    quiet = MonteCarloInputs(**{**inputs.__dict__, "standard_errors": np.zeros((5, 3))})
    judgments = SamplingSpec(judgments=True)
    assert same(
        monte_carlo_chunk(quiet, judgments, seed=1, start=0, count=70),
        monte_carlo_chunk(quiet, SamplingSpec(judgments=True, measurements=True), seed=1, start=0, count=70),
    )


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    k=st.integers(1, 4),
    n=st.integers(1, 3),
    m=st.integers(1, 6),
    spec=st.sampled_from([EVERYTHING, SamplingSpec(judgments=True), SamplingSpec(peer_weights=True)]),
)
def test_probabilities_sum_to_one_per_candidate_and_per_rank(
    seed: int, k: int, n: int, m: int, spec: SamplingSpec
) -> None:
    inputs = study(seed, k=k, n=n, m=m)
    counts = monte_carlo_chunk(inputs, spec, seed=seed, start=0, count=40)
    result = summary(counts)
    assert np.allclose(result.rank_acceptability.sum(axis=1), 1.0)
    # Every sample has a rank-1 candidate, and ties only ever fill ranks twice.
    assert result.best.sum() >= 1.0 - 1e-12
    assert np.all(counts.ranks.sum(axis=0) <= counts.samples * np.arange(1, m + 1)[::-1])
    assert np.all(result.pairwise + result.pairwise.T <= 1.0 + 1e-12)
    assert np.all(np.diag(result.pairwise) == 0)
    assert counts.ranks.sum() == counts.samples * m


def test_ahp_judgments_move_by_at_most_one_scale_step() -> None:
    # One AHP expert, two attributes, judgment 3: samples use 2, 3 or 4,
    # i.e. weights 2/3, 3/4 or 4/5, each about a third of the time.
    inputs = MonteCarloInputs(
        weights=[[0.75, 0.25]],
        peer_weights=[[1.0]],
        lower=[[0.0, 0.0]],
        upper=[[1.0, 1.0]],
        measurements=[[0.5, 0.5]],
        ahp_matrices=[[[1.0, 3.0], [1 / 3, 1.0]]],
        ahp_experts=[True],
    )
    prepared = robustness._Prepared(inputs, SamplingSpec(judgments=True))
    sampled = prepared.metric_weights(seed=9, block=0, size=600)[:, 0, 0]
    values, counts = np.unique(np.round(sampled, 12), return_counts=True)
    assert values.tolist() == [round(2 / 3, 12), 0.75, 0.8]
    assert np.all(np.abs(counts / 600 - 1 / 3) <= 3 * np.sqrt(2 / 9 / 600))


def test_ahp_judgments_stop_at_the_ends_of_the_scale() -> None:
    inputs = MonteCarloInputs(
        weights=[[0.9, 0.1]],
        peer_weights=[[1.0]],
        lower=[[0.0, 0.0]],
        upper=[[1.0, 1.0]],
        measurements=[[0.5, 0.5]],
        ahp_matrices=[[[1.0, 9.0], [1 / 9, 1.0]]],
        ahp_experts=[True],
    )
    sampled = robustness._Prepared(inputs, SamplingSpec(judgments=True)).metric_weights(9, 0, 300)[:, 0, 0]
    assert set(np.round(sampled, 12).tolist()) == {round(8 / 9, 12), 0.9}


def test_dirichlet_weights_are_centred_on_the_given_weights() -> None:
    inputs = study(6, k=2, n=3)
    prepared = robustness._Prepared(inputs, SamplingSpec(judgments=True, weight_concentration=50.0))
    sampled = prepared.metric_weights(seed=2, block=0, size=4000)
    given_weights = np.asarray(inputs.weights)
    assert np.allclose(sampled.sum(axis=-1), 1.0)
    variance = given_weights * (1 - given_weights) / 51
    assert np.all(np.abs(sampled.mean(axis=0) - given_weights) <= 4 * np.sqrt(variance / 4000))
    assert np.allclose(sampled.var(axis=0), variance, rtol=0.15)


def test_sampled_influence_is_the_stationary_distribution() -> None:
    rng = np.random.default_rng(0)
    chains = rng.uniform(0.01, 1.0, size=(20, 6, 6))
    chains[:5] += np.eye(6) * 200  # slowly mixing: lazy steps, else the solve
    chains /= chains.sum(axis=-1, keepdims=True)
    start = expert_influence(chains[0])
    found = robustness._stationary_batch(chains.copy(), start)  # (it overwrites the chains)
    for chain, influence in zip(chains, found, strict=True):
        assert np.allclose(influence, expert_influence(chain), atol=1e-12)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (lambda: SamplingSpec(range_fraction=0.5), "range_fraction"),
        (lambda: SamplingSpec(weight_concentration=0), "weight_concentration"),
        (lambda: SamplingSpec(peer_concentration=float("nan")), "peer_concentration"),
    ],
)
def test_bad_specs_are_refused(spec, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        spec()


def test_bad_chunks_and_inputs_are_refused() -> None:
    inputs = study(1)
    with pytest.raises(ValueError, match="seed"):
        monte_carlo_chunk(inputs, SamplingSpec(), seed=-1, start=0, count=1)
    with pytest.raises(ValueError, match="count"):
        monte_carlo_chunk(inputs, SamplingSpec(), seed=1, start=0, count=-1)
    with pytest.raises(ValueError, match="pairwise"):
        monte_carlo_chunk(inputs, SamplingSpec(pairwise=(0, 9)), seed=1, start=0, count=1)
    with pytest.raises(ValueError, match="ahp_matrices"):
        monte_carlo_chunk(
            MonteCarloInputs(**{**inputs.__dict__, "ahp_experts": [True, False, False, False]}),
            SamplingSpec(judgments=True),
            seed=1,
            start=0,
            count=1,
        )
    with pytest.raises(ValueError, match="standard_errors"):
        monte_carlo_chunk(
            MonteCarloInputs(**{**inputs.__dict__, "standard_errors": -np.ones((5, 3))}),
            SamplingSpec(),
            seed=1,
            start=0,
            count=1,
        )
    with pytest.raises(ValueError, match="same analysis"):
        merge(
            [
                monte_carlo_chunk(inputs, SamplingSpec(), 1, 0, 1),
                monte_carlo_chunk(study(1, m=4), SamplingSpec(), 1, 0, 1),
            ]
        )


def test_pairwise_defaults_to_the_runs_best_twenty_beyond_a_hundred_candidates() -> None:
    inputs = study(8, m=120)
    counts = monte_carlo_chunk(inputs, SamplingSpec(), seed=1, start=0, count=2)
    run = evaluate(
        weights=inputs.weights,
        peer_weights=inputs.peer_weights,
        lower=inputs.lower,
        upper=inputs.upper,
        measurements=inputs.measurements,
    )
    best = np.lexsort((np.arange(120), -run.weighted_scores, -run.cef))[:20]
    assert counts.pairwise_candidates.tolist() == sorted(best.tolist())
    assert counts.pairwise.shape == (20, 20)


def bootstrap_study(m: int = 3, n_instances: int = 200) -> tuple[MonteCarloInputs, np.ndarray, np.ndarray]:
    """One expert, one metric (accuracy) whose range [-1, 1] never vetoes and
    scores it linearly: the ranking of a sample is the ranking of the
    candidates' accuracies on its bootstrap replicate."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, size=n_instances)
    # Candidates right about 80 %, 79 % and 60 % of the instances.
    labels = np.array([np.where(rng.random(n_instances) < rate, truth, 1 - truth) for rate in (0.8, 0.79, 0.6)])[:m]
    accuracy = (labels == truth).mean(axis=1)
    inputs = MonteCarloInputs(
        weights=[[1.0]],
        peer_weights=[[1.0]],
        lower=[[-1.0]],
        upper=[[1.0]],
        measurements=accuracy[:, None],
        bootstrap=(robustness.BootstrapColumn(metric=0, kind="accuracy", y_true=truth, predictions=labels),),
    )
    return inputs, truth, labels


def test_bootstrap_samples_rank_the_candidates_by_their_replicate_accuracy() -> None:
    from evaluation.bootstrap import bootstrap_metrics

    inputs, truth, labels = bootstrap_study()
    counts = monte_carlo_chunk(inputs, SamplingSpec(bootstrap=True), seed=4, start=0, count=150)
    replicates = bootstrap_metrics(truth, y_pred=labels, seed=robustness.bootstrap_seed(4, 0), replicates=150)
    expected = robustness.rank_counts(robustness.competition_ranks(replicates.accuracy))
    assert counts.ranks.tolist() == expected.tolist()
    # Candidate 2 (about 60 %) never wins; the two close ones share the wins,
    # the more accurate on the whole set more often.
    result = summary(counts)
    accuracy = np.asarray(inputs.measurements)[:, 0]
    assert result.best[2] == 0.0 and min(result.best[0], result.best[1]) > 0
    assert (result.best[0] > result.best[1]) == (accuracy[0] > accuracy[1])


def test_bootstrap_chunks_merge_exactly_and_the_spec_switches_it() -> None:
    inputs, _, _ = bootstrap_study()
    spec = SamplingSpec(bootstrap=True, judgments=True)
    whole = monte_carlo_chunk(inputs, spec, seed=2, start=0, count=100)
    parts = [monte_carlo_chunk(inputs, spec, seed=2, start=s, count=c) for s, c in ((0, 30), (30, 45), (75, 25))]
    assert same(merge(parts), whole)
    # Without bootstrap (or anything else) sampled, the run's winner wins every time.
    fixed = monte_carlo_chunk(inputs, SamplingSpec(), seed=2, start=0, count=10)
    winner = int(np.argmax(np.asarray(inputs.measurements)[:, 0]))
    assert fixed.best.tolist() == [10 if c == winner else 0 for c in range(3)]


def test_bad_bootstrap_columns_are_refused() -> None:
    inputs, truth, labels = bootstrap_study()
    column = robustness.BootstrapColumn(metric=0, kind="f1", y_true=truth, predictions=labels)
    with pytest.raises(ValueError, match="kind"):
        monte_carlo_chunk(
            MonteCarloInputs(**{**inputs.__dict__, "bootstrap": (column,)}), SamplingSpec(bootstrap=True), 1, 0, 1
        )
    column = robustness.BootstrapColumn(metric=0, kind="accuracy", y_true=truth, predictions=labels[:2])
    with pytest.raises(ValueError, match="one row per candidate"):
        monte_carlo_chunk(
            MonteCarloInputs(**{**inputs.__dict__, "bootstrap": (column,)}), SamplingSpec(bootstrap=True), 1, 0, 1
        )


@pytest.mark.parametrize(
    "spec", [EVERYTHING, SamplingSpec(judgments=True, peer_weights=True), SamplingSpec(judgments=True)]
)
def test_identical_candidates_tie_in_every_sample(spec: SamplingSpec) -> None:
    inputs = study(9, m=70)  # several BLAS panels wide
    measured = np.array(inputs.measurements)
    measured[61] = measured[2]
    errors = np.array(inputs.standard_errors)
    errors[[2, 61]] = 0.0  # a measurement drawn per candidate would differ
    twins = MonteCarloInputs(**{**inputs.__dict__, "measurements": measured, "standard_errors": errors})
    counts = monte_carlo_chunk(twins, spec, seed=1, start=0, count=80)
    assert counts.ranks[2].tolist() == counts.ranks[61].tolist()
    assert counts.pairwise[2, 61] == 0 and counts.pairwise[61, 2] == 0


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), k=st.integers(1, 6), n=st.integers(1, 4), m=st.sampled_from([3, 30, 60]))
def test_a_block_of_group_scores_is_each_problem_scored_alone(seed: int, k: int, n: int, m: int) -> None:
    """core._group_scores_batch (the Monte Carlo's block) gives every sample
    exactly, to the bit, what evaluate's one-problem call gives, by the
    direct search (few candidates) and by interpolation (m >= 4 k), with
    and without the order hint."""
    from engine import core

    rng = np.random.default_rng(seed)
    samples = 5
    influence = rng.dirichlet(np.ones(k), size=samples)
    lower = rng.uniform(0, 1, size=(samples, k, n))
    upper = lower + rng.choice([-1, 1], size=lower.shape) * rng.uniform(0.05, 1, size=lower.shape)
    measured = rng.uniform(-0.5, 1.5, size=(samples, m, n))
    measured[:, 0] = lower[:, 0]  # values on a bound
    order = np.ascontiguousarray(np.argsort(measured[0], axis=0).T)
    alone = np.stack([core._group_scores(influence[s], lower[s], upper[s], measured[s]) for s in range(samples)])
    assert np.array_equal(core._group_scores_batch(influence, lower, upper, measured), alone)
    assert np.array_equal(core._group_scores_batch(influence, lower, upper, measured, order), alone)
    vetoed = np.stack([core._vetoed(lower[s], upper[s], measured[s]) for s in range(samples)])
    assert np.array_equal(core._vetoed(lower, upper, measured), vetoed)


def test_dirichlet_draws_match_the_distribution() -> None:
    """The vectorised gamma sampler: each entry's mean and variance are the
    Dirichlet's, a shape below 1 included, and each row sums to 1."""
    alpha = np.array([[0.4, 2.5, 30.0], [5.0, 5.0, 0.9]])
    draws = robustness._Dirichlet(alpha, 40_000).draw(np.random.default_rng(3))
    total = alpha.sum(axis=1, keepdims=True)
    mean = alpha / total
    variance = mean * (1 - mean) / (total + 1)
    assert np.allclose(draws.sum(axis=-1), 1.0, atol=1e-12)
    standard_error = np.sqrt(variance / len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * standard_error)
    assert np.allclose(draws.var(axis=0), variance, rtol=0.05)
