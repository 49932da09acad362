"""The writes of the MLflow link: a study's connection, imports of runs as
candidates, and a run's decision published back.

An import reads everything it needs from MLflow first (runs, metric values,
prediction artifacts), checks all of it, and only then writes, in one
transaction: with any refusal nothing is written. Publishing writes to
MLflow first (tags and the summary run, each write idempotent), then records
the publication.
"""

import csv
import hashlib
import logging
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine.models import Run
from engine.results_export import results_csv_bytes
from evaluation import services as evaluation_services
from workspace import history, limits
from workspace import services as workspace_services
from workspace.errors import InvalidInput, PhaseConflict, ServiceError
from workspace.events import event_publish
from workspace.models import Candidate, Measurement, Metric, Study
from workspace.services import expect, locked, text

from . import remote, secrets
from .models import (
    EXPERIMENT_NAME_MAX_LENGTH,
    MlflowConnection,
    MlflowImport,
    MlflowPublication,
    MlflowRunLink,
    MlflowValueSource,
)
from .remote import Connection, Experiment, RemoteRun

logger = logging.getLogger(__name__)

# The fields' lengths, in the one limits module.
URI_MAX_LENGTH = limits.TRACKING_URI_MAX_LENGTH
TOKEN_MAX_LENGTH = limits.TRACKING_TOKEN_MAX_LENGTH
FILTER_MAX_LENGTH = limits.TRACKING_FILTER_MAX_LENGTH
KEY_MAX_LENGTH = limits.TRACKING_KEY_MAX_LENGTH
PATTERN_MAX_LENGTH = limits.TRACKING_PATTERN_MAX_LENGTH
# The tags publishing writes on each candidate's run, and on the summary run.
TAG_STUDY, TAG_RANK, TAG_CEF, TAG_VETOED, TAG_RUN_URL = (
    "approve.study",
    "approve.rank",
    "approve.cef",
    "approve.vetoed",
    "approve.run_url",
)
TAG_SUMMARY_OF = "approve.summary_of"
# What an import does with a run (not imported before) named like an existing
# candidate: update that candidate, import it as a new one, or leave it out.
ON_EXISTING = ("update", "new", "skip")


# --- the connection ---------------------------------------------------------------


def connection_of(study: Study) -> Connection:
    """The study's connection, token decrypted; PhaseConflict
    (``mlflow_not_connected``) when it has none."""
    stored = MlflowConnection.objects.filter(study=study).first()
    if stored is None:
        raise PhaseConflict(
            "This study is not connected to MLflow: connect it first (PUT .../mlflow/connection/).",
            code="mlflow_not_connected",
        )
    return Connection(stored.tracking_uri, secrets.unseal(stored.token_encrypted))


def connection_set(*, study: Study, tracking_uri: Any, token: Any = None) -> MlflowConnection:
    """Connect the study to MLflow, replacing its connection, once the
    server answers: the number of experiments found is kept. ``token``:
    a bearer token (kept encrypted), "" for none, None to keep the one
    stored for the same URI. Refusals: InvalidInput on ``tracking_uri`` or
    ``token``; TrackerError when the server is unreachable or refuses the
    token. Nothing is written unless the check passes."""
    uri = text(tracking_uri, "tracking_uri", max_length=URI_MAX_LENGTH).rstrip("/")
    stored = MlflowConnection.objects.filter(study=study).first()
    if token is None:
        secret = secrets.unseal(stored.token_encrypted) if stored is not None and stored.tracking_uri == uri else ""
    else:
        secret = text(token, "token", max_length=TOKEN_MAX_LENGTH, required=False)
    if secret and remote.file_store_path(uri) is not None:
        raise InvalidInput({"token": "a file: store takes no token"})
    if not all("!" <= char <= "~" for char in secret):
        raise InvalidInput({"token": "a bearer token is printable ASCII, without spaces"})
    remote.check_uri(uri)
    count = remote.experiment_count(Connection(uri, secret))
    with transaction.atomic():
        study = locked(study)
        connection, _ = MlflowConnection.objects.update_or_create(
            study=study,
            defaults={
                "tracking_uri": uri,
                "token_encrypted": secrets.seal(secret),
                "experiment_count": count,
                "checked_at": timezone.now(),
            },
        )
    return connection


@transaction.atomic
def connection_remove(*, study: Study) -> None:
    """Disconnect the study (what was imported stays, with its provenance)."""
    study = locked(study)
    MlflowConnection.objects.filter(study=study).delete()


def experiment_list(*, study: Study) -> tuple[list[Experiment], bool]:
    """The active experiments of the study's server, by name, for the page's
    picker: at most ``remote.EXPERIMENTS_LISTED_MAX``, and whether it has
    more (then a name or id is typed). Nothing is written."""
    most = remote.EXPERIMENTS_LISTED_MAX
    found = remote.experiments(connection_of(study), most + 1)
    return sorted(found[:most], key=lambda experiment: (experiment.name.casefold(), experiment.name)), len(found) > most


# --- the import --------------------------------------------------------------------


@dataclass(frozen=True)
class MappedMetric:
    key: str  # the MLflow metric key
    metric: Metric


@dataclass
class Preview:
    """The runs an import would read; ``linked``: those imported before
    (``{run id: the candidate they update}``), ``named_like``: the others
    whose name (or name tag) is an existing candidate's (``{run id: that
    candidate}``), for which an import asks what to do (``on_existing``)."""

    experiment_id: str
    experiment_name: str
    runs: list[RemoteRun]
    linked: dict[str, str] = field(default_factory=dict)
    named_like: dict[str, str] = field(default_factory=dict)

    @property
    def metric_keys(self) -> list[str]:
        return sorted({key for run in self.runs for key in run.metrics})


