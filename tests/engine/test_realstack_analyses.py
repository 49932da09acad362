"""A robustness analysis through real Celery workers, Redis and PostgreSQL
(issue 20, item 5): a worker killed mid-analysis, the analysis completes
and its merged counts are those of the same analysis computed in-process.

The harness (private queue, worker processes, skip reason) is
``test_realstack``'s; like its tests these need the real stack."""

import signal
import time

import pytest

from engine import analyses, services
from engine.analyses import run_inputs
from engine.models import Analysis, AnalysisChunk, Run
from engine.robustness_kernels import MonteCarlo
from engine.tasks import execute_analysis_chunk

from .test_realstack import closed_study, pytestmark, workers  # noqa: F401  (the harness)


@pytest.fixture
def chunks_to_pool(workers, monkeypatch):  # noqa: F811
    """Chunks launched by this test go to the pool's private queue (the
    workers' own resends already do: realstack_worker.py)."""
    from approve_site.celery import app as celery_app

    def send(chunk_ids, priority):
        with celery_app.connection_for_write(workers.redis_url) as broker:
            for chunk_id in chunk_ids:
                execute_analysis_chunk.apply_async(
                    (chunk_id,), queue=workers.queue, priority=priority, connection=broker
                )

    monkeypatch.setattr(analyses, "_send", send)
    return workers


def wait_for_analysis(analysis, statuses, timeout, pool):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        analysis.refresh_from_db()
        if analysis.status in statuses:
            return analysis
        time.sleep(0.2)
    pytest.fail(f"analysis {analysis.pk} still {analysis.status} after {timeout} s; worker logs:\n{pool.logs()}")


def test_a_worker_killed_mid_analysis_and_the_analysis_completes_exactly_once(
    chunks_to_pool,
    closed_study,  # noqa: F811
    settings,
):
    pool = chunks_to_pool
    # The run itself is computed here, so that no worker is slowed by it.
    run = services.run_launch(study=closed_study, launched_by=closed_study.designer)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED

    # The first worker sleeps in engine.core.evaluate, which a Monte Carlo
    # chunk calls once (the run's own evaluation) after claiming it: it holds
    # its first chunk long enough to be killed with it.
    first = pool.start(run_delay=600)
    pool.wait_ready(first)
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 500
    spec = {"judgments": True, "peer_weights": True, "ranges_percent": 5.0}
    analysis = analyses.analysis_launch(
        run=run, kind=Analysis.Kind.MONTE_CARLO, launched_by=closed_study.designer, spec=spec, samples=2_000, seed=42
    )
    assert analysis.chunks.count() == 4
    deadline = time.monotonic() + 60
    while not AnalysisChunk.objects.filter(analysis=analysis, status=AnalysisChunk.Status.RUNNING).exists():
        assert time.monotonic() < deadline, pool.logs()
        time.sleep(0.1)
    held = AnalysisChunk.objects.get(analysis=analysis, status=AnalysisChunk.Status.RUNNING)

    second = pool.start()
    pool.wait_ready(second)
    first.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    first.wait(timeout=10)
    held.refresh_from_db()
    assert held.status == AnalysisChunk.Status.RUNNING and held.counts is None and held.attempts == 1

    wait_for_analysis(analysis, {Analysis.Status.SUCCEEDED, Analysis.Status.FAILED}, 120, pool)
    print(
        f"\nanalysis {analysis.pk}: finished by the second worker {time.monotonic() - killed:.1f} s after the "
        f"first was killed holding chunk {held.index} (lease {settings.ENGINE_RUN_LEASE_SECONDS} s, "
        f"sweep {settings.ENGINE_RECOVERY_SWEEP_SECONDS} s)"
    )
    assert analysis.status == Analysis.Status.SUCCEEDED, analysis.error

    # Exactly once: each chunk's samples counted once (units_done adds each
    # chunk's count when it is stored), the killed chunk computed again.
    assert analysis.units_done == analysis.units == 2_000
    attempts = dict(AnalysisChunk.objects.filter(analysis=analysis).values_list("index", "attempts"))
    assert attempts == {index: 2 if index == held.index else 1 for index in range(4)}
    assert "recovery sweep handed back analysis chunks" in second.log_path.read_text()
    assert "succeeded in" not in first.log_path.read_text()

    # The merged result equals the same analysis computed here in one piece.
    kernel = MonteCarlo()
    inputs = run_inputs(run.pk)
    whole = kernel.merge([kernel.compute(inputs, analysis.spec, 42, 0, 2_000)])
    assert analysis.result["counts"] == whole
    assert analysis.result["summary"] == kernel.summary(inputs, analysis.spec, whole)
    assert analysis.result["summary"]["samples"] == 2_000
