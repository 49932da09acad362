"""The experts' input snapshot: a study's experts' inputs as plain JSON,
laid out as in a run's snapshot without the candidates and their
measurements (``engine.snapshot.study_snapshot`` builds the run's around
it). A revision round freezes it at its close and computes its group
feedback from it; the engine copies it into every run it launches."""

from typing import Any, TypedDict

import numpy as np

from engine import core

from ..models import (
    AcceptableRange,
    AttributeJudgment,
    AttributePrioritisation,
    AttributeWeight,
    Membership,
    Method,
    Metric,
    MetricPrioritisation,
    MetricWeight,
    PeerWeight,
    QualityAttribute,
    Study,
)
from .design import selected_attributes, selected_metrics
from .experts import expert_list

Grid = list[list[Any]]

# The absence of an expert who takes part (Membership.Absence.NONE).
TAKES_PART = Membership.Absence.NONE


def _attribute_weight_grid(
    study: Study, expert_index: dict[int, int], attribute_index: dict[int, int]
) -> tuple[Grid, list[str | None]]:
    """Each expert's weight of each selected attribute (None where not
    given), and how each expert prioritised the attributes (``Method``;
    None without a prioritisation), read in the same query."""
    grid: Grid = [[None] * len(attribute_index) for _ in expert_index]
    methods: list[str | None] = [None] * len(expert_index)
    for expert_id, attribute_id, weight, method in AttributeWeight.objects.filter(
        prioritisation__expert__study=study, prioritisation__expert__absence=TAKES_PART
    ).values_list("prioritisation__expert_id", "attribute_id", "weight", "prioritisation__method"):
        methods[expert_index[expert_id]] = method
        if attribute_id in attribute_index:
            grid[expert_index[expert_id]][attribute_index[attribute_id]] = weight
    return grid, methods


def _attribute_judgment_grids(
    study: Study, expert_index: dict[int, int], attribute_index: dict[int, int], methods: list[str | None]
) -> list[Grid | None]:
    """Each AHP expert's pairwise comparison matrix of the selected
    attributes (A x A in the snapshot's attribute order: 1 on the diagonal,
    each stored judgment and its reciprocal, None for a pair not judged);
    None for the experts who prioritised otherwise. What a Monte Carlo
    analysis moves by a step of the scale (docs/method.md 8.4)."""
    count = len(attribute_index)
    grids: list[Grid | None] = [
        [[1.0 if r == c else None for c in range(count)] for r in range(count)] if method == Method.AHP else None
        for method in methods
    ]
    for expert_id, row_id, column_id, value in AttributeJudgment.objects.filter(
        prioritisation__expert__study=study,
        prioritisation__expert__absence=TAKES_PART,
        prioritisation__method=Method.AHP,
    ).values_list("prioritisation__expert_id", "row_id", "column_id", "value"):
        grid = grids[expert_index[expert_id]]
        if grid is not None and row_id in attribute_index and column_id in attribute_index:
            r, c = attribute_index[row_id], attribute_index[column_id]
            grid[r][c], grid[c][r] = value, 1 / value
    return grids


def _metric_weight_grid(
    study: Study,
    experts: list[Membership],
    metrics: list[Metric],
    attribute_weights: Grid,
    attribute_index: dict[int, int],
) -> Grid:
    """Each expert's weight of each selected metric: the attribute's weight
    times the metric's local weight; without a local prioritisation the
    attribute's weight is split equally (METHOD.md section 3)."""
    local = {
        (expert_id, metric_id): weight
        for expert_id, metric_id, weight in MetricWeight.objects.filter(
            prioritisation__expert__study=study, prioritisation__expert__absence=TAKES_PART
        ).values_list("prioritisation__expert_id", "metric_id", "weight")
    }
    metrics_per_attribute: dict[int, int] = {}
    for metric in metrics:
        metrics_per_attribute[metric.attribute_id] = metrics_per_attribute.get(metric.attribute_id, 0) + 1
    grid: Grid = [[None] * len(metrics) for _ in experts]
    for i, expert in enumerate(experts):
        for j, metric in enumerate(metrics):
            attribute_weight = attribute_weights[i][attribute_index[metric.attribute_id]]
            if attribute_weight is None:
                continue
            share = local.get((expert.pk, metric.pk), 1 / metrics_per_attribute[metric.attribute_id])
            grid[i][j] = attribute_weight * share
    return grid


