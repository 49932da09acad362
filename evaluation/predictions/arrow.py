"""approve-predictions/1 read at Arrow speed: a CSV through pyarrow's
multithreaded CSV reader, and the same columns in a Parquet file.

Pure: pyarrow and NumPy, no Django; ``evaluation.predictions.read_predictions``
calls ``read_arrow`` first and has the precise reader (``precise``) read the
file when it answers None. It imports ``_common`` and ``precise`` (whose
``_Reader`` it fills and whose ``_assemble`` makes its arrays); neither
imports it.

The fast path reads the file with strict types (labels, folds, contexts,
instance ids and candidates as text, dictionary-encoded; score, time and
probabilities as float64, with no null values) and checks every rule of
the precise reader over whole arrays. It only accepts: anything it does not
take as ordinary, any pyarrow error and any value a rule refuses make it
give up (``_Slow``), and the precise reader then reads the file again, row
by row, for the refusal's exact messages and lines. A refused file is
therefore read twice; an accepted one once.

What the CSV fast path takes as ordinary: a seekable binary stream (a path,
an uploaded file, an open file), a header on the first line without quotes,
and rows without line breaks inside quoted cells (pyarrow refuses those, and
the precise reader reads them).

Threads: pyarrow's CSV reader parses and converts blocks on pyarrow's CPU
thread pool. pyarrow sizes that pool from ``OMP_NUM_THREADS``, which
approve sets to 1 for BLAS in every process (docs/architecture.md); this
module therefore sizes it, once when imported, to the CPUs the process may
run on, or to ``ARROW_NUM_THREADS`` when that is set. BLAS stays
single-threaded; Arrow's pool is the one place where approve parses with
threads.

A Parquet file (it starts with the bytes ``PAR1``) has the same columns,
named by its schema: labels, folds, contexts, instance ids and candidates
as text (string, large string or dictionary of strings) or integers (read
as their decimal text, as a CSV writes them); score, time and probabilities
as floating-point or integer numbers. Any other type refuses the column.
Its errors name the row (from 1) instead of the line: a Parquet file that
a rule refuses is read again batch by batch, its cells as the text a CSV
would hold (a null is an empty cell), through the same checks.
"""

import csv
import os
from collections.abc import Iterator
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from engine.core import ROW_SUM_TOLERANCE

from ..parquet_pages import Page, PageError, pages
from ._common import (
    BLOCK_BYTES,
    CHUNK_ROWS,
    CONTEXT,
    NO_TEXT_LIMITS,
    PARQUET_CHUNK_OVERHEAD,
    PARQUET_VALUE_OVERHEAD,
    QUOTE_MAX_CHARS,
    PredictionData,
    PredictionFileError,
    PredictionFileTooLong,
    PredictionFileTooManyClasses,
    TextLimits,
    _classes_error,
    _Errors,
    _size_error,
    cut,
    distinct_bytes_error,
    known_size,
    shown,
    too_long_error,
)
from .precise import (
    _assemble,
    _candidate_bounds,
    _Codes,
    _header,
    _Layout,
    _Reader,
    _reader,
    hashes_distinct,
    id_hashes,
)

PARQUET_MAGIC = b"PAR1"
# The most pages a Parquet file uploaded through the web or the API may have
# (their headers are read one by one before any page: ``_parquet_sizes``). A
# writer makes pages of about a megabyte or 20,000 rows: a file at the row
# limit has a few hundred.
PARQUET_MAX_PAGES = 10_000
PARQUET_EXTENSIONS = (".parquet", ".pq")
BOM = b"\xef\xbb\xbf"
NUMBER_COLUMNS = ("score", "time")


