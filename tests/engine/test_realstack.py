"""Validation runs through a real Celery worker, Redis and PostgreSQL.

These start `celery worker` processes against the test database, so they
need the real stack: `.ci/run` sets DATABASE_URL (PostgreSQL) and REDIS_URL.
With the embedded defaults (SQLite, eager Celery) there is no broker for a
worker to listen on, and the tests are skipped for that stated reason.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from approve_site.celery import app as celery_app
from engine import health
from engine import services as engine_services
from engine.models import Run
from engine.services import run_launch
from engine.tasks import execute_run
from tests.redis_server import free_port, redis_server
from workspace.bundles import study_import_bundle

ROOT = Path(__file__).resolve().parents[2]
CASE_STUDY = ROOT / "workspace" / "demo" / "case-study-1.json"
LAUNCHER = Path(__file__).resolve().parent / "realstack_worker.py"

pytestmark = [
    pytest.mark.realstack,
    pytest.mark.skipif(
        not (settings.REDIS_URL and settings.DATABASES["default"]["ENGINE"].endswith("postgresql")),
        reason=(
            "needs REDIS_URL and a PostgreSQL DATABASE_URL (as .ci/run sets): "
            "a worker process must share the broker and database"
        ),
    ),
    pytest.mark.django_db(transaction=True),
]


def _database_url():
    database = settings.DATABASES["default"]
    password = f":{database['PASSWORD']}" if database["PASSWORD"] else ""
    host, port = database["HOST"] or "127.0.0.1", database["PORT"] or 5432
    return f"postgres://{database['USER']}{password}@{host}:{port}/{database['NAME']}"


class Workers:
    """Starts worker (and beat) processes on the test database and stops them all.

    They listen on a queue of their own, so the tests neither take nor drop
    messages of anything else using the same Redis (nothing is flushed). They
    run through ``realstack_worker.py``, which sends the messages they send
    themselves (the recovery sweep's) to that queue too and can slow runs.
    """

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.processes = []
        self.names = []
        self.queue = f"approve-test-{uuid.uuid4().hex[:12]}"
        self.redis_url = settings.REDIS_URL

    def _spawn(self, name, args, run_delay, database_url=None):
        env = {
            **os.environ,
            "DATABASE_URL": database_url or _database_url(),
            "REDIS_URL": self.redis_url,
            "DJANGO_SETTINGS_MODULE": "approve_site.settings",
            "APPROVE_TEST_QUEUE": self.queue,
            "APPROVE_TEST_RUN_DELAY": str(run_delay),
        }
        log = open(self.tmp_path / f"{name}.log", "w")  # noqa: SIM115 - the worker writes to it until stopped
        process = subprocess.Popen(
            [sys.executable, str(LAUNCHER), *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        process.log_path = self.tmp_path / f"{name}.log"
        self.processes.append(process)
        return process

    def start(self, *, run_delay=0, database_url=None, pool="solo"):
        """A worker; ``run_delay`` seconds are slept in each run it computes;
        ``database_url`` another way to the test database (a proxy); ``pool``
        ``prefork`` for a main process apart from the one computing (one
        child), as in production."""
        name = f"{self.queue}-{len(self.names)}@test"
        self.names.append(name)
        return self._spawn(
            f"worker-{len(self.names) - 1}",
            [
                "worker",
                "--pool",
                pool,
                *(["--concurrency", "1"] if pool == "prefork" else []),
                "-n",
                name,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "info",
                "-Q",
                self.queue,
            ],
            run_delay,
            database_url,
        )

    def start_beat(self):
        """The scheduler of the recovery sweep, as in production."""
        return self._spawn("beat", ["beat", "-l", "info", "--schedule", str(self.tmp_path / "beat-schedule")], 0)

    def wait_ready(self, process, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in process.log_path.read_text():
                return
            time.sleep(0.1)
        pytest.fail(f"worker not ready after {timeout} s:\n{self.logs()}")

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=3)  # a worker in a slowed run would wait for it
            except subprocess.TimeoutExpired:
                process.kill()

    def logs(self):
        return "\n".join(f"--- {path.name}\n{path.read_text()}" for path in sorted(self.tmp_path.glob("*.log")))

    def forget(self):
        """Remove what the pool left in Redis: its queue, the unacknowledged
        message of a killed worker, the workers' heartbeats."""
        client = redis.Redis.from_url(self.redis_url)
        # The queue and its priority lists (engine.services: resends go first).
        client.delete(self.queue, f"_kombu.binding.{self.queue}", *(f"{self.queue}\x06\x16{p}" for p in (3, 6, 9)))
        for tag, entry in client.hgetall("unacked").items():
            if json.loads(entry)[-1] == self.queue:
                client.hdel("unacked", tag)
                client.zrem("unacked_index", tag)
        if self.names:
            client.zrem(health.WORKERS_KEY, *self.names)
            client.zrem(health.NO_DATABASE_KEY, *self.names)


@pytest.fixture
def workers(tmp_path, monkeypatch):
    pool = Workers(tmp_path)

    # Launches from this test go to the pool's private queue: the same
    # Celery task and Redis transport, another routing key.
    # (To the pool's Redis, which a test may start of its own.)
    def send(run_id, priority=engine_services.LAUNCH_PRIORITY):
        with celery_app.connection_for_write(pool.redis_url) as broker:
            execute_run.apply_async((run_id,), queue=pool.queue, priority=priority, connection=broker)

    monkeypatch.setattr(engine_services, "_send", send)
    yield pool
    pool.stop()
    pool.forget()


@pytest.fixture
def closed_study():
    return study_import_bundle(bundle=json.loads(CASE_STUDY.read_text()))


def wait_for(run, statuses, timeout, workers):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in statuses:
            return run
        time.sleep(0.1)
    pytest.fail(f"run {run.pk} still {run.status} after {timeout} s; worker logs:\n{workers.logs()}")


def test_worker_takes_run_from_redis_and_results_land_in_postgresql(workers, closed_study):
    assert connection.vendor == "postgresql"
    workers.start()
    run = run_launch(study=closed_study, launched_by=closed_study.designer)

    wait_for(run, {Run.Status.SUCCEEDED, Run.Status.FAILED}, 60, workers)

    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.attempts == 1
    # Read back from PostgreSQL by a fresh query, not from the task's memory.
    stored = Run.objects.get(pk=run.pk).results
    assert stored["metric_weights"] == pytest.approx([0.5295, 0.2273, 0.2432], abs=5e-5)
    assert stored["expert_influence"] == pytest.approx([0.3681, 0.2454, 0.1718, 0.2147], abs=5e-5)
    assert [(c["name"], c["rank"]) for c in stored["candidates"]] == [
        ("JRip", 1),
        ("J48", 2),
        ("IBk", 3),
        ("RandomForest", 3),
    ]
    assert "engine.tasks.execute_run" in workers.logs()


def test_a_dead_workers_run_is_taken_over_within_a_minute(workers, closed_study):
    # The product's own timings (lease, heartbeat, sweep): this measures what
    # a deployment gets. Only the first worker's runs are slowed, so that it
    # can be killed mid-run.
    # No beat: every worker sweeps from its own thread.
    lease = settings.ENGINE_RUN_LEASE_SECONDS
    first = workers.start(run_delay=600)
    run = run_launch(study=closed_study, launched_by=closed_study.designer)
    wait_for(run, {Run.Status.RUNNING}, 60, workers)

    # The live worker renews its lease while the run computes.
    time.sleep(settings.ENGINE_RUN_HEARTBEAT_SECONDS + 1.5)
    run.refresh_from_db()
    assert run.lease_expires_at > run.started_at + timedelta(seconds=lease)
    second = workers.start()
    workers.wait_ready(second)

    first.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    first.wait(timeout=10)
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.results is None  # mid-run, nothing stored

    wait_for(run, {Run.Status.SUCCEEDED, Run.Status.FAILED}, 90, workers)
    takeover = time.monotonic() - killed
    print(
        f"\ntakeover: run {run.pk} finished by the second worker {takeover:.1f} s after the first was killed "
        f"(lease {lease} s, heartbeat {settings.ENGINE_RUN_HEARTBEAT_SECONDS} s, "
        f"sweep {settings.ENGINE_RECOVERY_SWEEP_SECONDS} s)"
    )

    assert run.status == Run.Status.SUCCEEDED, run.error
    assert takeover < 60, workers.logs()
    assert run.attempts == 2
    assert run.results["metric_weights"] == pytest.approx([0.5295, 0.2273, 0.2432], abs=5e-5)
    assert [(c["name"], c["rank"]) for c in run.results["candidates"]] == [
        ("JRip", 1),
        ("J48", 2),
        ("IBk", 3),
        ("RandomForest", 3),
    ]
    # Handed back by the second worker's sweep, computed once more by it only.
    assert "recovery sweep handed back runs" in second.log_path.read_text()
    # Celery logs the task's end after the run's status is committed: give
    # the line a few seconds to reach the log (a loaded machine lags).
    deadline = time.monotonic() + 15
    while "succeeded in" not in second.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert second.log_path.read_text().count("succeeded in") >= 1


def test_health_reports_live_workers_and_their_absence(workers, client):
    worker = workers.start()
    workers.wait_ready(worker)
    deadline = time.monotonic() + 10
    while (answer := client.get("/health/")).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    report = answer.json()
    assert answer.status_code == 200, report
    assert report["status"] == "ok" and report["failing"] == []
    assert report["checks"]["broker"] == {"status": "ok"}
    assert report["checks"]["workers"]["status"] == "ok" and report["checks"]["workers"]["live"] >= 1
    assert report["checks"]["workers"]["last_seen_seconds"] < 3 * settings.ENGINE_WORKER_HEARTBEAT_SECONDS

    workers.stop()  # a clean shutdown removes the worker's heartbeat at once
    answer = client.get("/health/")
    assert answer.status_code == 503
    assert answer.json()["failing"] == ["workers"]
    assert answer.json()["checks"]["workers"] == {"status": "none", "live": 0}


def test_two_launches_at_once_give_two_independent_runs(workers, closed_study):
    workers.start()
    workers.start()
    launched, errors = [], []

    def launch():
        try:
            launched.append(run_launch(study=closed_study, launched_by=closed_study.designer).pk)
        except Exception as error:  # surfaced below; a thread cannot fail the test itself
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=launch) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    assert len(set(launched)) == 2
    runs = [wait_for(Run.objects.get(pk=pk), {Run.Status.SUCCEEDED, Run.Status.FAILED}, 60, workers) for pk in launched]
    assert [r.status for r in runs] == [Run.Status.SUCCEEDED] * 2
    assert [r.attempts for r in runs] == [1, 1]
    assert runs[0].results == runs[1].results
    assert runs[0].snapshot == runs[1].snapshot


