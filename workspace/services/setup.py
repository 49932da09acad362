"""The designer's setup: the study, its experts, attributes, metrics,
candidates and measurements."""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from engine.rules import AHP_WEIGHTING_DEFAULT, AHP_WEIGHTINGS

from .. import history
from ..errors import InvalidInput, PhaseConflict
from ..extensions import candidate_removal_refusals
from ..limits import (
    ATTRIBUTE_THRESHOLD_DEFAULT,
    ITEM_DESCRIPTION_MAX_LENGTH,
    METRIC_THRESHOLD_DEFAULT,
    NAME_MAX_LENGTH,
    QUORUM_MAX,
    STUDY_DESCRIPTION_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    UNIT_MAX_LENGTH,
)
from ..models import (
    Candidate,
    Direction,
    Measurement,
    Membership,
    Metric,
    Phase,
    QualityAttribute,
    Study,
    StudyDeletion,
)
from ._checks import (
    apply_changes,
    locked,
    next_position,
    number,
    range_pair,
    refuse_unknown,
    text,
    threshold,
    unique_name,
)
from .phases import Action, require_phase

# --- the study -----------------------------------------------------------------


@transaction.atomic
def study_create(
    *,
    designer: User,
    title: str,
    description: str = "",
    attribute_threshold: int = ATTRIBUTE_THRESHOLD_DEFAULT,
    metric_threshold: int = METRIC_THRESHOLD_DEFAULT,
    ahp_weighting: str = AHP_WEIGHTING_DEFAULT,
    quorum: int = 0,
) -> Study:
    if not isinstance(ahp_weighting, str) or ahp_weighting not in AHP_WEIGHTINGS:
        raise InvalidInput({"ahp_weighting": f"must be one of {', '.join(AHP_WEIGHTINGS)}, got {ahp_weighting!r}"})
    study = Study.objects.create(
        title=text(title, "title", max_length=TITLE_MAX_LENGTH),
        description=text(
            description, "description", max_length=STUDY_DESCRIPTION_MAX_LENGTH, required=False, multiline=True
        ),
        attribute_threshold=threshold(attribute_threshold, "attribute_threshold"),
        metric_threshold=threshold(metric_threshold, "metric_threshold"),
        ahp_weighting=ahp_weighting,
        quorum=_quorum(quorum),
        designer=designer,
    )
    Membership.objects.create(study=study, user=designer, role=Membership.Role.DESIGNER)
    return study


