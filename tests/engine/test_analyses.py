"""The analyses' workflow (``engine.analyses``): launch, chunks, claim,
lease, merge, cancel, recovery. The mathematics of each kind is tested in
tests/engine/test_robustness.py; here a small kernel whose counts are a
known function of (seed, unit) checks that chunking, redelivery, takeover
and merging never change the merged counts."""

import json
from datetime import timedelta

import numpy as np
import pytest
from celery.exceptions import Ignore
from django.utils import timezone

from engine import analyses, services
from engine import tasks as engine_tasks
from engine.models import Analysis, AnalysisChunk
from engine.robustness_kernels import LeaveOneOut, MonteCarlo
from workspace.bundles import study_import_bundle
from workspace.errors import InvalidInput, PhaseConflict
from workspace.limits import ANALYSIS_SAMPLES_DEFAULT, ANALYSIS_SAMPLES_MAX

from .test_runs import case_study_bundle


def unit_value(seed, index):
    """Each unit's outcome depends on (seed, index) alone."""
    return int(np.random.default_rng([seed, index]).integers(0, 1000))


class SumKernel:
    """Counts that add: the number of units and the sum of their values."""

    calls: list[tuple[int, int]]

    def __init__(self, calls=None):
        self.calls = [] if calls is None else calls

    def check(self, spec):
        if spec.get("bad"):
            raise InvalidInput({"bad": "not accepted"})
        return spec

    def prepare(self, run_id, spec):
        return spec

    def compute(self, run, spec, seed, start, count):
        self.calls.append((start, count))
        return {"n": count, "sum": sum(unit_value(seed, i) for i in range(start, start + count))}

    def merge(self, counts):
        return {"n": sum(c["n"] for c in counts), "sum": sum(c["sum"] for c in counts)}

    def summary(self, run, spec, merged):
        return {"mean": merged["sum"] / merged["n"]}


class SampledSumKernel(SumKernel):
    """Its units are samples, as a Monte Carlo's (the real kernel's rules)."""

    sampled = True
    units = MonteCarlo.units
    chunk_units = MonteCarlo.chunk_units


class PerExpertSumKernel(SumKernel):
    """Its units are the run's experts, as leave-one-out's (the real kernel's rules)."""

    sampled = False
    units = LeaveOneOut.units
    chunk_units = LeaveOneOut.chunk_units


@pytest.fixture
def kernel(monkeypatch):
    chosen = SampledSumKernel()
    monkeypatch.setitem(analyses.KERNELS, Analysis.Kind.MONTE_CARLO, chosen)
    monkeypatch.setitem(analyses.KERNELS, Analysis.Kind.LEAVE_ONE_OUT, PerExpertSumKernel(chosen.calls))
    return chosen


def launch(run, samples=None, seed=7, kind=Analysis.Kind.MONTE_CARLO, **kwargs):
    return analyses.analysis_launch(
        run=run, kind=kind, launched_by=run.study.designer, samples=samples, seed=seed, **kwargs
    )


def execute_all(analysis, order=None):
    ids = list(analysis.chunks.values_list("pk", flat=True))
    for chunk_id in order(ids) if order else ids:
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    return analysis


def expected(seed, units):
    values = [unit_value(seed, i) for i in range(units)]
    return {"n": units, "sum": sum(values)}


def test_launch_splits_the_samples_into_chunks(run, kernel, settings):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 300
    analysis = launch(run, samples=1000)
    chunks = list(analysis.chunks.values_list("index", "start", "count", "status"))
    assert chunks == [(0, 0, 300, "queued"), (1, 300, 300, "queued"), (2, 600, 300, "queued"), (3, 900, 100, "queued")]
    assert (analysis.status, analysis.units, analysis.units_done, analysis.seed) == ("queued", 1000, 0, 7)
    assert analysis.spec == {"samples": 1000}


