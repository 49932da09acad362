"""The two-factor pages, under /accounts/two-factor/ (accounts/urls.py)."""

from django.urls import path

from . import views

urlpatterns = [
    path("accounts/two-factor/", views.two_factor_page, name="two_factor"),
    path("accounts/two-factor/verify/", views.verify_page, name="two_factor_verify"),
    path("accounts/two-factor/recovery-codes/", views.recovery_codes_page, name="two_factor_recovery_codes"),
    path("accounts/two-factor/turn-off/", views.disable_page, name="two_factor_disable"),
]
