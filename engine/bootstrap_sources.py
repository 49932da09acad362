"""Which of a run's measurements a Monte Carlo analysis can resample from
the candidates' predictions (``engine.robustness.BootstrapColumn``), and
their arrays.

A metric is resampled when every candidate of the run has its value
computed (``evaluation.models.MeasurementSource``) by accuracy or ROC AUC
from one and the same prediction set, in which every candidate predicted
the same instances with the same true labels (so the replicates are
paired), and when the metric recomputed from those arrays on the whole set
is the value the run used. Anything else is held fixed, with the reason
recorded in the analysis's spec. Predicted labels that came from scores
keep the threshold chosen on the whole set in every replicate.

An elicited metric (each expert's own value, docs/method.md 7.4) is
resampled candidate by candidate (``elicited_plan``): each candidate's
instances of its newest prediction set, the experts' own values recomputed
from the resampled confusion matrix with their stored weights. A candidate
whose set's arrays no longer give the values the run used is held fixed,
with the reason.

A metric not resampled whose values have a standard error (any candidate's,
given by the designer: ``Measurement.standard_error``) is not held fixed:
the kernel draws those values from Normal(value, standard error)
(``typed_sampled``).
"""

from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluation import report
from evaluation.bootstrap import weighted_accuracy, weighted_roc_auc
from evaluation.elicited import cell_weights
from evaluation.models import ElicitationAnswers, ElicitedMetric, MeasurementSource, PredictionSet
from evaluation.selectors import confusion_of_cells, elicited_metric_list, elicited_sources, prediction_data_by_set
from workspace.models import Study

from .robustness import BOOTSTRAP_KINDS, BootstrapColumn, ElicitedColumn
from .snapshot import snapshot_standard_errors

# A recomputed value this close to the run's is the same value.
SAME_VALUE = 1e-9


def _arrays(data: report.PredictionData, names: Sequence[str], kind: str, parameters: dict) -> tuple | str:
    """(y_true, predictions (m, N), positive code) of the candidates, or a reason."""
    options = report.Options(**parameters)
    reports = [report.CandidateReport(data, name, options) for name in names]
    y_true = reports[0].y_true
    if any(len(r.y_true) != len(y_true) or not np.array_equal(r.y_true, y_true) for r in reports):
        return "its candidates did not predict the same instances, so no paired resampling"
    if kind == "accuracy":
        return y_true, np.stack([r.y_pred for r in reports]), None
    if not reports[0].binary or reports[0].positive is None:
        return "its ROC AUC is not binary with a positive label"
    return y_true, np.stack([r.scores for r in reports]), reports[0].positive


def _value(kind: str, y_true: np.ndarray, predictions: np.ndarray, positive: object) -> np.ndarray:
    ones = np.ones((1, len(y_true)))
    if kind == "accuracy":
        return weighted_accuracy(y_true, predictions, ones)[0]
    return weighted_roc_auc(y_true, predictions, ones, pos_label=positive)[0]


def bootstrap_plan(snapshot: dict) -> tuple[list[dict], list[dict]]:
    """``(columns, fixed)``: the metrics to resample, each
    ``{"metric", "kind", "prediction_set", "parameters"}``, and every other
    metric with why it stays as measured, except those with a standard
    error (``typed_sampled``)."""
    names = snapshot["candidates"]
    metrics = [m["name"] for m in snapshot["metrics"]]
    sources: dict[str, dict[str, MeasurementSource]] = {}
    for source in MeasurementSource.objects.filter(
        study_id=snapshot["study"]["id"], metric__name__in=metrics, candidate__name__in=names
    ).select_related("metric", "candidate"):
        sources.setdefault(source.metric.name, {})[source.candidate.name] = source
    sets = PredictionSet.objects.in_bulk(
        {s.prediction_set_id for by_candidate in sources.values() for s in by_candidate.values() if s.prediction_set_id}
    )
    data = prediction_data_by_set(prediction_sets=list(sets.values()))
    with_errors = _with_standard_errors(snapshot)
    elicited = _elicited_columns_of(snapshot)
    columns, fixed = [], []
    for j, metric in enumerate(metrics):
        if j in elicited:
            continue  # each expert's own value: elicited_plan
        reason = _reason(metric, j, snapshot, sources.get(metric, {}), data)
        if isinstance(reason, dict):
            columns.append(reason)
        elif not with_errors[j]:
            fixed.append({"metric": metric, "reason": reason})
    return columns, fixed


def _with_standard_errors(snapshot: dict) -> list[bool]:
    """Per metric of the snapshot: has any candidate's value a standard error > 0?"""
    errors = snapshot_standard_errors(snapshot)
    return (np.nan_to_num(errors) > 0).any(axis=0).tolist()


