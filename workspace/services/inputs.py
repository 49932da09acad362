"""What experts enter: votes (voting phase), then prioritisations, acceptable
ranges and peer weights (assessment phase), each in the shape of that
expert's section of a study bundle (FORMATS.md)."""

import math
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from engine.core import sums_to_one
from engine.prioritisation import Prioritisation, prioritise
from engine.rules import MIN_DIRECT_SHARE, MIN_PEER_WEIGHT, direct_shares, on_input_scale, out_of_proportion, to_scale

from ..errors import InvalidInput
from ..models import (
    AcceptableRange,
    AttributePrioritisation,
    AttributeVote,
    Membership,
    Method,
    Metric,
    MetricPrioritisation,
    MetricVote,
    PeerWeight,
    Phase,
    QualityAttribute,
)
from ..selectors import expert_list, selected_attributes
from ._checks import locked, names, number, range_pair, require_phase

Judgment = tuple[str, str, float]

# --- votes (phase "voting") ----------------------------------------------------


@transaction.atomic
def votes_set(*, expert: Membership, attributes: Sequence[str] = (), metrics: Sequence[str] = ()) -> None:
    """Replace the expert's votes: the complementary attributes and the
    metrics they vote for (METHOD.md section 2)."""
    study = locked(expert.study)
    require_phase(study, (Phase.VOTING,), "Voting")
    attribute_names = names(attributes, "attributes")
    metric_names = names(metrics, "metrics")
    by_name = {a.name: a for a in QualityAttribute.objects.filter(study=study)}
    errors = {}
    for name in attribute_names:
        attribute = by_name.get(name)
        if attribute is None:
            errors.setdefault("attributes", []).append(f"no attribute named {name!r} in this study")
        elif attribute.kind == QualityAttribute.Kind.MAIN:
            errors.setdefault("attributes", []).append(f"{name!r} is a main attribute, always selected: no vote needed")
    metric_by_name = {m.name: m for m in Metric.objects.filter(study=study)}
    for name in metric_names:
        if name not in metric_by_name:
            errors.setdefault("metrics", []).append(f"no metric named {name!r} in this study")
    if errors:
        raise InvalidInput(errors)
    AttributeVote.objects.filter(expert=expert).delete()
    MetricVote.objects.filter(expert=expert).delete()
    AttributeVote.objects.bulk_create([AttributeVote(expert=expert, attribute=by_name[n]) for n in attribute_names])
    MetricVote.objects.bulk_create([MetricVote(expert=expert, metric=metric_by_name[n]) for n in metric_names])


# --- prioritisation (phase "assessment") ----------------------------------------


def _method(method: Any) -> str:
    if method not in Method.values:
        raise InvalidInput({"method": f"must be 'direct', 'ahp' or 'lpr', got {method!r}"})
    return method


def _direct_weights(items: list[str], weights: Any, judgments: Any) -> dict[str, float]:
    """The typed direct weights ``{item: value}``, every item given once,
    positive, and in proportion (engine.rules.out_of_proportion)."""
    if judgments not in (None, [], ()):
        raise InvalidInput({"judgments": "direct weights take no judgments"})
    if not isinstance(weights, dict):
        raise InvalidInput({"weights": "must map each item to a positive number"})
    errors = {}
    for name in weights:
        if name not in items:
            errors[f"weights.{name}"] = [f"not one of the items to prioritise ({', '.join(items)})"]
    missing = [name for name in items if name not in weights]
    if missing:
        errors["weights"] = [f"missing weights for {', '.join(missing)}"]
    given = {}
    for name in items:
        if name in weights:
            try:
                value = number(weights[name], f"weights.{name}")
            except InvalidInput as error:
                errors.update(error.errors)
                continue
            if value <= 0:
                errors[f"weights.{name}"] = [f"must be positive, got {value:g}"]
            given[name] = value
    if errors:
        raise InvalidInput(errors)
    shares = direct_shares(list(given.values()))
    offenders = out_of_proportion(shares)
    if len(offenders):
        given_names = list(given)
        raise InvalidInput(
            {
                f"weights.{given_names[position]}": (
                    f"is out of proportion with the others: its share would be {shares[position]:.3g}, "
                    f"and every share must lie strictly between 0 and 1 (at least {MIN_DIRECT_SHARE:g})"
                )
                for position in offenders
            }
        )
    return given


