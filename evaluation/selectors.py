"""Reads of the evaluation app. A study given here is one the caller has
resolved for the user (``workspace.selectors.study_get``: an outsider never
gets that far)."""

from django.db.models import Prefetch, QuerySet

from workspace.models import Study

from .models import CandidatePredictionArrays, PredictionSet
from .predictions import PredictionData


def prediction_set_list(*, study: Study) -> QuerySet[PredictionSet]:
    """The study's prediction sets, newest first, each with its uploader and
    its candidates (names, instance counts, columns): three queries however
    many sets and candidates, and none of the stored arrays or contexts."""
    candidates = CandidatePredictionArrays.objects.select_related("candidate").defer("arrays").order_by("id")
    return (
        PredictionSet.objects.filter(study=study)
        .select_related("uploaded_by")
        .defer("contexts")
        .prefetch_related(Prefetch("candidate_arrays", queryset=candidates))
    )


def prediction_set_get(*, study: Study, prediction_set_id: int) -> PredictionSet:
    """One set of the study, as the list has it (``PredictionSet.DoesNotExist``
    when the study has no such set)."""
    return prediction_set_list(study=study).get(pk=prediction_set_id)


def prediction_data_get(*, prediction_set: PredictionSet) -> PredictionData:
    """The stored set as ``evaluation.predictions`` read it: every candidate's
    arrays, in the order of the file."""
    stored = CandidatePredictionArrays.objects.filter(prediction_set=prediction_set).select_related("candidate")
    candidates = {row.candidate.name: row.predictions() for row in stored.order_by("id")}
    return PredictionData(
        labels=list(prediction_set.labels),
        positive=prediction_set.positive,
        folds=list(prediction_set.folds),
        context_columns=list(prediction_set.context_columns),
        contexts=[tuple(context) for context in prediction_set.contexts],
        candidates=candidates,
        rows=prediction_set.row_count,
    )
