"""The accounts REST endpoints, mounted under /api/v1/ (approve_site/urls.py)."""

from django.urls import URLPattern, URLResolver, path

from . import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("accounts/signup/", views.SignUpRequestView.as_view(), name="signup"),
    path("accounts/signup/complete/", views.SignUpCompleteView.as_view(), name="signup-complete"),
    path("accounts/me/", views.MeView.as_view(), name="account-me"),
]
