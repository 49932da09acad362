"""Benchmark of a Monte Carlo analysis on real workers (not a test): issue 33,
item 2, "workers' CPU <= 1.2 x the same samples in one process, 2 workers
<= 0.6 x one worker's wall time".

On the PostgreSQL database of ``DATABASE_URL`` and the Redis of
``REDIS_URL``, it stores a succeeded run of bench/robustness.py's study
(100 experts x 20 metrics x 1,000 candidates, half the experts prioritising
by AHP with a 20 x 20 matrix, recorded in the snapshot as a launch records
it) and launches the same Monte Carlo analysis of the experts' side
(judgments and peer weights sampled, 20,000 samples by default, one seed)
through ``engine.analyses.analysis_launch``: first executed by one real
``celery worker`` (solo pool, BLAS single-threaded, as deployed), then by two,
in each configuration (``--configurations``): ``kept`` (as configured: each
worker keeps the run's inputs and prepared analysis between chunks, chunks
sized by the estimated work) and ``unkept`` (as before issue 33: nothing
kept, chunks of 500 samples), side by side in one run. Each first runs a
small warm-up analysis of another spec (every worker imports and loads what
it needs, and still reads and prepares the timed analysis itself), then the
timed one, from the launch to the stored result. It prints both wall times
and their ratio (goal: <= 0.6), the CPU time the workers used against the
same samples in this process, one ``monte_carlo_chunk`` call timed right
after (goal: <= 1.2), the load average around each (the machine is shared)
and checks that every merged result is the same counts. ``--rounds R``
repeats the pairs R times and reports the medians.

    createdb -h 127.0.0.1 -U postgres approve_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/approve_bench REDIS_URL=redis://127.0.0.1:6379/1
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/analysis_workers.py [--samples 20000] [--chunk N] [--rounds 1] [--configurations kept unkept]

``--chunk N`` caps the chunks of ``kept`` at N samples
(ENGINE_ANALYSIS_CHUNK_SAMPLES). The workers listen on a queue of their own;
the study, its run and analyses are deleted at the end.
"""

import argparse
import importlib.util
import os
import pathlib
import subprocess
import sys
import time
import uuid

import _blas  # noqa: F401  (single-threaded BLAS here and, by inheritance, in the workers)
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")

SEED = 20_261_126


