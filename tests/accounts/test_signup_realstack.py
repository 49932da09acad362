"""Self sign-up on the real stack: the mails through a real SMTP server the
test starts (aiosmtpd), read back as it received them; the mail task in a
real Celery worker on Redis and PostgreSQL; and two sign-ups racing on
PostgreSQL (the same link twice, one username for two links) making one
account. The first test runs with the embedded defaults too (an eager
task); the others need DATABASE_URL (PostgreSQL) and REDIS_URL, as .ci/run
sets them, and are skipped without, for that stated reason."""

import email
import email.policy
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
from aiosmtpd.controller import Controller
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from accounts import signup, tasks
from accounts.models import SignUpRequest, SitePolicy
from approve_site.celery import app as celery_app
from tests.redis_server import free_port
from workspace.errors import InvalidInput
from workspace.models import EmailConfirmation

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "tests" / "engine" / "realstack_worker.py"
PASSWORD = "a-fresh-passphrase-31"
LINK = re.compile(r"http://testserver/accounts/signup/([A-Za-z0-9_-]{20,})/")

pytestmark = pytest.mark.realstack

POSTGRES_AND_REDIS = pytest.mark.skipif(
    not (settings.REDIS_URL and settings.DATABASES["default"]["ENGINE"].endswith("postgresql")),
    reason="needs REDIS_URL and a PostgreSQL DATABASE_URL (as .ci/run sets): the worker and the race share them",
)


class Inbox:
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
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield SimpleNamespace(inbox=inbox, port=controller.port)
    controller.stop()


def open_policy() -> None:
    policy = SitePolicy.current()
    policy.signup = SitePolicy.SignUp.OPEN
    policy.save()


def parts(message) -> tuple[str, str]:
    assert message.get_content_type() == "multipart/alternative"
    return (
        message.get_body(preferencelist=("plain",)).get_content(),
        message.get_body(preferencelist=("html",)).get_content(),
    )


@pytest.mark.django_db
def test_the_sign_up_mails_through_a_real_smtp_server(
    smtp_server, settings, eager_celery, django_capture_on_commit_callbacks, cast
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp_server.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    open_policy()
    cast.alice.email = "alice@example.org"
    cast.alice.save()
    for address in ("alice@example.org", "newcomer@example.org"):
        with django_capture_on_commit_callbacks(execute=True):
            assert Client().post("/accounts/signup/", {"email": address}).status_code == 200
    smtp_server.inbox.wait(2, timeout=10)
    received = {tuple(rcpt): message for rcpt, message in smtp_server.inbox.messages}
    exists_plain, exists_html = parts(received[("alice@example.org",)])
    assert received[("alice@example.org",)]["Subject"] == "You already have an account on approve"
    assert "http://testserver/accounts/password/reset/" in exists_plain
    assert 'href="http://testserver/accounts/login/"' in exists_html
    assert not LINK.search(exists_plain) and not LINK.search(exists_html)
    plain, html = parts(received[("newcomer@example.org",)])
    token = LINK.search(plain).group(1)
    assert f'href="http://testserver/accounts/signup/{token}/"' in html
    client = Client()
    done = client.post(
        f"/accounts/signup/{token}/", {"username": "newcomer", "password": PASSWORD, "password_again": PASSWORD}
    )
    assert done.status_code == 302
    assert EmailConfirmation.objects.get(user__username="newcomer").email == "newcomer@example.org"


def _database_url() -> str:
    database = settings.DATABASES["default"]
    password = f":{database['PASSWORD']}" if database["PASSWORD"] else ""
    host, port = database["HOST"] or "127.0.0.1", database["PORT"] or 5432
    return f"postgres://{database['USER']}{password}@{host}:{port}/{database['NAME']}"


@POSTGRES_AND_REDIS
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_mails_the_sign_up_link(smtp_server, tmp_path, monkeypatch) -> None:
    queue = f"approve-test-{uuid.uuid4().hex[:12]}"
    log_path = tmp_path / "worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "approve_site.settings",
        "APPROVE_TEST_QUEUE": queue,
        "EMAIL_URL": f"smtp://127.0.0.1:{smtp_server.port}",
    }
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            [sys.executable, str(LAUNCHER), "worker", "--pool", "solo", "-n", f"{queue}@test", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "-l", "info", "-Q", queue],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    real_task = tasks.signup_mail_send

    def send_to_the_test_queue(**kwargs):  # the request's message, to the worker's private queue
        with celery_app.connection_for_write(settings.REDIS_URL) as broker:
            real_task.apply_async(kwargs=kwargs, queue=queue, connection=broker)

    monkeypatch.setattr(tasks, "signup_mail_send", SimpleNamespace(delay=send_to_the_test_queue))
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        open_policy()
        response = Client().post("/api/v1/accounts/signup/", {"email": "worker@example.org"}, "application/json")
        assert response.status_code == 202
        smtp_server.inbox.wait(1, timeout=60, logs=log_path.read_text)
        ((recipients, message),) = smtp_server.inbox.messages
        assert recipients == ["worker@example.org"]
        plain, _ = parts(message)
        token = LINK.search(plain).group(1)
        # The worker wrote the request; the token never crossed the broker (only the address did).
        assert SignUpRequest.objects.get().email == "worker@example.org"
        user = signup.signup_complete(token=token, username="worker", password=PASSWORD)
        assert user.email == "worker@example.org"
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            worker.kill()
        client = redis.Redis.from_url(settings.REDIS_URL)
        client.delete(queue, f"_kombu.binding.{queue}")


def _race(calls) -> list[object]:
    """Run each call in its own thread and connection, released together."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(index, call):
        try:
            barrier.wait()
            results[index] = call()
        except Exception as error:  # noqa: BLE001 (the outcome under test)
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index, call)) for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def _link(email: str) -> str:
    token = signup.signup_link_make(email=email)
    assert token is not None
    return token


@POSTGRES_AND_REDIS
@pytest.mark.django_db(transaction=True)
def test_one_link_posted_twice_at_once_makes_one_account() -> None:
    open_policy()
    token = _link("twice@example.org")
    results = _race(
        [
            lambda: signup.signup_complete(token=token, username="twice-a", password=PASSWORD),
            lambda: signup.signup_complete(token=token, username="twice-b", password=PASSWORD),
        ]
    )
    made = [result for result in results if isinstance(result, User)]
    refused = [result for result in results if isinstance(result, InvalidInput)]
    assert len(made) == 1 and len(refused) == 1, results
    assert refused[0].errors == {"token": [signup.USED_LINK]}
    assert User.objects.filter(email="twice@example.org").count() == 1


@POSTGRES_AND_REDIS
@pytest.mark.django_db(transaction=True)
def test_two_links_racing_for_one_username_make_one_account() -> None:
    open_policy()
    first, second = _link("one@example.org"), _link("two@example.org")
    results = _race(
        [
            lambda: signup.signup_complete(token=first, username="contested", password=PASSWORD),
            lambda: signup.signup_complete(token=second, username="Contested", password=PASSWORD),
        ]
    )
    made = [result for result in results if isinstance(result, User)]
    refused = [result for result in results if isinstance(result, InvalidInput)]
    assert len(made) == 1 and len(refused) == 1, results
    assert list(refused[0].errors) == ["username"]
    assert User.objects.filter(username__iexact="contested").count() == 1
    # The loser's link is still good for another name.
    loser = second if made[0].email == "one@example.org" else first
    assert signup.signup_complete(token=loser, username="uncontested", password=PASSWORD)
