"""Settings for approve, configured by environment variables.

With nothing set, the project runs as a self-contained development install:
SQLite in the project folder, Celery tasks run eagerly in-process, a local
memory cache, DEBUG on. A deployment sets:

- ``SECRET_KEY``: required (and checked) whenever ``DEBUG`` is off;
- ``DEBUG``: ``true``/``false`` (default ``true``);
- ``ALLOWED_HOSTS``: comma-separated host names;
- ``DATABASE_URL``: ``postgres://user:password@host:5432/name?sslmode=require``
  (any libpq option in the query) or ``sqlite:////absolute/path/db.sqlite3``;
- ``REDIS_URL``: ``redis://host:6379/0``, or ``rediss://`` with its TLS
  options; Celery's broker and Django's cache. Without it, Celery runs tasks
  eagerly;
- ``CSRF_TRUSTED_ORIGINS``, ``SECURE_SSL_REDIRECT``, ``SECURE_HSTS_SECONDS``,
  ``SECURE_PROXY_SSL_HEADER`` for running behind a TLS-terminating proxy.
"""

import os
import ssl
from pathlib import Path
from typing import Any, cast
from urllib.parse import ParseResult, SplitResult, parse_qs, unquote, urlparse, urlsplit, urlunsplit

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from redis.connection import parse_url as redis_parse_url

BASE_DIR = Path(__file__).resolve().parent.parent


def _bool_option(name: str, value: str | None, default: bool) -> bool:
    """true/false (1/0, yes/no, on/off), or ``default`` for None."""
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {value!r}")


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return _bool_option(name, None if value == "" else value, default)


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None


def database_from_url(url: str) -> dict[str, Any]:
    """Turn a database URL into a Django ``DATABASES`` entry, parsed by
    dj-database-url: every query option reaches ``OPTIONS`` (for PostgreSQL,
    libpq's connection parameters: ``sslmode``, ``sslrootcert``,
    ``connect_timeout``, ...), over the defaults below; docs/architecture.md
    ("Settings") lists them.

    Only the two engines the project supports are accepted, and libpq's
    parameter names are checked, so a typo fails loudly at start-up instead
    of at the first query.
    """
    scheme = urlsplit(url).scheme
    if scheme not in {"postgres", "postgresql", "pgsql", "sqlite"}:
        raise ImproperlyConfigured(f"DATABASE_URL scheme {scheme!r} is not supported (use postgres:// or sqlite://)")
    try:
        parsed = dj_database_url.parse(url)
    except ValueError:
        raise ImproperlyConfigured(
            "DATABASE_URL is not a valid URL: percent-encode the reserved characters of the user and password "
            "(e.g. @ as %40)"
        ) from None
    name, options = parsed.get("NAME", ""), dict(parsed.get("OPTIONS", {}))
    repeated = sorted(option for option, value in options.items() if isinstance(value, list))
    if repeated:
        raise ImproperlyConfigured(f"DATABASE_URL: option(s) {', '.join(repeated)} given more than once")
    if scheme == "sqlite":
        # sqlite:////srv/db.sqlite3 (four slashes: the path is absolute); a
        # relative one would name another file for each working directory.
        if not name.startswith("/"):
            raise ImproperlyConfigured(
                "DATABASE_URL for SQLite needs an absolute file path, e.g. sqlite:////srv/approve/db.sqlite3"
            )
        if options:
            raise ImproperlyConfigured(f"DATABASE_URL for SQLite takes no options, got {', '.join(sorted(options))}")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name}
    if not name:
        raise ImproperlyConfigured("DATABASE_URL must name a database, e.g. postgres://postgres@127.0.0.1:5432/approve")
    _libpq_options_check(options)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": parsed.get("USER", ""),
        "PASSWORD": parsed.get("PASSWORD", ""),
        "HOST": parsed.get("HOST", ""),
        "PORT": str(parsed.get("PORT", "")),
        # Reuse connections across requests; health checks drop dead ones.
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
        # An unreachable database fails a connection in seconds, not after
        # the system's TCP timeout (minutes); a connection whose peer
        # stopped answering is dropped in about 20 s (keepalives while
        # idle, tcp_user_timeout while a query waits). Workers also bound
        # each statement (engine.services.worker_database_options). The
        # URL's own options win over these defaults.
        "OPTIONS": {
            "connect_timeout": env_int("DATABASE_CONNECT_TIMEOUT", 5),
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 2,
            "tcp_user_timeout": 20 * 1000,  # milliseconds
            **options,
        },
    }


# DATABASES["default"]["OPTIONS"] keys that Django's PostgreSQL backend reads
# itself; every other one is a libpq connection parameter.
_DJANGO_POSTGRES_OPTIONS = {"isolation_level", "assume_role", "server_side_binding", "pool", "cursor_factory"}


def _libpq_options_check(options: dict[str, Any]) -> None:
    """Refuse an option libpq does not know, with libpq's own message (its
    parser, through psycopg2's ``parse_dsn``; values are checked when it
    connects)."""
    from psycopg2 import ProgrammingError
    from psycopg2.extensions import make_dsn, parse_dsn

    libpq = {name: value for name, value in options.items() if name not in _DJANGO_POSTGRES_OPTIONS}
    try:
        parse_dsn(make_dsn(**{name: str(value) for name, value in libpq.items()}))
    except ProgrammingError as error:
        raise ImproperlyConfigured(f"DATABASE_URL: {str(error).strip()}") from None


# REDIS_URL's query options: TLS only (rediss://), as redis-py's
# SSLConnection names them; Celery's broker, Django's cache and /health/ all
# receive the same ones (redis_from_url).
REDIS_TLS_OPTIONS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")
_CERT_REQS = {"required": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


def redis_from_url(url: str) -> tuple[str, dict[str, Any] | None]:
    """REDIS_URL, read by redis-py's own parser (``redis.connection.parse_url``,
    the one Django's cache connects with), as ``(url, tls)``: the URL without
    its query, for Celery's broker and the cache's ``LOCATION``, and the TLS
    options of a ``rediss://`` URL (``None`` for ``redis://``) for Celery's
    ``broker_use_ssl`` and ``redis_backend_use_ssl``, the cache's ``OPTIONS``
    and /health/. With ``rediss://`` the server's certificate is verified
    (``ssl_cert_reqs=required``) and its host name checked unless the URL
    says otherwise: Celery alone would not verify it."""
    parts = _checked_redis_url(url)
    given = _redis_options(parts.query)
    bare = urlunsplit(parts._replace(query="", fragment=""))
    if parts.scheme == "redis":
        if given:
            raise ImproperlyConfigured(f"REDIS_URL: {', '.join(sorted(given))} need(s) rediss:// (Redis over TLS)")
        return bare, None
    return bare, _redis_tls(given)


def _checked_redis_url(url: str) -> SplitResult:
    """Decides whether REDIS_URL is a redis:// or rediss:// URL that redis-py
    parses, naming a host and at most a database number; returns its parts."""
    parts = urlsplit(url)
    if parts.scheme not in {"redis", "rediss"}:
        raise ImproperlyConfigured(
            f"REDIS_URL scheme {parts.scheme!r} is not supported (use redis:// or rediss:// for TLS)"
        )
    try:
        parsed = redis_parse_url(url)
    except ValueError as error:
        raise ImproperlyConfigured(f"REDIS_URL: {error}") from None
    if not parsed.get("host"):
        raise ImproperlyConfigured("REDIS_URL must name the Redis host, e.g. redis://redis:6379/0")
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise ImproperlyConfigured(f"REDIS_URL: the path is a database number, e.g. redis://redis:6379/0, got {path!r}")
    return parts


def _redis_options(query: str) -> dict[str, str]:
    """Decides whether REDIS_URL's query holds only TLS options
    (``REDIS_TLS_OPTIONS``), each once; returns them by name."""
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - set(REDIS_TLS_OPTIONS))
    if unknown:
        raise ImproperlyConfigured(
            f"REDIS_URL: unknown option(s) {', '.join(unknown)} (use {', '.join(REDIS_TLS_OPTIONS)})"
        )
    repeated = sorted(name for name, values in options.items() if len(values) > 1)
    if repeated:
        raise ImproperlyConfigured(f"REDIS_URL: option(s) {', '.join(repeated)} given more than once")
    return {name: values[0] for name, values in options.items()}


