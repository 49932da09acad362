"""What experts entered, in the shape of a study bundle's expert sections
(FORMATS.md): the API's inputs, the bundle export and the expert pages."""

from collections.abc import Callable, Iterable
from typing import Any, cast

from django.db.models import Model, Prefetch, QuerySet

from ..models import (
    AcceptableRange,
    AttributeJudgment,
    AttributePrioritisation,
    AttributeVote,
    AttributeWeight,
    Membership,
    MetricJudgment,
    MetricPrioritisation,
    MetricVote,
    MetricWeight,
    PeerWeight,
    Study,
)
from .experts import expert_list

INPUT_SECTIONS = ("votes", "priorities", "ranges", "peer_weights")


def number_out(value: float) -> int | float:
    """Whole numbers as ints, so ``7`` round-trips as ``7`` and not ``7.0``."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


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
