"""Prediction sets (``approve-predictions/1``, FORMATS.md): read a CSV or a
Parquet file of candidates' predictions on a test set into arrays, or refuse
the whole file with line-numbered errors (``line 14, column proba:benign:
not a number ('abc')``).

Pure: the standard library, NumPy and pyarrow, no Django
(``evaluate_predictions`` reads a file without any study). The study's side
(candidate names, limits) comes in as arguments.

The package, each module importing only those above it (no circle):

- ``_common``: the format's constants, the limits (``TextLimits``), the
  arrays (``PredictionData``, ``CandidatePredictions``), the refusals
  (``PredictionFileError`` and its kinds) and how errors quote values.
- ``precise``: the precise reader, a CSV row by row, every error on its
  line; its reader state and whole-file assembly are the rules both readers
  apply.
- ``arrow``: the Arrow reader, a CSV through pyarrow's multithreaded reader
  and a Parquet file, filling the precise reader's state batch by batch; it
  gives up on a CSV it does not take as ordinary or that a rule refuses.
- this module: the entry point, ``read_predictions``, which tries the Arrow
  reader, then the precise one; and the names the rest of the project uses.

The file: UTF-8 (a byte-order mark is allowed), a header row, then one row
per candidate and test instance. Commas separate the cells, or tabs when the
header holds tabs and no comma (a spreadsheet's export). Cells are taken as
written: labels, folds, instance ids and contexts are text, so ``1`` and
``1.0`` are two labels, and so are ``spam`` and ``spam `` (only the header's
column names are trimmed). Numbers are what Python's ``float`` reads,
finite. An empty cell is an error, but in a ``context:<name>`` column, where
it is a value like any other. A Parquet file has the same columns (``arrow``).

Labels come in one documented order, which every array's codes follow:
first the labels of ``y_true`` in the order they first appear, then the
declared ones that ``y_true`` lacks: the ``proba:<label>`` columns in the
header's order, then the positive label (declared, it may appear in
``y_pred`` alone, or nowhere when the file has one label only: every
instance is then negative). A declared positive label makes the task
binary: when it is the only label so far (every instance positive), the
first other label of ``y_pred`` is the negative one, as the positive may be
``y_pred``'s alone when every instance is negative. Folds, contexts and candidates are in the order they first
appear.
"""

import gc
import io
import os
from collections.abc import Iterable
from typing import IO, Any

from ._common import (
    NO_TEXT_LIMITS,
    PARQUET_MEDIA_TYPE,
    QUOTE_MAX_CHARS,
    QUOTE_MAX_VALUES,
    CandidatePredictions,
    PredictionData,
    PredictionFileError,
    PredictionFileTooLarge,
    PredictionFileTooLong,
    PredictionFileTooManyClasses,
    TextLimits,
    _size_error,
    cut,
    known_size,
    shown,
)
from .precise import read_precise

__all__ = [
    "NO_TEXT_LIMITS",
    "PARQUET_MEDIA_TYPE",
    "QUOTE_MAX_CHARS",
    "QUOTE_MAX_VALUES",
    "CandidatePredictions",
    "PredictionData",
    "PredictionFileError",
    "PredictionFileTooLarge",
    "PredictionFileTooLong",
    "PredictionFileTooManyClasses",
    "TextLimits",
    "cut",
    "known_size",
    "read_predictions",
    "shown",
]


def _open(source: Any) -> tuple[IO, bool]:
    """The binary stream of a path or an open stream, and whether it was
    opened here (and is to be closed here)."""
    if isinstance(source, (str, os.PathLike)):
        try:
            return open(source, "rb"), True  # noqa: SIM115 (closed by the caller)
        except OSError as error:
            raise PredictionFileError([f"cannot read {os.fspath(source)}: {error.strerror}"]) from None
    return source, False


