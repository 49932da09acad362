"""Rows of marks and cells written in Python, for the loops that repeat
per expert and item (``{% load chart_marks %}``): a template loop costs
tens of microseconds per cell, and a study of 100 experts x 25 weights has
thousands (issue 19). The markup is exactly what the template loops wrote
(``format_html`` and ``localize`` per cell, tests/pages/test_chart_marks.py
checks it); the strings are joined directly, and the numbers written
without ``localize``'s per-call look-ups when no thousand separator is used,
a tenth of the time."""

import html
import re
from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from django import template
from django.conf import settings
from django.template.defaultfilters import date as date_filter
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils.formats import get_format, localize
from django.utils.http import RFC3986_SUBDELIMS
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import localtime

from ..charts import BarRow, DotRow, Frame, HeatCell, Line
from ..forms.expert import SCALE_POINTS, point_label

if TYPE_CHECKING:
    from engine.compare import Delta

from .numbers import significant

register = template.Library()


def localizer() -> Callable[[Any], str]:
    """``localize`` for the active language, as one function: Python floats
    and ints written as ``localize`` writes them without grouping (``str``,
    the decimal separator of the language), anything else (numpy numbers,
    exponents, nan) by ``localize`` itself."""
    if settings.USE_THOUSAND_SEPARATOR:
        return localize
    separator = str(get_format("DECIMAL_SEPARATOR"))

    def plain(value: Any) -> str:
        kind = type(value)
        if kind is float:
            text = repr(value)
            if "e" not in text and "n" not in text:  # not 1e-05, nan or inf
                return text if separator == "." else text.replace(".", separator)
        elif kind is int:
            return repr(value)
        return str(localize(value))

    return plain


_TO_ESCAPE = re.compile("[&<>\"']")


def escaped(text: Any) -> str:
    """``conditional_escape`` without its lazy-string wrapper, and without
    ``html.escape``'s five passes when nothing needs escaping."""
    if hasattr(text, "__html__"):
        return text.__html__()
    text = str(text)
    return html.escape(text) if _TO_ESCAPE.search(text) else text


@register.simple_tag
def number_cells(values: Iterable[float]) -> SafeString:
    """``<td class="number">{{ value|sig }}</td>`` for each value (the
    rounded figures are digits, signs and points: nothing to escape)."""
    return mark_safe("".join([f'<td class="number">{significant(float(value))}</td>' for value in values]))  # noqa: S308


@register.simple_tag
def expert_weight_rows(experts: Iterable[dict]) -> SafeString:
    """``<tr><th scope="row">{{ expert.name }}</th>{% number_cells expert.weights %}</tr>``
    for each expert of a weights table (templates/results/_weights.html)."""
    return mark_safe(  # noqa: S308 (the names are escaped, the cells are numbers)
        "\n".join(
            [
                f'<tr><th scope="row">{escaped(expert["name"])}</th>{number_cells(expert["weights"])}</tr>'
                for expert in experts
            ]
        )
    )


@register.simple_tag
def dot_circles(row: DotRow) -> SafeString:
    """A dot plot row's hollow circles, each titled with whose value it is
    (templates/charts/dots.html); the labels escaped."""
    number = localizer()
    y = number(row.y)
    return mark_safe(  # noqa: S308 (the labels are escaped, the numbers are digits)
        "".join(
            [
                f'<circle class="dot" cx="{number(dot.x)}" cy="{y}" r="5"><title>{escaped(dot.label)}</title></circle>'
                for dot in row.dots
            ]
        )
    )


_VETO_MARK = ' <span aria-hidden="true">✕</span><span class="visually-hidden"> (veto)</span>'


