"""A run's inputs: the snapshot of a study (every input a run needs, copied
at launch, as plain JSON) and the engine's arrays made from it.

``study_snapshot`` reads the study's inputs; ``snapshot_arrays`` turns a
snapshot into the arrays ``engine.core.evaluate`` takes, refusing a gap or an
invalid input with a ``RunInputError`` worded with the study's names;
``ScoreInputs`` scores one candidate at a time from a snapshot's bounds.
"""

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

import numpy as np
from django.db.models import Count, F, Max, Min, Q, QuerySet, Sum

from evaluation import selectors as evaluation_selectors
from evaluation.models import ElicitationAnswers, ElicitedMetric
from workspace.models import (
    AcceptableRange,
    AttributeWeight,
    Candidate,
    Measurement,
    Membership,
    Metric,
    PeerWeight,
    Study,
)
from workspace.selectors import expert_list, selected_attributes, selected_metrics
from workspace.selectors.snapshot import INPUT_KEYS, inputs_read

from . import core

__all__ = [
    "SNAPSHOT_VERSION",
    "RunInputError",
    "INPUT_KEYS",
    "inputs_complete",
    "ScoreInputs",
    "snapshot_arrays",
    "snapshot_expert_values",
    "snapshot_matrix",
    "snapshot_standard_errors",
    "study_snapshot",
]

# A launch copies the snapshot of a run taken at the study's same
# input_version (engine.services): a new layout needs a migration bumping
# every study's input_version, so no run copies a snapshot of the old one.
# Version 2 added ``attribute_methods`` and ``attribute_judgments`` (migration
# engine 0006 bumped every study's input_version). Version 3 added
# ``expert_values``, each expert's own value of the elicited metrics (engine
# 0009); older snapshots have none and are read as having no elicited metric.
SNAPSHOT_VERSION = 3

Grid = list[list[Any]]


# --- reading a study -----------------------------------------------------------


def _measurement_grids(study: Study, candidates: list[Candidate], metric_index: dict[int, int]) -> tuple[Grid, Grid]:
    """Each candidate's measured value of each selected metric, and its
    standard error (None where none is given)."""
    candidate_index = {c.pk: c_i for c_i, c in enumerate(candidates)}
    grid: Grid = [[None] * len(metric_index) for _ in candidates]
    errors: Grid = [[None] * len(metric_index) for _ in candidates]
    # Tuples, not dicts or model objects: this is the largest read of a launch
    # (up to 1,000 candidates x 200 metrics), and a launch must answer quickly.
    for candidate_id, metric_id, value, error in Measurement.objects.filter(
        study=study, metric__is_selected=True
    ).values_list("candidate_id", "metric_id", "value", "standard_error"):
        if candidate_id in candidate_index:
            grid[candidate_index[candidate_id]][metric_index[metric_id]] = value
            errors[candidate_index[candidate_id]][metric_index[metric_id]] = error
    return grid, errors


def _expert_value_grids(
    study: Study, experts: list[Membership], candidates: list[Candidate], metrics: list[Metric], measurements: Grid
) -> list[dict]:
    """Each selected elicited metric's value for each candidate and expert
    (``values``: by candidate name, a value per expert, None for one who
    has not finished; ``reasons``: by name, why a candidate has none), from
    ``evaluation.selectors.elicited_values``. The metric's column of
    ``measurements`` becomes the experts' median (what a page shows as the
    candidate's value; the engine reads the experts' own)."""
    metric_index = {m.pk: j for j, m in enumerate(metrics)}
    elicited = [e for e in evaluation_selectors.elicited_metric_list(study=study) if e.metric_id in metric_index]
    if not elicited:
        return []
    names = {e.pk: e.user.get_username() for e in experts}
    candidate_index = {c.name: c_i for c_i, c in enumerate(candidates)}
    weights = _finished_weights(elicited, names)
    order = [e.user.get_username() for e in experts]
    out = []
    for metric in elicited:
        j = metric_index[metric.metric_id]
        values, reasons = _elicited_column(metric, candidates, candidate_index, order, weights.get(metric.pk, {}))
        for name, c in candidate_index.items():
            known = [v for v in values.get(name, []) if v is not None]
            measurements[c][j] = float(np.median(known)) if known and len(known) == len(experts) else None
        out.append({"metric": j, "values": values, "reasons": reasons})
    return out


