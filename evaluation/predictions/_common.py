"""What both prediction readers share (``evaluation.predictions``): the
format's constants, the limits a file is read with (``TextLimits``), the
arrays a file is read into (``PredictionData``, ``CandidatePredictions``),
the refusals (``PredictionFileError`` and its kinds) and how an error
quotes a value (``cut``, ``shown``).

Pure: the standard library and NumPy. It imports nothing of the package:
the precise reader (``precise``) and the Arrow reader (``arrow``) import it.
"""

import io
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

# Rows parsed at a time by the precise reader (a chunk), and read at a time
# from a Parquet file by the Arrow reader (a batch).
CHUNK_ROWS = 100_000
# Bytes read from the file at a time (cut at the last line break for decoding).
BLOCK_BYTES = 1 << 20
# A refused file lists at most this many errors: enough to see a pattern,
# not a page per bad row.
MAX_ERRORS = 20
# An error quotes at most this many characters of a value (a label, a cell,
# a column's name), then an ellipsis and the value's real length; a list of
# values (a file's labels, its folds) names at most QUOTE_MAX_VALUES of them.
# With MAX_ERRORS, no refusal is more than a few kilobytes, whatever the file holds.
QUOTE_MAX_CHARS = 40
QUOTE_MAX_VALUES = 5

FIXED_COLUMNS = ("candidate", "y_true", "y_pred", "score", "fold", "time", "instance")
PROBA = "proba:"
CONTEXT = "context:"
COLUMNS_HELP = "candidate, y_true, y_pred, score, proba:<label>, fold, time, context:<name>, instance"
MB = 1024 * 1024
# The media type of a Parquet file (the API's raw body; the Arrow reader, ``arrow``, reads it).
PARQUET_MEDIA_TYPE = "application/vnd.apache.parquet"


