from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "tracking"
    verbose_name = "MLflow experiment tracking"

    def ready(self) -> None:
        # The engine's recovery sweep also recovers MLflow imports whose lease lapsed.
        from engine.tasks import sweep_register

        from .services import imports_recover_stale

        sweep_register("MLflow imports", imports_recover_stale)
