"""Celery tasks: thin, take ids, safe to run twice (the claim in
``engine.services.run_execute`` makes a second delivery a no-op)."""

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from . import services


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def execute_run(self, run_id):
    try:
        outcome = services.run_execute(run_id=run_id)
    except SoftTimeLimitExceeded:
        services.run_fail_timeout(run_id=run_id, seconds=settings.CELERY_TASK_SOFT_TIME_LIMIT)
        return "failed"
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


@shared_task
def recover_stale_runs():
    """Periodic: re-enqueue runs left behind by lost workers."""
    return services.runs_recover_stale()
