"""Workspace's typed extension points. The apps above it (evaluation, the
engine's runs app, tracking) register into them in their
``AppConfig.ready()``, so workspace never imports them (docs/architecture.md,
"Layers"). Each registry is filled once at start-up and read afterwards.

- ``STUDY_CONTENTS``: rows another app keeps for a study (a ``study``
  foreign key), counted where the study is shown or deleted: the engine
  registers its runs as ``run_count``.
- ``BUNDLE_SECTIONS``: sections another app adds to a study bundle
  (``approve-study/1``, docs/formats.md): evaluation adds
  ``prediction_sets`` and ``elicited_metrics``.
- ``MISSING_INPUTS``: what else an expert must give before the assessment
  closes (evaluation: the elicited metrics not yet answered).
- ``EXPERT_INPUTS``: an expert's inputs kept by another app, shown with
  theirs when an invitation carries inputs (evaluation:
  ``elicitation_answers``).
- ``EXPERT_QUESTIONS``: questions an expert answers as steps after the four
  (evaluation's elicited metrics): the steps, the to-do, and the expert's
  own values of those metrics that the ranges step previews.
- ``VALUE_SOURCES``: where measurements came from, marked on the
  measurements table's cells and summarised under it (evaluation: computed
  from predictions; tracking: imported from MLflow).
- ``MEASUREMENT_SECTIONS``: more of the measurements page, for the
  candidates it shows (evaluation: the elicited metrics' spreads across
  the experts, ``elicited_spreads``).
- ``CANDIDATE_KEEPERS``: why a candidate cannot be removed (evaluation:
  an elicited metric's questions are made from its predictions, its
  reference candidate): ``candidate_remove`` refuses with it, and the
  setup page and the removal's confirmation say it instead of offering
  the removal.
- ``SCHEMA_COMPONENTS``: JSON-Schema components another app adds to the
  OpenAPI document (evaluation: ``EvaluationDocument``), each given as a
  function called when the schema is built, so that registering imports
  nothing of the API's (drf-spectacular, the app's serializers).
- ``TOKEN_SECOND_FACTORS``: what the API's token endpoint (username and
  password) must also check before it makes a token (accounts: a current
  two-factor code, ``otp_code``, for a user who has two-factor sign-in).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet

if TYPE_CHECKING:
    from .models import Membership, Metric, Study

# key (the count's name in a page's context, e.g. "run_count") -> the rows
STUDY_CONTENTS: dict[str, Callable[[], QuerySet]] = {}


def study_content_register(key: str, rows: Callable[[], QuerySet]) -> None:
    """Count ``rows()`` (a queryset of a model with a ``study`` foreign key)
    per study under ``key``. A key is registered once."""
    if key in STUDY_CONTENTS:
        raise ImproperlyConfigured(f"A study content is already registered as {key!r}.")
    STUDY_CONTENTS[key] = rows


class _Export(Protocol):
    def __call__(
        self, *, study: "Study", metrics: Sequence[str], experts: Sequence[str], every_set: bool = False
    ) -> dict: ...


class _SetupImport(Protocol):
    def __call__(
        self, *, study: "Study", bundle: dict, metrics: "dict[str, Metric]", max_rows: int | None
    ) -> object: ...


class _AnswersImport(Protocol):
    def __call__(self, *, answers: "dict[str, dict[Membership, Any]]", state: object) -> None: ...


@dataclass(frozen=True)
class BundleSection:
    """Sections of a study bundle that another app writes and reads.

    ``export`` gives the sections of a study whose ``metrics`` (names) are
    the app's (the bundle reads which: a metric's ``elicitation``), and
    with ``every_set`` (a study's copy) every prediction set of the study,
    even without such metrics;
    ``setup_import`` stores them in the draft and returns what
    ``answers_import`` needs in the assessment, where it gets each metric's
    experts' answers found under ``answers_key`` (``{metric: {expert: answers}}``,
    the experts already checked)."""

    answers_key: str
    export: _Export
    setup_import: _SetupImport
    answers_import: _AnswersImport


BUNDLE_SECTIONS: list[BundleSection] = []


def bundle_section_register(section: BundleSection) -> None:
    """Add ``section`` to every study bundle written and read."""
    BUNDLE_SECTIONS.append(section)


class _MissingInputs(Protocol):
    def __call__(self, *, study: "Study", experts: list[int]) -> dict[int, list[str]]: ...


#: Each gives, per expert (membership id) with gaps, what is missing, in words.
MISSING_INPUTS: list[_MissingInputs] = []


def missing_inputs_register(provider: _MissingInputs) -> None:
    """Add ``provider``'s gaps to every expert's missing inputs."""
    MISSING_INPUTS.append(provider)


class _ExpertInputs(Protocol):
    def __call__(self, *, expert: "Membership") -> Any: ...


#: key in an expert's inputs (bundle shape) -> its reader; empty: none given.
EXPERT_INPUTS: dict[str, _ExpertInputs] = {}


def expert_inputs_register(key: str, read: _ExpertInputs) -> None:
    """Add ``read(expert=...)`` under ``key`` to an expert's inputs."""
    if key in EXPERT_INPUTS:
        raise ImproperlyConfigured(f"An expert input is already registered as {key!r}.")
    EXPERT_INPUTS[key] = read


