"""The bars of the ranges step's binned strip: ``{% load strips %}{% strip_bars s %}``.

A strip of limits.STRIP_BINS bins on each of 20 metrics is 800 SVG groups of
numbers only; written by Django's template loop, they cost most of the
page's time (every number localised, every variable resolved), so this tag
writes them in one pass. The geometry is ``workspace.charts.range_strip``'s;
nothing here comes from a user (numbers formatted here), so nothing needs
escaping.
"""

from django import template
from django.utils.safestring import SafeString, mark_safe

from ..charts import StripBin
from .numbers import significant

register = template.Library()


def _bar(b: StripBin) -> str:
    title = f"{b.count} measured {significant(b.low)} to {significant(b.high)}"
    parts = [f"<g><title>{title}{f', {b.vetoed} vetoed' if b.vetoed else ''}</title>"]
    if b.vetoed:
        parts.append(
            f'<rect class="strip__vetoed" x="{b.x}" y="{b.y}" width="{b.width}" height="{b.vetoed_height}"'
            ' fill="#fff" stroke="#a4262c" stroke-width="1"/>'
        )
    if b.count > b.vetoed:
        parts.append(
            f'<rect x="{b.x}" y="{b.accepted_y}" width="{b.width}" height="{b.accepted_height}" fill="#1d2430"/>'
        )
    parts.append("</g>")
    return "".join(parts)


@register.simple_tag
def strip_bars(strip: dict) -> SafeString:
    """The bins of a binned strip as SVG: a bar of each bin's candidates, the
    vetoed part outlined on top of the accepted part, filled."""
    return mark_safe("".join(_bar(b) for b in strip["bins"]))  # noqa: S308 (numbers only, see above)
