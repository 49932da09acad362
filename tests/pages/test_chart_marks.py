"""The cells and marks written in Python (workspace/templatetags/chart_marks.py)
are exactly what Django's ``format_html`` and ``localize`` wrote for each of
them, in English and in a language with a decimal comma."""

import datetime
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
from django.template import Context, Template
from django.test import override_settings
from django.utils import translation
from django.utils.formats import localize
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from engine.compare import Delta
from evaluation.models import MeasurementSource
from workspace.charts import Dot, DotRow, HeatCell, Series, bar_chart, line_chart, range_strip
from workspace.forms.expert import SCALE_POINTS, point_label
from workspace.templatetags import chart_marks
from workspace.templatetags.numbers import significant
from workspace.templatetags.strips import binned_strip

NUMBERS = [
    0.0,
    1.0,
    -2.5,
    12.345678901234,
    1e-05,
    3.5e-07,
    123456789.5,
    1e22,
    7,
    0,
    -3,
    math.nan,
    math.inf,
    np.float64(0.25),
]


def _reference_dots(row: DotRow) -> str:
    y = localize(row.y)
    return format_html_join(
        "",
        '<circle class="dot" cx="{}" cy="{}" r="5"><title>{}</title></circle>',
        ((localize(dot.x), y, dot.label) for dot in row.dots),
    )


def _reference_heat(expert: str, cells: list[HeatCell]) -> str:
    veto = mark_safe(chart_marks._VETO_MARK)  # noqa: S308 (a constant)
    return format_html_join(
        "",
        '<td class="number heat heat--{}{}" title="{}\'s range: {}">{}{}</td>',
        (
            (
                c.step,
                " heat--veto" if c.vetoed else "",
                expert,
                c.range_text,
                significant(c.score),
                veto if c.vetoed else "",
            )
            for c in cells
        ),
    )


@pytest.mark.parametrize("language", ["en-gb", "de"])
@pytest.mark.parametrize("grouping", [False, True])
def test_dot_circles_write_what_format_html_and_localize_wrote(language, grouping):
    row = DotRow(
        label="a",
        short_label="a",
        y=41.5,
        dots=[Dot(x=x, label=f"<b>O'Hara</b> & co: {i}") for i, x in enumerate(NUMBERS)],
        spread_from=0.0,
        spread_to=1.0,
        marker_x=0.5,
        marker_label="m",
    )
    with translation.override(language), override_settings(USE_THOUSAND_SEPARATOR=grouping):
        written = chart_marks.dot_circles(row)
        assert written == _reference_dots(row)
    assert "&lt;b&gt;O&#x27;Hara&lt;/b&gt; &amp; co: 0" in written


def test_cells_write_what_format_html_wrote():
    values = [0.9019607843137255, 0.0, 1e-07, 12345.678, -0.5]
    assert chart_marks.number_cells(values) == format_html_join(
        "", '<td class="number">{}</td>', ((significant(v),) for v in values)
    )
    cells = [
        HeatCell(score=0.0, step=0, vetoed=True, range_text="1 (least acceptable) to 2 (desired)"),
        HeatCell(score=0.4647, step=3, vetoed=False, range_text='<0.5> & "1"'),
    ]
    written = chart_marks.heat_cells("Ann <O'Neil>", cells)
    assert written == _reference_heat("Ann <O'Neil>", cells)
    assert "Ann &lt;O&#x27;Neil&gt;" in written and "&lt;0.5&gt; &amp; &quot;1&quot;" in written


def test_expert_weight_rows_are_the_rows_the_loop_wrote():
    experts = [{"name": "ann & <bo>", "weights": [0.25, 0.125]}, {"name": "cy", "weights": [0.5, 1.0]}]
    assert chart_marks.expert_weight_rows(experts) == (
        '<tr><th scope="row">ann &amp; &lt;bo&gt;</th><td class="number">0.25</td><td class="number">0.125</td></tr>\n'
        '<tr><th scope="row">cy</th><td class="number">0.5</td><td class="number">1</td></tr>'
    )


