"""The study's history through the API (issue 22): ``GET
/api/v1/studies/{id}/history/``, the records the History tab lists, for the
same member (the designer: every record; an expert: their own inputs and the
study's public events), filtered by the same parameters, paginated. There is
no write: a record cannot be changed or deleted."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from workspace import history, selectors

from .serializers import StrictCharField
from .views import PaginatedListMixin, StudyScoped


class HistoryChangeSerializer(serializers.Serializer):
    """A column's value before and after, as text (a number as Python writes
    it: ``0.91``; true and false; a time in ISO 8601)."""

    field = StrictCharField(help_text="the column changed, e.g. `weight` or `attribute_id`")
    old = StrictCharField(allow_null=True, help_text="its value before; null when created")
    new = StrictCharField(allow_null=True, help_text="its value after; null when deleted")
    old_name = StrictCharField(
        allow_null=True,
        help_text="for a foreign key (`attribute_id`), the name of the row `old` names (an attribute's or "
        "candidate's name, an expert's username); null otherwise or when that row is gone",
    )
    new_name = StrictCharField(allow_null=True, help_text="the same for `new`")


class HistoryEntrySerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="the record's id among its kind's records")
    at = serializers.DateTimeField(help_text="when the change was made")
    user = StrictCharField(allow_null=True, help_text="who made it; null for the system or a deleted account")
    # "source" is also a Field attribute; DRF takes declared fields off the class.
    source = serializers.ChoiceField(choices=history.SOURCES, help_text="where it came from")  # type: ignore[assignment]  # a declared field named like Field.source (see above)
    kind = serializers.ChoiceField(
        choices=history.KIND_NAMES, help_text="what changed (a machine value; see kind_label)"
    )
    kind_label = StrictCharField(
        help_text="the kind in words, as the History tab's filter names it (`Attribute votes`)"
    )
    object_id = serializers.IntegerField(help_text="the id of the row changed")
    object_name = StrictCharField(help_text="its name or title, when it has one")
    action = serializers.ChoiceField(choices=history.ACTIONS)
    expert = StrictCharField(allow_null=True, help_text="whose input it is; null for the study's events")
    changes = HistoryChangeSerializer(many=True, help_text="the values before and after, per column changed")
    sentence = StrictCharField(
        help_text="the change in words, as the History tab shows it: who did what, naming people and values "
        "(`Clara Clinician changed their range for Sensitivity from 0.9–0.98 to 0.85–0.98.`)"
    )


FILTERS = [
    OpenApiParameter("person", OpenApiTypes.STR, description="only the changes this username made"),
    OpenApiParameter(
        "kind",
        {"x-component": "HistoryKindEnum", "type": "string", "enum": list(history.KIND_NAMES)},
        description="only this kind of record; each kind's label: "
        + "; ".join(f"`{kind}` {history.kind_label(kind)}" for kind in history.KIND_NAMES),
    ),
    OpenApiParameter("since", OpenApiTypes.DATE, description="from this day (UTC), inclusive"),
    OpenApiParameter("until", OpenApiTypes.DATE, description="until this day (UTC), inclusive"),
]


class StudyHistoryView(StudyScoped, PaginatedListMixin):
    schema_tag = "studies"

    @extend_schema(parameters=FILTERS, responses=HistoryEntrySerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """The study's recorded changes you may see, newest first: the
        designer every one; an expert those of their own inputs and the
        study's public events. A filter that is not understood is a 400
        naming it."""
        filters = selectors.history_filter_parse(request.query_params)
        pages = selectors.HistoryPages(study=self.study(), user=request.user, filters=filters)
        return self.paginated(pages, HistoryEntrySerializer)
