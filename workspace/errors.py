"""Errors raised by services. Pages and the API map them to responses:
``InvalidInput`` → 400 with errors per field, ``RoleRequired`` → 403,
``PhaseConflict`` → 409, ``RateLimited`` → 429."""

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied


class ServiceError(Exception):
    """Base class: a refused change. Nothing was written."""


class InvalidInput(ServiceError):
    """One or more fields are invalid.

    ``errors`` maps a dotted field path (``weights.Accuracy``,
    ``peer_weights.clinician``) to a list of messages.
    """

    def __init__(self, errors: str | Mapping[str, Any]) -> None:
        """``errors``: one message, or per field a message or an iterable of them."""
        if isinstance(errors, str):
            errors = {"non_field_errors": [errors]}
        # Lists of messages (str, or a form's lazy ones); Any so that callers
        # may merge them into dicts of their own.
        self.errors: dict[str, Any] = {
            field: [messages] if isinstance(messages, str) else list(messages) for field, messages in errors.items()
        }
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return "; ".join(
            message if field == "non_field_errors" else f"{field}: {message}"
            for field, messages in self.errors.items()
            for message in messages
        )

    def prefixed(self, prefix: str) -> "InvalidInput":
        """The same errors with their first path component replaced by
        ``prefix``: a service's ``weights.Accuracy`` becomes the bundle's
        ``priorities.clinician.Accuracy``."""
        renamed: dict[str, list[str]] = {}
        for field, messages in self.errors.items():
            rest = field.partition(".")[2] if field != "non_field_errors" else ""
            renamed.setdefault(f"{prefix}.{rest}" if rest else prefix, []).extend(messages)
        return InvalidInput(renamed)

    def within(self, prefix: str) -> "InvalidInput":
        """The same errors nested under ``prefix``: ``name`` becomes
        ``attributes[2].name``."""
        nested: dict[str, list[str]] = {}
        for field, messages in self.errors.items():
            nested.setdefault(prefix if field == "non_field_errors" else f"{prefix}.{field}", []).extend(messages)
        return InvalidInput(nested)


class RoleRequired(ServiceError, PermissionDenied):
    """The acting user does not hold the role the change needs
    (``workspace.services.roles.require_role``); the message says who may
    ("Only the designer of this study can …"). A ``PermissionDenied`` too,
    so the pages answer it with their 403 page and its message."""


class PhaseConflict(ServiceError):
    """The study's phase (or a run's or an invitation's state) does not allow
    this change; the message says why. ``code`` is the API's machine-readable
    code for it (docs/api.md, "Errors"): ``phase_conflict`` unless a more
    specific one helps a client tell the refusals apart."""

    def __init__(self, message: str, code: str = "phase_conflict") -> None:
        super().__init__(message)
        self.code = code


class RateLimited(ServiceError):
    """Too much asked for in a window (a throttle, a budget): the message
    names the limit; ``retry_after`` is the seconds until it allows this
    request again. The API answers 429 with ``Retry-After``."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(ServiceError):
    """An outside service the change needs (an MLflow tracking server) could
    not be used: unreachable, or it refused approve's credentials. ``code``
    says which (docs/api.md, "Errors"); the API answers 502."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code