def _arrow_threads() -> int:
    given = os.environ.get("ARROW_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


pa.set_cpu_count(_arrow_threads())


class _Slow(Exception):
    """The fast path gives up: the precise reader reads the file."""


def is_parquet_name(name: str | None) -> bool:
    return bool(name) and str(name).lower().endswith(PARQUET_EXTENSIONS)


def read_arrow(
    stream: IO,
    *,
    name: str | None,
    candidate: str | None,
    positive: str | None,
    allowed: set[str] | None,
    max_bytes: int | None,
    max_rows: int | None,
    max_classes: int | None,
    text_limits: TextLimits = NO_TEXT_LIMITS,
    instances: bool = True,
) -> PredictionData | None:
    """The file's data read by pyarrow; None when the precise reader is to
    read it (the stream then back where it was). A Parquet file is always
    read here, refusals included. ``instances``: ``read_predictions``'s."""
    options: dict[str, Any] = {
        "candidate": candidate,
        "positive": positive,
        "allowed": allowed,
        "max_rows": max_rows,
        "max_classes": max_classes,
        "text_limits": text_limits,
        "instances": instances,
    }
    try:
        start = stream.tell()
        head = stream.read(len(PARQUET_MAGIC))
        stream.seek(start)
    except (AttributeError, OSError, ValueError):
        return None  # not seekable: read by the precise reader
    if isinstance(head, str):
        return None  # a text stream
    if head == PARQUET_MAGIC:
        return _read_parquet(stream, max_bytes=max_bytes, **options)
    if is_parquet_name(name):
        raise PredictionFileError(
            [
                f"the file is named {shown(os.path.basename(str(name)))} but is not a Parquet file (a Parquet file "
                "starts with the bytes PAR1)"
            ]
        )
    if max_bytes is not None:
        size = known_size(stream)
        if size is None or size > max_bytes:
            return None  # the precise reader refuses it, or counts its bytes
    try:
        return _read_csv(stream, start, **options)
    except (_Slow, PredictionFileError, pa.ArrowException, UnicodeDecodeError):
        stream.seek(start)
        return None


# --- CSV ------------------------------------------------------------------------------------


def _csv_header(stream: IO) -> tuple[list[str], str, int]:
    """The header's cells, the delimiter and the header's length in bytes
    (with its line break), for a header on the first line. Its cells may be
    quoted, as pyarrow's and R's CSV writers quote them by default (issue
    33, item 7: such a file went to the precise reader, 4.2x slower); a
    quoted cell that goes on past the line, or quotes the csv module would
    not read, leave the file to the precise reader."""
    head = stream.read(BLOCK_BYTES)
    cut = head.find(b"\n")
    if cut < 0:
        raise _Slow
    line = head[:cut].removeprefix(BOM).removesuffix(b"\r")
    if b"\r" in line or b"\x00" in line or line.count(b'"') % 2:
        raise _Slow
    text = line.decode("utf-8")
    if not text.strip():
        raise _Slow
    delimiter = "\t" if "\t" in text and "," not in text else ","
    if '"' not in text:
        return text.split(delimiter), delimiter, cut + 1
    try:
        cells = next(csv.reader([text], delimiter=delimiter, strict=True))
    except csv.Error:
        raise _Slow from None
    return cells, delimiter, cut + 1


def _read_csv(
    stream: IO,
    start: int,
    *,
    candidate: str | None,
    positive: str | None,
    allowed: set[str] | None,
    max_rows: int | None,
    max_classes: int | None,
    text_limits: TextLimits,
    instances: bool,
) -> PredictionData:
    cells, delimiter, length = _csv_header(stream)
    errors = _Errors()
    layout = _header(cells, 1, one_candidate=candidate is not None, positive=positive, errors=errors)
    reader = _reader(layout, errors, candidate, allowed, positive, max_classes, text_limits)
    numbers = _number_positions(layout)
    text = pa.dictionary(pa.int32(), pa.string())
    names = [f"c{position}" for position in range(layout.width)]
    # Instance ids are mostly all distinct: plain text, no dictionary to build.
    plain = {layout.fixed.get("instance")}
    stream.seek(start + length)
    capacity = _line_count(stream)  # the most rows there can be (blank lines are skipped)
    stream.seek(start + length)
    batches = pa_csv.open_csv(
        stream,
        read_options=pa_csv.ReadOptions(column_names=names, use_threads=True),
        parse_options=pa_csv.ParseOptions(delimiter=delimiter, newlines_in_values=False),
        convert_options=pa_csv.ConvertOptions(
            column_types={
                name: pa.float64() if position in numbers else pa.string() if position in plain else text
                for position, name in enumerate(names)
            },
            null_values=[],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            check_utf8=True,
        ),
        memory_pool=pa.system_memory_pool(),
    )
    converted = _Batches(reader, max_rows, capacity, instances=instances)
    for batch in batches:
        converted.add(batch)
    return converted.data(positive)


def _line_count(stream: IO) -> int:
    """The lines left in the stream (a last one without its line break
    counted), read in large blocks: a CSV's rows are at most these."""
    count, last = 0, b"\n"
    while block := stream.read(16 * BLOCK_BYTES):
        count += block.count(b"\n")
        last = block[-1:]
    return count + (last != b"\n")


def _number_positions(layout: _Layout) -> set[int]:
    return {layout.fixed[name] for name in NUMBER_COLUMNS if name in layout.fixed} | {
        position for _, position in layout.proba
    }


# --- from batches to arrays ------------------------------------------------------------------


def _first_order(codes: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The codes renumbered in order of first appearance, and the old code
    of each new one. Linear when they are so already (a dictionary built
    in file order)."""
    if not len(codes):
        return codes, np.arange(0)
    running = np.maximum.accumulate(codes)
    if running[0] == 0 and running[-1] == count - 1 and not (np.diff(running) > 1).any():
        return codes, np.arange(count)
    found, first = np.unique(codes, return_index=True)
    order = found[np.argsort(first)]
    renumber = np.full(count, -1, dtype=np.int32)
    renumber[order] = np.arange(len(order), dtype=np.int32)
    return renumber[codes], order


def _texts(dictionary: pa.Array) -> list[str]:
    """A dictionary's values as text: integers (a Parquet file's labels)
    as their decimal digits, as a CSV writes them."""
    values = dictionary.to_pylist()
    return [str(value) for value in values] if pa.types.is_integer(dictionary.type) else values


def _lengths(values: pa.Array) -> np.ndarray:
    """The characters of each value (an integer's: its digits'), a null's 0,
    computed by Arrow: no value is made a Python string."""
    if pa.types.is_integer(values.type):
        values = values.cast(pa.string())
    return np.asarray(pc.utf8_length(values).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _check_long(dictionary: pa.Array, codes: np.ndarray | None, reader: _Reader, column: str, start: int) -> int:
    """The longest value of a batch's text column, given as its dictionary
    and each row's code into it (None: the dictionary is the column, a
    value a row; a code of -1, a null); a value over ``TextLimits.length``
    that a row uses refuses the file on the first such row (``start``: the
    batch's first, from 1). Only its first characters are ever decoded."""
    lengths = _lengths(dictionary)
    limit = reader.limits.length
    if limit is None or not len(lengths) or lengths.max() <= limit:
        return int(lengths.max(initial=0))
    over = lengths > limit
    rows = over if codes is None else np.append(over, False)[codes]
    if not rows.any():
        return int(lengths[~over].max(initial=0))  # (values no row uses)
    row = int(np.argmax(rows))
    code = row if codes is None else int(codes[row])
    head = pc.utf8_slice_codeunits(dictionary.slice(code, 1).cast(pa.string()), 0, QUOTE_MAX_CHARS)[0].as_py()
    raise too_long_error(
        reader.errors, line=start + row, column=column, head=head, length=int(lengths[code]), limit=limit
    )


def _encode(
    column: pa.Array,
    codes: _Codes,
    reader: _Reader,
    name: str,
    start: int,
    *,
    empty: bool = False,
) -> np.ndarray:
    """A batch's text column ``name`` as int32 codes of ``codes`` (new
    values get new codes in order of first appearance). An empty value
    (unless ``empty``), a NUL character or a null gives up. Only the values
    the batch uses are made Python strings, after they are checked against
    the reader's ``TextLimits`` on the Arrow dictionary (``start``: the
    batch's first row, from 1), and their bytes are counted
    (``TextLimits.distinct_bytes``). (Instance ids: ``_instance_ids``.)"""
    if column.null_count:
        raise _Slow
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    dictionary = column.dictionary
    local, order = _first_order(column.indices.to_numpy(zero_copy_only=False), len(dictionary))
    identity = len(order) == len(dictionary) and np.array_equal(order, np.arange(len(order)))
    used = dictionary if identity else dictionary.take(pa.array(order, type=pa.int64()))
    _check_long(used, local, reader, name, start)
    bound = reader.limits.distinct_bytes
    if bound is not None and pc.sum(pc.binary_length(used.cast(pa.string()))).as_py() > bound:
        raise distinct_bytes_error(name, bound)  # (this batch's values alone are over)
    values = _texts(used)
    if any((not value and not empty) or "\x00" in value for value in values):
        raise _Slow
    known = len(codes)
    mapping = np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=len(values))
    reader.new_values(codes, known, {}, name)
    return mapping[local]


