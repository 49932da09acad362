"""Forms of the designer's pages: they check the shape of what was typed;
the services check the rules (unique names, phases, directions) and their
refusals are shown on the same forms (``form_add_service_errors``)."""

import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from django import forms
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User

from engine.rules import AHP_WEIGHTING_DEFAULT

from .. import limits
from ..catalogue import ATTRIBUTE_CATALOGUE
from ..limits import (
    ABSENCE_REASON_MAX_CHARS,
    ITEM_DESCRIPTION_MAX_LENGTH,
    MAX_THRESHOLD,
    NAME_MAX_LENGTH,
    QUORUM_MAX,
    STUDY_DESCRIPTION_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    UNIT_MAX_LENGTH,
    USERNAME_MAX_LENGTH,
)
from ..measurement_csv import number_parse
from ..models import AhpWeighting, Candidate, Direction, Membership, Metric, QualityAttribute
from ..services.accounts import USERNAME_TAKEN, usernames_taken


class PrefixedIds:
    """Forms that share a page give their fields distinct ids (``metric_name``,
    ``candidate_name``) so each label points at its own field; the names
    sent stay plain."""

    id_prefix = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", f"{self.id_prefix}_%s")
        super().__init__(*args, **kwargs)


def _threshold(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(
        label=label,
        min_value=0,
        max_value=MAX_THRESHOLD,
        help_text=help_text,
        widget=forms.NumberInput(attrs={"min": 0, "max": MAX_THRESHOLD, "class": "input--short"}),
    )


class StudyForm(PrefixedIds, forms.Form):
    id_prefix = "study"
    title = forms.CharField(label="Title", max_length=TITLE_MAX_LENGTH)
    description = forms.CharField(
        label="Description",
        required=False,
        max_length=STUDY_DESCRIPTION_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What is being chosen, and for what use: the experts read it first.",
    )
    attribute_threshold = _threshold(
        "Attribute vote threshold", "A complementary attribute is selected with at least this many votes."
    )
    metric_threshold = _threshold(
        "Metric vote threshold", "A metric of a selected attribute is selected with at least this many votes."
    )

    quorum = forms.IntegerField(
        label="Quorum",
        required=False,
        min_value=0,
        max_value=QUORUM_MAX,
        help_text="The fewest experts who must take part (not excluded or abstaining) for the assessment to close; "
        "0 or empty: any number.",
        widget=forms.NumberInput(attrs={"min": 0, "max": QUORUM_MAX, "class": "input--short"}),
    )

    ahp_weighting = forms.ChoiceField(
        label="AHP weights computed by",
        choices=AhpWeighting.choices,
        help_text=(
            "How an expert's AHP judgments become weights: column means (the method's own, the default), the principal "
            "eigenvector (as AHP-OS, AHPy and Expert Choice compute it) or the row geometric mean. The consistency "
            "ratio is the same for all three."
        ),
    )

    def __init__(
        self, *args: Any, thresholds_locked: str | None = None, weighting_locked: str | None = None, **kwargs: Any
    ) -> None:
        """``thresholds_locked``, ``weighting_locked``: why the thresholds or
        the AHP weighting can no longer change (shown, and the fields
        disabled), or None."""
        super().__init__(*args, **kwargs)
        self.fields["title"].widget.attrs["autocomplete"] = "off"
        if thresholds_locked:
            for name in ("attribute_threshold", "metric_threshold"):
                self.fields[name].disabled = True
                self.fields[name].help_text = thresholds_locked
        if self.is_bound and "ahp_weighting" not in self.data:
            # the new-study page does not ask: the default (clean_ahp_weighting)
            self.fields["ahp_weighting"].required = False
        if weighting_locked:
            self.fields["ahp_weighting"].disabled = True
            self.fields["ahp_weighting"].help_text = weighting_locked

    def clean_quorum(self) -> int:
        return self.cleaned_data.get("quorum") or 0

    def clean_ahp_weighting(self) -> str:
        """Not posted (the new-study page does not ask): the study's current
        weighting, or the paper's method for a new study."""
        return self.cleaned_data.get("ahp_weighting") or self.initial.get("ahp_weighting", AHP_WEIGHTING_DEFAULT)


class StudyCopyForm(PrefixedIds, forms.Form):
    """A study's copy (``bundles.study_copy``): its title (empty: "Copy of
    <title>") and what comes with the setup."""

    id_prefix = "copy"
    title = forms.CharField(
        label="Title of the new study",
        required=False,
        max_length=TITLE_MAX_LENGTH,
        help_text="Left empty: “Copy of” the study's title.",
    )
    measurements = forms.BooleanField(
        label="Copy the measurements",
        required=False,
        initial=True,
        help_text="Every candidate's measured values, with their standard errors.",
    )
    predictions = forms.BooleanField(
        label="Copy the prediction sets",
        required=False,
        initial=False,
        help_text="Every prediction set uploaded to the study, whole, with the elicited metrics' questions made "
        "from them. Without them an elicited metric becomes an ordinary one, measured as any other.",
    )

    def clean_title(self) -> str | None:
        return self.cleaned_data.get("title") or None


class TemplateForm(StudyCopyForm):
    """The new-study page's "Start from a template": any study the user
    designs (``studies``), copied as ``StudyCopyForm`` says."""

    id_prefix = "template"
    field_order = ["template", "title", "measurements", "predictions"]
    template = forms.TypedChoiceField(label="Study to start from", coerce=int, empty_value=None)

    def __init__(self, *args: Any, studies: Iterable[tuple[int, str]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["template"]).choices = [("", "Choose one of your studies"), *studies]


class BundleForm(forms.Form):
    """An ``approve-study/1`` file, read and decoded here; what it says is
    checked by the import."""

    bundle = forms.FileField(
        label="Bundle file",
        help_text="An approve-study/1 JSON file, e.g. one exported from another approve.",
        widget=forms.ClearableFileInput(attrs={"accept": ".json,application/json"}),
    )

    def clean_bundle(self) -> dict:
        upload = self.cleaned_data["bundle"]
        if upload.size > limits.IMPORT_BODY_MAX_BYTES:
            raise forms.ValidationError(f"the file is {upload.size} bytes; the limit is {limits.IMPORT_BODY_MAX_BYTES}")
        try:
            text = upload.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise forms.ValidationError("the file is not UTF-8 text: choose an approve-study/1 JSON file") from None
        problem = limits.json_depth_error(text)
        if problem:
            raise forms.ValidationError(problem)
        try:
            bundle = json.loads(text)
        except ValueError as error:
            raise forms.ValidationError(f"the file is not valid JSON ({error})") from None
        if not isinstance(bundle, dict):
            raise forms.ValidationError("the file must hold a JSON object (an approve-study/1 bundle)")
        # Whoever the bundle names, the importer designs the study (the import says so).
        return bundle


# --- setup -----------------------------------------------------------------------------


class AttributeForm(PrefixedIds, forms.Form):
    id_prefix = "attribute"
    name = forms.CharField(label="Name", max_length=NAME_MAX_LENGTH)
    kind = forms.ChoiceField(
        label="Kind",
        choices=QualityAttribute.Kind.choices,
        initial=QualityAttribute.Kind.MAIN,
        widget=forms.RadioSelect,
        help_text="Main attributes are always evaluated; complementary ones only if the experts vote for them.",
    )
    description = forms.CharField(
        label="Definition",
        required=False,
        max_length=ITEM_DESCRIPTION_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One line the experts read when they vote and prioritise.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].widget.attrs.update({"autocomplete": "off", "list": "attribute-catalogue"})


class CatalogueAttributeForm(forms.Form):
    """One attribute picked from the catalogue (METHOD.md section 2)."""

    name = forms.ChoiceField(label="Attribute", choices=[(entry.name, entry.name) for entry in ATTRIBUTE_CATALOGUE])
    kind = forms.ChoiceField(label="Kind", choices=QualityAttribute.Kind.choices)


def _bound(label: str) -> forms.CharField:
    # Text, parsed like a CSV cell: one rule for what a number is on these pages.
    return forms.CharField(
        label=label,
        required=False,
        max_length=UNIT_MAX_LENGTH,
        widget=forms.TextInput(attrs={"inputmode": "decimal", "autocomplete": "off", "class": "input--short"}),
    )


class MetricForm(PrefixedIds, forms.Form):
    id_prefix = "metric"
    attribute = forms.TypedChoiceField(label="Attribute", coerce=int)
    name = forms.CharField(label="Name", max_length=NAME_MAX_LENGTH)
    better = forms.ChoiceField(label="Direction", choices=Direction.choices, initial=Direction.HIGHER)
    unit = forms.CharField(
        label="Unit",
        required=False,
        max_length=UNIT_MAX_LENGTH,
        help_text="e.g. s, %, 1-10 (a rating).",
        widget=forms.TextInput(attrs={"class": "input--short"}),
    )
    least_acceptable = _bound("Least acceptable value")
    desired = _bound("Desired value")

    def __init__(
        self, *args: Any, attributes: Iterable[QualityAttribute] = (), range_only: str | None = None, **kwargs: Any
    ) -> None:
        """``attributes``: the study's attributes to choose from.
        ``range_only``: why only the default range can change (the other
        fields are shown disabled), or None."""
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["attribute"]).choices = [(a.pk, a.name) for a in attributes]
        self.fields["name"].widget.attrs["autocomplete"] = "off"
        self.fields["least_acceptable"].help_text = (
            "The default range experts start from: both values, or neither. For a lower-is-better metric the "
            "least acceptable value is the larger one."
        )
        if range_only:
            for name in ("attribute", "name", "better", "unit"):
                self.fields[name].disabled = True
            self.fields["name"].help_text = range_only

    def _bound_value(self, name: str) -> float | None:
        text = self.cleaned_data.get(name, "")
        if not text:
            return None
        try:
            return number_parse(text)
        except ValueError as problem:
            self.add_error(name, f"{problem}")
            return None

    def clean(self) -> dict:
        cleaned = cast(dict[str, Any], super().clean())  # Form.clean returns cleaned_data
        least, desired = self._bound_value("least_acceptable"), self._bound_value("desired")
        given = [name for name in ("least_acceptable", "desired") if cleaned.get(name)]
        if len(given) == 1:
            missing = "desired" if given == ["least_acceptable"] else "least_acceptable"
            self.add_error(missing, "give both values of the default range, or neither")
        cleaned["default_range"] = [least, desired] if least is not None and desired is not None else None
        return cleaned


class CandidateForm(PrefixedIds, forms.Form):
    id_prefix = "candidate"
    name = forms.CharField(
        label="Name", max_length=NAME_MAX_LENGTH, widget=forms.TextInput(attrs={"autocomplete": "off"})
    )
    description = forms.CharField(
        label="Description",
        required=False,
        max_length=ITEM_DESCRIPTION_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


# --- measurements --------------------------------------------------------------------------


def cell_name(candidate_id: int, metric_id: int) -> str:
    return f"cell-{candidate_id}-{metric_id}"


class MeasurementTableForm(forms.Form):
    """One text input per candidate × metric; a number, or empty for
    unmeasured. A measured value can be changed, not emptied (the service
    sets values; it removes none)."""

    def __init__(
        self,
        *args: Any,
        candidates: Iterable[Candidate] = (),
        metrics: Sequence[Metric] = (),
        values: dict[tuple[int, int], float] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.values = values or {}  # {(candidate id, metric id): value}
        self.cells = {}
        for candidate in candidates:
            for metric in metrics:
                key = (candidate.pk, metric.pk)
                name = cell_name(*key)
                self.cells[name] = (candidate, metric)
                self.fields[name] = forms.CharField(
                    label=f"{metric.name} of {candidate.name}",
                    required=False,
                    max_length=UNIT_MAX_LENGTH,
                    initial=number_text(self.values.get(key)),
                    widget=forms.TextInput(attrs={"inputmode": "decimal", "autocomplete": "off"}),
                )

    def clean(self) -> dict:
        cleaned = cast(dict[str, Any], super().clean())  # Form.clean returns cleaned_data
        changed = []
        for name, (candidate, metric) in self.cells.items():
            text = cleaned.get(name, "").strip()
            old = self.values.get((candidate.pk, metric.pk))
            if not text:
                if old is not None:
                    self.add_error(name, "a measured value can be changed, not removed: give a number")
                continue
            try:
                value = number_parse(text)
            except ValueError as problem:
                self.add_error(name, str(problem))
                continue
            if value != old:
                changed.append({"candidate": candidate.name, "metric": metric.name, "value": value})
        cleaned["measurements"] = changed
        return cleaned


def number_text(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


class MeasurementCsvForm(forms.Form):
    csv_text = forms.CharField(
        label="Paste CSV",
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        help_text="Long: a header candidate,metric,value then one row per value. Wide: a header candidate, "
        "then one column per metric name, and one row per candidate. Tabs (a paste from a spreadsheet) work too.",
    )
    csv_file = forms.FileField(
        label="Or upload a CSV file",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,.tsv,.txt,text/csv"}),
    )

    def clean(self) -> dict:
        cleaned = cast(dict[str, Any], super().clean())  # Form.clean returns cleaned_data
        if not cleaned.get("csv_text", "").strip() and not cleaned.get("csv_file"):
            self.add_error("csv_text", "paste CSV here, or choose a file below")
        elif cleaned.get("csv_text", "").strip() and cleaned.get("csv_file"):
            self.add_error("csv_file", "give the CSV once: paste it or upload a file, not both")
        return cleaned


# --- experts and invitations ------------------------------------------------------------------


class InviteForm(forms.Form):
    username = forms.CharField(
        label="Username",
        max_length=USERNAME_MAX_LENGTH,
        help_text="They see the invitation when they log in and become an expert by accepting it.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "autocapitalize": "none"}),
    )


class InviteEmailForm(forms.Form):
    email = forms.CharField(
        label="E-mail address",
        max_length=254,
        help_text="We mail them the invitation link; the account that confirmed this address (or signs in "
        "with it through single sign-on) also sees the invitation on its studies page.",
        widget=forms.EmailInput(attrs={"autocomplete": "off", "autocapitalize": "none"}),
    )


class AbsenceForm(forms.Form):
    """Exclude an expert, or mark them abstaining (workspace.services.panel)."""

    absence = forms.ChoiceField(
        label="How",
        widget=forms.RadioSelect,
        choices=[
            ("excluded", "Exclude them: they no longer take part (on leave, left the team)"),
            ("abstaining", "They abstain for the rest of the study: they may still read it"),
        ],
        initial="excluded",
        error_messages={"required": "choose how they are absent"},
    )
    reason = forms.CharField(
        label="Why",
        max_length=ABSENCE_REASON_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Recorded in the history, shown to them and on the close confirmation.",
        error_messages={"required": "say why (recorded in the history and shown to them)"},
    )


class ReminderForm(forms.Form):
    experts = forms.MultipleChoiceField(
        label="Send to",
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "choose at least one expert"},
    )
    note = forms.CharField(
        label="Your note",
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Added to the message, after what each expert still has to do.",
    )

    def __init__(self, *args: Any, experts: Sequence[Membership] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["experts"]).choices = [
            (m.user.get_username(), f"{m.user.get_username()} ({m.user.email or 'no e-mail address'})") for m in experts
        ]
        # Ticked: those an e-mail can reach (the others are listed, unticked, to choose knowingly).
        self.fields["experts"].initial = [m.user.get_username() for m in experts if m.user.email]


EMAIL_MAX_LENGTH = User._meta.get_field("email").max_length  # django.contrib.auth's column
EMAIL_HELP = "Optional. Reminders and password resets go here; without it the designer cannot reach you."


class SignupForm(UserCreationForm):
    """A new person's account, with Django's username and password rules,
    and an optional e-mail address (reminders, password resets)."""

    email = forms.EmailField(
        label="E-mail address",
        required=False,
        max_length=EMAIL_MAX_LENGTH,
        help_text=EMAIL_HELP,
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"].widget.attrs.update({"autocomplete": "username", "autocapitalize": "none"})
        self.fields["password1"].widget.attrs["autocomplete"] = "new-password"
        self.fields["password2"].widget.attrs["autocomplete"] = "new-password"

    def clean_username(self) -> str:
        """Taken also by a look-alike of an existing name (``Alice``,
        ``ａｌｉｃｅ`` beside ``alice``: ``username_key``), with the message the
        service gives; Django's own check knows only ASCII case."""
        username = self.cleaned_data.get("username") or ""
        if username and usernames_taken(usernames=[username]):
            raise forms.ValidationError(USERNAME_TAKEN)
        return username