# What templates/results/_delta.html and _compare_deltas.html's loop wrote
# before the rows were written in Python.
_DELTA_TEMPLATE = (
    '{% load numbers %}{% if delta is None %}–{% elif delta > 0.00005 %}<span class="delta--up">+{{ delta|sig }}</span>'
    '{% elif delta < -0.00005 %}<span class="delta--down">{{ delta|sig }}</span>'
    '{% else %}<span class="muted">0</span>{% endif %}'
)
_DELTA_ROWS_TEMPLATE = (
    '{% load numbers %}{% for row in deltas %}<tr><th scope="row">{{ row.name }}</th>'
    '<td class="number">{{ row.before|sig|default:"–" }}</td><td class="number">{{ row.after|sig|default:"–" }}</td>'
    '<td class="number">{% include delta_template with delta=row.delta %}</td></tr>{% endfor %}'
)


def test_delta_rows_are_the_rows_the_template_loop_wrote():
    deltas = [
        Delta("ann & <bo>", 0.25, 0.5),
        Delta("cy", 0.5, 0.25),
        Delta("di", 0.3, 0.30001),  # below what is shown: 0
        Delta("ed", None, 0.4),
        Delta("fi", 0.4, None),
        Delta("gus", 1e-07, 0.0),
        Delta("hal", 0.0, 0.0),
    ]
    reference = Template(_DELTA_ROWS_TEMPLATE).render(
        Context({"deltas": deltas, "delta_template": Template(_DELTA_TEMPLATE)})
    )
    written = chart_marks.delta_rows(deltas)
    assert written == reference
    assert '<th scope="row">ann &amp; &lt;bo&gt;</th>' in written
    assert '<span class="delta--up">+0.25</span>' in written and '<span class="delta--down">-0.25</span>' in written
    assert (
        written.count('<span class="muted">0</span>') == 3 and written.count("–") == 4
    )  # two missing figures, two changes


# What templates/expert/priorities.html's loop over a pair's points wrote
# before they were written in Python (the labels were views.expert's).
_PAIR_POINTS_TEMPLATE = """{% for p in points %}
<label class="pair__point pair__point--{{ p.side }}" for="{{ p.id }}" title="{{ p.label }}">
  <input type="radio" name="{{ row.name }}" value="{{ p.value }}" id="{{ p.id }}"{% if p.checked %} checked{% endif %}\
{% if readonly %} disabled{% endif %}{% if row.errors %} aria-describedby="{{ row.name }}_error"{% endif %}>
  <span class="pair__number" aria-hidden="true">{{ p.shown }}</span>
  <span class="visually-hidden">{{ p.label }}</span>
</label>
{% endfor %}"""


@pytest.mark.parametrize("method", ["ahp", "lpr"])
@pytest.mark.parametrize(
    ("value", "errors", "readonly"), [("3", [], False), ("1/7", ["Pick one."], True), (None, [], None)]
)
def test_pair_points_are_the_points_the_template_loop_wrote(method, value, errors, readonly):
    row = {"name": "ahp-1-2", "method": method, "left": "R&D <x>", "right": "Speed", "value": value, "errors": errors}
    points = [
        {
            "value": p,
            "shown": p.removeprefix("1/"),
            "label": point_label(method, row["left"], row["right"], p),
            "checked": value == p,
            "id": f"id_{row['name']}_{i}",
            "side": "equal" if p == "1" else ("right" if p.startswith("1/") else "left"),
        }
        for i, p in enumerate(SCALE_POINTS)
    ]
    reference = Template(_PAIR_POINTS_TEMPLATE).render(Context({"row": row, "points": points, "readonly": readonly}))
    written = chart_marks.pair_points(row, readonly)
    assert written == re.sub(r">\s+<", "><", reference).strip()
    assert written.count("<label ") == 17 and written.count(" checked") == (value is not None)
    assert "R&amp;D &lt;x&gt;" in written and written.count(" disabled") == (17 if readonly else 0)


# What templates/designer/measurements.html's loop over a row's cells wrote
# before they were written in Python.
_MEASUREMENT_CELLS_TEMPLATE = """{% load evaluation_tags numbers %}{% for cell in cells %}
<td class="{% if cell.input.errors %}cell--invalid{% endif %}">
  {% if cell.input %}{% with i=cell.input %}
    <label class="visually-hidden" for="id_{{ i.name }}">{{ i.label }}</label>
    <input type="text" name="{{ i.name }}" value="{{ i.text }}" inputmode="decimal" autocomplete="off" \
maxlength="{{ cell_max_length }}" id="id_{{ i.name }}"{% if i.errors %} aria-invalid="true" \
aria-describedby="id_{{ i.name }}_error"{% endif %}>
    {% if i.errors %}<span class="cell__error" id="id_{{ i.name }}_error">{{ i.errors|join:" " }}</span>{% endif %}\
{% endwith %}
  {% elif cell.value is None %}<span class="muted" title="not measured">—\
<span class="visually-hidden">not measured</span></span>
  {% else %}{{ cell.value|sig }}{% endif %}
  {% if cell.standard_error is not None %}<span class="cell__se" \
title="standard error: sampled by a Monte Carlo analysis">± {{ cell.standard_error|sig }}</span>{% endif %}
  {% if cell.computed %}<span class="cell__source" title="{{ cell.computed.computation|computation_name }} of \
{{ cell.computed.prediction_set_name }}, {{ cell.computed.computed_at|date:'j M Y, H:i' }} UTC">computed</span>\
{% endif %}
</td>
{% endfor %}"""


