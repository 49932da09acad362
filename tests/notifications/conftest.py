"""Fixtures for the notifications' tests: the shared cast and study
factory, a recorder of the events published, and ``after_commit`` to run
what a change leaves for after its commit (the events, then the tasks they
enqueue: Celery is eager in the tests)."""

import pytest

from tests.fixtures import (  # noqa: F401  (fixtures re-exported for tests/notifications)
    case_study,
    cast,
    fast_password_hashing,
    make_study,
    test_host_and_clean_cache,
    unchanged,
)
from tests.realstack_support import smtp_server  # noqa: F401  (a real SMTP server, for the real-stack tests)
from workspace import events


@pytest.fixture(autouse=True)
def _eager(request):
    """The tasks run in-process, also with REDIS_URL set (no worker runs in
    these tests), except in the test of a real worker."""
    if "real_worker" not in request.node.name:
        request.getfixturevalue("eager_celery")


@pytest.fixture(autouse=True)
def _site_url(settings):
    settings.NOTIFICATIONS_SITE_URL = "https://approve.example.org"


@pytest.fixture
def after_commit(django_capture_on_commit_callbacks):
    """``with after_commit(): change()`` runs the change's after-commit
    callbacks (and those they add) when the block ends."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def published(monkeypatch):
    """The events published from now on (only recorded: no notification
    is written), as ``(kind, study_id, actor_id, data)``."""
    seen: list[tuple] = []

    def record(event):
        seen.append((event.kind, event.study_id, event.actor_id, event.data))

    monkeypatch.setattr(events, "LISTENERS", [record])
    return seen
