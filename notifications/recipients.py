"""Who is told of each event, and in what words (docs/notifications.md,
"Each notification"). Each function reads what the event needs and returns
the drafts, one per person; nothing is written here.

A sentence names the study, what happened and, for the person told, what
to do; never another expert's name, address or answers (revision rounds
are anonymous)."""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from engine.models import Analysis, Run
from workspace import reminders, selectors
from workspace.events import Event
from workspace.models import Membership, Phase, Study


@dataclass(frozen=True)
class Draft:
    """A notification for ``user``, about to be written."""

    user: User
    text: str
    link: str
    body: str = ""


def study_home(study: Study) -> str:
    return f"/studies/{study.pk}/"


def _title(study: Study) -> str:
    return f"“{study.title}”"


def _users(ids: list[int]) -> list[User]:
    return list(get_user_model().objects.filter(pk__in=ids, is_active=True).order_by("pk"))


def _designers(study: Study) -> list[User]:
    ids = {study.designer_id}
    ids |= set(Membership.objects.filter(study=study, role=Membership.Role.DESIGNER).values_list("user_id", flat=True))
    return _users(sorted(ids))


def _with_steps(study: Study, phase: str) -> list[User]:
    """The experts taking part who still have steps in ``phase``: in
    voting those without a vote, in the assessment those with inputs still
    missing (``selectors.missing_input_list``); once it closed (nothing can
    be missing then), those who left a step to review (unconfirmed default
    ranges, inconsistent priorities: ``selectors.input_note_list``)."""
    panel = list(selectors.panel_list(study=study))
    if phase == Phase.VOTING:
        progress = selectors.expert_progress_list(study=study).filter(absence=Membership.Absence.NONE)
        return _users([expert.user_id for expert in progress if expert.votes_cast == 0])
    left = set(selectors.missing_input_list(study=study))
    if phase == Phase.CLOSED:
        left |= {name for name, notes in selectors.input_note_list(study=study).items() if notes}
    return _users([expert.user_id for expert in panel if expert.user.get_username() in left])


_PHASE_WORDS: dict[tuple[str, str], str] = {
    (
        Phase.DRAFT,
        Phase.VOTING,
    ): "Voting opened in {title}: please vote on the complementary attributes and the metrics.",
    (Phase.VOTING, Phase.ASSESSMENT): (
        "The assessment of {title} opened: please give your priorities, ranges and peer weights."
    ),
    (Phase.ASSESSMENT, Phase.CLOSED): (
        "The assessment of {title} closed while you still had steps to review: your inputs are used as you left them."
    ),
    (Phase.CLOSED, Phase.ASSESSMENT): "The assessment of {title} reopened: you still have steps to do.",
}


def phase_changed(event: Event, study: Study) -> list[Draft]:
    """Experts with steps to do in the phase that opened (or, when the
    assessment closed, who had steps left)."""
    words = _PHASE_WORDS.get((event.data.get("from", ""), event.data.get("to", "")))
    if words is None:
        return []
    text = words.format(title=_title(study))
    return [Draft(user, text, study_home(study)) for user in _with_steps(study, event.data["to"])]


def _round(event: Event, study: Study, opened: bool) -> list[Draft]:
    number = event.data.get("number")
    if opened:
        text = (
            f"Revision round {number} of {_title(study)} opened: read the group's anonymous feedback, "
            "then revise or confirm each of your answers."
        )
    else:
        text = f"Revision round {number} of {_title(study)} closed: your answers as they stand are kept."
    experts = selectors.panel_list(study=study).filter(status=Membership.Status.ACTIVE)
    return [Draft(user, text, study_home(study)) for user in _users([m.user_id for m in experts])]


def round_opened(event: Event, study: Study) -> list[Draft]:
    return _round(event, study, opened=True)


def round_closed(event: Event, study: Study) -> list[Draft]:
    return _round(event, study, opened=False)


def reminder_sent(event: Event, study: Study) -> list[Draft]:
    """The experts reminded, each with what they still have to give."""
    experts = list(
        selectors.expert_list(study=study).filter(pk__in=event.data.get("membership_ids", []), user__is_active=True)
    )
    bodies = reminders.reminder_bodies(
        study=study, experts=experts, link=event.data.get("link", ""), note=event.data.get("note", "")
    )
    text = f"Reminder from the designer of {_title(study)}: please look at your steps."
    return [Draft(expert.user, text, study_home(study), bodies[expert.pk]) for expert in experts]


def expert_excluded(event: Event, study: Study) -> list[Draft]:
    """The expert excluded (or marked abstaining), with the designer's reason."""
    done = "marked you as abstaining in" if event.data.get("absence") == "abstaining" else "excluded you from"
    text = (
        f"The designer has {done} {_title(study)}: “{event.data.get('reason', '')}”. "
        "Your inputs are kept but no longer used; you can still read the study."
    )
    return [Draft(user, text, study_home(study)) for user in _users([event.data.get("user_id", 0)])]


def run_finished(event: Event, study: Study) -> list[Draft]:
    """The study's designers."""
    run = Run.objects.filter(pk=event.data["run_id"], study=study).first()
    if run is None:
        return []
    if run.status == Run.Status.SUCCEEDED:
        text = f"Run {run.number} of {_title(study)} succeeded: its results are ready."
    else:
        text = f"Run {run.number} of {_title(study)} failed: {run.error}"[:500]
    return [Draft(user, text, f"/runs/{run.pk}/") for user in _designers(study)]


def analysis_finished(event: Event, study: Study) -> list[Draft]:
    """The study's designers."""
    analysis = Analysis.objects.filter(pk=event.data["analysis_id"], run__study=study).select_related("run").first()
    if analysis is None:
        return []
    what = f"The robustness analysis “{analysis.get_kind_display()}” of run {analysis.run.number} of {_title(study)}"
    if analysis.status == Analysis.Status.SUCCEEDED:
        text = f"{what} finished: its results are ready."
    else:
        text = f"{what} failed: {analysis.error}"[:500]
    return [Draft(user, text, f"/runs/{analysis.run_id}/robustness/") for user in _designers(study)]


def invitation_created(event: Event, study: Study) -> list[Draft]:
    """The person invited by username, when their account exists (an
    invitation addressed to an e-mail address is mailed by
    ``services.invitation_mail``). Linked to the studies page, where they
    accept or decline."""
    username = event.data.get("username")
    if not username:
        return []
    users = list(get_user_model().objects.filter(username=username, is_active=True))
    text = f"You are invited to be an expert of {_title(study)}: accept or decline on your studies page."
    return [Draft(user, text, "/") for user in users]


RECIPIENTS: dict[str, Callable[[Event, Study], list[Draft]]] = {
    "invitation.created": invitation_created,
    "phase.changed": phase_changed,
    "round.opened": round_opened,
    "round.closed": round_closed,
    "reminder.sent": reminder_sent,
    "expert.excluded": expert_excluded,
    "run.succeeded": run_finished,
    "run.failed": run_finished,
    "analysis.finished": analysis_finished,
}
