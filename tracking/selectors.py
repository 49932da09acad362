"""The reads of the MLflow link."""

from django.db.models import QuerySet

from engine.models import Run
from workspace.models import Study

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


def publication_get(*, run: Run) -> MlflowPublication | None:
    """The run's publication to MLflow, or None."""
    return MlflowPublication.objects.filter(run=run).select_related("published_by").first()
