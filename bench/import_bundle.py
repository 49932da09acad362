"""Benchmark of a bundle import by an outsider at every limit (not a test): issue 17, finding 2.

Builds an ``approve-study/1`` bundle at every size limit of ``workspace.limits``
(200 experts, 50 attributes, 200 metrics, 1,000 candidates and the bundle's
50,000 entries: measurements, the importer's votes, an AHP prioritisation of
every pair of attributes with local ones for each attribute's metrics, ranges
and peer weights) in the closed phase, as a signed-in user who is no member of
anything and not staff would send it: they are its designer and one of its
experts, the 199 others are invited. It then ``POST``s it to
``/api/v1/studies/import/`` through ``django.test.Client`` and reports wall
time, this process's CPU time, SQL statements and the peak of Python's heap
(tracemalloc, in a separate pass), and, with ``--concurrent N``, the wall time
of each of N imports sent at once from N threads (N users), against the
target (issue 17: under 2 s).

How to run it, from the repository root, on a PostgreSQL database of your own::

    createdb -h 127.0.0.1 -U postgres approve_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/approve_bench
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/import_bundle.py --save /tmp/after.json

``--root DIR`` measures another checkout's code with this script (e.g. the
code before a change, ``git archive <commit> | tar -x -C DIR``); ``--compare
FILE`` prints a saved run's figures next to this one's with the ratio
after/before. The imported studies and the users made for the benchmark are
deleted at the end. The import throttle is lifted for the benchmark (it
limits one user to a few imports a minute). Without ``REDIS_URL`` the tasks
the import enqueues (a notification for each invited expert) go to Celery's
in-memory broker and are not run, as with a broker in production: they ran
in the request before (eager), which made it 2.5x slower than any
production import (issue 33, finding 10).
"""

import argparse
import json
import os
import pathlib
import random
import secrets
import sys
import threading
import time
import tracemalloc
import warnings

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

SEED = 20261126
EXPERTS, ATTRIBUTES, METRICS_PER_ATTRIBUTE, CANDIDATES, ENTRIES = 200, 50, 4, 1000, 50_000
TARGET_SECONDS = 2.0


def pairs(names):
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]


def limits_bundle(importer, seed=SEED):
    """The closed study at every limit, imported by ``importer`` (its
    designer and first expert; the others are invited)."""
    rng = random.Random(seed)
    experts = [importer] + [f"bench-invitee{i:03d}" for i in range(EXPERTS - 1)]
    attributes = [f"Attribute {a:02d}" for a in range(ATTRIBUTES)]
    # The first five are main, the others complementary (voted for).
    kinds = ["main" if a < 5 else "complementary" for a in range(ATTRIBUTES)]
    metrics_of = {
        attribute: [f"metric {a:02d}.{j}" for j in range(METRICS_PER_ATTRIBUTE)]
        for a, attribute in enumerate(attributes)
    }
    metrics = [name for names in metrics_of.values() for name in names]
    scale = [1 / 9, 1 / 7, 1 / 5, 1 / 3, 1, 3, 5, 7, 9]

    def judgments(names):
        return [[a, b, rng.choice(scale)] for a, b in pairs(names)]

    priorities = {
        "method": "ahp",
        "judgments": judgments(attributes),
        "metric_priorities": {
            attribute: {"method": "ahp", "judgments": judgments(names)} for attribute, names in metrics_of.items()
        },
    }
    votes_attributes = [a for a, kind in zip(attributes, kinds, strict=True) if kind == "complementary"]
    # Metric j of an attribute: higher is better for even j, lower for odd.
    ranges = {name: [0.2, 0.8] if name[-1] in "02" else [0.8, 0.2] for name in metrics}
    others = (
        len(votes_attributes)
        + len(metrics)
        + len(priorities["judgments"])
        + sum(len(p["judgments"]) for p in priorities["metric_priorities"].values())
        + len(ranges)
        + 1  # the importer's peer weight of themselves: the only active expert
    )
    per_candidate = (ENTRIES - others) // CANDIDATES
    candidates = [
        {
            "name": f"Candidate {c:04d}",
            "description": f"configuration {c}",
            "measurements": {
                metrics[(c + k) % len(metrics)]: round(rng.uniform(0, 1), 4) for k in range(per_candidate)
            },
        }
        for c in range(CANDIDATES)
    ]
    return {
        "format": "approve-study/1",
        "title": f"Bench at every limit ({importer})",
        "description": "bench/import_bundle.py",
        "phase": "closed",
        "attribute_threshold": 1,
        "metric_threshold": 1,
        "designer": importer,
        "experts": experts,
        "attributes": [
            {"name": name, "kind": kind, "description": f"what {name} means"}
            for name, kind in zip(attributes, kinds, strict=True)
        ],
        "metrics": [
            {
                "name": name,
                "attribute": attribute,
                "better": "higher" if j % 2 == 0 else "lower",
                "unit": "",
                "default_range": [0.1, 0.9] if j % 2 == 0 else [0.9, 0.1],
            }
            for attribute, names in metrics_of.items()
            for j, name in enumerate(names)
        ],
        "candidates": candidates,
        "votes": {"attributes": {importer: votes_attributes}, "metrics": {importer: metrics}},
        "priorities": {importer: priorities},
        "ranges": {importer: ranges},
        "peer_weights": {importer: {importer: 1}},
    }


