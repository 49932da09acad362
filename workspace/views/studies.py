"""Pages about studies: the dashboard, a study's home with its phase
actions, deleting a study, and answering an invitation addressed to me."""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from engine.rules import CONSISTENCY_THRESHOLD

from .. import extensions, invitations, selectors, services
from ..errors import InvalidInput, PhaseConflict
from ..forms.studyhome import InvitationAcceptForm
from ..models import Invitation, Membership, Phase, Study
from ..selectors import ExpertProgress
from ..selectors.experts import Progress
from ..selectors.studies import DashboardRow
from ..services import Action
from . import rounds
from .common import absent_how, form_add_service_errors, require_designer, signed_in_user, study_for_member

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    from .common import MemberStudy


class DashboardTodo(DashboardRow):
    todo: list[tuple[str, list[str]]]  # (role, lines) per role of mine


class ExpertRowWithReason(Progress):
    pending_reason: str  # empty unless the expert is pending


if TYPE_CHECKING:
    DashboardEntry = WithAnnotations[Study, DashboardTodo]
    ExpertRow = WithAnnotations[Membership, ExpertRowWithReason]

# --- phases: what each one is for and what leaving it freezes --------------------------

PHASE_TIMELINE = (
    (
        Phase.DRAFT,
        "The designer sets up attributes, metrics, candidates, experts, default ranges and thresholds.",
        "Opening the vote fixes the attributes, the metrics and the experts.",
    ),
    (
        Phase.VOTING,
        "Experts vote on the complementary attributes and on the metrics.",
        "Closing the vote fixes the selection, the vote thresholds and the default ranges.",
    ),
    (
        Phase.ASSESSMENT,
        "Experts prioritise the selected attributes, set their acceptable ranges and weigh their peers.",
        "Closing the assessment freezes every expert's inputs.",
    ),
    (
        Phase.CLOSED,
        "Inputs are frozen; the designer launches validation runs.",
        "Reopening the assessment lets experts change their inputs again; existing runs keep their snapshot.",
    ),
)


@dataclass(frozen=True)
class PhaseAction:
    label: str  # the button
    question: str  # the confirmation page's heading
    done: str  # the message once done


# The designer's transitions (services.phases.TRANSITIONS), keyed (from, to).
PHASE_ACTIONS = {
    (Phase.DRAFT, Phase.VOTING): PhaseAction("Open voting", "Open the vote?", "Voting is open."),
    (Phase.VOTING, Phase.ASSESSMENT): PhaseAction(
        "Close voting", "Close the vote?", "Voting is closed: the selection is fixed and the assessment is open."
    ),
    (Phase.ASSESSMENT, Phase.CLOSED): PhaseAction(
        "Close assessment", "Close the assessment?", "The assessment is closed: inputs are frozen."
    ),
    (Phase.CLOSED, Phase.ASSESSMENT): PhaseAction(
        "Reopen assessment", "Reopen the assessment?", "The assessment is open again."
    ),
}


def _timeline(study: Study) -> list[dict]:
    order = [phase for phase, _, _ in PHASE_TIMELINE]
    current = order.index(Phase(study.phase))
    return [
        {
            "phase": phase,
            "label": Phase(phase).label,
            "purpose": purpose,
            "freezes": freezes,
            "state": "done" if index < current else "current" if index == current else "later",
        }
        for index, (phase, purpose, freezes) in enumerate(PHASE_TIMELINE)
    ]


def _actions(study: Study) -> list[dict]:
    return [{"to": to, "action": action} for (origin, to), action in PHASE_ACTIONS.items() if origin == study.phase]


# --- progress: each expert's steps ---------------------------------------------------


@dataclass(frozen=True)
class Step:
    key: str  # also the path under /studies/{id}/my/
    label: str
    # done, missing, todo (open, nothing yet), none (closed, nothing given), later,
    # inconsistent (priorities above the consistency threshold), unconfirmed
    # (the designer's default ranges, not saved or confirmed by the expert).
    state: str
    text: str
    at: datetime | None = None

    @property
    def state_label(self) -> str:
        return {
            "done": "Done",
            "missing": "Missing",
            "todo": "Not yet",
            "none": "None",
            "later": "Later",
            "inconsistent": "Inconsistent",
            "unconfirmed": "Default ranges (not confirmed)",
            "revise": "To revise",
        }[self.state]