def _redis_tls(given: dict[str, str]) -> dict[str, Any]:
    """Decides a rediss:// URL's TLS options from its query: the certificate
    verified and its host name checked unless the query says otherwise, and
    the certificate files it names (each with a path)."""
    reqs = given.get("ssl_cert_reqs", "required").strip().lower()
    if reqs not in _CERT_REQS:
        raise ImproperlyConfigured(
            f"REDIS_URL: ssl_cert_reqs must be required, optional or none, got {given['ssl_cert_reqs']!r}"
        )
    check_hostname = _bool_option("REDIS_URL: ssl_check_hostname", given.get("ssl_check_hostname"), reqs == "required")
    if check_hostname and reqs == "none":
        raise ImproperlyConfigured("REDIS_URL: ssl_check_hostname needs the certificate checked (ssl_cert_reqs=none)")
    tls: dict[str, Any] = {"ssl_cert_reqs": _CERT_REQS[reqs], "ssl_check_hostname": check_hostname}
    for name in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile"):
        if name in given:
            if not given[name]:
                raise ImproperlyConfigured(f"REDIS_URL: {name} needs a file path")
            tls[name] = given[name]
    return tls


DEBUG = env_bool("DEBUG", True)

# The development key is public by construction; production must bring its own.
_DEVELOPMENT_SECRET_KEY = "django-insecure-development-only-key-never-use-in-production"
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = _DEVELOPMENT_SECRET_KEY
elif not DEBUG and (
    SECRET_KEY == _DEVELOPMENT_SECRET_KEY
    or SECRET_KEY.startswith("django-insecure")
    or len(SECRET_KEY) < 50
    or len(set(SECRET_KEY)) < 5
):
    raise ImproperlyConfigured(
        "SECRET_KEY is too weak for DEBUG off: use at least 50 random characters "
        "(python -c 'import secrets; print(secrets.token_urlsafe(64))')"
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]" if DEBUG else "")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "simple_history",
    # Two-factor sign-in (accounts.otp): TOTP devices and recovery codes.
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "workspace",
    "engine",
    "evaluation",
    "tracking",
    "accounts",
    "notifications",
    "webhooks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every change's history: where it came from and who made it (workspace.history).
    "workspace.history.HistoryMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

if not DEBUG:
    # Production serves collected static files itself (gunicorn, no web
    # server in front needed); development uses runserver's finders.
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "approve_site.urls"
WSGI_APPLICATION = "approve_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(os.environ["DATABASE_URL"])
    if os.environ.get("DATABASE_URL")
    else {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
# How long an invitation to a study (by username or by link) can be accepted.
INVITATION_LIFETIME_DAYS = env_int("INVITATION_LIFETIME_DAYS", 14)
# A deleted study's record (who, when, its bundle at that moment) and its
# history are kept this long, then the sweep removes them (workspace.history).
APPROVE_DELETED_STUDY_RETENTION_DAYS = env_int("APPROVE_DELETED_STUDY_RETENTION_DAYS", 365)
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# --- Redis: Celery broker, result backend and cache --------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
# redis://host:6379/0, or rediss:// (TLS) with its certificate options
# (redis_from_url): the same connection for the broker, the cache and /health/.
_REDIS, _REDIS_TLS = redis_from_url(REDIS_URL) if REDIS_URL else ("", None)

# Redis down must not hold a request: a short connect and read timeout, after
# which the cache's callers (throttles, the log-in lock-out) fail open.
REDIS_TIMEOUT_SECONDS = 1
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _REDIS,
            "OPTIONS": {
                "socket_connect_timeout": REDIS_TIMEOUT_SECONDS,
                "socket_timeout": REDIS_TIMEOUT_SECONDS,
                **(_REDIS_TLS or {}),
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_BROKER_URL = _REDIS or "memory://localhost/"
# rediss://: the broker's TLS options (kombu would otherwise skip verifying
# the certificate), and a Redis result backend's, should one be configured.
CELERY_BROKER_USE_SSL = _REDIS_TLS or False
CELERY_REDIS_BACKEND_USE_SSL = _REDIS_TLS
# No result backend: a run keeps its status and results in the database, and
# nothing waits on a task's return value. (With Redis as result backend, a
# broker outage made a worker computing a run exit, "Unrecoverable error:
# ConnectionError".)
CELERY_RESULT_BACKEND = None
# Without a broker the embedded install runs tasks in-process, at once.
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
# A validation run must survive a worker dying mid-task: acknowledge only when
# the task has finished, and hand the message back if the worker is lost.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Runs are long and uneven; one message at a time keeps them spread evenly.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Hard and soft limits well above the slowest expected run (large panels take
# seconds); the soft limit lets the task mark its run failed cleanly.
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 660)
# Redis hands an unacknowledged message out again after the visibility
# timeout. Recovery does not rely on it: a dead worker's run is handed back by
# the recovery sweep once its heartbeat lease lapses (ENGINE_RUN_LEASE_SECONDS),
# and a lost message is sent again by the sweep. It stays above the hard time
# limit so that a healthy long run's message is not handed out a second time
# for nothing (the claim would make that delivery a no-op anyway).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 900),
    # An unreachable broker fails a launch's enqueue in about a second instead
    # of the system's TCP timeout; the run stays queued for the sweep.
    "socket_connect_timeout": REDIS_TIMEOUT_SECONDS * 2,
}
# A worker outlives a broker outage: it reconnects for as long as it takes,
# and a run it is computing carries on (its lease is in the database; the
# message is acknowledged if possible, else redelivered later and the claim
# makes that delivery a no-op). Cancelling it would only lose the work.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False