class _Prefixed:
    """A stream whose first bytes were read already (to tell a Parquet
    file), read again first."""

    def __init__(self, head: bytes, stream: IO) -> None:
        self.head = head
        self.stream = stream

    def read(self, size: int = -1) -> bytes:
        if not self.head:
            return self.stream.read(size)
        if 0 <= size <= len(self.head):
            part, self.head = self.head[:size], self.head[size:]
            return part
        head, self.head = self.head, b""
        return head + self.stream.read(-1 if size < 0 else size - len(head))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _seekable_if_parquet(stream: Any, max_bytes: int | None) -> Any:
    """A stream that cannot seek (standard input, a request's body): a
    Parquet file is read into memory (its footer comes last), anything else
    is left to the readers, its first bytes put back."""
    try:
        if stream.seekable():
            return stream
    except (AttributeError, ValueError):
        pass
    head = stream.read(4)
    if isinstance(head, str) or head != b"PAR1":
        return _Prefixed(head, stream) if head else stream
    rest = stream.read() if max_bytes is None else stream.read(max_bytes)
    if max_bytes is not None and len(head) + len(rest) > max_bytes:
        raise _size_error(None, max_bytes)
    return io.BytesIO(head + rest)


def read_predictions(
    stream_or_path: Any,
    *,
    candidate: str | None = None,
    positive: str | None = None,
    candidates: Iterable[str] | None = None,
    max_bytes: int | None = None,
    max_rows: int | None = None,
    max_classes: int | None = None,
    text_limits: TextLimits = NO_TEXT_LIMITS,
    instances: bool = True,
) -> PredictionData:
    """Read an ``approve-predictions/1`` CSV or Parquet file (a path, or a
    binary or text stream) into arrays, or raise ``PredictionFileError``
    listing why it is refused (``PredictionFileTooLarge`` when over
    ``max_bytes``). The Arrow reader (``arrow``) reads it first (a Parquet
    file, and a CSV at Arrow speed); the precise reader (``precise``) reads
    a CSV it gives up on, for the refusal's exact lines.

    ``candidate``: the file is for that one candidate (a ``candidate``
    column is then optional, and must name it on every row).
    ``positive``: the positive label of a binary set (required by ``score``).
    ``candidates``: the names the file may use (None: any).
    ``max_bytes``, ``max_rows``: limits (None: none).
    ``max_classes``: the most distinct labels (None: any number); the
    reading stops at the end of the chunk that passes it
    (``PredictionFileTooManyClasses``).
    ``text_limits``: what the file's text may expand to (``TextLimits``;
    ``PredictionFileTooLong``), checked before the values it bounds are made.
    ``instances``: keep the instance ids; False: they are checked as ever
    (a repeat refuses the file) but not kept, each candidate's ``instance``
    None, for a reader that only evaluates (``evaluate_predictions``: at
    10,000,000 rows the ids' array would take 280 MB).
    """
    allowed = None if candidates is None else set(candidates)
    if candidate is not None and allowed is not None and candidate not in allowed:
        raise PredictionFileError([f"candidate: no candidate named {shown(candidate)} in this study"])
    stream, opened = _open(stream_or_path)
    collecting = gc.isenabled()
    # A chunk is a hundred thousand lists of strings: the cyclic collector
    # would walk them again and again, and none of them holds a cycle.
    gc.disable()
    try:
        name = os.fspath(stream_or_path) if opened else getattr(stream, "name", None)
        stream = _seekable_if_parquet(stream, max_bytes)
        # imported on first use: pyarrow costs 0.15 s at every command's start.
        from .arrow import read_arrow

        options: dict[str, Any] = {
            "candidate": candidate,
            "positive": positive,
            "allowed": allowed,
            "max_bytes": max_bytes,
            "max_rows": max_rows,
            "max_classes": max_classes,
            "text_limits": text_limits,
        }
        data = read_arrow(stream, name=name if isinstance(name, str) else None, instances=instances, **options)
        if data is None:
            data = read_precise(stream, **options)
        if not instances:
            for arrays in data.candidates.values():
                arrays.instance = None
        return data
    finally:
        if collecting:
            gc.enable()
        if opened:
            stream.close()
