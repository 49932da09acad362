"""Monte Carlo analyses of runs with elicited metrics (issue 21; docs/method.md
7.4 and 8.3): every sample scores each expert on their own value, fixed or
recomputed from the candidate's resampled confusion matrix. A slow literal
reference (loops over samples, experts and candidates), and Hypothesis
properties: when every expert has the same value, the elicited metric's
Monte Carlo is the typed (or computed) metric's. Plain NumPy, no Django."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import core, robustness
from engine.robustness import (
    SAMPLE_BLOCK,
    BootstrapColumn,
    ElicitedColumn,
    MonteCarloInputs,
    SamplingSpec,
    bootstrap_seed,
    monte_carlo_chunk,
)
from evaluation.bootstrap import bootstrap_indices
from tests.evaluation.test_elicited_ranking import problems

ELICITED = 1  # the elicited metric's column
CLASSES = 2


def mbar(x: float, lower: float, upper: float) -> float:
    """METHOD.md 4, literally: 0 at or beyond b^l away from b^u, else the position clipped to (0, 1]."""
    if (upper > lower and x <= lower) or (upper <= lower and x >= lower):
        return 0.0
    return min(max((x - lower) / (upper - lower), np.nextafter(0.0, 1.0)), 1.0)


def study(seed: int = 0) -> MonteCarloInputs:
    """3 experts, 3 metrics (the second elicited), 5 candidates: three with 30 instances in set 1,
    one with 20 in set 2, the last fixed at its run values."""
    rng = np.random.default_rng(seed)
    k, n, m = 3, 3, 5
    weights = rng.uniform(0.1, 1.0, size=(k, n))
    weights /= weights.sum(axis=1, keepdims=True)
    peer = rng.uniform(0.1, 1.0, size=(k, k))
    peer /= peer.sum(axis=1, keepdims=True)
    lower = rng.uniform(0.0, 0.3, size=(k, n))
    upper = rng.uniform(0.7, 1.0, size=(k, n))
    # Each expert's weighted accuracy: a per class on the diagonal.
    cell_weights = np.zeros((k, CLASSES * CLASSES))
    cell_weights[:, [0, 3]] = rng.uniform(0.2, 1.0, size=(k, 2))
    cell_weights /= cell_weights.sum(axis=1, keepdims=True)
    sizes = [30, 30, 30, 20, None]
    cells = tuple(None if size is None else rng.integers(0, CLASSES * CLASSES, size=size) for size in sizes)
    sets = (1, 1, 1, 2, 0)
    own = np.empty((m, k, 1))
    for c, instances in enumerate(cells):
        if instances is None:
            own[c, :, 0] = rng.uniform(0.3, 0.9, size=k)
        else:
            confusion = np.bincount(instances, minlength=CLASSES * CLASSES) / len(instances)
            own[c, :, 0] = cell_weights @ confusion
    return MonteCarloInputs(
        weights=weights,
        peer_weights=peer,
        lower=lower,
        upper=upper,
        measurements=rng.uniform(0.1, 1.0, size=(m, n)),
        standard_errors=np.full((m, n), 0.05),
        expert_values=core.ExpertValues(np.array([ELICITED]), own),
        elicited=(ElicitedColumn(metric=ELICITED, cell_weights=cell_weights, cells=cells, prediction_sets=sets),),
    )


def evaluated(inputs: MonteCarloInputs) -> core.Evaluation:
    """The run the Monte Carlo samples around."""
    return core.evaluate(
        weights=inputs.weights,
        peer_weights=inputs.peer_weights,
        lower=inputs.lower,
        upper=inputs.upper,
        measurements=inputs.measurements,
        expert_values=inputs.expert_values,
    )


def literal_cef(inputs: MonteCarloInputs, spec: SamplingSpec, seed: int, block: int) -> np.ndarray:
    """The block's CEFs by loops, from the kernel's sampled weights, influence and ranges (their draws are
    tested elsewhere) and the bootstrap's replicate indices (evaluation.bootstrap)."""
    prepared = robustness._Prepared(inputs, spec)
    W = prepared.metric_weights(seed, block, SAMPLE_BLOCK)
    influence = prepared.influence_of(seed, block, SAMPLE_BLOCK)
    lower0, upper0 = np.asarray(inputs.lower), np.asarray(inputs.upper)
    moves = np.zeros((2, SAMPLE_BLOCK, *lower0.shape))
    if spec.range_fraction > 0:
        rng = np.random.default_rng([seed, block, robustness._RANGES])
        moves = rng.uniform(-1.0, 1.0, size=(2, SAMPLE_BLOCK, *lower0.shape))
    width = np.abs(upper0 - lower0) * spec.range_fraction
    measured = np.asarray(inputs.measurements)
    (column,) = inputs.elicited
    own = inputs.expert_values.values
    m, n = measured.shape
    k = len(lower0)
    out = np.empty((SAMPLE_BLOCK, m))
    for s in range(SAMPLE_BLOCK):
        sample = block * SAMPLE_BLOCK + s
        pi = influence[s]
        a = [sum(pi[i] * W[s, i, j] for i in range(k)) for j in range(n)]
        a = [value / sum(a) for value in a]
        for c in range(m):
            values = [own[c, i, 0] for i in range(k)]
            if spec.bootstrap and column.cells[c] is not None:
                cells = column.cells[c]
                drawn = bootstrap_indices(len(cells), bootstrap_seed(seed, column.prediction_sets[c]), sample)
                for i in range(k):
                    values[i] = sum(column.cell_weights[i][cells[t]] for t in drawn) / len(cells)
            cef, vetoed = 0.0, False
            for j in range(n):
                g = 0.0
                for i in range(k):
                    low = lower0[i, j] + moves[0, s, i, j] * width[i, j]
                    up = upper0[i, j] + moves[1, s, i, j] * width[i, j]
                    score = mbar(values[i] if j == ELICITED else measured[c, j], low, up)
                    vetoed = vetoed or score == 0.0
                    g += pi[i] * score
                cef += a[j] * min(max(g, 0.0), 1.0)
            out[s, c] = 0.0 if vetoed else cef
    return out


