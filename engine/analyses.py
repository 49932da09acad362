"""Robustness analyses of a succeeded run, the workflow's writes: launch,
claim a chunk, execute it (with its lease heartbeat), merge, cancel,
recover. The mathematics is in ``engine.robustness`` (pure NumPy); what
each kind of analysis computes from a run is its *kernel* (``KERNELS``).

An analysis's work is a number of **units** (Monte Carlo samples, or
experts left out one at a time) split into **chunks**
(``ENGINE_ANALYSIS_CHUNK_SAMPLES`` / ``_EXPERTS`` units each). Launching
creates the analysis and its chunks in one transaction and, after commit,
sends one message per chunk as a Celery group, so every worker takes a share.
A chunk is claimed, leased and recovered exactly like a run
(``engine.services``): a conditional UPDATE claims it, a heartbeat renews the
lease while it computes, and the recovery sweep hands back a chunk whose
lease lapsed. A chunk's counts are stored with its ``done`` status in one
write, only while the attempt still holds it; a unit's outcome depends on
the analysis's seed and the unit's index alone, never on the chunk it falls
in, so the merged counts (which add) are those of one unchunked analysis.
The chunk that completes the analysis merges every chunk's counts and stores
the result with ``succeeded`` in one conditional write. Cancelling stops
chunks that have not started; running ones stop at their end.
"""

import logging
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, cast

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from workspace.errors import InvalidInput, PhaseConflict
from workspace.limits import ANALYSIS_SAMPLES_DEFAULT, ANALYSIS_SAMPLES_MAX

from .models import Analysis, AnalysisChunk, Run
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


class Kernel(Protocol):
    """What one kind of analysis computes from a run (its snapshot and
        results): ``units`` of work, each unit's counts, their merge and the
        summary the pages and the API show (the units are the spec's samples,
    or the run's experts for leave-one-out). ``compute`` and ``merge`` must make
        the merged counts independent of how the units were chunked."""

    def check(self, spec: dict) -> dict: ...  # the spec, normalised; InvalidInput naming a field otherwise

    def prepare(self, run_id: int, spec: dict) -> dict: ...  # at launch: what the run's data adds to the spec

    def compute(self, run: "RunInputs", spec: dict, seed: int, start: int, count: int) -> dict: ...

    def merge(self, counts: list[dict]) -> dict: ...

    def summary(self, run: "RunInputs", spec: dict, merged: dict) -> dict: ...


@dataclass(frozen=True)
class RunInputs:
    """A run's stored snapshot and results, as a kernel reads them."""

    snapshot: dict
    results: dict


# The kernels by kind (``Analysis.Kind``), registered by ``engine.robustness_kernels``.
KERNELS: dict[str, Kernel] = {}


def kernel(kind: str) -> Kernel:
    return KERNELS[kind]


def _chunk_units(kind: str) -> int:
    if kind == Analysis.Kind.LEAVE_ONE_OUT:
        return max(1, settings.ENGINE_ANALYSIS_CHUNK_EXPERTS)
    return max(1, settings.ENGINE_ANALYSIS_CHUNK_SAMPLES)


# --- launch ----------------------------------------------------------------------


def _check_samples(samples: object) -> int:
    if samples is None:
        return ANALYSIS_SAMPLES_DEFAULT
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= ANALYSIS_SAMPLES_MAX:
        raise InvalidInput({"samples": f"a whole number of samples from 1 to {ANALYSIS_SAMPLES_MAX:,}"})
    return samples


def _check_seed(seed: object) -> int:
    if seed is None:
        return secrets.randbits(63)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise InvalidInput({"seed": "a whole number from 0 to 2^63 - 1"})
    return seed


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
    if run.status != Run.Status.SUCCEEDED:
        raise PhaseConflict(
            f"Robustness analyses need a succeeded run; run {run.pk} is {run.status}.", code="run_not_finished"
        )
    chosen = kernel(kind)
    spec = chosen.check(dict(spec or {}))
    if kind == Analysis.Kind.MONTE_CARLO:
        units = spec["samples"] = _check_samples(samples)
    elif samples is not None:
        raise InvalidInput({"samples": "only a Monte Carlo analysis takes a number of samples"})
    else:
        units = len(cast(dict, run.results)["experts"])
    spec = chosen.prepare(run.pk, spec)
    analysis = Analysis.objects.create(
        run=run,
        kind=kind,
        launched_by=cast("User | None", launched_by),
        spec=spec,
        seed=_check_seed(seed),
        units=units,
    )
    size = _chunk_units(kind)
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


def run_inputs(run_id: int) -> RunInputs:
    snapshot, results = Run.objects.values_list("snapshot", "results").get(pk=run_id)
    return RunInputs(snapshot=cast(dict, snapshot), results=cast(dict, results))  # a succeeded run's


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


def _fail(analysis_id: int, error: str) -> None:
    Analysis.objects.filter(pk=analysis_id, status__in=ACTIVE).update(
        status=Analysis.Status.FAILED, error=error, finished_at=timezone.now()
    )


def chunk_execute(*, chunk_id: int) -> str:
    """Claim and compute one chunk; the chunk that completes its analysis
    merges it. Safe to call any number of times. Returns what happened."""
    attempt = chunk_claim(chunk_id=chunk_id)
    if attempt is None:
        return "not claimed"
    chunk = AnalysisChunk.objects.select_related("analysis").get(pk=chunk_id)
    analysis = chunk.analysis
    if attempt > MAX_ATTEMPTS:
        _fail(analysis.pk, f"workers were lost {attempt - 1} times while computing it; launch it again")
        return Analysis.Status.FAILED
    with LeaseHeartbeat(f"analysis chunk {chunk_id}", _renewer(chunk_id, attempt)):
        try:
            inputs = run_inputs(analysis.run_id)
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
    Analysis.objects.filter(pk=analysis_id, status__in=ACTIVE).update(
        status=Analysis.Status.SUCCEEDED, result=result, finished_at=timezone.now()
    )
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
