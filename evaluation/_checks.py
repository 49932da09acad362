"""Argument checks shared by the pure modules of ``evaluation`` (metrics, elicitation).

No Django import here. The sum rule is the engine's (``engine.core``, METHOD.md
intro): a sum that must equal 1 is checked to within 1e-6, then made exact.
"""

from collections.abc import Iterable

import numpy as np

from engine.arguments import integer, positive_number  # noqa: F401  (re-exported for the library)
from engine.core import ROW_SUM_TOLERANCE, sums_to_one

# How many offending samples, rows or pairs an error message lists.
MAX_LISTED = 10


def listed(items: Iterable[object]) -> str:
    """Items joined by commas, the first MAX_LISTED of them, then how many in all."""
    items = list(items)
    text = ", ".join(str(item) for item in items[:MAX_LISTED])
    if len(items) > MAX_LISTED:
        text += f", ... ({len(items)} in all)"
    return text


def renormalised_rows(array: np.ndarray, name: str) -> np.ndarray:
    """Rows of a 2-D array checked to sum to 1 within ROW_SUM_TOLERANCE, then made to sum to 1 exactly."""
    row_sums = array.sum(axis=1)
    off = np.flatnonzero(~sums_to_one(row_sums))
    if len(off):
        raise ValueError(
            f"every row of {name} must sum to 1 within {ROW_SUM_TOLERANCE:g}; rows {listed(off)} do not "
            f"(row {off[0]} sums to {row_sums[off[0]]:.10g})"
        )
    return array / row_sums[:, None]
