"""The accounts pages (docs/pages.md): single sign-on and two-factor sign-in (docs/accounts.md)."""

from django.urls import URLPattern, URLResolver, include, path

from . import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("accounts/oidc/login/", views.SignInStart.as_view(), name="oidc_authentication_init"),
    path("accounts/oidc/callback/", views.SignInCallback.as_view(), name="oidc_authentication_callback"),
    # Two-factor sign-in (accounts.otp).
    path("", include("accounts.otp.urls")),
]