def _instance_ids(column: pa.Array, reader: _Reader, start: int) -> tuple[pa.Array, int]:
    """A batch's instance ids as Arrow text, kept so until the file is read
    (``_fixed_width`` then makes them one array): a null, an empty id or a
    NUL character gives up; the ids are checked against ``TextLimits.length``
    and their array's width against ``TextLimits.array_bytes`` (``start``:
    the batch's first row, from 1); and the longest id's characters. No id
    is made a Python string."""
    if column.null_count:
        raise _Slow
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if not pa.types.is_string(column.type):
        column = column.cast(pa.string())  # (integers as their digits; large strings)
    if not len(column) or not _lengths(column).min() or pc.any(pc.match_substring(column, "\x00")).as_py():
        raise _Slow
    longest = _check_long(column, None, reader, "instance", start)
    reader.instances(start - 1 + len(column), longest)
    return column, longest


def _fixed_width(parts: list[pa.Array], rows: int, width: int) -> np.ndarray:
    """The instance ids' batches made one NumPy array of ``width``
    characters an id, as the precise reader makes it, each batch let go
    once copied (the ids are never held twice whole). ASCII ids, the usual,
    are padded by Arrow to ``width`` bytes with NUL characters (which no id
    holds, and which NumPy reads as the end of a shorter one) and widened
    byte by byte into the array's code points; other ids are made Python
    strings."""
    ids = np.empty(rows, dtype=f"U{max(width, 1)}")
    points = ids.view(np.uint32).reshape(rows, -1)
    done = 0
    parts.reverse()
    while parts:
        part = parts.pop()
        here = slice(done, done + len(part))
        done = here.stop
        if not pc.all(pc.string_is_ascii(part)).as_py():
            ids[here] = part.to_pylist()
            continue
        padded = pc.utf8_rpad(part, width=width, padding="\x00")
        first = int(np.frombuffer(padded.buffers()[1], dtype=np.int32)[padded.offset])
        data = np.frombuffer(padded.buffers()[2], dtype=np.uint8, count=first + len(part) * width)
        points[here] = data[first:].reshape(len(part), width)
    return ids


