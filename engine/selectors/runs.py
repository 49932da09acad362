"""Validation runs, each read only through a study the user is a member of.

A run's snapshot and results are megabytes of JSON on a large study: each
read names, in ``fields``, the ones it needs (``RUN_FIELDS``), and status
polling needs neither.
"""

import json
from collections.abc import Collection, Iterable
from typing import Any

from django.db import connection
from django.db.models import F, Func, JSONField, QuerySet, Value
from django.db.models.fields.json import KeyTransform

from engine.models import Run
from workspace.models import Study
from workspace.selectors import User, studies_visible_to

from .documents import runs_with_document

RUN_JSON_FIELDS = ("snapshot", "results")
# "document": instead of the JSON, the results document's stored text, read
# out by the database for ``engine.selectors.results_json``. "results_core":
# the results without that text (its larger part: 1.7 of 2.9 MB at 100 x 20 x
# 1,000), removed by the database, for the pages, which never serve it.
RUN_FIELDS = (*RUN_JSON_FIELDS, "document", "results_core", "results_weights", "results_ranking")
# "results_ranking": for the run page, which shows 25 candidates of up to a
# thousand (issue 33, item 6): the results without the document text and
# without the candidates' entries (``results["candidates"]`` is empty), and
# ``run.results_ranking``, of every candidate in rank order only
# ``RANKING_KEYS``, both extracted by the database; the page's own
# candidates are then read by ``run_candidates_get`` (their entries alone).
RANKING_KEYS = ("name", "rank", "vetoed", "cef")

# "results_weights": of the results only what the weights are read from (no
# candidates: ``results["candidates"]`` is empty), each key extracted by the
# database, for the section of the run page that shows them.
RESULTS_WEIGHTS_KEYS = (
    "study",
    "iterations",
    "experts",
    "selected_attributes",
    "metrics",
    "attribute_weights",
    "metric_weights",
    "expert_influence",
    "expert_attribute_weights",
    "expert_metric_weights",
    "disagreement",
    "consistency",
)


class _WithoutDocument(Func):
    """A run's results without their stored document text, by the database."""

    output_field = JSONField()

    def __init__(self) -> None:
        super().__init__(F("results"))

    template = "json_remove(%(expressions)s, '$.document')"  # SQLite

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="(%(expressions)s - 'document')", **extra)


# On PostgreSQL every operator that reads a stored value reads it whole
# again (fetched out of line and decompressed: 3-5 ms for a run's results
# at the limits); an expression that reads the results once reads them in a
# subquery that the planner may not fold into the query (``OFFSET 0``),
# whose value (a copy, ``|| '{}'``) the outer expressions then share.
READ_ONCE = "(SELECT {expression} FROM (SELECT {results} || '{{}}'::jsonb AS r OFFSET 0) AS once)"


class _CoreAndRanking(Func):
    """Of a run's results, for the run page: the results without their
    stored document text and without the candidates' entries ("core"), and
    of every candidate in their stored (rank) order only ``RANKING_KEYS``
    ("ranking"), as one object built by the database, which reads the
    results once on PostgreSQL (``READ_ONCE``)."""

    output_field = JSONField()

    def __init__(self) -> None:
        super().__init__(F("results"))

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra: Any) -> Any:  # SQLite
        results, params = compiler.compile(self.source_expressions[0])
        pairs = ", ".join(f"'{key}', json_extract(value, '$.{key}')" for key in RANKING_KEYS)
        ranking = (
            f"(SELECT json_group_array(json_object({pairs})) FROM "
            f"(SELECT value FROM json_each({results}, '$.candidates') ORDER BY key))"
        )
        # (json() again: a JSON value loses its kind through a subquery)
        core = f"json_remove({results}, '$.document', '$.candidates')"
        return f"json_object('core', json({core}), 'ranking', json({ranking}))", [*params, *params]

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        results, params = compiler.compile(self.source_expressions[0])
        pairs = ", ".join(f"'{key}', c -> '{key}'" for key in RANKING_KEYS)
        ranking = (
            f"(SELECT coalesce(jsonb_agg(jsonb_build_object({pairs}) ORDER BY n), '[]'::jsonb) "
            "FROM jsonb_array_elements(r -> 'candidates') WITH ORDINALITY AS t(c, n))"
        )
        expression = f"jsonb_build_object('core', r - ARRAY['document', 'candidates'], 'ranking', {ranking})"
        return READ_ONCE.format(expression=expression, results=results), params


