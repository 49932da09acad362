"""What a revision round may tell an expert about the group's answers to one
input (METHOD.md 9; docs/method.md, "Revision-round feedback").

One function, :func:`summarise`, used for every input the rounds describe
(each attribute's and metric's weight, each metric's least acceptable and
desired value separately, the weight each expert receives from the others)
and for the experts' values of an elicited metric once the assessment has
closed. The pages and the API both read what it returns.

* Fewer than :data:`MIN_EXPERTS` answers: nothing (with two, any statistic
  and one's own answer give the other away).
* From :data:`MIN_EXPERTS` to ``FINE_MIN_EXPERTS - 1``: only the *band* of the
  median, ``[origin + i*step, origin + (i+1)*step]``, one coarse step wide
  (five percentage points for a weight, a twentieth of the metric's range for
  a bound). Neither a quartile nor a count per band is shown: with three or
  four answers either places the lowest or the highest in its band.
* From :data:`FINE_MIN_EXPERTS` on: the median and the quartiles as the order
  statistics ``x(a)`` and ``x(n+1-a)`` with ``a = max(2, (n+3)//4)`` (sorted
  ascending, counted from 1), never interpolated towards the lowest or the
  highest answer: ``x(1)`` and ``x(n)`` take no part in anything shown, so
  they stay free between the quartile and the end of the scale whatever one's
  own answers are.

Every input is summarised on its own: no statistic pairs two inputs of one
expert (a weight with another weight of the same expert, a least acceptable
value with its desired value), so the weights' summing to 1 links nothing
shown. No Django import here.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import core

__all__ = [
    "FINE_MIN_EXPERTS",
    "MIN_EXPERTS",
    "WEIGHT_STEP",
    "BOUND_STEPS",
    "Summary",
    "band_of",
    "bound_step",
    "quartile_rank",
    "summarise",
]

#: Fewer answers than this: nothing is shown.
MIN_EXPERTS = 3
#: From this many answers on, the median and quartiles at display precision.
FINE_MIN_EXPERTS = 5
#: A weight's coarse step: five percentage points.
WEIGHT_STEP = 0.05
#: A bound's coarse step is the metric's range over this.
BOUND_STEPS = 20


@dataclass(frozen=True)
class Summary:
    """The group's answers to one input, as shown.

    ``count`` answers; with fewer than FINE_MIN_EXPERTS only ``band`` (the
    coarse step holding the median, both ends included), else ``q1``,
    ``median`` and ``q3`` (``band`` None)."""

    count: int
    band: tuple[float, float] | None = None
    q1: float | None = None
    median: float | None = None
    q3: float | None = None

    @property
    def coarse(self) -> bool:
        return self.band is not None

    def as_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "median_band": list(self.band) if self.band is not None else None,
            "q1": self.q1,
            "median": self.median,
            "q3": self.q3,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Summary | None":
        if data is None:
            return None
        band = data.get("median_band")
        return cls(data["count"], tuple(band) if band is not None else None, data["q1"], data["median"], data["q3"])


def quartile_rank(n: int) -> int:
    """``a``, the 1-based rank of the lower quartile shown for ``n`` answers
    (the upper is ``n + 1 - a``): the rank nearest ``(n + 1) / 4``, and never
    below 2, so neither quartile is an extreme."""
    return max(2, (n + 3) // 4)


def _clean(value: float) -> float:
    """A band end without the float noise of ``origin + i * step``."""
    return float(f"{value:.12g}")


def band_of(value: float, *, step: float, origin: float = 0.0, top: float | None = None) -> tuple[float, float]:
    """The coarse step ``[origin + i*step, origin + (i+1)*step]`` holding
    ``value``; a value on a boundary belongs to the band above it, except
    ``top`` itself (the end of the scale, if it has one: 1 for a weight, the
    top of a metric's range), which belongs to the band below it."""
    if not (step > 0 and math.isfinite(step)):
        raise ValueError(f"step must be a positive finite number, got {step!r}")
    index = math.floor((value - origin) / step + 1e-9)
    if top is not None and abs(value - top) <= 1e-9 * max(1.0, abs(top)):
        index = math.ceil((top - origin) / step - 1e-9) - 1
    return _clean(origin + index * step), _clean(origin + (index + 1) * step)


def bound_step(low: float, high: float) -> float:
    """A bound's coarse step: a twentieth of the metric's range ``[low,
    high]`` (for a range of zero width, a twentieth of its magnitude, or of 1)."""
    width = high - low
    if not (width > 0 and math.isfinite(width)):
        width = max(abs(low), abs(high), 1.0) if math.isfinite(low) and math.isfinite(high) else 1.0
    return _clean(width / BOUND_STEPS)


def summarise(values: ArrayLike, *, step: float, origin: float = 0.0, top: float | None = None) -> Summary | None:
    """What the group's ``values`` of one input may show (module docstring):
    None below MIN_EXPERTS; the median's coarse band (``step``, ``origin``,
    ``top`` as :func:`band_of`) below FINE_MIN_EXPERTS; else the quartiles
    ``x(a)``, ``x(n+1-a)`` (:func:`quartile_rank`) and the median.

    ValueError when ``values`` is not a finite 1-D array."""
    values = np.sort(core._as_finite_array(values, "values", 1))
    n = int(values.size)
    if n < MIN_EXPERTS:
        return None
    median = float(np.median(values))
    if n < FINE_MIN_EXPERTS:
        return Summary(n, band=band_of(median, step=step, origin=origin, top=top))
    a = quartile_rank(n)
    return Summary(n, q1=float(values[a - 1]), median=median, q3=float(values[n - a]))


# --- a round's feedback, from its inputs ----------------------------------------------


def _given(values: list[Any]) -> list[float]:
    return [value for value in values if value is not None]


def _weight(values: list[Any]) -> dict[str, Any] | None:
    summary = summarise(_given(values), step=WEIGHT_STEP, origin=0.0, top=1.0)
    return summary.as_json() if summary is not None else None


def _bound(values: list[Any], span: tuple[float, float] | None) -> dict[str, Any] | None:
    given = _given(values)
    if span is None:
        # No range to step by: nothing below FINE_MIN_EXPERTS (a step taken
        # from the experts' own bounds would tell their extremes).
        if len(given) < FINE_MIN_EXPERTS:
            return None
        summary = summarise(given, step=1.0)
    else:
        low, high = span
        summary = summarise(given, step=bound_step(low, high), origin=low, top=high)
    return summary.as_json() if summary is not None else None


def _step(span: tuple[float, float] | None) -> float | None:
    return bound_step(span[0], span[1]) if span is not None else None


def round_feedback(snapshot: Mapping[str, Any], spans: list[tuple[float, float] | None]) -> dict[str, Any]:
    """A round's group feedback, as JSON, from the experts' inputs
    ``snapshot`` (``workspace.selectors.snapshot.inputs_snapshot``'s layout) and each
    selected metric's range ``spans[j]`` (``(low, high)``, what is known of
    the metric without the experts' bounds; None when nothing is): each
    input summarised on its own (:func:`summarise`), nothing per expert.
    Computed once, when the round opens, and kept with it."""

    def column(grid: list[list[Any]], j: int) -> list[Any]:
        return [row[j] for row in grid if row]

    raters = [row for row in snapshot["peer_weights"] if row and None not in row]
    return {
        "attributes": [
            {"name": name, "group": _weight(column(snapshot["attribute_weights"], j))}
            for j, name in enumerate(snapshot["attributes"])
        ],
        "metrics": [
            {"name": m["name"], "attribute": m["attribute"], "group": _weight(column(snapshot["metric_weights"], j))}
            for j, m in enumerate(snapshot["metrics"])
        ],
        "ranges": [
            {
                "name": m["name"],
                "better": m["better"],
                "unit": m["unit"],
                "step": _step(spans[j]),
                "least_acceptable": _bound(column(snapshot["lower"], j), spans[j]),
                "desired": _bound(column(snapshot["upper"], j), spans[j]),
            }
            for j, m in enumerate(snapshot["metrics"])
        ],
        "peer_weights": [
            {"name": name, "group": _weight([row[j] for row in raters])} for j, name in enumerate(snapshot["experts"])
        ],
    }
