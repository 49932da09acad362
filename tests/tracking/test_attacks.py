"""The MLflow link attacked (docs/architecture.md, "MLflow hosts"): the
attacker is any signed-in user who can create a study and aim its connection
anywhere, or who runs a look-alike tracking server. None of it may reach a
loopback or private service, read or write a local file, leak the token,
tell one network failure from another, or stall the process.

A listener on 127.0.0.1 (and ::1) records every TCP connection made to it;
fake tracking servers (``FakeMlflow``, MLflow's JSON from http.server) play
the look-alike."""

import http.server
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
from contextlib import contextmanager, suppress

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tracking import remote, services
from tracking.models import MlflowConnection, MlflowRunLink
from tracking.remote import Connection, TrackerError
from workspace import limits
from workspace.errors import InvalidInput
from workspace.models import Phase

from .conftest import EXPERIMENT, MODELS, free_port, log_models
from .test_services import close_and_run

SENTINEL = "approve-sentinel-8d1f: SECRET_KEY=do-not-leak"


# --- the listener, and what was opened -----------------------------------------------


class Listener:
    """TCP servers on 127.0.0.1 and (where there is IPv6) ::1, one port,
    recording every connection accepted (and closing it at once)."""

    def __init__(self) -> None:
        self.connections: list[tuple] = []
        self.sockets: list[socket.socket] = []
        for _ in range(20):
            self.port = free_port()
            try:
                self.sockets = [socket.create_server(("127.0.0.1", self.port))]
            except OSError:
                continue
            with suppress(OSError):  # no IPv6 here, or the port taken on it
                self.sockets.append(socket.create_server(("::1", self.port), family=socket.AF_INET6))
            break
        self.running = True
        self.threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in self.sockets]
        for thread in self.threads:
            thread.start()

    def _accept(self, server: socket.socket) -> None:
        server.settimeout(0.1)
        while self.running:
            try:
                connection, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections.append(peer)
            connection.close()

    def close(self) -> None:
        self.running = False
        for thread in self.threads:
            thread.join(2)
        for server in self.sockets:
            server.close()


@pytest.fixture
def listener():
    made = Listener()
    yield made
    made.close()


@pytest.fixture
def default_policy(settings):
    """A deployment's defaults: DEBUG off, no TRACKING_ALLOWED_HOSTS."""
    settings.TRACKING_ALLOWED_HOSTS = []
    settings.DEBUG = False


_OPENED: list[tuple[str, str]] = []
_WATCHED: list[str] = []


def _audit(event, args):
    if _WATCHED and event in ("open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove"):
        path = args[0] if args else None
        if isinstance(path, str | bytes | os.PathLike):
            text = os.fsdecode(path)
            if any(text == watched or text.startswith(watched.rstrip("/") + "/") for watched in _WATCHED):
                _OPENED.append((event, text))


sys.addaudithook(_audit)  # (a hook cannot be removed: it records only while _WATCHED is set)


@contextmanager
def nothing_opened_under(*folders):
    """Python's audit events: no file opened, no folder listed or made,
    under ``folders`` within the block."""
    _OPENED.clear()
    _WATCHED[:] = [str(folder) for folder in folders]
    try:
        yield
    finally:
        _WATCHED.clear()
    assert _OPENED == []


def refused_alike(call) -> Exception:
    """``call()`` refused either at validation (InvalidInput naming
    ``tracking_uri``, and nothing else) or with the one unreachable message."""
    with pytest.raises((InvalidInput, TrackerError)) as refused:
        call()
    error = refused.value
    if isinstance(error, InvalidInput):
        assert set(error.errors) == {"tracking_uri"}, error.errors
    else:
        assert (str(error), error.code) == (remote.UNREACHABLE, "mlflow_unreachable")
    return error


# --- the spellings -------------------------------------------------------------------