@register.simple_tag
def heat_cells(expert: str, cells: Iterable[HeatCell]) -> SafeString:
    """An expert's row of a candidate's heat table (templates/results/_candidate.html):
    each score shaded by its step, a veto marked ✕ and in words, the expert's
    range in the cell's title."""
    who = escaped(expert)
    return mark_safe(  # noqa: S308 (the names and ranges are escaped)
        "".join(
            [
                f'<td class="number heat heat--{cell.step}{" heat--veto" if cell.vetoed else ""}" '
                f'title="{who}\'s range: {html.escape(cell.range_text)}">'
                f"{significant(cell.score)}{_VETO_MARK if cell.vetoed else ''}</td>"
                for cell in cells
            ]
        )
    )


# Below this in magnitude a change is shown as 0: float noise, not a change.
_SHOWN_DELTA = 0.00005


@register.simple_tag
def delta(change: float | None) -> SafeString:
    """A change between two runs (the comparison's cells): ``–`` when one
    side is missing, ``+0.012`` up, ``-0.012`` down, a muted ``0`` within
    ±0.00005."""
    if change is None:
        return mark_safe("–")
    if change > _SHOWN_DELTA:
        return mark_safe(f'<span class="delta--up">+{significant(float(change))}</span>')  # noqa: S308 (a number)
    if change < -_SHOWN_DELTA:
        return mark_safe(f'<span class="delta--down">{significant(float(change))}</span>')  # noqa: S308 (a number)
    return mark_safe('<span class="muted">0</span>')


def _figure(value: float | None) -> str:
    """``{{ value|sig|default:"–" }}`` for a figure that is a number or None."""
    return "–" if value is None else significant(float(value))


@register.simple_tag
def delta_rows(deltas: Iterable["Delta"]) -> SafeString:
    """The rows of a comparison's table of named figures
    (templates/results/_compare_deltas.html): each name, its value before and
    after, and the change, for the hundred experts' influence."""
    return mark_safe(  # noqa: S308 (the names are escaped, the cells are numbers)
        "".join(
            [
                f'<tr><th scope="row">{escaped(row.name)}</th><td class="number">{_figure(row.before)}</td>'
                f'<td class="number">{_figure(row.after)}</td><td class="number">{delta(row.delta)}</td></tr>'
                for row in deltas
            ]
        )
    )


# Each point of a pair's row: its value, the figure shown and its side.
_POINTS = [
    (i, point, point.removeprefix("1/"), "equal" if point == "1" else ("right" if point.startswith("1/") else "left"))
    for i, point in enumerate(SCALE_POINTS)
]


@register.simple_tag
def pair_points(row: dict[str, Any], readonly: bool = False) -> SafeString:
    """The 17 points of a pairwise judgment (templates/expert/priorities.html,
    a row of views.expert._pair_rows): each a radio labelled with what it
    says in words, the chosen one checked, all disabled when ``readonly``."""
    name, value = escaped(row["name"]), row["value"]
    left, right, method = row["left"], row["right"], row["method"]
    after = (" disabled" if readonly else "") + (f' aria-describedby="{name}_error"' if row["errors"] else "")
    written = []
    for i, point, shown, side in _POINTS:
        label = escaped(point_label(method, left, right, point))
        written.append(
            f'<label class="pair__point pair__point--{side}" for="id_{name}_{i}" title="{label}">'
            f'<input type="radio" name="{name}" value="{point}" id="id_{name}_{i}"'
            f"{' checked' if value == point else ''}{after}>"
            f'<span class="pair__number" aria-hidden="true">{shown}</span>'
            f'<span class="visually-hidden">{label}</span></label>'
        )
    return mark_safe("".join(written))  # noqa: S308 (the names and labels are escaped)


_THOUSANDTH = Decimal("0.001")
_NOT_MEASURED = '<span class="muted" title="not measured">—<span class="visually-hidden">not measured</span></span>'


