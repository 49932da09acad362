"""The method's rules, each defined once: the input rules (METHOD.md
sections 3-5) and when two scores are equal (section 6.2).

The engine's math (``engine.prioritisation``, ``engine.core``), the models'
database constraints, the services that refuse bad input and the API that
reports consistency all import these; none of them writes a threshold of its
own. The one rule kept where the engine computes with it is the sum rule:
``engine.core.ROW_SUM_TOLERANCE`` and ``engine.core.sums_to_one``.

No Django import here, and no import from the rest of ``engine``, so every
module can depend on this one.
"""

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "AHP_WEIGHTINGS",
    "AHP_WEIGHTING_DEFAULT",
    "CONSISTENCY_THRESHOLD",
    "DISPLAY_SIGNIFICANT_DIGITS",
    "MIN_DIRECT_SHARE",
    "MIN_PEER_WEIGHT",
    "PERCENT_TOTAL",
    "PERCENT_TOTAL_SLACK",
    "SCALE_DATABASE_SLACK",
    "SCALE_DATABASE_SLACK_ABOVE",
    "SCALE_ENGINE_SLACK",
    "SCALE_INPUT_SLACK",
    "SCALE_MAX",
    "SCALE_MIN",
    "SCALE_POINTS",
    "SCALE_POINT_SLACK",
    "SCALE_VALUES",
    "TIE",
    "beats",
    "direct_shares",
    "is_consistent",
    "nearest_scale_point",
    "on_input_scale",
    "out_of_proportion",
    "range_direction_problem",
    "range_width_invalid",
    "scale_point_of",
    "to_scale",
]

# --- consistency (METHOD.md 3) ----------------------------------------------------

#: A consistency ratio above this is shown as inconsistent: a warning, never
#: a refusal. Exactly 0.10 is still consistent.
CONSISTENCY_THRESHOLD = 0.10


def is_consistent(consistency_ratio: float) -> bool:
    """``CR <= 0.10`` (METHOD.md 3: "CR > 0.10 is shown as inconsistent")."""
    return consistency_ratio <= CONSISTENCY_THRESHOLD


# --- how AHP weights come from judgments (METHOD.md 3; docs/method.md) -------------------

#: The study settings for computing weights from a pairwise comparison
#: matrix (``engine.prioritisation.ahp_weights``), each with the sentence the
#: priorities page completes: "Weights from your judgments are computed by ...".
AHP_WEIGHTINGS: dict[str, str] = {
    "column_means": "the row means of the column-normalised matrix (the paper's method, from its appendix)",
    "eigenvector": "the principal eigenvector (as AHP-OS, AHPy and Expert Choice do)",
    "geometric_mean": "the normalised geometric means of the rows (the row geometric mean method, as AHP-OS offers)",
}

#: The paper's method is the default, and the method of bundles that name none.
AHP_WEIGHTING_DEFAULT = "column_means"


# --- equal scores (METHOD.md 6.2) -------------------------------------------------------

#: Two CEFs are equal when they differ by at most this (absolute; a CEF lies
#: in [0, 1]), so two roundings of the same exact value (6/25 computed as
#: 0.24 and as 0.24000000000000002) never order two candidates. Every
#: ranking uses it through :func:`beats`: the results, the what-if, the
#: comparison of two runs, the weights' sensitivity, the Monte Carlo rank
#: counts and leave one expert out.
TIE = 1e-12


def beats(first: ArrayLike, second: ArrayLike) -> np.ndarray:
    """``first > second + TIE`` elementwise (METHOD.md 6.2: "CEF_d > CEF_c"
    in section 8 means "CEF_d > CEF_c + TIE"); neither beats the other when
    they are equal. A competition rank is ``1 + #{d : beats(CEF_d, CEF_c)}``."""
    return np.asarray(first, dtype=np.float64) > np.asarray(second, dtype=np.float64) + TIE


# --- display (docs/pages.md, "Numbers") -----------------------------------------------

#: Pages show computed numbers (measurements, ranges, scores, weights,
#: evaluation metrics) rounded to this many significant digits, through the
#: ``sig`` template filter (``workspace.templatetags.numbers``). Exports (CSV,
#: JSON documents, bundles) keep every digit.
DISPLAY_SIGNIFICANT_DIGITS = 4


# --- the pairwise scale (METHOD.md 3) -----------------------------------------------

#: Judgments lie on Saaty's scale 1/9..9.
SCALE_MIN = 1.0 / 9.0
SCALE_MAX = 9.0

#: The engine's relative slack at both ends: lets a reciprocal rounded to ten
#: digits (0.1111111111 for 1/9) through ``pairwise_matrix``.
SCALE_ENGINE_SLACK = 1e-9

#: What an expert may type below 1/9, relative: lets 1/9 typed as 0.1111
#: through. Values in the slack are stored as typed and moved onto the scale
#: (:func:`to_scale`) before the engine sees them.
SCALE_INPUT_SLACK = 5e-4

#: The database's absolute slack below 1/9 (the judgment tables' CHECK
#: constraints): 1e-4, i.e. a relative 9e-4. It must stay above
#: SCALE_INPUT_SLACK or an accepted value would violate the constraint.
SCALE_DATABASE_SLACK = 1e-4

#: The database's absolute slack above 9: a stored 9.0 that floating point
#: moved by an ulp still passes the CHECK constraint.
SCALE_DATABASE_SLACK_ABOVE = 1e-9


