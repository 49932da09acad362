"""A history record in words (issue 31): "Clara Clinician changed their
range for Sensitivity from 0.9–0.98 to 0.85–0.98", "Dana Designer excluded
Bob from the panel: on leave", "Dana Designer renamed the metric “AUC” to
“ROC AUC”".

Every kind of record (``workspace.history.KIND_NAMES``) has a ``Wording``:
what its creation and deletion say, and what a change of each of its columns
says; columns that only the program reads (``updated_at``, a lease, a
position's counter) say nothing. A change no wording knows of is said as
"changed the <column in words> of <the row> from … to …", a time as a date
and a clock time, never a column's name or an ISO timestamp. People are
named as they are shown elsewhere: their full name, else their username.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from ..history import KIND_WORDS
from ..templatetags.numbers import significant


@dataclass(frozen=True)
class Person:
    user_id: int | None
    name: str


def person_name(user: Any) -> str:
    """How a person is named on the pages: their full name, else their username."""
    return (user.get_full_name() or user.get_username()).strip() or user.get_username()


_NOW = object()


def column_of(model: Any, attname: str) -> Any:
    """The model's column stored as ``attname`` (``metric_id``: the foreign key ``metric``)."""
    for column in model._meta.concrete_fields:
        if column.attname == attname:
            return column
    return model._meta.get_field(attname)


@dataclass(frozen=True)
class Facts:
    """One record and what naming it needs: the record before it (changes),
    the columns that differ, the names of the rows its ids point at, the
    study's members by membership id, and who made it."""

    kind: str
    action: str  # created, changed, deleted
    record: Any
    previous: Any
    changed: tuple[str, ...]
    names: Mapping[tuple[type, int], str]
    people: Mapping[int, Person]
    actor_id: int | None

    def now(self, name: str) -> Any:
        return getattr(self.record, name)

    def before(self, name: str) -> Any:
        return getattr(self.previous, name) if self.previous is not None else None

    def named(self, name: str, value: Any = _NOW) -> str:
        """The name of the row a foreign key (``metric_id``) points at."""
        pk = self.now(name) if value is _NOW else value
        related = column_of(self.record.instance_type, name).related_model
        if related._meta.label == "workspace.Membership":
            return self.person(pk)
        found = self.names.get((related, pk)) if pk is not None else None
        return found if found is not None else f"a deleted {related._meta.verbose_name}"

    def numbered(self, name: str, noun: str) -> str:
        """A row named by its number ("run 3", "revision round 2"), or "a deleted run"."""
        related = column_of(self.record.instance_type, name).related_model
        pk = self.now(name)
        found = self.names.get((related, pk)) if pk is not None else None
        return f"{noun} {found}" if found is not None else f"a deleted {noun}"

    def person(self, membership_id: int | None) -> str:
        found = self.people.get(membership_id) if membership_id is not None else None
        return found.name if found is not None else "an expert no longer in the study"

    def is_actor(self, membership_id: int | None) -> bool:
        found = self.people.get(membership_id) if membership_id is not None else None
        return found is not None and self.actor_id is not None and found.user_id == self.actor_id

    def own(self, membership_id: int | None = None) -> str:
        """ "their" when the person whose input it is made the change, else "Bob's"."""
        membership_id = self.record.history_expert_id if membership_id is None else membership_id
        return "their" if self.is_actor(membership_id) else f"{self.person(membership_id)}'s"


# --- values in words ---------------------------------------------------------------


def number(value: Any) -> str:
    return "none" if value is None else significant(float(value))


def span(low: Any, high: Any) -> str:
    return "none" if low is None or high is None else f"{number(low)}–{number(high)}"


def when(value: dt.datetime) -> str:
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    return f"{local:%-d %b %Y, %H:%M}"


def quoted(value: Any) -> str:
    return "nothing" if value in (None, "") else f"“{value}”"