def _judgment(position: int, judgment: Any, items: list[str]) -> tuple[Judgment | None, list[str]]:
    """One ``[row, column, value]`` checked on its own: the judgment, or
    the messages that refuse it."""
    if not isinstance(judgment, (list, tuple)) or len(judgment) != 3:
        return None, ["must be [row, column, value]"]
    row, column, value = judgment
    if not isinstance(row, str) or not isinstance(column, str):
        return None, ["must be [row, column, value] with row and column naming items"]
    problems = [
        f"{name!r} is not one of the items to prioritise ({', '.join(items)})"
        for name in (row, column)
        if name not in items
    ]
    if row == column:
        problems.append(f"compares {row!r} with itself")
    value = number(value, f"judgments[{position}]")
    if not on_input_scale(value):
        problems.append(f"value {value:g} is outside the scale 1/9..9")
    return (None, problems) if problems else ((row, column, value), [])


def _judgments(items: list[str], weights: Any, judgments: Any, method: str) -> list[Judgment]:
    """The judgments as given, one per pair of items, every pair judged."""
    if weights not in (None, {}):
        raise InvalidInput({"weights": f"{method.upper()} takes judgments, not weights"})
    if not isinstance(judgments, (list, tuple)):
        raise InvalidInput({"judgments": "must be a list of [row, column, value]"})
    errors, rows, seen = {}, [], {}
    for position, entry in enumerate(judgments):
        field = f"judgments[{position}]"
        try:
            judgment, problems = _judgment(position, entry, items)
        except InvalidInput as error:
            errors.update(error.errors)
            continue
        if problems:
            errors[field] = problems
            continue
        row, column, _ = judgment
        pair = frozenset((row, column))
        if pair in seen:
            errors[field] = [f"{row} / {column} is already judged in judgments[{seen[pair]}]"]
            continue
        seen[pair] = position
        rows.append(judgment)
    if not errors:
        missing = [f"{a} / {b}" for i, a in enumerate(items) for b in items[i + 1 :] if frozenset((a, b)) not in seen]
        if missing:
            errors["judgments"] = [f"missing comparisons: {', '.join(missing)}"]
    if errors:
        raise InvalidInput(errors)
    return rows


def _prioritised(
    *, method: str, items: list[str], weights: Any, judgments: Any
) -> tuple[Prioritisation, dict[str, float], list[Judgment]]:
    """Validate one prioritisation over named ``items`` and compute it;
    writes nothing. Returns ``(result, given, judgment_rows)``: the typed
    direct weights by item name, and the judgments as given."""
    _method(method)
    if method == Method.DIRECT:
        given = _direct_weights(items, weights, judgments)
        return prioritise("direct", len(items), weights=[given[name] for name in items]), given, []
    rows = _judgments(items, weights, judgments, method)
    index = {name: position for position, name in enumerate(items)}
    result = prioritise(method, len(items), judgments=[(index[r], index[c], to_scale(v)) for r, c, v in rows])
    return result, {}, rows


def _result_record(result: Prioritisation, items: list[str]) -> dict[str, Any]:
    """What reading a prioritisation shows, by item name (stored as JSON)."""
    return {
        "weights": dict(zip(items, [float(w) for w in result.weights], strict=True)),
        "consistency_ratio": result.consistency_ratio,
        "most_inconsistent": [
            {
                "row": items[j.row],
                "column": items[j.column],
                "value": float(j.value),
                "error": float(j.error),
                "suggested_value": float(j.suggested_value),
            }
            for j in result.most_inconsistent
        ],
    }


def prioritisation_preview(
    *, method: str, items: list[str], weights: Any = None, judgments: Any = None
) -> dict[str, Any]:
    """The result saving this prioritisation of ``items`` would store (weights,
    consistency ratio, most inconsistent judgments), refused exactly as
    ``prioritisation_set`` refuses it. Writes nothing: the pages' live preview."""
    result, _, _ = _prioritised(method=method, items=items, weights=weights, judgments=judgments)
    return _result_record(result, items)