def _quorum(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= QUORUM_MAX:
        raise InvalidInput({"quorum": f"must be a whole number from 0 to {QUORUM_MAX}, got {value!r}"})
    return value


@transaction.atomic
def study_update(*, study: Study, **changes: Any) -> Study:
    """Change title, description (any phase), thresholds (until voting
    closes), the AHP weighting (while the design may change: the phase
    table's ``CHANGE_ATTRIBUTE``, before any expert has judged) or the
    quorum (until the study closes: the experts who must take part)."""
    study = locked(study)

    def vote_threshold(name: str) -> Callable[[Any], int]:
        def clean(value: Any) -> int:
            value = threshold(value, name)
            if value != getattr(study, name):
                require_phase(study, Action.CHANGE_THRESHOLD)
            return value

        return clean

    def weighting(value: Any) -> str:
        if not isinstance(value, str) or value not in AHP_WEIGHTINGS:
            raise InvalidInput({"ahp_weighting": f"must be one of {', '.join(AHP_WEIGHTINGS)}, got {value!r}"})
        if value != study.ahp_weighting:
            require_phase(study, Action.CHANGE_ATTRIBUTE, "Changing the AHP weighting")
        return value

    def quorum(value: Any) -> int:
        value = _quorum(value)
        if value != study.quorum and study.phase == Phase.CLOSED:
            raise PhaseConflict("The study is closed: reopen the assessment to change its quorum.")
        return value

    fields = apply_changes(
        study,
        changes,
        {
            "title": lambda value: text(value, "title", max_length=TITLE_MAX_LENGTH),
            "description": lambda value: text(
                value, "description", max_length=STUDY_DESCRIPTION_MAX_LENGTH, required=False, multiline=True
            ),
            "attribute_threshold": vote_threshold("attribute_threshold"),
            "metric_threshold": vote_threshold("metric_threshold"),
            "ahp_weighting": weighting,
            "quorum": quorum,
        },
    )
    study.save(update_fields=[*fields, "updated_at"])
    return study


@transaction.atomic
def study_delete(*, study: Study) -> None:
    """Delete the study, recording who, when, from where and its bundle at
    that moment (``StudyDeletion``, kept ``APPROVE_DELETED_STUDY_RETENTION_DAYS``
    with the study's history). The study's own deletion is a history record;
    the rows deleted with it are not one each (the bundle holds them)."""
    from ..bundles import study_export_bundle  # the bundle module imports the services

    study = locked(study)
    StudyDeletion.objects.create(
        study_id=study.pk,
        title=study.title,
        designer_id=study.designer_id,
        deleted_by=history.current_user(),
        source=history.current_source(),
        bundle=study_export_bundle(study=study),
    )
    history.delete(Study.objects.filter(pk=study.pk), cascade_recorded=False)


def study_deletions_purge(*, now: datetime | None = None) -> int:
    """Remove the deleted studies' records and history older than
    ``APPROVE_DELETED_STUDY_RETENTION_DAYS`` (the sweep calls it). Returns
    the deleted studies purged."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.APPROVE_DELETED_STUDY_RETENTION_DAYS)
    with transaction.atomic():
        expired = list(StudyDeletion.objects.filter(deleted_at__lt=cutoff).values_list("study_id", flat=True))
        if not expired:
            return 0
        for model in history.KINDS.values():
            model.history.filter(history_study_id__in=expired).delete()  # type: ignore[attr-defined]  # django-simple-history adds the history manager at run time
        StudyDeletion.objects.filter(study_id__in=expired).delete()
    return len(expired)


# --- experts -------------------------------------------------------------------


def _already_expert(user: User) -> InvalidInput:
    return InvalidInput({"username": f"{user.get_username()} is already an expert of this study"})


@transaction.atomic
def expert_add(*, study: Study, user: User) -> Membership:
    study = locked(study)
    require_phase(study, Action.ADD_EXPERT)
    membership, created = Membership.objects.get_or_create(study=study, user=user, role=Membership.Role.EXPERT)
    if not created:
        raise _already_expert(user)
    return membership


@transaction.atomic
def experts_add(*, study: Study, users: list[User]) -> list[Membership]:
    """``expert_add`` for several users, in this order, in a number of
    queries that does not grow with them (the bundle importer): the first
    user already an expert (or listed twice) is refused as ``expert_add``
    refuses it, and nothing is written."""
    study = locked(study)
    require_phase(study, Action.ADD_EXPERT)
    taken = set(
        Membership.objects.filter(study=study, role=Membership.Role.EXPERT, user__in=users).values_list(
            "user_id", flat=True
        )
    )
    for user in users:
        if user.pk in taken:
            raise _already_expert(user)
        taken.add(user.pk)
    return history.bulk_create(
        Membership, [Membership(study=study, user=user, role=Membership.Role.EXPERT) for user in users]
    )


@transaction.atomic
def expert_remove(*, study: Study, user: User) -> None:
    study = locked(study)
    require_phase(study, Action.REMOVE_EXPERT)
    deleted = history.delete(Membership.objects.filter(study=study, user=user, role=Membership.Role.EXPERT))
    if not deleted:
        raise InvalidInput({"username": f"{user.get_username()} is not an expert of this study"})


# --- attributes and metrics (draft) ---------------------------------------------


def _kind(value: Any) -> str:
    if value not in QualityAttribute.Kind.values:
        raise InvalidInput({"kind": f"must be 'main' or 'complementary', got {value!r}"})
    return value


def _better(value: Any) -> str:
    if value not in Direction.values:
        raise InvalidInput({"better": f"must be 'higher' or 'lower', got {value!r}"})
    return value


def _item_name(
    model: type[QualityAttribute | Metric | Candidate], study: Study, exclude_pk: int | None = None
) -> Callable[[Any], str]:
    """The cleaner of an item's name: text, unique in the study."""

    def clean(value: Any) -> str:
        return unique_name(model, study, text(value, "name", max_length=NAME_MAX_LENGTH), exclude_pk=exclude_pk)

    return clean


def _description(value: Any) -> str:
    return text(value, "description", max_length=ITEM_DESCRIPTION_MAX_LENGTH, required=False, multiline=True)


@transaction.atomic
def attribute_add(
    *, study: Study, name: str, kind: str = QualityAttribute.Kind.MAIN, description: str = ""
) -> QualityAttribute:
    study = locked(study)
    require_phase(study, Action.ADD_ATTRIBUTE)
    return QualityAttribute.objects.create(
        study=study,
        name=_item_name(QualityAttribute, study)(name),
        kind=_kind(kind),
        description=_description(description),
        position=next_position(study.attributes),
    )


@transaction.atomic
def attribute_update(*, attribute: QualityAttribute, **changes: Any) -> QualityAttribute:
    study = locked(attribute.study)
    require_phase(study, Action.CHANGE_ATTRIBUTE)
    fields = apply_changes(
        attribute,
        changes,
        {"name": _item_name(QualityAttribute, study, attribute.pk), "kind": _kind, "description": _description},
    )
    attribute.save(update_fields=fields)
    return attribute


@transaction.atomic
def attribute_remove(*, attribute: QualityAttribute) -> None:
    study = locked(attribute.study)
    require_phase(study, Action.REMOVE_ATTRIBUTE)
    history.delete(QualityAttribute.objects.filter(pk=attribute.pk))


def _attribute_of(study: Study) -> Callable[[QualityAttribute], QualityAttribute]:
    def clean(attribute: QualityAttribute) -> QualityAttribute:
        if attribute.study_id != study.pk:
            raise InvalidInput({"attribute": "belongs to another study"})
        return attribute

    return clean


def _unit(value: Any) -> str:
    return text(value, "unit", max_length=UNIT_MAX_LENGTH, required=False)


@transaction.atomic
def metric_add(
    *,
    study: Study,
    attribute: QualityAttribute,
    name: str,
    better: str = Direction.HIGHER,
    unit: str = "",
    default_range: list[float] | None = None,
) -> Metric:
    study = locked(study)
    require_phase(study, Action.ADD_METRIC)
    attribute = _attribute_of(study)(attribute)
    name = _item_name(Metric, study)(name)
    better = _better(better)
    least, desired = range_pair(default_range, "default_range", better) if default_range is not None else (None, None)
    return Metric.objects.create(
        study=study,
        attribute=attribute,
        name=name,
        better=better,
        unit=_unit(unit),
        default_least_acceptable=least,
        default_desired=desired,
        position=next_position(attribute.metrics),
    )


_FOLLOWED = {"better": "direction", "unit": "unit"}


def _refuse_elicited_changes(metric: Metric, changes: dict[str, Any], cleaners: dict[str, Any]) -> None:
    """An elicited metric's direction and unit follow its kind (set by
    evaluation.services): changing either is refused, naming the field."""
    follows = [
        key for key in ("better", "unit") if key in changes and cleaners[key](changes[key]) != getattr(metric, key)
    ]
    if follows and Metric.objects.filter(pk=metric.pk, elicitation__isnull=False).exists():
        raise InvalidInput(
            {
                key: f"{metric.name} is elicited: its {_FOLLOWED[key]} follows its kind "
                "(weighted accuracy is higher-is-better, expected cost lower-is-better)"
                for key in follows
            }
        )


@transaction.atomic
def metric_update(*, metric: Metric, **changes: Any) -> Metric:
    """Change a metric. Its default range may change until assessment starts
    (experts fall back on it); everything else only in draft."""
    study = locked(metric.study)
    cleaners = {
        "name": _item_name(Metric, study, metric.pk),
        "attribute": _attribute_of(study),
        "better": _better,
        "unit": _unit,
    }
    refuse_unknown(changes, [*cleaners, "default_range"])
    _refuse_elicited_changes(metric, changes, cleaners)
    changes = dict(changes)
    has_range = "default_range" in changes
    default_range = changes.pop("default_range", metric.default_range)
    require_phase(study, Action.CHANGE_METRIC if changes else Action.CHANGE_DEFAULT_RANGE)
    fields = apply_changes(metric, changes, cleaners)
    if has_range or "better" in changes:
        # A new direction is checked against the range it keeps.
        pair = range_pair(default_range, "default_range", metric.better) if default_range is not None else (None, None)
        metric.default_least_acceptable, metric.default_desired = pair
        fields += ["default_least_acceptable", "default_desired"]
    metric.save(update_fields=sorted(set(fields)))
    return metric


@transaction.atomic
def metric_remove(*, metric: Metric) -> None:
    study = locked(metric.study)
    require_phase(study, Action.REMOVE_METRIC)
    history.delete(Metric.objects.filter(pk=metric.pk))


# --- candidates and measurements (the designer's, any phase) ---------------------
# Candidates change in any phase: the study lock only orders them with a
# launch's snapshot, so a run sees a candidate with all its values or not at all.


@transaction.atomic
def candidate_add(*, study: Study, name: str, description: str = "") -> Candidate:
    study = locked(study)
    return Candidate.objects.create(
        study=study,
        name=_item_name(Candidate, study)(name),
        description=_description(description),
        position=next_position(study.candidates),
    )


@transaction.atomic
def candidates_add(*, study: Study, candidates: list[dict]) -> list[Candidate]:
    """Add ``[{"name", "description"}]`` after the study's candidates, in
    this order, with the rules of ``candidate_add``, in a number of queries
    that does not grow with the candidates (the bundle importer adds a
    thousand at once). The first bad entry is refused naming
    ``candidates[i].name`` (or ``.description``); then nothing is written.
    Queries: the lock, the names taken, the last position, one INSERT."""
    study = locked(study)
    taken = set(Candidate.objects.filter(study=study).values_list("name", flat=True))
    position = next_position(study.candidates)
    rows = []
    for index, entry in enumerate(candidates):
        field = f"candidates[{index}]"
        try:
            name = text(entry.get("name"), "name", max_length=NAME_MAX_LENGTH)
            description = _description(entry.get("description", ""))
        except InvalidInput as error:
            raise error.within(field) from None
        if name in taken:
            raise InvalidInput({f"{field}.name": f"candidate {name!r} already exists in this study"})
        taken.add(name)
        rows.append(Candidate(study=study, name=name, description=description, position=position + index))
    return history.bulk_create(Candidate, rows)


@transaction.atomic
def candidate_update(*, candidate: Candidate, **changes: Any) -> Candidate:
    study = locked(candidate.study)
    fields = apply_changes(
        candidate, changes, {"name": _item_name(Candidate, study, candidate.pk), "description": _description}
    )
    candidate.save(update_fields=fields)
    return candidate


@transaction.atomic
def candidate_remove(*, candidate: Candidate) -> None:
    """Remove the candidate, unless something keeps it
    (``workspace.extensions.CANDIDATE_KEEPERS``: evaluation's elicited
    metrics make their questions from their reference candidate's
    predictions): then InvalidInput naming ``candidate`` with why, as the
    pages say it before offering the removal."""
    locked(candidate.study)
    reasons = candidate_removal_refusals(study=candidate.study, candidates=[candidate.pk]).get(candidate.pk)
    if reasons:
        raise InvalidInput({"candidate": "; ".join(reasons)})
    history.delete(Candidate.objects.filter(pk=candidate.pk))


# What an entry of measurements_set may hold besides its three required keys.
MEASUREMENT_OPTIONAL = ("standard_error",)
# An entry without "standard_error": the row's standard error is left as it is.
KEEP = object()


def standard_error(value: Any, field: str) -> float | None:
    """A measurement's standard error: a finite number >= 0, or None (none
    given); InvalidInput naming ``field`` otherwise."""
    if value is None:
        return None
    value = number(value, field)
    if value < 0:
        raise InvalidInput({field: f"must be 0 or more (a standard error), got {value:g}"})
    return value


def _measurement_rows(study: Study, measurements: list | tuple) -> dict[tuple[int, int], tuple[float, Any]]:
    """``{(candidate id, metric id): (value, standard error)}`` from the
    entries, every one checked in one pass; InvalidInput lists every bad
    entry. The standard error is a float, None (remove it) or ``KEEP`` (the
    entry did not give one)."""
    candidates = dict(Candidate.objects.filter(study=study).values_list("name", "pk"))
    metrics = dict(Metric.objects.filter(study=study).values_list("name", "pk"))
    rows: dict[tuple[int, int], tuple[float, Any]] = {}
    errors: dict[str, Any] = {}
    for index, entry in enumerate(measurements):
        field = f"measurements[{index}]"
        if not isinstance(entry, dict) or not {"candidate", "metric", "value"} <= set(entry) <= {
            "candidate",
            "metric",
            "value",
            *MEASUREMENT_OPTIONAL,
        }:
            errors[field] = ["must be an object with candidate, metric and value (and optionally standard_error)"]
            continue
        # Names are text; anything else (even unhashable) is simply unknown.
        candidate_name, metric_name = entry["candidate"], entry["metric"]
        candidate = candidates.get(candidate_name) if isinstance(candidate_name, str) else None
        metric = metrics.get(metric_name) if isinstance(metric_name, str) else None
        if candidate is None:
            errors[f"{field}.candidate"] = [f"no candidate named {candidate_name!r} in this study"]
        if metric is None:
            errors[f"{field}.metric"] = [f"no metric named {metric_name!r} in this study"]
        try:
            value = number(entry["value"], f"{field}.value")
            error = (
                standard_error(entry["standard_error"], f"{field}.standard_error")
                if "standard_error" in entry
                else KEEP
            )
        except InvalidInput as problem:
            errors.update(problem.errors)
            continue
        if candidate is None or metric is None:
            continue
        if (candidate, metric) in rows:
            errors[field] = [f"{candidate_name} / {metric_name} is given twice"]
        rows[(candidate, metric)] = (value, error)
    if errors:
        raise InvalidInput(errors)
    return rows


@transaction.atomic
def measurements_set(*, study: Study, measurements: list[dict[str, Any]]) -> None:
    """Bulk upsert of ``[{"candidate": name, "metric": name, "value": x}]``,
    each entry optionally with ``"standard_error"``: a number >= 0 sets the
    value's standard error, null removes it, and an entry without the key
    leaves it as it is (none for a new measurement).

    Every entry is checked before anything is written. Queries, however many
    entries: the lock, the candidates, the metrics, one upsert (two when some
    entries give a standard error and others do not).
    """
    if not isinstance(measurements, (list, tuple)):
        raise InvalidInput({"measurements": "must be a list of {candidate, metric, value}"})
    study = locked(study)
    rows = _measurement_rows(study, measurements)
    with_error = {key: row for key, row in rows.items() if row[1] is not KEEP}
    before = {
        (c, m): (v, e)
        for c, m, v, e in Measurement.objects.filter(study=study).values_list(
            "candidate_id", "metric_id", "value", "standard_error"
        )
    }
    for group, fields in ((with_error, ["value", "standard_error"]), (rows.keys() - with_error.keys(), ["value"])):
        if not group:
            continue
        saved = Measurement.objects.bulk_create(
            [
                Measurement(
                    study_id=study.pk,
                    candidate_id=c,
                    metric_id=m,
                    value=rows[(c, m)][0],
                    standard_error=None if rows[(c, m)][1] is KEEP else rows[(c, m)][1],
                )
                for c, m in group
            ],
            update_conflicts=True,
            unique_fields=["candidate", "metric"],
            update_fields=fields,
        )
        _measurements_record(saved, before, error_kept=fields == ["value"])


def _measurements_record(
    saved: list[Measurement], before: dict[tuple[int, int], tuple[float, float | None]], *, error_kept: bool
) -> None:
    """One history record per measurement the upsert created or changed (one
    left with the same value and error leaves none). ``error_kept``: the
    upsert left the standard errors as they were."""
    created, changed = [], []
    for row in saved:
        old = before.get((row.candidate_id, row.metric_id))
        if old is None:
            created.append(row)
            continue
        if error_kept:
            row.standard_error = old[1]
        if (row.value, row.standard_error) != old:
            changed.append(row)
    history.record(created, "+", model=Measurement)
    history.record(changed, "~", model=Measurement)
