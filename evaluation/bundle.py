"""The elicited metrics of a study bundle (``approve-study/1``, FORMATS.md):
``prediction_sets``, the sets their questions and values are read from, and
``elicited_metrics``, each one's design and the experts' answers.

Export writes both keys only for a study with an elicited metric, so other
bundles are as they were. Import checks each set's archives whole
(``evaluation.arrays.arrays_checked``) before storing anything, makes each
elicited metric through ``evaluation.services.elicited_metric_set`` and
replays each expert's answers (``evaluation.services.elicitation_answers_restore``):
the weights are those the answers give here, never read from the bundle.
``workspace.bundles`` calls these in its phases; every refusal names its
path in the bundle."""

import base64
import binascii
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, cast

from workspace import services as workspace_services
from workspace.errors import InvalidInput
from workspace.extensions import BundleSection
from workspace.limits import PREDICTIONS_MAX_ARRAY_BYTES, PREDICTIONS_MAX_CLASSES, PREDICTIONS_MAX_LABEL_LENGTH
from workspace.models import Membership, Metric, Study
from workspace.services import expect as _expect
from workspace.services import iso_moment
from workspace.services import keys as _keys
from workspace.services import moment as _moment

from . import selectors as evaluation_selectors
from . import services as evaluation_services
from .arrays import TooManyBytes, TooManyRows, arrays_checked
from .models import CandidatePredictionArrays, ElicitationAnswers, ElicitedMetric, PredictionSet
from .predictions import CandidatePredictions, cut, shown

SET_KEYS = ("name", "uploaded_at", "positive", "labels", "folds", "context_columns", "contexts", "candidates")


# --- export ------------------------------------------------------------------------------


def elicited_export(*, study: Study, metrics: Sequence[str], experts: Sequence[str], every_set: bool = False) -> dict:
    """``{"prediction_sets": [...], "elicited_metrics": {...}}`` of a study
    with elicited metrics (``metrics``, in the bundle's order; the answers
    in the order of ``experts``), or ``{}`` without any.
    The sets: each elicited metric's, and each candidate's newest (where its
    value is read from), oldest first, each whole (every candidate's
    arrays, so that the set is the one uploaded); with ``every_set`` (a
    study's copy), every set of the study, elicited metrics or not (``{}``
    for a study without sets)."""
    found = {e.metric.name: e for e in evaluation_selectors.elicited_metric_list(study=study)}
    if not found and not every_set:
        return {}
    elicited = [found[name] for name in metrics if name in found]
    sets = _sets_exported(study, elicited, every_set)
    if not sets:
        return {}
    index = {s.pk: position for position, s in enumerate(sets)}
    arrays: dict[int, list[dict]] = {s.pk: [] for s in sets}
    for set_id, candidate, columns, archive in (
        CandidatePredictionArrays.objects.filter(prediction_set__in=sets)
        .order_by("id")
        .values_list("prediction_set_id", "candidate__name", "columns", "arrays")
    ):
        arrays[set_id].append(
            {"candidate": candidate, "columns": columns, "arrays": base64.b64encode(bytes(archive)).decode("ascii")}
        )
    answers: dict[int, dict[str, str]] = {}
    for elicited_id, username, codes in ElicitationAnswers.objects.filter(elicited_metric__in=elicited).values_list(
        "elicited_metric_id", "expert__user__username", "answers"
    ):
        if codes:
            answers.setdefault(elicited_id, {})[username] = codes
    order = {username: position for position, username in enumerate(experts)}
    return {
        "prediction_sets": [
            {
                "name": s.name,
                "uploaded_at": iso_moment(s.uploaded_at),
                "positive": s.positive,
                "labels": s.labels,
                "folds": s.folds,
                "context_columns": s.context_columns,
                "contexts": s.contexts,
                "candidates": arrays[s.pk],
            }
            for s in sets
        ],
        "elicited_metrics": {
            e.metric.name: {
                "kind": e.kind,
                "epsilon": e.epsilon,
                "prediction_set": index[e.prediction_set_id],
                "reference_candidate": e.reference_candidate.name,
                "answers": dict(sorted(answers.get(e.pk, {}).items(), key=lambda item: order.get(item[0], len(order)))),
            }
            for e in elicited
        },
    }


