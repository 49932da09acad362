"""Validation runs on the Django side: snapshot, launch, claim, execute,
results, recovery and the ``run_validation`` command (METHOD.md 4-6,
FORMATS.md ``approve-results/1``).

The tests pass in both configurations:

* the defaults (SQLite, Celery eager);
* ``DATABASE_URL=postgres://...`` and ``REDIS_URL=redis://...``, where Celery
  is *not* eager and no worker runs. Tests that need a run executed call
  ``engine.services.run_execute`` (or the task function) directly; tests that
  go through Celery force eager execution with the ``eager_celery`` fixture
  (the project's conftest.py).

In a ``db`` test the test's transaction never commits, so the on-commit
enqueue of ``run_launch`` never fires by itself: launching never executes
anything unless the test says so.
"""

import copy
import json
import threading
import time
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from celery.exceptions import Ignore, Retry, SoftTimeLimitExceeded
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.utils import timezone

from engine import core, disagreement, services
from engine import results as engine_results
from engine import selectors as engine_selectors
from engine import snapshot as engine_snapshot
from engine import tasks as engine_tasks
from engine.models import Run
from engine.robustness import competition_ranks, ranking_order
from engine.selectors import candidate_individual_scores, results_document, results_json
from engine.services import (
    MAX_ATTEMPTS,
    run_claim,
    run_execute,
    run_launch,
    runs_recover_stale,
)
from engine.tasks import execute_run
from workspace import services as workspace
from workspace.bundles import study_import_bundle
from workspace.errors import PhaseConflict
from workspace.models import Membership, Phase, Study

# The example study of FORMATS.md, as the app ships it.
CASE_STUDY_PATH = Path(__file__).resolve().parents[2] / "workspace" / "demo" / "case-study-1.json"

# METHOD.md 6.3.
CONSENSUS = [0.5295, 0.2273, 0.2432]
INFLUENCE = [0.3681, 0.2454, 0.1718, 0.2147]
EXPERTS = ["statistician", "informatician", "researcher", "clinician"]
METRICS = ["Success rate", "Fold accuracy stdev", "Comprehensibility rating"]
SELECTED_ATTRIBUTES = ["Accuracy", "Consistency", "Comprehensibility"]
CANDIDATES = ["J48", "JRip", "RandomForest", "IBk"]  # bundle order

# Individual scores of the case study by hand, from the default ranges in the
# file (every expert shares them, so the group score g equals each expert's
# individual score m̄ = (m - b^l) / (b^u - b^l), METHOD.md 4):
#   Success rate [0.80, 0.95], Fold accuracy stdev [0.15, 0.05] (lower is
#   better), Comprehensibility rating [6, 10].
#   JRip: (0.865 - 0.80) / (0.95 - 0.80) = 0.4333...
#         (0.100 - 0.15) / (0.05 - 0.15) = 0.5
#         (8 - 6) / (10 - 6)             = 0.5
#   J48:  (0.847 - 0.80) / (0.95 - 0.80) = 0.3133...
#         (0.106 - 0.15) / (0.05 - 0.15) = 0.44
#         (7 - 6) / (10 - 6)             = 0.25
#   CEF = a . g with a the consensus weights (neither is vetoed).
#   RandomForest and IBk: rating 0 < 6 -> m̄ = 0 for every expert -> vetoed.
HAND_G = {
    "JRip": [(0.865 - 0.80) / (0.95 - 0.80), (0.1 - 0.15) / (0.05 - 0.15), (8 - 6) / (10 - 6)],
    "J48": [(0.847 - 0.80) / (0.95 - 0.80), (0.106 - 0.15) / (0.05 - 0.15), (7 - 6) / (10 - 6)],
}


# --- fixtures and helpers ------------------------------------------------------


def case_study_bundle(phase="closed"):
    """case-study-1.json, imported in ``phase`` (later sections removed)."""
    bundle = json.loads(CASE_STUDY_PATH.read_text(encoding="utf-8"))
    bundle["phase"] = phase
    if phase in ("draft", "voting"):
        for key in ("priorities", "ranges", "peer_weights"):
            bundle.pop(key)
    if phase == "draft":
        bundle.pop("votes")
    return bundle


@pytest.fixture
def study(db):
    """The closed case study."""
    study = study_import_bundle(bundle=case_study_bundle())
    assert study.phase == Phase.CLOSED
    return study


def expert(study, username):
    return Membership.objects.get(study=study, role="expert", user__username=username)


def launch(study, **kwargs):
    """Launch a run; in a ``db`` test nothing is enqueued (no commit)."""
    return run_launch(study=study, launched_by=study.designer, **kwargs)


def launched(study, **kwargs):
    """A launched run with its snapshot taken, as the worker that claims it
    takes it (``run_snapshot_take``)."""
    run = launch(study, **kwargs)
    services.run_snapshot_take(run_id=run.pk)
    run.refresh_from_db()
    return run


def executed(run):
    outcome = run_execute(run_id=run.pk)
    run.refresh_from_db()
    return outcome, run


def row(run_id):
    """Every column of a run, to check that a call changed nothing."""
    return Run.objects.filter(pk=run_id).values().get()


def expire_lease(run_id, seconds=1):
    Run.objects.filter(pk=run_id).update(lease_expires_at=timezone.now() - timedelta(seconds=seconds))


def file_inputs():
    """W and V straight from the file (experts in file order)."""
    bundle = json.loads(CASE_STUDY_PATH.read_text(encoding="utf-8"))
    weights = np.array([[bundle["priorities"][e]["weights"][a] for a in SELECTED_ATTRIBUTES] for e in EXPERTS])
    peers = np.array([[bundle["peer_weights"][e][other] for other in EXPERTS] for e in EXPERTS])
    return weights, peers


def by_name(results):
    return {c["name"]: c for c in results["candidates"]}


# --- 1. case study 1 end to end ----------------------------------------------------


def test_case_study_1_figures(study):
    run = launch(study)
    outcome, run = executed(run)
    assert outcome.status == Run.Status.SUCCEEDED
    assert run.status == Run.Status.SUCCEEDED and run.error == "" and run.attempts == 1
    assert run.finished_at is not None and run.duration_seconds is not None and run.duration_seconds >= 0
    results = run.results

    assert results["metric_weights"] == pytest.approx(CONSENSUS, abs=5e-5)
    # One metric per attribute: the attribute weights are the metric weights.
    assert results["attribute_weights"] == pytest.approx(CONSENSUS, abs=5e-5)
    assert sum(results["metric_weights"]) == pytest.approx(1, abs=1e-12)
    assert results["expert_influence"] == pytest.approx(INFLUENCE, abs=5e-5)

    # The literal aggregation of W, computed from the file's own numbers.
    weights, peers = file_inputs()
    literal_a, layers = core.aggregate_literal(peers, weights)
    assert results["iterations"] == layers
    assert results["iterations"] > 0
    assert results["metric_weights"] == pytest.approx(literal_a.tolist(), abs=1e-8)

    candidates = by_name(results)
    assert [c["name"] for c in results["candidates"]] == ["JRip", "J48", "IBk", "RandomForest"]
    assert [c["rank"] for c in results["candidates"]] == [1, 2, 3, 3]
    # Within the tie, the higher weighted score first.
    assert candidates["IBk"]["weighted_score"] > candidates["RandomForest"]["weighted_score"]
    assert candidates["IBk"]["weighted_score"] == pytest.approx(0.5772, abs=5e-5)
    assert candidates["RandomForest"]["weighted_score"] == pytest.approx(0.5764, abs=5e-5)

    a = results["metric_weights"]
    for name, g in HAND_G.items():
        hand_cef = sum(w * x for w, x in zip(a, g, strict=False))
        assert candidates[name]["vetoed"] is False and candidates[name]["vetoes"] == []
        assert candidates[name]["group_scores"] == pytest.approx(g, abs=1e-9)
        assert candidates[name]["cef"] == pytest.approx(hand_cef, abs=1e-9)
        assert candidates[name]["weighted_score"] == pytest.approx(hand_cef, abs=1e-9)
    assert candidates["JRip"]["cef"] == pytest.approx(0.4647, abs=5e-5)
    assert candidates["J48"]["cef"] == pytest.approx(0.3267, abs=5e-5)

    for name in ("RandomForest", "IBk"):
        assert candidates[name]["vetoed"] is True
        assert candidates[name]["cef"] == 0
        # [expert, metric, value, least acceptable, desired], by expert then metric.
        assert candidates[name]["vetoes"] == [[i, 2, 0, 6, 10] for i in range(len(EXPERTS))]
        assert candidates[name]["group_scores"][2] == 0
    # The names the document needs are stored with the results (serving it
    # never reads the snapshot).
    assert results["layout"] == engine_results.RESULTS_LAYOUT
    assert results["study"] == "Cancer diagnosis from microarray data"
    assert (results["experts"], results["metrics"], results["selected_attributes"]) == (
        EXPERTS,
        METRICS,
        SELECTED_ATTRIBUTES,
    )


