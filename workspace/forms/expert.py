"""Forms of the expert's steps. Each checks the shape of what was typed and
builds the payload of the step's service, in the shape its API twin takes
(``PUT /api/v1/studies/{id}/my/...``); the service checks the rules. Each
also maps the service's field paths (``weights.Accuracy``,
``judgments[2]``, ``ranges.AUC``) back to the form's fields, so a refusal
is shown under the field it is about."""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

from django import forms
from django.utils.choices import normalize_choices

from engine.rules import PERCENT_TOTAL, PERCENT_TOTAL_SLACK, scale_point_of
from engine.rules import SCALE_POINTS as ENGINE_SCALE_POINTS

from ..errors import InvalidInput
from ..models import Membership, Method, Metric, QualityAttribute
from ..selectors import number_out
from ..services.panel import ABSENCES
from .widgets import PlainNumberInput


def _number_input(**attrs: Any) -> forms.NumberInput:
    return PlainNumberInput(attrs={"step": "any", "inputmode": "decimal", **attrs})


def _add_errors(form: forms.Form, error: InvalidInput, to_field: dict[str, str], labels: dict[str, str]) -> None:
    """Each of the service's messages under the form field its path maps to
    (``to_field``); a path with no field goes above the form, named by
    ``labels`` (or as the service wrote it)."""
    for path, messages in error.errors.items():
        name = to_field.get(path)
        if name is not None:
            form.add_error(name, list(messages))
        elif path == "non_field_errors":
            form.add_error(None, list(messages))
        else:
            form.add_error(None, [f"{labels.get(path, path)}: {message}" for message in messages])


# --- votes ----------------------------------------------------------------------------