def test_each_run_computes_the_inputs_of_its_launch_whoever_takes_its_snapshot(workers, closed_study):
    # Issue 17, finding 6: a launch reads no inputs. The first run's snapshot
    # is taken by the change that follows it (before it writes), the
    # second's by the worker that claims it.
    from engine.snapshot import study_snapshot
    from workspace import services as workspace

    first = run_launch(study=closed_study, launched_by=closed_study.designer)
    at_first = study_snapshot(study=closed_study)
    assert Run.objects.get(pk=first.pk).snapshot is None
    workspace.measurements_set(
        study=closed_study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.5}]
    )
    second = run_launch(study=closed_study, launched_by=closed_study.designer)
    at_second = study_snapshot(study=closed_study)
    assert Run.objects.get(pk=second.pk).snapshot is None
    assert at_first["measurements"][0][0] != 0.5 == at_second["measurements"][0][0]
    workers.start()
    runs = [wait_for(run, {Run.Status.SUCCEEDED, Run.Status.FAILED}, 60, workers) for run in (first, second)]
    assert [run.status for run in runs] == [Run.Status.SUCCEEDED] * 2
    assert runs[0].snapshot == at_first and runs[1].snapshot == at_second
    assert runs[0].results == engine_services.evaluate_snapshot(at_first)
    assert runs[1].results == engine_services.evaluate_snapshot(at_second) != runs[0].results


