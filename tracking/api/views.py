"""The MLflow link through the API (docs/api.md, "MLflow"): the designer
connects a study, previews and imports runs, and publishes a run's decision;
members read where imported values came from. Thin: the services decide."""

from typing import Any, cast

from django.contrib.auth.models import User
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from engine.api.runs import RunScoped
from tracking import remote, selectors, services
from tracking.models import MlflowConnection, MlflowImport, MlflowPublication
from workspace import limits
from workspace import selectors as workspace_selectors
from workspace.api.idempotency import idempotent
from workspace.api.schema import VALIDATION_ERROR, error
from workspace.api.serializers import BoundedListField, WriteSerializer
from workspace.api.views import PaginatedListMixin, StudyScoped, validated
from workspace.models import Membership, Study
from workspace.services.roles import require_role

UNAVAILABLE = error(
    "The study's MLflow server is unreachable (mlflow_unreachable), refused its token (mlflow_unauthorised), or "
    "keeps the summary run's artifacts where approve does not write (mlflow_artifacts_refused)."
)
NOT_CONNECTED = error("The study is not connected to MLflow (mlflow_not_connected), or the phase does not allow it.")


# --- payloads --------------------------------------------------------------------


class ConnectionWriteSerializer(WriteSerializer):
    tracking_uri = serializers.CharField(
        max_length=services.URI_MAX_LENGTH,
        help_text="http(s)://host[:port][/path] of an MLflow tracking server (a lower-case host name or address; "
        "no user name, backslash, %-escape or query), or file:/path of a local store (under the server's "
        "TRACKING_FILE_ROOTS)",
    )
    token = serializers.CharField(
        max_length=services.TOKEN_MAX_LENGTH,
        required=False,
        allow_blank=True,
        allow_null=True,
        write_only=True,
        help_text="a bearer token for the server, kept encrypted and never shown again; '' for none; "
        "left out: the stored one is kept while the URI stays the same",
    )


class ConnectionSerializer(serializers.Serializer):
    connected = serializers.BooleanField()
    tracking_uri = serializers.CharField(allow_null=True)
    has_token = serializers.BooleanField(help_text="a token is stored (it is never shown)")
    experiment_count = serializers.IntegerField(allow_null=True, help_text="experiments found when last checked")
    checked_at = serializers.DateTimeField(allow_null=True)


class RemoteRunSerializer(serializers.Serializer):
    run_id = serializers.CharField()
    name = serializers.CharField()
    status = serializers.CharField()
    metrics = serializers.DictField(child=serializers.FloatField(), help_text="{key: latest value}")
    tags = serializers.DictField(child=serializers.CharField(), help_text="the run's tags but MLflow's own")


class PreviewSerializer(serializers.Serializer):
    experiment_id = serializers.CharField()
    experiment_name = serializers.CharField()
    metric_keys = serializers.ListField(child=serializers.CharField(), help_text="every metric key of the runs")
    runs = RemoteRunSerializer(many=True)
    linked = serializers.DictField(
        child=serializers.CharField(),
        help_text="{run id: candidate} of the runs imported before: an import updates those candidates",
    )
    named_like = serializers.DictField(
        child=serializers.CharField(),
        help_text="{run id: candidate} of the other runs named (or, with name_tag, tagged) like an existing "
        "candidate: an import asks what to do with each (on_existing)",
    )


class MappingEntrySerializer(serializers.Serializer):
    key = serializers.CharField(max_length=services.KEY_MAX_LENGTH, help_text="an MLflow metric key")
    metric = serializers.CharField(max_length=limits.NAME_MAX_LENGTH, help_text="a study metric's name")
    unit = serializers.CharField(
        max_length=limits.UNIT_MAX_LENGTH,
        required=False,
        allow_blank=True,
        help_text="the key's unit: refused unless it is the metric's own",
    )


ON_EXISTING_SCHEMA = {
    "description": "what to do with a run not imported before that is named (or, with name_tag, tagged) like an "
    "existing candidate: update that candidate's measurements, import it as a new candidate (named with the run "
    "id), or skip it; one choice for every such run, or {run id: choice}. Left out: each such run is refused "
    "under on_existing.<run id>, asked",
    "oneOf": [
        {"type": "string", "enum": list(services.ON_EXISTING)},
        {"type": "object", "additionalProperties": {"type": "string", "enum": list(services.ON_EXISTING)}},
    ],
}


