"""The Celery application. Configuration lives in settings (``CELERY_*``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")

app = Celery("approve")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
