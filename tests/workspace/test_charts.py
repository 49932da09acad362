"""Server-drawn charts (workspace.charts): scales and ticks, bar and dot
geometry, heat shades, and the SVG the templates write from them."""

import math
import re

import pytest
from django.template.loader import render_to_string
from hypothesis import given
from hypothesis import strategies as st

from workspace import charts

SERIES = [charts.Series("CEF", "solid"), charts.Series("Weighted", "hatched")]


# Axes here span scores, weights and times: ranges far wider than any float
# rounding at their ends.
@given(st.floats(-1e3, 1e3), st.floats(1e-3, 1e3), st.integers(2, 10))
def test_nice_ticks_cover_the_range_with_a_round_step(low, width, count):
    high = low + width
    ticks = charts.nice_ticks(low, high, count)
    assert ticks == sorted(ticks)
    assert all(low - 1e-9 * width <= t <= high + 1e-9 * width for t in ticks)
    if len(ticks) > 1:
        step = ticks[1] - ticks[0]
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5, 10))
        # about `count` ticks: never more than twice as many
        assert len(ticks) <= 2 * count + 1


def test_nice_ticks_of_the_unit_interval():
    assert charts.nice_ticks(0, 1, 5) == [0, 0.25, 0.5, 0.75, 1]
    assert charts.nice_ceiling(0.3681 * 1.05) == 0.5
    assert charts.nice_ceiling(0.63) == 1
    assert charts.nice_ceiling(0) == 1


def test_scale_maps_and_clamps():
    scale = charts.LinearScale(0, 1, 100, 500)
    assert scale(0) == 100 and scale(1) == 500 and scale(0.25) == 200
    assert scale(-3) == 100 and scale(7) == 500


@given(
    st.floats(-10, 10),
    st.floats(0, 10),
    st.floats(0, 700),
    st.floats(0, 700),
    st.lists(st.floats(-20, 20) | st.just(math.nan), max_size=40),
)
def test_a_scale_maps_many_values_as_it_maps_each(low, width, start, end, values):
    scale = charts.LinearScale(low, low + width, start, end)
    many = scale.many(values)
    assert [repr(x) for x in many] == [repr(scale(v)) for v in values]  # repr: nan equals nan, 0.0 is not -0.0
    assert all(type(x) is float for x in many)


def chart(values, **options):
    return charts.bar_chart(
        chart_id="c",
        title="Scores",
        description="Two series",
        labels=[f"Candidate {i}" for i in range(len(values[0]))],
        series=SERIES,
        values=values,
        **options,
    )


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30))
def test_bar_lengths_are_proportional_to_the_values(pairs):
    cef, weighted = [p[0] for p in pairs], [p[1] for p in pairs]
    drawn = chart([cef, weighted])
    span = drawn.frame.plot_right - drawn.frame.plot_left
    for row, values in zip(drawn.rows, pairs, strict=True):
        for bar, value in zip(row.bars, values, strict=True):
            assert bar.x == drawn.frame.plot_left
            assert bar.width == pytest.approx(value * span, abs=0.02)
            assert bar.value_label == f"{value:.4f}"
    # rows never overlap and stay inside the drawing
    tops = [row.bars[0].y for row in drawn.rows]
    assert all(b - a >= 2 * charts.BAR_HEIGHT for a, b in zip(tops, tops[1:], strict=False))
    assert drawn.rows[-1].bars[-1].y + charts.BAR_HEIGHT <= drawn.frame.plot_bottom <= drawn.frame.height


def test_long_labels_are_shortened_but_kept_whole_in_the_title():
    name = "A candidate with a very long descriptive name indeed"
    drawn = charts.bar_chart(chart_id="c", title="t", description="d", labels=[name], series=SERIES[:1], values=[[0.5]])
    assert drawn.rows[0].short_label.endswith("…") and len(drawn.rows[0].short_label) <= charts.LABEL_CHARS
    assert drawn.rows[0].label == name
    assert drawn.frame.plot_left == charts.LABEL_MAX


