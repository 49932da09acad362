"""Tests that catch a wrong number (issue 30, item 7): hand-made mutants of
the analyses' bounds (``engine.analyses``, ``engine.robustness_kernels``)
and of the bootstrap's eligibility rules (``engine.bootstrap_sources``)
survived the suite; each test here fails under one of them.

The bounds: each limit accepted at the limit and refused one past it,
naming the field; a chunk retried exactly ``MAX_ATTEMPTS`` times; the
progress percentage rounded down. The bootstrap: each reason a metric, or
an elicited metric's candidate, is held fixed, word for word, and the
eligible case."""

import copy
import io
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from engine import analyses, services
from engine.bootstrap_sources import bootstrap_columns, bootstrap_plan, elicited_columns, elicited_plan, typed_sampled
from engine.models import Analysis, AnalysisChunk
from engine.robustness_kernels import RANGES_PERCENT_MAX, LeaveOneOut, MonteCarlo, RunInputs
from evaluation import services as evaluation_services
from evaluation.models import (
    CandidatePredictionArrays,
    ElicitationAnswers,
    ElicitedMetric,
    MeasurementSource,
    PredictionSet,
)
from tests.evaluation.test_elicited_ranking import elicited_study, run_of
from workspace.errors import InvalidInput, PhaseConflict
from workspace.limits import ANALYSIS_SAMPLES_MAX
from workspace.models import Metric

from .test_analyses import kernel, launch  # noqa: F401  (kernel: a fixture; run: tests/engine/conftest.py)

DEMO_PREDICTIONS = Path(__file__).resolve().parents[2] / "workspace" / "demo" / "case-study-1-predictions.csv"
TYPED = "typed, not computed from predictions, and no value has a standard error"


# --- 1. the analyses' bounds ------------------------------------------------------------


def test_samples_from_1_to_the_most_are_accepted_and_one_past_either_end_refused(run, kernel, settings):  # noqa: F811
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = ANALYSIS_SAMPLES_MAX  # one chunk each
    settings.ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR = 10 * ANALYSIS_SAMPLES_MAX
    assert launch(run, samples=1).units == 1
    assert launch(run, samples=ANALYSIS_SAMPLES_MAX).units == ANALYSIS_SAMPLES_MAX
    for past in (0, ANALYSIS_SAMPLES_MAX + 1):
        with pytest.raises(InvalidInput) as refused:
            launch(run, samples=past)
        assert refused.value.errors == {"samples": ["a whole number of samples from 1 to 100,000"]}
    assert Analysis.objects.count() == 2


def test_seeds_from_0_to_2_63_minus_1_are_accepted_and_kept(run, kernel):  # noqa: F811
    assert launch(run, samples=1, seed=0).seed == 0
    assert launch(run, samples=1, seed=2**63 - 1).seed == 2**63 - 1
    with pytest.raises(InvalidInput) as refused:
        launch(run, samples=1, seed=2**63)
    assert refused.value.errors == {"seed": ["a whole number from 0 to 2^63 - 1"]}


def test_ranges_move_by_0_up_to_below_half_their_width():
    check = MonteCarlo().check
    assert check({"ranges_percent": 0, "judgments": True})["ranges_percent"] == 0.0
    just_below = RANGES_PERCENT_MAX - 1e-9
    assert check({"ranges_percent": just_below})["ranges_percent"] == just_below
    for past in (RANGES_PERCENT_MAX, -1e-9):
        with pytest.raises(InvalidInput) as refused:
            check({"ranges_percent": past})
        assert refused.value.errors == {"ranges_percent": ["a percentage from 0 to below 50"]}


def test_one_active_analysis_allowed_is_named_in_the_singular(run, kernel, settings):  # noqa: F811
    settings.ANALYSES_ACTIVE_PER_RUN_MAX = 1
    launch(run, samples=1)
    with pytest.raises(PhaseConflict) as refused:
        launch(run, samples=1)
    assert str(refused.value) == (
        "1 analysis of this run is already queued or running, the most allowed at once "
        "(ANALYSES_ACTIVE_PER_RUN_MAX): wait for one to finish, or cancel one."
    )


