"""Project-wide pytest set-up."""

import pytest
from django.conf import settings

# The shared fixtures (the cast alice, bob, carol and charlie, make_study, the
# demo study...), registered once for every test directory.
pytest_plugins = ["tests.fixtures"]


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


@pytest.fixture(autouse=True)
def _tracking_hosts(settings):
    """The MLflow servers the tests start listen on 127.0.0.1, and the names
    under ``.invalid`` never resolve (the unreachable server's test): the
    hosts the tests may contact. tests/tracking/test_hosts.py empties it to
    test the default policy."""
    settings.TRACKING_ALLOWED_HOSTS = ["127.0.0.1", ".invalid"]


@pytest.fixture
def eager_celery(settings):
    """Force Celery's eager mode (also in the REDIS_URL configuration, where
    no worker runs) for the duration of a test, then restore it: for tests
    that need a launched run executed without a worker."""
    from approve_site.celery import app

    settings.CELERY_TASK_ALWAYS_EAGER = True
    previous = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    try:
        yield app
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = previous


@pytest.fixture(autouse=True)
def _fresh_elicitation_searches():
    """``evaluation.elicited`` keeps the searches it prepared, per prediction
    set and candidate id, for the life of the process. A test's rolled-back
    rows free their ids for the next test (SQLite's sequences roll back too),
    whose set would then find another test's probabilities: every test starts
    with none kept (nor confusions counted, ``evaluation.selectors``)."""
    from evaluation.elicited import forget_prepared
    from evaluation.selectors import forget_confusions

    forget_prepared()
    forget_confusions()


@pytest.fixture
def admin_client(db, admin_user):
    """pytest-django's ``admin_client``, its session verified with a real
    second-factor code: staff must use two-factor sign-in (accounts.otp)."""
    from tests.two_factor import verified_client

    return verified_client(admin_user)
