"""The accounts pages (docs/pages.md)."""

from django.urls import URLPattern, URLResolver, include, path

urlpatterns: list[URLPattern | URLResolver] = [
    # Two-factor sign-in (accounts.otp).
    path("", include("accounts.otp.urls")),
]
