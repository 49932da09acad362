"""What the notifications app keeps: each person's notifications (the
in-app list, and whether and how each was e-mailed) and their e-mail
preferences (docs/notifications.md)."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Notification(models.Model):
    """One thing that happened, told to one person: a sentence in plain
    words (``text``), the page it is about (``link``, a path of the site)
    and, for its e-mail, a longer ``body`` when the sentence is not all
    (a reminder's list of what is still to give). ``mail`` says what
    became of its e-mail."""

    class Mail(models.TextChoices):
        PENDING = "pending", "Being sent"
        SENT = "sent", "Sent"
        DIGEST = "digest", "Waiting for the daily digest"
        FAILED = "failed", "Refused by the mail server"
        NONE = "none", "Not e-mailed"

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    study = models.ForeignKey(
        "workspace.Study", on_delete=models.CASCADE, null=True, blank=True, related_name="notifications"
    )
    kind = models.CharField(max_length=40)
    text = models.CharField(max_length=500)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    mail = models.CharField(max_length=10, choices=Mail.choices, default=Mail.NONE)
    emailed_at = models.DateTimeField(null=True, blank=True)
    mail_error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["recipient", "-created_at"], name="notification_recipient_new"),
            models.Index(fields=["recipient"], condition=Q(read_at__isnull=True), name="notification_unread"),
            models.Index(fields=["mail"], condition=Q(mail="digest"), name="notification_digest_due"),
        ]

    def __str__(self) -> str:
        return self.text


class NotificationPreference(models.Model):
    """How a person wants their notifications e-mailed: ``email_off`` the
    kinds (keys of ``notifications.kinds.KINDS``) not e-mailed at all, and
    ``digest`` one mail a day with the rest instead of one mail each. The
    in-app list always holds every notification. No row: every kind
    e-mailed at once."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    email_off = models.JSONField(default=list, blank=True)
    digest = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"notification preferences of {self.user}"
