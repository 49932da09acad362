"""The study's design: attributes, metrics, candidates, measurements, the
ballots and the selection the vote fixes."""

from django.db import connection
from django.db.models import Count, Prefetch, QuerySet

from ..models import Candidate, Measurement, Metric, QualityAttribute, Study

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
        metrics = metrics.annotate(vote_count=Count("votes"))
        attributes = attributes.annotate(vote_count=Count("votes"))
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


def vote_selection_get(*, study: Study) -> tuple[set[int], set[int]]:
    """The selection the votes give now: ``(attribute ids, metric ids)``.

    An attribute is selected when it is main or has **at least** ``c`` votes
    (METHOD.md section 2, Decision); a metric when its attribute is selected
    and it has at least the metric threshold of votes.
    """
    attributes = QualityAttribute.objects.filter(study=study).annotate(vote_count=Count("votes"))
    attribute_ids = {
        a.pk for a in attributes if a.kind == QualityAttribute.Kind.MAIN or a.vote_count >= study.attribute_threshold
    }
    metrics = Metric.objects.filter(study=study).annotate(vote_count=Count("votes"))
    metric_ids = {m.pk for m in metrics if m.attribute_id in attribute_ids and m.vote_count >= study.metric_threshold}
    return attribute_ids, metric_ids
