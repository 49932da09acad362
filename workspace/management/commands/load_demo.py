"""Load the case-study-1 demo with usable demo accounts (development only)."""

import json
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from workspace.bundles import study_import_bundle
from workspace.models import Study

DEMO_BUNDLE = Path(__file__).resolve().parents[2] / "demo" / "case-study-1.json"
# The demo accounts' addresses: example.org never receives mail (RFC 2606).
DEMO_MAIL_DOMAIN = "example.org"


class Command(BaseCommand):
    help = (
        "Import the case-study-1 demo study (once) and give its designer, its four "
        "experts and an 'admin' superuser fresh passwords, printed here, and an address "
        f"@{DEMO_MAIL_DOMAIN} to any without one (reminders reach them; the console mail "
        "backend prints them). Like import_study, it imports as the operator: the experts "
        "are active members and their inputs count."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--force", action="store_true", help="allow with DEBUG off (never on a real deployment)")

    @transaction.atomic
    def handle(self, *args: Any, force: bool = False, **options: Any) -> None:
        if not settings.DEBUG and not force:
            raise CommandError("load_demo sets known passwords: it only runs with DEBUG on (or --force)")
        bundle = json.loads(DEMO_BUNDLE.read_text(encoding="utf-8"))
        User = get_user_model()
        study = Study.objects.filter(title=bundle["title"], designer__username=bundle["designer"]).first()
        if study is None:
            study = study_import_bundle(bundle=bundle)
            self.stdout.write(f"Imported the demo study {study.title!r} (id {study.pk}).")
        else:
            self.stdout.write(f"The demo study {study.title!r} is already there (id {study.pk}).")

        accounts = [("admin", "administrator (admin site)"), (bundle["designer"], "designer")]
        accounts += [(name, "expert") for name in bundle["experts"]]
        self.stdout.write("\nDemo accounts (passwords are new each time this runs):")
        for username, role in accounts:
            user, _ = User.objects.get_or_create(username=username)
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            if username == "admin":
                user.is_staff = user.is_superuser = True
            if not user.email:
                user.email = f"{username}@{DEMO_MAIL_DOMAIN}"
            user.save()
            self.stdout.write(f"  {username:<15} {password:<14} {user.email:<28} {role}")
        self.stdout.write("")