def test_run_with_invalid_inputs_fails_with_a_readable_error(workers, closed_study):
    # Launch refuses a study with missing inputs, so the invalid input is
    # put into the queued run's snapshot before any worker sees it.
    run = run_launch(study=closed_study, launched_by=closed_study.designer)
    snapshot = engine_services.run_snapshot_take(run_id=run.pk)  # as its worker would take it
    snapshot["peer_weights"][0] = [0.8, 0.0, 0.1, 0.1]
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    workers.start()

    wait_for(run, {Run.Status.SUCCEEDED, Run.Status.FAILED}, 60, workers)

    assert run.status == Run.Status.FAILED
    assert run.results is None
    assert "statistician's peer weight for informatician is 0" in run.error


def test_run_validation_command_goes_through_the_worker_and_waits(workers, closed_study):
    import io

    from django.core.management import call_command

    workers.start()
    output = io.StringIO()
    call_command("run_validation", str(closed_study.pk), "--json", "--timeout", "60", stdout=output)

    document = json.loads(output.getvalue())
    run = Run.objects.get(pk=document["run"])
    assert run.status == Run.Status.SUCCEEDED and run.attempts == 1
    assert "engine.tasks.execute_run[" in workers.logs()  # the worker, not this process, ran it
    assert document["format"] == "approve-results/1"
    assert document["metric_weights"]["Success rate"] == pytest.approx(0.5295, abs=5e-5)
    assert [c["name"] for c in document["candidates"]] == ["JRip", "J48", "IBk", "RandomForest"]


