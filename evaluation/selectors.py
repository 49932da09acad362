"""Reads of the evaluation app. A study given here is one the caller has
resolved for the user (``workspace.selectors.study_get``: an outsider never
gets that far)."""

import dataclasses
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from django.db.models import Exists, JSONField, OuterRef, Prefetch, QuerySet, Subquery

from engine import feedback
from workspace.extensions import QuestionStep
from workspace.models import Candidate, Measurement, Membership, Metric, Study

from . import elicited as elicited_domain
from . import report
from .models import (
    CandidatePredictionArrays,
    ElicitationAnswers,
    ElicitedMetric,
    EvaluationCache,
    MeasurementSource,
    MetricComputation,
    PredictionSet,
)
from .predictions import PredictionData


class CurrentValue(TypedDict):
    """What ``measurement_source_list`` adds to each source."""

    current_value: float | None


# A source with its ``current_value``, for the type checker; at run time (where
# drf-spectacular reads the serializers' hints) the plain model.
if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    MeasurementSourceNow = WithAnnotations[MeasurementSource, CurrentValue]
else:
    MeasurementSourceNow = MeasurementSource


def prediction_set_list(*, study: Study) -> QuerySet[PredictionSet]:
    """The study's prediction sets, newest first, each with its uploader and
    its candidates (names, instance counts, columns): three queries however
    many sets and candidates, and none of the stored arrays or contexts."""
    # Of each candidate, its name alone: a set of a thousand (the predictions page lists them).
    candidates = (
        CandidatePredictionArrays.objects.select_related("candidate")
        .only("prediction_set", "candidate", "candidate__name", "instance_count", "columns")
        .order_by("id")
    )
    return (
        PredictionSet.objects.filter(study=study)
        .select_related("uploaded_by")
        .defer("contexts")
        .prefetch_related(Prefetch("candidate_arrays", queryset=candidates))
    )


def prediction_set_choices(*, study: Study) -> QuerySet[PredictionSet]:
    """The study's prediction sets as a choice names them (name, row count),
    newest first, without their candidates: one query (the elicitation's
    design page, whose set of a thousand candidates is one choice)."""
    return PredictionSet.objects.filter(study=study).only("study_id", "name", "row_count", "uploaded_at")


def prediction_set_get(*, study: Study, prediction_set_id: int, contexts: bool = False) -> PredictionSet:
    """One set of the study, as the list has it (``PredictionSet.DoesNotExist``
    when the study has no such set); with its contexts too when the caller
    will compute from it (``prediction_data_get`` reads them)."""
    sets = prediction_set_list(study=study)
    if contexts:
        sets = sets.defer(None).select_related("uploaded_by")
    return sets.get(pk=prediction_set_id)


def evaluation_cached(*, prediction_set: PredictionSet, key: str) -> dict | None:
    """What was kept of the set's evaluation under ``key``
    (``evaluation.services``), or None: one query."""
    kept = EvaluationCache.objects.filter(prediction_set=prediction_set, key=key).values_list("value", flat=True)
    text = kept.first()
    return None if text is None else json.loads(text)


def prediction_set_candidate_count(*, prediction_set: PredictionSet) -> int:
    """How many candidates the set holds predictions for: one query."""
    return prediction_set.candidate_arrays.count()


def _prediction_data(prediction_set: PredictionSet, stored: list[CandidatePredictionArrays]) -> PredictionData:
    return PredictionData(
        labels=list(prediction_set.labels),
        positive=prediction_set.positive,
        folds=list(prediction_set.folds),
        context_columns=list(prediction_set.context_columns),
        contexts=[tuple(context) for context in prediction_set.contexts],
        candidates={row.candidate.name: row.predictions() for row in stored},
        rows=prediction_set.row_count,
    )


def prediction_data_get(*, prediction_set: PredictionSet, candidates: list[str] | None = None) -> PredictionData:
    """The stored set as ``evaluation.predictions`` read it: every candidate's
    arrays (or only those of ``candidates``), in the order of the file."""
    stored = CandidatePredictionArrays.objects.filter(prediction_set=prediction_set).select_related("candidate")
    if candidates is not None:
        stored = stored.filter(candidate__name__in=candidates)
    return _prediction_data(prediction_set, list(stored.order_by("id")))


