"""Load benchmark: 50 concurrent clients on a study at the limits (not a
test): issue 29, finding 8 and item 5.

Imports bench/scale.py's closed study (100 experts x 20 metrics x 1,000
candidates, fixed seed) into the database named by ``DATABASE_URL``, runs it
once in this process, and gives each client its own expert (``expert000``
...), signed in for the pages (a session) and for the API (a token). It then
starts gunicorn as the Dockerfile does (``gunicorn.conf.py``, ``DEBUG=false``,
``WEB_CONCURRENCY`` and ``GUNICORN_THREADS`` as in the environment, else its
defaults) on a free port of 127.0.0.1, and drives ``--clients`` (50) clients,
each a thread that sends one request after another for ``--seconds`` (60),
in two phases:

* ``ordinary``: the study home page, the run page, a candidate's page, and
  the API's study, run, candidates list and one candidate's scores, in turn;
* ``mixed``: the same, but each client's every ``--every``-th (5th) request
  is the next page of the run's individual scores
  (``GET /api/v1/runs/{run}/results/?individual=true``, following ``Link``,
  starting again after the last page).

For each phase it prints the requests sent, the p50, p95 and largest time
of the ordinary requests and of the pages of individual scores (and the
p50 and p95 of each request), the largest
page's bytes, the 429s (the per-user throttle: counted, not errors) and the
errors (any other status but 200, a refused or dropped connection, a
timeout after 60 s), then the ratio of each p95 of ordinary requests to the
goal (1 s) and of the mixed phase's to the ordinary one's. Before this
change the whole 64 MB document was one answer: p50 7.4 s and p95 30.6 s for
everything with it in the mix, p95 5.6 s without (issue 29).

How to run it, from the repository root, on a PostgreSQL database of your
own (``collectstatic`` is run first, as a deployment does: DEBUG=false serves
the static files' manifest; Redis for the throttles' counters, shared by gunicorn's processes, is
optional: ``--redis redis://127.0.0.1:6379/15``; without it each process
counts on its own)::

    createdb -h 127.0.0.1 -U postgres approve_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/approve_bench
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/load.py

``--candidates N`` builds a smaller study (the same experts and metrics).
The study is deleted at the end unless ``--keep`` is given.
"""

import argparse
import http.client
import io
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scale  # noqa: E402  (bench/scale.py: the study's bundle and Django's set-up)

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOAL_P95_SECONDS = 1.0
TIMEOUT_SECONDS = 60.0
NEXT_LINK = re.compile(r'<([^>]+)>; rel="next"')


def build(candidates):
    """The study imported and run: (study, run, experts by username)."""
    from django.core.management import call_command

    from engine import services as engine_services
    from engine.models import Run
    from workspace.models import Study

    bundle = scale.scale_bundle()
    bundle["candidates"] = bundle["candidates"][:candidates]
    bundle["title"] = f"Load benchmark {scale.EXPERTS}x{len(bundle['metrics'])}x{candidates}"
    path = pathlib.Path(f"/tmp/approve-load-bundle-{os.getpid()}.json")
    path.write_text(json.dumps(bundle), encoding="utf-8")
    try:
        out = io.StringIO()
        call_command("import_study", str(path), stdout=out)
    finally:
        path.unlink(missing_ok=True)
    study = Study.objects.select_related("designer").get(pk=int(out.getvalue()))
    run = engine_services.run_launch(study=study, launched_by=study.designer)
    engine_services.run_execute(run_id=run.pk)
    run = Run.objects.get(pk=run.pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    return study, run


def credentials(study, count):
    """For ``count`` experts of the study: (session key, API token) each."""
    from django.conf import settings
    from django.test import Client

    from workspace import services

    people = []
    experts = study.memberships.filter(role="expert").select_related("user").order_by("user__username")
    for membership in experts[:count]:
        client = Client()
        client.force_login(membership.user)
        _, key = services.api_token_create(user=membership.user, name="bench/load.py")
        people.append((client.cookies[settings.SESSION_COOKIE_NAME].value, key))
    if len(people) < count:
        sys.exit(f"the study has {len(people)} experts, fewer than the {count} clients")
    return people


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_gunicorn(port, redis_url):
    env = {
        **os.environ,
        "DEBUG": "false",
        "SECURE_SSL_REDIRECT": "false",  # plain HTTP on the loopback, as behind a TLS proxy
        "ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "SECRET_KEY": os.environ["SECRET_KEY"],
    }
    env.pop("REDIS_URL", None)
    if redis_url:
        env["REDIS_URL"] = redis_url
    server = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "gunicorn"), "-c", "gunicorn.conf.py", "approve_site.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/health/")
            connection.getresponse().read()
            return server
        except OSError:
            if server.poll() is not None:
                sys.exit(f"gunicorn stopped: {server.stderr.read() if server.stderr else ''}")
            time.sleep(0.5)
    server.terminate()
    sys.exit("gunicorn did not answer /health/ within a minute")


