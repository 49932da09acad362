"""The webhooks API's documents (docs/webhooks.md, "API")."""

from typing import Any

from rest_framework import serializers

from webhooks import payloads
from webhooks.models import URL_MAX_LENGTH, Delivery, Webhook
from workspace.api.serializers import WriteSerializer

EVENTS_HELP = "the events it receives: " + "; ".join(
    f"{kind} ({words})" for kind, words in payloads.SUBSCRIBABLE.items()
)


class WebhookWriteSerializer(WriteSerializer):
    url = serializers.CharField(
        max_length=URL_MAX_LENGTH,
        help_text="https://host[:port][/path][?query] of the receiver (a public host, or one the operator lists in "
        "WEBHOOK_ALLOWED_HOSTS; http:// only to a listed host)",
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=list(payloads.SUBSCRIBABLE)),
        max_length=len(payloads.SUBSCRIBABLE),
        help_text=EVENTS_HELP,
    )
    active = serializers.BooleanField(required=False, default=True, help_text="false: it receives nothing")


class WebhookPatchSerializer(WebhookWriteSerializer):
    """The fields to change (the others are kept)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, partial=True, **kwargs)


class WebhookSerializer(serializers.ModelSerializer):
    """A webhook of the study; its secret is never shown again."""

    study = serializers.IntegerField(source="study_id", read_only=True)
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None, read_only=True)
    events = serializers.ListField(child=serializers.ChoiceField(choices=list(payloads.SUBSCRIBABLE)))

    class Meta:
        model = Webhook
        fields = ["id", "study", "url", "events", "active", "created_by", "created_at", "secret_rotated_at"]
        read_only_fields = fields


class WebhookSecretSerializer(WebhookSerializer):
    """A webhook with its secret: only in the answer that made it (the
    create, a rotation); keep it, it is never shown again."""

    secret = serializers.CharField(
        read_only=True, help_text="signs every delivery (X-Approve-Signature); shown only in this answer"
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class DeliverySerializer(serializers.ModelSerializer):
    """One delivery: the event, the JSON document sent, its state and its
    last attempt's status code, answer (first KiB) or error."""

    id = serializers.UUIDField(source="delivery_id", read_only=True, help_text="the X-Approve-Delivery header")
    status = serializers.ChoiceField(choices=Delivery.Status.choices, read_only=True)
    payload = serializers.JSONField(read_only=True, help_text="the document sent (docs/webhooks.md, Payload)")

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event",
            "status",
            "attempts",
            "status_code",
            "response_excerpt",
            "error",
            "created_at",
            "last_attempt_at",
            "next_attempt_at",
            "payload",
        ]
        read_only_fields = fields