def test_paper_cef_from_its_own_group_scores(study):
    _, run = executed(launch(study))
    a = np.array(run.results["metric_weights"])
    assert float(a @ [0.475, 0.52, 0.687]) == pytest.approx(0.537, abs=5e-4)  # J48 in the paper
    assert float(a @ [0.595, 0.66, 1]) == pytest.approx(0.708, abs=5e-4)  # JRip in the paper


# METHOD.md 6.3's W, each expert's row over its columns: the spreads by hand.
W_MIN, W_MAX = [0.37, 0.15, 0.17], [0.63, 0.31, 0.38]
W_MEAN = [(0.63 + 0.56 + 0.47 + 0.37) / 4, (0.20 + 0.25 + 0.15 + 0.31) / 4, (0.17 + 0.19 + 0.38 + 0.32) / 4]
# The AHP-OS consensus of W (tests/engine/test_disagreement.py works it out by hand).
W_CONSENSUS = 0.9196


def test_case_study_1_disagreement(study):
    """The disagreement measures stored with the results (layout 3)."""
    _, run = executed(launch(study))
    results = run.results
    weights, _ = file_inputs()
    # One metric per attribute: attribute and metric weights are the same rows, W itself.
    assert results["expert_attribute_weights"] == results["expert_metric_weights"]
    assert np.array(results["expert_metric_weights"]) == pytest.approx(weights, abs=1e-15)
    assert all(sum(row) == pytest.approx(1, abs=1e-15) for row in results["expert_metric_weights"])

    stored = results["disagreement"]
    # Sets, not lists: PostgreSQL's jsonb keeps no key order in what is
    # stored (the document writes its own order out, tested with its bytes).
    assert set(stored) == {"attribute_weights", "metric_weights", "consensus"}
    assert stored["attribute_weights"] == stored["metric_weights"]
    spread = stored["metric_weights"]
    assert set(spread) == {"min", "max", "mean", "stdev"}
    assert spread["min"] == pytest.approx(W_MIN, abs=1e-15)
    assert spread["max"] == pytest.approx(W_MAX, abs=1e-15)
    assert spread["mean"] == pytest.approx(W_MEAN, abs=1e-15)
    # Population standard deviation (ddof = 0) of the accuracy column.
    assert spread["stdev"][0] == pytest.approx(np.sqrt(np.mean((weights[:, 0] - W_MEAN[0]) ** 2)), abs=1e-15)
    consensus = {"value": pytest.approx(W_CONSENSUS, abs=5e-5), "wording": "very high"}
    assert stored["consensus"] == {
        "measure": "ahp_os_s_star",
        "scale_max": 9,
        "attribute_weights": consensus,
        "metric_weights": consensus,
    }

    # Every expert's range [6, 10] vetoes a comprehensibility rating of 0.
    shares = {c["name"]: c["veto_shares"] for c in results["candidates"]}
    assert shares == {"JRip": [0, 0, 0], "J48": [0, 0, 0], "IBk": [0, 0, 1.0], "RandomForest": [0, 0, 1.0]}


def richer_snapshot(snapshot):
    """The case study's snapshot with a second Accuracy metric, AUC, which
    the experts split their Accuracy weight over unequally and on which
    their ranges differ: metric and attribute weights then differ, and
    some vetoes come from part of the experts only."""
    snapshot = copy.deepcopy(snapshot)
    snapshot["metrics"].insert(1, {"name": "AUC", "attribute": "Accuracy", "better": "higher", "unit": ""})
    auc_share = [0.5, 0.7, 0.2, 0.6]
    for i, share in enumerate(auc_share):
        accuracy = snapshot["metric_weights"][i][0]
        snapshot["metric_weights"][i][0:1] = [accuracy * (1 - share), accuracy * share]
        snapshot["lower"][i].insert(1, [0.6, 0.7, 0.75, 0.8][i])
        snapshot["upper"][i].insert(1, 0.95)
    # J48, JRip, RandomForest, IBk: vetoed on AUC by 2, 0, 1 and 4 of the 4 experts.
    for c, auc in enumerate([0.72, 0.9, 0.78, 0.6]):
        snapshot["measurements"][c].insert(1, auc)
    return snapshot


def test_stored_measures_are_those_of_engine_disagreement(study):
    snapshot = richer_snapshot(launched(study).snapshot)
    results = engine_results.evaluate_snapshot(snapshot)
    attribute_weights = np.array(snapshot["attribute_weights"])
    metric_weights = np.array(snapshot["metric_weights"])
    assert results["expert_attribute_weights"] == disagreement.weight_rows(attribute_weights).tolist()
    assert results["expert_metric_weights"] == disagreement.weight_rows(metric_weights).tolist()
    for key, weights in (("attribute_weights", attribute_weights), ("metric_weights", metric_weights)):
        assert results["disagreement"][key] == {
            field: values.tolist() for field, values in disagreement.weight_spread(weights)._asdict().items()
        }
        value = disagreement.ahp_consensus(weights)
        assert results["disagreement"]["consensus"][key] == {
            "value": value,
            "wording": disagreement.consensus_wording(value),
        }
    # AUC splits Accuracy: four metric weights per expert, over three attributes.
    assert np.shape(results["expert_metric_weights"]) == (4, 4)
    assert np.shape(results["expert_attribute_weights"]) == (4, 3)
    assert (
        results["disagreement"]["consensus"]["metric_weights"]["value"]
        < results["disagreement"]["consensus"]["attribute_weights"]["value"]
    )
    shares = disagreement.veto_shares(
        np.array(snapshot["lower"]), np.array(snapshot["upper"]), np.array(snapshot["measurements"])
    )
    by_candidate = {c["name"]: c for c in results["candidates"]}
    for index, name in enumerate(CANDIDATES):
        assert by_candidate[name]["veto_shares"] == shares[index].tolist()
        assert by_candidate[name]["vetoed"] == (shares[index] > 0).any()
    assert {name: c["veto_shares"][1] for name, c in by_candidate.items()} == {
        "J48": 0.5,
        "JRip": 0.0,
        "RandomForest": 0.25,
        "IBk": 1.0,
    }
    assert by_candidate["J48"]["vetoed"] and not by_candidate["JRip"]["vetoed"]


def test_snapshot_holds_every_input_in_order(study):
    run = launch(study)
    # Not read by the launch: the worker that claims the run takes it.
    assert Run.objects.get(pk=run.pk).snapshot is None
    assert services.run_snapshot_take(run_id=run.pk) == Run.objects.get(pk=run.pk).snapshot
    snapshot = Run.objects.get(pk=run.pk).snapshot  # as stored
    weights, peers = file_inputs()
    assert snapshot["version"] == engine_snapshot.SNAPSHOT_VERSION
    assert snapshot["study"] == {"id": study.pk, "title": "Cancer diagnosis from microarray data"}
    assert snapshot["tolerance"] == 1e-9
    assert snapshot["experts"] == EXPERTS
    assert snapshot["attributes"] == SELECTED_ATTRIBUTES  # Efficiency got no vote
    assert [m["name"] for m in snapshot["metrics"]] == METRICS
    assert [m["attribute"] for m in snapshot["metrics"]] == SELECTED_ATTRIBUTES
    assert [m["better"] for m in snapshot["metrics"]] == ["higher", "lower", "higher"]
    assert np.allclose(snapshot["attribute_weights"], weights, atol=1e-12)
    assert np.allclose(snapshot["metric_weights"], weights, atol=1e-12)
    assert np.allclose(snapshot["peer_weights"], peers, atol=1e-12)
    assert snapshot["lower"] == [[0.8, 0.15, 6]] * 4
    assert snapshot["upper"] == [[0.95, 0.05, 10]] * 4
    assert snapshot["candidates"] == CANDIDATES
    assert snapshot["measurements"] == [[0.847, 0.106, 7], [0.865, 0.1, 8], [0.924, 0.089, 0], [0.921, 0.084, 0]]
    assert run.status == Run.Status.QUEUED and run.results is None and run.attempts == 0
    assert run.launched_by == study.designer


