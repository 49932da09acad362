"""Every change's history (issue 22): who, when, from where, old and new values.

django-simple-history keeps one historical table per tracked model, written
by its signals in the same transaction as the change. This module adds what
approve needs on top of it:

- ``StudyHistory``: the ``HistoricalRecords`` every tracked model declares
  (``history = StudyHistory(scope=...)``); each record also carries the study
  it belongs to (``history_study_id``), the expert whose input it is
  (``history_expert_id``, a membership; null for the study's public events)
  and where the change came from (``history_source``).
- The context: where a change comes from (``page``, ``api``, ``admin``,
  ``import``, ``command``, ``task``; ``system`` when nothing said) and who
  makes it. ``HistoryMiddleware`` sets it for every request (the user is read
  when the record is written, so an API token's user counts, DRF having
  authenticated by then); ``source(...)`` sets it for imports, commands and
  tasks (manage.py and the Celery worker set theirs).
- ``bulk_create``, ``bulk_update`` and ``record``: the services' bulk writes
  (``bulk_create``, ``QuerySet.update``, kept for speed) leave exactly one
  record per row they change, through these.
- A study's deletion records the study's own deletion and not one record per
  row of the cascade (``delete(..., cascade_recorded=False)``); ``StudyDeletion``
  keeps the bundle.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connection, models
from django.utils import timezone
from simple_history.models import HistoricalRecords
from simple_history.signals import pre_create_historical_record

SOURCES = ("page", "api", "admin", "import", "command", "task", "system")
# Every kind of record, in the order the models declare them (KINDS maps each
# to its model once the models are loaded; the API's enum reads this).
KIND_NAMES = (
    *("study", "membership", "attribute", "metric", "candidate", "measurement"),
    *("attribute_vote", "metric_vote", "attribute_prioritisation", "attribute_judgment", "attribute_weight"),
    *("metric_prioritisation", "metric_judgment", "metric_weight", "range", "peer_weight", "invitation"),
    *("run", "prediction_set", "computation", "measurement_source", "elicited_metric", "elicitation_answers"),
    *("revision_round", "round_response"),
    *("mlflow_connection", "mlflow_import", "mlflow_publication"),
)
ACTIONS = ("created", "changed", "deleted")
# Each kind in words: the History filter's label (plural) and what one record
# is about (singular, for a sentence that knows nothing more of it).
KIND_WORDS = {
    "study": ("Study settings and phases", "the study"),
    "membership": ("Panel membership", "a panel membership"),
    "attribute": ("Attributes", "an attribute"),
    "metric": ("Metrics", "a metric"),
    "candidate": ("Candidates", "a candidate"),
    "measurement": ("Measurements", "a measurement"),
    "attribute_vote": ("Attribute votes", "an attribute vote"),
    "metric_vote": ("Metric votes", "a metric vote"),
    "attribute_prioritisation": ("Attribute priorities", "attribute priorities"),
    "attribute_judgment": ("Attribute judgments (pairwise)", "an attribute judgment"),
    "attribute_weight": ("Attribute weights", "an attribute weight"),
    "metric_prioritisation": ("Metric priorities", "metric priorities"),
    "metric_judgment": ("Metric judgments (pairwise)", "a metric judgment"),
    "metric_weight": ("Metric weights", "a metric weight"),
    "range": ("Acceptable ranges", "an acceptable range"),
    "peer_weight": ("Peer weights", "a peer weight"),
    "invitation": ("Invitations", "an invitation"),
    "run": ("Runs", "a run"),
    "prediction_set": ("Prediction sets", "a prediction set"),
    "computation": ("Metric computations", "how a metric is computed"),
    "measurement_source": ("Computed measurements", "a computed measurement"),
    "elicited_metric": ("Elicited metrics", "an elicited metric"),
    "elicitation_answers": ("Elicitation answers", "elicitation answers"),
    "revision_round": ("Revision rounds", "a revision round"),
    "round_response": ("Round responses", "a round response"),
    "mlflow_connection": ("MLflow connection", "the MLflow connection"),
    "mlflow_import": ("MLflow imports", "an MLflow import"),
    "mlflow_publication": ("MLflow publications", "an MLflow publication"),
}
assert tuple(KIND_WORDS) == KIND_NAMES, "KIND_WORDS must word every kind of KIND_NAMES, in its order"


def kind_label(kind: str) -> str:
    """A kind as the History filter names it ("Attribute votes")."""
    return KIND_WORDS[kind][0]


@dataclass
class _Context:
    source: str = "system"
    request: Any = None
    user: Any = None
    # Inside ``delete``: the rows deleted are recorded in bulk, not one by one.
    bulk_deleting: bool = False
    # (model label, pk) -> (study id, expert id), for the records of one request or command.
    scopes: dict[tuple[str, int], tuple[int | None, int | None]] = field(default_factory=dict)


# manage.py sets "command" in the environment; the Celery worker calls
# set_default_source("task") as it starts.
_default_source = os.environ.get("APPROVE_HISTORY_SOURCE", "system")
if _default_source not in SOURCES:
    raise ValueError(f"APPROVE_HISTORY_SOURCE: unknown history source {_default_source!r}")
_context: contextvars.ContextVar[_Context | None] = contextvars.ContextVar("approve_history", default=None)


def _current() -> _Context:
    context = _context.get()
    return context if context is not None else _Context(source=_default_source)


def set_default_source(name: str) -> None:
    """The source of changes made outside any request or ``source`` block
    (manage.py: ``command``; the Celery worker: ``task``)."""
    global _default_source
    if name not in SOURCES:
        raise ValueError(f"unknown history source {name!r}")
    _default_source = name


@contextlib.contextmanager
def source(name: str, *, user: Any = None, request: Any = None) -> Iterator[None]:
    """Changes made inside come from ``name`` (made by ``user`` when given,
    else by the enclosing context's user or request)."""
    if name not in SOURCES:
        raise ValueError(f"unknown history source {name!r}")
    outer = _current()
    token = _context.set(
        _Context(
            source=name,
            request=request if request is not None else outer.request,
            user=user if user is not None else outer.user,
            bulk_deleting=outer.bulk_deleting,
        )
    )
    try:
        yield
    finally:
        _context.reset(token)


@contextlib.contextmanager
def _bulk_deleting() -> Iterator[None]:
    outer = _current()
    token = _context.set(_Context(outer.source, outer.request, outer.user, True, outer.scopes))
    try:
        yield
    finally:
        _context.reset(token)


class HistoryMiddleware:
    """Every request's changes: from ``api`` (under /api/), ``admin`` (under
    /admin/) or a ``page``, by the request's user."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        path = request.path_info
        name = "api" if path.startswith("/api/") else "admin" if path.startswith("/admin/") else "page"
        with source(name, request=request):
            return self.get_response(request)


def current_source() -> str:
    """Where the changes made now come from."""
    return _current().source


def current_user() -> Any:
    """Who makes the change: the context's user, else the request's
    authenticated user (an API token's once DRF has authenticated), else None."""
    context = _current()
    if context.user is not None:
        return context.user
    request = context.request
    user = getattr(request, "user", None) if request is not None else None
    return user if user is not None and user.is_authenticated else None


def _history_user(instance: Any = None, request: Any = None, **kwargs: Any) -> Any:
    explicit = getattr(instance, "_history_user", None)
    return explicit if explicit is not None else current_user()


# --- what each record belongs to ------------------------------------------------------------

# scope(instance, memo) -> (study id, expert membership id or None)
Scope = Callable[[Any, dict], tuple[int | None, int | None]]


def _related(instance: Any, name: str, columns: Sequence[str], memo: dict) -> tuple[Any, ...]:
    """Columns of the row a foreign key points to, from the cached object, the
    memo, or one query."""
    descriptor = getattr(type(instance), name)
    related_model = descriptor.field.related_model
    pk = getattr(instance, f"{name}_id")
    if pk is None:
        return (None,) * len(columns)
    if descriptor.is_cached(instance):
        target = getattr(instance, name)
        return tuple(getattr(target, column) for column in columns)
    key = (related_model._meta.label, pk, *columns)
    if key not in memo:
        found = related_model._base_manager.filter(pk=pk).values_list(*columns).first()
        memo[key] = tuple(found) if found else (None,) * len(columns)
    return memo[key]


def of_study(instance: Any, memo: dict) -> tuple[int | None, int | None]:
    return instance.study_id, None


def the_study(instance: Any, memo: dict) -> tuple[int | None, int | None]:
    return instance.pk, None


def of_membership(instance: Any, memo: dict) -> tuple[int | None, int | None]:
    """An expert's membership is theirs (they see its records); the
    designer's is the study's."""
    return instance.study_id, instance.pk if instance.role == "expert" else None


def by_expert(name: str = "expert") -> Scope:
    """An expert's input: the membership under ``name``."""

    def scope(instance: Any, memo: dict) -> tuple[int | None, int | None]:
        (study_id,) = _related(instance, name, ("study_id",), memo)
        return study_id, getattr(instance, f"{name}_id")

    scope.needs = (name, ("study_id",))  # type: ignore[attr-defined]  # the scope function carries what it reads, as an attribute
    return scope


def through(name: str) -> Scope:
    """An input kept under another (a judgment under its prioritisation): the
    parent's expert."""

    def scope(instance: Any, memo: dict) -> tuple[int | None, int | None]:
        descriptor = getattr(type(instance), name)
        if descriptor.is_cached(instance):
            return by_expert()(getattr(instance, name), memo)
        study_id, expert_id = _related(instance, name, ("expert__study_id", "expert_id"), memo)
        return study_id, expert_id

    scope.needs = (name, ("expert__study_id", "expert_id"))  # type: ignore[attr-defined]  # the scope function carries what it reads, as an attribute
    return scope


def of_metric(instance: Any, memo: dict) -> tuple[int | None, int | None]:
    (study_id,) = _related(instance, "metric", ("study_id",), memo)
    return study_id, None


of_metric.needs = ("metric", ("study_id",))  # type: ignore[attr-defined]  # the scope function carries what it reads, as an attribute


def of_run(instance: Any, memo: dict) -> tuple[int | None, int | None]:
    (study_id,) = _related(instance, "run", ("study_id",), memo)
    return study_id, None


of_run.needs = ("run", ("study_id",))  # type: ignore[attr-defined]  # the scope function carries what it reads, as an attribute


def _prime(model: type, objs: Sequence[Any], memo: dict) -> None:
    """Look up, in one query, the rows the objects' scope reads through a
    foreign key and has not cached (a bulk record's queries do not grow)."""
    needs = getattr(_SCOPES[model], "needs", None)
    if needs is None:
        return
    name, columns = needs
    descriptor = getattr(model, name)
    related_model = descriptor.field.related_model
    label = related_model._meta.label
    wanted = {
        getattr(instance, f"{name}_id")
        for instance in objs
        if not descriptor.is_cached(instance) and (label, getattr(instance, f"{name}_id"), *columns) not in memo
    }
    wanted.discard(None)
    if wanted:
        for pk, *found in related_model._base_manager.filter(pk__in=wanted).values_list("pk", *columns):
            memo[(label, pk, *columns)] = tuple(found)


class HistoryFields(models.Model):
    """What every historical record adds to simple-history's columns."""

    history_study_id = models.BigIntegerField(null=True, db_index=True)
    history_expert_id = models.BigIntegerField(null=True, blank=True)
    history_source = models.CharField(max_length=16, default="system")

    class Meta:
        abstract = True


_SCOPES: dict[type, Scope] = {}
KINDS: dict[str, type] = {}  # kind name -> tracked model, in declaration order


class StudyHistory(HistoricalRecords):
    """``HistoricalRecords`` with approve's columns, user and scope."""

    def __init__(self, *, kind: str, scope: Scope, excluded_fields: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(
            bases=[HistoryFields],
            get_user=_history_user,
            excluded_fields=list(excluded_fields),
            user_db_constraint=False,
            **kwargs,
        )
        if kind not in KIND_NAMES:
            raise ValueError(f"history kind {kind!r} is not in KIND_NAMES")
        self.kind = kind
        self.scope = scope

    def finalize(self, sender: Any, **kwargs: Any) -> None:
        super().finalize(sender, **kwargs)
        if sender is self.cls:
            _SCOPES[sender] = self.scope
            KINDS[self.kind] = sender
            sender.history_kind = self.kind

    def post_delete(self, instance: Any, using: Any = None, **kwargs: Any) -> None:
        if _current().bulk_deleting:
            return
        super().post_delete(instance, using=using, **kwargs)


def _fill(history_instance: Any, instance: Any, memo: dict, context: _Context) -> None:
    study_id, expert_id = _SCOPES[type(instance)](instance, memo)
    history_instance.history_study_id = study_id
    history_instance.history_expert_id = expert_id
    history_instance.history_source = context.source


def _on_record(sender: Any, instance: Any, history_instance: Any, **kwargs: Any) -> None:
    if type(instance) in _SCOPES:
        context = _current()
        _fill(history_instance, instance, context.scopes, context)


pre_create_historical_record.connect(_on_record, dispatch_uid="approve_history_scope")


# From this many rows on PostgreSQL, a bulk record is copied from the table in
# the database (``_record_copied``) rather than built as model instances.
COPY_FROM_ROWS = 100


def record(objs: Iterable[Any], history_type: str, *, model: type | None = None) -> int:
    """One historical record per object (``+`` created, ``~`` changed, ``-``
    deleted, before the rows go), written in one statement: for what a bulk
    write changed. Returns the records written."""
    objs = list(objs)
    if not objs:
        return 0
    model = model or type(objs[0])
    history_model = model.history.model  # type: ignore[attr-defined]  # django-simple-history adds the history manager at run time
    context = _current()
    _prime(model, objs, context.scopes)
    if connection.vendor == "postgresql" and len(objs) >= COPY_FROM_ROWS:
        return _record_copied(model, objs, history_type, context)
    user = current_user()
    now = timezone.now()
    tracked = history_model.tracked_fields
    rows = []
    for instance in objs:
        row = history_model(
            history_date=now,
            history_user=user,
            history_change_reason="",
            history_type=history_type,
            **{column.attname: getattr(instance, column.attname) for column in tracked},
        )
        _fill(row, instance, context.scopes, context)
        rows.append(row)
    return len(history_model.objects.bulk_create(rows))


def _record_copied(model: Any, objs: list[Any], history_type: str, context: _Context) -> int:
    """``record`` on PostgreSQL: one ``INSERT ... SELECT`` copying the rows
    from the table they are in (as written), joined to arrays of their ids
    and scopes; no model instance built for the records (an import's ten
    thousand peer weights)."""
    history_model = model.history.model
    scope = _SCOPES[model]
    ids, studies, experts = [], [], []
    for instance in objs:
        study_id, expert_id = scope(instance, context.scopes)
        ids.append(instance.pk)
        studies.append(study_id)
        experts.append(expert_id)
    quote = connection.ops.quote_name
    tracked = [column.column for column in history_model.tracked_fields]
    columns = [*tracked, "history_date", "history_type", "history_user_id", "history_change_reason"]
    columns += ["history_study_id", "history_expert_id", "history_source"]
    pk = quote(model._meta.pk.column)
    user = current_user()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(history_model._meta.db_table)} ({', '.join(quote(c) for c in columns)}) "  # noqa: S608 (names, not input)
            f"SELECT {', '.join('t.' + quote(c) for c in tracked)}, %s, %s, %s, '', s.study, s.expert, %s "
            f"FROM {quote(model._meta.db_table)} AS t "
            "JOIN UNNEST(%s::bigint[], %s::bigint[], %s::bigint[]) AS s (pk, study, expert) "
            f"ON t.{pk} = s.pk",
            [timezone.now(), history_type, getattr(user, "pk", None), context.source, ids, studies, experts],
        )
        return cursor.rowcount


def bulk_create(model: type, objs: Iterable[Any], **kwargs: Any) -> list[Any]:
    """``model.objects.bulk_create`` and one ``+`` record per row."""
    created = model._default_manager.bulk_create(list(objs), **kwargs)  # type: ignore[attr-defined]  # any model class: its default manager exists at run time
    record(created, "+", model=model)
    return created


def bulk_update(model: type, objs: Iterable[Any], fields: Sequence[str]) -> int:
    """``model.objects.bulk_update`` and one ``~`` record per row."""
    objs = list(objs)
    changed = model._default_manager.bulk_update(objs, fields)  # type: ignore[attr-defined]  # any model class: its default manager exists at run time
    record(objs, "~", model=model)
    return changed


def update(queryset: Any, **values: Any) -> int:
    """``queryset.update(**values)`` on the rows whose values differ, and one
    ``~`` record per row changed (rows already holding the values are left
    alone and leave none)."""
    model = queryset.model
    query = models.Q()
    for name, value in values.items():
        query |= models.Q(**{f"{name}__isnull": False}) if value is None else ~models.Q(**{name: value})
    rows = list(queryset.filter(query))
    if not rows:
        return 0
    model._default_manager.filter(pk__in=[row.pk for row in rows]).update(**values)
    for row in rows:
        for name, value in values.items():
            setattr(row, name, value)
    record(rows, "~", model=model)
    return len(rows)


def record_query(queryset: Any, history_type: str, *, study_id: int | None = None, expert_id: int | None = None) -> int:
    """One record per row of ``queryset``, written by one ``INSERT ...
    SELECT`` in the database (no model instance built: the import's fifty
    thousand measurements; a run's status changed by a conditional UPDATE).
    The rows' study is ``study_id``, or their own ``study_id`` column when
    not given. Returns the rows recorded."""
    history_model = queryset.model.history.model
    context = _current()
    user = current_user()
    tracked = [column.attname for column in history_model.tracked_fields]
    extra = ["history_date", "history_type", "history_user_id", "history_change_reason"]
    extra += ["history_expert_id", "history_source"]
    values = [timezone.now(), history_type, getattr(user, "pk", None), "", expert_id, context.source]
    if study_id is None:
        queryset = queryset.annotate(history_study=models.F("study_id")).values_list(*tracked, "history_study")
        tracked_columns = [*tracked, "history_study_id"]
    else:
        queryset = queryset.values_list(*tracked)
        tracked_columns = tracked
        extra.append("history_study_id")
        values.append(study_id)
    try:
        select_sql, select_params = queryset.query.sql_with_params()
    except EmptyResultSet:  # pk__in=[]: nothing to record
        return 0
    quote = connection.ops.quote_name
    columns = ", ".join(quote(name) for name in [*tracked_columns, *extra])
    placeholders = ", ".join(["%s"] * len(values))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(history_model._meta.db_table)} ({columns}) "  # noqa: S608 (names, not input)
            f"SELECT q.*, {placeholders} FROM ({select_sql}) AS q",
            [*values, *select_params],
        )
        return cursor.rowcount