def _sets_exported(study: Study, elicited: Sequence[ElicitedMetric], every_set: bool) -> list[PredictionSet]:
    """The sets a bundle carries, oldest first: every set of the study with
    ``every_set``, else the elicited metrics' and each candidate's newest."""
    sets = PredictionSet.objects.filter(study=study)
    if not every_set:
        wanted = {e.prediction_set_id for e in elicited} | set(
            evaluation_selectors.newest_prediction_sets(study_id=study.pk).values()
        )
        sets = sets.filter(pk__in=wanted)
    return list(sets.order_by("uploaded_at", "id"))


# --- import ------------------------------------------------------------------------------


def _shown(value: Any) -> str:
    """A bundle's value quoted in a refusal, cut as an upload's are."""
    return shown(value) if isinstance(value, str) else cut(repr(value))


def _texts(value: Any, field: str, *, distinct: bool = True) -> list[str]:
    """A set's labels, folds, context columns or a context's values: texts
    of at most PREDICTIONS_MAX_LABEL_LENGTH characters, as an upload's."""
    _expect(value, list, field, "a list of texts")
    for position, item in enumerate(value):
        _expect(item, str, f"{field}[{position}]", "a text")
        if len(item) > PREDICTIONS_MAX_LABEL_LENGTH:
            raise InvalidInput(
                {
                    f"{field}[{position}]": f"{shown(item)} is {len(item):,} characters long; a label, a fold or a "
                    f"context is at most {PREDICTIONS_MAX_LABEL_LENGTH:,} characters"
                }
            )
    if distinct and len(set(value)) != len(value):
        counted = Counter(value)
        twice = next(item for item in value if counted[item] > 1)
        raise InvalidInput({field: f"{shown(twice)} is listed twice"})
    return value


def _set_candidates(entries: Any, path: str, candidates: set[str], shape: dict, max_rows: int | None) -> dict:
    """``{name: CandidatePredictions}`` of a set's ``candidates``, each archive checked whole."""
    _expect(entries, list, path, "a list of each candidate's arrays")
    if not entries:
        raise InvalidInput({path: "must hold at least one candidate's arrays"})
    found: dict[str, CandidatePredictions] = {}
    rows = size = 0
    for position, entry in enumerate(entries):
        field = f"{path}[{position}]"
        _keys(entry, field, required=("candidate", "arrays"), optional=("columns",))
        name = _set_candidate_name(entry, field, candidates, found)
        archive = _archive_decode(entry, field)
        arrays = _archive_read(name, archive, field, shape, max_rows=max_rows, rows=rows, size=size)
        if "columns" in entry and entry["columns"] != arrays.columns:
            raise InvalidInput({f"{field}.columns": f"must be the archive's optional arrays, {arrays.columns}"})
        rows += len(arrays)
        size += sum(values.nbytes for values in (getattr(arrays, key) for key in ("y_true", *arrays.columns)))
        found[name] = arrays
    return found


def _set_candidate_name(entry: dict, field: str, candidates: set[str], found: Mapping[str, object]) -> str:
    """The entry's candidate: one of the bundle's, not given arrays in this
    set already."""
    name = entry["candidate"]
    if not isinstance(name, str) or name not in candidates:
        raise InvalidInput({f"{field}.candidate": f"no candidate named {_shown(name)} in the bundle"})
    if name in found:
        raise InvalidInput({f"{field}.candidate": f"{shown(name)} has arrays in this set already"})
    return name