def prediction_data_by_set(*, prediction_sets: list[PredictionSet]) -> dict[int, PredictionData]:
    """``prediction_data_get`` of several sets (read with their contexts),
    ``{set id: data}``: one query for all their arrays, however many sets."""
    stored: dict[int, list[CandidatePredictionArrays]] = {s.pk: [] for s in prediction_sets}
    rows = CandidatePredictionArrays.objects.filter(prediction_set__in=list(stored)).select_related("candidate")
    for row in rows.order_by("id"):
        stored[row.prediction_set_id].append(row)
    return {s.pk: _prediction_data(s, stored[s.pk]) for s in prediction_sets}


@dataclass
class MetricSources:
    """A study metric with what it is computed from and where its current
    values came from: ``computed`` candidates with a source, of which
    ``edited`` were typed over since; ``sets`` the sets they came from."""

    metric: Metric
    mapping: MetricComputation | None = None
    computed: int = 0
    edited: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    computations: list[str] = field(default_factory=list)
    last_computed: datetime | None = None


def metric_with_computation_get(*, study: Study, metric_id: int) -> Metric:
    """One metric of the study with its mapping, if any (``metric.computation``;
    ``Metric.DoesNotExist`` when the study has no such metric): one query."""
    return Metric.objects.select_related("computation").get(study=study, pk=metric_id)


def measurement_source_list(*, study: Study) -> QuerySet[MeasurementSourceNow]:
    """Where each computed measurement of the study came from, with its
    candidate, its metric and the measurement's value now
    (``current_value``, None when it was removed), in the order of
    ``workspace.selectors.measurement_list``: one query."""
    current = Measurement.objects.filter(candidate=OuterRef("candidate"), metric=OuterRef("metric")).values("value")
    return (
        MeasurementSource.objects.filter(study=study)
        .select_related("candidate", "metric")
        .annotate(current_value=Subquery(current[:1]))
        .order_by("candidate__position", "candidate_id", "metric__position", "metric_id")
    )


def measurement_sources(*, study: Study) -> dict[tuple[int, int], MeasurementSource]:
    """Where each computed measurement of the study came from, by
    (candidate id, metric id): one query."""
    return {(s.candidate_id, s.metric_id): s for s in MeasurementSource.objects.filter(study=study)}


def computed_measurements(*, study: Study) -> Exists:
    """The study's measurements computed from predictions (whether typed
    over since or not), as a filter of ``Measurement`` rows: the
    measurements table reads them for its summary of every candidate."""
    return Exists(
        MeasurementSource.objects.filter(
            study=study, candidate_id=OuterRef("candidate_id"), metric_id=OuterRef("metric_id")
        )
    )


def computed_summaries(
    *,
    metrics: list[Metric],
    sources: dict[tuple[int, int], MeasurementSource],
    values: dict[tuple[int, int], float],
    candidate_names: dict[int, str],
) -> list[MetricSources]:
    """``source_summaries`` of the metrics that some computed value still
    holds (the measurements table's "Computed from predictions")."""
    summaries = source_summaries(metrics=metrics, sources=sources, values=values, candidate_names=candidate_names)
    return [summary for summary in summaries if summary.computed]


def source_summaries(
    *,
    metrics: list[Metric],
    sources: dict[tuple[int, int], MeasurementSource],
    values: dict[tuple[int, int], float],
    candidate_names: dict[int, str],
    mappings: dict[int, MetricComputation] | None = None,
) -> list[MetricSources]:
    """Per metric (in the order given), how many of its values were computed,
    as what, from which sets, when last, and which were typed over since
    (their value no longer the computed one); with each metric's current
    mapping when ``mappings`` is given. No query: it works on what the
    caller read."""
    mappings = mappings or {}
    summaries = {m.pk: MetricSources(metric=m, mapping=mappings.get(m.pk)) for m in metrics}
    for (candidate_id, metric_id), source in sorted(sources.items()):
        summary = summaries.get(metric_id)
        if summary is None:
            continue
        summary.computed += 1
        if source.edited_since(values.get((candidate_id, metric_id))):
            summary.edited.append(candidate_names.get(candidate_id, "?"))
        if source.prediction_set_name not in summary.sets:
            summary.sets.append(source.prediction_set_name)
        if source.computation not in summary.computations:
            summary.computations.append(source.computation)
        if summary.last_computed is None or source.computed_at > summary.last_computed:
            summary.last_computed = source.computed_at
    return list(summaries.values())