def typed_sampled(snapshot: dict, columns: Sequence[dict]) -> list[str]:
    """The metrics, not resampled by the bootstrap (``columns``), whose
    values are drawn from Normal(value, standard error): those where any
    candidate's value has a standard error > 0. The values without one stay
    as measured."""
    resampled = {column["metric"] for column in columns}
    elicited = _elicited_columns_of(snapshot)
    return [
        m["name"]
        for j, (m, sampled) in enumerate(zip(snapshot["metrics"], _with_standard_errors(snapshot), strict=True))
        if sampled and m["name"] not in resampled and j not in elicited
    ]


def _elicited_columns_of(snapshot: dict) -> set[int]:
    """The columns of the snapshot's elicited metrics (none before version 3)."""
    return {entry["metric"] for entry in snapshot.get("expert_values") or []}


def _reason(metric: str, j: int, snapshot: dict, by_candidate: dict, data: dict) -> dict | str:
    """Why ``metric`` (column ``j``) cannot be resampled by the bootstrap, or
    its planned column: every candidate's value computed the same way from
    one prediction set, and the same as the run used."""
    names = snapshot["candidates"]
    if not by_candidate:
        return "typed, not computed from predictions, and no value has a standard error"
    if set(by_candidate) != set(names):
        return "not every candidate's value was computed from predictions"
    computation = _one_computation(by_candidate, data)
    if isinstance(computation, str):
        return computation
    kind, set_id, parameters = computation
    arrays = _arrays(data[set_id], names, kind, parameters)
    if isinstance(arrays, str):
        return arrays
    values = _value(kind, *arrays)
    used = np.array([row[j] for row in snapshot["measurements"]], dtype=float)
    if not np.allclose(values, used, rtol=0, atol=SAME_VALUE):
        return "its values in the run differ from those the prediction set gives now"
    return {"metric": metric, "kind": kind, "prediction_set": set_id, "parameters": parameters}


def _one_computation(by_candidate: dict, data: dict) -> tuple[str, int, Any] | str:
    """Decides whether every candidate's value was computed the same way
    (one kind the bootstrap recomputes, from one prediction set that still
    exists, with the same parameters): that (kind, set, parameters), or why
    not."""
    kinds = {s.computation for s in by_candidate.values()}
    set_ids = {s.prediction_set_id for s in by_candidate.values()}
    parameters = [s.parameters for s in by_candidate.values()]
    if len(kinds) != 1 or not kinds <= set(BOOTSTRAP_KINDS):
        return f"computed as {', '.join(sorted(kinds))}; the bootstrap recomputes accuracy and ROC AUC only"
    if len(set_ids) != 1 or None in set_ids or next(iter(set_ids)) not in data:
        return "its candidates' values come from different or deleted prediction sets"
    if any(p != parameters[0] for p in parameters):
        return "its candidates' values were computed with different parameters"
    return kinds.pop(), set_ids.pop(), parameters[0]


def bootstrap_columns(snapshot: dict, plan: Sequence[dict]) -> tuple[BootstrapColumn, ...]:
    """The arrays of the planned columns (``bootstrap_plan``); ValueError
    when a planned set has been deleted since the analysis was launched."""
    metrics = [m["name"] for m in snapshot["metrics"]]
    sets = PredictionSet.objects.in_bulk({column["prediction_set"] for column in plan})
    missing = sorted({column["prediction_set"] for column in plan} - set(sets))
    if missing:
        raise ValueError(f"prediction set {missing[0]} was deleted after the analysis was launched")
    data = prediction_data_by_set(prediction_sets=list(sets.values()))
    columns = []
    for column in plan:
        arrays = _arrays(data[column["prediction_set"]], snapshot["candidates"], column["kind"], column["parameters"])
        if isinstance(arrays, str):
            raise ValueError(f"{column['metric']}: {arrays}")
        y_true, predictions, positive = arrays
        columns.append(
            BootstrapColumn(
                metric=metrics.index(column["metric"]),
                kind=column["kind"],
                y_true=y_true,
                predictions=predictions,
                prediction_set=column["prediction_set"],
                pos_label=positive if positive is not None else 1,
            )
        )
    return tuple(columns)


# --- elicited metrics -------------------------------------------------------------------------


