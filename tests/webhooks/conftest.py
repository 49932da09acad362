"""Fixtures for the webhooks' tests: the shared cast and study factory, a
real HTTP receiver the test starts (``http.server`` on 127.0.0.1, a port of
8610-8619) that verifies each delivery's signature and timestamp as
docs/webhooks.md tells a receiver to, and ``after_commit`` to run what a
change leaves for after its commit (the events, then the tasks they
enqueue: Celery is eager in these tests)."""

import hashlib
import hmac
import json
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.fixtures import (  # noqa: F401  (fixtures re-exported for tests/webhooks)
    case_study,
    cast,
    fast_password_hashing,
    make_study,
    test_host_and_clean_cache,
    unchanged,
)

SITE = "https://approve.example.org"
PORTS = range(8610, 8620)


def verify(secret: str, headers, body: bytes, now: float | None = None, tolerance: int = 300) -> bool:
    """The receiver's check, as docs/webhooks.md writes it: the HMAC-SHA256
    of "<timestamp>." + body under the secret, compared in constant time,
    and a timestamp within five minutes."""
    timestamp = headers.get("X-Approve-Timestamp", "")
    signature = headers.get("X-Approve-Signature", "")
    if not timestamp.isdigit() or abs((now or time.time()) - int(timestamp)) > tolerance:
        return False
    expected = "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


@dataclass
class Received:
    path: str
    headers: dict
    body: bytes
    verified: bool

    @property
    def document(self) -> dict:
        return json.loads(self.body)


@dataclass
class Receiver:
    """What the server received, and what it answers: ``statuses`` the
    status codes of the next answers in turn (then ``default``);
    ``secret`` the one it verifies with."""

    port: int
    secret: str = ""
    statuses: list = field(default_factory=list)
    default: int = 200
    received: list = field(default_factory=list)
    delay: float = 0

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait(self, count: int, timeout: float = 10) -> list:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.received


def _handler(receiver: Receiver):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            receiver.received.append(
                Received(self.path, dict(self.headers), body, verify(receiver.secret, self.headers, body))
            )
            if receiver.delay:
                time.sleep(receiver.delay)
            status = receiver.statuses.pop(0) if receiver.statuses else receiver.default
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", receiver.url("/elsewhere"))
            answer = b"ok " * 1000 if status == 200 else b'{"error": "nope"}'
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    return Handler


@contextmanager
def running_receiver():
    """A receiver on 127.0.0.1, on the first free port of ours, while the block runs."""
    for port in PORTS:
        try:
            state = Receiver(port)
            server = ThreadingHTTPServer(("127.0.0.1", port), _handler(state))
            break
        except OSError:
            continue
    else:
        raise RuntimeError("no free port in 8610-8619")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def receiver(settings):
    """A receiver on 127.0.0.1, the only host webhooks may reach."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    with running_receiver() as state:
        yield state


def refused_port() -> int:
    """A port of ours nothing listens on."""
    for port in PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 8610-8619")


@pytest.fixture(autouse=True)
def _eager(request):
    if "real_worker" not in request.node.name:
        request.getfixturevalue("eager_celery")


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.WEBHOOK_SITE_URL = SITE
    settings.WEBHOOK_RETRY_SECONDS = 30
    settings.WEBHOOK_MAX_RETRIES = 3
    settings.WEBHOOK_TIMEOUT_SECONDS = 2
    settings.DEBUG = False


@pytest.fixture
def after_commit(django_capture_on_commit_callbacks):
    return lambda: django_capture_on_commit_callbacks(execute=True)