# The steps a round reopens, as they are named to the expert.
REVISED_NOUNS = {"priorities": "priorities", "ranges": "acceptable ranges", "peer-weights": "peer weights"}


def _to_revise(steps: list[Step], revision: rounds.Revision | None, *, for_designer: bool) -> list[Step]:
    """``steps`` with those the open round reopens and the expert has not yet
    responded to (saved or confirmed unchanged) reading "to revise" instead
    of done; a step still missing stays missing."""
    if revision is None:
        return steps
    if for_designer:
        ask = f"Not yet revised or confirmed in round {revision.number}."
    else:
        ask = f"Revision round {revision.number} is open: revise your {{}} or confirm them unchanged."
    return [
        Step(step.key, step.label, "revise", f"{ask.format(REVISED_NOUNS[step.key])} {step.text}", step.at)
        if step.state in ("done", "inconsistent") and step.key.replace("-", "_") in revision.steps
        else step
        for step in steps
    ]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _votes_step(study: Study, expert: ExpertProgress, *, for_designer: bool = False) -> Step:
    if not services.has_opened(study, Action.VOTE):
        return Step("votes", "Votes", "later", "Opens when the designer opens voting.")
    cast = expert.votes_cast
    if services.phase_allows(study, Action.VOTE):
        if cast:
            who = "the expert" if for_designer else "you"
            text = f"{_plural(cast, 'vote')} cast; {who} can change them until voting closes."
            return Step("votes", "Votes", "done", text)
        return Step("votes", "Votes", "todo", "No vote cast yet (voting for nothing is allowed).")
    if cast:
        return Step("votes", "Votes", "done", f"{_plural(cast, 'vote')} cast; voting is closed.")
    return Step("votes", "Votes", "none", "No vote cast; voting is closed.")


def _assessment_steps(study: Study, expert: ExpertProgress) -> list[Step]:
    if not services.has_opened(study, Action.PRIORITISE):
        later = "Opens when the designer closes voting."
        return [
            Step("priorities", "Priorities", "later", later),
            Step("ranges", "Acceptable ranges", "later", later),
            Step("peer-weights", "Peer weights", "later", later),
        ]
    gaps, notes = selectors.input_gaps(expert), selectors.input_notes(expert)
    if "priorities" not in gaps:
        method = {"direct": "direct weights", "ahp": "AHP", "lpr": "LPR"}.get(expert.prioritisation_method or "", "")
        worst = selectors.consistency_worst(expert)
        if "priorities_inconsistent" in notes and worst is not None:
            text = f"Given ({method}); {selectors.consistency_words(worst)}."
            priorities = Step("priorities", "Priorities", "inconsistent", text, expert.prioritised_at)
        else:
            priorities = Step("priorities", "Priorities", "done", f"Given ({method}).", expert.prioritised_at)
    else:
        priorities = Step("priorities", "Priorities", "missing", "The selected attributes are not prioritised yet.")
    if "ranges" in gaps:
        texts = [f"No range yet for {_plural(expert.ranges_missing, 'metric')} without a default range."]
        texts = texts if expert.ranges_missing else []
        if expert.ranges_to_confirm:
            texts.append(
                f"{_plural(expert.ranges_to_confirm, 'range')} to confirm: the metric's values changed (made elicited)."
            )
        ranges = Step("ranges", "Acceptable ranges", "missing", " ".join(texts))
    elif "ranges_unconfirmed" in notes:
        ranges = Step(
            "ranges",
            "Acceptable ranges",
            "unconfirmed",
            f"The designer's default ranges apply to {_plural(expert.ranges_defaulted, 'metric')}; "
            "not yet saved or confirmed by the expert.",
        )
    elif expert.ranges_given:
        ranges = Step(
            "ranges",
            "Acceptable ranges",
            "done",
            f"{_plural(expert.ranges_given, 'range')} set"
            + ("; the designer's default applies to the other metrics." if expert.ranges_defaulted else "."),
        )
    else:
        ranges = Step("ranges", "Acceptable ranges", "done", "The designer's default ranges apply to every metric.")
    if "peer_weights" not in gaps:
        peers = Step("peer-weights", "Peer weights", "done", f"Every expert weighted ({expert.experts_total}).")
    else:
        peers = Step(
            "peer-weights",
            "Peer weights",
            "missing",
            f"{expert.peers_rated} of {expert.experts_total} experts weighted.",
        )
    return [priorities, ranges, peers]


