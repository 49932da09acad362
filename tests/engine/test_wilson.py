"""Wilson score intervals beside the Monte Carlo standard errors (issue 31,
item 9): "0 ± 0" after no success in 1,000 samples hides that the
probability may still be up to 0.38 %. Checked against the formula written
out literally, known values, and through an analysis's stored summary."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import analyses, robustness
from engine.analysis_words import monte_carlo_sentence
from engine.robustness import WILSON_Z, wilson_interval


def literal_wilson(successes: int, samples: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """E. B. Wilson (1927), written out: the p with |p_hat - p| = z sqrt(p (1 - p) / n)."""
    p = successes / samples
    denominator = 1 + z * z / samples
    centre = p + z * z / (2 * samples)
    spread = z * math.sqrt(p * (1 - p) / samples + z * z / (4 * samples * samples))
    return (centre - spread) / denominator, (centre + spread) / denominator


def test_the_quantile_is_the_normals_97_5_percent():
    assert abs(WILSON_Z - 1.959963984540054) < 1e-15


@pytest.mark.parametrize(
    ("successes", "samples", "low", "high"),
    [
        # R. G. Newcombe, "Two-sided confidence intervals for the single
        # proportion", Statistics in Medicine 17 (1998), table I, method 3
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
        # the "0 ± 0" of the issue, after 1,000 samples (the rule of three says 0.3 %)
        (0, 1000, 0.0, 0.00383),
        (1000, 1000, 0.99617, 1.0),
    ],
)
def test_known_values(successes, samples, low, high):
    got = wilson_interval(successes, samples)
    assert (float(got[0]), float(got[1])) == pytest.approx((low, high), abs=5e-5)


@given(st.integers(1, 10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_interval_is_the_literal_formula_and_holds_the_estimate(case):
    successes, samples = case
    low, high = wilson_interval(successes, samples)
    literal = literal_wilson(successes, samples)
    assert (float(low), float(high)) == pytest.approx(literal, abs=1e-12)
    assert 0.0 <= low <= successes / samples <= high <= 1.0
    assert (low == 0.0) == (successes == 0) and (high == 1.0) == (successes == samples)


def test_arrays_and_refusals():
    low, high = wilson_interval(np.array([[0, 3], [10, 7]]), 10)
    assert low.shape == high.shape == (2, 2)
    assert high[0, 0] == pytest.approx(literal_wilson(0, 10)[1])
    for bad in (-1, 11, 2.5):
        with pytest.raises(ValueError, match="successes"):
            wilson_interval(bad, 10)
    with pytest.raises(ValueError, match="samples"):
        wilson_interval(0, 0)


def test_a_summary_has_an_interval_for_every_probability():
    counts = robustness.Counts(
        samples=1000,
        ranks=np.array([[1000, 0], [0, 1000]]),
        pairwise=np.array([[0, 1000], [0, 0]]),
        pairwise_candidates=np.array([0, 1]),
        central_weights=np.zeros((2, 1), dtype=np.int64),
    )
    result = robustness.summary(counts)
    assert result.best_se.tolist() == [0.0, 0.0]  # what the page showed: "0 ± 0"
    assert result.best_low.tolist() == [pytest.approx(literal_wilson(1000, 1000)[0]), 0.0]
    assert result.best_high.tolist() == [1.0, pytest.approx(0.003827, abs=5e-7)]
    assert result.rank_acceptability_high[1, 0] == result.best_high[1]
    assert result.pairwise_high[1, 0] == pytest.approx(0.003827, abs=5e-7)
    assert result.pairwise_low[0, 1] == pytest.approx(literal_wilson(1000, 1000)[0])


def test_the_stored_summary_keeps_the_intervals_as_numbers(run):
    analysis = analyses.analysis_launch(
        run=run,
        kind="monte_carlo",
        launched_by=None,
        samples=300,
        seed=5,
        spec={"judgments": True, "peer_weights": True, "ranges_percent": 0, "measurements": False},
    )
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    summary = analysis.result["summary"]
    for row in summary["candidates"]:
        successes = round(row["p_best"] * 300)
        assert row["wilson_best"] == pytest.approx(list(literal_wilson(successes, 300)), abs=1e-12)
        assert len(row["wilson_ranks"]) == len(row["ranks"])
        for share, interval in zip(row["ranks"], row["wilson_ranks"], strict=True):
            assert interval == pytest.approx(list(literal_wilson(round(share * 300), 300)), abs=1e-12)
    never = [row for row in summary["candidates"] if row["p_best"] == 0]
    assert never, "the vetoed candidates are never best"
    assert never[0]["wilson_best"] == [0.0, pytest.approx(literal_wilson(0, 300)[1])]
    pairwise = summary["pairwise"]
    for probabilities, lows, highs in zip(
        pairwise["probabilities"], pairwise["wilson_low"], pairwise["wilson_high"], strict=True
    ):
        for p, low, high in zip(probabilities, lows, highs, strict=True):
            assert [low, high] == pytest.approx(list(literal_wilson(round(p * 300), 300)), abs=1e-12)
    # numbers only: the words are written when shown
    assert not any(isinstance(value, str) for row in summary["candidates"] for value in row["wilson_best"])
    best = summary["candidates"][0]
    low, high = best["wilson_best"]
    assert f"(95 %: {100 * low:.1f}–{100 * high:.1f} %)" in monte_carlo_sentence(summary)
