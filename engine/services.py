"""Validation runs, the workflow's writes: launch (snapshot + enqueue),
claim, execute (with its lease heartbeat), fail on timeout, recover.
What a run reads and stores is elsewhere: its inputs in ``engine.snapshot``,
its results in ``engine.results``, the results document in
``engine.selectors``.

The path of a run (ARCHITECTURE.md): ``run_launch`` checks the inputs and
saves the run with the study's ``input_version`` (and, when nothing changed
since an earlier run, that run's snapshot, copied in the database) and
enqueues the task after commit; the task calls ``run_execute``, which claims
the run with a conditional UPDATE (so a redelivered message never runs it
twice or overwrites a finished run), takes its snapshot if it has none yet
(``run_snapshot_take``: the inputs are still those at launch, or a change of
them would have taken it first, ``runs_take_snapshots``), computes with
``engine.core`` (``engine.results.evaluate_snapshot``) and stores the results
and the status in one write.

Who holds a run is recorded by its ``lease_expires_at``: while it is queued,
its message holds it until then (null: no message could be sent, the broker
was unreachable); while it is running, the worker that claimed it holds it,
renewing the lease every few seconds from a heartbeat thread. The recovery
sweep (``runs_recover_stale``, every ``ENGINE_RECOVERY_SWEEP_SECONDS``, from a
thread of every worker's main process) hands every run whose lease has lapsed
back to the queue and sends its message ahead of new launches, so
a run whose worker died is taken over within a minute, and a run launched
while the broker was down starts once it is back.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Max, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerOperationalError

from workspace import history
from workspace.errors import PhaseConflict
from workspace.events import event_publish
from workspace.models import Membership, RevisionRound, Study
from workspace.services.phases import Action, phase_allows
from workspace.services.roles import require_role

from . import core
from .models import Run
from .results import evaluate_snapshot
from .snapshot import RunInputError, inputs_complete, snapshot_arrays, study_snapshot

logger = logging.getLogger(__name__)

# A run whose worker was lost this many times is failed rather than retried:
# something in it kills workers, and retrying forever would hide that.
MAX_ATTEMPTS = 3


def run_lease(now: datetime) -> datetime:
    """Until when a worker's heartbeat lease holds what it computes (a run, an
    analysis chunk, an MLflow import), from ``now``. Several heartbeats long:
    a live worker renews well before it lapses, so a lapsed lease means its
    worker is dead (or cut off from the database)."""
    return now + timedelta(seconds=settings.ENGINE_RUN_LEASE_SECONDS)


# --- launch --------------------------------------------------------------------


# What publishing a message raises when the broker cannot be reached (kombu
# wraps the transport's connection errors once its publish retries are spent).
BROKER_ERRORS = (BrokerOperationalError, OSError)


def queue_lease(now: datetime) -> datetime:
    """Until when a sent message holds a queued run, chunk or import (then the sweep sends another)."""
    return now + timedelta(seconds=settings.ENGINE_QUEUE_RESEND_SECONDS)


# Message priorities (Redis: 0 is served first). A run handed back by the
# recovery sweep (its worker died, or its message was lost) goes ahead of
# runs launched since, so a busy cluster takes it over next.
LAUNCH_PRIORITY = 6
RESEND_PRIORITY = 0


def _send(run_id: int, priority: int = LAUNCH_PRIORITY) -> None:
    """Publish the run's task message: the one place that talks to the broker."""
    from .tasks import execute_run

    execute_run.apply_async((run_id,), priority=priority)


def _enqueue(run_id: int, priority: int = LAUNCH_PRIORITY) -> bool:
    """Send a queued run's message. With the broker unreachable, log it and
    leave the run queued without a lease, so the next recovery sweep that
    reaches the broker sends it; the caller carries on (a launch still
    answers with its run). Returns whether the message went out."""
    try:
        _send(run_id, priority)
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


def run_awaits_broker(*, run: Run) -> bool:
    """Whether a queued run's message could not be sent yet (the broker was
    unreachable when it was launched); the recovery sweep will send it."""
    return run.status == Run.Status.QUEUED and run.lease_expires_at is None


