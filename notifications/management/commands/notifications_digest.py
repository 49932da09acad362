"""``manage.py notifications_digest``: send the daily digests now."""

from typing import Any

from django.core.management.base import BaseCommand

from notifications.tasks import digests_send


class Command(BaseCommand):
    help = "Send every digest of notifications waiting now (celery beat sends them daily)."

    def handle(self, *args: Any, **options: Any) -> None:
        sent = digests_send.apply().get()
        self.stdout.write(f"{sent} digest{'s' if sent != 1 else ''} sent.")
