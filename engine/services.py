"""Validation runs: launch (snapshot + enqueue), claim, execute, recover.

The path of a run (ARCHITECTURE.md): ``run_launch`` copies every input into
the run and enqueues the task after commit; the task calls ``run_execute``,
which claims the run with a conditional UPDATE (so a redelivered message never
runs it twice or overwrites a finished run), computes with ``engine.core`` and
stores the results and the status in one write.

Who holds a run is recorded by its ``lease_expires_at``: while it is queued,
its message holds it until then (null: no message could be sent, the broker
was unreachable); while it is running, the worker that claimed it holds it,
renewing the lease every few seconds from a heartbeat thread. The recovery
sweep (``runs_recover_stale``, every ``ENGINE_RECOVERY_SWEEP_SECONDS``) hands
every run whose lease has lapsed back to the queue and sends its message, so
a run whose worker died is taken over within a minute, and a run launched
while the broker was down starts once it is back.
"""

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q, QuerySet
from django.db.models.fields.json import KT
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerOperationalError

from workspace.errors import PhaseConflict
from workspace.models import (
    AcceptableRange,
    AttributeWeight,
    Candidate,
    Measurement,
    MetricWeight,
    PeerWeight,
    Phase,
    Study,
)
from workspace.selectors import expert_list, selected_attributes, selected_metrics

from . import core, disagreement
from .models import Run
from .rules import SCALE_MAX

logger = logging.getLogger(__name__)

SNAPSHOT_VERSION = 1
# A run whose worker was lost this many times is failed rather than retried:
# something in it kills workers, and retrying forever would hide that.
MAX_ATTEMPTS = 3


def _lease_seconds() -> float:
    # Several heartbeats long: a live worker renews well before it lapses, so
    # a lapsed lease means its worker is dead (or cut off from the database).
    return settings.ENGINE_RUN_LEASE_SECONDS


# --- snapshot ------------------------------------------------------------------


