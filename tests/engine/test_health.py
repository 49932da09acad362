"""``/health/`` and the workers' heartbeats (engine.health), against a Redis of
the test's own: what a worker that cannot reach the database makes the
endpoint say (docs/api.md, "Health"), and that a worker whose database check
hangs keeps beating and is reported as cut off, instead of only dropping out
of the live workers while ``/health/`` says ``ok`` (issue 29, finding 11).
"""

import shutil
import threading
import time

import pytest
import redis

from approve_site.celery import app as celery_app
from engine import health
from tests.redis_server import free_port, redis_server

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server to start a Redis of its own"),
]


@pytest.fixture
def broker(tmp_path, settings, monkeypatch):
    """A Redis of this test's own as Celery's broker, with workers (not eager;
    Celery reads the CELERY_* settings as they are now)."""
    port = free_port()
    process = redis_server(port, tmp_path)
    url = f"redis://127.0.0.1:{port}/0"
    settings.CELERY_BROKER_URL, settings.CELERY_BROKER_USE_SSL, settings.CELERY_TASK_ALWAYS_EAGER = url, False, False
    assert celery_app.conf.broker_url == url and not celery_app.conf.task_always_eager
    monkeypatch.setattr(health, "_clients", {})
    yield redis.Redis.from_url(url)
    process.terminate()
    process.wait(timeout=10)


def _answer(client):
    response = client.get("/health/")
    return response.status_code, response.json()


def test_workers_that_cannot_reach_the_database_make_health_say_so(broker, client):
    health.worker_heartbeat(hostname="celery@a", reaches_database=True)
    health.worker_heartbeat(hostname="celery@b", reaches_database=True)
    status, report = _answer(client)
    assert status == 200 and report["status"] == "ok" and report["failing"] == []
    assert report["checks"]["workers"]["status"] == "ok" and report["checks"]["workers"]["live"] == 2

    # One of the two says it cannot reach the database: still live, counted apart.
    health.worker_heartbeat(hostname="celery@b", reaches_database=False)
    status, report = _answer(client)
    assert status == 503
    assert report["status"] == "degraded" and report["failing"] == ["workers"]
    assert report["checks"]["database"] == {"status": "ok"} and report["checks"]["broker"] == {"status": "ok"}
    workers = report["checks"]["workers"]
    assert {key: workers[key] for key in ("status", "live", "database_unreachable")} == {
        "status": "degraded",
        "live": 2,
        "database_unreachable": 1,
    }
    assert 0 <= workers["last_seen_seconds"] < 3 * 10

    # Neither can: no live worker that can take a run.
    health.worker_heartbeat(hostname="celery@a", reaches_database=False)
    status, report = _answer(client)
    assert status == 503 and report["failing"] == ["workers"]
    workers = report["checks"]["workers"]
    assert {key: workers[key] for key in ("status", "live", "database_unreachable")} == {
        "status": "none",
        "live": 2,
        "database_unreachable": 2,
    }

    # Back: the next beat that reaches the database clears it.
    health.worker_heartbeat(hostname="celery@a", reaches_database=True)
    health.worker_heartbeat(hostname="celery@b", reaches_database=True)
    status, report = _answer(client)
    assert status == 200 and report["checks"]["workers"]["status"] == "ok"
    assert "database_unreachable" not in report["checks"]["workers"]


def test_a_worker_whose_database_check_hangs_keeps_beating_and_is_reported_cut_off(
    broker, client, settings, monkeypatch
):
    # A link that stalls after connecting: SELECT 1 never returns (no libpq
    # timeout catches a peer whose TCP stack acknowledges and never answers).
    settings.ENGINE_WORKER_HEARTBEAT_SECONDS = 1
    released, stopping = threading.Event(), threading.Event()
    checks = []

    original = health._database

    def hung_in_the_worker():
        if threading.current_thread() is threading.main_thread():
            return original()  # the endpoint's own check, in the test's thread
        checks.append(time.monotonic())
        released.wait(30)
        return {"status": "unreachable"}

    monkeypatch.setattr(health, "_database", hung_in_the_worker)
    beating = health.worker_heartbeat_start(hostname="celery@stalled", stopping=stopping)
    try:
        time.sleep(4)  # more than three intervals: a worker that stopped beating would be gone
        health.worker_heartbeat(hostname="celery@direct", reaches_database=True)
        status, report = _answer(client)
        assert checks, "the heartbeat asked for no database check"
        assert status == 503, report
        workers = report["checks"]["workers"]
        assert {key: workers[key] for key in ("status", "live", "database_unreachable")} == {
            "status": "degraded",
            "live": 2,
            "database_unreachable": 1,
        }, report
        # Its beats go on at their interval (at most half an interval late), and the hung
        # check was not started again behind itself.
        beats = broker.zscore(health.WORKERS_KEY, "celery@stalled")
        assert beats is not None and float(broker.time()[0]) - beats <= 2
        assert len(checks) == 1
    finally:
        stopping.set()
        released.set()
        beating.join(timeout=5)
    assert not beating.is_alive()


def test_a_beat_that_fails_for_any_reason_does_not_end_the_heartbeat(broker, settings, monkeypatch, caplog):
    settings.ENGINE_WORKER_HEARTBEAT_SECONDS = 0.2
    calls = []

    def unlucky(*, hostname, reaches_database):
        calls.append(reaches_database)
        if len(calls) == 1:
            raise RuntimeError("something unforeseen")

    monkeypatch.setattr(health, "worker_heartbeat", unlucky)
    stopping = threading.Event()
    beating = health.worker_heartbeat_start(hostname="celery@unlucky", stopping=stopping)
    deadline = time.monotonic() + 10
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    stopping.set()
    beating.join(timeout=5)
    assert len(calls) >= 3 and calls[1:3] == [True, True]  # the test database answers the probe
    assert "worker celery@unlucky: heartbeat failed" in caplog.text
