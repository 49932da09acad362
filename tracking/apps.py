from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "tracking"
    verbose_name = "MLflow experiment tracking"

    def ready(self) -> None:
        # Imported here, once the apps are loaded (AppConfig.ready's pattern).
        from engine.tasks import sweep_register
        from workspace import extensions as ext

        from . import selectors
        from .services import imports_recover_stale

        # The engine's recovery sweep also recovers MLflow imports whose lease lapsed.
        sweep_register("MLflow imports", imports_recover_stale)
        # The measurements page marks and summarises the values imported from MLflow.
        ext.value_sources_register(
            ext.ValueSources(
                key="imported",
                summaries_key="mlflow_provenance",
                read=selectors.value_sources,
                holds=lambda source, value: source.value == value,
                summaries=selectors.imports_summarised,
            )
        )
