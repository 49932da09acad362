"""Charts drawn on the server: the geometry of each chart as plain data,
which the templates under ``templates/charts/`` write out as inline SVG.

No JavaScript and no charting library: a chart is numbers placed on a
scale, so it renders identically in every browser, in print and with
scripts off. Every chart carries a title and a text alternative (its
``<title>`` and ``<desc>``), its page shows the numbers in a table beside
it, and series differ by shape and fill pattern as well as by colour so
the chart reads in grey-scale. Colours are left to the stylesheet (the
templates set only classes; the Content-Security-Policy allows no inline
style).

Coordinates are SVG user units of a fixed-width viewBox; the stylesheet
scales the drawing to its container.
"""

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

WIDTH = 640
FONT_WIDTH = 6.6  # mean advance of a 12-unit sans-serif character, for label space
LABEL_MIN, LABEL_MAX = 72, 200
LABEL_CHARS = 30  # longer labels are shortened with "…" (the full text is in the row's <title>)


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class LinearScale:
    """Maps ``[low, high]`` onto ``[start, end]`` in user units."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        if self.high == self.low:
            return self.start
        clamped = min(max(value, self.low), self.high)
        return round(self.start + (clamped - self.low) / (self.high - self.low) * (self.end - self.start), 2)

    def many(self, values: Sequence[float]) -> list[float]:
        """``[self(v) for v in values]``, the arithmetic done by NumPy in the
        same order (so the same floats), the rounding by Python's ``round``."""
        if self.high == self.low:
            return [self.start] * len(values)
        clamped = np.clip(np.asarray(values, dtype=float), self.low, self.high)
        raw = self.start + (clamped - self.low) / (self.high - self.low) * (self.end - self.start)
        return [round(x, 2) for x in raw.tolist()]

    def ticks(self, count: int = 5, *, percent: bool = False) -> list[Tick]:
        return [
            Tick(self(value), tick_label(value, percent=percent)) for value in nice_ticks(self.low, self.high, count)
        ]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values covering ``[low, high]``, about ``count`` of them, at a
    step of 1, 2, 2.5 or 5 times a power of ten."""
    if high <= low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw - 1e-12)
    first = math.ceil(low / step - 1e-9) * step
    values = []
    value = first
    while value <= high + step * 1e-9:
        values.append(round(value, 12))
        value += step
    return values


def tick_label(value: float, *, percent: bool = False) -> str:
    if percent:
        return f"{value * 100:g} %"
    return f"{value:g}"


def nice_ceiling(value: float) -> float:
    """The smallest round number (1, 2, 2.5 or 5 times a power of ten) not
    below ``value``: the end of an axis that shows ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value - 1e-12)