def _elicitation_step(study: Study, step: extensions.QuestionStep, *, for_designer: bool = False) -> Step:
    """An elicited metric's questions as one of the expert's steps (after the four)."""
    key, label = f"elicitation/{step.metric_id}", f"Questions on {step.name}"
    if not services.has_opened(study, Action.ELICIT):
        return Step(key, label, "later", "Opens when the designer closes voting.")
    if step.finished:
        whose = "their" if for_designer else "your"
        return Step(key, label, "done", f"Answered ({step.answered} answers): {whose} own {step.name} is known.")
    if not services.phase_allows(study, Action.ELICIT):
        return Step(key, label, "none", "Not finished; the assessment is closed.")
    if step.answered:
        return Step(key, label, "missing", f"{_plural(step.answered, 'question')} answered; not finished yet.")
    return Step(key, label, "missing", "No question answered yet.")


def expert_steps(
    study: Study,
    expert: ExpertProgress,
    *,
    for_designer: bool = False,
    elicitations: Sequence[extensions.QuestionStep] = (),
    revision: rounds.Revision | None = None,
) -> list[Step]:
    """The four steps of an expert with progress annotations
    (``selectors.expert_progress_annotate``), each done or not, then a step
    per elicited metric they answer (``elicitations``, from
    ``workspace.extensions.question_steps_by_expert``); worded for the
    expert, or ``for_designer`` (the progress grid) about them. During an
    open round (``revision``) the steps it reopens that they have not
    responded to read "to revise"."""
    return [
        _votes_step(study, expert, for_designer=for_designer),
        *_to_revise(_assessment_steps(study, expert), revision, for_designer=for_designer),
        *(_elicitation_step(study, step, for_designer=for_designer) for step in elicitations),
    ]


def next_step_key(study: Study, steps: list[Step]) -> str:
    """Where *My steps* opens: the first step open and not done, else the
    first step of the current phase (votes until voting closes, then
    priorities)."""
    step = next((step for step in steps if step.state in ("missing", "todo", "revise")), None)
    if step is not None:
        return step.key
    return "priorities" if services.has_opened(study, Action.PRIORITISE) else "votes"


def expert_todo(study: Study, expert: ExpertProgress, unfinished: Sequence[str] = ()) -> list[str]:
    """What the expert still has to do, in words (the dashboard);
    ``unfinished``: the elicited metrics whose questions they have not
    finished (``workspace.extensions.questions_unfinished``)."""
    if not services.has_opened(study, Action.VOTE):
        return ["Waiting for the designer to open voting."]
    if expert.absence:  # excluded or abstaining: their inputs are not used, nothing is asked of them
        return [f"The designer has {absent_how(expert)} this study: nothing to give."]
    if services.phase_allows(study, Action.VOTE):
        step = _votes_step(study, expert)
        return ["Voting: open. " + ("Your votes are cast." if step.state == "done" else "You have not voted yet.")]
    steps = _assessment_steps(study, expert)
    done = sum(step.state in GIVEN_STATES for step in steps)
    if not services.phase_allows(study, Action.PRIORITISE):
        return [f"Closed: your inputs are frozen ({done} of 3 assessment steps were done)."]
    missing = [step.label.lower() for step in steps if step.state not in GIVEN_STATES]
    missing += [f"the questions on {name}" for name in unfinished]
    line = f"{done} of 3 assessment steps done."
    lines = [line + (f" Still to give: {', '.join(missing)}." if missing else " Nothing left to do.")]
    for step in steps:
        if step.state == "unconfirmed":
            lines.append("Acceptable ranges: the designer's defaults, not confirmed yet; confirm or change them.")
        elif step.state == "inconsistent":
            lines.append(f"Priorities: {step.text[0].lower()}{step.text[1:]} Please consider revising them.")
    return lines


# The states of a step that hold an input (the notes do not block closing).
GIVEN_STATES = ("done", "inconsistent", "unconfirmed")


class SetupCounts(TypedDict):
    attributes: int
    metrics: int
    candidates: int
    runs: int | None  # None: not read (the study home leaves them to the Runs tab)