def _measurement_cell(cell: dict[str, Any], max_length: int) -> str:
    """One cell of the measurements table (views.designer._measurement_page's
    ``cell``): its input when editable, else its value or "not measured";
    its standard error, and whether it was computed from predictions or
    imported from MLflow."""
    field = cell["input"]
    if field:
        name, errors = escaped(field["name"]), field["errors"]
        invalid = f' aria-invalid="true" aria-describedby="id_{name}_error"' if errors else ""
        shown = (
            f'<label class="visually-hidden" for="id_{name}">{escaped(field["label"])}</label>'
            f'<input type="text" name="{name}" value="{escaped(field["text"])}" inputmode="decimal" '
            f'autocomplete="off" maxlength="{max_length}" id="id_{name}"{invalid}>'
        )
        if errors:
            shown += f'<span class="cell__error" id="id_{name}_error">{" ".join(map(escaped, errors))}</span>'
    elif cell["value"] is None:
        shown = _NOT_MEASURED
    else:
        shown = significant(float(cell["value"]))
    if cell["standard_error"] is not None:
        shown += (
            '<span class="cell__se" title="standard error: sampled by a Monte Carlo analysis">'
            f"± {significant(float(cell['standard_error']))}</span>"
        )
    computed = cell.get("computed")
    if computed:
        when = date_filter(localtime(computed.computed_at), "j M Y, H:i")
        title = f"{computed.computation_name} of {computed.prediction_set_name}, {when} UTC"
        shown += f'<span class="cell__source" title="{escaped(title)}">computed</span>'
    imported = cell.get("imported")
    if imported:
        step = f" at step {imported.step}" if imported.step is not None else ""
        title = (
            f"MLflow {imported.metric_key}{step} of run {imported.run_id}, "
            f"experiment {imported.experiment_shown}, {imported.tracking_uri}"
        )
        shown += f'<span class="cell__source" title="{escaped(title)}">MLflow</span>'
    return f'<td class="{"cell--invalid" if field and field["errors"] else ""}">{shown}</td>'


@register.simple_tag
def measurement_cells(cells: Iterable[dict[str, Any]], max_length: int) -> SafeString:
    """A candidate's row of the measurements table
    (templates/designer/measurements.html): 20 metrics x 25 candidates are
    500 cells a page."""
    return mark_safe("".join([_measurement_cell(cell, max_length) for cell in cells]))  # noqa: S308 (escaped)


@register.simple_tag
def prediction_candidate_links(study_id: int, prediction_set: Any) -> SafeString:
    """A prediction set's candidates, each a link to its report with its
    instance count (templates/evaluation/predictions.html): a thousand a
    set. The link is ``{% url 'prediction_report' %}``'s, reversed once and
    each name quoted as ``reverse`` quotes it."""
    n = localizer()
    prefix = reverse("prediction_report", args=[study_id, prediction_set.pk, "-"]).removesuffix("-/")
    safe = RFC3986_SUBDELIMS + "/~:@"
    written = []
    for row in prediction_set.candidate_arrays.all():
        name = row.candidate.name
        href = escaped(f"{prefix}{quote(name, safe=safe)}/")
        written.append(
            f'<li><a href="{href}">{escaped(name)}</a> <span class="muted">({n(row.instance_count)})</span></li>'
        )
    return mark_safe("".join(written))  # noqa: S308 (the names and links escaped, the counts numbers)


@register.simple_tag
def frame_grid(frame: Frame) -> SafeString:
    """A chart's grid (templates/charts/_frame.html): a line and a label at
    each tick of either value axis."""
    n = localizer()
    top, bottom, left, right = n(frame.plot_top), n(frame.plot_bottom), n(frame.plot_left), n(frame.plot_right)
    label_y = n(frame.tick_label_y)
    written = ['<g class="chart__grid">']
    for tick in frame.ticks:
        x = n(tick.position)
        written.append(
            f'<line x1="{x}" x2="{x}" y1="{top}" y2="{bottom}"/>'
            f'<text class="chart__tick" x="{x}" y="{label_y}" text-anchor="middle">{escaped(tick.label)}</text>'
        )
    for tick in frame.y_ticks:
        y = n(tick.position)
        written.append(
            f'<line x1="{left}" x2="{right}" y1="{y}" y2="{y}"/>'
            f'<text class="chart__tick" x="{left}" y="{y}" dx="-6" dy="4" text-anchor="end">'
            f"{escaped(tick.label)}</text>"
        )
    written.append("</g>")
    return mark_safe("".join(written))  # noqa: S308 (the labels escaped, the rest numbers)


