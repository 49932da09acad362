"""Templates ask the services' phase table instead of restating phases:
``{% load phases %}{% if study|allows:"launch_run" %}`` and
``{% if study|opened:"vote" %}``, ``{% if study|selection_fixed %}`` (``services.PHASE_RULES``)."""

from django import template

from .. import services
from ..models import Study

register = template.Library()


@register.filter
def allows(study: Study, action: str) -> bool:
    """The study's phase allows ``action`` (a ``services.Action`` value)."""
    return services.phase_allows(study, action)


@register.filter
def opened(study: Study, action: str) -> bool:
    """The study has reached the first phase that allows ``action``."""
    return services.has_opened(study, action)


@register.filter
def selection_fixed(study: Study) -> bool:
    """Voting has closed: the selection of attributes and metrics is fixed."""
    return services.selection_fixed(study)