class _NamedCandidates(Func):
    """Of a run's stored results, the entries of the candidates named in
    ``names`` (a JSON list), in their stored order, picked by the database:
    the page about one candidate of a thousand parses one, the run page
    its 25."""

    output_field = JSONField()

    def __init__(self, names: list[str]) -> None:
        super().__init__(F("results"), Value(json.dumps(names)))

    def _parts(self, compiler: Any, connection: Any) -> tuple[str, str, list]:
        results, results_params = compiler.compile(self.source_expressions[0])
        names, names_params = compiler.compile(self.source_expressions[1])
        return results, names, [*results_params, *names_params]

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra: Any) -> Any:  # SQLite
        results, names, params = self._parts(compiler, connection)
        sql = (
            f"(SELECT json_group_array(json(value)) FROM (SELECT value FROM json_each({results}, '$.candidates') "
            f"WHERE json_extract(value, '$.name') IN (SELECT value FROM json_each({names})) ORDER BY key))"
        )
        return sql, params

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        results, names, params = self._parts(compiler, connection)
        sql = (
            f"(SELECT coalesce(jsonb_agg(c ORDER BY n), '[]'::jsonb) "
            f"FROM jsonb_array_elements({results} -> 'candidates') WITH ORDINALITY AS t(c, n) "
            f"WHERE c ->> 'name' IN (SELECT jsonb_array_elements_text(({names})::jsonb)))"
        )
        return sql, params


class _MeasuredRow(Func):
    """Of a run's snapshot, the measurements of the candidate named ``name``
    (null if none), picked by the database."""

    output_field = JSONField()

    def __init__(self, name: str) -> None:
        super().__init__(F("snapshot"), Value(name))

    def _parts(self, compiler: Any, connection: Any) -> tuple[str, str, list]:
        snapshot, snapshot_params = compiler.compile(self.source_expressions[0])
        name, name_params = compiler.compile(self.source_expressions[1])
        return snapshot, name, [*snapshot_params, *snapshot_params, *name_params]

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra: Any) -> Any:  # SQLite
        snapshot, name, params = self._parts(compiler, connection)
        sql = (
            f"(SELECT json_extract({snapshot}, '$.measurements[' || key || ']') "
            f"FROM json_each({snapshot}, '$.candidates') WHERE value = {name} LIMIT 1)"
        )
        return sql, params

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        snapshot, name, params = self._parts(compiler, connection)
        sql = (
            f"(SELECT {snapshot} -> 'measurements' -> (listed.position::int - 1) "
            f"FROM jsonb_array_elements_text({snapshot} -> 'candidates') WITH ORDINALITY AS listed(name, position) "
            f"WHERE listed.name = ({name})::text LIMIT 1)"
        )
        return sql, params


class _OwnExpertValues(Func):
    """Of a run's snapshot, its ``expert_values`` (each elicited metric's
    value per candidate and expert) with, of each entry's ``values`` and
    ``reasons``, the candidate named ``name``'s alone (null for a snapshot
    without them), picked by the database: a breakdown does not parse a
    thousand candidates' values of a hundred experts to show one's."""

    output_field = JSONField()

    def __init__(self, name: str) -> None:
        super().__init__(F("snapshot"), Value(name))

    def _parts(self, compiler: Any) -> tuple[str, list, str, list]:
        snapshot, snapshot_params = compiler.compile(self.source_expressions[0])
        name, name_params = compiler.compile(self.source_expressions[1])
        return snapshot, list(snapshot_params), name, list(name_params)

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra: Any) -> Any:  # SQLite
        snapshot, snapshot_params, name, name_params = self._parts(compiler)
        sql = (
            f"(CASE WHEN json_type({snapshot}, '$.expert_values') = 'array' THEN ("
            "SELECT json_group_array(json_object("
            "'metric', json_extract(entry.value, '$.metric'), "
            "'values', json((SELECT json_group_object(own.key, json(own.value)) "
            f"FROM json_each(entry.value, '$.values') AS own WHERE own.key = {name})), "
            "'reasons', json((SELECT json_group_object(why.key, why.value) "
            f"FROM json_each(entry.value, '$.reasons') AS why WHERE why.key = {name}))"
            f")) FROM json_each({snapshot}, '$.expert_values') AS entry) END)"
        )
        return sql, [*snapshot_params, *name_params, *name_params, *snapshot_params]

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        snapshot, snapshot_params, name, name_params = self._parts(compiler)
        sql = (
            f"(CASE WHEN jsonb_typeof({snapshot} -> 'expert_values') = 'array' THEN coalesce(("
            "SELECT jsonb_agg(jsonb_build_object("
            "'metric', entry.value -> 'metric', "
            f"'values', jsonb_strip_nulls(jsonb_build_object(({name})::text, "
            f"entry.value -> 'values' -> ({name})::text)), "
            f"'reasons', jsonb_strip_nulls(jsonb_build_object(({name})::text, "
            f"entry.value -> 'reasons' -> ({name})::text))"
            f") ORDER BY entry.position) FROM jsonb_array_elements({snapshot} -> 'expert_values') "
            "WITH ORDINALITY AS entry(value, position)), '[]'::jsonb) END)"
        )
        return sql, [*snapshot_params, *name_params, *name_params, *name_params, *name_params, *snapshot_params]


