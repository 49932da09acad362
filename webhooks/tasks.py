"""The webhooks' Celery tasks: an event's deliveries written
(``event_deliver``, enqueued by the listener after the change commits) and
each delivery sent, retried with exponential back-off
(``delivery_send``)."""

import logging
import time
from datetime import datetime
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.db import transaction

from workspace.events import Event

from . import outbound, payloads, selectors, services
from .models import Delivery

logger = logging.getLogger(__name__)

# Answers worth another attempt besides 5xx: a timeout, "too many requests".
RETRIED_STATUSES = frozenset({408, 429})
# The longest wait between two attempts.
RETRY_MAX_SECONDS = 3600


def retry_in(retries: int) -> int:
    """Exponential back-off: 1, 2, 4 ... times WEBHOOK_RETRY_SECONDS after
    the first, second, third ... failed attempt, at most an hour."""
    return int(min(settings.WEBHOOK_RETRY_SECONDS * 2**retries, RETRY_MAX_SECONDS))


def verdict(outcome: outbound.Outcome) -> str:
    """``succeeded`` (2xx), ``retry`` (no answer, 5xx, 408, 429) or
    ``failed`` (any other answer: a redirect, a refusal; or a URL the
    policy refuses)."""
    code = outcome.status_code
    if outcome.final:
        return "failed"
    if code is None or code >= 500 or code in RETRIED_STATUSES:
        return "retry"
    return "succeeded" if 200 <= code < 300 else "failed"


def event_enqueue(event: Event) -> None:
    """The listener (workspace.events): enqueue the deliveries' task for
    the events a webhook may receive, nothing else."""
    if event.kind in payloads.SUBSCRIBABLE:
        event_deliver.delay(kind=event.kind, study_id=event.study_id, data=event.data, at=event.at.isoformat())


def delivery_enqueue(delivery_id: int) -> None:
    """Send the delivery once the transaction that wrote it commits."""
    transaction.on_commit(lambda: delivery_send.delay(delivery_id=delivery_id))


@shared_task(name="webhooks.tasks.event_deliver", ignore_result=True)
def event_deliver(*, kind: str, study_id: int, data: dict[str, Any], at: str) -> int:
    """One delivery of the event per active webhook of the study that
    receives it, each sent once written. Returns how many."""
    webhooks = selectors.subscribed(study_id=study_id, kind=kind)
    if not webhooks:
        return 0
    ids = services.event_record(webhooks=webhooks, kind=kind, data=data, at=datetime.fromisoformat(at))
    for pk in ids:
        delivery_enqueue(pk)
    return len(ids)


def _attempt(delivery: Delivery) -> outbound.Outcome:
    """One attempt, signed now (a retry an hour later carries a fresh timestamp)."""
    content = payloads.body(delivery.payload)
    headers = payloads.headers(
        secret=delivery.webhook.secret,
        kind=delivery.event,
        delivery_id=str(delivery.delivery_id),
        timestamp=int(time.time()),
        content=content,
    )
    outcome = outbound.post(delivery.webhook.url, content, headers)
    if outcome.status_code is not None and 300 <= outcome.status_code < 400:
        return outbound.Outcome(outcome.status_code, outcome.excerpt, "a redirect: not followed")
    return outcome


def send(task: Task, delivery_id: int) -> str:
    """Attempt the delivery until it succeeds, fails for good, or has been
    retried WEBHOOK_MAX_RETRIES times; every attempt recorded. The back-off
    counts the delivery's own attempts (a message the recovery sweep sent
    again goes on where it stopped). Under a worker a retry is a later task
    (``task.retry``, the back-off as countdown); in eager mode (no worker:
    tests, a site without Redis) the attempts follow at once."""
    while True:
        delivery = selectors.delivery_for_attempt(delivery_id=delivery_id)
        if delivery is None:
            return "nothing to send"
        if not delivery.webhook.active and delivery.event != payloads.TEST_EVENT:
            outcome = outbound.Outcome(None, error="not sent: the webhook was turned off")
            services.attempt_record(delivery=delivery, outcome=outcome, status=Delivery.Status.FAILED, retry_in=None)
            return "failed"
        retries = delivery.attempts  # the attempts before this one
        outcome = _attempt(delivery)
        decided = verdict(outcome)
        if decided == "retry" and (retries >= settings.WEBHOOK_MAX_RETRIES or delivery.event == payloads.TEST_EVENT):
            decided = "failed"  # retried enough; a test is tried once, its outcome what the designer asked for
        wait = retry_in(retries) if decided == "retry" else None
        status = Delivery.Status.PENDING if decided == "retry" else decided
        services.attempt_record(delivery=delivery, outcome=outcome, status=status, retry_in=wait)
        what = f"webhook delivery {delivery.delivery_id} ({delivery.event}) attempt {retries + 1}"
        if decided != "retry":
            log = logger.info if decided == "succeeded" else logger.warning
            log("%s: %s %s", what, decided, outcome.status_code or outcome.error)
            return decided
        logger.warning("%s: %s, retried in %s s", what, outcome.status_code or outcome.error, wait)
        if not task.request.is_eager:
            raise task.retry(countdown=wait)


@shared_task(bind=True, name="webhooks.tasks.delivery_send", ignore_result=True, max_retries=None)
def delivery_send(self: Task, *, delivery_id: int) -> str:
    """Send one delivery (``send``): ``succeeded``, ``failed`` or ``nothing to send``."""
    return send(self, delivery_id)