def _lock_for_launch(study: Study) -> Study:
    """Re-read the study under a lock that keeps its inputs as they are until
    the launch commits, without making launches wait for each other.

    Every change to a study's inputs takes its row lock with the UPDATE that
    bumps its ``input_version`` (``workspace.services._checks.locked``); a
    launch takes it ``FOR SHARE``
    on PostgreSQL, which those changes wait for but other launches do not, so
    many launches of one study read its inputs at the same time. (SQLite
    locks the whole database for a write anyway.)"""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            table, key = Study._meta.db_table, Study._meta.pk.column
            cursor.execute(f'SELECT 1 FROM "{table}" WHERE "{key}" = %s FOR SHARE', [study.pk])  # noqa: S608
        return Study.objects.get(pk=study.pk)
    return Study.objects.select_for_update().get(pk=study.pk)


# The first keys of the per-study advisory locks (pg_advisory_xact_lock(key,
# study)): workers taking snapshots, launches checking the inputs.
_BUILD_LOCK_KEY = 17_06
_CHECK_LOCK_KEY = 17_07
# ... and launches numbering their run (Run.number): the study's row lock is
# only shared between launches, so the next number is taken under this one.
_NUMBER_LOCK_KEY = 17_08


def _one_at_a_time(key: int, study: Study) -> None:
    """Wait for, then hold until this transaction ends, the study's advisory
    lock ``key``. PostgreSQL only (SQLite serialises writers anyway)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [key, study.pk])


def _serialise_builds(study: Study) -> None:
    """Make the workers that find their run without a snapshot build it one
    at a time per study: the next finds the snapshot the first stored in
    every waiting run."""
    _one_at_a_time(_BUILD_LOCK_KEY, study)


def _checked(study: Study) -> bool:
    """Whether a run was launched at the study's current ``input_version``
    (its launch checked the inputs, which have not changed since)."""
    return Run.objects.filter(study=study, input_version=study.input_version).exists()


def _latest_round(study: Study) -> int | None:
    """The number of the study's latest revision round (all are closed once
    the study is), which a run records as the round it used."""
    return RevisionRound.objects.filter(study=study).aggregate(latest=Max("number"))["latest"]


def _launch_copying(study: Study, launched_by: User | None, tolerance: float) -> Run | None:
    """A new run with the snapshot of a run of ``study`` launched at its
    current ``input_version`` and ``tolerance``, copied inside the database
    (never decoded here; null while that run's is not taken yet, and then
    both get theirs together); None when there is none. Same inputs, so the
    same snapshot, already checked when that run was launched."""
    source = (
        Run.objects.filter(study=study, input_version=study.input_version, tolerance=tolerance)
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )
    if source is None:
        return None
    # One INSERT whose snapshot is a subquery: the database copies the
    # stored value without sending it to Python and back.
    table, key = Run._meta.db_table, Run._meta.pk.column
    column = Run._meta.get_field("snapshot").column
    copied = RawSQL(f'(SELECT "{column}" FROM "{table}" WHERE "{key}" = %s)', [source])  # noqa: S608
    run = _queued_run(study, launched_by, tolerance, copied)
    del run.snapshot  # read from the database if asked for
    return run


def _queued_run(study: Study, launched_by: User | None, tolerance: float, snapshot: RawSQL | None) -> Run:
    """A new queued run of ``study`` at its current ``input_version``, with
    ``snapshot`` (a copy of another run's, or None: taken later), numbered
    next in the study (``Run.save``) while holding the study's numbering
    lock until the launch commits: concurrent launches take 1, 2, 3 in turn."""
    _one_at_a_time(_NUMBER_LOCK_KEY, study)
    return Run.objects.create(
        study=study,
        launched_by=launched_by,
        tolerance=tolerance,
        snapshot=snapshot,
        input_version=study.input_version,
        revision_round=_latest_round(study),
        lease_expires_at=queue_lease(timezone.now()),
    )


def _refuse_invalid_inputs(study: Study) -> None:
    """Refuse the launch (``PhaseConflict``, ``run_inputs_invalid``) when the
    snapshot taken now could not be evaluated. Decided by counts in the
    database (``inputs_complete``); only when they find a gap or a doubt are
    the inputs read and checked whole, for the reason to give (and a launch
    they let through after all goes ahead)."""
    if inputs_complete(study=study):
        return
    try:
        snapshot_arrays(study_snapshot(study=study))
    except RunInputError as error:
        raise PhaseConflict(f"The run cannot start: {error}.", code="run_inputs_invalid") from None


@transaction.atomic
def run_launch(*, study: Study, launched_by: AbstractBaseUser | None, tolerance: float = core.DEFAULT_TOLERANCE) -> Run:
    """Launch a run of a closed study: a new queued run, enqueued after
    commit. Refused (``PhaseConflict``) unless the study is closed and its
    inputs can be evaluated. The run is saved whether or not the broker can
    be reached (see ``_enqueue``).

    The run's snapshot is the inputs at launch, but is not read here: the
    run records the study's ``input_version``, and the snapshot is taken by
    the worker that claims the run while that version holds
    (``run_snapshot_take``), or by the next change of the inputs before it
    writes anything (``runs_take_snapshots``), whichever comes first. When a
    run of the same version and tolerance exists, its snapshot is copied in
    the database (null while it waits too). The study's row lock, held
    ``FOR SHARE`` until commit, keeps the inputs as they are while the
    launch checks them (``_refuse_invalid_inputs``, only for the first
    launch of a version, one at a time: the others were checked with it).
    ``launched_by``: the study's designer (``RoleRequired`` otherwise), or
    None for the system (a command, a task)."""
    if launched_by is not None:
        require_role(study=study, user=launched_by, role=Membership.Role.DESIGNER, action="launch validation runs")
    study = _lock_for_launch(study)
    if not phase_allows(study, Action.LAUNCH_RUN):
        raise PhaseConflict(
            f"Validation runs need a closed study; this one is in the {study.phase} phase. Close the assessment first."
        )
    if not (isinstance(tolerance, float) and 0 < tolerance < 1):
        raise ValueError("tolerance must be a float in (0, 1)")
    # A ForeignKey to AUTH_USER_MODEL, which django-stubs types as auth.User.
    user = cast("User | None", launched_by)
    run = _launch_copying(study, user, tolerance)
    if run is None:
        if not _checked(study):
            # Launches right after a change check one at a time: the first
            # checks, the others find its run once it commits.
            _one_at_a_time(_CHECK_LOCK_KEY, study)
            if not _checked(study):
                _refuse_invalid_inputs(study)
        run = _queued_run(study, user, tolerance, None)
    transaction.on_commit(lambda: _enqueue(run.pk))
    return run


# --- the snapshot, taken after the launch -------------------------------------


def _take_snapshots(study: Study, version: int) -> list[int]:
    """Store in every run of ``study`` launched at ``version`` and still
    without a snapshot the inputs as they are now, read once for all of them
    (each with its own tolerance). The caller holds the study's row lock and
    knows the inputs are still those of ``version``. Returns the runs given
    one."""
    pending = list(
        Run.objects.filter(study=study, input_version=version, snapshot__isnull=True).values_list("pk", "tolerance")
    )
    if not pending:
        return []
    inputs = study_snapshot(study=study)
    for tolerance in sorted({t for _, t in pending}):
        Run.objects.filter(pk__in=[pk for pk, t in pending if t == tolerance], snapshot__isnull=True).update(
            snapshot={**inputs, "tolerance": tolerance}
        )
    return [pk for pk, _ in pending]


def runs_take_snapshots(study: Study) -> list[int]:
    """Before a change of ``study``'s inputs (registered with
    ``workspace.services.before_inputs_change``; called under the study's
    row lock, its ``input_version`` just bumped, nothing written yet): the
    runs launched at the version before and still without a snapshot take it
    now, from the inputs as they still are. Only a closed study can have any
    (runs are launched in that phase, and leaving it is a change that takes
    them), so a change in another phase costs no query."""
    if not phase_allows(study, Action.LAUNCH_RUN):
        return []
    return _take_snapshots(study, study.input_version - 1)


@transaction.atomic
def run_snapshot_take(*, run_id: int) -> dict | None:
    """The run's snapshot, taken now if it has none (the worker that claimed
    it): under the study's row lock ``FOR SHARE`` (changes of the inputs
    wait), and only if the study's ``input_version`` is still the run's, so
    the inputs read are those at launch; one worker at a time per study
    (``_serialise_builds``), and the one that reads them stores them in
    every run waiting for the same version. None when the version has moved
    on without the snapshot being taken (it cannot be any more)."""
    study_id, version = Run.objects.values_list("study_id", "input_version").get(pk=run_id)
    study = _lock_for_launch(Study(pk=study_id))
    _serialise_builds(study)
    snapshot = Run.objects.values_list("snapshot", flat=True).get(pk=run_id)
    if snapshot is None and version is not None and study.input_version == version:
        _take_snapshots(study, version)
        snapshot = Run.objects.values_list("snapshot", flat=True).get(pk=run_id)
    return snapshot


# --- execute -------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What the task should do after ``run_execute``."""

    status: str
    retry_in: float | None = None
    # Whether this delivery claimed the run (and so computed it or failed it).
    claimed: bool = True