# --- Validation engine: leases, heartbeats and the recovery sweep -------------
# A worker holds its run by a lease that a background thread renews every
# ENGINE_RUN_HEARTBEAT_SECONDS while the run computes. A worker that dies stops
# renewing; once the lease has lapsed the recovery sweep hands the run back to
# the queue and another worker takes it over. Takeover after a worker dies:
# at most lease + sweep interval + a delivery (30 + 15 s by default, under the
# minute the service promises); the lease allows several missed renewals.
ENGINE_RUN_LEASE_SECONDS = env_int("ENGINE_RUN_LEASE_SECONDS", 30)
ENGINE_RUN_HEARTBEAT_SECONDS = env_int("ENGINE_RUN_HEARTBEAT_SECONDS", 5)
ENGINE_RECOVERY_SWEEP_SECONDS = env_int("ENGINE_RECOVERY_SWEEP_SECONDS", 15)
# A queued run's message may be lost (a broker restarted without its data):
# the sweep sends it again after this long without a worker claiming it. A run
# whose message could not be sent at all (broker down at launch) is sent by the
# first sweep that reaches the broker.
ENGINE_QUEUE_RESEND_SECONDS = env_int("ENGINE_QUEUE_RESEND_SECONDS", 120)
# A worker's database statements are cancelled by the server after this long
# (a run's largest statement, reading its snapshot or storing its results,
# takes well under a second); a stuck one must not outlive the run's lease.
ENGINE_WORKER_STATEMENT_TIMEOUT_SECONDS = env_int("ENGINE_WORKER_STATEMENT_TIMEOUT_SECONDS", 30)
# Each worker records that it is alive this often (read by /health/).
ENGINE_WORKER_HEARTBEAT_SECONDS = env_int("ENGINE_WORKER_HEARTBEAT_SECONDS", 10)
# A robustness analysis (engine.analyses) is split into chunks, which the
# workers share; each chunk is claimed and leased like a run. A Monte Carlo's
# chunks hold about ENGINE_ANALYSIS_CHUNK_SECONDS of work, estimated from the
# run's experts, metrics and candidates and what is sampled
# (engine.robustness_kernels.sample_seconds), in whole blocks of 64 samples
# spread evenly over the chunks, and at most ENGINE_ANALYSIS_CHUNK_SAMPLES
# samples; leaving one expert out, ENGINE_ANALYSIS_CHUNK_EXPERTS experts each.
ENGINE_ANALYSIS_CHUNK_SECONDS = env_int("ENGINE_ANALYSIS_CHUNK_SECONDS", 2)
ENGINE_ANALYSIS_CHUNK_SAMPLES = env_int("ENGINE_ANALYSIS_CHUNK_SAMPLES", 10_000)
ENGINE_ANALYSIS_CHUNK_EXPERTS = env_int("ENGINE_ANALYSIS_CHUNK_EXPERTS", 5)
# Each worker process keeps the inputs of this many runs decoded, and as many
# Monte Carlo analyses prepared (their run validated and evaluated), for the
# next chunks of the same run (least recently used out; 0 keeps none).
ENGINE_ANALYSIS_KEPT_RUNS = env_int("ENGINE_ANALYSIS_KEPT_RUNS", 2)
# The memory a Monte Carlo block's sampled peer weights may take in a worker
# (k x k per sample): beyond 200 experts, the samples whose chains are
# held at once (at least one stream of them; the samples do not depend on it).
ENGINE_ANALYSIS_MEMORY_BYTES = env_int("ENGINE_ANALYSIS_MEMORY_BYTES", 256 * 2**20)
# Robustness work bounded (issue 29, finding 10; engine.analyses.analysis_launch):
# queued or running analyses at once per run, per study and per user (a
# launch beyond is 409 naming the cap); launches per user per hour, and Monte
# Carlo samples launched per study per hour (beyond, 429 naming the limit,
# Retry-After when the oldest launch counted leaves the hour). The budget is
# at least one analysis of the most samples (workspace.limits.ANALYSIS_SAMPLES_MAX).
ANALYSES_ACTIVE_PER_RUN_MAX = env_int("ANALYSES_ACTIVE_PER_RUN_MAX", 3)
ANALYSES_ACTIVE_PER_STUDY_MAX = env_int("ANALYSES_ACTIVE_PER_STUDY_MAX", 10)
ANALYSES_ACTIVE_PER_USER_MAX = env_int("ANALYSES_ACTIVE_PER_USER_MAX", 10)
ANALYSIS_LAUNCHES_PER_USER_PER_HOUR = env_int("ANALYSIS_LAUNCHES_PER_USER_PER_HOUR", 30)
ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR = env_int("ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR", 500_000)
# A run's individual scores are served in pages of at most this many bytes
# (GET /api/v1/runs/{run}/results/?individual=true; issue 29, finding 8): the
# whole document at 100 experts x 20 metrics x 1,000 candidates is 64 MB. A
# page holds whole candidates (one at those limits is about 70 KB).
RESULTS_INDIVIDUAL_PAGE_MAX_BYTES = env_int("RESULTS_INDIVIDUAL_PAGE_MAX_BYTES", 2 * 1024 * 1024)
if not 0 < ENGINE_RUN_HEARTBEAT_SECONDS * 2 <= ENGINE_RUN_LEASE_SECONDS:
    raise ImproperlyConfigured("ENGINE_RUN_LEASE_SECONDS must be at least twice ENGINE_RUN_HEARTBEAT_SECONDS (> 0)")
# The sweep runs in every worker's main process (engine.health.worker_sweep_start),
# never behind runs in the queue. A `celery beat` may also send it as a task,
# a backstop that is never needed for takeover.
CELERY_BEAT_SCHEDULE = {
    "recover-stale-runs": {
        "task": "engine.tasks.recover_stale_runs",
        "schedule": float(ENGINE_RECOVERY_SWEEP_SECONDS),
        # A sweep that waited behind long runs is pointless once the next is due.
        "options": {"expires": float(ENGINE_RECOVERY_SWEEP_SECONDS)},
    },
}

# --- Live progress (the study home) --------------------------------------------
# How often an open study home asks whether the study changed (an answer of
# 204, two queries, while it has not; docs/pages.md, "Live progress").
LIVE_POLL_SECONDS = env_int("LIVE_POLL_SECONDS", 5)
if LIVE_POLL_SECONDS < 1:
    raise ImproperlyConfigured(f"LIVE_POLL_SECONDS must be at least 1, not {LIVE_POLL_SECONDS}")