class _Elicited:
    """One elicited metric of a snapshot as it can be resampled now: its
    column, the experts' cell weights (k, L * L) or why there are none, and
    each candidate's source (``evaluation.selectors.elicited_sources``)."""

    def __init__(self, snapshot: dict, entry: dict, metric: ElicitedMetric, answers: dict[str, list[float]]) -> None:
        self.column = entry["metric"]
        self.name = snapshot["metrics"][self.column]["name"]
        self.run_values = entry["values"]
        classes = len(metric.prediction_set.labels)
        missing = [expert for expert in snapshot["experts"] if expert not in answers]
        self.reason = (
            f"{', '.join(missing)} no longer {'has' if len(missing) == 1 else 'have'} its weights" if missing else ""
        )
        self.weights = (
            None if missing else np.stack([cell_weights(metric.kind, answers[e], classes) for e in snapshot["experts"]])
        )
        self.classes = classes
        self.sources = {source.candidate: source for source in elicited_sources(elicited_metric=metric)}

    def why_fixed(self, candidate: str) -> str | None:
        """None when the candidate's newest set gives the run's values now."""
        source = self.sources.get(candidate)
        if source is None:
            return f"{candidate} has no predictions any more"
        if source.cells is None:
            return f"{candidate}: {source.reason}"
        assert self.weights is not None
        values = self.weights @ confusion_of_cells(source.cells, self.classes).ravel()
        if not np.allclose(values, self.run_values[candidate], rtol=0, atol=SAME_VALUE):
            return f"{candidate}'s values in the run differ from those its newest prediction set gives now"
        return None


def _elicited(snapshot: dict) -> list[_Elicited]:
    """The snapshot's elicited metrics, each with what resampling it needs."""
    entries = snapshot.get("expert_values") or []
    if not entries:
        return []
    names = [m["name"] for m in snapshot["metrics"]]
    by_name = {
        metric.metric.name: metric
        for metric in elicited_metric_list(study=_study(snapshot))
        if metric.metric.name in {names[entry["metric"]] for entry in entries}
    }
    answers: dict[str, dict[str, list[float]]] = {}
    for metric_name, expert, weights in ElicitationAnswers.objects.filter(
        elicited_metric__in=list(by_name.values()),
        expert__study_id=snapshot["study"]["id"],
        expert__user__username__in=snapshot["experts"],
        weights__isnull=False,
    ).values_list("elicited_metric__metric__name", "expert__user__username", "weights"):
        answers.setdefault(metric_name, {})[expert] = list(weights or [])
    found = []
    for entry in entries:
        name = names[entry["metric"]]
        if name in by_name:
            found.append(_Elicited(snapshot, entry, by_name[name], answers.get(name, {})))
    return found


def _study(snapshot: dict) -> Study:
    return Study.objects.get(pk=snapshot["study"]["id"])


def elicited_plan(snapshot: dict) -> tuple[list[dict], list[dict]]:
    """``(columns, fixed)`` of the snapshot's elicited metrics: each
    ``{"metric", "prediction_sets": {candidate: set id}}`` with the
    candidates whose values are recomputed from their newest set on each
    replicate, and ``{"metric", "reason"}`` for each candidate (or the
    whole metric) held at the run's values."""
    planned = {entry["metric"] for entry in snapshot.get("expert_values") or []}
    names = [m["name"] for m in snapshot["metrics"]]
    columns, fixed = [], []
    found = _elicited(snapshot)
    for j in sorted(planned - {metric.column for metric in found}):
        fixed.append({"metric": names[j], "reason": "its elicited metric is no longer defined"})
    for metric in found:
        if metric.reason:
            fixed.append({"metric": metric.name, "reason": metric.reason})
            continue
        sets = {}
        for candidate in snapshot["candidates"]:
            reason = metric.why_fixed(candidate)
            if reason is None:
                sets[candidate] = metric.sources[candidate].prediction_set_id
            else:
                fixed.append({"metric": metric.name, "reason": reason})
        if sets:
            columns.append({"metric": metric.name, "prediction_sets": sets})
    return columns, fixed


def elicited_columns(snapshot: dict, plan: Sequence[dict]) -> tuple[ElicitedColumn, ...]:
    """The arrays of the planned elicited columns (``elicited_plan``);
    ValueError when a planned candidate's set or the experts' weights no
    longer give the run's values (changed since the analysis was launched)."""
    found = {metric.name: metric for metric in _elicited(snapshot)}
    columns = []
    for column in plan:
        metric = found.get(column["metric"])
        if metric is None or metric.weights is None:
            raise ValueError(f"{column['metric']}: its elicited weights changed after the analysis was launched")
        cells: list[np.ndarray | None] = []
        for candidate in snapshot["candidates"]:
            planned = column["prediction_sets"].get(candidate)
            source = metric.sources.get(candidate)
            if planned is None:
                cells.append(None)
            elif source is None or source.prediction_set_id != planned or metric.why_fixed(candidate) is not None:
                raise ValueError(
                    f"{column['metric']}: {candidate}'s predictions changed after the analysis was launched"
                )
            else:
                cells.append(source.cells)
        columns.append(
            ElicitedColumn(
                metric=metric.column,
                cell_weights=metric.weights,
                cells=tuple(cells),
                prediction_sets=tuple(column["prediction_sets"].get(c, 0) for c in snapshot["candidates"]),
            )
        )
    return tuple(columns)