def test_measurement_cells_are_the_cells_the_template_loop_wrote():
    # a real source (unsaved): the cell reads its computation's name from it
    computed = MeasurementSource(
        computation="accuracy",
        prediction_set_name="Fold <1> & co",
        computed_at=datetime.datetime(2026, 3, 4, 5, 6, tzinfo=datetime.UTC),
        value=12.5,
    )

    def cell(value=None, standard_error=None, computed=None, field=None):
        return {"value": value, "standard_error": standard_error, "computed": computed, "input": field}

    cells = [
        cell(0.9019607843137255),
        cell(None),
        cell(12.5, standard_error=0.0125, computed=computed),
        cell(0.5, field={"name": "m-1-2", "label": "AUC of <J48>", "text": '0.5"', "errors": None}),
        cell(None, field={"name": "m-3-4", "label": "AUC of J&R", "text": "lots", "errors": ["not a number ('lots')"]}),
        cell(None, standard_error=1e-07),
    ]
    reference = Template(_MEASUREMENT_CELLS_TEMPLATE).render(Context({"cells": cells, "cell_max_length": 32}))
    written = chart_marks.measurement_cells(cells, 32)
    # the template's indentation and line breaks dropped
    assert written == re.sub(r"\s*\n\s*", "", reference)
    assert 'value="0.5&quot;"' in written and "AUC of &lt;J48&gt;" in written
    assert "not a number (&#x27;lots&#x27;)" in written and 'class="cell--invalid"' in written
    assert "Fold &lt;1&gt; &amp; co, 4 Mar 2026, 05:06 UTC" in written and "± 1e-07" in written
    assert f'title="{computed.computation_name} of Fold' in written and computed.computation_name != "accuracy"


# What templates/charts/strip.html wrote for a binned strip before it was
# written in Python.
_BINNED_STRIP_TEMPLATE = """{% load strips %}
<svg class="strip strip--binned" viewBox="0 0 {{ s.width }} 72" width="{{ s.width }}" height="72" role="img" \
aria-labelledby="strip-{{ metric.pk }}-title" focusable="false">
  <title id="strip-{{ metric.pk }}-title">{{ metric.name }}: the {{ outcome.count }} candidates' measured values \
from {{ s.low }} to {{ s.high }} in {{ s.bin_count }} bins, against the range from {{ s.least }} (least acceptable) \
to {{ s.desired }} (desired); the vetoed are outlined.</title>
  <rect x="{{ s.band_x }}" y="{{ s.bar_bottom }}" width="{{ s.band_width }}" height="8" rx="2" fill="#e5f0f1" \
stroke="#3b8ea0"/>
  <line x1="{{ s.pad }}" y1="{{ s.bar_bottom }}" x2="{{ s.axis_end }}" y2="{{ s.bar_bottom }}" stroke="#cbd1d9" \
stroke-width="1.5"/>
  {% strip_bars s %}
  <line x1="{{ s.least_x }}" y1="14" x2="{{ s.least_x }}" y2="62" stroke="#a4262c" stroke-width="2" \
stroke-dasharray="3 2"/>
  <text x="{{ s.least_x }}" y="11" font-size="10" text-anchor="middle" fill="#a4262c">least {{ s.least }}</text>
  <line x1="{{ s.desired_x }}" y1="14" x2="{{ s.desired_x }}" y2="62" stroke="#216e3a" stroke-width="2"/>
  <text x="{{ s.desired_x }}" y="71" font-size="10" text-anchor="middle" fill="#216e3a">desired {{ s.desired }}</text>
</svg>
"""