def metrics_with_computations(*, study: Study) -> list[MetricSources]:
    """Every metric of the study with its mapping and the provenance of its
    measurements: four queries, whatever the number of metrics and candidates."""
    metrics = list(
        Metric.objects.filter(study=study)
        .select_related("attribute", "computation", "elicitation")
        .order_by("attribute__position", "position", "id")
    )
    # Only the values computed from predictions are compared with their
    # source (a thousand candidates' typed values are not read).
    computed = MeasurementSource.objects.filter(
        study=study, candidate_id=OuterRef("candidate_id"), metric_id=OuterRef("metric_id")
    )
    rows = Measurement.objects.filter(study=study).filter(Exists(computed))
    values = {
        (candidate, metric): value
        for candidate, metric, value in rows.values_list("candidate_id", "metric_id", "value")
    }
    names = dict(Candidate.objects.filter(study=study).values_list("pk", "name"))
    mappings = {m.pk: m.computation for m in metrics if hasattr(m, "computation")}
    return source_summaries(
        metrics=metrics,
        sources=measurement_sources(study=study),
        values=values,
        candidate_names=names,
        mappings=mappings,
    )


# --- elicited metrics ----------------------------------------------------------------------------


def elicited_metric_list(*, study: Study) -> list[ElicitedMetric]:
    """The study's elicited metrics with their metric, set and reference candidate: one query."""
    return list(
        ElicitedMetric.objects.filter(metric__study=study)
        .select_related("metric", "prediction_set", "reference_candidate")
        .order_by("metric__position", "metric__id")
    )


def elicited_metric_get(*, study: Study, metric_id: int, answers_of: Membership | None = None) -> ElicitedMetric:
    """The study's elicited metric of metric ``metric_id`` (``ElicitedMetric.DoesNotExist``
    when the study has none): one query. With ``answers_of``, that expert's
    stored answers come in the same query, for ``elicitation_state`` (the
    expert's step: issue 33, item 6)."""
    rows = ElicitedMetric.objects.select_related("metric__study", "prediction_set", "reference_candidate")
    if answers_of is not None:
        mine = ElicitationAnswers.objects.filter(elicited_metric=OuterRef("pk"), expert=answers_of)
        rows = rows.annotate(
            mine_answers=Subquery(mine.values("answers")[:1]),
            mine_typed=Subquery(mine.values("typed_ratios")[:1], output_field=JSONField()),
        )
    elicited = rows.get(metric__study=study, metric_id=metric_id)
    if answers_of is not None:
        read = (answers_of.pk, elicited.mine_answers or "", elicited.mine_typed or {})  # type: ignore[attr-defined]  # annotated above
        elicited.answers_read = read  # type: ignore[attr-defined]  # read by elicitation_state
    return elicited


def elicitation_answers_get(*, elicited_metric: ElicitedMetric, expert: Membership) -> ElicitationAnswers | None:
    """The expert's stored answers, or None before the first: one query."""
    return ElicitationAnswers.objects.filter(elicited_metric=elicited_metric, expert=expert).first()


def elicitation_progress(*, study: Study) -> dict[tuple[int, int], ElicitationAnswers]:
    """Every expert's answers to every elicited metric of the study, by
    ``(metric id, membership id)``: one query."""
    rows = ElicitationAnswers.objects.filter(elicited_metric__metric__study=study).select_related("elicited_metric")
    return {(row.elicited_metric.metric_id, row.expert_id): row for row in rows}


@dataclass(frozen=True)
class CheckAnswer:
    """One question of the consistency check: the search's question asked
    again (its 1-based number), the original answer and the repeat's (codes)."""

    question: int
    original: str
    answer: str | None

    @property
    def agrees(self) -> bool | None:
        """Whether the repeat moves the search as the original did; None until given."""
        if self.answer is None:
            return None
        return elicited_domain.ANSWER_CODES[self.answer] == elicited_domain.ANSWER_CODES[self.original]


