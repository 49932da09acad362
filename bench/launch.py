"""Benchmark of launching validation runs at the limits (not a test): issue 17, item 6.

Builds (once, fixed seed) a closed study of 200 experts x 50 metrics x 1,000
candidates, the largest launch the limits allow in experts and candidates,
and measures on the PostgreSQL database named by ``DATABASE_URL``:

* the parts of one launch and of the worker's work: reading the study's
  inputs (``study_snapshot``), checking them whole (``snapshot_arrays``),
  encoding the snapshot as JSON, checking them by counts in the database
  (``inputs_complete``, what a launch does now), the whole ``run_launch``
  right after a change and with no change since, and the worker taking the
  snapshot of a run launched after a change (``run_snapshot_take``) (best of
  5, each committed);
* ``CONCURRENT`` launches of that study at once, from as many processes
  (each with its own database connection, as gunicorn's workers have; threads
  would measure Python's GIL): the time each took to return (wall) and the
  CPU time its process spent in it, median and maximum, side by side: right
  after a change of the inputs with the launch of before (``previous_launch``
  below, the code before this change: one launch reads the inputs and stores
  the snapshot, the others wait for it and copy it) and with the launch of
  now (no launch reads them: the worker does), then with no change since the
  last launch (every launch copies a snapshot in the database, before and
  now). Issue 17: 20 at once answered after up to 14.4 s, median 6.2 s; the
  goal is well under a second each.

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
    from django.db import connection

    from workspace.bundles import study_import_bundle

    scale.EXPERTS, scale.ATTRIBUTES = EXPERTS, ATTRIBUTES
    scale.METRICS_PER_ATTRIBUTE, scale.CANDIDATES = METRICS_PER_ATTRIBUTE, CANDIDATES
    bundle = scale.scale_bundle()
    bundle["title"] = f"Launch benchmark {EXPERTS}x{ATTRIBUTES * METRICS_PER_ATTRIBUTE}x{CANDIDATES}"
    started = time.perf_counter()
    study = study_import_bundle(bundle=bundle)  # the service: the API's entry limit is not in the way
    print(f"built study {study.pk} in {time.perf_counter() - started:.1f} s")
    # The planner's statistics, as autovacuum gathers them after a bulk
    # import: without them a fresh database plans the launch's counts badly.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
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


def previous_launch(study, designer):
    """``run_launch`` as it was before the worker took the snapshot: under the
    same lock, copy the snapshot of a run at the study's version, else, one
    launch at a time, read, check and store the inputs."""
    from django.db import transaction
    from django.utils import timezone

    from engine import services
    from engine.models import Run
    from engine.snapshot import snapshot_arrays, study_snapshot

    with transaction.atomic():
        study = services._lock_for_launch(study)
        tolerance = services.core.DEFAULT_TOLERANCE
        run = services._launch_copying(study, designer, tolerance)
        if run is None:
            services._serialise_builds(study)
            run = services._launch_copying(study, designer, tolerance)
        if run is None:
            snapshot = study_snapshot(study=study, tolerance=tolerance)
            snapshot_arrays(snapshot)
            run = Run.objects.create(
                study=study,
                launched_by=designer,
                tolerance=tolerance,
                snapshot=snapshot,
                input_version=study.input_version,
                lease_expires_at=services.queue_lease(timezone.now()),
            )
        return run


def change(study):
    """A change of the study's inputs, as every change bumps its version; the
    runs waiting for their snapshot take it first (as their worker would
    have), so the rounds after it start alike."""
    from django.db import transaction

    from engine.models import Run
    from engine.services import run_snapshot_take
    from workspace.services import inputs_changed

    for run_id in Run.objects.filter(study=study, snapshot__isnull=True).values_list("pk", flat=True)[:1]:
        run_snapshot_take(run_id=run_id)
    with transaction.atomic():
        inputs_changed(studies=[study.pk])


def best_after_a_change(study, function, repeats=5):
    """Best time of ``function`` right after a change, the change untimed."""
    best = float("inf")
    for _ in range(repeats):
        change(study)
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def concurrent(study, designer, function):
    """``CONCURRENT`` calls of ``function(study, designer)`` at once from as
    many processes: each one's wall and CPU seconds, and the errors."""
    from django.db import connection

    connection.close()  # each forked process opens its own
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(CONCURRENT), context.Queue()

    def one():
        try:
            barrier.wait()
            started, cpu = time.perf_counter(), time.process_time()
            function(study, designer)
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


def best_worker_take(study, designer, repeats=5):
    """Best time of the worker taking the snapshot of a run launched right
    after a change (``run_snapshot_take``: lock, read, store)."""
    from engine import services

    best = float("inf")
    for _ in range(repeats):
        change(study)
        run = launch(study, designer)
        started = time.perf_counter()
        services.run_snapshot_take(run_id=run.pk)
        best = min(best, time.perf_counter() - started)
    return best


def run(study_id, keep):
    from engine import services
    from engine.models import Run
    from engine.snapshot import inputs_complete, snapshot_arrays, study_snapshot
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
            "inputs_complete": best_of(lambda: inputs_complete(study=study)),
            "run_launch before, after a change": best_after_a_change(study, lambda: previous_launch(study, designer)),
            "run_launch now, after a change": best_after_a_change(study, lambda: launch(study, designer)),
            "run_launch, no change (copy)": best_of(lambda: launch(study, designer)),
            "worker: run_snapshot_take": best_worker_take(study, designer),
        }
        size = len(json.dumps(snapshot))
        rounds = {}
        change(study)
        rounds["after a change, before"] = concurrent(study, designer, previous_launch)
        change(study)
        rounds["after a change, now"] = concurrent(study, designer, launch)
        change(study)
        launch(study, designer)
        rounds["no change since, before"] = concurrent(study, designer, previous_launch)
        rounds["no change since, now"] = concurrent(study, designer, launch)
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
        print(f"  {label:<34} {seconds * 1000:8.0f} ms  (best of 5)")
    for label, (wall, cpu, errors) in rounds.items():
        if errors:
            print(f"  {len(errors)} concurrent launches failed: {errors[0]}")
            continue
        print(
            f"  {CONCURRENT} at once, {label:<24} wall median {statistics.median(wall) * 1000:6.0f} ms, "
            f"max {max(wall) * 1000:6.0f} ms; CPU median {statistics.median(cpu) * 1000:5.0f} ms, "
            f"max {max(cpu) * 1000:5.0f} ms"
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