# --- REST framework ----------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: an anonymous request then gets 401 with a WWW-Authenticate
    # header; session authentication keeps CSRF checks for browsers.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "workspace.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "EXCEPTION_HANDLER": "workspace.api.exceptions.exception_handler",
    # JSON only: a form or multipart body is refused with 415 naming the
    # media types the operation reads. The uploads declare their own parsers
    # (prediction sets: multipart and text/csv).
    "DEFAULT_PARSER_CLASSES": ["workspace.api.parsers.StrictJSONParser"],
    # A 415 names what the operation reads (workspace/api/parsers.py).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "workspace.api.parsers.JSONOnlyNegotiation",
    # The test client's bodies are JSON, as the API reads them.
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "workspace.api.schema.ApproveAutoSchema",
    # DRF's page numbers, with ?page= checked (400 for an empty or repeated one).
    "DEFAULT_PAGINATION_CLASS": "workspace.api.pagination.StrictPageNumberPagination",
    "PAGE_SIZE": 50,
    # Throttles identify a client by its address. X-Forwarded-For is set by
    # the client unless a proxy rewrites it, so it is trusted only for the
    # number of proxies in front of the app (NUM_PROXIES=1 behind one).
    "NUM_PROXIES": env_int("NUM_PROXIES", 0),
    # Password guessing: token requests per client address.
    "DEFAULT_THROTTLE_RATES": {
        "login": os.environ.get("LOGIN_THROTTLE_RATE", "10/minute"),
        # Study imports per user, the API and the page together (workspace.api.throttling).
        "import": os.environ.get("IMPORT_THROTTLE_RATE", "20/hour"),
        # Pages of a run's individual scores per user (workspace.api.throttling.INDIVIDUAL_SCOPE).
        "individual_scores": os.environ.get("RESULTS_INDIVIDUAL_THROTTLE_RATE", "60/minute"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "approve API",
    "DESCRIPTION": "Multi-expert, multi-criteria evaluation of learning algorithms (APPrOVE).",
    "VERSION": "1",
    # The repository has no licence file yet: this changes when the project chooses one (docs/api.md).
    "LICENSE": {"name": "Proprietary: all rights reserved"},
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # The paths are absolute (/api/v1/...): the server is the host the schema
    # was fetched from (docs/api.md, "The schema for generated clients").
    "SERVERS": [{"url": "/", "description": "this server (the host the schema was fetched from)"}],
    # One tag per area, so that generated clients split into modules; each
    # operation has one (each API view's schema_tag, checked by workspace.api.schema.view_tag).
    "TAGS": [
        {
            "name": "studies",
            "description": "Studies: create, read, change, delete, move between phases, export and import.",
        },
        {"name": "setup", "description": "A study's setup: attributes, metrics, candidates and members (designer)."},
        {
            "name": "inputs",
            "description": "Experts' inputs (votes, ranges, priorities, peer weights) and measurements.",
        },
        {"name": "runs", "description": "Validation runs: launch, status, results and a candidate's scores."},
        {
            "name": "evaluation",
            "description": "Prediction sets, their evaluation, and metrics computed from predictions.",
        },
        {
            "name": "mlflow",
            "description": "An MLflow tracking server: connect a study, import runs as candidates, publish a run.",
        },
        {"name": "discussion", "description": "The threads of a study's attributes and metrics, and their posts."},
        {"name": "invitations", "description": "Invitations to be an expert: sent by designers, accepted or declined."},
        {"name": "accounts", "description": "API tokens (create one with a password, list, revoke); self sign-up."},
    ],
    # Several models have a "kind" or a "status": each enum gets its own name.
    "ENUM_NAME_OVERRIDES": {
        "AttributeKindEnum": "workspace.models.QualityAttribute.Kind",
        "MembershipStatusEnum": "workspace.models.Membership.Status",
        # An expert's absence (excluded, abstaining; blank while they take part).
        "AbsenceEnum": ["excluded", "abstaining"],
        "InvitationStatusEnum": "workspace.api.invitation_serializers.STATUSES",
        "InvitationKindEnum": "workspace.api.invitation_serializers.KINDS",
        "RunStatusEnum": "engine.models.Run.Status",
        "AnalysisKindEnum": "engine.models.Analysis.Kind",
        "AnalysisStatusEnum": "engine.models.Analysis.Status",
        "WeightKindEnum": ["attribute", "metric"],
        # A metric's direction, a new metric's, and a computation's (the catalogue's).
        "MetricBetterEnum": "workspace.models.Direction",
        # The catalogue's keys, which a computation's and a source's name too.
        "ComputationEnum": "evaluation.report.COMPUTATIONS",
        # An elicited metric's kind, and an answer to one of its questions.
        "ElicitationKindEnum": "evaluation.models.ElicitedMetric.Kind",
        "ElicitationAnswerEnum": "evaluation.elicited.ANSWER_CHOICES",
        # A study's phase, wherever it is (a transition's `to` too), and a
        # prioritisation's method (the bundle's refers to it by name).
        "PhaseEnum": "workspace.models.Phase",
        "PrioritisationMethodEnum": "workspace.api.serializers.PRIORITISATION_METHODS",
        # A study's history: what kind of row changed, where from, how (workspace.history).
        "HistoryKindEnum": "workspace.history.KIND_NAMES",
        "HistorySourceEnum": "workspace.history.SOURCES",
        "HistoryActionEnum": "workspace.history.ACTIONS",
        # A revision round's steps: a response's and those still to revise.
        "StepEnum": "workspace.models.RoundStep",
    },
    # The default enum hook, then the links from each create answer to the
    # operations on what it made (workspace/api/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        # the components given as JSON Schema: documents, the bundle, errors (workspace/api/schema.py)
        "workspace.api.schema.postprocess_components",
        "workspace.api.schema.postprocess_links",
        # nullable with a type, response headers, security: [] (workspace/api/schema.py)
        "workspace.api.schema.postprocess_metadata",
        # RateLimit-* on the throttled operations' answers (workspace/api/throttling.py)
        "workspace.api.throttling.postprocess_rate_limit_headers",
        # a 409 on every operation that takes an Idempotency-Key (workspace/api/idempotency.py)
        "workspace.api.idempotency.postprocess_idempotency_conflicts",
    ],
}

# --- Request limits ---------------------------------------------------------------
# Bounded work per request: every limit is defined and explained in
# workspace/limits.py. A body over its view's limit (1 MB, 10 MB for a bundle
# import) is refused with 413 from its Content-Length, before anything reads
# it; the middleware goes first so that even the CSRF check reads no form.
from workspace import limits as _limits  # noqa: E402  (kept in this block)

MIDDLEWARE.insert(0, "workspace.limits.BodySizeLimitMiddleware")
# Django's own limits, for what reads request.body or request.POST (pages'
# forms, multipart fields): the same as the middleware's default.
DATA_UPLOAD_MAX_MEMORY_SIZE = _limits.BODY_MAX_BYTES
DATA_UPLOAD_MAX_NUMBER_FIELDS = _limits.FORM_MAX_FIELDS
DATA_UPLOAD_MAX_NUMBER_FILES = _limits.FORM_MAX_FILES
# An uploaded file above this size is streamed to a temporary file instead of
# being held in memory (its size is capped by the body limit anyway).
FILE_UPLOAD_MAX_MEMORY_SIZE = _limits.BODY_MAX_BYTES

