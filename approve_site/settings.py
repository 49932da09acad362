"""Settings for approve, configured by environment variables.

With nothing set, the project runs as a self-contained development install:
SQLite in the project folder, Celery tasks run eagerly in-process, a local
memory cache, DEBUG on. A deployment sets:

- ``SECRET_KEY``: required (and checked) whenever ``DEBUG`` is off;
- ``DEBUG``: ``true``/``false`` (default ``true``);
- ``ALLOWED_HOSTS``: comma-separated host names;
- ``DATABASE_URL``: ``postgres://user:password@host:5432/name`` or
  ``sqlite:///absolute/path/db.sqlite3``;
- ``REDIS_URL``: ``redis://host:6379/0``; Celery's broker and result backend
  and Django's cache. Without it, Celery runs tasks eagerly;
- ``CSRF_TRUSTED_ORIGINS``, ``SECURE_SSL_REDIRECT``, ``SECURE_HSTS_SECONDS``,
  ``SECURE_PROXY_SSL_HEADER`` for running behind a TLS-terminating proxy.
"""

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {value!r}")


def env_list(name, default=""):
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_int(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None


def database_from_url(url):
    """Turn a database URL into a Django ``DATABASES`` entry.

    Only the two engines the project supports are accepted, so a typo fails
    loudly at start-up instead of at the first query.
    """
    parsed = urlparse(url)
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        name = unquote(parsed.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured("DATABASE_URL must name a database, e.g. postgres://postgres@127.0.0.1:5432/approve")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            # Reuse connections across requests; health checks drop dead ones.
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path)
        if not path or path == "/":
            raise ImproperlyConfigured("DATABASE_URL for SQLite needs a file path, e.g. sqlite:////srv/approve/db.sqlite3")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path}
    raise ImproperlyConfigured(f"DATABASE_URL scheme {parsed.scheme!r} is not supported (use postgres:// or sqlite://)")


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
    "workspace",
    "engine",
    "evaluation",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
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
# Password guessing on the login page: this many failures from one address
# lock it out for the window (seconds).
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10)
LOGIN_FAILURE_WINDOW = env_int("LOGIN_FAILURE_WINDOW", 300)
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

if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
# Without a broker the embedded install runs tasks in-process, at once.
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_SERIALIZER = "json"
CELERY_RESULT_EXPIRES = 24 * 3600
# A run keeps its own status and results in the database; Celery's copy of
# a task's return value would only fill Redis.
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
# Redis re-delivers an unacknowledged message after the visibility timeout. It
# must exceed the hard time limit, or a healthy long run would be delivered twice.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 900)}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Periodic recovery of runs whose worker vanished (needs `celery beat`).
CELERY_BEAT_SCHEDULE = {
    "recover-stale-runs": {"task": "engine.tasks.recover_stale_runs", "schedule": 300.0},
}

# --- Validation engine ---------------------------------------------------------
# A claimed run is held for this long; after it, the worker that held it has
# been stopped by the hard time limit, and another delivery may take the run.
ENGINE_RUN_LEASE_SECONDS = env_int("ENGINE_RUN_LEASE_SECONDS", CELERY_TASK_TIME_LIMIT + 30)
# Fault injection for the worker-loss tests only: seconds a task waits after
# claiming a run. Always 0 in real use.
ENGINE_FAULT_INJECTION_DELAY = env_int("ENGINE_FAULT_INJECTION_DELAY", 0)
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True

# --- REST framework ----------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: an anonymous request then gets 401 with a WWW-Authenticate
    # header; session authentication keeps CSRF checks for browsers.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "workspace.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "EXCEPTION_HANDLER": "workspace.api.exceptions.exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "workspace.api.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "workspace.api.schema.ApproveAutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    # Throttles identify a client by its address. X-Forwarded-For is set by
    # the client unless a proxy rewrites it, so it is trusted only for the
    # number of proxies in front of the app (NUM_PROXIES=1 behind one).
    "NUM_PROXIES": env_int("NUM_PROXIES", 0),
    # Password guessing: token requests per client address.
    "DEFAULT_THROTTLE_RATES": {"login": os.environ.get("LOGIN_THROTTLE_RATE", "10/minute")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "approve API",
    "DESCRIPTION": "Multi-expert, multi-criteria evaluation of learning algorithms (APPrOVE).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
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
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    # The header only allows a later submission to browsers' preload lists;
    # an operator who will never submit may turn it off.
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    if env_bool("SECURE_PROXY_SSL_HEADER", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # In-process (eager) runs would otherwise log every task into command output.
    "loggers": {"celery.app.trace": {"level": "INFO" if REDIS_URL else "WARNING"}},
}
