"""A robustness analysis's summary in words, written when the page is drawn
(``engine.analysis_words``): ``{% with summary=analysis|summary_in_words %}``."""

from collections.abc import Sequence
from typing import Any, cast

from django import template

from engine.analysis_words import interval_words, with_words
from engine.models import Analysis

register = template.Library()


@register.filter
def summary_in_words(analysis: Analysis) -> dict[str, Any]:
    """The stored summary with its sentence (and a Monte Carlo's ``sampled``) in words."""
    return with_words(analysis.kind, cast(dict, analysis.result)["summary"])


@register.filter
def wilson_words(interval: Sequence[float] | None) -> str:
    """A stored 95 % Wilson interval in words ("95 %: 0.0–0.4 %"); "" for none
    (an analysis stored before the intervals were)."""
    return interval_words(interval) if interval else ""


@register.filter
def rank_cells(row: dict[str, Any]) -> list[tuple[float, str]]:
    """A Monte Carlo row's rank shares, each with its Wilson interval in
    words ("" for an analysis stored before the intervals were)."""
    intervals = row.get("wilson_ranks") or [None] * len(row["ranks"])
    return [(share, wilson_words(interval)) for share, interval in zip(row["ranks"], intervals, strict=True)]
