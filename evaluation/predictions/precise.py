"""The precise reader of ``approve-predictions/1`` (``evaluation.predictions``):
a CSV read row by row with the standard library's csv module, every rule
checked on every row, and a refused file's errors named by line and column
(``line 14, column proba:benign: not a number ('abc')``). The Arrow reader
(``arrow``) fills this module's ``_Reader`` from pyarrow's batches and
assembles its arrays with ``_assemble``, so that both readers apply the same
rules; a CSV it gives up on is read here, from the start.

Pure: the standard library and NumPy, no Django and no pyarrow. It imports
``_common`` alone of the package.

Speed: the file is read in blocks of ``BLOCK_BYTES`` and parsed in chunks of
``CHUNK_ROWS`` rows; each chunk's columns are converted by NumPy in bulk and
labels are mapped to codes through dicts, so no Python object per row
outlives its chunk. Whole-file checks (undeclared labels, folds, duplicate
instances) run on the concatenated arrays.

Classes: with ``max_classes``, the distinct labels (y_true's, y_pred's and
the declared ones) are counted after each chunk, and the reading stops at
the chunk that passes the limit (a header declaring more is refused before
any row): no label table holds more than the limit and one chunk.
"""

import _csv
import csv
import difflib
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import IO, Any

import numpy as np

from engine.core import ROW_SUM_TOLERANCE

from ._common import (
    BLOCK_BYTES,
    CHUNK_ROWS,
    COLUMNS_HELP,
    CONTEXT,
    FIXED_COLUMNS,
    NO_TEXT_LIMITS,
    PROBA,
    QUOTE_MAX_CHARS,
    CandidatePredictions,
    PredictionData,
    PredictionFileError,
    PredictionFileTooLong,
    TextLimits,
    _classes_error,
    _Errors,
    _quoted,
    _size_error,
    cut,
    distinct_bytes_error,
    instance_bytes_error,
    known_size,
    shown,
    too_long_error,
)

# --- reading text -----------------------------------------------------------------------


class _Text:
    """The file's text in blocks, decoded strictly as UTF-8, each block cut
    after a line break so that a decoding error can be placed on its line.
    Counts the bytes read (``size``) and refuses a file over ``max_bytes``."""

    def __init__(self, stream: IO, max_bytes: int | None) -> None:
        self.stream = stream
        self.max_bytes = max_bytes
        self.size = 0
        if max_bytes is not None:
            known = known_size(stream)
            if known is not None and known > max_bytes:
                raise _size_error(known, max_bytes)

    def _raw_blocks(self) -> Iterator[bytes]:
        while True:
            block = self.stream.read(BLOCK_BYTES)
            if not block:
                return
            if isinstance(block, str):  # a text stream: already decoded
                block = block.encode("utf-8", "surrogatepass")
            self.size += len(block)
            if self.max_bytes is not None and self.size > self.max_bytes:
                raise _size_error(None, self.max_bytes)
            yield block

    def _parts(self) -> Iterator[bytes]:
        """Runs of whole lines (the last one may lack its line break)."""
        carry = b""
        for block in self._raw_blocks():
            block = carry + block
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                yield block[:cut]
        if carry:
            yield carry

    def blocks(self) -> Iterator[io.StringIO]:
        lines_before = 0
        offset = 0
        for part in self._parts():
            try:
                text = part.decode("utf-8")
            except UnicodeDecodeError as error:
                line = lines_before + part.count(b"\n", 0, error.start) + 1
                raise PredictionFileError(
                    [
                        f"line {line}: the file is not UTF-8 text (byte {offset + error.start + 1} is not valid "
                        "UTF-8); save it as UTF-8"
                    ]
                ) from None
            if offset == 0:
                text = text.removeprefix("\ufeff")
            nul = text.find("\x00")
            if nul >= 0:
                line = lines_before + text.count("\n", 0, nul) + 1
                raise PredictionFileError([f"line {line}: holds a NUL character, which is not text (a binary file?)"])
            lines_before += part.count(b"\n")
            offset += len(part)
            # newline="": lines split at \n, \r\n or \r and keep their ends,
            # as the csv module wants them.
            yield io.StringIO(text, newline="")


def _lines(text: _Text) -> Iterator[str]:
    return chain.from_iterable(text.blocks())


# --- the header ---------------------------------------------------------------------------


@dataclass
class _Layout:
    width: int
    line: int | None  # the header's line (None: a Parquet file's schema)
    fixed: dict[str, int]  # column name -> position
    proba: list[tuple[str, int]]  # (label, position), header order
    context: list[tuple[str, int]]  # (name, position), header order


