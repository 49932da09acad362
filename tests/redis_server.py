"""A Redis server of a test's own (the machine's is shared): on a free port of
127.0.0.1, keeping nothing on disk, returned once it answers."""

import contextlib
import socket
import subprocess
import time

import pytest
import redis


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def redis_server(port, folder, *options, client_options=None):
    """``redis-server`` on ``port`` (its working folder ``folder``), once a
    PING through ``redis.Redis(port=port, **client_options)`` answers; with
    ``options`` (e.g. TLS: ``--port 0 --tls-port PORT ...``) after the defaults."""
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *options],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, socket_connect_timeout=0.5, **(client_options or {}))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(redis.RedisError):
            if client.ping():
                return process
        time.sleep(0.1)
    process.kill()
    pytest.fail("redis-server did not start")