# Of a run's snapshot, the indexes of its elicited metrics (the ``metric``
# of each ``expert_values`` entry; null for a snapshot without them), picked
# by the database: the ranking's sentences say "by bob's own elicited
# metric" without reading every expert's values. ``snapshot``: the SQL
# naming the snapshot.


def _elicited_metrics_sqlite(snapshot: str) -> str:
    return (
        f"(CASE WHEN json_type({snapshot}, '$.expert_values') = 'array' THEN ("
        "SELECT json_group_array(json_extract(entry.value, '$.metric')) "
        f"FROM json_each({snapshot}, '$.expert_values') AS entry) END)"
    )


def _elicited_metrics_postgresql(snapshot: str) -> str:
    return (
        f"(CASE WHEN jsonb_typeof({snapshot} -> 'expert_values') = 'array' THEN coalesce(("
        "SELECT jsonb_agg(entry.value -> 'metric' ORDER BY entry.position) "
        f"FROM jsonb_array_elements({snapshot} -> 'expert_values') WITH ORDINALITY AS entry(value, position)), "
        "'[]'::jsonb) END)"
    )


class _SnapshotKeys(Func):
    """Of a run's snapshot, the top-level ``keys`` as one object, and with
    ``elicited`` the elicited metrics' indexes (``_elicited_metrics_*``) as
    "elicited_metrics"; PostgreSQL reads the snapshot once (``READ_ONCE``:
    1.6 MB compressed at the limits, 6 ms a read)."""

    output_field = JSONField()

    def __init__(self, keys: Iterable[str], *, elicited: bool) -> None:
        self.keys, self.elicited = tuple(keys), elicited
        if not all(key.isidentifier() for key in self.keys):
            raise ValueError(f"not snapshot keys: {self.keys}")
        super().__init__(F("snapshot"))

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra: Any) -> Any:  # SQLite
        snapshot, params = compiler.compile(self.source_expressions[0])
        pairs = [f"'{key}', json_extract({snapshot}, '$.{key}')" for key in self.keys]
        if self.elicited:
            pairs.append(f"'elicited_metrics', {_elicited_metrics_sqlite(snapshot)}")
        return f"json_object({', '.join(pairs)})", params * (len(self.keys) + 2 * self.elicited)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        snapshot, params = compiler.compile(self.source_expressions[0])
        pairs = [f"'{key}', r -> '{key}'" for key in self.keys]
        if self.elicited:
            pairs.append(f"'elicited_metrics', {_elicited_metrics_postgresql('r')}")
        expression = f"jsonb_build_object({', '.join(pairs)})"
        return READ_ONCE.format(expression=expression, results=snapshot), params


def _results_core(runs: Iterable[Run]) -> None:
    for run in runs:
        # "results_ranking": one annotation, the results read once, split here
        both = getattr(run, "results_core_ranking", None)
        if both is not None:
            run.results_core = both["core"]  # type: ignore[attr-defined]  # an annotation's attribute, set here
            run.results_ranking = both["ranking"] or []  # type: ignore[attr-defined]  # as results_core
        run.results = run.results_core  # type: ignore[attr-defined]  # annotated by _runs