def _range_grids(
    study: Study, metrics: list[Metric], expert_index: dict[int, int], metric_index: dict[int, int]
) -> tuple[Grid, Grid]:
    """Each expert's least acceptable and desired value of each selected
    metric: the expert's range, else the metric's default (or None)."""
    lower: Grid = [[m.default_least_acceptable for m in metrics] for _ in expert_index]
    upper: Grid = [[m.default_desired for m in metrics] for _ in expert_index]
    for expert_id, metric_id, least_acceptable, desired in AcceptableRange.objects.filter(
        expert__study=study, expert__absence=TAKES_PART
    ).values_list("expert_id", "metric_id", "least_acceptable", "desired"):
        if metric_id in metric_index:
            i, j = expert_index[expert_id], metric_index[metric_id]
            lower[i][j], upper[i][j] = least_acceptable, desired
    return lower, upper


def _iso(moment: Any) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def _consistency(study: Study, experts: list[Membership], attributes: list[QualityAttribute]) -> list[dict]:
    """Each prioritisation from judgments (AHP, LPR) with its consistency
    ratio as stored when it was saved, and when the expert chose to keep it
    inconsistent (METHOD.md 3): experts in the order they joined, the
    attributes' prioritisation (``attribute`` None) before the local ones,
    in the attributes' order. A run never recomputes it from live inputs."""
    rank = {e.pk: i for i, e in enumerate(experts)}
    position = {a.pk: j for j, a in enumerate(attributes)}
    names = {e.pk: e.user.get_username() for e in experts}
    rows: list[tuple[tuple[int, int], str, str | None, AttributePrioritisation | MetricPrioritisation]] = []
    for p in AttributePrioritisation.objects.filter(
        expert__study=study, expert__absence=TAKES_PART, consistency_ratio__isnull=False
    ):
        rows.append(((rank[p.expert_id], -1), names[p.expert_id], None, p))
    local = MetricPrioritisation.objects.filter(
        expert__study=study, expert__absence=TAKES_PART, consistency_ratio__isnull=False, attribute__is_selected=True
    ).select_related("attribute")
    for m in local:
        rows.append(((rank[m.expert_id], position.get(m.attribute_id, -1)), names[m.expert_id], m.attribute.name, m))
    rows.sort(key=lambda row: row[0])
    return [
        {
            "expert": name,
            "attribute": attribute,
            "method": p.method,
            "consistency_ratio": p.consistency_ratio,
            "acknowledged_at": _iso(p.inconsistency_acknowledged_at),
        }
        for _, name, attribute, p in rows
    ]


def _peer_weight_grid(study: Study, expert_index: dict[int, int], absent: list[Membership]) -> Grid:
    """Each expert's (row) weight of each expert (column), among the experts
    who take part. What a rater gave the ``absent`` experts is shared out in
    proportion over the others (``engine.core.peer_weights_kept``, the rule
    leave-one-out uses; docs/method.md, "Absent experts"); a rater's row with
    a gap keeps it, for the run's check to name."""
    everyone = {**expert_index, **{e.pk: len(expert_index) + i for i, e in enumerate(absent)}}
    grid: Grid = [[None] * len(everyone) for _ in everyone]
    for rater_id, ratee_id, weight in PeerWeight.objects.filter(rater__study=study).values_list(
        "rater_id", "ratee_id", "weight"
    ):
        if rater_id in expert_index and ratee_id in everyone:
            grid[everyone[rater_id]][everyone[ratee_id]] = weight
    k = len(expert_index)
    if not absent:
        return grid[:k]
    V = np.array([[np.nan if weight is None else weight for weight in row] for row in grid], dtype=np.float64)
    shared = core.peer_weights_kept(V, np.arange(len(everyone)) < k)
    return [shared[i].tolist() if None not in grid[i] else grid[i][:k] for i in range(k)]