def run_claim(*, run_id: int) -> int | None:
    """Take the run for this worker: ``queued`` → ``running``, or take over a
    ``running`` run whose lease has expired (its worker died). A conditional
    UPDATE, so of two deliveries at most one wins. Returns the number of the
    attempt, or None when the run is not ours to execute."""
    now = timezone.now()
    claimable = Q(status=Run.Status.QUEUED) | Q(status=Run.Status.RUNNING, lease_expires_at__lt=now)
    with transaction.atomic():
        claimed = Run.objects.filter(claimable, pk=run_id).update(
            status=Run.Status.RUNNING,
            started_at=now,
            lease_expires_at=run_lease(now),
            attempts=F("attempts") + 1,
        )
        if claimed:
            history.record_query(Run.objects.filter(pk=run_id), "~")
    if not claimed:
        return None
    return Run.objects.values_list("attempts", flat=True).get(pk=run_id)


def _held(run_id: int, attempt: int) -> QuerySet[Run]:
    """The run, only while this attempt still holds it."""
    return Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, attempts=attempt)


def _finished_publish(run_id: int) -> None:
    """Tell the listeners (workspace.events) the run's outcome, once it is
    stored: ``run.succeeded`` or ``run.failed``, with its id and number."""
    study_id, number, status = Run.objects.values_list("study_id", "number", "status").get(pk=run_id)
    event_publish(f"run.{status}", study_id=study_id, run_id=run_id, number=number, status=status)


