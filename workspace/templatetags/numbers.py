"""Numbers as pages show them: ``{% load numbers %}{{ value|sig }}``.

One rounding for every computed number a page shows (measurements, ranges,
scores, weights, evaluation metrics): ``engine.rules.DISPLAY_SIGNIFICANT_DIGITS``
significant digits (docs/pages.md, "Numbers"). Exports keep full precision;
only the display rounds.
"""

import math
from decimal import Decimal

from django import template

from engine.rules import AHP_WEIGHTING_DEFAULT, AHP_WEIGHTINGS, DISPLAY_SIGNIFICANT_DIGITS

register = template.Library()

# Magnitudes outside [1e-4, 1e15) are written in scientific notation.
_SMALLEST_PLAIN_EXPONENT = -4
_LARGEST_PLAIN_EXPONENT = 15


def significant(value: float, digits: int = DISPLAY_SIGNIFICANT_DIGITS) -> str:
    """``value`` rounded to ``digits`` significant digits, without trailing
    zeros, so a typed 0.8 reads 0.8 (0.9019607843137255 -> ``0.902``,
    0.46469938650306747 -> ``0.4647``). Whole numbers
    are written whole (``6``, ``1234567``): their integer digits are never
    dropped. Below 1e-4 and from 1e15 in magnitude, scientific notation
    (``1.235e-05``). Not finite: ``nan``, ``inf``, ``-inf``."""
    if 1e-3 <= abs(value) < 10.0 ** (digits - 1) and not value.is_integer():
        # The common case (weights, scores, most measurements), what the
        # general rule gives for -3 <= exponent < digits - 1 without its
        # logarithm: pages write thousands.
        return _trimmed(f"{value:#.{digits}g}")
    return _significant(value, digits)


def _significant(value: float, digits: int) -> str:
    """:func:`significant` by its general rule."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 10**_LARGEST_PLAIN_EXPONENT:
        return str(int(value))
    exponent = math.floor(math.log10(abs(value)))
    if not _SMALLEST_PLAIN_EXPONENT <= exponent < _LARGEST_PLAIN_EXPONENT:
        mantissa, power = f"{value:.{digits - 1}e}".split("e")
        return f"{_trimmed(mantissa)}e{power}"
    if exponent + 1 >= digits:
        # At least as many integer digits as significant ones: rounded to a
        # whole number (12345.678 -> 12346), never to scientific notation.
        return f"{value:.0f}"
    # A carry into the next power of ten (999.96 -> 1000) stays below the
    # precision, so "g" stays plain.
    return _trimmed(f"{value:#.{digits}g}")


def _trimmed(shown: str) -> str:
    """Trailing zeros of a decimal fraction, and a bare point, dropped."""
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


@register.filter
def sig(value: object) -> object:
    """A number rounded for display (:func:`significant`); ``None`` becomes
    ``""`` (so ``|default:"–"`` follows), anything that is not a number is
    returned unchanged."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float | Decimal):
        return significant(float(value))
    try:
        return significant(float(str(value)))
    except ValueError:
        return value


@register.filter
def ahp_weighting(key: object) -> str:
    """How a run's snapshot computed AHP weights (its ``ahp_weighting``), in
    words (``engine.rules.AHP_WEIGHTINGS``); snapshots from before the
    setting have none and used the paper's method."""
    if not isinstance(key, str):
        key = AHP_WEIGHTING_DEFAULT
    return AHP_WEIGHTINGS.get(key, key)


@register.filter
def percent(value: object) -> str:
    """A share in [0, 1] as a percentage with one decimal ("71.2 %"); "" for
    anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return ""
    return f"{100 * float(value):.1f} %"