def _runs(fields: Iterable[str]) -> QuerySet[Run]:
    """Runs with who launched them and, of their JSON, only ``fields``."""
    fields = set(fields)
    if not fields <= set(RUN_FIELDS) or ("document" in fields and len(fields) > 1):
        raise ValueError(f"fields must be some of {RUN_FIELDS[:2]}, or 'document' alone: got {sorted(fields)}")
    if len(fields & {"results", "results_core", "results_weights", "results_ranking"}) > 1:
        raise ValueError("fields name one of 'results', 'results_core', 'results_weights' and 'results_ranking'")
    runs = Run.objects.select_related("launched_by")
    if "results_ranking" in fields:
        # as "results_core", without the candidates' entries but for their ranking
        runs = runs.annotate(results_core_ranking=_CoreAndRanking(), snapshot_absent=KeyTransform("absent", "snapshot"))
    if "results_core" in fields:
        # with who was left out of the run (absent experts), for the run page
        runs = runs.annotate(results_core=_WithoutDocument(), snapshot_absent=KeyTransform("absent", "snapshot"))
    if "results_weights" in fields:
        runs = runs.annotate(**{f"results_{key}": KeyTransform(key, "results") for key in RESULTS_WEIGHTS_KEYS})
    if "document" in fields:
        return runs_with_document(queryset=runs)
    return runs.defer(*(name for name in RUN_JSON_FIELDS if name not in fields))


def run_list(*, study: Study, fields: Iterable[str] = ()) -> QuerySet[Run]:
    """The study's runs, newest first, with who launched them and of their
    snapshot and results only ``fields`` (default neither)."""
    return _runs(fields).filter(study=study)


def run_get(*, run_id: int, user: User, fields: Iterable[str] = ("results",)) -> Run:
    """One run of a study the user is a member of (``Run.DoesNotExist``
    otherwise), with who launched it and ``fields`` (default its results,
    not its snapshot; with "results_core" those results, without the stored
    document text, as ``run.results``; with "results_weights" only their
    ``RESULTS_WEIGHTS_KEYS``, no candidates): one query."""
    fields = set(fields)
    run = _runs(fields).get(pk=run_id, study__in=studies_visible_to(user))
    if fields & {"results_core", "results_ranking"}:
        _results_core([run])
    if "results_ranking" in fields and run.results is not None:
        run.results["candidates"] = []  # their entries: run_candidates_get
    if "results_weights" in fields and run.status == Run.Status.SUCCEEDED:
        parts = {key: getattr(run, f"results_{key}") for key in RESULTS_WEIGHTS_KEYS}
        run.results = {**{key: value for key, value in parts.items() if value is not None}, "candidates": []}
    return run


def run_candidates_get(*, run: Run, names: Collection[str]) -> list[dict]:
    """The stored entries of ``run``'s candidates named in ``names``, in
    rank order, picked by the database (the run page's 25 of a thousand):
    one query. ``run`` is one the user may read (``run_get``)."""
    found = (
        Run.objects.filter(pk=run.pk)
        .annotate(picked=_NamedCandidates(sorted(names)))
        .values_list("picked", flat=True)
        .get()
    )
    return list(found or [])


def run_candidate_get(*, run_id: int, user: User, name: str) -> Run:
    """One run as ``run_get`` gives it with "results_weights", but with the
    candidate named ``name`` in ``results["candidates"]`` (empty if the run
    has none of that name, or no results): one query."""
    runs = _runs(("results_weights",)).annotate(results_one=_NamedCandidates([name]))
    run: Run = runs.get(pk=run_id, study__in=studies_visible_to(user))
    if run.status == Run.Status.SUCCEEDED:
        parts = {key: getattr(run, f"results_{key}") for key in RESULTS_WEIGHTS_KEYS}
        one = getattr(run, "results_one")  # noqa: B009  (annotated above)
        run.results = {**{key: value for key, value in parts.items() if value is not None}, "candidates": one or []}
    return run


