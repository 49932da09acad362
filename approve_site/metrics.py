"""``GET /metrics``: Prometheus metrics (docs/architecture.md, "Observability").

Off (404) unless ``METRICS_TOKEN`` or ``METRICS_ALLOWED_NETWORKS`` is set;
then a scrape needs ``Authorization: Bearer <METRICS_TOKEN>`` or a
``REMOTE_ADDR`` in one of the networks.

- Counted by the request middleware (approve_site.observability), in the
  process that served the request: ``approve_http_requests_total`` by method,
  status class and route (the URL pattern's name, never the path) and
  ``approve_http_request_duration_seconds``. With ``PROMETHEUS_MULTIPROC_DIR``
  set, prometheus-client keeps them in files there that every gunicorn
  worker writes and a scrape of any of them adds up.
- Read at scrape time (``StateCollector``), so right in any process: runs and
  analyses by state and their durations (from the database), the Celery
  queues' length and the live workers (from the broker, as ``/health/``).
"""

import hmac
import ipaddress
from collections.abc import Iterator
from datetime import timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from engine import health
from engine.models import Analysis, Run

# No "_created" series beside each counter and histogram: they double the text for nothing here.
disable_created_metrics()
# The request metrics live here, not in prometheus-client's global registry.
REGISTRY = CollectorRegistry(auto_describe=True)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
REQUESTS = Counter(
    "approve_http_requests",
    "HTTP requests served, by method, status class (2xx...) and route (the URL pattern's name)",
    ["method", "status", "route"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "approve_http_request_duration_seconds",
    "Time from the request reaching Django to its response, by method and route",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
# Runs and analyses take seconds to minutes.
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# kombu's Redis transport keeps a queue's priorities in lists of their own.
_PRIORITY_LISTS = ("", "\x06\x163", "\x06\x166", "\x06\x169")


def route_of(request: HttpRequest) -> str:
    """The route label: the URL pattern's name with its namespace
    (``api:run-detail``), else its pattern, else ``unmatched``: bounded by
    the URL configuration, whatever paths clients ask for."""
    match = request.resolver_match
    if match is None:
        return "unmatched"
    return match.view_name if match.url_name else (match.route or "unnamed")


def request_observe(request: HttpRequest, status: int, seconds: float) -> None:
    method = request.method if request.method in METHODS else "other"
    route = route_of(request)
    REQUESTS.labels(method=method, status=f"{status // 100}xx", route=route).inc()
    LATENCY.labels(method=method, route=route).observe(seconds)


# --- read at scrape time ---------------------------------------------------------------------


def _histogram(name: str, documentation: str, rows: list[Any]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=["state"])
    for row in rows:
        seconds = row["sum"]
        total = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds or 0.0)
        buckets = [(repr(bound), row[f"le{index}"]) for index, bound in enumerate(DURATION_BUCKETS)]
        family.add_metric([row["status"]], buckets=[*buckets, ("+Inf", row["count"])], sum_value=total)
    return family


def _by_status(model: Any, statuses: list[str]) -> dict[str, int]:
    counted = {row["status"]: row["n"] for row in model.objects.values("status").annotate(n=Count("id")).order_by()}
    return {status: counted.get(status, 0) for status in statuses}


def _database_families() -> Iterator[Metric]:
    runs = GaugeMetricFamily("approve_runs", "Validation runs by state", labels=["state"])
    for state, count in _by_status(Run, list(Run.Status.values)).items():
        runs.add_metric([state], count)
    analyses = GaugeMetricFamily("approve_analyses", "Robustness analyses by state", labels=["state"])
    for state, count in _by_status(Analysis, list(Analysis.Status.values)).items():
        analyses.add_metric([state], count)
    finished = [Run.Status.SUCCEEDED, Run.Status.FAILED]
    run_rows = list(
        Run.objects.filter(status__in=finished, duration_seconds__isnull=False)
        .values("status")
        .annotate(
            count=Count("id"),
            sum=Sum("duration_seconds"),
            **{
                f"le{index}": Count("id", filter=Q(duration_seconds__lte=bound))
                for index, bound in enumerate(DURATION_BUCKETS)
            },
        )
        .order_by()
    )
    analysis_rows = list(
        Analysis.objects.filter(status__in=[*finished, Analysis.Status.CANCELLED], finished_at__isnull=False)
        .annotate(took=ExpressionWrapper(F("finished_at") - F("launched_at"), output_field=DurationField()))
        .values("status")
        .annotate(
            count=Count("id"),
            sum=Sum("took"),
            **{
                f"le{index}": Count("id", filter=Q(took__lte=timedelta(seconds=bound)))
                for index, bound in enumerate(DURATION_BUCKETS)
            },
        )
        .order_by()
    )
    yield runs
    yield analyses
    yield _histogram(
        "approve_run_duration_seconds", "Finished runs' computing time (Run.duration_seconds), by state", run_rows
    )
    yield _histogram(
        "approve_analysis_duration_seconds", "Finished analyses' time from launch to finish, by state", analysis_rows
    )


def _broker_families() -> Iterator[Metric]:
    broker, workers = health.broker_and_workers()
    if broker.get("mode") == "in-process":
        return  # eager: no queue, no workers
    up = GaugeMetricFamily("approve_celery_broker_up", "Whether the broker answered this scrape (1) or not (0)")
    up.add_metric([], 1 if broker["status"] == "ok" else 0)
    yield up
    if "live" in workers:
        yield GaugeMetricFamily(
            "approve_celery_workers_live",
            "Workers whose heartbeat is recent (as /health/ counts them)",
            workers["live"],
        )
        yield GaugeMetricFamily(
            "approve_celery_workers_database_unreachable",
            "Live workers that cannot reach the database",
            workers.get("database_unreachable", 0),
        )
    client = health.broker_client()
    if client is None or broker["status"] != "ok":
        return
    queues = GaugeMetricFamily("approve_celery_queue_length", "Messages waiting in each Celery queue", labels=["queue"])
    try:
        with client.pipeline(transaction=False) as pipe:
            for queue in settings.METRICS_CELERY_QUEUES:
                for suffix in _PRIORITY_LISTS:
                    pipe.llen(queue + suffix)
            lengths = pipe.execute()
    except health.REDIS_ERRORS:
        return
    for number, queue in enumerate(settings.METRICS_CELERY_QUEUES):
        width = len(_PRIORITY_LISTS)
        queues.add_metric([queue], sum(lengths[number * width : (number + 1) * width]))
    yield queues


class StateCollector(Collector):
    """The database's and the broker's state, read at each scrape."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("approve_database_up", "Whether the database answered this scrape (1) or not (0)")
        try:
            families = list(_database_families())
        except DatabaseError:
            families = []
        up.add_metric([], 1 if families else 0)
        yield up
        yield from families
        yield from _broker_families()


_STATE = StateCollector()


def exposition() -> bytes:
    """The text of a scrape: the request metrics (each gunicorn worker's added
    up in multiprocess mode) and the state read now."""
    registry = CollectorRegistry(auto_describe=False)
    if settings.PROMETHEUS_MULTIPROC_DIR:
        MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)
    else:
        registry.register(_LocalRequests())
    registry.register(_STATE)
    return generate_latest(registry)


class _LocalRequests(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


# --- the endpoint ----------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _networks(
    listed: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(network, strict=False) for network in listed)


def _from_allowed_network(request: HttpRequest) -> bool:
    networks = _networks(tuple(settings.METRICS_ALLOWED_NETWORKS))
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the scrape may read the metrics, else the answer: 401
    without a token (when one is configured), 403 with a wrong one or from
    a network not listed."""
    token = settings.METRICS_TOKEN
    if settings.METRICS_ALLOWED_NETWORKS and _from_allowed_network(request):
        return None
    given = _bearer(request)
    if token and given is not None and hmac.compare_digest(given.encode(), token.encode()):
        return None
    if token and given is None:
        answer = HttpResponse("Authorization: Bearer <METRICS_TOKEN> needed\n", status=401, content_type="text/plain")
        answer["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return answer
    return HttpResponse("Forbidden\n", status=403, content_type="text/plain")


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    if not (settings.METRICS_TOKEN or settings.METRICS_ALLOWED_NETWORKS):
        raise Http404("metrics are off")
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