# --- issue 17, item 7: one link fails ------------------------------------------------


class PostgresProxy:
    """A TCP proxy between workers and PostgreSQL that the test can cut: it
    then closes every connection through it and black-holes new ones
    (accepted, never answered), as a link that drops packets does to a
    connection attempt. Or stall: every connection stays open and what is
    sent is acknowledged (read) but never answered, the new ones too, as a
    frozen server or a hung middlebox does (no libpq timeout ends a query
    then)."""

    def __init__(self):
        database = settings.DATABASES["default"]
        self.target = (database["HOST"] or "127.0.0.1", int(database["PORT"] or 5432))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut_off = threading.Event()
        self.stalled = threading.Event()
        self.sockets = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self):
        database = settings.DATABASES["default"]
        password = f":{database['PASSWORD']}" if database["PASSWORD"] else ""
        return f"postgres://{database['USER']}{password}@127.0.0.1:{self.port}/{database['NAME']}"

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.sockets.append(client)
            if self.cut_off.is_set() or self.stalled.is_set():
                continue  # held open, never answered
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets.append(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source, sink):
        try:
            while data := source.recv(65536):
                if self.cut_off.is_set():
                    break
                if self.stalled.is_set():
                    continue  # read, so acknowledged, and never passed on
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def stall(self):
        self.stalled.set()

    def cut(self):
        self.cut_off.set()
        with self.lock:
            established, self.sockets = self.sockets, []
        for end in established:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def close(self):
        self.cut()
        self.listener.close()


def _health(client):
    return client.get("/health/").json()["checks"]["workers"]


def test_a_worker_cut_off_from_the_database_is_taken_over_within_a_minute(workers, closed_study, client):
    # Issue 17, item 7: cutting only a worker's PostgreSQL port stalled runs
    # for 158-174 s (its idle process took the re-sent message and hung in a
    # connect without a timeout). Two workers behind the proxy (the cut
    # machine: one runs the run, the other is idle), one direct; the
    # product's own timings.
    proxy = PostgresProxy()
    try:
        behind = [workers.start(run_delay=600, database_url=proxy.url()) for _ in range(2)]
        for worker in behind:
            workers.wait_ready(worker)
        run = run_launch(study=closed_study, launched_by=closed_study.designer)
        direct = workers.start()  # ready seconds after one behind the proxy took the run
        wait_for(run, {Run.Status.RUNNING}, 60, workers)
        workers.wait_ready(direct)

        proxy.cut()
        cut = time.monotonic()
        # /health/ names the workers that cannot reach the database.
        reported = None
        while time.monotonic() - cut < 3 * settings.ENGINE_WORKER_HEARTBEAT_SECONDS:
            reported = _health(client)
            if reported.get("database_unreachable", 0) >= 2:
                break
            time.sleep(1)
        seen_after = time.monotonic() - cut
        assert reported["status"] == "degraded" and reported["database_unreachable"] >= 2, reported
        assert client.get("/health/").status_code == 503

        wait_for(run, {Run.Status.SUCCEEDED, Run.Status.FAILED}, 75, workers)
        takeover = time.monotonic() - cut
        print(
            f"\ndatabase cut: health reported it after {seen_after:.1f} s; run {run.pk} finished by the direct "
            f"worker {takeover:.1f} s after the cut"
        )
        assert run.status == Run.Status.SUCCEEDED, run.error
        assert takeover < 60, workers.logs()
        assert run.attempts == 2
        assert run.results["metric_weights"] == pytest.approx([0.5295, 0.2273, 0.2432], abs=5e-5)
        assert "recovery sweep handed back runs" in direct.log_path.read_text()
        assert all(worker.poll() is None for worker in (*behind, direct))  # nobody died
        for worker in behind:
            assert "succeeded in" not in worker.log_path.read_text()
    finally:
        proxy.close()


