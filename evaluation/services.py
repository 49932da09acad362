"""Writes of the evaluation app: prediction sets, and study metrics
computed from them.

A designer brings candidates' predictions on a test set as a CSV
(``approve-predictions/1``, FORMATS.md), in any phase, like measurements.
The file is read whole before anything is written, and a refused file writes
nothing.

A study metric can be mapped to a computation (``metric_computation_set``);
``measurements_compute`` then fills every candidate's measurement of it
through the measurement service everyone else uses
(``workspace.services.measurements_set``), keeping where each value came
from (``MeasurementSource``). Computing happens when the designer asks for
it, never when a set is uploaded or a mapping changed.
"""

import dataclasses
import hashlib
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from numbers import Real
from typing import IO, Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from workspace import history, limits
from workspace import services as workspace_services
from workspace.errors import InvalidInput
from workspace.models import AcceptableRange, Candidate, Direction, Measurement, Membership, Metric, Phase, Study
from workspace.services import expect, locked, number, text

from . import elicited as elicited_domain
from . import report, selectors
from .arrays import arrays_pack
from .models import (
    CandidatePredictionArrays,
    ElicitationAnswers,
    ElicitedMetric,
    EvaluationCache,
    MeasurementSource,
    MetricComputation,
    PredictionSet,
)
from .predictions import (
    CandidatePredictions,
    PredictionData,
    PredictionFileError,
    TextLimits,
    known_size,
    read_predictions,  # (its package imports pyarrow: loaded with the app, not by the first upload)
)
from .selectors import evaluation_cached, prediction_data_by_set, prediction_data_get


class _Counted:
    """A binary stream that counts the bytes read from it (the set's
    ``byte_count`` when the stream cannot tell its size); anything else is the stream's own (``size`` and
    ``fileno``, which let the reader refuse a large file before reading it)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.bytes_read = 0
        self._position = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._position += len(data)
        self.bytes_read = max(self.bytes_read, self._position)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """(A reader that seeks back reads no more bytes: the count is of
        the furthest byte read.)"""
        self._position = self._stream.seek(offset, whence)
        return self._position

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def prediction_text_limits(*, web: bool) -> TextLimits:
    """What a prediction file's text may expand to (workspace.limits): a
    value's length and the distinct values' bytes for everyone; with
    ``web`` (the page and the API), the instance ids' array and a Parquet
    file's decompressed columns within PREDICTIONS_MAX_ARRAY_BYTES too."""
    return TextLimits(
        length=limits.PREDICTIONS_MAX_LABEL_LENGTH,
        distinct_bytes=limits.PREDICTIONS_MAX_DISTINCT_BYTES,
        array_bytes=limits.PREDICTIONS_MAX_ARRAY_BYTES if web else None,
    )