def test_default_samples_and_a_drawn_seed_are_recorded(run, kernel):
    analysis = analyses.analysis_launch(run=run, kind=Analysis.Kind.MONTE_CARLO, launched_by=None)
    assert analysis.units == ANALYSIS_SAMPLES_DEFAULT
    other = analyses.analysis_launch(run=run, kind=Analysis.Kind.MONTE_CARLO, launched_by=None)
    assert 0 <= analysis.seed < 2**63 and analysis.seed != other.seed


@pytest.mark.parametrize("chunk", [1, 7, 250, 5000])
def test_merged_counts_do_not_depend_on_the_chunks(run, kernel, settings, chunk):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = chunk
    analysis = execute_all(launch(run, samples=500), order=lambda ids: list(reversed(ids)))
    assert analysis.status == "succeeded" and analysis.units_done == 500
    assert analysis.result["counts"] == expected(7, 500)
    assert analysis.result["summary"] == {"mean": expected(7, 500)["sum"] / 500}
    assert analysis.finished_at is not None


def test_progress_counts_done_units(run, kernel, settings):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    analysis = launch(run, samples=250)
    first = analysis.chunks.order_by("index").first()
    analyses.chunk_execute(chunk_id=first.pk)
    analysis.refresh_from_db()
    assert analysis.status == "running"
    assert analyses.analysis_progress(analysis) == {"done": 100, "total": 250, "percent": 40}


def test_a_chunk_delivered_twice_computes_once(run, kernel, settings):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    analysis = launch(run, samples=200)
    chunk = analysis.chunks.order_by("index").first()
    assert analyses.chunk_execute(chunk_id=chunk.pk) == "chunk done"
    assert analyses.chunk_execute(chunk_id=chunk.pk) == "not claimed"
    assert kernel.calls == [(0, 100)]
    analysis.refresh_from_db()
    assert analysis.units_done == 100