def delete(queryset: Any, *, cascade_recorded: bool = True) -> int:
    """Delete the rows of ``queryset`` and what cascades from them, with one
    ``-`` record per tracked row deleted, written one INSERT per model (not
    a query per row, as the signals would). ``cascade_recorded=False``
    records only the rows of ``queryset`` itself (a study's deletion: its
    bundle keeps the rest). Returns the rows of ``queryset`` deleted."""
    from django.db.models.deletion import Collector

    collector = Collector(using=queryset.db)
    collector.collect(queryset)
    for model, instances in collector.data.items():
        if model in _SCOPES and (cascade_recorded or model is queryset.model):
            record(sorted(instances, key=lambda instance: instance.pk), "-", model=model)
    with _bulk_deleting():
        _, counts = collector.delete()
    return counts.get(queryset.model._meta.label, 0)


def replace(queryset: Any, rows: Iterable[Any], *, key: Sequence[str], values: Sequence[str]) -> None:
    """Make the rows of ``queryset`` be ``rows`` (unsaved instances), matched
    on the columns ``key``: a row whose ``values`` differ is updated in
    place (one ``~`` record), a new one created (``+``), one no longer given
    deleted (``-``); a row given as it stands is left alone and leaves no
    record. An input saved as a whole (an expert's ranges, their peer
    weights) so leaves one record per row it changes, not a deletion and a
    creation of every row. Queries do not grow with the rows."""
    model = queryset.model
    existing = {tuple(getattr(row, name) for name in key): row for row in queryset}
    changed, created = [], []
    for row in rows:
        old = existing.pop(tuple(getattr(row, name) for name in key), None)
        if old is None:
            created.append(row)
        elif any(getattr(old, name) != getattr(row, name) for name in values):
            for name in values:
                setattr(old, name, getattr(row, name))
            changed.append(old)
    if existing:
        delete(model._default_manager.filter(pk__in=[row.pk for row in existing.values()]))
    if changed:
        bulk_update(model, changed, values)
    if created:
        bulk_create(model, created)