def _optional_text(value: Any, field: str, *, max_length: int) -> str | None:
    """An optional parameter: None or blank means not given."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return text(value, field, max_length=max_length)


def prediction_set_import(
    *,
    study: Study,
    stream: IO[bytes],
    name: str,
    uploaded_by: User | None,
    candidate: str | None = None,
    positive: str | None = None,
    max_bytes: int | None = limits.PREDICTIONS_MAX_BYTES,
    max_rows: int | None = limits.PREDICTIONS_MAX_ROWS,
    max_classes: int = limits.PREDICTIONS_MAX_CLASSES,
) -> PredictionSet:
    """Read the predictions in ``stream`` (a binary file) and store them as a
    set of the study: all of it, or, with any error, nothing
    (``InvalidInput``: the file's errors under ``file``, each naming its
    line). ``candidate``: the file is that candidate's alone. ``positive``:
    the positive label of a binary set. ``max_bytes`` and ``max_rows``: the
    web's limits by default; None lifts them (the operator's command).
    ``max_classes``: the most distinct labels, which every upload keeps."""
    name = text(name, "name", max_length=200)
    candidate = _optional_text(candidate, "candidate", max_length=limits.NAME_MAX_LENGTH)
    positive = _optional_text(positive, "positive", max_length=limits.PREDICTIONS_MAX_LABEL_LENGTH)
    names = set(Candidate.objects.filter(study=study).values_list("name", flat=True))
    if candidate is not None and candidate not in names:
        raise InvalidInput({"candidate": f"no candidate named {candidate!r} in this study"})
    counted = _Counted(stream)
    # The size, when the stream tells it: the readers may seek (a Parquet
    # file's footer, a CSV read again for a refusal's lines).
    size = known_size(stream)
    try:
        data = read_predictions(
            counted,
            candidate=candidate,
            positive=positive,
            candidates=names,
            max_bytes=max_bytes,
            max_rows=max_rows,
            max_classes=max_classes,
            # The memory limit goes with the size limit: both are the web's and the API's.
            text_limits=prediction_text_limits(web=max_bytes is not None),
        )
    except PredictionFileError as error:
        raise InvalidInput({"file": error.errors}) from None
    # Compressed before the study is locked: the lock is held for the writes only.
    packed = {candidate_name: arrays_pack(arrays) for candidate_name, arrays in data.candidates.items()}

    return _set_stored(
        study,
        PredictionSet(
            name=name,
            uploaded_by=uploaded_by,
            positive_label=data.positive or "",
            labels=data.labels,
            folds=data.folds,
            context_columns=data.context_columns,
            contexts=[list(context) for context in data.contexts],
            row_count=data.rows,
            byte_count=size if size is not None else counted.bytes_read,
        ),
        {candidate_name: (len(data.candidates[candidate_name]), *packed[candidate_name]) for candidate_name in packed},
        field="file",
    )


@transaction.atomic
def _set_stored(
    study: Study, prediction_set: PredictionSet, packed: dict[str, tuple[int, bytes, list[str]]], *, field: str
) -> PredictionSet:
    """Store ``prediction_set`` (unsaved) with each candidate's archive
    (``{name: (instances, archive, columns)}``), under the study's lock,
    which is held for the writes only; a candidate gone meanwhile is
    refused under ``field``."""
    study = locked(study)
    # Read again under the lock: a candidate may have gone while the file was read.
    candidate_ids = dict(Candidate.objects.filter(study=study, name__in=list(packed)).values_list("name", "pk"))
    gone = [candidate_name for candidate_name in packed if candidate_name not in candidate_ids]
    if gone:
        raise InvalidInput({field: [f"no candidate named {gone_name!r} in this study" for gone_name in gone]})
    prediction_set.study = study
    prediction_set.save()
    CandidatePredictionArrays.objects.bulk_create(
        [
            CandidatePredictionArrays(
                prediction_set=prediction_set,
                candidate_id=candidate_ids[candidate_name],
                instance_count=instances,
                columns=columns,
                arrays=archive,
            )
            for candidate_name, (instances, archive, columns) in packed.items()
        ]
    )
    return prediction_set


def prediction_set_restore(
    *,
    study: Study,
    name: str,
    uploaded_at: datetime,
    positive: str | None,
    labels: list[str],
    folds: list[str],
    context_columns: list[str],
    contexts: list[list[str]],
    candidates: dict[str, CandidatePredictions],
) -> PredictionSet:
    """Store a set brought whole from elsewhere (a study bundle's,
    ``workspace.bundles``), its arrays checked already
    (``evaluation.arrays.arrays_checked``, which also checks the codes
    against ``labels``, ``folds`` and ``contexts``): packed as an upload's,
    uploaded at ``uploaded_at`` by nobody known, its rows the candidates'
    instances and its bytes their archives'."""
    packed = {candidate_name: (len(arrays), *arrays_pack(arrays)) for candidate_name, arrays in candidates.items()}
    prediction_set = PredictionSet(
        name=text(name, "name", max_length=200),
        uploaded_by=None,
        uploaded_at=uploaded_at,
        positive_label=positive or "",
        labels=labels,
        folds=folds,
        context_columns=context_columns,
        contexts=contexts,
        row_count=sum(instances for instances, _, _ in packed.values()),
        byte_count=sum(len(archive) for _, archive, _ in packed.values()),
    )
    return _set_stored(study, prediction_set, packed, field="candidates")


@transaction.atomic
def prediction_set_delete(*, prediction_set: PredictionSet) -> None:
    """Delete the set, unless an elicited metric's questions are made from it."""
    locked(prediction_set.study)
    using = list(ElicitedMetric.objects.filter(prediction_set=prediction_set).values_list("metric__name", flat=True))
    if using:
        raise InvalidInput(
            {
                "prediction_set": f"the elicited metric {', '.join(using)} asks its questions from this set: choose "
                "another set for it first"
            }
        )
    history.delete(PredictionSet.objects.filter(pk=prediction_set.pk))


# --- a set's evaluation, computed once and kept -----------------------------------------------

# The evaluations kept per set (documents and reports, each for one choice of
# options): the newest, so that varying the options cannot fill the table.
EVALUATIONS_KEPT_PER_SET = 20


