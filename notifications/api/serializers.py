"""The notifications API's documents."""

from rest_framework import serializers

from notifications.kinds import KINDS
from notifications.models import Notification


class NotificationSerializer(serializers.ModelSerializer):
    """One of your notifications: the sentence, the page it is about (a
    path of this site), when, whether you read it, and its e-mail's state."""

    study = serializers.IntegerField(source="study_id", allow_null=True, read_only=True)
    study_title = serializers.SerializerMethodField()
    read = serializers.SerializerMethodField()
    email = serializers.CharField(source="mail", read_only=True, help_text=", ".join(Notification.Mail.values))

    class Meta:
        model = Notification
        fields = ["id", "kind", "study", "study_title", "text", "link", "created_at", "read", "read_at", "email"]
        read_only_fields = fields

    def get_study_title(self, notification: Notification) -> str | None:
        return notification.study.title if notification.study else None

    def get_read(self, notification: Notification) -> bool:
        return notification.read_at is not None


class MarkReadSerializer(serializers.Serializer):
    """Which of your notifications to mark read: ``ids``, or every unread one without it."""

    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, max_length=1000)


class MarkedSerializer(serializers.Serializer):
    marked = serializers.IntegerField(help_text="how many notifications were unread and are now read")
    unread = serializers.IntegerField(help_text="how many are still unread")


class PreferencesSerializer(serializers.Serializer):
    """Which kinds are e-mailed to you, and whether in a daily digest."""

    email_off = serializers.ListField(
        child=serializers.ChoiceField(choices=list(KINDS)),
        help_text="the kinds never e-mailed (they are still listed in the app)",
        max_length=len(KINDS),
    )
    digest = serializers.BooleanField(help_text="one e-mail a day with the rest instead of one e-mail each")
    kinds = serializers.DictField(
        child=serializers.CharField(), read_only=True, help_text="every kind, with what it is about"
    )
