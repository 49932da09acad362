"""The site with Redis gone: the broker and the cache point at a closed port.

Nothing here needs the real stack (a closed port refuses at once), so these
run with the embedded defaults too; the fixture turns Celery's eager mode off,
which would otherwise run the task in-process and never touch the broker.
Launch answers 202 with the queued run, the token endpoint and the log-in page
let a correct password through (throttles fail open, with a warning), and
``/health/`` answers 503 naming the broker.
"""

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.db import connection as db_connection
from django.test import override_settings

from approve_site.celery import app as celery_app
from engine import services as engine_services
from engine.models import Run
from workspace.models import ApiToken, Phase

from .conftest import PASSWORD

API = "/api/v1"
CLOSED_PORT = "redis://127.0.0.1:1/0"


def _reset_celery_connections():
    # The app keeps its connection and producer pools for the broker URL it
    # first saw; drop them (kombu keeps them per URL) so the next publish
    # uses the current URL.
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def redis_down():
    closed = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CLOSED_PORT,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    # Celery's configuration reads the CELERY_* Django settings as they are
    # now. Restored before the other fixtures' teardown, which clears the cache.
    with override_settings(CACHES=closed, CELERY_BROKER_URL=CLOSED_PORT, CELERY_TASK_ALWAYS_EAGER=False):
        assert celery_app.conf.broker_url == CLOSED_PORT and not celery_app.conf.task_always_eager
        _reset_celery_connections()
        try:
            with pytest.raises(Exception, match="Connection refused"):
                cache.get("anything")  # the cache really is down
            yield
        finally:
            _reset_celery_connections()


def timed(call):
    started = time.perf_counter()
    response = call()
    return response, time.perf_counter() - started


# On-commit enqueues must fire inside the request, as in production: real commits.
pytestmark = pytest.mark.django_db(transaction=True)


def test_launch_with_the_broker_down_answers_202_with_the_queued_run(redis_down, make_study, api, caplog):
    built = make_study(Phase.CLOSED)
    alice = api(built.study.designer)
    with caplog.at_level("WARNING", logger="engine.services"):
        response, seconds = timed(lambda: alice.post(f"{API}/studies/{built.study.pk}/runs/"))
    print(f"\nlaunch with the broker down: {response.status_code} in {seconds:.2f} s")

    assert response.status_code == 202, response.content
    body = response.json()
    run = Run.objects.get(study=built.study)
    assert body["id"] == run.pk and body["status"] == "queued"
    assert response["Location"] == f"http://testserver{API}/runs/{run.pk}/"
    assert run.status == Run.Status.QUEUED and run.attempts == 0
    assert engine_services.run_awaits_broker(run=run)  # the sweep sends it once the broker is back
    assert f"run {run.pk} stays queued: the broker is unreachable" in caplog.text
    assert seconds < 5
    # The client can follow the run it was given.
    followed = alice.get(response["Location"])
    assert followed.status_code == 200 and followed.json()["status"] == "queued"


def test_token_endpoint_with_the_cache_down_lets_a_correct_password_through(redis_down, cast, caplog):
    from rest_framework.test import APIClient

    with caplog.at_level("WARNING", logger="workspace.api.throttling"):
        response, seconds = timed(
            lambda: APIClient().post(f"{API}/auth/token/", {"username": "alice", "password": PASSWORD}, format="json")
        )
    print(f"\ntoken with the cache down: {response.status_code} in {seconds:.2f} s")

    assert response.status_code == 201, response.content
    assert ApiToken.objects.filter(user=cast.alice).count() == 1
    assert len(response.json()["token"]) >= 32
    assert "throttle 'login' not applied: the cache is unreachable (ConnectionError" in caplog.text
    assert seconds < 5
    wrong = APIClient().post(f"{API}/auth/token/", {"username": "alice", "password": "nope"}, format="json")
    assert wrong.status_code == 400  # failing open lets requests through, not wrong passwords


def test_login_page_with_the_cache_down_still_logs_in(redis_down, cast, client, caplog):
    with caplog.at_level("WARNING", logger="workspace.api.throttling"):
        refused = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
        accepted = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert refused.status_code == 200 and b"correct username and password" in refused.content
    assert accepted.status_code == 302
    # Both attempts skip the lock-out check; the failure is not counted; the
    # success does not reset the username's count.
    assert caplog.text.count("log-in lock-out not applied: the cache is unreachable") == 2
    assert caplog.text.count("log-in failure count not applied: the cache is unreachable") == 1
    assert caplog.text.count("log-in failure reset not applied: the cache is unreachable") == 1


def test_health_with_the_broker_down_answers_503_naming_it(redis_down, client):
    response, seconds = timed(lambda: client.get("/health/"))
    print(f"\nhealth with the broker down: {response.status_code} in {seconds:.2f} s: {response.content.decode()}")

    assert response.status_code == 503
    assert response.json() == {
        "status": "degraded",
        "failing": ["broker", "workers"],
        "checks": {
            "database": {"status": "ok"},
            "broker": {"status": "unreachable"},
            "workers": {"status": "unknown"},
        },
    }
    assert response["Cache-Control"].startswith("max-age=0")
    assert seconds < 3


def test_run_validation_with_the_broker_down_says_so(redis_down, make_study):
    built = make_study(Phase.CLOSED)
    with pytest.raises(CommandError) as refused:
        call_command("run_validation", str(built.study.pk), "--timeout", "30")
    run = Run.objects.get(study=built.study)
    assert str(refused.value) == (
        f"the broker (Redis) is unreachable, so no worker can take run {run.pk}: it is saved as queued and the "
        f"recovery sweep (celery beat) sends it once the broker is back; follow it with GET /api/v1/runs/{run.pk}/"
    )
    assert run.status == Run.Status.QUEUED


# --- /health/ in the other states ------------------------------------------------


def test_health_of_the_embedded_install(client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # as without REDIS_URL
    response = client.get("/health/")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "failing": [],
        "checks": {
            "database": {"status": "ok"},
            "broker": {"status": "ok", "mode": "in-process"},
            "workers": {"status": "ok", "mode": "in-process"},
        },
    }


def test_health_with_the_database_down(client, monkeypatch):
    def refused(*args, **kwargs):
        raise OperationalError("could not connect to server: Connection refused")

    monkeypatch.setattr(db_connection, "cursor", refused)
    response = client.get("/health/")
    assert response.status_code == 503
    report = json.loads(response.content)
    assert report["checks"]["database"] == {"status": "unreachable"}
    assert "database" in report["failing"]
    assert b"Connection refused" not in response.content  # no error texts for anonymous callers


def test_health_answers_get_and_head_only(client):
    assert client.head("/health/").status_code in (200, 503)
    assert client.post("/health/").status_code == 405


def test_health_is_not_redirected_to_https(client, settings):
    # The production settings (DEBUG off), read in a process of their own.
    production = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from django.conf import settings; "
            "print(json.dumps([settings.SECURE_SSL_REDIRECT, settings.SECURE_REDIRECT_EXEMPT]))",
        ],
        env={
            **os.environ,
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(64),
            "ALLOWED_HOSTS": "example.com",
            "DJANGO_SETTINGS_MODULE": "approve_site.settings",
        },
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    settings.SECURE_SSL_REDIRECT, settings.SECURE_REDIRECT_EXEMPT = json.loads(production.stdout)
    assert settings.SECURE_SSL_REDIRECT is True
    assert client.get("/health/").status_code in (200, 503)
    assert client.get("/accounts/login/").status_code == 301