#: Saaty's 17 points, ascending: 1/9, 1/8, ..., 1/2, 1, 2, ..., 9, exactly.
SCALE_POINTS: tuple[Fraction, ...] = tuple(Fraction(1, v) for v in range(9, 1, -1)) + tuple(
    Fraction(v) for v in range(1, 10)
)

#: The same points as doubles (1/3 is the double nearest a third).
SCALE_VALUES: np.ndarray = np.array([float(point) for point in SCALE_POINTS])

_LOG_SCALE_VALUES = np.log(SCALE_VALUES)


def nearest_scale_point(value: float) -> Fraction:
    """The point of the scale nearest ``value`` (positive), nearest in log
    space: the scale is multiplicative (1/3 is as far from 1 as 3), so 1.4
    goes to 1 and 1.45 to 2 (the geometric midpoint is sqrt(2) = 1.414).

    A tie goes to the smaller point: sqrt(12) gives 3, sqrt(72) gives 8. The
    distances are the doubles ``|log(point) - log(value)|``, so a tie is
    their exact equality (sqrt(12) and sqrt(72) as doubles are ties; sqrt(20)
    lies nearer 5 by a rounding). The repair hints
    (``engine.prioritisation.most_inconsistent``) and the expert's page
    (``workspace.forms.expert``) both round with this function."""
    distances = np.abs(_LOG_SCALE_VALUES - math.log(value))
    # argmin takes the first of equal distances, and the points ascend.
    return SCALE_POINTS[int(np.argmin(distances))]


#: How far, in log space, a stored judgment may lie from a point and still
#: read as that point on the expert's page: judgments typed through the API
#: with three decimals (0.143 for 1/7, log distance 0.00099) are points.
SCALE_POINT_SLACK = 1e-3


def scale_point_of(value: float) -> tuple[Fraction, bool]:
    """The point nearest ``value`` (``nearest_scale_point``), and whether
    ``value`` lies on it, within SCALE_POINT_SLACK in log space."""
    nearest = nearest_scale_point(value)
    return nearest, abs(math.log(nearest) - math.log(value)) < SCALE_POINT_SLACK


def on_input_scale(value: float) -> bool:
    """A typed judgment is accepted: within 1/9..9, with SCALE_INPUT_SLACK below 1/9."""
    return SCALE_MIN * (1 - SCALE_INPUT_SLACK) <= value <= SCALE_MAX


def to_scale(value: float) -> float:
    """An accepted judgment moved onto the scale (the slack below 1/9 becomes 1/9)."""
    return min(max(value, SCALE_MIN), SCALE_MAX)


# --- direct weights (METHOD.md 3) -------------------------------------------------------

#: Every normalised direct weight must be at least this (and below 1): a
#: smaller share is indistinguishable from the zero weight METHOD.md 3 forbids
#: in the sums the engine makes (and would be a subnormal double in the
#: database at 1e-308).
MIN_DIRECT_SHARE = 1e-6


def direct_shares(weights: Sequence[float]) -> np.ndarray:
    """Positive finite weights normalised to sum to 1. They are scaled by the
    largest first, so weights near the largest double add up without
    overflowing."""
    values = np.asarray(weights, dtype=np.float64)
    values = values / values.max()
    return values / math.fsum(values)


def out_of_proportion(shares: np.ndarray) -> np.ndarray:
    """Positions of the shares outside [MIN_DIRECT_SHARE, 1): with more than
    one item every weight must lie strictly inside (0, 1) (METHOD.md 3). One
    item alone takes the whole weight."""
    shares = np.asarray(shares, dtype=np.float64)
    if shares.size <= 1:
        return np.array([], dtype=np.intp)
    return np.flatnonzero((shares < MIN_DIRECT_SHARE) | (shares >= 1.0))


# --- peer weights (METHOD.md 5) ---------------------------------------------------------

#: The smallest peer weight an expert may give. METHOD.md 5 only asks for a
#: positive weight, but the aggregation's layer count grows like the inverse
#: of the smallest weight (1e-5 takes about a million layers, counted by
#: repeated squaring); 1e-6 keeps it bounded, while 5e-324 would make a run
#: fail after launch.
MIN_PEER_WEIGHT = 1e-6

#: Pages take peer weights as percentages adding up to this; the services
#: store shares of 1 (checked by ``engine.core.sums_to_one``).
PERCENT_TOTAL = 100

#: How far a typed total of percentages may be from PERCENT_TOTAL and still
#: be shown as complete (the page, and static/js/expert.js through the
#: template's ``data-total-slack``).
PERCENT_TOTAL_SLACK = 1e-9


# --- acceptable ranges (METHOD.md 4) ------------------------------------------------------


def range_width_invalid(least_acceptable: ArrayLike, desired: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Masks ``(unbounded, empty)`` of the ranges the engine cannot score:
    a width ``desired - least_acceptable`` that overflows, and equal bounds.
    Works on scalars and on arrays of any shape."""
    least = np.asarray(least_acceptable, dtype=np.float64)
    most = np.asarray(desired, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        unbounded = ~np.isfinite(most - least)
    return unbounded, least == most


def range_direction_problem(least_acceptable: float, desired: float, better: str) -> str | None:
    """Why ``[least_acceptable, desired]`` contradicts the metric's direction
    (``"higher"`` or ``"lower"`` is better), or None."""
    if better == "higher" and least_acceptable > desired:
        return (
            f"higher is better, so the least acceptable value ({least_acceptable:g}) "
            f"must be below the desired value ({desired:g})"
        )
    if better == "lower" and least_acceptable < desired:
        return (
            f"lower is better, so the least acceptable value ({least_acceptable:g}) "
            f"must be above the desired value ({desired:g})"
        )
    return None
