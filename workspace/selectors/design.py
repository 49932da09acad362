"""The study's design: attributes, metrics, candidates, measurements, the
ballots and the selection the vote fixes."""

from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Count, Prefetch, Q, QuerySet

from ..models import Candidate, Measurement, Membership, Metric, QualityAttribute, Study

# --- setup items ---------------------------------------------------------------------

SetupItem = QualityAttribute | Metric | Candidate
SetupModel = type[QualityAttribute] | type[Metric] | type[Candidate]
SetupItems = QuerySet[QualityAttribute] | QuerySet[Metric] | QuerySet[Candidate]

# Metrics are listed grouped by attribute, in the study's order.
METRIC_ORDER = ("attribute__position", "attribute_id", "position", "id")


def attribute_get(*, study: Study, name: str) -> QualityAttribute:
    """The study's attribute ``name`` (``QualityAttribute.DoesNotExist`` if none)."""
    return QualityAttribute.objects.get(study=study, name=name)


def attribute_list(*, study: Study) -> QuerySet[QualityAttribute]:
    """The study's attributes in its order (one query)."""
    return QualityAttribute.objects.filter(study=study).order_by("position", "id")


def metric_list(*, study: Study, measured: bool = False) -> QuerySet[Metric]:
    """The study's metrics with their attributes, grouped by attribute in
    the study's order (one query); ``measured`` adds ``measured_count``, how
    many candidates are measured on each."""
    metrics = Metric.objects.filter(study=study).select_related("attribute").order_by(*METRIC_ORDER)
    return metrics.annotate(measured_count=Count("measurements")) if measured else metrics


def elicited_metric_names(*, study: Study) -> list[str]:
    """The names of the study's elicited metrics, in its order (one query;
    evaluation keeps their design, a metric's ``elicitation``)."""
    elicited = Metric.objects.filter(study=study, elicitation__isnull=False).order_by(*METRIC_ORDER)
    return list(elicited.values_list("name", flat=True))


def candidate_list(*, study: Study) -> QuerySet[Candidate]:
    """The study's candidates in its order (one query)."""
    return study.candidates.order_by("position", "id")


def setup_item_list(*, study: Study, model: SetupModel) -> SetupItems:
    """The study's attributes, metrics or candidates (``model``) with their
    study, in the study's order (metrics grouped by attribute, with it): one
    query."""
    is_metric = model is Metric
    related = ("study", "attribute") if is_metric else ("study",)
    order = METRIC_ORDER if is_metric else ("position", "id")
    return model._default_manager.filter(study=study).select_related(*related).order_by(*order)


def setup_item_get(*, study: Study, model: SetupModel, pk: int) -> SetupItem:
    """The study's attribute, metric or candidate ``pk`` with its study
    (``model.DoesNotExist`` if the study has none): one query."""
    return model._default_manager.select_related("study").get(study=study, pk=pk)


# --- measurements ----------------------------------------------------------------------


def measurement_list(*, study: Study) -> QuerySet:
    """The study's measurements as ``{candidate__name, metric__name, value,
    standard_error}`` rows, by candidate then metric: one query, touching
    only this study's rows (through the index on ``Measurement.study``)."""
    return (
        Measurement.objects.filter(study=study)
        .order_by("candidate__position", "candidate_id", "metric__position", "metric_id")
        .values("candidate__name", "metric__name", "value", "standard_error")
    )


