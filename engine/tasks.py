"""Celery tasks: thin, take ids, safe to run twice (the claim in
``engine.services.run_execute`` makes a second delivery a no-op).

Each worker process also writes a heartbeat into the broker while it lives
(``engine.health``), which ``/health/`` reads."""

from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from . import health, services


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def execute_run(self, run_id: int) -> str:
    try:
        outcome = services.run_execute(run_id=run_id)
    except SoftTimeLimitExceeded:
        services.run_fail_timeout(run_id=run_id, seconds=settings.CELERY_TASK_SOFT_TIME_LIMIT)
        return "failed"
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


@shared_task
def recover_stale_runs() -> list[int]:
    """Periodic (``celery beat``, every ``ENGINE_RECOVERY_SWEEP_SECONDS``):
    hand back runs whose lease lapsed and send messages the broker missed."""
    return services.runs_recover_stale()


@worker_ready.connect
def _start_worker_heartbeat(sender: Any, **kwargs: object) -> None:  # the worker (Celery is untyped)
    health.worker_heartbeat_start(hostname=sender.hostname)


@worker_shutdown.connect
def _stop_worker_heartbeat(sender: Any, **kwargs: object) -> None:
    health.worker_heartbeat_stop(hostname=sender.hostname)