@dataclass
class ElicitationState:
    """Where one expert stands in an elicited metric: the next question (None
    when finished), the answers so far and, once finished, the result."""

    elicited: ElicitedMetric
    labels: list[str]
    answered: int
    total: int
    answers: str
    question: "elicited_domain.Question | None"
    result: "elicited_domain.Result | None"
    weights: list[float] | None
    # The consistency check: per repeated question, its original number and
    # the two answers (the repeat's None until given); whether they agree.
    check: list["CheckAnswer"]
    consistent: bool | None

    @property
    def finished(self) -> bool:
        return self.weights is not None


def elicitation_state(*, elicited_metric: ElicitedMetric, expert: Membership) -> ElicitationState:
    """The expert's state, the search replayed from their stored answers: two
    queries at most (the answers, unless ``elicited_metric_get`` read them
    with the metric; the reference's probabilities when this process has
    not read them yet)."""
    read = getattr(elicited_metric, "answers_read", None)  # elicited_metric_get's answers_of
    if read is not None and read[0] == expert.pk:
        answers, typed = read[1], read[2]
    else:
        row = elicitation_answers_get(elicited_metric=elicited_metric, expert=expert)
        answers = row.answers if row is not None else ""
        typed = row.typed_ratios if row is not None else {}
    labels = [str(label) for label in elicited_metric.prediction_set.labels]
    elicitation = elicited_domain.elicitation_replayed(elicited_metric, answers)
    total = elicitation.total_queries
    prior = elicited_domain.class_prior(elicited_metric) if typed else None
    weights = elicited_domain.final_weights(elicitation, answers, typed, prior)
    question = elicited_domain.question_for(elicited_metric, elicitation, labels)
    if question is None:
        question = elicited_domain.check_question(elicited_metric, answers, labels)
    check = [
        CheckAnswer(position + 1, answers[position], answers[total + j] if len(answers) > total + j else None)
        for j, position in enumerate(elicited_domain.check_positions(total))
        if elicitation.finished
    ]
    return ElicitationState(
        elicited=elicited_metric,
        labels=labels,
        answered=len(answers),
        total=total,
        answers=answers,
        question=question,
        result=elicited_domain.result_of(elicited_metric, weights, answers, typed, elicitation)
        if weights is not None
        else None,
        weights=weights,
        check=check,
        consistent=elicited_domain.consistent(answers, total),
    )


def _answered_metrics(study: Study) -> QuerySet[ElicitedMetric]:
    """The elicited metrics the experts answer: all of them until the vote
    closes, the selected ones from then on."""
    rows = ElicitedMetric.objects.filter(metric__study=study)
    if study.phase in ("assessment", "closed"):
        rows = rows.filter(metric__is_selected=True)
    return rows


def elicitation_steps(*, study: Study, expert: Membership) -> list[QuestionStep]:
    """The elicited metrics the expert answers (once the selection is fixed,
    the selected ones only) with their progress: one query."""
    mine = ElicitationAnswers.objects.filter(elicited_metric=OuterRef("pk"), expert=expert)
    rows = (
        _answered_metrics(study)
        .annotate(mine_answers=Subquery(mine.values("answers")[:1]), mine_weights=Subquery(mine.values("weights")[:1]))
        .order_by("metric__position", "metric_id")
    )
    return [
        QuestionStep(metric_id, name, len(answers or ""), weights is not None)
        for metric_id, name, answers, weights in rows.values_list(
            "metric_id", "metric__name", "mine_answers", "mine_weights"
        )
    ]


def elicitation_steps_by_expert(*, study: Study, expert_ids: list[int]) -> dict[int, list[QuestionStep]]:
    """``elicitation_steps`` for each of the study's experts ``expert_ids``
    (membership ids), for the study home and the designer's progress grid:
    two queries whatever their number (one when the study elicits nothing)."""
    metrics = list(
        _answered_metrics(study)
        .order_by("metric__position", "metric_id")
        .values_list("pk", "metric_id", "metric__name")
    )
    answered: dict[tuple[int, int], tuple[int, bool]] = {}
    if metrics:
        for elicited_id, expert_id, answers, weights in ElicitationAnswers.objects.filter(
            elicited_metric_id__in=[pk for pk, _, _ in metrics], expert_id__in=expert_ids
        ).values_list("elicited_metric_id", "expert_id", "answers", "weights"):
            answered[(elicited_id, expert_id)] = (len(answers), weights is not None)
    return {
        expert_id: [
            QuestionStep(metric_id, name, *answered.get((pk, expert_id), (0, False))) for pk, metric_id, name in metrics
        ]
        for expert_id in expert_ids
    }