@extend_schema_field(ON_EXISTING_SCHEMA)
class OnExistingField(serializers.JSONField):
    """``update``, ``new`` or ``skip``, or ``{run id: choice}`` (the services check it)."""


class ImportWriteSerializer(WriteSerializer):
    experiment = serializers.CharField(max_length=services.KEY_MAX_LENGTH, help_text="an experiment's name or id")
    filter = serializers.CharField(
        max_length=services.FILTER_MAX_LENGTH,
        required=False,
        allow_blank=True,
        help_text="MLflow's search syntax, e.g. tags.stage = 'candidate' (default: every run)",
    )
    mapping = BoundedListField(
        child=MappingEntrySerializer(), max_length=limits.MAX_METRICS, noun="metrics", allow_empty=False
    )
    step = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, help_text="the step to read (default: each metric's latest)"
    )
    name_tag = serializers.CharField(
        max_length=services.KEY_MAX_LENGTH,
        required=False,
        allow_blank=True,
        help_text="name candidates by this tag (default: the run's name)",
    )
    artifact_pattern = serializers.CharField(
        max_length=services.PATTERN_MAX_LENGTH,
        required=False,
        allow_blank=True,
        help_text="a glob of the run's approve-predictions/1 artifact (CSV or Parquet), e.g. predictions/*.csv",
    )
    positive = serializers.CharField(
        max_length=limits.PREDICTIONS_MAX_LABEL_LENGTH,
        required=False,
        allow_blank=True,
        help_text="the prediction sets' positive label: needed when the artifacts have a score column (else "
        "refused under positive, naming their classes in order)",
    )
    on_existing = OnExistingField(required=False)


class ChangeSerializer(serializers.Serializer):
    candidate = serializers.CharField()
    metric = serializers.CharField()
    before = serializers.FloatField(allow_null=True, help_text="null: a new measurement")
    value = serializers.FloatField()
    run_id = serializers.CharField()
    metric_key = serializers.CharField()


class ImportedSetSerializer(serializers.Serializer):
    candidate = serializers.CharField()
    prediction_set = serializers.IntegerField()
    artifact = serializers.CharField()


class MatchedRunSerializer(serializers.Serializer):
    run_id = serializers.CharField()
    name = serializers.CharField(help_text="the run's name")
    candidate = serializers.CharField(help_text="the existing candidate it is named like")


class ImportOutcomeSerializer(serializers.Serializer):
    import_id = serializers.IntegerField()
    experiment_id = serializers.CharField()
    experiment_name = serializers.CharField(default="")
    runs = serializers.IntegerField(help_text="runs imported (the skipped ones not counted)")
    created = serializers.ListField(child=serializers.CharField(), help_text="candidates added")
    changes = ChangeSerializer(many=True, help_text="every measurement new or changed, and nothing else")
    unchanged = serializers.IntegerField(help_text="values read that were already the measurements")
    prediction_sets = ImportedSetSerializer(many=True, help_text="prediction sets made from new or changed artifacts")
    matched = MatchedRunSerializer(
        many=True, default=list, help_text="runs named like an existing candidate that updated it (on_existing)"
    )
    skipped = MatchedRunSerializer(
        many=True, default=list, help_text="runs named like an existing candidate left out (on_existing)"
    )


class ImportRecordSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    imported_at = serializers.DateTimeField()
    imported_by = serializers.CharField(source="imported_by.username", allow_null=True, default=None)
    experiment_id = serializers.CharField()
    experiment_name = serializers.CharField(help_text="the experiment's name when imported ('' before names were kept)")
    request = serializers.JSONField()
    outcome = serializers.JSONField()


class ImportErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="as the API's error envelope: invalid_input, mlflow_unreachable, ...")
    detail = serializers.CharField()

    def get_fields(self) -> dict[str, serializers.Field]:
        # ``fields`` is the Serializer's own attribute: added here, not declared.
        fields = super().get_fields()
        fields["fields"] = serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()), help_text="errors per field (invalid_input)"
        )
        return fields


class ImportStatusSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=MlflowImport.Status.choices)
    runs_total = serializers.IntegerField(help_text="runs matching the filter")
    runs_read = serializers.IntegerField(help_text="runs read from MLflow so far")
    imported_at = serializers.DateTimeField(help_text="when queued, then when written")
    imported_by = serializers.CharField(source="imported_by.username", allow_null=True, default=None)
    experiment_id = serializers.CharField()
    experiment_name = serializers.CharField(help_text="the experiment's name when imported ('' before names were kept)")
    request = serializers.JSONField()
    outcome = ImportOutcomeSerializer(allow_null=True, help_text="the change report once succeeded; null before")
    error = ImportErrorSerializer(allow_null=True, help_text="why it failed (nothing was written); null otherwise")


def _status_out(record: MlflowImport) -> dict[str, Any]:
    succeeded, failed = record.status == MlflowImport.Status.SUCCEEDED, record.status == MlflowImport.Status.FAILED
    return {
        **{name: getattr(record, name) for name in ("id", "status", "runs_total", "runs_read", "imported_at")},
        **{name: getattr(record, name) for name in ("imported_by", "experiment_id", "experiment_name", "request")},
        "outcome": record.outcome if succeeded else None,
        "error": record.error if failed else None,
    }


class SourceSerializer(serializers.Serializer):
    candidate = serializers.CharField(source="candidate.name")
    metric = serializers.CharField(source="metric.name")
    tracking_uri = serializers.CharField()
    experiment_id = serializers.CharField()
    experiment_name = serializers.CharField(help_text="the experiment's name when imported ('' before names were kept)")
    run_id = serializers.CharField()
    metric_key = serializers.CharField()
    step = serializers.IntegerField(allow_null=True, help_text="null: the latest value")
    value = serializers.FloatField()
    imported_at = serializers.DateTimeField()


class PublicationSerializer(serializers.Serializer):
    published = serializers.BooleanField(help_text="false: never published (every other field null)")
    run = serializers.IntegerField()
    tracking_uri = serializers.CharField(allow_null=True)
    experiment_id = serializers.CharField(allow_null=True)
    experiment_name = serializers.CharField(allow_null=True, help_text="the experiment's name ('' when not kept)")
    summary_run_id = serializers.CharField(
        allow_null=True, help_text="the MLflow run holding approve/results.json and approve/results.csv"
    )
    tagged = serializers.DictField(
        child=serializers.CharField(), allow_null=True, help_text="{candidate: MLflow run id tagged}"
    )
    published_at = serializers.DateTimeField(allow_null=True)
    published_by = serializers.CharField(allow_null=True)
    times = serializers.IntegerField(help_text="how many times it was published")


# --- views ----------------------------------------------------------------------------


def _connection_out(connection: MlflowConnection | None) -> dict[str, Any]:
    if connection is None:
        return {
            "connected": False,
            "tracking_uri": None,
            "has_token": False,
            "experiment_count": None,
            "checked_at": None,
        }
    return {
        "connected": True,
        "tracking_uri": connection.tracking_uri,
        "has_token": connection.has_token,
        "experiment_count": connection.experiment_count,
        "checked_at": connection.checked_at,
    }


def _publication_out(run_id: int, publication: MlflowPublication | None) -> dict[str, Any]:
    if publication is None:
        empty = [
            *("tracking_uri", "experiment_id", "experiment_name", "summary_run_id", "tagged", "published_at"),
            "published_by",
        ]
        return {"published": False, "run": run_id, **dict.fromkeys(empty), "times": 0}
    return {
        "published": True,
        "run": run_id,
        "tracking_uri": publication.tracking_uri,
        "experiment_id": publication.experiment_id,
        "experiment_name": publication.experiment_name,
        "summary_run_id": publication.summary_run_id,
        "tagged": publication.tagged,
        "published_at": publication.published_at,
        "published_by": publication.published_by.username if publication.published_by else None,
        "times": publication.times,
    }


