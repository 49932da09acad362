"""The evaluation pages' forms: they check the shape of what was typed; the
services check the rest and name the field they refuse."""

from typing import Any, cast

from django import forms

from workspace.forms.widgets import ManyOptionsSelect
from workspace.models import Candidate, Metric

from . import report
from .elicited import ANSWER_CHOICES
from .models import ElicitedMetric, MetricComputation, PredictionSet
from .services import ELICITATION_EPSILON_DEFAULT, computation_parameter_names


class PredictionUploadForm(forms.Form):
    file = forms.FileField(
        label="Predictions file (CSV or Parquet)",
        help_text="approve-predictions/1: a CSV with a header row, then one row per candidate and test instance; "
        "or the same columns in a Parquet file.",
    )
    candidate = forms.ChoiceField(
        label="For one candidate",
        required=False,
        widget=ManyOptionsSelect,  # a study's thousand candidates
        help_text="Leave empty when the file has a candidate column naming each row's candidate.",
    )
    positive = forms.CharField(
        label="Positive label",
        required=False,
        max_length=1000,
        help_text="For a binary task: the label that counts as positive (needed for scores, precision and recall).",
    )

    def __init__(self, *args: Any, candidates: list[Candidate], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["candidate"]).choices = [("", "The file names its candidates")] + [
            (c.name, c.name) for c in candidates
        ]


THRESHOLD_CHOICES = list(report.THRESHOLD_NAMES.items())

DEFAULTS = report.Options()