def elicitations_unfinished(*, memberships: list[Membership]) -> dict[int, list[str]]:
    """For each expert membership given whose study is in the assessment,
    the names of the selected elicited metrics they have not finished
    (the dashboard's to-do): two queries at most."""
    ids = {m.pk: m.study_id for m in memberships if m.role == Membership.Role.EXPERT}
    metrics = list(
        ElicitedMetric.objects.filter(
            metric__study_id__in=set(ids.values()), metric__study__phase="assessment", metric__is_selected=True
        )
        .order_by("metric__position", "metric_id")
        .values_list("pk", "metric__study_id", "metric__name")
    )
    if not metrics:
        return {}
    finished = set(
        ElicitationAnswers.objects.filter(
            elicited_metric_id__in=[pk for pk, _, _ in metrics], expert_id__in=list(ids), weights__isnull=False
        ).values_list("elicited_metric_id", "expert_id")
    )
    unfinished: dict[int, list[str]] = {}
    for expert_id, study_id in ids.items():
        names = [
            name for pk, metric_study, name in metrics if metric_study == study_id and (pk, expert_id) not in finished
        ]
        if names:
            unfinished[expert_id] = names
    return unfinished


@dataclass(frozen=True)
class ElicitedValue:
    """One candidate's value of an elicited metric for each expert who has
    finished (``values[username]``), from the candidate's newest prediction
    set, or why it has none (``reason``)."""

    candidate: str
    prediction_set: str
    values: dict[str, float]
    reason: str = ""

    @property
    def spread(self) -> tuple[float, float] | None:
        """The lowest and highest of the experts' values: the designer's only
        (each is one expert's own answer, METHOD.md 9)."""
        return (min(self.values.values()), max(self.values.values())) if self.values else None

    @property
    def group(self) -> feedback.Summary | None:
        """The experts' values as any member may read them: the summary of a
        revision round's feedback (``engine.feedback.summarise``; an elicited
        metric lies in [0, 1], so its coarse step is 0.05), never the lowest
        or highest."""
        return feedback.summarise(list(self.values.values()), step=feedback.bound_step(0.0, 1.0), origin=0.0, top=1.0)


# Each candidate's confusion matrix in a set (counts, rows and columns in
# the set's label order), by (set id, candidate id): a set's arrays never
# change (a new upload is a new set), so what was counted stays true and a
# page or a preview need not unpack the archives again. Small (k x k each).
_CONFUSIONS_KEPT = 16_384
_confusions: "OrderedDict[tuple[int, int], tuple[list[str], np.ndarray | str]]" = OrderedDict()
_confusions_lock = threading.Lock()


def forget_confusions() -> None:
    """Drop the confusions this process counted (tests: ids freed by a rollback)."""
    with _confusions_lock:
        _confusions.clear()


def _counted_confusions(newest: dict[int, int], names: dict[int, str]) -> dict[int, tuple[list[str], np.ndarray | str]]:
    """``{candidate id: (its set's labels, its confusion counts or why it has none)}`` for the
    candidates' newest sets (``newest``: candidate id → set id), unpacking only the sets whose
    candidates were not counted before in this process (one query then)."""
    found: dict[int, tuple[list[str], np.ndarray | str]] = {}
    with _confusions_lock:
        for candidate_id, set_id in newest.items():
            if (set_id, candidate_id) in _confusions:
                _confusions.move_to_end((set_id, candidate_id))
                found[candidate_id] = _confusions[(set_id, candidate_id)]
    missing = {set_id for candidate_id, set_id in newest.items() if candidate_id not in found}
    if missing:
        data = prediction_data_by_set(prediction_sets=list(PredictionSet.objects.filter(pk__in=missing)))
        for candidate_id, set_id in newest.items():
            if candidate_id in found:
                continue
            try:
                counted: np.ndarray | str = report.CandidateReport(data[set_id], names[candidate_id]).confusion_matrix()
            except ValueError as error:
                counted = str(error)
            found[candidate_id] = (list(data[set_id].labels), counted)
            with _confusions_lock:
                _confusions[(set_id, candidate_id)] = found[candidate_id]
                while len(_confusions) > _CONFUSIONS_KEPT:
                    _confusions.popitem(last=False)
    return found


