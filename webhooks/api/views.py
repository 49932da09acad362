"""The webhooks REST endpoints (docs/webhooks.md, "API"): the designer
lists, registers, changes and deletes a study's webhooks, rotates a secret,
sends a test delivery and reads the delivery log. Other members get 403,
anyone else 404 (the study's existence is never revealed). Thin: the
services decide."""

import uuid
from typing import cast

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webhooks import selectors, services
from webhooks.models import Delivery, Webhook
from workspace.api.idempotency import idempotent
from workspace.api.schema import VALIDATION_ERROR, error
from workspace.api.views import PaginatedListMixin, StudyScoped, location, validated
from workspace.models import Membership
from workspace.services.roles import require_role

from . import serializers as s

LIMIT = error("The study has WEBHOOK_MAX_PER_STUDY webhooks already (webhook_limit).")
TEST_PENDING = error("A test delivery of this webhook is still being sent (webhook_test_pending).")


class WebhookScoped(APIView):
    """Resolves ``webhook_id`` for the requesting user: 404 unless they are
    a member of its study, 403 unless they design it."""

    schema_tag = "webhooks"
    _webhook: Webhook

    def webhook(self, action: str) -> Webhook:
        if not hasattr(self, "_webhook"):
            try:
                webhook = selectors.webhook_get(
                    webhook_id=self.kwargs["webhook_id"], user=cast(User, self.request.user)
                )
            except Webhook.DoesNotExist:
                raise exceptions.NotFound("No such webhook.") from None
            require_role(study=webhook.study, user=self.request.user, role=Membership.Role.DESIGNER, action=action)
            self._webhook = webhook
        return self._webhook


class StudyWebhooksView(PaginatedListMixin, StudyScoped, APIView):
    schema_tag = "webhooks"

    @extend_schema(summary="List the study's webhooks (designer)", responses=s.WebhookSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        """The study's webhooks, oldest first, without their secrets."""
        self.require_designer("see the study's webhooks")
        return self.paginated(selectors.webhook_list(study=self.study()), s.WebhookSerializer)

    @extend_schema(
        summary="Register a webhook",
        request=s.WebhookWriteSerializer,
        responses={201: s.WebhookSecretSerializer, 400: VALIDATION_ERROR, 409: LIMIT},
    )
    @idempotent
    def post(self, request: Request, study_id: int) -> Response:
        """Register a URL to receive the events chosen (designer); the
        answer carries its secret, shown only here."""
        self.require_designer("register webhooks")
        data = validated(s.WebhookWriteSerializer, request.data)
        webhook = services.webhook_create(study=self.study(), by=self.member(), **data)
        return Response(
            s.WebhookSecretSerializer(webhook).data,
            status=status.HTTP_201_CREATED,
            headers=location(request, "webhook-detail", webhook_id=webhook.pk),
        )


class WebhookDetailView(WebhookScoped):
    @extend_schema(summary="Get a webhook (designer)", responses=s.WebhookSerializer)
    def get(self, request: Request, webhook_id: int) -> Response:
        """The webhook, without its secret."""
        return Response(s.WebhookSerializer(self.webhook("see the study's webhooks")).data)

    @extend_schema(
        summary="Change a webhook's URL, events or state",
        request=s.WebhookPatchSerializer,
        responses={200: s.WebhookSerializer, 400: VALIDATION_ERROR},
    )
    def patch(self, request: Request, webhook_id: int) -> Response:
        """Change what the body gives (a new URL is checked again)."""
        webhook = self.webhook("change the study's webhooks")
        data = validated(s.WebhookPatchSerializer, request.data)
        services.webhook_update(webhook=webhook, **data)
        return Response(s.WebhookSerializer(webhook).data)

    @extend_schema(summary="Delete a webhook and its delivery log", responses={204: None})
    def delete(self, request: Request, webhook_id: int) -> Response:
        """Delete it with its delivery log; pending deliveries are not sent."""
        services.webhook_delete(webhook=self.webhook("delete the study's webhooks"))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateSecretView(WebhookScoped):
    @extend_schema(summary="Rotate a webhook's secret", request=None, responses=s.WebhookSecretSerializer)
    def post(self, request: Request, webhook_id: int) -> Response:
        """A new secret, shown only in this answer; the old one signs nothing from now on."""
        webhook = services.webhook_rotate_secret(webhook=self.webhook("rotate the secrets of the study's webhooks"))
        return Response(s.WebhookSecretSerializer(webhook).data)


class WebhookTestView(WebhookScoped):
    @extend_schema(
        summary="Send a test delivery",
        request=None,
        responses={202: s.DeliverySerializer, 409: TEST_PENDING},
    )
    @idempotent
    def post(self, request: Request, webhook_id: int) -> Response:
        """Send a ``webhook.test`` delivery now (even while the webhook is
        inactive); its outcome is in the delivery log."""
        webhook = self.webhook("test the study's webhooks")
        delivery = services.webhook_test(webhook=webhook)
        return Response(
            s.DeliverySerializer(delivery).data,
            status=status.HTTP_202_ACCEPTED,
            headers=location(request, "webhook-delivery", webhook_id=webhook.pk, delivery_id=delivery.delivery_id),
        )


class DeliveryListView(PaginatedListMixin, WebhookScoped):
    @extend_schema(summary="List a webhook's deliveries", responses=s.DeliverySerializer(many=True))
    def get(self, request: Request, webhook_id: int) -> Response:
        """The delivery log, newest first: each delivery's state, attempts,
        last status code and error, and the document sent."""
        webhook = self.webhook("read the study's webhook deliveries")
        return self.paginated(selectors.delivery_list(webhook=webhook), s.DeliverySerializer)


class DeliveryDetailView(WebhookScoped):
    @extend_schema(summary="Get one delivery of a webhook", responses=s.DeliverySerializer)
    def get(self, request: Request, webhook_id: int, delivery_id: uuid.UUID) -> Response:
        """One delivery, by its id (the X-Approve-Delivery header)."""
        webhook = self.webhook("read the study's webhook deliveries")
        try:
            delivery = selectors.delivery_get(webhook=webhook, delivery_id=delivery_id)
        except Delivery.DoesNotExist:
            raise exceptions.NotFound("No such delivery.") from None
        return Response(s.DeliverySerializer(delivery).data)
