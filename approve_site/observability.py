"""Logs, request ids, and the optional error reporting and tracing hooks
(docs/architecture.md, "Observability").

- Every log record carries the ``request_id``, ``user_id`` and ``study_id``
  of the request (or task) it was written in: a log-record factory copies
  them from a context variable when the record is made, so any handler sees
  them (``install_record_factory``, called by the settings).
- ``JsonFormatter`` writes one JSON object per line; ``PlainFormatter`` the
  readable form (``LOG_FORMAT``).
- ``RequestLogMiddleware``, first in the middleware: takes the request id
  from a sane ``X-Request-ID`` header or makes one, returns it, writes one
  line per request and counts it for ``/metrics`` (approve_site.metrics).
- Celery: a task published while a request (or another task) runs carries
  its request id in a message header; the worker's ``task_prerun`` puts it
  back into the context, and ``task_postrun`` writes one line per task.
- ``sentry_setup`` and ``tracing_setup``: Sentry and OpenTelemetry, imported
  only when their environment variables are set.

Nothing here imports an app at module level: the settings import this module.
"""

import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    before_task_publish,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
)
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.log import log_response

REQUEST_ID_HEADER = "X-Request-ID"
# The Celery message header that carries it to the worker.
TASK_HEADER = "approve_request_id"
# ... and the user's and the study's ids, when the request knew them.
TASK_USER_HEADER, TASK_STUDY_HEADER = "approve_user_id", "approve_study_id"
# An incoming id is kept when it is 1-128 of these characters (a UUID, a
# proxy's hex id, a trace id); anything else (newlines, quotes, a kilobyte)
# is replaced by a fresh one, so a client cannot forge log lines with it.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# URL parameters whose values are secrets: the logged path shows "…" instead
# (a password-reset or e-mail confirmation link is a credential while valid).
SECRET_URL_PARAMETERS = frozenset({"token", "uidb64", "key", "signature", "signed", "secret"})

request_logger = logging.getLogger("approve.request")
task_logger = logging.getLogger("approve.task")


@dataclass
class LogContext:
    """What every log line written in one request or task says about it."""

    request_id: str | None = None
    user_id: int | None = None
    study_id: int | None = None
    task_id: str | None = None
    # The request, for its user once authentication has read it.
    request: HttpRequest | None = field(default=None, repr=False)
    # A run's or an analysis's URL: the study is learnt when the view loads it.
    wanted_run: int | None = None
    wanted_analysis: int | None = None
    token: Token | None = field(default=None, repr=False)
    started: float = 0.0

    def current_user_id(self) -> int | None:
        if self.user_id is None and self.request is not None:
            self.user_id = _loaded_user_id(self.request)
        return self.user_id


_context: ContextVar[LogContext | None] = ContextVar("approve_log_context", default=None)


def current() -> LogContext | None:
    """The context of the request or task running now (None outside both)."""
    return _context.get()


def request_id_from(header: str | None) -> str:
    """The incoming id when it is sane, else a new one (uuid4, hex)."""
    if header and _SANE_REQUEST_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex


def _loaded_user_id(request: HttpRequest) -> int | None:
    """The user's id if something has already read ``request.user`` (never
    reads it: that would cost the session's and the user's queries)."""
    user = request.__dict__.get("user")
    if user is None:
        return None
    wrapped = getattr(user, "_wrapped", user)  # SimpleLazyObject until evaluated
    if wrapped is None or type(wrapped) is object:  # django.utils.functional.empty
        return None
    pk = getattr(wrapped, "pk", None)
    return pk if isinstance(pk, int) else None


# --- log records and formatters --------------------------------------------------------

_installed = False


def install_record_factory() -> None:
    """Every log record made from now on carries the current context's
    ``request_id``, ``user_id``, ``study_id`` (and ``task_id`` in a task)."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        context = _context.get()
        record.request_id = context.request_id if context else None
        record.user_id = context.current_user_id() if context else None
        record.study_id = context.study_id if context else None
        if context is not None and context.task_id is not None:
            record.task_id = context.task_id
        return record

    logging.setLogRecordFactory(factory)


# The attributes every LogRecord has; anything else on a record was given in
# ``extra=`` (or by the factory above) and goes into the JSON object.
# (Django's request lines add the request object itself: its path is in the message.)
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName", "request"}
_FIRST = ("request_id", "user_id", "study_id")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger,
    message, request_id, user_id, study_id, the record's extra fields, and
    ``exception`` (the traceback's text) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _FIRST:
            document[name] = getattr(record, name, None)
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in document:
                document[name] = value
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exception"] = record.exc_text
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        return json.dumps(document, default=str, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """``time LEVEL logger [request id]: message`` for a person reading a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(where)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        record.where = f" [{request_id}]" if request_id else ""
        return super().format(record)


