"""The study export as it was before issue 19 (model instances for every
row), kept as the reference the values-query export must match byte for
byte (tests/workspace/test_export_values.py). Not used by the application."""

# ruff: noqa
from typing import Any, Callable, Iterable, cast

from django.db.models import Model, Prefetch, QuerySet

from engine.rules import AHP_WEIGHTING_DEFAULT
from workspace.bundles import FORMAT
from workspace.models import (
    AcceptableRange,
    AttributeJudgment,
    AttributePrioritisation,
    AttributeVote,
    AttributeWeight,
    Measurement,
    Membership,
    Metric,
    MetricJudgment,
    MetricPrioritisation,
    MetricVote,
    MetricWeight,
    PeerWeight,
    Phase,
    QualityAttribute,
    Study,
)
from workspace.selectors import expert_list
from workspace.selectors import number_out
from workspace.selectors.inputs import INPUT_SECTIONS

_number_out = number_out


def _prioritisation_out(prioritisation: AttributePrioritisation | MetricPrioritisation, item_field: str) -> dict:
    # Rows were written in the order given (weights in item order), so sorting
    # by id keeps the export independent of the order the database returns.
    if prioritisation.method == "direct":
        weights = sorted(prioritisation.weights.all(), key=lambda w: w.pk)
        # direct weights are what the expert gave (null only for AHP and LPR)
        given = {getattr(w, item_field).name: number_out(cast(float, w.given)) for w in weights}
        return {"method": "direct", "weights": given}
    judgments = cast(
        "list[AttributeJudgment | MetricJudgment]", sorted(prioritisation.judgments.all(), key=lambda j: j.pk)
    )
    triples = [[j.row.name, j.column.name, number_out(j.value)] for j in judgments]
    return {"method": prioritisation.method, "judgments": triples}


def _prioritisations(
    model: type[Model], weight_model: type[Model], judgment_model: type[Model], item_field: str, ids: list[int]
) -> QuerySet[Any]:
    """Prioritisations of these experts with their weights and judgments:
    three queries."""
    return model._default_manager.filter(expert_id__in=ids).prefetch_related(
        Prefetch("weights", queryset=weight_model._default_manager.select_related(item_field)),
        Prefetch("judgments", queryset=judgment_model._default_manager.select_related("row", "column")),
    )


def _priorities_into(sections: dict, username: dict[int, str], with_results: bool) -> None:
    ids = list(username)
    attribute_level = _prioritisations(AttributePrioritisation, AttributeWeight, AttributeJudgment, "attribute", ids)
    for prioritisation in attribute_level:
        section = _prioritisation_out(prioritisation, "attribute")
        if with_results:
            section["result"] = prioritisation.result_record
        sections[username[prioritisation.expert_id]]["priorities"] = section
    local = _prioritisations(MetricPrioritisation, MetricWeight, MetricJudgment, "metric", ids)
    local = local.select_related("attribute")
    for prioritisation in sorted(local, key=lambda p: (p.attribute.position, p.attribute_id)):
        section = sections[username[prioritisation.expert_id]]["priorities"]
        if section is None:
            continue
        name = prioritisation.attribute.name
        section.setdefault("metric_priorities", {})[name] = _prioritisation_out(prioritisation, "metric")
        if with_results:
            section.setdefault("metric_results", {})[name] = prioritisation.result_record


def _empty_inputs(sections: set[str]) -> dict[str, Any]:
    fresh: dict[str, Callable[[], Any]] = {
        "votes": lambda: {"attributes": [], "metrics": []},
        "priorities": lambda: None,
        "ranges": dict,
        "peer_weights": dict,
    }
    return {key: make() for key, make in fresh.items() if key in sections}


