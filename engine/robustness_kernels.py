"""The kernels of the robustness analyses, one per kind in one table
(``KERNELS``, read by the workflow ``engine.analyses``): what each kind's
units are and how many go in a chunk, what it computes from a run's stored
snapshot for a range of its units, how chunks merge, and the summary (numbers
and names; ``engine.analysis_words`` writes the sentences).

The mathematics is ``engine.core`` and ``engine.robustness``; this module
only cuts it into units.

Each worker process keeps what its last chunks read and prepared
(``KEPT_RUNS``, ``KEPT_PREPARED``, at most ``ENGINE_ANALYSIS_KEPT_RUNS``
of each): a run's inputs decoded, and a Monte Carlo's validated inputs and
evaluated run, so that its next chunks of the same run neither read nor
evaluate it again. They are keyed by what identifies a run's inputs
immutably (``run_key``): a succeeded run's snapshot and results are written
once, in the write that makes it succeeded, and never again."""

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast

import numpy as np
from django.conf import settings

from workspace import limits
from workspace.errors import InvalidInput

from . import core, robustness
from .bootstrap_sources import bootstrap_columns, bootstrap_plan, elicited_columns, elicited_plan, typed_sampled
from .models import Analysis, Run
from .snapshot import snapshot_arrays, snapshot_expert_values, snapshot_standard_errors


@dataclass(frozen=True)
class RunInputs:
    """A run's stored snapshot and results, as a kernel reads them; ``key``
    (``run_key``) when a worker may keep what it prepares from them, None
    otherwise."""

    snapshot: dict
    results: dict
    key: tuple | None = None


def run_inputs(run_id: int) -> RunInputs:
    """The stored snapshot and results of a (succeeded) run, read now."""
    snapshot, results = Run.objects.values_list("snapshot", "results").get(pk=run_id)
    return RunInputs(snapshot=cast(dict, snapshot), results=cast(dict, results))


def run_key(run_id: int, launched_at: datetime, finished_at: datetime | None, input_version: int | None) -> tuple:
    """What identifies a succeeded run's inputs: its id, when it was
    launched and finished (another run given the same id, as SQLite may
    after a rollback, differs in them) and the study's input version."""
    return (
        run_id,
        launched_at.isoformat(),
        finished_at.isoformat() if finished_at is not None else None,
        input_version,
    )


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(Generic[K, V]):
    """What a worker process keeps, least recently used first out, at most
    ``ENGINE_ANALYSIS_KEPT_RUNS`` entries (read when one is put). ``take``
    hands an entry out and forgets it until it is ``put`` back, so that two
    threads never share one (a prepared Monte Carlo's buffers)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def take(self, key: K) -> V | None:
        with self._lock:
            return self._entries.pop(key, None)

    def put(self, key: K, value: V) -> None:
        limit = max(0, int(settings.ENGINE_ANALYSIS_KEPT_RUNS))
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > limit:
                self._entries.popitem(last=False)

    def held(self) -> list[K]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: The runs' inputs this process read last, by ``run_key``.
KEPT_RUNS: Kept[tuple, RunInputs] = Kept()
#: The Monte Carlo analyses this process prepared last, by run key, spec and memory budget.
KEPT_PREPARED: Kept[tuple, Any] = Kept()


def kept_run_inputs(run_id: int, key: tuple) -> RunInputs:
    """The run's inputs, read once per process while kept (``KEPT_RUNS``)."""
    inputs = KEPT_RUNS.get(key)
    if inputs is None:
        read = run_inputs(run_id)
        inputs = RunInputs(snapshot=read.snapshot, results=read.results, key=key)
        KEPT_RUNS.put(key, inputs)
    return inputs


class Kernel(Protocol):
    """What one kind of analysis computes from a run (its snapshot and
    results): its ``units`` of work (the spec's samples, or the run's
    experts for leave-one-out) and how many a chunk holds, each unit's
    counts, their merge and the summary the pages and the API show.
    ``compute`` and ``merge`` must make the merged counts independent of
    how the units were chunked."""

    #: Whether the units are samples (a Monte Carlo's, counted by the study's samples budget).
    sampled: bool

    def check(self, spec: dict) -> dict: ...  # the spec, normalised; InvalidInput naming a field otherwise

    def units(self, results: dict, spec: dict, samples: object) -> int: ...  # InvalidInput naming ``samples``

    def chunk_units(self, results: dict, spec: dict) -> int: ...  # the units of one chunk (settings, the run's size)

    def prepare(self, run_id: int, spec: dict) -> dict: ...  # at launch: what the run's data adds to the spec

    def compute(self, run: RunInputs, spec: dict, seed: int, start: int, count: int) -> dict: ...

    def merge(self, counts: list[dict]) -> dict: ...

    def summary(self, run: RunInputs, spec: dict, merged: dict) -> dict: ...