# What a comparison reads of each run (engine.compare): of the results, the
# weights and, of each candidate, COMPARED_CANDIDATE_KEYS; of the snapshot,
# what its inputs are indexed by and the small ones (always read), and the
# large inputs (COMPARED_INPUT_KEYS), each read only when it differs from
# the other run's.
COMPARED_RESULTS_KEYS = (
    "study",
    "experts",
    "selected_attributes",
    "metrics",
    "attribute_weights",
    "metric_weights",
    "expert_influence",
)
COMPARED_CANDIDATE_KEYS = ("name", "rank", "cef", "weighted_score", "vetoed")
COMPARED_INDEX_KEYS = (
    "experts",
    "attributes",
    "metrics",
    "candidates",
    "tolerance",
    "ahp_weighting",
    "attribute_weights",
)
COMPARED_INPUT_KEYS = ("measurements", "metric_weights", "lower", "upper", "peer_weights")  # engine.compare.SAME_INPUTS


class _ResultsPicked(Func):
    """Of a run's stored results, the top-level ``keys`` and each
    candidate's ``candidate_keys`` alone (in rank order, under
    "candidates"), as one object picked by the database, which reads the
    results once (``READ_ONCE``; SQLite reads the candidates whole and the
    caller keeps those keys)."""

    output_field = JSONField()

    def __init__(self, keys: Iterable[str], candidate_keys: Iterable[str]) -> None:
        self.keys, self.candidate_keys = tuple(keys), tuple(candidate_keys)
        if not all(key.isidentifier() for key in (*self.keys, *self.candidate_keys)):
            raise ValueError(f"not results keys: {self.keys}, {self.candidate_keys}")
        super().__init__(F("results"))

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra: Any) -> Any:  # SQLite
        results, params = compiler.compile(self.source_expressions[0])
        pairs = ", ".join(f"'{key}', json_extract({results}, '$.{key}')" for key in (*self.keys, "candidates"))
        return f"json_object({pairs})", params * (len(self.keys) + 1)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        results, params = compiler.compile(self.source_expressions[0])
        picked = ", ".join(f"'{key}', listed.entry -> '{key}'" for key in self.candidate_keys)
        candidates = (
            f"(SELECT coalesce(jsonb_agg(jsonb_build_object({picked}) ORDER BY listed.position), '[]'::jsonb) "
            "FROM jsonb_array_elements(r -> 'candidates') WITH ORDINALITY AS listed(entry, position))"
        )
        pairs = ", ".join(f"'{key}', r -> '{key}'" for key in self.keys)
        expression = f"jsonb_build_object({pairs}, 'candidates', {candidates})"
        return READ_ONCE.format(expression=expression, results=results), params


def _results_picked(run: Run, keys: Iterable[str], candidate_keys: Iterable[str]) -> None:
    """``run.results`` made of the annotation ``results_picked`` (of
    ``_ResultsPicked``), for a succeeded run."""
    if run.status != Run.Status.SUCCEEDED:
        return
    picked = getattr(run, "results_picked") or {}  # noqa: B009  (annotated by the caller)
    results = {key: picked.get(key) for key in keys}
    candidates = picked.get("candidates") or []
    if connection.vendor != "postgresql":  # SQLite extracts whole entries; PostgreSQL built them of those keys
        candidates = [{key: c[key] for key in candidate_keys} for c in candidates]
    results["candidates"] = candidates
    run.results = results


