from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """E-mails and the in-app list of what happened in people's studies
    (issue 32): it listens to workspace's events (workspace.events)."""

    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from workspace.events import event_listen
        from workspace.extensions import mail_choices_register

        from . import services, tasks

        event_listen(tasks.event_enqueue)
        mail_choices_register(services.mail_choices)