def _header(
    cells: list[str], line: int | None, *, one_candidate: bool, positive: str | None, errors: _Errors
) -> _Layout:
    names = [cell.strip() for cell in cells]
    layout = _Layout(width=len(names), line=line, fixed={}, proba=[], context=[])
    if not any(name in FIXED_COLUMNS or name.startswith((PROBA, CONTEXT)) for name in names):
        errors.add(
            f"no header: the first line must name the columns ({COLUMNS_HELP}); it reads {_quoted(names[:5])}",
            line=line,
        )
        errors.raise_any()
    first_position: dict[str, int] = {}
    for position, (cell, name) in enumerate(zip(cells, names, strict=True), start=1):
        _header_column(layout, first_position, cell, name, position, errors)
    _header_required(layout, one_candidate=one_candidate, positive=positive, errors=errors)
    errors.raise_any()  # the rows mean nothing under a wrong header
    return layout


def _header_column(
    layout: _Layout, first_position: dict[str, int], cell: str, name: str, position: int, errors: _Errors
) -> None:
    """One column of the header (``position`` from 1) placed in the layout,
    or its error: no name, given twice, unknown, a prefix without a name."""
    line = layout.line
    if name.startswith((PROBA, CONTEXT)):
        # A label or context name as written, like y_true's: only the
        # space before the prefix goes.
        name = cell.lstrip()
    if not name:
        errors.add("the column has no name", line=line, column=str(position))
        return
    if name in first_position:
        errors.add(f"the column is given twice (columns {first_position[name]} and {position})", line=line, column=name)
        return
    first_position[name] = position
    if name in FIXED_COLUMNS:
        layout.fixed[name] = position - 1
    elif name.startswith((PROBA, CONTEXT)):
        prefix = PROBA if name.startswith(PROBA) else CONTEXT
        rest = name[len(prefix) :]
        if not rest:
            what = "label" if prefix == PROBA else "context"
            errors.add(f"name the {what} after {prefix!r}", line=line, column=name)
        else:
            (layout.proba if prefix == PROBA else layout.context).append((rest, position - 1))
    else:
        close = difflib.get_close_matches(name.casefold(), [*FIXED_COLUMNS, "proba:", "context:"], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        errors.add(f"unknown column{hint} (the columns are {COLUMNS_HELP})", line=line, column=name)


def _header_required(layout: _Layout, *, one_candidate: bool, positive: str | None, errors: _Errors) -> None:
    """The columns every file needs, and the positive label a score needs."""
    line = layout.line
    if "y_true" not in layout.fixed:
        errors.add("missing column y_true (the true label of each row)", line=line)
    if "candidate" not in layout.fixed and not one_candidate:
        errors.add(
            "missing column candidate (the candidate of each row), or upload the file for one candidate", line=line
        )
    if not ({"y_pred", "score"} & set(layout.fixed) or layout.proba):
        errors.add("missing predictions: give a y_pred, score or proba:<label> column", line=line)
    if "score" in layout.fixed and positive is None:
        errors.add("a score is the positive label's: name the positive label", line=line, column="score")


# --- the rows -----------------------------------------------------------------------------


class _Codes(dict):
    """Text → code, a new code for each new key, in order of first appearance."""

    def __missing__(self, key: Any) -> int:
        code = self[key] = len(self)
        return code

    def encode(self, values: Sequence[Any]) -> tuple[np.ndarray, int]:
        """The codes of ``values`` (a sized iterable) and the first new code."""
        known = len(self)
        codes = np.fromiter(map(self.__getitem__, values), dtype=np.int32, count=len(values))
        return codes, known


def _reader(
    layout: "_Layout",
    errors: _Errors,
    candidate: str | None,
    allowed: set[str] | None,
    positive: str | None,
    max_classes: int | None,
    text_limits: TextLimits,
) -> "_Reader":
    """A file's reader (of either format) with the options it was read with."""
    return _Reader(
        layout,
        candidate=candidate,
        candidates=allowed,
        errors=errors,
        positive=positive,
        max_classes=max_classes,
        text_limits=text_limits,
    )


def _first_lines(codes: np.ndarray, since: int, lines: np.ndarray) -> dict[int, int]:
    """The line where each code from ``since`` on first appears in ``codes``."""
    new = np.flatnonzero(codes >= since)
    if not len(new):
        return {}
    found, first = np.unique(codes[new], return_index=True)
    return {int(code): int(lines[new[index]]) for code, index in zip(found, first, strict=True)}


def _line_numbers(rows: list[list[str]], before: int, after: int) -> np.ndarray:
    """The line each row starts on, ``before`` being the line read before
    the first: consecutive, unless a quoted cell holds a line break."""
    if after - before == len(rows):
        return np.arange(before + 1, after + 1, dtype=np.int64)
    starts = np.empty(len(rows), dtype=np.int64)
    line = before
    for index, row in enumerate(rows):
        line += 1
        starts[index] = line
        line += sum(cell.count("\n") + cell.count("\r") - cell.count("\r\n") for cell in row)
    return starts


def _number_problem(cell: str) -> str:
    if not cell.strip():
        return "empty: give a number"
    try:
        float(cell)
    except ValueError:
        hint = "; use a point for decimals" if cell.strip().replace(",", "", 1).lstrip("+-").isdigit() else ""
        return f"not a number ({shown(cell)}){hint}"
    return f"not a finite number ({shown(cell)})"


def _numbers(cells: tuple[str, ...], lines: np.ndarray, column: str, errors: _Errors) -> np.ndarray:
    """The column as float64, every bad cell an error (and NaN)."""
    try:
        values = np.array(cells, dtype=np.float64)
    except ValueError:
        values = np.fromiter(map(_float_or_nan, cells), dtype=np.float64, count=len(cells))
    bad = np.flatnonzero(~np.isfinite(values))
    for index in bad:
        errors.add(_number_problem(cells[index]), line=int(lines[index]), column=column)
    return values


def _float_or_nan(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return float("nan")


def _check_range(
    values: np.ndarray, lines: np.ndarray, column: str, errors: _Errors, *, low: float, high: float, what: str
) -> None:
    # A cell that is not a finite number has had its error already.
    outside = np.isfinite(values) & ((values < low) | (values > high))
    for index in np.flatnonzero(outside):
        errors.add(f"{what}, got {values[index]:g}", line=int(lines[index]), column=column)


@dataclass
class _Chunks:
    """What the chunks read so far, to be concatenated at the end."""

    candidate: list
    y_true: list
    y_pred: list
    score: list
    proba: list
    fold: list
    time: list
    context: list
    instance: list
    lines: list

    @classmethod
    def empty(cls) -> "_Chunks":
        return cls(*([] for _ in range(10)))


class _Reader:
    def __init__(
        self,
        layout: _Layout,
        *,
        candidate: str | None,
        candidates: set[str] | None,
        errors: _Errors,
        positive: str | None = None,
        max_classes: int | None = None,
        text_limits: TextLimits = NO_TEXT_LIMITS,
    ) -> None:
        self.layout = layout
        self.limits = text_limits
        # The bytes of the distinct values counted so far, and the longest instance id.
        self.distinct_bytes = 0
        self.instance_width = 0
        # The labels the header declares (proba:<label> columns, the positive label).
        self.declared = {label for label, _ in layout.proba} | ({positive} if positive is not None else set())
        self.max_classes = max_classes
        self.candidate = candidate
        self.candidates = candidates
        self.errors = errors
        self.chunks = _Chunks.empty()
        self.candidate_codes = _Codes()
        self.true_codes = _Codes()
        self.pred_codes = _Codes()
        self.fold_codes = _Codes()
        self.context_codes = _Codes()
        # Where each candidate, label of y_true and label of y_pred first appears.
        self.candidate_lines: dict[int, int] = {}
        self.true_lines: dict[int, int] = {}
        self.pred_lines: dict[int, int] = {}
        self.rows = 0
        if candidate is not None and "candidate" not in layout.fixed:
            self.candidate_codes[candidate]  # code 0: every row's
        if max_classes is not None and len(self.declared) > max_classes:
            raise _classes_error(len(self.declared), max_classes)
        for label, _ in layout.proba:
            self.check_length(label, line=layout.line, column=PROBA + label)

    def check_length(self, value: str, *, line: int | None, column: str) -> None:
        """One value within ``TextLimits.length``, or the file refused."""
        limit = self.limits.length
        if limit is not None and len(value) > limit:
            raise too_long_error(
                self.errors, line=line, column=column, head=value[:QUOTE_MAX_CHARS], length=len(value), limit=limit
            )

    def spend(self, size: int, column: str) -> None:
        """``size`` more bytes of distinct values (``TextLimits.distinct_bytes``)."""
        self.distinct_bytes += size
        limit = self.limits.distinct_bytes
        if limit is not None and self.distinct_bytes > limit:
            raise distinct_bytes_error(column, limit)

    def instances(self, rows: int, width: int) -> None:
        """The instance ids' array is to hold ``rows`` rows (so far), its
        longest id ``width`` characters or more: refused over ``TextLimits.array_bytes``
        before the array is made (NumPy gives every id the longest one's width)."""
        self.instance_width = max(self.instance_width, width)
        limit = self.limits.array_bytes
        if limit is not None and rows * self.instance_width * 4 > limit:
            raise instance_bytes_error(rows, self.instance_width, limit)

    def new_values(self, codes: "_Codes", since: int, first: dict[int, int], column: str) -> None:
        """The values of ``codes`` new since code ``since`` (``first``: the
        line of each), each within ``TextLimits.length``, their bytes counted.
        A value of several context columns is a tuple, one part a column's."""
        new = list(islice(reversed(codes), len(codes) - since))[::-1]
        size = 0
        for offset, key in enumerate(new):
            parts = (key,) if isinstance(key, str) else key
            for position, part in enumerate(parts):
                named = column if isinstance(key, str) else CONTEXT + self.layout.context[position][0]
                self.check_length(part, line=first.get(since + offset), column=named)
                size += len(part.encode("utf-8", "surrogatepass"))
        self.spend(size, column)

    def class_count(self) -> int:
        """The distinct labels so far: y_true's, y_pred's and the declared ones."""
        return len(self.true_codes.keys() | self.pred_codes.keys() | self.declared)

    def over_classes(self) -> bool:
        """Whether the labels so far pass ``max_classes``: checked after each
        chunk, so no per-label structure grows past the limit by more than
        one chunk's rows."""
        return self.max_classes is not None and self.class_count() > self.max_classes

    def rows_of(self, rows: list[list[str]], lines: np.ndarray) -> tuple[list[list[str]], np.ndarray]:
        """The rows of the header's width: blank lines are skipped, others
        are errors."""
        width = self.layout.width
        if set(map(len, rows)) <= {width}:
            return rows, lines
        keep = []
        for index, row in enumerate(rows):
            if len(row) == width:
                keep.append(index)
            elif row:
                self.errors.add(f"{len(row)} values, but the header has {width} columns", line=int(lines[index]))
        return [rows[index] for index in keep], lines[keep]

    def _codes(
        self, codes: _Codes, cells: tuple[str, ...], lines: np.ndarray, column: str, what: str
    ) -> tuple[np.ndarray, dict[int, int]]:
        """The cells' codes, and the line where each new one first appears;
        an empty cell is an error (on its first line)."""
        values, since = codes.encode(cells)
        first = _first_lines(values, since, lines)
        self.new_values(codes, since, first, column)
        if first and "" in codes and codes[""] >= since:
            self.errors.add(f"empty: give {what}", line=first[codes[""]], column=column)
        return values, first

    def _labels(self, codes: _Codes, cells: tuple[str, ...], lines: np.ndarray, column: str, seen: dict) -> np.ndarray:
        what = "the true label" if column == "y_true" else "the predicted label"
        values, first = self._codes(codes, cells, lines, column, what)
        seen.update(first)
        return values

    def _candidates(self, cells: tuple[str, ...] | None, lines: np.ndarray) -> np.ndarray:
        if cells is None:  # the file of one candidate, code 0
            self.candidate_lines.setdefault(0, int(lines[0]))
            return np.zeros(len(lines), dtype=np.int32)
        values, first = self._codes(self.candidate_codes, cells, lines, "candidate", "the candidate's name")
        names = list(self.candidate_codes)
        for code, line in first.items():
            self.candidate_lines[code] = line
            name = names[code]
            if not name:
                continue
            if self.candidate is not None and name != self.candidate:
                message = f"{shown(name)}, but the file is for the candidate {shown(self.candidate)}"
                self.errors.add(message, line=line, column="candidate")
            elif self.candidates is not None and name not in self.candidates:
                self.errors.add(f"no candidate named {shown(name)} in this study", line=line, column="candidate")
        return values

    def chunk(self, rows: list[list[str]], lines: np.ndarray) -> None:
        rows, lines = self.rows_of(rows, lines)
        if not rows:
            return
        self.rows += len(rows)
        columns = list(zip(*rows, strict=True))
        del rows
        fixed, chunks, errors = self.layout.fixed, self.chunks, self.errors

        def cells(name: str) -> tuple[str, ...]:
            return columns[fixed[name]]

        chunks.lines.append(lines)
        chunks.candidate.append(self._candidates(cells("candidate") if "candidate" in fixed else None, lines))
        chunks.y_true.append(self._labels(self.true_codes, cells("y_true"), lines, "y_true", self.true_lines))
        if "y_pred" in fixed:
            chunks.y_pred.append(self._labels(self.pred_codes, cells("y_pred"), lines, "y_pred", self.pred_lines))
        if "score" in fixed:
            chunks.score.append(_numbers(cells("score"), lines, "score", errors))
        if "time" in fixed:
            time = _numbers(cells("time"), lines, "time", errors)
            _check_range(time, lines, "time", errors, low=0, high=np.inf, what="a time cannot be negative")
            chunks.time.append(time)
        if self.layout.proba:
            self._probabilities(columns, lines)
        if "fold" in fixed:
            chunks.fold.append(self._codes(self.fold_codes, cells("fold"), lines, "fold", "the fold")[0])
        if self.layout.context:
            positions = [position for _, position in self.layout.context]
            # One column is coded by its values (made tuples at the end), not
            # by a tuple per row.
            keys: Sequence[Any]
            if len(positions) == 1:
                keys = columns[positions[0]]
            else:
                keys = list(zip(*map(columns.__getitem__, positions), strict=True))
            values, since = self.context_codes.encode(keys)
            if len(self.context_codes) > since:
                column = CONTEXT + self.layout.context[0][0] if len(positions) == 1 else "context"
                self.new_values(self.context_codes, since, _first_lines(values, since, lines), column)
            chunks.context.append(values)
        if "instance" in fixed:
            self.instances(self.rows, self._longest(cells("instance"), lines, "instance"))
            ids = np.array(cells("instance"), dtype=str)
            empty = np.flatnonzero(ids == "")
            if len(empty):
                errors.add("empty: give the instance's id", line=int(lines[empty[0]]), column="instance")
            chunks.instance.append(ids)

    def _longest(self, cells: tuple[str, ...], lines: np.ndarray, column: str) -> int:
        """The longest of a chunk's cells, each within ``TextLimits.length``."""
        lengths = np.fromiter(map(len, cells), dtype=np.int64, count=len(cells))
        longest = int(lengths.max(initial=0))
        if self.limits.length is not None and longest > self.limits.length:
            index = int(np.argmax(lengths > self.limits.length))
            self.check_length(cells[index], line=int(lines[index]), column=column)
        return longest

    def _probabilities(self, columns: list[tuple[str, ...]], lines: np.ndarray) -> None:
        block = np.empty((len(lines), len(self.layout.proba)), dtype=np.float64)
        for index, (label, position) in enumerate(self.layout.proba):
            column = PROBA + label
            block[:, index] = _numbers(columns[position], lines, column, self.errors)
            _check_range(
                block[:, index], lines, column, self.errors, low=0, high=1, what="a probability is between 0 and 1"
            )
        sums = block.sum(axis=1)
        for row in np.flatnonzero(np.abs(sums - 1) > ROW_SUM_TOLERANCE):
            self.errors.add(
                f"the probabilities sum to {sums[row]:.9g}, not 1 (within {ROW_SUM_TOLERANCE:g})",
                line=int(lines[row]),
            )
        self.chunks.proba.append(block)


# --- the whole file -----------------------------------------------------------------------


def _whole(parts: list[np.ndarray]) -> np.ndarray:
    """The chunks of one column as one array; the chunks are let go at once,
    so no more than one column is held twice while the file is assembled."""
    whole = np.concatenate(parts) if len(parts) > 1 else parts[0]
    parts.clear()
    return whole


def _joined(parts: list[np.ndarray]) -> np.ndarray | None:
    """``_whole`` of an optional column: None when the file has none."""
    return _whole(parts) if parts else None


def _label_order(reader: _Reader, positive: str | None, errors: _Errors) -> tuple[list[str], np.ndarray | None]:
    """The labels in their documented order, and y_pred's codes mapped onto them."""
    proba_labels = [label for label, _ in reader.layout.proba]
    labels = list(reader.true_codes)
    labels += [label for label in proba_labels if label not in reader.true_codes]
    if positive is not None:
        _add_positive(reader, labels, positive, errors)
        if labels == [positive]:
            # Every instance positive: y_pred may name the negative label
            # (the mirror of y_pred naming the positive when none is).
            labels += [label for label in reader.pred_codes if label != positive][:1]
    index = {label: code for code, label in enumerate(labels)}
    mapping = _pred_mapping(reader, index, errors)
    if proba_labels:
        for label in labels:
            if label not in proba_labels:
                line, column = _first_seen(reader, label, index)
                errors.add(
                    f"the label {shown(label)} has no proba:{cut(label)} column (with probabilities, every label needs "
                    "its column)",
                    line=line,
                    column=column,
                )
    if "score" in reader.layout.fixed and len(labels) > 2:
        errors.add(
            f"a score is for two labels (a binary task), but the file has {len(labels)}: {_quoted(labels)}",
            line=reader.layout.line,
            column="score",
        )
    return labels, mapping


def _add_positive(reader: _Reader, labels: list[str], positive: str, errors: _Errors) -> None:
    """The positive label must be one of the file's (y_pred's included, then
    appended to ``labels``), or the file must have one label only (every
    instance negative, and nothing predicted positive: the positive label
    is then the second of a binary task). A file of two labels or more
    without it is refused (a mistyped positive label)."""
    if positive in labels or positive in reader.pred_codes or len(labels) == 1:
        if positive not in labels:
            labels.append(positive)
    else:
        errors.add(f"positive: {shown(positive)} is not a label of the file (its labels are {_quoted(labels)})")


def _pred_mapping(reader: _Reader, index: dict[str, int], errors: _Errors) -> np.ndarray | None:
    """y_pred's codes onto the labels' (None without y_pred); a label that is
    not one of them is an error on its first line."""
    pred_labels = list(reader.pred_codes)
    if not pred_labels:
        return None
    mapping = np.array([index.get(label, -1) for label in pred_labels], dtype=np.int32)
    for code in np.flatnonzero(mapping < 0):
        errors.add(
            f"the label {shown(pred_labels[code])} is not in y_true and not declared (as a proba:<label> column "
            "or the positive label)",
            line=reader.pred_lines[int(code)],
            column="y_pred",
        )
    return mapping


def _first_seen(reader: _Reader, label: str, index: dict[str, int]) -> tuple[int | None, str | None]:
    """Where a label first appears: its line and column, y_true's before
    y_pred's; (None, None) for a label only declared."""
    line = reader.true_lines.get(index[label]) if label in reader.true_codes else None
    column = "y_true" if line is not None else None
    if line is None and label in reader.pred_codes:
        line, column = reader.pred_lines[reader.pred_codes[label]], "y_pred"
    return line, column


def _check_folds(reader: _Reader, candidate: np.ndarray, fold: np.ndarray, names: list[str], errors: _Errors) -> None:
    folds = list(reader.fold_codes)
    present = np.zeros((len(names), len(folds)), dtype=bool)
    # In slices: fancy indexing makes its indices intp, twice a file's codes at once.
    for start in range(0, len(candidate), CHUNK_ROWS):
        present[candidate[start : start + CHUNK_ROWS], fold[start : start + CHUNK_ROWS]] = True
    for code in np.flatnonzero(~present.all(axis=1)):
        missing = [folds[f] for f in np.flatnonzero(~present[code])]
        errors.add(
            f"the candidate {shown(names[code])} has no rows in fold{'s' if len(missing) > 1 else ''} "
            f"{_quoted(missing)} "
            f"(every candidate needs rows in every fold: {_quoted(folds)})",
            line=reader.candidate_lines[int(code)],
            column="fold",
        )


# The instance ids' hash's multiplier (``_surely_distinct``): odd, its bits
# mixed (2^64 over the golden ratio).
HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def id_hashes(ids: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each id of a fixed-width text array, whatever the
    array's width: the sum of its code points, the j-th times
    ``HASH_MULTIPLIER`` to the power j, by Horner's rule from the last
    character (the NULs that pad a shorter id come first and leave it 0),
    one multiply-add a character over the whole array; NumPy's unsigned
    arithmetic wraps, modulo 2^64."""
    points = np.ascontiguousarray(ids).view(np.uint32).reshape(len(ids), -1)
    hashed = np.zeros(len(ids), dtype=np.uint64)
    for column in points.T[::-1]:
        hashed *= HASH_MULTIPLIER
        hashed += column
    return hashed


def hashes_distinct(hashed: np.ndarray) -> bool:
    """Whether no two hashes are equal (sorted, in place)."""
    hashed.sort()
    return not (hashed[1:] == hashed[:-1]).any()


def _surely_distinct(ids: np.ndarray) -> bool:
    """True when no two ids are equal, told without comparing text: their
    hashes (``id_hashes``) all distinct. False says nothing (two equal ids,
    or a collision, however unlikely or contrived): the ids themselves are
    then compared."""
    if ids.dtype.kind != "U" or not ids.dtype.itemsize:
        return False
    return hashes_distinct(id_hashes(ids))


def _check_instances(name: str, ids: np.ndarray, lines: np.ndarray, errors: _Errors) -> None:
    ordered = np.sort(ids)
    if not (ordered[1:] == ordered[:-1]).any():
        return
    order = np.argsort(ids, kind="stable")  # equal ids keep file order
    ordered = ids[order]
    for position in np.flatnonzero(ordered[1:] == ordered[:-1]) + 1:
        again, first = lines[order[position]], lines[order[position - 1]]
        errors.add(
            f"the candidate {shown(name)} has the instance {shown(str(ordered[position]))} already, "
            f"on {errors.word} {first}",
            line=int(again),
            column="instance",
        )


def _mapped(codes: np.ndarray | None, mapping: np.ndarray | None) -> np.ndarray | None:
    """y_pred's codes onto the labels'; the codes themselves when they are
    the same already (y_pred's labels first seen in the labels' order), as
    they mostly are: no second array of a file's size."""
    if codes is None or mapping is None:
        return None
    if np.array_equal(mapping, np.arange(len(mapping))):
        return codes
    return mapping[codes]


def _proba_in_label_order(reader: _Reader, labels: list[str]) -> np.ndarray | None:
    """The probability columns in the order of the labels (every label has
    one: checked), or None without them."""
    if not reader.chunks.proba:
        return None
    header_order = [label for label, _ in reader.layout.proba]
    return _whole(reader.chunks.proba)[:, [header_order.index(label) for label in labels]]


def _candidate_bounds(candidate: np.ndarray, candidates: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Where each candidate's rows start and end (``bounds``, of the rows
    in ``order``), and the order that groups them: None for a file written
    candidate by candidate (codes follow first appearance, so they never
    decrease: slices, views that copy nothing), otherwise a stable sort,
    each candidate's rows in file order."""
    # Counted in slices: bincount makes its input intp, twice a file's codes at once.
    counts = np.zeros(candidates, dtype=np.int64)
    for start in range(0, len(candidate), CHUNK_ROWS):
        counts += np.bincount(candidate[start : start + CHUNK_ROWS], minlength=candidates)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    grouped = bool(np.all(candidate[1:] >= candidate[:-1]))
    order = None if grouped else np.argsort(candidate, kind="stable")
    return bounds, order


def _by_candidate(
    names: list[str],
    candidate: np.ndarray,
    y_true: np.ndarray,
    arrays: dict[str, np.ndarray | None],
    lines: np.ndarray | None,
    errors: _Errors,
) -> dict[str, CandidatePredictions]:
    """Each candidate's predictions, its rows of every array in file order;
    a candidate's repeated instance ids are added to ``errors``."""
    bounds, order = _candidate_bounds(candidate, len(names))
    result = {}
    for code, name in enumerate(names):
        rows = slice(bounds[code], bounds[code + 1]) if order is None else order[bounds[code] : bounds[code + 1]]
        own = {key: None if values is None else values[rows] for key, values in arrays.items()}
        instance = own["instance"]
        if instance is not None and not _surely_distinct(instance):
            # (No lines: the Arrow reader's rows, which it reads again precisely for a refusal.)
            numbers = np.arange(1, len(candidate) + 1)[rows] if lines is None else lines[rows]
            _check_instances(name, instance, numbers, errors)
        result[name] = CandidatePredictions(name, y_true[rows], **own)
    return result


def _assemble(reader: _Reader, positive: str | None, errors: _Errors) -> PredictionData:
    """The chunks read made one prediction set: labels in order, folds and
    instance ids checked (every error together), each candidate's rows."""
    chunks = reader.chunks
    names = list(reader.candidate_codes)
    labels, pred_mapping = _label_order(reader, positive, errors)
    # Every row has a candidate and a line (a file without rows is refused before).
    candidate = _whole(chunks.candidate)
    # (The precise reader's lines; the Arrow reader gives none.)
    lines = _joined(chunks.lines)
    fold = _joined(chunks.fold)
    if fold is not None:
        _check_folds(reader, candidate, fold, names, errors)
    errors.raise_any()

    y_true = _whole(chunks.y_true)
    y_pred = _joined(chunks.y_pred)
    # (A file with a y_pred column always has its mapping.)
    arrays: dict[str, np.ndarray | None] = {
        "y_pred": _mapped(y_pred, pred_mapping),
        "score": _joined(chunks.score),
        "proba": None,
        "fold": fold,
        "time": _joined(chunks.time),
        "context": _joined(chunks.context),
        "instance": _joined(chunks.instance),
    }
    arrays["proba"] = _proba_in_label_order(reader, labels)
    result = _by_candidate(names, candidate, y_true, arrays, lines, errors)
    errors.raise_any()
    return PredictionData(
        labels=labels,
        positive=positive,
        folds=list(reader.fold_codes),
        context_columns=[name for name, _ in reader.layout.context],
        contexts=[(key,) if isinstance(key, str) else key for key in reader.context_codes],
        candidates=result,
        rows=reader.rows,
    )


# --- the CSV, row by row ---------------------------------------------------------------


def _csv_rows(text: _Text) -> _csv.Reader:
    """The file's rows as CSV, the delimiter told by the first line: tabs
    for a spreadsheet's export (a header of tabs and no comma), else
    commas."""
    lines = _lines(text)
    first = next(lines, None)
    delimiter = "\t" if first is not None and "\t" in first and "," not in first else ","
    return csv.reader(chain([first], lines) if first is not None else iter(()), delimiter=delimiter)


def _csv_header(reader: _csv.Reader) -> list[str]:
    """The first row that is not blank, or the file refused as empty."""
    header = next((row for row in reader if row and any(cell.strip() for cell in row)), None)
    if header is None:
        raise PredictionFileError(
            [
                "the file is empty: give a header row (candidate,y_true,y_pred, ...), then one row per candidate "
                "and test instance"
            ]
        )
    return header


def _csv_chunks(reader: _csv.Reader, parsed: _Reader, max_rows: int | None, max_classes: int | None) -> None:
    """The rows after the header read chunk by chunk, refused as soon as
    there are more than ``max_rows`` or more than ``max_classes`` labels
    (the count exact when the file ends there)."""
    while True:
        before = reader.line_num
        chunk = list(islice(reader, CHUNK_ROWS))
        if not chunk:
            break
        parsed.chunk(chunk, _line_numbers(chunk, before, reader.line_num))
        del chunk
        if max_rows is not None and parsed.rows > max_rows:
            raise PredictionFileError([f"too many rows: more than {max_rows}, the limit for a prediction file"])
        if max_classes is not None and parsed.over_classes():
            # Read no further: the count is exact when the file ends here.
            ended = not any(reader)  # (stops at the next row that is not blank)
            raise _classes_error(parsed.class_count(), max_classes, rows=None if ended else parsed.rows)


def _csv_refusal(error: csv.Error, line: int, text_limits: TextLimits) -> PredictionFileError:
    """The refusal of a file the csv module cannot read at ``line``: a value
    too long (the csv module's own bound, far above ours: too long for it as
    for us), or not CSV."""
    if "field larger than field limit" in str(error) and text_limits.length is not None:
        limit = text_limits.length
        return PredictionFileTooLong(
            [
                f"line {line}: a value of more than {csv.field_size_limit():,} characters; a label, a "
                f"fold, a context's value, a candidate's name or an instance id is at most {limit:,} characters"
            ]
        )
    return PredictionFileError([f"line {line}: not readable as CSV ({error})"])


def _read(
    text: _Text,
    candidate: str | None,
    positive: str | None,
    allowed: set[str] | None,
    max_rows: int | None,
    max_classes: int | None,
    text_limits: TextLimits,
    errors: _Errors,
) -> PredictionData:
    """A CSV file read: its header, its rows chunk by chunk, then the
    whole file's checks and its candidates' arrays."""
    reader = _csv_rows(text)
    try:
        header = _csv_header(reader)
        layout = _header(header, reader.line_num, one_candidate=candidate is not None, positive=positive, errors=errors)
        parsed = _reader(layout, errors, candidate, allowed, positive, max_classes, text_limits)
        _csv_chunks(reader, parsed, max_rows, max_classes)
    except csv.Error as error:
        raise _csv_refusal(error, reader.line_num, text_limits) from None
    if not parsed.rows:
        errors.raise_any()
        raise PredictionFileError(["the file has a header but no rows: add one row per candidate and test instance"])
    errors.raise_any()  # whole-file checks mean little over rows that do not read
    return _assemble(parsed, positive, errors)


def read_precise(
    stream: IO,
    *,
    candidate: str | None,
    positive: str | None,
    allowed: set[str] | None,
    max_bytes: int | None,
    max_rows: int | None,
    max_classes: int | None,
    text_limits: TextLimits = NO_TEXT_LIMITS,
) -> PredictionData:
    """A CSV file (a binary or text stream) read row by row into arrays, or
    ``PredictionFileError`` listing why it is refused, each error on its line
    (the options are ``read_predictions``'s; ``allowed``: the candidates' names
    the file may use, None: any)."""
    text = _Text(stream, max_bytes)
    return _read(text, candidate, positive, allowed, max_rows, max_classes, text_limits, _Errors())
