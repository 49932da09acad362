"""A study's MLflow connection, what was imported from it and what was
published to it."""

from django.conf import settings
from django.db import models

from workspace import history as recorded
from workspace import limits
from workspace.history import StudyHistory

MLFLOW_ID_MAX_LENGTH = limits.MLFLOW_ID_MAX_LENGTH
# An experiment's name as kept beside its id (MLflow sets no limit: the rest is cut).
EXPERIMENT_NAME_MAX_LENGTH = 500


def experiment_words(name: str, experiment_id: str) -> str:
    """An experiment as the pages name it: ``breast-cancer (id 4472…)``,
    or its id alone when its name was not kept (imported before names were)."""
    return f"{name} (id {experiment_id})" if name else f"id {experiment_id}"


class ExperimentNamed(models.Model):
    """A record of an MLflow experiment: its id, and its name when recorded."""

    experiment_id = models.CharField(max_length=MLFLOW_ID_MAX_LENGTH)
    experiment_name = models.CharField(max_length=EXPERIMENT_NAME_MAX_LENGTH, blank=True)

    class Meta:
        abstract = True

    @property
    def experiment_shown(self) -> str:
        return experiment_words(self.experiment_name, self.experiment_id)


class MlflowConnection(models.Model):
    """Where a study's candidates are tracked: an ``http(s)://`` tracking
    server (with an optional token, kept encrypted: ``tracking.secrets``) or
    a local ``file:`` store. Checked when saved."""

    study = models.OneToOneField("workspace.Study", on_delete=models.CASCADE, related_name="mlflow_connection")
    tracking_uri = models.CharField(max_length=500)
    # Fernet token of the bearer token (tracking.secrets); empty: none.
    token_encrypted = models.TextField(blank=True)
    # What the check on save found.
    experiment_count = models.PositiveIntegerField(default=0)
    checked_at = models.DateTimeField()
    # In the study's History: the URI and the check, never the token (only whether one changed: has_token).
    history = StudyHistory(kind="mlflow_connection", scope=recorded.of_study, excluded_fields=["token_encrypted"])

    def __str__(self) -> str:
        return f"{self.study} → {self.tracking_uri}"

    @property
    def has_token(self) -> bool:
        return bool(self.token_encrypted)


class MlflowRunLink(ExperimentNamed):
    """The MLflow run a candidate was imported from: re-imports update it,
    and publishing tags it."""

    candidate = models.OneToOneField("workspace.Candidate", on_delete=models.CASCADE, related_name="mlflow_run")
    tracking_uri = models.CharField(max_length=500)
    run_id = models.CharField(max_length=MLFLOW_ID_MAX_LENGTH)
    imported_at = models.DateTimeField()
    # The prediction artifact last imported from the run (path and SHA-256):
    # a re-import makes a new prediction set only when it changed.
    artifact_path = models.CharField(max_length=1000, blank=True)
    artifact_sha256 = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"{self.candidate} ← {self.run_id}"


class MlflowValueSource(ExperimentNamed):
    """Where an imported measurement came from: the tracking URI, the
    experiment, the run, the metric key and step, and the value it gave."""

    study = models.ForeignKey("workspace.Study", on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey("workspace.Candidate", on_delete=models.CASCADE, related_name="+")
    metric = models.ForeignKey("workspace.Metric", on_delete=models.CASCADE, related_name="+")
    tracking_uri = models.CharField(max_length=500)
    run_id = models.CharField(max_length=MLFLOW_ID_MAX_LENGTH)
    metric_key = models.CharField(max_length=250)
    # The step read; null: the latest value.
    step = models.BigIntegerField(null=True, blank=True)
    value = models.FloatField()
    imported_at = models.DateTimeField()

    class Meta:
        ordering = ["candidate", "metric"]
        constraints = [models.UniqueConstraint(fields=["candidate", "metric"], name="mlflow_value_source_unique")]

    def __str__(self) -> str:
        return f"{self.candidate} {self.metric} from {self.run_id}/{self.metric_key}"


class MlflowImport(ExperimentNamed):
    """One import, as recorded: what was asked and what it changed. An
    import of more than ``limits.MLFLOW_IMPORT_INLINE_RUNS`` runs is recorded
    queued, then runs as a Celery task (``tracking.tasks``), which reports the
    runs read so far; one done inline is recorded succeeded."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    study = models.ForeignKey("workspace.Study", on_delete=models.CASCADE, related_name="mlflow_imports")
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    imported_at = models.DateTimeField()
    # The request (filter, mapping, step, name tag, artifact pattern) and the outcome (tracking.services).
    request = models.JSONField(default=dict)
    outcome = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.SUCCEEDED)
    # Progress of a queued import: the runs read from MLflow so far, of how many matched.
    runs_total = models.PositiveIntegerField(default=0)
    runs_read = models.PositiveIntegerField(default=0)
    # Why a queued import failed: the API's error envelope {code, detail, fields}; {} otherwise.
    error = models.JSONField(default=dict, blank=True)
    # Who holds a queued import, as for runs (engine.services): until when its
    # message is awaited, then, running, the worker's heartbeat lease. The
    # recovery sweep sends a lapsed queued one again and fails a lapsed
    # running one (tracking.services.imports_recover_stale). Null when done.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    history = StudyHistory(kind="mlflow_import", scope=recorded.of_study, excluded_fields=["lease_expires_at"])

    class Meta:
        ordering = ["-imported_at", "-id"]

    def __str__(self) -> str:
        return f"import {self.pk} into {self.study}"


class MlflowPublication(ExperimentNamed):
    """A validation run's decision written to MLflow: once per run (publishing
    again rewrites the same tags and the same summary run)."""

    run = models.OneToOneField("engine.Run", on_delete=models.CASCADE, related_name="mlflow_publication")
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_at = models.DateTimeField()
    tracking_uri = models.CharField(max_length=500)
    summary_run_id = models.CharField(max_length=MLFLOW_ID_MAX_LENGTH)
    # {candidate name: MLflow run id} of the runs tagged.
    tagged = models.JSONField(default=dict)
    times = models.PositiveIntegerField(default=1, help_text="how many times it was published")
    history = StudyHistory(kind="mlflow_publication", scope=recorded.of_run)

    def __str__(self) -> str:
        return f"run {self.run_id} published to {self.summary_run_id}"
