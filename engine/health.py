"""Health of the service: database, broker and workers (``GET /health/``).

Cheap enough for a load balancer polling every few seconds: one ``SELECT 1``
and one round trip to the broker (its clock and the workers' heartbeat set,
which also proves it answers), each with a timeout of about a second. No
Celery broadcast: each worker writes its own heartbeat into the broker every
``ENGINE_WORKER_HEARTBEAT_SECONDS`` from a background thread
(``worker_heartbeat_start``, started when the worker is ready), and a worker
counts as live while its last beat is at most three intervals old. Times are
the broker's own clock on both sides, so skew between machines does not
matter.

The report names each part and its state, never host names, addresses,
versions or error texts: it is served without authentication.
"""

import logging
import threading
import time
from typing import cast

import redis
from django.conf import settings
from django.db import DatabaseError, connection

from approve_site.celery import app as celery_app

logger = logging.getLogger(__name__)

# A sorted set in the broker's database: worker host name -> time of its last beat.
WORKERS_KEY = "approve:workers"
# Beats older than this are dropped when a worker writes its own.
FORGET_AFTER_SECONDS = 3600
TIMEOUT_SECONDS = 1.0
# What redis-py raises for a broker that is down, unreachable or too slow.
REDIS_ERRORS = (redis.RedisError, OSError)

_clients: dict[str, redis.Redis] = {}


def _broker() -> redis.Redis | None:
    """A client for the broker (one pool per URL), or None when the broker is
    not Redis (the embedded install's in-memory transport)."""
    url = celery_app.conf.broker_url or ""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = redis.Redis.from_url(
            url, socket_connect_timeout=TIMEOUT_SECONDS, socket_timeout=TIMEOUT_SECONDS
        )
    return client


def _seconds(server_time: tuple[int, int]) -> float:
    return server_time[0] + server_time[1] / 1e6


# --- the workers' side ----------------------------------------------------------


def worker_heartbeat(*, hostname: str) -> None:
    """Record that this worker is alive, at the broker's time."""
    client = _broker()
    if client is None:
        return
    now = _seconds(cast(tuple[int, int], client.time()))  # redis types sync and async clients alike
    with client.pipeline() as pipe:
        pipe.zadd(WORKERS_KEY, {hostname: now})
        pipe.zremrangebyscore(WORKERS_KEY, "-inf", now - FORGET_AFTER_SECONDS)
        pipe.expire(WORKERS_KEY, FORGET_AFTER_SECONDS)
        pipe.execute()


def worker_heartbeat_stop(*, hostname: str) -> None:
    """Forget a worker that shuts down cleanly (a dead one ages out)."""
    client = _broker()
    if client is not None:
        try:
            client.zrem(WORKERS_KEY, hostname)
        except REDIS_ERRORS as error:
            logger.warning("worker %s: heartbeat not removed (%s)", hostname, type(error).__name__)


def worker_heartbeat_start(*, hostname: str) -> threading.Thread:
    """Beat every ``ENGINE_WORKER_HEARTBEAT_SECONDS`` for the life of the
    process (a daemon thread: it dies with the worker, which is the point)."""

    def beat() -> None:
        while True:
            try:
                worker_heartbeat(hostname=hostname)
            except REDIS_ERRORS as error:
                logger.warning(
                    "worker %s: heartbeat not written, the broker is unreachable (%s)", hostname, type(error).__name__
                )
            time.sleep(settings.ENGINE_WORKER_HEARTBEAT_SECONDS)

    thread = threading.Thread(target=beat, name="approve-worker-heartbeat", daemon=True)
    thread.start()
    return thread


# --- the report -----------------------------------------------------------------


def _database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        return {"status": "unreachable"}
    return {"status": "ok"}


def _broker_and_workers() -> tuple[dict, dict]:
    if celery_app.conf.task_always_eager:
        # The embedded install: tasks run inside the web process.
        return {"status": "ok", "mode": "in-process"}, {"status": "ok", "mode": "in-process"}
    client = _broker()
    if client is None:
        return {"status": "unknown"}, {"status": "unknown"}
    try:
        with client.pipeline(transaction=False) as pipe:
            pipe.time()
            pipe.zrange(WORKERS_KEY, 0, -1, withscores=True)
            server_time, beats = pipe.execute()
    except REDIS_ERRORS:
        return {"status": "unreachable"}, {"status": "unknown"}
    now = _seconds(server_time)
    ages = [now - at for _, at in beats if now - at <= 3 * settings.ENGINE_WORKER_HEARTBEAT_SECONDS]
    if not ages:
        return {"status": "ok"}, {"status": "none", "live": 0}
    return {"status": "ok"}, {"status": "ok", "live": len(ages), "last_seen_seconds": round(max(min(ages), 0), 1)}


def health_report() -> dict:
    """``{"status": "ok" | "degraded", "failing": [...], "checks": {part: {"status": ...}}}``
    for the parts ``database``, ``broker`` and ``workers``."""
    broker, workers = _broker_and_workers()
    checks = {"database": _database(), "broker": broker, "workers": workers}
    failing = [name for name, check in checks.items() if check["status"] != "ok"]
    return {"status": "degraded" if failing else "ok", "failing": failing, "checks": checks}
