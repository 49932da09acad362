"""Measurements as CSV: parse a pasted or uploaded table into the entries
``services.measurements_set`` takes, or refuse it whole with line-numbered
errors ("line 14, column Success rate: not a number ('n/a')").

Two layouts, told apart by the header row:

- long: ``candidate,metric,value``, one measurement per row, optionally
  with a fourth column ``standard_error``;
- wide: ``candidate`` then one column per metric name, one candidate per
  row; an empty cell leaves that value unmeasured. A column named
  ``<metric> (standard error)`` after its metric's holds the values'
  standard errors.

Where a standard-error column is given, a number sets the value's standard
error and an empty cell removes it; without the column, standard errors are
left as they are.

Commas separate the columns; a header with tabs (a paste from a spreadsheet)
or with semicolons and no comma switches to that separator. Pure: no
database, the study's names are given; the caller writes nothing unless
the whole text parses. ``measurements_csv_text`` writes the wide layout
back: the measurements page's download of every value.
"""

import csv
import math
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

from .csv_safe import csv_text

LONG_HEADER = ["candidate", "metric", "value"]
LONG_HEADER_ERRORS = [*LONG_HEADER, "standard_error"]
# The wide layout's column of a metric's standard errors: "<metric> (standard error)".
ERROR_SUFFIX = " (standard error)"
# Errors listed before the rest are only counted: a wrong file should not
# produce a page of thousands of lines.
MAX_ERRORS_SHOWN = 30
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


class CsvRefused(Exception):
    """The text is refused; ``errors`` lists why, each naming its line."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


class Row(NamedTuple):
    candidate: str
    metric: str
    value: float
    line: int  # where it was read, to point back at it
    standard_error: float | None = None
    error_given: bool = False  # a standard-error column was there (None then removes it)


def number_parse(text: str) -> float:
    """A finite decimal number written with a point (``0.85``, ``-2``,
    ``1e-3``), or ValueError saying what is wrong."""
    text = text.strip()
    if not text:
        raise ValueError("empty")
    if not _NUMBER.fullmatch(text):
        hint = "; use a point for decimals" if re.fullmatch(r"[+-]?\d+,\d+", text) else ""
        raise ValueError(f"not a number ({text!r}){hint}")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"too large to be a number ({text!r})")
    return value


def text_decode(data: bytes) -> str:
    """An uploaded file's text: UTF-8, with or without a byte-order mark."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CsvRefused([f"the file is not UTF-8 text (byte {error.start + 1} is not valid UTF-8)"]) from None


def _delimiter(first_line: str) -> str:
    if "\t" in first_line:
        return "\t"
    if ";" in first_line and "," not in first_line:
        return ";"
    return ","


class _Errors:
    def __init__(self) -> None:
        self.shown: list[str] = []
        self.more = 0

    def add(self, line: int, message: str, column: str | None = None) -> None:
        if len(self.shown) < MAX_ERRORS_SHOWN:
            where = f"line {line}" if column is None else f"line {line}, column {column}"
            self.shown.append(f"{where}: {message}")
        else:
            self.more += 1

    def raise_any(self) -> None:
        if self.shown:
            extra = [f"… and {self.more} more error{'s' if self.more != 1 else ''}"] if self.more else []
            raise CsvRefused(self.shown + extra)


def _cells(row: list[str], width: int) -> list[str] | None:
    """The row's cells stripped and padded to the header's width; None when
    it has more non-empty cells than the header has columns."""
    cells = [cell.strip() for cell in row]
    if len(cells) > width and any(cells[width:]):
        return None
    return (cells + [""] * width)[:width]


def _header(header: list[str], metrics: Collection[str], errors: _Errors) -> tuple[bool, list[str]]:
    """(long layout?, the columns) from the header row, errors noted."""
    columns = [cell.strip() for cell in header]
    while columns and not columns[-1]:
        columns.pop()  # trailing separators, as spreadsheets write them
    if [column.casefold() for column in columns] in (LONG_HEADER, LONG_HEADER_ERRORS):
        return True, [column.casefold() for column in columns]
    if not columns or columns[0].casefold() != "candidate":
        errors.add(1, "the first column must be 'candidate' (then either 'metric,value', or one column per metric)")
        return False, columns
    _metric_columns_check(columns[1:], metrics, errors)
    if len(columns) == 1:
        errors.add(1, "no metric columns: add 'metric,value' or one column per metric after 'candidate'")
    return False, ["candidate", *columns[1:]]


