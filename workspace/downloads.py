"""Downloads and repeated reads (docs/architecture.md, "Compression and
repeated reads"): the one way a view answers a file or a stored document.

- ``download`` answers bytes, with its ``Content-Disposition`` when it is
  a file. From ``STREAM_FROM_BYTES`` on it streams them in pieces of ``PIECE_BYTES``,
  so that the compression (``GZipMiddleware``, which compresses a stream as
  it goes) never holds a second whole copy; a smaller answer goes whole.
- ``not_modified`` answers ``304 Not Modified`` when the request's
  ``If-None-Match`` (or, without it, ``If-Modified-Since``) names the version
  given: Django's ``get_conditional_response``, whose comparison of tags is
  weak, so the ``W/`` tag of a compressed answer matches too. Call it after
  the permission check and before reading what the answer holds.
- ``versioned`` puts the version on an answer: ``ETag``, ``Last-Modified``
  when the time is exact (a finished run's or analysis's), and
  ``Cache-Control: private, no-cache`` (a browser may keep it, but asks
  each time; a shared cache never keeps it).

A version is either a tag built from what identifies an immutable thing
(``version_tag``: a succeeded run's results never change) or the digest of
the bytes themselves (``content_tag``: a study's bundle, which changes with
almost anything). Pages without a version of their own get one from
``ConditionalGetMiddleware`` (the digest of the page), which answers 304 too.

Dependency-free but for Django: a kernel module (docs/architecture.md, "Layers").
"""

import hashlib
from collections.abc import Iterator
from datetime import datetime
from typing import Protocol, cast

from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.utils.cache import get_conditional_response
from django.utils.http import http_date

__all__ = ["PIECE_BYTES", "STREAM_FROM_BYTES", "content_tag", "download", "not_modified", "version_tag", "versioned"]

# A streamed answer's pieces: large enough that writing them costs little,
# small enough that the compressor's buffers stay small.
PIECE_BYTES = 64 * 1024
# Bytes from which an answer is streamed rather than sent whole.
STREAM_FROM_BYTES = 1024 * 1024


def version_tag(*parts: object) -> str:
    """A strong entity tag made of ``parts`` (what identifies the version)."""
    return '"' + "-".join(str(part) for part in parts) + '"'


def content_tag(content: bytes) -> str:
    """A strong entity tag that is the digest of ``content``."""
    return '"' + hashlib.sha256(content).hexdigest()[:32] + '"'


class _Read(Protocol):
    """A read's request: Django's or DRF's (which passes these through)."""

    method: str | None
    META: dict


def _timestamp(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp())


def versioned(response: HttpResponseBase, *, etag: str, last_modified: datetime | None = None) -> HttpResponseBase:
    """``response`` with its version's headers (the module's docstring)."""
    response.headers["ETag"] = etag
    if last_modified is not None:
        response.headers["Last-Modified"] = http_date(_timestamp(last_modified))
    response.headers["Cache-Control"] = "private, no-cache"
    return response


def not_modified(request: _Read, *, etag: str, last_modified: datetime | None = None) -> HttpResponse | None:
    """A ``304`` (with the version's headers) when the request already has
    this version, ``None`` otherwise. For reads (GET, HEAD) only."""
    response = get_conditional_response(cast(HttpRequest, request), etag=etag, last_modified=_timestamp(last_modified))
    if response is None:
        return None
    versioned(response, etag=etag, last_modified=last_modified)
    return response


def _pieces(content: bytes) -> Iterator[bytes]:
    view = memoryview(content)
    for start in range(0, len(content), PIECE_BYTES):
        yield bytes(view[start : start + PIECE_BYTES])


def download(
    content: bytes,
    content_type: str,
    *,
    filename: str | None = None,
    etag: str | None = None,
    last_modified: datetime | None = None,
) -> HttpResponseBase:
    """``content`` as ``content_type`` (streamed or whole: the module's
    docstring), an attachment named ``filename`` when given, versioned by
    ``etag`` or else by its digest. A streamed answer keeps its
    ``Content-Length`` unless compressed."""
    response: HttpResponseBase
    if len(content) < STREAM_FROM_BYTES:
        response = HttpResponse(content, content_type=content_type)
    else:
        response = StreamingHttpResponse(_pieces(content), content_type=content_type)
        response.headers["Content-Length"] = str(len(content))
    if filename is not None:
        response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return versioned(response, etag=etag or content_tag(content), last_modified=last_modified)