# --- an expert's questions (evaluation's elicited metrics) ---------------------------


@dataclass(frozen=True)
class QuestionStep:
    """One metric's questions as one of an expert's steps."""

    metric_id: int
    name: str
    answered: int
    finished: bool


class _Steps(Protocol):
    def __call__(self, *, study: "Study", expert: "Membership") -> list[QuestionStep]: ...


class _StepsByExpert(Protocol):
    def __call__(self, *, study: "Study", expert_ids: list[int]) -> dict[int, list[QuestionStep]]: ...


class _Unfinished(Protocol):
    def __call__(self, *, memberships: "list[Membership]") -> dict[int, list[str]]: ...


class _OwnValues(Protocol):
    def __call__(self, *, study: "Study", expert: "Membership") -> dict[int, dict[str, float] | None]: ...


@dataclass(frozen=True)
class ExpertQuestions:
    """``steps``: the questions the expert answers, with their progress (the
    step pages); ``steps_by_expert``: the same for each expert id given (the
    study home, the progress grid); ``unfinished``: per expert membership,
    the names of the metrics whose questions are open and unfinished (the
    dashboard's to-do); ``own_values``: per metric id, the expert's own
    value of each candidate, or None while unfinished (the ranges step)."""

    steps: _Steps
    steps_by_expert: _StepsByExpert
    unfinished: _Unfinished
    own_values: _OwnValues


EXPERT_QUESTIONS: list[ExpertQuestions] = []


def expert_questions_register(questions: ExpertQuestions) -> None:
    """Add ``questions`` to every expert's steps."""
    EXPERT_QUESTIONS.append(questions)


def question_steps(*, study: "Study", expert: "Membership") -> list[QuestionStep]:
    return [step for questions in EXPERT_QUESTIONS for step in questions.steps(study=study, expert=expert)]


def question_steps_by_expert(*, study: "Study", expert_ids: list[int]) -> dict[int, list[QuestionStep]]:
    steps: dict[int, list[QuestionStep]] = {expert: [] for expert in expert_ids}
    for questions in EXPERT_QUESTIONS:
        for expert, found in questions.steps_by_expert(study=study, expert_ids=expert_ids).items():
            steps[expert] += found
    return steps


def questions_unfinished(*, memberships: "list[Membership]") -> dict[int, list[str]]:
    unfinished: dict[int, list[str]] = {}
    for questions in EXPERT_QUESTIONS:
        for expert, names in questions.unfinished(memberships=memberships).items():
            unfinished.setdefault(expert, []).extend(names)
    return unfinished


def own_values(*, study: "Study", expert: "Membership") -> dict[int, dict[str, float] | None]:
    return {
        metric: values
        for questions in EXPERT_QUESTIONS
        for metric, values in questions.own_values(study=study, expert=expert).items()
    }


# --- where measurements came from (the measurements table) ---------------------------


class _SourcesRead(Protocol):
    def __call__(self, *, study: "Study") -> dict[tuple[int, int], Any]: ...


class _Holds(Protocol):
    def __call__(self, source: Any, value: float | None) -> bool: ...


class _Summaries(Protocol):
    def __call__(
        self,
        *,
        metrics: "list[Metric]",
        sources: dict[tuple[int, int], Any],
        values: dict[tuple[int, int], float],
        candidate_names: dict[int, str],
    ) -> list: ...


class _AlsoShown(Protocol):
    def __call__(self, *, study: "Study") -> Any: ...


@dataclass(frozen=True)
class ValueSources:
    """``read``: every source of the study's values by (candidate id, metric
    id), one query; ``holds``: whether a source still holds the cell's value
    (typed over, it does not); ``summaries``: the table's summary of them
    (the metrics of the page in order); ``also_shown``: besides the page's
    candidates, the measurements the table reads for the summaries (an
    ``Exists`` over the ``Measurement`` rows), or None. A cell holds its
    source under ``key``, and the page's context the summaries under
    ``summaries_key``."""

    key: str
    summaries_key: str
    read: _SourcesRead
    holds: _Holds
    summaries: _Summaries
    also_shown: _AlsoShown | None = None


