"""Observability (issue 32, item 7; docs/architecture.md, "Observability"):
JSON log lines with request ids that Celery tasks inherit, /metrics behind a
token or a network list, Sentry and OpenTelemetry only when configured."""

import gzip
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from approve_site import observability
from approve_site.observability import JsonFormatter
from engine import services as engine_services
from engine.models import Run
from workspace.models import Phase

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.django_db
TOKEN = "t" * 20 + secrets.token_hex(16)


def _lines(caplog: pytest.LogCaptureFixture, logger: str) -> list[dict]:
    """The captured records of ``logger`` as the JSON formatter writes them (each parsed back)."""
    formatter = JsonFormatter()
    lines = [formatter.format(record) for record in caplog.records if record.name == logger]
    assert all("\n" not in line for line in lines)
    return [json.loads(line) for line in lines]


# --- log lines and request ids -------------------------------------------------------------------


def test_a_study_page_request_is_one_json_line_with_its_request_user_and_study(make_study, client, caplog):
    built = make_study(Phase.VOTING)
    client.force_login(built.study.designer)
    with caplog.at_level(logging.INFO, logger="approve.request"):
        response = client.get(f"/studies/{built.study.pk}/")
    assert response.status_code == 200
    (line,) = _lines(caplog, "approve.request")
    assert line["request_id"] == response["X-Request-ID"]
    assert len(line["request_id"]) == 32 and int(line["request_id"], 16) >= 0  # a fresh uuid4, hex
    assert line["user_id"] == built.study.designer.pk
    assert line["study_id"] == built.study.pk
    assert (line["method"], line["path"], line["status"]) == ("GET", f"/studies/{built.study.pk}/", 200)
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0
    assert line["level"] == "INFO" and line["logger"] == "approve.request"
    assert line["time"].endswith("+00:00") and "T" in line["time"]
    assert line["message"] == f"GET /studies/{built.study.pk}/ 200 {line['duration_ms']} ms"


def test_every_line_written_during_the_request_carries_its_id(client, caplog):
    with caplog.at_level(logging.INFO):
        response = client.get("/no-such-page/", HTTP_X_REQUEST_ID="upstream-proxy-id-1")
    assert response.status_code == 404 and response["X-Request-ID"] == "upstream-proxy-id-1"
    # Django's own "Not Found" warning, written inside the request, and the request's line.
    written = {record.name: record.request_id for record in caplog.records}
    assert written == {"django.request": "upstream-proxy-id-1", "approve.request": "upstream-proxy-id-1"}


def test_a_run_url_logs_the_runs_study(closed_run, client, caplog):
    run = closed_run
    client.force_login(run.study.designer)
    client.get(f"/api/v1/runs/{run.pk}/")  # warm
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="approve.request"):
        response = client.get(f"/api/v1/runs/{run.pk}/")
    assert response.status_code == 200
    (line,) = _lines(caplog, "approve.request")
    assert line["study_id"] == run.study_id and line["user_id"] == run.study.designer.pk
    assert line["path"] == f"/api/v1/runs/{run.pk}/"