@dataclass
class ImportOutcome:
    """What an import did: ``changes`` lists every measurement that is new
    or whose value changed (``before`` None when new), and nothing else."""

    import_id: int
    experiment_id: str
    runs: int
    created: list[str] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    unchanged: int = 0
    prediction_sets: list[dict[str, Any]] = field(default_factory=list)
    experiment_name: str = ""
    # Runs named like an existing candidate: those that updated it, those left out
    # (each {"run_id", "name", "candidate"}).
    matched: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _filter(value: Any) -> str:
    if value is None:
        return ""
    return text(value, "filter", max_length=FILTER_MAX_LENGTH, required=False)


def _name_tag(value: Any) -> str | None:
    return None if value in (None, "") else text(value, "name_tag", max_length=KEY_MAX_LENGTH)


def import_preview(*, study: Study, experiment: Any, filter: Any = "", name_tag: Any = None) -> Preview:  # noqa: A002
    """The runs of ``experiment`` (name or id) that match ``filter``, with
    their metrics, and which of them match a candidate of the study (by
    the run's name, or its ``name_tag`` tag); nothing is written."""
    connection = connection_of(study)
    name = text(experiment, "experiment", max_length=KEY_MAX_LENGTH)
    tag = _name_tag(name_tag)
    experiment_id, experiment_name = remote.experiment_resolve(connection, name)
    runs = remote.runs_search(connection, experiment_id, _filter(filter))
    linked, named = _matches(study, runs, tag, connection.tracking_uri)
    return Preview(
        experiment_id,
        experiment_name,
        runs,
        linked={run_id: candidate.name for run_id, candidate in linked.items()},
        named_like={run_id: candidate.name for run_id, candidate in named.items()},
    )


def _mapped_entry(entry: Any, where: str, metrics: dict[str, Metric], seen: set[str]) -> MappedMetric:
    """One entry of the mapping (at ``where``) checked: an object of key,
    metric and optionally unit, naming a study metric not mapped before
    (``seen``), in the metric's own unit; InvalidInput naming the field
    otherwise."""
    if not isinstance(entry, dict) or not {"key", "metric"} <= set(entry) <= {"key", "metric", "unit"}:
        raise InvalidInput({where: ["must be an object with key and metric (and optionally unit)"]})
    key = text(entry["key"], f"{where}.key", max_length=KEY_MAX_LENGTH)
    name = text(entry["metric"], f"{where}.metric", max_length=limits.NAME_MAX_LENGTH)
    unit = entry.get("unit")
    unit = None if unit is None else text(unit, f"{where}.unit", max_length=limits.UNIT_MAX_LENGTH, required=False)
    metric = metrics.get(name)
    if metric is None:
        raise InvalidInput({f"{where}.metric": [f"no metric named {name!r} in this study"]})
    if name in seen:
        raise InvalidInput({f"{where}.metric": [f"{name} is mapped twice"]})
    if unit is not None and unit != metric.unit:
        raise InvalidInput(
            {
                f"{where}.unit": [
                    f"{name} is measured in {metric.unit or 'no unit'}, but {key} is declared in {unit or 'no unit'}:"
                    " convert it in MLflow, or map another metric"
                ]
            }
        )
    return MappedMetric(key, metric)


def _mapping(study: Study, mapping: Any) -> list[MappedMetric]:
    """``[{"key", "metric", "unit"?}]`` checked: each study metric mapped
    once, and a declared unit the metric's own."""
    expect(mapping, list, "mapping", "a list of {key, metric, unit}")
    if not mapping:
        raise InvalidInput({"mapping": "map at least one MLflow metric key to a study metric"})
    metrics = {metric.name: metric for metric in Metric.objects.filter(study=study)}
    mapped: list[MappedMetric] = []
    errors: dict[str, list[str]] = {}
    seen: set[str] = set()
    for index, entry in enumerate(mapping):
        try:
            found = _mapped_entry(entry, f"mapping[{index}]", metrics, seen)
        except InvalidInput as error:
            for path, messages in error.errors.items():
                errors.setdefault(path, []).extend(messages)
            continue
        seen.add(found.metric.name)
        mapped.append(found)
    if errors:
        raise InvalidInput(errors)
    return mapped