def _finished_weights(elicited: list[ElicitedMetric], names: dict[int, str]) -> dict[int, dict[str, list[float]]]:
    """By elicited metric, each expert's (by username) cell weights, for the
    experts who have finished it (their weights are stored)."""
    weights: dict[int, dict[str, list[float]]] = {}
    for elicited_id, expert_id, found in ElicitationAnswers.objects.filter(
        elicited_metric__in=elicited, expert_id__in=names, weights__isnull=False
    ).values_list("elicited_metric_id", "expert_id", "weights"):
        weights.setdefault(elicited_id, {})[names[expert_id]] = list(found or [])
    return weights


def _elicited_column(
    metric: ElicitedMetric,
    candidates: list[Candidate],
    candidate_index: dict[str, int],
    order: list[str],
    finished: dict[str, list[float]],
) -> tuple[dict[str, list[float | None]], dict[str, str]]:
    """Decides, for one elicited metric, which of the study's candidates have
    values (each expert's, in ``order``) and why the others have none (no
    predictions in any set unless the selector gives a reason)."""
    values: dict[str, list[float | None]] = {}
    reasons = {c.name: "it has no predictions in any set" for c in candidates}
    for row in evaluation_selectors.elicited_values(elicited_metric=metric, finished=finished):
        if row.candidate in candidate_index and not row.reason:
            del reasons[row.candidate]
            values[row.candidate] = [row.values.get(name) for name in order]
        elif row.candidate in candidate_index:
            reasons[row.candidate] = row.reason
    return values, reasons


class RunSnapshot(TypedDict):
    """A run's snapshot (version ``SNAPSHOT_VERSION``), its keys in this
    order: the study, the design inputs (``workspace.selectors.snapshot.
    DesignInputs``), the candidates and their measurements, the
    prioritisations (``PrioritisationInputs``), the experts' own values of
    the elicited metrics. Older versions lack the later keys; readers take
    each absence as documented where it is read."""

    version: int
    study: dict[str, Any]  # {"id", "title"}
    tolerance: float
    ahp_weighting: str
    experts: list[str]
    attributes: list[str]
    metrics: list[dict[str, Any]]
    attribute_weights: Grid
    metric_weights: Grid
    peer_weights: Grid
    lower: Grid
    upper: Grid
    candidates: list[str]
    measurements: Grid
    standard_errors: Grid
    consistency: list[dict[str, Any]]
    attribute_methods: list[str | None]
    attribute_judgments: list[Grid | None]
    expert_values: list[dict[str, Any]]
    absent: NotRequired[list[dict[str, str]]]  # {"expert", "absence", "reason"}


