"""Writes of the evaluation app: prediction sets.

A designer brings candidates' predictions on a test set as a CSV
(``approve-predictions/1``, FORMATS.md), in any phase, like measurements.
The file is read whole before anything is written, and a refused file writes
nothing.
"""

from typing import IO, Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from workspace import limits
from workspace.errors import InvalidInput
from workspace.models import Candidate, Study
from workspace.services._checks import locked, text

from .arrays import arrays_pack
from .models import CandidatePredictionArrays, PredictionSet
from .predictions import PredictionFileError, read_predictions


class _Counted:
    """A binary stream that counts the bytes read from it (the set's
    ``byte_count``); anything else is the stream's own (``size`` and
    ``fileno``, which let the reader refuse a large file before reading it)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.bytes_read = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.bytes_read += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


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
    uploaded_by: AbstractBaseUser | None,
    candidate: str | None = None,
    positive: str | None = None,
    max_bytes: int | None = limits.PREDICTIONS_MAX_BYTES,
    max_rows: int | None = limits.PREDICTIONS_MAX_ROWS,
) -> PredictionSet:
    """Read the predictions in ``stream`` (a binary file) and store them as a
    set of the study: all of it, or, with any error, nothing
    (``InvalidInput``: the file's errors under ``file``, each naming its
    line). ``candidate``: the file is that candidate's alone. ``positive``:
    the positive label of a binary set. ``max_bytes`` and ``max_rows``: the
    web's limits by default; None lifts them (the operator's command)."""
    name = text(name, "name", max_length=200)
    candidate = _optional_text(candidate, "candidate", max_length=100)
    positive = _optional_text(positive, "positive", max_length=1000)
    names = set(Candidate.objects.filter(study=study).values_list("name", flat=True))
    if candidate is not None and candidate not in names:
        raise InvalidInput({"candidate": f"no candidate named {candidate!r} in this study"})
    counted = _Counted(stream)
    try:
        data = read_predictions(
            counted, candidate=candidate, positive=positive, candidates=names, max_bytes=max_bytes, max_rows=max_rows
        )
    except PredictionFileError as error:
        raise InvalidInput({"file": error.errors}) from None
    # Compressed before the study is locked: the lock is held for the writes only.
    packed = {candidate_name: arrays_pack(arrays) for candidate_name, arrays in data.candidates.items()}

    with transaction.atomic():
        study = locked(study)
        # Read again under the lock: a candidate may have gone while the file was read.
        candidate_ids = dict(Candidate.objects.filter(study=study, name__in=list(packed)).values_list("name", "pk"))
        gone = [candidate_name for candidate_name in packed if candidate_name not in candidate_ids]
        if gone:
            raise InvalidInput({"file": [f"no candidate named {gone_name!r} in this study" for gone_name in gone]})
        prediction_set = PredictionSet.objects.create(
            study=study,
            name=name,
            uploaded_by=uploaded_by,
            positive_label=data.positive or "",
            labels=data.labels,
            folds=data.folds,
            context_columns=data.context_columns,
            contexts=[list(context) for context in data.contexts],
            row_count=data.rows,
            byte_count=counted.bytes_read,
        )
        CandidatePredictionArrays.objects.bulk_create(
            [
                CandidatePredictionArrays(
                    prediction_set=prediction_set,
                    candidate_id=candidate_ids[candidate_name],
                    instance_count=len(data.candidates[candidate_name]),
                    columns=columns,
                    arrays=archive,
                )
                for candidate_name, (archive, columns) in packed.items()
            ]
        )
    return prediction_set


@transaction.atomic
def prediction_set_delete(*, prediction_set: PredictionSet) -> None:
    locked(prediction_set.study)
    prediction_set.delete()