def test_tolerance_is_stored_and_used(study):
    _, run = executed(launch(study, tolerance=1e-4))
    assert run.tolerance == 1e-4 and run.snapshot["tolerance"] == 1e-4
    weights, peers = file_inputs()
    assert run.results["iterations"] == core.aggregate_literal(peers, weights, tolerance=1e-4)[1]
    assert run.results["iterations"] < core.aggregate_literal(peers, weights)[1]


@pytest.mark.parametrize("tolerance", [0.0, 1.0, -1e-9, 1, "1e-9"])
def test_launch_refuses_a_bad_tolerance(study, tolerance):
    with pytest.raises(ValueError):
        launch(study, tolerance=tolerance)
    assert Run.objects.count() == 0


# --- launch: enqueue after commit ---------------------------------------------


def test_launch_enqueues_once_after_commit(study, django_capture_on_commit_callbacks, monkeypatch):
    enqueued = []
    monkeypatch.setattr(services, "_enqueue", enqueued.append)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = launch(study)
    assert len(callbacks) == 1
    assert enqueued == []  # nothing before the commit
    callbacks[0]()
    assert enqueued == [run.pk]


def test_launch_runs_through_celery_after_commit(study, django_capture_on_commit_callbacks, eager_celery):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run = launch(study)
        assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED  # not yet committed
    # The launch's, then the finished run's event (workspace.events) that it adds when executed.
    assert len(callbacks) == 2
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert run.results["expert_influence"] == pytest.approx(INFLUENCE, abs=5e-5)


# --- 3. snapshot immutability ------------------------------------------------------


def test_run_keeps_its_snapshot_when_the_study_changes(study):
    run = launch(study)
    before = engine_snapshot.study_snapshot(study=study)  # the inputs at launch
    assert Run.objects.get(pk=run.pk).snapshot is None  # not taken yet

    # Change every kind of input after the launch, before the run executes.
    workspace.measurements_set(study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.9}])
    workspace.study_reopen_assessment(study=study)
    statistician = expert(study, "statistician")
    workspace.peer_weights_set(
        expert=statistician, weights={"statistician": 0.4, "informatician": 0.2, "researcher": 0.2, "clinician": 0.2}
    )
    workspace.ranges_set(expert=statistician, ranges={"Success rate": [0.85, 0.99]})
    workspace.prioritisation_set(
        expert=statistician, method="direct", weights={"Accuracy": 1, "Consistency": 1, "Comprehensibility": 1}
    )

    run.refresh_from_db()
    assert run.snapshot == before
    outcome, run = executed(run)
    assert outcome.status == Run.Status.SUCCEEDED
    assert run.snapshot == before
    # The results are those of the inputs at launch.
    assert run.results["metric_weights"] == pytest.approx(CONSENSUS, abs=5e-5)
    assert run.results["expert_influence"] == pytest.approx(INFLUENCE, abs=5e-5)
    a = run.results["metric_weights"]
    j48 = by_name(run.results)["J48"]
    assert j48["cef"] == pytest.approx(sum(w * x for w, x in zip(a, HAND_G["J48"], strict=False)), abs=1e-9)
    results = copy.deepcopy(run.results)

    # A new run sees the new inputs; the old one is untouched by it.
    workspace.study_close_assessment(study=study)
    _, new = executed(launch(study))
    assert new.status == Run.Status.SUCCEEDED
    assert new.snapshot["measurements"][0][0] == 0.9
    assert new.snapshot["peer_weights"][0] == [0.4, 0.2, 0.2, 0.2]
    assert new.snapshot["lower"][0][0] == 0.85 and new.snapshot["upper"][0][0] == 0.99
    assert new.snapshot["metric_weights"][0] == pytest.approx([1 / 3] * 3)
    assert new.snapshot != before
    assert new.results["expert_influence"] != pytest.approx(INFLUENCE, abs=5e-5)
    assert new.results["metric_weights"] != pytest.approx(CONSENSUS, abs=5e-5)
    assert by_name(new.results)["J48"]["cef"] != pytest.approx(j48["cef"], abs=1e-6)
    run.refresh_from_db()
    assert run.snapshot == before
    assert run.results == results


# --- 4. launching needs a closed study ----------------------------------------------


@pytest.mark.parametrize("phase", ["draft", "voting", "assessment", "reopened"])
def test_launch_refused_unless_closed(db, phase, django_capture_on_commit_callbacks):
    if phase == "reopened":
        study = workspace.study_reopen_assessment(study=study_import_bundle(bundle=case_study_bundle()))
    else:
        study = study_import_bundle(bundle=case_study_bundle(phase))
    current = Phase.ASSESSMENT if phase == "reopened" else phase
    assert Study.objects.get(pk=study.pk).phase == current
    Run.objects.create(study=study, snapshot={})  # an earlier run, to count
    with (
        django_capture_on_commit_callbacks(execute=False) as callbacks,
        pytest.raises(PhaseConflict, match=rf"closed study.*{current}"),
    ):
        launch(study)
    assert callbacks == []
    assert Run.objects.count() == 1
    assert Study.objects.get(pk=study.pk).phase == current


# --- 5. claiming --------------------------------------------------------------------


def test_execute_twice_runs_once(study):
    run = launch(study)
    _, first = executed(run)
    assert first.status == Run.Status.SUCCEEDED and first.attempts == 1
    stored = row(run.pk)
    outcome = run_execute(run_id=run.pk)
    assert outcome.status == Run.Status.SUCCEEDED and outcome.retry_in is None
    assert row(run.pk) == stored  # attempts, results, finished_at, lease: all unchanged


def test_succeeded_run_is_never_recomputed(study):
    _, run = executed(launch(study))
    stored = row(run.pk)
    # Were it recomputed, this snapshot would give other results (or fail).
    snapshot = copy.deepcopy(run.snapshot)
    snapshot["measurements"][1] = [0.1, 0.2, 1]
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    for _ in range(2):
        assert run_execute(run_id=run.pk).status == Run.Status.SUCCEEDED
    after = row(run.pk)
    assert after.pop("snapshot") == snapshot
    stored.pop("snapshot")
    assert after == stored


def test_failed_run_is_not_retried(study):
    run = launch(study)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error="gone", finished_at=timezone.now())
    stored = row(run.pk)
    assert run_execute(run_id=run.pk).status == Run.Status.FAILED
    assert row(run.pk) == stored


def test_missing_run(db):
    assert run_execute(run_id=987654).status == "missing"


def test_live_lease_is_left_alone(study):
    run = launch(study)
    assert run_claim(run_id=run.pk) == 1
    stored = row(run.pk)
    assert stored["status"] == Run.Status.RUNNING and stored["lease_expires_at"] > timezone.now()
    outcome = run_execute(run_id=run.pk)
    assert outcome.status == Run.Status.RUNNING
    remaining = (stored["lease_expires_at"] - timezone.now()).total_seconds()
    assert outcome.retry_in is not None and 0 < outcome.retry_in <= remaining + 1.5
    assert outcome.retry_in >= remaining  # not before the lease has expired
    assert row(run.pk) == stored
    assert run_claim(run_id=run.pk) is None


def test_task_retries_while_another_worker_holds_the_lease(study):
    run = launch(study)
    run_claim(run_id=run.pk)
    stored = row(run.pk)
    with pytest.raises(Retry):
        execute_run(run.pk)  # called directly: in-process whatever the broker
    assert row(run.pk) == stored


def test_task_executes_a_queued_run(study):
    run = launch(study)
    assert execute_run(run.pk) == Run.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.attempts == 1
    # A redelivery is a no-op, and not reported as a success (Celery logs it
    # as ignored).
    with pytest.raises(Ignore):
        execute_run(run.pk)
    assert Run.objects.get(pk=run.pk).attempts == 1


def test_expired_lease_is_taken_over(study):
    run = launch(study)
    assert run_claim(run_id=run.pk) == 1  # a worker that then died
    expire_lease(run.pk)
    outcome, run = executed(run)
    assert outcome.status == Run.Status.SUCCEEDED
    assert run.status == Run.Status.SUCCEEDED and run.attempts == 2
    assert run.results["expert_influence"] == pytest.approx(INFLUENCE, abs=5e-5)


