from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation from predictions"

    def ready(self) -> None:
        # The API schema's EvaluationDocument component: evaluation registers
        # it, so workspace's schema imports nothing of evaluation (a
        # function-level import: AppConfig.ready's pattern).
        from workspace.api.schema import component_register

        from .api.computations import EVALUATION_SCHEMA

        component_register("EvaluationDocument", EVALUATION_SCHEMA)
