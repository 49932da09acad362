"""The notifications in the admin: read-only, for operators looking into
whether and how a notification was mailed."""

from django.contrib import admin
from django.http import HttpRequest

from .models import Notification, NotificationPreference


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("created_at", "recipient", "kind", "study", "mail", "read_at")
    list_filter = ("kind", "mail")
    search_fields = ("recipient__username", "text")
    raw_id_fields = ("recipient", "study")
    readonly_fields = [field.name for field in Notification._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(admin.ModelAdmin):
    list_display = ("user", "digest", "updated_at")
    search_fields = ("user__username",)
    raw_id_fields = ("user",)