def _finish(run_id: int, attempt: int, **fields: Any) -> int:
    """Store the outcome only if this attempt still holds the run; a worker
    whose lease was taken over must not overwrite its successor."""
    with transaction.atomic():
        finished = _held(run_id, attempt).update(finished_at=timezone.now(), **fields)
        if finished:
            history.record_query(Run.objects.filter(pk=run_id), "~")
            _finished_publish(run_id)
    return finished


def _renew_lease(run_id: int, attempt: int) -> bool:
    """Extend this attempt's lease; False once the run is no longer held by
    it (finished, or handed back after the lease lapsed)."""
    return bool(_held(run_id, attempt).update(lease_expires_at=run_lease(timezone.now())))


class LeaseHeartbeat:
    """While a run (or an analysis chunk, ``engine.analyses``) computes, a
    daemon thread calls ``renew`` every ``ENGINE_RUN_HEARTBEAT_SECONDS``;
    when the worker dies, the renewals stop and the lease lapses within
    ``ENGINE_RUN_LEASE_SECONDS``. ``renew`` returns False once the work is no
    longer held by this attempt, which ends the beats.

    The engine's numpy work releases the GIL or yields it every few
    milliseconds, so the thread keeps time while the work computes.
    """

    def __init__(self, name: str, renew: Callable[[], bool]) -> None:
        self.name, self.renew = name, renew
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"{name.replace(' ', '-')}-lease", daemon=True)

    def __enter__(self) -> "LeaseHeartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        try:
            while not self._stop.wait(settings.ENGINE_RUN_HEARTBEAT_SECONDS):
                try:
                    held = self.renew()
                except DatabaseError as error:
                    # The lease outlasts several missed beats; try again.
                    logger.warning("%s: lease not renewed (%s); retrying", self.name, error)
                    continue
                if not held:
                    logger.warning("%s: this attempt no longer holds it", self.name)
                    return
                self.renewals += 1
        finally:
            connection.close()  # this thread's own connection


