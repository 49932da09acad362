"""The accounts pages (docs/pages.md): single sign-on (docs/accounts.md)."""

from django.urls import URLPattern, URLResolver, path

from . import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("accounts/oidc/login/", views.SignInStart.as_view(), name="oidc_authentication_init"),
    path("accounts/oidc/callback/", views.SignInCallback.as_view(), name="oidc_authentication_callback"),
]
