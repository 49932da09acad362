"""DATABASE_URL and REDIS_URL as a deployment writes them (issue 29, finding
12): every option of a managed PostgreSQL (``sslmode``, ``sslrootcert``,
``connect_timeout``, ...) reaches Django's ``DATABASES``, and a ``rediss://``
URL's certificate options reach Celery's broker, the cache and /health/.
The settings are read in a process of their own with the environment set, as
a server reads them; a bad URL is refused at start-up with a message naming
what is wrong (docs/architecture.md, "Database and Redis URLs").
"""

import contextlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from approve_site.settings import database_from_url, redis_from_url
from tests.redis_server import free_port, redis_server

ROOT = Path(__file__).resolve().parents[1]


def _python(script, env):
    """``script`` run by a fresh Python whose environment is this one's without
    DATABASE_URL and REDIS_URL, plus ``env``: settings as a server reads them."""
    base = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL"}}
    return subprocess.run(
        [sys.executable, "-c", script],
        env={**base, "DJANGO_SETTINGS_MODULE": "approve_site.settings", **env},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def _settings(env, expression):
    """``expression`` (JSON-serialisable) evaluated with the settings of ``env``."""
    done = _python(
        "import json; from django.conf import settings; "
        f"print(json.dumps({expression}, default=lambda value: getattr(value, 'name', str(value))))",
        env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_managed_postgresql_url_keeps_every_option():
    database = _settings(
        {
            "DATABASE_URL": "postgres://approve:s%40cret@db.example.com:6432/approve"
            "?sslmode=require&sslrootcert=/x&connect_timeout=5",
            "DATABASE_CONNECT_TIMEOUT": "9",  # the URL's own option wins
        },
        "settings.DATABASES['default']",
    )
    assert {key: database[key] for key in ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT")} == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "approve",
        "USER": "approve",
        "PASSWORD": "s@cret",
        "HOST": "db.example.com",
        "PORT": "6432",
    }
    assert database["OPTIONS"] == {
        "sslmode": "require",
        "sslrootcert": "/x",
        "connect_timeout": 5,
        # The project's bounds on a dead peer stay unless the URL sets them.
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 2,
        "tcp_user_timeout": 20_000,
    }
    assert database["CONN_MAX_AGE"] == 60 and database["CONN_HEALTH_CHECKS"] is True


def test_without_database_url_the_project_uses_its_sqlite_file():
    database = _settings(
        {}, "{'ENGINE': settings.DATABASES['default']['ENGINE'], 'NAME': str(settings.DATABASES['default']['NAME'])}"
    )
    assert database == {"ENGINE": "django.db.backends.sqlite3", "NAME": str(ROOT / "db.sqlite3")}
    assert database_from_url("sqlite:////srv/approve/db.sqlite3") == {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": "/srv/approve/db.sqlite3",
    }


def test_a_rediss_url_gives_celery_the_cache_and_health_its_certificate_options():
    found = _settings(
        {
            "REDIS_URL": "rediss://:pa%40ss@redis.example.com:6380/2?ssl_cert_reqs=required&ssl_ca_certs=/etc/approve/ca.pem"
        },
        "{'broker_url': settings.CELERY_BROKER_URL, 'broker_use_ssl': settings.CELERY_BROKER_USE_SSL,"
        " 'backend_use_ssl': settings.CELERY_REDIS_BACKEND_USE_SSL, 'cache': settings.CACHES['default'],"
        " 'kombu_ssl': __import__('approve_site.celery').celery.app.connection_for_write().ssl,"
        " 'health': (lambda pool: [pool.connection_class.__name__, pool.connection_kwargs])"
        "(__import__('engine.health').health._broker().connection_pool)}",
    )
    tls = {"ssl_cert_reqs": int(ssl.CERT_REQUIRED), "ssl_check_hostname": True, "ssl_ca_certs": "/etc/approve/ca.pem"}
    assert found["broker_url"] == "rediss://:pa%40ss@redis.example.com:6380/2"  # the options go apart
    assert found["broker_use_ssl"] == found["backend_use_ssl"] == found["kombu_ssl"] == tls
    assert found["cache"] == {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "rediss://:pa%40ss@redis.example.com:6380/2",
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1, **tls},
    }
    connection_class, kwargs = found["health"]
    assert connection_class == "SSLConnection"
    assert {key: kwargs[key] for key in (*tls, "host", "port", "db", "password")} == {
        **tls,
        "host": "redis.example.com",
        "port": 6380,
        "db": 2,
        "password": "pa@ss",
    }


def test_rediss_verifies_the_certificate_unless_told_otherwise():
    assert redis_from_url("rediss://redis.example.com:6380/0") == (
        "rediss://redis.example.com:6380/0",
        {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_check_hostname": True},
    )
    assert redis_from_url("rediss://r:6380/0?ssl_cert_reqs=none")[1] == {
        "ssl_cert_reqs": ssl.CERT_NONE,
        "ssl_check_hostname": False,
    }
    assert redis_from_url("rediss://r/0?ssl_cert_reqs=optional&ssl_certfile=/c.pem&ssl_keyfile=/k.pem")[1] == {
        "ssl_cert_reqs": ssl.CERT_OPTIONAL,
        "ssl_check_hostname": False,
        "ssl_certfile": "/c.pem",
        "ssl_keyfile": "/k.pem",
    }
    assert redis_from_url("redis://redis:6379/0") == ("redis://redis:6379/0", None)


@pytest.mark.parametrize(
    ("parse", "url", "says"),
    [
        (
            database_from_url,
            "mysql://u@h/approve",
            "DATABASE_URL scheme 'mysql' is not supported (use postgres:// or sqlite://)",
        ),
        (database_from_url, "postgres://u@h:5432/", "DATABASE_URL must name a database"),
        (database_from_url, "postgres://u@h:port/approve", "DATABASE_URL is not a valid URL"),
        (
            database_from_url,
            "postgres://u@h/approve?sslmod=require",
            'DATABASE_URL: invalid dsn: invalid connection option "sslmod"',
        ),
        (
            database_from_url,
            "postgres://u@h/approve?sslmode=require&sslmode=disable",
            "option(s) sslmode given more than once",
        ),
        (database_from_url, "sqlite://", "DATABASE_URL for SQLite needs an absolute file path"),
        (database_from_url, "sqlite:///db.sqlite3", "DATABASE_URL for SQLite needs an absolute file path"),
        (
            database_from_url,
            "sqlite:////srv/db.sqlite3?timeout=5",
            "DATABASE_URL for SQLite takes no options, got timeout",
        ),
        (
            redis_from_url,
            "unix:///run/redis.sock",
            "REDIS_URL scheme 'unix' is not supported (use redis:// or rediss:// for TLS)",
        ),
        (redis_from_url, "redis://:6379/0", "REDIS_URL must name the Redis host"),
        (redis_from_url, "redis://redis:6379/zero", "REDIS_URL: the path is a database number"),
        (redis_from_url, "redis://redis:6379/0?ssl_ca_certs=/ca.pem", "REDIS_URL: ssl_ca_certs need(s) rediss://"),
        (
            redis_from_url,
            "rediss://redis/0?socket_timeout=1",
            "REDIS_URL: unknown option(s) socket_timeout (use ssl_cert_reqs,",
        ),
        (
            redis_from_url,
            "rediss://redis/0?ssl_cert_reqs=maybe",
            "ssl_cert_reqs must be required, optional or none, got 'maybe'",
        ),
        (redis_from_url, "rediss://redis/0?ssl_check_hostname=perhaps", "ssl_check_hostname must be true or false"),
        (
            redis_from_url,
            "rediss://redis/0?ssl_cert_reqs=none&ssl_check_hostname=1",
            "ssl_check_hostname needs the certificate",
        ),
        (redis_from_url, "rediss://redis/0?ssl_ca_certs=", "REDIS_URL: ssl_ca_certs needs a file path"),
        (
            redis_from_url,
            "rediss://redis/0?ssl_cert_reqs=none&ssl_cert_reqs=required",
            "option(s) ssl_cert_reqs given more than once",
        ),
    ],
)
def test_a_bad_url_is_refused_naming_what_is_wrong(parse, url, says):
    with pytest.raises(ImproperlyConfigured, match=re.escape(says)):
        parse(url)


def test_a_bad_url_stops_the_server_at_start_up_without_quoting_the_password():
    done = _python(
        "from django.conf import settings; settings.DATABASES",
        {"DATABASE_URL": "postgres://approve:hunter2@db/approve?sslmod=require"},
    )
    assert done.returncode != 0
    assert 'ImproperlyConfigured: DATABASE_URL: invalid dsn: invalid connection option "sslmod"' in done.stderr
    assert "hunter2" not in done.stderr


# --- rediss:// against a Redis that speaks TLS -------------------------------------


def _certificates(folder):
    """A certificate authority and a server certificate for localhost, signed by it."""
    openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
    run = lambda *args: subprocess.run(args, check=True, capture_output=True, cwd=folder)  # noqa: E731
    run(*openssl, "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=approve test CA")
    run(
        "openssl",
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    )
    (folder / "san.ext").write_text("subjectAltName=DNS:localhost\n")
    run(
        "openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "san.ext",
    )  # fmt: skip


@contextlib.contextmanager
def _tls_redis(folder):
    port = free_port()
    process = redis_server(
        port, folder, "--port", "0", "--tls-port", str(port), "--tls-cert-file", "server.pem",
        "--tls-key-file", "server.key", "--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no",
        client_options={"ssl": True, "ssl_ca_certs": str(folder / "ca.pem")},
    )  # fmt: skip
    try:
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


_ROUND_TRIP = """
import json
from django.core.cache import cache
from approve_site.celery import app
from engine import health
found = {}
for name, attempt in {
    "cache": lambda: (cache.set("approve-tls-check", "ok", 30), cache.get("approve-tls-check"))[1],
    "health": lambda: health._broker().ping(),
    "celery": lambda: app.connection_for_write().ensure_connection(max_retries=0).default_channel.client.ping(),
}.items():
    try:
        found[name] = attempt()
    except Exception as error:
        found[name] = type(error).__name__ + ": " + str(error)
print(json.dumps(found))
"""


@pytest.mark.skipif(
    not (shutil.which("redis-server") and shutil.which("openssl")),
    reason="needs redis-server and openssl to start a Redis that speaks TLS",
)
def test_rediss_reaches_a_tls_redis_only_through_a_verified_certificate(tmp_path):
    _certificates(tmp_path)
    with _tls_redis(tmp_path) as port:

        def round_trip(query):
            done = _python(_ROUND_TRIP, {"REDIS_URL": f"rediss://localhost:{port}/0{query}"})
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout.splitlines()[-1])

        trusted = round_trip(f"?ssl_cert_reqs=required&ssl_ca_certs={tmp_path / 'ca.pem'}")
        assert trusted == {"cache": "ok", "health": True, "celery": True}, trusted
        # The same server without its authority: every client refuses it (by
        # default, and Celery too, which on its own would not have checked).
        for query in ("", "?ssl_cert_reqs=required"):
            refused = round_trip(query)
            assert all("certificate verify failed" in str(answer) for answer in refused.values()), refused
