"""``Idempotency-Key`` on the API's creates (docs/api.md, "Idempotency").

A create's ``post`` decorated with ``idempotent`` honours the header for a
signed-in user: the first request with a key claims it, does the work and
keeps its answer (status, body, ``Location``) for a day; the same key with
the same request (method, path with its query, canonical body) then answers
with that answer again, marked ``Idempotent-Replayed: true``, without doing
the work again. The same key with another request is a 409
``idempotency_conflict``, and so is the same key while its first request is
still in progress (a client retries later; it does not wait). Only a
success (2xx) is kept: a refusal or a failure wrote nothing, and the key is
free again. Keys are per user; an anonymous request (the token endpoint)
ignores the header.
"""

import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.http import QueryDict
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workspace.limits import IDEMPOTENCY_KEY_LIFETIME_SECONDS, IDEMPOTENCY_KEY_MAX_LENGTH
from workspace.services import idempotency

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
# The answer's headers a replay sends again.
KEPT_HEADERS = ("Location",)

# What ``_key`` takes: 1 to IDEMPOTENCY_KEY_MAX_LENGTH visible ASCII characters
# (the schema's pattern without a space at either end, which HTTP trims).
KEY_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": IDEMPOTENCY_KEY_MAX_LENGTH,
    "pattern": "^[!-~]([ -~]*[!-~])?$",
}

PARAMETER = OpenApiParameter(
    HEADER,
    KEY_SCHEMA,
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        f"Any string of 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} visible ASCII characters (a UUID will do). The same key "
        f"with the same request within {IDEMPOTENCY_KEY_LIFETIME_SECONDS // 3600} hours answers with the first "
        "answer (Idempotent-Replayed: true) without doing the work again; with another request, or while the "
        "first is in progress, it is a 409 idempotency_conflict. Only successes are kept."
    ),
)


class IdempotencyConflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "This Idempotency-Key cannot be used for this request."
    default_code = "idempotency_conflict"


def _canonical(value: Any) -> Any:
    """The parsed body in a form that hashes alike however it was sent:
    keys sorted (by ``json.dumps``), an uploaded file by its content."""
    if isinstance(value, QueryDict):
        return {key: [_canonical(item) for item in value.getlist(key)] for key in value}
    if isinstance(value, dict):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if hasattr(value, "chunks") and hasattr(value, "seek"):
        digest = hashlib.sha256()
        for chunk in value.chunks():
            digest.update(chunk)
        value.seek(0)
        return {"file": getattr(value, "name", ""), "sha256": digest.hexdigest()}
    return value


def request_hash(request: Request) -> str:
    """SHA-256 of the method, the path with its query and the canonical body."""
    body = json.dumps(_canonical(request.data), sort_keys=True, separators=(",", ":"), default=str)
    text = f"{request.method} {request.get_full_path()}\n{body}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _key(request: Request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not key or len(key) > IDEMPOTENCY_KEY_MAX_LENGTH or not all(" " <= char <= "~" for char in key):
        raise exceptions.ValidationError(
            {
                HEADER: [
                    f"must be 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} visible ASCII characters, got {len(key)} characters"
                    + ("" if key.isascii() else " with some not ASCII")
                ]
            }
        )
    return key


def idempotent(post: Callable[..., Response]) -> Callable[..., Response]:
    """Honour ``Idempotency-Key`` on a view's ``post`` (and declare it in the schema)."""

    @functools.wraps(post)
    def honoured(view: APIView, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = _key(request)
        if key is None or not request.user.is_authenticated:
            return post(view, request, *args, **kwargs)
        digest = request_hash(request)
        record, claimed = idempotency.idempotency_claim(user=request.user, key=key, request_hash=digest)
        if not claimed:
            if record.status is None:
                raise IdempotencyConflict(
                    "A request with this Idempotency-Key is still in progress: try again once it has finished."
                )
            if record.request_hash != digest:
                raise IdempotencyConflict(
                    f"This Idempotency-Key was used for another request (method, path or body) in the last "
                    f"{IDEMPOTENCY_KEY_LIFETIME_SECONDS // 3600} hours: send a new key with a new request."
                )
            replay = Response(record.body, status=record.status, headers=dict(record.headers))
            replay[REPLAYED_HEADER] = "true"
            return replay
        try:
            response = post(view, request, *args, **kwargs)
        except BaseException:
            idempotency.idempotency_release(record=record)
            raise
        if status.is_success(response.status_code):
            headers = {name: response[name] for name in KEPT_HEADERS if response.has_header(name)}
            idempotency.idempotency_complete(
                record=record, status=response.status_code, body=response.data, headers=headers
            )
        else:
            idempotency.idempotency_release(record=record)
        return response

    return extend_schema(parameters=[PARAMETER])(honoured)


def postprocess_idempotency_conflicts(result: dict, generator: object, request: object, public: bool) -> dict:
    """drf-spectacular postprocessing hook: every operation that takes the
    header documents the 409 it may answer (``idempotency_conflict``)."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            names = {parameter.get("name") for parameter in operation.get("parameters", [])}
            responses = operation.get("responses", {})
            if HEADER in names and "409" not in responses:
                responses["409"] = {
                    "description": "The Idempotency-Key was used for another request, or its first request is still "
                    "in progress (code idempotency_conflict).",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                }
    return result
