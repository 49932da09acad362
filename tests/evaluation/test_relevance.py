"""evaluation.metrics.relevance_score (source 001, METHOD.md 7.1) against a
slow literal reference, on the source's worked numbers, and by its limits."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.metrics import relevance_score

SETTINGS = settings(max_examples=60, deadline=None)


def literal_relevance(y_true, y_pred, context, alpha=2.0, beta=1.0, data_context=None, data_outcome=None):
    """Source 001, eqs. 2-8, written out: P(y | x) by counting, O_H the most
    probable outcome of the context (ties: the lowest label)."""
    if data_context is None:
        data_context, data_outcome = context, y_true
    counts = {}
    for x, y in zip(data_context, data_outcome, strict=True):
        counts.setdefault(x, {})
        counts[x][y] = counts[x].get(y, 0) + 1
    scores = []
    for x, actual, predicted in zip(context, y_true, y_pred, strict=True):
        table = counts[x]
        total = sum(table.values())
        highest = min(y for y in table if table[y] == max(table.values()))

        def probability(outcome, table=table, total=total):
            return table.get(outcome, 0) / total

        if predicted == actual:
            scores.append(100.0)
            continue
        d_hp = abs(probability(highest) - probability(predicted))
        d_pa = abs(probability(predicted) - probability(actual))
        scores.append((1 - (alpha * d_hp + beta * d_pa) / (alpha + beta)) * 100)
    return sum(scores) / len(scores)


@st.composite
def samples_in_context(draw):
    n = draw(st.integers(1, 30))
    context = draw(st.lists(st.sampled_from(["home", "office", "lab", "hall"]), min_size=n, max_size=n))
    y_true = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    y_pred = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    return y_true, y_pred, context


weights = st.floats(0.01, 100)


@SETTINGS
@given(samples_in_context(), weights, weights)
def test_relevance_matches_the_literal_reference(sample, alpha, beta):
    y_true, y_pred, context = sample
    expected = literal_relevance(y_true, y_pred, context, alpha, beta)
    assert relevance_score(y_true, y_pred, context=context, alpha=alpha, beta=beta) == pytest.approx(expected, abs=1e-9)


@SETTINGS
@given(samples_in_context(), samples_in_context())
def test_relevance_with_a_separate_data_set(sample, data):
    y_true, y_pred, context = sample
    data_outcome, _, data_context = data
    # Every test context must occur in the data set: add each test sample to it.
    data_context, data_outcome = data_context + context, data_outcome + y_true
    expected = literal_relevance(y_true, y_pred, context, 2.0, 1.0, data_context, data_outcome)
    assert relevance_score(
        y_true, y_pred, context=context, data_context=data_context, data_outcome=data_outcome
    ) == pytest.approx(expected, abs=1e-9)


@SETTINGS
@given(samples_in_context())
def test_perfect_predictions_score_100_and_every_score_lies_in_0_100(sample):
    y_true, y_pred, context = sample
    assert relevance_score(y_true, y_true, context=context) == 100.0
    assert 0.0 <= relevance_score(y_true, y_pred, context=context) <= 100.0


@SETTINGS
@given(samples_in_context())
def test_relevance_tends_to_the_d_hp_and_d_pa_limits(sample):
    y_true, y_pred, context = sample
    # Source 001 eqs. 9-10: the error tends to d_HP (alpha -> inf) or d_PA
    # (beta -> inf), which is the literal formula with the other weight 0.
    large = 1e9
    assert relevance_score(y_true, y_pred, context=context, alpha=large, beta=1.0) == pytest.approx(
        literal_relevance(y_true, y_pred, context, alpha=1.0, beta=0.0), abs=1e-6
    )
    assert relevance_score(y_true, y_pred, context=context, alpha=1.0, beta=large) == pytest.approx(
        literal_relevance(y_true, y_pred, context, alpha=0.0, beta=1.0), abs=1e-6
    )


@SETTINGS
@given(samples_in_context(), st.randoms(use_true_random=False))
def test_relevance_does_not_depend_on_the_order_of_the_samples(sample, random):
    y_true, y_pred, context = sample
    order = list(range(len(y_true)))
    random.shuffle(order)
    shuffled = [[values[i] for i in order] for values in (y_true, y_pred, context)]
    assert relevance_score(shuffled[0], shuffled[1], context=shuffled[2]) == pytest.approx(
        relevance_score(y_true, y_pred, context=context), abs=1e-9
    )


@SETTINGS
@given(st.data())
def test_a_context_of_several_columns_is_compared_as_a_whole(data):
    n = data.draw(st.integers(1, 30))
    activity = data.draw(st.lists(st.sampled_from(["read", "talk"]), min_size=n, max_size=n))
    hour = data.draw(st.lists(st.integers(8, 10), min_size=n, max_size=n))
    y_true = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    y_pred = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    rows = [[a, h] for a, h in zip(activity, hour, strict=True)]
    joined = [f"{a}@{h}" for a, h in zip(activity, hour, strict=True)]
    assert relevance_score(y_true, y_pred, context=rows) == pytest.approx(
        literal_relevance(y_true, y_pred, joined), abs=1e-9
    )


@SETTINGS
@given(st.data())
def test_contexts_of_any_hashable_kind(data):
    # Python objects NumPy cannot sort together, and integers too far apart to count.
    n = data.draw(st.integers(1, 30))
    kinds = st.sampled_from([None, "hall", 3, -1, 10**15, 2.5])
    context = data.draw(st.lists(kinds, min_size=n, max_size=n))
    far_apart = data.draw(st.lists(st.sampled_from([-(10**15), 0, 7, 10**15]), min_size=n, max_size=n))
    y_true = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    y_pred = data.draw(st.lists(st.sampled_from([0, 1, 2, "other"]), min_size=n, max_size=n))
    assert relevance_score(y_true, y_pred, context=context) == pytest.approx(
        literal_relevance(y_true, y_pred, context), abs=1e-9
    )
    assert relevance_score(y_true, y_pred, context=np.array(far_apart)) == pytest.approx(
        literal_relevance(y_true, y_pred, far_apart), abs=1e-9
    )


def test_the_sources_lighting_example():
    # Source 001 section 2: a context seen 10 times with light settings
    # LA 4 times, LB 4 times, LC twice: P = 0.4, 0.4, 0.2, and O_H = LA.
    data_outcome = ["LA"] * 4 + ["LB"] * 4 + ["LC"] * 2
    data_context = ["x"] * 10

    def score(actual, predicted):
        return relevance_score(
            [actual], [predicted], context=["x"], data_context=data_context, data_outcome=data_outcome
        )

    assert score("LA", "LA") == 100.0
    # Predicting LA when LB was wanted: both as probable as O_H, no error.
    assert score("LB", "LA") == 100.0
    # LC for LB: d_HP = |0.4 - 0.2|, d_PA = |0.2 - 0.4|, alpha = 2, beta = 1.
    assert score("LB", "LC") == pytest.approx((1 - (2 * 0.2 + 1 * 0.2) / 3) * 100)
    # LA for LC: d_HP = 0, d_PA = 0.2.
    assert score("LC", "LA") == pytest.approx((1 - 0.2 / 3) * 100)
    # An outcome never chosen in this context has probability 0.
    assert score("LA", "LD") == pytest.approx((1 - (2 * 0.4 + 1 * 0.4) / 3) * 100)


def test_relevance_of_a_large_array_is_the_mean_of_its_scores():
    rng = np.random.default_rng(7)
    context = rng.integers(0, 50, 20_000)
    y_true = rng.integers(0, 6, 20_000)
    y_pred = np.where(rng.random(20_000) < 0.5, y_true, rng.integers(0, 6, 20_000))
    head = slice(0, 300)
    test_set = (y_true[head].tolist(), y_pred[head].tolist(), context[head].tolist())
    expected = literal_relevance(*test_set, 2.0, 1.0, context.tolist(), y_true.tolist())
    assert relevance_score(
        y_true[head], y_pred[head], context=context[head], data_context=context, data_outcome=y_true
    ) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"context": ["a", "z"], "data_context": ["a", "b"], "data_outcome": [1, 2]},
            r"P\(y \| x\) is undefined for a context that does not occur in the data set: z \(test samples 1\)",
        ),
        (
            {"context": [["a", 1], ["a", 2]], "data_context": [["a", 1]], "data_outcome": [1]},
            r"does not occur in the data set: \('a', 2\)",
        ),
        ({"context": ["a", "b"], "data_context": ["a", "b"]}, "data_context and data_outcome go together"),
        ({"context": ["a", "b"], "alpha": 0}, "alpha must be a positive finite number, got 0"),
        ({"context": ["a", "b"], "beta": -1.0}, "beta must be a positive finite number, got -1.0"),
        ({"context": ["a"]}, "inconsistent numbers of samples: y_true has 2, y_pred has 2, context has 1"),
        (
            {"context": ["a", "b"], "data_context": [["a", 1]], "data_outcome": [1]},
            "data_context rows must look like context rows",
        ),
    ],
)
def test_relevance_undefined_cases(kwargs, message):
    with pytest.raises(ValueError, match=message):
        relevance_score([1, 2], [1, 1], **kwargs)


def test_relevance_of_no_sample_is_undefined():
    with pytest.raises(ValueError, match="y_true, y_pred and context must not be empty"):
        relevance_score([], [], context=[])
