"""Celery tasks: thin, take ids, safe to run twice (the claim in
``engine.services.run_execute`` makes a second delivery a no-op).

Each worker's main process also runs two background threads for its whole
life (``engine.health``): its heartbeat into the broker, with a database
check, which ``/health/`` reads; and the recovery sweep, which is therefore
never queued behind runs however busy the workers are."""

import logging
from collections.abc import Callable
from typing import Any

from celery import Task, shared_task
from celery.exceptions import Ignore, SoftTimeLimitExceeded
from celery.signals import worker_init, worker_ready, worker_shutdown
from django.conf import settings
from django.db import DatabaseError, connection

from workspace import history
from workspace import services as workspace_services

from . import analyses, health, services

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None, ignore_result=True)
def execute_run(self: Task, run_id: int) -> str:
    try:
        outcome = services.run_execute(run_id=run_id)
    except SoftTimeLimitExceeded:
        services.run_fail_timeout(run_id=run_id, seconds=settings.CELERY_TASK_SOFT_TIME_LIMIT)
        return "failed"
    except DatabaseError as error:
        # This worker cannot reach the database (connecting and statements
        # are bounded, engine.services.worker_database_options): it takes
        # nothing, and the message goes back to the queue, ahead of new
        # launches, for a worker that can. Whatever this attempt claimed, its
        # lease lapses and the sweep hands the run back.
        connection.close()
        logger.warning(
            "run %s not taken: the database is unreachable from this worker (%s); message sent back to the queue",
            run_id,
            type(error).__name__,
        )
        raise self.retry(countdown=0, priority=services.RESEND_PRIORITY) from None
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    if not outcome.claimed:
        # Not a success: Celery logs the delivery as ignored, not "succeeded".
        logger.info("run %s: this delivery claimed nothing (the run is %s)", run_id, outcome.status)
        raise Ignore()
    return outcome.status


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None, ignore_result=True)
def execute_analysis_chunk(self: Task, chunk_id: int) -> str:
    """One chunk of a robustness analysis (``engine.analyses``): claimed,
    leased and recovered like a run."""
    try:
        outcome = analyses.chunk_execute(chunk_id=chunk_id)
    except DatabaseError as error:
        connection.close()
        logger.warning(
            "analysis chunk %s not taken: the database is unreachable from this worker (%s); sent back to the queue",
            chunk_id,
            type(error).__name__,
        )
        raise self.retry(countdown=0, priority=services.RESEND_PRIORITY) from None
    if outcome == "not claimed":
        logger.info("analysis chunk %s: this delivery claimed nothing", chunk_id)
        raise Ignore()
    return outcome


# What other apps' work the sweep also recovers (each returns the ids it
# handed back or failed), registered from their AppConfig.ready: the engine
# does not import them (the MLflow link's imports, tracking.apps).
_SWEEPS: dict[str, Callable[[], list[int]]] = {}


def sweep_register(name: str, recover: Callable[[], list[int]]) -> None:
    """Have the recovery sweep call ``recover`` too (``name`` for its log line)."""
    _SWEEPS[name] = recover


def sweep() -> list[int]:
    """The recovery sweep: runs, then analysis chunks, then what other apps
    registered (``sweep_register``), whose lease lapsed. Returns the runs
    handed back (the rest is logged)."""
    runs = services.runs_recover_stale()
    purged = workspace_services.study_deletions_purge()
    if purged:
        logger.info("recovery sweep purged %s deleted studies past their retention", purged)
    chunks = analyses.analyses_recover_stale()
    if chunks:
        logger.info("recovery sweep handed back analysis chunks %s", chunks)
    for name, recover in _SWEEPS.items():
        recovered = recover()
        if recovered:
            logger.info("recovery sweep recovered %s %s", name, recovered)
    return runs


@shared_task(ignore_result=True)
def recover_stale_runs() -> list[int]:
    """The recovery sweep as a task, for a ``celery beat`` (kept as a
    backstop: every worker also sweeps from its own thread, see
    ``health.worker_sweep_start``)."""
    return sweep()


@worker_init.connect
def _bound_database_waits(**kwargs: object) -> None:
    services.worker_database_options()
    # What the worker's tasks change is recorded as coming from a task.
    history.set_default_source("task")


@worker_ready.connect
def _start_worker_threads(sender: Any, **kwargs: object) -> None:  # the worker (Celery is untyped)
    health.worker_heartbeat_start(hostname=sender.hostname)
    health.worker_sweep_start(sweep=sweep)


@worker_shutdown.connect
def _stop_worker_heartbeat(sender: Any, **kwargs: object) -> None:
    health.worker_heartbeat_stop(hostname=sender.hostname)
