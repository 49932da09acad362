"""Every change to a study, one workflow per function.

Services are keyword-only, run inside ``transaction.atomic()`` and either do
the whole change or raise (``InvalidInput`` naming the field, ``PhaseConflict``
saying why) having written nothing. They check the domain rules of METHOD.md
sections 1-5; *who* may call them is checked by the pages and the API.

Expert inputs take the shape of that expert's section of a study bundle
(FORMATS.md): items are named, experts are usernames. The bundle importer,
the API and the pages call these same functions.
"""

import hashlib
import math
import secrets
from numbers import Real

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Max

from engine.prioritisation import SMALLEST_SHARE, prioritise

from . import invitations
from .errors import InvalidInput, PhaseConflict
from .models import (
    AcceptableRange,
    ApiToken,
    AttributePrioritisation,
    AttributeVote,
    Candidate,
    Direction,
    Measurement,
    Membership,
    Method,
    Metric,
    MetricPrioritisation,
    MetricVote,
    PeerWeight,
    Phase,
    QualityAttribute,
    Study,
)
from .selectors import selected_attributes, selected_metrics

# Sums that must equal 1 are checked to within this, then renormalised exactly
# (METHOD.md, introduction).
SUM_TOLERANCE = 1e-6
PAIRWISE_MIN, PAIRWISE_MAX = 1 / 9, 9.0
# Lets 1/9 typed as 0.1111 through; the engine clamps nothing, so values in
# the slack are clamped to 1/9 before the engine sees them (they are stored as
# typed). It must stay below the database's tolerance (1/9 - 1e-4, i.e. a
# relative 9e-4) or an accepted value would violate the check constraint.
SCALE_SLACK = 5e-4

User = get_user_model()


# --- small checks shared by every service --------------------------------------


def _number(value, field):
    """A finite real number, or InvalidInput naming the field."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidInput({field: f"must be a number, got {value!r}"})
    try:
        value = float(value)
    except OverflowError:  # an integer beyond the float range, e.g. 10**400 from JSON
        raise InvalidInput({field: "must be a finite number, got an integer too large for a float"}) from None
    if not math.isfinite(value):
        raise InvalidInput({field: f"must be a finite number, got {value}"})
    return value


def _text(value, field, *, max_length, required=True):
    if not isinstance(value, str):
        raise InvalidInput({field: f"must be text, got {type(value).__name__}"})
    value = value.strip()
    if required and not value:
        raise InvalidInput({field: "must not be empty"})
    if len(value) > max_length:
        raise InvalidInput({field: f"must be at most {max_length} characters"})
    if "\x00" in value:
        # PostgreSQL cannot store it (and the query would fail, not refuse).
        raise InvalidInput({field: "must not contain NUL characters"})
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (JSON allows "\ud800") is not text any database stores.
        raise InvalidInput({field: "must be valid Unicode text (it contains a lone surrogate)"}) from None
    return value


# The API's limit too (StudyWriteSerializer); the column is a 32-bit integer.
MAX_THRESHOLD = 10000


def _threshold(value, field):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput({field: f"must be a whole number ≥ 0, got {value!r}"})
    if value > MAX_THRESHOLD:
        raise InvalidInput({field: f"must be at most {MAX_THRESHOLD}, got {value}"})
    return value


def _require_phase(study, allowed, action):
    if study.phase not in allowed:
        names = " or ".join(Phase(p).label.lower() for p in allowed)
        raise PhaseConflict(
            f"{action} is only possible in the {names} phase; the study is in the {Phase(study.phase).label.lower()} phase"
        )


def _locked(study):
    """Re-read the study under a row lock so concurrent transitions and
    inputs serialise on it."""
    return Study.objects.select_for_update().get(pk=study.pk)


def _range_pair(value, field, better):
    """A (least acceptable, desired) pair consistent with the metric's direction."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise InvalidInput({field: "must be a pair [least acceptable, desired]"})
    least = _number(value[0], field)
    desired = _number(value[1], field)
    if least == desired:
        raise InvalidInput({field: f"least acceptable and desired values must differ (both are {least:g})"})
    if not math.isfinite(desired - least):
        raise InvalidInput({field: f"the range from {least:g} to {desired:g} is too wide to compute with"})
    if better == Direction.HIGHER and least > desired:
        raise InvalidInput(
            {field: f"higher is better, so the least acceptable value ({least:g}) must be below the desired value ({desired:g})"}
        )
    if better == Direction.LOWER and least < desired:
        raise InvalidInput(
            {field: f"lower is better, so the least acceptable value ({least:g}) must be above the desired value ({desired:g})"}
        )
    return least, desired


