"""A candidate's predictions as stored bytes and back: the arrays of a
``CandidatePredictions`` in one compressed ``.npz`` archive (a zip of
``.npy`` files, what ``np.savez_compressed`` writes, at deflate level 1),
read with ``allow_pickle=False`` (instance ids are a fixed-width unicode
array, never objects). Pure: NumPy and the standard library.

Level 1 rather than ``savez_compressed``'s 6: at a million rows it packs
seven times faster (0.8 s rather than 5.2 s on the two-core machine, most
of an upload's time) for archives a third larger; ``np.load`` reads both,
so archives stored before read as ever."""

import io
import math
import zipfile
import zlib

import numpy as np

from engine.core import ROW_SUM_TOLERANCE

from .predictions import CandidatePredictions

COMPRESS_LEVEL = 1


def arrays_pack(predictions: CandidatePredictions) -> tuple[bytes, list[str]]:
    """The archive of the candidate's arrays, and the optional ones it holds
    (in ``CandidatePredictions.OPTIONAL``'s order)."""
    columns = predictions.columns
    arrays = {"y_true": predictions.y_true}
    for name in columns:
        values = getattr(predictions, name)
        # Instance ids as a unicode array: an object array would need pickle.
        arrays[name] = values.astype(str) if name == "instance" else values
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL) as archive:
        for key, values in arrays.items():
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                # No object arrays, so no pickle, either way (as arrays_unpack reads it).
                np.lib.format.write_array(member, np.asanyarray(values), allow_pickle=False)
    return buffer.getvalue(), columns


def arrays_unpack(name: str, archive: bytes) -> CandidatePredictions:
    """The ``CandidatePredictions`` of an archive made by ``arrays_pack``."""
    with np.load(io.BytesIO(archive), allow_pickle=False) as stored:
        unknown = set(stored.files) - {"y_true", *CandidatePredictions.OPTIONAL}
        if unknown or "y_true" not in stored.files:
            raise ValueError(f"not an archive of predictions: it holds {sorted(stored.files)}")
        return CandidatePredictions(name=name, **{key: stored[key] for key in stored.files})


# --- an archive brought from elsewhere (a study bundle), checked whole ----------------------------

#: What each array of an archive holds: its kind of values ("codes" index a
#: list of the set, "numbers" are finite floats), and its dimensions.
_ARRAY_KINDS = {
    "y_true": ("codes", 1),
    "y_pred": ("codes", 1),
    "score": ("numbers", 1),
    "proba": ("numbers", 2),
    "fold": ("codes", 1),
    "time": ("numbers", 1),
    "context": ("codes", 1),
    "instance": ("text", 1),
}


# What reading a damaged or foreign zip may raise, besides ValueError.
_UNREADABLE = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    EOFError,
    KeyError,
    TypeError,
    SyntaxError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
)
# What ``np.save`` writes (2.0 only for headers over 64 KiB).
_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _headers(archive: bytes) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each member's shape and type, read from the ``.npy`` headers before
    any array is decompressed (a small archive cannot announce a huge array
    unseen). ``ValueError`` for anything that is not such an archive."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as opened:
            found = {}
            for info in opened.infolist():
                name = info.filename.removesuffix(".npy")
                if not info.filename.endswith(".npy") or name not in _ARRAY_KINDS:
                    raise ValueError(f"it holds {info.filename!r}, which is not one of a candidate's arrays")
                with opened.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    if version not in _HEADER_READERS:
                        raise ValueError(f"{info.filename} is a .npy file of version {version}, which is not read")
                    shape, _, dtype = _HEADER_READERS[version](member)
                found[name] = (tuple(shape), np.dtype(dtype))
    except _UNREADABLE as error:
        raise ValueError(f"not a NumPy .npz archive ({error})") from None
    return found


