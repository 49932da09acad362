"""The bars of the ranges step's binned strip: ``{% load strips %}{% strip_bars s %}``.

A strip of limits.STRIP_BINS bins on each of 20 metrics is 800 SVG groups of
numbers only; written by Django's template loop, they cost most of the
page's time (every number localised, every variable resolved), so this tag
writes them in one pass. The geometry is ``workspace.charts.range_strip``'s;
nothing here comes from a user (numbers formatted here), so nothing needs
escaping.
"""

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from ..charts import StripBin
from .chart_marks import escaped, localizer
from .numbers import significant

register = template.Library()


def _bar(b: StripBin, shown: dict[float, str]) -> str:
    """A bin's bar; ``shown`` holds the bins' edges as written (each edge
    but the outer two is one bin's high and the next one's low)."""
    low, high = shown.get(b.low) or significant(b.low), shown.get(b.high)
    if high is None:
        high = shown[b.high] = significant(b.high)
    parts = [f"<g><title>{b.measured} measured {low} to {high}{f', {b.vetoed} vetoed' if b.vetoed else ''}</title>"]
    if b.vetoed:
        parts.append(
            f'<rect class="strip__vetoed" x="{b.x}" y="{b.y}" width="{b.width}" height="{b.vetoed_height}"'
            ' fill="#fff" stroke="#a4262c" stroke-width="1"/>'
        )
    if b.measured > b.vetoed:
        parts.append(
            f'<rect x="{b.x}" y="{b.accepted_y}" width="{b.width}" height="{b.accepted_height}" fill="#1d2430"/>'
        )
    parts.append("</g>")
    return "".join(parts)


@register.simple_tag
def strip_bars(strip: dict) -> SafeString:
    """The bins of a binned strip as SVG: a bar of each bin's candidates, the
    vetoed part outlined on top of the accepted part, filled."""
    shown: dict[float, str] = {}
    return mark_safe("".join([_bar(b, shown) for b in strip["bins"]]))  # noqa: S308 (numbers only, see above)


@register.simple_tag
def binned_strip(s: dict, metric: Any, count: int) -> SafeString:
    """The whole binned strip of one metric (templates/charts/strip.html
    beyond limits.STRIP_MARKS_MAX candidates): its text alternative, the
    band, the axis, the bars and both bounds, written in one pass (20
    metrics' strips are the preview's main cost when written by the
    template, each number localised). The metric's name is escaped."""
    n = localizer()
    pk, width, bottom, least_x, desired_x = (
        metric.pk,
        n(s["width"]),
        n(s["bar_bottom"]),
        n(s["least_x"]),
        n(s["desired_x"]),
    )
    return mark_safe(  # noqa: S308 (the name escaped, the rest numbers)
        f'<svg class="strip strip--binned" viewBox="0 0 {width} 72" width="{width}" height="72" role="img" '
        f'aria-labelledby="strip-{pk}-title" focusable="false">'
        f'<title id="strip-{pk}-title">{escaped(metric.name)}: the {n(count)} candidates\' measured values from '
        f"{escaped(s['low'])} to {escaped(s['high'])} in {n(s['bin_count'])} bins, against the range from "
        f"{escaped(s['least'])} (least acceptable) to {escaped(s['desired'])} (desired); "
        "the vetoed are outlined.</title>"
        f'<rect x="{n(s["band_x"])}" y="{bottom}" width="{n(s["band_width"])}" height="8" rx="2" fill="#e5f0f1" '
        'stroke="#3b8ea0"/>'
        f'<line x1="{n(s["pad"])}" y1="{bottom}" x2="{n(s["axis_end"])}" y2="{bottom}" stroke="#cbd1d9" '
        'stroke-width="1.5"/>'
        f"{strip_bars(s)}"
        f'<line x1="{least_x}" y1="14" x2="{least_x}" y2="62" stroke="#a4262c" stroke-width="2" '
        'stroke-dasharray="3 2"/>'
        f'<text x="{least_x}" y="11" font-size="10" text-anchor="middle" fill="#a4262c">'
        f"least {escaped(s['least'])}</text>"
        f'<line x1="{desired_x}" y1="14" x2="{desired_x}" y2="62" stroke="#216e3a" stroke-width="2"/>'
        f'<text x="{desired_x}" y="71" font-size="10" text-anchor="middle" fill="#216e3a">'
        f"desired {escaped(s['desired'])}</text></svg>"
    )