@pytest.mark.parametrize("language", ["en-gb", "de"])
def test_binned_strip_is_what_the_template_wrote(language):
    rng = np.random.default_rng(3)
    values = rng.normal(0.7, 0.1, 300)
    strip = range_strip(least=0.65, desired=0.9, values=values, vetoed=values < 0.65, names=None, bins=40)
    metric = SimpleNamespace(pk=7, name="AUC <ROC> & co")
    with translation.override(language):
        reference = Template(_BINNED_STRIP_TEMPLATE).render(
            Context({"s": strip, "metric": metric, "outcome": {"count": 300}})
        )
        written = binned_strip(strip, metric, 300)
    assert written == re.sub(r"\s*\n\s*", "", reference)
    assert "AUC &lt;ROC&gt; &amp; co: the 300 candidates' measured values" in written
    assert written.count("<g>") == len(strip["bins"]) > 20


# What templates/charts/_frame.html's grid, templates/charts/lines.html's
# curves and the robustness page's table of metric weights wrote before
# they were written in Python.
_FRAME_GRID_TEMPLATE = """<g class="chart__grid">
  {% for tick in frame.ticks %}
    <line x1="{{ tick.position }}" x2="{{ tick.position }}" y1="{{ frame.plot_top }}" y2="{{ frame.plot_bottom }}"/>
    <text class="chart__tick" x="{{ tick.position }}" y="{{ frame.tick_label_y }}" text-anchor="middle">\
{{ tick.label }}</text>
  {% endfor %}
  {% for tick in frame.y_ticks %}
    <line x1="{{ frame.plot_left }}" x2="{{ frame.plot_right }}" y1="{{ tick.position }}" y2="{{ tick.position }}"/>
    <text class="chart__tick" x="{{ frame.plot_left }}" y="{{ tick.position }}" dx="-6" dy="4" text-anchor="end">\
{{ tick.label }}</text>
  {% endfor %}
</g>"""
_CHART_LINES_TEMPLATE = """{% for line in lines %}
    <g class="chart__line">
      <title>{{ line.name }}</title>
      {% if line.style != "points" %}<polyline class="line line--{{ line.style }}" points="{{ line.points }}"/>\
{% endif %}
      {% for point in line.markers %}<circle class="dot dot--small" cx="{{ point.x }}" cy="{{ point.y }}" r="3.5">\
<title>{{ line.name }}: {{ point.label }}</title></circle>{% endfor %}
    </g>
  {% endfor %}"""
_STABILITY_ROWS_TEMPLATE = (
    '{% for report in reports %}<tr><th scope="row">{{ report.name }}</th>'
    '<td class="number">{{ report.share|floatformat:3 }}</td>'
    "<td>{{ report.ranking.0|floatformat:3 }} – {{ report.ranking.1|floatformat:3 }}</td>"
    "<td>{{ report.winner.0|floatformat:3 }} – {{ report.winner.1|floatformat:3 }}</td></tr>{% endfor %}"
)


@pytest.mark.parametrize("language", ["en-gb", "de"])
def test_a_line_charts_grid_and_curves_are_what_the_templates_wrote(language):
    chart = line_chart(
        chart_id="c",
        title="CEF against <Speed>'s weight",
        description="d",
        lines=[
            ("J48 & co", "solid", [0.0, 0.3125, 1.0], [0.25, 0.5, 0.875], True),
            ("<b>", "points", [0.1, 0.9], [0.2, 0.4], True),
            ("plain", "dashed", [0.0, 1.0], [0.0, 1.0], False),
        ],
        x_range=(0.0, 1.0),
        y_range=(0.0, 1.0),
        x_label="x",
        y_label="y",
    )
    reports = [
        SimpleNamespace(name="AUC & <x>", share=0.2675, ranking=(0.0, 0.5), winner=(0.125, 1.0)),
        SimpleNamespace(name="Time", share=1 / 3, ranking=(2.675, 0.0005), winner=(0.0, 0.0015)),
        SimpleNamespace(name="Odd", share=-0.0001, ranking=(999.9996, 1234.5678), winner=(float("nan"), 1e-07)),
    ]
    with translation.override(language):
        grid = Template(_FRAME_GRID_TEMPLATE).render(Context({"frame": chart.frame}))
        lines = Template(_CHART_LINES_TEMPLATE).render(Context({"lines": chart.lines}))
        rows = Template(_STABILITY_ROWS_TEMPLATE).render(Context({"reports": reports}))
        assert chart_marks.frame_grid(chart.frame) == re.sub(r"\s*\n\s*", "", grid)
        assert chart_marks.chart_lines(chart.lines) == re.sub(r"\s*\n\s*", "", lines)
        assert chart_marks.weight_stability_rows(reports) == rows
    assert chart.frame.y_ticks and "J48 &amp; co" in chart_marks.chart_lines(chart.lines)
    assert chart_marks.chart_lines(chart.lines).count("<polyline") == 2


