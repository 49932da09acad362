from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """A study's webhooks: signed JSON deliveries of its events to the URLs
    its designer registers (issue 32); it listens to workspace's events."""

    name = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        from engine.tasks import sweep_register
        from workspace.events import event_listen

        from . import services, tasks

        event_listen(tasks.event_enqueue)
        # The engine's recovery sweep also sends again deliveries whose message was lost.
        sweep_register("webhook deliveries", services.deliveries_recover_stale)