def test_too_many_lost_workers_fail_the_run(study):
    run = launch(study)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        assert run_claim(run_id=run.pk) == attempt  # each worker dies while running it
        expire_lease(run.pk)
    outcome, run = executed(run)
    assert outcome.status == Run.Status.FAILED
    assert run.status == Run.Status.FAILED and run.results is None
    assert run.attempts == MAX_ATTEMPTS + 1
    assert f"lost {MAX_ATTEMPTS} times" in run.error and "launch it again" in run.error
    assert run.finished_at is not None
    # And it stays failed.
    stored = row(run.pk)
    assert run_execute(run_id=run.pk).status == Run.Status.FAILED
    assert row(run.pk) == stored


def test_last_allowed_attempt_still_runs(study):
    run = launch(study)
    for _ in range(MAX_ATTEMPTS - 1):
        run_claim(run_id=run.pk)
        expire_lease(run.pk)
    outcome, run = executed(run)
    assert outcome.status == Run.Status.SUCCEEDED and run.attempts == MAX_ATTEMPTS


def test_stale_attempt_cannot_overwrite_its_successor(study):
    run = launched(study)
    assert run_claim(run_id=run.pk) == 1
    expire_lease(run.pk)
    assert run_claim(run_id=run.pk) == 2
    assert services._finish(run.pk, 1, status=Run.Status.FAILED, error="stale worker") == 0
    current = Run.objects.get(pk=run.pk)
    assert current.status == Run.Status.RUNNING and current.attempts == 2 and current.error == ""
    assert current.finished_at is None
    # The holder of the run can finish it.
    results = engine_results.evaluate_snapshot(current.snapshot)
    assert services._finish(run.pk, 2, status=Run.Status.SUCCEEDED, results=results) == 1
    assert services._finish(run.pk, 2, status=Run.Status.FAILED, error="late") == 0  # finished: no second write
    current.refresh_from_db()
    assert current.status == Run.Status.SUCCEEDED and current.results == results


def test_execution_overtaken_by_a_takeover_is_superseded(study, monkeypatch):
    run = launch(study)
    evaluate = engine_results.evaluate_snapshot

    def slow_evaluate(snapshot):
        # While this worker computes, its lease expires and another takes over.
        expire_lease(run.pk)
        assert run_claim(run_id=run.pk) == 2
        return evaluate(snapshot)

    monkeypatch.setattr(services, "evaluate_snapshot", slow_evaluate)
    assert run_execute(run_id=run.pk).status == "superseded"
    current = Run.objects.get(pk=run.pk)
    assert current.status == Run.Status.RUNNING and current.attempts == 2 and current.results is None
    monkeypatch.setattr(services, "evaluate_snapshot", evaluate)
    # Attempt 2 holds a live lease, so a redelivery waits ...
    assert run_execute(run_id=run.pk).retry_in > 0
    # ... until it expires.
    expire_lease(run.pk)
    outcome, current = executed(current)
    assert outcome.status == Run.Status.SUCCEEDED and current.attempts == 3


# --- 6. invalid inputs end in "failed" ----------------------------------------------


def test_launch_is_refused_while_a_candidate_has_no_measurements(study):
    workspace.candidate_add(study=study, name="NaiveBayes")  # allowed in any phase
    runs_before = Run.objects.count()
    with pytest.raises(PhaseConflict) as refused:
        launch(study)
    assert str(refused.value) == "The run cannot start: a measurement is missing for NaiveBayes / Success rate."
    assert Run.objects.count() == runs_before


def test_one_missing_measurement_is_named(study):
    workspace.candidate_add(study=study, name="NaiveBayes")
    workspace.measurements_set(
        study=study,
        measurements=[
            {"candidate": "NaiveBayes", "metric": "Success rate", "value": 0.9},
            {"candidate": "NaiveBayes", "metric": "Fold accuracy stdev", "value": 0.1},
            {"candidate": "NaiveBayes", "metric": "Training time", "value": 1.0},  # not selected
        ],
    )
    with pytest.raises(PhaseConflict, match="NaiveBayes / Comprehensibility rating") as refused:
        launch(study)
    assert "Success rate" not in str(refused.value)


def test_a_snapshot_with_a_missing_measurement_fails_the_run(study):
    # Launch refuses such a study; a snapshot can still carry a gap (written
    # by an older version, or edited): the run then fails, naming it.
    run = launched(study)
    snapshot = copy.deepcopy(run.snapshot)
    snapshot["measurements"][1][2] = None
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    outcome, run = executed(run)
    assert outcome.status == Run.Status.FAILED
    assert run.status == Run.Status.FAILED and run.results is None
    assert "a measurement is missing for JRip / Comprehensibility rating" in run.error
    assert run.finished_at is not None and run.attempts == 1


def test_zero_peer_weight_fails_the_run(study):
    run = launched(study)
    snapshot = copy.deepcopy(run.snapshot)
    snapshot["peer_weights"][0] = [0.8, 0.0, 0.1, 0.1]
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    outcome, run = executed(run)
    assert outcome.status == Run.Status.FAILED
    assert run.status == Run.Status.FAILED and run.results is None
    assert run.error.startswith("The inputs cannot be evaluated")
    # Named by the study's experts, not by array positions.
    assert "statistician's peer weight for informatician is 0" in run.error
    assert "silence" in run.error  # says why


def test_equal_range_bounds_fail_the_run_naming_expert_and_metric(study):
    run = launched(study)
    snapshot = copy.deepcopy(run.snapshot)
    snapshot["upper"][2][0] = snapshot["lower"][2][0]
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    _, run = executed(run)
    assert run.status == Run.Status.FAILED
    assert "researcher's acceptable range for Success rate has equal bounds (0.8)" in run.error


def test_missing_peer_weight_is_named(study):
    run = launched(study)
    snapshot = copy.deepcopy(run.snapshot)
    snapshot["peer_weights"][1][3] = None
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    _, run = executed(run)
    assert run.status == Run.Status.FAILED
    assert "peer weight" in run.error and "informatician" in run.error and "clinician" in run.error


def test_a_bug_in_the_engine_still_ends_the_run(study, monkeypatch):
    def broken(snapshot):
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(services, "evaluate_snapshot", broken)
    outcome, run = executed(launch(study))
    assert outcome.status == Run.Status.FAILED
    assert run.status == Run.Status.FAILED and run.error == "Internal error: ZeroDivisionError: oops"


def test_soft_time_limit_fails_the_run_with_a_readable_error(study, monkeypatch, settings):
    def too_slow(snapshot):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(services, "evaluate_snapshot", too_slow)
    run = launch(study)
    assert execute_run(run.pk) == "failed"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.results is None
    assert f"{settings.CELERY_TASK_SOFT_TIME_LIMIT} s time limit" in run.error
    assert run.finished_at is not None


def test_succeeded_needs_results_in_the_database(study):
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(study=study, snapshot={}, status=Run.Status.SUCCEEDED, results=None)
    run = Run.objects.create(study=study, snapshot={})
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(status="done")
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED, results={"candidates": []})


# --- 7. ranks ------------------------------------------------------------------------


def test_competition_ranks():
    cef = [0.3, 0.5, 0.3, 0.1, 0.0, 0.0, 0.3]
    weighted = [0.3, 0.5, 0.4, 0.1, 0.6, 0.7, 0.3]
    order, ranks = ranking_order(cef, weighted).tolist(), competition_ranks(cef).tolist()
    # 0.5 | 0.3 0.3 0.3 | 0.1 | 0 0: ranks 1 | 2 2 2 | 5 | 6 6; within a tie the higher weighted score,
    # then the original order.
    assert order == [1, 2, 0, 6, 3, 5, 4]
    assert ranks == [2, 1, 2, 5, 6, 6, 2]  # "1, 2, 2, 2, 5, 6, 6" in order
    tied = [0.9, 0.4, 0.4, 0.2]
    assert ranking_order(tied, tied).tolist() == [0, 1, 2, 3] and competition_ranks(tied).tolist() == [1, 2, 2, 4]
    assert ranking_order([], []).tolist() == [] and competition_ranks([]).tolist() == []


# --- 8. the results document ---------------------------------------------------------


# The top-level keys of an approve-results/1 document, in FORMATS.md's order.
DOCUMENT_KEYS = [
    "format",
    "study",
    "run",
    "launched_at",
    "tolerance",
    "iterations",
    "selected_attributes",
    "metrics",
    "attribute_weights",
    "metric_weights",
    "expert_influence",
    "disagreement",
    "consistency",
    "candidates",
]