class _InputUnlessSame(Func):
    """A run's snapshot input ``key`` (one of COMPARED_INPUT_KEYS), or NULL
    when the run numbered ``pair_sum`` minus this one has the same input
    (both bounds for "lower" and "upper"; the attribute weights too for
    "metric_weights"), indexed by the same experts,
    attributes, metrics and candidates (so the comparison would find nothing
    in it): the database compares them."""

    output_field = JSONField()

    def __init__(self, key: str, pair_sum: int) -> None:
        if key not in COMPARED_INPUT_KEYS:
            raise ValueError(f"not a compared input: {key}")
        self.key, self.pair_sum = key, pair_sum
        super().__init__(F("snapshot"), F("pk"))

    def _compared(self) -> tuple[str, ...]:
        """The keys whose equality lets the input go unread: a range's bounds
        go together, and the metric weights with the attribute weights."""
        inputs = {"lower": ("lower", "upper"), "upper": ("lower", "upper")}.get(self.key, (self.key,))
        if self.key == "metric_weights":  # the metrics' shares of their attributes' weights
            inputs = ("metric_weights", "attribute_weights")
        return (*inputs, "experts", "attributes", "metrics", "candidates")

    def _parts(self, compiler: Any) -> tuple[str, str]:
        snapshot, _ = compiler.compile(self.source_expressions[0])
        pk, _ = compiler.compile(self.source_expressions[1])
        return snapshot, pk

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra: Any) -> Any:  # SQLite
        snapshot, pk = self._parts(compiler)
        table = connection.ops.quote_name(Run._meta.db_table)
        same = " AND ".join(
            f"json_extract(other.snapshot, '$.{key}') = json_extract({snapshot}, '$.{key}')" for key in self._compared()
        )
        sql = (
            f"(CASE WHEN EXISTS (SELECT 1 FROM {table} other WHERE other.id = %s - {pk} AND other.id <> {pk} "
            f"AND {same}) THEN NULL ELSE json_extract({snapshot}, '$.{self.key}') END)"
        )
        return sql, [self.pair_sum]

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        snapshot, pk = self._parts(compiler)
        table = connection.ops.quote_name(Run._meta.db_table)
        same = " AND ".join(f"other.snapshot -> '{key}' = {snapshot} -> '{key}'" for key in self._compared())
        sql = (
            f"(CASE WHEN EXISTS (SELECT 1 FROM {table} other WHERE other.id = %s - {pk} AND other.id <> {pk} "
            f"AND {same}) THEN NULL ELSE {snapshot} -> '{self.key}' END)"
        )
        return sql, [self.pair_sum]


# What a run's stored ranking is read from (engine.sensitivity.stored_ranking,
# the robustness page and its what-if; the experts for an analysis's launch).
RANKING_RESULTS_KEYS = ("experts", "selected_attributes", "metrics", "metric_weights")
RANKING_CANDIDATE_KEYS = ("name", "group_scores", "vetoed")


def run_ranking_get(*, run_id: int, user: User) -> Run:
    """One run of a study the user is a member of, with of its results only
    RANKING_RESULTS_KEYS and each candidate's RANKING_CANDIDATE_KEYS, picked
    by the database (``Run.DoesNotExist`` for anyone else): one query."""
    picked = _ResultsPicked(RANKING_RESULTS_KEYS, RANKING_CANDIDATE_KEYS)
    run: Run = _runs(()).annotate(results_picked=picked).get(pk=run_id, study__in=studies_visible_to(user))
    _results_picked(run, RANKING_RESULTS_KEYS, RANKING_CANDIDATE_KEYS)
    return run


def run_pair_get(*, run_id: int, other_id: int, user: User) -> tuple[Run, Run]:
    """Two runs, each of a study the user is a member of, with their
    studies and what a comparison reads of them (``Run.DoesNotExist`` if
    either is not): one query. ``run.results`` holds COMPARED_RESULTS_KEYS
    and the candidates' COMPARED_CANDIDATE_KEYS; ``run.snapshot`` the
    COMPARED_INDEX_KEYS and those COMPARED_INPUT_KEYS that differ between
    the two, the others (equal, so unchanged) named in ``run.inputs_same``.
    A thousand candidates' entries and measurements are not parsed to find
    that nothing changed."""
    visible = studies_visible_to(user)
    annotations = _pair_annotations(run_id, other_id)
    pair = list(
        _runs(()).select_related("study").annotate(**annotations).filter(pk__in={run_id, other_id}, study__in=visible)
    )
    runs = {run.pk: run for run in pair}
    if run_id not in runs or other_id not in runs:
        raise Run.DoesNotExist
    same = _inputs_same(pair)
    for run in pair:
        _results_picked(run, COMPARED_RESULTS_KEYS, COMPARED_CANDIDATE_KEYS)
        _pair_snapshot_set(run, same)
    return runs[run_id], runs[other_id]