def study_snapshot(*, study: Study, tolerance: float = core.DEFAULT_TOLERANCE) -> RunSnapshot:
    """Every input a run needs, as plain JSON, in a fixed order.

    Rows are experts (by membership id), columns the selected metrics (by
    attribute then metric position). Gaps (a missing measurement, range or
    peer weight) are kept as ``None``: ``run_launch`` refuses them with a
    readable reason rather than guessing. The caller holds the study's row
    lock, which candidate and measurement changes also take, so the
    separate reads below see one consistent state.
    """
    metrics = list(selected_metrics(study))
    everyone = list(expert_list(study=study))
    inputs = inputs_read(study, metrics, everyone)
    experts = [e for e in everyone if not e.absence]  # who takes part: the rows
    candidates = list(Candidate.objects.filter(study=study).order_by("position", "id"))
    metric_index = {m.pk: j for j, m in enumerate(metrics)}
    measurements, standard_errors = _measurement_grids(study, candidates, metric_index)
    expert_values = _expert_value_grids(study, experts, candidates, metrics, measurements)
    return RunSnapshot(
        version=SNAPSHOT_VERSION,
        study={"id": study.pk, "title": study.title},
        tolerance=tolerance,
        # how AHP weights were computed (the run keeps its method; snapshots
        # from before the setting have none: the paper's column means)
        ahp_weighting=study.ahp_weighting,
        experts=inputs["experts"],
        attributes=inputs["attributes"],
        metrics=inputs["metrics"],
        attribute_weights=inputs["attribute_weights"],
        metric_weights=inputs["metric_weights"],
        peer_weights=inputs["peer_weights"],
        lower=inputs["lower"],
        upper=inputs["upper"],
        candidates=[c.name for c in candidates],
        measurements=measurements,
        # Each measurement's standard error (None: none given), sampled by a
        # Monte Carlo analysis. Snapshots from before it have no key: read
        # with snapshot_standard_errors, which takes that as none at all.
        standard_errors=standard_errors,
        # How each expert prioritised the attributes and, for AHP, their
        # judgments (version 2; older snapshots have neither).
        consistency=inputs["consistency"],
        attribute_methods=inputs["attribute_methods"],
        attribute_judgments=inputs["attribute_judgments"],
        # Each expert's own value of each selected elicited metric (version 3;
        # older snapshots have none): [{"metric": column, "values": {candidate:
        # [value per expert]}, "reasons": {candidate: why it has no value}}].
        expert_values=expert_values,
        # The experts left out, with why (docs/method.md, "Absent experts"):
        # their inputs are kept in the study but not in this run. Older
        # snapshots have no key: none was.
        absent=[
            {"expert": e.user.get_username(), "absence": e.absence, "reason": e.absence_reason}
            for e in everyone
            if e.absence
        ],
    )


def inputs_complete(*, study: Study) -> bool:
    """Whether ``snapshot_arrays`` would accept the snapshot that
    ``study_snapshot`` would read now, decided by counts, bounds and sums in
    the database rather than by reading the inputs (a launch's check: tens
    of milliseconds where the read takes hundreds at the limits). True only if
    every check of ``snapshot_arrays`` passes: there are experts and
    selected metrics; each expert has a weight for each attribute of a
    selected metric, a range or a default for each selected metric (bounds
    that differ), and a peer weight for each expert (in (0, 1), or positive
    when alone, each expert's summing to 1 within ``ROW_SUM_TOLERANCE``);
    each candidate has a value for each selected metric. False when any may
    fail (equal default bounds are a doubt, as a sum off by the rounding the
    engine allows): the caller then reads the inputs to name the gap."""
    if ElicitedMetric.objects.filter(metric__study=study, metric__is_selected=True).exists():
        # Each expert's answers and each candidate's predictions decide it:
        # the full read names the gap.
        return False
    experts = Membership.objects.filter(study=study, role=Membership.Role.EXPERT)
    if experts.exclude(absence=Membership.Absence.NONE).exists():
        # Their peer weights are shared out over the others: the full read decides.
        return False
    k = experts.count()
    metrics = list(
        selected_metrics(study).values_list("pk", "attribute_id", "default_least_acceptable", "default_desired")
    )
    if not k or not metrics:
        return False
    metric_ids = [pk for pk, _, _, _ in metrics]
    return (
        _weights_complete(study, experts, k, metrics)
        and _ranges_complete(experts, k, metrics, metric_ids)
        and _peer_weights_complete(experts, k)
        and _measurements_complete(study, metric_ids, len(metrics))
    )


#: A selected metric as ``inputs_complete`` reads it: (pk, attribute id,
#: default least acceptable, default desired).
_MetricRow = tuple[int, int, float | None, float | None]