def selected_measurement_list(*, study: Study) -> list[tuple[int, int, float, str]]:
    """The measurements of the study's selected metrics as ``(metric id,
    candidate id, value, candidate name)`` rows, by candidate (one query).
    The ranges step reads 20,000 of them at the documented limits: the
    queryset's SQL is fetched in one go, without Django's row-by-row
    iteration (a third of the time)."""
    rows = (
        Measurement.objects.filter(study=study, metric__is_selected=True)
        .order_by("candidate__position", "candidate_id")
        .values_list("metric_id", "candidate_id", "value", "candidate__name")
    )
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def selected_measurement_arrays(*, study: Study) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The measurements of the study's selected metrics as arrays: each
    one's metric id, its candidate's position in ``candidates`` and its
    value, by candidate; and ``candidates``, every measured candidate's
    name in the study's order. One query. On PostgreSQL the database packs
    the 20,000 numbers of the documented limits into binary strings read
    by NumPy (no Python object per number); elsewhere the rows of
    ``selected_measurement_list``."""
    if connection.vendor == "postgresql":
        return _selected_measurement_arrays_packed(study)
    return _selected_measurement_arrays_of_rows(study)


def _selected_measurement_arrays_of_rows(study: Study) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    rows = selected_measurement_list(study=study)
    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    metric_ids, candidate_ids = np.asarray(columns[0], dtype=np.int64), np.asarray(columns[1], dtype=np.int64)
    values = np.asarray(columns[2], dtype=np.float64)
    name_of = dict(zip(columns[1], columns[3], strict=True))
    order = list(dict.fromkeys(columns[1]))  # the candidates, in the study's order
    candidates = [name_of[pk] for pk in order]
    by_id = np.argsort(np.asarray(order, dtype=np.int64))
    sorted_ids = np.asarray(order, dtype=np.int64)[by_id]
    position = by_id[np.searchsorted(sorted_ids, candidate_ids)] if rows else np.zeros(0, dtype=np.intp)
    return metric_ids, position, values, candidates


def _selected_measurement_arrays_packed(study: Study) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    measurement, candidate, metric = (
        connection.ops.quote_name(model._meta.db_table) for model in (Measurement, Candidate, Metric)
    )
    # The database packs the three columns in one pass, unordered (the
    # aggregates of one query read its rows in the same order), and lists
    # the measured candidates in the study's order; NumPy then finds each
    # row's candidate and sorts by candidate and metric (39 ms of SQL at the
    # limits, with a join and three ordered aggregates, became 25).
    sql = f"""
        WITH measured AS (
            SELECT m.metric_id, m.candidate_id, m.value
            FROM {measurement} m
            JOIN {metric} t ON t.id = m.metric_id
            WHERE m.study_id = %s AND t.is_selected
        ), listed AS (
            SELECT c.id, c.name, c.position FROM {candidate} c WHERE c.id IN (SELECT candidate_id FROM measured)
        )
        SELECT
            string_agg(int8send(metric_id::bigint), ''::bytea),
            string_agg(int8send(candidate_id::bigint), ''::bytea),
            string_agg(float8send(value), ''::bytea),
            (SELECT array_agg(id ORDER BY position, id) FROM listed),
            (SELECT array_agg(name ORDER BY position, id) FROM listed)
        FROM measured
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [study.pk])
        metric_ids, candidate_ids, values, order, names = cursor.fetchone()
    if metric_ids is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float64), []
    metrics = np.frombuffer(bytes(metric_ids), dtype=">i8").astype(np.int64)
    ids = np.asarray(order, dtype=np.int64)
    by_id = np.argsort(ids)
    position = by_id[np.searchsorted(ids[by_id], np.frombuffer(bytes(candidate_ids), dtype=">i8"))].astype(np.intp)
    rows = np.lexsort((metrics, position))
    return (
        metrics[rows],
        position[rows],
        np.frombuffer(bytes(values), dtype=">f8").astype(np.float64)[rows],
        list(names),
    )


def measurement_values(*, study: Study) -> dict[tuple[int, int], float]:
    """``{(candidate id, metric id): value}`` of the study (one query of plain values)."""
    rows = Measurement.objects.filter(study=study).values_list("candidate_id", "metric_id", "value")
    return {(candidate, metric): value for candidate, metric, value in rows}


def measurements_of(*, item: QualityAttribute | Metric | Candidate) -> QuerySet[Measurement]:
    """The measured values that go when ``item`` is removed."""
    if isinstance(item, QualityAttribute):
        return Measurement.objects.filter(metric__attribute=item)
    if isinstance(item, Metric):
        return Measurement.objects.filter(metric=item)
    return Measurement.objects.filter(candidate=item)