def test_the_log_line_adds_no_query_to_a_request(closed_run, client):
    """The study and the user are read from what the view loaded."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run = closed_run
    client.force_login(run.study.designer)
    client.get(f"/api/v1/runs/{run.pk}/")
    with CaptureQueriesContext(connection) as plain:
        client.get(f"/api/v1/runs/{run.pk}/")
    logger = logging.getLogger("approve.request")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)  # the line not written at all
    try:
        with CaptureQueriesContext(connection) as silent:
            client.get(f"/api/v1/runs/{run.pk}/")
    finally:
        logger.setLevel(previous)
    assert len(plain) == len(silent)


@pytest.mark.parametrize(
    "hostile",
    ["abc\ndef", "x" * 1000, 'id" , "level": "CRITICAL', "", "ünïcode", "a b"],
    ids=["newline", "1000-chars", "json-injection", "empty", "non-ascii", "space"],
)
def test_a_hostile_request_id_is_replaced(client, caplog, hostile):
    with caplog.at_level(logging.INFO, logger="approve.request"):
        response = client.get("/health/", HTTP_X_REQUEST_ID=hostile)
    given = response["X-Request-ID"]
    assert given != hostile and len(given) == 32 and int(given, 16) >= 0
    (line,) = _lines(caplog, "approve.request")
    assert line["request_id"] == given


def test_a_sane_incoming_request_id_is_kept(client):
    for sane in ("0f8fad5b-d9cb-469f-a165-70867728950e", "1-5759e988:proxy.7", "x" * 128):
        assert client.get("/health/", HTTP_X_REQUEST_ID=sane)["X-Request-ID"] == sane
    assert client.get("/health/", HTTP_X_REQUEST_ID="x" * 129)["X-Request-ID"] != "x" * 129


def test_secret_url_parameters_and_query_strings_stay_out_of_the_log(client, caplog):
    with caplog.at_level(logging.INFO, logger="approve.request"):
        client.get("/accounts/email/confirm/sEcReTtOkEn123/?next=pr1vate")
        client.get("/accounts/password/reset/MQ/set-abc-0123456789abcdef/")
    lines = _lines(caplog, "approve.request")
    assert [line["path"] for line in lines] == ["/accounts/email/confirm/…/", "/accounts/password/reset/…/…/"]
    assert "sEcReTtOkEn123" not in caplog.text and "pr1vate" not in caplog.text
    assert "0123456789abcdef" not in caplog.text


def test_an_exception_is_written_with_its_traceback_in_one_line(caplog):
    with caplog.at_level(logging.INFO):
        try:
            raise ValueError("the cause")
        except ValueError:
            logging.getLogger("approve.test").exception("it failed")
    (line,) = _lines(caplog, "approve.test")
    assert line["message"] == "it failed" and line["request_id"] is None
    assert "Traceback" in line["exception"] and "ValueError: the cause" in line["exception"]


def test_the_plain_format_names_the_request_id():
    record = logging.LogRecord("approve.x", logging.INFO, __file__, 1, "hello %s", ("there",), None)
    record.request_id = "abc123"
    assert observability.PlainFormatter().format(record).endswith("INFO approve.x [abc123]: hello there")


# --- Celery tasks inherit the request id ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_task_published_in_a_request_logs_the_requests_id_eager(make_study, client, caplog, eager_celery):
    built = make_study(Phase.CLOSED)
    client.force_login(built.study.designer)
    with caplog.at_level(logging.INFO, logger="approve.task"), caplog.at_level(logging.INFO, logger="approve.request"):
        response = client.post(f"/api/v1/studies/{built.study.pk}/runs/", HTTP_X_REQUEST_ID="launch-1234")
    assert response.status_code == 202, response.content
    run = Run.objects.get(study=built.study)
    assert run.status == Run.Status.SUCCEEDED
    tasks = {line["task"]: line for line in _lines(caplog, "approve.task")}
    # The run, and the notification and webhook deliveries of its success the run's task published in turn.
    assert set(tasks) == {
        "engine.tasks.execute_run",
        "notifications.tasks.event_notify",
        "webhooks.tasks.event_deliver",
    }
    assert all(line["request_id"] == "launch-1234" == response["X-Request-ID"] for line in tasks.values())
    task = tasks["engine.tasks.execute_run"]
    assert task["state"] == "SUCCESS"
    assert task["duration_ms"] > 0 and task["task_id"]
    (request,) = _lines(caplog, "approve.request")
    assert request["request_id"] == "launch-1234" and request["status"] == 202
    assert request["duration_ms"] >= task["duration_ms"]
    # The context is the request's again after the task, and nothing once it is over.
    assert observability.current() is None


def test_a_published_message_carries_the_request_id_in_its_headers(monkeypatch):
    from celery.signals import before_task_publish

    headers: dict = {}
    context = observability.LogContext(request_id="published-42", study_id=5)
    token = observability._context.set(context)
    try:
        before_task_publish.send(sender="engine.tasks.execute_run", body=(), headers=headers)
    finally:
        observability._context.reset(token)
    assert headers == {observability.TASK_HEADER: "published-42", observability.TASK_STUDY_HEADER: 5}
    # Outside a request nothing is added.
    outside: dict = {}
    before_task_publish.send(sender="engine.tasks.execute_run", body=(), headers=outside)
    assert outside == {}


def test_a_worker_takes_the_request_id_from_the_message(caplog):
    """What a worker does with the header (task.request holds the message's headers)."""
    from approve_site.celery import app

    @app.task(name="tests.observability.echo", bind=True)
    def echo(self):
        logging.getLogger("approve.test").warning("inside the task")
        return observability.current().request_id

    with caplog.at_level(logging.INFO):
        result = echo.apply(
            headers={
                observability.TASK_HEADER: "from-the-message",
                observability.TASK_USER_HEADER: 12,
                observability.TASK_STUDY_HEADER: 34,
            }
        )
        hostile = echo.apply(headers={observability.TASK_HEADER: "bad\nid", observability.TASK_USER_HEADER: "12"})
    assert result.get() == "from-the-message"
    assert hostile.get() is None  # not sane, not taken; no request around it
    inside = [record for record in caplog.records if record.name == "approve.test"]
    assert [(record.request_id, record.user_id, record.study_id) for record in inside] == [
        ("from-the-message", 12, 34),
        (None, None, None),
    ]
    assert all(record.task_id for record in inside)


# --- /metrics --------------------------------------------------------------------------------------


def _scrape(client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _bearer(token=TOKEN) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_metrics_are_off_without_a_token_or_network(client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = "", []
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", **_bearer()).status_code == 404


def test_metrics_need_the_right_token(client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, []
    missing = client.get("/metrics")
    assert missing.status_code == 401 and missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"approve_" not in missing.content
    for wrong in (TOKEN[:-1], TOKEN + "x", TOKEN.upper(), "Basic " + TOKEN):
        answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {wrong}")
        assert answer.status_code == 403 and b"approve_" not in answer.content
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 401
    assert client.post("/metrics", **_bearer()).status_code == 405
    assert client.get("/metrics", **_bearer()).status_code == 200


def test_metrics_from_an_allowed_network(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert client.get("/metrics").status_code == 403  # the test client is 127.0.0.1
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="11.0.0.1", HTTP_X_FORWARDED_FOR="10.1.2.3").status_code == 403
    settings.METRICS_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]
    assert client.get("/metrics").status_code == 200


def test_requests_are_counted_by_route_never_by_path(make_study, client, settings):
    settings.METRICS_TOKEN = TOKEN
    built = make_study(Phase.VOTING)
    client.force_login(built.study.designer)
    key = ("approve_http_requests_total", (("method", "GET"), ("route", "study_home"), ("status", "2xx")))
    before = _scrape(client, **_bearer()).get(key, 0)
    client.get(f"/studies/{built.study.pk}/")
    client.get(f"/studies/{built.study.pk}/")
    client.get("/no-such-page-31337/")
    client.generic("BREW", "/health/")
    after = _scrape(client, **_bearer())
    assert after[key] == before + 2
    assert after[("approve_http_requests_total", (("method", "GET"), ("route", "unmatched"), ("status", "4xx")))] >= 1
    assert after[("approve_http_requests_total", (("method", "other"), ("route", "health"), ("status", "4xx")))] >= 1
    latency = ("approve_http_request_duration_seconds_count", (("method", "GET"), ("route", "study_home")))
    assert after[latency] >= 2
    text = client.get("/metrics", **_bearer()).content.decode()
    assert "31337" not in text and f"/studies/{built.study.pk}/" not in text


def test_runs_and_their_durations_are_read_from_the_database(closed_run, client, settings):
    settings.METRICS_TOKEN = TOKEN
    samples = _scrape(client, **_bearer())
    assert samples[("approve_database_up", ())] == 1
    assert samples[("approve_runs", (("state", "succeeded"),))] == 1
    assert samples[("approve_runs", (("state", "queued"),))] == 0
    Run.objects.create(study=closed_run.study, status=Run.Status.QUEUED)
    Run.objects.create(study=closed_run.study, status=Run.Status.FAILED, duration_seconds=0.3)
    samples = _scrape(client, **_bearer())
    assert samples[("approve_runs", (("state", "queued"),))] == 1
    assert samples[("approve_runs", (("state", "failed"),))] == 1
    assert samples[("approve_analyses", (("state", "succeeded"),))] == 0
    succeeded = (("state", "succeeded"),)
    assert samples[("approve_run_duration_seconds_count", succeeded)] == 1
    assert samples[("approve_run_duration_seconds_sum", succeeded)] == pytest.approx(closed_run.duration_seconds)
    failed = (("le", "0.25"), ("state", "failed"))
    assert samples[("approve_run_duration_seconds_bucket", failed)] == 0
    assert samples[("approve_run_duration_seconds_bucket", (("le", "0.5"), ("state", "failed")))] == 1
    # Eager: no broker, no queue, no workers reported.
    if settings.CELERY_TASK_ALWAYS_EAGER:
        assert not any(name.startswith("approve_celery") for name, _ in samples)
    else:
        assert samples[("approve_celery_broker_up", ())] == 1


def test_analysis_durations_are_read_from_the_database(closed_run, client, settings):
    from datetime import timedelta

    from engine.models import Analysis

    settings.METRICS_TOKEN = TOKEN
    analysis = Analysis.objects.create(
        run=closed_run, kind=Analysis.Kind.LEAVE_ONE_OUT, units=4, status=Analysis.Status.FAILED
    )
    Analysis.objects.filter(pk=analysis.pk).update(finished_at=analysis.launched_at + timedelta(seconds=7))
    samples = _scrape(client, **_bearer())
    failed = (("state", "failed"),)
    assert samples[("approve_analyses", failed)] == 1
    assert samples[("approve_analysis_duration_seconds_count", failed)] == 1
    assert samples[("approve_analysis_duration_seconds_sum", failed)] == pytest.approx(7)
    assert samples[("approve_analysis_duration_seconds_bucket", (("le", "5.0"), ("state", "failed")))] == 0
    assert samples[("approve_analysis_duration_seconds_bucket", (("le", "10.0"), ("state", "failed")))] == 1


def test_queue_length_and_live_workers_come_from_the_broker(client, settings, monkeypatch):
    """With a Redis broker: LLEN of each queue (its priority lists added) and
    /health/'s live workers (a fake Redis client stands for the broker)."""
    from engine import health

    class Pipe:
        def __init__(self):
            self.asked = []

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def llen(self, name):
            self.asked.append(name)

        def execute(self):
            return [{"celery": 2, "celery\x06\x163": 1}.get(name, 0) for name in self.asked]

    class Client:
        def pipeline(self, transaction=True):
            return Pipe()

    settings.METRICS_TOKEN = TOKEN
    monkeypatch.setattr(health, "broker_client", lambda: Client())
    monkeypatch.setattr(
        health,
        "broker_and_workers",
        lambda: (
            {"status": "ok"},
            {"status": "degraded", "live": 3, "last_seen_seconds": 1, "database_unreachable": 1},
        ),
    )
    samples = _scrape(client, **_bearer())
    assert samples[("approve_celery_queue_length", (("queue", "celery"),))] == 3
    assert samples[("approve_celery_workers_live", ())] == 3
    assert samples[("approve_celery_workers_database_unreachable", ())] == 1
    assert samples[("approve_celery_broker_up", ())] == 1
    monkeypatch.setattr(health, "broker_and_workers", lambda: ({"status": "unreachable"}, {"status": "unknown"}))
    samples = _scrape(client, **_bearer())
    assert samples[("approve_celery_broker_up", ())] == 0
    assert ("approve_celery_queue_length", (("queue", "celery"),)) not in samples


# --- processes of their own: settings, multiprocess mode, Sentry, OpenTelemetry ------------------


def _python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SENTRY_", "OTEL_", "PROMETHEUS_", "METRICS_", "DATABASE_URL", "REDIS_URL"))
    }
    environment |= {
        "DJANGO_SETTINGS_MODULE": "approve_site.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "PYTHONPATH": str(ROOT),
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every POST (a Sentry or OTLP endpoint)."""

    def __init__(self):
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {name.lower(): value for name, value in self.headers.items()}
                if headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                received.append((self.path, headers, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def test_nothing_of_sentry_or_opentelemetry_is_imported_unless_configured(tmp_path):
    done = _python(
        "import sys, django; django.setup(); import approve_site.wsgi, approve_site.urls;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sentry_sdk', 'opentelemetry'}))",
        tmp_path,
    )
    assert done.stdout.strip() == "[]"


def test_sentry_is_set_up_from_its_dsn_and_sends_no_personal_data(tmp_path, receiver):
    dsn = f"http://public@127.0.0.1:{receiver.port}/1"
    code = """
import json, logging, django, sentry_sdk
django.setup()
from approve_site import observability
client = sentry_sdk.get_client()
options = client.options
context = observability.LogContext(request_id="req-sentry-1", study_id=7)
token = observability._context.set(context)
try:
    raise RuntimeError("boom")
except RuntimeError:
    logging.getLogger("approve.test").exception("it failed")
observability._context.reset(token)
sentry_sdk.flush(timeout=10)
integrations = sorted(client.integrations)
print(json.dumps({"dsn": options["dsn"], "pii": options["send_default_pii"],
                  "rate": options["traces_sample_rate"], "integrations": integrations}))
"""
    done = _python(code, tmp_path, SENTRY_DSN=dsn, SENTRY_TRACES_SAMPLE_RATE="0.25")
    options = json.loads(done.stdout.strip().splitlines()[-1])
    assert options["dsn"] == dsn and options["pii"] is False and options["rate"] == 0.25
    assert {"django", "celery"} <= set(options["integrations"])
    events = []
    for path, _, body in receiver.received:
        assert path == "/api/1/envelope/"
        for item in body.split(b"\n")[1:]:
            if item.startswith(b"{") and b'"exception"' in item:
                events.append(json.loads(item))
    (event,) = events
    assert event["tags"]["request_id"] == "req-sentry-1" and event["tags"]["study_id"] == "7"
    assert event["exception"]["values"][0]["value"] == "boom"
    assert "user" not in event or "ip_address" not in event.get("user", {})


def test_opentelemetry_traces_requests_to_the_collector(tmp_path, receiver):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    code = """
import django
from approve_site import wsgi, observability
from django.test import Client
from django.conf import settings
settings.ALLOWED_HOSTS = ["testserver"]
answer = Client().get("/health/", HTTP_X_REQUEST_ID="traced-request-1")
assert answer["X-Request-ID"] == "traced-request-1"
assert observability.tracing_setup(web=True).force_flush(10000)
print(type(observability._tracer_provider).__module__)
"""
    done = _python(code, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}")
    assert done.stdout.strip().endswith("opentelemetry.sdk.trace")
    spans, resources = [], []
    for path, headers, body in receiver.received:
        assert path == "/v1/traces" and headers["content-type"] == "application/x-protobuf"
        exported = ExportTraceServiceRequest.FromString(body)
        for resource_spans in exported.resource_spans:
            resources.append({a.key: a.value.string_value for a in resource_spans.resource.attributes})
            for scope in resource_spans.scope_spans:
                spans.extend(scope.spans)
    assert resources and all(resource["service.name"] == "approve" for resource in resources)
    (span,) = [span for span in spans if span.name.startswith("GET")]
    attributes = {a.key: a.value.string_value or a.value.int_value for a in span.attributes}
    assert attributes["approve.request_id"] == "traced-request-1"


def test_multiprocess_mode_adds_up_what_each_process_counted(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    count = """
import django; django.setup()
from django.core.management import call_command
from django.test import Client
from django.conf import settings
settings.ALLOWED_HOSTS = ["testserver"]
call_command("migrate", verbosity=0)
for _ in range(3):
    assert Client().get("/health/").status_code == 200
"""
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder), "METRICS_TOKEN": TOKEN}
    _python(count, tmp_path, **env)
    _python(count, tmp_path, **env)  # a second process (a second gunicorn worker)
    assert len(list(folder.glob("*.db"))) >= 2
    scrape = f"""
import django; django.setup()
from django.test import Client
from django.conf import settings
settings.ALLOWED_HOSTS = ["testserver"]
print(Client().get("/metrics", HTTP_AUTHORIZATION="Bearer {TOKEN}").content.decode())
"""
    text = _python(scrape, tmp_path, **env).stdout
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert samples[("approve_http_requests_total", (("method", "GET"), ("route", "health"), ("status", "2xx")))] == 6
    assert samples[("approve_runs", (("state", "queued"),))] == 0


def test_gunicorn_marks_a_dead_workers_metrics_and_empties_the_folder_at_start(tmp_path, monkeypatch):
    import importlib.util

    (tmp_path / "counter_123.db").write_bytes(b"old")
    (tmp_path / "keep.txt").write_text("not ours")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    spec = importlib.util.spec_from_file_location("gunicorn_conf_under_test", ROOT / "gunicorn.conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    conf.on_starting(None)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["keep.txt"]
    dead = []
    from prometheus_client import multiprocess

    monkeypatch.setattr(multiprocess, "mark_process_dead", lambda pid: dead.append(pid))

    class Worker:
        pid = 4242

    conf.child_exit(None, Worker())
    assert dead == [4242]


@pytest.mark.parametrize("log_format, access", [("json", None), ("plain", "-")])
def test_gunicorn_leaves_the_request_line_to_the_application_with_json_logs(monkeypatch, log_format, access):
    import importlib.util

    monkeypatch.setenv("LOG_FORMAT", log_format)
    spec = importlib.util.spec_from_file_location("gunicorn_conf_under_test", ROOT / "gunicorn.conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    assert conf.accesslog == access


def test_the_deployment_checks_pass_with_observability_configured(tmp_path):
    done = _python(
        "import django, sys; from django.core.management import call_command; django.setup();"
        "call_command('check', deploy=True, fail_level='WARNING');"
        "from django.conf import settings; print(settings.LOG_FORMAT, settings.SECURE_REDIRECT_EXEMPT)",
        tmp_path,
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="approve.example.com",
        SECURE_PROXY_SSL_HEADER="true",
        METRICS_TOKEN=TOKEN,
        METRICS_ALLOWED_NETWORKS="10.0.0.0/8,fd00::/8",
    )
    assert done.stdout.strip().splitlines()[-1] == "json ['^health/$', '^metrics$']"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"METRICS_TOKEN": "short"}, "METRICS_TOKEN must be at least 32 characters"),
        ({"METRICS_ALLOWED_NETWORKS": "10.0.0.1/8"}, "METRICS_ALLOWED_NETWORKS"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT must be json or plain"),
        ({"SENTRY_TRACES_SAMPLE_RATE": "2"}, "SENTRY_TRACES_SAMPLE_RATE must be a number from 0 to 1"),
    ],
)
def test_a_wrong_setting_stops_the_start(tmp_path, env, message):
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("METRICS_", "LOG_"))}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**environment, "DJANGO_SETTINGS_MODULE": "approve_site.settings", "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and message in done.stderr


@pytest.fixture
def closed_run(make_study):
    built = make_study(Phase.CLOSED)
    run = engine_services.run_launch(study=built.study, launched_by=built.study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    return run


def test_gunicorn_workers_log_json_and_add_up_their_metrics(tmp_path):
    """gunicorn with gunicorn.conf.py, two worker processes: each request is one
    JSON line with its id (no access log besides), and every scrape, whichever
    worker answers it, counts the requests of both."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder = tmp_path / "metrics"
    env = {
        "LOG_FORMAT": "json",
        "METRICS_TOKEN": TOKEN,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "2",
        "GUNICORN_THREADS": "1",
    }
    _python(
        "import django; django.setup(); from django.core.management import call_command; "
        "call_command('migrate', verbosity=0)",
        tmp_path,
    )
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SENTRY_", "OTEL_", "PROMETHEUS_", "METRICS_", "DATABASE_URL", "REDIS_URL"))
    }
    log = open(tmp_path / "gunicorn.log", "w")  # noqa: SIM115 - gunicorn writes to it until stopped
    gunicorn = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "--config", "gunicorn.conf.py", "approve_site.wsgi"],
        cwd=ROOT,
        env={**environment, "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3", **env},
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def get(path, **headers):
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.headers, answer.read().decode()

    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                get("/health/", **{"X-Request-ID": "warm-up"})
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "gunicorn.log").read_text()
                time.sleep(0.5)
        ids = [get("/health/")[0]["X-Request-ID"] for _ in range(12)]
        totals = set()
        for _ in range(6):
            _, text = get("/metrics", Authorization=f"Bearer {TOKEN}")
            totals.add(
                sum(
                    sample.value
                    for family in text_string_to_metric_families(text)
                    for sample in family.samples
                    if sample.name == "approve_http_requests_total" and sample.labels["route"] == "health"
                )
            )
    finally:
        gunicorn.terminate()
        gunicorn.wait(timeout=30)
        log.close()
    assert totals == {13.0}, (totals, (tmp_path / "gunicorn.log").read_text())
    lines = (tmp_path / "gunicorn.log").read_text().splitlines()
    parsed = [json.loads(line) for line in lines if line.strip()]  # every line is JSON
    requests = [line for line in parsed if line["logger"] == "approve.request" and line["path"] == "/health/"]
    assert sorted(line["request_id"] for line in requests) == sorted(["warm-up", *ids])
    assert any(line["logger"] == "gunicorn.error" for line in parsed)
    # preloaded (issue 33, item 5): warmed once, in the master, not in each worker
    warmed = [line for line in parsed if line["logger"] == "approve.warm"]
    assert len(warmed) == 1, warmed
    assert warmed[0]["message"].startswith("warmed in ")
