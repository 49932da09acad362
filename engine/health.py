"""Health of the service: database, broker and workers (``GET /health/``).

Cheap enough for a load balancer polling every few seconds: one ``SELECT 1``
and one round trip to the broker (its clock and the workers' heartbeat set,
which also proves it answers), each with a timeout of about a second. No
Celery broadcast: each worker writes its own heartbeat into the broker every
``ENGINE_WORKER_HEARTBEAT_SECONDS`` from a background thread
(``worker_heartbeat_start``, started when the worker is ready), and a worker
counts as live while its last beat is at most three intervals old. Each beat
also says whether the worker reaches the database (``DatabaseProbe``: a fresh
connection's ``SELECT 1``, waited for at most half an interval, so a database
that hangs never stops the beat), and the report counts the live workers that
cannot reach it (they take no runs). Times are
the broker's own clock on both sides, so skew between machines does not
matter.

The report names each part and its state, never host names, addresses,
versions or error texts: it is served without authentication.
"""

import logging
import threading
import time
from collections.abc import Callable
from typing import cast

import redis
from django.conf import settings
from django.db import DatabaseError, InterfaceError, connection

from approve_site.celery import app as celery_app

logger = logging.getLogger(__name__)

# A sorted set in the broker's database: worker host name -> time of its last beat.
WORKERS_KEY = "approve:workers"
# The same for the workers whose last beat found the database unreachable.
NO_DATABASE_KEY = "approve:workers:no-database"
# Beats older than this are dropped when a worker writes its own.
FORGET_AFTER_SECONDS = 3600
# A beat waits this fraction of the heartbeat interval (5 s of 10) for the
# worker's database check; a database that has not answered by then counts as
# unreachable (DatabaseProbe). A healthy check takes milliseconds.
DATABASE_PATIENCE = 0.5
TIMEOUT_SECONDS = 1.0
# What redis-py raises for a broker that is down, unreachable or too slow.
REDIS_ERRORS = (redis.RedisError, OSError)

_clients: dict[str, redis.Redis] = {}


def _broker() -> redis.Redis | None:
    """A client for the broker (one pool per URL), or None when the broker is
    not Redis (the embedded install's in-memory transport). A ``rediss://``
    broker is reached with the TLS options Celery's own connection uses
    (``broker_use_ssl``, from REDIS_URL's query: approve_site.settings.redis_from_url)."""
    url = celery_app.conf.broker_url or ""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    client = _clients.get(url)
    if client is None:
        tls = celery_app.conf.broker_use_ssl if url.startswith("rediss://") else None
        client = _clients[url] = redis.Redis.from_url(
            url, socket_connect_timeout=TIMEOUT_SECONDS, socket_timeout=TIMEOUT_SECONDS, **(tls or {})
        )
    return client


def broker_client() -> redis.Redis | None:
    """The broker's client, as the heartbeats and the report use it (None
    unless the broker is Redis); also read by /metrics (approve_site.metrics)."""
    return _broker()


def _seconds(server_time: tuple[int, int]) -> float:
    return server_time[0] + server_time[1] / 1e6


# --- the workers' side ----------------------------------------------------------


class DatabaseProbe:
    """Whether this worker reaches the database, asked at every heartbeat and
    answered by a thread of its own: a fresh connection runs ``SELECT 1``
    (bounded by the connect and statement timeouts of
    ``engine.services.worker_database_options``) and is closed again, so the
    answer is about reaching the database now, not about an old connection.

    The heartbeat waits at most ``patience`` seconds for the answer, and a
    database that has not answered by then counts as unreachable: a link that
    stalls after connecting (the peer's TCP stack acknowledges, nothing
    answers) hangs a query past every libpq timeout, and a heartbeat that
    waited for it would stop, so that the worker only dropped out of the live
    ones and ``/health/`` stayed ``ok`` (issue 29). A check still hanging is
    not doubled: the next beat waits for the same one."""

    def __init__(self, *, patience: float, stopping: threading.Event) -> None:
        self.patience = patience
        self._stopping = stopping
        self._wanted = threading.Event()
        self._answered = threading.Event()
        self._busy = False
        self._reachable = False
        self._thread = threading.Thread(target=self._loop, name="approve-worker-database-check", daemon=True)
        self._thread.start()

    def reachable(self) -> bool:
        if not self._busy:
            self._answered.clear()
            self._busy = True
            self._wanted.set()
        return self._answered.wait(self.patience) and self._reachable

    def _loop(self) -> None:
        while not self._stopping.is_set():
            if not self._wanted.wait(timeout=1.0):
                continue
            self._wanted.clear()
            try:
                reachable = _database()["status"] == "ok"
            except Exception:  # whatever it was, this worker did not reach the database
                logger.exception("worker database check failed")
                reachable = False
            finally:
                connection.close()
            # Answered before no longer busy: a beat that finds it idle
            # asks again, one that finds it busy reads this answer.
            self._reachable = reachable
            self._answered.set()
            self._busy = False


