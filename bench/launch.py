"""Benchmark of launching validation runs at the limits (not a test): issue 17, item 6.

Builds (once, fixed seed) a closed study of 200 experts x 50 metrics x 1,000
candidates, the largest launch the limits allow in experts and candidates,
and measures on the PostgreSQL database named by ``DATABASE_URL``:

* the parts of one launch: reading the study's inputs (``study_snapshot``),
  checking them (``snapshot_arrays``), encoding the snapshot as JSON, and the
  whole ``run_launch`` (best of 5, each committed);
* ``CONCURRENT`` launches of that study at once, from as many processes
  (each with its own database connection, as gunicorn's workers have; threads
  would measure Python's GIL): the time each took to return (wall) and the
  CPU time its process spent in it, median and maximum, in three rounds side
  by side: every launch building its snapshot (the path before issue 17's
  finding 6, forced by disabling the copy), right after a change of the
  inputs (one launch builds, the others wait for it and copy its snapshot in
  the database), and with no change since the last launch (all copy).
  Issue 17: 20 at once answered after up to 14.4 s, median 6.2 s; the goal
  is well under a second each.

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


def launch(study, designer):
    from engine import services

    return services.run_launch(study=study, launched_by=designer)


def forced_build(function):
    """``function`` with the copy of an earlier run's snapshot disabled, and
    the builds' advisory lock with it: every launch reads, checks and stores
    its own, side by side (the path before the copy)."""
    from engine import services

    copying, serialising = services._launch_copying, services._serialise_builds
    services._launch_copying, services._serialise_builds = (lambda *args: None), (lambda study: None)
    try:
        return function()
    finally:
        services._launch_copying, services._serialise_builds = copying, serialising


def concurrent(study, designer, *, build, change):
    """``CONCURRENT`` launches at once from as many processes: each one's wall
    and CPU seconds, and the errors. ``change`` bumps the study's input
    version first (as any change of its inputs does), so no run can be copied
    until one launch has built a snapshot; ``build`` forces every launch to
    build its own."""
    from django.db import connection, transaction

    from workspace.services import inputs_changed

    if change:
        with transaction.atomic():
            inputs_changed(studies=[study.pk])
    connection.close()  # each forked process opens its own
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(CONCURRENT), context.Queue()

    def one():
        try:
            barrier.wait()
            started, cpu = time.perf_counter(), time.process_time()
            if build:
                forced_build(lambda: launch(study, designer))
            else:
                launch(study, designer)
            results.put((time.perf_counter() - started, time.process_time() - cpu))
        except Exception as error:  # reported below
            results.put(repr(error))
        finally:
            connection.close()

    processes = [context.Process(target=one) for _ in range(CONCURRENT)]
    for process in processes:
        process.start()
    answers = [results.get(timeout=600) for _ in processes]
    for process in processes:
        process.join()
    times = [a for a in answers if isinstance(a, tuple)]
    return [t[0] for t in times], [t[1] for t in times], [a for a in answers if not isinstance(a, tuple)]


def run(study_id, keep):
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
            "run_launch (build)": best_of(lambda: forced_build(lambda: launch(study, designer))),
            "run_launch (copy)": best_of(lambda: launch(study, designer)),
        }
        size = len(json.dumps(snapshot))
        rounds = {
            "building each (before)": concurrent(study, designer, build=True, change=True),
            "after a change": concurrent(study, designer, build=False, change=True),
            "no change since": concurrent(study, designer, build=False, change=False),
        }
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
    building = rounds["building each (before)"][0]
    for label, (wall, cpu, errors) in rounds.items():
        ratio = statistics.median(building) / statistics.median(wall) if wall else float("nan")
        if errors:
            print(f"  {len(errors)} concurrent launches failed: {errors[0]}")
            continue
        print(
            f"  {CONCURRENT} at once, {label:<23} wall median {statistics.median(wall) * 1000:6.0f} ms, "
            f"max {max(wall) * 1000:6.0f} ms; CPU median {statistics.median(cpu) * 1000:5.0f} ms, "
            f"max {max(cpu) * 1000:5.0f} ms; before/this: median {ratio:5.1f}x, "
            f"max {max(building) / max(wall):5.1f}x"
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
