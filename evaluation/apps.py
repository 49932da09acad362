from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation from predictions"

    def ready(self) -> None:
        # The API schema's EvaluationDocument component: evaluation registers
        # it, so workspace's schema imports nothing of evaluation (a
        # function-level import: AppConfig.ready's pattern).
        from workspace.api.schema import component_register
        from workspace.extensions import bundle_section_register, expert_inputs_register, missing_inputs_register

        from .api.computations import EVALUATION_SCHEMA
        from .bundle import SECTION
        from .selectors import elicitation_answers_given, elicitations_missing

        component_register("EvaluationDocument", EVALUATION_SCHEMA)
        # A study bundle's prediction sets and elicited metrics (workspace.bundles).
        bundle_section_register(SECTION)
        # What an expert still has to give, and has given, of the elicited metrics.
        missing_inputs_register(elicitations_missing)
        expert_inputs_register("elicitation_answers", elicitation_answers_given)