def _metric_columns_check(names: list[str], metrics: Collection[str], errors: _Errors) -> None:
    """Notes an error for each wide-layout column after 'candidate' that has
    no name, repeats an earlier one, is a standard-error column without its
    metric's column, or names no metric of the study."""
    seen = set()
    for position, name in enumerate(names, start=2):
        if not name:
            errors.add(1, "the column has no name (it must be a metric's name)", column=str(position))
        elif name in seen:
            errors.add(1, "the metric is given twice", column=name)
        elif name not in metrics and name.endswith(ERROR_SUFFIX) and name[: -len(ERROR_SUFFIX)] in metrics:
            if name[: -len(ERROR_SUFFIX)] not in names:
                errors.add(1, "a standard-error column needs its metric's column too", column=name)
        elif name not in metrics:
            errors.add(1, f"no metric named {name!r} in this study", column=name)
        seen.add(name)


def measurements_parse(text: str, *, candidates: Collection[str], metrics: Collection[str], max_rows: int) -> list[Row]:
    """Every measurement of ``text``, in its order; ``CsvRefused`` listing
    every problem otherwise (names must be the study's ``candidates`` and
    ``metrics``; at most ``max_rows`` measurements)."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise CsvRefused(["the CSV is empty: give a header row, then one row per candidate or measurement"])
    errors = _Errors()
    reader = csv.reader(lines, delimiter=_delimiter(lines[0]))
    try:
        is_long, columns = _header(next(reader), metrics, errors)
        errors.raise_any()  # the rows mean nothing under a wrong header
        rows = _rows(reader, is_long, columns, candidates, metrics, errors, max_rows)
    except csv.Error as error:
        raise CsvRefused([f"line {reader.line_num}: not readable as CSV ({error})"]) from None
    errors.raise_any()
    if not rows:
        raise CsvRefused(["the CSV has a header but no measurements"])
    return rows


def _rows(
    reader: Any,  # a csv.reader: rows, and the line it has read up to
    is_long: bool,
    columns: list[str],
    candidates: Collection[str],
    metrics: Collection[str],
    errors: _Errors,
    max_rows: int,
) -> list[Row]:
    rows: list[Row] = []
    first_line: dict[tuple[str, str], int] = {}
    for raw in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in raw):
            continue
        cells = _cells(raw, len(columns))
        if cells is None:
            errors.add(line, f"{len(raw)} values, but the header has {len(columns)} columns")
            continue
        candidate = cells[0]
        _candidate_check(candidate, line, candidates, errors)
        if is_long:
            pairs, error_cells = _long_pairs(cells, line, len(columns), metrics, errors)
        else:
            pairs, error_cells = _wide_pairs(cells, line, columns, metrics, errors)
        _pairs_add(rows, first_line, candidate, pairs, error_cells, line, errors)
    if len(rows) > max_rows:
        raise CsvRefused([f"too many measurements: {len(rows)} given, the limit is {max_rows} at once"])
    return rows


# (metric, value cell, the value's column) of one row
_Pairs = list[tuple[str, str, str]]
# metric -> (its standard-error cell, that cell's column)
_ErrorCells = dict[str, tuple[str, str]]


def _candidate_check(candidate: str, line: int, candidates: Collection[str], errors: _Errors) -> None:
    """Notes an error when the row's candidate cell is empty or names no
    candidate of the study."""
    if not candidate:
        errors.add(line, "empty: name the candidate", column="candidate")
    elif candidate not in candidates:
        errors.add(line, f"no candidate named {candidate!r} in this study", column="candidate")


def _long_pairs(
    cells: list[str], line: int, width: int, metrics: Collection[str], errors: _Errors
) -> tuple[_Pairs, _ErrorCells]:
    """A long-layout row's one measurement (and its standard-error cell when
    the header has that column); an error noted when the metric cell is
    empty or names no metric of the study."""
    error_cells = {cells[1]: (cells[3], "standard_error")} if width == 4 else {}
    pairs = [(cells[1], cells[2], "value")]
    if not cells[1]:
        errors.add(line, "empty: name the metric", column="metric")
    elif cells[1] not in metrics:
        errors.add(line, f"no metric named {cells[1]!r} in this study", column="metric")
    return pairs, error_cells


def _wide_pairs(
    cells: list[str], line: int, columns: list[str], metrics: Collection[str], errors: _Errors
) -> tuple[_Pairs, _ErrorCells]:
    """A wide-layout row's measurements (the metrics with a non-empty cell)
    and standard-error cells; an error noted for each standard error whose
    metric's cell is empty."""
    named = dict(zip(columns[1:], cells[1:], strict=True))
    error_cells = {
        name[: -len(ERROR_SUFFIX)]: (cell, name)
        for name, cell in named.items()
        if name not in metrics and name.endswith(ERROR_SUFFIX)
    }
    # An empty cell of the wide table leaves the value unmeasured.
    pairs = [(metric, cell, metric) for metric, cell in named.items() if cell and metric in metrics]
    for metric, (cell, column) in error_cells.items():
        if cell and not named.get(metric):
            errors.add(line, "a standard error needs its value (the metric's cell is empty)", column=column)
    return pairs, error_cells