# --- Security ----------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the API's browser clients read it for X-CSRFToken
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    # A load balancer probes over plain HTTP; /health/ reveals nothing secret.
    SECURE_REDIRECT_EXEMPT = [r"^health/$"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    # The header only allows a later submission to browsers' preload lists;
    # an operator who will never submit may turn it off.
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    if env_bool("SECURE_PROXY_SSL_HEADER", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Accounts: log-in lock-out, e-mail, API tokens, Content-Security-Policy ---
# Password guessing on the log-in page is counted per (client address,
# username) and per address. LOGIN_FAILURE_LIMIT failures for one username
# from one address lock that pair out for LOGIN_FAILURE_WINDOW seconds; other
# accounts behind the same address (an office NAT) keep logging in until the
# address as a whole reaches the higher LOGIN_FAILURE_ADDRESS_LIMIT.
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10)
LOGIN_FAILURE_ADDRESS_LIMIT = env_int("LOGIN_FAILURE_ADDRESS_LIMIT", 100)
LOGIN_FAILURE_WINDOW = env_int("LOGIN_FAILURE_WINDOW", 300)
if not 0 < LOGIN_FAILURE_LIMIT <= LOGIN_FAILURE_ADDRESS_LIMIT or LOGIN_FAILURE_WINDOW <= 0:
    raise ImproperlyConfigured(
        "need 0 < LOGIN_FAILURE_LIMIT <= LOGIN_FAILURE_ADDRESS_LIMIT and LOGIN_FAILURE_WINDOW > 0"
    )
# Password-reset mail (workspace.mail): at most PASSWORD_RESET_MAIL_LIMIT
# mails per address asked for, and as many per account, and
# PASSWORD_RESET_CLIENT_LIMIT requests per client address, each per
# PASSWORD_RESET_MAIL_WINDOW seconds. Over a limit the page answers as usual
# and nothing is sent. The mail is sent by a task (CELERY_IMPORTS below).
PASSWORD_RESET_MAIL_LIMIT = env_int("PASSWORD_RESET_MAIL_LIMIT", 3)
PASSWORD_RESET_CLIENT_LIMIT = env_int("PASSWORD_RESET_CLIENT_LIMIT", 20)
PASSWORD_RESET_MAIL_WINDOW = env_int("PASSWORD_RESET_MAIL_WINDOW", 3600)
if not 0 < PASSWORD_RESET_MAIL_LIMIT <= PASSWORD_RESET_CLIENT_LIMIT or PASSWORD_RESET_MAIL_WINDOW <= 0:
    raise ImproperlyConfigured(
        "need 0 < PASSWORD_RESET_MAIL_LIMIT <= PASSWORD_RESET_CLIENT_LIMIT and PASSWORD_RESET_MAIL_WINDOW > 0"
    )
# Task modules outside the apps' tasks.py (which Celery finds by itself).
CELERY_IMPORTS = ["workspace.mail"]


def email_from_url(url: str) -> dict[str, Any]:
    """Django's e-mail settings from ``EMAIL_URL``:

    - ``console:`` (the default) prints messages to the log;
    - ``smtp://user:password@host:587?tls=1`` sends with STARTTLS,
      ``smtps://user:password@host:465`` (or ``?ssl=1``) over implicit TLS;
      ``timeout=`` seconds (default 10) bounds a stalled server;
    - ``file:///var/mail/approve`` writes one file per message;
    - ``dummy:`` drops them.
    User and password are percent-encoded (``%40`` for ``@``).
    """
    parsed = urlparse(url)
    defaults = {
        "EMAIL_BACKEND": "",
        "EMAIL_HOST": "localhost",
        "EMAIL_PORT": 25,
        "EMAIL_HOST_USER": "",
        "EMAIL_HOST_PASSWORD": "",
        "EMAIL_USE_TLS": False,
        "EMAIL_USE_SSL": False,
        "EMAIL_TIMEOUT": None,
        "EMAIL_FILE_PATH": None,
    }
    options = _email_options(parsed.query)
    if parsed.scheme == "console":
        return {**defaults, "EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}
    if parsed.scheme == "dummy":
        return {**defaults, "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend"}
    if parsed.scheme == "file":
        if not parsed.path or parsed.path == "/":
            raise ImproperlyConfigured("EMAIL_URL file:// needs a folder, e.g. file:///var/mail/approve")
        return {
            **defaults,
            "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
            "EMAIL_FILE_PATH": unquote(parsed.path),
        }
    if parsed.scheme in {"smtp", "smtps"}:
        return {**defaults, **_smtp_settings(parsed, options)}
    raise ImproperlyConfigured(
        f"EMAIL_URL scheme {parsed.scheme!r} is not supported (use console:, smtp://, smtps://, file://, dummy:)"
    )


def _email_options(query: str) -> dict[str, str]:
    """EMAIL_URL's query options by name, their values percent-decoded (the
    last of a repeated one)."""
    options = {}
    for pair in query.split("&") if query else []:
        name, _, value = pair.partition("=")
        options[name] = unquote(value)
    return options


def _smtp_settings(parsed: ParseResult, options: dict[str, str]) -> dict[str, Any]:
    """Decides the SMTP settings of an smtp:// or smtps:// EMAIL_URL: known
    options only, STARTTLS or implicit TLS (not both), a host, and the port
    (by default that of the TLS chosen) and timeout."""
    unknown = sorted(set(options) - {"tls", "ssl", "timeout"})
    if unknown:
        raise ImproperlyConfigured(f"EMAIL_URL: unknown option(s) {', '.join(unknown)} (use tls, ssl, timeout)")
    flags = _email_flags(options)
    use_ssl = parsed.scheme == "smtps" or flags["ssl"]
    if use_ssl and flags["tls"]:
        raise ImproperlyConfigured("EMAIL_URL: choose tls (STARTTLS) or ssl (implicit TLS), not both")
    if not parsed.hostname:
        raise ImproperlyConfigured(
            "EMAIL_URL must name the SMTP host, e.g. smtp://user:password@mail.example.com:587?tls=1"
        )
    try:
        port = parsed.port or (465 if use_ssl else 587 if flags["tls"] else 25)
        timeout = int(options.get("timeout", "10"))
    except ValueError as error:
        raise ImproperlyConfigured(f"EMAIL_URL: {error}") from None
    return {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": parsed.hostname,
        "EMAIL_PORT": port,
        "EMAIL_HOST_USER": unquote(parsed.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parsed.password or ""),
        "EMAIL_USE_TLS": flags["tls"],
        "EMAIL_USE_SSL": use_ssl,
        "EMAIL_TIMEOUT": timeout,
    }


def _email_flags(options: dict[str, str]) -> dict[str, bool]:
    """Decides EMAIL_URL's tls and ssl options: each 1 or 0 (or true/false,
    yes/no, on/off; off when not given)."""
    flags = {}
    for name in ("tls", "ssl"):
        value = options.get(name, "").strip().lower()
        if value not in {"", "1", "true", "yes", "on", "0", "false", "no", "off"}:
            raise ImproperlyConfigured(f"EMAIL_URL: {name} must be 1 or 0, got {options[name]!r}")
        flags[name] = value in {"1", "true", "yes", "on"}
    return flags


# Password reset links are sent by e-mail; with the console default they are
# printed to the log, where an administrator can pass them on.
_EMAIL = email_from_url(os.environ.get("EMAIL_URL") or "console:")
EMAIL_BACKEND = _EMAIL["EMAIL_BACKEND"]
EMAIL_HOST, EMAIL_PORT = _EMAIL["EMAIL_HOST"], _EMAIL["EMAIL_PORT"]
EMAIL_HOST_USER, EMAIL_HOST_PASSWORD = _EMAIL["EMAIL_HOST_USER"], _EMAIL["EMAIL_HOST_PASSWORD"]
EMAIL_USE_TLS, EMAIL_USE_SSL, EMAIL_TIMEOUT = _EMAIL["EMAIL_USE_TLS"], _EMAIL["EMAIL_USE_SSL"], _EMAIL["EMAIL_TIMEOUT"]
EMAIL_FILE_PATH = _EMAIL["EMAIL_FILE_PATH"]
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "approve <noreply@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# API tokens expire: API_TOKEN_LIFETIME_DAYS unless the creator asks for
# another lifetime (``expires_in_days``) of at most API_TOKEN_MAX_LIFETIME_DAYS.
API_TOKEN_LIFETIME_DAYS = env_int("API_TOKEN_LIFETIME_DAYS", 90)
API_TOKEN_MAX_LIFETIME_DAYS = env_int("API_TOKEN_MAX_LIFETIME_DAYS", 365)
if not 0 < API_TOKEN_LIFETIME_DAYS <= API_TOKEN_MAX_LIFETIME_DAYS:
    raise ImproperlyConfigured("need 0 < API_TOKEN_LIFETIME_DAYS <= API_TOKEN_MAX_LIFETIME_DAYS")

# Sent on every response (workspace.middleware.ContentSecurityPolicyMiddleware).
# Scripts and styles come only from the site's own files: no inline <script>,
# <style> or style="" in any template, so an injected one never runs.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
    "workspace.middleware.ContentSecurityPolicyMiddleware",
)
# --- Compression and repeated reads ------------------------------------------------
# (issue 33, item 4; workspace/downloads.py, docs/architecture.md "Compression
# and repeated reads".) Pages, JSON and CSV answers of 200 bytes or more are
# gzipped when the client accepts it: Django's GZipMiddleware, which adds up
# to 100 random bytes to each compressed answer against BREACH (and every
# CSRF token is masked afresh each time). It comes after the static files
# (WhiteNoise serves its own compressed copies) and before whatever writes a
# body. ConditionalGetMiddleware, inside it, gives each page read without a
# version of its own the digest of its bytes as its ETag and answers 304 when
# the client already has them; results, bundles and analyses carry their own
# versions (workspace.downloads), checked before anything is read.
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.sessions.middleware.SessionMiddleware"), "django.middleware.gzip.GZipMiddleware"
)
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.gzip.GZipMiddleware") + 1, "django.middleware.http.ConditionalGetMiddleware"
)

