from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """How people get an account and sign in (issue 32): single sign-on with
    OpenID Connect, self sign-up under the site's policy, two-factor sign-in.
    Above workspace: it registers its checks into workspace's extension
    points, workspace never imports it."""

    name = "accounts"
    verbose_name = "Accounts and sign-in"

    def ready(self) -> None:
        from .otp import signals

        signals.connect()
