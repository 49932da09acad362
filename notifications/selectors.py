"""The notifications' reads, each scoped to the person signed in."""

from django.contrib.auth.models import User
from django.db.models import QuerySet

from workspace.models import Invitation

from .models import Notification, NotificationPreference


def notification_list(*, user: User) -> QuerySet[Notification]:
    """The user's own notifications, newest first, with their studies."""
    return Notification.objects.filter(recipient=user).select_related("study").order_by("-created_at", "-id")


def notification_get(*, user: User, pk: int) -> Notification:
    """The user's notification ``pk`` (``Notification.DoesNotExist`` for
    another person's: it is never told apart from a missing one)."""
    return notification_list(user=user).get(pk=pk)


def unread_count(*, user: User) -> int:
    """How many of the user's notifications are unread (one query)."""
    return Notification.objects.filter(recipient=user, read_at__isnull=True).count()


def digest_due() -> QuerySet[Notification]:
    """The notifications waiting for their recipients' daily digest."""
    return (
        Notification.objects.filter(mail=Notification.Mail.DIGEST)
        .select_related("recipient", "study")
        .order_by("recipient_id", "study_id", "created_at", "id")
    )


def pending_invitation(pk: int) -> Invitation | None:
    """The pending invitation ``pk`` with its study, or None."""
    return Invitation.objects.select_related("study").filter(pk=pk, status=Invitation.Status.PENDING).first()


def preference_get(*, user: User) -> NotificationPreference:
    """The user's preferences (unsaved defaults when they chose none)."""
    found = NotificationPreference.objects.filter(user=user).first()
    return found or NotificationPreference(user=user)
