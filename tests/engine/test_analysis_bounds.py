"""Robustness work bounded (issue 29, finding 10): anyone with a run could
queue analyses without end, each of up to 100,000 samples. Now a launch is
refused, with the limit and its setting named and nothing written, beyond
the queued or running analyses allowed per run, per study and per user
(409, ``analysis_limit``), the launches allowed per user in an hour and the
Monte Carlo samples allowed per study in an hour (429, with when to try
again)."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from engine import analyses, services
from engine.models import Analysis, AnalysisChunk, Run
from workspace.errors import PhaseConflict, RateLimited

from .test_analyses import kernel, launch  # noqa: F401  (kernel: a fixture; run: tests/engine/conftest.py)


def _refused(error_type, call):
    analyses_before, chunks_before = Analysis.objects.count(), AnalysisChunk.objects.count()
    with pytest.raises(error_type) as refused:
        call()
    assert (Analysis.objects.count(), AnalysisChunk.objects.count()) == (analyses_before, chunks_before)
    return refused.value


def _second_run(first):
    second = services.run_launch(study=first.study, launched_by=first.study.designer)
    services.run_execute(run_id=second.pk)
    return Run.objects.get(pk=second.pk)


def test_queued_or_running_analyses_are_capped_per_run(run, kernel, settings):  # noqa: F811
    settings.ANALYSES_ACTIVE_PER_RUN_MAX = 2
    first, _ = launch(run, samples=10), launch(run, kind=Analysis.Kind.LEAVE_ONE_OUT)
    refusal = _refused(PhaseConflict, lambda: launch(run, samples=10))
    assert refusal.code == "analysis_limit"
    assert str(refusal) == (
        "2 analyses of this run are already queued or running, the most allowed at once "
        "(ANALYSES_ACTIVE_PER_RUN_MAX): wait for one to finish, or cancel one."
    )
    # Another run of the study has its own count; a finished analysis no longer counts.
    launch(_second_run(run), samples=10)
    analyses.analysis_cancel(analysis=first)
    assert launch(run, samples=10).status == Analysis.Status.QUEUED


def test_queued_or_running_analyses_are_capped_per_study_and_per_user(run, kernel, settings):  # noqa: F811
    settings.ANALYSES_ACTIVE_PER_STUDY_MAX = 2
    second = _second_run(run)
    launch(run, samples=10)
    launch(second, samples=10)
    refusal = _refused(PhaseConflict, lambda: launch(second, samples=10))
    assert str(refusal).startswith("2 analyses of this study's runs are already queued or running")
    assert "(ANALYSES_ACTIVE_PER_STUDY_MAX)" in str(refusal)

    # Within the study's cap, the user's (all their studies' analyses).
    settings.ANALYSES_ACTIVE_PER_STUDY_MAX = 10
    settings.ANALYSES_ACTIVE_PER_USER_MAX = 2
    refusal = _refused(PhaseConflict, lambda: launch(run, samples=10))
    assert str(refusal) == (
        "2 analyses launched by you are already queued or running, the most allowed at once "
        "(ANALYSES_ACTIVE_PER_USER_MAX): wait for one to finish, or cancel one."
    )
    # Another user is not counted with them.
    stranger = get_user_model().objects.create(username="stranger")
    assert analyses.launch_refusal(run=run, launched_by=stranger, kind=Analysis.Kind.MONTE_CARLO) is None


def test_launches_are_throttled_per_user_per_hour(run, kernel, settings):  # noqa: F811
    settings.ANALYSIS_LAUNCHES_PER_USER_PER_HOUR = 3
    done = [launch(run, samples=10) for _ in range(3)]
    for analysis in done:
        analyses.analysis_cancel(analysis=analysis)  # not active: only the throttle counts them
    # The oldest launch counted was 50 minutes ago: one more is allowed in 10.
    Analysis.objects.filter(pk=done[0].pk).update(launched_at=timezone.now() - timedelta(minutes=50))
    refusal = _refused(RateLimited, lambda: launch(run, kind=Analysis.Kind.LEAVE_ONE_OUT))
    assert str(refusal) == (
        "Too many launches: each user may launch at most 3 robustness analyses an hour "
        "(ANALYSIS_LAUNCHES_PER_USER_PER_HOUR); you launched 3 in the last hour."
    )
    assert 595 <= refusal.retry_after <= 600
    # Once it is more than an hour old, it no longer counts.
    Analysis.objects.filter(pk=done[0].pk).update(launched_at=timezone.now() - timedelta(minutes=61))
    assert launch(run, kind=Analysis.Kind.LEAVE_ONE_OUT).status == Analysis.Status.QUEUED


def test_monte_carlo_samples_have_a_budget_per_study_per_hour(run, kernel, settings):  # noqa: F811
    settings.ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR = 1000
    first = launch(run, samples=600)
    analyses.analysis_cancel(analysis=first)  # cancelled, its samples were still asked for
    Analysis.objects.filter(pk=first.pk).update(launched_at=timezone.now() - timedelta(minutes=30))
    launch(_second_run(run), samples=300)
    refusal = _refused(RateLimited, lambda: launch(run, samples=101))
    assert str(refusal) == (
        "The study's Monte Carlo budget: at most 1,000 samples an hour for all its runs' analyses "
        "(ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR); 900 were launched in the last hour, and 101 more would exceed it."
    )
    # Once the first launch (600 samples, 30 minutes ago) leaves the hour.
    assert 1795 <= refusal.retry_after <= 1800
    # What is left may be asked for; leave-one-out has no samples and no budget.
    assert launch(run, samples=100).units == 100
    assert launch(run, kind=Analysis.Kind.LEAVE_ONE_OUT).status == Analysis.Status.QUEUED
    # With nothing left, the page's sentence (no samples asked for yet).
    settings.ANALYSES_ACTIVE_PER_RUN_MAX = 10
    spent = analyses.launch_refusal(run=run, launched_by=run.study.designer, kind=Analysis.Kind.MONTE_CARLO)
    assert isinstance(spent, RateLimited) and str(spent).endswith("1,000 were launched in the last hour: none is left.")