def _evaluation_key(prediction_set: PredictionSet, kind: str, options: report.Options, candidate: str = "") -> str:
    """What identifies a computation of the set: its kind, the candidate, the
    options and the names of the set's candidates (a renamed one changes
    the document), hashed."""
    names = [row.candidate.name for row in prediction_set.candidate_arrays.all()]
    text = json.dumps([kind, candidate, dataclasses.asdict(options), names], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _too_many_labels(prediction_set: PredictionSet) -> str:
    """Why a set stored before its labels were limited is not evaluated (its
    per-label structures would grow without bound), or "" when it is."""
    count = len(prediction_set.labels)
    if count <= limits.PREDICTIONS_MAX_CLASSES:
        return ""
    return (
        f"this set has {count:,} distinct labels; at most {limits.PREDICTIONS_MAX_CLASSES:,} can be evaluated: "
        "upload its predictions again with fewer labels"
    )


def _set_checked(prediction_set: PredictionSet) -> None:
    reason = _too_many_labels(prediction_set)
    if reason:
        raise InvalidInput({"labels": reason})


def _within_a_request(prediction_set: PredictionSet) -> None:
    """A set larger than a web upload (the operator's ``import_predictions``
    lifts the limits) is not computed within a request: the command keeps
    its evaluation with the default options when it imports it."""
    if prediction_set.row_count > limits.PREDICTIONS_MAX_ROWS:
        raise InvalidInput(
            {
                "rows": f"this set has {prediction_set.row_count:,} rows, more than the "
                f"{limits.PREDICTIONS_MAX_ROWS:,} evaluated while you wait: only its evaluation with the default "
                "options, kept when it was imported, can be shown"
            }
        )


def _evaluation(
    prediction_set: PredictionSet, kind: str, key: str, compute: Callable[[], dict], *, in_request: bool
) -> dict:
    """The value kept under ``key``, or computed now and kept (with the
    newest ``EVALUATIONS_KEPT_PER_SET`` of the set)."""
    kept = evaluation_cached(prediction_set=prediction_set, key=key)
    if kept is not None:
        return kept
    _set_checked(prediction_set)
    if in_request:
        _within_a_request(prediction_set)
    started = time.perf_counter()
    value = compute()
    seconds = time.perf_counter() - started
    # Two requests may compute the same at once: the first kept wins, both
    # answer the same. Kept only while the set exists (deleted meanwhile:
    # nothing is kept, and the answer is still right for the request).
    with transaction.atomic():
        if PredictionSet.objects.filter(pk=prediction_set.pk).select_for_update().exists():
            EvaluationCache.objects.bulk_create(
                [
                    EvaluationCache(
                        prediction_set=prediction_set,
                        key=key,
                        kind=kind,
                        value=json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False),
                        seconds=seconds,
                    )
                ],
                ignore_conflicts=True,
            )
            older = EvaluationCache.objects.filter(prediction_set=prediction_set).values("pk")
            EvaluationCache.objects.filter(pk__in=older[EVALUATIONS_KEPT_PER_SET:]).delete()
    return value


def prediction_set_evaluation(
    *, prediction_set: PredictionSet, options: report.Options | None = None, in_request: bool = True
) -> dict:
    """The set's ``approve-evaluation/1`` document for ``options``: computed
    the first time it is asked for, then kept until the set is deleted.
    ``prediction_set`` as ``selectors.prediction_set_get`` gives it;
    InvalidInput (``labels``) for a set of more labels than allowed, and
    (``rows``), ``in_request``, for one of more rows than a web upload's
    that was not kept at import."""
    chosen = options or report.Options()
    key = _evaluation_key(prediction_set, "document", chosen)

    def compute() -> dict:
        return report.evaluation_document(prediction_data_get(prediction_set=prediction_set), chosen)

    return _evaluation(prediction_set, "document", key, compute, in_request=in_request)


def candidate_report_summary(
    *, prediction_set: PredictionSet, name: str, options: report.Options | None = None, in_request: bool = True
) -> dict:
    """``report.candidate_summary`` of one candidate of the set, kept as the
    document is (``prediction_set_evaluation``)."""
    chosen = options or report.Options()
    key = _evaluation_key(prediction_set, "report", chosen, name)

    def compute() -> dict:
        data = prediction_data_get(prediction_set=prediction_set, candidates=[name])
        return report.candidate_summary(data, name, chosen)

    return _evaluation(prediction_set, "report", key, compute, in_request=in_request)


def prediction_set_evaluations_keep(*, prediction_set: PredictionSet) -> None:
    """Compute and keep, outside any request, the set's document and each
    candidate's report with the default options (``import_predictions``:
    the pages and the API then read them, whatever the set's size).
    ``prediction_set`` as ``selectors.prediction_set_get`` gives it."""
    prediction_set_evaluation(prediction_set=prediction_set, in_request=False)
    for row in prediction_set.candidate_arrays.all():
        candidate_report_summary(prediction_set=prediction_set, name=row.candidate.name, in_request=False)


# --- study metrics computed from predictions -------------------------------------------------

# The parameters of each kind a computation lists (report.Computation.parameters).
PARAMETER_FIELDS = {
    "threshold": ("threshold_method", "threshold_value", "threshold_sensitivity", "use_threshold"),
    "alpha": ("alpha",),
    "beta": ("beta",),
    "root": ("root",),
    "acc_d": ("acc_d",),
    "n_parameters": ("n_parameters",),
}


def _positive(value: Any, field: str) -> float:
    value = number(value, field)
    if value <= 0:
        raise InvalidInput({field: f"must be greater than 0, got {value:g}"})
    return value