# What templates/charts/bars.html's loop over the rows wrote before they
# were written in Python.
_BAR_ROWS_TEMPLATE = """{% for row in chart.rows %}
    <g class="chart__row">
      <title>{{ row.label }}: {% for bar in row.bars %}{{ bar.series.name }} {{ bar.value_label }}\
{% if not forloop.last %}, {% endif %}{% endfor %}{% if row.note %} ({{ row.note }}){% endif %}</title>
      <text class="chart__label" x="{{ frame.plot_left }}" y="{{ row.y }}" dx="-8" text-anchor="end">\
{{ row.short_label }}</text>
      {% for bar in row.bars %}
        <rect class="bar bar--{{ bar.series.style }}" x="{{ bar.x }}" y="{{ bar.y }}" width="{{ bar.width }}" \
height="{{ bar.height }}"{% if bar.series.style == "hatched" %} fill="url(#{{ frame.chart_id }}-hatch)"{% endif %}/>
        <text class="chart__value" x="{{ bar.label_x }}" y="{{ bar.label_y }}">{{ bar.value_label }}\
{% if forloop.last and row.note %} · {{ row.note }}{% endif %}</text>
      {% endfor %}
    </g>
  {% endfor %}"""


@pytest.mark.parametrize("language", ["en-gb", "de"])
def test_bar_rows_are_the_rows_the_template_loop_wrote(language):
    # two series, the second hatched; a note after one row's values
    series = [Series("Consensus", "solid"), Series("Yours <b>", "hatched")]
    labels = ["Accuracy & <co>", "Speed", "A very long attribute name that is shortened on the chart"]
    values = [[0.5, 0.125, 0.375], [0.25, 0.6, 0.15]]
    chart = bar_chart(
        labels=labels,
        series=series,
        values=values,
        notes=["", "vetoed & gone", ""],
        chart_id="w<1>",
        title="t",
        description="d",
    )
    with translation.override(language):
        reference = Template(_BAR_ROWS_TEMPLATE).render(Context({"chart": chart, "frame": chart.frame}))
        written = chart_marks.bar_rows(chart.rows, chart.frame)
    assert written == re.sub(r"\s*\n\s*", "", reference)
    assert "Accuracy &amp; &lt;co&gt;: Consensus 0.5000, Yours &lt;b&gt; 0.2500" in written
    assert written.count('fill="url(#w&lt;1&gt;-hatch)"') == 3 and written.count("· vetoed &amp; gone") == 1


# What templates/evaluation/predictions.html wrote for a set's candidates before it was written in Python.
_PREDICTION_LINKS_TEMPLATE = (
    "{% for row in set.candidate_arrays.all %}<li><a href=\"{% url 'prediction_report' study_id set.pk "
    'row.candidate.name %}">{{ row.candidate.name }}</a> <span class="muted">({{ row.instance_count }})</span></li>'
    "{% endfor %}"
)


@pytest.mark.parametrize("language", ["en", "de"])
def test_prediction_candidate_links_are_the_links_the_template_loop_wrote(language):
    names = ["J48", 'it\'s <b> & "c"', "a/b ?#%20 é", "!$&'()*+,;=~:@ x", "1234567"]
    rows = [
        SimpleNamespace(candidate=SimpleNamespace(name=name), instance_count=count)
        for name, count in zip(names, [200, 1, 1234567, 0, 42], strict=True)
    ]
    prediction_set = SimpleNamespace(pk=17, candidate_arrays=SimpleNamespace(all=lambda: rows))
    with translation.override(language):
        reference = Template(_PREDICTION_LINKS_TEMPLATE).render(Context({"set": prediction_set, "study_id": 3}))
        written = chart_marks.prediction_candidate_links(3, prediction_set)
    assert written == reference
    assert '<a href="/studies/3/predictions/17/candidates/a/b%20%3F%23%2520%20%C3%A9/">a/b ?#%20 é</a>' in written
    assert "it&#x27;s &lt;b&gt; &amp; &quot;c&quot;" in written and "(1234567)" in written
