"""The webhooks REST endpoints, mounted under /api/v1/ (approve_site/urls.py)."""

from django.urls import URLPattern, URLResolver, path

from . import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("studies/<int:study_id>/webhooks/", views.StudyWebhooksView.as_view(), name="study-webhooks"),
    path("webhooks/<int:webhook_id>/", views.WebhookDetailView.as_view(), name="webhook-detail"),
    path("webhooks/<int:webhook_id>/deliveries/", views.DeliveryListView.as_view(), name="webhook-deliveries"),
    path(
        "webhooks/<int:webhook_id>/deliveries/<uuid:delivery_id>/",
        views.DeliveryDetailView.as_view(),
        name="webhook-delivery",
    ),
    path("webhooks/<int:webhook_id>/test/", views.WebhookTestView.as_view(), name="webhook-test"),
    path(
        "webhooks/<int:webhook_id>/rotate-secret/",
        views.WebhookRotateSecretView.as_view(),
        name="webhook-rotate-secret",
    ),
]
