"""The webhooks' writes (docs/webhooks.md): register, change, delete a
study's webhooks and rotate their secret (the designer: the page or the API
checks the role first); record an event's deliveries and each attempt's
outcome (the tasks). A refusal is ``InvalidInput`` naming the field (the
URL, the events) or ``PhaseConflict`` for a limit, nothing written."""

import secrets
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import Study

from . import outbound, payloads
from .models import ERROR_MAX_CHARS, Delivery, Webhook


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def _events(events: Iterable[object]) -> list[str]:
    """The kinds chosen, in ``SUBSCRIBABLE``'s order, or InvalidInput on ``events``."""
    chosen = list(events)
    unknown = [str(kind) for kind in chosen if kind not in payloads.SUBSCRIBABLE]
    if unknown:
        raise InvalidInput(
            {
                "events": f"not an event a webhook may receive: {', '.join(unknown[:5])} (one of "
                f"{', '.join(payloads.SUBSCRIBABLE)})"
            }
        )
    if not chosen:
        raise InvalidInput({"events": "choose at least one event"})
    return [kind for kind in payloads.SUBSCRIBABLE if kind in chosen]


@transaction.atomic
def webhook_create(
    *, study: Study, by: User | None, url: str, events: Iterable[object], active: bool = True
) -> Webhook:
    """A new webhook of ``study`` (its secret made here: the caller shows
    ``webhook.secret`` once). Refused: the URL (``outbound.check``), the
    events, or more than ``WEBHOOK_MAX_PER_STUDY`` webhooks (409
    ``webhook_limit``)."""
    chosen = _events(events)
    outbound.check(url)
    study = Study.objects.select_for_update().get(pk=study.pk)  # counted under the study's lock
    if Webhook.objects.filter(study=study).count() >= settings.WEBHOOK_MAX_PER_STUDY:
        raise PhaseConflict(
            f"This study has {settings.WEBHOOK_MAX_PER_STUDY} webhooks, the most it may have "
            "(WEBHOOK_MAX_PER_STUDY): delete one first.",
            code="webhook_limit",
        )
    webhook = Webhook(study=study, url=url, events=chosen, active=active, created_by=by)
    webhook.secret = new_secret()
    webhook.save()
    return webhook


@transaction.atomic
def webhook_update(
    *, webhook: Webhook, url: str | None = None, events: Iterable[object] | None = None, active: bool | None = None
) -> Webhook:
    """Change what is given (a new URL is checked like a new webhook's)."""
    fields: dict[str, Any] = {}
    if events is not None:
        fields["events"] = _events(events)
    if url is not None and url != webhook.url:
        outbound.check(url)
        fields["url"] = url
    if active is not None:
        fields["active"] = active
    for name, value in fields.items():
        setattr(webhook, name, value)
    if fields:
        webhook.save(update_fields=list(fields))
    return webhook


@transaction.atomic
def webhook_rotate_secret(*, webhook: Webhook) -> Webhook:
    """A new secret (shown once by the caller); the old one signs nothing
    from now on, deliveries already pending included."""
    webhook.secret = new_secret()
    webhook.secret_rotated_at = timezone.now()
    webhook.save(update_fields=["sealed_secret", "secret_rotated_at"])
    return webhook


@transaction.atomic
def webhook_delete(*, webhook: Webhook) -> None:
    """The webhook and its delivery log; pending deliveries are not sent."""
    webhook.delete()


def _prune(webhook_id: int) -> None:
    """Keep the newest ``WEBHOOK_DELIVERIES_KEPT`` deliveries of the webhook."""
    old = Delivery.objects.filter(webhook_id=webhook_id).order_by("-created_at", "-id")[
        settings.WEBHOOK_DELIVERIES_KEPT :
    ]
    Delivery.objects.filter(pk__in=list(old.values_list("pk", flat=True))).delete()


def _delivery(webhook: Webhook, kind: str, data: dict[str, Any], at: datetime) -> Delivery:
    delivery_id = uuid.uuid4()
    document = payloads.payload(delivery_id=str(delivery_id), kind=kind, study=webhook.study, data=data, at=at)
    delivery = Delivery.objects.create(webhook=webhook, event=kind, delivery_id=delivery_id, payload=document)
    _prune(webhook.pk)
    return delivery


@transaction.atomic
def event_record(*, webhooks: list[Webhook], kind: str, data: dict[str, Any], at: datetime) -> list[int]:
    """One pending delivery of the event per webhook; their ids."""
    return [_delivery(webhook, kind, data, at).pk for webhook in webhooks]


@transaction.atomic
def webhook_test(*, webhook: Webhook) -> Delivery:
    """A ``webhook.test`` delivery, sent once written (even while the
    webhook is inactive); refused (409 ``webhook_test_pending``) while an
    earlier test of it is still pending, so the button cannot flood the
    receiver."""
    from . import tasks  # the task↔service pair (docs/architecture.md, "Circles")

    Webhook.objects.select_for_update().filter(pk=webhook.pk).first()
    if Delivery.objects.filter(webhook=webhook, event=payloads.TEST_EVENT, status=Delivery.Status.PENDING).exists():
        raise PhaseConflict("A test delivery of this webhook is still being sent.", code="webhook_test_pending")
    delivery = _delivery(webhook, payloads.TEST_EVENT, {}, timezone.now())
    tasks.delivery_enqueue(delivery.pk)
    return delivery


# A pending delivery this long past its due time lost its message (a broker
# restarted, a worker killed with it): the recovery sweep sends it again.
STALE_SECONDS = 1800
# The most deliveries one sweep sends again.
RECOVERED_MAX = 500


def deliveries_recover_stale(*, now: datetime | None = None) -> list[int]:
    """The recovery sweep's part for webhooks (registered with
    ``engine.tasks.sweep_register``): each pending delivery due more than
    ``STALE_SECONDS`` ago (its next attempt's time, or its creation for a
    first attempt) is sent again, its due time moved to now so that the
    next sweep leaves it alone meanwhile. Returns their ids."""
    from . import tasks  # the task↔service pair (docs/architecture.md, "Circles")

    now = now or timezone.now()
    stale = now - timedelta(seconds=STALE_SECONDS)
    due = Q(next_attempt_at__lt=stale) | Q(next_attempt_at__isnull=True, created_at__lt=stale)
    with transaction.atomic():
        ids = list(
            Delivery.objects.select_for_update(skip_locked=True)
            .filter(due, status=Delivery.Status.PENDING)
            .order_by("pk")
            .values_list("pk", flat=True)[:RECOVERED_MAX]
        )
        Delivery.objects.filter(pk__in=ids).update(next_attempt_at=now)
        for pk in ids:
            tasks.delivery_enqueue(pk)
    return ids


def attempt_record(*, delivery: Delivery, outcome: outbound.Outcome, status: str, retry_in: int | None) -> None:
    """Record one attempt: its status code, answer excerpt or error, the
    delivery's state, and when the next attempt is due (``retry_in``
    seconds, None: no other). A delivery deleted meanwhile (its webhook
    deleted) stays deleted."""
    now = timezone.now()
    Delivery.objects.filter(pk=delivery.pk).update(
        attempts=F("attempts") + 1,
        status=status,
        status_code=outcome.status_code,
        response_excerpt=outcome.excerpt,
        error=outcome.error[:ERROR_MAX_CHARS],
        last_attempt_at=now,
        next_attempt_at=now + timedelta(seconds=retry_in) if retry_in is not None else None,
    )