# --- requests ---------------------------------------------------------------------------------


class RequestLogMiddleware:
    """First in the middleware: the request id (kept in the context for every
    log line, returned in ``X-Request-ID``), one log line per request
    (method, path, status, duration_ms, user, study) and its count and
    latency for ``/metrics``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        _study_learning_connect()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
        context = LogContext(request_id=request_id, request=request)
        token = _context.set(context)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            seconds = time.perf_counter() - started
            response[REQUEST_ID_HEADER] = request_id
            if response.status_code >= 400 and not getattr(response, "_has_been_logged", False):
                # Django writes this line after the last middleware, outside
                # the request's context: written here, with its request id.
                log_response("%s: %s", response.reason_phrase, logged_path(request), response=response, request=request)
            _request_line(request, response, context, seconds)
            if settings.METRICS_TOKEN or settings.METRICS_ALLOWED_NETWORKS:
                from approve_site import metrics

                metrics.request_observe(request, response.status_code, seconds)
            return response
        finally:
            context.request = None
            _context.reset(token)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        context = _context.get()
        if context is None:
            return
        context.study_id = _int_or_none(kwargs.get("study_id"))
        context.wanted_run = _int_or_none(kwargs.get("run_id"))
        context.wanted_analysis = _int_or_none(kwargs.get("analysis_id"))


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) else None


def logged_path(request: HttpRequest) -> str:
    """The request's path, without its query string, the values of secret
    URL parameters (``SECRET_URL_PARAMETERS``) shown as "…"."""
    path = request.path
    match = request.resolver_match
    if match is not None:
        for name, value in match.kwargs.items():
            if name in SECRET_URL_PARAMETERS and isinstance(value, str) and value:
                path = path.replace(value, "…")
    return path


def _request_line(request: HttpRequest, response: HttpResponse, context: LogContext, seconds: float) -> None:
    duration_ms = round(seconds * 1000, 1)
    path = logged_path(request)
    context.current_user_id()
    request_logger.info(
        "%s %s %s %s ms",
        request.method,
        path,
        response.status_code,
        duration_ms,
        extra={"method": request.method, "path": path, "status": response.status_code, "duration_ms": duration_ms},
    )


def _run_loaded(sender: type, instance: Any, **kwargs: object) -> None:
    context = _context.get()
    if context is None or context.study_id is not None or context.wanted_run is None:
        return
    # __dict__: a deferred field is never fetched (that would be a query).
    if instance.__dict__.get("id") == context.wanted_run:
        context.study_id = instance.__dict__.get("study_id")


def _analysis_loaded(sender: type, instance: Any, **kwargs: object) -> None:
    context = _context.get()
    if context is None or context.wanted_analysis is None or context.wanted_run is not None:
        return
    if instance.__dict__.get("id") == context.wanted_analysis:
        context.wanted_run = instance.__dict__.get("run_id")


def _study_learning_connect() -> None:
    """A run's (an analysis's) page names no study in its URL: the study is
    read from the run when the view loads it (post_init), never by a query
    of its own."""
    from django.db.models.signals import post_init

    post_init.connect(_run_loaded, sender="engine.Run", weak=False, dispatch_uid="approve-log-run")
    post_init.connect(_analysis_loaded, sender="engine.Analysis", weak=False, dispatch_uid="approve-log-analysis")


# --- Celery -------------------------------------------------------------------------------------


@before_task_publish.connect
def _task_publish(headers: dict[str, Any] | None = None, **kwargs: object) -> None:
    context = _context.get()
    if context is None or headers is None:
        return
    for name, value in (
        (TASK_HEADER, context.request_id),
        (TASK_USER_HEADER, context.current_user_id()),
        (TASK_STUDY_HEADER, context.study_id),
    ):
        if value is not None:
            headers[name] = value


@task_prerun.connect
def _task_start(task_id: str | None = None, task: Any = None, **kwargs: object) -> None:
    outer = _context.get()
    context = LogContext(task_id=task_id, started=time.perf_counter())
    if outer is not None:
        # Eager (in the request's own thread), or a task run by a task: its context.
        context.request_id, context.user_id, context.study_id = (
            outer.request_id,
            outer.current_user_id(),
            outer.study_id,
        )
    if task is not None and task.request is not None:
        # A worker's message headers are the request's own keys; apply()'s are under "headers".
        given = {**(task.request.get("headers") or {}), **vars(task.request)}
        if isinstance(given.get(TASK_HEADER), str) and _SANE_REQUEST_ID.fullmatch(given[TASK_HEADER]):
            context.request_id = given[TASK_HEADER]
        context.user_id = _int_or_none(given.get(TASK_USER_HEADER)) or context.user_id
        context.study_id = _int_or_none(given.get(TASK_STUDY_HEADER)) or context.study_id
    context.token = _context.set(context)


@task_postrun.connect
def _task_end(task_id: str | None = None, task: Any = None, state: str | None = None, **kwargs: object) -> None:
    context = _context.get()
    if context is None or context.task_id != task_id or context.token is None:
        return
    duration_ms = round((time.perf_counter() - context.started) * 1000, 1)
    name = getattr(task, "name", "?")
    task_logger.info(
        "task %s %s %s ms",
        name,
        state,
        duration_ms,
        extra={"task": name, "state": state, "duration_ms": duration_ms},
    )
    _context.reset(context.token)


@after_setup_logger.connect
@after_setup_task_logger.connect
def _worker_log_format(logger: logging.Logger | None = None, **kwargs: object) -> None:
    """A Celery worker's handlers write the format the settings chose."""
    if logger is None or settings.LOG_FORMAT != "json":
        return
    for handler in logger.handlers:
        handler.setFormatter(JsonFormatter())