def _numbers(column: pa.Array, low: float, high: float) -> np.ndarray:
    """A batch's number column, copied out of the batch; a null, a value
    not finite or outside [low, high] gives up."""
    if column.null_count:
        raise _Slow
    values = np.array(column.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    if not (np.isfinite(values).all() and values.min(initial=low) >= low and values.max(initial=high) <= high):
        raise _Slow
    return values


class _Batches:
    """The precise reader's ``_Reader`` filled batch by batch from pyarrow's
    record batches (columns by the header's positions): each batch is
    converted into arrays of the file's size, allocated once (``capacity``
    rows at most), and let go, so the file is never held twice."""

    def __init__(
        self, reader: _Reader, max_rows: int | None, capacity: int, *, final: bool = False, instances: bool = True
    ) -> None:
        """``final``: a refusal for too many labels is the file's (a Parquet
        file's ``capacity`` is its rows), not a reason to give up.
        ``instances``: the instance ids are kept (as Arrow text, then one
        array); without, each batch's are checked and only their hashes
        kept, 8 bytes a row, to tell a repeat (``_repeats``)."""
        self.reader = reader
        self.max_rows = max_rows
        self.capacity = capacity
        self.final = final
        layout = reader.layout
        self.codes: dict[str, np.ndarray] = {
            name: np.empty(capacity, dtype=np.int32)
            for name in ("candidate", "y_true", "y_pred", "fold")
            if name in layout.fixed or name == "candidate"
        }
        self.floats: dict[str, np.ndarray] = {
            name: np.empty(capacity, dtype=np.float64) for name in NUMBER_COLUMNS if name in layout.fixed
        }
        self.proba = np.empty((capacity, len(layout.proba)), dtype=np.float64) if layout.proba else None
        self.context_codes = [_Codes() for _ in layout.context]
        self.context = [np.empty(capacity, dtype=np.int32) for _ in layout.context]
        self.instance: list[pa.Array] = []
        self.keep_instances = instances
        self.hashes = np.empty(capacity if "instance" in layout.fixed and not instances else 0, dtype=np.uint64)

    def add(self, batch: pa.RecordBatch) -> None:
        """One record batch's rows converted into the arrays after those
        already read; ``_Slow`` when the precise reader must take over."""
        reader = self.reader
        rows = batch.num_rows
        if not rows:
            return
        done = reader.rows
        if done + rows > self.capacity:
            raise _Slow
        here = slice(done, done + rows)
        start = done + 1  # (a row's number, from 1)
        self._candidates(batch, here, start)
        self._label_columns(batch, here, start)
        self._number_columns(batch, here)
        self._code_columns(batch, here, start)
        reader.rows += rows
        if self.max_rows is not None and reader.rows > self.max_rows:
            raise _Slow

    def _label_columns(self, batch: pa.RecordBatch, here: slice, start: int) -> None:
        """The batch's y_true and y_pred as codes; too many labels is the
        file's refusal when ``final`` (with the rows read so far unless the
        file has ended), else ``_Slow``."""
        reader, fixed = self.reader, self.reader.layout.fixed
        self.codes["y_true"][here] = _encode(batch.column(fixed["y_true"]), reader.true_codes, reader, "y_true", start)
        if "y_pred" in fixed:
            column = batch.column(fixed["y_pred"])
            self.codes["y_pred"][here] = _encode(column, reader.pred_codes, reader, "y_pred", start)
        if reader.over_classes():
            if self.final and reader.max_classes is not None:
                ended = here.stop >= self.capacity
                raise _classes_error(reader.class_count(), reader.max_classes, rows=None if ended else here.stop)
            raise _Slow

    def _number_columns(self, batch: pa.RecordBatch, here: slice) -> None:
        """The batch's score, time and probabilities as floats; ``_Slow``
        when one is out of range or a row's probabilities do not sum to 1."""
        layout = self.reader.layout
        fixed = layout.fixed
        if "score" in fixed:
            self.floats["score"][here] = _numbers(batch.column(fixed["score"]), -np.inf, np.inf)
        if "time" in fixed:
            self.floats["time"][here] = _numbers(batch.column(fixed["time"]), 0, np.inf)
        if self.proba is not None:
            block = self.proba[here]
            for index, (_, position) in enumerate(layout.proba):
                block[:, index] = _numbers(batch.column(position), 0, 1)
            if (np.abs(block.sum(axis=1) - 1) > ROW_SUM_TOLERANCE).any():
                raise _Slow

    def _code_columns(self, batch: pa.RecordBatch, here: slice, start: int) -> None:
        """The batch's folds and context values as codes, and its instance
        ids kept as Arrow text."""
        reader, layout = self.reader, self.reader.layout
        fixed = layout.fixed
        if "fold" in fixed:
            self.codes["fold"][here] = _encode(batch.column(fixed["fold"]), reader.fold_codes, reader, "fold", start)
        for index, (context, position) in enumerate(layout.context):
            column, values = batch.column(position), self.context_codes[index]
            self.context[index][here] = _encode(column, values, reader, CONTEXT + context, start, empty=True)
        if "instance" in fixed:
            ids, longest = _instance_ids(batch.column(fixed["instance"]), reader, start)
            if self.keep_instances:
                self.instance.append(ids)
            else:  # (the ids' hashes do not depend on their array's width: each batch's own)
                self.hashes[here] = id_hashes(_fixed_width([ids], len(ids), longest))

    def _candidates(self, batch: pa.RecordBatch, here: slice, start: int) -> None:
        reader = self.reader
        if "candidate" not in reader.layout.fixed:  # the file of one candidate: code 0, set by the reader
            self.codes["candidate"][here] = 0
            return
        names = reader.candidate_codes
        column = batch.column(reader.layout.fixed["candidate"])
        self.codes["candidate"][here] = _encode(column, names, reader, "candidate", start)
        if (reader.candidate is not None and list(names) != [reader.candidate]) or (
            reader.candidates is not None and not names.keys() <= reader.candidates
        ):
            raise _Slow

    def _contexts(self) -> None:
        """The context columns' codes made one code per distinct tuple of
        values, in order of first appearance."""
        reader = self.reader
        columns = [
            (codes[: reader.rows].astype(np.int64), list(values))
            for codes, values in zip(self.context, self.context_codes, strict=True)
        ]
        self.context.clear()
        key = np.zeros(reader.rows, dtype=np.int64)
        for codes, values in columns:
            key = key * len(values) + codes
        del columns
        found, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        order = np.argsort(first)
        renumber = np.empty(len(found), dtype=np.int32)
        renumber[order] = np.arange(len(found), dtype=np.int32)
        names = [list(codes) for codes in self.context_codes]
        tuples: list[Any] = []
        for combined in found[order]:
            parts: list[str] = []
            for values in reversed(names):
                combined, code = divmod(int(combined), len(values))
                parts.insert(0, values[code])
            tuples.append(parts[0] if len(parts) == 1 else tuple(parts))
        reader.context_codes = _Codes()
        for value in tuples:
            reader.context_codes[value]
        reader.chunks.context.append(renumber[inverse.reshape(-1)])

    def _repeats(self, hashes: np.ndarray, candidate: np.ndarray) -> None:
        """Without the ids: ``_Slow`` when two of a candidate's ids hash
        alike (a repeat, or a collision), for the precise reader to tell
        which, and word it."""
        bounds, order = _candidate_bounds(candidate, len(self.reader.candidate_codes))
        for code in range(len(bounds) - 1):
            rows = slice(bounds[code], bounds[code + 1]) if order is None else order[bounds[code] : bounds[code + 1]]
            if not hashes_distinct(hashes[rows].copy()):
                raise _Slow
        self.hashes = np.empty(0, dtype=np.uint64)

    def data(self, positive: str | None) -> PredictionData:
        """The file's arrays, through the precise reader's assembly (its
        whole-file checks); ``_Slow`` at the first refusal."""
        reader = self.reader
        if not reader.rows:
            raise _Slow
        rows, chunks = reader.rows, reader.chunks
        # The arrays cut to the rows read: views, nothing copied.
        arrays: dict[str, np.ndarray] = {**self.codes, **self.floats}
        for name, array in arrays.items():
            getattr(chunks, name).append(array[:rows])
        if self.proba is not None:
            chunks.proba.append(self.proba[:rows])
        self.codes, self.floats, self.proba = {}, {}, None
        if self.context:
            self._contexts()
        if "instance" in reader.layout.fixed and self.keep_instances:
            chunks.instance.append(_fixed_width(self.instance, rows, reader.instance_width))
        elif "instance" in reader.layout.fixed:
            self._repeats(self.hashes[:rows], chunks.candidate[0])
        # Lines are for refusals, which the precise reader words: any will do.
        for known, lines in ((reader.candidate_codes, reader.candidate_lines), (reader.pred_codes, reader.pred_lines)):
            lines.update(dict.fromkeys(range(len(known)), 0))
        try:
            return _assemble(reader, positive, reader.errors)
        except PredictionFileError:
            raise _Slow from None


# --- Parquet -----------------------------------------------------------------------------------


def _parquet_file(stream: IO, *, text: list[str] | None = None, metadata: Any = None) -> pq.ParquetFile:
    """``text``: the columns read as Arrow dictionaries, as their pages hold
    them (a value once, however many rows use it), never decoded to a value
    a row; ``metadata``: the file's, read already."""
    try:
        # Column chunks read through a buffer, not whole: a row group of a
        # million rows is not held as well as the arrays it is read into.
        return pq.ParquetFile(
            stream, buffer_size=BLOCK_BYTES, pre_buffer=False, read_dictionary=text, metadata=metadata
        )
    except (pa.ArrowException, OSError) as error:
        raise PredictionFileError([f"not a readable Parquet file ({error})"]) from None


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        return _is_text(kind.value_type)
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)


