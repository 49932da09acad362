"""What experts enter: votes (voting phase), then prioritisations, acceptable
ranges and peer weights (assessment phase), each in the shape of that
expert's section of a study bundle (FORMATS.md)."""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from engine.core import sums_to_one
from engine.prioritisation import Prioritisation, prioritise
from engine.rules import (
    AHP_WEIGHTING_DEFAULT,
    MIN_DIRECT_SHARE,
    MIN_PEER_WEIGHT,
    direct_shares,
    is_consistent,
    on_input_scale,
    out_of_proportion,
    to_scale,
)

from .. import history
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
    QualityAttribute,
    RoundStep,
    Study,
)
from ..selectors import expert_list, selected_attributes, selected_metrics
from ._checks import keys, locked, names, number, range_pair
from .panel import require_taking_part
from .phases import Action, require_phase
from .rounds import round_mark_revised

Judgment = tuple[str, str, float]
P = TypeVar("P", AttributePrioritisation, MetricPrioritisation)


def _expert_usernames(study: Study, members: Iterable[Membership], field: str) -> dict[int, str]:
    """``{membership id: username}`` of the study's experts in the order they
    joined (one query); ``members`` given inputs by a ``*_many`` service must
    be among them, or InvalidInput names ``field``."""
    usernames = dict(expert_list(study=study).values_list("pk", "user__username"))
    for member in members:
        if member.pk not in usernames:
            raise InvalidInput({field: f"membership {member.pk} is not an expert of this study"})
    return usernames


# --- votes (phase "voting") ----------------------------------------------------


def _votes_checked(
    attributes: Any, metrics: Any, by_name: dict[str, QualityAttribute], metric_by_name: dict[str, Metric]
) -> tuple[list[QualityAttribute], list[Metric]]:
    """One expert's votes checked against the study's items: the attributes
    and metrics voted for. Writes nothing."""
    attribute_names = names(attributes, "attributes")
    metric_names = names(metrics, "metrics")
    errors: dict[str, list[str]] = {}
    for name in attribute_names:
        attribute = by_name.get(name)
        if attribute is None:
            errors.setdefault("attributes", []).append(f"no attribute named {name!r} in this study")
        elif attribute.kind == QualityAttribute.Kind.MAIN:
            errors.setdefault("attributes", []).append(f"{name!r} is a main attribute, always selected: no vote needed")
    for name in metric_names:
        if name not in metric_by_name:
            errors.setdefault("metrics", []).append(f"no metric named {name!r} in this study")
    if errors:
        raise InvalidInput(errors)
    return [by_name[n] for n in attribute_names], [metric_by_name[n] for n in metric_names]


def _votes_context(study: Study) -> tuple[dict[str, QualityAttribute], dict[str, Metric]]:
    """The study's attributes and metrics by name, in the voting phase."""
    require_phase(study, Action.VOTE)
    by_name = {a.name: a for a in QualityAttribute.objects.filter(study=study)}
    return by_name, {m.name: m for m in Metric.objects.filter(study=study)}


def _votes_store(votes: dict[Membership, tuple[list[QualityAttribute], list[Metric]]]) -> None:
    """Replace the votes of these experts: the votes withdrawn are deleted and
    the new ones inserted (a vote kept is left alone, so the history shows
    only what changed): per table, one SELECT, a DELETE and an INSERT."""
    _votes_replace(AttributeVote, "attribute", {expert: attributes for expert, (attributes, _) in votes.items()})
    _votes_replace(MetricVote, "metric", {expert: metrics for expert, (_, metrics) in votes.items()})


def _votes_replace(model: type[Model], field: str, wanted: Mapping[Membership, Sequence[Model]]) -> None:
    existing = {
        (expert_id, item_id): pk
        for pk, expert_id, item_id in model._default_manager.filter(expert__in=wanted).values_list(
            "pk", "expert_id", f"{field}_id"
        )
    }
    chosen = {(expert.pk, item.pk): (expert, item) for expert, items in wanted.items() for item in items}
    withdrawn = [pk for key, pk in existing.items() if key not in chosen]
    if withdrawn:
        history.delete(model._default_manager.filter(pk__in=withdrawn))
    history.bulk_create(
        model, [model(expert=expert, **{field: item}) for key, (expert, item) in chosen.items() if key not in existing]
    )