def _step(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput({"step": "must be a whole number >= 0, or null for each metric's latest value"})
    return value


def _run_values(
    connection: Connection,
    runs: list[RemoteRun],
    mapped: list[MappedMetric],
    step: int | None,
    progress: Callable[[int], None] | None = None,
    skipped: frozenset[str] = frozenset(),
) -> dict[str, dict[str, float]]:
    """``{run id: {metric name: value}}``, every mapped key of every run but
    the ``skipped`` ones; InvalidInput naming each run that lacks one."""
    values: dict[str, dict[str, float]] = {}
    errors: dict[str, list[str]] = {}
    for index, run in enumerate(runs):
        if run.run_id in skipped:
            continue
        found: dict[str, float] = {}
        for entry in mapped:
            value = run.metrics.get(entry.key)
            if value is not None and step is not None:
                value = remote.metric_at_step(connection, run.run_id, entry.key, step)
            if value is None:
                at = "" if step is None else f" at step {step}"
                errors.setdefault(f"runs[{index}]", []).append(
                    f"run {run.name!r} ({run.run_id}) has no metric {entry.key!r}{at}"
                )
                continue
            try:
                found[entry.metric.name] = workspace_services.number(value, f"runs[{index}].{entry.key}")
            except InvalidInput as error:
                for path, messages in error.errors.items():
                    errors.setdefault(path, []).extend(messages)
        values[run.run_id] = found
        if progress is not None:
            progress(index + 1)
    if errors:
        raise InvalidInput(errors)
    return values


def _candidate_name(run: RemoteRun, name_tag: str | None) -> str | None:
    """The name a run gives its candidate: its name, or its ``name_tag``
    tag, spaces folded and cut to a name's length; None without one."""
    base = run.tags.get(name_tag) if name_tag else run.name
    if not base or not base.strip():
        return None
    return " ".join(base.split())[: limits.NAME_MAX_LENGTH]


def _matches(
    study: Study, runs: list[RemoteRun], name_tag: str | None, uri: str
) -> tuple[dict[str, Candidate], dict[str, Candidate]]:
    """The candidates the runs match: ``linked`` (``{run id: candidate}``)
    those imported from the same runs of the same server before;
    ``named`` the others' candidates named as the run would name its own
    (its name, or its ``name_tag`` tag)."""
    links = {
        link.run_id: link.candidate
        for link in MlflowRunLink.objects.filter(candidate__study=study, tracking_uri=uri).select_related("candidate")
    }
    candidates = {candidate.name: candidate for candidate in Candidate.objects.filter(study=study)}
    linked: dict[str, Candidate] = {}
    named: dict[str, Candidate] = {}
    for run in runs:
        if run.run_id in links:
            linked[run.run_id] = links[run.run_id]
            continue
        name = _candidate_name(run, name_tag)
        if name is not None and name in candidates:
            named[run.run_id] = candidates[name]
    return linked, named


def _on_existing(value: Any) -> str | dict[str, str] | None:
    """``on_existing`` checked: None (ask), one of ``ON_EXISTING`` for every
    run named like a candidate, or ``{run id: choice}`` run by run."""
    words = "must be update, new or skip, or an object {run id: update, new or skip}"
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if value not in ON_EXISTING:
            raise InvalidInput({"on_existing": words})
        return value
    if not isinstance(value, dict):
        raise InvalidInput({"on_existing": words})
    errors = {
        f"on_existing.{str(key)[: limits.MLFLOW_ID_MAX_LENGTH]}": ["must be update, new or skip"]
        for key, choice in value.items()
        if not isinstance(key, str) or len(key) > limits.MLFLOW_ID_MAX_LENGTH or choice not in ON_EXISTING
    }
    if errors:
        raise InvalidInput(errors)
    return {key: choice for key, choice in value.items() if choice}


@dataclass
class _Plan:
    """What an import does with each run: ``existing``, the candidate it
    updates (``{run id: candidate}``: imported before, or named like it and
    updating it); ``new``, the name of the candidate it makes; ``matched``
    and ``skipped``, the runs named like a candidate that update it or are
    left out (``ImportOutcome``'s)."""

    existing: dict[str, Candidate] = field(default_factory=dict)
    new: dict[str, str] = field(default_factory=dict)
    matched: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    @property
    def skipped_ids(self) -> frozenset[str]:
        return frozenset(entry["run_id"] for entry in self.skipped)


def _choice_refusal(run: RemoteRun, candidate: Candidate, choice: str | None, updating: RemoteRun | None) -> str | None:
    """Why a run named like ``candidate`` cannot have ``choice`` (None: no
    choice made, so it is asked), or None."""
    if choice is None:
        return (
            f"run {run.name!r} ({run.run_id}) is named like the candidate {candidate.name!r}: choose update "
            "(that candidate's measurements), new (another candidate) or skip"
        )
    if choice == "update" and updating is not None:
        return (
            f"run {run.name!r} ({run.run_id}) would update the candidate {candidate.name!r}, which run "
            f"{updating.name!r} ({updating.run_id}) updates already: choose new or skip"
        )
    return None


def _new_name(run: RemoteRun, base: str, taken: set[str]) -> str | None:
    """A new candidate's name: ``base``, or with the run id's first
    characters when taken; None when that is taken too."""
    name = base
    if name in taken:
        suffix = f" ({run.run_id[:8]})"
        name = base[: limits.NAME_MAX_LENGTH - len(suffix)] + suffix
    return None if name in taken else name


def _plan(
    study: Study, runs: list[RemoteRun], name_tag: str | None, uri: str, on_existing: str | dict[str, str] | None
) -> _Plan:
    """What the import does with each run (``_Plan``): a run imported
    before updates its candidate; one named like a candidate does what
    ``on_existing`` says for it (asked, InvalidInput on
    ``on_existing.<run id>``, when it says nothing); any other makes a new
    candidate, its name taken from the run (with the run id's first
    characters when another run of the import took it)."""
    linked, named = _matches(study, runs, name_tag, uri)
    taken = set(Candidate.objects.filter(study=study).values_list("name", flat=True))
    updating = {candidate.pk: run for run in runs if (candidate := linked.get(run.run_id)) is not None}
    plan = _Plan(existing=dict(linked))
    errors: dict[str, list[str]] = {}
    for index, run in enumerate(runs):
        if run.run_id in linked:
            continue
        base = _candidate_name(run, name_tag)
        if base is None:
            errors[f"runs[{index}]"] = [f"run {run.name!r} ({run.run_id}) has no tag {name_tag!r} to name it by"]
            continue
        candidate = named.get(run.run_id)
        if candidate is not None:
            choice = on_existing.get(run.run_id) if isinstance(on_existing, dict) else on_existing
            refusal = _choice_refusal(run, candidate, choice, updating.get(candidate.pk))
            if refusal is not None:
                errors[f"on_existing.{run.run_id}"] = [refusal]
                continue
            entry = {"run_id": run.run_id, "name": run.name, "candidate": candidate.name}
            if choice != "new":
                (plan.skipped if choice == "skip" else plan.matched).append(entry)
                if choice == "update":
                    updating[candidate.pk], plan.existing[run.run_id] = run, candidate
                continue
        name = _new_name(run, base, taken)
        if name is None:
            errors[f"runs[{index}]"] = [f"run {run.run_id} would be named {base!r}, which is taken"]
            continue
        taken.add(name)
        plan.new[run.run_id] = name
    if errors:
        raise InvalidInput(errors)
    if len(taken) > limits.MAX_CANDIDATES:
        raise InvalidInput({"filter": f"a study holds at most {limits.MAX_CANDIDATES} candidates"})
    return plan


@dataclass
class _Artifact:
    path: str
    local: Path
    sha256: str


def _artifacts(
    connection: Connection,
    runs: list[RemoteRun],
    pattern: str,
    folder: str,
    progress: Callable[[int], None] | None = None,
    skipped: frozenset[str] = frozenset(),
) -> dict[str, _Artifact]:
    """Each run's (but the ``skipped`` ones') one artifact matching
    ``pattern``, downloaded into ``folder``: streamed, and refused as soon as
    it is larger than ``limits.PREDICTIONS_MAX_BYTES`` (or kept where approve
    does not read)."""
    found: dict[str, _Artifact] = {}
    errors: dict[str, list[str]] = {}
    for index, run in enumerate(runs):
        if run.run_id in skipped:
            continue
        try:
            paths = remote.artifacts_matching(connection, run.run_id, pattern)
            if len(paths) != 1:
                what = "no artifact" if not paths else f"{len(paths)} artifacts ({', '.join(paths[:3])})"
                errors[f"runs[{index}].artifact"] = [f"run {run.name!r} has {what} matching {pattern!r}: one is needed"]
                continue
            local = remote.artifact_download(
                connection, run.run_id, paths[0], str(Path(folder) / run.run_id), limits.PREDICTIONS_MAX_BYTES
            )
        except remote.ArtifactRefused as refused:
            errors[f"runs[{index}].artifact"] = [f"run {run.name!r}: {refused}"]
            continue
        digest = hashlib.sha256(local.read_bytes()).hexdigest()
        found[run.run_id] = _Artifact(paths[0], local, digest)
        if progress is not None:
            progress(index + 1)
    if errors:
        raise InvalidInput(errors)
    return found


class PositiveLabelNeeded(InvalidInput):
    """The prediction artifacts have a score column and no positive label
    was named: refused under ``positive``, naming the artifacts' classes
    (``classes``, in the order the predictions reader takes them)."""

    def __init__(self, classes: list[str]) -> None:
        listed = ", ".join(repr(label) for label in classes[:CLASSES_SHOWN])
        more = f" and {len(classes) - CLASSES_SHOWN} more" if len(classes) > CLASSES_SHOWN else ""
        their = f" (their classes, in order: {listed}{more})" if classes else ""
        super().__init__(
            {
                "positive": [
                    "the prediction artifacts have a score column, which is the positive label's score: "
                    f"name the positive label{their}"
                ]
            }
        )
        self.classes = classes


# The most of an artifact's classes a refusal names.
CLASSES_SHOWN = 20


def _ordered_labels(first: dict[str, None], then: dict[str, None]) -> list[str]:
    return [*first, *(label for label in then if label not in first)]


def _csv_classes(local: Path) -> list[str] | None:
    """A CSV artifact's classes (``y_true``'s in order of appearance, then
    ``y_pred``'s others) when it has a score column; else None."""
    with local.open(encoding="utf-8-sig", newline="") as stream:
        header = stream.readline()
        delimiter = "\t" if "\t" in header and "," not in header else ","
        names = [name.strip() for name in next(csv.reader([header], delimiter=delimiter), [])]
        if "score" not in names:
            return None
        columns = {name: names.index(name) for name in ("y_true", "y_pred") if name in names}
        found: dict[str, dict[str, None]] = {name: {} for name in columns}
        for row in csv.reader(stream, delimiter=delimiter):
            for name, column in columns.items():
                if column < len(row) and len(found[name]) <= limits.PREDICTIONS_MAX_CLASSES:
                    found[name].setdefault(row[column], None)
    return _ordered_labels(found.get("y_true", {}), found.get("y_pred", {}))


def _parquet_classes(local: Path) -> list[str] | None:
    """A Parquet artifact's classes, as ``_csv_classes``."""
    # imported on first use: pyarrow costs 0.15 s at every command's start.
    from pyarrow import compute as arrow_compute
    from pyarrow import parquet

    table = parquet.ParquetFile(local)
    names = list(table.schema_arrow.names)
    if "score" not in names:
        return None
    columns = [name for name in ("y_true", "y_pred") if name in names]
    found: dict[str, dict[str, None]] = {name: {} for name in columns}
    for batch in table.iter_batches(columns=columns):
        for name in columns:
            if len(found[name]) <= limits.PREDICTIONS_MAX_CLASSES:
                for label in arrow_compute.unique(batch.column(name)).to_pylist():
                    found[name].setdefault(str(label), None)
    return _ordered_labels(found.get("y_true", {}), found.get("y_pred", {}))


def _scored_classes(artifact: _Artifact) -> list[str] | None:
    """The artifact's classes when it has a score column, else None (also
    when it cannot be read so: the predictions reader then says why)."""
    # imported on first use: pyarrow costs 0.15 s at every command's start.
    from pyarrow import ArrowException

    try:
        with artifact.local.open("rb") as stream:
            magic = stream.read(4)
        return _parquet_classes(artifact.local) if magic == b"PAR1" else _csv_classes(artifact.local)
    except (OSError, ValueError, csv.Error, ArrowException):
        return None


def _positive_needed(artifacts: dict[str, _Artifact], positive: Any) -> None:
    """PositiveLabelNeeded when no positive label is named and an artifact
    has a score column (naming the classes of the artifacts)."""
    if positive not in (None, ""):
        return
    classes: dict[str, None] = {}
    scored = False
    for artifact in artifacts.values():
        found = _scored_classes(artifact)
        if found is not None:
            scored = True
            classes.update(dict.fromkeys(found))
    if scored:
        raise PositiveLabelNeeded(list(classes))


def _checked_request(
    study: Study,
    *,
    experiment: Any,
    filter: Any,  # noqa: A002
    mapping: Any,
    step: Any,
    name_tag: Any,
    artifact_pattern: Any,
    positive: Any,
    on_existing: Any = None,
) -> tuple[dict[str, Any], list[MappedMetric]]:
    """The import's request, checked (as recorded on ``MlflowImport.request``),
    and its mapping. InvalidInput naming each bad field."""
    name = text(experiment, "experiment", max_length=KEY_MAX_LENGTH)
    filter_string = _filter(filter)
    mapped = _mapping(study, mapping)
    step = _step(step)
    tag = _name_tag(name_tag)
    choices = _on_existing(on_existing)
    pattern = (
        None
        if artifact_pattern in (None, "")
        else text(artifact_pattern, "artifact_pattern", max_length=PATTERN_MAX_LENGTH)
    )
    request = {
        "experiment": name,
        "filter": filter_string,
        "mapping": [{"key": m.key, "metric": m.metric.name} for m in mapped],
        "step": step,
        "name_tag": tag,
        "artifact_pattern": pattern,
    }
    if positive is not None:
        request["positive"] = positive
    if choices is not None:
        request["on_existing"] = choices
    return request, mapped


def _matching_runs(connection: Connection, request: dict[str, Any]) -> tuple[Experiment, list[RemoteRun]]:
    """The experiment (active) and its runs the request names."""
    experiment_id, name = remote.experiment_resolve(connection, request["experiment"])
    runs = remote.runs_search(connection, experiment_id, request["filter"])
    if not runs:
        raise InvalidInput({"filter": "no run of the experiment matches"})
    return Experiment(experiment_id, name[:EXPERIMENT_NAME_MAX_LENGTH], True), runs


def mlflow_import(
    *,
    study: Study,
    imported_by: User | None,
    experiment: Any,
    filter: Any = "",  # noqa: A002
    mapping: Any,
    step: Any = None,
    name_tag: Any = None,
    artifact_pattern: Any = None,
    positive: Any = None,
    on_existing: Any = None,
    inline: bool = False,
) -> ImportOutcome | MlflowImport:
    """Import the runs of ``experiment`` matching ``filter`` as candidates
    (docs/api.md, "MLflow"): the mapped metric keys become measurements (the
    latest value, or the one at ``step``), the artifact matching
    ``artifact_pattern`` (approve-predictions/1, CSV or Parquet; ``positive``
    its positive label, needed with a score column) the candidate's
    prediction set. Runs imported before update their candidates; a run
    named like an existing candidate (by its name, or its ``name_tag`` tag)
    does what ``on_existing`` says (``update``, ``new`` or ``skip``, for all
    such runs or ``{run id: choice}``), and is refused, asked, when it says
    nothing. The outcome lists exactly what changed. All or nothing.

    Up to ``limits.MLFLOW_IMPORT_INLINE_RUNS`` matching runs (or any number
    with ``inline``) are imported at once and the outcome returned; more are
    recorded queued and imported by a Celery task (``import_execute``), and
    the queued ``MlflowImport`` is returned. The request is checked first
    either way: a bad field, or a run named like a candidate with no choice
    for it, is refused at once."""
    connection = connection_of(study)
    request, mapped = _checked_request(
        study,
        experiment=experiment,
        filter=filter,
        mapping=mapping,
        step=step,
        name_tag=name_tag,
        artifact_pattern=artifact_pattern,
        positive=positive,
        on_existing=on_existing,
    )
    found, runs = _matching_runs(connection, request)
    plan = _plan(study, runs, request["name_tag"], connection.tracking_uri, request.get("on_existing"))
    if not inline and len(runs) > limits.MLFLOW_IMPORT_INLINE_RUNS:
        return _import_queue(study, imported_by, found, request, len(runs))
    return _import_runs(study, imported_by, _Reading(connection, found, runs, mapped, request), plan=plan)


@dataclass
class _Reading:
    """What an import reads from: the server, the experiment, the runs
    matching (``runs[i]`` in refusals), the mapping and the request."""

    connection: Connection
    experiment: Experiment
    runs: list[RemoteRun]
    mapped: list[MappedMetric]
    request: dict[str, Any]

    @property
    def step(self) -> int | None:
        return self.request["step"]


def _import_runs(
    study: Study,
    imported_by: User | None,
    reading: _Reading,
    *,
    plan: _Plan | None = None,
    record: MlflowImport | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportOutcome:
    """Read every run's values (and artifacts) but the skipped ones', check
    them, then write in one transaction. ``plan``: what to do with each run,
    checked already (else made here, against the study as it is now).
    ``progress(runs read)`` is called as runs are read."""
    request, runs, connection = reading.request, reading.runs, reading.connection
    if plan is None:
        plan = _plan(study, runs, request["name_tag"], connection.tracking_uri, request.get("on_existing"))
    pattern, skipped = request["artifact_pattern"], plan.skipped_ids
    values = _run_values(connection, runs, reading.mapped, reading.step, None if pattern else progress, skipped)
    with tempfile.TemporaryDirectory(prefix="approve-mlflow-") as folder:
        artifacts = _artifacts(connection, runs, pattern, folder, progress, skipped) if pattern else {}
        _positive_needed(artifacts, request.get("positive"))
        return _import_write(study, imported_by, reading, values, plan, artifacts, record)


def _enqueue(import_id: int) -> None:
    """Send the queued import's task; with the broker unreachable, the
    import is marked failed (import again), never left queued for ever."""
    from .tasks import execute_import

    try:
        execute_import.delay(import_id)
    except OperationalError:
        logger.exception("MLflow import %s could not be queued", import_id)
        MlflowImport.objects.filter(pk=import_id, status=MlflowImport.Status.QUEUED).update(
            status=MlflowImport.Status.FAILED,
            error={
                "code": "server_error",
                "detail": "The import could not be queued (the task broker is unreachable): import again.",
                "fields": {},
            },
        )


@transaction.atomic
def _import_queue(
    study: Study, imported_by: User | None, experiment: Experiment, request: dict[str, Any], total: int
) -> MlflowImport:
    now = timezone.now()
    record = MlflowImport(
        study=study,
        imported_by=imported_by,
        imported_at=now,
        experiment_id=experiment.experiment_id,
        experiment_name=experiment.name,
        request=request,
        status=MlflowImport.Status.QUEUED,
        runs_total=total,
        lease_expires_at=engine_services.queue_lease(now),
    )
    # Recorded in the study's History once it succeeds, complete.
    record.skip_history_when_saving = True  # type: ignore[attr-defined]  # django-simple-history reads this flag off the instance
    record.save()
    transaction.on_commit(lambda: _enqueue(record.pk))
    return record


def _error_envelope(error: ServiceError) -> dict[str, Any]:
    """A refusal as the API would answer it: ``{code, detail, fields}``."""
    if isinstance(error, InvalidInput):
        return {"code": "invalid_input", "detail": error.message, "fields": error.errors}
    return {"code": getattr(error, "code", "invalid_input"), "detail": str(error), "fields": {}}


def _import_progress(import_id: int, total: int) -> Callable[[int], None]:
    """Record the runs read, about every 2 % of them (and the last)."""
    every = max(1, total // 50)

    def progress(read: int) -> None:
        if read == total or read % every == 0:
            MlflowImport.objects.filter(pk=import_id).update(runs_read=read, runs_total=total)

    return progress


def import_execute(*, import_id: int) -> str:
    """Run a queued import (the Celery task ``tracking.tasks.execute_import``):
    claimed once (a second delivery does nothing), re-checked against the
    study as it is now, read with its progress recorded, then written in one
    transaction. A refusal marks it failed with the error, and nothing else
    is written. Returns the status it ended in, or "not claimed"."""
    with transaction.atomic():
        claimed = MlflowImport.objects.filter(pk=import_id, status=MlflowImport.Status.QUEUED).update(
            status=MlflowImport.Status.RUNNING, lease_expires_at=engine_services.run_lease(timezone.now())
        )
    if not claimed:
        return "not claimed"
    with engine_services.LeaseHeartbeat(f"MLflow import {import_id}", lambda: _renew_lease(import_id)):
        return _import_execute_claimed(import_id)


def _renew_lease(import_id: int) -> bool:
    """Extend a running import's lease; False once it is no longer running."""
    running = MlflowImport.objects.filter(pk=import_id, status=MlflowImport.Status.RUNNING)
    return bool(running.update(lease_expires_at=engine_services.run_lease(timezone.now())))


def _import_execute_claimed(import_id: int) -> str:
    record = MlflowImport.objects.select_related("study", "imported_by").get(pk=import_id)
    try:
        connection = connection_of(record.study)
        request, mapped = _checked_request(
            record.study, **{**record.request, "positive": record.request.get("positive")}
        )
        found, runs = _matching_runs(connection, request)
        _import_runs(
            record.study,
            record.imported_by,
            _Reading(connection, found, runs, mapped, request),
            record=record,
            progress=_import_progress(import_id, len(runs)),
        )
    except ServiceError as error:
        MlflowImport.objects.filter(pk=import_id).update(
            status=MlflowImport.Status.FAILED, error=_error_envelope(error), lease_expires_at=None
        )
        return MlflowImport.Status.FAILED
    except Exception:
        MlflowImport.objects.filter(pk=import_id).update(
            status=MlflowImport.Status.FAILED,
            error={"code": "server_error", "detail": "The import stopped on an unexpected error.", "fields": {}},
            lease_expires_at=None,
        )
        raise
    return MlflowImport.Status.SUCCEEDED


#: What a running import whose worker stopped says (its lease lapsed).
WORKER_LOST = {
    "code": "worker_lost",
    "detail": "The worker running the import stopped before it finished; nothing was written: import again.",
    "fields": {},
}


def imports_recover_stale(*, now: Any = None) -> list[int]:
    """The recovery sweep's part for MLflow imports (registered with
    ``engine.tasks.sweep_register``): a queued import whose message was not
    taken before its lease lapsed is sent again (the claim makes a second
    delivery a no-op); a running one whose worker stopped renewing its lease
    is failed (``WORKER_LOST``: its writes are one transaction at the end,
    so nothing was written). Returns the ids sent again or failed."""
    now = now or timezone.now()
    lapsed = MlflowImport.objects.filter(lease_expires_at__lt=now)
    with transaction.atomic():
        queued = list(
            lapsed.select_for_update(skip_locked=True)
            .filter(status=MlflowImport.Status.QUEUED)
            .values_list("pk", flat=True)
        )
        MlflowImport.objects.filter(pk__in=queued).update(lease_expires_at=engine_services.queue_lease(now))
        running = list(
            lapsed.select_for_update(skip_locked=True)
            .filter(status=MlflowImport.Status.RUNNING)
            .values_list("pk", flat=True)
        )
        MlflowImport.objects.filter(pk__in=running, status=MlflowImport.Status.RUNNING).update(
            status=MlflowImport.Status.FAILED, error=WORKER_LOST, lease_expires_at=None
        )
    for import_id in queued:
        _enqueue(import_id)
    return queued + running


def _import_candidates(
    study: Study, runs: list[RemoteRun], plan: _Plan
) -> tuple[list[Candidate], dict[str, Candidate]]:
    """The new runs' candidates added (``plan.new``: their names); those
    created, and each imported run's candidate, new or existing
    (``plan.existing``); a skipped run has none."""
    created = workspace_services.candidates_add(
        study=study,
        candidates=[
            {"name": plan.new[run.run_id], "description": f"MLflow run {run.run_id}"}
            for run in runs
            if run.run_id in plan.new
        ],
    )
    by_name = {candidate.name: candidate for candidate in created}
    candidates = {run_id: by_name[name] for run_id, name in plan.new.items()}
    return created, {**plan.existing, **candidates}


def _import_measurements(
    study: Study,
    reading: _Reading,
    values: dict[str, dict[str, float]],
    candidates: dict[str, Candidate],
    now: datetime,
    outcome: ImportOutcome,
) -> None:
    """Each imported run's values stored as its candidate's measurements
    (only those new or changed are written, and listed in
    ``outcome.changes``; the rest counted as unchanged), each with its MLflow
    provenance."""
    mapped, experiment = reading.mapped, reading.experiment
    keys = {entry.metric.name: entry.key for entry in mapped}
    metric_ids = {entry.metric.name: entry.metric.pk for entry in mapped}
    before = {
        (c, m): v
        for c, m, v in Measurement.objects.filter(
            study=study, candidate_id__in=[c.pk for c in candidates.values()], metric_id__in=metric_ids.values()
        ).values_list("candidate_id", "metric_id", "value")
    }
    writes: list[dict[str, Any]] = []
    sources: list[MlflowValueSource] = []
    for run in reading.runs:
        candidate = candidates.get(run.run_id)
        if candidate is None:
            continue  # skipped
        for metric_name, value in values[run.run_id].items():
            old = before.get((candidate.pk, metric_ids[metric_name]))
            if old == value:
                outcome.unchanged += 1
            else:
                writes.append({"candidate": candidate.name, "metric": metric_name, "value": value})
                outcome.changes.append(
                    {
                        "candidate": candidate.name,
                        "metric": metric_name,
                        "before": old,
                        "value": value,
                        "run_id": run.run_id,
                        "metric_key": keys[metric_name],
                    }
                )
            sources.append(
                MlflowValueSource(
                    study=study,
                    candidate=candidate,
                    metric_id=metric_ids[metric_name],
                    tracking_uri=reading.connection.tracking_uri,
                    experiment_id=experiment.experiment_id,
                    experiment_name=experiment.name,
                    run_id=run.run_id,
                    metric_key=keys[metric_name],
                    step=reading.step,
                    value=value,
                    imported_at=now,
                )
            )
    if writes:
        workspace_services.measurements_set(study=study, measurements=writes)
    MlflowValueSource.objects.bulk_create(
        sources,
        update_conflicts=True,
        unique_fields=["candidate", "metric"],
        update_fields=[
            *("tracking_uri", "experiment_id", "experiment_name", "run_id", "metric_key", "step", "value"),
            "imported_at",
        ],
    )


def _import_artifact(
    study: Study,
    imported_by: User | None,
    run: RemoteRun,
    index: int,
    candidate: Candidate,
    artifact: _Artifact,
    positive: Any,
) -> int:
    """A run's predictions artifact imported as a prediction set of its
    candidate (``positive``: its positive label, for the predictions
    reader); its id. InvalidInput names the run's artifact
    (``runs[index].artifact``)."""
    try:
        with artifact.local.open("rb") as stream:
            prediction_set = evaluation_services.prediction_set_import(
                study=study,
                stream=stream,
                name=f"{candidate.name}: MLflow {run.run_id[:8]} {artifact.path}"[:200],
                uploaded_by=imported_by,
                candidate=candidate.name,
                positive=positive,
            )
    except InvalidInput as error:
        raise error.within(f"runs[{index}].artifact") from None
    return prediction_set.pk


def _import_links(
    study: Study,
    imported_by: User | None,
    reading: _Reading,
    candidates: dict[str, Candidate],
    artifacts: dict[str, _Artifact],
    now: datetime,
    outcome: ImportOutcome,
) -> None:
    """Each candidate's link to its run saved (a candidate updated by
    another run than before is linked to that run now); a predictions
    artifact not imported before (another path or content) imported, and
    listed in ``outcome.prediction_sets``."""
    links = {link.candidate_id: link for link in MlflowRunLink.objects.filter(candidate__in=list(candidates.values()))}
    for index, run in enumerate(reading.runs):
        candidate = candidates.get(run.run_id)
        if candidate is None:
            continue  # skipped
        link = links.get(candidate.pk) or MlflowRunLink(candidate=candidate)
        if link.run_id != run.run_id:
            link.run_id, link.artifact_path, link.artifact_sha256 = run.run_id, "", ""
        link.tracking_uri, link.imported_at = reading.connection.tracking_uri, now
        link.experiment_id, link.experiment_name = reading.experiment.experiment_id, reading.experiment.name
        artifact = artifacts.get(run.run_id)
        if artifact is not None and (artifact.path, artifact.sha256) != (link.artifact_path, link.artifact_sha256):
            positive = reading.request.get("positive")
            prediction_set = _import_artifact(study, imported_by, run, index, candidate, artifact, positive)
            outcome.prediction_sets.append(
                {"candidate": candidate.name, "prediction_set": prediction_set, "artifact": artifact.path}
            )
            link.artifact_path, link.artifact_sha256 = artifact.path, artifact.sha256
        link.save()


def _import_record(
    study: Study,
    imported_by: User | None,
    reading: _Reading,
    now: datetime,
    outcome: ImportOutcome,
    record: MlflowImport | None,
) -> None:
    """The import recorded as succeeded with its outcome (``record``: the
    queued import's; else a new one): saved twice (its outcome names its
    id) and recorded once, complete, in the study's History."""
    experiment = reading.experiment
    if record is None:
        record = MlflowImport(study=study, imported_by=imported_by, request=reading.request)
    record.imported_at, record.outcome = now, {}
    record.experiment_id, record.experiment_name = experiment.experiment_id, experiment.name
    matching = len(reading.runs)
    record.status, record.runs_total, record.runs_read = MlflowImport.Status.SUCCEEDED, matching, matching
    record.lease_expires_at = None
    record.skip_history_when_saving = True  # type: ignore[attr-defined]  # django-simple-history reads this flag off the instance
    record.save()
    outcome.import_id = record.pk
    record.outcome = outcome.as_dict()
    record.save(update_fields=["outcome"])
    history.record([record], "+")


@transaction.atomic
def _import_write(
    study: Study,
    imported_by: User | None,
    reading: _Reading,
    values: dict[str, dict[str, float]],
    plan: _Plan,
    artifacts: dict[str, _Artifact],
    record: MlflowImport | None = None,
) -> ImportOutcome:
    """The import's writes, all in one transaction; ``record``: the queued
    import's, completed."""
    now = timezone.now()
    study = locked(study)
    created, candidates = _import_candidates(study, reading.runs, plan)
    outcome = ImportOutcome(
        import_id=0,
        experiment_id=reading.experiment.experiment_id,
        experiment_name=reading.experiment.name,
        runs=len(candidates),
        created=[c.name for c in created],
        matched=plan.matched,
        skipped=plan.skipped,
    )
    _import_measurements(study, reading, values, candidates, now, outcome)
    _import_links(study, imported_by, reading, candidates, artifacts, now, outcome)
    _import_record(study, imported_by, reading, now, outcome, record)
    return outcome


# --- publishing ---------------------------------------------------------------------


def _tag_number(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def mlflow_publish(*, run: Run, published_by: User | None, run_url: str) -> MlflowPublication:
    """Write a succeeded run's decision to MLflow: on each candidate's MLflow
    run the tags ``approve.study``, ``approve.rank``, ``approve.cef``,
    ``approve.vetoed`` and ``approve.run_url``; and one summary run in the
    experiment, holding the results document and CSV as artifacts (found
    again by its ``approve.summary_of`` tag, so publishing twice rewrites it
    rather than adding another). Recorded once per run."""
    if run.status != Run.Status.SUCCEEDED:
        raise PhaseConflict(
            f"Run {run.pk} is {run.status}: only a succeeded run can be published.", code="run_not_finished"
        )
    study = run.study
    connection = connection_of(study)
    document = engine_selectors.results_document(run=run)
    names = [entry["name"] for entry in document["candidates"]]
    links = {
        link.candidate.name: link
        for link in MlflowRunLink.objects.filter(
            candidate__study=study, candidate__name__in=names, tracking_uri=connection.tracking_uri
        ).select_related("candidate")
    }
    if not links:
        raise PhaseConflict(
            "None of the run's candidates was imported from this MLflow server: there is nothing to tag.",
            code="mlflow_nothing_to_publish",
        )
    study_tag = f"{study.title} (study {study.pk})"
    ranked = [entry for entry in document["candidates"] if entry["name"] in links]
    experiment_id = links[ranked[0]["name"]].experiment_id
    experiment_name = links[ranked[0]["name"]].experiment_name
    summary_of = f"{study.pk}/{run.pk}"
    previous = MlflowPublication.objects.filter(run=run).first()
    summary_id = remote.publish(
        connection,
        experiment_id=experiment_id,
        summary=(TAG_SUMMARY_OF, summary_of),
        summary_name=f"approve: {study.title[:60]} run {run.pk}",
        summary_tags={TAG_SUMMARY_OF: summary_of, TAG_STUDY: study_tag, TAG_RUN_URL: run_url},
        run_tags={
            links[entry["name"]].run_id: {
                TAG_STUDY: study_tag,
                TAG_RANK: str(entry["rank"]),
                TAG_CEF: _tag_number(entry["cef"]),
                TAG_VETOED: "true" if entry["vetoed"] else "false",
                TAG_RUN_URL: run_url,
            }
            for entry in ranked
        },
        files={
            "approve/results.json": engine_selectors.results_json(run=run),
            "approve/results.csv": results_csv_bytes(run=run),
        },
    )
    values = {
        "published_by": published_by,
        "published_at": timezone.now(),
        "tracking_uri": connection.tracking_uri,
        "experiment_id": experiment_id,
        "experiment_name": experiment_name,
        "summary_run_id": summary_id,
        "tagged": {name: link.run_id for name, link in links.items()},
        "times": (previous.times + 1) if previous else 1,
    }
    publication, _ = MlflowPublication.objects.update_or_create(run=run, defaults=values)
    event_publish(
        "decision.recorded",
        study_id=study.pk,
        actor_id=published_by.pk if published_by else None,
        run_id=run.pk,
        number=run.number,
        experiment_name=experiment_name,
        times=publication.times,
    )
    return publication