def _lose_workers(chunk: AnalysisChunk, times: int) -> None:
    """``times`` workers claim the chunk and die: each lease lapses."""
    for attempt in range(1, times + 1):
        assert analyses.chunk_claim(chunk_id=chunk.pk) == attempt
        AnalysisChunk.objects.filter(pk=chunk.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_a_chunk_is_retried_up_to_max_attempts_times_then_fails_its_analysis(run, kernel, settings):  # noqa: F811
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    # Workers lost MAX_ATTEMPTS - 1 times: the last attempt allowed computes the chunk.
    last_chance = launch(run, samples=100).chunks.get()
    _lose_workers(last_chance, services.MAX_ATTEMPTS - 1)
    assert analyses.chunk_execute(chunk_id=last_chance.pk) == "succeeded"
    assert AnalysisChunk.objects.get(pk=last_chance.pk).attempts == services.MAX_ATTEMPTS
    assert kernel.calls == [(0, 100)]
    # Lost MAX_ATTEMPTS times: the next delivery fails the analysis, saying how often, and computes nothing.
    lost = launch(run, samples=100)
    _lose_workers(lost.chunks.get(), services.MAX_ATTEMPTS)
    assert analyses.chunk_execute(chunk_id=lost.chunks.get().pk) == "failed"
    lost.refresh_from_db()
    assert (lost.status, lost.error) == (
        "failed",
        f"workers were lost {services.MAX_ATTEMPTS} times while computing it; launch it again",
    )
    assert kernel.calls == [(0, 100)]


def test_progress_is_the_units_done_rounded_down_to_a_whole_percentage(run, kernel, settings):  # noqa: F811
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    analysis = launch(run, samples=300)
    chunks = list(analysis.chunks.order_by("index"))
    shown = []
    for chunk in chunks:
        analyses.chunk_execute(chunk_id=chunk.pk)
        analysis.refresh_from_db()
        shown.append((analysis.units_done, analyses.analysis_progress(analysis)))
    assert shown == [
        (100, {"done": 100, "total": 300, "percent": 33}),
        (200, {"done": 200, "total": 300, "percent": 66}),  # 66.7 rounded down: not done until done
        (300, {"done": 300, "total": 300, "percent": 100}),
    ]
    assert analyses.analysis_progress(Analysis(units=0, units_done=0))["percent"] == 100


def test_leaving_one_out_of_a_single_expert_is_refused_by_the_kernel(run):
    whole = run.snapshot
    # The run's first expert alone, as a one-expert study's snapshot.
    snapshot = {**whole, "experts": whole["experts"][:1], "peer_weights": [[1.0]]}
    snapshot.update({key: whole[key][:1] for key in ("metric_weights", "lower", "upper")})
    with pytest.raises(ValueError) as refused:
        LeaveOneOut().compute(RunInputs(snapshot=snapshot, results=run.results), {}, 1, 0, 1)
    assert str(refused.value) == "leaving one expert out needs at least two experts"


# --- 2. the bootstrap's eligibility -------------------------------------------------------


def _import(study, name, text=None, positive="tumour"):
    stream = io.BytesIO(text.encode()) if text is not None else DEMO_PREDICTIONS.open("rb")
    with stream:
        return evaluation_services.prediction_set_import(
            study=study, stream=stream, name=name, uploaded_by=study.designer, positive=positive
        )


@pytest.fixture
def computed(run):
    """A run of the case study with Success rate computed as accuracy from
    the shipped predictions (``holdout.csv``); the other two metrics typed."""
    study = run.study
    _import(study, "holdout.csv")
    evaluation_services.metric_computation_set(
        metric=Metric.objects.get(study=study, name="Success rate"), computation="accuracy"
    )
    evaluation_services.measurements_compute(study=study)
    computed = services.run_launch(study=study, launched_by=study.designer)
    services.run_execute(run_id=computed.pk)
    computed.refresh_from_db()
    return computed


def _sources():
    return MeasurementSource.objects.filter(metric__name="Success rate")


def _success_rate_held(snapshot) -> str | dict:
    """Success rate's plan: its column, or why it is held fixed."""
    columns, fixed = bootstrap_plan(snapshot)
    assert [item for item in fixed if item["metric"] != "Success rate"] == [
        {"metric": "Fold accuracy stdev", "reason": TYPED},
        {"metric": "Comprehensibility rating", "reason": TYPED},
    ]
    held = [item["reason"] for item in fixed if item["metric"] == "Success rate"]
    assert len(columns) + len(held) == 1
    return held[0] if held else columns[0]


def test_a_metric_every_candidate_computed_alike_is_resampled(computed):
    holdout = PredictionSet.objects.get(name="holdout.csv").pk
    plan = _success_rate_held(computed.snapshot)
    assert plan == {"metric": "Success rate", "kind": "accuracy", "prediction_set": holdout, "parameters": {}}
    (column,) = bootstrap_columns(computed.snapshot, [plan])
    assert (column.metric, column.kind, column.prediction_set, column.predictions.shape) == (
        0,
        "accuracy",
        holdout,
        (4, 102),
    )


def test_a_typed_metric_with_a_standard_error_is_drawn_not_held(computed):
    snapshot = copy.deepcopy(computed.snapshot)
    snapshot["standard_errors"][2][1] = 0.01  # RandomForest's Fold accuracy stdev
    columns, fixed = bootstrap_plan(snapshot)
    assert fixed == [{"metric": "Comprehensibility rating", "reason": TYPED}]
    assert typed_sampled(snapshot, columns) == ["Fold accuracy stdev"]
    snapshot["standard_errors"][2][1] = 0.0  # a zero standard error is none
    assert typed_sampled(snapshot, bootstrap_plan(snapshot)[0]) == []


def test_a_metric_some_candidates_typed_is_held(computed):
    _sources().filter(candidate__name="IBk").delete()
    assert _success_rate_held(computed.snapshot) == "not every candidate's value was computed from predictions"


@pytest.mark.parametrize(
    ("kinds", "reason"),
    [
        (["f1"] * 4, "computed as f1; the bootstrap recomputes accuracy and ROC AUC only"),
        (
            ["accuracy"] * 3 + ["roc_auc"],
            "computed as accuracy, roc_auc; the bootstrap recomputes accuracy and ROC AUC only",
        ),
    ],
)
def test_a_metric_computed_otherwise_is_held(computed, kinds, reason):
    for source, kind in zip(_sources().order_by("candidate__name"), kinds, strict=True):
        MeasurementSource.objects.filter(pk=source.pk).update(computation=kind)
    assert _success_rate_held(computed.snapshot) == reason


def test_a_metric_from_two_sets_or_a_deleted_one_is_held(computed):
    reason = "its candidates' values come from different or deleted prediction sets"
    second = _import(computed.study, "second.csv")
    _sources().filter(candidate__name="IBk").update(prediction_set=second)
    assert _success_rate_held(computed.snapshot) == reason
    _sources().update(prediction_set=None)  # as when its set is deleted
    assert _success_rate_held(computed.snapshot) == reason


def test_a_metric_computed_with_other_parameters_for_one_candidate_is_held(computed):
    _sources().filter(candidate__name="IBk").update(parameters={"threshold_method": "fixed"})
    assert _success_rate_held(computed.snapshot) == "its candidates' values were computed with different parameters"


def test_a_metric_whose_candidates_predicted_other_instances_is_held(computed):
    lines = DEMO_PREDICTIONS.read_text().splitlines(keepends=True)
    first_jrip = next(i for i, line in enumerate(lines) if line.startswith("JRip,"))
    uneven = _import(computed.study, "uneven.csv", "".join(lines[:first_jrip] + lines[first_jrip + 1 :]))
    _sources().update(prediction_set=uneven)
    assert _success_rate_held(computed.snapshot) == (
        "its candidates did not predict the same instances, so no paired resampling"
    )


def test_a_roc_auc_without_a_positive_label_is_held(computed):
    # The shipped set without its scores, and without a positive label.
    rows = [line.split(",") for line in DEMO_PREDICTIONS.read_text().splitlines()]
    labels_only = "".join(",".join(row[:4]) + "\n" for row in rows)
    unlabelled = _import(computed.study, "unlabelled.csv", labels_only, positive=None)
    _sources().update(prediction_set=unlabelled, computation="roc_auc")
    assert _success_rate_held(computed.snapshot) == "its ROC AUC is not binary with a positive label"
    plan = [{"metric": "Success rate", "kind": "roc_auc", "prediction_set": unlabelled.pk, "parameters": {}}]
    with pytest.raises(ValueError) as refused:
        bootstrap_columns(computed.snapshot, plan)
    assert str(refused.value) == "Success rate: its ROC AUC is not binary with a positive label"


def test_a_metric_whose_set_now_gives_other_values_is_held(computed):
    snapshot = copy.deepcopy(computed.snapshot)
    snapshot["measurements"][1][0] += 1e-6  # JRip's Success rate in the run
    assert _success_rate_held(snapshot) == "its values in the run differ from those the prediction set gives now"
    snapshot["measurements"][1][0] -= 1e-6 - 1e-10  # within SAME_VALUE of it: the same value
    assert isinstance(_success_rate_held(snapshot), dict)


def test_a_planned_set_deleted_before_the_chunk_fails_it_naming_the_set(computed):
    (plan,) = bootstrap_plan(computed.snapshot)[0]
    PredictionSet.objects.filter(pk=plan["prediction_set"]).delete()
    with pytest.raises(ValueError) as refused:
        bootstrap_columns(computed.snapshot, [plan])
    assert str(refused.value) == f"prediction set {plan['prediction_set']} was deleted after the analysis was launched"


# Elicited metrics: the study of tests/evaluation/test_elicited_ranking.py, its
# AUC elicited from two.csv (J48 and JRip), bob's and carol's weights stored.


@pytest.fixture
def elicited_run(make_study):
    return run_of(elicited_study(make_study))


def _two():
    return PredictionSet.objects.get(name="two.csv").pk


def test_an_elicited_metric_no_longer_defined_is_held(elicited_run):
    ElicitedMetric.objects.all().delete()
    assert elicited_plan(elicited_run.snapshot) == (
        [],
        [{"metric": "AUC", "reason": "its elicited metric is no longer defined"}],
    )


def test_an_elicited_metric_without_an_expert_s_answers_is_held_naming_them(elicited_run):
    plan, _ = elicited_plan(elicited_run.snapshot)
    ElicitationAnswers.objects.filter(expert__user__username="bob").update(weights=None)
    assert elicited_plan(elicited_run.snapshot) == ([], [{"metric": "AUC", "reason": "bob no longer has its weights"}])
    with pytest.raises(ValueError) as refused:
        elicited_columns(elicited_run.snapshot, plan)
    assert str(refused.value) == "AUC: its elicited weights changed after the analysis was launched"
    ElicitationAnswers.objects.all().delete()
    assert elicited_plan(elicited_run.snapshot) == (
        [],
        [{"metric": "AUC", "reason": "bob, carol no longer have its weights"}],
    )


def test_a_candidate_without_predictions_is_held_and_the_others_resampled(elicited_run):
    plan, _ = elicited_plan(elicited_run.snapshot)
    CandidatePredictionArrays.objects.filter(candidate__name="JRip").delete()
    assert elicited_plan(elicited_run.snapshot) == (
        [{"metric": "AUC", "prediction_sets": {"J48": _two()}}],
        [{"metric": "AUC", "reason": "JRip has no predictions any more"}],
    )
    with pytest.raises(ValueError) as refused:
        elicited_columns(elicited_run.snapshot, plan)
    assert str(refused.value) == "AUC: JRip's predictions changed after the analysis was launched"


def test_a_candidate_whose_newest_set_has_other_classes_is_held_with_why(elicited_run):
    three = "candidate,y_true,y_pred\nJRip,A,A\nJRip,B,C\nJRip,C,B\n"
    evaluation_services.prediction_set_import(
        study=elicited_run.study, stream=io.BytesIO(three.encode()), name="three.csv", uploaded_by=None
    )
    assert elicited_plan(elicited_run.snapshot) == (
        [{"metric": "AUC", "prediction_sets": {"J48": _two()}}],
        [{"metric": "AUC", "reason": "JRip: its set's classes (A, B, C) are not the elicited metric's"}],
    )


def test_a_candidate_whose_run_values_differ_from_its_set_now_is_held(elicited_run):
    snapshot = copy.deepcopy(elicited_run.snapshot)
    snapshot["expert_values"][0]["values"]["J48"][1] += 1e-6  # carol's own AUC of J48 in the run
    assert elicited_plan(snapshot) == (
        [{"metric": "AUC", "prediction_sets": {"JRip": _two()}}],
        [{"metric": "AUC", "reason": "J48's values in the run differ from those its newest prediction set gives now"}],
    )