class Client(threading.Thread):
    """One user sending requests back to back until ``stop`` is set."""

    def __init__(self, port, cookie, token, ordinary, individual_url, every, stop):
        from django.conf import settings

        super().__init__(daemon=True)
        self.port, self.ordinary, self.every, self.stop = port, ordinary, every, stop
        self.individual_url = self.next_page = individual_url
        self.cookie, self.token, self.cookie_name = cookie, token, settings.SESSION_COOKIE_NAME
        self.times = {"ordinary": [], "individual": []}
        self.throttled = 0
        self.by_path: dict[str, list[float]] = {}
        self.errors: list[str] = []
        self.largest_page = 0
        self.connection = None

    def request(self, path, api):
        headers = {"Authorization": f"Token {self.token}"} if api else {"Cookie": f"{self.cookie_name}={self.cookie}"}
        for attempt in (1, 2):  # a kept-alive connection the server closed is opened again once
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_SECONDS)
            try:
                self.connection.request("GET", path, headers=headers)
                response = self.connection.getresponse()
                return response.status, response.getheader("Link"), response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()
                self.connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def run(self):
        sent = 0
        while not self.stop.is_set():
            sent += 1
            individual = self.every and sent % self.every == 0
            if individual:
                path, api, kind = self.next_page, True, "individual"
            else:
                path, api = self.ordinary[sent % len(self.ordinary)]
                kind = "ordinary"
            started = time.perf_counter()
            try:
                status, link, body = self.request(path, api)
            except OSError as error:  # refused, reset, timed out
                self.errors.append(f"{path}: {type(error).__name__}")
                self.connection = None
                continue
            elapsed = time.perf_counter() - started
            if status == 429:
                self.throttled += 1
                continue
            if status != 200:
                self.errors.append(f"{path}: {status}")
                continue
            self.times[kind].append(elapsed)
            self.by_path.setdefault("individual scores page" if individual else path, []).append(elapsed)
            if individual:
                self.largest_page = max(self.largest_page, len(body))
                found = NEXT_LINK.fullmatch(link or "")
                self.next_page = (
                    urllib.parse.urlsplit(found.group(1))._replace(scheme="", netloc="").geturl()
                    if found
                    else self.individual_url
                )


def percentile(values, share):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def phase(name, port, people, ordinary, individual_url, every, seconds):
    stop = threading.Event()
    clients = [Client(port, cookie, token, ordinary, individual_url, every, stop) for cookie, token in people]
    for client in clients:
        client.start()
    time.sleep(seconds)
    stop.set()
    for client in clients:
        client.join(TIMEOUT_SECONDS + 5)
    result = {"phase": name}
    for kind in ("ordinary", "individual"):
        times = [t for client in clients for t in client.times[kind]]
        result[kind] = {
            "requests": len(times),
            "p50": percentile(times, 0.50),
            "p95": percentile(times, 0.95),
            "max": max(times) if times else None,
        }
    paths: dict[str, list[float]] = {}
    for client in clients:
        for path, times in client.by_path.items():
            paths.setdefault(path, []).extend(times)
    result["by_path"] = {
        path: {"requests": len(t), "p50": percentile(t, 0.5), "p95": percentile(t, 0.95)} for path, t in paths.items()
    }
    result["largest_page_bytes"] = max(client.largest_page for client in clients)
    result["throttled"] = sum(client.throttled for client in clients)
    errors = [error for client in clients for error in client.errors]
    result["errors"] = len(errors)
    result["error_examples"] = sorted(set(errors))[:5]
    return result