def _classes_checked(labels: list[str], set_labels: list[str]) -> None:
    """``ValueError`` unless the candidate's set has the elicited metric's classes."""
    if sorted(set_labels) != sorted(labels):
        raise ValueError(f"its set's classes ({', '.join(set_labels)}) are not the elicited metric's")


def _confusion_in(labels: list[str], counted: tuple[list[str], np.ndarray | str]) -> np.ndarray:
    """The candidate's confusion matrix as fractions of its instances, rows
    and columns in the order of ``labels`` (``ValueError`` when its set's
    classes are others)."""
    set_labels, counts = counted
    if isinstance(counts, str):
        raise ValueError(counts)
    if set_labels != labels:  # the same classes in another order (a thousand candidates: the same order, no copy)
        _classes_checked(labels, set_labels)
        order = [set_labels.index(label) for label in labels]
        counts = counts[np.ix_(order, order)]
    fractions: np.ndarray = counts / counts.sum()
    return fractions


def _cells_in(labels: list[str], data: PredictionData, name: str) -> np.ndarray:
    """The cell of each of the candidate's instances in its confusion matrix,
    ``t * L + p`` (true class t, predicted p, both in the order of
    ``labels``), or ``ValueError`` when its set's classes are others."""
    _classes_checked(labels, data.labels)
    candidate = report.CandidateReport(data, name)
    position = np.array([labels.index(label) for label in data.labels], dtype=np.intp)
    cells: np.ndarray = position[candidate.y_true] * len(labels) + position[candidate.y_pred]
    return cells


def confusion_of_cells(cells: np.ndarray, classes: int) -> np.ndarray:
    """The confusion matrix ``(classes, classes)`` as fractions of the instances, from their cells (``_cells_in``)."""
    fractions: np.ndarray = np.bincount(cells, minlength=classes * classes).reshape(classes, classes) / len(cells)
    return fractions


@dataclass(frozen=True)
class ElicitedSource:
    """Where a candidate's values of an elicited metric come from: its newest
    prediction set and each of its instances' cell of the confusion matrix
    (``_cells_in``), or why it has none (``reason``, ``cells`` None)."""

    candidate: str
    prediction_set_id: int
    prediction_set: str
    cells: np.ndarray | None
    reason: str = ""


def newest_prediction_sets(*, study_id: int) -> dict[int, int]:
    """Each candidate with predictions in the study and its newest set,
    ``{candidate id: set id}`` (what computed and elicited metrics read):
    one query, no arrays."""
    newest: dict[int, int] = {}
    rows = (
        CandidatePredictionArrays.objects.filter(prediction_set__study_id=study_id)
        .order_by("-prediction_set__uploaded_at", "-prediction_set_id")
        .values_list("candidate_id", "prediction_set_id")
    )
    for candidate_id, set_id in rows:
        newest.setdefault(candidate_id, set_id)
    return newest


def _newest_sets_of(study_id: int) -> tuple[dict[int, int], dict[int, str], dict[int, str]]:
    """``newest_prediction_sets``, the sets' names and the candidates' names:
    three queries, no arrays."""
    newest = newest_prediction_sets(study_id=study_id)
    set_names = dict(PredictionSet.objects.filter(pk__in=set(newest.values())).values_list("pk", "name"))
    names = dict(Candidate.objects.filter(pk__in=list(newest)).values_list("pk", "name"))
    return newest, set_names, names


