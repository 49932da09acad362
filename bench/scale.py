"""Benchmark of the database side at scale (not a test): issue 7, items 6 and 8.

Builds a closed study of 100 experts x 20 metrics x 1,000 candidates as an
``approve-study/1`` bundle (fixed seed) and measures, on the database named by
``DATABASE_URL``:

* ``import_study`` of the bundle;
* ``export_study`` of the imported study;
* ``run_validation --json`` (launch, execute, print the results document);
* ``GET /api/v1/runs/{run}/results/`` and ``GET /api/v1/runs/{run}/`` through
  ``django.test.Client``;

each with wall time, this process's CPU time, number of SQL queries, bytes written or served, and the
peak of Python's heap (tracemalloc, measured in a second pass so that tracing
does not slow the timed one), then the ratio of each figure to its target
(issue 7: ``run_validation --json`` under 2 s with a document under 5 MB,
``GET results`` under 200 ms, ``import_study`` under 3 s).

How to run it, from the repository root, on a PostgreSQL database of your own::

    createdb -h 127.0.0.1 -U postgres approve_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/approve_bench
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/scale.py --save /tmp/after.json

With ``REDIS_URL`` unset, Celery is eager and ``run_validation`` runs the
engine in this process. With ``REDIS_URL`` set, start a worker first
(``OPENBLAS_NUM_THREADS=1 .venv/bin/celery -A approve_site worker -c 1``
with the same ``DATABASE_URL`` and ``REDIS_URL``): ``run_validation`` then
waits for it, which is the end-to-end figure.

``--root DIR`` benchmarks another checkout's code with this script (e.g. the
code before a change); ``--compare FILE`` prints a saved run's figures next to
this one's with the ratio after/before. Every study the benchmark imports is
deleted at the end unless ``--keep`` is given.
"""

import argparse
import io
import json
import os
import pathlib
import random
import secrets
import sys
import time
import tracemalloc
import warnings

# Single-threaded BLAS, as in the workers and web processes: set before numpy
# is first imported (by the engine), which reads these once.
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

SEED = 20250107
EXPERTS, ATTRIBUTES, METRICS_PER_ATTRIBUTE, CANDIDATES = 100, 5, 4, 1000
TARGETS = {
    ("import_study", "seconds"): 3.0,
    ("run_validation --json", "seconds"): 2.0,
    ("run_validation --json", "bytes"): 5_000_000,
    ("GET results", "seconds"): 0.2,
}


def scale_bundle(seed=SEED):
    """The closed 100 x 20 x 1,000 study. Ranges are drawn so that about a
    third of the candidates are vetoed, each by a handful of experts."""
    rng = random.Random(seed)
    experts = [f"expert{i:03d}" for i in range(EXPERTS)]
    attributes = [f"Attribute {a}" for a in range(ATTRIBUTES)]
    metrics = []
    for a, attribute in enumerate(attributes):
        for j in range(METRICS_PER_ATTRIBUTE):
            better = "higher" if (a + j) % 2 == 0 else "lower"
            default = [0.1, 0.9] if better == "higher" else [0.9, 0.1]
            metrics.append(
                {
                    "name": f"metric {a}.{j}",
                    "attribute": attribute,
                    "better": better,
                    "unit": "",
                    "default_range": default,
                }
            )

    def expert_range(better):
        least, desired = rng.uniform(0.0, 0.1), rng.uniform(0.8, 1.0)
        return [least, desired] if better == "higher" else [1 - least, 1 - desired]

    def distribution(names):
        raw = [rng.uniform(0.2, 1.0) for _ in names]
        return {name: value / sum(raw) for name, value in zip(names, raw, strict=True)}

    return {
        "format": "approve-study/1",
        "title": f"Scale benchmark {EXPERTS}x{len(metrics)}x{CANDIDATES}",
        "description": "bench/scale.py",
        "phase": "closed",
        "attribute_threshold": 1,
        "metric_threshold": 0,
        "designer": "bench-designer",
        "experts": experts,
        "attributes": [{"name": name, "kind": "main", "description": ""} for name in attributes],
        "metrics": metrics,
        "candidates": [
            {
                "name": f"candidate {c:04d}",
                "description": "",
                "measurements": {
                    m["name"]: (v if m["better"] == "higher" else 1 - v)
                    for m, v in ((m, rng.uniform(0.08, 1.0)) for m in metrics)
                },
            }
            for c in range(CANDIDATES)
        ],
        "votes": {"attributes": {}, "metrics": {}},
        "priorities": {e: {"method": "direct", "weights": distribution(attributes)} for e in experts},
        "ranges": {e: {m["name"]: expert_range(m["better"]) for m in metrics} for e in experts},
        "peer_weights": {e: distribution(experts) for e in experts},
    }


def setup_django(root):
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")
    # DEBUG off: with it on, Django keeps every query's SQL in memory, which
    # would distort both the time and the memory measured.
    os.environ.setdefault("DEBUG", "false")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(60))
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("DATABASE_URL must name a PostgreSQL database (see the docstring)")
    sys.path.insert(0, str(root))
    os.chdir(root)
    import django

    django.setup()


class Counter:
    """Counts SQL statements (an execute wrapper: no SQL is kept)."""

    def __init__(self):
        self.queries = 0

    def __call__(self, execute, sql, params, many, context):
        self.queries += 1
        return execute(sql, params, many, context)