class ConnectionView(StudyScoped, APIView):
    schema_tag = "mlflow"

    @extend_schema(summary="Get the study's MLflow connection (designer)", responses=ConnectionSerializer)
    def get(self, request: Request, study_id: int) -> Response:
        """The study's MLflow connection (designer): the URI, whether a token is stored, what the last check found."""
        self.require_designer("see the MLflow connection")
        return Response(ConnectionSerializer(_connection_out(selectors.connection_get(study=self.study()))).data)

    @extend_schema(
        summary="Connect the study to an MLflow tracking server",
        request=ConnectionWriteSerializer,
        responses={200: ConnectionSerializer, 400: VALIDATION_ERROR, 502: UNAVAILABLE},
    )
    def put(self, request: Request, study_id: int) -> Response:
        """Connect the study to MLflow (designer, any phase), once the server answers."""
        self.require_designer("connect the study to MLflow")
        data = validated(ConnectionWriteSerializer, request.data)
        connection = services.connection_set(
            study=self.study(), tracking_uri=data["tracking_uri"], token=data.get("token")
        )
        return Response(ConnectionSerializer(_connection_out(connection)).data)

    @extend_schema(summary="Disconnect the study from MLflow", responses={204: None})
    def delete(self, request: Request, study_id: int) -> Response:
        """Disconnect the study from MLflow (designer); imported values stay, with their provenance."""
        self.require_designer("disconnect the study from MLflow")
        services.connection_remove(study=self.study())
        return Response(status=status.HTTP_204_NO_CONTENT)


class ExperimentSerializer(serializers.Serializer):
    experiment_id = serializers.CharField()
    name = serializers.CharField()


class ExperimentListSerializer(serializers.Serializer):
    experiments = ExperimentSerializer(many=True, help_text="the server's active experiments, by name")
    more = serializers.BooleanField(
        help_text=f"the server has more than {remote.EXPERIMENTS_LISTED_MAX} active experiments: "
        "only that many are listed (name or id the others)"
    )


class ExperimentListView(StudyScoped, APIView):
    schema_tag = "mlflow"

    @extend_schema(
        summary="List the experiments of the study's MLflow server",
        responses={200: ExperimentListSerializer, 409: NOT_CONNECTED, 502: UNAVAILABLE},
    )
    def get(self, request: Request, study_id: int) -> Response:
        """The active experiments of the study's MLflow server, by name (designer): what the page's picker
        offers, for the ``experiment`` of a preview or an import. Nothing is written."""
        self.require_designer("list MLflow experiments")
        experiments, more = services.experiment_list(study=self.study())
        listed = [{"experiment_id": e.experiment_id, "name": e.name} for e in experiments]
        return Response(ExperimentListSerializer({"experiments": listed, "more": more}).data)


class RunPreviewView(StudyScoped, APIView):
    schema_tag = "mlflow"

    @extend_schema(
        summary="Preview the MLflow runs an import would read",
        parameters=[
            OpenApiParameter("experiment", str, required=True, description="an experiment's name or id"),
            OpenApiParameter("filter", str, description="MLflow's search syntax, e.g. tags.stage = 'candidate'"),
            OpenApiParameter(
                "name_tag", str, description="match runs to candidates by this tag (default: by the run's name)"
            ),
        ],
        responses={200: PreviewSerializer, 400: VALIDATION_ERROR, 409: NOT_CONNECTED, 502: UNAVAILABLE},
    )
    def get(self, request: Request, study_id: int) -> Response:
        """The runs of an MLflow experiment that match a filter, with their metrics (designer).

        What an import would read, and which runs match existing candidates; nothing is written."""
        self.require_designer("preview MLflow runs")
        experiment = request.query_params.get("experiment")
        if not experiment:
            raise exceptions.ValidationError({"experiment": ["This query parameter is required."]})
        preview = services.import_preview(
            study=self.study(),
            experiment=experiment,
            filter=request.query_params.get("filter", ""),
            name_tag=request.query_params.get("name_tag") or None,
        )
        body = {
            "experiment_id": preview.experiment_id,
            "experiment_name": preview.experiment_name,
            "metric_keys": preview.metric_keys,
            "runs": preview.runs,
            "linked": preview.linked,
            "named_like": preview.named_like,
        }
        return Response(PreviewSerializer(body).data)