def _draft_todo(counts: SetupCounts, experts: list[ExpertProgress], active: list[ExpertProgress]) -> list[str]:
    return [
        f"Setting up: {_plural(counts['attributes'], 'attribute')}, {_plural(counts['metrics'], 'metric')}, "
        f"{_plural(counts['candidates'], 'candidate')}, {_plural(len(experts), 'expert')}.",
        "Open voting once the setup is complete.",
    ]


def _voting_todo(counts: SetupCounts, experts: list[ExpertProgress], active: list[ExpertProgress]) -> list[str]:
    voted = sum(1 for e in active if e.votes_cast)
    return [
        f"Voting: open. {voted} of {_plural(len(active), 'expert')} have voted.",
        "Close voting when every expert has had their say.",
    ]


# How the designer's list names each missing input (selectors.ASSESSMENT_INPUTS).
GAP_WORDS = {"priorities": "priorities", "ranges": "ranges", "peer_weights": "peer weights"}


def _assessment_todo(counts: SetupCounts, experts: list[ExpertProgress], active: list[ExpertProgress]) -> list[str]:
    gaps = Counter(gap for expert in active for gap in selectors.input_gaps(expert))
    lines = [
        f"{_plural(gaps[key], 'expert')} still missing {GAP_WORDS[key]}."
        for key in selectors.ASSESSMENT_INPUTS
        if gaps[key]
    ]
    notes = Counter(note for expert in active for note in selectors.input_notes(expert))
    if notes["priorities_inconsistent"]:
        lines.append(
            f"{_plural(notes['priorities_inconsistent'], 'expert')} with inconsistent judgments (CR above "
            f"{CONSISTENCY_THRESHOLD:.2f}): a reminder asks them to revise (Experts tab)."
        )
    if notes["ranges_unconfirmed"]:
        lines.append(f"{_plural(notes['ranges_unconfirmed'], 'expert')} not yet confirmed the default ranges.")
    lines += _to_confirm_todo(active)
    if not gaps and all(e.status == Membership.Status.ACTIVE for e in experts):
        lines.append("Ready to close: every expert has given every input.")
    return lines


def _to_confirm_todo(active: list[ExpertProgress]) -> list[str]:
    """The ranges still to confirm, naming each expert and metric (one
    query, only when there are some: ``ranges_to_confirm``)."""
    if not any(e.ranges_to_confirm for e in active):
        return []
    rows = (
        selectors.to_confirm()
        .filter(expert__in=[e.pk for e in active])
        .order_by("expert_id", "metric__attribute__position", "metric__attribute_id", "metric__position", "metric_id")
        .values_list("expert__user__username", "metric__name")
    )
    by_expert: dict[str, list[str]] = {}
    for username, metric in rows:
        by_expert.setdefault(username, []).append(metric)
    named = "; ".join(f"{username}: {', '.join(metrics)}" for username, metrics in by_expert.items())
    return [f"Ranges to confirm, their metric's values having changed (made elicited): {named}."]


def _closed_todo(counts: SetupCounts, experts: list[ExpertProgress], active: list[ExpertProgress]) -> list[str]:
    run_count = counts["runs"]
    runs = "" if run_count is None else f" {_plural(run_count, 'validation run')} so far."
    return [f"Closed: inputs are frozen.{runs} Launch validation runs from the Runs tab."]


PHASE_TODO = {
    Phase.DRAFT: _draft_todo,
    Phase.VOTING: _voting_todo,
    Phase.ASSESSMENT: _assessment_todo,
    Phase.CLOSED: _closed_todo,
}


def designer_todo(study: Study, counts: SetupCounts, experts: list[ExpertProgress]) -> list[str]:
    """What the designer still has to do or wait for, in words (the
    dashboard and the study home), from the study's ``counts`` and its
    experts' progress."""
    absent = [e for e in experts if e.absence]
    experts = [e for e in experts if not e.absence]  # the others owe nothing
    active = [e for e in experts if e.status == Membership.Status.ACTIVE]
    pending = len(experts) - len(active)
    lines = PHASE_TODO[Phase(study.phase)](counts, experts, active)
    if pending:
        lines.append(f"{_plural(pending, 'expert')} still to accept the invitation.")
    if absent and study.phase != Phase.CLOSED:
        names = ", ".join(e.user.get_username() for e in absent)
        lines.append(f"Not taking part (their inputs are not used): {names}.")
    short = None
    if study.phase == Phase.ASSESSMENT:
        short = services.quorum_problem(study=study, taking_part=len(experts), absent=len(absent))
    if short:
        lines = [line for line in lines if not line.startswith("Ready to close")]
        lines.append(f"Closing is refused: {short}.")
    return lines