def _weights_complete(study: Study, experts: QuerySet[Membership], k: int, metrics: list[_MetricRow]) -> bool:
    """Decides whether every attribute of a selected metric is selected and
    each expert has a weight for each of them."""
    needed = {attribute for _, attribute, _, _ in metrics}
    if needed - set(selected_attributes(study).values_list("pk", flat=True)):
        return False
    return AttributeWeight.objects.filter(
        prioritisation__expert__in=experts, attribute_id__in=needed
    ).count() == k * len(needed)


def _ranges_complete(experts: QuerySet[Membership], k: int, metrics: list[_MetricRow], metric_ids: list[int]) -> bool:
    """Decides whether each expert has bounds that differ for each selected
    metric: no equal default bounds, no equal range, and a range from each
    expert for each metric without both defaults."""
    if any(low is not None and low == high for _, _, low, high in metrics):
        return False
    without_default = [pk for pk, _, low, high in metrics if low is None or high is None]
    ranges = AcceptableRange.objects.filter(expert__in=experts, metric_id__in=metric_ids).aggregate(
        equal=Count("pk", filter=Q(least_acceptable=F("desired"))),
        covering=Count("pk", filter=Q(metric_id__in=without_default)),
    )
    return not (ranges["equal"] or ranges["covering"] != k * len(without_default))


def _peer_weights_complete(experts: QuerySet[Membership], k: int) -> bool:
    """Decides whether each expert rated each expert, with weights in (0, 1)
    (positive when alone) summing to 1 within ``ROW_SUM_TOLERANCE``."""
    # Each rater's count, bounds and sum, in one pass over the k x k weights.
    rows = list(
        PeerWeight.objects.filter(rater__in=experts, ratee__in=experts)
        .values("rater")
        .annotate(count=Count("pk"), low=Min("weight"), high=Max("weight"), total=Sum("weight"))
        .values_list("count", "low", "high", "total")
    )
    tolerance = core.ROW_SUM_TOLERANCE
    return not (
        len(rows) != k
        or any(
            count != k or not low > 0 or (k > 1 and not high < 1) or not abs(total - 1) <= tolerance
            for count, low, high, total in rows
        )
    )


def _measurements_complete(study: Study, metric_ids: list[int], metric_count: int) -> bool:
    """Decides whether each candidate has a value for each selected metric."""
    candidates = Candidate.objects.filter(study=study).count()
    # Through the study's own index (a measurement keeps its candidate's study).
    measured = Measurement.objects.filter(study=study, metric_id__in=metric_ids).count()
    return measured == candidates * metric_count


# --- the engine's arrays ---------------------------------------------------------


class RunInputError(ValueError):
    """The snapshot cannot be evaluated; the message is for people."""


def snapshot_matrix(
    snapshot: Mapping[str, Any], key: str, row_names: list[str], column_names: list[str], what: str
) -> np.ndarray:
    """A float array from a snapshot grid, or RunInputError naming the gap."""
    grid = snapshot[key]
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value is None:
                raise RunInputError(f"{what} is missing for {row_names[i]} / {column_names[j]}")
    return np.array(grid, dtype=float).reshape(len(row_names), len(column_names))