def study_snapshot(study, *, tolerance=core.DEFAULT_TOLERANCE):
    """Every input a run needs, as plain JSON, in a fixed order.

    Rows are experts (by membership id), columns the selected metrics (by
    attribute then metric position). Gaps (a missing measurement, range or
    peer weight) are kept as ``None``: ``run_launch`` refuses them with a
    readable reason rather than guessing. The caller holds the study's row
    lock, which candidate and measurement changes also take, so the
    separate reads below see one consistent state.
    """
    experts = list(expert_list(study=study))
    attributes = list(selected_attributes(study))
    metrics = list(selected_metrics(study))
    candidates = list(Candidate.objects.filter(study=study).order_by("position", "id"))
    expert_index = {e.pk: i for i, e in enumerate(experts)}
    attribute_index = {a.pk: j for j, a in enumerate(attributes)}
    metric_index = {m.pk: j for j, m in enumerate(metrics)}
    k, n_attr, n = len(experts), len(attributes), len(metrics)

    attribute_weights = [[None] * n_attr for _ in range(k)]
    for row in AttributeWeight.objects.filter(prioritisation__expert__study=study).values(
        "prioritisation__expert_id", "attribute_id", "weight"
    ):
        if row["attribute_id"] in attribute_index:
            attribute_weights[expert_index[row["prioritisation__expert_id"]]][attribute_index[row["attribute_id"]]] = (
                row["weight"]
            )

    # Local weights of an attribute's metrics; without a local prioritisation
    # the attribute's weight is split equally (METHOD.md section 3).
    local = {}
    for row in MetricWeight.objects.filter(prioritisation__expert__study=study).values(
        "prioritisation__expert_id", "metric_id", "weight"
    ):
        local[(row["prioritisation__expert_id"], row["metric_id"])] = row["weight"]
    metrics_per_attribute = {}
    for metric in metrics:
        metrics_per_attribute.setdefault(metric.attribute_id, []).append(metric)
    metric_weights = [[None] * n for _ in range(k)]
    for expert in experts:
        i = expert_index[expert.pk]
        for metric in metrics:
            attribute_weight = attribute_weights[i][attribute_index[metric.attribute_id]]
            if attribute_weight is None:
                continue
            share = local.get((expert.pk, metric.pk), 1 / len(metrics_per_attribute[metric.attribute_id]))
            metric_weights[i][metric_index[metric.pk]] = attribute_weight * share

    lower = [[m.default_least_acceptable for m in metrics] for _ in range(k)]
    upper = [[m.default_desired for m in metrics] for _ in range(k)]
    for row in AcceptableRange.objects.filter(expert__study=study).values(
        "expert_id", "metric_id", "least_acceptable", "desired"
    ):
        if row["metric_id"] in metric_index:
            i, j = expert_index[row["expert_id"]], metric_index[row["metric_id"]]
            lower[i][j], upper[i][j] = row["least_acceptable"], row["desired"]

    peer_weights = [[None] * k for _ in range(k)]
    for row in PeerWeight.objects.filter(rater__study=study).values("rater_id", "ratee_id", "weight"):
        peer_weights[expert_index[row["rater_id"]]][expert_index[row["ratee_id"]]] = row["weight"]

    candidate_index = {c.pk: c_i for c_i, c in enumerate(candidates)}
    measurements = [[None] * n for _ in candidates]
    for row in Measurement.objects.filter(study=study, metric__is_selected=True).values(
        "candidate_id", "metric_id", "value"
    ):
        if row["candidate_id"] in candidate_index:
            measurements[candidate_index[row["candidate_id"]]][metric_index[row["metric_id"]]] = row["value"]

    return {
        "version": SNAPSHOT_VERSION,
        "study": {"id": study.pk, "title": study.title},
        "tolerance": tolerance,
        "experts": [e.user.get_username() for e in experts],
        "attributes": [a.name for a in attributes],
        "metrics": [
            {
                "name": m.name,
                "attribute": attributes[attribute_index[m.attribute_id]].name,
                "better": m.better,
                "unit": m.unit,
            }
            for m in metrics
        ],
        "attribute_weights": attribute_weights,
        "metric_weights": metric_weights,
        "peer_weights": peer_weights,
        "lower": lower,
        "upper": upper,
        "candidates": [c.name for c in candidates],
        "measurements": measurements,
    }


# --- launch --------------------------------------------------------------------


# What publishing a message raises when the broker cannot be reached (kombu
# wraps the transport's connection errors once its publish retries are spent).
BROKER_ERRORS = (BrokerOperationalError, OSError)


def _queue_lease(now: datetime) -> datetime:
    """Until when a sent message holds a queued run (then the sweep sends another)."""
    return now + timedelta(seconds=settings.ENGINE_QUEUE_RESEND_SECONDS)


def _send(run_id: int) -> None:
    """Publish the run's task message: the one place that talks to the broker."""
    from .tasks import execute_run

    execute_run.delay(run_id)


def _enqueue(run_id: int) -> bool:
    """Send a queued run's message. With the broker unreachable, log it and
    leave the run queued without a lease, so the next recovery sweep that
    reaches the broker sends it; the caller carries on (a launch still
    answers with its run). Returns whether the message went out."""
    try:
        _send(run_id)
    except BROKER_ERRORS as error:
        logger.warning(
            "run %s stays queued: the broker is unreachable (%s: %s); the recovery sweep will send it",
            run_id,
            type(error).__name__,
            error,
        )
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(lease_expires_at=None)
        return False
    return True


def run_awaits_broker(run: Run) -> bool:
    """Whether a queued run's message could not be sent yet (the broker was
    unreachable when it was launched); the recovery sweep will send it."""
    return run.status == Run.Status.QUEUED and run.lease_expires_at is None


