"""The Celery application. Configuration lives in settings (``CELERY_*``)."""

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")

app = Celery("approve")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _imports_before_fork(**kwargs: object) -> None:
    """The worker's main process, before its pool forks: the libraries the
    tasks import on first use (scipy, scikit-learn, pyarrow) imported once,
    shared by its children (approve_site/warm.py, ``FIRST_USE``)."""
    # imported here: approve_site.warm reads Django's settings and templates,
    # ready once the worker has set Django up.
    from .warm import imports_first_used

    imports_first_used()