def spellings(port: int) -> list[str]:
    """Ways to write a loopback (or internal) address that some parser reads
    as another host, or as a public one."""
    p = port
    return [
        # a backslash: urllib.parse's host is after the @, requests/urllib3 connect before it
        f"http://127.0.0.1:{p}\\@x.invalid",
        f"http://127.0.0.1:{p}\\\\@x.invalid",
        f"http://[::1]:{p}\\@x.invalid",
        f"http://localhost:{p}\\@x.invalid",
        f"https://127.0.0.1:{p}\\@x.invalid",
        f"http://127.0.0.1:{p}\\.x.invalid",
        f"http:\\\\127.0.0.1:{p}",
        # IPv6
        f"http://[::1]:{p}",
        f"http://[::ffff:127.0.0.1]:{p}",
        f"http://[::ffff:7f00:1]:{p}",
        f"http://[0:0:0:0:0:0:0:1]:{p}",
        f"http://[::1%25lo]:{p}",
        f"http://[fe80::1%25lo]:{p}",
        f"http://[::]:{p}",
        f"http://[::127.0.0.1]:{p}",
        f"http://[64:ff9b::7f00:1]:{p}",
        f"http://[2002:7f00:1::1]:{p}",
        f"http://[::FFFF:127.0.0.1]:{p}",
        # IPv4 in other notations
        f"http://2130706433:{p}",
        f"http://0177.0.0.1:{p}",
        f"http://0x7f.1:{p}",
        f"http://0x7f000001:{p}",
        f"http://127.1:{p}",
        f"http://127.0.1:{p}",
        f"http://127.000.000.001:{p}",
        f"http://0.0.0.0:{p}",
        f"http://0:{p}",
        f"http://10.0.0.1:{p}",
        f"http://169.254.169.254:{p}",
        # names, cases and dots
        f"http://localhost:{p}",
        f"http://LOCALHOST:{p}",
        f"http://LocalHost.:{p}",
        f"http://localhost.:{p}",
        f"http://127.0.0.1.:{p}",
        f"HTTP://127.0.0.1:{p}",
        f"http://localhost.localdomain:{p}",
        f"http://{socket.gethostname().lower()}:{p}",
        # user information
        f"http://user:pass@127.0.0.1:{p}",
        f"http://x.invalid@127.0.0.1:{p}",
        f"http://x.invalid:{p}@127.0.0.1:{p}",
        f"http://127.0.0.1:{p}@x.invalid",
        f"http://@127.0.0.1:{p}",
        # percent-encoding
        f"http://%31%32%37.0.0.1:{p}",
        f"http://%6c%6f%63%61%6c%68%6f%73%74:{p}",
        f"http://x.invalid%40127.0.0.1:{p}",
        f"http://127.0.0.1%3a{p}",
        # spaces, tabs, line breaks
        f"http://127.0.0.1\t:{p}",
        f"http://loc\talhost:{p}",
        f"http://127.0.0.1:{p}\n",
        f"http://127.0.0.1:{p}\r\nHost: x.invalid",
        f"http://127.0.0.1 :{p}",
        f" http://127.0.0.1:{p}",
        f"http://x.invalid :{p}@127.0.0.1:{p}",
        # the scheme's slashes
        f"http:/127.0.0.1:{p}",
        f"http:127.0.0.1:{p}",
        f"http:///127.0.0.1:{p}",
        f"http:/\\127.0.0.1:{p}",
        # Unicode dots and digits
        f"http://127。0。0。1:{p}",
        f"http://１２７.０.０.１:{p}",
        f"http://ｌｏｃａｌｈｏｓｔ:{p}",
        f"http://127.0.0.1\u200b:{p}",
        f"http://local\u00adhost:{p}",
        # ports, queries and fragments
        f"http://127.0.0.1:0{p}",
        f"http://127.0.0.1:{p + 65536}",
        f"http://127.0.0.1:{p}#@x.invalid",
        f"http://127.0.0.1:{p}?@x.invalid",
        f"http://127.0.0.1:{p}/@x.invalid",
        f"http://127.0.0.1:{p}/../x",
        # names that resolve to loopback (the resolver patched below)
        f"http://mlflow.example.com:{p}",
        f"https://mlflow.example.com:{p}",
        f"http://both.example.com:{p}",
    ]


