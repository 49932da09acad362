"""What a cache backend raises when its server is down, and the warning
logged when a protection that counts in the cache (a throttle, a lock-out)
is let go for it: shared by the API's throttles (``workspace.api.throttling``),
the log-in and two-factor lock-outs, the password-reset and sign-up
throttles. Its own module, not the throttles': those import DRF's views
and responses, which a management command's start need not."""

import logging

import redis

# The throttles' logger, as when this lived in workspace.api.throttling.
logger = logging.getLogger("workspace.api.throttling")

# What a cache backend raises when its server is down, unreachable or too
# slow (Django's Redis cache lets redis-py's errors through).
CACHE_ERRORS = (redis.RedisError, OSError)


def log_cache_unreachable(what: str, error: Exception) -> None:
    logger.warning("%s not applied: the cache is unreachable (%s: %s)", what, type(error).__name__, error)