class ComputationForm(forms.Form):
    """A study metric's computation from predictions and its parameters.
    Every parameter field is shown; only those of the chosen computation are
    kept (each computation lists its own)."""

    computation = forms.ChoiceField(label="Compute from predictions")
    threshold_method = forms.ChoiceField(
        label="Threshold method",
        choices=THRESHOLD_CHOICES,
        initial=DEFAULTS.threshold_method,
        help_text="How scores become labels when the predictions have no y_pred column (binary tasks).",
    )
    threshold_value = forms.FloatField(label="Fixed threshold", initial=DEFAULTS.threshold_value)
    threshold_sensitivity = forms.FloatField(
        label="Target sensitivity", initial=DEFAULTS.threshold_sensitivity, min_value=0, max_value=1
    )
    use_threshold = forms.BooleanField(
        label="Derive labels from scores even where y_pred is given", required=False, initial=DEFAULTS.use_threshold
    )
    alpha = forms.FloatField(label="α (Relevance Score)", initial=DEFAULTS.alpha)
    beta = forms.FloatField(label="β (Relevance Score)", initial=DEFAULTS.beta)
    root = forms.FloatField(label="Root N (A3R)", initial=DEFAULTS.root)
    acc_d = forms.FloatField(label="AccD (ARR)", initial=DEFAULTS.acc_d)

    def __init__(self, *args: Any, metric: Metric, candidates: list[Candidate], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.metric = metric
        same_way = [c for c in report.COMPUTATIONS.values() if c.better == metric.better]
        cast(forms.ChoiceField, self.fields["computation"]).choices = [(c.key, c.name) for c in same_way]
        self.fields[
            "computation"
        ].help_text = (
            f"{metric.name} is {metric.better}-is-better, so only computations that run the same way are offered."
        )
        self.candidate_fields = []
        for candidate in candidates:
            name = f"n_parameters_{candidate.pk}"
            self.fields[name] = forms.IntegerField(
                label=f"Parameters of {candidate.name} (AIC, BIC)", required=False, min_value=0
            )
            self.candidate_fields.append((candidate, name))

    def parameters(self) -> dict:
        """The chosen computation's parameters, as the service takes them."""
        data = self.cleaned_data
        parameters = {}
        for name in computation_parameter_names(data["computation"]):
            if name == "n_parameters":
                parameters[name] = {c.name: data[f] for c, f in self.candidate_fields if data.get(f) is not None}
            else:
                parameters[name] = data[name]
        return parameters

    @classmethod
    def initial_for(cls, mapping: MetricComputation | None, candidates: list[Candidate]) -> dict:
        """A form's initial values from a metric's stored mapping."""
        if mapping is None:
            return {}
        initial = {"computation": mapping.computation, **mapping.parameters}
        counts = initial.pop("n_parameters", {})
        for candidate in candidates:
            if candidate.name in counts:
                initial[f"n_parameters_{candidate.pk}"] = counts[candidate.name]
        return initial


class ReportOptionsForm(forms.Form):
    """The options of a report page (GET): how scores become labels, and the
    parameters of A3R and ARR.

    Choosing a threshold method applies it: labels are then derived from the
    scores even where the file has ``y_pred`` (the page says which labels it
    shows, or why a threshold cannot be applied). ``use_threshold`` is
    still read from a link (the fixed method, or the one chosen) but not
    shown: the method's choice says it."""

    threshold_method = forms.ChoiceField(
        label="Threshold method",
        choices=[("", "None: the file's y_pred (without one, a fixed threshold)"), *THRESHOLD_CHOICES],
        required=False,
        help_text="A method chosen derives the labels from the scores, even where the file has y_pred.",
    )
    threshold_value = forms.FloatField(label="Fixed threshold", required=False)
    use_threshold = forms.BooleanField(label="Derive labels from scores even where y_pred is given", required=False)
    root = forms.FloatField(label="Root N (A3R)", required=False)
    acc_d = forms.FloatField(label="AccD (ARR)", required=False)

    def given(self) -> dict:
        """The options filled in, for ``services.report_options`` to check
        (none when the form is invalid: the defaults are then shown)."""
        if not self.is_valid():
            return {}
        # Not "if value": a threshold of 0 is a value.
        given = {key: value for key, value in self.cleaned_data.items() if value is not None and value != ""}
        if given.get("threshold_method"):
            given["use_threshold"] = True  # a method chosen is applied
        if given.get("use_threshold") is False:
            del given["use_threshold"]  # an unticked box is the default, not a choice
        return given


class ElicitationDesignForm(forms.Form):
    """How a study metric is elicited from the experts (``elicited_metric_set``)."""

    kind = forms.ChoiceField(label="Kind of metric", choices=ElicitedMetric.Kind.choices)
    prediction_set = forms.TypedChoiceField(label="Prediction set the questions come from", coerce=int)
    reference_candidate = forms.ChoiceField(
        label="Reference candidate",
        widget=ManyOptionsSelect,
        help_text="Its class probabilities in the set (proba:<label> columns, or a binary score between 0 and 1) "
        "make the questions' outcomes.",
    )
    epsilon = forms.FloatField(
        label="Tolerance ε",
        initial=ELICITATION_EPSILON_DEFAULT,
        help_text="Smaller is more precise and asks more questions: 4 (k − 1) ⌈log2(1/ε)⌉ for the diagonal kind "
        "(56 for three classes at 0.01, 40 at 0.05).",
    )

    def __init__(self, *args: Any, sets: list[PredictionSet], candidates: list[Candidate], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["prediction_set"]).choices = [
            (s.pk, f"{s.name} ({s.row_count:,} rows)") for s in sets
        ]
        cast(forms.ChoiceField, self.fields["reference_candidate"]).choices = [(c.name, c.name) for c in candidates]


class ElicitationAnswerForm(forms.Form):
    """One answer: which outcome, and the number of the question it answers."""

    answer = forms.ChoiceField(choices=[(a, a) for a in ANSWER_CHOICES])
    question = forms.IntegerField(min_value=1)


class ElicitationRatioForm(forms.Form):
    """A ratio typed where a search stopped at the edge (the service checks
    the class and the ratio against the answers); ``untype`` takes it back."""

    class_label = forms.CharField(max_length=200)
    ratio = forms.FloatField(required=False)
    untype = forms.BooleanField(required=False)