# --- Sentry and OpenTelemetry -------------------------------------------------------------


def _sentry_before_send(event: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any]:
    context = _context.get()
    if context is not None:
        tags = event.setdefault("tags", {})
        for name in ("request_id", "study_id", "task_id"):
            value = getattr(context, name)
            if value is not None:
                tags[name] = str(value)
    return event


def sentry_setup(*, dsn: str, environment: str, traces_sample_rate: float) -> None:
    """Error reporting to Sentry (SENTRY_DSN), with the Django and Celery
    integrations; no personal data (no user names, addresses or cookies),
    each event tagged with its request id."""
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    sentry_sdk.init(
        dsn=dsn,
        environment=environment or None,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        send_default_pii=False,
        traces_sample_rate=traces_sample_rate,
        before_send=_sentry_before_send,  # type: ignore[arg-type]  # sentry's Event is a TypedDict of the same
    )


_tracer_provider: Any = None


def tracing_setup(*, web: bool) -> Any:
    """OpenTelemetry traces to OTLP over HTTP (OTEL_EXPORTER_OTLP_ENDPOINT,
    read by the exporter with the other OTEL_EXPORTER_OTLP_* variables):
    Django's requests in the web process (``web``), Celery's tasks (and their
    publishing) everywhere. None, and nothing imported, when it is not set.
    Returns the tracer provider."""
    global _tracer_provider
    if not settings.OTEL_EXPORTER_OTLP_ENDPOINT:
        return None
    if _tracer_provider is not None:
        return _tracer_provider
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": settings.OTEL_SERVICE_NAME}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if web:
        from opentelemetry.instrumentation.django import DjangoInstrumentor

        DjangoInstrumentor().instrument(tracer_provider=provider, response_hook=_span_request_id)
    CeleryInstrumentor().instrument(tracer_provider=provider)
    _tracer_provider = provider
    return provider


def _span_request_id(span: Any, request: HttpRequest, response: HttpResponse) -> None:
    request_id = response.get(REQUEST_ID_HEADER)
    if request_id and span is not None and span.is_recording():
        span.set_attribute("approve.request_id", request_id)


@worker_process_init.connect
def _worker_child_tracing(**kwargs: object) -> None:
    """A prefork worker's child: its own exporter thread (none survives a fork)."""
    tracing_setup(web=False)


@worker_init.connect
def _worker_tracing(sender: Any = None, **kwargs: object) -> None:
    """A solo or threads worker computes in its main process."""
    pool = getattr(sender, "pool_cls", None)
    name = pool if isinstance(pool, str) else getattr(pool, "__module__", "")
    if "prefork" not in str(name):
        tracing_setup(web=False)
