"""A robustness analysis's summary in words, written when the page is drawn
(``engine.analysis_words``): ``{% with summary=analysis|summary_in_words %}``."""

from typing import Any, cast

from django import template

from engine.analysis_words import with_words
from engine.models import Analysis

register = template.Library()


@register.filter
def summary_in_words(analysis: Analysis) -> dict[str, Any]:
    """The stored summary with its sentence (and a Monte Carlo's ``sampled``) in words."""
    return with_words(analysis.kind, cast(dict, analysis.result)["summary"])
