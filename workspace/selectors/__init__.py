"""Reads, always scoped to what the user may see.

An outsider never learns a study exists: every lookup of a study goes
through ``studies_visible_to`` so a study the user is not a member of is
simply "not found" (``Study.DoesNotExist``). Reads that take a study or a
membership take one the caller has already resolved that way.

The reads live in modules by area; this package's namespace is their public
surface, so callers write ``selectors.study_get(...)``:

- ``studies``: visibility, the dashboard, a study's detail and setup summary;
- ``experts``: members, pending experts, progress and missing inputs;
- ``inputs``: what experts entered, in bundle shape;
- ``design``: attributes, metrics, candidates, measurements, ballots and
  the vote's selection;
- ``discussion``: threads and posts;
- ``rounds``: revision rounds, their responses, feedback and convergence;
- ``accounts``: API tokens;
- ``history``: a study's recorded changes (issue 22).
"""

from ._queries import User
from .accounts import api_token_by_digest, api_token_get, api_token_list, email_confirmation_get
from .design import (
    attribute_get,
    attribute_list,
    ballot_list,
    candidate_list,
    elicited_metric_names,
    measurement_list,
    measurement_values,
    measurement_values_shown,
    measurements_of,
    metric_list,
    ranges_needed,
    selected_attributes,
    selected_measurement_arrays,
    selected_measurement_list,
    selected_metrics,
    setup_item_get,
    setup_item_list,
    vote_selection_get,
)
from .discussion import THREAD_KINDS, Thread, discussion_get, discussion_item_get, post_get, thread_of
from .experts import (
    ASSESSMENT_INPUTS,
    INPUT_NOTES,
    ExpertProgress,
    absent_list,
    consistency_words,
    consistency_worst,
    expert_get,
    expert_list,
    expert_progress_annotate,
    expert_progress_list,
    expert_steps_get,
    input_gaps,
    input_note_list,
    input_notes,
    inputs_pending,
    is_expert_of,
    member_list,
    missing_input_list,
    note_words,
    panel_list,
    pending_reason,
    unconfirmed_votes,
)
from .history import (
    HistoryEntry,
    HistoryFilter,
    HistoryPages,
    history_all,
    history_count,
    history_filter_parse,
    history_list,
    history_people,
)
from .inputs import INPUT_SECTIONS, expert_inputs_list, number_out
from .rounds import (
    ExpertResponses,
    Feedback,
    RoundConvergence,
    convergence_of,
    my_round_responses,
    round_convergence,
    round_current,
    round_feedback,
    round_feedback_frozen,
    round_get,
    round_latest_number,
    round_list,
    round_responses,
    steps_to_revise,
)
from .studies import (
    dashboard_studies,
    studies_designed_by,
    studies_visible_to,
    studies_with_my_roles,
    study_content_counts,
    study_detail_get,
    study_get,
    study_setup_get,
)

__all__ = [
    "User",
    "HistoryEntry",
    "HistoryFilter",
    "HistoryPages",
    "history_all",
    "history_count",
    "history_filter_parse",
    "history_list",
    "history_people",
    "ExpertResponses",
    "Feedback",
    "RoundConvergence",
    "convergence_of",
    "my_round_responses",
    "round_convergence",
    "round_current",
    "round_feedback",
    "round_feedback_frozen",
    "round_get",
    "round_latest_number",
    "round_list",
    "round_responses",
    "steps_to_revise",
    "email_confirmation_get",
    "ASSESSMENT_INPUTS",
    "INPUT_SECTIONS",
    "THREAD_KINDS",
    "ExpertProgress",
    "Thread",
    "api_token_by_digest",
    "api_token_get",
    "api_token_list",
    "attribute_get",
    "attribute_list",
    "ballot_list",
    "candidate_list",
    "elicited_metric_names",
    "dashboard_studies",
    "studies_designed_by",
    "discussion_get",
    "discussion_item_get",
    "absent_list",
    "expert_get",
    "expert_inputs_list",
    "expert_list",
    "expert_progress_annotate",
    "expert_progress_list",
    "expert_steps_get",
    "INPUT_NOTES",
    "consistency_words",
    "consistency_worst",
    "input_gaps",
    "input_note_list",
    "input_notes",
    "inputs_pending",
    "is_expert_of",
    "measurement_list",
    "measurement_values",
    "measurement_values_shown",
    "measurements_of",
    "member_list",
    "panel_list",
    "metric_list",
    "missing_input_list",
    "note_words",
    "number_out",
    "pending_reason",
    "post_get",
    "ranges_needed",
    "selected_attributes",
    "selected_measurement_arrays",
    "selected_measurement_list",
    "selected_metrics",
    "setup_item_get",
    "setup_item_list",
    "studies_visible_to",
    "studies_with_my_roles",
    "study_content_counts",
    "study_detail_get",
    "study_get",
    "study_setup_get",
    "thread_of",
    "unconfirmed_votes",
    "vote_selection_get",
]