class PredictionFileError(ValueError):
    """The file is refused; ``errors`` lists why, each naming its line
    (and column) where there is one. Nothing of it is to be stored."""

    def __init__(self, errors: Iterable[str]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


class PredictionFileTooLarge(PredictionFileError):
    """The file is over the size limit it was read with (``max_bytes``)."""


class PredictionFileTooManyClasses(PredictionFileError):
    """The file has more distinct labels than the limit it was read with
    (``max_classes``)."""


class PredictionFileTooLong(PredictionFileError):
    """A value of the file, or what its text takes together, is over a
    limit of ``TextLimits``."""


@dataclass(frozen=True)
class TextLimits:
    """Bounds on what a file's text expands to, whatever the file weighs
    (a Parquet file's dictionary holds a value once for any number of rows,
    and a compressed column of one value repeated weighs nearly nothing).
    None: no bound.

    ``length``: the characters of any one text value (a label, a fold, a
    context's value, a candidate's name, an instance id), checked on each
    chunk's cells, or on an Arrow dictionary before any value is decoded.
    ``distinct_bytes``: the UTF-8 bytes of the distinct labels, folds,
    contexts and candidates' names together (what a set keeps as lists),
    counted as they first appear. ``array_bytes``: the memory of the
    instance ids' array (rows × 4 bytes × the longest id) and what a
    Parquet file's columns announce once decompressed."""

    length: int | None = None
    distinct_bytes: int | None = None
    array_bytes: int | None = None


NO_TEXT_LIMITS = TextLimits()
# What a value of ``TextLimits.length`` characters may take in a Parquet
# column chunk once decompressed: 4 bytes a character (UTF-8) and a 4-byte
# length (or a dictionary index); and per column chunk, page headers and levels.
PARQUET_VALUE_OVERHEAD = 8
PARQUET_CHUNK_OVERHEAD = 64 * 1024


def too_long_error(
    errors: "_Errors", *, line: int | None, column: str, head: str, length: int, limit: int
) -> PredictionFileTooLong:
    """A value of ``length`` characters over ``TextLimits.length``; ``head``:
    its first characters (at least ``QUOTE_MAX_CHARS``), all the message quotes."""
    message = (
        f"a value of {length:,} characters ({head[:QUOTE_MAX_CHARS]!r}…); a label, a fold, a context's value, "
        f"a candidate's name or an instance id is at most {limit:,} characters"
    )
    return PredictionFileTooLong([errors.text(message, line=line, column=column)])


def distinct_bytes_error(column: str, limit: int) -> PredictionFileTooLong:
    return PredictionFileTooLong(
        [
            f"column {cut(column)}: the file's distinct labels, folds, contexts and candidates' names take more than "
            f"{limit:,} bytes together, the limit for a prediction set"
        ]
    )


def instance_bytes_error(rows: int, width: int, limit: int) -> PredictionFileTooLong:
    return PredictionFileTooLong(
        [
            f"column instance: the instance ids would take {rows * width * 4:,} bytes in memory ({rows:,} rows, each "
            f"as long as the longest id, {width:,} characters, at 4 bytes a character); the limit is {limit:,} bytes: "
            "give shorter ids"
        ]
    )


def _classes_error(count: int, limit: int, *, rows: int | None = None) -> PredictionFileTooManyClasses:
    """``rows``: the file was not read to its end (the count is of its first ``rows`` rows)."""
    if rows is None:
        said = f"the file has {count:,} distinct labels"
    else:
        said = f"the file has more than {limit:,} distinct labels ({count:,} in its first {rows:,} rows)"
    return PredictionFileTooManyClasses(
        [
            f"{said}; at most {limit:,} are allowed in a prediction set (labels of y_true and y_pred, "
            "proba:<label> columns and the positive label, together)"
        ]
    )


@dataclass
class CandidatePredictions:
    """One candidate's rows, in file order. Codes index the labels, folds and
    contexts of the ``PredictionData`` they belong to."""

    name: str
    y_true: np.ndarray  # int32 codes into PredictionData.labels
    y_pred: np.ndarray | None = None  # int32 codes into labels
    score: np.ndarray | None = None  # float64, binary only: the positive label's score
    proba: np.ndarray | None = None  # float64 (n, len(labels)), columns in the order of labels
    fold: np.ndarray | None = None  # int32 codes into PredictionData.folds
    time: np.ndarray | None = None  # float64 seconds per instance
    context: np.ndarray | None = None  # int32 codes into PredictionData.contexts
    instance: np.ndarray | None = None  # str (fixed-width unicode) instance ids

    # The optional arrays, in this order wherever they are listed.
    OPTIONAL = ("y_pred", "score", "proba", "fold", "time", "context", "instance")

    @property
    def columns(self) -> list[str]:
        """The optional arrays this candidate has."""
        return [name for name in self.OPTIONAL if getattr(self, name) is not None]

    def __len__(self) -> int:
        return len(self.y_true)


@dataclass
class PredictionData:
    labels: list[str]  # see the package's docstring (evaluation.predictions) for the order
    positive: str | None
    folds: list[str]
    context_columns: list[str]  # the <name>s of the context:<name> columns, in file order
    contexts: list[tuple[str, ...]]  # one per distinct tuple of context values
    candidates: dict[str, CandidatePredictions]  # in order of first appearance
    rows: int


# --- errors ---------------------------------------------------------------------------


class _Errors:
    """Errors collected while reading; the file is refused at the end, or as
    soon as ``MAX_ERRORS`` have been found. They are listed by line (those
    of no line last), whatever order the checks found them in."""

    def __init__(self, word: str = "line") -> None:
        # "line" for a CSV's lines, "row" for a Parquet file's rows (from 1).
        self.word = word
        self.found: list[tuple[float, int, str]] = []

    def text(self, message: str, *, line: int | None = None, column: str | None = None) -> str:
        """``message`` placed: its line (or row) and column first."""
        where = [f"{self.word} {line}"] if line is not None else []
        where += [f"column {cut(column)}"] if column is not None else []
        return f"{', '.join(where)}: {message}" if where else message

    def add(self, message: str, *, line: int | None = None, column: str | None = None) -> None:
        text = self.text(message, line=line, column=column)
        self.found.append((line if line is not None else math.inf, len(self.found), text))
        if len(self.found) >= MAX_ERRORS:
            raise PredictionFileError([*self.messages, f"stopped after {MAX_ERRORS} errors; there may be more"])

    @property
    def messages(self) -> list[str]:
        return [text for _, _, text in sorted(self.found)]

    def raise_any(self) -> None:
        if self.found:
            raise PredictionFileError(self.messages)


def cut(value: str) -> str:
    """``value`` as an error shows it: whole up to ``QUOTE_MAX_CHARS``
    characters, else its start, an ellipsis and its real length."""
    if len(value) <= QUOTE_MAX_CHARS:
        return value
    return f"{value[:QUOTE_MAX_CHARS]}… ({len(value):,} characters)"


def shown(value: str) -> str:
    """``value`` quoted in an error (``repr``), cut as ``cut`` cuts it."""
    if len(value) <= QUOTE_MAX_CHARS:
        return repr(value)
    return f"{value[:QUOTE_MAX_CHARS]!r}… ({len(value):,} characters)"


def _quoted(names: Iterable[str]) -> str:
    """Values quoted in an error: ``QUOTE_MAX_VALUES`` at most, then how many more."""
    names = list(names)
    listed = ", ".join(shown(name) for name in names[:QUOTE_MAX_VALUES])
    more = len(names) - QUOTE_MAX_VALUES
    return f"{listed} and {more:,} more" if more > 0 else listed


# --- sizes ------------------------------------------------------------------------------


def _size_error(size: int | None, limit: int) -> PredictionFileTooLarge:
    said = f"is {size} bytes" if size is not None else f"is more than {limit} bytes"
    return PredictionFileTooLarge(
        [f"the file {said}; the limit for a prediction file is {limit} bytes ({limit / MB:g} MB)"]
    )


def known_size(source: Any) -> int | None:
    """The size of an open file or an upload, when it can be told without reading."""
    size = getattr(source, "size", None)  # Django's uploaded files
    if isinstance(size, int):
        return size
    try:
        return os.fstat(source.fileno()).st_size
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