def _is_number(kind: pa.DataType) -> bool:
    return pa.types.is_floating(kind) or pa.types.is_integer(kind)


def _parquet_types(schema: pa.Schema, layout: _Layout, errors: _Errors) -> None:
    """Each column's type: numbers for score, time and probabilities, text
    (or integers) for the others."""
    numbers = _number_positions(layout)
    for position, field in enumerate(schema):
        kind = field.type
        if position in numbers and not _is_number(kind):
            errors.add(f"the column holds {kind}; give numbers (floating-point or integer)", column=field.name)
        elif position not in numbers and not _is_text(kind):
            errors.add(
                f"the column holds {kind}; give text (string) or integers (a label is text: 1 and 1.0 are two)",
                column=field.name,
            )
    errors.raise_any()


def _chunk_pages(stream: IO, chunk: pq.ColumnChunkMetaData, name: str, most: int) -> list[Page]:
    """The headers of a column chunk's pages (``most`` of them at most), or
    the file refused as unreadable naming the column."""
    first = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    try:
        return list(pages(stream, first, chunk.total_compressed_size, most=most))
    except PageError as error:
        raise PredictionFileError([f"not a readable Parquet file (column {cut(name)}: {error})"]) from None


def _dictionary_checked(
    page: Page, name: str, *, label: bool, instance: bool, limits: TextLimits, max_classes: int | None
) -> None:
    """A text column's dictionary page checked: no more than
    ``max_classes`` labels (``label``: a y_true or y_pred column), no value
    longer than ``TextLimits.length`` characters, and (but for the instance
    ids) no more than ``TextLimits.distinct_bytes``."""
    if page.dictionary_values is None:
        return
    if label and max_classes is not None and page.dictionary_values > max_classes:
        raise PredictionFileTooManyClasses(
            [
                f"column {cut(name)}: its dictionary holds {page.dictionary_values:,} labels; at most "
                f"{max_classes:,} are allowed in a prediction set (labels of y_true and y_pred, "
                "proba:<label> columns and the positive label, together)"
            ]
        )
    values_bytes = page.uncompressed - 4 * page.dictionary_values
    if limits.length is not None and values_bytes > 4 * limits.length * max(page.dictionary_values, 1):
        # (4 bytes a character at most: some value is longer than the limit.)
        raise PredictionFileTooLong(
            [
                f"column {cut(name)}: its dictionary holds {page.dictionary_values:,} value"
                f"{'s' if page.dictionary_values != 1 else ''} in {values_bytes:,} bytes, so one is longer "
                f"than {limits.length:,} characters, the limit for a label, a fold, a context's value, "
                "a candidate's name or an instance id"
            ]
        )
    if not instance and limits.distinct_bytes is not None and values_bytes > limits.distinct_bytes:
        raise distinct_bytes_error(name, limits.distinct_bytes)