class TooManyRows(ValueError):
    """The archive holds more instances (``rows``) than ``max_rows``; none of its arrays was read."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        super().__init__(f"{rows} instances, more than allowed")


class TooManyBytes(ValueError):
    """The archive's arrays would take more memory once read (``size``, from
    their headers) than ``max_bytes``; none of them was read (a small
    archive of zeros, or of wide instance ids, may announce gigabytes)."""

    def __init__(self, size: int) -> None:
        self.size = size
        super().__init__(f"{size} bytes once read, more than allowed")


def _in_range(values: np.ndarray, count: int, what: str) -> None:
    if len(values) and (values.min() < 0 or values.max() >= count):
        bad = values[(values < 0) | (values >= count)][0]
        raise ValueError(f"{what}: code {int(bad)} is out of range (the set has {count})")


def arrays_checked(
    name: str,
    archive: bytes,
    *,
    labels: int,
    folds: int,
    contexts: int,
    max_rows: int | None = None,
    max_bytes: int | None = None,
) -> CandidatePredictions:
    """The ``CandidatePredictions`` of an archive brought from elsewhere (a
    study bundle's), every rule of a read file checked: only a candidate's
    arrays, never pickled objects (``allow_pickle=False``), ``y_true`` of
    ``n`` instances (1 to ``max_rows``: beyond, ``TooManyRows`` before any
    array is read) and every other array as long; codes
    within the set's ``labels``, ``folds`` and ``contexts``; ``proba`` of
    shape ``(n, labels)``, between 0 and 1, each row summing to 1 (within
    ``ROW_SUM_TOLERANCE``); ``score`` finite and for two labels at most;
    ``time`` finite and >= 0; instance ids non-empty and distinct. Arrays
    come back in the reader's types (int32 codes, float64 numbers), so that
    ``arrays_pack`` stores them as an upload's. ``ValueError`` says what is
    wrong, starting "not an archive of predictions". ``max_bytes``: the
    most memory its arrays may take once read, from their headers
    (``TooManyBytes`` before any is read)."""
    try:
        return _arrays_checked(name, archive, labels, folds, contexts, max_rows, max_bytes)
    except (TooManyRows, TooManyBytes):
        raise
    except ValueError as error:
        raise ValueError(f"not an archive of predictions: {error}") from None


def _shapes_checked(headers: dict[str, tuple[tuple[int, ...], np.dtype]], labels: int, max_rows: int | None) -> int:
    """The headers' number of instances, every array's type and shape checked."""
    if "y_true" not in headers:
        raise ValueError(f"it has no y_true (it holds {sorted(headers)})")
    for key, (shape, dtype) in headers.items():
        kind, dimensions = _ARRAY_KINDS[key]
        if dtype.hasobject or dtype.fields is not None:
            raise ValueError(f"{key} holds Python objects (pickled), which are never read")
        if dtype.kind not in {"codes": "iu", "numbers": "fiu", "text": "U"}[kind]:
            raise ValueError(f"{key} holds {dtype} values, not {'text' if kind == 'text' else 'numbers'}")
        if len(shape) != dimensions:
            raise ValueError(f"{key} has {len(shape)} dimensions, not {dimensions}")
    n = headers["y_true"][0][0]
    if n == 0:
        raise ValueError("y_true is empty: a candidate has at least one instance")
    if max_rows is not None and n > max_rows:
        raise TooManyRows(n)
    for key, (shape, _) in headers.items():
        if shape[0] != n:
            raise ValueError(f"{key} has {shape[0]} rows, y_true {n}")
    if "proba" in headers and headers["proba"][0][1] != labels:
        raise ValueError(f"proba has {headers['proba'][0][1]} columns; the set has {labels} labels")
    return n


def _numbers_checked(arrays: dict[str, np.ndarray], labels: int) -> None:
    for key in ("score", "proba", "time"):
        if key in arrays and not np.isfinite(arrays[key]).all():
            raise ValueError(f"{key} holds a value that is not a finite number")
    if "score" in arrays and labels > 2:
        raise ValueError(f"a score is for two labels (a binary task), but the set has {labels}")
    if "time" in arrays and (arrays["time"] < 0).any():
        raise ValueError("time holds a negative time")
    if "proba" in arrays:
        proba = arrays["proba"]
        if ((proba < 0) | (proba > 1)).any():
            raise ValueError("proba holds a probability outside 0 to 1")
        sums = proba.sum(axis=1)
        off = np.flatnonzero(np.abs(sums - 1) > ROW_SUM_TOLERANCE)
        if len(off):
            raise ValueError(
                f"proba's row {int(off[0]) + 1} sums to {sums[off[0]]:.9g}, not 1 (within {ROW_SUM_TOLERANCE:g})"
            )


def _arrays_checked(
    name: str, archive: bytes, labels: int, folds: int, contexts: int, max_rows: int | None, max_bytes: int | None
) -> CandidatePredictions:
    headers = _headers(archive)
    n = _shapes_checked(headers, labels, max_rows)
    size = sum(math.prod(shape) * dtype.itemsize for shape, dtype in headers.values())
    if max_bytes is not None and size > max_bytes:
        raise TooManyBytes(size)
    try:
        predictions = arrays_unpack(name, archive)
    except _UNREADABLE as error:  # a member's data damaged after its header
        raise ValueError(f"not a NumPy .npz archive ({error})") from None
    arrays: dict[str, np.ndarray] = {}
    for key in ("y_true", *predictions.columns):
        kind = _ARRAY_KINDS[key][0]
        arrays[key] = getattr(predictions, key).astype(
            {"codes": np.int32, "numbers": np.float64, "text": str}[kind], copy=False
        )
    for key, count in (("y_true", labels), ("y_pred", labels), ("fold", folds), ("context", contexts)):
        if key in arrays:
            _in_range(arrays[key], count, key)
    _numbers_checked(arrays, labels)
    if "instance" in arrays:
        ids = arrays["instance"]
        if (ids == "").any():
            raise ValueError("instance holds an empty id")
        if len(np.unique(ids)) != n:
            raise ValueError("instance holds an id twice")
    return CandidatePredictions(name=name, **arrays)
