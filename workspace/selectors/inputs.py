"""What experts entered, in the shape of a study bundle's expert sections
(FORMATS.md): the API's inputs, the bundle export and the expert pages."""

from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import Model

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
    result_record_of,
)
from .experts import expert_list

INPUT_SECTIONS = ("votes", "priorities", "ranges", "peer_weights")


def number_out(value: float) -> int | float:
    """Whole numbers as ints, so ``7`` round-trips as ``7`` and not ``7.0``."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


def _prioritisation_out(method: str, weights: list[tuple[str, float | None]], judgments: list[tuple]) -> dict:
    # Rows were written in the order given (weights in item order), so they
    # are read by id, which keeps the export independent of the database's order.
    if method == "direct":
        # direct weights are what the expert gave (null only for AHP and LPR)
        return {"method": "direct", "weights": {name: number_out(cast(float, given)) for name, given in weights}}
    triples = [[row, column, number_out(value)] for row, column, value in judgments]
    return {"method": method, "judgments": triples}


def _by_prioritisation(rows: Iterable[tuple]) -> dict[int, list[tuple]]:
    grouped: dict[int, list[tuple]] = {}
    for prioritisation_id, *rest in rows:
        grouped.setdefault(prioritisation_id, []).append(tuple(rest))
    return grouped


def _prioritisations(
    model: type[Model],
    weight_model: type[Model],
    judgment_model: type[Model],
    item_field: str,
    ids: list[int],
    extra: tuple[str, ...] = (),
) -> Iterator[tuple[tuple, dict]]:
    """Prioritisations of these experts (``pk``, ``expert_id``, ``method``,
    ``result`` and the ``extra`` fields), each with its section
    (``_prioritisation_out``), read as plain values (no model instances):
    three queries, one when there are none."""
    rows = list(
        model._default_manager.filter(expert_id__in=ids)
        .order_by(*(["attribute__position", "attribute_id"] if extra else ["pk"]))
        .values_list("pk", "expert_id", "method", "result", *extra)
    )
    if not rows:
        return
    of_these = {"prioritisation__expert_id__in": ids}
    weights = _by_prioritisation(
        weight_model._default_manager.filter(**of_these)
        .order_by("pk")
        .values_list("prioritisation_id", f"{item_field}__name", "given")
    )
    judgments = _by_prioritisation(
        judgment_model._default_manager.filter(**of_these)
        .order_by("pk")
        .values_list("prioritisation_id", "row__name", "column__name", "value")
    )
    for row in rows:
        yield row, _prioritisation_out(row[2], weights.get(row[0], []), judgments.get(row[0], []))


def _priorities_into(sections: dict, username: dict[int, str], with_results: bool) -> None:
    ids = list(username)
    attribute_level = _prioritisations(AttributePrioritisation, AttributeWeight, AttributeJudgment, "attribute", ids)
    for (_, expert_id, _, result), section in attribute_level:
        if with_results:
            section["result"] = result_record_of(result)
        sections[username[expert_id]]["priorities"] = section
    # in the order of the attributes
    local = _prioritisations(MetricPrioritisation, MetricWeight, MetricJudgment, "metric", ids, ("attribute__name",))
    for (_, expert_id, _, result, name), section in local:
        priorities = sections[username[expert_id]]["priorities"]
        if priorities is None:
            continue
        priorities.setdefault("metric_priorities", {})[name] = section
        if with_results:
            priorities.setdefault("metric_results", {})[name] = result_record_of(result)


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

    # Plain values throughout (issue 19): a study of 100 experts has 10,000
    # peer weights, which are not worth a model instance each.
    if "votes" in sections:
        attribute_votes = AttributeVote.objects.filter(expert_id__in=ids).order_by(
            "attribute__position", "attribute__id"
        )
        for expert_id, name in attribute_votes.values_list("expert_id", "attribute__name"):
            inputs[username[expert_id]]["votes"]["attributes"].append(name)
        metric_votes = MetricVote.objects.filter(expert_id__in=ids).order_by("metric__position", "metric__id")
        for expert_id, name in metric_votes.values_list("expert_id", "metric__name"):
            inputs[username[expert_id]]["votes"]["metrics"].append(name)
    if "priorities" in sections:
        _priorities_into(inputs, username, with_results)
    if "ranges" in sections:
        ranges = AcceptableRange.objects.filter(expert_id__in=ids)
        ranges = ranges.order_by("metric__attribute__position", "metric__attribute_id", "metric__position", "metric_id")
        for expert_id, name, least, desired in ranges.values_list(
            "expert_id", "metric__name", "least_acceptable", "desired"
        ):
            inputs[username[expert_id]]["ranges"][name] = [number_out(least), number_out(desired)]
    if "peer_weights" in sections:
        peers = PeerWeight.objects.filter(rater_id__in=ids).order_by("ratee_id")
        for rater_id, ratee, weight in peers.values_list("rater_id", f"ratee__user__{User.USERNAME_FIELD}", "weight"):
            inputs[username[rater_id]]["peer_weights"][ratee] = weight
    return inputs
