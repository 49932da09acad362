"""The one CSV writer of every CSV the product writes: the results, a
candidate's individual scores, two runs compared, a robustness analysis's
summary, the measurements' download and the History tab's export (the
pages, the API and the results published to MLflow).

A spreadsheet runs a text cell that starts with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return as a formula (OWASP's "CSV injection"): such a
cell is written with a leading apostrophe, which the spreadsheet shows as
text and drops. Every ``str`` is a text cell; numbers are given as numbers
(``int``, ``float``, NumPy's) and written as numbers, a float at full
precision (``repr``: ``-0.5`` stays ``-0.5``). A ``bool`` is written as
Python writes it (``True``), ``None`` as an empty cell.

Dependency-free (the standard library): kept apart for a later shared kernel.
"""

import csv
import io
from collections.abc import Iterable, Sequence
from numbers import Integral, Real

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CSV_CONTENT_TYPE = "text/csv; charset=utf-8"
# A download's first bytes, so that spreadsheet programs read the text as UTF-8.
BYTE_ORDER_MARK = b"\xef\xbb\xbf"


def text_cell(text: str) -> str:
    """A text cell a spreadsheet shows as text, never runs."""
    return f"'{text}" if text.startswith(FORMULA_START) else text


def cell(value: object) -> str:
    """What the writer writes for ``value`` (see the module's docstring)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return text_cell(value)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        return repr(float(value))
    raise TypeError(f"a CSV cell is text, a number, a bool or None, not {type(value).__name__}")


def csv_text(rows: Iterable[Sequence[object]], *, line_end: str = "\r\n") -> str:
    """``rows`` (the header first, if any) as CSV text, every cell through ``cell``."""
    out = io.StringIO()
    csv.writer(out, lineterminator=line_end).writerows([cell(value) for value in row] for row in rows)
    return out.getvalue()


def csv_download(rows: Iterable[Sequence[object]]) -> bytes:
    """``csv_text`` as a download's bytes: UTF-8 with a byte-order mark, CRLF lines."""
    return BYTE_ORDER_MARK + csv_text(rows).encode()
