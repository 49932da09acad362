"""Validation runs: an immutable snapshot of a study's inputs and its results.

Results are stored compactly as JSON arrays on the run (never one row per
number). A candidate's k x n individual scores are recomputed from the
snapshot when asked for.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from .core import DEFAULT_TOLERANCE


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    study = models.ForeignKey("workspace.Study", on_delete=models.CASCADE, related_name="runs")
    launched_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="launched_runs"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    tolerance = models.FloatField(default=DEFAULT_TOLERANCE)
    # Every input the run uses, copied at launch (see engine.snapshot.study_snapshot).
    snapshot = models.JSONField()
    # The study's input_version when the snapshot was taken: a later launch at
    # the same version (and tolerance) copies this snapshot in the database
    # instead of reading the inputs again. Null before versions were kept.
    input_version = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    # Filled in one write together with status "succeeded"; null otherwise.
    results = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    launched_at = models.DateTimeField(auto_now_add=True)
    # Who holds the run until when (engine.services): while queued, its sent
    # message (null: none could be sent yet); while running, the claiming
    # worker, which renews it every few seconds. Once it lapses, the recovery
    # sweep hands the run back to the queue and another worker takes it over.
    started_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    duration_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-launched_at", "-id"]
        indexes = [
            models.Index(fields=["status", "lease_expires_at"], name="run_status_lease"),
            models.Index(fields=["study", "input_version"], name="run_study_input_version"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "succeeded", "failed"]), name="run_status_valid"
            ),
            # A succeeded run always carries its complete results.
            models.CheckConstraint(
                condition=~Q(status="succeeded") | Q(results__isnull=False), name="run_succeeded_has_results"
            ),
        ]

    def __str__(self):
        return f"Run {self.pk} of {self.study} ({self.status})"

    @property
    def is_finished(self):
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)
