"""Prediction sets: candidates' predictions on a test set (FORMATS.md,
``approve-predictions/1``), stored compactly: a row per set and per
candidate in it, the candidate's arrays in one compressed archive (never a
row per instance)."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from .arrays import arrays_unpack
from .predictions import CandidatePredictions


class PredictionSet(models.Model):
    study = models.ForeignKey("workspace.Study", on_delete=models.CASCADE, related_name="prediction_sets")
    # The uploaded file's name, or one given.
    name = models.CharField(max_length=200)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    uploaded_at = models.DateTimeField(default=timezone.now)
    # Empty when the set names none (a label is never empty).
    positive_label = models.TextField(blank=True)
    # What the candidates' codes index, in the order evaluation.predictions documents.
    labels = models.JSONField(default=list)
    folds = models.JSONField(default=list)
    context_columns = models.JSONField(default=list)
    # One tuple of context values per code: as long as the file has distinct
    # contexts, so lists and details leave it unread.
    contexts = models.JSONField(default=list)
    row_count = models.PositiveBigIntegerField()
    byte_count = models.PositiveBigIntegerField()

    class Meta:
        ordering = ["-uploaded_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.study})"

    @property
    def positive(self) -> str | None:
        return self.positive_label or None


class CandidatePredictionArrays(models.Model):
    prediction_set = models.ForeignKey(PredictionSet, on_delete=models.CASCADE, related_name="candidate_arrays")
    candidate = models.ForeignKey("workspace.Candidate", on_delete=models.CASCADE, related_name="prediction_arrays")
    instance_count = models.PositiveBigIntegerField()
    # The optional arrays present (y_pred, score, proba, fold, time, context,
    # instance); y_true always is.
    columns = models.JSONField(default=list)
    # evaluation.arrays.arrays_pack: an np.savez_compressed archive.
    arrays = models.BinaryField()

    class Meta:
        ordering = ["prediction_set", "id"]
        constraints = [
            models.UniqueConstraint(fields=["prediction_set", "candidate"], name="prediction_arrays_unique_candidate")
        ]

    def __str__(self):
        return f"{self.candidate} in {self.prediction_set}"

    def predictions(self) -> CandidatePredictions:
        """The stored arrays (the candidate's name read through ``candidate``)."""
        return arrays_unpack(self.candidate.name, bytes(self.arrays))
