"""Engine kernels of issue 19 (finding 4): the group scores batched over metrics.

engine.core._group_scores_at used to place each metric's candidates among its experts'
bounds with one np.searchsorted per metric (a Python loop over the metrics); it now
searches every metric at once (engine.core._counts_at_or_below). The loop is kept below,
verbatim, as the slow literal reference. Plain pytest, no Django."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import core
from engine.core import _HUGE, _ILL_CONDITIONED, _group_scores_direct


def _group_scores_at_by_metric_loop(
    influence: np.ndarray, lower: np.ndarray, upper: np.ndarray, measurements: np.ndarray
) -> np.ndarray:
    """``g = pi M̄`` for every candidate without the (m, k, n) tensor.

    For metric j, expert i contributes ``pi_i`` times a clamped ramp of the
    measured value x: constant below ``start = min(b^l, b^u)``, linear
    ``pi_i (x - b^l) / (b^u - b^l)`` on [start, end), constant from
    ``end = max(b^l, b^u)`` on (0 then 1 for an increasing range, 1 then 0
    for a decreasing one). The sum is piecewise linear with the 2k bounds as
    breakpoints. Per metric the starts and the ends are sorted once, prefix
    sums are taken over each, and a candidate's position among them is found
    by binary search (``searchsorted``):

    * constants before the ramps: ``pi_i`` of the decreasing experts whose
      start is above x (suffix sums over the sorted starts);
    * constants after the ramps: ``pi_i`` of the increasing experts whose
      end is at or below x (prefix sums over the sorted ends);
    * ramps in progress (started, not ended): ``slope * x + offset`` with
      ``slope = sum pi_i / (b^u - b^l)``, ``offset = -sum pi_i b^l /
      (b^u - b^l)``, the sums over started experts minus those over ended
      ones (every ended expert has started, as start < end).

    Sums of non-negative constants never cancel, and where no ramp is in
    progress (an exact integer count) the linear part is exactly 0, so a
    candidate beyond every range scores exactly what the literal formula
    gives. O((m + k) n log k) time, O((m + k) n) memory.
    """
    k, n = lower.shape
    # Metric-major (n, k) layout: each metric's experts are contiguous, which
    # makes the per-metric sorts and binary searches cache-friendly.
    lower = np.ascontiguousarray(lower.T)
    upper = np.ascontiguousarray(upper.T)
    increasing = upper > lower
    start = np.minimum(lower, upper)
    end = np.maximum(lower, upper)
    # Shifting each metric to the middle of its breakpoints keeps the ramp
    # offsets (-slope * b^l) of the order of the ranges, so measurements far
    # from zero (timestamps, sizes) do not cancel catastrophically.
    # Bounds and values near the largest double can overflow in the shifted
    # sums below; such metrics are recomputed by the direct formula.
    with np.errstate(over="ignore", invalid="ignore"):
        # Halves first: the sum of two bounds near the largest double overflows.
        centre = (0.5 * start.min(axis=1) + 0.5 * end.max(axis=1))[:, None]
        start -= centre
        end -= centre
        measured = np.ascontiguousarray(measurements.T) - centre  # (n, m)

        weight = np.broadcast_to(influence[None, :], (n, k))
        ramp_slope = weight / (upper - lower)  # negative for decreasing ranges
        ramp_offset = -ramp_slope * (lower - centre)
        zeros = np.zeros((n, 1))

        def prefix_sums(values: np.ndarray, order: np.ndarray) -> np.ndarray:
            sorted_values = np.take_along_axis(values, order, axis=1)
            return np.concatenate([zeros, np.cumsum(sorted_values, axis=1)], axis=1)

        start_order = np.argsort(start, axis=1)
        sorted_starts = np.take_along_axis(start, start_order, axis=1)
        before = np.take_along_axis(np.where(increasing, 0.0, weight), start_order, axis=1)
        # Per metric and number of experts started, in one table so that a
        # single gather fetches all three: the constants of the experts not yet
        # started (suffix sums, accumulated from the right so that past the last
        # decreasing expert they are exactly 0), and the slope and offset sums of
        # the started ramps.
        by_started = np.stack(
            [
                np.concatenate([np.cumsum(before[:, ::-1], axis=1)[:, ::-1], zeros], axis=1),
                prefix_sums(ramp_slope, start_order),
                prefix_sums(ramp_offset, start_order),
            ],
            axis=-1,
        )  # (n, k + 1, 3)

        end_order = np.argsort(end, axis=1)
        sorted_ends = np.take_along_axis(end, end_order, axis=1)
        # Per metric and number of experts ended: constants of the ended
        # experts, and the slope and offset sums of the ended ramps.
        by_ended = np.stack(
            [
                prefix_sums(np.where(increasing, weight, 0.0), end_order),
                prefix_sums(ramp_slope, end_order),
                prefix_sums(ramp_offset, end_order),
            ],
            axis=-1,
        )  # (n, k + 1, 3)

        started = np.empty(measured.shape, dtype=np.intp)
        ended = np.empty(measured.shape, dtype=np.intp)
        for metric in range(n):
            # side="right": an expert whose start equals x is on its ramp, one
            # whose end equals x has left it; g is continuous, so this only
            # decides which sums carry the (equal) value.
            started[metric] = np.searchsorted(sorted_starts[metric], measured[metric], side="right")
            ended[metric] = np.searchsorted(sorted_ends[metric], measured[metric], side="right")
        metric_rows = np.arange(n)[:, None]
        at_start = by_started[metric_rows, started]  # (n, m, 3)
        at_end = by_ended[metric_rows, ended]
        ramps = (at_start[..., 1] - at_end[..., 1]) * measured + (at_start[..., 2] - at_end[..., 2])
        group_scores = at_start[..., 0] + at_end[..., 0] + np.where(started > ended, ramps, 0.0)

    # The ramp sums cancel: their rounding error is about eps times
    # sum_i pi_i (|x - c| + |b^l_i - c|) / |b^u_i - b^l_i|, which is large when
    # narrow ranges lie far apart or bounds reach the limits of a double.
    # Such metrics are scored by the direct formula instead (O(m k) each).
    width = np.abs(upper - lower)
    with np.errstate(over="ignore", invalid="ignore"):
        reach = np.abs(measured).max(axis=1, initial=0.0)[:, None] + np.abs(lower - centre)
        condition = (weight * reach / width).sum(axis=1)
    unreliable = ~(condition <= _ILL_CONDITIONED) | (width.max(axis=1) > _HUGE) | ~np.isfinite(group_scores).all(axis=1)
    for metric in np.flatnonzero(unreliable).tolist():
        group_scores[metric] = _group_scores_direct(influence, lower[metric], upper[metric], measurements[:, metric])
    # The exact g lies in [0, 1]; clipping only removes rounding overshoot.
    return np.clip(group_scores.T, 0.0, 1.0)


@st.composite
def ranges_and_measurements(draw):
    """Bounds and values on a coarse grid, so that many measured values equal a bound
    (the ties the search must count as the loop did), both directions, and wide scales."""
    k = draw(st.integers(1, 12))
    n = draw(st.integers(1, 6))
    m = draw(st.integers(0, 30))
    scale = draw(st.sampled_from([1e-6, 1.0, 1e3, 1e9]))
    grid = st.integers(-8, 8).map(float)
    lower = np.array(draw(st.lists(grid, min_size=k * n, max_size=k * n))).reshape(k, n)
    shift = np.array(draw(st.lists(st.integers(1, 6).map(float), min_size=k * n, max_size=k * n))).reshape(k, n)
    direction = np.array(draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=k * n, max_size=k * n))).reshape(k, n)
    upper = lower + direction * shift
    measured = np.array(draw(st.lists(grid, min_size=m * n, max_size=m * n))).reshape(m, n)
    influence = np.array(draw(st.lists(st.floats(0.01, 1.0), min_size=k, max_size=k)))
    return influence / influence.sum(), lower * scale, upper * scale, measured * scale


@settings(max_examples=300, deadline=None)
@given(ranges_and_measurements())
def test_group_scores_batched_over_metrics_equal_the_loop(case):
    influence, lower, upper, measured = case
    batched = core._group_scores_at(influence, lower, upper, measured)
    looped = _group_scores_at_by_metric_loop(influence, lower, upper, measured)
    assert batched.shape == looped.shape == measured.shape
    np.testing.assert_allclose(batched, looped, rtol=0, atol=1e-12)


def test_group_scores_at_scale_equal_the_loop():
    rng = np.random.default_rng(19)
    k, n, m = 300, 20, 1000
    lower = rng.uniform(-5, 5, size=(k, n))
    upper = lower + rng.choice([-1, 1], size=(k, n)) * rng.uniform(0.1, 3, size=(k, n))
    measured = rng.uniform(-8, 8, size=(m, n))
    measured[:50] = lower[rng.integers(0, k, 50), 0][:, None]  # values exactly at a bound
    influence = rng.uniform(0.1, 1, size=k)
    influence /= influence.sum()
    np.testing.assert_allclose(
        core._group_scores_at(influence, lower, upper, measured),
        _group_scores_at_by_metric_loop(influence, lower, upper, measured),
        rtol=0,
        atol=1e-12,
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40),
    st.lists(st.floats(-1e6, 1e6) | st.sampled_from([0.0, 1.0, -1.0]), min_size=0, max_size=40),
    st.integers(1, 4),
)
def test_counts_at_or_below_are_searchsorted_right_per_row(entries, values, rows):
    sorted_rows = np.sort(np.array([np.roll(entries, r) for r in range(rows)]), axis=1)
    queries = np.array([np.array(values + entries[:3]) * (r + 1) for r in range(rows)])
    expected = np.array(
        [np.searchsorted(row, query, side="right") for row, query in zip(sorted_rows, queries, strict=True)]
    )
    np.testing.assert_array_equal(core._counts_at_or_below(sorted_rows, queries), expected)