@transaction.atomic
def votes_set(*, expert: Membership, attributes: Sequence[str] = (), metrics: Sequence[str] = ()) -> None:
    """Replace the expert's votes: the complementary attributes and the
    metrics they vote for (METHOD.md section 2)."""
    require_taking_part(expert)
    by_name, metric_by_name = _votes_context(locked(expert.study))
    _votes_store({expert: _votes_checked(attributes, metrics, by_name, metric_by_name)})


@transaction.atomic
def votes_set_many(
    *,
    study: Study,
    attributes: Mapping[Membership, Sequence[str]],
    metrics: Mapping[Membership, Sequence[str]],
) -> None:
    """``votes_set`` for several experts of the study at once, in a number of
    queries that does not grow with them (the bundle importer). Experts are
    checked in order (those of ``attributes``, then any others of
    ``metrics``), an expert missing from one mapping voting for nothing there;
    the first refused is named ``attributes.<username>`` or
    ``metrics.<username>``, and nothing is written."""
    study = locked(study)
    by_name, metric_by_name = _votes_context(study)
    experts = list(dict.fromkeys([*attributes, *metrics]))
    usernames = _expert_usernames(study, experts, "attributes")
    votes = {}
    for expert in experts:
        try:
            votes[expert] = _votes_checked(attributes.get(expert, []), metrics.get(expert, []), by_name, metric_by_name)
        except InvalidInput as error:
            raise InvalidInput(
                {f"{field}.{usernames[expert.pk]}": messages for field, messages in error.errors.items()}
            ) from None
    _votes_store(votes)


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


JUDGMENT_KEYS = frozenset({"row", "column", "value"})


def _judgment(position: int, judgment: Any, items: list[str]) -> tuple[Judgment | None, list[str]]:
    """One ``[row, column, value]`` (or ``{"row", "column", "value"}``, the
    same as an object) checked on its own: the judgment, or the messages
    that refuse it."""
    if isinstance(judgment, Mapping):
        if set(judgment) != JUDGMENT_KEYS:
            return None, ["must be [row, column, value] or an object with exactly row, column and value"]
        judgment = [judgment["row"], judgment["column"], judgment["value"]]
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
    errors: dict[str, Any] = {}
    rows: list[Judgment] = []
    seen: dict[frozenset[str], int] = {}
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
        assert judgment is not None  # no problems: _judgment returned the judgment
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
    *, method: str, items: list[str], weights: Any, judgments: Any, weighting: str, repairs: bool = False
) -> tuple[Prioritisation, dict[str, float], list[Judgment]]:
    """Validate one prioritisation over named ``items`` and compute it (AHP
    weights by the study's ``weighting``, ``Study.ahp_weighting``; with
    ``repairs``, the smallest repairs of inconsistent judgments too); writes
    nothing. Returns ``(result, given, judgment_rows)``: the typed direct
    weights by item name, and the judgments as given."""
    _method(method)
    if method == Method.DIRECT:
        given = _direct_weights(items, weights, judgments)
        return prioritise("direct", len(items), weights=[given[name] for name in items]), given, []
    rows = _judgments(items, weights, judgments, method)
    index = {name: position for position, name in enumerate(items)}
    result = prioritise(
        method,
        len(items),
        judgments=[(index[r], index[c], to_scale(v)) for r, c, v in rows],
        weighting=weighting,
        repairs=repairs,
    )
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
    *,
    method: str,
    items: list[str],
    weights: Any = None,
    judgments: Any = None,
    weighting: str = AHP_WEIGHTING_DEFAULT,
) -> dict[str, Any]:
    """The result saving this prioritisation of ``items`` would store (weights,
    consistency ratio, most inconsistent judgments), refused exactly as
    ``prioritisation_set`` refuses it, and, not stored, ``repairs``: the
    smallest changes of one judgment that make inconsistent judgments
    consistent (``engine.prioritisation.smallest_repairs``), by item name.
    Writes nothing: the pages' live preview."""
    result, _, _ = _prioritised(
        method=method, items=items, weights=weights, judgments=judgments, weighting=weighting, repairs=True
    )
    record = _result_record(result, items)
    record["repairs"] = [
        {
            "row": items[r.row],
            "column": items[r.column],
            "value": r.value,
            "suggested_value": r.suggested_value,
            "steps": r.steps,
            "consistency_ratio": r.ratio,
        }
        for r in result.repairs
    ]
    return record