def _chunk_length_checked(name: str, announced: int, rows: int, length: int) -> None:
    """A text column chunk's announced size checked against what ``rows``
    values of at most ``length`` characters can take."""
    most = rows * (4 * length + PARQUET_VALUE_OVERHEAD) + PARQUET_CHUNK_OVERHEAD
    if announced > most:
        raise PredictionFileTooLong(
            [
                f"column {cut(name)}: its values take {announced:,} bytes once decompressed (as the "
                f"file's pages say), more than {rows:,} values can take ({most:,} bytes) "
                f"when each is at most {length:,} characters, the limit for a label, a fold, a "
                "context's value, a candidate's name or an instance id"
            ]
        )


def _total_checked(total: int, array_bytes: int | None) -> None:
    """All the pages' announced size together checked against
    ``TextLimits.array_bytes`` (none: no limit)."""
    if array_bytes is not None and total > array_bytes:
        raise PredictionFileTooLong(
            [
                f"the file's columns take {total:,} bytes once decompressed (as its pages say); the limit for a "
                f"prediction file is {array_bytes:,} bytes once read (import_predictions, run by the "
                "operator, has none)"
            ]
        )


def _parquet_sizes(
    stream: IO, parquet: pq.ParquetFile, layout: _Layout, limits: TextLimits, max_classes: int | None
) -> None:
    """What the file's pages announce they take once decompressed (their
    headers, read before pyarrow reads any page: ``parquet_pages``),
    checked: a text column chunk takes no more than its values at
    ``TextLimits.length`` characters each (4 bytes a character; whoever
    uploads the file), a label column's dictionary holds no more than
    ``max_classes`` values, a dictionary page of labels, folds, contexts or
    candidates no more than ``TextLimits.distinct_bytes``, and with
    ``TextLimits.array_bytes`` (the web's and the API's) all pages together
    no more than it, in at most ``PARQUET_MAX_PAGES``. A compressed column of
    one long value repeated weighs nearly nothing and decodes to gigabytes;
    a dictionary of a million labels is a few megabytes: this refuses both
    before they are decoded."""
    metadata, names = parquet.metadata, parquet.schema_arrow.names
    numbers = _number_positions(layout)
    labels = {layout.fixed[name] for name in ("y_true", "y_pred") if name in layout.fixed}
    instance = layout.fixed.get("instance")
    total, budget = 0, PARQUET_MAX_PAGES if limits.array_bytes is not None else None
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for position in range(row_group.num_columns):
            chunk, name = row_group.column(position), names[position]
            found = _chunk_pages(stream, chunk, name, budget or metadata.num_rows + 2)
            if budget is not None:
                budget -= len(found)
            announced = max(chunk.total_uncompressed_size, sum(page.uncompressed for page in found))
            total += announced
            if position in numbers:
                continue
            for page in found:
                _dictionary_checked(
                    page,
                    name,
                    label=position in labels,
                    instance=position == instance,
                    limits=limits,
                    max_classes=max_classes,
                )
            if limits.length is not None:
                _chunk_length_checked(name, announced, row_group.num_rows, limits.length)
    _total_checked(total, limits.array_bytes)


