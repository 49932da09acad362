"""Names of computations and their parameters as people read them."""

from django import template

from evaluation import report

register = template.Library()

PARAMETER_NAMES = {
    "threshold_method": "threshold method",
    "threshold_value": "fixed threshold",
    "threshold_sensitivity": "target sensitivity",
    "use_threshold": "labels from scores",
    "alpha": "α",
    "beta": "β",
    "root": "root N",
    "acc_d": "AccD",
    "n_parameters": "parameters",
}


@register.filter
def computation_name(key: str) -> str:
    computation = report.COMPUTATIONS.get(key)
    return computation.name if computation else key


@register.filter
def parameter_name(key: str) -> str:
    return PARAMETER_NAMES.get(key, key)
