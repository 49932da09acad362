from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """E-mails and the in-app list of what happened in people's studies
    (issue 32): it listens to workspace's events (workspace.events)."""

    name = "notifications"
    verbose_name = "Notifications"
