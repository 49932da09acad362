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
    def __call__(self, *, study: "Study", metrics: Sequence[str], experts: Sequence[str]) -> dict: ...


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
    the app's (the bundle reads which: a metric's ``elicitation``);
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