# --- the dashboard ----------------------------------------------------------------------


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """My studies with, per role, what is still to do; and the invitations
    addressed to me, to accept or decline."""
    studies = cast("list[DashboardEntry]", selectors.dashboard_studies(user=request.user))  # todo set here
    unfinished = extensions.questions_unfinished(
        memberships=[membership for study in studies for membership in study.my_memberships]
    )
    for study in studies:
        counts = SetupCounts(
            attributes=study.attribute_count,
            metrics=study.metric_count,
            candidates=study.candidate_count,
            runs=study.run_count,
        )
        study.todo = []
        for membership in study.my_memberships:
            if membership.role == Membership.Role.DESIGNER:
                study.todo.append(("Designer", designer_todo(study, counts, study.expert_rows)))
            else:
                study.todo.append(("Expert", expert_todo(study, membership, unfinished.get(membership.pk, ()))))
    pending = list(invitations.invitation_list_for_user(user=signed_in_user(request)))
    for invitation in pending:
        offered = invitation.membership
        imported = offered is not None and offered.inputs_imported_by_id is not None
        invitation.has_imported_inputs = imported  # type: ignore[attr-defined]  # the page's own, for the template
    return render(request, "workspace/home.html", {"studies": studies, "invitations": pending})


# --- answering an invitation ------------------------------------------------------------


def _my_invitation(request: HttpRequest, invitation_id: int) -> Invitation:
    invitation = invitations.invitation_get_for_user(user=signed_in_user(request), pk=invitation_id)
    if invitation is None:
        raise Http404("No such invitation.")
    return invitation


@login_required
@require_http_methods(["GET", "POST"])
def invitation_accept(request: HttpRequest, invitation_id: int) -> HttpResponse:
    """Accept an invitation addressed to me. GET shows it, with the inputs
    someone imported in my name and the box confirming them; POST accepts
    through the service (which refuses unticked imported inputs)."""
    invitation = _my_invitation(request, invitation_id)
    form = InvitationAcceptForm(request.POST if request.method == "POST" else None)
    refusal = None
    if form.is_bound and form.is_valid():
        try:
            membership = invitations.invitation_accept(
                invitation=invitation, user=signed_in_user(request), confirm_inputs=form.cleaned_data["confirm_inputs"]
            )
        except InvalidInput as error:
            form_add_service_errors(form, error)
        except PhaseConflict as error:
            refusal = str(error)
        else:
            messages.success(request, f"You joined “{invitation.study.title}” as an expert.")
            return redirect("study_home", study_id=membership.study_id)
    context = {
        "invitation": invitation,
        "inputs": invitations.invitation_inputs(invitation=invitation),
        "form": form,
        "refusal": refusal,
    }
    status = 409 if refusal else 400 if form.errors else 200
    return render(request, "studyhome/invitation_accept.html", context, status=status)


@login_required
@require_POST
def invitation_decline(request: HttpRequest, invitation_id: int) -> HttpResponse:
    invitation = _my_invitation(request, invitation_id)
    try:
        invitations.invitation_decline(invitation=invitation)
    except (InvalidInput, PhaseConflict) as error:
        messages.error(request, str(error) if isinstance(error, PhaseConflict) else error.message)
    else:
        messages.success(request, f"You declined the invitation to “{invitation.study.title}”.")
    return redirect("home")


# --- a study's home -------------------------------------------------------------------------


@login_required
def study_home(request: HttpRequest, study_id: int) -> HttpResponse:
    """The study's phase timeline, its setup, my next step as an expert and,
    for the designer, every expert's progress and the phase actions. The
    part below the tabs refreshes itself when the study changes
    (``study_home_live``)."""
    study = study_for_member(request, study_id)
    return render(request, "studyhome/study_home.html", _home_context(request, study))