def _text_columns(parquet: pq.ParquetFile, layout: _Layout) -> list[str]:
    """The columns read as Arrow dictionaries: the text columns but the
    instance ids, mostly all distinct, which pyarrow would otherwise hash
    into a dictionary as large as the column (2 s of 2.6 for 10,000,000
    rows); their decoded pages are bounded before any is read
    (``_parquet_sizes``), and every id becomes a row's anyway."""
    skipped = _number_positions(layout) | {layout.fixed.get("instance")}
    return [name for position, name in enumerate(parquet.schema_arrow.names) if position not in skipped]


def _read_parquet(
    stream: IO,
    *,
    candidate: str | None,
    positive: str | None,
    allowed: set[str] | None,
    max_bytes: int | None,
    max_rows: int | None,
    max_classes: int | None,
    text_limits: TextLimits,
    instances: bool,
) -> PredictionData:
    if max_bytes is not None:
        size = known_size(stream)
        if size is not None and size > max_bytes:
            raise _size_error(size, max_bytes)
    start = stream.tell()
    parquet = _parquet_file(stream)
    schema = parquet.schema_arrow
    errors = _Errors("row")
    layout = _header(list(schema.names), None, one_candidate=candidate is not None, positive=positive, errors=errors)
    _parquet_types(schema, layout, errors)
    rows = parquet.metadata.num_rows
    if max_rows is not None and rows > max_rows:
        raise PredictionFileError([f"too many rows: more than {max_rows}, the limit for a prediction file"])
    _parquet_sizes(stream, parquet, layout, text_limits, max_classes)
    text = _text_columns(parquet, layout)
    stream.seek(start)
    parquet = _parquet_file(stream, text=text, metadata=parquet.metadata)
    reader = _reader(layout, errors, candidate, allowed, positive, max_classes, text_limits)
    try:
        converted = _Batches(reader, max_rows, rows, final=True, instances=instances)
        for batch in parquet.iter_batches(batch_size=CHUNK_ROWS, use_threads=True):
            converted.add(batch)
        return converted.data(positive)
    except _Slow:
        del converted, reader  # (what was converted goes before the rows are read again)
    except (pa.ArrowException, OSError) as error:
        raise PredictionFileError([f"not a readable Parquet file ({error})"]) from None
    stream.seek(start)
    return _parquet_precise(
        _parquet_file(stream, text=text, metadata=parquet.metadata),
        candidate=candidate,
        positive=positive,
        allowed=allowed,
        max_rows=max_rows,
        max_classes=max_classes,
        text_limits=text_limits,
    )