@transaction.atomic
def run_launch(*, study: Study, launched_by: AbstractBaseUser | None, tolerance: float = core.DEFAULT_TOLERANCE) -> Run:
    """Snapshot a closed study into a new queued run and enqueue it after
    commit. Refused (``PhaseConflict``) unless the study is closed. The run is
    saved whether or not the broker can be reached (see ``_enqueue``)."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.phase != Phase.CLOSED:
        raise PhaseConflict(
            f"Validation runs need a closed study; this one is in the {study.phase} phase. Close the assessment first."
        )
    if not (isinstance(tolerance, float) and 0 < tolerance < 1):
        raise ValueError("tolerance must be a float in (0, 1)")
    snapshot = study_snapshot(study, tolerance=tolerance)
    try:
        snapshot_arrays(snapshot)
    except RunInputError as error:
        # Missing or invalid inputs are reported now rather than as a failed run.
        raise PhaseConflict(f"The run cannot start: {error}.") from None
    run = Run.objects.create(
        study=study,
        launched_by=launched_by,
        tolerance=tolerance,
        snapshot=snapshot,
        lease_expires_at=_queue_lease(timezone.now()),
    )
    transaction.on_commit(lambda: _enqueue(run.pk))
    return run


# --- execute -------------------------------------------------------------------


class RunInputError(ValueError):
    """The snapshot cannot be evaluated; the message is for people."""


def _matrix(snapshot, key, row_names, column_names, what):
    """A float array from a snapshot grid, or RunInputError naming the gap."""
    grid = snapshot[key]
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value is None:
                raise RunInputError(f"{what} is missing for {row_names[i]} / {column_names[j]}")
    return np.array(grid, dtype=float).reshape(len(row_names), len(column_names))


def snapshot_arrays(snapshot):
    """The engine's arrays ``(W, V, L, U, M)`` from a snapshot."""
    experts = snapshot["experts"]
    metrics = [m["name"] for m in snapshot["metrics"]]
    candidates = snapshot["candidates"]
    if not experts:
        raise RunInputError("the study has no experts")
    if not metrics:
        raise RunInputError("the study has no selected metrics")
    weights = _matrix(snapshot, "metric_weights", experts, metrics, "a prioritisation")
    peer_weights = _matrix(snapshot, "peer_weights", experts, experts, "a peer weight")
    lower = _matrix(snapshot, "lower", experts, metrics, "an acceptable range")
    upper = _matrix(snapshot, "upper", experts, metrics, "an acceptable range")
    measurements = _matrix(snapshot, "measurements", candidates, metrics, "a measurement")
    _check_named(experts, metrics, peer_weights, lower, upper)
    return weights, peer_weights, lower, upper, measurements


def _check_named(experts, metrics, peer_weights, lower, upper):
    """The checks ``engine.core`` also makes, worded with the study's names
    so a failed run tells people which expert's input to fix."""
    for i, row in enumerate(peer_weights):
        for j, weight in enumerate(row):
            if not weight > 0 or (weight >= 1 and len(experts) > 1):
                raise RunInputError(
                    f"{experts[i]}'s peer weight for {experts[j]} is {weight:g}; it must lie strictly between "
                    "0 and 1 (no expert may silence another)"
                )
        if not core.sums_to_one(row.sum()):
            raise RunInputError(f"{experts[i]}'s peer weights sum to {row.sum():.6g}; they must sum to 1")
    for i, j in zip(*np.nonzero(lower == upper), strict=True):
        raise RunInputError(
            f"{experts[i]}'s acceptable range for {metrics[j]} has equal bounds ({lower[i, j]:g}); they must differ"
        )


def competition_ranks(cef: list[float], weighted: list[float]) -> tuple[list[int], list[int]]:
    """Order (best first) and ranks where equal CEFs share a rank ("1, 2, 3, 3").

    Within a tie the higher weighted score is listed first, so a vetoed
    candidate's distance from the others stays visible.
    """
    order = sorted(range(len(cef)), key=lambda c: (-cef[c], -weighted[c], c))
    ranks = [0] * len(cef)
    for position, c in enumerate(order):
        if position and cef[c] == cef[order[position - 1]]:
            ranks[c] = ranks[order[position - 1]]
        else:
            ranks[c] = position + 1
    return order, ranks


