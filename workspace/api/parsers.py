from collections.abc import Iterable, Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.utils import json

from workspace import limits


def _has_lone_surrogate(data: object) -> bool:
    """Whether any string in the decoded document, key or value, holds a
    lone surrogate. Iterative: the document's depth is bounded, but a walk
    should not depend on that."""
    pending = [data]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


class StrictJSONParser(JSONParser):
    """JSON as DRF parses it, with two refusals (400):

    - a document nested deeper than ``limits.JSON_MAX_DEPTH``, found by a
      linear scan of the text before decoding (the decoder recurses, and
      fails past a thousand levels);
    - strings with lone surrogates (``"\\ud800"`` is valid JSON but no
      database can store or even look it up), refused here rather than
      failing in a query.

    The body's size is bounded before it is read (``limits.BodySizeLimitMiddleware``).
    """

    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:  # any JSON value: an object, a list, ...
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = stream.read().decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        too_deep = limits.json_depth_error(text)
        if too_deep:
            raise ParseError(too_deep)
        try:
            data = json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if _has_lone_surrogate(data):
            raise ParseError(
                "JSON parse error - the body contains a lone surrogate (\\ud800-\\udfff), which is not text"
            )
        return data


class JSONOnlyNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, with a 415 that says what the operation reads: a
    form or multipart body sent to a JSON endpoint is told to send JSON
    (DRF's own message names only the media type it refused)."""

    def select_parser(self, request: Any, parsers: Iterable[BaseParser]) -> BaseParser | None:
        parsers = list(parsers)
        parser = super().select_parser(request, parsers)
        if parser is None:
            media_type = request.content_type.partition(";")[0].strip()  # without a boundary or charset
            reads = " or ".join(parser.media_type for parser in parsers)
            raise UnsupportedMediaType(
                media_type,
                detail=f'Unsupported media type "{media_type}": this operation reads {reads} only '
                "(send the body with that Content-Type).",
            )
        return parser
