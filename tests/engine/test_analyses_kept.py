"""What a worker process keeps between the chunks of a Monte Carlo analysis
(issue 33, item 2; engine.robustness_kernels.KEPT_RUNS, KEPT_PREPARED): a
run's inputs are read and its analysis prepared once for all the chunks it
computes, the merged counts are those of one unchunked ``monte_carlo_chunk``,
a run whose inputs changed is never served from what was kept, at most
``ENGINE_ANALYSIS_KEPT_RUNS`` runs are kept, and chunks are sized by the
run's work."""

from datetime import timedelta

import pytest
from django.db.models import F

from engine import analyses, robustness
from engine import robustness_kernels as kernels
from engine.models import Analysis, Run
from engine.robustness_kernels import KEPT_PREPARED, KEPT_RUNS, Kept, MonteCarlo, run_inputs, sample_seconds

SPEC = {"judgments": True, "peer_weights": True, "ranges_percent": 5.0}


@pytest.fixture(autouse=True)
def nothing_kept():
    KEPT_RUNS.clear()
    KEPT_PREPARED.clear()
    yield
    KEPT_RUNS.clear()
    KEPT_PREPARED.clear()


@pytest.fixture
def counted(monkeypatch):
    """How often the chunks read a run and prepare an analysis."""
    calls = {"read": 0, "prepared": 0}
    read, prepare = kernels.run_inputs, robustness.monte_carlo_prepare

    def reading(run_id):
        calls["read"] += 1
        return read(run_id)

    def preparing(*args, **kwargs):
        calls["prepared"] += 1
        return prepare(*args, **kwargs)

    monkeypatch.setattr(kernels, "run_inputs", reading)
    monkeypatch.setattr(robustness, "monte_carlo_prepare", preparing)
    return calls


def analyse(run, samples=300, seed=5, spec=SPEC):
    analysis = analyses.analysis_launch(
        run=run, kind=Analysis.Kind.MONTE_CARLO, launched_by=None, spec=spec, samples=samples, seed=seed
    )
    for chunk_id in analysis.chunks.order_by("index").values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    assert analysis.status == Analysis.Status.SUCCEEDED, analysis.error
    return analysis


def unchunked(run, analysis):
    """The analysis's counts from one monte_carlo_chunk of the run as stored now."""
    kernel = MonteCarlo()
    inputs = kernel._inputs(run_inputs(run.pk), analysis.spec)
    prepared = robustness._Prepared(inputs, kernel._sampling(analysis.spec))  # (not counted as a chunk's)
    counts = robustness.monte_carlo_counts(prepared, analysis.seed, 0, analysis.units)
    return counts.to_dict()


def test_the_chunks_of_an_analysis_read_and_prepare_the_run_once(run, settings, counted):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 70  # five chunks, inside blocks and across them
    analysis = analyse(run)
    assert analysis.chunks.count() == 5
    assert counted == {"read": 1, "prepared": 1}
    assert analysis.result["counts"] == unchunked(run, analysis)
    # Another analysis of the same run with the same spec reuses both; another spec prepares again.
    analyse(run, seed=6)
    assert counted == {"read": 1, "prepared": 1}
    analyse(run, spec={"peer_weights": True})
    assert counted == {"read": 1, "prepared": 2}


def test_a_run_whose_inputs_changed_is_read_again(run, settings, counted):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    before = analyse(run)
    # The same id with other inputs, as a run created anew under a reused id
    # (SQLite after a rollback) would have: other measurements, launched and
    # finished at other times.
    snapshot = run.snapshot
    snapshot["measurements"] = [[value * 0.5 for value in row] for row in snapshot["measurements"]]
    Run.objects.filter(pk=run.pk).update(
        snapshot=snapshot,
        launched_at=F("launched_at") + timedelta(seconds=1),
        finished_at=F("finished_at") + timedelta(seconds=1),
    )
    run.refresh_from_db()
    after = analyse(run)
    assert counted == {"read": 2, "prepared": 2}
    assert after.result["counts"] == unchunked(run, after)
    assert after.result["counts"] != before.result["counts"]


def test_at_most_the_setting_s_runs_are_kept(run, settings):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    settings.ENGINE_ANALYSIS_KEPT_RUNS = 1
    other = Run.objects.get(pk=run.pk)
    other.pk, other.number = None, run.number + 1
    other.save()
    analyse(run)
    analyse(other)
    assert [key[0] for key in KEPT_RUNS.held()] == [other.pk]
    assert [key[0][0] for key in KEPT_PREPARED.held()] == [other.pk]
    settings.ENGINE_ANALYSIS_KEPT_RUNS = 0
    analyse(run)
    assert KEPT_RUNS.held() == [] and KEPT_PREPARED.held() == []


def test_kept_entries_go_least_recently_used_first_and_a_taken_one_is_nobody_else_s(settings):
    settings.ENGINE_ANALYSIS_KEPT_RUNS = 2
    kept: Kept[str, int] = Kept()
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # a is now the most recently used
    kept.put("c", 3)
    assert kept.held() == ["a", "c"]
    assert kept.take("a") == 1 and kept.take("a") is None and kept.get("a") is None
    kept.put("a", 1)
    assert kept.held() == ["c", "a"]


def test_chunks_hold_about_the_setting_s_seconds_of_work_in_whole_blocks(settings):
    settings.ENGINE_ANALYSIS_CHUNK_SECONDS = 1
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 10_000
    kernel = MonteCarlo()

    def results(k, n, m):
        return {"experts": ["e"] * k, "metrics": ["x"] * n, "candidates": [{}] * m}

    large = kernel.chunk_units(results(100, 20, 1000), {"judgments": True, "peer_weights": True})
    assert large % robustness.SAMPLE_BLOCK == 0
    seconds = sample_seconds(100, 20, 1000, {"judgments": True, "peer_weights": True})
    assert 1 - seconds * robustness.SAMPLE_BLOCK <= large * seconds <= 1
    # An analysis's samples spread evenly over as many chunks, in whole blocks.
    spread = kernel.chunk_units(results(100, 20, 1000), {"judgments": True, "peer_weights": True, "samples": 20_000})
    chunks = -(-20_000 // large)
    assert spread % robustness.SAMPLE_BLOCK == 0 and -(-20_000 // spread) == chunks
    assert 20_000 - (chunks - 1) * spread > spread - robustness.SAMPLE_BLOCK * chunks  # the last one too
    # More work per sample, fewer samples a chunk; never less than one block.
    assert kernel.chunk_units(results(100, 20, 1000), {**SPEC, "ranges_percent": 5.0}) < large
    assert kernel.chunk_units(results(1000, 50, 1000), {"ranges_percent": 5.0}) == robustness.SAMPLE_BLOCK
    # A small study's chunks are the most samples a chunk may hold.
    assert kernel.chunk_units(results(4, 4, 4), SPEC) == 10_000
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 300
    assert kernel.chunk_units(results(4, 4, 4), SPEC) == 300
