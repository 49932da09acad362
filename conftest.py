"""Project-wide pytest set-up."""

from django.conf import settings


def pytest_report_header(config):
    database = settings.DATABASES["default"]
    broker = settings.CELERY_BROKER_URL if not settings.CELERY_TASK_ALWAYS_EAGER else "none (Celery eager)"
    return [
        f"approve: database {database['ENGINE'].rsplit('.', 1)[-1]} ({database['NAME']}), broker {broker}",
    ]