def _archive_decode(entry: dict, field: str) -> bytes:
    """The entry's ``arrays``: the archive's bytes from its base64 text."""
    encoded = _expect(entry["arrays"], str, f"{field}.arrays", "the archive of the arrays, in base64")
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidInput({f"{field}.arrays": f"not base64 ({error})"}) from None


def _archive_read(
    name: str, archive: bytes, field: str, shape: dict, *, max_rows: int | None, rows: int, size: int
) -> CandidatePredictions:
    """The candidate's arrays read from the archive, checked whole; refused
    when, with the set's ``rows`` and ``size`` so far, they go over the
    row or memory limit (none when ``max_rows`` is None)."""
    remaining = None if max_rows is None else max_rows - rows
    # The memory limit goes with the row limit: both are the web's and the API's.
    memory = None if max_rows is None else PREDICTIONS_MAX_ARRAY_BYTES - size
    try:
        return arrays_checked(name, archive, max_rows=remaining, max_bytes=memory, **shape)
    except TooManyBytes:
        raise InvalidInput(
            {
                f"{field}.arrays": f"too large: the set's arrays would take more than "
                f"{PREDICTIONS_MAX_ARRAY_BYTES:,} bytes once read, the limit for a prediction set brought "
                "in a bundle (import_study, run by the operator, has none)"
            }
        ) from None
    except TooManyRows:
        raise InvalidInput(
            {
                f"{field}.arrays": f"too many rows: the set's candidates hold more than {max_rows:,} instances "
                "together, the limit for a prediction set (import_study, run by the operator, has none)"
            }
        ) from None
    except ValueError as error:
        raise InvalidInput({f"{field}.arrays": str(error)}) from None


def _prediction_set(study: Study, entry: Any, path: str, candidates: set[str], max_rows: int | None) -> PredictionSet:
    _keys(entry, path, required=("name", "uploaded_at", "labels", "candidates"), optional=SET_KEYS)
    labels = _texts(entry["labels"], f"{path}.labels")
    if not labels or len(labels) > PREDICTIONS_MAX_CLASSES:
        raise InvalidInput({f"{path}.labels": f"must hold 1 to {PREDICTIONS_MAX_CLASSES} labels, got {len(labels)}"})
    positive = entry.get("positive")
    if positive is not None and positive not in labels:
        raise InvalidInput({f"{path}.positive": f"must be one of the labels or null, got {_shown(positive)}"})
    folds = _texts(entry.get("folds", []), f"{path}.folds")
    columns = _texts(entry.get("context_columns", []), f"{path}.context_columns")
    contexts = _expect(entry.get("contexts", []), list, f"{path}.contexts", "a list of each context's values")
    for position, context in enumerate(contexts):
        values = _texts(context, f"{path}.contexts[{position}]", distinct=False)
        if len(values) != len(columns):
            raise InvalidInput(
                {f"{path}.contexts[{position}]": f"must hold a value per context column ({len(columns)})"}
            )
    uploaded_at = _moment(entry["uploaded_at"], f"{path}.uploaded_at")
    shape = {"labels": len(labels), "folds": len(folds), "contexts": len(contexts)}
    arrays = _set_candidates(entry["candidates"], f"{path}.candidates", candidates, shape, max_rows)
    try:
        return evaluation_services.prediction_set_restore(
            study=study,
            name=entry["name"],
            uploaded_at=uploaded_at,
            positive=positive,
            labels=labels,
            folds=folds,
            context_columns=columns,
            contexts=contexts,
            candidates=arrays,
        )
    except InvalidInput as error:
        raise error.within(path) from None


def prediction_sets_import(
    *, study: Study, entries: Any, candidates: set[str], max_rows: int | None
) -> list[PredictionSet]:
    """The bundle's ``prediction_sets``, in order, each checked whole before
    it is stored; ``max_rows``, the most rows (a candidate's instances, over
    the candidates) of one set (None: any number, the operator's command)."""
    _expect(entries, list, "prediction_sets", "a list of prediction sets")
    return [
        _prediction_set(study, entry, f"prediction_sets[{position}]", candidates, max_rows)
        for position, entry in enumerate(entries)
    ]