def _robustness_bench():
    spec = importlib.util.spec_from_file_location("bench_robustness", ROOT / "bench" / "robustness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def snapshot_of(arrays, inputs, title):
    """A launch's snapshot (engine.snapshot layout) of the benchmark study:
    each metric its own attribute, the AHP experts' matrices recorded."""
    from engine.snapshot import SNAPSHOT_VERSION

    k, n = arrays["weights"].shape
    experts = [f"expert{i:03d}" for i in range(k)]
    attributes = [f"attribute{j:02d}" for j in range(n)]
    ahp = inputs.ahp_experts
    return {
        "version": SNAPSHOT_VERSION,
        "study": {"id": None, "title": title},
        "tolerance": 1e-9,
        "ahp_weighting": "column_means",
        "experts": experts,
        "attributes": attributes,
        "metrics": [
            {"name": f"metric{j:02d}", "attribute": attributes[j], "better": "higher", "unit": ""} for j in range(n)
        ],
        "attribute_weights": arrays["weights"].tolist(),
        "metric_weights": arrays["weights"].tolist(),
        "peer_weights": arrays["peer_weights"].tolist(),
        "lower": arrays["lower"].tolist(),
        "upper": arrays["upper"].tolist(),
        "candidates": [f"candidate{c:04d}" for c in range(len(arrays["measurements"]))],
        "measurements": arrays["measurements"].tolist(),
        "consistency": [],
        "attribute_methods": ["ahp" if flag else "direct" for flag in ahp],
        "attribute_judgments": [
            matrix.tolist() if flag else None for flag, matrix in zip(ahp, inputs.ahp_matrices, strict=True)
        ],
    }


def store_run(snapshot):
    """A study (the demo's, only to own the run) and a succeeded run of the snapshot."""
    import json

    from engine.models import Run
    from engine.results import evaluate_snapshot
    from workspace.bundles import study_import_bundle

    bundle = json.loads((ROOT / "workspace" / "demo" / "case-study-1.json").read_text())
    bundle["title"] = snapshot["study"]["title"]
    study = study_import_bundle(bundle=bundle)
    snapshot["study"]["id"] = study.pk
    results = evaluate_snapshot(snapshot)
    return Run.objects.create(
        study=study, launched_by=study.designer, status=Run.Status.SUCCEEDED, snapshot=snapshot, results=results
    )


class Workers:
    def __init__(self, queue, log_dir):
        self.queue = queue
        self.log_dir = log_dir
        self.processes = []

    def start(self):
        index = len(self.processes)
        log_path = self.log_dir / f"worker-{index}.log"
        log = open(log_path, "w")  # noqa: SIM115 - the worker writes to it until stopped
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "approve_site",
                "worker",
                "--pool",
                "solo",
                "-n",
                f"{self.queue}-{index}@bench",
                "-Q",
                self.queue,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "info",
            ],
            cwd=ROOT,
            env=os.environ.copy(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        process.log_path = log_path
        self.processes.append(process)
        deadline = time.monotonic() + 120
        while " ready." not in log_path.read_text():
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit(f"worker {index} did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        return process

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.processes = []


def analysis_of(run, samples, seed, spec):
    """Launch a Monte Carlo analysis of ``spec``; (wall seconds from the
    launch to the stored result, the analysis)."""
    from engine.analyses import analysis_launch
    from engine.models import Analysis

    started = time.perf_counter()
    analysis = analysis_launch(
        run=run,
        kind=Analysis.Kind.MONTE_CARLO,
        launched_by=None,
        spec=dict(spec),
        samples=samples,
        seed=seed,
    )
    while True:
        analysis.refresh_from_db()
        if analysis.status not in (Analysis.Status.QUEUED, Analysis.Status.RUNNING):
            break
        time.sleep(0.05)
    took = time.perf_counter() - started
    if analysis.status != Analysis.Status.SUCCEEDED:
        raise SystemExit(f"analysis {analysis.pk} {analysis.status}: {analysis.error}")
    return took, analysis


def cpu_seconds(processes):
    """User + system CPU seconds the processes have used so far (/proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for process in processes:
        fields = pathlib.Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def load():
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


#: The configurations measured, each with 1 then 2 workers: what a worker
#: keeps between chunks and how chunks are sized (environment of the workers,
#: settings of this process, which launches and so cuts the chunks).
CONFIGURATIONS = {
    "kept": ("kept between chunks, chunks sized by work", {}),
    "unkept": (
        "as before issue 33: nothing kept, chunks of 500 samples",
        {"ENGINE_ANALYSIS_KEPT_RUNS": 0, "ENGINE_ANALYSIS_CHUNK_SAMPLES": 500, "ENGINE_ANALYSIS_CHUNK_SECONDS": 10**6},
    ),
}
SPEC = {"judgments": True, "peer_weights": True}
#: The warm-up analysis samples another spec: every worker imports and loads
#: what it needs, and still reads and prepares the timed analysis itself.
WARM_UP_SPEC = {"judgments": True}


def configure(settings, values):
    """The configuration's settings in this process and its workers' environment."""
    for name in ("ENGINE_ANALYSIS_KEPT_RUNS", "ENGINE_ANALYSIS_CHUNK_SAMPLES", "ENGINE_ANALYSIS_CHUNK_SECONDS"):
        value = values.get(name, DEFAULTS[name])
        setattr(settings, name, value)
        os.environ[name] = str(value)


DEFAULTS: dict = {}


def reference(inputs, samples):
    """(CPU seconds, wall seconds) of the samples in this process, one monte_carlo_chunk."""
    from engine import robustness
    from engine.robustness_kernels import MonteCarlo

    spec = MonteCarlo().check(dict(SPEC))
    cpu, wall = time.process_time(), time.perf_counter()
    robustness.monte_carlo_chunk(inputs, MonteCarlo._sampling(spec), SEED, 0, samples)
    return time.process_time() - cpu, time.perf_counter() - wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, help="ENGINE_ANALYSIS_CHUNK_SAMPLES, the most samples of a chunk")
    parser.add_argument("--rounds", type=int, default=1, help="1-worker/2-worker pairs, side by side (default 1)")
    parser.add_argument(
        "--configurations", nargs="+", choices=sorted(CONFIGURATIONS), default=["kept", "unkept"], metavar="NAME"
    )
    args = parser.parse_args()
    if not (os.environ.get("DATABASE_URL", "").startswith("postgres") and os.environ.get("REDIS_URL")):
        raise SystemExit("needs DATABASE_URL (PostgreSQL) and REDIS_URL: real workers share the database and broker")

    import django

    django.setup()
    import redis
    from django.conf import settings

    from approve_site.celery import app
    from engine.robustness_kernels import MonteCarlo, sample_seconds

    DEFAULTS.update(
        ENGINE_ANALYSIS_KEPT_RUNS=settings.ENGINE_ANALYSIS_KEPT_RUNS,
        ENGINE_ANALYSIS_CHUNK_SAMPLES=args.chunk or settings.ENGINE_ANALYSIS_CHUNK_SAMPLES,
        ENGINE_ANALYSIS_CHUNK_SECONDS=settings.ENGINE_ANALYSIS_CHUNK_SECONDS,
    )
    queue = f"approve-bench-{uuid.uuid4().hex[:12]}"
    app.conf.task_default_queue = queue  # the chunks this process sends
    bench = _robustness_bench()
    arrays, inputs = bench.study()
    k, n = arrays["weights"].shape
    m = len(arrays["measurements"])
    run = store_run(snapshot_of(arrays, inputs, f"Analysis workers benchmark {k}x{n}x{m}"))
    log_dir = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / queue
    log_dir.mkdir()
    print(f"Monte Carlo of the experts' side (judgments + peer weights), {args.samples:,} samples at {k} x {n} x {m}")
    print(f"{os.cpu_count()} CPUs; {_blas.threadpool_state()}")
    print(f"database {settings.DATABASES['default']['NAME']}, broker {settings.CELERY_BROKER_URL}, queue {queue}")
    print(
        "Skipped: the launch (creating the chunks, sending their messages) is in the wall times, not in the "
        "workers' CPU; the reference in this process neither reads, claims, stores nor merges."
    )
    workers = Workers(queue, log_dir)
    results = []
    try:
        for name in args.configurations:
            title, values = CONFIGURATIONS[name]
            configure(settings, values)
            chunk = MonteCarlo().chunk_units(run.results, {**SPEC, "samples": args.samples})  # as the launch
            estimate = sample_seconds(k, n, m, dict(SPEC)) * args.samples
            print()
            print(
                f"{title}: chunks of {chunk} samples ({-(-args.samples // chunk)} chunks; the estimate of the "
                f"work, {estimate:.1f} s)"
            )
            ratios, cpus = [], []
            for round_ in range(args.rounds):
                walls = {}
                for count in (1, 2):
                    for _ in range(count):
                        workers.start()
                    warm_up = analysis_of(run, 2 * chunk * count, SEED + 1, WARM_UP_SPEC)
                    before, cpu = load(), cpu_seconds(workers.processes)
                    walls[count], analysis = analysis_of(run, args.samples, SEED, SPEC)
                    used = cpu_seconds(workers.processes) - cpu
                    assert warm_up is not None
                    results.append(analysis.result["counts"])
                    reference_cpu, reference_wall = reference(inputs, args.samples)
                    cpus.append(used / reference_cpu)
                    print(
                        f"round {round_ + 1}, {count} worker{'s' if count > 1 else ' '}: {walls[count]:7.2f} s wall, "
                        f"workers' CPU {used:6.2f} s ({used / walls[count]:.2f} CPUs), in one process "
                        f"{reference_cpu:6.2f} s CPU: ratio {cpus[-1]:.2f}   ({before} before, {load()} after)"
                    )
                    workers.stop()
                ratios.append(walls[2] / walls[1])
                print(f"round {round_ + 1}: ratio 2 workers / 1 worker {ratios[-1]:.2f}")
            print(
                f"{name}: 2 workers / 1 worker's wall, median of {args.rounds} round(s): {np.median(ratios):.2f} "
                f"(goal <= 0.6); workers' CPU / one process's, median: {np.median(cpus):.2f} (goal <= 1.2)"
            )
        print(f"same merged counts every time: {all(result == results[0] for result in results)}")
    finally:
        workers.stop()
        run.study.delete()
        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        client.delete(queue, f"_kombu.binding.{queue}", *(f"{queue}\x06\x16{p}" for p in (3, 6, 9)))


if __name__ == "__main__":
    main()
