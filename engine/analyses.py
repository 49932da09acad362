"""Robustness analyses of a succeeded run, the workflow's writes: launch,
claim a chunk, execute it (with its lease heartbeat), merge, cancel,
recover. The mathematics is in ``engine.robustness`` (pure NumPy); what
each kind of analysis computes from a run is its *kernel* (``KERNELS``).

An analysis's work is a number of **units** (Monte Carlo samples, or
experts left out one at a time) split into **chunks**
(``MonteCarlo.chunk_units``: about ``ENGINE_ANALYSIS_CHUNK_SECONDS`` of
samples each, at most ``ENGINE_ANALYSIS_CHUNK_SAMPLES``; or
``ENGINE_ANALYSIS_CHUNK_EXPERTS`` experts). Launching
creates the analysis and its chunks in one transaction and, after commit,
sends one message per chunk as a Celery group, so every worker takes a share.
A chunk is claimed, leased and recovered exactly like a run
(``engine.services``): a conditional UPDATE claims it, a heartbeat renews the
lease while it computes, and the recovery sweep hands back a chunk whose
lease lapsed. A chunk's counts are stored with its ``done`` status in one
write, only while the attempt still holds it; a unit's outcome depends on
the analysis's seed and the unit's index alone, never on the chunk it falls
in, so the merged counts (which add) are those of one unchunked analysis.
A worker process keeps the run's inputs and the prepared analysis for its
next chunks (``engine.robustness_kernels.KEPT_RUNS``, ``KEPT_PREPARED``).
The chunk that completes the analysis merges every chunk's counts and stores
the result with ``succeeded`` in one conditional write. Cancelling stops
chunks that have not started; running ones stop at their end.
"""

import logging
import math
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone

from workspace.errors import InvalidInput, PhaseConflict, RateLimited, ServiceError
from workspace.events import event_publish
from workspace.models import Membership, Study
from workspace.services.roles import require_role

from .models import Analysis, AnalysisChunk, Run
from .robustness_kernels import KERNELS, Kernel, RunInputs, kept_run_inputs, run_inputs, run_key
from .services import (
    BROKER_ERRORS,
    LAUNCH_PRIORITY,
    MAX_ATTEMPTS,
    RESEND_PRIORITY,
    LeaseHeartbeat,
    queue_lease,
    run_lease,
)

logger = logging.getLogger(__name__)

ACTIVE = (Analysis.Status.QUEUED, Analysis.Status.RUNNING)


def kernel(kind: str) -> Kernel:
    """The kernel of an analysis kind (``engine.robustness_kernels.KERNELS``)."""
    return KERNELS[kind]


# --- launch ----------------------------------------------------------------------


def _check_seed(seed: object) -> int:
    if seed is None:
        return secrets.randbits(63)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise InvalidInput({"seed": "a whole number from 0 to 2^63 - 1"})
    return seed


# --- bounds (issue 29, finding 10) --------------------------------------------------
# Each limit is a setting (approve_site/settings.py, docs/architecture.md
# "Limits"): queued or running analyses at once per run, per study and per
# user; launches per user and Monte Carlo samples per study in the last hour.
WINDOW = timedelta(hours=1)


def _free_after(launches: list[tuple[datetime, int]], excess: int, now: datetime) -> float:
    """The seconds until enough of ``launches`` (``(launched_at, units)`` in
    the window, oldest first) leave it that ``excess`` units are freed."""
    freed = 0
    for launched_at, units in launches:
        freed += units
        if freed >= excess:
            return max(1.0, (launched_at + WINDOW - now).total_seconds())
    return WINDOW.total_seconds()