def _seconds(value):
    return "-" if value is None else (f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s")


def report(rows, setup):
    print(setup)
    print(f"{'phase':<9} {'requests':<11} {'count':>7} {'p50':>8} {'p95':>8} {'max':>8}")
    for row in rows:
        for kind in ("ordinary", "individual"):
            figures = row[kind]
            if not figures["requests"] and kind == "individual":
                continue
            print(
                f"{row['phase']:<9} {kind:<11} {figures['requests']:>7} {_seconds(figures['p50']):>8} "
                f"{_seconds(figures['p95']):>8} {_seconds(figures['max']):>8}"
            )
        print(
            f"{row['phase']:<9} largest page of individual scores {row['largest_page_bytes'] / 2**20:.2f} MiB, "
            f"429s {row['throttled']}, errors {row['errors']} {row['error_examples'] or ''}"
        )
    print(f"{'phase':<9} {'request':<60} {'count':>7} {'p50':>8} {'p95':>8}")
    for row in rows:
        for path, figures in sorted(row["by_path"].items()):
            print(
                f"{row['phase']:<9} {path[:60]:<60} {figures['requests']:>7} {_seconds(figures['p50']):>8} "
                f"{_seconds(figures['p95']):>8}"
            )
    for row in rows:
        p95 = row["ordinary"]["p95"]
        if p95 is not None:
            print(
                f"{row['phase']:<9} p95 of ordinary requests / goal ({GOAL_P95_SECONDS:.0f} s): "
                f"{p95 / GOAL_P95_SECONDS:.3f}"
            )
    if len(rows) == 2 and rows[0]["ordinary"]["p95"] and rows[1]["ordinary"]["p95"]:
        print(
            f"mixed / ordinary p95 of ordinary requests: {rows[1]['ordinary']['p95'] / rows[0]['ordinary']['p95']:.3f}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    parser.add_argument("--every", type=int, default=5, help="in the mixed phase, every n-th request is a page")
    parser.add_argument("--candidates", type=int, default=scale.CANDIDATES)
    parser.add_argument("--redis", default="", help="REDIS_URL for gunicorn (the throttles' counters)")
    parser.add_argument("--only", choices=("ordinary", "mixed"), help="one phase only")
    parser.add_argument("--save", type=pathlib.Path, help="write the figures as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the study")
    args = parser.parse_args()
    os.environ.pop("REDIS_URL", None)  # this process runs the study in-process (eager)
    scale.setup_django(ROOT)
    from django.conf import settings
    from django.core.management import call_command

    from workspace.models import Study

    study, run = build(args.candidates)
    try:
        people = credentials(study, args.clients)
        candidate = urllib.parse.quote(run.results["candidates"][0]["name"])
        ordinary = [
            (f"/studies/{study.pk}/", False),
            (f"/runs/{run.pk}/", False),
            (f"/runs/{run.pk}/candidates/{candidate}/", False),
            (f"/api/v1/studies/{study.pk}/", True),
            (f"/api/v1/runs/{run.pk}/", True),
            (f"/api/v1/studies/{study.pk}/candidates/", True),
            (f"/api/v1/runs/{run.pk}/candidates/{candidate}/scores/", True),
        ]
        individual_url = f"/api/v1/runs/{run.pk}/results/?individual=true"
        # DEBUG=false serves static files from the manifest collectstatic writes (STATIC_ROOT).
        call_command("collectstatic", interactive=False, verbosity=0)
        port = free_port()
        server = start_gunicorn(port, args.redis)
        try:
            rows = []
            for name, every in (("ordinary", 0), ("mixed", args.every)):
                if args.only in (None, name):
                    rows.append(phase(name, port, people, ordinary, individual_url, every, args.seconds))
        finally:
            server.terminate()  # gunicorn finishes the requests in flight (GUNICORN_GRACEFUL_TIMEOUT, 30 s)
            try:
                server.wait(45)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)
        load = " ".join(f"{value:.1f}" for value in os.getloadavg())
        setup = (
            f"study: {scale.EXPERTS} experts x {len(run.results['metrics'])} metrics x {args.candidates} candidates; "
            f"{args.clients} clients, {args.seconds:.0f} s a phase; gunicorn WEB_CONCURRENCY="
            f"{os.environ.get('WEB_CONCURRENCY', 'default')} "
            f"GUNICORN_THREADS={os.environ.get('GUNICORN_THREADS', 'default')}; "
            f"{os.cpu_count()} cores, load average {load}; "
            f"page limit {settings.RESULTS_INDIVIDUAL_PAGE_MAX_BYTES:,} bytes; "
            f"throttle cache {'Redis' if args.redis else 'per process'}"
        )
        report(rows, setup)
        if args.save:
            args.save.write_text(json.dumps({"setup": setup, "rows": rows}, indent=1))
    finally:
        if not args.keep:
            Study.objects.filter(pk=study.pk).delete()


if __name__ == "__main__":
    main()