VALUE_SOURCES: list[ValueSources] = []


def value_sources_register(sources: ValueSources) -> None:
    """Mark and summarise ``sources`` on the measurements table."""
    VALUE_SOURCES.append(sources)


class _MeasurementSection(Protocol):
    def __call__(self, *, study: "Study", candidates: set[str]) -> Any: ...


#: key in the measurements page's context -> what it shows for the page's candidates (by name)
MEASUREMENT_SECTIONS: dict[str, _MeasurementSection] = {}


def measurement_section_register(key: str, read: _MeasurementSection) -> None:
    """Show ``read(study=..., candidates=...)`` on the measurements page as ``key``."""
    if key in MEASUREMENT_SECTIONS:
        raise ImproperlyConfigured(f"A measurements section is already registered as {key!r}.")
    MEASUREMENT_SECTIONS[key] = read


# --- why a candidate cannot be removed -------------------------------------------------


class _CandidateKeeper(Protocol):
    def __call__(self, *, study: "Study", candidates: Sequence[int] | None) -> dict[int, list[str]]: ...


#: Each gives, per candidate id it keeps (of ``candidates``, or of the whole
#: study when None), why it cannot be removed, in words naming what keeps it.
CANDIDATE_KEEPERS: list[_CandidateKeeper] = []


def candidate_keeper_register(keeper: _CandidateKeeper) -> None:
    """Refuse to remove the candidates ``keeper`` gives reasons for."""
    CANDIDATE_KEEPERS.append(keeper)


def candidate_removal_refusals(*, study: "Study", candidates: Sequence[int] | None = None) -> dict[int, list[str]]:
    """Per candidate id of ``study`` (of ``candidates`` when given) that
    cannot be removed, every reason registered (one query per keeper)."""
    refusals: dict[int, list[str]] = {}
    for keeper in CANDIDATE_KEEPERS:
        for candidate, reasons in keeper(study=study, candidates=candidates).items():
            refusals.setdefault(candidate, []).extend(reasons)
    return refusals


# --- the OpenAPI document: components of other apps --------------------------------

#: name -> a zero-argument function returning the component's JSON Schema
#: (``workspace.api.schema.components`` calls it when it builds the schema).
SCHEMA_COMPONENTS: dict[str, Callable[[], dict]] = {}


def schema_component_register(name: str, schema: Callable[[], dict]) -> None:
    """Add the component ``name``, the JSON Schema ``schema()`` returns. A
    function, not the schema: what makes it (an app's API module) is
    imported when the schema is built, not at every process's start."""
    if name in SCHEMA_COMPONENTS:
        raise ImproperlyConfigured(f"A schema component is already registered as {name!r}.")
    SCHEMA_COMPONENTS[name] = schema


# --- the API's token endpoint: a second factor --------------------------------------


class _TokenSecondFactor(Protocol):
    def __call__(self, *, request: Any, user: Any, code: str) -> None: ...


#: Each raises a DRF ``APIException`` to refuse a token to ``user``, who gave
#: the right password, given the request's ``otp_code`` ("" without one).
TOKEN_SECOND_FACTORS: list[_TokenSecondFactor] = []


def token_second_factor_register(check: _TokenSecondFactor) -> None:
    """Run ``check`` before the token endpoint makes a token."""
    TOKEN_SECOND_FACTORS.append(check)


# --- how the apps above e-mail a person (notifications: their preferences) ---------


class _MailChoices(Protocol):
    def __call__(self, *, kind: str, user_ids: list[int]) -> dict[int, str]: ...


# Each provider answers, for an event kind (a key of ``events.EVENT_KINDS``)
# and users, how each who is not e-mailed at once gets it: ``MAIL_DIGEST``
# (in their daily digest) or ``MAIL_OFF`` (they turned those e-mails off);
# users left out are e-mailed at once. The reminders' report reads it.
MAIL_DIGEST, MAIL_OFF = "digest", "off"
MAIL_CHOICES: list[_MailChoices] = []


def mail_choices_register(provider: _MailChoices) -> None:
    """Let ``provider`` say how people get the e-mails of each kind."""
    if provider in MAIL_CHOICES:
        raise ImproperlyConfigured(f"{provider!r} already says how people get their e-mails.")
    MAIL_CHOICES.append(provider)


def mail_choices(*, kind: str, user_ids: list[int]) -> dict[int, str]:
    """``{user id: MAIL_DIGEST or MAIL_OFF}`` for those of ``user_ids`` not
    e-mailed at once about ``kind``."""
    chosen: dict[int, str] = {}
    for provider in MAIL_CHOICES:
        chosen.update(provider(kind=kind, user_ids=user_ids))
    return chosen
