"""Celery tasks of the MLflow link: thin, take ids, safe to run twice (the
claim in ``tracking.services.import_execute`` makes a second delivery a
no-op)."""

from celery import shared_task

from . import services


@shared_task(ignore_result=True)
def execute_import(import_id: int) -> str:
    """A queued MLflow import (more runs than ``limits.MLFLOW_IMPORT_INLINE_RUNS``)."""
    return services.import_execute(import_id=import_id)