def _cap_refusal(run: Run, launched_by: AbstractBaseUser | None) -> PhaseConflict | None:
    """A cap on queued or running analyses reached (one query)."""
    active = Q(status__in=ACTIVE)
    # (not named "run": an aggregate's name would hide the field in the filters)
    counted = {"of_run": Q(run=run), "of_study": Q(run__study_id=run.study_id)}
    if launched_by is not None:
        counted["of_user"] = Q(launched_by=launched_by)
    counts = Analysis.objects.aggregate(**{key: Count("pk", filter=active & where) for key, where in counted.items()})
    caps = (
        ("of_run", settings.ANALYSES_ACTIVE_PER_RUN_MAX, "ANALYSES_ACTIVE_PER_RUN_MAX", "of this run"),
        ("of_study", settings.ANALYSES_ACTIVE_PER_STUDY_MAX, "ANALYSES_ACTIVE_PER_STUDY_MAX", "of this study's runs"),
        ("of_user", settings.ANALYSES_ACTIVE_PER_USER_MAX, "ANALYSES_ACTIVE_PER_USER_MAX", "launched by you"),
    )
    for key, cap, name, whose in caps:
        if counts.get(key, 0) >= cap:
            many = f"{cap:,} analysis {whose} is" if cap == 1 else f"{cap:,} analyses {whose} are"
            return PhaseConflict(
                f"{many} already queued or running, the most allowed at once ({name}): "
                "wait for one to finish, or cancel one.",
                code="analysis_limit",
            )
    return None


def launch_refusals(
    *,
    run: Run,
    launched_by: AbstractBaseUser | None,
    samples: int | None = None,
    now: datetime | None = None,
) -> dict[str, ServiceError | None]:
    """For each kind of analysis, why a new one of ``run`` by ``launched_by``
    would be refused now, or None (two queries): a cap on queued or running
    analyses reached (``PhaseConflict``, 409, code ``analysis_limit``); the
    user's launches in the last hour, or for a Monte Carlo of ``samples``
    the study's samples in the last hour (``RateLimited``, 429, with when it
    would be allowed). Each message names the limit and its setting.
    Without ``samples``, the budget refuses once none is left (what the
    page says beside its button)."""
    refusal: ServiceError | None = _cap_refusal(run, launched_by)
    if refusal is not None:
        return dict.fromkeys(Analysis.Kind.values, refusal)
    now = now or timezone.now()
    mine = Q(launched_by=launched_by) if launched_by is not None else Q(pk__in=[])
    sampling = Q(run__study_id=run.study_id, kind=Analysis.Kind.MONTE_CARLO)
    recent = list(
        Analysis.objects.filter(mine | sampling, launched_at__gt=now - WINDOW)
        .order_by("launched_at")
        .values_list("launched_at", "units", "launched_by_id", "kind", "run__study")
    )
    refusal = _launches_refusal(recent, launched_by, now)
    if refusal is not None:
        return dict.fromkeys(Analysis.Kind.values, refusal)
    refusal = _budget_refusal(recent, run, samples, now)
    return {kind: refusal if kind == Analysis.Kind.MONTE_CARLO else None for kind in Analysis.Kind.values}


#: An analysis launched in the last hour as ``launch_refusals`` reads it:
#: (launched at, units, launched by id (None once the user is deleted:
#: Any, as the ORM's values_list types it int), kind, study id).
_Recent = tuple[datetime, int, Any, str, int]


def _launches_refusal(recent: list[_Recent], launched_by: AbstractBaseUser | None, now: datetime) -> RateLimited | None:
    """Decides whether the user has used up their launches of the last hour
    (``ANALYSIS_LAUNCHES_PER_USER_PER_HOUR``): that refusal, or None."""
    limit = settings.ANALYSIS_LAUNCHES_PER_USER_PER_HOUR
    launches = [(at, 1) for at, _, by, _, _ in recent if launched_by is not None and by == launched_by.pk]
    if len(launches) < limit:
        return None
    return RateLimited(
        f"Too many launches: each user may launch at most {limit:,} robustness analyses an hour "
        f"(ANALYSIS_LAUNCHES_PER_USER_PER_HOUR); you launched {len(launches):,} in the last hour.",
        _free_after(launches, len(launches) - limit + 1, now),
    )