def test_results_document(study):
    _, run = executed(launch(study))
    document = results_document(run=run, individual=True)
    assert set(document) == set(DOCUMENT_KEYS)
    assert json.loads(json.dumps(document)) == document
    assert document["format"] == "approve-results/1"
    assert document["study"] == "Cancer diagnosis from microarray data"
    assert document["run"] == run.pk
    assert document["launched_at"].endswith("Z")
    assert datetime.fromisoformat(document["launched_at"].replace("Z", "+00:00")) == run.launched_at
    assert document["tolerance"] == 1e-9
    assert document["iterations"] == run.results["iterations"]
    assert document["selected_attributes"] == SELECTED_ATTRIBUTES
    assert document["metrics"] == METRICS
    assert list(document["attribute_weights"]) == SELECTED_ATTRIBUTES
    assert list(document["attribute_weights"].values()) == pytest.approx(CONSENSUS, abs=5e-5)
    assert list(document["metric_weights"]) == METRICS
    assert list(document["metric_weights"].values()) == pytest.approx(CONSENSUS, abs=5e-5)
    assert list(document["expert_influence"]) == EXPERTS
    assert list(document["expert_influence"].values()) == pytest.approx(INFLUENCE, abs=5e-5)
    assert [(c["name"], c["rank"]) for c in document["candidates"]] == [
        ("JRip", 1),
        ("J48", 2),
        ("IBk", 3),
        ("RandomForest", 3),
    ]
    for candidate in document["candidates"]:
        assert set(candidate) == {
            "name",
            "rank",
            "cef",
            "weighted_score",
            "vetoed",
            "vetoes",
            "group_scores",
            "veto_shares",
            "individual_scores",
        }
        assert list(candidate["group_scores"]) == METRICS
        assert list(candidate["veto_shares"]) == METRICS
        assert list(candidate["individual_scores"]) == EXPERTS
        assert all(list(scores) == METRICS for scores in candidate["individual_scores"].values())
        assert candidate["individual_scores"] == candidate_individual_scores(run=run, candidate_name=candidate["name"])
    jrip = document["candidates"][0]
    assert list(jrip["group_scores"].values()) == pytest.approx(HAND_G["JRip"], abs=1e-9)
    for scores in jrip["individual_scores"].values():
        assert list(scores.values()) == pytest.approx(HAND_G["JRip"], abs=1e-12)
    ibk = document["candidates"][2]
    assert ibk["vetoed"] and len(ibk["vetoes"]) == 4
    assert all(scores["Comprehensibility rating"] == 0 for scores in ibk["individual_scores"].values())

    compact = results_document(run=run)  # FORMATS.md "Size": no individual scores unless asked for
    assert all("individual_scores" not in c for c in compact["candidates"])
    assert {k: v for k, v in compact.items() if k != "candidates"} == {
        k: v for k, v in document.items() if k != "candidates"
    }
    assert compact["candidates"] == [
        {k: v for k, v in c.items() if k != "individual_scores"} for c in document["candidates"]
    ]
    assert ibk["vetoes"] == [
        {"expert": e, "metric": "Comprehensibility rating", "value": 0, "range": [6, 10]} for e in EXPERTS
    ]
    # Keys in FORMATS.md's order (the stored JSON keeps no key order).
    assert list(document) == DOCUMENT_KEYS
    assert list(ibk) == [
        "name",
        "rank",
        "cef",
        "weighted_score",
        "vetoed",
        "vetoes",
        "group_scores",
        "veto_shares",
        "individual_scores",
    ]
    assert ibk["veto_shares"] == {"Success rate": 0, "Fold accuracy stdev": 0, "Comprehensibility rating": 1.0}
    shares = {c["name"]: c["veto_shares"] for c in document["candidates"]}
    assert shares["RandomForest"] == ibk["veto_shares"]
    assert shares["JRip"] == shares["J48"] == dict.fromkeys(METRICS, 0)
    # The disagreement measures by name, in the document's order.
    measures = document["disagreement"]
    assert list(measures) == ["attribute_weights", "metric_weights", "consensus"]
    assert list(measures["attribute_weights"]) == SELECTED_ATTRIBUTES
    assert list(measures["metric_weights"]) == METRICS
    accuracy = measures["attribute_weights"]["Accuracy"]
    assert list(accuracy) == ["min", "max", "mean", "stdev"]
    assert [accuracy["min"], accuracy["max"], accuracy["mean"]] == pytest.approx([0.37, 0.63, W_MEAN[0]], abs=1e-15)
    assert [m["stdev"] for m in measures["metric_weights"].values()] == run.results["disagreement"]["metric_weights"][
        "stdev"
    ]
    assert measures["consensus"] == {
        "measure": "ahp_os_s_star",
        "scale_max": 9,
        "attribute_weights": {"value": pytest.approx(W_CONSENSUS, abs=5e-5), "wording": "very high"},
        "metric_weights": {"value": pytest.approx(W_CONSENSUS, abs=5e-5), "wording": "very high"},
    }
    assert list(measures["consensus"]) == ["measure", "scale_max", "attribute_weights", "metric_weights"]
    assert list(measures["consensus"]["metric_weights"]) == ["value", "wording"]


def layout_2(results):
    """Results as layout 2 stored them (before the disagreement measures):
    the same but the layout-3 keys, with the document text built from them
    (by the readers, which leave the optional fields out)."""
    old = {key: value for key, value in results.items() if key not in LAYOUT_3_KEYS}
    old["layout"] = 2
    old["candidates"] = [{k: v for k, v in c.items() if k != "veto_shares"} for c in results["candidates"]]
    old["document"] = engine_selectors.document_tail(old)
    return old


LAYOUT_3_KEYS = ("expert_attribute_weights", "expert_metric_weights", "disagreement", "document")


def test_results_of_layout_2_are_served_without_the_optional_fields(study):
    """A run that finished under the previous code (or was not migrated)
    still has a document: the same, without "disagreement" and "veto_shares"."""
    _, run = executed(launch(study))
    full = json.loads(results_json(run=run))
    # "consistency" (issue 16) is optional too: runs stored before it lack it.
    run.results = layout_2({key: value for key, value in run.results.items() if key != "consistency"})
    document = results_document(run=run, individual=True)
    assert list(document) == [key for key in DOCUMENT_KEYS if key not in ("disagreement", "consistency")]
    assert all("veto_shares" not in candidate for candidate in document["candidates"])
    full.pop("disagreement")
    full.pop("consistency")
    for candidate in full["candidates"]:
        candidate.pop("veto_shares")
    assert results_json(run=run) == json.dumps(full, separators=(",", ":"), ensure_ascii=False).encode()
    del run.results["document"]
    assert results_json(run=run) == json.dumps(full, separators=(",", ":"), ensure_ascii=False).encode()


def test_results_json_is_the_document_compactly(study, django_assert_num_queries):
    _, run = executed(launch(study))
    run = Run.objects.defer("snapshot").get(pk=run.pk)
    text = results_json(run=run).decode()
    assert text == json.dumps(results_document(run=run), separators=(",", ":"), ensure_ascii=False)
    # The stored text, read by the database without loading the results.
    with django_assert_num_queries(1):
        stored = engine_selectors.runs_with_document(queryset=Run.objects).get(pk=run.pk)
        assert results_json(run=stored).decode() == text
    assert text == results_json(run=Run.objects.get(pk=run.pk)).decode()
    # The fallback for results stored without the text builds the same bytes.
    del run.results["document"]
    assert results_json(run=run).decode() == text
    assert ": " not in text and "\n" not in text and "individual_scores" not in text
    assert '"expert_influence":{' in text and '},"disagreement":{"attribute_weights":{"Accuracy":{"min":' in text
    assert '"veto_shares":{"Success rate":0.0,"Fold accuracy stdev":0.0,"Comprehensibility rating":1.0}}' in text
    assert "expert_metric_weights" not in text and "expert_attribute_weights" not in text
    full = results_json(run=run, individual=True).decode()
    assert full == json.dumps(results_document(run=run, individual=True), separators=(",", ":"), ensure_ascii=False)
    assert json.loads(full)["candidates"][0]["individual_scores"]["statistician"] == {
        metric: pytest.approx(g, abs=1e-12) for metric, g in zip(METRICS, HAND_G["JRip"], strict=True)
    }


def test_results_json_keeps_names_as_written(study):
    workspace.candidate_update(candidate=study.candidates.get(name="J48"), name="Ärzte-Baum \u201cC4.5\u201d")
    workspace.study_update(study=study, title="Étude «1»")
    _, run = executed(launch(study))
    text = results_json(run=run).decode()
    assert '"study":"Étude «1»"' in text and '"name":"Ärzte-Baum \u201cC4.5\u201d"' in text


