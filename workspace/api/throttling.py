"""Throttles that fail open: with the cache (Redis) unreachable a request is
let through with a warning in the log rather than answered 500. Password
guessing is then limited only by the time each attempt takes, for as long as
the cache is down; refusing every log-in instead would turn a cache outage
into an outage of the whole site."""

import logging

import redis
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
