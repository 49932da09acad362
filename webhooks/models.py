"""What the webhooks app keeps: a study's webhooks (the URL its designer
registered, the events it receives, the secret each delivery is signed with)
and each webhook's deliveries with every attempt's outcome
(docs/webhooks.md)."""

import uuid

from django.conf import settings
from django.db import models

from tracking import secrets

# The HKDF label of the key the signing secrets are sealed under (tracking.secrets).
SECRET_SEAL_INFO = b"webhook signing secret v1"

# The longest URL a webhook may have, and the most of an answer's body kept.
URL_MAX_LENGTH = 2000
RESPONSE_EXCERPT_MAX_CHARS = 1024
ERROR_MAX_CHARS = 500


class Webhook(models.Model):
    """A URL the study's designer registered: ``events`` the kinds it
    receives (keys of ``webhooks.payloads.SUBSCRIBABLE``); ``secret`` signs
    each delivery (HMAC-SHA256), shown to the designer once, when made or
    rotated, never again; kept sealed (Fernet under a key HKDF derives from
    SECRET_KEY for this use alone, as the MLflow tokens are): ``secret``
    opens it; inactive, it receives nothing."""

    study = models.ForeignKey("workspace.Study", on_delete=models.CASCADE, related_name="webhooks")
    url = models.CharField(max_length=URL_MAX_LENGTH)
    events = models.JSONField(default=list)
    sealed_secret = models.CharField(max_length=400)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    secret_rotated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.url

    @property
    def secret(self) -> str:
        """The signing secret, opened (ValueError if SECRET_KEY changed without a fallback)."""
        return secrets.unseal(self.sealed_secret, info=SECRET_SEAL_INFO)

    @secret.setter
    def secret(self, plain: str) -> None:
        self.sealed_secret = secrets.seal(plain, info=SECRET_SEAL_INFO)


class Delivery(models.Model):
    """One event sent (or being sent) to one webhook: the payload as sent,
    its state, and the last attempt's status code, answer (its first KiB)
    or error; ``next_attempt_at`` when a retry is due."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    response_excerpt = models.TextField(blank=True)
    error = models.CharField(max_length=ERROR_MAX_CHARS, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["webhook", "-created_at"], name="delivery_webhook_new")]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook_id} ({self.status})"
