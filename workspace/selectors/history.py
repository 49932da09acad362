"""A study's history (issue 22): the records ``workspace.history`` writes,
read for the History tab, its exports and the API.

Who sees what: the designer every record of the study; an expert the
records of their own inputs and membership (``history_expert_id``) and the
study's public events (``PUBLIC_KINDS``: its design, phases, measurements,
prediction sets, computations and runs). Never another expert's input.

Queries do not grow with the records: one to count, one for a page's
(kind, id) pairs (a UNION over the kinds' tables), then per kind on the
page one for its records with the previous record's id and one for those
previous records, and one for the experts' names.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, overload

from django.db.models import F, OuterRef, QuerySet, Subquery, Value
from django.db.models.fields import CharField
from django.utils import timezone

from ..errors import InvalidInput
from ..history import KINDS, kind_label
from ..models import Membership, Study
from .history_words import SOURCE_WORDS, Facts, Person, column_of, field_words, person_name, sentence, shown

# What an expert sees of the others' doings: the study's public events.
PUBLIC_KINDS = frozenset(
    {
        "study",
        "attribute",
        "metric",
        "candidate",
        "measurement",
        "prediction_set",
        "computation",
        "measurement_source",
        "elicited_metric",
        "revision_round",
        "run",
    }
)
TYPES = {"+": "created", "~": "changed", "-": "deleted"}
# How many records an export reads at a time.
EXPORT_CHUNK = 500


@dataclass(frozen=True)
class HistoryFilter:
    """Which records: by whom (a username), of which kind, from and until
    which day (inclusive). None: any."""

    person: str | None = None
    kind: str | None = None
    since: dt.date | None = None
    until: dt.date | None = None


@dataclass(frozen=True)
class Change:
    field: str
    old: str | None  # as text
    new: str | None
    # For a foreign key (``attribute_id``): the names of the rows the ids
    # name (an attribute's or candidate's name, an expert's username), when
    # those rows still exist; else None.
    old_name: str | None = None
    new_name: str | None = None
    # The page's words: the column ("Least acceptable") and its values as
    # the pages write them (a choice's label, a row's name, a time).
    label: str = ""
    old_words: str | None = None
    new_words: str | None = None

    def shown(self, value: str | None, name: str | None) -> str | None:
        return value if value is None or name is None else f"{name} (#{value})"

    @property
    def old_shown(self) -> str | None:
        return self.shown(self.old, self.old_name)

    @property
    def new_shown(self) -> str | None:
        return self.shown(self.new, self.new_name)


@dataclass(frozen=True)
class HistoryEntry:
    id: int  # the record's id within its kind's table
    kind: str
    object_id: int
    object_name: str  # the row's name or title when it has one, else ""
    action: str  # created, changed, deleted
    at: dt.datetime
    user: str | None  # who made the change (None: the system or a deleted account)
    source: str  # page, api, admin, import, command, task, system
    expert: str | None  # whose input it is (an expert's username), None for the study's events
    changes: tuple[Change, ...]
    # In words (workspace.selectors.history_words): "Clara Clinician changed
    # their range for AUC from 0.7–0.9 to 0.75–0.9."
    sentence: str = ""
    user_name: str | None = None  # who made it, as the pages name people
    # The values the page lists under the sentence, in words (``changes``
    # without the row's parent ids and stored data).
    details: tuple[Change, ...] = ()

    @property
    def kind_label(self) -> str:
        return kind_label(self.kind)

    @property
    def source_words(self) -> str:
        return SOURCE_WORDS.get(self.source, self.source)


def history_filter_parse(params: Mapping[str, Any]) -> HistoryFilter:
    """``person``, ``kind``, ``since``, ``until`` from a query string; empty
    values are left out. Refused (``InvalidInput`` naming the field) when a
    kind is unknown or a date is not YYYY-MM-DD or since is after until."""
    errors: dict[str, str] = {}

    def one(name: str) -> str | None:
        value = params.get(name)
        value = value.strip() if isinstance(value, str) else value
        return value or None

    kind = one("kind")
    if kind is not None and kind not in KINDS:
        errors["kind"] = f"unknown kind {kind!r}: one of {', '.join(KINDS)}"
    days: dict[str, dt.date | None] = {}
    for name in ("since", "until"):
        value = one(name)
        try:
            days[name] = dt.date.fromisoformat(value) if value is not None else None
        except ValueError:
            errors[name] = f"must be a date YYYY-MM-DD, got {value!r}"
    since, until = days.get("since"), days.get("until")
    if since and until and since > until:
        errors["until"] = "must not be before since"
    if errors:
        raise InvalidInput(errors)
    return HistoryFilter(person=one("person"), kind=kind, since=since, until=until)


def _visible(study: Study, user: Any, kind: str, model: type, filters: HistoryFilter) -> QuerySet | None:
    """One kind's records of the study that the user may see, filtered; None
    when the user may see none of them."""
    records = model.history.filter(history_study_id=study.pk)  # type: ignore[attr-defined]  # django-simple-history adds the history manager at run time
    if study.designer_id != user.pk and kind not in PUBLIC_KINDS:
        own = Membership.objects.filter(study=study, user=user, role=Membership.Role.EXPERT).values("pk")
        records = records.filter(history_expert_id__in=Subquery(own))
    if filters.person is not None:
        records = records.filter(history_user__username=filters.person)
    tz = timezone.get_current_timezone()
    if filters.since is not None:
        records = records.filter(history_date__gte=dt.datetime.combine(filters.since, dt.time.min, tzinfo=tz))
    if filters.until is not None:
        next_day = filters.until + dt.timedelta(days=1)
        records = records.filter(history_date__lt=dt.datetime.combine(next_day, dt.time.min, tzinfo=tz))
    return records


def _union(study: Study, user: Any, filters: HistoryFilter) -> QuerySet | None:
    parts = []
    for kind, model in KINDS.items():
        if filters.kind is not None and kind != filters.kind:
            continue
        records = _visible(study, user, kind, model, filters)
        if records is not None:
            parts.append(
                records.order_by()
                .annotate(record_kind=Value(kind, output_field=CharField()))
                .values_list("history_date", "history_id", "record_kind")
            )
    if not parts:
        return None
    first, *rest = parts
    return first.union(*rest, all=True) if rest else first


def history_count(*, study: Study, user: Any, filters: HistoryFilter) -> int:
    """How many records the user may see with these filters (one query)."""
    union = _union(study, user, filters)
    return union.count() if union is not None else 0


def history_list(
    *, study: Study, user: Any, filters: HistoryFilter, offset: int = 0, limit: int = 50
) -> list[HistoryEntry]:
    """The records, newest first, from ``offset``, at most ``limit``."""
    union = _union(study, user, filters)
    if union is None or limit <= 0:
        return []
    keys = list(union.order_by("-history_date", "-history_id")[offset : offset + limit])
    by_kind: dict[str, list[int]] = {}
    for _, history_id, kind in keys:
        by_kind.setdefault(kind, []).append(history_id)
    found: dict[tuple[str, int], Any] = {}
    previous: dict[tuple[str, int], Any] = {}
    for kind, ids in by_kind.items():
        _kind_records_read(kind, ids, found, previous)
    people = _people([*found.values(), *previous.values()])
    referenced = _referenced_names([*found.values(), *previous.values()])
    entries = []
    for _, history_id, kind in keys:
        record = found[(kind, history_id)]
        entries.append(_entry(kind, record, previous.get((kind, history_id)), people, referenced))
    return entries


def _kind_records_read(
    kind: str, ids: list[int], found: dict[tuple[str, int], Any], previous: dict[tuple[str, int], Any]
) -> None:
    """Adds the records of one kind with these history ids to ``found``,
    and to ``previous`` the record each change ("~") follows (two queries,
    the second only when some record is a change with an earlier one)."""
    history = KINDS[kind].history  # type: ignore[attr-defined]  # django-simple-history adds the history manager at run time
    before = history.filter(id=OuterRef("id"), history_id__lt=OuterRef("history_id")).order_by("-history_id")
    records = list(
        history.filter(history_id__in=ids)
        .select_related("history_user")
        .annotate(previous_id=Subquery(before.values("history_id")[:1]))
    )
    earlier = {r.previous_id for r in records if r.previous_id is not None and r.history_type == "~"}
    earlier_records = {r.history_id: r for r in history.filter(history_id__in=earlier)} if earlier else {}
    for record in records:
        found[(kind, record.history_id)] = record
        if record.previous_id in earlier_records:
            previous[(kind, record.history_id)] = earlier_records[record.previous_id]


@dataclass(frozen=True)
class _Member(Person):
    username: str = ""


def _memberships_named(record: Any) -> Iterator[int]:
    """The memberships a record names: whose input it is, a foreign key to
    one (a peer weight's ratee), a membership's own row."""
    if record.history_expert_id is not None:
        yield record.history_expert_id
    if record.instance_type is Membership:
        yield record.id
    for field in _foreign_keys(record.instance_type):
        if field.related_model is Membership and getattr(record, field.attname) is not None:
            yield getattr(record, field.attname)


def _people(records: Iterable[Any]) -> dict[int, _Member]:
    """The members the records name, by membership id, with their user and
    how the pages name them (one query, none when no record names one)."""
    wanted = {pk for record in records for pk in _memberships_named(record)}
    if not wanted:
        return {}
    rows = Membership.objects.filter(pk__in=wanted).values_list(
        "pk", "user_id", "user__first_name", "user__last_name", "user__username"
    )
    return {
        pk: _Member(user_id, f"{first} {last}".strip() or username, username)
        for pk, user_id, first, last, username in rows
    }


def _name_column(model: type) -> Any:
    """What names a row of ``model`` in the history, or None: its name or
    title, an expert's username, a user's."""
    fields = {field.name for field in model._meta.get_fields()}  # type: ignore[attr-defined]  # any model class: its _meta exists at run time
    if model is Membership:
        return F("user__username")
    for name in ("name", "title", "username", "number"):
        if name in fields:
            return F(name)
    # An elicited metric is named by its metric.
    return F("metric__name") if "metric" in fields else None


def _foreign_keys(model: type) -> list[Any]:
    tracked = model.history.model.tracked_fields  # type: ignore[attr-defined]  # django-simple-history adds the history manager at run time
    return [
        field
        for field in tracked
        if (field.many_to_one or field.one_to_one) and _name_column(field.related_model) is not None
    ]


def _referenced_names(records: Iterable[Any]) -> dict[tuple[type, int], str]:
    """The names of the rows the records' foreign keys name (``attribute_id``
    -> the attribute's name), one query per model named, whatever the
    records: what the page shows beside each id."""
    wanted: dict[type, set[int]] = {}
    for record in records:
        for field in _foreign_keys(record.instance_type):
            value = getattr(record, field.attname)
            if value is not None:
                wanted.setdefault(field.related_model, set()).add(value)
    found: dict[tuple[type, int], str] = {}
    for model, ids in wanted.items():
        rows = model._base_manager.filter(pk__in=ids).values_list("pk", _name_column(model))  # type: ignore[attr-defined]  # any model class: its base manager exists at run time
        found.update(((model, pk), str(name)) for pk, name in rows)
    return found


class HistoryPages(Sequence[HistoryEntry]):
    """The records as paginators page them (Django's ``Paginator``, DRF's):
    ``count()`` and a slice, each one ``history_count`` or ``history_list``."""

    def __init__(self, *, study: Study, user: Any, filters: HistoryFilter) -> None:
        self.study, self.user, self.filters = study, user, filters

    def count(self, value: object = None) -> int:  # the paginators call count() (or len())
        return history_count(study=self.study, user=self.user, filters=self.filters)

    def __len__(self) -> int:
        return self.count()

    @overload
    def __getitem__(self, index: int) -> HistoryEntry: ...

    @overload
    def __getitem__(self, index: slice) -> list[HistoryEntry]: ...

    def __getitem__(self, index: int | slice) -> HistoryEntry | list[HistoryEntry]:
        if isinstance(index, int):
            return history_list(study=self.study, user=self.user, filters=self.filters, offset=index, limit=1)[0]
        start = index.start or 0
        stop = index.stop if index.stop is not None else start + EXPORT_CHUNK
        return history_list(study=self.study, user=self.user, filters=self.filters, offset=start, limit=stop - start)


def history_all(*, study: Study, user: Any, filters: HistoryFilter) -> Iterator[HistoryEntry]:
    """Every record the user may see with these filters, newest first, read
    ``EXPORT_CHUNK`` at a time (the CSV and JSON exports)."""
    offset = 0
    while True:
        chunk = history_list(study=study, user=user, filters=filters, offset=offset, limit=EXPORT_CHUNK)
        yield from chunk
        if len(chunk) < EXPORT_CHUNK:
            return
        offset += EXPORT_CHUNK


def history_people(*, study: Study) -> list[tuple[str, str]]:
    """Who may appear as having made a change, (username, name as the pages
    show it): the designer and the members, by name."""
    people = {study.designer.get_username(): person_name(study.designer)}
    rows = Membership.objects.filter(study=study).values_list("user__username", "user__first_name", "user__last_name")
    people.update((username, f"{first} {last}".strip() or username) for username, first, last in rows)
    return sorted(people.items(), key=lambda pair: (pair[1].casefold(), pair[0]))


def _value(value: Any) -> str | None:
    """A column's value as text (None stays None): the page, the exports and
    the API show the same."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _changes(record: Any, previous: Any, fields: list[str]) -> list[Change]:
    """The record's changes to ``fields``: every non-empty value when it
    created or deleted the row, every value when it changed a row with no
    earlier record, else the values that differ from ``previous``."""
    now = {name: _value(getattr(record, name)) for name in fields}
    if record.history_type == "+":
        return [Change(name, None, value) for name, value in now.items() if value not in (None, "")]
    if record.history_type == "-":
        return [Change(name, value, None) for name, value in now.items() if value not in (None, "")]
    if previous is None:
        return [Change(name, None, value) for name, value in now.items()]
    return [
        Change(name, _value(getattr(previous, name)), value)
        for name, value in now.items()
        if _value(getattr(previous, name)) != value
    ]


def _changes_named(
    changes: list[Change], targets: Mapping[str, type], referenced: Mapping[tuple[type, int], str]
) -> list[Change]:
    """The changes, those to a foreign key (``targets``: column -> model)
    with the names of the rows its old and new values refer to."""

    def name_of(field: str, value: str | None) -> str | None:
        return None if value is None else referenced.get((targets[field], int(value)))

    return [
        Change(c.field, c.old, c.new, name_of(c.field, c.old), name_of(c.field, c.new)) if c.field in targets else c
        for c in changes
    ]


# Columns the page's details leave out: the row's parents, which the sentence names.
_UNDETAILED = frozenset({"study_id", "prioritisation_id"})


def _worded(changes: list[Change], facts: Facts) -> list[Change]:
    """The changes the page lists, their column and values in its words."""
    record, previous = facts.record, facts.previous
    worded = []
    for c in changes:
        column = column_of(record.instance_type, c.field)
        if c.field in _UNDETAILED or column.get_internal_type() == "JSONField":
            continue
        old = None if c.old is None or previous is None else shown(facts, c.field, getattr(previous, c.field))
        new = None if c.new is None else shown(facts, c.field, getattr(record, c.field))
        if c.old is not None and previous is None:  # a deletion: the row's last values
            old = shown(facts, c.field, getattr(record, c.field))
        worded.append(replace(c, label=field_words(record, c.field), old_words=old, new_words=new))
    return worded


def _entry(
    kind: str, record: Any, previous: Any, people: Mapping[int, _Member], referenced: Mapping[tuple[type, int], str]
) -> HistoryEntry:
    tracked = record.instance_type.history.model.tracked_fields
    fields = [field.attname for field in tracked if field.attname != "id"]
    changes = _changes(record, previous, fields)
    targets = {field.attname: field.related_model for field in _foreign_keys(record.instance_type)}
    if targets:
        changes = _changes_named(changes, targets, referenced)
    author = record.history_user
    user = author.get_username() if author is not None else None
    expert = record.history_expert_id
    action = TYPES[record.history_type]
    facts = Facts(
        kind=kind,
        action=action,
        record=record,
        previous=previous,
        changed=tuple(c.field for c in changes),
        names=referenced,
        people=people,
        actor_id=author.pk if author is not None else None,
    )
    user_name = person_name(author) if author is not None else None
    member = people.get(expert) if expert is not None else None
    return HistoryEntry(
        id=record.history_id,
        kind=kind,
        object_id=record.id,
        object_name=str(getattr(record, "name", None) or getattr(record, "title", None) or ""),
        action=action,
        at=record.history_date,
        user=user,
        source=record.history_source,
        expert=(member.username if member is not None else "an expert no longer in the study")
        if expert is not None
        else None,
        changes=tuple(changes),
        details=tuple(_worded(changes, facts)),
        sentence=sentence(facts, user_name or "The system"),
        user_name=user_name,
    )
