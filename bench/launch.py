"""Benchmark of launching validation runs at the limits (not a test): issue 17, item 6.

Builds (once, fixed seed) a closed study of 200 experts x 50 metrics x 1,000
candidates, the largest launch the limits allow in experts and candidates,
and measures on the PostgreSQL database named by ``DATABASE_URL``:

* the parts of one launch: reading the study's inputs (``study_snapshot``),
  checking them (``snapshot_arrays``), encoding the snapshot as JSON, and the
  whole ``run_launch`` (best of 5, each committed);
* ``CONCURRENT`` launches of that study at once, from as many processes
  (each with its own database connection, as gunicorn's workers have; threads
  would measure Python's GIL): the time each took to return, median and
  maximum (issue 17: 20 at once answered
  after up to 14.4 s, median 6.2 s; the goal is well under a second each).

Celery is eager without ``REDIS_URL``: the launch would then compute the run
in this process, so the task is not sent (``engine.services._send`` is
replaced by a no-op) and only the launch itself is measured.

    createdb -h 127.0.0.1 -U postgres approve_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/approve_bench
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/launch.py            # --keep keeps the study for the next time

``--study ID`` reuses a study kept by ``--keep``. Launched runs are deleted at
the end.
"""

import argparse
import json
import multiprocessing
import os
import pathlib
import statistics
import sys
import time

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scale  # noqa: E402  (the bundle generator, sized below)

EXPERTS, ATTRIBUTES, METRICS_PER_ATTRIBUTE, CANDIDATES = 200, 10, 5, 1000
CONCURRENT = 20


def build_study():
    from workspace.bundles import study_import_bundle

    scale.EXPERTS, scale.ATTRIBUTES = EXPERTS, ATTRIBUTES
    scale.METRICS_PER_ATTRIBUTE, scale.CANDIDATES = METRICS_PER_ATTRIBUTE, CANDIDATES
    bundle = scale.scale_bundle()
    bundle["title"] = f"Launch benchmark {EXPERTS}x{ATTRIBUTES * METRICS_PER_ATTRIBUTE}x{CANDIDATES}"
    started = time.perf_counter()
    study = study_import_bundle(bundle=bundle)  # the service: the API's entry limit is not in the way
    print(f"built study {study.pk} in {time.perf_counter() - started:.1f} s")
    return study


def best_of(function, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def run(study_id, keep):
    from django.db import connection

    from engine import services
    from engine.models import Run
    from engine.snapshot import snapshot_arrays, study_snapshot
    from workspace.models import Study

    services._send = lambda run_id, *priority: None  # measure the launch, not an eager run
    study = Study.objects.get(pk=study_id) if study_id else build_study()
    designer = study.designer
    before = set(Run.objects.filter(study=study).values_list("pk", flat=True))
    try:
        snapshot = study_snapshot(study=study)
        rows = {
            "study_snapshot": best_of(lambda: study_snapshot(study=study)),
            "snapshot_arrays": best_of(lambda: snapshot_arrays(snapshot)),
            "json.dumps": best_of(lambda: json.dumps(snapshot)),
            "run_launch": best_of(lambda: services.run_launch(study=study, launched_by=designer)),
        }
        size = len(json.dumps(snapshot))
        connection.close()  # each forked process opens its own
        context = multiprocessing.get_context("fork")
        barrier, results = context.Barrier(CONCURRENT), context.Queue()

        def launch():
            try:
                barrier.wait()
                started = time.perf_counter()
                services.run_launch(study=study, launched_by=designer)
                results.put(time.perf_counter() - started)
            except Exception as error:  # reported below
                results.put(repr(error))
            finally:
                connection.close()

        processes = [context.Process(target=launch) for _ in range(CONCURRENT)]
        for process in processes:
            process.start()
        answers = [results.get(timeout=600) for _ in processes]
        for process in processes:
            process.join()
        times = [a for a in answers if isinstance(a, float)]
        errors = [a for a in answers if not isinstance(a, float)]
    finally:
        Run.objects.filter(study=study).exclude(pk__in=before).delete()
        if not keep and not study_id:
            study.delete()
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"study {study.pk}: {EXPERTS} experts x {ATTRIBUTES * METRICS_PER_ATTRIBUTE} metrics x {CANDIDATES} candidates"
    )
    print(f"snapshot: {size / 1e6:.2f} MB of JSON; load average {load}; {os.cpu_count()} cores")
    for label, seconds in rows.items():
        print(f"  {label:<18} {seconds * 1000:8.0f} ms  (best of 5)")
    if errors:
        print(f"  {len(errors)} concurrent launches failed: {errors[0]}")
    times.sort()
    print(
        f"  {CONCURRENT} at once: median {statistics.median(times) * 1000:.0f} ms, "
        f"max {times[-1] * 1000:.0f} ms, min {times[0] * 1000:.0f} ms"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--study", type=int, help="a study kept by an earlier --keep")
    parser.add_argument("--keep", action="store_true", help="keep the study built")
    args = parser.parse_args()
    scale.setup_django(pathlib.Path(__file__).resolve().parent.parent)
    run(args.study, args.keep)


if __name__ == "__main__":
    main()
