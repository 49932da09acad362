"""Fixtures for the REST API tests.

The cast (``alice`` the designer, experts ``bob`` and ``carol``, outsider
``charlie``), the study factory ``make_study`` and the ``unchanged`` check
come from the workspace tests; this module adds API clients authenticated by
token, a way to finish runs in both test configurations, and the test-host
settings.

Runs: ``engine.services.run_launch`` enqueues its task after commit, and a
test's transaction never commits, so no run executes on its own here, with
Celery eager (SQLite) or not (PostgreSQL + Redis, where no worker runs).
``finish_run`` executes a run in-process; it is a no-op for a run that has
already finished.
"""

from contextlib import contextmanager

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from engine import services as engine_services
from engine.models import Run
from tests.fixtures import (  # noqa: F401  (fixtures re-exported for tests/api)
    CASE_STUDY_PATH,
    PASSWORD,
    Built,
    case_study,
    cast,
    db_snapshot,
    make_study,
    unchanged,
)
from workspace import services
from workspace.models import ApiToken


@pytest.fixture(autouse=True)
def _test_settings(settings):
    """The Django test client sends ``Host: testserver``; passwords hash with
    a fast hasher (the default one takes about a second per password, and
    every test creates several users)."""
    if "testserver" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Throttle counters live in the cache (Redis in the real-stack run, where
    it outlives a test): every test starts with none."""
    cache.clear()
    yield
    cache.clear()


def token_key(user, *, name="test", used_now=True):
    """A new API token key for ``user``. ``used_now`` marks it as just used,
    so authenticating with it does not write ``last_used_at`` (which happens
    at most once a minute): query counts stay exact."""
    token, key = services.api_token_create(user=user, name=name)
    if used_now:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return key


def client_with_token(key=None, **kwargs):
    client = APIClient(**kwargs)
    if key is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def api(cast):
    """``api(user)``: an APIClient authenticated with a fresh token of
    ``user``; ``api(None)``: an anonymous client."""

    def make(user):
        return client_with_token(None if user is None else token_key(user))

    return make


@pytest.fixture
def clients(cast, api):
    """One client per actor of the access matrix."""
    return {
        "anonymous": api(None),
        "charlie": api(cast.charlie),
        "bob": api(cast.bob),
        "carol": api(cast.carol),
        "alice": api(cast.alice),
    }


def finish_run(run_id):
    """Execute a launched run in-process (no worker runs in the tests) and
    return it; a no-op for a run that already finished."""
    engine_services.run_execute(run_id=run_id)
    return Run.objects.get(pk=run_id)


def launch_and_finish(built, user):
    run = engine_services.run_launch(study=built.study, launched_by=user)
    run = finish_run(run.pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


@pytest.fixture
def quiet_on_commit(django_capture_on_commit_callbacks):
    """Launches through the API: with Celery eager, execute the enqueued task
    as a commit would; with a broker, drop it (no worker runs in the tests,
    and a message left in Redis could be picked up by another suite's worker)."""

    @contextmanager
    def capture():
        with django_capture_on_commit_callbacks(execute=django_settings.CELERY_TASK_ALWAYS_EAGER) as callbacks:
            yield callbacks

    return capture