def _store_prioritisation(
    prioritisation: AttributePrioritisation | MetricPrioritisation,
    *,
    items: list[QualityAttribute] | list[Metric],
    item_field: str,
    weights: Any,
    judgments: Any,
) -> AttributePrioritisation | MetricPrioritisation:
    """Compute a prioritisation over ``items`` (attributes or metrics) and
    store it on the new ``prioritisation`` row with its judgments, weights
    and result."""
    item_names = [item.name for item in items]
    result, given, judgment_rows = _prioritised(
        method=prioritisation.method, items=item_names, weights=weights, judgments=judgments
    )
    by_name = dict(zip(item_names, items, strict=True))
    prioritisation.consistency_ratio = result.consistency_ratio
    prioritisation.result = _result_record(result, item_names)
    prioritisation.save(update_fields=["consistency_ratio", "result"])
    judgment_model = prioritisation.judgments.model
    judgment_model.objects.bulk_create(
        [
            judgment_model(prioritisation=prioritisation, row=by_name[r], column=by_name[c], value=v)
            for r, c, v in judgment_rows
        ]
    )
    weight_model = prioritisation.weights.model
    weight_model.objects.bulk_create(
        [
            weight_model(
                prioritisation=prioritisation, given=given.get(item.name), weight=float(w), **{item_field: item}
            )
            for item, w in zip(items, result.weights, strict=True)
        ]
    )
    return prioritisation


@transaction.atomic
def prioritisation_set(
    *, expert: Membership, method: str, weights: dict[str, float] | None = None, judgments: list | None = None
) -> AttributePrioritisation:
    """Set the expert's prioritisation of the selected attributes (row w_i of W).

    ``weights`` (direct): ``{attribute: positive number}``, normalised.
    ``judgments`` (ahp, lpr): ``[[row, column, value], ...]`` over every pair.
    Returns the saved ``AttributePrioritisation``, whose ``result`` holds the
    weights, the consistency ratio and the most inconsistent judgments.
    """
    study = locked(expert.study)
    require_phase(study, (Phase.ASSESSMENT,), "Prioritising")
    attributes = list(selected_attributes(study))
    _method(method)
    AttributePrioritisation.objects.filter(expert=expert).delete()
    return _store_prioritisation(
        AttributePrioritisation.objects.create(expert=expert, method=method),
        items=attributes, item_field="attribute", weights=weights, judgments=judgments,
    )


@transaction.atomic
def metric_prioritisation_set(
    *,
    expert: Membership,
    attribute: QualityAttribute,
    method: str,
    weights: dict[str, float] | None = None,
    judgments: list | None = None,
) -> MetricPrioritisation:
    """Set the expert's local prioritisation of one attribute's selected
    metrics (METHOD.md section 3, several metrics per attribute)."""
    study = locked(expert.study)
    require_phase(study, (Phase.ASSESSMENT,), "Prioritising")
    if attribute.study_id != study.pk or not attribute.is_selected:
        raise InvalidInput({"attribute": f"{attribute.name!r} is not a selected attribute of this study"})
    metrics = list(Metric.objects.filter(attribute=attribute, is_selected=True).order_by("position", "id"))
    if len(metrics) < 2:
        raise InvalidInput({"attribute": f"{attribute.name!r} has one selected metric: there is nothing to prioritise"})
    _method(method)
    MetricPrioritisation.objects.filter(expert=expert, attribute=attribute).delete()
    return _store_prioritisation(
        MetricPrioritisation.objects.create(expert=expert, attribute=attribute, method=method),
        items=metrics, item_field="metric", weights=weights, judgments=judgments,
    )


@transaction.atomic
def priorities_set(
    *,
    expert: Membership,
    method: str,
    weights: dict[str, float] | None = None,
    judgments: list | None = None,
    metric_priorities: dict[str, dict] | None = None,
) -> AttributePrioritisation:
    """Set an expert's whole prioritisation, as in their ``priorities``
    section of a bundle: the attributes, plus optional ``metric_priorities``
    ``{attribute: {"method", "weights" | "judgments"}}``. Local
    prioritisations not given are cleared (equal split)."""
    prioritisation = prioritisation_set(expert=expert, method=method, weights=weights, judgments=judgments)
    metric_priorities = {} if metric_priorities is None else metric_priorities
    if not isinstance(metric_priorities, dict):
        raise InvalidInput({"metric_priorities": "must map attribute names to prioritisations"})
    attributes = {a.name: a for a in QualityAttribute.objects.filter(study=expert.study_id)}
    # Unknown names are refused before they reach a query (a name with a NUL
    # character would make PostgreSQL fail rather than match nothing).
    for name in metric_priorities:
        if name not in attributes:
            raise InvalidInput({f"metric_priorities.{name}": "no attribute of that name in this study"})
    MetricPrioritisation.objects.filter(expert=expert).exclude(attribute__name__in=list(metric_priorities)).delete()
    for name, local in metric_priorities.items():
        field = f"metric_priorities.{name}"
        if not isinstance(local, dict) or "method" not in local or set(local) - {"method", "weights", "judgments"}:
            raise InvalidInput({field: "must be {method, weights | judgments}"})
        try:
            metric_prioritisation_set(
                expert=expert,
                attribute=attributes[name],
                method=local["method"],
                weights=local.get("weights"),
                judgments=local.get("judgments"),
            )
        except InvalidInput as error:
            raise error.within(field) from None
    return prioritisation