def _vetoes(lower: np.ndarray, upper: np.ndarray, measurements: np.ndarray, vetoed: np.ndarray) -> list[list[list]]:
    """For each vetoed candidate (indices ``vetoed``), its vetoing judgments
    as ``[expert, metric, value, least acceptable, desired]``, ordered by
    expert then metric, from ``core.vetoing_judgments`` (one vectorised pass,
    the engine's own comparison, so the engine and the listed vetoes can
    never disagree on who vetoes what)."""
    position = {candidate: index for index, candidate in enumerate(vetoed.tolist())}
    found = [[] for _ in vetoed]
    candidate, expert, metric = core.vetoing_judgments(lower, upper, measurements).T
    rows = zip(
        candidate.tolist(),
        expert.tolist(),
        metric.tolist(),
        measurements[candidate, metric].tolist(),
        lower[expert, metric].tolist(),
        upper[expert, metric].tolist(),
        strict=True,
    )
    for vetoed_candidate, *veto in rows:
        found[position[vetoed_candidate]].append(veto)
    return found


# What ``Run.results`` holds (engine/models.py): everything the results
# document needs, so serving it never reads the snapshot; candidates best
# first, scores as arrays in the order of ``metrics``; and under "document"
# the document's compact JSON from "iterations" on (results_json).
# Layout 3 adds the disagreement measures (engine.disagreement) for the
# results pages: each expert's attribute and metric weights (rows in the
# order of ``experts``), "disagreement" (the weights' spreads and consensus)
# and each candidate's "veto_shares"; migration 0003 upgrades layout 2.
RESULTS_LAYOUT = 3


def _spread(weights: np.ndarray) -> dict:
    """``{"min", "max", "mean", "stdev"}``, each a list in column order."""
    return {key: values.tolist() for key, values in disagreement.weight_spread(weights)._asdict().items()}


def _consensus(weights: np.ndarray) -> dict:
    value = disagreement.ahp_consensus(weights)
    return {"value": value, "wording": disagreement.consensus_wording(value)}


def _disagreement_measures(snapshot: dict, metric_weights: np.ndarray) -> dict:
    """The results' disagreement fields (layout 3): each expert's attribute
    and metric weights, rows renormalised as the engine renormalises them,
    and their spreads and AHP consensus (``engine.disagreement``). Every
    measure starts from the snapshot's rows, so the stored spreads are those
    of the stored rows."""
    attribute_weights = _matrix(
        snapshot, "attribute_weights", snapshot["experts"], snapshot["attributes"], "a prioritisation"
    )
    return {
        "expert_attribute_weights": disagreement.weight_rows(attribute_weights).tolist(),
        "expert_metric_weights": disagreement.weight_rows(metric_weights).tolist(),
        "disagreement": {
            "attribute_weights": _spread(attribute_weights),
            "metric_weights": _spread(metric_weights),
            "consensus": {
                "measure": disagreement.CONSENSUS_MEASURE,
                "scale_max": SCALE_MAX,
                "attribute_weights": _consensus(attribute_weights),
                "metric_weights": _consensus(metric_weights),
            },
        },
    }