# The Swagger UI (/api/docs/) loads its start-up script from a URL (the split
# view) and would show a badge from the public validator, another origin.
SPECTACULAR_SETTINGS["SWAGGER_UI_SETTINGS"] = {"deepLinking": True, "validatorUrl": None}

# --- MLflow (tracking/) ------------------------------------------------------------
# The folders under which a designer may connect a study to a local MLflow
# ``file:`` store, separated by os.pathsep (none by default: a server's files
# are the operator's to share; an http(s) tracking server needs no setting).
TRACKING_FILE_ROOTS = [root for root in os.environ.get("TRACKING_FILE_ROOTS", "").split(os.pathsep) if root]
# The http(s) hosts approve may contact for a study's MLflow server, separated
# by commas: a name, or ".example.com" for it and every host under it. Empty
# (the default): any host whose every address is public, and loopback with
# DEBUG; never private, link-local or other internal addresses
# (tracking.remote.check_host; docs/architecture.md "MLflow hosts").
TRACKING_ALLOWED_HOSTS = [
    host.strip() for host in os.environ.get("TRACKING_ALLOWED_HOSTS", "").split(",") if host.strip()
]

# --- Single sign-on (accounts, OpenID Connect) -------------------------------------
# (issue 32, item 1)
# Off while OIDC_ISSUER is unset: no button, the SSO URLs answer 404. The
# provider's endpoints are read from <issuer>/.well-known/openid-configuration
# on first use (accounts.oidc.discovery), unless set one by one below.
OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "").strip().rstrip("/")
# The name on the sign-in button ("Sign in with <name>").
OIDC_PROVIDER_NAME = os.environ.get("OIDC_PROVIDER_NAME", "").strip() or "single sign-on"
# This site's client at the provider; its redirect URI is
# <site>/accounts/oidc/callback/, its post-logout URI <site>/accounts/login/.
OIDC_RP_CLIENT_ID = os.environ.get("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.environ.get("OIDC_RP_CLIENT_SECRET", "")
OIDC_RP_SCOPES = os.environ.get("OIDC_RP_SCOPES", "openid email profile")
# Explicit endpoints (each overrides discovery; empty: discovered).
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.environ.get("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_OP_END_SESSION_ENDPOINT = os.environ.get("OIDC_OP_END_SESSION_ENDPOINT", "")
# Authorization code flow with PKCE (S256), state and nonce; ID tokens signed
# RS256 by a key of the provider's JWKS; iss, aud (and azp), exp and iat
# checked with OIDC_LEEWAY seconds of clock skew (accounts.oidc).
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_PKCE_CODE_CHALLENGE_METHOD = "S256"
OIDC_LEEWAY = env_int("OIDC_LEEWAY", 60)
# Seconds to wait for the provider's answers.
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT", 10)
# The claims read for a new account: username, e-mail, display name (a
# full name claim, or first and last names).
OIDC_CLAIM_USERNAME = os.environ.get("OIDC_CLAIM_USERNAME", "preferred_username")
OIDC_CLAIM_EMAIL = os.environ.get("OIDC_CLAIM_EMAIL", "email")
OIDC_CLAIM_NAME = os.environ.get("OIDC_CLAIM_NAME", "name")
OIDC_CLAIM_FIRST_NAME = os.environ.get("OIDC_CLAIM_FIRST_NAME", "given_name")
OIDC_CLAIM_LAST_NAME = os.environ.get("OIDC_CLAIM_LAST_NAME", "family_name")
# Who may get a NEW account at first sign-in: a verified address in one of
# OIDC_ALLOWED_DOMAINS (comma-separated; "*" for any domain), or one of
# OIDC_ALLOWED_GROUPS in the OIDC_GROUPS_CLAIM claim. Both empty: nobody
# (existing accounts still link by verified e-mail).
OIDC_ALLOWED_DOMAINS = [domain.lower().lstrip("@") for domain in env_list("OIDC_ALLOWED_DOMAINS")]
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "groups")
OIDC_ALLOWED_GROUPS = env_list("OIDC_ALLOWED_GROUPS")
# Signing out also ends the provider's session (its end_session_endpoint,
# with id_token_hint and post_logout_redirect_uri) where it has one.
OIDC_STORE_ID_TOKEN = True
OIDC_OP_LOGOUT_URL_METHOD = "accounts.oidc.provider_logout_url"
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
LOGIN_REDIRECT_URL_FAILURE = "login"
# PASSWORD_SIGN_IN=false hides the password form, refuses its POST and turns
# the password-reset pages off (404); API tokens work as before.
PASSWORD_SIGN_IN = env_bool("PASSWORD_SIGN_IN", True)
if not PASSWORD_SIGN_IN and not OIDC_ISSUER:
    raise ImproperlyConfigured("PASSWORD_SIGN_IN=false needs single sign-on (OIDC_ISSUER)")
if OIDC_ISSUER and (not OIDC_RP_CLIENT_ID or not OIDC_RP_CLIENT_SECRET):
    raise ImproperlyConfigured("OIDC_ISSUER needs OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET")
# Always listed; it signs no one in while OIDC_ISSUER is unset.
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend", "accounts.oidc.Backend"]
# (TEMPLATES is a list of dicts of mixed values: mypy sees "object".)
_TEMPLATE_OPTIONS: dict[str, list[str]] = TEMPLATES[0]["OPTIONS"]  # type: ignore[assignment]  # see above
_TEMPLATE_OPTIONS["context_processors"].append("accounts.oidc.sign_in_context")
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.messages.middleware.MessageMiddleware") + 1,
    "accounts.oidc.SignInMiddleware",
)