def worker_heartbeat(*, hostname: str, reaches_database: bool) -> None:
    """Record that this worker is alive, at the broker's time, and whether it
    reaches the database (``DatabaseProbe``)."""
    client = _broker()
    if client is None:
        return
    now = _seconds(cast(tuple[int, int], client.time()))  # redis types sync and async clients alike
    with client.pipeline() as pipe:
        pipe.zadd(WORKERS_KEY, {hostname: now})
        if reaches_database:
            pipe.zrem(NO_DATABASE_KEY, hostname)
        else:
            pipe.zadd(NO_DATABASE_KEY, {hostname: now})
        for key in (WORKERS_KEY, NO_DATABASE_KEY):
            pipe.zremrangebyscore(key, "-inf", now - FORGET_AFTER_SECONDS)
            pipe.expire(key, FORGET_AFTER_SECONDS)
        pipe.execute()
    if not reaches_database:
        logger.warning("worker %s: the database is unreachable", hostname)


def worker_heartbeat_stop(*, hostname: str) -> None:
    """Forget a worker that shuts down cleanly (a dead one ages out)."""
    client = _broker()
    if client is not None:
        try:
            with client.pipeline() as pipe:
                pipe.zrem(WORKERS_KEY, hostname)
                pipe.zrem(NO_DATABASE_KEY, hostname)
                pipe.execute()
        except REDIS_ERRORS as error:
            logger.warning("worker %s: heartbeat not removed (%s)", hostname, type(error).__name__)


def worker_heartbeat_start(*, hostname: str, stopping: threading.Event | None = None) -> threading.Thread:
    """Beat every ``ENGINE_WORKER_HEARTBEAT_SECONDS`` for the life of the
    process (a daemon thread: it dies with the worker, which is the point),
    or until ``stopping`` is set. Each beat asks the database probe, waiting
    for its answer at most half an interval (``DATABASE_PATIENCE``), so a
    beat is never late by more than that, whatever the database does; and
    nothing that goes wrong in one beat ends the next ones."""
    stopping = stopping or threading.Event()
    interval = settings.ENGINE_WORKER_HEARTBEAT_SECONDS
    probe = DatabaseProbe(patience=interval * DATABASE_PATIENCE, stopping=stopping)

    def beat() -> None:
        while not stopping.is_set():
            try:
                worker_heartbeat(hostname=hostname, reaches_database=probe.reachable())
            except REDIS_ERRORS as error:
                logger.warning(
                    "worker %s: heartbeat not written, the broker is unreachable (%s)", hostname, type(error).__name__
                )
            except Exception:
                logger.exception("worker %s: heartbeat failed", hostname)
            stopping.wait(interval)

    thread = threading.Thread(target=beat, name="approve-worker-heartbeat", daemon=True)
    thread.start()
    return thread


def worker_sweep_start(*, sweep: Callable[[], list[int]]) -> threading.Thread:
    """Run the recovery sweep every ``ENGINE_RECOVERY_SWEEP_SECONDS`` from
    the worker's main process, for the life of the process. Not a message:
    it never waits behind runs in the queue, however busy the workers are,
    and a worker cut from the database or the broker leaves the sweep to
    the others. Sweeps of several workers at once are safe (locked rows are
    skipped, the hand-back is a conditional update)."""

    def loop() -> None:
        while True:
            time.sleep(settings.ENGINE_RECOVERY_SWEEP_SECONDS)
            try:
                handed_back = sweep()
            except DatabaseError as error:
                logger.warning("recovery sweep skipped: the database is unreachable (%s)", type(error).__name__)
                connection.close()
                continue
            if handed_back:
                logger.info("recovery sweep handed back runs %s", handed_back)

    thread = threading.Thread(target=loop, name="approve-recovery-sweep", daemon=True)
    thread.start()
    return thread


# --- the report -----------------------------------------------------------------


def _database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except (DatabaseError, InterfaceError):  # InterfaceError: a connection closed under Django
        connection.close()  # the next check connects afresh
        return {"status": "unreachable"}
    return {"status": "ok"}


def broker_and_workers() -> tuple[dict, dict]:
    """The report's broker and workers checks (also /metrics' live workers)."""
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
            pipe.zrange(NO_DATABASE_KEY, 0, -1)
            server_time, beats, without_database = pipe.execute()
    except REDIS_ERRORS:
        return {"status": "unreachable"}, {"status": "unknown"}
    now = _seconds(server_time)
    window = 3 * settings.ENGINE_WORKER_HEARTBEAT_SECONDS
    live = {name: now - at for name, at in beats if now - at <= window}
    if not live:
        return {"status": "ok"}, {"status": "none", "live": 0}
    cut_off = len(set(live) & set(without_database))
    report = {"live": len(live), "last_seen_seconds": round(max(min(live.values()), 0), 1)}
    if cut_off:
        # Alive but unable to reach the database: they take no runs.
        status = "none" if cut_off == len(live) else "degraded"
        return {"status": "ok"}, {"status": status, **report, "database_unreachable": cut_off}
    return {"status": "ok"}, {"status": "ok", **report}


def health_report() -> dict:
    """``{"status": "ok" | "degraded", "failing": [...], "checks": {part: {"status": ...}}}``
    for the parts ``database``, ``broker`` and ``workers``."""
    broker, workers = broker_and_workers()
    checks = {"database": _database(), "broker": broker, "workers": workers}
    failing = [name for name, check in checks.items() if check["status"] != "ok"]
    return {"status": "degraded" if failing else "ok", "failing": failing, "checks": checks}
