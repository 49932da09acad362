"""Every change to a study, one workflow per function.

Services are keyword-only, run inside ``transaction.atomic()`` and either do
the whole change or raise (``InvalidInput`` naming the field, ``PhaseConflict``
saying why) having written nothing. They check the domain rules of METHOD.md
sections 1-5, whose thresholds live in ``engine.rules``; *who* may call them
is checked by the pages and the API. Reads live in ``workspace.selectors``.

Expert inputs take the shape of that expert's section of a study bundle
(FORMATS.md): items are named, experts are usernames. The bundle importer,
the API and the pages call these same functions, as ``services.<name>``:

- ``setup``: the study, its experts, attributes, metrics, candidates and
  measurements (the designer's);
- ``inputs``: votes, prioritisations, acceptable ranges, peer weights (the
  experts');
- ``phases``: which phase allows which change (``PHASE_RULES``, read
  through ``phase_allows``, ``phase_refusal`` and ``require_phase`` by
  services, pages and templates alike) and the transitions between phases;
- ``accounts``: users and API tokens;
- ``panel``: who takes part (an expert excluded, abstaining, re-admitted);
- ``discussion``: posts in the thread of an attribute or a metric;
- ``imports``: the bundle importer's bulk versions of the setup services
  (attributes, metrics, invitations, a new study's measurements), called as
  ``services.imports.<name>``;
- ``idempotency``: the API's ``Idempotency-Key`` store (claim, complete,
  release), called as ``services.idempotency.<name>``.

The argument checks every service shares (``expect``, ``number``, ``text``,
and ``locked``, the study's row lock) are public here too, for the services
of other apps (``evaluation.services``), with ``before_inputs_change``, where
the engine registers what must happen before a study's inputs change.
"""

from ._checks import before_inputs_change, expect, inputs_changed, iso_moment, keys, locked, moment, number, text
from .accounts import (
    api_token_create,
    api_token_record_use,
    api_token_revoke,
    api_tokens_revoke_all,
    email_change_notify,
    email_confirm,
    email_confirmation_token,
    user_email_set,
    user_get_or_create,
    user_password_set,
    users_get_or_create,
)
from .discussion import post_add, post_edit, post_hide, post_unhide
from .inputs import (
    metric_prioritisation_clear,
    metric_prioritisation_set,
    peer_weights_set,
    peer_weights_set_many,
    priorities_set,
    priorities_set_many,
    prioritisation_preview,
    prioritisation_set,
    range_check,
    ranges_set,
    ranges_set_many,
    votes_set,
    votes_set_many,
)
from .panel import ABSENCES, expert_absence_set, expert_readmit, require_taking_part
from .phases import (
    PHASE_RULES,
    Action,
    has_opened,
    opens_in,
    phase_allows,
    phase_refusal,
    quorum_problem,
    require_phase,
    selection_fixed,
    study_close_assessment,
    study_close_voting,
    study_open_voting,
    study_reopen_assessment,
    study_transition,
)
from .rounds import round_close, round_open, round_respond
from .setup import (
    attribute_add,
    attribute_remove,
    attribute_update,
    candidate_add,
    candidate_remove,
    candidate_update,
    candidates_add,
    expert_add,
    expert_remove,
    experts_add,
    measurements_set,
    metric_add,
    metric_remove,
    metric_update,
    study_create,
    study_delete,
    study_deletions_purge,
    study_update,
)

__all__ = [
    "ABSENCES",
    "expert_absence_set",
    "expert_readmit",
    "quorum_problem",
    "require_taking_part",
    "before_inputs_change",
    "expect",
    "iso_moment",
    "keys",
    "moment",
    "inputs_changed",
    "locked",
    "number",
    "text",
    "email_change_notify",
    "email_confirm",
    "email_confirmation_token",
    "user_email_set",
    "PHASE_RULES",
    "Action",
    "has_opened",
    "opens_in",
    "phase_allows",
    "phase_refusal",
    "require_phase",
    "selection_fixed",
    "api_token_create",
    "api_token_record_use",
    "api_token_revoke",
    "api_tokens_revoke_all",
    "attribute_add",
    "attribute_remove",
    "attribute_update",
    "candidate_add",
    "candidate_remove",
    "candidate_update",
    "candidates_add",
    "expert_add",
    "expert_remove",
    "experts_add",
    "measurements_set",
    "metric_add",
    "metric_prioritisation_clear",
    "metric_prioritisation_set",
    "metric_remove",
    "metric_update",
    "peer_weights_set",
    "post_add",
    "post_edit",
    "post_hide",
    "post_unhide",
    "peer_weights_set_many",
    "priorities_set",
    "priorities_set_many",
    "prioritisation_preview",
    "prioritisation_set",
    "range_check",
    "round_close",
    "round_open",
    "round_respond",
    "ranges_set",
    "ranges_set_many",
    "study_close_assessment",
    "study_close_voting",
    "study_create",
    "study_delete",
    "study_deletions_purge",
    "study_open_voting",
    "study_reopen_assessment",
    "study_transition",
    "study_update",
    "user_get_or_create",
    "user_password_set",
    "users_get_or_create",
    "votes_set",
    "votes_set_many",
]