def _cells(column: pa.Array) -> list[str]:
    """A batch's column as the text a CSV would hold: a null is an empty
    cell, an integer its digits, a float its shortest repr ('nan', 'inf').
    A dictionary's values are made strings once, shared by the rows."""
    if pa.types.is_dictionary(column.type):
        values = _cells(column.dictionary)
        return ["" if code is None else values[code] for code in column.indices.to_pylist()]
    values = column.to_pylist()
    return ["" if value is None else value if isinstance(value, str) else repr(value) for value in values]


def _batches(parquet: pq.ParquetFile, numbers: set[int], reader: _Reader) -> Iterator[list[list[str]]]:
    """The file's rows, batch by batch, as a CSV's cells; each text column's
    values checked against ``TextLimits.length`` on Arrow's side first."""
    names = parquet.schema_arrow.names
    start = 1
    for batch in parquet.iter_batches(batch_size=CHUNK_ROWS, use_threads=True):
        columns = []
        for position in range(batch.num_columns):
            column = batch.column(position)
            if position in numbers:
                column = column.cast(pa.float64())
            elif pa.types.is_dictionary(column.type):
                codes = column.indices.fill_null(len(column.dictionary)).to_numpy(zero_copy_only=False)
                _check_long(column.dictionary, codes, reader, names[position], start)
            else:
                _check_long(column, None, reader, names[position], start)
            columns.append(_cells(column))
        start += batch.num_rows
        yield [list(row) for row in zip(*columns, strict=True)]


def _parquet_precise(
    parquet: pq.ParquetFile,
    *,
    candidate: str | None,
    positive: str | None,
    allowed: set[str] | None,
    max_rows: int | None,
    max_classes: int | None,
    text_limits: TextLimits,
) -> PredictionData:
    """The precise reader's checks over a Parquet file's rows, batch by
    batch: its errors name rows (from 1)."""
    errors = _Errors("row")
    layout = _header(
        list(parquet.schema_arrow.names), None, one_candidate=candidate is not None, positive=positive, errors=errors
    )
    parsed = _reader(layout, errors, candidate, allowed, positive, max_classes, text_limits)
    total = parquet.metadata.num_rows
    done = 0
    for rows in _batches(parquet, _number_positions(layout), parsed):
        parsed.chunk(rows, np.arange(done + 1, done + len(rows) + 1, dtype=np.int64))
        done += len(rows)
        if max_classes is not None and parsed.over_classes():
            raise _classes_error(parsed.class_count(), max_classes, rows=None if done >= total else done)
    if not parsed.rows:
        errors.raise_any()
        raise PredictionFileError(["the file has a header but no rows: add one row per candidate and test instance"])
    errors.raise_any()
    return _assemble(parsed, positive, errors)