def _parameter(name: str, value: Any, field: str, candidate_names: set[str]) -> Any:
    if name == "threshold_method":
        if value not in report.THRESHOLD_METHODS:
            raise InvalidInput({field: f"must be one of {', '.join(report.THRESHOLD_METHODS)}, got {value!r}"})
        return value
    if name == "threshold_value":
        return number(value, field)
    if name == "threshold_sensitivity":
        value = number(value, field)
        if not 0 < value <= 1:
            raise InvalidInput({field: f"must lie in (0, 1], got {value:g}"})
        return value
    if name == "use_threshold":
        return expect(value, bool, field, "true or false")
    if name == "n_parameters":
        expect(value, dict, field, "an object of candidate names and numbers of parameters")
        counts = {}
        for candidate, count in value.items():
            if candidate not in candidate_names:
                raise InvalidInput({f"{field}.{candidate}": "is not a candidate of this study"})
            refusal = {f"{field}.{candidate}": f"must be a whole number of 0 or more, got {count!r}"}
            if isinstance(count, bool) or not isinstance(count, Real):
                raise InvalidInput(refusal)
            # int() takes any numbers.Real, but typeshed's Real does not say so.
            whole = int(count)  # type: ignore[call-overload]  # int() takes any numbers.Real; typeshed's Real does not say so
            if count != whole or count < 0:
                raise InvalidInput(refusal)
            counts[candidate] = whole
        return counts
    return _positive(value, field)


def computation_parameter_names(computation: str) -> list[str]:
    """The names of the parameters ``computation`` takes (a key of ``report.COMPUTATIONS``)."""
    return [name for kind in report.COMPUTATIONS[computation].parameters for name in PARAMETER_FIELDS[kind]]


def computation_parameters(computation: str, parameters: Any, *, candidate_names: set[str]) -> dict:
    """The parameters of ``computation`` checked (InvalidInput naming
    ``parameters.<name>``), without those the computation does not take."""
    if computation not in report.COMPUTATIONS:
        raise InvalidInput({"computation": f"must be one of {', '.join(report.COMPUTATIONS)}, got {computation!r}"})
    parameters = {} if parameters is None else expect(parameters, dict, "parameters", "an object")
    allowed = computation_parameter_names(computation)
    unknown = sorted(set(parameters) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) if allowed else "none"
        raise InvalidInput({f"parameters.{unknown[0]}": f"is not a parameter of {computation} (it takes {takes})"})
    return {name: _parameter(name, value, f"parameters.{name}", candidate_names) for name, value in parameters.items()}


# What a report of a set takes: every parameter but the candidates' numbers of
# parameters (AIC and BIC are computed for study metrics only).
REPORT_PARAMETERS = tuple(name for kind, names in PARAMETER_FIELDS.items() if kind != "n_parameters" for name in names)


def report_options(parameters: dict[str, Any]) -> report.Options:
    """The options of a set's report from parameters given by name (the
    API's query), each checked as a mapping's (InvalidInput naming it); the
    defaults for those left out."""
    errors, checked = {}, {}
    for name, value in parameters.items():
        if name not in REPORT_PARAMETERS:
            errors[name] = f"is not a parameter of a report (they are {', '.join(REPORT_PARAMETERS)})"
            continue
        try:
            checked[name] = _parameter(name, value, name, set())
        except InvalidInput as error:
            errors.update(error.errors)
    if errors:
        raise InvalidInput(errors)
    return report.Options(**checked)


@transaction.atomic
def metric_computation_set(*, metric: Metric, computation: str, parameters: Any = None) -> MetricComputation:
    """Map ``metric`` to a computation from predictions, replacing any
    earlier mapping. Refused when the computation runs the other way from the
    metric (log loss, lower is better, for a higher-is-better metric): its
    values would rank the candidates upside down. Nothing is computed yet."""
    study = locked(metric.study)
    names = set(Candidate.objects.filter(study=study).values_list("name", flat=True))
    parameters = computation_parameters(computation, parameters, candidate_names=names)
    kind = report.COMPUTATIONS[computation]
    if kind.better != metric.better:
        raise InvalidInput(
            {
                "computation": f"{kind.name} is {kind.better}-is-better and {metric.name} is {metric.better}-is-"
                f"better: choose a computation that runs the same way, or change the metric's direction first"
            }
        )
    mapping, _ = MetricComputation.objects.update_or_create(
        metric=metric, defaults={"computation": computation, "parameters": parameters}
    )
    return mapping


@transaction.atomic
def metric_computation_remove(*, metric: Metric) -> None:
    """Stop computing ``metric`` from predictions; its measurements stay as they are."""
    locked(metric.study)
    history.delete(MetricComputation.objects.filter(metric=metric))


@dataclass(frozen=True)
class Computed:
    metric: str
    candidate: str
    before: float | None
    value: float
    prediction_set: str


@dataclass(frozen=True)
class NotComputed:
    metric: str
    candidate: str
    reason: str


@dataclass
class ComputeOutcome:
    computed: list[Computed] = field(default_factory=list)
    not_computed: list[NotComputed] = field(default_factory=list)

    @property
    def changed(self) -> list[Computed]:
        return [c for c in self.computed if c.before != c.value]