@login_required
@require_GET
def study_home_live(request: HttpRequest, study_id: int) -> HttpResponse:
    """What the study home polls (htmx, every ``LIVE_POLL_SECONDS``) with the
    ``version`` it shows: 204 while the study's ``input_version`` is that
    one (every change through a service bumps it: an expert's save, an
    invitation answered, a phase, a round), else the home's live part at the
    new version, with the phase badge of the study's header (out of band)."""
    study = study_for_member(request, study_id)
    if request.GET.get("version") == str(study.input_version):
        response = HttpResponse(status=204)
    else:
        response = render(request, "studyhome/_home_live.html", {**_home_context(request, study), "live_swap": True})
    response["Cache-Control"] = "no-store"
    return response


def _home_context(request: HttpRequest, study: "MemberStudy") -> dict:
    """Everything the study home shows, for the page and its live part."""
    setup = selectors.study_setup_get(study=study)
    experts = cast("list[ExpertRow]", list(selectors.expert_progress_list(study=study)))  # pending_reason set below
    mine = next((e for e in experts if e.user_id == request.user.pk), None) if study.is_expert else None
    elicited = _elicitations_shown(study, experts, mine)
    round_context = rounds.home_context(study)
    revisions = rounds.revisions(round_context, mine)
    my_steps = None
    if mine is not None:
        my_steps = expert_steps(study, mine, elicitations=elicited[mine.pk], revision=revisions.get(mine.pk))
    _pending_reasons_set(experts)
    context = {
        "study": study,
        "study_tab": "home",
        "timeline": _timeline(study),
        "setup": setup,
        "experts": experts,
        "my_steps": my_steps,
        # excluded or abstaining: a banner instead of the steps
        "my_absence": mine if mine is not None and mine.absence else None,
        "next_step": next(
            (step for step in my_steps or () if step.state in ("missing", "todo", "unconfirmed", "revise")), None
        ),
        "grid": _progress_grid(study, experts, elicited, revisions),
        # The grid's columns after the four steps: each elicited metric's questions.
        "grid_elicited": [step.name for step in next(iter(elicited.values()), [])],
        "actions": _actions(study) if study.is_designer else [],
        "live_version": study.input_version,
        "live_seconds": settings.LIVE_POLL_SECONDS,
        **round_context,
    }
    if study.is_designer:
        context["designer_todo"] = _home_designer_todo(study, setup, experts)
    return context


def _elicitations_shown(study: Study, experts: "list[ExpertRow]", mine: "ExpertRow | None") -> dict:
    """The elicitation steps of the experts the home shows steps for: every
    expert to the designer, else only mine (no query when none)."""
    shown = [e.pk for e in experts] if study.is_designer else [mine.pk] if mine is not None else []
    return extensions.question_steps_by_expert(study=study, expert_ids=shown) if shown else {}


def _pending_reasons_set(experts: "list[ExpertRow]") -> None:
    """Sets each expert's ``pending_reason``: why a pending expert is not
    active yet, empty for the others."""
    for expert in experts:
        pending = expert.status == Membership.Status.PENDING
        expert.pending_reason = selectors.pending_reason(expert) if pending else ""


def _progress_grid(
    study: Study, experts: "list[ExpertRow]", elicited: dict, revisions: "dict[int, rounds.Revision]"
) -> list | None:
    """Every expert's steps as the designer sees them; None for anyone else."""
    if not study.is_designer:
        return None
    return [
        (
            expert,
            expert_steps(
                study,
                expert,
                for_designer=True,
                elicitations=elicited[expert.pk],
                revision=revisions.get(expert.pk),
            ),
        )
        for expert in experts
    ]


def _home_designer_todo(study: Study, setup: dict, experts: "list[ExpertRow]") -> list[str]:
    """What the designer still has to do, from the setup's counts (the runs
    not read here: the Runs tab lists them) and the experts' progress."""
    counts = SetupCounts(
        attributes=len(setup["attributes"]),
        metrics=len(setup["metrics"]),
        candidates=setup["candidate_count"],
        runs=None,  # not read here: the Runs tab lists them
    )
    return designer_todo(study, counts, list(experts))


