"""The reads of the MLflow link."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from engine.models import Run
from workspace.models import Metric, Study

from .models import MlflowConnection, MlflowImport, MlflowPublication, MlflowValueSource


def connection_get(*, study: Study) -> MlflowConnection | None:
    """The study's MLflow connection, or None."""
    return MlflowConnection.objects.filter(study=study).first()


def value_source_list(*, study: Study) -> QuerySet[MlflowValueSource]:
    """Where each imported measurement came from, by candidate and metric."""
    return (
        MlflowValueSource.objects.filter(study=study)
        .select_related("candidate", "metric")
        .order_by("candidate__position", "candidate_id", "metric__position", "metric_id")
    )


def import_list(*, study: Study) -> QuerySet[MlflowImport]:
    """The study's imports, newest first."""
    return MlflowImport.objects.filter(study=study).select_related("imported_by")


def import_get(*, study: Study, import_id: int) -> MlflowImport | None:
    """One of the study's imports, or None."""
    return import_list(study=study).filter(pk=import_id).first()


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def outcome_words(outcome: dict[str, Any]) -> str:
    """A succeeded import's counts, as the page's list of imports gives them:
    "4 runs: 12 values changed, 4 unchanged, 1 run skipped". Each value read
    is either changed or unchanged, so the values add up to the runs times
    the metrics mapped; the runs skipped are not among the runs."""
    runs, changed = outcome.get("runs", 0), len(outcome.get("changes", []))
    words = f"{_counted(runs, 'run')}: {_counted(changed, 'value')} changed, {outcome.get('unchanged', 0)} unchanged"
    skipped = len(outcome.get("skipped", []))
    return f"{words}, {_counted(skipped, 'run')} skipped" if skipped else words


@dataclass
class ImportRow:
    """An import in the page's list: the record, and what it did in words
    (its counts once succeeded, else its status)."""

    record: MlflowImport
    words: str


def import_rows(*, study: Study, most: int) -> list[ImportRow]:
    """The study's ``most`` latest imports, each with what it did in words."""
    return [
        ImportRow(
            record,
            outcome_words(record.outcome)
            if record.status == MlflowImport.Status.SUCCEEDED
            else record.get_status_display(),
        )
        for record in import_list(study=study)[:most]
    ]


def publication_get(*, run: Run) -> MlflowPublication | None:
    """The run's publication to MLflow, or None."""
    return MlflowPublication.objects.filter(run=run).select_related("published_by").first()


def value_sources(*, study: Study) -> dict[tuple[int, int], MlflowValueSource]:
    """Where each imported measurement came from, by (candidate id, metric id): one query."""
    return {(s.candidate_id, s.metric_id): s for s in MlflowValueSource.objects.filter(study=study)}


@dataclass
class MetricImports:
    """What of one metric's values was imported from MLflow (the measurements page's summary)."""

    metric: Metric
    imported: int = 0
    keys: list[str] = field(default_factory=list)
    uris: list[str] = field(default_factory=list)
    last_imported: datetime | None = None


def import_summaries(
    *, metrics: list[Metric], sources: dict[tuple[int, int], MlflowValueSource]
) -> list[MetricImports]:
    """Per metric (in the order given) with imported values: how many, from
    which keys and servers, when last. No query."""
    summaries = {m.pk: MetricImports(metric=m) for m in metrics}
    for (_, metric_id), source in sorted(sources.items()):
        summary = summaries.get(metric_id)
        if summary is None:
            continue
        summary.imported += 1
        if source.metric_key not in summary.keys:
            summary.keys.append(source.metric_key)
        if source.tracking_uri not in summary.uris:
            summary.uris.append(source.tracking_uri)
        if summary.last_imported is None or source.imported_at > summary.last_imported:
            summary.last_imported = source.imported_at
    return [summary for summary in summaries.values() if summary.imported]


def imports_summarised(
    *,
    metrics: list[Metric],
    sources: dict[tuple[int, int], MlflowValueSource],
    values: dict[tuple[int, int], float],
    candidate_names: dict[int, str],
) -> list[MetricImports]:
    """``import_summaries`` as the measurements page asks every source
    (``workspace.extensions.ValueSources.summaries``): the values and the
    names are not needed."""
    return import_summaries(metrics=metrics, sources=sources)