SPECS = {
    "everything": (SamplingSpec(judgments=True, peer_weights=True, range_fraction=0.2, bootstrap=True), 1e-12),
    "bootstrap": (SamplingSpec(bootstrap=True), 1e-12),
    "fixed, ranges": (SamplingSpec(range_fraction=0.3), 1e-12),
    "fixed, judgments": (SamplingSpec(judgments=True), 1e-12),
    # Fixed scores and sampled peers: one single-precision product (engine.robustness).
    "fixed, peers": (SamplingSpec(peer_weights=True), 1e-6),
}


@pytest.mark.parametrize("name", SPECS)
def test_the_kernel_equals_the_literal_reference(name: str) -> None:
    spec, tolerance = SPECS[name]
    inputs = study()
    seed = 11
    for block in (0, 1):
        expected = literal_cef(inputs, spec, seed, block)
        cef, _ = robustness._Prepared(inputs, spec).cef(seed, block, SAMPLE_BLOCK)
        np.testing.assert_allclose(cef, expected, rtol=0, atol=tolerance)
    # The counts are the literal CEFs' ranks (no two within the tolerance of each other here).
    literal = np.concatenate([literal_cef(inputs, spec, seed, block) for block in (0, 1)])[: SAMPLE_BLOCK + 30]
    counts = monte_carlo_chunk(inputs, spec, seed, 0, SAMPLE_BLOCK + 30)
    ranks = robustness.competition_ranks(literal)
    assert counts.ranks.tolist() == robustness.rank_counts(ranks).tolist()
    if spec.bootstrap:
        # The resampled values move the ranking: some sample differs from the run's.
        run = evaluated(inputs)
        assert not np.allclose(literal, run.cef)


def test_without_the_bootstrap_every_sample_keeps_the_run_s_own_values() -> None:
    inputs = study()
    run = evaluated(inputs)
    counts = monte_carlo_chunk(inputs, SamplingSpec(), seed=3, start=0, count=10)
    for c, rank in enumerate(robustness.competition_ranks(run.cef)):
        assert counts.ranks[c, rank - 1] == 10
    # The fixed candidate keeps its values with the bootstrap on: its column of own values never moves.
    prepared = robustness._Prepared(inputs, SamplingSpec(bootstrap=True))
    values = prepared.own_values(3, 0, SAMPLE_BLOCK).values
    assert (values[:, 4] == inputs.expert_values.values[4]).all()
    assert not (values[:, 0] == inputs.expert_values.values[0]).all()


def test_elicited_chunks_merge_to_the_bit_and_bad_columns_are_refused() -> None:
    inputs = study()
    spec = SamplingSpec(judgments=True, bootstrap=True)
    whole = monte_carlo_chunk(inputs, spec, 5, 0, 150)
    parts = robustness.merge([monte_carlo_chunk(inputs, spec, 5, start, count) for start, count in ((0, 70), (70, 80))])
    assert whole.to_dict() == parts.to_dict()
    (column,) = inputs.elicited
    bad = {
        "metric must be a column": ElicitedColumn(0, column.cell_weights, column.cells, column.prediction_sets),
        r"cell_weights must have shape \(3, L \* L\)": ElicitedColumn(
            ELICITED, np.ones((3, 3)), column.cells, column.prediction_sets
        ),  # fmt: skip
        r"cells\[0\] must be cell indices": ElicitedColumn(
            ELICITED, column.cell_weights, (np.array([4]),) + column.cells[1:], column.prediction_sets
        ),
        "for each of the 5 candidates": ElicitedColumn(
            ELICITED, column.cell_weights, column.cells[:4], column.prediction_sets
        ),  # fmt: skip
    }
    for message, wrong in bad.items():
        broken = MonteCarloInputs(**{**inputs.__dict__, "elicited": (wrong,)})
        with pytest.raises(ValueError, match=message):
            monte_carlo_chunk(broken, spec, 5, 0, 1)


