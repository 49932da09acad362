from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    verbose_name = "Validation engine"

    def ready(self) -> None:
        # The robustness analyses' kernels register themselves (engine.analyses.KERNELS).
        from workspace.services import before_inputs_change

        from . import robustness_kernels  # noqa: F401
        from .services import runs_take_snapshots

        # A run launched but not yet given its snapshot gets it before the
        # study's inputs change (workspace does not import the engine).
        before_inputs_change(runs_take_snapshots)