def test_a_worker_whose_database_link_stalls_keeps_beating_and_health_says_it_is_cut_off(workers, client):
    # Issue 29, finding 11: a worker whose PostgreSQL link stopped answering
    # only dropped out of the live workers (its heartbeat waited on SELECT 1
    # for ever), so /health/ stayed "ok" on the other workers. Behind the
    # stalled link a prefork worker, as in production; one direct.
    proxy = PostgresProxy()
    try:
        behind = workers.start(database_url=proxy.url(), pool="prefork")
        direct = workers.start()
        for worker in (behind, direct):
            workers.wait_ready(worker)
        deadline = time.monotonic() + 3 * settings.ENGINE_WORKER_HEARTBEAT_SECONDS
        while _health(client).get("live", 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _health(client) | {"last_seen_seconds": 0} == {"status": "ok", "live": 2, "last_seen_seconds": 0}

        proxy.stall()
        stalled = time.monotonic()
        # Reported within a beat and a check (plus the probe's patience), and
        # it stays so: the stalled worker keeps beating.
        reports = []
        while time.monotonic() - stalled < 4 * settings.ENGINE_WORKER_HEARTBEAT_SECONDS:
            reports.append((time.monotonic() - stalled, _health(client)))
            time.sleep(1)
        seen = [at for at, report in reports if report.get("database_unreachable") == 1]
        assert seen, reports
        print(f"\ndatabase link stalled: health reported it after {seen[0]:.1f} s")
        assert seen[0] < 2.5 * settings.ENGINE_WORKER_HEARTBEAT_SECONDS, reports
        after = [report for at, report in reports if at >= seen[0]]
        assert all(
            {key: report.get(key) for key in ("status", "live", "database_unreachable")}
            == {"status": "degraded", "live": 2, "database_unreachable": 1}
            for report in after
        ), after
        assert client.get("/health/").status_code == 503
        assert behind.poll() is None
    finally:
        proxy.close()


@pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server to start a Redis of its own")
def test_a_worker_survives_redis_restarted_mid_run_and_the_run_completes(workers, closed_study, tmp_path):
    # Issue 17, item 7: stopping Redis for a while mid-run made the worker
    # exit ("Unrecoverable error: ConnectionError"). A Redis of this test's
    # own (the machine's is shared), stopped mid-run and started again.
    port = free_port()
    server = redis_server(port, tmp_path)
    workers.redis_url = f"redis://127.0.0.1:{port}/0"
    try:
        # Prefork, as in production: its main process sees the connection
        # drop while its child computes (a solo worker would only notice
        # after the run).
        worker = workers.start(run_delay=4, pool="prefork")
        workers.wait_ready(worker)
        run = run_launch(study=closed_study, launched_by=closed_study.designer)
        wait_for(run, {Run.Status.RUNNING}, 60, workers)

        # Redis goes away mid-run and stays away past the run's end.
        server.terminate()
        server.wait(timeout=10)
        wait_for(run, {Run.Status.SUCCEEDED, Run.Status.FAILED}, 30, workers)
        assert run.status == Run.Status.SUCCEEDED, run.error
        assert run.attempts == 1  # computed once, by the worker that held it through the outage
        assert run.results["metric_weights"] == pytest.approx([0.5295, 0.2273, 0.2432], abs=5e-5)
        time.sleep(3)
        assert worker.poll() is None, workers.logs()
        server = redis_server(port, tmp_path)
        time.sleep(2)
        assert worker.poll() is None, workers.logs()
        log = worker.log_path.read_text()
        assert "Unrecoverable error" not in log
        assert "succeeded in" in log

        # And it takes the next run over the new connection.
        second = run_launch(study=closed_study, launched_by=closed_study.designer)
        back = time.monotonic()
        wait_for(second, {Run.Status.SUCCEEDED, Run.Status.FAILED}, 60, workers)
        print(f"\nredis restarted: the next run finished {time.monotonic() - back:.1f} s after Redis came back")
        assert second.status == Run.Status.SUCCEEDED
    finally:
        workers.stop()
        server.terminate()
        server.wait(timeout=10)
        workers.redis_url = settings.REDIS_URL  # what is left to forget is in the shared one