class ImportListView(StudyScoped, PaginatedListMixin, APIView):
    schema_tag = "mlflow"

    @extend_schema(summary="List the study's MLflow imports", responses=ImportRecordSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """The study's MLflow imports, newest first (designer): what each asked for and what it changed."""
        self.require_designer("see the MLflow imports")
        return self.paginated(selectors.import_list(study=self.study()), ImportRecordSerializer)

    @extend_schema(
        summary="Import MLflow runs as candidates",
        request=ImportWriteSerializer,
        responses={
            200: ImportOutcomeSerializer,
            202: ImportStatusSerializer,
            400: VALIDATION_ERROR,
            409: NOT_CONNECTED,
            502: UNAVAILABLE,
        },
    )
    @idempotent
    def post(self, request: Request, study_id: int) -> Response:
        """Import an experiment's matching runs as candidates (designer, any phase): all of it, or nothing.

        Up to MLFLOW_IMPORT_INLINE_RUNS runs: imported at once (200, the change report). More: queued as a
        task (202, Location: the import's status resource, which gives its progress and then the report)."""
        self.require_designer("import candidates from MLflow")
        data = validated(ImportWriteSerializer, request.data)
        outcome = services.mlflow_import(study=self.study(), imported_by=self.member(), **data)
        if isinstance(outcome, MlflowImport):
            location = reverse("api:mlflow-import", kwargs={"study_id": study_id, "import_id": outcome.pk})
            return Response(
                ImportStatusSerializer(_status_out(outcome)).data,
                status=status.HTTP_202_ACCEPTED,
                headers={"Location": request.build_absolute_uri(location)},
            )
        return Response(ImportOutcomeSerializer(outcome).data)


class ImportView(StudyScoped, APIView):
    schema_tag = "mlflow"

    @extend_schema(responses=ImportStatusSerializer)
    def get(self, request: Request, study_id: int, import_id: int) -> Response:
        """One MLflow import (designer): its status, the runs read of how many, then its change report or error."""
        self.require_designer("see the MLflow imports")
        record = selectors.import_get(study=self.study(), import_id=import_id)
        if record is None:
            raise exceptions.NotFound("No such import in this study.")
        return Response(ImportStatusSerializer(_status_out(record)).data)


class SourceListView(StudyScoped, PaginatedListMixin, APIView):
    schema_tag = "mlflow"

    @extend_schema(summary="List where each imported measurement came from", responses=SourceSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """Where each imported measurement came from: the tracking URI, experiment, run, metric key and step."""
        return self.paginated(selectors.value_source_list(study=self.study()), SourceSerializer)


class PublicationView(RunScoped, APIView):
    schema_tag = "mlflow"

    def _study(self) -> Study:
        run = self.run()
        try:
            study = workspace_selectors.study_get(study_id=run.study_id, user=self.request.user)
        except Study.DoesNotExist:  # pragma: no cover - run_get already checked membership
            raise exceptions.NotFound("No such run.") from None
        require_role(
            study=study, user=self.request.user, role=Membership.Role.DESIGNER, action="publish a run to MLflow"
        )
        return study

    @extend_schema(summary="Get a run's publication to MLflow", responses=PublicationSerializer)
    def get(self, request: Request, run_id: int) -> Response:
        """Where and when the run's decision was published to MLflow (members)."""
        run = self.run()
        return Response(PublicationSerializer(_publication_out(run.pk, selectors.publication_get(run=run))).data)

    @extend_schema(
        summary="Publish a run's decision to MLflow",
        request=None,
        responses={200: PublicationSerializer, 409: NOT_CONNECTED, 502: UNAVAILABLE},
    )
    def post(self, request: Request, run_id: int) -> Response:
        """Publish a succeeded run's decision to MLflow (designer): tags on each candidate's run and a summary run.

        Idempotent: publishing again rewrites the same tags and the same summary run."""
        self._study()
        run_url = request.build_absolute_uri(reverse("run_page", kwargs={"run_id": run_id}))
        publication = services.mlflow_publish(run=self.run(), published_by=cast(User, request.user), run_url=run_url)
        return Response(PublicationSerializer(_publication_out(run_id, publication)).data)