def snapshot_arrays(snapshot: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The engine's arrays ``(W, V, L, U, M)`` from a snapshot."""
    experts = snapshot["experts"]
    metrics = [m["name"] for m in snapshot["metrics"]]
    candidates = snapshot["candidates"]
    if not experts:
        raise RunInputError("the study has no experts")
    if not metrics:
        raise RunInputError("the study has no selected metrics")
    weights = snapshot_matrix(snapshot, "metric_weights", experts, metrics, "a prioritisation")
    peer_weights = snapshot_matrix(snapshot, "peer_weights", experts, experts, "a peer weight")
    lower = snapshot_matrix(snapshot, "lower", experts, metrics, "an acceptable range")
    upper = snapshot_matrix(snapshot, "upper", experts, metrics, "an acceptable range")
    snapshot_expert_values(snapshot)
    measurements = snapshot_matrix(snapshot, "measurements", candidates, metrics, "a measurement")
    _check_named(experts, metrics, peer_weights, lower, upper)
    return weights, peer_weights, lower, upper, measurements


def snapshot_expert_values(snapshot: Mapping[str, Any]) -> core.ExpertValues | None:
    """The experts' own values of the elicited metrics as ``engine.core``
    takes them (None without any, as for every snapshot before version 3),
    or RunInputError naming the expert who has not finished or the
    candidate without a value."""
    found = snapshot.get("expert_values") or []
    if not found:
        return None
    experts, candidates = snapshot["experts"], snapshot["candidates"]
    metrics = [m["name"] for m in snapshot["metrics"]]
    for entry in found:
        _check_expert_values(entry, metrics[entry["metric"]], experts, candidates)
    values = np.array(
        [[entry["values"][candidate] for candidate in candidates] for entry in found], dtype=float
    ).reshape(len(found), len(candidates), len(experts))
    return core.ExpertValues(np.array([entry["metric"] for entry in found], dtype=np.intp), values.transpose(1, 2, 0))


def _check_expert_values(entry: dict, name: str, experts: list[str], candidates: list[str]) -> None:
    """Decides whether one elicited metric's entry has every expert's value
    for every candidate: RunInputError naming first the experts who have not
    finished it, else the first candidate without a value and why."""
    rows = [entry["values"][candidate] for candidate in candidates if candidate in entry["values"]]
    unfinished = [expert for i, expert in enumerate(experts) if any(row[i] is None for row in rows)]
    if unfinished:
        verb = "has" if len(unfinished) == 1 else "have"
        raise RunInputError(f"{', '.join(unfinished)} {verb} not finished the elicited metric {name}")
    for candidate in candidates:
        if candidate not in entry["values"]:
            reason = entry.get("reasons", {}).get(candidate, "it has no value")
            raise RunInputError(f"the elicited metric {name} has no value for {candidate}: {reason}")


def snapshot_standard_errors(snapshot: Mapping[str, Any]) -> np.ndarray:
    """The measurements' standard errors as an (m, n) array, NaN where none
    is given (and everywhere for a snapshot taken before they existed)."""
    shape = (len(snapshot["candidates"]), len(snapshot["metrics"]))
    grid = snapshot.get("standard_errors")
    if grid is None:
        return np.full(shape, np.nan)
    return np.array([[np.nan if e is None else e for e in row] for row in grid], dtype=float).reshape(shape)


def _check_named(
    experts: list[str], metrics: list[str], peer_weights: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> None:
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


def _named(names: list[str], row: list) -> dict:
    return dict(zip(names, row, strict=True))


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
        self.lower = snapshot_matrix(snapshot, "lower", self.experts, self.metrics, "an acceptable range")
        self.upper = snapshot_matrix(snapshot, "upper", self.experts, self.metrics, "an acceptable range")

    def measured(self, name: str) -> list[float]:
        """The candidate's measured values, in the order of the metrics."""
        return self.snapshot["measurements"][self.index[name]]

    def own_values(self, name: str) -> dict[int, list[float]]:
        """Each elicited metric's (by column) value for each expert, for the
        candidate (none in a snapshot without ``expert_values``)."""
        return {
            entry["metric"]: entry["values"][name]
            for entry in self.snapshot.get("expert_values") or []
            if name in entry["values"]
        }

    def score_matrix(self, name: str) -> np.ndarray:
        """The candidate's (experts, metrics) individual scores (METHOD.md 4);
        an elicited metric's from each expert's own value."""
        scores = core.individual_scores(self.lower, self.upper, np.array(self.measured(name), dtype=float))
        for j, values in self.own_values(name).items():
            scores[:, j] = core.own_scores(self.lower[:, j], self.upper[:, j], np.array(values, dtype=float))
        return scores

    def scores(self, name: str) -> dict:
        scores = self.score_matrix(name).tolist()
        return {expert: _named(self.metrics, values) for expert, values in zip(self.experts, scores, strict=True)}