def _budget_refusal(recent: list[_Recent], run: Run, samples: int | None, now: datetime) -> RateLimited | None:
    """Decides whether ``samples`` more (without them, one) would exceed the
    study's Monte Carlo budget of the last hour
    (``ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR``): that refusal, or None."""
    budget = settings.ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR
    sampled = [
        (at, units)
        for at, units, _, kind, study_id in recent
        if kind == Analysis.Kind.MONTE_CARLO and study_id == run.study_id
    ]
    used = sum(units for _, units in sampled)
    asked = 1 if samples is None else samples
    if used + asked <= budget:
        return None
    more = f", and {samples:,} more would exceed it." if samples is not None else ": none is left."
    return RateLimited(
        f"The study's Monte Carlo budget: at most {budget:,} samples an hour for all its runs' analyses "
        f"(ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR); {used:,} were launched in the last hour{more}",
        _free_after(sampled, used + asked - budget, now),
    )


def launch_refusal(
    *, run: Run, launched_by: AbstractBaseUser | None, kind: str, samples: int | None = None
) -> ServiceError | None:
    """``launch_refusals`` for one kind."""
    return launch_refusals(run=run, launched_by=launched_by, samples=samples)[kind]


@transaction.atomic
def analysis_launch(
    *,
    run: Run,
    kind: str,
    launched_by: AbstractBaseUser | None,
    spec: dict | None = None,
    samples: int | None = None,
    seed: int | None = None,
) -> Analysis:
    """Create an analysis of a succeeded run with its chunks, and send the
    chunks' messages after commit. ``samples`` is for Monte Carlo only (the
    default ``ANALYSIS_SAMPLES_DEFAULT``); ``seed`` makes it reproducible
    (a random one is drawn and stored otherwise)."""
    if kind not in Analysis.Kind.values:
        raise InvalidInput({"kind": f"one of {', '.join(Analysis.Kind.values)}"})
    if launched_by is not None:
        require_role(
            study=run.study, user=launched_by, role=Membership.Role.DESIGNER, action="launch robustness analyses"
        )
    if run.status != Run.Status.SUCCEEDED:
        raise PhaseConflict(
            f"Robustness analyses need a succeeded run; {run.label.lower()} is {run.status}.", code="run_not_finished"
        )
    chosen = kernel(kind)
    spec = chosen.check(dict(spec or {}))
    # The kernel says what its units are (samples, or the run's experts) and checks ``samples``.
    units = chosen.units(cast(dict, run.results), spec, samples)
    # Launches in one study wait for each other here (PostgreSQL), so that
    # two at once cannot both pass a cap with one place left.
    list(Study.objects.select_for_update().filter(pk=run.study_id).values_list("pk", flat=True))
    refusal = launch_refusal(run=run, launched_by=launched_by, kind=kind, samples=units if chosen.sampled else None)
    if refusal is not None:
        raise refusal
    spec = chosen.prepare(run.pk, spec)
    analysis = Analysis.objects.create(
        run=run,
        kind=kind,
        launched_by=cast("User | None", launched_by),
        spec=spec,
        seed=_check_seed(seed),
        units=units,
    )
    size = chosen.chunk_units(cast(dict, run.results), spec)
    lease = queue_lease(timezone.now())
    AnalysisChunk.objects.bulk_create(
        AnalysisChunk(
            analysis=analysis, index=index, start=start, count=min(size, units - start), lease_expires_at=lease
        )
        for index, start in enumerate(range(0, units, size))
    )
    ids = list(AnalysisChunk.objects.filter(analysis=analysis).values_list("pk", flat=True))
    transaction.on_commit(lambda: _enqueue(ids))
    return analysis


def _send(chunk_ids: list[int], priority: int) -> None:
    """Publish the chunks' messages as one Celery group: the one place that
    talks to the broker."""
    from celery import group

    from .tasks import execute_analysis_chunk

    group(execute_analysis_chunk.si(chunk_id).set(priority=priority) for chunk_id in chunk_ids).apply_async()


