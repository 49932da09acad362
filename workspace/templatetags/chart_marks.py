"""Rows of marks and cells written in Python, for the loops that repeat
per expert and item (``{% load chart_marks %}``): a template loop costs
tens of microseconds per cell, and a study of 100 experts x 25 weights has
thousands (issue 19). The markup is exactly what the template loops wrote."""

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django import template
from django.utils.formats import localize
from django.utils.html import format_html_join
from django.utils.safestring import SafeString, mark_safe

from ..charts import DotRow

if TYPE_CHECKING:
    from ..views.results import HeatCell
from .numbers import significant

register = template.Library()


@register.simple_tag
def number_cells(values: Iterable[float]) -> SafeString:
    """``<td class="number">{{ value|sig }}</td>`` for each value."""
    return format_html_join("", '<td class="number">{}</td>', ((significant(float(value)),) for value in values))


@register.simple_tag
def dot_circles(row: DotRow) -> SafeString:
    """A dot plot row's hollow circles, each titled with whose value it is
    (templates/charts/dots.html)."""
    y = localize(row.y)
    return format_html_join(
        "",
        '<circle class="dot" cx="{}" cy="{}" r="5"><title>{}</title></circle>',
        ((localize(dot.x), y, dot.label) for dot in row.dots),
    )


_VETO_MARK = ' <span aria-hidden="true">✕</span><span class="visually-hidden"> (veto)</span>'


@register.simple_tag
def heat_cells(expert: str, cells: Iterable["HeatCell"]) -> SafeString:
    """An expert's row of a candidate's heat table (templates/results/_candidate.html):
    each score shaded by its step, a veto marked ✕ and in words, the expert's
    range in the cell's title."""
    return format_html_join(
        "",
        '<td class="number heat heat--{}{}" title="{}\'s range: {}">{}{}</td>',
        (
            (
                cell.step,
                " heat--veto" if cell.vetoed else "",
                expert,
                cell.range_text,
                significant(cell.score),
                mark_safe(_VETO_MARK) if cell.vetoed else "",  # noqa: S308 (a constant)
            )
            for cell in cells
        ),
    )
