"""``manage.py two_factor_reset <username>``: someone lost their phone and
their recovery codes. Their devices are removed; they sign in with their
password and set two-factor sign-in up again (at once, if it is required
of them)."""

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.otp import services


class Command(BaseCommand):
    help = "Remove a user's two-factor devices (authenticator app and recovery codes), e.g. after a lost phone."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="the account whose two-factor sign-in is reset")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            user = User.objects.get(username=options["username"])
        except User.DoesNotExist:
            raise CommandError(f"No user {options['username']!r}.") from None
        removed = services.two_factor_reset(user=user)
        if not removed:
            self.stdout.write(f"{user.username} had no two-factor device: nothing to reset.")
            return
        required = " They must set it up again when they next sign in." if services.is_required(user) else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"Removed {removed} two-factor device(s) of {user.username}: "
                f"their password alone signs them in.{required}"
            )
        )
