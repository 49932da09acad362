"""Prediction sets through the API (FORMATS.md, ``approve-predictions/1``).

Members list and read a study's sets; the designer uploads them, as a
multipart form (``file``, with ``candidate``, ``positive`` and ``name``
fields) or as a raw ``text/csv`` or ``application/vnd.apache.parquet`` body
(the same three as query parameters), and deletes them. A Parquet file is
told by its first bytes (``PAR1``), whatever its name or media type. A set
is shown with its labels, folds and candidates, never its arrays.
"""

from collections.abc import Mapping
from typing import Any, cast

from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import BaseParser, DataAndFiles, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation import selectors, services
from evaluation.models import PredictionSet
from evaluation.predictions import PARQUET_MEDIA_TYPE
from workspace import limits
from workspace.api.idempotency import idempotent
from workspace.api.serializers import WriteSerializer
from workspace.api.views import PaginatedListMixin, StudyScoped, location, validated

# --- payloads --------------------------------------------------------------------


class PredictionCandidateSerializer(serializers.Serializer):
    name = serializers.CharField(source="candidate.name")
    instances = serializers.IntegerField(source="instance_count", help_text="the candidate's rows in the file")
    columns = serializers.ListField(
        child=serializers.CharField(),
        help_text="the optional columns it has, of y_pred, score, proba, fold, time, context, instance",
    )


class PredictionSetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    uploaded_by = serializers.CharField(source="uploaded_by.username", allow_null=True, default=None)
    uploaded_at = serializers.DateTimeField()
    positive = serializers.CharField(allow_null=True, help_text="the positive label of a binary set, or null")
    labels = serializers.ListField(
        child=serializers.CharField(),
        help_text="every label: y_true's in the order they first appear, then the declared ones (proba:<label> "
        "columns, the positive label)",
    )
    folds = serializers.ListField(child=serializers.CharField(), help_text="in the order they first appear")
    context_columns = serializers.ListField(child=serializers.CharField(), help_text="the <name>s of context:<name>")
    rows = serializers.IntegerField(source="row_count")
    bytes = serializers.IntegerField(source="byte_count", help_text="the file's size")
    candidates = PredictionCandidateSerializer(source="candidate_arrays.all", many=True)


FIELD_HELP = {
    "candidate": "the file is this candidate's alone: its candidate column is then optional, and must name it",
    "positive": "the positive label of a binary set (needed with a score column)",
    "name": "the set's name (default: the file's name)",
}


class PredictionUploadSerializer(WriteSerializer):
    file = serializers.FileField(
        allow_empty_file=True,  # refused by the reader, with the message of FORMATS.md
        help_text=f"an approve-predictions/1 CSV (UTF-8) or Parquet file ({PARQUET_MEDIA_TYPE}), "
        f"at most {limits.PREDICTIONS_MAX_BYTES} bytes "
        f"and {limits.PREDICTIONS_MAX_ROWS} rows, with at most {limits.PREDICTIONS_MAX_CLASSES} distinct labels",
    )
    candidate = serializers.CharField(
        required=False, allow_blank=True, max_length=limits.NAME_MAX_LENGTH, help_text=FIELD_HELP["candidate"]
    )
    positive = serializers.CharField(
        required=False, allow_blank=True, max_length=1000, help_text=FIELD_HELP["positive"]
    )
    name = serializers.CharField(required=False, allow_blank=True, max_length=200, help_text=FIELD_HELP["name"])


class CsvBodyParser(BaseParser):
    """A raw ``text/csv`` body: the file itself, streamed to the reader (its
    size is bounded by the view's body limit before anything reads it)."""

    media_type = "text/csv"
    file_name = "predictions.csv"

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> DataAndFiles:
        request = (parser_context or {})["request"]
        size = int(request.META.get("CONTENT_LENGTH") or 0)
        upload = UploadedFile(file=stream, name=self.file_name, content_type=self.media_type, size=size)
        return DataAndFiles({}, {"file": upload})


class ParquetBodyParser(CsvBodyParser):
    """A raw Parquet body: the reader takes it into memory (a Parquet
    file's footer comes last), within the view's body limit."""

    media_type = PARQUET_MEDIA_TYPE
    file_name = "predictions.parquet"


