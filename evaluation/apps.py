from django.apps import AppConfig


def _evaluation_schema() -> dict:
    """The ``approve-evaluation/1`` document's JSON Schema, for the OpenAPI
    document."""
    # imported on first use: the API module imports drf-spectacular and DRF's
    # serializers (0.2 s), which a command or a worker never needs.
    from .api.computations import EVALUATION_SCHEMA

    return EVALUATION_SCHEMA


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation from predictions"

    def ready(self) -> None:
        # evaluation registers its parts of workspace's pages, bundle and API
        # schema into workspace's extension points, so workspace imports
        # nothing of evaluation (docs/architecture.md, "Layers"). Imported
        # here, once the apps are loaded (AppConfig.ready's pattern).
        from workspace import extensions as ext

        from . import selectors
        from .bundle import SECTION

        ext.schema_component_register("EvaluationDocument", _evaluation_schema)
        # A study bundle's prediction sets and elicited metrics (workspace.bundles).
        ext.bundle_section_register(SECTION)
        # The elicited metrics: an expert's questions, what is missing and given.
        ext.expert_questions_register(
            ext.ExpertQuestions(
                steps=selectors.elicitation_steps,
                steps_by_expert=selectors.elicitation_steps_by_expert,
                unfinished=selectors.elicitations_unfinished,
                own_values=selectors.own_elicited_values,
            )
        )
        ext.missing_inputs_register(selectors.elicitations_missing)
        ext.expert_inputs_register("elicitation_answers", selectors.elicitation_answers_given)
        # The measurements page: values computed from predictions, and the elicited spreads.
        ext.value_sources_register(
            ext.ValueSources(
                key="computed",
                summaries_key="provenance",
                read=selectors.measurement_sources,
                holds=lambda source, value: not source.edited_since(value),
                summaries=selectors.computed_summaries,
                also_shown=selectors.computed_measurements,
            )
        )
        ext.measurement_section_register("elicited_spreads", selectors.elicited_spreads_shown)
        # An elicited metric's reference candidate is kept while it makes the questions.
        ext.candidate_keeper_register(selectors.reference_candidates_kept)
