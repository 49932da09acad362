"""The ``Idempotency-Key`` store (docs/api.md, "Idempotency"): one row per
user and key, claimed before the request's work and completed with its answer.
In the database so that every web process sees the same keys."""

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from ..limits import IDEMPOTENCY_CLAIM_SECONDS, IDEMPOTENCY_KEY_LIFETIME_SECONDS
from ..models import IdempotencyKey


def idempotency_claim(*, user: User, key: str, request_hash: str) -> tuple[IdempotencyKey, bool]:
    """The user's row for ``key`` and whether this call made it (then the
    caller does the work and completes or releases it). Keys older than their
    lifetime are deleted first, everyone's (lazily, as keys come in), and so
    is a claim left in progress for longer than a request may take."""
    now = timezone.now()
    IdempotencyKey.objects.filter(created_at__lt=now - timedelta(seconds=IDEMPOTENCY_KEY_LIFETIME_SECONDS)).delete()
    IdempotencyKey.objects.filter(
        user=user, key=key, status__isnull=True, created_at__lt=now - timedelta(seconds=IDEMPOTENCY_CLAIM_SECONDS)
    ).delete()
    for _attempt in range(3):  # a row deleted between the insert and the read: try again
        try:
            with transaction.atomic():
                return IdempotencyKey.objects.create(user=user, key=key, request_hash=request_hash), True
        except IntegrityError:
            found = IdempotencyKey.objects.filter(user=user, key=key).first()
            if found is not None:
                return found, False
    raise RuntimeError(f"idempotency key {key!r} could be neither claimed nor read")


def idempotency_complete(*, record: IdempotencyKey, status: int, body: Any, headers: dict[str, str]) -> None:
    """Keep the answer the claimed request got, for the same key to send again."""
    record.status, record.body, record.headers = status, body, headers
    record.save(update_fields=["status", "body", "headers"])


def idempotency_release(*, record: IdempotencyKey) -> None:
    """Forget a claim whose request was refused or failed: nothing was done,
    so the same key may try again."""
    IdempotencyKey.objects.filter(pk=record.pk, status__isnull=True).delete()
