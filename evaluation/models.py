"""Prediction sets: candidates' predictions on a test set (FORMATS.md,
``approve-predictions/1``), stored compactly: a row per set and per
candidate in it, the candidate's arrays in one compressed archive (never a
row per instance)."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from workspace import history as recorded
from workspace.history import StudyHistory

from . import report
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
    history = StudyHistory(kind="prediction_set", scope=recorded.of_study, excluded_fields=["contexts"])

    class Meta:
        ordering = ["-uploaded_at", "-id"]

    def __str__(self) -> str:
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

    def __str__(self) -> str:
        return f"{self.candidate} in {self.prediction_set}"

    def predictions(self) -> CandidatePredictions:
        """The stored arrays (the candidate's name read through ``candidate``)."""
        return arrays_unpack(self.candidate.name, bytes(self.arrays))


class MetricComputation(models.Model):
    """A study metric whose measurements are computed from prediction sets:
    which computation (``evaluation.report.COMPUTATIONS``) with which
    parameters. Computing is always asked for (``measurements_compute``),
    never done behind the designer's back."""

    metric = models.OneToOneField("workspace.Metric", on_delete=models.CASCADE, related_name="computation")
    computation = models.CharField(max_length=40)
    # Only those of the computation's parameters that differ from the
    # defaults (evaluation.report.Options), e.g. {"threshold_method":
    # "max_kappa"} or {"n_parameters": {"J48": 12}}.
    parameters = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = StudyHistory(kind="computation", scope=recorded.of_metric)

    class Meta:
        ordering = ["metric"]

    def __str__(self) -> str:
        return f"{self.metric} from {self.computation}"


class MeasurementSource(models.Model):
    """Where a computed measurement came from: the prediction set, the
    computation and its parameters, when, and the value it gave. A value
    typed over it later differs from ``value``: the page then says the
    measurement was edited since."""

    study = models.ForeignKey("workspace.Study", on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey("workspace.Candidate", on_delete=models.CASCADE, related_name="+")
    metric = models.ForeignKey("workspace.Metric", on_delete=models.CASCADE, related_name="+")
    # Kept when the set is deleted, with its name: the value still came from it.
    prediction_set = models.ForeignKey(PredictionSet, on_delete=models.SET_NULL, null=True, related_name="+")
    prediction_set_name = models.CharField(max_length=200)
    computation = models.CharField(max_length=40)
    parameters = models.JSONField(default=dict, blank=True)
    computed_at = models.DateTimeField()
    value = models.FloatField()
    history = StudyHistory(kind="measurement_source", scope=recorded.of_study)

    class Meta:
        ordering = ["candidate", "metric"]
        constraints = [models.UniqueConstraint(fields=["candidate", "metric"], name="measurement_source_unique")]

    def __str__(self) -> str:
        return f"{self.candidate} {self.metric} from {self.computation}"

    @property
    def computation_name(self) -> str:
        """The computation as the pages name it (its key if no longer known)."""
        computation = report.COMPUTATIONS.get(self.computation)
        return computation.name if computation else self.computation

    def edited_since(self, current_value: float | None) -> bool:
        """Whether the measurement, whose value is now ``current_value`` (None
        when removed), was typed over since it was computed."""
        return current_value != self.value


class EvaluationCache(models.Model):
    """A set's evaluation as computed once and kept: the ``approve-evaluation/1``
    document, or the numbers of one candidate's report, for one choice of
    options (``evaluation.services``). A set's arrays never change, so it
    stays true until the set is deleted, and goes with it (CASCADE); its
    ``key`` also holds the candidates' names, so a renamed candidate is
    computed afresh. A few rows per set at most (the oldest make way)."""

    prediction_set = models.ForeignKey(PredictionSet, on_delete=models.CASCADE, related_name="evaluations")
    # A SHA-256 of what was computed: its kind, the candidate, the options, the names.
    key = models.CharField(max_length=64)
    # "document" or "report" (what ``value`` holds), for people reading the table.
    kind = models.CharField(max_length=20)
    # JSON text, not a JSON field: PostgreSQL's jsonb would reorder the keys,
    # and the document's order (candidates, metrics) is its own.
    value = models.TextField()
    computed_at = models.DateTimeField(default=timezone.now)
    # How long the computation took, in seconds.
    seconds = models.FloatField(default=0)

    class Meta:
        ordering = ["prediction_set", "-computed_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["prediction_set", "key"], name="evaluation_cache_unique_key")]

    def __str__(self) -> str:
        return f"{self.kind} of {self.prediction_set}"


class ElicitedMetric(models.Model):
    """A study metric each expert defines by answering pairwise questions
    (METHOD.md 7.3, ``evaluation.elicitation``): which kind of linear metric
    of the confusion matrix, and the reference candidate's class
    probabilities in a prediction set, which define the questions (the
    source's restricted Bayes-optimal classifiers). Its value for a
    candidate and an expert is that expert's metric of the candidate's
    confusion matrix."""

    class Kind(models.TextChoices):
        DIAGONAL = "diagonal", "Diagonal (weighted accuracy: which classes matter most to find)"
        OFFDIAGONAL = "offdiagonal", "Off-diagonal (cost-sensitive: which confusions cost most)"

    metric = models.OneToOneField("workspace.Metric", on_delete=models.CASCADE, related_name="elicitation")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    # RESTRICT: the questions are made from this set and this candidate's
    # predictions in it; deleting either alone is refused while an elicited
    # metric uses it (evaluation.services.prediction_set_delete and
    # workspace.services.candidate_remove say so first), deleting the study
    # takes all three.
    prediction_set = models.ForeignKey(PredictionSet, on_delete=models.RESTRICT, related_name="elicited_metrics")
    reference_candidate = models.ForeignKey(
        "workspace.Candidate", on_delete=models.RESTRICT, related_name="elicited_metrics_referencing"
    )
    epsilon = models.FloatField()
    updated_at = models.DateTimeField(auto_now=True)
    history = StudyHistory(kind="elicited_metric", scope=recorded.of_metric)

    class Meta:
        ordering = ["metric"]

    def __str__(self) -> str:
        return f"{self.metric} elicited ({self.kind})"


class ElicitationAnswers(models.Model):
    """One expert's answers to an elicited metric's questions, in order, one
    character each: ``1`` the first outcome, ``2`` the second, ``0`` no
    preference. The search is replayed from them on every request (state
    held server-side, nothing else); ``weights`` are stored once finished."""

    elicited_metric = models.ForeignKey(ElicitedMetric, on_delete=models.CASCADE, related_name="answer_sets")
    expert = models.ForeignKey("workspace.Membership", on_delete=models.CASCADE, related_name="+")
    answers = models.TextField(blank=True, default="")
    # The recovered metric's weights once every question is answered, else null.
    weights = models.JSONField(null=True, blank=True)
    # Ratios the expert typed where a search stopped at the edge of what the
    # reference's probabilities can show: {class index: ratio per 100 cases
    # of each class}, each replacing that pair's ratio in the weights.
    typed_ratios = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = StudyHistory(kind="elicitation_answers", scope=recorded.by_expert("expert"))

    class Meta:
        ordering = ["elicited_metric", "expert"]
        constraints = [
            models.UniqueConstraint(fields=["elicited_metric", "expert"], name="elicitation_answers_unique_expert"),
        ]

    def __str__(self) -> str:
        return f"{self.expert} on {self.elicited_metric}"
