"""Top-level URL configuration.

Pages live in each app's ``urls`` module; the REST API (``api/``) is mounted
here next to them, so a browser and a script reach the same services.
"""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import JsonResponse
from django.urls import include, path
from django.views import defaults
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from workspace.views import ThrottledLoginView

from .health import health


def not_found(request, exception):
    """A URL that matches nothing: under ``api/`` the API's JSON error (its
    clients parse every answer, and the schema documents 404 as JSON), the
    page everywhere else."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


handler404 = not_found

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health/", health, name="health"),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    # Django 5 accepts only POST here; the header's logout button is a form.
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("workspace.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("workspace.urls")),
]