def check_samples(samples: object) -> int:
    """A Monte Carlo's number of samples: the default when not given, else a
    whole number from 1 to ``ANALYSIS_SAMPLES_MAX``."""
    if samples is None:
        return limits.ANALYSIS_SAMPLES_DEFAULT
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= limits.ANALYSIS_SAMPLES_MAX:
        raise InvalidInput({"samples": f"a whole number of samples from 1 to {limits.ANALYSIS_SAMPLES_MAX:,}"})
    return samples


# The candidates named in each left-out expert's row.
TOP = 3


def _names(names: Sequence[str], indices: Sequence[int]) -> list[str]:
    return [names[i] for i in indices]


def _evaluation_arguments(arrays: tuple[np.ndarray, ...], own: core.ExpertValues | None) -> dict:
    """``engine.core.evaluate``'s arguments from ``snapshot_arrays`` and
    ``snapshot_expert_values``."""
    weights, peer, lower, upper, measurements = arrays
    return {
        "weights": weights,
        "peer_weights": peer,
        "lower": lower,
        "upper": upper,
        "measurements": measurements,
        "expert_values": own,
    }


class LeaveOneOut:
    """Units are the run's experts, in the snapshot's order; each unit's
    outcome is the ranking of the run without that expert."""

    sampled = False

    def check(self, spec: dict) -> dict:
        if spec:
            raise InvalidInput({"spec": "leaving one expert out takes no options"})
        return {}

    def units(self, results: dict, spec: dict, samples: object) -> int:
        """One unit per expert of the run; no samples."""
        if samples is not None:
            raise InvalidInput({"samples": "only a Monte Carlo analysis takes a number of samples"})
        return len(results["experts"])

    def chunk_units(self, results: dict, spec: dict) -> int:
        return max(1, settings.ENGINE_ANALYSIS_CHUNK_EXPERTS)

    def prepare(self, run_id: int, spec: dict) -> dict:
        return spec

    def compute(self, run: RunInputs, spec: dict, seed: int, start: int, count: int) -> dict:
        snapshot = run.snapshot
        experts, candidates = snapshot["experts"], snapshot["candidates"]
        arrays = snapshot_arrays(snapshot)
        if len(experts) < 2:
            raise ValueError("leaving one expert out needs at least two experts")
        # The one implementation of the analysis (engine.robustness), for
        # this chunk's experts; this kernel only names what it returns.
        result = robustness.leave_one_out(
            **_evaluation_arguments(arrays, snapshot_expert_values(snapshot)),
            tolerance=snapshot["tolerance"],
            experts=range(start, start + count),
        )
        rows = []
        for row, expert in enumerate(result.experts.tolist()):
            order, ranks = result.order[row], result.ranks[row]
            tau = float(result.kendall_tau[row])
            rows.append(
                {
                    "index": expert,
                    "expert": experts[expert],
                    "winner": _names(candidates, [int(c) for c in order if ranks[c] == 1]),
                    "top_three": _names(candidates, order[:TOP].tolist()),
                    # Kendall's tau-b; 1 when the ranks are unchanged, None
                    # (undefined) when every candidate ties in one ranking only.
                    "tau": tau if np.isfinite(tau) else None,
                    "changes_winner": bool(result.winner_changed[row]),
                }
            )
        return {"rows": rows}

    def merge(self, counts: list[dict]) -> dict:
        return {"rows": sorted((row for chunk in counts for row in chunk["rows"]), key=lambda row: row["index"])}

    def summary(self, run: RunInputs, spec: dict, merged: dict) -> dict:
        """Numbers and names only: the words are written when shown (engine.analysis_words)."""
        results = run.results["candidates"]
        winner = [c["name"] for c in results if c["rank"] == 1]
        rows = merged["rows"]
        return {"winner": winner, "rows": rows, "changed": [row["expert"] for row in rows if row["changes_winner"]]}


# --- Monte Carlo (SMAA-2 rank acceptability) ---------------------------------------------

