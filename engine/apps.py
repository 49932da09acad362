from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    verbose_name = "Validation engine"

    def ready(self) -> None:
        # Imported here, once the apps are loaded (a function-level import: AppConfig.ready's pattern).
        from workspace.extensions import study_content_register
        from workspace.services import before_inputs_change

        from .models import Run
        from .services import runs_take_snapshots

        # A run launched but not yet given its snapshot gets it before the
        # study's inputs change (workspace does not import the engine).
        before_inputs_change(runs_take_snapshots)
        # The dashboard, the phase pages and the delete page count a study's runs.
        study_content_register("run_count", Run.objects.all)
