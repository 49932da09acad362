from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    verbose_name = "Validation engine"

    def ready(self) -> None:
        # The robustness analyses' kernels register themselves (engine.analyses.KERNELS).
        from . import robustness_kernels  # noqa: F401