def test_bar_chart_svg_has_its_text_alternative_patterns_and_no_inline_style():
    drawn = chart([[0.4647, 0.0], [0.4647, 0.5772]], notes=["", "vetoed"], reference=(0.25, "equal share"))
    svg = render_to_string("charts/bars.html", {"chart": drawn})
    assert 'role="img" aria-labelledby="c-title c-desc"' in svg
    assert '<title id="c-title">Scores</title>' in svg and '<desc id="c-desc">Two series</desc>' in svg
    assert svg.count('fill="url(#c-hatch)"') == 3  # the legend's swatch and one bar per row
    assert "style=" not in svg  # the Content-Security-Policy allows no inline style
    assert "0.5772 · vetoed" in svg and "equal share" in svg
    widths = [float(w) for w in re.findall(r'class="bar bar--solid" x="[^"]+" y="[^"]+" width="([^"]+)"', svg)]
    legend, first, vetoed = widths
    assert legend == 14 and first > 0 and vetoed == 0.0  # the vetoed candidate's CEF bar is empty


def test_dot_plot_places_each_expert_and_the_consensus():
    drawn = charts.dot_plot(
        chart_id="w",
        title="Weights",
        description="d",
        labels=["Accuracy", "Consistency"],
        individual=[[("bob", 0.6), ("carol", 0.4)], [("bob", 0.4), ("carol", 0.6)]],
        group=[0.55, 0.45],
        dot_legend="an expert's weight",
        marker_legend="consensus",
    )
    accuracy = drawn.rows[0]
    scale = charts.LinearScale(0, 1, drawn.frame.plot_left, drawn.frame.plot_right)
    assert [dot.x for dot in accuracy.dots] == [scale(0.6), scale(0.4)]
    assert accuracy.spread_from == scale(0.4) and accuracy.spread_to == scale(0.6)
    assert accuracy.marker_x == scale(0.55) and accuracy.marker_label == "0.55"
    assert [dot.label for dot in accuracy.dots] == ["bob: 0.60", "carol: 0.40"]
    svg = render_to_string("charts/dots.html", {"chart": drawn})
    assert svg.count("<circle") == 5 and "<title>carol: 0.60</title>" in svg and "style=" not in svg


@pytest.mark.parametrize(("score", "step"), [(0, 0), (0.04, 0), (0.05, 0), (0.06, 1), (0.5, 5), (0.96, 10), (1, 10)])
def test_heat_steps(score, step):
    assert charts.heat_step(score) == step


def test_log_scale_places_powers_of_ten_evenly():
    scale = charts.LogScale(1e-4, 1e4, 0, 800)
    assert [scale(10.0**e) for e in (-4, 0, 4)] == [0, 400, 800]
    assert scale(1e-9) == 0 and scale(1e9) == 800  # clamped
    # nine powers of ten for about seven ticks: every other one
    assert [(t.label, t.position) for t in scale.ticks()] == [
        ("1e-4", 0),
        ("0.01", 200),
        ("1", 400),
        ("100", 600),
        ("1e4", 800),
    ]


def test_line_chart_points_shade_and_diagonal():
    drawn = charts.line_chart(
        chart_id="roc",
        title="ROC curve",
        description="d",
        lines=[("J48", "solid", [0, 0.5, 1], [0, 0.8, 1], True)],
        x_range=(0, 1),
        y_range=(0, 1),
        x_label="False positive rate",
        y_label="True positive rate",
        diagonal=True,
        shade=(0, 0.25, "band"),
    )
    frame = drawn.frame
    (line,) = drawn.lines
    x = charts.LinearScale(0, 1, frame.plot_left, frame.plot_right)
    y = charts.LinearScale(0, 1, frame.plot_bottom, frame.plot_top)
    assert line.points == f"{x(0)},{y(0)} {x(0.5)},{y(0.8)} {x(1)},{y(1)}"
    assert [(p.x, p.y, p.label) for p in line.markers][1] == (x(0.5), y(0.8), "0.5, 0.8")
    assert drawn.diagonal == (frame.plot_left, frame.plot_bottom, frame.plot_right, frame.plot_top)
    assert drawn.shade.x == x(0) and drawn.shade.width == x(0.25) - x(0)
    svg = render_to_string("charts/lines.html", {"chart": drawn})
    assert "<polyline" in svg and "False positive rate" in svg and "style=" not in svg
    assert svg.count("<circle") == 3 and 'class="chart__diagonal"' in svg


