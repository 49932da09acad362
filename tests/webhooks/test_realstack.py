"""A delivery through a real Celery worker on Redis and PostgreSQL, to the
receiver the test starts, which verifies its signature: the first attempt
answered 503, the retry comes from the broker after its back-off (a real
``task.retry`` with a countdown, not eager mode's loop). Runs where .ci/run
sets DATABASE_URL and REDIS_URL; skipped without them, for that stated
reason."""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
from django.conf import settings

from approve_site.celery import app as celery_app
from webhooks import services, tasks
from webhooks.models import Delivery
from workspace import events
from workspace import services as workspace_services
from workspace.models import Phase

from .conftest import SITE

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "tests" / "engine" / "realstack_worker.py"

pytestmark = pytest.mark.realstack


def _database_url() -> str:
    database = settings.DATABASES["default"]
    password = f":{database['PASSWORD']}" if database["PASSWORD"] else ""
    host, port = database["HOST"] or "127.0.0.1", database["PORT"] or 5432
    return f"postgres://{database['USER']}{password}@{host}:{port}/{database['NAME']}"


@pytest.mark.skipif(
    not (settings.REDIS_URL and settings.DATABASES["default"]["ENGINE"].endswith("postgresql")),
    reason="needs REDIS_URL and a PostgreSQL DATABASE_URL (as .ci/run sets): the worker shares them",
)
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_delivers_and_retries_with_back_off(make_study, receiver, tmp_path, monkeypatch) -> None:
    queue = f"approve-test-{uuid.uuid4().hex[:12]}"
    log_path = tmp_path / "worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "approve_site.settings",
        "APPROVE_TEST_QUEUE": queue,
        "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "WEBHOOK_RETRY_SECONDS": "1",
        "WEBHOOK_MAX_RETRIES": "3",
        "WEBHOOK_SITE_URL": SITE,
    }
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            [sys.executable, str(LAUNCHER), "worker", "--pool", "solo", "-n", f"{queue}@test", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "-l", "info", "-Q", queue],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    real_deliver = tasks.event_deliver

    def send_to_the_test_queue(**kwargs):  # the listener's message, to the worker's private queue
        with celery_app.connection_for_write(settings.REDIS_URL) as broker:
            real_deliver.apply_async(kwargs=kwargs, queue=queue, connection=broker)

    monkeypatch.setattr(tasks, "event_deliver", SimpleNamespace(delay=send_to_the_test_queue))
    monkeypatch.setattr(events, "LISTENERS", [tasks.event_enqueue])  # the webhooks' listener alone
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        built = make_study(Phase.DRAFT)
        webhook = services.webhook_create(study=built.study, by=None, url=receiver.url(), events=["phase.changed"])
        receiver.secret = webhook.secret
        receiver.statuses = [503]
        workspace_services.study_open_voting(study=built.study)  # committed: the listener enqueues at once
        got = receiver.wait(2, timeout=60)
        assert len(got) == 2, log_path.read_text()
        assert all(item.verified for item in got)
        assert got[0].headers["X-Approve-Delivery"] == got[1].headers["X-Approve-Delivery"]
        # The retry came from the broker after its countdown (1 s), signed afresh.
        first, second = (int(item.headers["X-Approve-Timestamp"]) for item in got)
        assert second >= first
        assert got[1].document["data"] == {"from": "draft", "to": "voting"}
        deadline = time.monotonic() + 10
        while (delivery := Delivery.objects.get(webhook=webhook)).status != "succeeded":
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        assert (delivery.attempts, delivery.status_code) == (2, 200)
        assert "retried in 1 s" in log_path.read_text()
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            worker.kill()
        client = redis.Redis.from_url(settings.REDIS_URL)
        client.delete(queue, f"_kombu.binding.{queue}")