def test_a_lapsed_chunk_is_taken_over_and_the_stale_attempt_cannot_store(run, kernel, settings, monkeypatch):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    analysis = launch(run, samples=100)
    chunk = analysis.chunks.get()
    first = analyses.chunk_claim(chunk_id=chunk.pk)
    # The first worker dies: its lease lapses and another takes the chunk.
    AnalysisChunk.objects.filter(pk=chunk.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert analyses.chunk_execute(chunk_id=chunk.pk) == "succeeded"
    # The first attempt comes back to life: it holds nothing and stores nothing.
    assert not analyses._held(chunk.pk, first).update(counts={"n": 0, "sum": 0})
    analysis.refresh_from_db()
    assert analysis.result["counts"] == expected(7, 100)
    assert AnalysisChunk.objects.get(pk=chunk.pk).attempts == 2


def test_the_sweep_hands_back_lapsed_chunks_and_resends_them(run, kernel, settings, monkeypatch):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    analysis = launch(run, samples=300)
    sent = []
    monkeypatch.setattr(analyses, "_send", lambda ids, priority: sent.append((sorted(ids), priority)))
    chunks = list(analysis.chunks.order_by("index"))
    analyses.chunk_claim(chunk_id=chunks[0].pk)  # running, lease live
    AnalysisChunk.objects.filter(pk=chunks[1].pk).update(
        status="running", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    AnalysisChunk.objects.filter(pk=chunks[2].pk).update(lease_expires_at=None)  # never sent
    assert sorted(engine_tasks.sweep() or []) == []  # no run handed back
    assert sent == [(sorted([chunks[1].pk, chunks[2].pk]), services.RESEND_PRIORITY)]
    assert set(AnalysisChunk.objects.filter(analysis=analysis).values_list("status", flat=True)) == {
        "running",
        "queued",
    }


def test_too_many_lost_workers_fail_the_analysis(run, kernel, settings):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    analysis = launch(run, samples=100)
    chunk = analysis.chunks.get()
    AnalysisChunk.objects.filter(pk=chunk.pk).update(attempts=services.MAX_ATTEMPTS)
    assert analyses.chunk_execute(chunk_id=chunk.pk) == "failed"
    analysis.refresh_from_db()
    assert analysis.status == "failed" and "workers were lost 3 times" in analysis.error
    assert kernel.calls == []


def test_cancelled_analysis_claims_nothing_more(run, kernel, settings):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    analysis = launch(run, samples=300)
    chunks = list(analysis.chunks.order_by("index"))
    analyses.chunk_execute(chunk_id=chunks[0].pk)
    assert analyses.analysis_cancel(analysis=analysis)
    assert analyses.chunk_execute(chunk_id=chunks[1].pk) == "not claimed"
    assert not analyses.analysis_cancel(analysis=analysis)
    analysis.refresh_from_db()
    assert (analysis.status, analysis.units_done, analysis.result) == ("cancelled", 100, None)
    assert analyses.analyses_recover_stale(now=timezone.now() + timedelta(days=1)) == []


def test_a_failing_kernel_fails_the_analysis_with_the_reason(run, kernel, settings, monkeypatch):
    def broken(*args):
        raise ValueError("no such thing")

    monkeypatch.setattr(kernel, "compute", broken)
    analysis = execute_all(launch(run, samples=10))
    assert analysis.status == "failed"
    assert analysis.error == "Internal error: ValueError: no such thing"


@pytest.mark.parametrize(
    ("samples", "seed", "field"),
    [(0, 1, "samples"), (ANALYSIS_SAMPLES_MAX + 1, 1, "samples"), (1.5, 1, "samples"), (True, 1, "samples")]
    + [(10, -1, "seed"), (10, 2**63, "seed"), (10, "1", "seed")],
)
def test_launch_refuses_bad_samples_and_seeds_writing_nothing(run, kernel, samples, seed, field):
    with pytest.raises(InvalidInput) as refused:
        launch(run, samples=samples, seed=seed)
    assert list(refused.value.errors) == [field]
    assert not Analysis.objects.exists() and not AnalysisChunk.objects.exists()


def test_launch_refuses_an_unsuccessful_run(db, kernel):
    study = study_import_bundle(bundle=case_study_bundle())
    queued = services.run_launch(study=study, launched_by=study.designer)
    with pytest.raises(PhaseConflict, match="need a succeeded run"):
        launch(queued, samples=10)
    assert not Analysis.objects.exists()


def test_leave_one_out_has_one_unit_per_expert_and_no_samples(run, kernel, settings):
    settings.ENGINE_ANALYSIS_CHUNK_EXPERTS = 2
    analysis = launch(run, kind=Analysis.Kind.LEAVE_ONE_OUT)
    experts = len(run.snapshot["experts"])
    assert analysis.units == experts
    assert analysis.chunks.count() == -(-experts // 2)
    with pytest.raises(InvalidInput) as refused:
        launch(run, kind=Analysis.Kind.LEAVE_ONE_OUT, samples=10)
    assert list(refused.value.errors) == ["samples"]


def test_the_task_ignores_a_delivery_that_claims_nothing(run, kernel):
    analysis = launch(run, samples=10)
    chunk = analysis.chunks.get()
    assert engine_tasks.execute_analysis_chunk.run(chunk.pk) == "succeeded"
    with pytest.raises(Ignore):
        engine_tasks.execute_analysis_chunk.run(chunk.pk)


def test_launch_sends_every_chunk_as_one_group_after_commit(run, kernel, settings, django_capture_on_commit_callbacks):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 4
    sent = []
    original = analyses._send
    analyses._send = lambda ids, priority: sent.append((list(ids), priority))
    try:
        with django_capture_on_commit_callbacks(execute=True):
            analysis = launch(run, samples=10)
    finally:
        analyses._send = original
    assert sent == [(list(analysis.chunks.order_by("index").values_list("pk", flat=True)), services.LAUNCH_PRIORITY)]
    assert json.loads(json.dumps(analysis.spec)) == {"samples": 10}