@dataclass(frozen=True)
class _Planned:
    """A prioritisation checked and computed over ``items`` (attributes or
    metrics), ready to store."""

    method: str
    items: Sequence[QualityAttribute | Metric]
    result: Prioritisation
    given: dict[str, float]
    judgments: list[Judgment]


def _planned(
    *, method: Any, items: list[QualityAttribute] | list[Metric], weights: Any, judgments: Any, weighting: str
) -> _Planned:
    """Check one prioritisation over ``items`` and compute it; writes nothing."""
    _method(method)
    result, given, judgment_rows = _prioritised(
        method=method, items=[item.name for item in items], weights=weights, judgments=judgments, weighting=weighting
    )
    return _Planned(method, items, result, given, judgment_rows)


def _store_prioritisations(
    model: type[P], rows: list[tuple[P, _Planned]], item_field: str, *, acknowledged: bool = False
) -> list[P]:
    """Insert the new prioritisation ``rows`` with their result, judgments and
    weights: one INSERT per table, however many rows. ``acknowledged``: the
    expert chose to keep inconsistent judgments (the priorities page's
    confirmation), recorded with the time on each inconsistent row."""
    now = timezone.now()
    for prioritisation, plan in rows:
        prioritisation.consistency_ratio = plan.result.consistency_ratio
        ratio = plan.result.consistency_ratio
        if acknowledged and ratio is not None and not is_consistent(ratio):
            prioritisation.inconsistency_acknowledged_at = now
        prioritisation.result_record = _result_record(plan.result, [item.name for item in plan.items])
    saved = history.bulk_create(model, [prioritisation for prioritisation, _ in rows])
    judgment_model = model._meta.get_field("judgments").related_model
    weight_model = model._meta.get_field("weights").related_model
    judgments: list[Model] = []
    weights: list[Model] = []
    for prioritisation, (_, plan) in zip(saved, rows, strict=True):
        by_name = {item.name: item for item in plan.items}
        judgments += [
            judgment_model(prioritisation=prioritisation, row=by_name[r], column=by_name[c], value=v)
            for r, c, v in plan.judgments
        ]
        weights += [
            weight_model(
                prioritisation=prioritisation, given=plan.given.get(item.name), weight=float(w), **{item_field: item}
            )
            for item, w in zip(plan.items, plan.result.weights, strict=True)
        ]
    history.bulk_create(judgment_model, judgments)
    history.bulk_create(weight_model, weights)
    return saved


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
    require_taking_part(expert)
    study = locked(expert.study)
    require_phase(study, Action.PRIORITISE)
    plan = _planned(
        method=method,
        items=list(selected_attributes(study)),
        weights=weights,
        judgments=judgments,
        weighting=study.ahp_weighting,
    )
    history.delete(AttributePrioritisation.objects.filter(expert=expert))
    return _store_prioritisations(
        AttributePrioritisation, [(AttributePrioritisation(expert=expert, method=method), plan)], "attribute"
    )[0]


def _local_items(attribute: QualityAttribute, metrics: list[Metric]) -> list[Metric]:
    """The selected ``metrics`` of a selected ``attribute``, at least two:
    what a local prioritisation weighs."""
    if not attribute.is_selected:
        raise InvalidInput({"attribute": f"{attribute.name!r} is not a selected attribute of this study"})
    if len(metrics) < 2:
        raise InvalidInput({"attribute": f"{attribute.name!r} has one selected metric: there is nothing to prioritise"})
    return metrics


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
    require_taking_part(expert)
    study = locked(expert.study)
    require_phase(study, Action.PRIORITISE)
    if attribute.study_id != study.pk:
        raise InvalidInput({"attribute": f"{attribute.name!r} is not a selected attribute of this study"})
    metrics = list(selected_metrics(study).filter(attribute=attribute))
    plan = _planned(
        method=method,
        items=_local_items(attribute, metrics),
        weights=weights,
        judgments=judgments,
        weighting=study.ahp_weighting,
    )
    history.delete(MetricPrioritisation.objects.filter(expert=expert, attribute=attribute))
    return _store_prioritisations(
        MetricPrioritisation,
        [(MetricPrioritisation(expert=expert, attribute=attribute, method=method), plan)],
        "metric",
    )[0]