@pytest.mark.parametrize("batch", [1, 7, 1 << 22])
def test_vetoes_match_the_engine_one_candidate_at_a_time(batch, monkeypatch):
    """The vectorised vetoes list exactly what ``core.vetoes_for`` lists for
    each candidate, in its order, whatever the batch size."""
    monkeypatch.setattr(core, "_VETO_BATCH_ENTRIES", batch * 12)
    rng = np.random.default_rng(7)
    k, n, m = 4, 3, 40
    lower = rng.uniform(0, 0.4, (k, n))
    upper = rng.uniform(0.6, 1, (k, n))
    lower[:, 1], upper[:, 1] = 1 - lower[:, 1], 1 - upper[:, 1]  # lower is better
    lower[2, 2], upper[2, 2] = upper[2, 2], lower[2, 2]  # an expert who disagrees on the direction
    measurements = rng.uniform(0, 1, (m, n))
    measurements[3] = lower[1]  # exactly at b^l: a veto
    vetoed = np.flatnonzero([bool(core.vetoes_for(lower, upper, row)) for row in measurements])
    assert 5 < len(vetoed) < m
    found = engine_results._vetoes(lower, upper, measurements, vetoed)
    for c, vetoes in zip(vetoed, found, strict=True):
        expected = core.vetoes_for(lower, upper, measurements[c])
        assert [(i, j) for i, j, *_ in vetoes] == [tuple(v) for v in expected]
        assert [value for _, j, value, _, _ in vetoes] == [measurements[c, j] for _, j in expected]
        assert [[lo, hi] for i, j, _, lo, hi in vetoes] == [[lower[i, j], upper[i, j]] for i, j in expected]


def test_migration_converts_stored_results_both_ways(study):
    """Layout 3 back to 1 and forward again (migrations 0003 and 0002)."""
    from importlib import import_module

    from django.apps import apps

    to_2 = import_module("engine.migrations.0002_results_scale")
    to_3 = import_module("engine.migrations.0003_results_disagreement")
    _, run = executed(launch(study))
    current = run.results
    to_3.to_layout_2(apps, None)
    to_2.to_layout_1(apps, None)
    old = Run.objects.get(pk=run.pk).results
    assert "layout" not in old
    assert old["candidates"][2]["vetoes"][0] == {
        "expert": "statistician",
        "metric": "Comprehensibility rating",
        "value": 0,
        "range": [6, 10],
    }
    assert [c["index"] for c in old["candidates"]] == [CANDIDATES.index(c["name"]) for c in old["candidates"]]
    to_2.to_layout_2(apps, None)
    to_3.to_layout_3(apps, None)
    migrated = Run.objects.get(pk=run.pk)
    # All but the stored text, which results_json makes again from the rest, and
    # the consistency ratios (issue 16), which layout 1 cannot carry: the round
    # trip serves the run as one stored before they were recorded.
    dropped = ("document", "consistency")
    assert migrated.results == {key: value for key, value in current.items() if key not in dropped}
    without = Run.objects.get(pk=run.pk)
    run.results = {key: value for key, value in run.results.items() if key not in dropped}
    assert results_json(run=migrated) == results_json(run=without) == results_json(run=run)


@pytest.mark.parametrize("richer", [False, True])
def test_migration_to_layout_3_stores_what_a_fresh_run_stores(study, richer):
    """Layout-2 results, as the previous code stored them, upgraded from the
    run's snapshot: exactly the results (document text included) that
    evaluate_snapshot stores now; and back again."""
    from importlib import import_module

    from django.apps import apps

    migration = import_module("engine.migrations.0003_results_disagreement")
    run = launched(study)
    if richer:  # partial vetoes, metric weights unlike the attribute weights
        Run.objects.filter(pk=run.pk).update(snapshot=richer_snapshot(run.snapshot))
    _, run = executed(run)
    fresh = run.results
    assert fresh["layout"] == 3
    Run.objects.filter(pk=run.pk).update(results=layout_2(fresh))
    migration.to_layout_3(apps, None)
    migrated = Run.objects.get(pk=run.pk)
    assert migrated.results == fresh
    assert results_json(run=migrated) == results_json(run=run)
    assert results_json(run=engine_selectors.runs_with_document(queryset=Run.objects).get(pk=run.pk)) == results_json(
        run=run
    )
    migration.to_layout_3(apps, None)  # a second pass leaves layout 3 alone
    assert Run.objects.get(pk=run.pk).results == fresh
    migration.to_layout_2(apps, None)
    assert Run.objects.get(pk=run.pk).results == layout_2(fresh)


def test_migration_to_layout_3_keeps_runs_it_cannot_measure_and_unstored_text(study):
    from importlib import import_module

    from django.apps import apps

    migration = import_module("engine.migrations.0003_results_disagreement")
    _, run = executed(launch(study))
    fresh = run.results
    without_text = {key: value for key, value in layout_2(fresh).items() if key != "document"}
    Run.objects.filter(pk=run.pk).update(results=without_text)
    _, broken = executed(launch(study))
    snapshot = copy.deepcopy(broken.snapshot)
    snapshot["attribute_weights"][0][0] = None
    Run.objects.filter(pk=broken.pk).update(snapshot=snapshot, results=layout_2(broken.results))
    migration.to_layout_3(apps, None)
    # Runs migrated by 0002 have no stored text: it is made from the results when served.
    assert Run.objects.get(pk=run.pk).results == {key: value for key, value in fresh.items() if key != "document"}
    assert results_json(run=Run.objects.get(pk=run.pk)) == results_json(run=run)
    # A snapshot that cannot give the measures leaves its run in layout 2, still served.
    assert Run.objects.get(pk=broken.pk).results == layout_2(broken.results)
    assert "disagreement" not in json.loads(results_json(run=Run.objects.get(pk=broken.pk)))


def test_candidate_individual_scores(study):
    _, run = executed(launch(study))
    scores = candidate_individual_scores(run=run, candidate_name="J48")
    snapshot = run.snapshot
    expected = core.individual_scores(
        np.array(snapshot["lower"], dtype=float),
        np.array(snapshot["upper"], dtype=float),
        np.array(snapshot["measurements"][CANDIDATES.index("J48")], dtype=float),
    )
    assert expected.shape == (4, 3)
    assert list(scores) == EXPERTS
    assert [list(scores[e].values()) for e in EXPERTS] == expected.tolist()
    assert all(list(scores[e]) == METRICS for e in EXPERTS)
    for e in EXPERTS:
        assert list(scores[e].values()) == pytest.approx(HAND_G["J48"], abs=1e-12)
    assert candidate_individual_scores(run=run, candidate_name="C5.0") is None
    assert candidate_individual_scores(run=run, candidate_name="j48") is None


def test_individual_scores_come_from_the_snapshot(study):
    """Recomputed from the snapshot, not from the study as it is now."""
    _, run = executed(launch(study))
    before = candidate_individual_scores(run=run, candidate_name="J48")
    workspace.measurements_set(
        study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.95}]
    )
    run.refresh_from_db()
    assert candidate_individual_scores(run=run, candidate_name="J48") == before
    assert before["clinician"]["Success rate"] == pytest.approx(HAND_G["J48"][0], abs=1e-12)


# --- 9. recovery of runs left behind ---------------------------------------------


def recorder(sent, priorities=None):
    """A stand-in for ``services._send`` that records the run ids (and the priorities)."""

    def send(run_id, priority=services.LAUNCH_PRIORITY):
        sent.append(run_id)
        if priorities is not None:
            priorities.append(priority)

    return send