def _mapped_metrics(study: Study, names: Any) -> list[Metric]:
    """The study's metrics of ``names``, each mapped to a computation, or
    InvalidInput naming every name that is not (``metrics[<index>]``)."""
    names = expect(names, (list, tuple), "metrics", "a list of metric names")
    texts = [name for name in names if isinstance(name, str)]
    found = {m.name: m for m in Metric.objects.filter(study=study, name__in=texts).select_related("computation")}
    errors = {}
    for index, name in enumerate(names):
        metric = found.get(name) if isinstance(name, str) else None
        if metric is None:
            errors[f"metrics[{index}]"] = f"no metric named {name!r} in this study"
        elif not hasattr(metric, "computation"):
            errors[f"metrics[{index}]"] = f"{name} is not computed from predictions: map it to a computation first"
    if errors:
        raise InvalidInput(errors)
    return list(found.values())


def _value_or_raise(value: float | ValueError) -> float:
    if isinstance(value, ValueError):
        raise value
    return value


#: A value computed: of which mapping, for which candidate, from which set.
_ComputedValue = tuple[MetricComputation, Candidate, PredictionSet, float]


def _candidate_value(
    mapping: MetricComputation,
    candidate: Candidate,
    data: PredictionData,
    options: report.Options,
    pairwise: dict[int, dict[str, float | ValueError]],
    set_id: int,
) -> float:
    """The mapping's value for a candidate from its set's data (ValueError
    when undefined); A3R and ARR compare every candidate of a set: computed
    once per set, kept in ``pairwise`` by set."""
    if mapping.computation in report.PAIRWISE:
        if set_id not in pairwise:
            pairwise[set_id] = report.pairwise_values(data, mapping.computation, options)
        return _value_or_raise(pairwise[set_id][candidate.name])
    return report.metric_value(data, candidate.name, mapping.computation, options)


def _mapping_values(
    mapping: MetricComputation,
    candidates: list[Candidate],
    newest: dict[int, int],
    too_wide: dict[int, str],
    data: dict[int, PredictionData],
    sets: dict[int, PredictionSet],
    outcome: ComputeOutcome,
) -> list[_ComputedValue]:
    """One mapping's value for each candidate from its newest set; a
    candidate without predictions, of a set of too many labels or whose value
    is undefined is added to ``outcome.not_computed`` with the reason."""
    # The mapping's parameters were checked when it was set; the defaults fill the rest.
    options = report.Options(**mapping.parameters)
    # A3R and ARR compare every candidate of a set: computed once per set.
    pairwise: dict[int, dict[str, float | ValueError]] = {}
    values: list[_ComputedValue] = []
    for candidate in candidates:
        if candidate.pk not in newest:
            outcome.not_computed.append(NotComputed(mapping.metric.name, candidate.name, "no predictions"))
            continue
        set_id = newest[candidate.pk]
        if set_id in too_wide:
            outcome.not_computed.append(NotComputed(mapping.metric.name, candidate.name, too_wide[set_id]))
            continue
        try:
            value = _candidate_value(mapping, candidate, data[set_id], options, pairwise, set_id)
        except ValueError as error:
            outcome.not_computed.append(NotComputed(mapping.metric.name, candidate.name, str(error)))
            continue
        values.append((mapping, candidate, sets[set_id], value))
    return values


def _measurements_store(
    study: Study, mappings: list[MetricComputation], candidates: list[Candidate], values: list[_ComputedValue]
) -> dict[tuple[int, int], float]:
    """Store the computed values, as measurements (``measurements_set``)
    with their provenance, in one transaction; the values they replace,
    ``{(candidate id, metric id): value}``."""
    with transaction.atomic():
        before = {
            (row.candidate_id, row.metric_id): row.value
            for row in Measurement.objects.filter(
                study=study, metric__in=[m.metric for m in mappings], candidate__in=candidates
            )
        }
        workspace_services.measurements_set(
            study=study,
            measurements=[
                {"candidate": candidate.name, "metric": mapping.metric.name, "value": value}
                for mapping, candidate, _, value in values
            ],
        )
        now = timezone.now()
        history.bulk_create(
            MeasurementSource,
            [
                MeasurementSource(
                    study=study,
                    candidate=candidate,
                    metric=mapping.metric,
                    prediction_set=prediction_set,
                    prediction_set_name=prediction_set.name,
                    computation=mapping.computation,
                    parameters=mapping.parameters,
                    computed_at=now,
                    value=value,
                )
                for mapping, candidate, prediction_set, value in values
            ],
            update_conflicts=True,
            unique_fields=["candidate", "metric"],
            update_fields=[
                "prediction_set",
                "prediction_set_name",
                "computation",
                "parameters",
                "computed_at",
                "value",
            ],
        )
    return before