def setup_django(root):
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")
    os.environ.setdefault("DEBUG", "false")  # DEBUG keeps every query's SQL in memory
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(60))
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("DATABASE_URL must name a PostgreSQL database (see the docstring)")
    sys.path.insert(0, str(root))
    os.chdir(root)
    import django

    django.setup()
    from django.conf import settings

    # Lift the import throttle (if the measured code has one): the benchmark
    # imports several times as the same user.
    rates = settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {})
    if "import" in rates:
        rates["import"] = "100000/minute"
    # As a web process with a broker answers (issue 33, finding 10): the
    # tasks an import enqueues (the 199 invitations' notifications) go to
    # the broker, and a worker does them later. Without REDIS_URL they would
    # run in the request (eager), which no production request does: here
    # they go to Celery's in-memory broker and are not run.
    if settings.CELERY_TASK_ALWAYS_EAGER:
        from approve_site.celery import app

        app.conf.update(CELERY_TASK_ALWAYS_EAGER=False)  # the settings namespace (CELERY_) is what it reads
        print("tasks: enqueued to Celery's in-memory broker, not run (as a web process with a broker)")


class Counter:
    def __init__(self):
        self.queries = 0

    def __call__(self, execute, sql, params, many, context):
        self.queries += 1
        return execute(sql, params, many, context)


