from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from workspace.admin_lists import SiteSizeAdmin

from .models import Run


@admin.register(Run)
class RunAdmin(SiteSizeAdmin, admin.ModelAdmin):
    """Runs are made by launching them, and are immutable once made: the
    admin shows them and can delete them, nothing else."""

    list_display = ["id", "study", "status", "launched_by", "launched_at", "duration_seconds", "attempts"]
    # By date with the date filter, not date_hierarchy (a scan of every run: workspace.admin_lists).
    list_filter = ["status", "launched_at"]
    search_fields = ["study__title", "launched_by__username", "error"]
    list_select_related = ["study", "launched_by"]
    readonly_fields = [
        "study",
        "launched_by",
        "status",
        "tolerance",
        "launched_at",
        "started_at",
        "lease_expires_at",
        "finished_at",
        "attempts",
        "duration_seconds",
        "error",
        "snapshot",
        "results",
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        # The list shows none of the JSON fields (megabytes on a large study);
        # a run's page loads them when it shows them.
        return super().get_queryset(request).defer("snapshot", "results")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False
