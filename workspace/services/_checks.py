"""Small checks every service shares. Each raises ``InvalidInput`` naming the
field before anything is written (the phase a change needs is checked by
``phases.require_phase``)."""

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from numbers import Real
from typing import Any

from django.db import router
from django.db.models import F, Max, Model, QuerySet
from django.db.models.manager import BaseManager
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engine.rules import range_direction_problem, range_width_invalid

from ..errors import InvalidInput
from ..limits import MAX_THRESHOLD
from ..models import Study


def number(value: Any, field: str) -> float:
    """A finite real number, or InvalidInput naming the field."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidInput({field: f"must be a number, got {value!r}"})
    try:
        value = float(value)
    except OverflowError:  # an integer beyond the float range, e.g. 10**400 from JSON
        raise InvalidInput({field: "must be a finite number, got an integer too large for a float"}) from None
    if not math.isfinite(value):
        raise InvalidInput({field: f"must be a finite number, got {value}"})
    return value


def expect(value: Any, kind: type | tuple[type, ...], field: str, description: str) -> Any:
    """``value`` if it is a ``kind``, or InvalidInput: ``field`` must be ``description``."""
    if not isinstance(value, kind):
        raise InvalidInput({field: f"must be {description}"})
    return value


def keys(entry: Any, field: str, required: Sequence[str], optional: Sequence[str] = ()) -> None:
    """``entry`` is an object with every ``required`` key and no key outside
    ``required`` and ``optional`` (a section of a bundle)."""
    expect(entry, dict, field, "an object")
    missing = [key for key in required if key not in entry]
    if missing:
        raise InvalidInput({f"{field}.{missing[0]}": "is required"})
    unknown = sorted(set(entry) - set(required) - set(optional))
    if unknown:
        raise InvalidInput({f"{field}.{unknown[0]}": "is not a field of this object"})


# Characters a single line of text must not hold: controls (C0, DEL, C1: CR,
# LF, NUL...), format characters (bidirectional overrides and isolates
# U+202A-U+202E and U+2066-U+2069, marks, zero-width characters U+200B-U+200D,
# U+2060, U+FEFF, soft hyphens, tags) and the line and paragraph separators.
# They break mail headers (a CR/LF in a subject) or make two names look the
# same (``J48`` and ``J48\u200b``), or one read backwards.
_NOT_ON_A_LINE = frozenset({"Cc", "Cf", "Zl", "Zp"})
# The bidirectional embeddings, overrides and isolates (LRE, RLE, PDF, LRO,
# RLO; LRI, RLI, FSI, PDI): no text holds them, a single line or many (a
# post, a description), since they make text display in an order other than
# the one it is stored and read in ("Trojan Source"). Marks (U+200E, U+200F)
# and zero-width joiners stay allowed in text of many lines.
_BIDIRECTIONAL_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def invisible_characters(value: str) -> list[str]:
    """The characters of ``value`` a single line must not hold, in order."""
    return [char for char in value if unicodedata.category(char) in _NOT_ON_A_LINE]


def _character(char: str) -> str:
    kind = {
        "\r": "a carriage return",
        "\n": "a line break",
        "\t": "a tab",
        "\x00": "a NUL character",
    }.get(char)
    if kind is None:
        category = unicodedata.category(char)
        if category in ("Zl", "Zp"):
            kind = "a line break"
        elif category == "Cc":
            kind = "a control character"
        elif _BIDIRECTIONAL_CONTROLS.match(char):
            kind = "a bidirectional control"
        else:
            kind = "an invisible character"
    return f"{kind} (U+{ord(char):04X})"


def text(value: Any, field: str, *, max_length: int, required: bool = True, multiline: bool = False) -> str:
    """Text for ``field``, stripped: at most ``max_length`` characters,
    not empty when ``required``, storable (no NUL, no lone surrogate).
    Unless ``multiline`` (a description, a post), one line of visible text:
    none of ``invisible_characters`` anywhere in it, the refusal naming the
    first; text of many lines holds no bidirectional control either (the
    same refusal). Every name, title, unit, username, label, description,
    post, round message and reason is checked here, so the pages, the API
    and a bundle import refuse the same text."""
    if not isinstance(value, str):
        raise InvalidInput({field: f"must be text, got {type(value).__name__}"})
    value = value.strip()
    if required and not value:
        raise InvalidInput({field: "must not be empty"})
    if len(value) > max_length:
        raise InvalidInput({field: f"must be at most {max_length} characters"})
    if "\x00" in value:
        # PostgreSQL cannot store it (and the query would fail, not refuse).
        raise InvalidInput({field: "must not contain NUL characters"})
    if not multiline:
        found = invisible_characters(value)
        if found:
            raise InvalidInput({field: f"must be a single line of visible text: it contains {_character(found[0])}"})
    elif control := _BIDIRECTIONAL_CONTROLS.search(value):
        raise InvalidInput({field: f"must not contain {_character(control.group())}"})
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (JSON allows "\ud800") is not text any database stores.
        raise InvalidInput({field: "must be valid Unicode text (it contains a lone surrogate)"}) from None
    return value


# A subject longer than this is cut (with an ellipsis): mail clients show
# less, and RFC 5322 advises lines under 78 characters once folded.
SUBJECT_MAX_LENGTH = 150
_SPACES = re.compile(r"\s+")


def subject_line(text: str) -> str:
    """``text`` as one line for a mail's Subject header: each line break or
    control character and each run of whitespace becomes one space, each
    bidirectional, zero-width or other format character goes (see
    ``invisible_characters``), and the whole is cut to SUBJECT_MAX_LENGTH
    characters. A study title from before titles were checked
    (``"Trial\\r\\nBcc: ..."``) then makes a plain subject instead of a
    BadHeaderError."""
    for char in set(invisible_characters(text)):
        text = text.replace(char, "" if unicodedata.category(char) == "Cf" else " ")
    line = _SPACES.sub(" ", text).strip()
    if len(line) > SUBJECT_MAX_LENGTH:
        line = line[: SUBJECT_MAX_LENGTH - 1].rstrip() + "…"
    return line


def threshold(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput({field: f"must be a whole number ≥ 0, got {value!r}"})
    if value > MAX_THRESHOLD:
        raise InvalidInput({field: f"must be at most {MAX_THRESHOLD}, got {value}"})
    return value


def names(value: Any, field: str) -> list[str]:
    """A list of distinct names. Linear in its length: a request of 40,000
    names must not cost a quadratic duplicate search."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise InvalidInput({field: "must be a list of names"})
    duplicates = sorted(name for name, count in Counter(value).items() if count > 1)
    if duplicates:
        raise InvalidInput({field: f"names given twice: {', '.join(duplicates)}"})
    return list(value)


