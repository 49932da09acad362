"""Reads of validation runs and their analyses, always scoped to what the
user may see (a run is found only through a study the user is a member of,
``workspace.selectors.studies_visible_to``).

The reads live in modules by area; this package's namespace is their public
surface, so callers write ``engine_selectors.run_get(...)``:

- ``runs``: validation runs (``fields`` names the JSON a read loads);
- ``analyses``: robustness analyses of runs;
- ``documents``: the results document (``results.json``, the API's results)
  built from a run's stored results.
"""

from .analyses import (
    analysis_get,
    analysis_latest,
    analysis_list,
    analysis_sentences,
    run_snapshot_parts,
    run_stored_ranking,
)
from .documents import (
    CONSENSUS_KEYS,
    CONSISTENCY_KEYS,
    SPREAD_KEYS,
    candidate_individual_scores,
    comparison_document,
    document_tail,
    results_document,
    results_individual_page,
    results_json,
    results_json_read,
    results_version,
    runs_with_document,
)
from .runs import (
    METRIC_INPUT_KEYS,
    RANKING_KEYS,
    RUN_FIELDS,
    RUN_JSON_FIELDS,
    SCORE_INPUT_KEYS,
    run_candidate_get,
    run_candidates_get,
    run_comparable_list,
    run_get,
    run_list,
    run_pair_get,
    run_ranking_get,
    run_score_inputs,
)

__all__ = [
    "CONSENSUS_KEYS",
    "CONSISTENCY_KEYS",
    "METRIC_INPUT_KEYS",
    "RUN_FIELDS",
    "RANKING_KEYS",
    "RUN_JSON_FIELDS",
    "SCORE_INPUT_KEYS",
    "SPREAD_KEYS",
    "analysis_get",
    "analysis_latest",
    "analysis_list",
    "analysis_sentences",
    "candidate_individual_scores",
    "comparison_document",
    "document_tail",
    "results_document",
    "results_individual_page",
    "results_json",
    "results_json_read",
    "results_version",
    "run_candidate_get",
    "run_candidates_get",
    "run_comparable_list",
    "run_get",
    "run_list",
    "run_pair_get",
    "run_ranking_get",
    "run_score_inputs",
    "run_snapshot_parts",
    "run_stored_ranking",
    "runs_with_document",
]