# --- Self sign-up (accounts) -------------------------------------------------------
# (issue 32, item 2; accounts/signup.py, docs/accounts.md "Self sign-up")
# Who may sign up is the site policy (the admin's "Site policy"). The link
# mailed to a new address works once, for this many hours.
SIGNUP_LINK_HOURS = env_int("SIGNUP_LINK_HOURS", 24)
# Sign-up requests (the page and the API together), as DRF rates
# ("count/second|minute|hour|day"): per address asked for (a victim's
# mailbox cannot be flooded) and per client address (one client asking for
# many addresses; the link's step is counted there too).
SIGNUP_ADDRESS_RATE = os.environ.get("SIGNUP_ADDRESS_THROTTLE_RATE", "5/hour")
SIGNUP_CLIENT_RATE = os.environ.get("SIGNUP_CLIENT_THROTTLE_RATE", "20/hour")
if SIGNUP_LINK_HOURS <= 0:
    raise ImproperlyConfigured("SIGNUP_LINK_HOURS must be > 0")
for _name, _rate in (
    ("SIGNUP_ADDRESS_THROTTLE_RATE", SIGNUP_ADDRESS_RATE),
    ("SIGNUP_CLIENT_THROTTLE_RATE", SIGNUP_CLIENT_RATE),
):
    _count, _, _period = _rate.partition("/")
    if not _count.isdigit() or int(_count) <= 0 or _period[:1] not in ("s", "m", "h", "d"):
        raise ImproperlyConfigured(f"{_name} must be a rate like 5/hour, got {_rate!r}")
_TEMPLATE_OPTIONS["context_processors"].append("accounts.signup.sign_up_context")

# --- Two-factor sign-in (accounts) -------------------------------------------------
# (issue 32, item 3; accounts/otp, docs/accounts.md "Two-factor sign-in")
# django-otp's middleware tells whether a session was verified with a code;
# ours then keeps a signed-in session whose user has a device (or must set
# one up) on the code page (or the set-up page) until it is, whatever way
# the session was signed in.
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
    "django_otp.middleware.OTPMiddleware",
)
MIDDLEWARE.insert(
    MIDDLEWARE.index("django_otp.middleware.OTPMiddleware") + 1, "accounts.otp.middleware.TwoFactorMiddleware"
)
# The name authenticator apps show for the site's entry (the issuer of the
# otpauth:// URI the QR code holds), e.g. "approve (Example Hospital)".
OTP_TOTP_ISSUER = os.environ.get("TWO_FACTOR_ISSUER", "approve")
# The admin's device pages never show a TOTP secret or its QR code.
OTP_ADMIN_HIDE_SENSITIVE_DATA = True
# Wrong codes are counted like passwords (workspace.lockout's counting):
# TWO_FACTOR_FAILURE_LIMIT for one account (whatever the address: whoever
# types a code has the password) lock that account's code entry for
# TWO_FACTOR_FAILURE_WINDOW seconds from the first failure, and
# TWO_FACTOR_FAILURE_ADDRESS_LIMIT from one client address lock that address.
# django-otp's own back-off (1, 2, 4... seconds between tries, kept in the
# database) stays on under it, also while the cache is unreachable.
TWO_FACTOR_FAILURE_LIMIT = env_int("TWO_FACTOR_FAILURE_LIMIT", 5)
TWO_FACTOR_FAILURE_ADDRESS_LIMIT = env_int("TWO_FACTOR_FAILURE_ADDRESS_LIMIT", 50)
TWO_FACTOR_FAILURE_WINDOW = env_int("TWO_FACTOR_FAILURE_WINDOW", 900)
if not 0 < TWO_FACTOR_FAILURE_LIMIT <= TWO_FACTOR_FAILURE_ADDRESS_LIMIT or TWO_FACTOR_FAILURE_WINDOW <= 0:
    raise ImproperlyConfigured(
        "need 0 < TWO_FACTOR_FAILURE_LIMIT <= TWO_FACTOR_FAILURE_ADDRESS_LIMIT and TWO_FACTOR_FAILURE_WINDOW > 0"
    )
# A session remembers whether its user has a device or must set one up (from
# sign-in); it looks again at least this often, so a device set up in another
# session, a site policy turned on or a new designer role applies to it within
# this many seconds (becoming staff applies at once).
TWO_FACTOR_RECHECK_SECONDS = env_int("TWO_FACTOR_RECHECK_SECONDS", 60)

# --- Notifications (notifications/) ------------------------------------------------
# (issue 32, item 4; docs/notifications.md)
# The site's address as people open it, for the links in notification
# e-mails (written by a worker, outside any request).
NOTIFICATIONS_SITE_URL = os.environ.get("NOTIFICATIONS_SITE_URL", "http://localhost:8000")
# A notification mail the server refuses is tried again this many times,
# after NOTIFICATIONS_MAIL_RETRY_SECONDS, then twice, four times... as long
# (at most an hour apart); then it is marked refused.
NOTIFICATIONS_MAIL_MAX_RETRIES = env_int("NOTIFICATIONS_MAIL_MAX_RETRIES", 5)
NOTIFICATIONS_MAIL_RETRY_SECONDS = env_int("NOTIFICATIONS_MAIL_RETRY_SECONDS", 60)
# How long a mail's unsubscribe link works (seconds; a year by default).
NOTIFICATIONS_UNSUBSCRIBE_MAX_AGE = env_int("NOTIFICATIONS_UNSUBSCRIBE_MAX_AGE", 365 * 24 * 3600)
# The daily digest goes out at this hour (UTC) from `celery beat`
# (or at once with `manage.py notifications_digest`).
NOTIFICATIONS_DIGEST_HOUR = env_int("NOTIFICATIONS_DIGEST_HOUR", 7)
if (
    NOTIFICATIONS_MAIL_MAX_RETRIES < 0
    or NOTIFICATIONS_MAIL_RETRY_SECONDS <= 0
    or not 0 <= NOTIFICATIONS_DIGEST_HOUR < 24
):
    raise ImproperlyConfigured(
        "need NOTIFICATIONS_MAIL_MAX_RETRIES >= 0, NOTIFICATIONS_MAIL_RETRY_SECONDS > 0 "
        "and 0 <= NOTIFICATIONS_DIGEST_HOUR < 24"
    )
CELERY_BEAT_SCHEDULE["notifications-daily-digest"] = {
    "task": "notifications.tasks.digests_send",
    "schedule": crontab(minute=0, hour=NOTIFICATIONS_DIGEST_HOUR),
}
# The API's notifications endpoints (notifications/api/) under their own tag.
cast(list, SPECTACULAR_SETTINGS["TAGS"]).append(
    {"name": "notifications", "description": "Your notifications (in the app) and your e-mail preferences."}
)
# The header's unread count (one query per page, only for a signed-in user).
cast(dict, TEMPLATES[0]["OPTIONS"])["context_processors"].append(
    "notifications.context_processors.unread_notifications"
)

