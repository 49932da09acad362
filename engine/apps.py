from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    verbose_name = "Validation engine"

    def ready(self) -> None:
        # Imported here, once the apps are loaded (a function-level import: AppConfig.ready's pattern).
        from workspace.services import before_inputs_change

        from .services import runs_take_snapshots

        # A run launched but not yet given its snapshot gets it before the
        # study's inputs change (workspace does not import the engine).
        before_inputs_change(runs_take_snapshots)