@dataclass(frozen=True)
class _Items:
    """What a whole prioritisation is checked against, read once per study."""

    selected: list[QualityAttribute]
    attributes: dict[str, QualityAttribute]
    metrics: dict[int, list[Metric]]  # selected metrics by attribute id, in order
    weighting: str  # the study's AHP weighting

    @classmethod
    def of(cls, study: Study) -> "_Items":
        require_phase(study, Action.PRIORITISE)
        metrics: dict[int, list[Metric]] = {}
        for metric in selected_metrics(study):
            metrics.setdefault(metric.attribute_id, []).append(metric)
        attributes = {a.name: a for a in QualityAttribute.objects.filter(study=study)}
        selected = sorted((a for a in attributes.values() if a.is_selected), key=lambda a: (a.position, a.pk))
        return cls(selected, attributes, metrics, study.ahp_weighting)


def _priorities_planned(
    items: _Items, *, method: Any, weights: Any = None, judgments: Any = None, metric_priorities: Any = None
) -> tuple[_Planned, dict[QualityAttribute, _Planned]]:
    """One expert's whole prioritisation checked and computed, as
    ``priorities_set`` takes it: the attributes', and each local one by
    attribute. Writes nothing."""
    plan = _planned(
        method=method, items=items.selected, weights=weights, judgments=judgments, weighting=items.weighting
    )
    metric_priorities = {} if metric_priorities is None else metric_priorities
    if not isinstance(metric_priorities, dict):
        raise InvalidInput({"metric_priorities": "must map attribute names to prioritisations"})
    for name in metric_priorities:
        if name not in items.attributes:
            raise InvalidInput({f"metric_priorities.{name}": "no attribute of that name in this study"})
    local = {}
    for name, entry in metric_priorities.items():
        field = f"metric_priorities.{name}"
        if not isinstance(entry, dict) or "method" not in entry or set(entry) - {"method", "weights", "judgments"}:
            raise InvalidInput({field: "must be {method, weights | judgments}"})
        attribute = items.attributes[name]
        try:
            local[attribute] = _planned(
                method=entry["method"],
                items=_local_items(attribute, items.metrics.get(attribute.pk, [])),
                weights=entry.get("weights"),
                judgments=entry.get("judgments"),
                weighting=items.weighting,
            )
        except InvalidInput as error:
            raise error.within(field) from None
    return plan, local


def _priorities_store(
    plans: dict[Membership, tuple[_Planned, dict[QualityAttribute, _Planned]]], *, acknowledged: bool = False
) -> list[AttributePrioritisation]:
    """Replace these experts' prioritisations (a local one not planned is
    cleared): a constant number of queries, however many experts."""
    history.delete(AttributePrioritisation.objects.filter(expert__in=plans))
    history.delete(MetricPrioritisation.objects.filter(expert__in=plans))
    saved = _store_prioritisations(
        AttributePrioritisation,
        [(AttributePrioritisation(expert=expert, method=plan.method), plan) for expert, (plan, _) in plans.items()],
        "attribute",
        acknowledged=acknowledged,
    )
    _store_prioritisations(
        MetricPrioritisation,
        [
            (MetricPrioritisation(expert=expert, attribute=attribute, method=plan.method), plan)
            for expert, (_, local) in plans.items()
            for attribute, plan in local.items()
        ],
        "metric",
        acknowledged=acknowledged,
    )
    return saved


@transaction.atomic
def priorities_set(
    *,
    expert: Membership,
    method: str,
    weights: dict[str, float] | None = None,
    judgments: list | None = None,
    metric_priorities: dict[str, dict] | None = None,
    acknowledge_inconsistency: bool = False,
) -> AttributePrioritisation:
    """Set an expert's whole prioritisation, as in their ``priorities``
    section of a bundle: the attributes, plus optional ``metric_priorities``
    ``{attribute: {"method", "weights" | "judgments"}}``. Local
    prioritisations not given are cleared (equal split).

    Inconsistent judgments (CR above engine.rules.CONSISTENCY_THRESHOLD) are
    stored as given; ``acknowledge_inconsistency`` records that the expert
    chose to keep them (``inconsistency_acknowledged_at``, METHOD.md 3)."""
    require_taking_part(expert)
    items = _Items.of(locked(expert.study))
    plan = _priorities_planned(
        items, method=method, weights=weights, judgments=judgments, metric_priorities=metric_priorities
    )
    saved = _priorities_store({expert: plan}, acknowledged=acknowledge_inconsistency)[0]
    round_mark_revised(experts=[expert], step=RoundStep.PRIORITIES)
    return saved


