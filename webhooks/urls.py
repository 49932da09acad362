"""The webhooks pages (docs/pages.md, "Webhooks")."""

from django.urls import URLPattern, URLResolver, path

from . import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("studies/<int:study_id>/webhooks/", views.webhooks_page, name="webhooks"),
    path("studies/<int:study_id>/webhooks/<int:webhook_id>/", views.webhook_page, name="webhook"),
    path("studies/<int:study_id>/webhooks/<int:webhook_id>/test/", views.webhook_test, name="webhook_test"),
    path(
        "studies/<int:study_id>/webhooks/<int:webhook_id>/rotate-secret/",
        views.webhook_rotate_secret,
        name="webhook_rotate_secret",
    ),
    path("studies/<int:study_id>/webhooks/<int:webhook_id>/delete/", views.webhook_delete, name="webhook_delete"),
]