# --- Webhooks (webhooks/) ----------------------------------------------------------
# (issue 32, item 5; docs/webhooks.md)
# The hosts a webhook may deliver to (comma-separated; ".example.org" also
# matches its subdomains), with the meaning of TRACKING_ALLOWED_HOSTS: empty
# (the default) any host whose every address is public, loopback too with
# DEBUG, and https only; set, only the hosts listed (http allowed to them).
WEBHOOK_ALLOWED_HOSTS = env_list("WEBHOOK_ALLOWED_HOSTS")
# The most webhooks a study may have, and the deliveries kept per webhook
# (the oldest deleted beyond).
WEBHOOK_MAX_PER_STUDY = env_int("WEBHOOK_MAX_PER_STUDY", 10)
WEBHOOK_DELIVERIES_KEPT = env_int("WEBHOOK_DELIVERIES_KEPT", 200)
# Each connect and read of a delivery (seconds; the whole exchange twice that).
WEBHOOK_TIMEOUT_SECONDS = env_int("WEBHOOK_TIMEOUT_SECONDS", 5)
# A delivery without a 2xx answer (no answer, 5xx, 408, 429) is tried again
# this many times, after WEBHOOK_RETRY_SECONDS, then twice, four times... as
# long (at most an hour apart); any other answer fails it at once.
WEBHOOK_MAX_RETRIES = env_int("WEBHOOK_MAX_RETRIES", 5)
WEBHOOK_RETRY_SECONDS = env_int("WEBHOOK_RETRY_SECONDS", 30)
# The site's address in the payloads' links (default: the notifications').
WEBHOOK_SITE_URL = os.environ.get("WEBHOOK_SITE_URL", NOTIFICATIONS_SITE_URL)
if (
    WEBHOOK_MAX_PER_STUDY < 1
    or WEBHOOK_DELIVERIES_KEPT < 1
    or WEBHOOK_TIMEOUT_SECONDS <= 0
    or WEBHOOK_MAX_RETRIES < 0
    or WEBHOOK_RETRY_SECONDS <= 0
):
    raise ImproperlyConfigured(
        "need WEBHOOK_MAX_PER_STUDY >= 1, WEBHOOK_DELIVERIES_KEPT >= 1, WEBHOOK_TIMEOUT_SECONDS > 0, "
        "WEBHOOK_MAX_RETRIES >= 0 and WEBHOOK_RETRY_SECONDS > 0"
    )
# The API's webhooks endpoints (webhooks/api/) under their own tag.
cast(list, SPECTACULAR_SETTINGS["TAGS"]).append(
    {"name": "webhooks", "description": "A study's webhooks: signed JSON deliveries of its events, their log."}
)

# --- Observability: logs, metrics, error reporting, tracing ------------------------
# (issue 32, item 7; approve_site/observability.py, approve_site/metrics.py,
# docs/architecture.md "Observability")
import ipaddress as _ipaddress  # noqa: E402  (kept in this block)

from approve_site import observability as _observability  # noqa: E402

# Log lines as one JSON object each ("json") or readable text ("plain"):
# JSON by default with DEBUG off, plain with DEBUG on.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "").strip().lower() or ("plain" if DEBUG else "json")
if LOG_FORMAT not in {"json", "plain"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or plain, got {LOG_FORMAT!r}")
# Every log record carries the request id, user id and study id of its request or task.
_observability.install_record_factory()
# First of all: the request id, one log line per request, the request metrics.
MIDDLEWARE.insert(0, "approve_site.observability.RequestLogMiddleware")

# /metrics is off (404) unless one of these is set. A scrape then sends
# "Authorization: Bearer <METRICS_TOKEN>" (at least 32 characters) or comes
# from an address in METRICS_ALLOWED_NETWORKS (comma-separated CIDRs, checked
# against REMOTE_ADDR: behind a proxy that is the proxy's address).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
if METRICS_TOKEN and len(METRICS_TOKEN) < 32:
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 32 characters (secrets.token_urlsafe(32))")
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS")
for _network in METRICS_ALLOWED_NETWORKS:
    try:
        _ipaddress.ip_network(_network, strict=True)
    except ValueError as _error:
        raise ImproperlyConfigured(f"METRICS_ALLOWED_NETWORKS: {_error}") from None
# The Celery queues whose length /metrics reports (comma-separated).
METRICS_CELERY_QUEUES = env_list("METRICS_CELERY_QUEUES", "celery")
# gunicorn's workers share their request metrics through files in this folder
# (prometheus-client's multiprocess mode; gunicorn.conf.py empties it at start).
PROMETHEUS_MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
if not DEBUG:
    # A scraper inside the network may speak plain HTTP (the token, if any,
    # was already sent when a redirect would answer).
    SECURE_REDIRECT_EXEMPT = [*SECURE_REDIRECT_EXEMPT, r"^metrics$"]

# Sentry error reporting when SENTRY_DSN is set (sentry-sdk imported only
# then); SENTRY_TRACES_SAMPLE_RATE the share of requests traced (0 to 1),
# SENTRY_ENVIRONMENT the environment's name on each event.
SENTRY_DSN = os.environ.get("SENTRY_DSN", "")
SENTRY_ENVIRONMENT = os.environ.get("SENTRY_ENVIRONMENT", "")
try:
    SENTRY_TRACES_SAMPLE_RATE = float(os.environ.get("SENTRY_TRACES_SAMPLE_RATE") or 0)
except ValueError:
    raise ImproperlyConfigured("SENTRY_TRACES_SAMPLE_RATE must be a number from 0 to 1") from None
if not 0 <= SENTRY_TRACES_SAMPLE_RATE <= 1:
    raise ImproperlyConfigured("SENTRY_TRACES_SAMPLE_RATE must be a number from 0 to 1")
if SENTRY_DSN:
    _observability.sentry_setup(
        dsn=SENTRY_DSN, environment=SENTRY_ENVIRONMENT, traces_sample_rate=SENTRY_TRACES_SAMPLE_RATE
    )
# OpenTelemetry traces over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set
# (e.g. http://otel-collector:4318; the exporter reads the other
# OTEL_EXPORTER_OTLP_* variables itself): set up by approve_site/wsgi.py and
# asgi.py in the web process and by each Celery worker process.
OTEL_EXPORTER_OTLP_ENDPOINT = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
OTEL_SERVICE_NAME = os.environ.get("OTEL_SERVICE_NAME", "") or "approve"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "approve_site.observability.JsonFormatter"},
        "plain": {"()": "approve_site.observability.PlainFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # In-process (eager) runs would otherwise log every task into command
        # output; with a broker, Celery's lines and one line per task.
        "celery.app.trace": {"level": "INFO" if REDIS_URL else "WARNING"},
        "approve.task": {"level": "INFO" if REDIS_URL else "WARNING"},
        # Django's loggers write through the one handler (and format), not
        # their own; runserver's line per request repeats approve.request's.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.server": {"handlers": [], "level": "WARNING", "propagate": True},
    },
}