@transaction.atomic
def priorities_set_many(*, study: Study, priorities: Mapping[Membership, Any]) -> None:
    """``priorities_set`` for several experts of the study at once, each
    given as their ``priorities`` section of a bundle (an object with
    ``method`` and optional ``weights``, ``judgments``, ``metric_priorities``),
    in a number of queries that does not grow with the experts (the bundle
    importer). Experts are checked in order; the first refused is named
    ``priorities.<username>.<field>``, and nothing is written."""
    study = locked(study)
    items = _Items.of(study)
    usernames = _expert_usernames(study, priorities, "priorities")
    plans = {}
    for expert, entry in priorities.items():
        field = f"priorities.{usernames[expert.pk]}"
        keys(entry, field, required=("method",), optional=("weights", "judgments", "metric_priorities"))
        try:
            plans[expert] = _priorities_planned(items, **entry)
        except InvalidInput as error:
            raise error.within(field) from None
    _priorities_store(plans)


@transaction.atomic
def metric_prioritisation_clear(*, expert: Membership, attribute: QualityAttribute) -> None:
    """Back to an equal split of the attribute's weight over its metrics."""
    require_taking_part(expert)
    study = locked(expert.study)
    require_phase(study, Action.PRIORITISE)
    history.delete(MetricPrioritisation.objects.filter(expert=expert, attribute=attribute))


# --- acceptable ranges and peer weights (phase "assessment") -------------------


def _ranges_context(study: Study) -> dict[str, Metric]:
    """The study's selected metrics by name, in the assessment phase."""
    require_phase(study, Action.SET_RANGES)
    return {m.name: m for m in selected_metrics(study)}


def _ranges_checked(ranges: Any, metrics: dict[str, Metric]) -> dict[Metric, tuple[float, float]]:
    """One expert's ranges checked against the selected ``metrics``; writes nothing."""
    if not isinstance(ranges, dict):
        raise InvalidInput({"ranges": "must map metric names to [least acceptable, desired]"})
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
    return pairs


def _ranges_store(
    ranges: dict[Membership, dict[Metric, tuple[float, float]]],
    to_confirm: Mapping[Membership, set[Metric]] | None = None,
) -> None:
    """Replace these experts' ranges, in place (``history.replace``: one
    record per range changed); saving ranges (page, API or bundle) confirms
    the step, default ranges included (``ranges_confirmed_at``), and
    confirms each range (``needs_confirmation``), but those of
    ``to_confirm`` (a bundle's ``ranges_to_confirm``)."""
    to_confirm = to_confirm or {}
    history.update(
        Membership.objects.filter(pk__in=[expert.pk for expert in ranges]), ranges_confirmed_at=timezone.now()
    )
    history.replace(
        AcceptableRange.objects.filter(expert__in=ranges),
        [
            AcceptableRange(
                expert=expert,
                metric=m,
                least_acceptable=lo,
                desired=hi,
                needs_confirmation=m in to_confirm.get(expert, ()),
            )
            for expert, pairs in ranges.items()
            for m, (lo, hi) in pairs.items()
        ],
        key=("expert_id", "metric_id"),
        values=("least_acceptable", "desired", "needs_confirmation"),
    )


def range_check(*, metric: Metric, value: Any) -> tuple[float, float]:
    """One acceptable range ``[least acceptable, desired]`` checked as
    ``ranges_set`` checks it (InvalidInput naming ``ranges.<metric>``).
    Writes nothing: the pages' live preview."""
    return range_pair(value, f"ranges.{metric.name}", metric.better)


@transaction.atomic
def ranges_set(*, expert: Membership, ranges: dict[str, list[float]]) -> None:
    """Replace the expert's ranges: ``{metric: [least_acceptable, desired]}``
    over selected metrics. A metric left out falls back to its default range."""
    require_taking_part(expert)
    metrics = _ranges_context(locked(expert.study))
    _ranges_store({expert: _ranges_checked(ranges, metrics)})
    round_mark_revised(experts=[expert], step=RoundStep.RANGES)