def expert_inputs_list(
    *,
    study: Study,
    experts: Iterable[Membership] | None = None,
    sections: Iterable[str] = INPUT_SECTIONS,
    with_results: bool = False,
) -> dict[str, dict[str, Any]]:
    """Each expert's inputs in bundle shape: ``{username: {"votes":
    {"attributes", "metrics"}, "priorities", "ranges", "peer_weights"}}``.

    ``experts`` limits it to those memberships (the API's ``my/`` and
    ``inputs/`` endpoints), ``sections`` to those sections; the query count
    does not grow with the number of experts or items. ``with_results``
    adds to each prioritisation the ``result`` (and ``metric_results``)
    stored when it was saved.
    """
    experts = list(expert_list(study=study) if experts is None else experts)
    sections = set(sections)
    username = {e.pk: e.user.get_username() for e in experts}
    inputs = {name: _empty_inputs(sections) for name in username.values()}
    ids = list(username)

    if "votes" in sections:
        attribute_votes = AttributeVote.objects.filter(expert_id__in=ids).select_related("attribute")
        for attribute_vote in attribute_votes.order_by("attribute__position", "attribute__id"):
            inputs[username[attribute_vote.expert_id]]["votes"]["attributes"].append(attribute_vote.attribute.name)
        metric_votes = MetricVote.objects.filter(expert_id__in=ids).select_related("metric")
        for vote in metric_votes.order_by("metric__position", "metric__id"):
            inputs[username[vote.expert_id]]["votes"]["metrics"].append(vote.metric.name)
    if "priorities" in sections:
        _priorities_into(inputs, username, with_results)
    if "ranges" in sections:
        ranges = AcceptableRange.objects.filter(expert_id__in=ids).select_related("metric")
        ranges = ranges.order_by("metric__attribute__position", "metric__attribute_id", "metric__position", "metric_id")
        for acceptable in ranges:
            inputs[username[acceptable.expert_id]]["ranges"][acceptable.metric.name] = [
                number_out(acceptable.least_acceptable),
                number_out(acceptable.desired),
            ]
    if "peer_weights" in sections:
        for peer in PeerWeight.objects.filter(rater_id__in=ids).select_related("ratee__user").order_by("ratee_id"):
            inputs[username[peer.rater_id]]["peer_weights"][peer.ratee.user.get_username()] = peer.weight
    return inputs


def _measurements_out(study: Study, metrics: list[Metric]) -> dict[int, dict]:
    """``{candidate id: {metric name: value}}`` in metric position order,
    from one query of plain values (no model instances)."""
    metric_of = {m.pk: m for m in metrics}
    rows = sorted(
        Measurement.objects.filter(study=study).values_list("candidate_id", "metric_id", "value"),
        key=lambda row: (row[0], metric_of[row[1]].position, row[1]),
    )
    measurements: dict[int, dict[str, Any]] = {}
    for candidate_id, metric_id, value in rows:
        measurements.setdefault(candidate_id, {})[metric_of[metric_id].name] = _number_out(value)
    return measurements


def reference_export_bundle(*, study: Study) -> dict:
    """The study as an ``approve-study/1`` document."""
    experts = list(expert_list(study=study))
    attributes = list(QualityAttribute.objects.filter(study=study).order_by("position", "id"))
    metrics = list(
        Metric.objects.filter(study=study)
        .select_related("attribute")
        .order_by("attribute__position", "attribute__id", "position", "id")
    )
    candidates = list(study.candidates.order_by("position", "id"))
    measurements = _measurements_out(study, metrics)
    sections = expert_inputs_list(study=study, experts=experts)

    # "ahp_weighting" is optional, the paper's method by default: written
    # only for another weighting, so bundles of studies using the paper's
    # method stay as they were (and import anywhere the field is unknown).
    weighting = {} if study.ahp_weighting == AHP_WEIGHTING_DEFAULT else {"ahp_weighting": study.ahp_weighting}
    return {
        "format": FORMAT,
        "title": study.title,
        "description": study.description,
        "phase": study.phase,
        "attribute_threshold": study.attribute_threshold,
        "metric_threshold": study.metric_threshold,
        **weighting,
        "designer": study.designer.get_username(),
        "experts": list(sections),
        "attributes": [{"name": a.name, "kind": a.kind, "description": a.description} for a in attributes],
        "metrics": [
            {
                "name": m.name,
                "attribute": m.attribute.name,
                "better": m.better,
                "unit": m.unit,
                "default_range": [_number_out(v) for v in m.default_range] if m.default_range else None,
            }
            for m in metrics
        ],
        "candidates": [
            {
                "name": c.name,
                "description": c.description,
                "measurements": measurements.get(c.pk, {}),
            }
            for c in candidates
        ],
        # Before voting opens nobody has voted: the votes are empty, not "no" votes.
        "votes": {
            kind: {} if study.phase == Phase.DRAFT else {name: s["votes"][kind] for name, s in sections.items()}
            for kind in ("attributes", "metrics")
        },
        "priorities": {name: s["priorities"] for name, s in sections.items() if s["priorities"] is not None},
        "ranges": {name: s["ranges"] for name, s in sections.items() if s["ranges"]},
        "peer_weights": {name: s["peer_weights"] for name, s in sections.items() if s["peer_weights"]},
    }
