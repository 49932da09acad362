"""Validation runs: an immutable snapshot of a study's inputs and its results.

Results are stored compactly as JSON arrays on the run (never one row per
number). A candidate's k x n individual scores are recomputed from the
snapshot when asked for.
"""

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Max, Q

from workspace import history as recorded
from workspace.history import StudyHistory

from .core import DEFAULT_TOLERANCE


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    study = models.ForeignKey("workspace.Study", on_delete=models.CASCADE, related_name="runs")
    # The run's number within its study, 1 for its first run, in launch order:
    # what the pages call it ("Run 3"). Assigned when the run is created
    # (``save``; ``engine.services.run_launch`` holds the study's numbering
    # lock for it); the id stays the run's address (/runs/{id}/, the API's
    # ``id``, the results document's ``run``).
    number = models.PositiveIntegerField(editable=False)
    launched_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="launched_runs"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    tolerance = models.FloatField(default=DEFAULT_TOLERANCE)
    # Every input the run uses, as they were at launch (engine.snapshot.study_snapshot).
    # Null while the run waits for it to be taken: a launch copies it from a
    # run at the same input_version or leaves it to be taken by the worker
    # that claims the run, or, first, by the next change of the study's
    # inputs (engine.services.runs_take_snapshots), so it is still the
    # inputs at launch. A succeeded run always has one.
    snapshot = models.JSONField(null=True, blank=True)
    # The study's input_version when the snapshot was taken: a later launch at
    # the same version (and tolerance) copies this snapshot in the database
    # instead of reading the inputs again. Null before versions were kept.
    input_version = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    # The study's latest revision round at launch (workspace.RevisionRound's
    # number): the inputs the run validates are those after that round.
    # Null: the study had no round then (or the run predates rounds).
    revision_round = models.PositiveIntegerField(null=True, blank=True, editable=False)
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
    history = StudyHistory(
        kind="run",
        scope=recorded.of_study,
        excluded_fields=["snapshot", "results", "lease_expires_at", "input_version"],
    )

    class Meta:
        ordering = ["-launched_at", "-id"]
        indexes = [
            models.Index(fields=["status", "lease_expires_at"], name="run_status_lease"),
            models.Index(fields=["study", "input_version"], name="run_study_input_version"),
            # The runs still waiting for their snapshot, looked up by every
            # change of a closed study's inputs.
            models.Index(fields=["study"], condition=Q(snapshot__isnull=True), name="run_snapshot_pending"),
            # The newest runs of the whole site (the admin's list), without sorting them all.
            models.Index(fields=["-launched_at", "-id"], name="run_newest"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "succeeded", "failed"]), name="run_status_valid"
            ),
            # A succeeded run always carries its complete results.
            models.CheckConstraint(
                condition=~Q(status="succeeded") | Q(results__isnull=False), name="run_succeeded_has_results"
            ),
            # ... and the snapshot they were computed from.
            models.CheckConstraint(
                condition=~Q(status="succeeded") | Q(snapshot__isnull=False), name="run_succeeded_has_snapshot"
            ),
            models.UniqueConstraint(fields=["study", "number"], name="run_unique_number"),
            models.CheckConstraint(condition=Q(number__gte=1), name="run_number_positive"),
        ]

    def __str__(self) -> str:
        return f"Run {self.number} of {self.study} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """A new run takes the study's next number (one more than its
        highest); a launch holds the study's numbering lock meanwhile
        (``engine.services.run_launch``), so two launches never take the same."""
        if self._state.adding and self.number is None:
            highest = Run.objects.filter(study_id=self.study_id).aggregate(highest=Max("number"))["highest"]
            self.number = (highest or 0) + 1
        super().save(*args, **kwargs)

    @property
    def label(self) -> str:
        """How messages name the run: its number in the study (what pages
        show) and its id (what the API's paths take), e.g. "Run 3 (id 12)"."""
        return f"Run {self.number} (id {self.pk})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)


class Analysis(models.Model):
    """A robustness analysis of a succeeded run (``engine.analyses``): Monte
    Carlo rank acceptability or leave-one-expert-out. Its work is split into
    chunks (``AnalysisChunk``) that any worker executes; the merged result
    is stored compactly (counts, never samples) when the last chunk is done."""

    class Kind(models.TextChoices):
        MONTE_CARLO = "monte_carlo", "Monte Carlo rank acceptability"
        LEAVE_ONE_OUT = "leave_one_out", "Leave one expert out"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="analyses")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    launched_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="launched_analyses"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    # What is sampled and how (engine.analyses.Spec, as JSON), recorded so the analysis can be repeated.
    spec = models.JSONField(default=dict)
    seed = models.BigIntegerField(default=0)
    # Units of work: samples (Monte Carlo) or experts (leave one out).
    units = models.PositiveIntegerField()
    units_done = models.PositiveIntegerField(default=0)
    # The merged counts and their summary, filled together with "succeeded".
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    launched_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-launched_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "succeeded", "failed", "cancelled"]),
                name="analysis_status_valid",
            ),
            models.CheckConstraint(
                condition=~Q(status="succeeded") | Q(result__isnull=False), name="analysis_succeeded_has_result"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.pk} of run {self.run_id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED, self.Status.CANCELLED)


class AnalysisChunk(models.Model):
    """Units ``[start, start + count)`` of an analysis, claimed and leased by
    one worker at a time like a run (``engine.analyses``)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"

    analysis = models.ForeignKey(Analysis, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    start = models.PositiveIntegerField()
    count = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # The chunk's counts (engine.analyses), null until done.
    counts = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["analysis", "index"]
        constraints = [
            models.UniqueConstraint(fields=["analysis", "index"], name="analysis_chunk_unique"),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "done"]), name="analysis_chunk_status_valid"
            ),
        ]
        indexes = [models.Index(fields=["status", "lease_expires_at"], name="analysis_chunk_status_lease")]

    def __str__(self) -> str:
        return f"chunk {self.index} of analysis {self.analysis_id}"
