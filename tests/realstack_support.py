"""What the real-stack tests of notifications, sign-up and webhooks share:
an SMTP server the test starts (aiosmtpd) with the messages it received,
and a real Celery worker on the test's PostgreSQL and Redis that takes one
task from a queue of its own."""

import email
import email.policy
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
from aiosmtpd.controller import Controller
from django.conf import settings

from approve_site.celery import app as celery_app
from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "tests" / "engine" / "realstack_worker.py"

POSTGRES_AND_REDIS = pytest.mark.skipif(
    not (settings.REDIS_URL and settings.DATABASES["default"]["ENGINE"].endswith("postgresql")),
    reason="needs REDIS_URL and a PostgreSQL DATABASE_URL (as .ci/run sets): a real worker, real row locks",
)


class Inbox:
    """aiosmtpd's handler: keeps each message received, as parsed."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], email.message.EmailMessage]] = []

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 (aiosmtpd's name)
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append((list(envelope.rcpt_tos), parsed))
        return "250 Message accepted for delivery"

    def wait(self, count: int, timeout: float, logs=lambda: "") -> None:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.messages) >= count, f"{len(self.messages)} message(s) received; logs:\n{logs()}"


@pytest.fixture
def smtp_server():
    """A real SMTP server on a free port: ``.inbox`` (``Inbox``) and ``.port``."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield SimpleNamespace(inbox=inbox, port=controller.port)
    controller.stop()


def database_url() -> str:
    """The test database's URL, for a worker in another process."""
    database = settings.DATABASES["default"]
    password = f":{database['PASSWORD']}" if database["PASSWORD"] else ""
    host, port = database["HOST"] or "127.0.0.1", database["PORT"] or 5432
    return f"postgres://{database['USER']}{password}@{host}:{port}/{database['NAME']}"


@contextmanager
def worker_taking(module, task_name: str, *, log_path: Path, monkeypatch, env: dict[str, str]) -> Iterator[None]:
    """A real worker (solo pool) on a queue of its own, with ``env`` added to
    its environment; ``module.task_name.delay`` sends to that queue while the
    block runs (so no other worker can take the message). Ready when the
    block starts; stopped, and its queue removed, when it ends."""
    queue = f"approve-test-{uuid.uuid4().hex[:12]}"
    environment = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "approve_site.settings",
        "APPROVE_TEST_QUEUE": queue,
        **env,
    }
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            [sys.executable, str(LAUNCHER), "worker", "--pool", "solo", "-n", f"{queue}@test", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "-l", "info", "-Q", queue],
            cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    real_task = getattr(module, task_name)

    def send_to_the_test_queue(**kwargs):
        with celery_app.connection_for_write(settings.REDIS_URL) as broker:
            real_task.apply_async(kwargs=kwargs, queue=queue, connection=broker)

    monkeypatch.setattr(module, task_name, SimpleNamespace(delay=send_to_the_test_queue))
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        yield
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            worker.kill()
        redis.Redis.from_url(settings.REDIS_URL).delete(queue, f"_kombu.binding.{queue}")