def shorten(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def label_space(labels: Sequence[str]) -> float:
    longest = max((len(shorten(label)) for label in labels), default=0)
    return min(max(longest * FONT_WIDTH + 14, LABEL_MIN), LABEL_MAX)


@dataclass(frozen=True)
class Frame:
    """What every chart has: its text alternative (``title`` and
    ``description``), its size, the plot area and the value axis's ticks."""

    chart_id: str
    title: str
    description: str
    height: float
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float
    ticks: list[Tick]
    width: float = WIDTH
    # Line charts also have a vertical value axis, and both axes a name.
    y_ticks: list[Tick] = field(default_factory=list)
    x_label: str = ""
    y_label: str = ""

    @property
    def tick_label_y(self) -> float:
        return self.plot_bottom + 16

    @property
    def x_label_x(self) -> float:
        return round((self.plot_left + self.plot_right) / 2, 2)

    @property
    def x_label_y(self) -> float:
        return self.plot_bottom + 36

    @property
    def y_label_y(self) -> float:
        return round((self.plot_top + self.plot_bottom) / 2, 2)


# --- horizontal bars ---------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    """One kind of bar: its name in the legend and a CSS modifier that sets
    its fill and pattern (``bar--<style>`` in the stylesheet)."""

    name: str
    style: str


@dataclass(frozen=True)
class LegendItem:
    series: Series
    x: float
    text_x: float

    @property
    def swatch_end(self) -> float:
        return self.x + LEGEND_SWATCH

    @property
    def swatch_middle(self) -> float:
        return self.x + LEGEND_SWATCH / 2


@dataclass(frozen=True)
class HeatCell:
    """One expert's score of one metric in a candidate's heat table."""

    score: float
    step: int
    vetoed: bool
    range_text: str


@dataclass(frozen=True)
class Bar:
    series: Series
    x: float
    y: float
    width: float
    height: float
    value_label: str
    label_x: float
    label_y: float


@dataclass(frozen=True)
class BarRow:
    label: str
    short_label: str
    y: float  # the label's baseline
    bars: list[Bar]
    note: str = ""  # e.g. "vetoed", drawn after the values


@dataclass(frozen=True)
class ReferenceLine:
    x: float
    label: str


@dataclass
class BarChart:
    frame: Frame
    rows: list[BarRow]
    legend: list[LegendItem]
    reference: ReferenceLine | None = None


BAR_HEIGHT = 12
BAR_GAP = 2
ROW_GAP = 12
TOP = 34  # room for the legend
AXIS_SPACE = 26


def bar_chart(
    *,
    chart_id: str,
    title: str,
    description: str,
    labels: Sequence[str],
    series: Sequence[Series],
    values: Sequence[Sequence[float]],
    high: float = 1.0,
    value_format: str = "{:.4f}",
    notes: Sequence[str] | None = None,
    reference: tuple[float, str] | None = None,
    percent_axis: bool = False,
) -> BarChart:
    """Horizontal bars, one group per label and one bar per series in it:
    ``values[s][r]`` is series ``s`` of row ``r``, on an axis from 0 to
    ``high``. ``notes[r]`` is written after row ``r``'s values;
    ``reference`` draws a dashed line at a value, with its label."""
    left = label_space(labels)
    right_room = 92 if notes and any(notes) else 58
    plot_right = WIDTH - right_room
    scale = LinearScale(0.0, high, left, plot_right)
    group = len(series) * BAR_HEIGHT + (len(series) - 1) * BAR_GAP
    rows = []
    for r, label in enumerate(labels):
        top = TOP + r * (group + ROW_GAP)
        bars = []
        for s, kind in enumerate(series):
            value = values[s][r]
            y = top + s * (BAR_HEIGHT + BAR_GAP)
            end = scale(value)
            bars.append(
                Bar(
                    series=kind,
                    x=left,
                    y=y,
                    width=round(max(end - left, 0.0), 2),
                    height=BAR_HEIGHT,
                    value_label=value_format.format(value),
                    label_x=round(end + 4, 2),
                    label_y=y + BAR_HEIGHT - 2,
                )
            )
        rows.append(
            BarRow(
                label=label,
                short_label=shorten(label),
                y=round(top + group / 2 + 4, 2),
                bars=bars,
                note=notes[r] if notes else "",
            )
        )
    bottom = TOP + len(labels) * (group + ROW_GAP) - ROW_GAP + 6
    # A reference line's label sits under the tick labels.
    below = AXIS_SPACE + (14 if reference else 0)
    frame = Frame(
        chart_id=chart_id,
        title=title,
        description=description,
        height=bottom + below,
        plot_left=left,
        plot_right=plot_right,
        plot_top=TOP - 6,
        plot_bottom=bottom,
        ticks=scale.ticks(percent=percent_axis),
    )
    reference_line = ReferenceLine(scale(reference[0]), reference[1]) if reference else None
    return BarChart(frame=frame, rows=rows, legend=legend_items(series, left), reference=reference_line)


LEGEND_SWATCH = 14
LEGEND_LEFT = 8  # where a legend too wide for the plot's width starts instead


def legend_items(series: Sequence[Series], left: float) -> list[LegendItem]:
    """The legend's swatches in a row above the plot, each followed by its name."""
    items, x = [], left
    for kind in series:
        items.append(LegendItem(kind, x, x + LEGEND_SWATCH + 6))
        x += LEGEND_SWATCH + 6 + len(kind.name) * FONT_WIDTH + 24
    return items


# --- dot plots: each expert's value beside the group's -----------------------------------


class Dot(NamedTuple):
    """One expert's dot (a named tuple: a hundred experts' dots per row are
    built a tenth faster than a frozen dataclass's)."""

    x: float
    label: str  # "statistician: 0.63", the dot's <title>


@dataclass(frozen=True)
class DotRow:
    label: str
    short_label: str
    y: float
    dots: list[Dot]
    spread_from: float
    spread_to: float
    marker_x: float
    marker_label: str


@dataclass
class DotPlot:
    frame: Frame
    rows: list[DotRow]
    dot_legend: str
    dot_legend_x: float
    marker_legend: str
    marker_legend_x: float


DOT_ROW = 30


def dot_plot(
    *,
    chart_id: str,
    title: str,
    description: str,
    labels: Sequence[str],
    individual: Sequence[Sequence[tuple[str, float]]],
    group: Sequence[float],
    dot_legend: str,
    marker_legend: str,
    value_format: str = "{:.2f}",
    percent_axis: bool = False,
) -> DotPlot:
    """One row per label: a hollow dot for each ``(name, value)`` of
    ``individual[r]``, a line over their range, and a filled diamond at
    ``group[r]`` (shapes, not colours, tell them apart). The axis runs from
    0 to a round number above every value."""
    left = label_space(labels)
    plot_right = WIDTH - 56
    highest = max([value for row in individual for _, value in row] + list(group) + [0.0])
    scale = LinearScale(0.0, nice_ceiling(highest), left, plot_right)
    rows = []
    shown = value_format.format
    for r, label in enumerate(labels):
        values = [value for _, value in individual[r]]
        xs = scale.many(values)  # a hundred experts' dots per row
        rows.append(
            DotRow(
                label=label,
                short_label=shorten(label),
                y=TOP + r * DOT_ROW + DOT_ROW / 2,
                dots=[Dot(x, f"{name}: {shown(value)}") for x, (name, value) in zip(xs, individual[r], strict=True)],
                spread_from=scale(min(values, default=0.0)),
                spread_to=scale(max(values, default=0.0)),
                marker_x=scale(group[r]),
                marker_label=value_format.format(group[r]),
            )
        )
    bottom = TOP + len(labels) * DOT_ROW
    frame = Frame(
        chart_id=chart_id,
        title=title,
        description=description,
        height=bottom + AXIS_SPACE,
        plot_left=left,
        plot_right=plot_right,
        plot_top=TOP - 4,
        plot_bottom=bottom,
        ticks=scale.ticks(percent=percent_axis),
    )
    return DotPlot(
        frame=frame,
        rows=rows,
        dot_legend=dot_legend,
        dot_legend_x=left + 7,
        marker_legend=marker_legend,
        marker_legend_x=left + 2 * LEGEND_SWATCH + len(dot_legend) * FONT_WIDTH + 24,
    )


# --- line charts: curves on two value axes ---------------------------------------------------


@dataclass(frozen=True)
class LogScale:
    """Maps ``[low, high]`` (both positive) onto ``[start, end]`` by their
    logarithms, for values spanning powers of ten (time ratios)."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        clamped = min(max(value, self.low), self.high)
        share = (math.log10(clamped) - math.log10(self.low)) / (math.log10(self.high) - math.log10(self.low))
        return round(self.start + share * (self.end - self.start), 2)

    def ticks(self, count: int = 7) -> list[Tick]:
        first, last = math.ceil(math.log10(self.low)), math.floor(math.log10(self.high))
        step = max(1, math.ceil((last - first + 1) / count))
        return [Tick(self(10.0**e), f"1e{e}" if abs(e) > 3 else f"{10.0**e:g}") for e in range(first, last + 1, step)]


@dataclass(frozen=True)
class MarkedPoint:
    x: float
    y: float
    label: str  # its coordinates, the dot's <title>


@dataclass(frozen=True)
class Line:
    """One curve: its name in the legend, a CSS modifier for its stroke
    (``line--<style>``: solid, dashed, dotted; ``points`` draws the points
    as dots with no line between them) and its points."""

    name: str
    style: str
    points: str  # "x,y x,y ..." for <polyline>
    markers: list[MarkedPoint]  # points drawn as dots too


@dataclass(frozen=True)
class Shade:
    """A band across the plot marking a range of x, with its label."""

    x: float
    width: float
    y: float
    height: float
    label: str


@dataclass
class LineChart:
    frame: Frame
    lines: list[Line]
    legend: list[LegendItem]
    shade: Shade | None = None
    diagonal: tuple[float, float, float, float] | None = None  # x1, y1, x2, y2


LINE_LEFT = 64
LINE_HEIGHT = 300


def line_chart(
    *,
    chart_id: str,
    title: str,
    description: str,
    lines: Sequence[tuple[str, str, Sequence[float], Sequence[float], bool]],
    x_range: tuple[float, float],
    y_range: tuple[float, float],
    x_label: str,
    y_label: str,
    x_log: bool = False,
    shade: tuple[float, float, str] | None = None,
    diagonal: bool = False,
    value_format: str = "{:.3g}",
    x_whole: bool = False,
) -> LineChart:
    """Curves over two value axes. ``lines``: ``(name, style, xs, ys,
    marked)``, ``marked`` drawing each point as a dot as well (with its
    coordinates in its title). ``x_log`` puts x on a logarithmic axis;
    ``shade`` marks the x range ``(from, to)`` with a label; ``diagonal``
    draws the line from the lower left to the upper right corner (the ROC
    curve of guessing); ``x_whole`` ticks x at whole numbers only (rounds)."""
    top, bottom = TOP, TOP + LINE_HEIGHT
    right = WIDTH - 24
    x_scale = (LogScale if x_log else LinearScale)(x_range[0], x_range[1], LINE_LEFT, right)
    y_scale = LinearScale(y_range[0], y_range[1], bottom, top)
    drawn = []
    for name, style, xs, ys, marked in lines:
        coordinates = [(x_scale(x), y_scale(y)) for x, y in zip(xs, ys, strict=True)]
        markers = [
            MarkedPoint(px, py, f"{value_format.format(x)}, {value_format.format(y)}")
            for (px, py), x, y in zip(coordinates, xs, ys, strict=True)
        ]
        drawn.append(
            Line(
                name=name,
                style=style,
                points=" ".join(f"{x},{y}" for x, y in coordinates),
                markers=markers if marked else [],
            )
        )
    band = None
    if shade:
        start, end = x_scale(shade[0]), x_scale(shade[1])
        band = Shade(x=start, width=round(max(end - start, 0), 2), y=top, height=bottom - top, label=shade[2])
    frame = Frame(
        chart_id=chart_id,
        title=title,
        description=description,
        height=bottom + 46,
        plot_left=LINE_LEFT,
        plot_right=right,
        plot_top=top,
        plot_bottom=bottom,
        ticks=[Tick(x_scale(v), str(v)) for v in _whole_ticks(x_range)] if x_whole else x_scale.ticks(),
        y_ticks=[Tick(y_scale(v), tick_label(v)) for v in nice_ticks(y_range[0], y_range[1], 5)],
        x_label=x_label,
        y_label=y_label,
    )
    corner = (LINE_LEFT, bottom, right, top) if diagonal else None
    legend = legend_items([Series(line.name, line.style) for line in drawn], LINE_LEFT)
    return LineChart(frame=frame, lines=drawn, legend=legend, shade=band, diagonal=corner)


def _whole_ticks(x_range: tuple[float, float], count: int = 10) -> list[int]:
    """Whole numbers across ``x_range``, about ``count`` of them at most."""
    first, last = math.ceil(x_range[0]), math.floor(x_range[1])
    step = max(1, math.ceil((last - first + 1) / count))
    return list(range(first, last + 1, step))


# --- heat tables ----------------------------------------------------------------------

HEAT_STEPS = 10


def heat_step(score: float) -> int:
    """The shade class (0..10) of a score in [0, 1]: ``heat--<step>`` in the
    stylesheet, a single-hue scale whose lightness falls with the score so
    it reads in grey-scale too. The number is always printed in the cell."""
    return min(max(round(score * HEAT_STEPS), 0), HEAT_STEPS)


# --- the ranges step's strip ----------------------------------------------------------

STRIP_WIDTH, STRIP_PAD = 520, 40
STRIP_BAR_TOP, STRIP_BAR_BOTTOM = 18, 50  # the binned strip's bars stand on y = 50


class StripBin(NamedTuple):
    """One bin of the binned strip: the ``measured`` candidates whose values
    are in ``[low, high)`` (the last bin includes its high end), ``vetoed``
    of them vetoed;
    the bar drawn from ``y`` down to the baseline, its vetoed part on top
    (``vetoed_height`` from ``y``), the accepted part under it (from
    ``accepted_y``, ``accepted_height``). A named tuple: the ranges step
    makes 40 for each of 20 metrics."""

    x: float
    width: float
    low: float
    high: float
    measured: int
    vetoed: int
    y: float
    vetoed_height: float
    accepted_y: float
    accepted_height: float


def strip_bin_counts(
    values: Sequence[float] | np.ndarray, vetoed: Sequence[bool] | np.ndarray, low: float, high: float, bins: int
) -> tuple[list[int], list[int]]:
    """How many of ``values`` fall in each of ``bins`` equal bins of ``[low,
    high]``, and how many of those are ``vetoed``: a value ``v`` goes to bin
    ``floor((v - low) / (high - low) * bins)``, the high end to the last."""
    span = (high - low) or 1.0
    measured = np.asarray(values, dtype=np.float64)
    index = np.clip(np.floor((measured - low) / span * bins), 0, bins - 1).astype(np.intp)
    counts = np.bincount(index, minlength=bins)
    vetoes = np.bincount(index[np.asarray(vetoed, dtype=bool)], minlength=bins)
    return counts.tolist(), vetoes.tolist()


@functools.cache
def _bin_columns(bins: int) -> tuple[list[float], float]:
    """Where each of ``bins`` bars of the binned strip starts, and their
    width: the same for every strip of that many bins."""
    width = (STRIP_WIDTH - 2 * STRIP_PAD) / bins
    return [round(STRIP_PAD + i * width, 1) for i in range(bins)], round(max(width - 1, 1), 1)


def range_strip(
    *,
    least: float,
    desired: float,
    values: Sequence[float] | np.ndarray,
    vetoed: Sequence[bool] | np.ndarray,
    names: Sequence[str] | None,
    bins: int,
) -> dict:
    """The geometry of the ranges step's SVG strip: the acceptable band
    between the two bounds on one axis from the smallest to the largest of
    them and the measured values; with ``names``, a mark per candidate
    (a cross when vetoed), without, ``bins`` bars of the candidates' counts,
    their vetoed part apart (the page's choice: limits.STRIP_MARKS_MAX)."""
    measured = np.asarray(values, dtype=np.float64)
    # min() and max() of the bounds and the values (the values' by NumPy: a
    # thousand of them per metric)
    low = min(least, desired, float(measured.min())) if measured.size else min(least, desired)
    high = max(least, desired, float(measured.max())) if measured.size else max(least, desired)
    span = (high - low) or 1.0
    inner = STRIP_WIDTH - 2 * STRIP_PAD

    def x(value: float) -> float:
        return round(STRIP_PAD + (value - low) / span * inner, 1)

    band = sorted((x(least), x(desired)))
    strip: dict = {
        "width": STRIP_WIDTH,
        "band_x": band[0],
        "band_width": max(band[1] - band[0], 1),
        "least_x": x(least),
        "desired_x": x(desired),
        "least": f"{least:g}",
        "desired": f"{desired:g}",
        "pad": STRIP_PAD,
        "axis_end": STRIP_WIDTH - STRIP_PAD,
        "low": f"{low:g}",
        "high": f"{high:g}",
        "binned": names is None,
        "marks": [],
        "bins": [],
    }
    if names is not None:
        strip["marks"] = [
            {"x": x(value), "vetoed": bool(veto), "name": name}
            for name, value, veto in zip(names, values, vetoed, strict=True)
        ]
        return strip
    counts, vetoes = strip_bin_counts(values, vetoed, low, high, bins)
    tallest = max(counts, default=0) or 1
    xs, bar_width = _bin_columns(bins)
    scale = (STRIP_BAR_BOTTOM - STRIP_BAR_TOP) / tallest
    edges = [low + i * span / bins for i in range(bins + 1)]
    for i, (count, veto) in enumerate(zip(counts, vetoes, strict=True)):
        if not count:
            continue
        top = round(STRIP_BAR_BOTTOM - count * scale, 1)
        vetoed_height = veto * scale
        strip["bins"].append(
            StripBin(
                xs[i],
                bar_width,
                edges[i],
                edges[i + 1],
                count,
                veto,
                top,
                round(vetoed_height, 1),
                round(top + vetoed_height, 1),
                round((count - veto) * scale, 1),
            )
        )
    strip["bin_count"] = bins
    strip["bar_bottom"] = STRIP_BAR_BOTTOM
    return strip


# --- stacked bars ---------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    part: int  # which part (its shade: ``stack--<part>``, darkest first)
    x: float
    width: float
    label: str  # "<part>: <percent>", the segment's <title>


@dataclass(frozen=True)
class StackedRow:
    label: str
    short_label: str
    y: float  # the bar's top
    text_y: float  # the label's baseline
    segments: list[Segment]


@dataclass
class StackedBarChart:
    frame: Frame
    rows: list[StackedRow]
    legend: list[LegendItem]
    bar_height: float = BAR_HEIGHT * 1.5


def stacked_bar_chart(
    *,
    chart_id: str,
    title: str,
    description: str,
    labels: Sequence[str],
    parts: Sequence[str],
    values: Sequence[Sequence[float]],
    rest_label: str | None,
) -> StackedBarChart:
    """One horizontal bar per label, from 0 to 1, split into ``parts``
    (``values[r][p]``, shares) and the rest (``rest_label``; None when the
    parts are all there is: no rest segment, no legend entry). Parts are
    shades of one hue from dark to light, with a thin white edge between
    them, so the order reads in grey-scale; every segment's share is in its
    title and the page's table. The legend starts at the plot's left edge,
    or at the chart's when it would not fit there."""
    left = label_space(labels)
    plot_right = WIDTH - 24
    scale = LinearScale(0.0, 1.0, left, plot_right)
    height = BAR_HEIGHT * 1.5
    rows = []
    for r, label in enumerate(labels):
        top = TOP + r * (height + ROW_GAP)
        segments, start = [], 0.0
        shares = [*values[r], max(1.0 - sum(values[r]), 0.0)] if rest_label else list(values[r])
        names = [*parts, rest_label] if rest_label else list(parts)
        for p, share in enumerate(shares):
            if share <= 0:
                start += share
                continue
            x0, x1 = scale(start), scale(start + share)
            segments.append(Segment(p, x0, round(max(x1 - x0, 0.0), 2), f"{names[p]}: {share * 100:.1f} %"))
            start += share
        rows.append(StackedRow(label, shorten(label), round(top, 2), round(top + height / 2 + 4, 2), segments))
    bottom = TOP + len(labels) * (height + ROW_GAP) - ROW_GAP + 6
    frame = Frame(
        chart_id=chart_id,
        title=title,
        description=description,
        height=bottom + AXIS_SPACE,
        plot_left=left,
        plot_right=plot_right,
        plot_top=TOP - 6,
        plot_bottom=bottom,
        ticks=scale.ticks(percent=True),
    )
    series = [Series(name, f"stack-{p}") for p, name in enumerate([*parts, *([rest_label] if rest_label else [])])]
    legend = legend_items(series, left)
    if legend and legend[-1].text_x + len(legend[-1].series.name) * FONT_WIDTH > WIDTH:
        legend = legend_items(series, LEGEND_LEFT)  # long labels leave the legend too little room
    return StackedBarChart(frame=frame, rows=rows, legend=legend, bar_height=height)


# --- box plots (revision rounds' feedback) ---------------------------------------------


@dataclass(frozen=True)
class BoxRow:
    """One input's group distribution on a shared axis: the box from the
    first to the third quartile (or the coarse band holding the median), the
    median's stroke (None with a band), and one's own answer (a diamond; None
    when one gave none). ``box`` None: too few answers to show the group."""

    label: str
    short_label: str
    y: float
    box: tuple[float, float] | None
    median: float | None
    own: float | None

    @property
    def box_width(self) -> float:
        return round(self.box[1] - self.box[0], 2) if self.box else 0.0


@dataclass
class BoxPlot:
    frame: Frame
    rows: list[BoxRow]
    row_height: float


BOX_ROW_HEIGHT = 30


def box_plot(
    *,
    chart_id: str,
    title: str,
    description: str,
    rows: Sequence[tuple[str, tuple[float, float | None, float] | None, float | None]],
) -> BoxPlot:
    """Horizontal box plots of shares (weights) on one axis from 0 to 1.
    ``rows``: ``(label, (q1, median, q3) or None, own value or None)``; a
    median of None draws the box alone (the coarse band holding the median,
    engine.feedback)."""
    left = label_space([label for label, _, _ in rows])
    right = WIDTH - 24
    top = TOP
    scale = LinearScale(0.0, 1.0, left, right)
    drawn = []
    for i, (label, group, own) in enumerate(rows):
        y = top + i * BOX_ROW_HEIGHT + BOX_ROW_HEIGHT / 2
        drawn.append(
            BoxRow(
                label=label,
                short_label=shorten(label),
                y=y,
                box=(scale(group[0]), scale(group[2])) if group else None,
                median=scale(group[1]) if group and group[1] is not None else None,
                own=scale(own) if own is not None else None,
            )
        )
    bottom = top + len(rows) * BOX_ROW_HEIGHT
    frame = Frame(
        chart_id=chart_id,
        title=title,
        description=description,
        height=bottom + 26,
        plot_left=left,
        plot_right=right,
        plot_top=top,
        plot_bottom=bottom,
        ticks=scale.ticks(percent=True),
    )
    return BoxPlot(frame=frame, rows=drawn, row_height=BOX_ROW_HEIGHT)
