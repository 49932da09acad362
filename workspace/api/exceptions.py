"""Errors in one envelope for every endpoint (docs/api.md, "Errors"):

    {"code": "<machine code>", "detail": "<human message>", "fields": {"path": ["message", ...]}}

- ``code`` is one of ``CODES`` (the table in docs/api.md): DRF's own codes for
  its exceptions (``not_authenticated``, ``not_found``, ``throttled`` ...),
  ``invalid_input`` and ``parse_error`` for 400s, and for 409 the refusal's own
  code (``PhaseConflict.code``, ``Conflict(code=...)``);
- ``fields`` is always there: on a 400 the messages per field, nested
  serializer errors flattened to the dotted paths the bundle uses
  (``weights.Accuracy``, ``attributes[2].name``; a body that cannot be parsed
  is ``{"non_field_errors": [...]}``); ``{}`` on every other status;
- ``detail`` is one sentence: the message, or on a 400 a summary of the fields.
"""

from typing import Any, cast

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from workspace.errors import InvalidInput, PhaseConflict, RateLimited, RoleRequired, Unavailable

# Every code an error answer may carry, with its status (docs/api.md lists
# when each happens; tests/api/test_error_envelope.py checks the two agree).
CODES: dict[str, int] = {
    "invalid_input": 400,
    "parse_error": 400,
    "not_authenticated": 401,
    "authentication_failed": 401,
    "permission_denied": 403,
    "signup_closed": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "not_acceptable": 406,
    "phase_conflict": 409,
    "transition_blocked": 409,
    "run_inputs_invalid": 409,
    "run_not_finished": 409,
    "same_run": 409,
    "invitation_closed": 409,
    "already_expert": 409,
    "analysis_finished": 409,
    "analysis_not_finished": 409,
    "analysis_limit": 409,
    "idempotency_conflict": 409,
    "mlflow_not_connected": 409,
    "mlflow_nothing_to_publish": 409,
    "round_open": 409,
    "no_open_round": 409,
    "webhook_limit": 409,
    "webhook_test_pending": 409,
    "request_too_large": 413,
    "unsupported_media_type": 415,
    "throttled": 429,
    "server_error": 500,
    "mlflow_unreachable": 502,
    "mlflow_unauthorised": 502,
    "mlflow_artifacts_refused": 502,
}

# A 400's summary names at most this many fields (``fields`` has them all).
_SUMMARY_FIELDS = 5


class BadGateway(exceptions.APIException):
    """A 502: an outside service (MLflow) failed; ``code`` says how."""

    status_code = status.HTTP_502_BAD_GATEWAY
    default_detail = "An outside service could not be used."
    default_code = "mlflow_unreachable"


class Conflict(exceptions.APIException):
    """A 409; ``code`` says which refusal (one of ``CODES``)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The study's phase does not allow this."
    default_code = "phase_conflict"


class ThrottledFor(exceptions.Throttled):
    """429 with the refusal's own message (without DRF's "Expected available
    in ..." suffix) and ``Retry-After`` the seconds given."""

    def __init__(self, detail: str, wait: float) -> None:
        super().__init__(detail=detail)
        self.wait = wait


def envelope(code: str, detail: str, fields: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The body of every error answer."""
    return {"code": code, "detail": detail, "fields": fields or {}}


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


def summary(fields: dict[str, list[str]]) -> str:
    """One sentence for a 400's ``detail``: the message itself when there is
    one, else the fields that are wrong."""
    messages = [(path, message) for path, found in fields.items() for message in found]
    if len(messages) == 1:
        path, message = messages[0]
        return message if path == "non_field_errors" else f"{path}: {message}"
    paths = [path for path in fields if path != "non_field_errors"]
    if not paths:
        return f"The request is invalid ({len(messages)} problems; see fields)."
    named = ", ".join(paths[:_SUMMARY_FIELDS])
    if len(paths) > _SUMMARY_FIELDS:
        named += f" and {len(paths) - _SUMMARY_FIELDS} more"
    noun = "field is" if len(paths) == 1 else "fields are"
    return f"{len(paths)} {noun} invalid: {named} (each field's messages are in fields)."


# The code of an exception whose own is not in CODES, by its status.
_BY_STATUS = {
    400: "invalid_input",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "phase_conflict",
    413: "request_too_large",
    415: "unsupported_media_type",
    429: "throttled",
}


def _code(exc: exceptions.APIException) -> str:
    codes = exc.get_codes()
    if isinstance(codes, str) and codes in CODES:
        return codes
    if exc.default_code in CODES:
        return str(exc.default_code)
    return _BY_STATUS.get(exc.status_code, "server_error" if exc.status_code >= 500 else "invalid_input")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    code: str | None = None
    if isinstance(exc, InvalidInput):
        exc = exceptions.ValidationError(exc.errors)
    elif isinstance(exc, PhaseConflict):
        exc = Conflict(str(exc), code=exc.code)
    elif isinstance(exc, RateLimited):
        exc = ThrottledFor(str(exc), exc.retry_after)
    elif isinstance(exc, Unavailable):
        exc = BadGateway(str(exc), code=exc.code)
    elif isinstance(exc, (ObjectDoesNotExist, Http404)):
        exc = exceptions.NotFound()
    elif isinstance(exc, RoleRequired):
        exc = exceptions.PermissionDenied(str(exc))
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, exceptions.ParseError):
        # A body that is not JSON: 400 with its message under non_field_errors,
        # like any other invalid input, but its own code.
        exc, code = exceptions.ValidationError({"non_field_errors": [exc.detail]}), "parse_error"
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # not an API error: Django answers 500 (approve_site.urls.server_error)
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(response.data)
        response.data = envelope(code or "invalid_input", summary(fields), fields)
        return response
    api_error = cast(exceptions.APIException, exc)  # DRF answers its own exceptions only (others: None above)
    detail: str | list[Any] | dict[str, Any] = api_error.detail
    if not isinstance(detail, str):  # an APIException given a list or a dict
        detail = "; ".join(message for messages in _flatten(detail).values() for message in messages)
    response.data = envelope(_code(api_error), str(detail))
    return response