def test_runs_recover_stale(study, monkeypatch, settings):
    sent, priorities = [], []
    monkeypatch.setattr(services, "_send", recorder(sent, priorities))
    now = timezone.now()
    resend = timedelta(seconds=settings.ENGINE_QUEUE_RESEND_SECONDS)
    snapshot = launched(study).snapshot
    Run.objects.all().delete()

    def make(**fields):
        return Run.objects.create(study=study, snapshot=snapshot, **fields).pk

    lapsed, live = now - timedelta(seconds=1), now + timedelta(seconds=5)
    running_lapsed = make(status=Run.Status.RUNNING, attempts=1, lease_expires_at=lapsed)  # its worker died
    never_sent = make(lease_expires_at=None)  # launched while the broker was down
    message_lost = make(lease_expires_at=lapsed)  # sent, never picked up
    make(status=Run.Status.RUNNING, attempts=1, lease_expires_at=live)  # a live worker renews it
    make(lease_expires_at=live)  # sent, waiting in the queue
    make(status=Run.Status.SUCCEEDED, results={"candidates": []}, lease_expires_at=lapsed)
    make(status=Run.Status.FAILED, error="x", lease_expires_at=None)

    ids = runs_recover_stale(now=now)
    assert sorted(ids) == sorted([running_lapsed, never_sent, message_lost])
    assert sorted(sent) == sorted(ids)
    # Ahead of runs launched since: a busy cluster takes them over next.
    assert priorities == [services.RESEND_PRIORITY] * 3 and services.RESEND_PRIORITY < services.LAUNCH_PRIORITY
    # Handed back to the queue, each held by its new message for a while.
    for run_id in ids:
        handed_back = Run.objects.get(pk=run_id)
        assert handed_back.status == Run.Status.QUEUED and handed_back.lease_expires_at == now + resend
    assert Run.objects.get(pk=running_lapsed).attempts == 1  # the claim counts attempts
    # A second sweep right after sends nothing again.
    sent.clear()
    assert runs_recover_stale(now=now + timedelta(seconds=1)) == [] and sent == []
    # And the handed-back runs do run.
    for run_id in ids:
        assert run_execute(run_id=run_id).status == Run.Status.SUCCEEDED
    assert Run.objects.get(pk=running_lapsed).attempts == 2
    assert runs_recover_stale() == [] and sent == []


def test_sweep_hands_back_only_lapsed_leases_and_cuts_off_the_stale_worker(study):
    run = launch(study)
    assert run_claim(run_id=run.pk) == 1
    assert services._renew_lease(run.pk, 1) is True
    assert runs_recover_stale() == []  # a live lease is left alone
    expire_lease(run.pk)
    sent = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "_send", recorder(sent))
        assert runs_recover_stale() == [run.pk]
    assert sent == [run.pk]
    # The worker that lost the lease (alive but cut off) can neither renew
    # nor store anything; the next claim is a new attempt.
    assert services._renew_lease(run.pk, 1) is False
    assert services._finish(run.pk, 1, status=Run.Status.FAILED, error="stale") == 0
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    assert run_claim(run_id=run.pk) == 2
    assert services._renew_lease(run.pk, 1) is False and services._renew_lease(run.pk, 2) is True


def test_launch_holds_the_run_for_its_message(study, settings):
    before = timezone.now()
    run = launch(study)
    resend = timedelta(seconds=settings.ENGINE_QUEUE_RESEND_SECONDS)
    assert before + resend <= run.lease_expires_at <= timezone.now() + resend
    assert not services.run_awaits_broker(run=run)
    assert runs_recover_stale() == []  # not sent twice while its message may still be waiting