def _pairs_add(
    rows: list[Row],
    first_line: dict[tuple[str, str], int],
    candidate: str,
    pairs: _Pairs,
    error_cells: _ErrorCells,
    line: int,
    errors: _Errors,
) -> None:
    """Appends to ``rows`` each pair whose value (and standard error) parse
    and whose candidate / metric is not given on an earlier line
    (``first_line``, updated); an error noted for every other pair."""
    for metric, cell, column in pairs:
        try:
            value = number_parse(cell)
            error = _error_parse(*error_cells[metric]) if metric in error_cells else None
        except ValueError as problem:
            # (message,) from number_parse; (message, column) from _error_parse
            errors.add(line, problem.args[0], column=problem.args[1] if len(problem.args) > 1 else column)
            continue
        key = (candidate, metric)
        if key in first_line:
            errors.add(line, f"{candidate} / {metric} is already given on line {first_line[key]}")
            continue
        first_line[key] = line
        rows.append(Row(candidate, metric, value, line, error, metric in error_cells))


def _error_parse(cell: str, column: str) -> float | None:
    """A standard-error cell: None when empty, else a number >= 0;
    ValueError(message, column) otherwise."""
    if not cell:
        return None
    try:
        error = number_parse(cell)
    except ValueError as problem:
        raise ValueError(str(problem), column) from None
    if error < 0:
        raise ValueError(f"a standard error must be 0 or more, got {cell!r}", column)
    return error


def rows_as_measurements(rows: list[Row]) -> list[dict]:
    """The rows as ``services.measurements_set`` takes them (with
    ``standard_error`` where the CSV had a standard-error column)."""
    return [
        {
            "candidate": row.candidate,
            "metric": row.metric,
            "value": row.value,
            **({"standard_error": row.standard_error} if row.error_given else {}),
        }
        for row in rows
    ]


def measurements_csv_text(*, candidates: list[str], metrics: list[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """Every measurement in the wide layout the parser reads: a header
    ``candidate`` then one column per metric, one row per candidate (every
    candidate, in the order given), an empty cell where a value is not
    measured, numbers at full precision (``repr``). A metric with any
    standard error is followed by its column ``<metric> (standard error)``,
    empty where a value has none. ``rows`` are ``{candidate__name,
    metric__name, value}``, optionally with ``standard_error``. A name a spreadsheet would
    run as a formula is written with a leading ``'``, as in every CSV
    (``workspace.csv_safe``)."""
    rows = list(rows)
    with_errors = {row["metric__name"] for row in rows if row.get("standard_error") is not None}
    header = [name for m in metrics for name in ([m, m + ERROR_SUFFIX] if m in with_errors else [m])]
    column = {name: i for i, name in enumerate(header)}
    table: dict[str, list[object]] = {name: [None] * len(header) for name in candidates}
    for row in rows:
        values = table[row["candidate__name"]]
        values[column[row["metric__name"]]] = float(row["value"])
        if row.get("standard_error") is not None:
            values[column[row["metric__name"] + ERROR_SUFFIX]] = float(row["standard_error"])
    return csv_text([["candidate", *header], *([name, *values] for name, values in table.items())])