@register.simple_tag
def chart_lines(lines: Iterable[Line]) -> SafeString:
    """A line chart's curves (templates/charts/lines.html): each named, its
    polyline unless it is points alone, its marked points as titled dots."""
    n = localizer()
    written = []
    for line in lines:
        name = escaped(line.name)
        written.append(f'<g class="chart__line"><title>{name}</title>')
        if line.style != "points":
            written.append(f'<polyline class="line line--{escaped(line.style)}" points="{escaped(line.points)}"/>')
        written.extend(
            f'<circle class="dot dot--small" cx="{n(point.x)}" cy="{n(point.y)}" r="3.5">'
            f"<title>{name}: {escaped(point.label)}</title></circle>"
            for point in line.markers
        )
        written.append("</g>")
    return mark_safe("".join(written))  # noqa: S308 (the names and labels escaped, the rest numbers)


@register.simple_tag
def weight_stability_rows(reports: Iterable[Any]) -> SafeString:
    """The robustness page's table of each metric's weight alone
    (engine.sensitivity.WeightReport): its weight, and the intervals over
    which the ranking and the winner stay, to three decimals."""

    separator = str(get_format("DECIMAL_SEPARATOR"))

    def three(value: float) -> str:
        """``floatformat:3``: the float's decimal text rounded half up; below
        999 without its look-ups (no grouping to do)."""
        if type(value) is float and abs(value) < 999:  # not nan or inf either; rounded below 1,000
            rounded = Decimal(repr(value)).quantize(_THOUSANDTH, ROUND_HALF_UP)
            return f"{rounded or rounded.copy_abs():f}".replace(".", separator)  # -0.000 is 0.000
        return str(floatformat(value, 3))

    return mark_safe(  # noqa: S308 (the names escaped, the rest numbers)
        "".join(
            [
                f'<tr><th scope="row">{escaped(r.name)}</th><td class="number">{three(r.share)}</td>'
                f"<td>{three(r.ranking[0])} – {three(r.ranking[1])}</td>"
                f"<td>{three(r.winner[0])} – {three(r.winner[1])}</td></tr>"
                for r in reports
            ]
        )
    )


@register.simple_tag
def bar_rows(rows: Iterable[BarRow], frame: Frame) -> SafeString:
    """A bar chart's rows (templates/charts/bars.html): each row titled with
    its values, its label, and each bar with its value written after it
    (the run page's weights: a row per attribute and per metric)."""
    n = localizer()
    left, hatch = n(frame.plot_left), f' fill="url(#{escaped(frame.chart_id)}-hatch)"'
    written = []
    for row in rows:
        values = ", ".join([f"{escaped(bar.series.name)} {escaped(bar.value_label)}" for bar in row.bars])
        note = escaped(row.note)
        y = n(row.y)
        written.append(
            f'<g class="chart__row"><title>{escaped(row.label)}: {values}{f" ({note})" if row.note else ""}</title>'
            f'<text class="chart__label" x="{left}" y="{y}" dx="-8" text-anchor="end">{escaped(row.short_label)}</text>'
        )
        last = len(row.bars) - 1
        for i, bar in enumerate(row.bars):
            style = escaped(bar.series.style)
            written.append(
                f'<rect class="bar bar--{style}" x="{n(bar.x)}" y="{n(bar.y)}" width="{n(bar.width)}" '
                f'height="{n(bar.height)}"{hatch if bar.series.style == "hatched" else ""}/>'
                f'<text class="chart__value" x="{n(bar.label_x)}" y="{n(bar.label_y)}">{escaped(bar.value_label)}'
                f"{f' · {note}' if i == last and row.note else ''}</text>"
            )
        written.append("</g>")
    return mark_safe("".join(written))  # noqa: S308 (the labels escaped, the rest numbers)