def _enqueue(chunk_ids: list[int], priority: int = LAUNCH_PRIORITY) -> bool:
    """Send the chunks' messages; with the broker unreachable, leave them
    queued without a lease for the recovery sweep."""
    if not chunk_ids:
        return True
    try:
        _send(chunk_ids, priority)
    except BROKER_ERRORS as error:
        logger.warning("analysis chunks %s stay queued: the broker is unreachable (%s)", chunk_ids, error)
        AnalysisChunk.objects.filter(pk__in=chunk_ids, status=AnalysisChunk.Status.QUEUED).update(lease_expires_at=None)
        return False
    return True


# --- execute ---------------------------------------------------------------------


def chunk_claim(*, chunk_id: int) -> int | None:
    """Take a chunk for this worker (``queued``, or ``running`` with a
    lapsed lease) while its analysis is active; the number of the attempt,
    or None when it is not ours."""
    now = timezone.now()
    claimable = Q(status=AnalysisChunk.Status.QUEUED) | Q(status=AnalysisChunk.Status.RUNNING, lease_expires_at__lt=now)
    claimed = AnalysisChunk.objects.filter(claimable, pk=chunk_id, analysis__status__in=ACTIVE).update(
        status=AnalysisChunk.Status.RUNNING,
        lease_expires_at=run_lease(now),
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    analysis_id, attempt = AnalysisChunk.objects.values_list("analysis_id", "attempts").get(pk=chunk_id)
    Analysis.objects.filter(pk=analysis_id, status=Analysis.Status.QUEUED).update(status=Analysis.Status.RUNNING)
    return attempt


def _held(chunk_id: int, attempt: int) -> QuerySet[AnalysisChunk]:
    return AnalysisChunk.objects.filter(pk=chunk_id, status=AnalysisChunk.Status.RUNNING, attempts=attempt)


def _renewer(chunk_id: int, attempt: int) -> Callable[[], bool]:
    def renew() -> bool:
        lease = run_lease(timezone.now())
        return bool(_held(chunk_id, attempt).update(lease_expires_at=lease))

    return renew


def _finished_publish(analysis_id: int) -> None:
    """Tell the listeners (workspace.events) that the analysis finished,
    with its status (succeeded or failed), kind and run."""
    study_id, run_id, number, kind, status = Analysis.objects.values_list(
        "run__study_id", "run_id", "run__number", "kind", "status"
    ).get(pk=analysis_id)
    event_publish(
        "analysis.finished",
        study_id=study_id,
        analysis_id=analysis_id,
        run_id=run_id,
        run_number=number,
        analysis_kind=kind,
        status=status,
    )


def _fail(analysis_id: int, error: str) -> None:
    if Analysis.objects.filter(pk=analysis_id, status__in=ACTIVE).update(
        status=Analysis.Status.FAILED, error=error, finished_at=timezone.now()
    ):
        _finished_publish(analysis_id)


def chunk_execute(*, chunk_id: int) -> str:
    """Claim and compute one chunk; the chunk that completes its analysis
    merges it. Safe to call any number of times. Returns what happened."""
    attempt = chunk_claim(chunk_id=chunk_id)
    if attempt is None:
        return "not claimed"
    chunk = (
        AnalysisChunk.objects.select_related("analysis")
        .annotate(
            run_launched_at=F("analysis__run__launched_at"),
            run_finished_at=F("analysis__run__finished_at"),
            run_input_version=F("analysis__run__input_version"),
        )
        .get(pk=chunk_id)
    )
    analysis = chunk.analysis
    key = run_key(analysis.run_id, chunk.run_launched_at, chunk.run_finished_at, chunk.run_input_version)
    if attempt > MAX_ATTEMPTS:
        _fail(analysis.pk, f"workers were lost {attempt - 1} times while computing it; launch it again")
        return Analysis.Status.FAILED
    with LeaseHeartbeat(f"analysis chunk {chunk_id}", _renewer(chunk_id, attempt)):
        try:
            inputs = kept_run_inputs(analysis.run_id, key)
            counts = kernel(analysis.kind).compute(inputs, analysis.spec, analysis.seed, chunk.start, chunk.count)
        except Exception as error:  # a bug must still end the analysis, not leave it running
            logger.exception("analysis %s, chunk %s failed", analysis.pk, chunk_id)
            _fail(analysis.pk, f"Internal error: {type(error).__name__}: {error}")
            return Analysis.Status.FAILED
    with transaction.atomic():
        if not _held(chunk_id, attempt).update(status=AnalysisChunk.Status.DONE, counts=counts, lease_expires_at=None):
            return "superseded"
        Analysis.objects.filter(pk=analysis.pk).update(units_done=F("units_done") + chunk.count)
    return analysis_merge(analysis_id=analysis.pk, inputs=inputs)


def analysis_merge(*, analysis_id: int, inputs: RunInputs | None = None) -> str:
    """Once every chunk is done, merge their counts and store the result
    with ``succeeded`` (one conditional write: of two chunks finishing
    together, one stores it; both would store the same)."""
    if AnalysisChunk.objects.filter(analysis_id=analysis_id).exclude(status=AnalysisChunk.Status.DONE).exists():
        return "chunk done"
    analysis = Analysis.objects.get(pk=analysis_id)
    if analysis.status not in ACTIVE:
        return analysis.status
    chosen = kernel(analysis.kind)
    counts = cast(
        "list[dict]",  # every chunk is done, so each has its counts
        list(AnalysisChunk.objects.filter(analysis_id=analysis_id).order_by("index").values_list("counts", flat=True)),
    )
    merged = chosen.merge(counts)
    inputs = inputs or run_inputs(analysis.run_id)
    result = {"counts": merged, "summary": chosen.summary(inputs, analysis.spec, merged)}
    if Analysis.objects.filter(pk=analysis_id, status__in=ACTIVE).update(
        status=Analysis.Status.SUCCEEDED, result=result, finished_at=timezone.now()
    ):
        _finished_publish(analysis_id)
    return Analysis.Status.SUCCEEDED


def analysis_cancel(*, analysis: Analysis) -> bool:
    """Cancel an unfinished analysis: chunks not yet started are never
    claimed, running ones stop at their end. False if it had finished."""
    return bool(
        Analysis.objects.filter(pk=analysis.pk, status__in=ACTIVE).update(
            status=Analysis.Status.CANCELLED, finished_at=timezone.now()
        )
    )


def analyses_recover_stale(*, now: datetime | None = None) -> list[int]:
    """The recovery sweep for chunks (``engine.services.runs_recover_stale``
    for runs): every unfinished chunk of an active analysis whose lease has
    lapsed is handed back to the queue and its message sent ahead of new
    work. Returns the chunk ids handed back."""
    now = now or timezone.now()
    lapsed = (
        Q(status__in=[AnalysisChunk.Status.QUEUED, AnalysisChunk.Status.RUNNING])
        & Q(analysis__status__in=ACTIVE)
        & (Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
    )
    with transaction.atomic():
        ids = list(
            AnalysisChunk.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(lapsed)
            .values_list("pk", flat=True)
        )
        AnalysisChunk.objects.filter(pk__in=ids).update(
            status=AnalysisChunk.Status.QUEUED, lease_expires_at=queue_lease(now)
        )
    _enqueue(ids, RESEND_PRIORITY)
    return ids


def analysis_progress(analysis: Analysis) -> dict[str, Any]:
    """How far an analysis is: units done of all, as a whole percentage."""
    percent = math.floor(100 * analysis.units_done / analysis.units) if analysis.units else 100
    return {"done": analysis.units_done, "total": analysis.units, "percent": percent}