# --- the ballots and the selection -----------------------------------------------------


def ballot_list(*, study: Study, with_tallies: bool) -> list[QualityAttribute]:
    """Every attribute of the study with, as ``ballot_metrics``, its metrics,
    in the study's order (two queries). ``with_tallies`` adds ``vote_count``
    to each attribute and metric: the tallies shown once voting has closed."""
    metrics = Metric.objects.order_by("position", "id")
    attributes = QualityAttribute.objects.filter(study=study).order_by("position", "id")
    if with_tallies:
        metrics = metrics.annotate(vote_count=Count("votes", filter=COUNTED_VOTES))
        attributes = attributes.annotate(vote_count=Count("votes", filter=COUNTED_VOTES))
    # The prefetch's to_attr is declared on the model (QualityAttribute.ballot_metrics).
    ballot: Prefetch = Prefetch("metrics", queryset=metrics, to_attr="ballot_metrics")
    return list(attributes.prefetch_related(ballot))


def selected_attributes(study: Study | None) -> QuerySet[QualityAttribute]:
    """The attributes fixed by the vote, in the study's order (the columns of
    a prioritisation)."""
    attributes = QualityAttribute.objects.filter(is_selected=True).order_by("position", "id")
    return attributes if study is None else attributes.filter(study=study)


def selected_metrics(study: Study | None) -> QuerySet[Metric]:
    """The metrics fixed by the vote, grouped by attribute in the study's
    order: the columns of W, L, U and M in every run."""
    metrics = (
        Metric.objects.filter(is_selected=True)
        .select_related("attribute")
        .order_by("attribute__position", "attribute__id", "position", "id")
    )
    return metrics if study is None else metrics.filter(study=study)


def ranges_needed() -> QuerySet[Metric]:
    """The metrics every expert must give an acceptable range for before the
    assessment can close: the selected ones without a default range (filter
    it to a study)."""
    return Metric.objects.filter(is_selected=True, default_least_acceptable__isnull=True)


#: The votes that count: those of experts who take part (an excluded or
#: abstaining expert's votes are kept but not counted).
COUNTED_VOTES = Q(votes__expert__absence=Membership.Absence.NONE)


def vote_selection_get(*, study: Study) -> tuple[set[int], set[int]]:
    """The selection the votes give now: ``(attribute ids, metric ids)``.

    An attribute is selected when it is main or has **at least** ``c`` votes
    (METHOD.md section 2, Decision); a metric when its attribute is selected
    and it has at least the metric threshold of votes.
    """
    attributes = QualityAttribute.objects.filter(study=study).annotate(vote_count=Count("votes", filter=COUNTED_VOTES))
    attribute_ids = {
        a.pk for a in attributes if a.kind == QualityAttribute.Kind.MAIN or a.vote_count >= study.attribute_threshold
    }
    metrics = Metric.objects.filter(study=study).annotate(vote_count=Count("votes", filter=COUNTED_VOTES))
    metric_ids = {m.pk for m in metrics if m.attribute_id in attribute_ids and m.vote_count >= study.metric_threshold}
    return attribute_ids, metric_ids


def measurement_values_shown(
    *, study: Study, candidate_ids: list[int], also: Sequence[Any] = ()
) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    """``({(candidate id, metric id): value}, {...: standard error})`` of
    the measurements a page of the measurements table shows: those of
    ``candidate_ids``, and every one ``also`` selects (filters of
    ``Measurement`` rows: the values whose sources the page summarises for
    every candidate, ``workspace.extensions.ValueSources.also_shown``); the
    second holds only the values that have a standard error. One query of
    plain values."""
    shown = Q(candidate_id__in=candidate_ids)
    for rows in also:
        shown |= rows
    values, errors = {}, {}
    measured = Measurement.objects.filter(study=study).filter(shown)
    for candidate, metric, value, error in measured.values_list("candidate_id", "metric_id", "value", "standard_error"):
        values[(candidate, metric)] = value
        if error is not None:
            errors[(candidate, metric)] = error
    return values, errors