def range_pair(value: Any, field: str, better: str) -> tuple[float, float]:
    """A (least acceptable, desired) pair consistent with the metric's direction."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise InvalidInput({field: "must be a pair [least acceptable, desired]"})
    least = number(value[0], field)
    desired = number(value[1], field)
    unbounded, empty = range_width_invalid(least, desired)
    if empty:
        raise InvalidInput({field: f"least acceptable and desired values must differ (both are {least:g})"})
    if unbounded:
        raise InvalidInput({field: f"the range from {least:g} to {desired:g} is too wide to compute with"})
    problem = range_direction_problem(least, desired, better)
    if problem:
        raise InvalidInput({field: problem})
    return least, desired


# What must happen under a study's row lock before its inputs change, one
# function of the study each, registered by the apps that copy the inputs
# later (``before_inputs_change``): the engine takes the snapshots of the
# runs launched at the current version that have none yet
# (``engine.services.runs_take_snapshots``), from the inputs as they still
# are. A registry, so that workspace does not import the engine.
_BEFORE_INPUTS_CHANGE: list[Callable[[Study], object]] = []


def before_inputs_change(hook: Callable[[Study], object]) -> None:
    """Call ``hook(study)`` in every change of a study's inputs, with its
    row lock held and before anything is written (``locked``,
    ``inputs_changed``). Registered once, in an ``AppConfig.ready``."""
    if hook not in _BEFORE_INPUTS_CHANGE:
        _BEFORE_INPUTS_CHANGE.append(hook)


def _before_change(study: Study) -> None:
    for hook in _BEFORE_INPUTS_CHANGE:
        hook(study)


def locked(study: Study) -> Study:
    """Re-read the study under a row lock so concurrent transitions and
    inputs serialise on it, and bump its ``input_version``: whoever takes
    the lock may change what a run's snapshot holds, so a launch after it
    takes a new snapshot rather than copying an earlier run's (a refused
    change rolls its bump back with the rest).

    One statement: the UPDATE locks the row (against other changes and
    against launches, which hold it ``FOR SHARE``) and returns it. Then, the
    lock held, the hooks registered with ``before_inputs_change`` (runs
    launched but not yet given their snapshot get it now). So call it
    before the change writes anything, as every service does first."""
    table, key, version = Study._meta.db_table, Study._meta.pk.column, Study._meta.get_field("input_version").column
    columns = ", ".join(f'"{field.column}"' for field in Study._meta.concrete_fields)
    sql = f'UPDATE "{table}" SET "{version}" = "{version}" + 1 WHERE "{key}" = %s RETURNING {columns}'  # noqa: S608
    found = list(Study.objects.db_manager(router.db_for_write(Study)).raw(sql, [study.pk]))
    if not found:
        raise Study.DoesNotExist("Study matching query does not exist.")
    _before_change(found[0])
    return found[0]


def inputs_changed(*, studies: Iterable[int]) -> None:
    """Bump the ``input_version`` of the studies whose ids are given: the one
    call for a writer of a snapshot's inputs that does not go through
    ``locked`` (the admin, an account's username). Call it in the change's
    transaction, before it writes (the hooks of ``before_inputs_change``
    run here too, under the row locks the UPDATE takes)."""
    ids = set(studies)
    Study.objects.filter(pk__in=ids).update(input_version=F("input_version") + 1)
    if _BEFORE_INPUTS_CHANGE and ids:
        for study in Study.objects.filter(pk__in=ids).order_by("pk"):
            _before_change(study)


def next_position(queryset: QuerySet[Any] | BaseManager[Any]) -> int:
    return (queryset.all().aggregate(top=Max("position"))["top"] or 0) + 1


def unique_name(
    model: type[Model], study: Study, name: str, *, field: str = "name", exclude_pk: int | None = None
) -> str:
    """``name`` if no other item of ``model`` in the study has it."""
    clash = model._default_manager.filter(study=study, name=name)
    if exclude_pk is not None:
        clash = clash.exclude(pk=exclude_pk)
    if clash.exists():
        raise InvalidInput({field: f"{model._meta.verbose_name} {name!r} already exists in this study"})
    return name


def refuse_unknown(changes: Iterable[str], allowed: Iterable[str]) -> None:
    unknown = sorted(set(changes) - set(allowed))
    if unknown:
        raise InvalidInput(dict.fromkeys(unknown, "cannot be changed here"))


def apply_changes(
    instance: Model, changes: Mapping[str, Any], cleaners: Mapping[str, Callable[[Any], Any]]
) -> list[str]:
    """The ``*_update`` pattern: refuse fields that cannot change here, set
    each changed field to its cleaned value, and return the fields to save."""
    refuse_unknown(changes, cleaners)
    for name, value in changes.items():
        setattr(instance, name, cleaners[name](value))
    return list(changes)


def moment(value: Any, field: str) -> datetime:
    """A bundle's date and time (ISO 8601; without an offset: UTC), or ``InvalidInput`` on ``field``."""
    if not isinstance(value, str):
        raise InvalidInput({field: "must be a date and time (ISO 8601)"})
    parsed = parse_datetime(value)
    if parsed is None:
        raise InvalidInput({field: f"must be a date and time (ISO 8601), got {value!r}"})
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)


def iso_moment(when: datetime) -> str:
    """``when`` as a bundle writes it: ISO 8601, UTC as ``Z``."""
    return when.isoformat().replace("+00:00", "Z")