def run_execute(*, run_id: int) -> Outcome:
    """Claim and execute a run. Safe to call any number of times."""
    attempt = run_claim(run_id=run_id)
    if attempt is None:
        run = Run.objects.filter(pk=run_id).only("status", "lease_expires_at").first()
        if run is None or run.is_finished:
            return Outcome(status=run.status if run else "missing", claimed=False)
        if run.status == Run.Status.RUNNING:
            # Another delivery holds a live lease (e.g. the message came back
            # when a worker process was lost): look again once it may have
            # lapsed, seconds from now (the sweep would also hand it back).
            lease = run.lease_expires_at or timezone.now()  # always set while running
            wait = max((lease - timezone.now()).total_seconds(), 0) + 1
            return Outcome(status=run.status, retry_in=wait, claimed=False)
        return Outcome(status=run.status, claimed=False)
    if attempt > MAX_ATTEMPTS:
        _finish(
            run_id,
            attempt,
            status=Run.Status.FAILED,
            error=f"workers were lost {attempt - 1} times while running it; launch it again",
        )
        return Outcome(status=Run.Status.FAILED)
    with LeaseHeartbeat(f"run {run_id}", lambda: _renew_lease(run_id, attempt)):
        return _compute(run_id, attempt)


# Why a run fails when the study's inputs changed after its launch without
# its snapshot being taken (every change of the inputs takes them first, so
# only a change made around the services, e.g. a migration, can do it).
SNAPSHOT_LOST = (
    "The study's inputs changed after this run was launched and before its snapshot was taken; launch it again."
)


def _compute(run_id: int, attempt: int) -> Outcome:
    """Evaluate the claimed run's snapshot (taken now if it has none yet)
    and store the outcome."""
    started = time.perf_counter()

    def failed(error: str) -> Outcome:
        _finish(run_id, attempt, status=Run.Status.FAILED, error=error, duration_seconds=time.perf_counter() - started)
        return Outcome(status=Run.Status.FAILED)

    try:
        snapshot = Run.objects.values_list("snapshot", flat=True).get(pk=run_id)
        if snapshot is None:
            snapshot = run_snapshot_take(run_id=run_id)
            if snapshot is None:
                return failed(SNAPSHOT_LOST)
        results = evaluate_snapshot(snapshot)
    except RunInputError as error:
        return failed(f"The inputs cannot be evaluated: {error}.")
    except (SoftTimeLimitExceeded, DatabaseError):
        # Not a bug in the run: the task turns the first into a time-limit
        # failure, and sends the run back to the queue on the second.
        raise
    except Exception as error:  # a bug must still end the run, not leave it running
        logger.exception("run %s failed", run_id)
        return failed(f"Internal error: {type(error).__name__}: {error}")
    updated = _finish(
        run_id,
        attempt,
        status=Run.Status.SUCCEEDED,
        results=results,
        error="",
        duration_seconds=time.perf_counter() - started,
    )
    if not updated:
        return Outcome(status="superseded", claimed=False)
    return Outcome(status=Run.Status.SUCCEEDED)


def worker_database_options() -> None:
    """Bound every wait of a worker on the database (called when a worker
    starts, before its first connection): a statement longer than
    ``ENGINE_WORKER_STATEMENT_TIMEOUT_SECONDS`` is cancelled by the server.
    (Connecting is bounded for every process by the settings'
    ``connect_timeout``, and a connection whose peer stopped answering by TCP
    keepalives and ``tcp_user_timeout``.)"""
    database: dict[str, Any] = settings.DATABASES["default"]
    if not str(database["ENGINE"]).endswith("postgresql"):
        return
    options: dict[str, Any] = database.setdefault("OPTIONS", {})
    timeout_ms = int(settings.ENGINE_WORKER_STATEMENT_TIMEOUT_SECONDS * 1000)
    options["options"] = f"{options.get('options', '')} -c statement_timeout={timeout_ms}".strip()
    connection.close()


def run_fail_timeout(*, run_id: int, seconds: float) -> None:
    with transaction.atomic():
        failed = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
            status=Run.Status.FAILED,
            finished_at=timezone.now(),
            error=(
                f"The run took longer than the {seconds} s time limit; "
                "launch it again or ask an administrator to raise the limit."
            ),
        )
        if failed:
            history.record_query(Run.objects.filter(pk=run_id), "~")
            _finished_publish(run_id)


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
        running = list(Run.objects.filter(pk__in=ids, status=Run.Status.RUNNING).values_list("pk", flat=True))
        Run.objects.filter(lapsed, pk__in=ids).update(status=Run.Status.QUEUED, lease_expires_at=queue_lease(now))
        # A run handed back changes status (one already queued only gets a new lease).
        history.record_query(Run.objects.filter(pk__in=running), "~")
    for run_id in ids:
        _enqueue(run_id, RESEND_PRIORITY)
    return ids
