from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import CandidatePredictionArrays, PredictionSet


class CandidatePredictionArraysInline(admin.TabularInline):
    model = CandidatePredictionArrays
    fields = ("candidate", "instance_count", "columns")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[CandidatePredictionArrays]:
        # The archives are megabytes each; the inline shows what they hold.
        return super().get_queryset(request).select_related("candidate").defer("arrays")

    def has_add_permission(self, request: HttpRequest, obj: PredictionSet | None = None) -> bool:
        return False


@admin.register(PredictionSet)
class PredictionSetAdmin(admin.ModelAdmin):
    """Prediction sets are made by uploading a file and never edited (their
    arrays would no longer match the file): the admin shows them and can
    delete them, nothing else."""

    list_display = ["id", "name", "study", "uploaded_by", "uploaded_at", "row_count", "byte_count"]
    list_filter = ["uploaded_at"]
    search_fields = ["name", "study__title", "uploaded_by__username"]
    list_select_related = ["study", "uploaded_by"]
    date_hierarchy = "uploaded_at"
    fields = (
        "study",
        "name",
        "uploaded_by",
        "uploaded_at",
        "positive_label",
        "labels",
        "folds",
        "context_columns",
        "row_count",
        "byte_count",
    )
    readonly_fields = fields
    inlines = [CandidatePredictionArraysInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PredictionSet]:
        return super().get_queryset(request).defer("contexts")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: PredictionSet | None = None) -> bool:
        return False