@login_required
def my_steps(request: HttpRequest, study_id: int) -> HttpResponse:
    """The *My steps* tab (``/studies/{id}/my/``): opens the expert's next
    step to do; a member who is not an expert is sent to the votes page,
    which says why they cannot open it (403)."""
    study = study_for_member(request, study_id)
    mine = None
    if study.is_expert:
        mine = next((e for e in selectors.expert_progress_list(study=study) if e.user_id == request.user.pk), None)
    if mine is None:
        return redirect(f"/studies/{study.pk}/my/votes/")
    elicited = extensions.question_steps_by_expert(study=study, expert_ids=[mine.pk])[mine.pk]
    revision = rounds.my_revision(study, mine)
    key = next_step_key(study, expert_steps(study, mine, elicitations=elicited, revision=revision))
    return redirect(f"/studies/{study.pk}/my/{key}/")


def _phase_preview(study: Study, to: str) -> dict:
    """What the confirmation page shows will be frozen or changed."""
    if (study.phase, to) == (Phase.DRAFT, Phase.VOTING):
        return {"setup": selectors.study_setup_get(study=study), "experts": list(selectors.expert_list(study=study))}
    if (study.phase, to) == (Phase.VOTING, Phase.ASSESSMENT):
        setup = selectors.study_setup_get(study=study)
        attribute_ids, metric_ids = selectors.vote_selection_get(study=study)
        return {
            "selected_attributes": [a for a in setup["attributes"] if a.pk in attribute_ids],
            "dropped_attributes": [a for a in setup["attributes"] if a.pk not in attribute_ids],
            "selected_metrics": [m for m in setup["metrics"] if m.pk in metric_ids],
            "dropped_metrics": [m for m in setup["metrics"] if m.pk not in metric_ids],
        }
    if (study.phase, to) == (Phase.ASSESSMENT, Phase.CLOSED):
        notes = selectors.input_note_list(study=study)
        return {
            "absent": list(selectors.absent_list(study=study)),
            "quorum_short": services.quorum_problem(study=study, taking_part=selectors.panel_list(study=study).count()),
            "gaps": selectors.missing_input_list(study=study),
            "notes": {
                name: [selectors.note_words(note, value, to_expert=False) for note, value in found.items()]
                for name, found in notes.items()
            },
        }
    return selectors.study_content_counts(study=study)


@login_required
@require_http_methods(["GET", "POST"])
def study_phase(request: HttpRequest, study_id: int, to: str) -> HttpResponse:
    """Move the study to phase ``to``: GET says what will be frozen, POST
    moves it through ``services.study_transition``; a refusal is shown with
    the service's reason."""
    if to not in Phase.values:
        raise Http404("No such phase.")
    study = study_for_member(request, study_id)
    require_designer(study, "move the study from one phase to the next")
    action = PHASE_ACTIONS.get((Phase(study.phase), Phase(to)))
    refusal = None
    if action is None:
        refusal = (
            f"The study is in the {Phase(study.phase).label.lower()} phase: it cannot move to "
            f"{Phase(to).label.lower()} from there."
        )
    elif request.method == "POST":
        try:
            services.study_transition(study=study, to=to)
        except PhaseConflict as error:
            refusal = str(error)
        except InvalidInput as error:
            refusal = error.message
        else:
            messages.success(request, action.done)
            return redirect("study_home", study_id=study.pk)
    context = {
        "study": study,
        "study_tab": "home",
        "to": to,
        "action": action,
        "refusal": refusal,
        **(_phase_preview(study, to) if action is not None else {}),
    }
    return render(request, "studyhome/phase_confirm.html", context, status=409 if refusal else 200)


@login_required
@require_http_methods(["GET", "POST"])
def study_delete(request: HttpRequest, study_id: int) -> HttpResponse:
    """Delete the study with everything in it: GET says what goes, POST deletes."""
    study = study_for_member(request, study_id)
    require_designer(study, "delete the study")
    if request.method == "POST":
        title = study.title
        services.study_delete(study=study)
        messages.success(request, f"The study “{title}” was deleted with everything in it.")
        return redirect("home")
    setup = selectors.study_setup_get(study=study)
    context = {
        "study": study,
        "study_tab": "home",
        "setup": setup,
        "expert_count": selectors.expert_list(study=study).count(),
        **selectors.study_content_counts(study=study),
    }
    return render(request, "studyhome/study_delete.html", context)