def measurements_compute(*, study: Study, metrics: list[str] | None = None) -> ComputeOutcome:
    """Compute every mapped metric (or those named in ``metrics``, each of
    which must be mapped) for every candidate from the candidate's newest
    prediction set, and store the values through ``measurements_set`` with
    their provenance. A candidate without predictions, or whose value is
    undefined (one class only, a column the computation needs), is listed in
    ``not_computed`` with the reason and its measurement left as it was. A3R
    and ARR compare the candidates of one set. Its queries do not grow with
    the number of metrics, candidates or sets (but for the upserts, which the
    database may split into batches of many thousand rows)."""
    mapped = MetricComputation.objects.filter(metric__study=study).select_related("metric")
    if metrics is not None:
        mapped = mapped.filter(metric__in=_mapped_metrics(study, metrics))
    mappings = list(mapped.order_by("metric__attribute__position", "metric__position", "metric_id"))
    if not mappings:
        return ComputeOutcome()
    candidates = list(Candidate.objects.filter(study=study).order_by("position", "id"))
    newest = selectors.newest_prediction_sets(study_id=study.pk)
    sets = PredictionSet.objects.in_bulk(set(newest.values()))
    # A set of more labels than allowed (stored before the limit) is not
    # evaluated, nor even read: its candidates are not computed, with the reason.
    too_wide = {pk: reason for pk, s in sets.items() if (reason := _too_many_labels(s))}
    data = prediction_data_by_set(prediction_sets=[s for pk, s in sets.items() if pk not in too_wide])
    outcome = ComputeOutcome()
    values: list[_ComputedValue] = []
    for mapping in mappings:
        values.extend(_mapping_values(mapping, candidates, newest, too_wide, data, sets, outcome))
    if not values:
        return outcome
    before = _measurements_store(study, mappings, candidates, values)
    outcome.computed = [
        Computed(mapping.metric.name, candidate.name, before.get((candidate.pk, mapping.metric_id)), value, s.name)
        for mapping, candidate, s, value in values
    ]
    return outcome


# --- elicited metrics (METHOD.md 7.3) ---------------------------------------------------------

#: The designer's default tolerance: 4 (k - 1) ceil(log2(1 / 0.05)) = 40
#: questions for three classes (the source's 0.01 asks 56).
ELICITATION_EPSILON_DEFAULT = 0.05
#: The most questions an elicited metric may ask each expert (workspace.limits).
ELICITATION_MAX_QUESTIONS = limits.ELICITATION_MAX_QUESTIONS


def _elicitation_set_and_candidate(study: Study, prediction_set: Any, reference_candidate: Any) -> dict:
    errors: dict[str, str] = {}
    found: dict[str, Any] = {}
    if isinstance(prediction_set, bool) or not isinstance(prediction_set, int):
        errors["prediction_set"] = f"must be the id of one of the study's prediction sets, got {prediction_set!r}"
    else:
        found["set"] = PredictionSet.objects.filter(study=study, pk=prediction_set).first()
        if found["set"] is None:
            errors["prediction_set"] = f"no prediction set {prediction_set} in this study"
    if not isinstance(reference_candidate, str):
        errors["reference_candidate"] = f"must be a candidate's name, got {reference_candidate!r}"
    else:
        found["candidate"] = Candidate.objects.filter(study=study, name=reference_candidate).first()
        if found["candidate"] is None:
            errors["reference_candidate"] = f"no candidate named {reference_candidate!r} in this study"
    if errors:
        raise InvalidInput(errors)
    return found


@transaction.atomic
def elicited_metric_set(
    *, metric: Metric, kind: Any, prediction_set: Any, reference_candidate: Any, epsilon: Any
) -> ElicitedMetric:
    """Make ``metric`` an elicited metric (or change how it is elicited):
    ``kind`` (``diagonal`` or ``offdiagonal``), the id of the prediction set
    and the name of the reference candidate whose class probabilities make
    the questions, and the tolerance ``epsilon``. Changing any of them
    clears every expert's answers (their questions were others), and makes
    the metric follow its values (``_metric_follows_elicitation``: unit,
    direction, default range, ranges to confirm). Refused for a metric
    computed from predictions, a candidate without class probabilities in
    the set, a tolerance that asks more than ``ELICITATION_MAX_QUESTIONS``,
    or, in the assessment (when the experts answer), a metric the vote did
    not select."""
    study = locked(metric.study)
    workspace_services.require_phase(study, workspace_services.Action.CHANGE_ELICITATION)
    if kind not in ElicitedMetric.Kind.values:
        raise InvalidInput({"kind": f"must be one of {', '.join(ElicitedMetric.Kind.values)}, got {kind!r}"})
    epsilon = number(epsilon, "epsilon")
    found = _elicitation_set_and_candidate(study, prediction_set, reference_candidate)
    if study.phase == Phase.ASSESSMENT and not metric.is_selected:
        raise InvalidInput({"metric": f"{metric.name} was not selected by the vote: no run uses it"})
    if MetricComputation.objects.filter(metric=metric).exists():
        raise InvalidInput({"metric": f"{metric.name} is computed from predictions: stop computing it first"})
    elicited = ElicitedMetric(
        metric=metric,
        kind=kind,
        prediction_set=found["set"],
        reference_candidate=found["candidate"],
        epsilon=epsilon,
    )
    try:
        questions = elicited_domain.new_elicitation(kind, elicited_domain.reference_eta(elicited), epsilon)
    except ValueError as error:
        field_name = "epsilon" if "epsilon" in str(error) else "reference_candidate"
        raise InvalidInput({field_name: str(error)}) from None
    if questions.total_queries > ELICITATION_MAX_QUESTIONS:
        raise InvalidInput(
            {
                "epsilon": f"would ask each expert {questions.total_queries} questions, more than "
                f"{ELICITATION_MAX_QUESTIONS}: choose a larger tolerance, or the diagonal kind"
            }
        )
    current = ElicitedMetric.objects.filter(metric=metric).first()
    if current is None:
        elicited.save()
        _metric_follows_elicitation(metric, kind)
        return elicited
    same = (current.kind, current.prediction_set_id, current.reference_candidate_id, current.epsilon) == (
        kind,
        found["set"].pk,
        found["candidate"].pk,
        epsilon,
    )
    if not same:
        history.delete(current.answer_sets.all())
        current.kind, current.prediction_set, current.reference_candidate = kind, found["set"], found["candidate"]
        current.epsilon = epsilon
        current.save()
        _metric_follows_elicitation(metric, kind)
    return current