def _upload_fields(request: Request) -> dict[str, Any]:
    """The form's fields (with the file), and the query's parameters: a
    ``text/csv`` body has no fields of its own."""
    fields = dict(cast(Mapping[str, Any], request.data).items())  # (the parsers' forms, never a list)
    for key, value in request.query_params.items():
        if key in fields:
            raise exceptions.ValidationError({key: ["given both in the body and as a query parameter"]})
        fields[key] = value
    return fields


# --- views ----------------------------------------------------------------------------


class PredictionSetListView(StudyScoped, PaginatedListMixin, APIView):
    schema_tag = "evaluation"
    parser_classes = [MultiPartParser, CsvBodyParser, ParquetBodyParser]
    max_body_bytes = limits.PREDICTIONS_MAX_BYTES  # (limits.BodySizeLimitMiddleware)

    @extend_schema(summary="List the study's prediction sets", responses=PredictionSetSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """The study's prediction sets, newest first."""
        return self.paginated(selectors.prediction_set_list(study=self.study()), PredictionSetSerializer)

    @extend_schema(
        summary="Upload a prediction set",
        request={
            "multipart/form-data": PredictionUploadSerializer,
            "text/csv": {"type": "string", "format": "binary", "description": "the CSV file itself"},
            PARQUET_MEDIA_TYPE: {"type": "string", "format": "binary", "description": "the Parquet file itself"},
        },
        parameters=[
            OpenApiParameter(name, str, description=f"with a text/csv or Parquet body: {help_text}")
            for name, help_text in FIELD_HELP.items()
        ],
        responses={201: PredictionSetSerializer},
    )
    @idempotent
    def post(self, request: Request, study_id: int) -> Response:
        """Upload candidates' predictions on a test set (designer, any phase):
        a multipart form with ``file`` (CSV or Parquet), or the file as a
        ``text/csv`` or ``application/vnd.apache.parquet`` body. A refused
        file stores nothing: 400 with its errors under ``file``, each naming
        its line (a Parquet file's row) (or, for a file of more than the allowed distinct
        labels, their count and the limit)."""
        self.require_designer("upload predictions")
        data = validated(PredictionUploadSerializer, _upload_fields(request))
        upload = data["file"]
        prediction_set = services.prediction_set_import(
            study=self.study(),
            stream=upload,
            name=data.get("name") or upload.name or "predictions.csv",
            uploaded_by=cast(User, request.user),  # (authenticated: the API's default permission)
            candidate=data.get("candidate"),
            positive=data.get("positive"),
        )
        prediction_set = selectors.prediction_set_get(study=self.study(), prediction_set_id=prediction_set.pk)
        return Response(
            PredictionSetSerializer(prediction_set).data,
            status=status.HTTP_201_CREATED,
            headers=location(request, "prediction-set-detail", study_id=study_id, pk=prediction_set.pk),
        )


class PredictionSetScoped(StudyScoped):
    schema_tag = "evaluation"
    kwargs: dict[str, Any]  # the view's (a mixin of APIView)

    def prediction_set(self, *, contexts: bool = False) -> PredictionSet:
        """The set of the URL's ``pk`` in the study (404 otherwise); with its
        contexts for computing from it."""
        try:
            return selectors.prediction_set_get(
                study=self.study(), prediction_set_id=self.kwargs["pk"], contexts=contexts
            )
        except PredictionSet.DoesNotExist:
            raise exceptions.NotFound("No such prediction set in this study.") from None


class PredictionSetDetailView(PredictionSetScoped, APIView):
    @extend_schema(summary="Get a prediction set", responses=PredictionSetSerializer)
    def get(self, request: Request, study_id: int, pk: int) -> Response:
        """One prediction set: its labels, folds and candidates."""
        return Response(PredictionSetSerializer(self.prediction_set()).data)

    @extend_schema(summary="Delete a prediction set", responses={204: None})
    def delete(self, request: Request, study_id: int, pk: int) -> Response:
        """Delete a prediction set with its arrays (designer)."""
        self.require_designer("delete prediction sets")
        services.prediction_set_delete(prediction_set=self.prediction_set())
        return Response(status=status.HTTP_204_NO_CONTENT)
