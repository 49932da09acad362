"""The admin's pages of accounts: the one site policy (shown and changed,
never added twice nor deleted) and the sign-up requests (read only)."""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import SignUpRequest, SitePolicy


@admin.register(SitePolicy)
class SitePolicyAdmin(admin.ModelAdmin):
    """A singleton: its list shows the one policy (made with the defaults
    the first time); it cannot be added when it exists, nor deleted."""

    fields = ("signup", "signup_domains", "designers_need_two_factor", "updated_at")
    readonly_fields = ("updated_at",)
    list_display = ("__str__", "signup", "designers_need_two_factor", "updated_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and not SitePolicy.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[SitePolicy]:
        SitePolicy.current()  # the list always shows the one policy, made with the defaults the first time
        return super().get_queryset(request)


@admin.register(SignUpRequest)
class SignUpRequestAdmin(admin.ModelAdmin):
    """Who asked for a sign-up link, and whether it was used (the token is
    never stored, only its digest, which is not shown)."""

    list_display = ("email", "created_at", "expires_at", "used_at")
    list_filter = ("used_at",)
    search_fields = ("email",)
    fields = ("email", "created_at", "expires_at", "used_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