def elicited_sources(*, elicited_metric: ElicitedMetric) -> list[ElicitedSource]:
    """Each candidate with predictions in the study, by name, with its
    newest prediction set's instances as cells of the confusion matrix in
    the elicited set's class order (what a bootstrap resamples). Four
    queries and the sets' arrays, read once each."""
    labels = [str(label) for label in elicited_metric.prediction_set.labels]
    newest, set_names, names = _newest_sets_of(elicited_metric.prediction_set.study_id)
    data = prediction_data_by_set(prediction_sets=list(PredictionSet.objects.filter(pk__in=set(newest.values()))))
    out = []
    for candidate_id in sorted(newest, key=lambda pk: names[pk]):
        name, set_id = names[candidate_id], newest[candidate_id]
        try:
            cells = _cells_in(labels, data[set_id], name)
        except ValueError as error:
            out.append(ElicitedSource(name, set_id, set_names[set_id], None, str(error)))
            continue
        out.append(ElicitedSource(name, set_id, set_names[set_id], cells))
    return out


def elicited_values(*, elicited_metric: ElicitedMetric, finished: dict[str, list[float]]) -> list[ElicitedValue]:
    """Each candidate's value of the elicited metric for each expert of
    ``finished`` (``{username: weights}``): that expert's linear metric of
    the candidate's confusion matrix from its newest prediction set
    (``evaluation.elicited.metric_values``, every candidate's at once). Three queries, and the sets'
    arrays, read once each, only for candidates whose confusion this
    process has not counted yet (``_counted_confusions``)."""
    labels = [str(label) for label in elicited_metric.prediction_set.labels]
    newest, set_names, names = _newest_sets_of(elicited_metric.prediction_set.study_id)
    counted = _counted_confusions(newest, names)
    rows: list[tuple[str, str, np.ndarray | str]] = []
    for candidate_id in sorted(newest, key=lambda pk: names[pk]):
        name, set_id = names[candidate_id], newest[candidate_id]
        try:
            rows.append((name, set_names[set_id], _confusion_in(labels, counted[candidate_id])))
        except ValueError as error:
            rows.append((name, set_names[set_id], str(error)))
    confusions = [confusion for _name, _set, confusion in rows if not isinstance(confusion, str)]
    experts = list(finished)
    # Every candidate's value for every expert at once: (candidates, experts).
    table = (
        elicited_domain.metric_values(elicited_metric.kind, [finished[e] for e in experts], np.stack(confusions))
        if confusions and experts
        else np.zeros((len(confusions), len(experts)))
    ).tolist()
    out, valued = [], iter(table)
    for name, set_name, confusion in rows:
        if isinstance(confusion, str):
            out.append(ElicitedValue(name, set_name, {}, confusion))
        else:
            out.append(ElicitedValue(name, set_name, dict(zip(experts, next(valued), strict=True))))
    return out


def own_elicited_values(*, study: Study, expert: Membership) -> dict[int, dict[str, float] | None]:
    """For each selected elicited metric of the study (by metric id), the
    expert's own value of each candidate that has one
    (``elicited_values`` with their weights), or None while they have not
    finished its questions: what a run will read for them, so the ranges
    step previews vetoes on it. One query when the study elicits nothing."""
    metrics = [elicited for elicited in elicited_metric_list(study=study) if elicited.metric.is_selected]
    if not metrics:
        return {}
    weights = dict(
        ElicitationAnswers.objects.filter(
            elicited_metric__in=metrics, expert=expert, weights__isnull=False
        ).values_list("elicited_metric_id", "weights")
    )
    name = expert.user.get_username()
    own: dict[int, dict[str, float] | None] = {}
    for elicited in metrics:
        mine = weights.get(elicited.pk)
        if mine is None:
            own[elicited.metric_id] = None
            continue
        values = elicited_values(elicited_metric=elicited, finished={name: list(mine)})
        own[elicited.metric_id] = {row.candidate: row.values[name] for row in values if not row.reason}
    return own


@dataclass(frozen=True)
class ElicitedSpread:
    """An elicited metric's values across the experts who finished, per
    candidate (``values``, with their spread), for the measurements page."""

    metric: str
    experts: int  # how many finished
    values: list[ElicitedValue]


