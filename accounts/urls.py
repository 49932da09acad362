"""The accounts pages (docs/pages.md): single sign-on, self sign-up and two-factor sign-in (docs/accounts.md)."""

from django.urls import URLPattern, URLResolver, include, path

from . import signup_views, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("accounts/oidc/login/", views.SignInStart.as_view(), name="oidc_authentication_init"),
    path("accounts/oidc/callback/", views.SignInCallback.as_view(), name="oidc_authentication_callback"),
    # Self sign-up (accounts.signup).
    path("accounts/signup/", signup_views.signup_page, name="signup"),
    path("accounts/signup/<str:token>/", signup_views.signup_complete_page, name="signup_complete"),
    # Two-factor sign-in (accounts.otp).
    path("", include("accounts.otp.urls")),
]
