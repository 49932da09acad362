"""Project-wide pytest set-up."""

import pytest
from django.conf import settings


def pytest_report_header(config):
    database = settings.DATABASES["default"]
    broker = settings.CELERY_BROKER_URL if not settings.CELERY_TASK_ALWAYS_EAGER else "none (Celery eager)"
    return [
        f"approve: database {database['ENGINE'].rsplit('.', 1)[-1]} ({database['NAME']}), broker {broker}",
    ]


@pytest.fixture(autouse=True)
def _private_cache(settings):
    """Tests clear the cache freely (throttle counters); Django's Redis cache
    clears with FLUSHDB, which would wipe whatever else shares REDIS_URL's
    database. Tests keep the cache in memory; Redis is exercised as Celery's
    broker by the real-stack tests."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tests"}}