def test_launch_with_the_broker_down_keeps_the_run_queued_for_the_sweep(
    study, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    from kombu.exceptions import OperationalError

    def broker_down(run_id, priority=None):
        raise OperationalError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

    monkeypatch.setattr(services, "_send", broker_down)
    with django_capture_on_commit_callbacks(execute=True), caplog.at_level("WARNING", logger="engine.services"):
        run = launch(study)
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and run.lease_expires_at is None and run.attempts == 0
    assert services.run_awaits_broker(run=run)
    assert f"run {run.pk} stays queued: the broker is unreachable (OperationalError" in caplog.text
    # A sweep while the broker is still down changes nothing ...
    assert runs_recover_stale() == [run.pk]
    assert Run.objects.get(pk=run.pk).lease_expires_at is None
    # ... the first one that reaches it sends the run.
    sent = []
    monkeypatch.setattr(services, "_send", recorder(sent))
    assert runs_recover_stale() == [run.pk] and sent == [run.pk]
    run.refresh_from_db()
    assert run.lease_expires_at is not None and not services.run_awaits_broker(run=run)
    assert runs_recover_stale() == []


def test_an_error_that_is_not_the_broker_still_surfaces(study, monkeypatch, django_capture_on_commit_callbacks):
    def bug(run_id, priority=None):
        raise KeyError("not a connection problem")

    monkeypatch.setattr(services, "_send", bug)
    with pytest.raises(KeyError), django_capture_on_commit_callbacks(execute=True):
        launch(study)


@pytest.mark.django_db(transaction=True)
def test_a_live_worker_renews_its_lease_while_the_run_computes(monkeypatch, settings):
    settings.ENGINE_RUN_HEARTBEAT_SECONDS = 0.05
    settings.ENGINE_RUN_LEASE_SECONDS = 1
    study = study_import_bundle(bundle=case_study_bundle())
    monkeypatch.setattr(services, "_send", lambda run_id, priority=None: None)  # this test is the worker
    run = launch(study)
    evaluate, seen = core.evaluate, []

    def slow_evaluate(**arrays):
        # Longer than the lease: without renewals it would lapse mid-run.
        for _ in range(6):
            seen.append(Run.objects.values_list("lease_expires_at", flat=True).get(pk=run.pk))
            time.sleep(0.25)
            assert runs_recover_stale() == []  # never handed back while the worker lives
        return evaluate(**arrays)

    monkeypatch.setattr(core, "evaluate", slow_evaluate)
    started = timezone.now()
    assert run_execute(run_id=run.pk).status == Run.Status.SUCCEEDED
    assert seen == sorted(seen) and len(set(seen)) == len(seen)  # renewed between every look
    assert seen[-1] > started + timedelta(seconds=1.2)  # beyond the first lease
    assert Run.objects.get(pk=run.pk).attempts == 1
    # The heartbeat thread ends with the run.
    assert not [t for t in threading.enumerate() if t.name == f"run-{run.pk}-lease"]


# --- 10. the run_validation command -----------------------------------------------


def command(*args):
    out, err = StringIO(), StringIO()
    call_command("run_validation", *[str(a) for a in args], "--timeout", "30", stdout=out, stderr=err)
    return out.getvalue()


@pytest.mark.django_db
def test_command_refuses_an_open_study_without_close():
    study = study_import_bundle(bundle=case_study_bundle("assessment"))
    with pytest.raises(CommandError, match="--close"):
        command(study.pk)
    assert Study.objects.get(pk=study.pk).phase == Phase.ASSESSMENT
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_command_refuses_an_unknown_study():
    with pytest.raises(CommandError, match="no study with id 987654"):
        command(987654)


# The command launches, lets the transaction commit (the enqueue is on
# commit) and waits for the run: it needs real commits, hence transaction=True,
# and an executed task, hence eager_celery.


@pytest.mark.django_db(transaction=True)
def test_command_closes_runs_and_prints_json(eager_celery):
    study = study_import_bundle(bundle=case_study_bundle("assessment"))
    out = command(study.pk, "--close", "--json")
    document = json.loads(out)
    assert Study.objects.get(pk=study.pk).phase == Phase.CLOSED
    run = Run.objects.get(study=study)
    assert run.status == Run.Status.SUCCEEDED
    # Compact, without individual scores, and the very bytes the API serves.
    assert out == results_json(run=run).decode() + "\n"
    assert all("individual_scores" not in c for c in document["candidates"])
    assert document["format"] == "approve-results/1" and document["run"] == run.pk
    assert list(document["metric_weights"].values()) == pytest.approx(CONSENSUS, abs=5e-5)
    assert list(document["expert_influence"].values()) == pytest.approx(INFLUENCE, abs=5e-5)
    weights, peers = file_inputs()
    assert document["iterations"] == core.aggregate_literal(peers, weights)[1]
    ranked = [(c["name"], c["rank"]) for c in document["candidates"]]
    assert ranked == [("JRip", 1), ("J48", 2), ("IBk", 3), ("RandomForest", 3)]
    a = run.results["metric_weights"]
    cef = {c["name"]: c["cef"] for c in document["candidates"]}
    assert cef["JRip"] == pytest.approx(sum(w * x for w, x in zip(a, HAND_G["JRip"], strict=False)), abs=1e-9)
    assert cef["J48"] == pytest.approx(sum(w * x for w, x in zip(a, HAND_G["J48"], strict=False)), abs=1e-9)
    assert cef["IBk"] == 0 and cef["RandomForest"] == 0
    assert document["disagreement"]["consensus"]["attribute_weights"] == {
        "value": pytest.approx(W_CONSENSUS, abs=5e-5),
        "wording": "very high",
    }
    shares = {c["name"]: c["veto_shares"]["Comprehensibility rating"] for c in document["candidates"]}
    assert shares == {"JRip": 0, "J48": 0, "IBk": 1.0, "RandomForest": 1.0}
    assert all(share == 0 for c in document["candidates"] for m, share in c["veto_shares"].items() if m != METRICS[2])


@pytest.mark.django_db(transaction=True)
def test_command_prints_individual_scores_on_request(eager_celery):
    study = study_import_bundle(bundle=case_study_bundle())
    out = command(study.pk, "--json", "--individual")
    run = Run.objects.get(study=study)
    assert out == results_json(run=run, individual=True).decode() + "\n"
    document = json.loads(out)
    assert [list(c["individual_scores"]) for c in document["candidates"]] == [EXPERTS] * 4
    assert document["candidates"][1]["individual_scores"] == candidate_individual_scores(run=run, candidate_name="J48")


@pytest.mark.django_db
def test_command_refuses_individual_without_json():
    study = study_import_bundle(bundle=case_study_bundle())
    with pytest.raises(CommandError, match="--individual only applies to --json"):
        command(study.pk, "--individual")
    assert Run.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_command_prints_a_table_for_a_closed_study(eager_celery):
    study = study_import_bundle(bundle=case_study_bundle())
    out = command(study.pk)
    run = Run.objects.get(study=study)
    assert run.status == Run.Status.SUCCEEDED
    assert f"Run {run.pk} of 'Cancer diagnosis from microarray data'" in out
    assert "Consensus weights: Success rate 0.5295, Fold accuracy stdev 0.2273, Comprehensibility rating 0.2432" in out
    assert "statistician 0.3681" in out and "clinician 0.2147" in out
    lines = [line.split() for line in out.splitlines()]
    table = [line for line in lines if line and line[0].isdigit()]
    assert [(line[0], line[1]) for line in table] == [("1", "JRip"), ("2", "J48"), ("3", "IBk"), ("3", "RandomForest")]
    assert table[0][2] == "0.4647" and table[1][2] == "0.3267"
    assert table[2][2:4] == ["0.0000", "0.5772"] and "statistician" in " ".join(table[2])


@pytest.mark.django_db(transaction=True)
def test_command_reports_a_refused_launch(eager_celery):
    study = study_import_bundle(bundle=case_study_bundle())
    workspace.candidate_add(study=study, name="NaiveBayes")
    with pytest.raises(
        CommandError, match=r"The run cannot start: a measurement is missing for NaiveBayes / Success rate"
    ):
        command(study.pk, "--json")
    assert not Run.objects.filter(study=study).exists()


@pytest.mark.django_db(transaction=True)
def test_command_reports_a_failed_run(eager_celery, monkeypatch):
    study = study_import_bundle(bundle=case_study_bundle())

    def broken(**arrays):
        raise ValueError("peer_weights row 2 sums to 0.5")

    monkeypatch.setattr(core, "evaluate", broken)
    with pytest.raises(CommandError, match=r"failed: The inputs cannot be evaluated: peer_weights row 2 sums to 0.5"):
        command(study.pk, "--json")
    assert Run.objects.get(study=study).status == Run.Status.FAILED


# --- 11. the admin ----------------------------------------------------------------


def test_admin_run_list_leaves_the_json_fields_out(study, admin_client, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    _, run = executed(launch(study))
    with CaptureQueriesContext(connection) as queries:
        listed = admin_client.get("/admin/engine/run/")
    assert listed.status_code == 200 and f"/admin/engine/run/{run.pk}/change/" in listed.content.decode()
    run_queries = [q["sql"] for q in queries.captured_queries if 'FROM "engine_run"' in q["sql"]]
    assert run_queries and not any('"engine_run"."snapshot"' in q or '"engine_run"."results"' in q for q in run_queries)
    page = admin_client.get(f"/admin/engine/run/{run.pk}/change/")
    assert page.status_code == 200 and "Comprehensibility rating" in page.content.decode()


def _other_connection():
    """A second connection to the test database (not the test's own)."""
    from django.db import connections

    return connections.create_connection("default")


@pytest.mark.skipif(
    not __import__("django.conf").conf.settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="row locks: PostgreSQL (SQLite locks the whole database for a write)",
)
@pytest.mark.django_db(transaction=True)
def test_launches_of_one_study_do_not_wait_for_each_other_but_changes_wait_for_launches():
    # Issue 17, item 6: twenty launches at once queued behind each other on
    # the study's row lock. A launch now shares it with other launches (as
    # if one were in progress on another connection) and still keeps out a
    # change to the inputs until it commits.
    from django.db import connection

    study = study_import_bundle(bundle=case_study_bundle())
    other = _other_connection()
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute('SELECT 1 FROM "workspace_study" WHERE "id" = %s FOR SHARE', [study.pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        started = time.monotonic()
        run = run_launch(study=study, launched_by=study.designer)
        assert time.monotonic() - started < 2
        # The launch read no input: the worker, or the next change, takes the
        # snapshot at the launch's input version.
        launched = Run.objects.get(pk=run.pk)
        assert launched.snapshot is None and launched.input_version == study.input_version
        other.rollback()
        with transaction.atomic():
            services.run_snapshot_take(run_id=run.pk)
        assert Run.objects.get(pk=run.pk).snapshot["candidates"] == CANDIDATES

        # A change (the UPDATE of workspace.services._checks.locked, which
        # bumps the input version) waits for a launch in progress.
        with transaction.atomic():
            services._lock_for_launch(study)
            with other.cursor() as cursor:
                cursor.execute("SET lock_timeout = '500ms'")
                with pytest.raises(Exception, match="lock timeout"):
                    cursor.execute(
                        'UPDATE "workspace_study" SET "input_version" = "input_version" + 1 WHERE "id" = %s',
                        [study.pk],
                    )
        other.rollback()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
        other.close()


# --- issue 17, item 7: a worker cut off from the database, the broker away ------------


def test_a_worker_that_cannot_reach_the_database_takes_nothing_and_sends_the_message_back(study, monkeypatch, caplog):
    from django.db import OperationalError

    run = launch(study)
    stored = row(run.pk)

    def cut_off(*, run_id):
        raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: timeout expired")

    monkeypatch.setattr(services, "run_execute", cut_off)
    closed = []
    monkeypatch.setattr(engine_tasks, "connection", type("Connection", (), {"close": lambda self: closed.append(1)})())
    with caplog.at_level("WARNING", logger="engine.tasks"), pytest.raises(Retry) as retried:
        execute_run.apply(args=(run.pk,), throw=True)  # as a worker calls it (with a request to retry)
    assert retried.value.when == 0  # at once, for another worker
    assert f"run {run.pk} not taken: the database is unreachable from this worker (OperationalError)" in caplog.text
    assert row(run.pk) == stored  # nothing claimed, nothing written
    assert closed == [1]  # the next delivery connects afresh


def test_a_redelivery_that_claims_nothing_is_logged_as_such_not_as_a_success(study, caplog):
    run = launch(study)
    assert run_execute(run_id=run.pk).status == Run.Status.SUCCEEDED
    with caplog.at_level("INFO", logger="engine.tasks"):
        result = execute_run.apply(args=(run.pk,))
    assert result.state == "IGNORED"
    assert f"run {run.pk}: this delivery claimed nothing (the run is succeeded)" in caplog.text


def test_takeover_overtaken_by_another_worker_is_not_a_success(study, monkeypatch):
    run = launch(study)
    monkeypatch.setattr(services, "_finish", lambda run_id, attempt, **fields: 0)  # another attempt holds it
    outcome = run_execute(run_id=run.pk)
    assert outcome == services.Outcome(status="superseded", claimed=False)


def test_worker_and_broker_settings_bound_every_wait(settings, monkeypatch):
    from approve_site.settings import database_from_url

    options = database_from_url("postgres://approve@db.example:5432/approve")["OPTIONS"]
    assert options["connect_timeout"] == 5
    assert options["tcp_user_timeout"] == 20_000 and options["keepalives"] == 1
    # A worker also bounds each statement.
    database = {"ENGINE": "django.db.backends.postgresql", "OPTIONS": dict(options)}
    monkeypatch.setitem(settings.DATABASES, "default", database)
    monkeypatch.setattr(services, "connection", type("Closed", (), {"close": lambda self: None})())
    services.worker_database_options()
    assert (
        database["OPTIONS"]["options"]
        == f"-c statement_timeout={settings.ENGINE_WORKER_STATEMENT_TIMEOUT_SECONDS * 1000}"
    )
    # Workers survive a broker outage: nothing is cancelled, no result backend to lose.
    from approve_site.celery import app

    assert app.conf.worker_cancel_long_running_tasks_on_connection_loss is False
    assert app.conf.result_backend is None and execute_run.ignore_result
    assert app.conf.broker_connection_max_retries is None