def elicited_metrics_import(
    *, section: Any, metrics: dict[str, Metric], sets: list[PredictionSet]
) -> dict[str, ElicitedMetric]:
    """Each of the bundle's ``elicited_metrics`` made through the service a
    designer uses (``elicited_metric_set``, in the draft phase); the answers
    come later (``elicitation_answers_import``)."""
    _expect(section, dict, "elicited_metrics", "an object keyed by metric name")
    made = {}
    for name, entry in section.items():
        path = f"elicited_metrics.{name}"
        if name not in metrics:
            raise InvalidInput({path: "no metric of that name in the bundle"})
        _keys(entry, path, required=("kind", "epsilon", "prediction_set", "reference_candidate"), optional=("answers",))
        index = entry["prediction_set"]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(sets):
            within = f"0 to {len(sets) - 1}" if sets else "the bundle has none"
            raise InvalidInput(
                {f"{path}.prediction_set": f"must be an index into prediction_sets ({within}), got {index!r}"}
            )
        try:
            made[name] = evaluation_services.elicited_metric_set(
                metric=metrics[name],
                kind=entry["kind"],
                prediction_set=sets[index].pk,
                reference_candidate=entry["reference_candidate"],
                epsilon=entry["epsilon"],
            )
        except InvalidInput as error:
            # The service names the metric itself "metric": here, the entry's path.
            raise InvalidInput(
                {path if field == "metric" else f"{path}.{field}": messages for field, messages in error.errors.items()}
            ) from None
    return made


def elicitation_answers_import(
    *, answers: dict[str, dict[Membership, Any]], elicited: dict[str, ElicitedMetric]
) -> None:
    """Each metric's answers (``{metric name: {expert: codes}}``, the experts
    already checked), replayed and stored with the weights they give."""
    for name, by_expert in answers.items():
        if by_expert:
            try:
                evaluation_services.elicitation_answers_restore(elicited_metric=elicited[name], answers=by_expert)
            except InvalidInput as error:
                raise error.within(f"elicited_metrics.{name}.answers") from None


def _setup_import(*, study: Study, bundle: dict, metrics: dict[str, Metric], max_rows: int | None) -> object:
    """The draft's part: the prediction sets, then the elicited metrics made
    from them (what ``_answers_import`` later gives answers to)."""
    sets = prediction_sets_import(
        study=study,
        entries=bundle.get("prediction_sets", []),
        candidates={entry["name"] for entry in bundle.get("candidates", [])},
        max_rows=max_rows,
    )
    made = elicited_metrics_import(section=bundle.get("elicited_metrics", {}), metrics=metrics, sets=sets)
    _defaults_restored(bundle, {name: metrics[name] for name in made})
    return made


def _defaults_restored(bundle: dict, elicited: dict[str, Metric]) -> None:
    """The bundle's default ranges of its elicited metrics, which making them
    elicited cleared (``evaluation.services``): restored when the bundle's
    direction is the kind's (a bundle written since; an older one's default
    was on the old scale and stays cleared)."""
    for entry in bundle.get("metrics", []):
        metric = elicited.get(entry.get("name"))
        if metric is not None and entry.get("default_range") is not None and entry.get("better") == metric.better:
            workspace_services.metric_update(metric=metric, default_range=entry["default_range"])


def _answers_import(*, answers: dict[str, dict[Membership, Any]], state: object) -> None:
    elicitation_answers_import(answers=answers, elicited=cast(dict[str, ElicitedMetric], state))


#: The bundle's "prediction_sets" and "elicited_metrics" sections, registered
#: into workspace's bundle (evaluation/apps.py).
SECTION = BundleSection(
    answers_key="elicited_metrics", export=elicited_export, setup_import=_setup_import, answers_import=_answers_import
)
