"""Argument checks shared by the pure numeric modules (engine.core,
engine.prioritisation, the evaluation library): one wording for a bad
count or a bad positive number, wherever it is refused. NumPy-free and
Django-free."""

import math
import operator
from typing import SupportsFloat, SupportsIndex, cast


def integer(value: object, name: str, *, minimum: int) -> int:
    """``value`` as an int of at least ``minimum`` (a bool or a float with a fraction is refused)."""
    kind = "positive" if minimum == 1 else "non-negative" if minimum == 0 else f">= {minimum}"
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a {kind} integer, got {value!r}")
    try:
        number = operator.index(cast(SupportsIndex, value))  # a TypeError otherwise, caught
    except TypeError:
        raise ValueError(f"{name} must be a {kind} integer, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{name} must be a {kind} integer, got {number}")
    return number


def positive_number(value: object, name: str) -> float:
    """``value`` as a finite float greater than 0."""
    try:
        number = float(cast(SupportsFloat, value))  # a TypeError or ValueError otherwise, caught
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return number