def evaluate_snapshot(snapshot: dict) -> dict:
    """Run the engine on a snapshot; returns the results to store."""
    weights, peer_weights, lower, upper, measurements = snapshot_arrays(snapshot)
    try:
        evaluation = core.evaluate(
            weights=weights,
            peer_weights=peer_weights,
            lower=lower,
            upper=upper,
            measurements=measurements,
            tolerance=snapshot["tolerance"],
        )
    except ValueError as error:
        raise RunInputError(str(error)) from None
    if not all(
        np.isfinite(part).all() for part in (evaluation.metric_weights, evaluation.group_scores, evaluation.cef)
    ):
        # Never store a number JSON cannot carry; engine.core should make none.
        raise RunInputError("the engine produced a non-finite score; the inputs are numerically out of range")
    attribute_of = [m["attribute"] for m in snapshot["metrics"]]
    attribute_weights = [
        float(sum(w for w, attribute in zip(evaluation.metric_weights, attribute_of, strict=True) if attribute == name))
        for name in snapshot["attributes"]
    ]
    try:
        measures = _disagreement_measures(snapshot, weights)
    except ValueError as error:
        raise RunInputError(str(error)) from None
    shares = disagreement.veto_shares(lower, upper, measurements).tolist()
    cef = evaluation.cef.tolist()
    weighted = evaluation.weighted_scores.tolist()
    order, ranks = competition_ranks(cef, weighted)
    vetoed = np.flatnonzero(evaluation.vetoed)
    vetoes = dict(zip(vetoed.tolist(), _vetoes(lower, upper, measurements, vetoed), strict=True))
    group_scores = evaluation.group_scores.tolist()
    names = snapshot["candidates"]
    results = {
        "layout": RESULTS_LAYOUT,
        "study": snapshot["study"]["title"],
        "iterations": int(evaluation.iterations),
        "selected_attributes": snapshot["attributes"],
        "metrics": [m["name"] for m in snapshot["metrics"]],
        "experts": snapshot["experts"],
        "attribute_weights": attribute_weights,
        "metric_weights": evaluation.metric_weights.tolist(),
        "expert_influence": evaluation.expert_influence.tolist(),
        **measures,
        "candidates": [
            {
                "name": names[c],
                "rank": ranks[c],
                "cef": cef[c],
                "weighted_score": weighted[c],
                "vetoed": c in vetoes,
                "vetoes": vetoes.get(c, []),
                "group_scores": group_scores[c],
                "veto_shares": shares[c],
            }
            for c in order
        ],
    }
    # The document's bytes, so that serving it parses and builds nothing.
    results["document"] = _document_tail(results)
    return results


@dataclass(frozen=True)
class Outcome:
    """What the task should do after ``run_execute``."""

    status: str
    retry_in: float | None = None


def run_claim(run_id: int) -> int | None:
    """Take the run for this worker: ``queued`` → ``running``, or take over a
    ``running`` run whose lease has expired (its worker died). A conditional
    UPDATE, so of two deliveries at most one wins. Returns the number of the
    attempt, or None when the run is not ours to execute."""
    now = timezone.now()
    claimable = Q(status=Run.Status.QUEUED) | Q(status=Run.Status.RUNNING, lease_expires_at__lt=now)
    claimed = Run.objects.filter(claimable, pk=run_id).update(
        status=Run.Status.RUNNING,
        started_at=now,
        lease_expires_at=now + timedelta(seconds=_lease_seconds()),
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    return Run.objects.values_list("attempts", flat=True).get(pk=run_id)


def _held(run_id: int, attempt: int) -> QuerySet[Run]:
    """The run, only while this attempt still holds it."""
    return Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, attempts=attempt)


def _finish(run_id: int, attempt: int, **fields) -> int:
    """Store the outcome only if this attempt still holds the run; a worker
    whose lease was taken over must not overwrite its successor."""
    return _held(run_id, attempt).update(finished_at=timezone.now(), **fields)


def _renew_lease(run_id: int, attempt: int) -> bool:
    """Extend this attempt's lease; False once the run is no longer held by
    it (finished, or handed back after the lease lapsed)."""
    return bool(_held(run_id, attempt).update(lease_expires_at=timezone.now() + timedelta(seconds=_lease_seconds())))


class _LeaseHeartbeat:
    """While a run computes, a daemon thread renews its lease every
    ``ENGINE_RUN_HEARTBEAT_SECONDS``; when the worker dies, the renewals stop
    and the lease lapses within ``ENGINE_RUN_LEASE_SECONDS``.

    The engine's numpy work releases the GIL or yields it every few
    milliseconds, so the thread keeps time while the run computes.
    """

    def __init__(self, run_id: int, attempt: int) -> None:
        self.run_id, self.attempt = run_id, attempt
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"run-{run_id}-lease", daemon=True)

    def __enter__(self) -> "_LeaseHeartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        try:
            while not self._stop.wait(settings.ENGINE_RUN_HEARTBEAT_SECONDS):
                try:
                    held = _renew_lease(self.run_id, self.attempt)
                except DatabaseError as error:
                    # The lease outlasts several missed beats; try again.
                    logger.warning("run %s: lease not renewed (%s); retrying", self.run_id, error)
                    continue
                if not held:
                    logger.warning("run %s: attempt %s no longer holds the run", self.run_id, self.attempt)
                    return
                self.renewals += 1
        finally:
            connection.close()  # this thread's own connection