#: What an elicited metric's values are, by kind: its unit and direction
#: (docs/method.md 7.4). A diagonal metric is a weighted accuracy (the
#: expert's weights sum to 1, so it lies in [0, 1]); an off-diagonal one is
#: the expected cost of a prediction, the expert's costs of the confusions
#: weighted by how often each happens (costs of unit Euclidean norm).
ELICITED_UNITS = {
    ElicitedMetric.Kind.DIAGONAL: ("weighted accuracy", Direction.HIGHER),
    ElicitedMetric.Kind.OFFDIAGONAL: ("expected cost per instance", Direction.LOWER),
}


def _metric_follows_elicitation(metric: Metric, kind: str) -> None:
    """The metric made elicited (or its design changed), under the study's
    lock: its values are now each expert's own, on another scale. Its unit
    and direction become the kind's (``ELICITED_UNITS``); its default range,
    set for the old values, is cleared; every expert's range of it is
    marked as needing confirmation (``AcceptableRange.needs_confirmation``),
    its bounds swapped when the direction flips so that it stays a valid
    range of the new direction until the expert confirms or changes it."""
    unit, better = ELICITED_UNITS[ElicitedMetric.Kind(kind)]
    flips = metric.better != better
    metric.unit, metric.better = unit, better
    metric.default_least_acceptable = metric.default_desired = None
    metric.save(update_fields=["unit", "better", "default_least_acceptable", "default_desired"])
    ranges = list(AcceptableRange.objects.filter(metric=metric))
    for row in ranges:
        row.needs_confirmation = True
        if flips:
            row.least_acceptable, row.desired = row.desired, row.least_acceptable
    history.bulk_update(AcceptableRange, ranges, ["needs_confirmation", "least_acceptable", "desired"])


@transaction.atomic
def elicited_metric_remove(*, metric: Metric) -> None:
    """Stop eliciting ``metric``: the experts' answers go with it; the metric
    stays, and its values are the measured ones again, so every expert's
    range of it is marked as needing confirmation."""
    study = locked(metric.study)
    workspace_services.require_phase(study, workspace_services.Action.CHANGE_ELICITATION)
    if history.delete(ElicitedMetric.objects.filter(metric=metric)):
        history.update(AcceptableRange.objects.filter(metric=metric), needs_confirmation=True)


def _answers_locked(elicited: ElicitedMetric, expert: Membership) -> ElicitationAnswers:
    """The expert's answers to ``elicited``, under the study's lock, which the
    caller holds (created empty the first time)."""
    study = locked(elicited.metric.study)
    workspace_services.require_phase(study, workspace_services.Action.ELICIT)
    row, _ = ElicitationAnswers.objects.get_or_create(elicited_metric=elicited, expert=expert)
    return row


@transaction.atomic
def elicitation_answer(
    *, elicited_metric: ElicitedMetric, expert: Membership, answer: Any, question: Any = None
) -> ElicitationAnswers:
    """Record the expert's answer to the next question: ``first``, ``second``
    or ``none`` (no preference). ``question``, when given, is the number of
    the question answered (1-based): a second submission of the same form
    is refused rather than taken as the next question's answer. Once the
    search is finished, the next answers are the consistency check's
    (``elicited.CHECKS`` questions asked again, stored after the search's);
    the answer that finishes the check stores the recovered weights."""
    workspace_services.require_taking_part(expert)
    row = _answers_locked(elicited_metric, expert)
    if answer not in elicited_domain.ANSWER_CHOICES:
        raise InvalidInput({"answer": f"must be one of first, second, none; got {answer!r}"})
    expected = len(row.answers) + 1
    if question is not None and (isinstance(question, bool) or question != expected):
        raise InvalidInput({"question": f"question {question!r} is not the next one: question {expected} is"})
    elicitation = elicited_domain.elicitation_replayed(elicited_metric, row.answers)
    code = elicited_domain.ANSWER_CHOICES[answer]
    if not elicitation.finished:
        elicitation.answer(elicited_domain.ANSWER_CODES[code])
    elif len(row.answers) >= elicitation.total_queries + elicited_domain.CHECKS:
        raise InvalidInput({"answer": "every question is answered: go back one question, or start again"})
    row.answers += code
    # The weights are final (and stored) only once the check is answered.
    row.weights = elicited_domain.final_weights(elicitation, row.answers)
    row.save(update_fields=["answers", "weights", "updated_at"])
    return row


