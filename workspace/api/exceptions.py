"""Errors in one shape for every endpoint.

- 400: ``{"field.path": ["message", ...]}``; nested serializer errors are
  flattened to the dotted paths the bundle uses (``weights.Accuracy``); a
  body that cannot be parsed is ``{"non_field_errors": [...]}``;
- 401, 403, 404, 409, 429: ``{"detail": "message"}``.
"""

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler

from workspace.errors import InvalidInput, PhaseConflict


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The study's phase does not allow this."
    default_code = "conflict"


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            path = key if not prefix else (prefix if key == "non_field_errors" else f"{prefix}.{key}")
            for inner_key, messages in _flatten(value, path).items():
                flat.setdefault(inner_key, []).extend(messages)
        return flat
    if isinstance(detail, list) and detail and all(isinstance(item, (dict, list)) for item in detail):
        flat = {}
        for index, value in enumerate(detail):
            for inner_key, messages in _flatten(value, f"{prefix}[{index}]").items():
                flat.setdefault(inner_key, []).extend(messages)
        return flat
    messages = detail if isinstance(detail, list) else [detail]
    return {prefix or "non_field_errors": [str(message) for message in messages]}


def exception_handler(exc, context):
    if isinstance(exc, InvalidInput):
        exc = exceptions.ValidationError(exc.errors)
    elif isinstance(exc, PhaseConflict):
        exc = Conflict(str(exc))
    elif isinstance(exc, ObjectDoesNotExist):
        exc = exceptions.NotFound()
    elif isinstance(exc, exceptions.ParseError):
        # A body that is not JSON is invalid input like any other: 400 in the
        # errors-per-field shape the schema documents, not {"detail"}.
        exc = exceptions.ValidationError({"non_field_errors": [exc.detail]})
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.ValidationError):
        response.data = _flatten(response.data)
    return response