def import_once(user, body):
    """POST the bundle as ``user``; returns (seconds, status, study id)."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    started = time.perf_counter()
    response = client.post("/api/v1/studies/import/", body, content_type="application/json", secure=True)
    seconds = time.perf_counter() - started
    if response.status_code not in (201, 202):
        raise SystemExit(f"import answered {response.status_code}: {response.content[:500]!r}")
    return seconds, response.status_code, response.json()["id"] if response.status_code == 201 else None


def run(root, concurrent):
    from django.contrib.auth.models import User
    from django.db import connection, connections
    from django.test.utils import setup_test_environment

    from workspace.models import Study

    warnings.filterwarnings("ignore", message="No directory at")
    setup_test_environment()
    tag = secrets.token_hex(3)
    users = [User.objects.create_user(username=f"bench-outsider-{tag}-{i}") for i in range(max(concurrent, 1))]
    bodies = [json.dumps(limits_bundle(user.username)) for user in users]
    rows = []
    try:
        # Warm: the first request imports the URLconf and the views.
        from django.test import Client

        warm = Client()
        warm.force_login(users[0])
        warm.get("/api/v1/studies/", secure=True)
        counter = Counter()
        with connection.execute_wrapper(counter):
            started_cpu = time.process_time()
            seconds, status, _ = import_once(users[0], bodies[0])
            cpu = time.process_time() - started_cpu
        rows.append(
            {
                "step": "import, alone",
                "seconds": seconds,
                "cpu_seconds": cpu,
                "queries": counter.queries,
                "bytes": len(bodies[0].encode()),
                "status": status,
            }
        )
        Study.objects.filter(designer=users[0]).delete()
        tracemalloc.start()
        import_once(users[0], bodies[0])
        rows[-1]["peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        Study.objects.filter(designer=users[0]).delete()

        if concurrent > 1:
            times = [0.0] * concurrent
            barrier = threading.Barrier(concurrent)

            def worker(i):
                barrier.wait()
                try:
                    times[i] = import_once(users[i], bodies[i])[0]
                finally:
                    connections.close_all()

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrent)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            rows.append(
                {
                    "step": f"import, {concurrent} at once",
                    "seconds": max(times),
                    "median_seconds": sorted(times)[concurrent // 2],
                    "each": times,
                }
            )
    finally:
        Study.objects.filter(designer__in=users).delete()
        User.objects.filter(username__startswith="bench-invitee").delete()
        User.objects.filter(pk__in=[u.pk for u in users]).delete()
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    return {"root": str(root), "load": load, "rows": rows}


def _figure(value, unit):
    if value is None:
        return "-"
    if "seconds" in unit:
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
    if "bytes" in unit:
        return f"{value / 1e6:.2f} MB" if value >= 1e5 else f"{value / 1e3:.1f} kB"
    return str(value)


def report(result, before=None):
    print(f"code: {result['root']}   load average: {result['load']}")
    print(
        f"bundle: {EXPERTS} experts x {ATTRIBUTES} attributes x {ATTRIBUTES * METRICS_PER_ATTRIBUTE} metrics x "
        f"{CANDIDATES} candidates, {ENTRIES} entries, closed, imported by an outsider"
    )
    header = f"{'step':<22} {'figure':<15} {'measured':>10} {'target':>8} {'/target':>8}"
    if before:
        header += f" {'before':>10} {'after/before':>13}"
    print(header)
    previous = {row["step"]: row for row in (before or {}).get("rows", [])}
    for row in result["rows"]:
        for unit in ("status", "seconds", "median_seconds", "cpu_seconds", "queries", "bytes", "peak_bytes"):
            if unit not in row:
                continue
            target = TARGET_SECONDS if unit in ("seconds", "median_seconds") else None
            line = f"{row['step']:<22} {unit:<15} {_figure(row[unit], unit):>10} "
            line += f"{_figure(target, unit) if target else '':>8} "
            line += f"{row[unit] / target:>8.3f}" if target else f"{'':>8}"
            old = previous.get(row["step"], {}).get(unit)
            if before:
                ratio = f"{row[unit] / old:.4f}" if old and unit != "status" else ""
                line += f" {_figure(old, unit):>10} {ratio:>13}"
            print(line)
        if "each" in row:
            print(f"{'':<22} {'each':<15} " + ", ".join(_figure(t, "seconds") for t in sorted(row["each"])))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root",
        type=pathlib.Path,
        default=pathlib.Path(__file__).resolve().parent.parent,
        help="checkout whose code is measured (default: this one)",
    )
    parser.add_argument("--concurrent", type=int, default=8, help="imports sent at once (default 8; 1: none)")
    parser.add_argument("--save", type=pathlib.Path, help="write the figures as JSON here")
    parser.add_argument("--compare", type=pathlib.Path, help="figures saved by an earlier --save, shown alongside")
    args = parser.parse_args()
    setup_django(args.root.resolve())
    result = run(args.root.resolve(), args.concurrent)
    before = json.loads(args.compare.read_text()) if args.compare else None
    report(result, before)
    if args.save:
        args.save.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