@transaction.atomic
def metric_prioritisation_clear(*, expert: Membership, attribute: QualityAttribute) -> None:
    """Back to an equal split of the attribute's weight over its metrics."""
    study = locked(expert.study)
    require_phase(study, (Phase.ASSESSMENT,), "Prioritising")
    MetricPrioritisation.objects.filter(expert=expert, attribute=attribute).delete()


# --- acceptable ranges and peer weights (phase "assessment") -------------------


@transaction.atomic
def ranges_set(*, expert: Membership, ranges: dict[str, list[float]]) -> None:
    """Replace the expert's ranges: ``{metric: [least_acceptable, desired]}``
    over selected metrics. A metric left out falls back to its default range."""
    study = locked(expert.study)
    require_phase(study, (Phase.ASSESSMENT,), "Setting acceptable ranges")
    if not isinstance(ranges, dict):
        raise InvalidInput({"ranges": "must map metric names to [least acceptable, desired]"})
    metrics = {m.name: m for m in Metric.objects.filter(study=study, is_selected=True)}
    errors, pairs = {}, {}
    for name, value in ranges.items():
        metric = metrics.get(name)
        if metric is None:
            errors[f"ranges.{name}"] = ["not a selected metric of this study"]
            continue
        try:
            pairs[metric] = range_pair(value, f"ranges.{name}", metric.better)
        except InvalidInput as error:
            errors.update(error.errors)
    if errors:
        raise InvalidInput(errors)
    AcceptableRange.objects.filter(expert=expert).delete()
    AcceptableRange.objects.bulk_create(
        [AcceptableRange(expert=expert, metric=m, least_acceptable=lo, desired=hi) for m, (lo, hi) in pairs.items()]
    )


def range_check(*, metric: Metric, value: Any) -> tuple[float, float]:
    """One acceptable range ``[least acceptable, desired]`` checked as
    ``ranges_set`` checks it (InvalidInput naming ``ranges.<metric>``).
    Writes nothing: the pages' live preview."""
    return range_pair(value, f"ranges.{metric.name}", metric.better)


def _peer_weight_problem(value: float, lone: bool) -> str | None:
    if value <= 0:
        return f"must be positive (no expert may silence another), got {value:g}"
    if value < MIN_PEER_WEIGHT:
        return (
            f"must be at least {MIN_PEER_WEIGHT:g}, got {value:g} (a smaller weight makes the aggregation "
            "need too many layers to compute)"
        )
    if value > 1 or (value == 1 and not lone):
        return f"must be below 1, got {value:g}"
    return None


@transaction.atomic
def peer_weights_set(*, expert: Membership, weights: dict[str, float]) -> None:
    """Set the expert's row of V: ``{username: weight}`` over every expert,
    self included, each in [MIN_PEER_WEIGHT, 1), summing to 1 (METHOD.md
    section 5)."""
    study = locked(expert.study)
    require_phase(study, (Phase.ASSESSMENT,), "Weighting experts")
    if not isinstance(weights, dict):
        raise InvalidInput({"weights": "must map every expert's username to a weight"})
    experts = {m.user.get_username(): m for m in expert_list(study=study)}
    errors, values = {}, {}
    for username, value in weights.items():
        field = f"weights.{username}"
        if username not in experts:
            errors[field] = ["not an expert of this study"]
            continue
        try:
            value = number(value, field)
        except InvalidInput as error:
            errors.update(error.errors)
            continue
        problem = _peer_weight_problem(value, lone=len(experts) == 1)
        if problem:
            errors[field] = [problem]
        values[username] = value
    missing = [name for name in experts if name not in weights]
    if missing:
        errors.setdefault("weights", []).append(
            f"missing weights for {', '.join(missing)}: the row must rate every expert"
        )
    if not errors:
        total = math.fsum(values.values())
        if not sums_to_one(total):
            errors["weights"] = [f"row sums to {total:.10g}, must be 1"]
    if errors:
        raise InvalidInput(errors)
    # Stored as given (so a bundle round-trips exactly); the engine
    # renormalises each row when it snapshots the study.
    PeerWeight.objects.filter(rater=expert).delete()
    PeerWeight.objects.bulk_create(
        [PeerWeight(rater=expert, ratee=experts[name], weight=value) for name, value in values.items()]
    )
