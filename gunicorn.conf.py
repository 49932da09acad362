"""gunicorn settings for approve: ``gunicorn -c gunicorn.conf.py approve_site.wsgi``
(the Dockerfile and docker-compose.yml run exactly this).

Each request is bounded (workspace/limits.py: body size, JSON depth, list
sizes), and validation runs go to Celery, so a request takes milliseconds to
a few seconds; a worker stuck past ``timeout`` is killed and replaced.
Several processes with a few threads each keep one slow request from holding
up everyone else. The environment may change each setting:

- ``WEB_CONCURRENCY``: worker processes (default 2 x cores + 1, at most 8,
  since a container sees every core of its host);
- ``GUNICORN_THREADS``: threads per worker (default 4); each thread holds its
  own database connection, so workers x threads must stay below PostgreSQL's
  ``max_connections`` (100 by default) minus what the Celery workers use;
- ``GUNICORN_TIMEOUT`` (default 30 s), ``GUNICORN_GRACEFUL_TIMEOUT`` (30 s);
- ``GUNICORN_MAX_REQUESTS`` (default 1000, 0 to never recycle);
- ``GUNICORN_BIND`` (default ``0.0.0.0:8000``);
- ``GUNICORN_PRELOAD`` (default true): load the application, and warm it
  (approve_site/warm.py: every view imported, the libraries imported on
  first use too, every template compiled), in
  the master before it forks the
  workers, which share it: no user pays a cold worker. false loads and warms
  it in each worker instead, before it takes a request (slower starts, more
  memory, but code reloaded by a restart of the workers alone);
- ``PROMETHEUS_MULTIPROC_DIR``: a folder (empty, writable, on a memory file
  system ideally) where the workers keep their request metrics for /metrics
  (prometheus-client's multiprocess mode; docs/architecture.md,
  "Observability"): its files are removed at start, and a dead worker's
  are marked so.
"""

import multiprocessing
import os
from typing import Any


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"gunicorn.conf.py: {name} must be an integer, got {value!r}") from None


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")

preload_app = os.environ.get("GUNICORN_PRELOAD", "true").strip().lower() in {"1", "true", "yes", "on", ""}

workers = _env_int("WEB_CONCURRENCY", min(2 * multiprocessing.cpu_count() + 1, 8))
# More than one thread makes gunicorn use its gthread worker.
threads = _env_int("GUNICORN_THREADS", 4)

# The slowest request the limits allow takes seconds; 30 s means a worker is stuck.
timeout = _env_int("GUNICORN_TIMEOUT", 30)
# On a restart or scale-down, requests in flight get this long to finish.
graceful_timeout = _env_int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = 5

# Recycle each worker after about this many requests (jittered so that the
# workers do not all restart at once): bounds what a slow leak can grow to.
max_requests = _env_int("GUNICORN_MAX_REQUESTS", 1000)
max_requests_jitter = max_requests // 10

# The request line and headers, read before Django sees the request (the body
# is bounded by workspace.limits.BodySizeLimitMiddleware): gunicorn's defaults,
# stated so they are a decision rather than an accident.
limit_request_line = 4094
limit_request_fields = 100
limit_request_field_size = 8190

# Logs to the container's output. With JSON logs (LOG_FORMAT, by default
# when DEBUG is off) the application writes one line per request itself
# (approve_site.observability), with its request id: gunicorn's access line
# would repeat it in another format, and its own lines are JSON too.
_debug = os.environ.get("DEBUG", "true").strip().lower() in {"1", "true", "yes", "on", ""}
_json_logs = (os.environ.get("LOG_FORMAT", "").strip().lower() or ("plain" if _debug else "json")) == "json"
accesslog = None if _json_logs else "-"
errorlog = "-"
if _json_logs:
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "approve_site.observability.JsonFormatter"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "loggers": {"gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False}},
    }

_multiprocess_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def on_starting(server: Any) -> None:
    """The metrics of a previous start would otherwise be added to this one's."""
    if _multiprocess_dir:
        os.makedirs(_multiprocess_dir, exist_ok=True)
        for name in os.listdir(_multiprocess_dir):
            if name.endswith(".db"):
                os.remove(os.path.join(_multiprocess_dir, name))


def when_ready(server: Any) -> None:
    """Preloaded: warm the application in the master, before the fork."""
    if preload_app:
        from approve_site.warm import warm

        warm()


def post_worker_init(worker: Any) -> None:
    """Not preloaded: each worker warms its own before its first request."""
    if not preload_app:
        from approve_site.warm import warm

        warm()


def child_exit(server: Any, worker: Any) -> None:  # gunicorn's Arbiter and Worker
    """A worker that exits: its live gauges stop counting (prometheus-client)."""
    if _multiprocess_dir:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


# The workers' heartbeat files: on a memory file system when there is one
# (Docker's /dev/shm), as a disk-backed /tmp can stall them and get healthy
# workers killed.
if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"

# gunicorn's control socket (for ``gunicornc``) would go to $HOME/.gunicorn,
# which the image's user cannot write; nothing here uses it.
control_socket_disable = True