def _next_position(queryset):
    return (queryset.aggregate(top=Max("position"))["top"] or 0) + 1


# --- the study -----------------------------------------------------------------


@transaction.atomic
def study_create(*, designer, title, description="", attribute_threshold=1, metric_threshold=0):
    study = Study.objects.create(
        title=_text(title, "title", max_length=200),
        description=_text(description, "description", max_length=20000, required=False),
        attribute_threshold=_threshold(attribute_threshold, "attribute_threshold"),
        metric_threshold=_threshold(metric_threshold, "metric_threshold"),
        designer=designer,
    )
    Membership.objects.create(study=study, user=designer, role=Membership.Role.DESIGNER)
    return study


@transaction.atomic
def study_update(*, study, **changes):
    """Change title, description (any phase) or thresholds (until voting closes)."""
    allowed = {"title", "description", "attribute_threshold", "metric_threshold"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput({name: "cannot be changed here" for name in sorted(unknown)})
    study = _locked(study)
    if "title" in changes:
        study.title = _text(changes["title"], "title", max_length=200)
    if "description" in changes:
        study.description = _text(changes["description"], "description", max_length=20000, required=False)
    for name in ("attribute_threshold", "metric_threshold"):
        if name in changes:
            value = _threshold(changes[name], name)
            if value != getattr(study, name):
                _require_phase(study, (Phase.DRAFT, Phase.VOTING), "Changing a vote threshold")
                setattr(study, name, value)
    study.save(update_fields=[*changes, "updated_at"])
    return study


@transaction.atomic
def study_delete(*, study):
    study.delete()


# --- experts -------------------------------------------------------------------


@transaction.atomic
def expert_add(*, study, user):
    study = _locked(study)
    _require_phase(study, (Phase.DRAFT,), "Adding an expert")
    membership, created = Membership.objects.get_or_create(study=study, user=user, role=Membership.Role.EXPERT)
    if not created:
        raise InvalidInput({"username": f"{user.get_username()} is already an expert of this study"})
    return membership


@transaction.atomic
def expert_remove(*, study, user):
    study = _locked(study)
    _require_phase(study, (Phase.DRAFT,), "Removing an expert")
    deleted, _ = Membership.objects.filter(study=study, user=user, role=Membership.Role.EXPERT).delete()
    if not deleted:
        raise InvalidInput({"username": f"{user.get_username()} is not an expert of this study"})


# --- setup: attributes, metrics ------------------------------------------------


def _unique_name(model, study, name, field="name", exclude_pk=None):
    clash = model.objects.filter(study=study, name=name)
    if exclude_pk is not None:
        clash = clash.exclude(pk=exclude_pk)
    if clash.exists():
        raise InvalidInput({field: f"{model._meta.verbose_name} {name!r} already exists in this study"})


def _kind(value):
    if value not in QualityAttribute.Kind.values:
        raise InvalidInput({"kind": f"must be 'main' or 'complementary', got {value!r}"})
    return value


@transaction.atomic
def attribute_add(*, study, name, kind=QualityAttribute.Kind.MAIN, description=""):
    study = _locked(study)
    _require_phase(study, (Phase.DRAFT,), "Adding an attribute")
    name = _text(name, "name", max_length=100)
    _unique_name(QualityAttribute, study, name)
    return QualityAttribute.objects.create(
        study=study,
        name=name,
        kind=_kind(kind),
        description=_text(description, "description", max_length=5000, required=False),
        position=_next_position(study.attributes),
    )


@transaction.atomic
def attribute_update(*, attribute, **changes):
    study = _locked(attribute.study)
    _require_phase(study, (Phase.DRAFT,), "Changing an attribute")
    unknown = set(changes) - {"name", "kind", "description"}
    if unknown:
        raise InvalidInput({name: "cannot be changed here" for name in sorted(unknown)})
    if "name" in changes:
        attribute.name = _text(changes["name"], "name", max_length=100)
        _unique_name(QualityAttribute, study, attribute.name, exclude_pk=attribute.pk)
    if "kind" in changes:
        attribute.kind = _kind(changes["kind"])
    if "description" in changes:
        attribute.description = _text(changes["description"], "description", max_length=5000, required=False)
    attribute.save(update_fields=list(changes))
    return attribute


@transaction.atomic
def attribute_remove(*, attribute):
    study = _locked(attribute.study)
    _require_phase(study, (Phase.DRAFT,), "Removing an attribute")
    attribute.delete()


def _better(value):
    if value not in Direction.values:
        raise InvalidInput({"better": f"must be 'higher' or 'lower', got {value!r}"})
    return value


@transaction.atomic
def metric_add(*, study, attribute, name, better=Direction.HIGHER, unit="", default_range=None):
    study = _locked(study)
    _require_phase(study, (Phase.DRAFT,), "Adding a metric")
    if attribute.study_id != study.pk:
        raise InvalidInput({"attribute": "belongs to another study"})
    name = _text(name, "name", max_length=100)
    _unique_name(Metric, study, name)
    better = _better(better)
    least, desired = _range_pair(default_range, "default_range", better) if default_range is not None else (None, None)
    return Metric.objects.create(
        study=study,
        attribute=attribute,
        name=name,
        better=better,
        unit=_text(unit, "unit", max_length=50, required=False),
        default_least_acceptable=least,
        default_desired=desired,
        position=_next_position(attribute.metrics),
    )


@transaction.atomic
def metric_update(*, metric, **changes):
    """Change a metric. Its default range may change until assessment starts
    (experts fall back on it); everything else only in draft."""
    study = _locked(metric.study)
    unknown = set(changes) - {"name", "attribute", "better", "unit", "default_range"}
    if unknown:
        raise InvalidInput({name: "cannot be changed here" for name in sorted(unknown)})
    structural = set(changes) - {"default_range"}
    _require_phase(study, (Phase.DRAFT,) if structural else (Phase.DRAFT, Phase.VOTING), "Changing a metric")
    if "name" in changes:
        metric.name = _text(changes["name"], "name", max_length=100)
        _unique_name(Metric, study, metric.name, exclude_pk=metric.pk)
    if "attribute" in changes:
        if changes["attribute"].study_id != study.pk:
            raise InvalidInput({"attribute": "belongs to another study"})
        metric.attribute = changes["attribute"]
    if "better" in changes:
        metric.better = _better(changes["better"])
    if "unit" in changes:
        metric.unit = _text(changes["unit"], "unit", max_length=50, required=False)
    update_fields = [name for name in changes if name != "default_range"]
    if "default_range" in changes or "better" in changes:
        current = changes.get("default_range", metric.default_range)
        least, desired = _range_pair(current, "default_range", metric.better) if current is not None else (None, None)
        metric.default_least_acceptable, metric.default_desired = least, desired
        update_fields += ["default_least_acceptable", "default_desired"]
    metric.save(update_fields=sorted(set(update_fields)))
    return metric


@transaction.atomic
def metric_remove(*, metric):
    study = _locked(metric.study)
    _require_phase(study, (Phase.DRAFT,), "Removing a metric")
    metric.delete()


# --- candidates and measurements (the designer's, any phase) -------------------


@transaction.atomic
def candidate_add(*, study, name, description=""):
    # Candidates change in any phase: the lock only orders them with a
    # launch's snapshot, so a run sees a candidate with all its values or not at all.
    study = _locked(study)
    name = _text(name, "name", max_length=100)
    _unique_name(Candidate, study, name)
    return Candidate.objects.create(
        study=study,
        name=name,
        description=_text(description, "description", max_length=5000, required=False),
        position=_next_position(study.candidates),
    )


@transaction.atomic
def candidate_update(*, candidate, **changes):
    _locked(candidate.study)
    unknown = set(changes) - {"name", "description"}
    if unknown:
        raise InvalidInput({name: "cannot be changed here" for name in sorted(unknown)})
    if "name" in changes:
        candidate.name = _text(changes["name"], "name", max_length=100)
        _unique_name(Candidate, candidate.study, candidate.name, exclude_pk=candidate.pk)
    if "description" in changes:
        candidate.description = _text(changes["description"], "description", max_length=5000, required=False)
    candidate.save(update_fields=list(changes))
    return candidate


@transaction.atomic
def candidate_remove(*, candidate):
    _locked(candidate.study)
    candidate.delete()


@transaction.atomic
def measurements_set(*, study, measurements):
    """Bulk upsert of ``[{"candidate": name, "metric": name, "value": x}]``.

    Every entry is checked before anything is written.
    """
    if not isinstance(measurements, (list, tuple)):
        raise InvalidInput({"measurements": "must be a list of {candidate, metric, value}"})
    study = _locked(study)
    candidates = {c.name: c for c in Candidate.objects.filter(study=study)}
    metrics = {m.name: m for m in Metric.objects.filter(study=study)}
    rows, seen, errors = {}, set(), {}
    for index, entry in enumerate(measurements):
        field = f"measurements[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"candidate", "metric", "value"}:
            errors[field] = ["must be an object with exactly candidate, metric and value"]
            continue
        # Names are text; anything else (even unhashable) is simply unknown.
        candidate = candidates.get(entry["candidate"]) if isinstance(entry["candidate"], str) else None
        metric = metrics.get(entry["metric"]) if isinstance(entry["metric"], str) else None
        if candidate is None:
            errors[f"{field}.candidate"] = [f"no candidate named {entry['candidate']!r} in this study"]
        if metric is None:
            errors[f"{field}.metric"] = [f"no metric named {entry['metric']!r} in this study"]
        try:
            value = _number(entry["value"], f"{field}.value")
        except InvalidInput as error:
            errors.update(error.errors)
            continue
        if candidate is None or metric is None:
            continue
        if (candidate.pk, metric.pk) in seen:
            errors[field] = [f"{candidate.name} / {metric.name} is given twice"]
        seen.add((candidate.pk, metric.pk))
        rows[(candidate.pk, metric.pk)] = value
    if errors:
        raise InvalidInput(errors)
    existing = {
        (m.candidate_id, m.metric_id): m
        for m in Measurement.objects.filter(candidate__study=study, candidate_id__in={c for c, _ in rows})
    }
    to_update = []
    for key, value in rows.items():
        if key in existing:
            existing[key].value = value
            to_update.append(existing[key])
    Measurement.objects.bulk_update(to_update, ["value"])
    Measurement.objects.bulk_create(
        [Measurement(candidate_id=c, metric_id=m, value=v) for (c, m), v in rows.items() if (c, m) not in existing]
    )


def measurement_set(*, candidate, metric, value):
    measurements_set(study=candidate.study, measurements=[{"candidate": candidate.name, "metric": metric.name, "value": value}])


# --- votes (phase "voting") ----------------------------------------------------


def _names(value, field):
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise InvalidInput({field: "must be a list of names"})
    duplicates = sorted({item for item in value if value.count(item) > 1})
    if duplicates:
        raise InvalidInput({field: f"names given twice: {', '.join(duplicates)}"})
    return list(value)


@transaction.atomic
def votes_set(*, expert, attributes=(), metrics=()):
    """Replace the expert's votes: the complementary attributes and the
    metrics they vote for (METHOD.md section 2)."""
    study = _locked(expert.study)
    _require_phase(study, (Phase.VOTING,), "Voting")
    attribute_names = _names(attributes, "attributes")
    metric_names = _names(metrics, "metrics")
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


def prioritise_items(*, method, items, weights, judgments):
    """Validate one prioritisation over named ``items`` and compute it; writes
    nothing (the API recomputes a stored prioritisation's result with it).

    Returns ``(result, given, judgment_rows)`` where ``given`` maps item name
    to the typed direct weight and ``judgment_rows`` lists (row, column, value)
    with names.
    """
    _method(method)
    index = {name: position for position, name in enumerate(items)}
    if method == Method.DIRECT:
        if judgments not in (None, [], ()):
            raise InvalidInput({"judgments": "direct weights take no judgments"})
        if not isinstance(weights, dict):
            raise InvalidInput({"weights": "must map each item to a positive number"})
        errors = {}
        for name in weights:
            if name not in index:
                errors[f"weights.{name}"] = [f"not one of the items to prioritise ({', '.join(items)})"]
        missing = [name for name in items if name not in weights]
        if missing:
            errors["weights"] = [f"missing weights for {', '.join(missing)}"]
        given = {}
        for name in items:
            if name in weights:
                try:
                    value = _number(weights[name], f"weights.{name}")
                except InvalidInput as error:
                    errors.update(error.errors)
                    continue
                if value <= 0:
                    errors[f"weights.{name}"] = [f"must be positive, got {value:g}"]
                given[name] = value
        if errors:
            raise InvalidInput(errors)
        if len(items) > 1:
            # Every normalised weight must lie strictly inside (0, 1) (METHOD.md 3).
            largest = max(given.values())
            total = math.fsum(value / largest for value in given.values())
            for name, value in given.items():
                share = value / largest / total
                if not SMALLEST_SHARE <= share < 1:
                    errors[f"weights.{name}"] = [
                        f"is out of proportion with the others: its share would be {share:.3g}, "
                        "and every share must lie strictly between 0 and 1"
                    ]
            if errors:
                raise InvalidInput(errors)
        result = prioritise("direct", len(items), weights=[given[name] for name in items])
        return result, given, []

    if weights not in (None, {}):
        raise InvalidInput({"weights": f"{method.upper()} takes judgments, not weights"})
    if not isinstance(judgments, (list, tuple)):
        raise InvalidInput({"judgments": "must be a list of [row, column, value]"})
    errors, rows, seen = {}, [], {}
    for position, judgment in enumerate(judgments):
        field = f"judgments[{position}]"
        if not isinstance(judgment, (list, tuple)) or len(judgment) != 3:
            errors[field] = ["must be [row, column, value]"]
            continue
        row, column, value = judgment
        if not isinstance(row, str) or not isinstance(column, str):
            errors[field] = ["must be [row, column, value] with row and column naming items"]
            continue
        if row not in index:
            errors.setdefault(field, []).append(f"{row!r} is not one of the items to prioritise ({', '.join(items)})")
        if column not in index:
            errors.setdefault(field, []).append(f"{column!r} is not one of the items to prioritise ({', '.join(items)})")
        if row == column:
            errors.setdefault(field, []).append(f"compares {row!r} with itself")
        try:
            value = _number(value, field)
        except InvalidInput as error:
            errors.update(error.errors)
            continue
        if not PAIRWISE_MIN * (1 - SCALE_SLACK) <= value <= PAIRWISE_MAX:
            errors.setdefault(field, []).append(f"value {value:g} is outside the scale 1/9..9")
        if field in errors:
            continue
        pair = frozenset((row, column))
        if pair in seen:
            errors[field] = [f"{row} / {column} is already judged in judgments[{seen[pair]}]"]
            continue
        seen[pair] = position
        rows.append((row, column, value))
    if not errors:
        missing = [
            f"{a} / {b}"
            for i, a in enumerate(items)
            for b in items[i + 1 :]
            if frozenset((a, b)) not in seen
        ]
        if missing:
            errors["judgments"] = [f"missing comparisons: {', '.join(missing)}"]
    if errors:
        raise InvalidInput(errors)
    result = prioritise(
        method,
        len(items),
        judgments=[(index[r], index[c], min(max(v, PAIRWISE_MIN), PAIRWISE_MAX)) for r, c, v in rows],
    )
    return result, {}, rows


def _method(method):
    if method not in Method.values:
        raise InvalidInput({"method": f"must be 'direct', 'ahp' or 'lpr', got {method!r}"})
    return method


def _store_prioritisation(prioritisation, *, items, item_field, weights, judgments):
    """Compute a prioritisation over ``items`` (attributes or metrics) and
    store it on the new ``prioritisation`` row with its judgments and
    weights. The engine's result is attached as ``.result``."""
    names = [item.name for item in items]
    result, given, judgment_rows = prioritise_items(
        method=prioritisation.method, items=names, weights=weights, judgments=judgments
    )
    by_name = dict(zip(names, items))
    prioritisation.consistency_ratio = result.consistency_ratio
    prioritisation.save(update_fields=["consistency_ratio"])
    judgment_model = prioritisation.judgments.model
    judgment_model.objects.bulk_create(
        [judgment_model(prioritisation=prioritisation, row=by_name[r], column=by_name[c], value=v) for r, c, v in judgment_rows]
    )
    weight_model = prioritisation.weights.model
    weight_model.objects.bulk_create(
        [
            weight_model(prioritisation=prioritisation, given=given.get(item.name), weight=float(w), **{item_field: item})
            for item, w in zip(items, result.weights)
        ]
    )
    prioritisation.result = result
    return prioritisation


@transaction.atomic
def prioritisation_set(*, expert, method, weights=None, judgments=None):
    """Set the expert's prioritisation of the selected attributes (row w_i of W).

    ``weights`` (direct): ``{attribute: positive number}``, normalised.
    ``judgments`` (ahp, lpr): ``[[row, column, value], ...]`` over every pair.
    Returns the saved ``AttributePrioritisation``; the engine's result (with
    the consistency ratio and the most inconsistent judgments) is attached as
    ``.result``.
    """
    study = _locked(expert.study)
    _require_phase(study, (Phase.ASSESSMENT,), "Prioritising")
    attributes = list(selected_attributes(study))
    _method(method)
    AttributePrioritisation.objects.filter(expert=expert).delete()
    return _store_prioritisation(
        AttributePrioritisation.objects.create(expert=expert, method=method),
        items=attributes, item_field="attribute", weights=weights, judgments=judgments,
    )


@transaction.atomic
def metric_prioritisation_set(*, expert, attribute, method, weights=None, judgments=None):
    """Set the expert's local prioritisation of one attribute's selected
    metrics (METHOD.md section 3, several metrics per attribute)."""
    study = _locked(expert.study)
    _require_phase(study, (Phase.ASSESSMENT,), "Prioritising")
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
def priorities_set(*, expert, method, weights=None, judgments=None, metric_priorities=None):
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
    prioritisation.local_results = {}
    for name, local in metric_priorities.items():
        field = f"metric_priorities.{name}"
        if not isinstance(local, dict) or "method" not in local or set(local) - {"method", "weights", "judgments"}:
            raise InvalidInput({field: "must be {method, weights | judgments}"})
        try:
            saved = metric_prioritisation_set(
                expert=expert,
                attribute=attributes[name],
                method=local["method"],
                weights=local.get("weights"),
                judgments=local.get("judgments"),
            )
        except InvalidInput as error:
            raise error.within(field) from None
        prioritisation.local_results[name] = saved.result
    return prioritisation


@transaction.atomic
def metric_prioritisation_clear(*, expert, attribute):
    """Back to an equal split of the attribute's weight over its metrics."""
    study = _locked(expert.study)
    _require_phase(study, (Phase.ASSESSMENT,), "Prioritising")
    MetricPrioritisation.objects.filter(expert=expert, attribute=attribute).delete()


# --- acceptable ranges and peer weights (phase "assessment") -------------------


@transaction.atomic
def ranges_set(*, expert, ranges):
    """Replace the expert's ranges: ``{metric: [least_acceptable, desired]}``
    over selected metrics. A metric left out falls back to its default range."""
    study = _locked(expert.study)
    _require_phase(study, (Phase.ASSESSMENT,), "Setting acceptable ranges")
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
            pairs[metric] = _range_pair(value, f"ranges.{name}", metric.better)
        except InvalidInput as error:
            errors.update(error.errors)
    if errors:
        raise InvalidInput(errors)
    AcceptableRange.objects.filter(expert=expert).delete()
    AcceptableRange.objects.bulk_create(
        [AcceptableRange(expert=expert, metric=m, least_acceptable=lo, desired=hi) for m, (lo, hi) in pairs.items()]
    )


@transaction.atomic
def peer_weights_set(*, expert, weights):
    """Set the expert's row of V: ``{username: weight}`` over every expert,
    self included, each in (0, 1), summing to 1 (METHOD.md section 5)."""
    study = _locked(expert.study)
    _require_phase(study, (Phase.ASSESSMENT,), "Weighting experts")
    if not isinstance(weights, dict):
        raise InvalidInput({"weights": "must map every expert's username to a weight"})
    experts = {m.user.get_username(): m for m in Membership.objects.filter(study=study, role="expert").select_related("user")}
    errors, values = {}, {}
    for username, value in weights.items():
        field = f"weights.{username}"
        if username not in experts:
            errors[field] = ["not an expert of this study"]
            continue
        try:
            value = _number(value, field)
        except InvalidInput as error:
            errors.update(error.errors)
            continue
        if value <= 0:
            errors[field] = [f"must be positive (no expert may silence another), got {value:g}"]
        elif value > 1 or (value == 1 and len(experts) > 1):
            errors[field] = [f"must be below 1, got {value:g}"]
        values[username] = value
    missing = [name for name in experts if name not in weights]
    if missing:
        errors.setdefault("weights", []).append(f"missing weights for {', '.join(missing)}: the row must rate every expert")
    if not errors:
        total = sum(values.values())
        if abs(total - 1) > SUM_TOLERANCE:
            errors["weights"] = [f"row sums to {total:.6g}, must be 1"]
    if errors:
        raise InvalidInput(errors)
    # Stored as given (so a bundle round-trips exactly); the engine
    # renormalises each row when it snapshots the study.
    PeerWeight.objects.filter(rater=expert).delete()
    PeerWeight.objects.bulk_create(
        [PeerWeight(rater=expert, ratee=experts[name], weight=value) for name, value in values.items()]
    )


# --- phase transitions ---------------------------------------------------------


@transaction.atomic
def study_open_voting(*, study):
    study = _locked(study)
    _require_phase(study, (Phase.DRAFT,), "Opening the vote")
    problems = []
    if not Membership.objects.filter(study=study, role="expert").exists():
        problems.append("invite at least one expert")
    attributes = QualityAttribute.objects.filter(study=study).annotate(metric_count=Count("metrics"))
    if not attributes:
        problems.append("add at least one quality attribute")
    bare = [a.name for a in attributes if a.metric_count == 0]
    if bare:
        problems.append(f"give every attribute at least one metric (none yet: {', '.join(bare)})")
    if problems:
        raise PhaseConflict("Voting cannot open yet: " + "; ".join(problems) + ".")
    study.phase = Phase.VOTING
    study.save(update_fields=["phase", "updated_at"])
    return study


def selection_from_votes(study):
    """The selection the votes give now: ``(attribute ids, metric ids)``.

    An attribute is selected when it is main or has **at least** ``c`` votes
    (METHOD.md section 2, Decision); a metric when its attribute is selected
    and it has at least the metric threshold of votes.
    """
    attributes = QualityAttribute.objects.filter(study=study).annotate(vote_count=Count("votes"))
    selected_attributes = {
        a.pk for a in attributes if a.kind == QualityAttribute.Kind.MAIN or a.vote_count >= study.attribute_threshold
    }
    metrics = Metric.objects.filter(study=study).annotate(vote_count=Count("votes"))
    selected_metrics = {
        m.pk for m in metrics if m.attribute_id in selected_attributes and m.vote_count >= study.metric_threshold
    }
    return selected_attributes, selected_metrics


@transaction.atomic
def study_close_voting(*, study):
    """Fix the selection and move to assessment; refused while a selected
    attribute would have no selected metric."""
    study = _locked(study)
    _require_phase(study, (Phase.VOTING,), "Closing the vote")
    unconfirmed = invitations.unconfirmed_votes(study=study)
    if unconfirmed:
        raise PhaseConflict(f"Voting cannot close: {'; '.join(unconfirmed)} (their votes count once confirmed).")
    attribute_ids, metric_ids = selection_from_votes(study)
    if not attribute_ids:
        raise PhaseConflict(
            f"Voting cannot close: no attribute is selected (no main attribute, and none has {study.attribute_threshold} votes)."
        )
    metric_attributes = set(Metric.objects.filter(pk__in=metric_ids).values_list("attribute_id", flat=True))
    orphans = QualityAttribute.objects.filter(pk__in=attribute_ids - metric_attributes).order_by("position", "id")
    if orphans:
        names = ", ".join(repr(a.name) for a in orphans)
        raise PhaseConflict(
            f"Voting cannot close: the selected attribute(s) {names} would have no selected metric "
            f"(none reaches the metric threshold of {study.metric_threshold} votes). "
            "Lower the metric threshold or ask the experts to vote on these metrics."
        )
    QualityAttribute.objects.filter(study=study).update(is_selected=False)
    QualityAttribute.objects.filter(pk__in=attribute_ids).update(is_selected=True)
    Metric.objects.filter(study=study).update(is_selected=False)
    Metric.objects.filter(pk__in=metric_ids).update(is_selected=True)
    study.phase = Phase.ASSESSMENT
    study.save(update_fields=["phase", "updated_at"])
    return study


def missing_inputs(study):
    """What each expert still has to give before assessment can close:
    ``{username: [what is missing, ...]}``, only experts with gaps."""
    experts = list(Membership.objects.filter(study=study, role="expert").select_related("user").order_by("id"))
    pending = invitations.inputs_pending(study=study)
    metrics = list(selected_metrics(study))
    without_default = [m for m in metrics if m.default_least_acceptable is None]
    prioritised = set(AttributePrioritisation.objects.filter(expert__study=study).values_list("expert_id", flat=True))
    ranged = set(AcceptableRange.objects.filter(expert__study=study).values_list("expert_id", "metric_id"))
    rated = {}
    for rater_id, ratee_id in PeerWeight.objects.filter(rater__study=study).values_list("rater_id", "ratee_id"):
        rated.setdefault(rater_id, set()).add(ratee_id)
    expert_ids = {e.pk for e in experts}
    gaps = {}
    for expert in experts:
        if expert.pk in pending:  # imported inputs count once confirmed
            gaps[expert.user.get_username()] = [pending[expert.pk]]
            continue
        missing = []
        if expert.pk not in prioritised:
            missing.append("prioritisation of the attributes")
        unranged = [m.name for m in without_default if (expert.pk, m.pk) not in ranged]
        if unranged:
            missing.append(f"acceptable range for {', '.join(unranged)}")
        if rated.get(expert.pk, set()) != expert_ids:
            missing.append("weights for fellow experts")
        if missing:
            gaps[expert.user.get_username()] = missing
    return gaps


@transaction.atomic
def study_close_assessment(*, study):
    study = _locked(study)
    _require_phase(study, (Phase.ASSESSMENT,), "Closing the assessment")
    gaps = missing_inputs(study)
    if gaps:
        detail = "; ".join(f"{name}: {', '.join(items)}" for name, items in gaps.items())
        raise PhaseConflict(f"Assessment cannot close, inputs are missing: {detail}.")
    study.phase = Phase.CLOSED
    study.save(update_fields=["phase", "updated_at"])
    return study


@transaction.atomic
def study_reopen_assessment(*, study):
    study = _locked(study)
    _require_phase(study, (Phase.CLOSED,), "Reopening the assessment")
    study.phase = Phase.ASSESSMENT
    study.save(update_fields=["phase", "updated_at"])
    return study


TRANSITIONS = {
    (Phase.DRAFT, Phase.VOTING): study_open_voting,
    (Phase.VOTING, Phase.ASSESSMENT): study_close_voting,
    (Phase.ASSESSMENT, Phase.CLOSED): study_close_assessment,
    (Phase.CLOSED, Phase.ASSESSMENT): study_reopen_assessment,
}


def study_transition(*, study, to):
    """Move the study to phase ``to`` by the one transition that leads there."""
    if to not in Phase.values:
        raise InvalidInput({"to": f"must be one of {', '.join(Phase.values)}, got {to!r}"})
    transition = TRANSITIONS.get((study.phase, to))
    if transition is None:
        raise PhaseConflict(f"A study in the {study.phase} phase cannot move to {to}.")
    return transition(study=study)


# --- accounts --------------------------------------------------------------------


def user_get_or_create(*, username, field="username"):
    """The account for ``username``; a new one has no usable password (an
    invitation or an administrator gives it one)."""
    username = invitations.username_clean(username=username, field=field)
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User(username=username)
        user.set_unusable_password()
        user.save()
    return user


def api_token_create(*, user, name=""):
    """A new token for ``user``: returns ``(token, key)``; the key is not
    stored and cannot be shown again."""
    key = secrets.token_hex(20)
    token = ApiToken.objects.create(
        user=user,
        name=_text(name, "name", max_length=100, required=False),
        digest=hashlib.sha256(key.encode()).hexdigest(),
        prefix=key[:8],
    )
    return token, key


def api_token_revoke(*, token):
    token.delete()
