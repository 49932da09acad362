"""The page headers of a Parquet file's column chunks, read without
decoding any page: what each page announces it takes once decompressed
(which is what a reader allocates for it) and how many values a
dictionary page holds.

The footer's sizes (``ColumnChunkMetaData.total_uncompressed_size``) are the
writer's word for the same thing, but a reader trusts the page headers:
``evaluation.predictions.arrow`` checks these, before pyarrow reads a page.

A page header is a Thrift struct in the compact protocol (parquet.thrift's
``PageHeader``); only the fields read here are kept, the others skipped.
Pure: the standard library only.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

# PageHeader's fields, and DictionaryPageHeader's (parquet.thrift).
_UNCOMPRESSED, _COMPRESSED, _DICTIONARY_HEADER = 2, 3, 7
_DICTIONARY_VALUES = 1
_DICTIONARY_PAGE = 2  # PageType.DICTIONARY_PAGE
# Compact protocol types.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
# No header of a sane file nests deeper, or is longer (pyarrow's own bound on a header's bytes).
_MAX_DEPTH = 8
MAX_HEADER_BYTES = 16 * 1024 * 1024


class PageError(ValueError):
    """The file's pages cannot be walked as its footer places them."""


@dataclass
class Page:
    uncompressed: int
    compressed: int
    dictionary_values: int | None  # a dictionary page's values; None for a data page


class _Bytes:
    """A seekable binary stream read a byte at a time, counted."""

    def __init__(self, stream: IO[bytes], offset: int) -> None:
        stream.seek(offset)
        self.stream = stream
        self.buffer = b""
        self.position = 0
        self.read_bytes = 0

    def byte(self) -> int:
        if self.position >= len(self.buffer):
            self.buffer, self.position = self.stream.read(4096), 0
            if not self.buffer:
                raise PageError("a page header runs past the end of the file")
        self.position += 1
        self.read_bytes += 1
        if self.read_bytes > MAX_HEADER_BYTES:
            raise PageError(f"a page header is longer than {MAX_HEADER_BYTES:,} bytes")
        return self.buffer[self.position - 1]

    def skip(self, count: int) -> None:
        for _ in range(count):  # (a header's few short binaries: statistics)
            self.byte()

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise PageError("a page header holds a malformed number")

    def integer(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)  # zigzag


def _value(data: _Bytes, kind: int, depth: int) -> Any:
    """One value of the compact protocol: integers and structs kept (a
    struct as ``{field: value}``), anything else skipped (None)."""
    if kind in (_TRUE, _FALSE):
        return kind == _TRUE
    if kind == _BYTE:
        return data.byte()
    if kind in (_I16, _I32, _I64):
        return data.integer()
    if kind == _DOUBLE:
        data.skip(8)
    elif kind == _BINARY:
        data.skip(data.varint())
    elif kind in (_LIST, _SET):
        head = data.byte()
        size, element = head >> 4, head & 0x0F
        if size == 15:
            size = data.varint()
        for _ in range(size):
            _value(data, _BYTE if element in (_TRUE, _FALSE) else element, depth + 1)
    elif kind == _MAP:
        size = data.varint()
        if size:
            types = data.byte()
            for _ in range(size):
                _value(data, types >> 4, depth + 1)
                _value(data, types & 0x0F, depth + 1)
    elif kind == _STRUCT:
        return _struct(data, depth + 1)
    else:
        raise PageError(f"a page header holds an unknown type ({kind})")
    return None


def _struct(data: _Bytes, depth: int = 0) -> dict[int, Any]:
    if depth > _MAX_DEPTH:
        raise PageError("a page header nests too deeply")
    fields: dict[int, Any] = {}
    field = 0
    while True:
        head = data.byte()
        kind = head & 0x0F
        if kind == _STOP:
            return fields
        delta = head >> 4
        field = field + delta if delta else data.integer()
        fields[field] = _value(data, kind, depth)


def pages(stream: IO[bytes], start: int, length: int, *, most: int) -> Iterator[Page]:
    """The pages of the column chunk of ``length`` bytes at ``start`` (its
    dictionary page's offset, or its first data page's), in order; no more
    than ``most`` of them (``PageError``)."""
    position, end, count = start, start + length, 0
    while position < end:
        count += 1
        if count > most:
            raise PageError(f"a column chunk has more than {most:,} pages")
        data = _Bytes(stream, position)
        header = _struct(data)
        uncompressed, compressed = header.get(_UNCOMPRESSED), header.get(_COMPRESSED)
        if not isinstance(uncompressed, int) or not isinstance(compressed, int) or uncompressed < 0 or compressed < 0:
            raise PageError("a page header gives no sizes")
        dictionary = header.get(_DICTIONARY_HEADER)
        values = dictionary.get(_DICTIONARY_VALUES) if header.get(1) == _DICTIONARY_PAGE and dictionary else None
        yield Page(uncompressed, compressed, values if isinstance(values, int) else None)
        position += data.read_bytes + compressed
    if position != end:
        raise PageError("the pages of a column chunk do not end where the file's footer says")