def measure(label, step, memory=True):
    """Run ``step`` (which returns the bytes it produced) timed and counted,
    then once more under tracemalloc for its peak heap."""
    from django.db import connection

    counter = Counter()
    with connection.execute_wrapper(counter):
        started, cpu = time.perf_counter(), time.process_time()
        size = step()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = None
    if memory:
        tracemalloc.start()
        step()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return {
        "step": label,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "queries": counter.queries,
        "bytes": size,
        "peak_bytes": peak,
    }


def run(root, keep):
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment

    from engine.models import Run
    from workspace.models import Study

    warnings.filterwarnings("ignore", message="No directory at")  # no collectstatic needed here
    setup_test_environment()  # lets the test client through ALLOWED_HOSTS
    bundle_text = json.dumps(scale_bundle())
    path = pathlib.Path(f"/tmp/approve-scale-bundle-{os.getpid()}.json")
    path.write_text(bundle_text, encoding="utf-8")
    imported = []
    rows = []
    try:

        def import_step():
            out = io.StringIO()
            call_command("import_study", str(path), stdout=out)
            imported.append(int(out.getvalue()))
            return len(bundle_text.encode())

        rows.append(measure("import_study", import_step))
        study = Study.objects.select_related("designer").get(pk=imported[0])

        def export_step():
            out = io.StringIO()
            call_command("export_study", str(study.pk), stdout=out)
            return len(out.getvalue().encode())

        rows.append(measure("export_study", export_step))

        def validation_step():
            out = io.StringIO()
            call_command("run_validation", str(study.pk), "--json", stdout=out)
            return len(out.getvalue().encode())

        rows.append(measure("run_validation --json", validation_step))
        run_id = Run.objects.filter(study=study, status=Run.Status.SUCCEEDED).values_list("pk", flat=True).first()

        client = Client()
        client.force_login(study.designer)

        def get(url):
            def step():
                response = client.get(url, secure=True)  # DEBUG off redirects plain HTTP
                assert response.status_code == 200, (url, response.status_code)
                return len(response.content)

            return step

        results_url, detail_url = f"/api/v1/runs/{run_id}/results/", f"/api/v1/runs/{run_id}/"
        get(results_url)()  # warm: the first request imports and connects

        def best_of_5(label, url):
            return min((measure(label, get(url), memory=False) for _ in range(5)), key=lambda r: r["seconds"])

        best = best_of_5("GET results", results_url)
        best["peak_bytes"] = measure("GET results", get(results_url))["peak_bytes"]
        rows.append(best)
        rows.append(best_of_5("GET run detail", detail_url))
    finally:
        path.unlink(missing_ok=True)
        if not keep:
            Study.objects.filter(pk__in=imported).delete()
    mode = "eager (in-process)" if settings.CELERY_TASK_ALWAYS_EAGER else "Celery worker"
    # On a shared machine wall times swing with the load; cpu_seconds (this
    # process only, not PostgreSQL's) swings less.
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    return {"root": str(root), "mode": mode, "load": load, "rows": rows}


def _figure(value, unit):
    if value is None:
        return "-"
    if unit in ("seconds", "cpu_seconds"):
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
    if unit in ("bytes", "peak_bytes"):
        return f"{value / 1e6:.2f} MB" if value >= 1e5 else f"{value / 1e3:.1f} kB"
    return str(value)


def report(result, before=None):
    print(f"code: {result['root']}   run_validation: {result['mode']}   load average: {result['load']}")
    print(f"study: {EXPERTS} experts x {ATTRIBUTES * METRICS_PER_ATTRIBUTE} metrics x {CANDIDATES} candidates")
    header = f"{'step':<22} {'figure':<10} {'measured':>10} {'target':>10} {'/target':>8}"
    if before:
        header += f" {'before':>10} {'after/before':>13}"
    print(header)
    previous = {row["step"]: row for row in (before or {}).get("rows", [])}
    for row in result["rows"]:
        for unit in ("seconds", "cpu_seconds", "queries", "bytes", "peak_bytes"):
            target = TARGETS.get((row["step"], unit))
            line = f"{row['step']:<22} {unit:<10} {_figure(row[unit], unit):>10} "
            line += f"{_figure(target, unit) if target else '':>10} "
            line += f"{row[unit] / target:>8.3f}" if target and row[unit] is not None else f"{'':>8}"
            if unit not in row:  # saved by an older version of this script
                continue
            old = previous.get(row["step"], {}).get(unit)
            if before:
                ratio = f"{row[unit] / old:.4f}" if old and row[unit] is not None else ""
                line += f" {_figure(old, unit):>10} {ratio:>13}"
            print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root",
        type=pathlib.Path,
        default=pathlib.Path(__file__).resolve().parent.parent,
        help="checkout whose code is measured (default: this one)",
    )
    parser.add_argument("--save", type=pathlib.Path, help="write the figures as JSON here")
    parser.add_argument("--compare", type=pathlib.Path, help="figures saved by an earlier --save, shown alongside")
    parser.add_argument("--keep", action="store_true", help="keep the imported study")
    args = parser.parse_args()
    setup_django(args.root.resolve())
    result = run(args.root.resolve(), args.keep)
    before = json.loads(args.compare.read_text()) if args.compare else None
    report(result, before)
    if args.save:
        args.save.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