def shown(facts: Facts, name: str, value: Any) -> str:
    """A column's value in words: a choice's label, a number rounded as the
    pages round, a time as a date and clock time, yes/no, a row by name."""
    column = column_of(facts.record.instance_type, name)
    if column.choices and value in dict(column.flatchoices):
        return str(dict(column.flatchoices)[value])
    if value is None or value == "":
        return "none"
    if column.is_relation:
        return facts.named(name, value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return number(value)
    if isinstance(value, dt.datetime):
        return when(value)
    if isinstance(value, dt.date):
        return f"{value:%-d %b %Y}"
    return quoted(value)


def label(facts: Facts, name: str, value: Any) -> str:
    """A choice's label within a sentence: "lower is better", "AHP pairwise
    comparisons" (a first capital kept only before another)."""
    text = shown(facts, name, value)
    return text[0].lower() + text[1:] if len(text) > 1 and text[1].islower() else text


def joined(clauses: list[str]) -> str:
    return clauses[0] if len(clauses) == 1 else f"{', '.join(clauses[:-1])} and {clauses[-1]}"


# --- what each kind says -------------------------------------------------------------

Said = Callable[[Facts], str]
# (facts, old value, new value) -> the clause, or None: nothing to say.
FieldSaid = Callable[[Facts, Any, Any], "str | None"]
# Never said: the program's bookkeeping, the row's parent.
QUIET = frozenset({"id", "study_id", "created_at", "updated_at", "expert_id", "prioritisation_id", "rater_id"})


@dataclass(frozen=True)
class Wording:
    subject: Said  # the row as a noun phrase: "the metric “AUC”", "their range for AUC"
    created: Said
    deleted: Said
    fields: Mapping[str, FieldSaid] = field(default_factory=dict)
    quiet: frozenset[str] = frozenset()
    # A change read as one (a range's two bounds): its clauses, or None to go field by field.
    whole: Callable[[Facts], list[str] | None] | None = None


def _generic(facts: Facts, name: str, subject: str) -> str:
    column = column_of(facts.record.instance_type, name)
    words = str(column.verbose_name)
    if column.get_internal_type() == "JSONField":
        return f"changed the {words} of {subject}"
    old, new = facts.before(name), facts.now(name)
    if facts.previous is None:
        return f"set the {words} of {subject} to {shown(facts, name, new)}"
    return f"changed the {words} of {subject} from {shown(facts, name, old)} to {shown(facts, name, new)}"


def _changed(wording: Wording, facts: Facts) -> list[str]:
    if wording.whole is not None:
        whole = wording.whole(facts)
        if whole is not None:
            return whole
    clauses = []
    for name in facts.changed:
        if name in QUIET or name in wording.quiet:
            continue
        say = wording.fields.get(name)
        clause = (
            say(facts, facts.before(name), facts.now(name)) if say else _generic(facts, name, wording.subject(facts))
        )
        if clause:
            clauses.append(clause)
    return clauses or [f"updated {wording.subject(facts)}"]


def clauses(facts: Facts) -> list[str]:
    """What the record says, as clauses whose subject is who made it."""
    wording = WORDINGS.get(facts.kind)
    if wording is None:
        noun = KIND_WORDS.get(facts.kind, ("", "a record"))[1]
        return [f"{facts.action} {noun}"]
    if facts.action == "created":
        return [wording.created(facts)]
    if facts.action == "deleted":
        return [wording.deleted(facts)]
    return _changed(wording, facts)


def sentence(facts: Facts, actor: str) -> str:
    """The record as one sentence: "<actor> <clauses>."."""
    text = f"{actor} {joined(clauses(facts))}"
    return text if text.endswith((".", "?", "!")) else f"{text}."


# --- the study and its design -------------------------------------------------------

_PHASE_MOVES = {
    ("draft", "voting"): "opened voting",
    ("voting", "assessment"): "closed voting and opened the assessment",
    ("assessment", "closed"): "closed the assessment",
    ("closed", "assessment"): "reopened the assessment",
    ("assessment", "voting"): "reopened voting",
    ("voting", "draft"): "took the study back to its draft",
}


def _phase(facts: Facts, old: Any, new: Any) -> str:
    move = _PHASE_MOVES.get((old, new))
    return (
        move or f"moved the study from the {label(facts, 'phase', old)} phase to the {label(facts, 'phase', new)} phase"
    )


def _from_to(what: str) -> FieldSaid:
    """ "changed <what> from <old> to <new>", each value in words."""

    def say(facts: Facts, old: Any, new: Any) -> str:
        return f"changed {what} from {number(old)} to {number(new)}"

    return say


def _choice_from_to(what: str, name: str) -> FieldSaid:
    def say(facts: Facts, old: Any, new: Any) -> str:
        return f"changed {what} from {label(facts, name, old)} to {label(facts, name, new)}"

    return say


STUDY = Wording(
    subject=lambda f: "the study",
    created=lambda f: f"created the study {quoted(f.now('title'))}",
    deleted=lambda f: f"deleted the study {quoted(f.now('title'))}",
    fields={
        "title": lambda f, old, new: f"renamed the study from {quoted(old)} to {quoted(new)}",
        "description": lambda f, old, new: "changed the study's description",
        "phase": _phase,
        "attribute_threshold": _from_to("the votes an attribute needs to be selected"),
        "metric_threshold": _from_to("the votes a metric needs to be selected"),
        "ahp_weighting": _choice_from_to("how AHP weights are computed", "ahp_weighting"),
        "quorum": _from_to("the quorum (the fewest experts who must take part)"),
        "designer_id": lambda f, old, new: f"handed the study to {f.named('designer_id')}",
    },
)


def _item(noun: str) -> Said:
    return lambda f: f"the {noun} {f.now('name')}"


def _renamed(noun: str) -> FieldSaid:
    return lambda f, old, new: f"renamed the {noun} {quoted(old)} to {quoted(new)}"


def _selected(noun: str) -> FieldSaid:
    def say(facts: Facts, old: Any, new: Any) -> str:
        return f"marked the {noun} {facts.now('name')} as {'selected' if new else 'not selected'} by the vote"

    return say


def _design_fields(noun: str) -> dict[str, FieldSaid]:
    """What a change to an attribute, a metric or a candidate says."""
    return {
        "name": _renamed(noun),
        "description": lambda f, old, new: f"changed the description of the {noun} {f.now('name')}",
        "position": lambda f, old, new: f"moved the {noun} {f.now('name')} in the list",
        "is_selected": _selected(noun),
    }


ATTRIBUTE = Wording(
    subject=_item("attribute"),
    created=lambda f: (
        f"added the attribute {f.now('name')} ({label(f, 'kind', f.now('kind')).replace(' (', ', ')[:-1]})"
    ),
    deleted=lambda f: f"removed the attribute {f.now('name')}",
    fields={
        **_design_fields("attribute"),
        "kind": lambda f, old, new: f"made the attribute {f.now('name')} {label(f, 'kind', new)}",
    },
)


def _default_range(facts: Facts) -> list[str] | None:
    bounds = {"default_least_acceptable", "default_desired"}
    if not bounds & set(facts.changed):
        return None
    before = span(facts.before("default_least_acceptable"), facts.before("default_desired"))
    now = span(facts.now("default_least_acceptable"), facts.now("default_desired"))
    rest = [name for name in facts.changed if name not in bounds]
    others = _changed(_METRIC_FIELDS, _only(facts, rest)) if rest else []
    return [f"changed the default range of the metric {facts.now('name')} from {before} to {now}", *others]


def _only(facts: Facts, names: list[str]) -> Facts:
    return Facts(**{**facts.__dict__, "changed": tuple(names)})


_METRIC_FIELDS = Wording(
    subject=_item("metric"),
    created=lambda f: f"added the metric {f.now('name')} to the attribute {f.named('attribute_id')}",
    deleted=lambda f: f"removed the metric {f.now('name')}",
    fields={
        **_design_fields("metric"),
        "attribute_id": lambda f, old, new: (
            f"moved the metric {f.now('name')} to the attribute {f.named('attribute_id')}"
        ),
        "better": lambda f, old, new: f"made the metric {f.now('name')} {label(f, 'better', new)}",
        "unit": lambda f, old, new: (
            f"changed the unit of the metric {f.now('name')} from {quoted(old)} to {quoted(new)}"
        ),
    },
)
METRIC = Wording(**{**_METRIC_FIELDS.__dict__, "whole": _default_range})

CANDIDATE = Wording(
    subject=_item("candidate"),
    created=lambda f: f"added the candidate {f.now('name')}",
    deleted=lambda f: f"removed the candidate {f.now('name')}",
    fields=_design_fields("candidate"),
)


def _value_of(f: Facts) -> str:
    return f"{f.named('candidate_id')}'s {f.named('metric_id')}"


MEASUREMENT = Wording(
    subject=_value_of,
    created=lambda f: f"entered {_value_of(f)}: {number(f.now('value'))}",
    deleted=lambda f: f"removed {_value_of(f)} ({number(f.now('value'))})",
    fields={
        "value": lambda f, old, new: f"changed {_value_of(f)} from {number(old)} to {number(new)}",
        "standard_error": lambda f, old, new: (
            f"changed the standard error of {_value_of(f)} from {number(old)} to {number(new)}"
        ),
    },
    quiet=frozenset({"candidate_id", "metric_id"}),
)


# --- the panel -------------------------------------------------------------------------


def _member(f: Facts) -> str:
    found = f.people.get(f.record.id)
    return found.name if found is not None else f.named("user_id")


def _member_is_actor(f: Facts) -> bool:
    return f.actor_id is not None and f.now("user_id") == f.actor_id


def _member_own(f: Facts) -> str:
    return "their" if _member_is_actor(f) else f"{_member(f)}'s"


def _joined_panel(f: Facts) -> str:
    if f.now("role") == "designer":
        return "became the study's designer" if _member_is_actor(f) else f"made {_member(f)} the study's designer"
    if _member_is_actor(f):
        return "joined the panel"
    pending = ", pending their acceptance" if f.now("status") == "pending" else ""
    return f"added {_member(f)} to the panel{pending}"


def _because(f: Facts) -> str:
    reason = f.now("absence_reason")
    return f": {reason}" if reason else ""


def _absence(f: Facts, old: Any, new: Any) -> str:
    if new == "excluded":
        return f"excluded {_member(f)} from the panel{_because(f)}"
    if new == "abstaining":
        who = "abstained" if _member_is_actor(f) else f"marked {_member(f)} as abstaining"
        return f"{who} for the rest of the study{_because(f)}"
    return f"readmitted {_member(f)} to the panel"


def _absence_reason(f: Facts, old: Any, new: Any) -> str | None:
    if "absence" in f.changed or not f.now("absence"):
        return None
    return f"changed why {_member(f)} is absent to {quoted(new)}"


def _status(f: Facts, old: Any, new: Any) -> str:
    if new == "active":
        return "accepted the invitation and joined the panel" if _member_is_actor(f) else f"made {_member(f)} active"
    return f"made {_member(f)} pending their acceptance"


def _unreached(f: Facts, old: Any, new: Any) -> str | None:
    return f"could not reach {_member(f)} with the reminder: {new}" if new else None


MEMBERSHIP = Wording(
    subject=lambda f: f"{_member(f)}'s membership",
    created=_joined_panel,
    deleted=lambda f: "left the panel" if _member_is_actor(f) else f"removed {_member(f)} from the panel",
    fields={
        "absence": _absence,
        "absence_reason": _absence_reason,
        "ranges_confirmed_at": lambda f, old, new: (
            f"confirmed {_member_own(f)} ranges" if new else f"marked {_member_own(f)} ranges as not confirmed"
        ),
        "inputs_confirmed_at": lambda f, old, new: f"confirmed {_member_own(f)} imported inputs" if new else None,
        "status": _status,
        "inputs_imported_by_id": lambda f, old, new: f"imported inputs in {_member(f)}'s name" if new else None,
        "last_reminded_at": lambda f, old, new: f"sent {_member(f)} a reminder" if new else None,
        "last_reminder_unreached": _unreached,
    },
    quiet=frozenset({"absent_since", "user_id"}),
)


# --- an expert's inputs -------------------------------------------------------------------


def _vote(noun: str, item: str) -> Wording:
    return Wording(
        subject=lambda f: f"{f.own()} vote for the {noun} {f.named(item)}",
        created=lambda f: (
            f"voted for the {noun} {f.named(item)}"
            if f.is_actor(f.now("expert_id"))
            else f"recorded {f.own()} vote for the {noun} {f.named(item)}"
        ),
        deleted=lambda f: f"withdrew {f.own()} vote for the {noun} {f.named(item)}",
    )


_METHODS = {"direct": "direct weights", "ahp": "AHP pairwise comparisons", "lpr": "a Large Preference Relation"}


def _method(value: Any) -> str:
    return _METHODS.get(value, str(value))


def _priorities(of: Callable[[Facts], str]) -> Wording:
    """An expert's prioritisation of the attributes, or of one attribute's metrics."""
    return Wording(
        subject=lambda f: f"{f.own()} {of(f)}",
        created=lambda f: f"set {f.own()} {of(f)} by {_method(f.now('method'))}",
        deleted=lambda f: f"cleared {f.own()} {of(f)}",
        fields={
            "method": lambda f, old, new: f"switched {f.own()} {of(f)} from {_method(old)} to {_method(new)}",
            "consistency_ratio": lambda f, old, new: (
                f"updated {f.own()} {of(f)}, consistency ratio now {number(new)}" if new is not None else None
            ),
            "inconsistency_acknowledged_at": lambda f, old, new: (
                f"chose to keep {f.own()} inconsistent judgments in {f.own()} {of(f)}" if new else None
            ),
        },
        quiet=frozenset({"result", "attribute_id"}),
    )


def _pair(f: Facts) -> str:
    return f"{f.named('row_id')} against {f.named('column_id')}"


def _judgment(of: str) -> Wording:
    return Wording(
        subject=lambda f: f"{f.own()} judgment of {_pair(f)}",
        created=lambda f: f"judged {_pair(f)} at {number(f.now('value'))} in {f.own()} {of}",
        deleted=lambda f: f"removed {f.own()} judgment of {_pair(f)} from {f.own()} {of}",
        fields={
            "value": lambda f, old, new: f"changed {f.own()} judgment of {_pair(f)} from {number(old)} to {number(new)}"
        },
        quiet=frozenset({"row_id", "column_id"}),
    )


def _weight(of: str, item: str) -> Wording:
    def typed(f: Facts, old: Any, new: Any) -> str | None:
        if "weight" in f.changed or new is None:
            return None
        return f"changed the value {f.own()} typed for {f.named(item)} from {number(old)} to {number(new)}"

    return Wording(
        subject=lambda f: f"{f.own()} weight of {f.named(item)}",
        created=lambda f: f"gave {f.named(item)} a weight of {number(f.now('weight'))} in {f.own()} {of}",
        deleted=lambda f: f"removed {f.own()} weight of {f.named(item)} from {f.own()} {of}",
        fields={
            "weight": lambda f, old, new: (
                f"changed {f.own()} weight of {f.named(item)} from {number(old)} to {number(new)}"
            ),
            "given": typed,
        },
        quiet=frozenset({item}),
    )


def _range_of(f: Facts) -> str:
    return f"{f.own()} range for {f.named('metric_id')}"


def _range_changed(f: Facts) -> list[str]:
    before = span(f.before("least_acceptable"), f.before("desired"))
    now = span(f.now("least_acceptable"), f.now("desired"))
    if f.previous is None:
        return [f"set {_range_of(f)} to {now}"]
    return [f"changed {_range_of(f)} from {before} to {now}"]


RANGE = Wording(
    subject=_range_of,
    created=lambda f: f"set {_range_of(f)} to {span(f.now('least_acceptable'), f.now('desired'))}",
    deleted=lambda f: f"removed {_range_of(f)} (the default range applies)",
    whole=_range_changed,
)


def _peer(f: Facts) -> str:
    rater, ratee = f.now("rater_id"), f.now("ratee_id")
    whom = "themselves" if rater == ratee and f.is_actor(rater) else f.named("ratee_id")
    return f"{f.own(rater)} peer weight for {whom}"


PEER_WEIGHT = Wording(
    subject=_peer,
    created=lambda f: f"set {_peer(f)} to {number(f.now('weight'))}",
    deleted=lambda f: f"removed {_peer(f)}",
    fields={"weight": lambda f, old, new: f"changed {_peer(f)} from {number(old)} to {number(new)}"},
    quiet=frozenset({"ratee_id"}),
)


# --- invitations, runs, rounds ---------------------------------------------------------------


def _invitation(f: Facts) -> str:
    username = f.now("username")
    return f"the invitation to {username}" if username else "an invitation link"


_INVITATION_STATUS = {"accepted": "accepted", "declined": "declined", "revoked": "revoked", "pending": "reopened"}

INVITATION = Wording(
    subject=_invitation,
    created=lambda f: (
        f"invited {f.now('username')} to the panel" if f.now("username") else "created an invitation link"
    ),
    deleted=lambda f: f"deleted {_invitation(f)}",
    fields={
        "status": lambda f, old, new: f"{_INVITATION_STATUS.get(new, 'changed')} {_invitation(f)}",
        "expires_at": lambda f, old, new: f"made {_invitation(f)} valid until {when(new)}" if new else None,
    },
    quiet=frozenset({"decided_at", "accepted_by_id", "membership_id", "created_by_id"}),
)


def _run(f: Facts) -> str:
    return f"run {f.now('number')}"


def _run_status(f: Facts, old: Any, new: Any) -> str:
    if new == "failed":
        error = f.now("error")
        return f"recorded that {_run(f)} failed" + (f": {error}" if error else "")
    moves = {"queued": "queued {} again", "running": "started {}", "succeeded": "completed {}"}
    return moves.get(new, "updated {}").format(_run(f))


RUN = Wording(
    subject=_run,
    created=lambda f: f"launched {_run(f)}",
    deleted=lambda f: f"deleted {_run(f)}",
    fields={"status": _run_status},
    quiet=frozenset(
        {"error", "launched_at", "started_at", "finished_at", "attempts", "duration_seconds", "revision_round"}
        | {"number", "launched_by_id"}
    ),
)


def _round(f: Facts) -> str:
    return f"revision round {f.now('number')}"


def _round_message(f: Facts) -> str:
    message = f.now("message")
    return f" with the message {quoted(message)}" if message else ""


REVISION_ROUND = Wording(
    subject=_round,
    created=lambda f: f"opened {_round(f)}{_round_message(f)}",
    deleted=lambda f: f"deleted {_round(f)}",
    fields={
        "closed_at": lambda f, old, new: f"closed {_round(f)}" if new else f"reopened {_round(f)}",
        "message": lambda f, old, new: f"changed the message of {_round(f)} to {quoted(new)}",
    },
    quiet=frozenset({"opened_at", "opened_by_id", "closed_by_id", "number"}),
)


def _response(f: Facts) -> str:
    reason = f.now("reason")
    step = label(f, "step", f.now("step"))
    done = "revised" if f.now("action") == "revised" else "confirmed"
    because = f": {quoted(reason)}" if reason else ""
    return f"{done} {f.own()} {step} in {f.numbered('round_id', 'revision round')}{because}"


ROUND_RESPONSE = Wording(
    subject=lambda f: f"{f.own()} answer to {f.numbered('round_id', 'revision round')}",
    created=_response,
    deleted=lambda f: f"withdrew {f.own()} answer to {f.numbered('round_id', 'revision round')}",
    fields={"action": lambda f, old, new: _response(f), "reason": lambda f, old, new: _response(f)},
    quiet=frozenset({"round_id", "step", "responded_at"}),
)


# --- predictions, computations, elicitation ---------------------------------------------------


def _set(f: Facts) -> str:
    return f"the prediction set {f.now('name')}"


PREDICTION_SET = Wording(
    subject=_set,
    created=lambda f: f"uploaded {_set(f)} ({number(f.now('row_count'))} rows)",
    deleted=lambda f: f"deleted {_set(f)}",
    fields={
        "name": lambda f, old, new: f"renamed the prediction set {quoted(old)} to {quoted(new)}",
        "positive_label": lambda f, old, new: f"changed the positive label of {_set(f)} to {quoted(new)}",
    },
    quiet=frozenset({"uploaded_at", "uploaded_by_id", "row_count", "byte_count", "labels", "folds", "context_columns"}),
)


def _computed(f: Facts) -> str:
    return f"how {f.named('metric_id')} is computed"


COMPUTATION = Wording(
    subject=_computed,
    created=lambda f: f"chose to compute {f.named('metric_id')} from predictions ({f.now('computation')})",
    deleted=lambda f: f"stopped computing {f.named('metric_id')} from predictions",
    fields={
        "computation": lambda f, old, new: f"changed {_computed(f)} from {old} to {new}",
        "parameters": lambda f, old, new: f"changed the settings of {_computed(f)}",
    },
    quiet=frozenset({"metric_id"}),
)


def _source_changed(f: Facts) -> list[str]:
    return [
        f"recomputed {_value_of(f)} from the prediction set {f.now('prediction_set_name')}: {number(f.now('value'))}"
    ]


MEASUREMENT_SOURCE = Wording(
    subject=lambda f: f"where {_value_of(f)} was computed from",
    created=lambda f: (
        f"computed {_value_of(f)} from the prediction set {f.now('prediction_set_name')}: {number(f.now('value'))}"
    ),
    deleted=lambda f: f"removed the record of how {_value_of(f)} was computed",
    whole=_source_changed,
)


def _elicited(f: Facts) -> str:
    return f"the elicitation of {f.named('metric_id')}"


def _kind_short(f: Facts, value: Any) -> str:
    return label(f, "kind", value).split(" (")[0]


ELICITED_METRIC = Wording(
    subject=_elicited,
    created=lambda f: f"made {f.named('metric_id')} an elicited metric ({_kind_short(f, f.now('kind'))})",
    deleted=lambda f: f"stopped eliciting {f.named('metric_id')}",
    fields={
        "kind": lambda f, old, new: f"changed {_elicited(f)} from {_kind_short(f, old)} to {_kind_short(f, new)}",
        "prediction_set_id": lambda f, old, new: (
            f"made the questions of {_elicited(f)} come from the prediction set {f.named('prediction_set_id')}"
        ),
        "reference_candidate_id": lambda f, old, new: (
            f"made {f.named('reference_candidate_id')} the reference candidate of {_elicited(f)}"
        ),
        "epsilon": lambda f, old, new: f"changed the tolerance ε of {_elicited(f)} from {number(old)} to {number(new)}",
    },
    quiet=frozenset({"metric_id"}),
)


def _answers(f: Facts) -> str:
    return f"{f.own()} answers about {f.named('elicited_metric_id')}"


def _answered(f: Facts, old: Any, new: Any) -> str:
    count = len(new or "")
    return f"recorded {f.own()} answers about {f.named('elicited_metric_id')} ({count} so far)"


ELICITATION_ANSWERS = Wording(
    subject=_answers,
    created=lambda f: f"began {_answers(f)}",
    deleted=lambda f: f"deleted {_answers(f)}",
    fields={
        "answers": _answered,
        "weights": lambda f, old, new: f"finished {_answers(f)}" if new is not None else None,
    },
    quiet=frozenset({"elicited_metric_id"}),
)


# --- MLflow ---------------------------------------------------------------------------------------


def _experiment(f: Facts) -> str:
    return f"the MLflow experiment {f.now('experiment_name') or f.now('experiment_id')}"


def _import_status(f: Facts, old: Any, new: Any) -> str:
    done = {"succeeded": "finished", "failed": "recorded the failure of", "running": "started"}
    return f"{done.get(new, 'queued')} the import from {_experiment(f)}"


MLFLOW_CONNECTION = Wording(
    subject=lambda f: "the MLflow connection",
    created=lambda f: f"connected the study to MLflow at {f.now('tracking_uri')}",
    deleted=lambda f: "disconnected the study from MLflow",
    fields={
        "tracking_uri": lambda f, old, new: f"changed the MLflow connection to {new}",
        "checked_at": lambda f, old, new: (
            f"checked the MLflow connection ({number(f.now('experiment_count'))} experiments found)"
        ),
    },
    quiet=frozenset({"experiment_count"}),
)
MLFLOW_IMPORT = Wording(
    subject=lambda f: f"the import from {_experiment(f)}",
    created=lambda f: f"imported runs from {_experiment(f)}",
    deleted=lambda f: f"deleted the import from {_experiment(f)}",
    fields={
        "status": _import_status,
        "runs_read": lambda f, old, new: (
            None
            if "status" in f.changed
            else (f"read {number(new)} of {number(f.now('runs_total'))} runs from {_experiment(f)}")
        ),
    },
    quiet=frozenset({"request", "outcome", "error", "runs_total", "imported_at", "imported_by_id"})
    | frozenset({"experiment_id", "experiment_name"}),
)
MLFLOW_PUBLICATION = Wording(
    subject=lambda f: f"the publication of {f.numbered('run_id', 'run')} to MLflow",
    created=lambda f: f"published {f.numbered('run_id', 'run')} to MLflow",
    deleted=lambda f: f"removed the publication of {f.numbered('run_id', 'run')} to MLflow",
    fields={"times": lambda f, old, new: f"published {f.numbered('run_id', 'run')} to MLflow again"},
    quiet=frozenset({"published_at", "published_by_id", "tagged", "summary_run_id", "run_id"})
    | frozenset({"experiment_id", "experiment_name", "tracking_uri"}),
)

#: Every kind's wording (a kind without one is said generically).
WORDINGS: dict[str, Wording] = {
    "study": STUDY,
    "membership": MEMBERSHIP,
    "attribute": ATTRIBUTE,
    "metric": METRIC,
    "candidate": CANDIDATE,
    "measurement": MEASUREMENT,
    "attribute_vote": _vote("attribute", "attribute_id"),
    "metric_vote": _vote("metric", "metric_id"),
    "attribute_prioritisation": _priorities(lambda f: "attribute priorities"),
    "attribute_judgment": _judgment("attribute priorities"),
    "attribute_weight": _weight("attribute priorities", "attribute_id"),
    "metric_prioritisation": _priorities(lambda f: f"priorities of the metrics of {f.named('attribute_id')}"),
    "metric_judgment": _judgment("metric priorities"),
    "metric_weight": _weight("metric priorities", "metric_id"),
    "range": RANGE,
    "peer_weight": PEER_WEIGHT,
    "invitation": INVITATION,
    "run": RUN,
    "prediction_set": PREDICTION_SET,
    "computation": COMPUTATION,
    "measurement_source": MEASUREMENT_SOURCE,
    "elicited_metric": ELICITED_METRIC,
    "elicitation_answers": ELICITATION_ANSWERS,
    "revision_round": REVISION_ROUND,
    "round_response": ROUND_RESPONSE,
    "mlflow_connection": MLFLOW_CONNECTION,
    "mlflow_import": MLFLOW_IMPORT,
    "mlflow_publication": MLFLOW_PUBLICATION,
}

#: Where a change came from, in words (the History tab's *From*).
SOURCE_WORDS = {
    "page": "the site",
    "api": "the API",
    "admin": "the admin",
    "import": "an import",
    "command": "a command",
    "task": "a background task",
    "system": "the system",
}


def field_words(record: Any, name: str) -> str:
    """A column's name in words ("least acceptable", "metric"): the
    details under a sentence."""
    column = column_of(record.instance_type, name)
    return str(column.verbose_name).capitalize()
