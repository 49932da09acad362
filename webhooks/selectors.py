"""The webhooks' reads: a study's webhooks, one webhook of a study the user
is a member of (the role is checked by the page or the API view), its
deliveries newest first."""

import uuid

from django.contrib.auth.models import User
from django.db.models import OuterRef, QuerySet, Subquery

from workspace import selectors as workspace_selectors
from workspace.models import Study

from .models import Delivery, Webhook


def webhook_list(*, study: Study) -> QuerySet[Webhook]:
    """The study's webhooks, oldest first."""
    return Webhook.objects.filter(study=study).order_by("created_at", "id")


def webhook_rows(*, study: Study) -> QuerySet[Webhook]:
    """The study's webhooks with their last delivery's ``last_status``,
    ``last_code`` and ``last_at`` (one query)."""
    last = Delivery.objects.filter(webhook=OuterRef("pk")).order_by("-created_at", "-id")
    return webhook_list(study=study).annotate(
        last_status=Subquery(last.values("status")[:1]),
        last_code=Subquery(last.values("status_code")[:1]),
        last_at=Subquery(last.values("created_at")[:1]),
    )


def webhook_get(*, webhook_id: int, user: User) -> Webhook:
    """The webhook, with its study, if the user is a member of the study
    (``Webhook.DoesNotExist`` otherwise: a 404, like a study not theirs)."""
    visible = workspace_selectors.studies_visible_to(user)
    return Webhook.objects.select_related("study").filter(study__in=visible).get(pk=webhook_id)


def study_webhook_get(*, study: Study, webhook_id: int) -> Webhook:
    """One webhook of ``study`` (``Webhook.DoesNotExist`` for another study's)."""
    return webhook_list(study=study).get(pk=webhook_id)


def delivery_get(*, webhook: Webhook, delivery_id: uuid.UUID) -> Delivery:
    """One delivery of the webhook, by its id (``Delivery.DoesNotExist`` otherwise)."""
    return Delivery.objects.get(webhook=webhook, delivery_id=delivery_id)


def delivery_list(*, webhook: Webhook) -> QuerySet[Delivery]:
    """The webhook's deliveries, newest first."""
    return Delivery.objects.filter(webhook=webhook).order_by("-created_at", "-id")


def subscribed(*, study_id: int, kind: str) -> list[Webhook]:
    """The study's active webhooks that receive ``kind`` (a worker's read)."""
    return [webhook for webhook in Webhook.objects.filter(study_id=study_id, active=True) if kind in webhook.events]


def delivery_for_attempt(*, delivery_id: int) -> Delivery | None:
    """A pending delivery with its webhook (None: gone, or finished)."""
    return Delivery.objects.select_related("webhook").filter(pk=delivery_id, status=Delivery.Status.PENDING).first()
