"""Throttles that fail open: with the cache (Redis) unreachable a request is
let through with a warning in the log rather than answered 500. Password
guessing is then limited only by the time each attempt takes, for as long as
the cache is down; refusing every log-in instead would turn a cache outage
into an outage of the whole site."""

import logging
import math
from typing import cast

import redis
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle, ScopedRateThrottle
from rest_framework.views import APIView

logger = logging.getLogger(__name__)

# What a cache backend raises when its server is down, unreachable or too
# slow (Django's Redis cache lets redis-py's errors through).
CACHE_ERRORS = (redis.RedisError, OSError)


def log_cache_unreachable(what: str, error: Exception) -> None:
    logger.warning("%s not applied: the cache is unreachable (%s: %s)", what, type(error).__name__, error)


class FailOpenMixin(BaseThrottle):
    """For any DRF throttle whose counters live in the cache."""

    def allow_request(self, request: Request, view: APIView) -> bool:
        try:
            return super().allow_request(request, view)
        except CACHE_ERRORS as error:
            log_cache_unreachable(f"throttle {getattr(self, 'scope', type(self).__name__)!r}", error)
            return True


class FailOpenScopedRateThrottle(FailOpenMixin, ScopedRateThrottle):
    pass


# --- bundle imports ------------------------------------------------------------------
# An import at every limit holds a web worker for about a second or two (issue
# 17, finding 2; bench/import_bundle.py): each user may import a few studies an
# hour, through the API and the page together (one counter, keyed on the user).
IMPORT_SCOPE = "import"


class _ImportScope:
    """What a throttle reads of a view: its scope (the page has no DRF view)."""

    throttle_scope = IMPORT_SCOPE


def import_refusal(wait: float | None = None) -> str:
    """Why an import is refused, for the API's 429 (to which DRF adds when
    to try again, in seconds) and, with ``wait``, the page's."""
    rate = ScopedRateThrottle.THROTTLE_RATES.get(IMPORT_SCOPE) or ""
    count, _, period = rate.partition("/")
    studies = "study" if count == "1" else "studies"
    message = (
        f"Too many imports: each user may import at most {count} {studies} per {period} "
        "(the site's IMPORT_THROTTLE_RATE)."
    )
    if wait is None:
        return message
    seconds = max(1, math.ceil(wait))
    later = f"{seconds} second{'s' if seconds != 1 else ''}" if seconds < 120 else f"{math.ceil(seconds / 60)} minutes"
    return f"{message} Try again in {later}."


def import_throttle_wait(request: Request | HttpRequest) -> float | None:
    """Count an import by the request's user: None when it may go ahead,
    else the seconds until it may (``Retry-After``)."""
    throttle = FailOpenScopedRateThrottle()
    if throttle.allow_request(cast(Request, request), cast(APIView, _ImportScope())):
        return None
    return max(1.0, throttle.wait() or 1.0)
