"""Throttles that fail open: with the cache (Redis) unreachable a request is
let through with a warning in the log rather than answered 500. Password
guessing is then limited only by the time each attempt takes, for as long as
the cache is down; refusing every log-in instead would turn a cache outage
into an outage of the whole site."""

import logging
import math
from typing import Any, cast

from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle, ScopedRateThrottle
from rest_framework.views import APIView

from workspace.cache_errors import CACHE_ERRORS, log_cache_unreachable

logger = logging.getLogger(__name__)


# --- rate-limit headers ------------------------------------------------------
# A throttled operation's every answer says where its client stands, in the
# IETF draft's names (draft-ietf-httpapi-ratelimit-headers): how many requests
# the window allows, how many are left, and the seconds until the oldest one
# counted leaves the window (docs/api.md, "Rate limits"). A 429 adds
# Retry-After (DRF). With the cache unreachable there is no count to give, so
# no headers either.
LIMIT_HEADER, REMAINING_HEADER, RESET_HEADER = "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"
RATE_LIMIT_HEADERS = {
    LIMIT_HEADER: "The requests this operation allows each client in its window (per user, or per address for the "
    "token request).",
    REMAINING_HEADER: "The requests left in the window, this one counted.",
    RESET_HEADER: "The seconds until the oldest request counted leaves the window (one more request is then allowed).",
}

# Refused before the throttle counts the request (the body's size by the
# middleware, authentication and permissions by DRF): no headers.
ANSWERED_BEFORE_THROTTLES = ("401", "403", "413")


class FailOpenMixin(BaseThrottle):
    """For any DRF throttle whose counters live in the cache. Once a request
    is counted, its rate-limit headers are left on the view
    (``view.rate_limit_headers``), for ``RateLimitHeadersMixin`` to send."""

    def allow_request(self, request: Request, view: APIView) -> bool:
        try:
            allowed = super().allow_request(request, view)
        except CACHE_ERRORS as error:
            log_cache_unreachable(f"throttle {getattr(self, 'scope', type(self).__name__)!r}", error)
            return True
        headers = self.rate_limit_headers()
        if headers is not None:
            view.rate_limit_headers = headers  # type: ignore[attr-defined]  # the view carries the headers to finalize_response
        return allowed

    def rate_limit_headers(self) -> dict[str, str] | None:
        history = getattr(self, "history", None)
        if history is None or getattr(self, "num_requests", None) is None:
            return None  # no rate for this scope, or a request not counted
        limit, duration, now = self.num_requests, self.duration, self.now  # type: ignore[attr-defined]  # set by SimpleRateThrottle.allow_request before this is called
        reset = duration - (now - history[-1]) if history else duration
        return {
            LIMIT_HEADER: str(limit),
            REMAINING_HEADER: str(max(0, limit - len(history))),
            RESET_HEADER: str(max(0, math.ceil(reset))),
        }


class RateLimitHeadersMixin(APIView):
    """A throttled view: every answer carries its rate-limit headers."""

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        for name, value in getattr(self, "rate_limit_headers", {}).items():
            response[name] = value
        return response


def postprocess_rate_limit_headers(result: dict, generator: object, request: object, public: bool) -> dict:
    """drf-spectacular postprocessing hook: the rate-limit headers on every
    answer of each throttled operation (a view with ``throttle_classes``)."""
    throttled = {
        (path, method.lower())
        for path, _regex, method, view in getattr(generator, "endpoints", None) or ()
        if getattr(getattr(view, "cls", None), "throttle_classes", None)
    }
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if (path, method) not in throttled:
                continue
            for code, response in operation.get("responses", {}).items():
                if code in ANSWERED_BEFORE_THROTTLES:
                    continue
                headers = response.setdefault("headers", {})
                for name, description in RATE_LIMIT_HEADERS.items():
                    # not required: a request let through with the cache down was not counted
                    headers[name] = {"description": description, "required": False, "schema": {"type": "integer"}}
    return result


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


# --- a run's individual scores -------------------------------------------------------
# GET /api/v1/runs/{run}/results/?individual=true scores every candidate of a
# page from the run's snapshot (issue 29, finding 8): each user may ask for a
# few pages a second on average, keyed on the user.
INDIVIDUAL_SCOPE = "individual_scores"


def individual_scores_refusal() -> str:
    """Why a page of individual scores is refused (DRF adds when to try again)."""
    count, _, period = (ScopedRateThrottle.THROTTLE_RATES.get(INDIVIDUAL_SCOPE) or "").partition("/")
    return (
        f"Too many requests for individual scores: each user may ask for at most {count} pages per {period} "
        "(the site's RESULTS_INDIVIDUAL_THROTTLE_RATE)."
    )


def import_throttle_wait(request: Request | HttpRequest) -> float | None:
    """Count an import by the request's user: None when it may go ahead,
    else the seconds until it may (``Retry-After``)."""
    throttle = FailOpenScopedRateThrottle()
    if throttle.allow_request(cast(Request, request), cast(APIView, _ImportScope())):
        return None
    return max(1.0, throttle.wait() or 1.0)
