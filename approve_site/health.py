"""``GET /health/``: is the service able to do its work?

For a load balancer and for the designer's pages. No authentication and
nothing sensitive in the answer (see ``engine.health``). The answer is stable:

    200 {"status": "ok", "failing": [],
         "checks": {"database": {"status": "ok"},
                    "broker": {"status": "ok"},
                    "workers": {"status": "ok", "live": 2, "last_seen_seconds": 3.1}}}
    503 {"status": "degraded", "failing": ["broker", "workers"],
         "checks": {"database": {"status": "ok"},
                    "broker": {"status": "unreachable"},
                    "workers": {"status": "unknown"}}}

A part's status is ``ok``, ``unreachable`` (database, broker), ``none`` (no
worker has beaten lately, or none of the live ones reaches the database),
``degraded`` (workers: some live ones cannot reach the database; the report
adds ``database_unreachable``, their number) or ``unknown`` (workers, when
the broker cannot be asked). With the embedded defaults (tasks run in-process) broker and workers
are ``{"status": "ok", "mode": "in-process"}``. Any part not ``ok`` makes the
answer 503: pages still work without workers, but runs would not start, so a
load balancer that should keep a web node while workers are away can read
``checks.database`` instead of the status code.

It is exempt from the HTTPS redirect (a probe speaks plain HTTP inside the
network); the probe must still send a ``Host`` that ``ALLOWED_HOSTS`` lists.
"""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from engine.health import health_report


@never_cache
@require_safe
def health(request: HttpRequest) -> JsonResponse:
    report = health_report()
    return JsonResponse(report, status=200 if report["status"] == "ok" else 503)