def _pair_annotations(run_id: int, other_id: int) -> dict[str, Any]:
    """What ``run_pair_get`` reads of each run's JSON: the compared results
    and candidates' entries, the snapshot's index keys, and each compared
    input unless it is the same in both runs."""
    annotations: dict[str, Any] = {"results_picked": _ResultsPicked(COMPARED_RESULTS_KEYS, COMPARED_CANDIDATE_KEYS)}
    annotations |= {f"snapshot_{key}": KeyTransform(key, "snapshot") for key in COMPARED_INDEX_KEYS}
    annotations |= {f"input_{key}": _InputUnlessSame(key, run_id + other_id) for key in COMPARED_INPUT_KEYS}
    return annotations


def _inputs_same(pair: list[Run]) -> set[str]:
    """The compared inputs equal in the two runs (read as None in both);
    none when the pair is one run compared with itself."""
    if len(pair) != 2:
        return set()
    return {key for key in COMPARED_INPUT_KEYS if all(getattr(run, f"input_{key}") is None for run in pair)}


def _pair_snapshot_set(run: Run, same: set[str]) -> None:
    """The run's ``snapshot``: its index keys (without ``ahp_weighting``
    when the snapshot predates it) and the inputs not ``same``, named in
    ``run.inputs_same``."""
    snapshot = {key: getattr(run, f"snapshot_{key}") for key in COMPARED_INDEX_KEYS}
    if snapshot["ahp_weighting"] is None:  # snapshots from before the setting have none
        del snapshot["ahp_weighting"]
    snapshot |= {key: getattr(run, f"input_{key}") for key in COMPARED_INPUT_KEYS if key not in same}
    run.snapshot = snapshot
    run.inputs_same = frozenset(same)  # type: ignore[attr-defined]  # an attribute the comparison pages read, set on this instance only


def run_comparable_list(*, run: Run) -> QuerySet[Run]:
    """The study's other succeeded runs, newest first, without their JSON:
    what ``run`` can be compared with."""
    return (
        Run.objects.filter(study_id=run.study_id, status=Run.Status.SUCCEEDED)
        .exclude(pk=run.pk)
        .only("pk", "number", "launched_at", "study_id")
    )


# What the results page reads of a run's snapshot: the metrics' units and
# directions (for its sentences) and what a candidate's individual scores
# are computed from, and how its AHP weights were computed (absent, and so
# None, in snapshots from before the setting). The weights and peer weights
# are left in the database.
SCORE_INPUT_KEYS = (
    "experts",
    "metrics",
    "candidates",
    "lower",
    "upper",
    "measurements",
    "ahp_weighting",
    # each expert's own value of the elicited metrics (snapshots from version 3)
    "expert_values",
)


# Of those, what the sentences need (no bounds, no measurements).
METRIC_INPUT_KEYS = ("metrics", "ahp_weighting")


def run_score_inputs(
    *, run_id: int, keys: Iterable[str] = SCORE_INPUT_KEYS, candidate: str | None = None
) -> dict[str, Any]:
    """Those parts of a run's snapshot (``SCORE_INPUT_KEYS``, or some of
    them: ``METRIC_INPUT_KEYS`` when no candidate is scored), extracted by
    the database: one query. With ``candidate``, its "candidates" and
    "measurements" are that candidate's alone (none if the snapshot has no
    such candidate): a thousand candidates' measurements are not read to
    score one."""
    keys = tuple(keys)
    if candidate is None:
        elicited = "expert_values" not in keys
        keys_picked = _SnapshotKeys(keys, elicited=elicited)
        read = Run.objects.filter(pk=run_id).annotate(picked=keys_picked).values_list("picked", flat=True).get() or {}
        inputs = {key: read.get(key) for key in keys}
        if elicited:
            inputs["elicited_metrics"] = read.get("elicited_metrics")
        return inputs
    own = ("candidates", "measurements", "expert_values")
    rest = [key for key in keys if key not in own]
    picked: dict[str, Func] = {"measured_row": _MeasuredRow(candidate)}
    if "expert_values" in keys:
        picked["own_values"] = _OwnExpertValues(candidate)
    row = Run.objects.filter(pk=run_id).annotate(**picked).values(*picked, *(f"snapshot__{key}" for key in rest)).get()
    inputs = {key: row[f"snapshot__{key}"] for key in rest}
    if "expert_values" in keys:
        inputs["expert_values"] = row["own_values"]
    measured = row["measured_row"]
    inputs["candidates"], inputs["measurements"] = ([candidate], [measured]) if measured is not None else ([], [])
    return inputs