def run_execute(*, run_id: int) -> Outcome:
    """Claim and execute a run. Safe to call any number of times."""
    attempt = run_claim(run_id)
    if attempt is None:
        run = Run.objects.filter(pk=run_id).only("status", "lease_expires_at").first()
        if run is None or run.is_finished:
            return Outcome(status=run.status if run else "missing")
        if run.status == Run.Status.RUNNING:
            # Another delivery holds a live lease (e.g. the message came back
            # when a worker process was lost): look again once it may have
            # lapsed, seconds from now (the sweep would also hand it back).
            wait = max((run.lease_expires_at - timezone.now()).total_seconds(), 0) + 1
            return Outcome(status=run.status, retry_in=wait)
        return Outcome(status=run.status)
    if attempt > MAX_ATTEMPTS:
        _finish(
            run_id,
            attempt,
            status=Run.Status.FAILED,
            error=f"workers were lost {attempt - 1} times while running it; launch it again",
        )
        return Outcome(status=Run.Status.FAILED)
    with _LeaseHeartbeat(run_id, attempt):
        return _compute(run_id, attempt)


def _compute(run_id: int, attempt: int) -> Outcome:
    """Evaluate the claimed run's snapshot and store the outcome."""
    started = time.perf_counter()
    snapshot = Run.objects.values_list("snapshot", flat=True).get(pk=run_id)
    try:
        results = evaluate_snapshot(snapshot)
    except RunInputError as error:
        _finish(
            run_id,
            attempt,
            status=Run.Status.FAILED,
            error=f"The inputs cannot be evaluated: {error}.",
            duration_seconds=time.perf_counter() - started,
        )
        return Outcome(status=Run.Status.FAILED)
    except SoftTimeLimitExceeded:
        # Not a bug in the run: the task turns it into a time-limit failure.
        raise
    except Exception as error:  # a bug must still end the run, not leave it running
        logger.exception("run %s failed", run_id)
        _finish(
            run_id,
            attempt,
            status=Run.Status.FAILED,
            error=f"Internal error: {type(error).__name__}: {error}",
            duration_seconds=time.perf_counter() - started,
        )
        return Outcome(status=Run.Status.FAILED)
    updated = _finish(
        run_id,
        attempt,
        status=Run.Status.SUCCEEDED,
        results=results,
        error="",
        duration_seconds=time.perf_counter() - started,
    )
    return Outcome(status=Run.Status.SUCCEEDED if updated else "superseded")


def run_fail_timeout(*, run_id: int, seconds: float) -> None:
    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
        status=Run.Status.FAILED,
        finished_at=timezone.now(),
        error=(
            f"The run took longer than the {seconds} s time limit; "
            "launch it again or ask an administrator to raise the limit."
        ),
    )


def runs_recover_stale(*, now: datetime | None = None) -> list[int]:
    """The recovery sweep: every unfinished run whose lease has lapsed is
    handed back to the queue and its message sent. That covers a ``running``
    run whose worker stopped renewing (died), a ``queued`` run whose message
    could not be sent (broker down at launch, null lease) and one whose
    message was not picked up for ``ENGINE_QUEUE_RESEND_SECONDS`` (lost).
    The hand-back is one conditional UPDATE over locked rows, so a worker
    renewing or claiming at the same moment keeps what it holds; the claim
    then decides whether a run executes again or fails for good
    (``MAX_ATTEMPTS``). Returns the ids handed back."""
    now = now or timezone.now()
    lapsed = Q(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]) & (
        Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    )
    with transaction.atomic():
        ids = list(Run.objects.select_for_update(skip_locked=True).filter(lapsed).values_list("pk", flat=True))
        Run.objects.filter(lapsed, pk__in=ids).update(status=Run.Status.QUEUED, lease_expires_at=_queue_lease(now))
    for run_id in ids:
        _enqueue(run_id)
    return ids


