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

A metric not resampled whose values have a standard error (any candidate's,
given by the designer: ``Measurement.standard_error``) is not held fixed:
the kernel draws those values from Normal(value, standard error)
(``typed_sampled``).
"""

from collections.abc import Sequence

import numpy as np

from evaluation import report
from evaluation.bootstrap import weighted_accuracy, weighted_roc_auc
from evaluation.models import MeasurementSource, PredictionSet
from evaluation.selectors import prediction_data_by_set

from .robustness import BOOTSTRAP_KINDS, BootstrapColumn
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
    columns, fixed = [], []
    for j, metric in enumerate(metrics):
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
    return [
        m["name"]
        for m, sampled in zip(snapshot["metrics"], _with_standard_errors(snapshot), strict=True)
        if sampled and m["name"] not in resampled
    ]


def _reason(metric: str, j: int, snapshot: dict, by_candidate: dict, data: dict) -> dict | str:
    names = snapshot["candidates"]
    if not by_candidate:
        return "typed, not computed from predictions, and no value has a standard error"
    if set(by_candidate) != set(names):
        return "not every candidate's value was computed from predictions"
    kinds = {s.computation for s in by_candidate.values()}
    set_ids = {s.prediction_set_id for s in by_candidate.values()}
    parameters = [s.parameters for s in by_candidate.values()]
    if len(kinds) != 1 or not kinds <= set(BOOTSTRAP_KINDS):
        return f"computed as {', '.join(sorted(kinds))}; the bootstrap recomputes accuracy and ROC AUC only"
    if len(set_ids) != 1 or None in set_ids or next(iter(set_ids)) not in data:
        return "its candidates' values come from different or deleted prediction sets"
    if any(p != parameters[0] for p in parameters):
        return "its candidates' values were computed with different parameters"
    kind, set_id = kinds.pop(), set_ids.pop()
    arrays = _arrays(data[set_id], names, kind, parameters[0])
    if isinstance(arrays, str):
        return arrays
    values = _value(kind, *arrays)
    used = np.array([row[j] for row in snapshot["measurements"]], dtype=float)
    if not np.allclose(values, used, rtol=0, atol=SAME_VALUE):
        return "its values in the run differ from those the prediction set gives now"
    return {"metric": metric, "kind": kind, "prediction_set": set_id, "parameters": parameters[0]}


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