@transaction.atomic
def elicitation_answers_restore(
    *, elicited_metric: ElicitedMetric, answers: dict[Membership, Any]
) -> list[ElicitationAnswers]:
    """Store experts' answers brought whole from elsewhere (a study bundle's):
    ``{expert: stored codes}``, each checked (``elicited.answers_problem``:
    codes 0, 1 or 2, no more than the search's questions and the check's)
    and replayed, and the weights its answers give stored once finished,
    as ``elicitation_answer`` stores them; never trusted from elsewhere. A
    refusal names the expert's username. In the phase experts answer in."""
    study = locked(elicited_metric.metric.study)
    workspace_services.require_phase(study, workspace_services.Action.ELICIT)
    total = elicited_domain.elicitation_replayed(elicited_metric, "").total_queries
    rows = []
    for expert, codes in answers.items():
        problem = elicited_domain.answers_problem(codes, total)
        if problem is not None:
            raise InvalidInput({expert.user.get_username(): problem})
        elicitation = elicited_domain.elicitation_replayed(elicited_metric, codes)
        weights = elicited_domain.final_weights(elicitation, codes)
        rows.append(ElicitationAnswers(elicited_metric=elicited_metric, expert=expert, answers=codes, weights=weights))
    return history.bulk_create(ElicitationAnswers, rows)


@transaction.atomic
def elicitation_ratio_type(
    *, elicited_metric: ElicitedMetric, expert: Membership, class_label: Any, ratio: Any
) -> ElicitationAnswers:
    """Type the ratio of class ``class_label`` to the reference class (the set's
    first label) where the expert's search stopped at the edge of what the
    reference candidate's probabilities can show: ``1 : ratio``, per 100
    cases of each class as the questions are asked; it replaces the
    search's in the stored weights. ``ratio`` None takes a typed one back.
    Only once every question is answered, for a pair at the edge, and a
    ratio that agrees with the answers (``elicited.typed_ratio_problem``)."""
    workspace_services.require_taking_part(expert)
    row = _answers_locked(elicited_metric, expert)
    if elicited_metric.kind != ElicitedMetric.Kind.DIAGONAL:
        raise InvalidInput({"class_label": "only a diagonal metric compares each class with the reference class"})
    if row.weights is None:
        raise InvalidInput({"ratio": "answer every question first (the search's and the check's)"})
    result = elicited_domain.result_of(elicited_metric, row.weights, row.answers, row.typed_ratios)
    pair = next((pair for pair in result.pairs if pair.label == class_label), None)
    if pair is None:
        names = ", ".join(other.label for other in result.pairs)
        reference = result.pairs[0].reference
        raise InvalidInput({"class_label": f"must be a class compared with {reference}: {names}; got {class_label!r}"})
    if pair.bound is None:
        inside = f"your answers found {pair.label}'s ratio inside what the reference can show"
        raise InvalidInput({"class_label": f"{inside}: go back to change it"})
    typed = dict(row.typed_ratios)
    if ratio is None:
        typed.pop(str(pair.index), None)
    else:
        ratio = number(ratio, "ratio")
        problem = elicited_domain.typed_ratio_problem(pair, ratio)
        if problem is not None:
            raise InvalidInput({"ratio": problem})
        typed[str(pair.index)] = ratio
    elicitation = elicited_domain.elicitation_replayed(elicited_metric, row.answers)
    prior = elicited_domain.class_prior(elicited_metric)
    row.typed_ratios, row.weights = typed, elicited_domain.final_weights(elicitation, row.answers, typed, prior)
    row.save(update_fields=["typed_ratios", "weights", "updated_at"])
    return row


@transaction.atomic
def elicitation_back(*, elicited_metric: ElicitedMetric, expert: Membership) -> ElicitationAnswers:
    """Take back the last answer: the search is replayed without it."""
    row = _answers_locked(elicited_metric, expert)
    if not row.answers:
        raise InvalidInput({"answer": "no question is answered yet"})
    # The typed ratios go too: they replaced what the answers gave.
    row.answers, row.weights, row.typed_ratios = row.answers[:-1], None, {}
    row.save(update_fields=["answers", "weights", "typed_ratios", "updated_at"])
    return row


@transaction.atomic
def elicitation_reset(*, elicited_metric: ElicitedMetric, expert: Membership) -> ElicitationAnswers:
    """Start the expert's questions again from the first (their answers cleared)."""
    row = _answers_locked(elicited_metric, expert)
    row.answers, row.weights, row.typed_ratios = "", None, {}
    row.save(update_fields=["answers", "weights", "typed_ratios", "updated_at"])
    return row