# --- reading results -------------------------------------------------------------


def _named(names: list[str], row: list) -> dict:
    return dict(zip(names, row, strict=True))


def _candidate_out(entry: dict, experts: list[str], metrics: list[str]) -> dict:
    """One stored candidate in the document's shape (FORMATS.md); its
    optional "veto_shares" only when stored (results of layout 3)."""
    candidate = {
        "name": entry["name"],
        "rank": entry["rank"],
        "cef": entry["cef"],
        "weighted_score": entry["weighted_score"],
        "vetoed": entry["vetoed"],
        "vetoes": [
            {"expert": experts[i], "metric": metrics[j], "value": value, "range": [least, desired]}
            for i, j, value, least, desired in entry["vetoes"]
        ],
        "group_scores": _named(metrics, entry["group_scores"]),
    }
    if "veto_shares" in entry:
        candidate["veto_shares"] = _named(metrics, entry["veto_shares"])
    return candidate


class ScoreInputs:
    """The bounds of a run's snapshot, to score its candidates one at a time
    (never the whole (candidates, experts, metrics) tensor). Needs only the
    snapshot's experts, metrics, candidates, lower, upper and measurements
    (what ``workspace.selectors.run_score_inputs`` reads)."""

    def __init__(self, snapshot: dict):
        self.snapshot = snapshot
        self.experts = snapshot["experts"]
        self.metrics = [m["name"] for m in snapshot["metrics"]]
        self.index = {name: c for c, name in enumerate(snapshot["candidates"])}
        self.lower = _matrix(snapshot, "lower", self.experts, self.metrics, "an acceptable range")
        self.upper = _matrix(snapshot, "upper", self.experts, self.metrics, "an acceptable range")

    def measured(self, name: str) -> list[float]:
        """The candidate's measured values, in the order of the metrics."""
        return self.snapshot["measurements"][self.index[name]]

    def score_matrix(self, name: str) -> np.ndarray:
        """The candidate's (experts, metrics) individual scores (METHOD.md 4)."""
        return core.individual_scores(self.lower, self.upper, np.array(self.measured(name), dtype=float))

    def scores(self, name: str) -> dict:
        scores = self.score_matrix(name).tolist()
        return {expert: _named(self.metrics, values) for expert, values in zip(self.experts, scores, strict=True)}


def _document_start(run: Run, study: str) -> dict:
    """The document's keys before its computed results, in FORMATS.md's order."""
    return {
        "format": "approve-results/1",
        "study": study,
        "run": run.pk,
        "launched_at": run.launched_at.isoformat().replace("+00:00", "Z"),
        "tolerance": run.tolerance,
    }


# The stored JSON keeps no key order (PostgreSQL's jsonb sorts keys): the
# document's order of the disagreement fields is written out here.
SPREAD_KEYS = disagreement.WeightSpread._fields  # "min", "max", "mean", "stdev"
CONSENSUS_KEYS = ("value", "wording")


def _spread_out(names: list[str], spread: dict) -> dict:
    """A stored spread (lists in column order) as ``{name: {"min", "max", "mean", "stdev"}}``."""
    columns = zip(*(spread[key] for key in SPREAD_KEYS), strict=True)
    return {name: dict(zip(SPREAD_KEYS, values, strict=True)) for name, values in zip(names, columns, strict=True)}