def elicited_spreads(*, study: Study) -> list[ElicitedSpread]:
    """Each elicited metric of the study with each candidate's values across
    the experts who finished it (``elicited_values``), once the assessment
    has closed (before, the experts' answers are their own, as on the design
    page); an empty list before. Two queries and each metric's sets."""
    if study.phase != "closed":
        return []
    metrics = elicited_metric_list(study=study)
    if not metrics:
        return []
    names = dict(Membership.objects.filter(study=study).values_list("pk", "user__username"))
    finished: dict[int, dict[str, list[float]]] = {}
    for elicited_id, expert_id, weights in ElicitationAnswers.objects.filter(
        elicited_metric__in=metrics, weights__isnull=False
    ).values_list("elicited_metric_id", "expert_id", "weights"):
        if expert_id in names:
            finished.setdefault(elicited_id, {})[names[expert_id]] = list(weights or [])
    return [
        ElicitedSpread(
            metric.metric.name,
            len(finished.get(metric.pk, {})),
            elicited_values(elicited_metric=metric, finished=finished[metric.pk]) if metric.pk in finished else [],
        )
        for metric in metrics
    ]


def elicitations_missing(*, study: Study, experts: list[int]) -> dict[int, list[str]]:
    """Per expert (membership id) who has not finished answering every
    selected elicited metric, what the study home lists as missing ("answers
    to the elicited metric A, B", in the metrics' order): one query, two
    with any. Registered into ``workspace.extensions.MISSING_INPUTS``."""
    metrics = list(
        ElicitedMetric.objects.filter(metric__study=study, metric__is_selected=True)
        .order_by("metric__attribute__position", "metric__attribute_id", "metric__position", "metric_id")
        .values_list("pk", "metric__name")
    )
    if not metrics:
        return {}
    finished = set(
        ElicitationAnswers.objects.filter(
            elicited_metric_id__in=[pk for pk, _ in metrics], weights__isnull=False
        ).values_list("expert_id", "elicited_metric_id")
    )
    missing = {expert: [name for pk, name in metrics if (expert, pk) not in finished] for expert in experts}
    return {
        expert: [f"answers to the elicited metric {', '.join(names)}"] for expert, names in missing.items() if names
    }


def reference_candidates_kept(*, study: Study, candidates: Sequence[int] | None) -> dict[int, list[str]]:
    """Per candidate id (of ``candidates``, or every one of the study) that
    is an elicited metric's reference candidate, why it cannot be removed:
    the questions of those metrics (named, in the metrics' order) are made
    from its predictions. One query. Registered into
    ``workspace.extensions.CANDIDATE_KEEPERS``."""
    rows = ElicitedMetric.objects.filter(metric__study=study)
    if candidates is not None:
        rows = rows.filter(reference_candidate_id__in=candidates)
    names: dict[int, tuple[str, list[str]]] = {}
    ordered = rows.order_by("metric__attribute__position", "metric__attribute_id", "metric__position", "metric_id")
    for candidate, candidate_name, metric in ordered.values_list(
        "reference_candidate_id", "reference_candidate__name", "metric__name"
    ):
        names.setdefault(candidate, (candidate_name, []))[1].append(metric)
    return {candidate: [_kept_because(name, metrics)] for candidate, (name, metrics) in names.items()}


def _kept_because(candidate: str, metrics: list[str]) -> str:
    if len(metrics) == 1:
        return (
            f"the elicited metric {metrics[0]} asks its questions from {candidate}'s predictions: "
            "choose another reference candidate for it first"
        )
    return (
        f"the elicited metrics {', '.join(metrics[:-1])} and {metrics[-1]} ask their questions from {candidate}'s "
        "predictions: choose another reference candidate for them first"
    )


def elicitation_answers_given(*, expert: Membership) -> dict[str, str]:
    """The expert's answers to the elicited metrics, ``{metric: codes}`` (a
    bundle's ``elicited_metrics.<metric>.answers.<expert>``), in the metrics'
    order: what an invitation shows as inputs already given. Registered into
    ``workspace.extensions.EXPERT_INPUTS`` as ``elicitation_answers``."""
    return dict(
        ElicitationAnswers.objects.filter(expert=expert)
        .exclude(answers="")
        .order_by("elicited_metric__metric__position", "elicited_metric_id")
        .values_list("elicited_metric__metric__name", "answers")
    )


def elicited_spreads_shown(*, study: Study, candidates: set[str]) -> list[ElicitedSpread]:
    """``elicited_spreads``, each limited to ``candidates`` (the names a page
    of the measurements table shows)."""
    return [
        dataclasses.replace(spread, values=[value for value in spread.values if value.candidate in candidates])
        for spread in elicited_spreads(study=study)
    ]