def _metric_out(metric: Metric, attributes: list[QualityAttribute], attribute_index: dict[int, int]) -> dict:
    return {
        "name": metric.name,
        "attribute": attributes[attribute_index[metric.attribute_id]].name,
        "better": metric.better,
        "unit": metric.unit,
    }


class DesignInputs(TypedDict):
    """The experts, the selection and the experts' weights and ranges: a
    run's snapshot holds them before its candidates. Rows are experts (in
    ``experts``' order), columns the selected attributes or metrics."""

    experts: list[str]
    attributes: list[str]
    metrics: list[dict[str, Any]]  # {"name", "attribute", "better", "unit"}
    attribute_weights: Grid
    metric_weights: Grid
    peer_weights: Grid
    lower: Grid
    upper: Grid


class PrioritisationInputs(TypedDict):
    """How each expert prioritised the attributes and, for AHP, their
    judgments: a run's snapshot holds them after its candidates (version 2)."""

    consistency: list[dict[str, Any]]
    attribute_methods: list[str | None]
    attribute_judgments: list[Grid | None]


class InputsSnapshot(DesignInputs, PrioritisationInputs):
    """``inputs_snapshot``: both, in this order (a revision round's kept
    inputs have exactly these keys)."""


#: The keys of each part, in their order (a TypedDict's annotations keep it).
DESIGN_INPUT_KEYS: tuple[str, ...] = tuple(DesignInputs.__annotations__)
PRIORITISATION_INPUT_KEYS: tuple[str, ...] = tuple(PrioritisationInputs.__annotations__)
INPUT_KEYS: tuple[str, ...] = DESIGN_INPUT_KEYS + PRIORITISATION_INPUT_KEYS


def inputs_snapshot(*, study: Study) -> InputsSnapshot:
    """The experts' inputs of a study as plain JSON, laid out as in a run's
    snapshot (``study_snapshot``) without the candidates and their
    measurements: what a revision round freezes at its close
    (``workspace.services.round_close``) and what its group feedback is
    computed from. Only the experts who take part: an excluded or abstaining
    expert's inputs are kept but not used (docs/method.md, "Absent experts")."""
    return inputs_read(study, list(selected_metrics(study)), list(expert_list(study=study)))


def inputs_read(study: Study, metrics: list[Metric], experts: list[Membership]) -> InputsSnapshot:
    """``inputs_snapshot`` of these (selected) metrics and of the experts
    among ``experts`` (``expert_list``) who take part, read once by a caller
    that has them."""
    absent = [e for e in experts if e.absence]
    experts = [e for e in experts if not e.absence]
    attributes = list(selected_attributes(study))
    expert_index = {e.pk: i for i, e in enumerate(experts)}
    attribute_index = {a.pk: j for j, a in enumerate(attributes)}
    metric_index = {m.pk: j for j, m in enumerate(metrics)}
    attribute_weights, methods = _attribute_weight_grid(study, expert_index, attribute_index)
    lower, upper = _range_grids(study, metrics, expert_index, metric_index)
    return InputsSnapshot(
        experts=[e.user.get_username() for e in experts],
        attributes=[a.name for a in attributes],
        metrics=[_metric_out(m, attributes, attribute_index) for m in metrics],
        attribute_weights=attribute_weights,
        metric_weights=_metric_weight_grid(study, experts, metrics, attribute_weights, attribute_index),
        peer_weights=_peer_weight_grid(study, expert_index, absent),
        lower=lower,
        upper=upper,
        consistency=_consistency(study, experts, attributes),
        attribute_methods=methods,
        attribute_judgments=_attribute_judgment_grids(study, expert_index, attribute_index, methods),
    )