# The ranks each candidate's row of the summary lists (the counts keep every rank).
SUMMARY_RANKS = 10
# What a Monte Carlo spec holds, with its type: the page's and the API's choices.
MONTE_CARLO_OPTIONS = {"judgments": bool, "peer_weights": bool, "ranges_percent": float, "measurements": bool}
# Range bounds move by less than half the range's width (engine.robustness.SamplingSpec).
RANGES_PERCENT_MAX = limits.RANGES_PERCENT_MAX


def _ahp_judgments(snapshot: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """``(ahp_matrices (k, A, A), ahp_experts (k,))`` from a snapshot's
    ``attribute_judgments``: the experts who prioritised the attributes by
    AHP with every pair judged (all-ones matrices, never read, for the others). None for
    a snapshot from before they were recorded (version 1)."""
    grids = snapshot.get("attribute_judgments")
    if grids is None:
        return None
    count = len(snapshot["attributes"])
    matrices = np.ones((len(grids), count, count))  # all-ones (consistent) for the experts not sampled by AHP
    experts = np.zeros(len(grids), dtype=bool)
    for i, grid in enumerate(grids):
        if grid is not None and all(value is not None for row in grid for value in row):
            matrices[i] = np.array(grid, dtype=float).reshape(count, count)
            experts[i] = True
    return matrices, experts


def _sampled_inputs(spec: dict, snapshot: dict) -> dict:
    """What a Monte Carlo moves, as data (``engine.analysis_words.sampled_words``
    writes it out): the judgments (None when not sampled; with a snapshot
    that predates the recorded AHP judgments, not recorded; else how many
    experts' AHP judgments and how many others' weights), the peer weights,
    the ranges' shift and the measurements (None when not sampled; else
    the metrics bootstrapped, elicited and moved by standard errors)."""
    judgments = None
    if spec["judgments"]:
        recorded = _ahp_judgments(snapshot)
        if recorded is None:
            judgments = {"recorded": False, "ahp": 0, "others": 0}
        else:
            ahp = int(recorded[1].sum())
            judgments = {"recorded": True, "ahp": ahp, "others": len(recorded[1]) - ahp}
    measurements = None
    if spec["measurements"]:
        measurements = {
            "bootstrap": [column["metric"] for column in spec.get("bootstrap", [])],
            "elicited": [column["metric"] for column in spec.get("elicited", [])],
            "standard_errors": list(spec.get("standard_errors", [])),
        }
    return {
        "judgments": judgments,
        "peer_weights": bool(spec["peer_weights"]),
        "ranges_percent": spec["ranges_percent"],
        "measurements": measurements,
    }


# The estimated cost of a sample (``sample_seconds``), in nanoseconds per
# unit of work, measured at 100 x 20 x 1,000 and 1,000 x 20 x 1,000
# (bench/analysis_workers.py prints the estimate beside the workers' time).
_NS_RANKS = 10  # per candidate and doubling of the candidates (the sort)
_NS_PAIRS = 2  # per pair counted
_NS_JUDGMENTS = 2  # per expert and attribute pair
_NS_PEERS = 30  # per peer weight drawn and its share of the stationary vector
_NS_SCORES_FIXED = 0.1  # per expert x candidate x metric, the float32 product of fixed scores
_NS_SCORES_VARYING = 1.3  # per expert x candidate x metric, the group scores recomputed
_NS_BOOTSTRAP = 2  # per candidate and instance of a resampled metric
#: The instances a resampled metric's set is assumed to have (the spec does not say).
BOOTSTRAP_INSTANCES_ASSUMED = 10_000


def sample_seconds(k: int, n: int, m: int, spec: dict) -> float:
    """An estimate of one Monte Carlo sample's cost at ``k`` experts, ``n``
    metrics and ``m`` candidates with what ``spec`` samples: what sizes a
    chunk (``MonteCarlo.chunk_units``), to within a factor of 2."""
    pairs = min(m, robustness.PAIRWISE_ALL) if m <= robustness.PAIRWISE_ALL else robustness.PAIRWISE_TOP
    cost = _NS_RANKS * m * math.log2(m + 1) + _NS_PAIRS * pairs * pairs + m * n
    if spec.get("judgments"):
        cost += _NS_JUDGMENTS * k * n * n
    if spec.get("peer_weights"):
        cost += _NS_PEERS * k * k
    resampled = len(spec.get("bootstrap", [])) + len(spec.get("elicited", []))
    if spec.get("ranges_percent") or spec.get("standard_errors") or resampled:
        cost += _NS_SCORES_VARYING * k * m * n + _NS_BOOTSTRAP * resampled * m * BOOTSTRAP_INSTANCES_ASSUMED
    elif spec.get("peer_weights"):
        cost += _NS_SCORES_FIXED * k * m * n
    return cost * 1e-9


class MonteCarlo:
    """Units are samples; each unit's outcome depends on (seed, index) only
    (``engine.robustness.monte_carlo_chunk``)."""

    sampled = True

    def units(self, results: dict, spec: dict, samples: object) -> int:
        """The samples asked for (the default when none), recorded in the spec."""
        spec["samples"] = check_samples(samples)
        return spec["samples"]

    def chunk_units(self, results: dict, spec: dict) -> int:
        """Samples for about ``ENGINE_ANALYSIS_CHUNK_SECONDS`` of work at the
        run's size (``sample_seconds``), in whole blocks of
        ``engine.robustness.SAMPLE_BLOCK`` (a chunk starting inside a block
        draws all of it), spread evenly over the chunks the analysis's
        samples then need (so that the workers finish together), at most
        ``ENGINE_ANALYSIS_CHUNK_SAMPLES``."""
        block, most = robustness.SAMPLE_BLOCK, max(1, settings.ENGINE_ANALYSIS_CHUNK_SAMPLES)
        shape = (len(results["experts"]), len(results["metrics"]), len(results["candidates"]))
        fits = settings.ENGINE_ANALYSIS_CHUNK_SECONDS / sample_seconds(*shape, spec)
        size = max(1, int(fits) // block) * block
        if size >= most:
            return most
        samples = spec.get("samples")
        if samples:
            chunks = math.ceil(samples / size)  # as many chunks, evenly
            size = math.ceil(math.ceil(samples / chunks) / block) * block
        return size

    def check(self, spec: dict) -> dict:
        unknown = sorted(set(spec) - set(MONTE_CARLO_OPTIONS))
        if unknown:
            raise InvalidInput(dict.fromkeys(unknown, "not an option of a Monte Carlo analysis"))
        checked: dict = {}
        for name, kind in MONTE_CARLO_OPTIONS.items():
            value = spec.get(name, kind())
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, kind) or (kind is float and not np.isfinite(value)):
                raise InvalidInput({name: "true or false" if kind is bool else "a number"})
            checked[name] = value
        if not 0 <= checked["ranges_percent"] < RANGES_PERCENT_MAX:
            raise InvalidInput({"ranges_percent": f"a percentage from 0 to below {RANGES_PERCENT_MAX}"})
        if not (
            checked["judgments"] or checked["peer_weights"] or checked["ranges_percent"] or checked["measurements"]
        ):
            raise InvalidInput({"spec": "choose at least one input to sample"})
        return checked

    def prepare(self, run_id: int, spec: dict) -> dict:
        """At launch: which metrics the bootstrap resamples (the elicited
        ones candidate by candidate, under ``elicited``), and why the others
        stay fixed (recorded in the spec). Every sample scores each expert
        on their own value of an elicited metric, as the run does
        (docs/method.md 7.4)."""
        if not spec["measurements"]:
            return spec
        snapshot = run_inputs(run_id).snapshot
        columns, fixed = bootstrap_plan(snapshot)
        elicited, held = elicited_plan(snapshot)
        # "standard_errors": the typed metrics drawn from Normal(value, SE);
        # "elicited": the elicited metrics resampled; each written only when
        # there are any, so specs without stay as they were.
        typed = typed_sampled(snapshot, columns)
        return {
            **spec,
            "bootstrap": columns,
            "fixed": fixed + held,
            **({"standard_errors": typed} if typed else {}),
            **({"elicited": elicited} if elicited else {}),
        }

    def _inputs(self, run: RunInputs, spec: dict) -> robustness.MonteCarloInputs:
        snapshot = run.snapshot
        weights, peer, lower, upper, measurements = snapshot_arrays(snapshot)
        attributes = {name: i for i, name in enumerate(snapshot["attributes"])}
        columns: tuple[robustness.BootstrapColumn, ...] = ()
        if spec.get("bootstrap"):
            columns = bootstrap_columns(snapshot, spec["bootstrap"])
        elicited: tuple[robustness.ElicitedColumn, ...] = ()
        if spec.get("elicited"):
            elicited = elicited_columns(snapshot, spec["elicited"])
        # AHP experts' judgments move by a step of the scale; without them
        # (a version 1 snapshot) every expert's weights come from a Dirichlet.
        matrices, ahp_experts = _ahp_judgments(snapshot) or (None, None)
        return robustness.MonteCarloInputs(
            weights=weights,
            peer_weights=peer,
            lower=lower,
            upper=upper,
            measurements=measurements,
            attribute_of=np.array([attributes[m["attribute"]] for m in snapshot["metrics"]], dtype=np.intp),
            ahp_matrices=matrices,
            ahp_experts=ahp_experts,
            ahp_weighting=snapshot.get("ahp_weighting") or "column_means",
            # NaN (none given, or a snapshot from before standard errors): fixed
            standard_errors=snapshot_standard_errors(snapshot),
            bootstrap=columns,
            # Each expert's own value of the elicited metrics, in every sample as in the run.
            expert_values=snapshot_expert_values(snapshot),
            elicited=elicited,
        )

    @staticmethod
    def _sampling(spec: dict) -> robustness.SamplingSpec:
        return robustness.SamplingSpec(
            judgments=spec["judgments"],
            peer_weights=spec["peer_weights"],
            range_fraction=spec["ranges_percent"] / 100,
            measurements=bool(spec.get("standard_errors")),
            bootstrap=bool(spec.get("bootstrap") or spec.get("elicited")),
        )

    def compute(self, run: RunInputs, spec: dict, seed: int, start: int, count: int) -> dict:
        """The chunk's counts, from the analysis prepared once per process
        while kept (``KEPT_PREPARED``, by the run's key, the spec and the
        memory budget); kept without its block buffers."""
        budget = int(settings.ENGINE_ANALYSIS_MEMORY_BYTES)
        key = None if run.key is None else (run.key, json.dumps(spec, sort_keys=True), budget)
        prepared = None if key is None else KEPT_PREPARED.take(key)
        if prepared is None:
            prepared = robustness.monte_carlo_prepare(
                self._inputs(run, spec), self._sampling(spec), memory_budget=budget
            )
        counts = robustness.monte_carlo_counts(prepared, seed, start, count)
        if key is not None:
            prepared.release_buffers()
            KEPT_PREPARED.put(key, prepared)
        return counts.to_dict()

    def merge(self, counts: list[dict]) -> dict:
        return robustness.merge([robustness.Counts.from_dict(chunk) for chunk in counts]).to_dict()

    def summary(self, run: RunInputs, spec: dict, merged: dict) -> dict:
        result = robustness.summary(robustness.Counts.from_dict(merged))
        snapshot = run.snapshot
        names = snapshot["candidates"]
        attributes = snapshot["attributes"]
        attribute_of = [attributes.index(m["attribute"]) for m in snapshot["metrics"]]
        order = sorted(
            range(len(names)), key=lambda c: (-result.best[c], -result.rank_acceptability[c, :SUMMARY_RANKS].sum(), c)
        )

        def central(c: int) -> list[float] | None:
            if not result.best[c] > 0:
                return None
            return np.bincount(attribute_of, weights=result.central_weights[c], minlength=len(attributes)).tolist()

        def interval(low: np.ndarray, high: np.ndarray) -> list:
            """[low, high], or a list of them along the last axis."""
            return np.stack((low, high), axis=-1).tolist()

        rows = [
            {
                "name": names[c],
                "p_best": float(result.best[c]),
                "se_best": float(result.best_se[c]),
                # 95 % Wilson score intervals (engine.robustness.wilson_interval)
                "wilson_best": interval(result.best_low[c], result.best_high[c]),
                "ranks": result.rank_acceptability[c, :SUMMARY_RANKS].tolist(),
                "wilson_ranks": interval(
                    result.rank_acceptability_low[c, :SUMMARY_RANKS], result.rank_acceptability_high[c, :SUMMARY_RANKS]
                ),
                "central_weights": central(c),
            }
            for c in order
        ]
        return {
            "samples": result.samples,
            "sampled_inputs": _sampled_inputs(spec, snapshot),
            "attributes": attributes,
            "candidates": rows,
            "pairwise": {
                "candidates": [names[c] for c in result.pairwise_candidates.tolist()],
                "probabilities": result.pairwise.tolist(),
                "wilson_low": result.pairwise_low.tolist(),
                "wilson_high": result.pairwise_high.tolist(),
            },
            "fixed": spec.get("fixed", []),
        }


#: Every kind of analysis and its kernel: the one table the workflow reads.
KERNELS: dict[str, Kernel] = {
    Analysis.Kind.LEAVE_ONE_OUT: LeaveOneOut(),
    Analysis.Kind.MONTE_CARLO: MonteCarlo(),
}