class VotesForm(forms.Form):
    """The complementary attributes and the metrics voted for, by name."""

    def __init__(self, *args: Any, ballot: list[QualityAttribute], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        complementary = [a for a in ballot if a.kind == QualityAttribute.Kind.COMPLEMENTARY]
        self.fields["attributes"] = forms.MultipleChoiceField(
            label="Complementary attributes",
            required=False,
            choices=[(a.name, a.name) for a in complementary],
            widget=forms.CheckboxSelectMultiple,
        )
        self.fields["metrics"] = forms.MultipleChoiceField(
            label="Metrics",
            required=False,
            choices=[(m.name, m.name) for a in ballot for m in a.ballot_metrics],
            widget=forms.CheckboxSelectMultiple,
        )

    def chosen(self, name: str) -> set[str]:
        """The names ticked now (as posted, or as stored)."""
        return set(self[name].value() or ())

    def payload(self) -> dict[str, list[str]]:
        return {"attributes": self.cleaned_data["attributes"], "metrics": self.cleaned_data["metrics"]}

    def add_service_errors(self, error: InvalidInput) -> None:
        _add_errors(self, error, {"attributes": "attributes", "metrics": "metrics"}, {})


# --- priorities -------------------------------------------------------------------------

# The 17 points of a pair's row (engine.rules.SCALE_POINTS, descending), from
# "left item extremely more important" to "right item extremely more
# important"; each value is left over right, written "9" ... "1" ... "1/9".
SCALE_POINTS = [str(point) for point in reversed(ENGINE_SCALE_POINTS)]
# Saaty's verbal scale (METHOD.md 3), even numbers in between.
AHP_MEANINGS = {
    2: "equally to moderately",
    3: "moderately",
    4: "moderately to strongly",
    5: "strongly",
    6: "strongly to very strongly",
    7: "very strongly",
    8: "very strongly to extremely",
    9: "extremely",
}
LOCAL_EQUAL = "equal"


def scale_point(value: float) -> tuple[str, bool]:
    """The scale point nearest ``value`` as the form's choice, and whether
    ``value`` lies on it: the engine's rule (engine.rules.scale_point_of)."""
    nearest, on_point = scale_point_of(value)
    return str(nearest), on_point


def _strength(point: str) -> tuple[int, bool]:
    """A point's strength (1 to 9) and whether it favours the left item."""
    value = Fraction(point)
    return int(value if value >= 1 else 1 / value), value > 1


# Each point of the scale's strength and side, computed once: the
# priorities step labels 17 points of each of some eighty pairs.
_STRENGTHS = {point: _strength(point) for point in SCALE_POINTS}


def point_label(method: str, left: str, right: str, point: str) -> str:
    """What choosing ``point`` on the pair's row says, in words."""
    strength, left_first = _STRENGTHS.get(point) or _strength(point)
    if strength == 1:
        return f"{left} and {right} {'equally important' if method == 'ahp' else 'indifferent'} (1)"
    subject, other = (left, right) if left_first else (right, left)
    if method == "ahp":
        return f"{subject} {AHP_MEANINGS[strength]} more important than {other} ({strength})"
    if strength == 9:
        return f"{subject} most strictly preferred to {other} (9)"
    return f"{subject} preferred to {other}, intensity {strength} of 9"


@dataclass
class Section:
    """One prioritisation on the page: the attributes (``key`` "") or the
    metrics of one attribute (``key`` "local-<attribute pk>-")."""

    key: str
    items: list  # QualityAttribute or Metric, in order
    attribute: QualityAttribute | None = None
    pairs: list[tuple] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pairs = [(a, b) for i, a in enumerate(self.items) for b in self.items[i + 1 :]]

    @property
    def local_attribute(self) -> QualityAttribute:
        """The attribute whose metrics a local section weighs."""
        assert self.attribute is not None, "the section of the attributes has no attribute"
        return self.attribute

    @property
    def method_field(self) -> str:
        return f"{self.key}method"

    def direct_field(self, item: Any) -> str:
        return f"{self.key}direct-{item.pk}"

    def pair_field(self, method: str, a: Any, b: Any) -> str:
        return f"{self.key}{method}-{a.pk}-{b.pk}"

    @property
    def names(self) -> list[str]:
        return [item.name for item in self.items]


# A pair's choices, normalised once (Django's normalize_choices, as a
# ChoiceField would for each field).
_SCALE_CHOICES = normalize_choices([(point, point) for point in SCALE_POINTS])


class ScalePointField(forms.ChoiceField):
    """One pair's judgment: a point of the scale, or nothing. Every pair
    shares the same normalised choices: a ChoiceField normalises its own,
    17 for each of some eighty pairs at 20 metrics (its widget's too)."""

    def __init__(self, **kwargs: Any) -> None:
        forms.Field.__init__(self, **kwargs)  # ChoiceField's own __init__ normalises the choices
        self._choices = self.widget._choices = _SCALE_CHOICES


class PrioritiesForm(forms.Form):
    """Direct weights, AHP or LPR judgments over the selected attributes, and
    a local prioritisation (or the equal split) per attribute with several
    selected metrics. All three methods' fields are on the page (without
    JavaScript they are all shown); only the chosen method's are used."""

    def __init__(
        self,
        *args: Any,
        attributes: list[QualityAttribute],
        metrics: list[Metric],
        stored: dict | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.main = Section("", attributes)
        by_attribute: dict[int, list[Metric]] = {}
        for metric in metrics:
            by_attribute.setdefault(metric.attribute_id, []).append(metric)
        self.locals = [
            Section(f"local-{a.pk}-", by_attribute[a.pk], attribute=a)
            for a in attributes
            if len(by_attribute.get(a.pk, ())) > 1
        ]
        self.fields["method"] = forms.ChoiceField(label="Method", choices=Method.choices, widget=forms.RadioSelect)
        for section in self.sections:
            if section.attribute is not None:
                self.fields[section.method_field] = forms.ChoiceField(
                    label=f"How to split {section.local_attribute.name}",
                    choices=[(LOCAL_EQUAL, "Equal split"), *Method.choices],
                    widget=forms.RadioSelect,
                )
            for item in section.items:
                self.fields[section.direct_field(item)] = forms.FloatField(
                    label=f"Weight of {item.name} (%)", required=False, widget=_number_input(min="0")
                )
            for method in ("ahp", "lpr"):
                for a, b in section.pairs:
                    self.fields[section.pair_field(method, a, b)] = ScalePointField(
                        label=f"{a.name} or {b.name} ({method.upper()})", required=False
                    )
        # Prefilled from what is stored (the API's GET shape).
        self.initial = self.initial_from(stored, self.sections)
        self.off_scale = self.initial.pop("_off_scale")

    @property
    def sections(self) -> list[Section]:
        return [self.main, *self.locals]

    # -- prefill from what is stored (the API's GET shape)

    @classmethod
    def initial_from(cls, stored: dict | None, sections: list[Section]) -> dict[str, Any]:
        main, *local_sections = sections
        initial: dict[str, Any] = {"method": Method.AHP}
        off_scale: list[str] = []
        if stored is not None:
            cls._initial_section(initial, off_scale, main, stored)
        local_stored = (stored or {}).get("metric_priorities", {})
        for section in local_sections:
            local = local_stored.get(section.local_attribute.name)
            initial[section.method_field] = LOCAL_EQUAL
            if local is not None:
                cls._initial_section(initial, off_scale, section, local)
        initial["_off_scale"] = off_scale
        return initial

    @staticmethod
    def _initial_section(initial: dict, off_scale: list[str], section: Section, stored: dict) -> None:
        method = stored["method"]
        initial[section.method_field] = method
        by_name = {item.name: item for item in section.items}
        if method == Method.DIRECT:
            # Direct weights are proportions (METHOD.md 3): whatever scale
            # they were given in (the API and bundles often use shares of 1),
            # the page shows them as the percentages they amount to.
            weights = {name: value for name, value in stored.get("weights", {}).items() if name in by_name}
            total = math.fsum(weights.values())
            for name, value in weights.items():
                initial[section.direct_field(by_name[name])] = number_out(round(value / total * 100, 10))
            return
        order = {name: position for position, name in enumerate(section.names)}
        for row, column, value in stored.get("judgments", []):
            if row not in order or column not in order:
                continue
            if order[row] > order[column]:
                row, column, value = column, row, 1 / value
            point, exact = scale_point(value)
            initial[section.pair_field(method, by_name[row], by_name[column])] = point
            if not exact:
                off_scale.append(f"{row} / {column}: {number_out(value):.4g} is shown as the nearest point, {point}")

    # -- the payload of services.priorities_set

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())  # Form.clean returns cleaned_data
        for section in self.sections:
            method = cleaned.get(section.method_field)
            for name in self.section_fields(section, method):
                if cleaned.get(name) in (None, ""):
                    self.add_error(name, self._missing_message(section, method, name))
        return cleaned

    def _missing_message(self, section: Section, method: str | None, name: str) -> str:
        if method == Method.DIRECT:
            return "Give a weight (a positive percentage)."
        return "Choose a point on the scale for this pair."

    def section_fields(self, section: Section, method: str | None) -> list[str]:
        """The fields the chosen method of ``section`` reads, in order."""
        if method == Method.DIRECT:
            return [section.direct_field(item) for item in section.items]
        if method in (Method.AHP, Method.LPR):
            return [section.pair_field(method, a, b) for a, b in section.pairs]
        return []

    def section_payload(self, section: Section, values: dict[str, Any]) -> dict[str, Any] | None:
        """``{"method", "weights" | "judgments"}`` of ``section`` from
        ``values`` (cleaned data), or None for the equal split."""
        method = values.get(section.method_field)
        if method == Method.DIRECT:
            return {
                "method": method,
                "weights": {item.name: values[section.direct_field(item)] for item in section.items},
            }
        if method in (Method.AHP, Method.LPR):
            judgments = []
            for a, b in section.pairs:
                value = Fraction(values[section.pair_field(method, a, b)])
                # Kept on the scale's integers: "b over a is 3" rather than 1/3.
                judgments.append(
                    [a.name, b.name, number_out(float(value))]
                    if value >= 1
                    else [b.name, a.name, number_out(float(1 / value))]
                )
            return {"method": method, "judgments": judgments}
        return None

    def payload(self) -> dict[str, Any]:
        payload = self.section_payload(self.main, self.cleaned_data)
        assert payload is not None, "the attributes' method is a required field"
        local = {}
        for section in self.locals:
            section_payload = self.section_payload(section, self.cleaned_data)
            if section_payload is not None:
                local[section.local_attribute.name] = section_payload
        return {**payload, "metric_priorities": local}

    def answered(self, section: Section) -> tuple[dict[str, Any] | None, int, int]:
        """For the live result: the section's payload if every field its
        method reads is valid, and how many of them are."""
        values = getattr(self, "cleaned_data", {})
        names = self.section_fields(section, values.get(section.method_field))
        given = [name for name in names if values.get(name) not in (None, "") and name not in self.errors]
        if names and len(given) == len(names):
            return self.section_payload(section, values), len(given), len(names)
        return None, len(given), len(names)

    # -- the service's refusals, under their fields

    def field_map(self, section: Section, prefix: str) -> dict[str, str]:
        method = self.cleaned_data.get(section.method_field)
        paths = {f"{prefix}method": section.method_field}
        for item in section.items:
            paths[f"{prefix}weights.{item.name}"] = section.direct_field(item)
        if method in (Method.AHP, Method.LPR):
            for position, (a, b) in enumerate(section.pairs):
                paths[f"{prefix}judgments[{position}]"] = section.pair_field(method, a, b)
        return paths

    def add_service_errors(self, error: InvalidInput) -> None:
        paths = self.field_map(self.main, "")
        labels = {"weights": "Direct weights", "judgments": "Judgments"}
        for section in self.locals:
            prefix = f"metric_priorities.{section.local_attribute.name}"
            paths.update(self.field_map(section, f"{prefix}."))
            paths[prefix] = section.method_field
            labels[f"{prefix}.weights"] = f"Weights of the metrics of {section.local_attribute.name}"
            labels[f"{prefix}.judgments"] = f"Judgments on the metrics of {section.local_attribute.name}"
        _add_errors(self, error, paths, labels)


# --- ranges ----------------------------------------------------------------------------


class RangesForm(forms.Form):
    """The least acceptable and desired value of each selected metric; both
    empty leaves the metric out (its default range applies)."""

    def __init__(self, *args: Any, metrics: list[Metric], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.metrics = metrics
        for metric in metrics:
            unit = f" ({metric.unit})" if metric.unit else ""
            self.fields[f"least-{metric.pk}"] = forms.FloatField(
                label=f"{metric.name}: least acceptable{unit}", required=False, widget=_number_input()
            )
            self.fields[f"desired-{metric.pk}"] = forms.FloatField(
                label=f"{metric.name}: desired{unit}", required=False, widget=_number_input()
            )

    @staticmethod
    def initial_from(stored: dict[str, list[float]], metrics: list[Metric]) -> dict[str, Any]:
        initial = {}
        for metric in metrics:
            pair = stored.get(metric.name) or metric.default_range
            if pair is not None:
                initial[f"least-{metric.pk}"], initial[f"desired-{metric.pk}"] = map(number_out, pair)
        return initial

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())  # Form.clean returns cleaned_data
        for metric in self.metrics:
            least, desired = f"least-{metric.pk}", f"desired-{metric.pk}"
            if least in self.errors or desired in self.errors:
                continue
            given = [cleaned.get(name) is not None for name in (least, desired)]
            if any(given) and not all(given):
                empty = desired if given[0] else least
                self.add_error(empty, "Give both values, or leave both empty to use the default range.")
        return cleaned

    def pairs(self, values: Mapping[str, Any]) -> dict[Metric, list[float]]:
        """The ranges given in ``values``: both bounds valid numbers."""
        pairs = {}
        for metric in self.metrics:
            least, desired = values.get(f"least-{metric.pk}"), values.get(f"desired-{metric.pk}")
            if least is not None and desired is not None:
                pairs[metric] = [number_out(least), number_out(desired)]
        return pairs

    def payload(self) -> dict[str, list[float]]:
        return {metric.name: pair for metric, pair in self.pairs(self.cleaned_data).items()}

    def add_service_errors(self, error: InvalidInput) -> None:
        _add_errors(self, error, {f"ranges.{m.name}": f"least-{m.pk}" for m in self.metrics}, {"ranges": "Ranges"})


# --- peer weights -----------------------------------------------------------------------


# Under an absent expert's field: the method drops their row and column of V
# and rescales the rest, so whatever is given here does not count.
_ABSENT_PEER_HELP = (
    "{name} is {how} this study: this weight is not used (the method leaves them out and rescales the "
    "other weights), but the row must still add up to 100."
)


class PeerWeightsForm(forms.Form):
    """A percentage for every expert of the study, oneself included."""

    def __init__(self, *args: Any, experts: list[Membership], me: Membership, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.experts = experts
        for expert in experts:
            username = expert.user.get_username()
            label = f"{username}, self-confidence" if expert.pk == me.pk else username
            self.fields[f"peer-{expert.pk}"] = forms.FloatField(
                label=f"{label} (%)",
                widget=_number_input(min="0", max="100", **{"class": "peer-weight"}),
                help_text=_ABSENT_PEER_HELP.format(name=username, how=ABSENCES[Membership.Absence(expert.absence)])
                if expert.absence
                else "",
            )

    @staticmethod
    def initial_from(stored: dict[str, float], experts: list[Membership]) -> dict[str, Any]:
        # Stored as shares of 1; shown as percentages, rounded only against
        # binary noise (0.07 * 100 is 7.000000000000001).
        return {
            f"peer-{e.pk}": number_out(round(stored[e.user.get_username()] * 100, 10))
            for e in experts
            if e.user.get_username() in stored
        }

    @staticmethod
    def total_complete(total: float | None) -> bool:
        """A total of percentages that adds up (PERCENT_TOTAL, within PERCENT_TOTAL_SLACK)."""
        return total is not None and abs(total - PERCENT_TOTAL) <= PERCENT_TOTAL_SLACK

    def total(self) -> float | None:
        values = [self.cleaned_data.get(f"peer-{e.pk}") for e in self.experts]
        numbers = [value for value in values if value is not None]
        return math.fsum(numbers) if len(numbers) == len(values) else None

    def payload(self) -> dict[str, float]:
        return {e.user.get_username(): self.cleaned_data[f"peer-{e.pk}"] / 100 for e in self.experts}

    def add_service_errors(self, error: InvalidInput) -> None:
        paths = {f"weights.{e.user.get_username()}": f"peer-{e.pk}" for e in self.experts}
        total = self.total()
        if "weights" in error.errors and total is not None and not self.total_complete(total):
            message = f"the weights add up to {total:g}%, not {PERCENT_TOTAL}%"
            error = InvalidInput({**error.errors, "weights": [message]})
        _add_errors(self, error, paths, {"weights": "Total"})
