"""Top-level URL configuration.

Pages live in each app's ``urls`` module; the REST API (``api/``) is mounted
here next to them, so a browser and a script reach the same services.
"""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from django.views import defaults
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts.api import urls as accounts_api
from engine.api import urls as engine_api
from evaluation.api import urls as evaluation_api
from notifications.api import urls as notifications_api
from tracking.api import urls as tracking_api
from webhooks.api import urls as webhooks_api
from workspace import views as pages
from workspace.api import urls as workspace_api
from workspace.api.exceptions import envelope

from .health import health
from .metrics import metrics


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A URL that matches nothing: under ``api/`` the API's JSON error (its
    clients parse every answer, and the schema documents 404 as JSON), the
    page everywhere else."""
    if request.path.startswith("/api/"):
        return JsonResponse(envelope("not_found", "Not found."), status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """An unexpected error: under ``api/`` the API's error envelope, the
    page everywhere else (the error is logged by Django either way)."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            envelope("server_error", "Server error: the request failed; it has been logged."), status=500
        )
    return defaults.server_error(request)


handler404 = not_found
handler500 = server_error

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health/", health, name="health"),
    # Prometheus scrapes /metrics (no slash): off unless configured (approve_site/metrics.py).
    path("metrics", metrics, name="metrics"),
    path("accounts/login/", pages.ThrottledLoginView.as_view(), name="login"),
    # Django 5 accepts only POST here; the header's logout button is a form.
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", pages.PasswordChangePage.as_view(), name="password_change"),
    path("accounts/password/reset/", pages.PasswordResetPage.as_view(), name="password_reset"),
    path("accounts/password/reset/sent/", pages.PasswordResetDonePage.as_view(), name="password_reset_done"),
    path("accounts/password/reset/done/", pages.PasswordResetCompletePage.as_view(), name="password_reset_complete"),
    path(
        "accounts/password/reset/<uidb64>/<token>/",
        pages.PasswordResetConfirmPage.as_view(),
        name="password_reset_confirm",
    ),
    path("accounts/email/", pages.email_page, name="account_email"),
    path("accounts/email/confirm/<str:token>/", pages.email_confirm_page, name="account_email_confirm"),
    path("accounts/tokens/", pages.tokens_page, name="api_tokens"),
    path("accounts/tokens/<int:token_id>/revoke/", pages.token_revoke_page, name="api_token_revoke"),
    # Each app owns its REST endpoints; one "api" namespace holds them all under /api/v1/.
    path(
        "api/v1/",
        include(
            (
                [
                    *workspace_api.urlpatterns,
                    *engine_api.urlpatterns,
                    *evaluation_api.urlpatterns,
                    *tracking_api.urlpatterns,
                    *accounts_api.urlpatterns,
                    *notifications_api.urlpatterns,
                    *webhooks_api.urlpatterns,
                ],
                "api",
            )
        ),
    ),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script from a URL
    # (?script): the Content-Security-Policy allows no inline script.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api/swagger_ui.html"),
        name="api-docs",
    ),
    path("", include("accounts.urls")),
    path("", include("notifications.urls")),
    path("", include("webhooks.urls")),
    path("", include("engine.urls")),
    path("", include("evaluation.urls")),
    path("", include("tracking.urls")),
    path("", include("workspace.urls")),
]