# --- the ranges step's binned strip -------------------------------------------------------


def test_strip_bins_count_each_value_in_its_bin_the_high_end_in_the_last():
    values = [0.0, 0.05, 0.1, 0.5, 0.99, 1.0]
    vetoed = [True, True, False, False, False, True]
    counts, vetoes = charts.strip_bin_counts(values, vetoed, 0.0, 1.0, 10)
    # floor(v * 10): 0, 0, 1, 5, 9, and 1.0 (the high end) in the last bin
    assert counts == [2, 1, 0, 0, 0, 1, 0, 0, 0, 2]
    assert vetoes == [2, 0, 0, 0, 0, 0, 0, 0, 0, 1]


@given(st.lists(st.floats(-50, 50), min_size=1, max_size=200), st.integers(1, 60))
def test_strip_bins_equal_a_literal_count(values, bins):
    vetoed = [i % 3 == 0 for i in range(len(values))]
    low, high = min(values), max(values)
    counts, vetoes = charts.strip_bin_counts(values, vetoed, low, high, bins)
    span = (high - low) or 1.0
    literal, literal_vetoes = [0] * bins, [0] * bins
    for value, veto in zip(values, vetoed, strict=True):
        index = min(max(math.floor((value - low) / span * bins), 0), bins - 1)
        literal[index] += 1
        literal_vetoes[index] += veto
    assert counts == literal and vetoes == literal_vetoes
    assert sum(counts) == len(values)


def test_range_strip_marks_each_candidate_or_bins_them():
    values, vetoed = [0.2, 0.5, 0.9], [True, False, False]
    marked = charts.range_strip(least=0.3, desired=0.8, values=values, vetoed=vetoed, names=["a", "b", "c"], bins=4)
    assert not marked["binned"] and [(m["name"], m["vetoed"]) for m in marked["marks"]] == [
        ("a", True),
        ("b", False),
        ("c", False),
    ]
    assert marked["least_x"] < marked["desired_x"]
    binned = charts.range_strip(least=0.3, desired=0.8, values=values, vetoed=vetoed, names=None, bins=4)
    assert binned["binned"] and binned["marks"] == []
    # axis from 0.2 to 0.9 in 4 bins of 0.175: 0.2 -> 0, 0.5 -> 1, 0.9 -> 3 (the high end)
    assert [(b.measured, b.vetoed) for b in binned["bins"]] == [(1, 1), (1, 0), (1, 0)]
    assert [round(b.low, 3) for b in binned["bins"]] == [0.2, 0.375, 0.725]
    tallest = binned["bins"][0]
    assert tallest.y == charts.STRIP_BAR_TOP and tallest.accepted_height == 0
    assert tallest.vetoed_height == charts.STRIP_BAR_BOTTOM - charts.STRIP_BAR_TOP


def test_a_line_chart_over_rounds_ticks_whole_numbers_only():
    from workspace import charts

    chart = charts.line_chart(
        chart_id="c",
        title="t",
        description="d",
        lines=[("S*", "solid", [1, 2], [0.6, 0.9], True)],
        x_range=(0.5, 2.5),
        y_range=(0.0, 1.0),
        x_label="Round",
        y_label="Value",
        x_whole=True,
    )
    assert [tick.label for tick in chart.frame.ticks] == ["1", "2"]
    assert charts._whole_ticks((0.5, 40.5)) == list(range(1, 41, 4))


def test_a_box_plot_places_quartiles_median_and_ones_own_answer():
    from workspace import charts

    plot = charts.box_plot(
        chart_id="b", title="t", description="d", rows=[("Accuracy", (0.25, 0.5, 0.75), 0.1), ("Cost", None, None)]
    )
    left, right = plot.frame.plot_left, plot.frame.plot_right
    share = charts.LinearScale(0.0, 1.0, left, right)
    accuracy, cost = plot.rows
    assert accuracy.box == (share(0.25), share(0.75)) and accuracy.median == share(0.5)
    assert accuracy.own == share(0.1) and accuracy.box_width == round(share(0.75) - share(0.25), 2)
    assert (cost.box, cost.median, cost.own) == (None, None, None)
