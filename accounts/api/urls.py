"""The accounts REST endpoints, mounted under /api/v1/ (approve_site/urls.py)."""

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