def near_ties(cef: np.ndarray) -> bool:
    gaps = np.abs(cef[:, :, None] - cef[:, None, :])
    return bool(((gaps > 0) & (gaps < 1e-9)).any())


def assert_same_samples(first: MonteCarloInputs, second: MonteCarloInputs, spec: SamplingSpec, seed: int) -> None:
    """The same CEFs in a block of samples; the same counts wherever no two candidates' CEFs lie within
    rounding of each other (the shared path interpolates: a value 1e-84 above b^l may score 0 there and
    1e-84 on one's own)."""
    one = robustness._Prepared(first, spec).cef(seed, 0, SAMPLE_BLOCK)[0]
    other = robustness._Prepared(second, spec).cef(seed, 0, SAMPLE_BLOCK)[0]
    np.testing.assert_allclose(other, one, rtol=0, atol=1e-12)
    if not (near_ties(one) or near_ties(other)):
        assert (
            monte_carlo_chunk(first, spec, seed, 0, 40).to_dict()
            == monte_carlo_chunk(second, spec, seed, 0, 40).to_dict()
        )


HYPOTHESIS_SPECS = [
    SamplingSpec(judgments=True),
    SamplingSpec(peer_weights=True),
    SamplingSpec(range_fraction=0.2),
    SamplingSpec(judgments=True, peer_weights=True, range_fraction=0.1),
]


@settings(max_examples=60, deadline=None)
@given(problems(), st.sampled_from(HYPOTHESIS_SPECS), st.integers(0, 2**32))
def test_every_expert_with_the_same_value_samples_as_the_typed_value(problem, spec, seed) -> None:
    weights, peer, lower, upper, measured, columns = problem
    k = len(weights)
    typed = MonteCarloInputs(weights=weights, peer_weights=peer, lower=lower, upper=upper, measurements=measured)
    scrambled = measured.copy()
    scrambled[:, columns] = 1e6  # the shared column of an elicited metric is never read
    own = core.ExpertValues(columns, np.repeat(measured[:, None, columns], k, axis=1))
    elicited = MonteCarloInputs(**{**typed.__dict__, "measurements": scrambled, "expert_values": own})
    assert_same_samples(typed, elicited, spec, seed)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 6),
    st.integers(1, 4),
    st.integers(5, 40),
    st.integers(0, 2**32),
    st.sampled_from([SamplingSpec(bootstrap=True), SamplingSpec(bootstrap=True, judgments=True, range_fraction=0.1)]),
    st.data(),
)
def test_every_expert_weighing_both_classes_alike_resamples_as_accuracy(m, k, size, seed, spec, data) -> None:
    """All-ones diagonal weights make the elicited metric the accuracy: its Monte Carlo with the bootstrap is
    the accuracy column's, computed from the same predictions of the same set (same seed, same replicates)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, size=size)
    predicted = np.where(rng.random((m, size)) < data.draw(st.floats(0.5, 0.95)), truth, 1 - truth)
    accuracy = (predicted == truth).mean(axis=1)
    n = 2
    weights = rng.uniform(0.1, 1.0, size=(k, n))
    weights /= weights.sum(axis=1, keepdims=True)
    peer = np.full((k, k), 1 / k)
    lower = np.tile([0.2, 0.1], (k, 1)) + rng.uniform(0, 0.1, size=(k, n))
    upper = np.tile([0.95, 0.9], (k, 1))
    other = rng.uniform(0.3, 0.9, size=m)
    measured = np.column_stack([accuracy, other])
    computed = MonteCarloInputs(
        weights=weights,
        peer_weights=peer,
        lower=lower,
        upper=upper,
        measurements=measured,
        bootstrap=(BootstrapColumn(metric=0, kind="accuracy", y_true=truth, predictions=predicted, prediction_set=7),),
    )
    cells = tuple(truth * 2 + row for row in predicted)
    own = core.ExpertValues(np.array([0]), np.repeat(accuracy[:, None, None], k, axis=1))
    elicited = MonteCarloInputs(
        weights=weights,
        peer_weights=peer,
        lower=lower,
        upper=upper,
        measurements=np.column_stack([np.full(m, 1e6), other]),
        expert_values=own,
        elicited=(ElicitedColumn(0, np.tile([1.0, 0.0, 0.0, 1.0], (k, 1)), cells, (7,) * m),),
    )
    assert_same_samples(computed, elicited, spec, seed)
