"""The header's count of unread notifications (templates/base.html)."""

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from .selectors import unread_count


def unread_notifications(request: HttpRequest) -> dict[str, Any]:
    """``unread_notifications``: the signed-in user's unread count, read
    (one query) only when a page shows it, and once per request."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def count() -> int:
        cached = getattr(request, "_unread_notifications", None)
        if cached is None:
            cached = unread_count(user=user)
            request._unread_notifications = cached  # type: ignore[attr-defined]
        return cached

    return {"unread_notifications": SimpleLazyObject(count)}