@transaction.atomic
def ranges_set_many(
    *, study: Study, ranges: Mapping[Membership, Any], to_confirm: Mapping[Membership, Any] | None = None
) -> None:
    """``ranges_set`` for several experts of the study at once, in a number
    of queries that does not grow with them (the bundle importer). Experts
    are checked in order; the first refused is named
    ``ranges.<username>.<metric>``, and nothing is written. ``to_confirm``
    (a bundle's ``ranges_to_confirm``): per expert, the names of metrics
    whose range given here stays to confirm (``needs_confirmation``)."""
    study = locked(study)
    metrics = _ranges_context(study)
    usernames = _expert_usernames(study, ranges, "ranges")
    checked = {}
    for expert, expert_ranges in ranges.items():
        try:
            checked[expert] = _ranges_checked(expert_ranges, metrics)
        except InvalidInput as error:
            raise error.prefixed(f"ranges.{usernames[expert.pk]}") from None
    _ranges_store(checked, _to_confirm_checked(to_confirm or {}, checked, usernames))


def _to_confirm_checked(
    to_confirm: Mapping[Membership, Any],
    checked: dict[Membership, dict[Metric, tuple[float, float]]],
    usernames: dict[int, str],
) -> dict[Membership, set[Metric]]:
    """``ranges_set_many``'s ``to_confirm`` as metrics, each one of a range
    given for that expert (refused naming ``ranges_to_confirm.<username>``)."""
    found: dict[Membership, set[Metric]] = {}
    for expert, metric_names in to_confirm.items():
        field = f"ranges_to_confirm.{usernames.get(expert.pk, expert.pk)}"
        given = {metric.name: metric for metric in checked.get(expert, {})}
        if not isinstance(metric_names, list) or not all(isinstance(name, str) for name in metric_names):
            raise InvalidInput({field: "must be a list of metric names"})
        unknown = [name for name in metric_names if name not in given]
        if unknown:
            raise InvalidInput({field: f"no range of theirs in the bundle for {', '.join(unknown)}"})
        found[expert] = {given[name] for name in metric_names}
    return found


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


def _peer_weights_checked(weights: Any, experts: dict[str, int]) -> dict[int, float]:
    """One expert's row of V checked against the study's ``{username:
    membership id}``: ``{ratee id: weight}``. Writes nothing."""
    if not isinstance(weights, dict):
        raise InvalidInput({"weights": "must map every expert's username to a weight"})
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
    return {experts[name]: value for name, value in values.items()}


def _peer_weights_context(study: Study, raters: Iterable[Membership] = ()) -> dict[str, int]:
    """The study's experts ``{username: membership id}``, in the assessment
    phase; ``raters`` must be among them."""
    require_phase(study, Action.WEIGH_PEERS)
    return {username: pk for pk, username in _expert_usernames(study, raters, "weights").items()}


def _peer_weights_store(rows: dict[Membership, dict[int, float]]) -> None:
    # Stored as given (so a bundle round-trips exactly); the engine
    # renormalises each row when it snapshots the study. Replaced in place:
    # one record per weight changed (``history.replace``).
    history.replace(
        PeerWeight.objects.filter(rater__in=rows),
        [
            PeerWeight(rater_id=rater.pk, ratee_id=ratee, weight=value)
            for rater, values in rows.items()
            for ratee, value in values.items()
        ],
        key=("rater_id", "ratee_id"),
        values=("weight",),
    )


@transaction.atomic
def peer_weights_set(*, expert: Membership, weights: dict[str, float]) -> None:
    """Set the expert's row of V: ``{username: weight}`` over every expert,
    self included, each in [MIN_PEER_WEIGHT, 1), summing to 1 (METHOD.md
    section 5)."""
    require_taking_part(expert)
    experts = _peer_weights_context(locked(expert.study))
    _peer_weights_store({expert: _peer_weights_checked(weights, experts)})
    round_mark_revised(experts=[expert], step=RoundStep.PEER_WEIGHTS)


@transaction.atomic
def peer_weights_set_many(*, study: Study, weights: Mapping[Membership, Any]) -> None:
    """``peer_weights_set`` for several experts of the study at once, in a
    number of queries that does not grow with them (the bundle importer).
    Raters are checked in order; the first refused is named
    ``weights.<username>`` (or ``weights.<username>.<ratee>``), and nothing
    is written."""
    study = locked(study)
    experts = _peer_weights_context(study, weights)
    usernames = {pk: username for username, pk in experts.items()}
    checked = {}
    for rater, row in weights.items():
        try:
            checked[rater] = _peer_weights_checked(row, experts)
        except InvalidInput as error:
            raise error.prefixed(f"weights.{usernames[rater.pk]}") from None
    _peer_weights_store(checked)