def _disagreement_out(results: dict) -> dict:
    """The document's optional "disagreement" object (docs/formats.md)."""
    stored = results["disagreement"]
    consensus = stored["consensus"]
    return {
        "attribute_weights": _spread_out(results["selected_attributes"], stored["attribute_weights"]),
        "metric_weights": _spread_out(results["metrics"], stored["metric_weights"]),
        "consensus": {
            "measure": consensus["measure"],
            "scale_max": consensus["scale_max"],
            **{
                of: {key: consensus[of][key] for key in CONSENSUS_KEYS}
                for of in ("attribute_weights", "metric_weights")
            },
        },
    }


def _document_body(results: dict) -> dict:
    """The computed results but the candidates, in FORMATS.md's order; the
    optional "disagreement" only when stored (results of layout 3)."""
    metrics = results["metrics"]
    body = {
        "iterations": results["iterations"],
        "selected_attributes": results["selected_attributes"],
        "metrics": metrics,
        "attribute_weights": _named(results["selected_attributes"], results["attribute_weights"]),
        "metric_weights": _named(metrics, results["metric_weights"]),
        "expert_influence": _named(results["experts"], results["expert_influence"]),
    }
    if "disagreement" in results:
        body["disagreement"] = _disagreement_out(results)
    return body


def _candidates_out(results: dict, snapshot: dict | None = None) -> Iterator[dict]:
    """The candidates in the document's shape; with their individual scores
    when given the snapshot they come from."""
    inputs = ScoreInputs(snapshot) if snapshot is not None else None
    for entry in results["candidates"]:
        candidate = _candidate_out(entry, results["experts"], results["metrics"])
        if inputs is not None:
            candidate["individual_scores"] = inputs.scores(entry["name"])
        yield candidate


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _document_tail(results: dict, snapshot: dict | None = None) -> str:
    """The document from ``iterations`` to its end, as compact JSON without
    the closing brace. Candidates are serialised one at a time: with
    individual scores the document is large, and its dictionaries are never
    all held at once."""
    body = _json(_document_body(results))[1:-1]
    candidates = ",".join(_json(candidate) for candidate in _candidates_out(results, snapshot))
    return f'{body},"candidates":[{candidates}]'


def results_document(run: Run, *, individual: bool = False) -> dict:
    """The ``approve-results/1`` document of a succeeded run (FORMATS.md),
    built from its stored results in one pass. ``individual`` adds every
    candidate's k x n individual scores, computed from the snapshot (the
    document then grows with experts; FORMATS.md "Size")."""
    results = run.results
    return {
        **_document_start(run, results["study"]),
        **_document_body(results),
        "candidates": list(_candidates_out(results, run.snapshot if individual else None)),
    }


def runs_with_document(queryset: QuerySet) -> QuerySet:
    """``queryset`` ready for ``results_json``: the stored document text and
    the study's title are read out of the results by the database, and
    neither the snapshot nor the results is loaded or parsed."""
    return queryset.defer("snapshot", "results").annotate(
        stored_study=KT("results__study"), stored_document=KT("results__document")
    )


def results_json(run: Run, *, individual: bool = False) -> bytes:
    """The document as compact UTF-8 JSON: the one place its bytes are made,
    so the command, the API and any download serve the same bytes.

    Without individual scores it is the text stored when the run finished
    (read without parsing it when ``run`` comes from ``runs_with_document``);
    with them it is built from the results and the snapshot."""
    if individual:
        study, tail = run.results["study"], _document_tail(run.results, run.snapshot)
    else:
        study, tail = getattr(run, "stored_study", None), getattr(run, "stored_document", None)
        if tail is None:  # loaded without runs_with_document, or stored before the text was
            study, tail = run.results["study"], run.results.get("document") or _document_tail(run.results)
    # The start is a non-empty object: its "}" is replaced by the tail.
    return f"{_json(_document_start(run, study))[:-1]},{tail}}}".encode()


def candidate_individual_scores(run: Run, candidate_name: str) -> dict | None:
    """One candidate's k x n individual scores, computed from the snapshot
    for that candidate only: ``{expert: {metric: score}}``, or None if no
    such candidate."""
    snapshot = run.snapshot
    if candidate_name not in snapshot["candidates"]:
        return None
    return ScoreInputs(snapshot).scores(candidate_name)
