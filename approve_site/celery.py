"""The Celery application. Configuration lives in settings (``CELERY_*``)."""

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")

app = Celery("approve")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _warm(sender: Any = None, **kwargs: object) -> None:
    """The worker's main process, before its pool forks: the engine loaded
    and warmed once, shared by its children (approve_site/warm.py)."""
    from approve_site.warm import warm

    warm(pages=False)
