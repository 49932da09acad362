"""The notifications REST endpoints: your notifications, marking them read,
your e-mail preferences (docs/notifications.md, "API")."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from notifications import selectors, services
from notifications.kinds import KINDS
from notifications.models import Notification, NotificationPreference
from workspace.api.views import PaginatedListMixin, signed_in, validated

from . import serializers as s


def _only(request: Request, allowed: set[str]) -> None:
    """Unknown fields are refused, not ignored."""
    if isinstance(request.data, dict):
        unknown = sorted(set(request.data) - allowed)
        if unknown:
            raise exceptions.ValidationError({name: ["is not a field of this request"] for name in unknown})


class NotificationListView(PaginatedListMixin, APIView):
    schema_tag = "notifications"

    @extend_schema(summary="List your notifications", responses=s.NotificationSerializer(many=True))
    def get(self, request: Request) -> Response:
        """Your notifications, newest first (only yours: nobody else's is
        ever listed)."""
        return self.paginated(selectors.notification_list(user=signed_in(request)), s.NotificationSerializer)


class NotificationsReadView(APIView):
    schema_tag = "notifications"

    @extend_schema(
        summary="Mark your notifications read",
        operation_id="v1_notifications_read_many",
        request=s.MarkReadSerializer,
        responses=s.MarkedSerializer,
    )
    def post(self, request: Request) -> Response:
        """Mark the notifications ``ids`` read, or every unread one without
        ``ids``; ids that are not yours are ignored."""
        _only(request, {"ids"})
        data = validated(s.MarkReadSerializer, request.data)
        user = signed_in(request)
        marked = services.notifications_mark_read(user=user, ids=data.get("ids"))
        return Response({"marked": marked, "unread": selectors.unread_count(user=user)})


class NotificationReadView(APIView):
    schema_tag = "notifications"

    @extend_schema(
        summary="Mark one of your notifications read",
        operation_id="v1_notifications_read_one",
        request=None,
        responses=s.NotificationSerializer,
    )
    def post(self, request: Request, pk: int) -> Response:
        """Mark it read (404 for a notification that is not yours)."""
        user = signed_in(request)
        try:
            notification = selectors.notification_get(user=user, pk=pk)
        except Notification.DoesNotExist:
            raise exceptions.NotFound("No such notification.") from None
        services.notifications_mark_read(user=user, ids=[notification.pk])
        return Response(s.NotificationSerializer(selectors.notification_get(user=user, pk=pk)).data)


def _preferences(preference: NotificationPreference) -> dict[str, Any]:
    return {"email_off": preference.email_off, "digest": preference.digest, "kinds": KINDS}


class PreferencesView(APIView):
    schema_tag = "notifications"

    @extend_schema(summary="Get your notification e-mail preferences", responses=s.PreferencesSerializer)
    def get(self, request: Request) -> Response:
        """Which kinds are not e-mailed to you, and whether the rest come in
        a daily digest (every kind is listed in ``kinds``)."""
        return Response(_preferences(selectors.preference_get(user=signed_in(request))))

    @extend_schema(
        summary="Set your notification e-mail preferences",
        request=s.PreferencesSerializer,
        responses=s.PreferencesSerializer,
    )
    def put(self, request: Request) -> Response:
        """Replace your preferences: ``email_off`` (the kinds not e-mailed)
        and ``digest``."""
        _only(request, {"email_off", "digest"})
        data = validated(s.PreferencesSerializer, request.data)
        preference = services.preferences_set(
            user=signed_in(request), email_off=data["email_off"], digest=data["digest"]
        )
        return Response(_preferences(preference))
