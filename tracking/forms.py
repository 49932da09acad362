"""Forms of the MLflow pages: they check the shape of what was typed; the
services (``tracking.services``) check the rest, and their refusals are
shown on the same forms."""

from typing import Any

from django import forms

from workspace import limits
from workspace.forms.widgets import ManyOptionsSelect
from workspace.models import Metric

from .models import experiment_words
from .remote import Experiment
from .services import FILTER_MAX_LENGTH, KEY_MAX_LENGTH, PATTERN_MAX_LENGTH, TOKEN_MAX_LENGTH, URI_MAX_LENGTH


class ConnectionForm(forms.Form):
    tracking_uri = forms.CharField(
        label="Tracking URI",
        max_length=URI_MAX_LENGTH,
        help_text="http(s)://host:port of the MLflow tracking server, or file:/… for a local store.",
    )
    token = forms.CharField(
        label="Token",
        required=False,
        max_length=TOKEN_MAX_LENGTH,
        widget=forms.PasswordInput(render_value=False),
        help_text="A bearer token, kept encrypted. Left empty: the one already stored for this URI is kept.",
    )


class RunSearchForm(forms.Form):
    """The experiment and filter whose runs are previewed (a GET form).
    ``experiments``: the server's, offered as a picker (each by its name
    and id); None: the name or id is typed."""

    experiment = forms.CharField(label="Experiment", max_length=KEY_MAX_LENGTH, help_text="Its name or id.")
    filter = forms.CharField(
        label="Filter",
        required=False,
        max_length=FILTER_MAX_LENGTH,
        help_text="MLflow's search syntax, e.g. tags.stage = 'candidate'.",
    )

    def __init__(self, *args: Any, experiments: list[Experiment] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if experiments is None:
            return
        choices = [
            ("", "Choose an experiment"),
            *((experiment_value(e), experiment_words(e.name, e.experiment_id)) for e in experiments),
        ]
        typed = self.data.get("experiment") if self.is_bound else None
        if isinstance(typed, str) and typed and typed not in {value for value, _ in choices}:
            choices.append((typed, typed))  # a name or id given in the address: kept, and checked by the services
        field = self.fields["experiment"]
        field.widget = ManyOptionsSelect(choices=choices)
        field.help_text = f"The server's {len(experiments)} experiment{'' if len(experiments) == 1 else 's'}, by name."


def experiment_value(experiment: Experiment) -> str:
    """What the picker sends for an experiment: its name (which the
    services look up first), or its id when the name is too long to send."""
    name = experiment.name
    return name if name and len(name) <= KEY_MAX_LENGTH and name.strip() == name else experiment.experiment_id


ON_EXISTING_CHOICES = [
    ("", "Choose…"),
    ("update", "Update that candidate's measurements"),
    ("new", "Import it as a new candidate"),
    ("skip", "Skip this run"),
]


class ImportForm(RunSearchForm):
    """The mapping: for each study metric, the MLflow metric key giving its
    values (``key_<metric id>``, empty: not imported) and, to check it, the
    key's unit (``unit_<metric id>``); the step; how candidates are named
    and matched; the prediction artifacts' path pattern and positive label
    (``classes``: the artifacts' classes, once an import found they carry
    scores: a choice of them); and, for each run named like an existing
    candidate (``named_like``: ``{run id: (run name, candidate)}``), what
    to do with it (``on_existing_<run id>``)."""

    step = forms.IntegerField(label="Step", required=False, min_value=0, help_text="Empty: each metric's latest value.")
    name_tag = forms.CharField(
        label="Name and match candidates by tag",
        required=False,
        max_length=KEY_MAX_LENGTH,
        help_text="Empty: by the run's name. A run named like an existing candidate is asked about.",
    )
    artifact_pattern = forms.CharField(
        label="Prediction artifact pattern",
        required=False,
        max_length=PATTERN_MAX_LENGTH,
        help_text="e.g. predictions/*.csv: each run's one matching artifact becomes its prediction set.",
    )
    positive = forms.CharField(
        label="Positive label",
        required=False,
        max_length=limits.PREDICTIONS_MAX_LABEL_LENGTH,
        help_text="Needed when the artifacts have a score column: the label whose score it is (as on the "
        "Predictions tab's upload).",
    )

    def __init__(
        self,
        *args: Any,
        metrics: list[Metric],
        keys: list[str],
        named_like: dict[str, tuple[str, str]] | None = None,
        classes: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.experiment_fields = ["experiment", "filter"]
        self.metric_fields: list[str] = []
        self.classes = classes
        if classes:
            self.fields["positive"] = forms.ChoiceField(
                label="Positive label",
                required=False,
                choices=[("", "Choose the positive label"), *((label, label) for label in classes)],
                help_text=f"The artifacts have a score column: the score of which class? Their classes, in order: "
                f"{', '.join(classes)}.",
            )
        self.match_fields: list[str] = []
        for run_id, (run_name, candidate) in (named_like or {}).items():
            name = f"on_existing_{run_id}"
            self.fields[name] = forms.ChoiceField(
                label=f"Run {run_name} ({run_id[:8]}) is named like the candidate {candidate}",
                choices=ON_EXISTING_CHOICES,
                error_messages={"required": "choose: update that candidate, import it as a new one, or skip it"},
                help_text=f"Update: its values replace {candidate}'s. New: another candidate, named with the run id.",
            )
            self.match_fields.append(name)
        choices = [("", "(not imported)"), *((key, key) for key in keys)]
        for metric in metrics:
            name = f"key_{metric.pk}"
            unit = f" ({metric.unit})" if metric.unit else ""
            self.fields[name] = forms.ChoiceField(
                label=f"{metric.name}{unit}", required=False, choices=choices, initial=_guess(metric.name, keys)
            )
            self.fields[f"unit_{metric.pk}"] = forms.CharField(
                label=f"Unit of the MLflow key for {metric.name}",
                required=False,
                max_length=limits.UNIT_MAX_LENGTH,
                help_text=f"Checked against {metric.unit or 'no unit'}; empty: not checked.",
            )
            self.metric_fields.append(name)
        self.metrics = metrics

    @property
    def search_bound(self) -> list[forms.BoundField]:
        return [self[name] for name in self.experiment_fields]

    @property
    def match_bound(self) -> list[forms.BoundField]:
        return [self[name] for name in self.match_fields]

    def on_existing(self) -> dict[str, str] | None:
        """The ``on_existing`` the service takes: ``{run id: choice}``, None when no run asked."""
        prefix = "on_existing_"
        chosen = {name[len(prefix) :]: self.cleaned_data.get(name) for name in self.match_fields}
        return {run_id: choice for run_id, choice in chosen.items() if choice} or None

    @property
    def metric_bound(self) -> list[tuple[forms.BoundField, forms.BoundField]]:
        """Each metric's key field and unit field."""
        return [(self[name], self[name.replace("key_", "unit_", 1)]) for name in self.metric_fields]

    def mapping(self) -> list[dict[str, str]]:
        """The ``mapping`` the service takes: the metrics given a key."""
        mapping = []
        for metric in self.metrics:
            key, unit = self.cleaned_data.get(f"key_{metric.pk}"), self.cleaned_data.get(f"unit_{metric.pk}")
            if key:
                mapping.append({"key": key, "metric": metric.name, **({"unit": unit} if unit else {})})
        return mapping

    def field_names(self) -> dict[str, str]:
        """The service's paths of the mapping (``mapping[0].unit``) as this
        form's fields (``unit_<metric id>``), for its refusals."""
        names: dict[str, str] = {}
        mapped = [metric for metric in self.metrics if self.cleaned_data.get(f"key_{metric.pk}")]
        for index, metric in enumerate(mapped):
            for part, field in (("key", "key"), ("metric", "key"), ("unit", "unit")):
                names[f"mapping[{index}].{part}"] = f"{field}_{metric.pk}"
        for name in self.match_fields:
            names[f"on_existing.{name.removeprefix('on_existing_')}"] = name
        return names

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.metrics and not any(cleaned.get(name) for name in self.metric_fields):
            self.add_error(self.metric_fields[0], "map at least one MLflow metric key to a study metric")
        return cleaned


def _guess(name: str, keys: list[str]) -> str:
    """The key spelled like the metric's name (case and separators aside), or ""."""

    def plain(word: str) -> str:
        return "".join(ch for ch in word.lower() if ch.isalnum())

    return next((key for key in keys if plain(key) == plain(name)), "")