def fake_resolver(monkeypatch, names):
    """``socket.getaddrinfo`` answering ``names`` ({name: [address]}) and
    refusing every other name (the network is closed); counts its calls."""
    real = socket.getaddrinfo
    calls = []

    def resolve(host, port, *args, **kwargs):
        calls.append(host)
        if host in names:
            family = {True: socket.AF_INET6, False: socket.AF_INET}
            return [
                (family[":" in a], socket.SOCK_STREAM, 6, "", (a, port, 0, 0) if ":" in a else (a, port))
                for a in names[host]
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return calls


LOOPBACK_NAMES = {
    "mlflow.example.com": ["127.0.0.1", "::1"],
    "both.example.com": ["93.184.216.34", "127.0.0.1"],
}


@pytest.mark.usefixtures("default_policy")
def test_no_spelling_reaches_a_loopback_listener(make_study, listener, monkeypatch, cast, tmp_path):
    """Each spelling through the service the API's PUT calls (and the PUT
    itself), then stored as a study's connection (as an older version would
    have let it be saved) and used by the preview, the import and
    publishing: every one refused alike, and nothing connects."""
    table = spellings(listener.port)
    assert len(table) >= 40 and len(set(table)) == len(table)
    fake_resolver(monkeypatch, LOOPBACK_NAMES)
    monkeypatch.setattr(remote, "TIMEOUT_SECONDS", 2)
    built = make_study(Phase.DRAFT)
    run = close_and_run(built)
    study = built.study
    candidate = study.candidates.get(name=run.results["candidates"][0]["name"])
    api = APIClient()
    api.force_authenticate(cast.alice)
    for uri in table:
        refused_alike(lambda uri=uri: services.connection_set(study=study, tracking_uri=uri, token="s3cret"))
        answer = api.put(f"/api/v1/studies/{study.pk}/mlflow/connection/", {"tracking_uri": uri}, format="json")
        assert answer.status_code in (400, 502), (uri, answer.content)
        if answer.status_code == 400:
            assert list(answer.json()["fields"]) == ["tracking_uri"], uri
        else:
            assert answer.json()["detail"] == remote.UNREACHABLE, uri
        assert not MlflowConnection.objects.filter(study=study).exists()

        MlflowConnection.objects.create(study=study, tracking_uri=uri, checked_at=timezone.now())
        MlflowRunLink.objects.update_or_create(
            candidate=candidate,
            defaults={"tracking_uri": uri, "experiment_id": "1", "run_id": "a" * 32, "imported_at": timezone.now()},
        )
        refused_alike(lambda: services.import_preview(study=study, experiment=EXPERIMENT))
        refused_alike(
            lambda: services.mlflow_import(
                study=study, imported_by=None, experiment=EXPERIMENT, mapping=[{"key": "auc", "metric": "AUC"}]
            )
        )
        refused_alike(lambda: services.mlflow_publish(run=run, published_by=None, run_url="http://approve.test/"))
        MlflowConnection.objects.filter(study=study).delete()
        assert listener.connections == [], uri


@pytest.mark.usefixtures("default_policy")
def test_the_host_is_resolved_once_and_the_checked_address_connected(make_study, listener, monkeypatch):
    """DNS rebinding: the name answers a public address to the check and
    loopback to any later look-up. There is no later look-up: one call, one
    resolution, and the connection goes to the public address checked."""
    real = socket.getaddrinfo
    answers = []

    def rebinding(host, port, *args, **kwargs):
        if host != "rebind.example.com":
            return real(host, port, *args, **kwargs)
        address = "93.184.216.34" if not answers else "127.0.0.1"
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(remote, "TIMEOUT_SECONDS", 2)
    study = make_study(Phase.DRAFT).study
    refused_alike(
        lambda: services.connection_set(study=study, tracking_uri=f"http://rebind.example.com:{listener.port}")
    )
    assert answers == ["93.184.216.34"]
    assert listener.connections == []


# --- a look-alike tracking server ------------------------------------------------------


class FakeMlflow:
    """MLflow's JSON answers for one experiment (``1``) holding one run
    (``RUN``), whose artifact location is ``artifact_uri``; ``behaviour``
    changes answers: ``redirect`` (status, location), ``sleep`` seconds,
    ``artifact`` bytes, ``stream`` (bytes sent in 64 KiB writes, counted in
    ``sent``), ``declared`` (a Content-Length), ``token`` (the Authorization
    header required)."""

    RUN = "0123456789abcdef0123456789abcdef"

    def __init__(self, **behaviour) -> None:
        self.behaviour = {"artifact_uri": f"mlflow-artifacts:/1/{self.RUN}/artifacts", **behaviour}
        self.requests: list[tuple[str, str, dict]] = []
        self.sent = 0
        self.received = threading.Event()
        self.streamed = threading.Event()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                fake.answer(self)

            do_POST = do_PUT = do_GET  # noqa: N815

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.uri = f"http://127.0.0.1:{self.server.server_port}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def run(self):
        return {
            "info": {
                "run_id": self.RUN,
                "run_name": "look-alike",
                "experiment_id": "1",
                "status": "FINISHED",
                "artifact_uri": self.behaviour["artifact_uri"],
                "lifecycle_stage": "active",
            },
            "data": {"metrics": [{"key": "auc", "value": 0.8, "timestamp": 1, "step": 0}], "tags": []},
        }

    def answer(self, handler):
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        url = urllib.parse.urlsplit(handler.path)
        self.requests.append((handler.command, url.path, dict(handler.headers)))
        self.received.set()
        behaviour = self.behaviour
        if "token" in behaviour and handler.headers.get("Authorization") != f"Bearer {behaviour['token']}":
            return self.send(handler, 401, b"unauthorised", "text/plain")
        time.sleep(behaviour.get("sleep", 0))
        if "redirect" in behaviour:
            status, location = behaviour["redirect"]
            handler.send_response(status)
            handler.send_header("Location", location)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return None
        path = url.path
        if path.startswith("/api/2.0/mlflow-artifacts/artifacts/"):
            if handler.command == "PUT":
                return self.json(handler, {})
            return self.artifact(handler)
        answers = {
            "/api/2.0/mlflow/experiments/search": {"experiments": [{"experiment_id": "1", "name": "fake"}]},
            "/api/2.0/mlflow/experiments/get-by-name": {
                "experiment": {"experiment_id": "1", "name": "fake", "lifecycle_stage": "active"}
            },
            "/api/2.0/mlflow/runs/search": {"runs": [] if b"approve.summary_of" in body else [self.run()]},
            "/api/2.0/mlflow/runs/get": {"run": self.run()},
            "/api/2.0/mlflow/runs/create": {"run": self.run()},
            "/api/2.0/mlflow/runs/set-tag": {},
            # (what MLflow's own client asks before it lists a run's artifacts)
            "/api/2.0/mlflow/logged-models/search": {"models": []},
            "/api/2.0/mlflow/runs/update": {"run_info": {}},
            "/api/2.0/mlflow-artifacts/artifacts": {"files": [{"path": "predictions.csv", "is_dir": False}]},
        }
        if path not in answers:
            return self.send(handler, 404, b'{"error_code": "ENDPOINT_NOT_FOUND", "message": "no"}', "application/json")
        return self.json(handler, answers[path])

    def json(self, handler, data):
        self.send(handler, 200, json.dumps(data).encode(), "application/json")

    @staticmethod
    def send(handler, status, body, kind):
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def artifact(self, handler):
        behaviour = self.behaviour
        if "stream" not in behaviour:
            return self.send(handler, 200, behaviour.get("artifact", b"y_true,y_pred\na,a\n"), "text/csv")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/csv")
        if "declared" in behaviour:
            handler.send_header("Content-Length", str(behaviour["declared"]))
        handler.send_header("Connection", "close")
        handler.end_headers()
        chunk = b"y" * 2**16
        try:
            while self.sent < behaviour["stream"]:
                handler.wfile.write(chunk)
                self.sent += len(chunk)
        except OSError:
            pass  # the client stopped reading: hung up
        self.streamed.set()
        handler.close_connection = True
        return None


@pytest.fixture
def fake_mlflow():
    made = []

    def make(**behaviour):
        made.append(FakeMlflow(**behaviour))
        return made[-1]

    yield make
    for server in made:
        server.close()


def connected_study(make_study, uri, token=""):
    study = make_study(Phase.DRAFT).study
    services.connection_set(study=study, tracking_uri=uri, token=token)
    return study


def importing(study, pattern="*"):
    return services.mlflow_import(
        study=study,
        imported_by=None,
        experiment="fake",
        mapping=[{"key": "auc", "metric": "AUC"}],
        artifact_pattern=pattern,
    )


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_no_redirect_is_followed(make_study, fake_mlflow, listener, status):
    """An allowed server (TRACKING_ALLOWED_HOSTS lists 127.0.0.1) answering
    a redirect to the loopback listener, or to another allowed host that
    would answer as MLflow: neither is followed, whatever the method."""
    honest = fake_mlflow()
    study = connected_study(make_study, honest.uri)
    for location in (f"http://127.0.0.1:{listener.port}/api/2.0/mlflow/experiments/search", honest.uri + "/x"):
        honest.requests.clear()
        redirecting = fake_mlflow(redirect=(status, location))
        with pytest.raises(TrackerError) as refused:
            services.connection_set(study=study, tracking_uri=redirecting.uri)  # a POST
        assert str(refused.value) == remote.UNREACHABLE
        MlflowConnection.objects.filter(study=study).update(tracking_uri=redirecting.uri)
        with pytest.raises(TrackerError):
            services.import_preview(study=study, experiment="fake")  # a GET
        assert [method for method, _, _ in redirecting.requests] == ["POST", "GET"]
        assert honest.requests == [] and listener.connections == []


def test_only_the_server_s_own_artifact_proxy_is_read(make_study, fake_mlflow, listener, tmp_path, settings):
    """A look-alike server naming local folders, a relative path, another
    store or another host as a run's artifact location: nothing is listed,
    opened or fetched there; the refusal names the run's artifact field and
    quotes nothing of a file."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "predictions.csv").write_text(f"y_true,y_pred\n{SENTINEL},x\n")
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]  # even under the roots: not from a tracking server
    locations = [
        "file:///",
        "file:///etc",
        f"file://{secrets}",
        f"file:{secrets}",
        str(secrets),
        "mlruns/1/run/artifacts",
        "../../../../etc",
        "s3://bucket/1/run/artifacts",
        "gs://bucket/x",
        f"mlflow-artifacts://127.0.0.1:{listener.port}/1/run/artifacts",
        "mlflow-artifacts://x.invalid/1/run/artifacts",
        "mlflow-artifacts:/1/../../etc",
        f"http://127.0.0.1:{listener.port}/api/2.0/mlflow-artifacts/artifacts/1",
    ]
    for location in locations:
        server = fake_mlflow(artifact_uri=location)
        study = connected_study(make_study, server.uri)
        with nothing_opened_under(secrets, "/etc"), pytest.raises(InvalidInput) as refused:
            importing(study)
        (message,) = refused.value.errors["runs[0].artifact"]
        assert message.startswith("run 'look-alike': "), location
        assert "approve does not read" in message or "not a plain relative path" in message, message
        assert SENTINEL not in json.dumps(refused.value.errors)
        assert not any("mlflow-artifacts/artifacts" in path for _, path, _ in server.requests), location
    assert listener.connections == []
    assert study.candidates.filter(name="look-alike").count() == 0


def test_publishing_writes_nothing_where_a_look_alike_names(make_study, fake_mlflow, tmp_path, settings):
    """The summary run's artifact location is checked before anything is
    written: no tag set, no file written there."""
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    target = tmp_path / "written-here"
    for location in (f"file://{target}", "s3://bucket/x", f"file:{target}"):
        server = fake_mlflow(artifact_uri=location)
        built = make_study(Phase.DRAFT)
        run = close_and_run(built)
        services.connection_set(study=built.study, tracking_uri=server.uri)
        MlflowRunLink.objects.create(
            candidate=built.study.candidates.get(name=run.results["candidates"][0]["name"]),
            tracking_uri=server.uri,
            experiment_id="1",
            run_id=FakeMlflow.RUN,
            imported_at=timezone.now(),
        )
        with nothing_opened_under(target), pytest.raises(TrackerError) as refused:
            services.mlflow_publish(run=run, published_by=None, run_url="http://approve.test/runs/1/")
        assert refused.value.code == "mlflow_artifacts_refused"
        assert "which approve does not read" in str(refused.value)
        assert not target.exists()
        written = [(method, path) for method, path, _ in server.requests if not path.endswith("/search")]
        assert written == [("POST", "/api/2.0/mlflow/runs/create"), ("GET", "/api/2.0/mlflow/runs/get")]


@pytest.mark.parametrize("declared", [False, True])
def test_an_artifact_larger_than_the_limit_is_refused_while_it_streams(make_study, fake_mlflow, monkeypatch, declared):
    """The server sends 256 MiB (declared in Content-Length, or not): the
    client stops at the limit, and hangs up; what the server could send is
    bounded by the socket buffers, not the body."""
    monkeypatch.setattr(limits, "PREDICTIONS_MAX_BYTES", 2**18)
    body = 256 * 2**20
    server = fake_mlflow(stream=body, **({"declared": body} if declared else {}))
    study = connected_study(make_study, server.uri)
    started = time.monotonic()
    with pytest.raises(InvalidInput) as refused:
        importing(study)
    assert server.streamed.wait(10)  # the server's writes failed: the client hung up
    assert server.sent < 32 * 2**20, server.sent
    assert refused.value.errors == {
        "runs[0].artifact": [f"run 'look-alike': predictions.csv is larger than {2**18} bytes"]
    }
    assert time.monotonic() - started < 10


# --- the token, and no lock ------------------------------------------------------------


def test_the_token_travels_in_its_request_only_and_calls_run_at_once(fake_mlflow):
    """The token is the Authorization header of the request, never in
    os.environ (a thread watches it during the call); and a slow server does
    not hold up a call to another one from another thread."""
    slow = fake_mlflow(token="tok-5e1f", sleep=2)
    fast = fake_mlflow()
    seen_in_environ = []
    watching = threading.Event()

    def watch():
        while not watching.is_set():
            if any("tok-5e1f" in value for value in os.environ.values()):
                seen_in_environ.append(True)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    counted = []
    caller = threading.Thread(
        target=lambda: counted.append(remote.experiment_count(Connection(slow.uri, "tok-5e1f"))), daemon=True
    )
    caller.start()
    try:
        assert slow.received.wait(5)
        started = time.monotonic()
        assert remote.experiment_count(Connection(fast.uri)) == 1
        assert time.monotonic() - started < 1.5
        assert caller.is_alive()  # the slow call still running meanwhile
        caller.join(10)
    finally:
        watching.set()
        watcher.join()
    assert counted == [1]
    assert seen_in_environ == []
    assert [headers.get("Authorization") for _, _, headers in slow.requests] == ["Bearer tok-5e1f"]
    assert [headers.get("Authorization") for _, _, headers in fast.requests] == [None]
    assert "MLFLOW_TRACKING_TOKEN" not in os.environ


# --- one message for every network failure ---------------------------------------------


@contextmanager
def raw_server(serve):
    """A TCP server on 127.0.0.1 whose connections ``serve(connection)`` handles."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    running = True

    def loop():
        while running:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        running = False
        thread.join(2)
        server.close()


def _hang_up(connection):
    connection.close()


def _silent(connection):
    time.sleep(3)
    connection.close()


def _drip(connection):
    """Headers one byte at a time, never ending (within each read's timeout)."""
    try:
        connection.sendall(b"HTTP/1.1 200 OK\r\n")
        for _ in range(200):
            connection.sendall(b"X")
            time.sleep(0.05)
    except OSError:
        pass
    connection.close()


def _garbage(connection):
    connection.recv(65536)
    connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
    connection.close()


def _answer(status_line, body=b"<html>not here</html>"):
    def serve(connection):
        connection.recv(65536)
        connection.sendall(f"{status_line}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        connection.close()

    return serve


def test_every_network_failure_reads_the_same(make_study, cast, monkeypatch, settings, tmp_path):
    """A refused port, a port that hangs up, stays silent or drips its
    headers, an unknown host, garbage, an HTTP error or redirect, TLS to a
    plain server, JSON too deep, pages for ever, a host that resolves to an
    internal address: the same
    error, byte for byte, in the service and in the API's answer. The
    dripping server is cut at CALL_SECONDS, not left to run."""
    monkeypatch.setattr(remote, "TIMEOUT_SECONDS", 0.5)
    monkeypatch.setattr(remote, "CALL_SECONDS", 1.5)
    fake_resolver(monkeypatch, {"internal.invalid": ["10.1.2.3"]})
    study = make_study(Phase.DRAFT).study
    api = APIClient()
    api.force_authenticate(cast.alice)
    messages, bodies = [], set()

    def attempt(uri):
        started = time.monotonic()
        with pytest.raises(TrackerError) as refused:
            services.connection_set(study=study, tracking_uri=uri)
        assert time.monotonic() - started < 3, uri
        messages.append((str(refused.value), refused.value.code))
        answer = api.put(f"/api/v1/studies/{study.pk}/mlflow/connection/", {"tracking_uri": uri}, format="json")
        assert answer.status_code == 502
        bodies.add(answer.content)

    attempt(f"http://127.0.0.1:{free_port()}")
    attempt(f"https://127.0.0.1:{free_port()}/mlflow")
    attempt("http://mlflow.invalid")
    attempt("https://nowhere.invalid:5000")
    for serve in (
        _hang_up,
        _silent,
        _drip,
        _garbage,
        _answer("HTTP/1.1 500 Internal Server Error"),
        _answer("HTTP/1.1 404 Not Found"),
        _answer("HTTP/1.1 200 OK", b"not json"),
        _answer("HTTP/1.1 200 OK", b"[1, 2]"),
        _answer("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:6379/"),
        _answer("HTTP/1.1 200 OK", b"[" * 200_000),  # deeper than Python's JSON parser recurses
        _answer("HTTP/1.1 200 OK\r\nConnection: close", b'{"experiments": [], "next_page_token": "again"}'),
    ):
        with raw_server(serve) as uri:
            attempt(uri)
            if serve is _hang_up:
                attempt(uri.replace("http://", "https://"))  # TLS to a plain socket
    settings.TRACKING_ALLOWED_HOSTS = []
    settings.DEBUG = False
    attempt("http://internal.invalid:5000")  # resolves to a private address
    assert set(messages) == {(remote.UNREACHABLE, "mlflow_unreachable")}
    assert len(bodies) == 1
    assert not MlflowConnection.objects.filter(study=study).exists()


# --- a file store swapped for a link ----------------------------------------------------


@pytest.fixture
def store_under_roots(tmp_path, settings):
    roots = tmp_path / "roots"
    roots.mkdir()
    settings.TRACKING_FILE_ROOTS = [str(roots)]
    uri = f"file:{roots / 'mlruns'}"
    return roots, uri, log_models(uri, models={"tree": MODELS["tree"]})


def test_a_file_store_swapped_for_a_link_is_refused_at_the_next_use(make_study, store_under_roots, tmp_path):
    roots, uri, _ = store_under_roots
    study = connected_study(make_study, uri)
    assert services.import_preview(study=study, experiment=EXPERIMENT).runs  # read while it is the real one
    outside = tmp_path / "outside"
    outside.mkdir()
    os.rename(roots / "mlruns", outside / "mlruns")
    os.symlink(outside / "mlruns", roots / "mlruns")
    for call in (
        lambda: services.import_preview(study=study, experiment=EXPERIMENT),
        lambda: services.mlflow_import(
            study=study, imported_by=None, experiment=EXPERIMENT, mapping=[{"key": "roc_auc", "metric": "AUC"}]
        ),
        lambda: services.connection_set(study=study, tracking_uri=uri),
    ):
        with nothing_opened_under(outside), pytest.raises(InvalidInput) as refused:
            call()
        assert refused.value.errors == {"tracking_uri": [remote._ROOTS_ONLY]}
    # Swapped back: read again.
    os.remove(roots / "mlruns")
    os.rename(outside / "mlruns", roots / "mlruns")
    assert services.import_preview(study=study, experiment=EXPERIMENT).runs


def _run_folder(roots, run_id):
    (found,) = (roots / "mlruns").glob(f"*/{run_id}")
    return found


def test_links_and_fifos_inside_a_file_store_are_refused(make_study, store_under_roots, tmp_path):
    """A tag, a metric or an artifact swapped for a link out of the roots
    (or a FIFO, which would block the reader for ever): refused, nothing of
    the target read."""
    roots, uri, runs = store_under_roots
    study = connected_study(make_study, uri)
    run = _run_folder(roots, runs["tree"])
    secret = tmp_path / "secret.txt"
    secret.write_text(SENTINEL)
    os.symlink(secret, run / "tags" / "leak")
    with nothing_opened_under(secret), pytest.raises(TrackerError) as refused:
        services.import_preview(study=study, experiment=EXPERIMENT)
    assert str(refused.value) == remote.STORE_UNREADABLE
    os.remove(run / "tags" / "leak")
    os.mkfifo(run / "tags" / "wait")
    with pytest.raises(TrackerError):
        services.import_preview(study=study, experiment=EXPERIMENT)
    os.remove(run / "tags" / "wait")
    os.symlink(secret, run / "metrics" / "auc_leak")

    def import_tree(**extra):
        mapping = [{"key": "roc_auc", "metric": "AUC"}]
        services.mlflow_import(study=study, imported_by=None, experiment=EXPERIMENT, mapping=mapping, **extra)

    with pytest.raises(TrackerError):
        import_tree(step=1)
    os.remove(run / "metrics" / "auc_leak")

    predictions = run / "artifacts" / "predictions" / "test.csv"
    os.remove(predictions)
    os.symlink(secret, predictions)
    with nothing_opened_under(secret), pytest.raises(InvalidInput) as refused:
        import_tree(artifact_pattern="predictions/*.csv")
    # A link is not listed (nor opened): the run has no artifact.
    assert refused.value.errors == {
        "runs[0].artifact": ["run 'tree' has no artifact matching 'predictions/*.csv': one is needed"]
    }
    # The run's artifact location (the store's own say) out of the roots: refused.
    meta = (run / "meta.yaml").read_text()
    (run / "meta.yaml").write_text(
        meta.replace(f"artifact_uri: {(run / 'artifacts').as_uri()}", "artifact_uri: file:///etc")
    )
    assert (run / "meta.yaml").read_text() != meta
    with nothing_opened_under("/etc"), pytest.raises(InvalidInput) as refused:
        import_tree(artifact_pattern="*")
    assert refused.value.errors == {
        "runs[0].artifact": ["run 'tree': its artifacts are kept outside the folders in TRACKING_FILE_ROOTS"]
    }
    (run / "meta.yaml").write_text(meta)
    # The artifacts folder itself a link out of the roots: refused.
    os.remove(predictions)
    os.rename(run / "artifacts", tmp_path / "artifacts")
    os.symlink(tmp_path / "artifacts", run / "artifacts")
    with nothing_opened_under(tmp_path / "artifacts"), pytest.raises(TrackerError) as refused:
        import_tree(artifact_pattern="predictions/*.csv")
    assert str(refused.value) == remote.STORE_UNREADABLE
