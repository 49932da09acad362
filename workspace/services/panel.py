"""Who takes part: the designer excludes an expert (on leave, left the team)
or marks them abstaining for the rest of the study, and may re-admit them
until the study closes (docs/method.md, "Absent experts").

An absent expert keeps their membership and their inputs, which no run, no
revision round and no close check uses: the method runs without their row
and column of V (each other expert's peer weights shared out in proportion
over the rest, ``engine.core.peer_weights_kept``). They are told by their
study home and, for an exclusion or abstention, by the notifications app
(event ``expert.excluded``: in the app, and by e-mail as they choose); a
re-admission is e-mailed directly (when they have an address).
"""

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from ..errors import InvalidInput, PhaseConflict
from ..events import event_publish
from ..limits import ABSENCE_REASON_MAX_CHARS
from ..models import Membership, Study
from ._checks import locked, subject_line, text
from .phases import Action, require_phase
from .roles import require_role

logger = logging.getLogger(__name__)

#: The absences the designer chooses between, and how a sentence names each.
ABSENCES = {
    Membership.Absence.EXCLUDED: "excluded from",
    Membership.Absence.ABSTAINING: "abstaining in",
}


def require_taking_part(expert: Membership) -> None:
    """``PhaseConflict`` (code ``expert_absent``) when ``expert`` is excluded
    or abstaining: no input of theirs is taken any more."""
    if expert.absence:
        since = f" since {expert.absent_since:%d %b %Y}" if expert.absent_since else ""
        raise PhaseConflict(
            f"{expert.user.get_username()} is {ABSENCES[Membership.Absence(expert.absence)]} this study{since}: "
            "their inputs are kept but not used, and no new input is taken. The designer can re-admit them "
            "until the study closes.",
            code="expert_absent",
        )


def _absence(value: Any) -> str:
    if value not in ABSENCES:
        kinds = " or ".join(repr(str(absence)) for absence in ABSENCES)
        raise InvalidInput({"absence": f"must be {kinds}, got {value!r}"})
    return str(value)


def _tell(expert: Membership, study: Study, sentence: str) -> None:
    """E-mail the expert what changed, after the change commits (an expert
    without an address is told by their study home only)."""
    address = expert.user.email
    if not address:
        return

    def send() -> None:
        body = "\n".join(
            [f"Hello {expert.user.get_username()},", "", sentence, "", f"The study: {study.title}", "", "approve"]
        )
        try:
            send_mail(subject_line(f"Your part in {study.title}"), body, settings.DEFAULT_FROM_EMAIL, [address])
        except OSError as error:  # the change stands; the page says it
            logger.warning("absence mail to expert %s not sent: %s", expert.pk, error)

    transaction.on_commit(send)


@transaction.atomic
def expert_absence_set(
    *, study: Study, expert: Membership, absence: Any, reason: Any, acting: User, tell: bool = True
) -> Membership:
    """Exclude ``expert`` (``absence="excluded"``) or mark them abstaining,
    with a ``reason`` the history, the expert and the close confirmation
    read; allowed in voting and assessment. Changing an absent expert's kind
    or reason is allowed too. ``tell``: publish ``expert.excluded`` so the
    expert is told (a bundle's import replays an earlier decision and does not)."""
    study = locked(study)
    require_role(study=study, user=acting, role=Membership.Role.DESIGNER, action="exclude an expert")
    require_phase(study, Action.EXCLUDE_EXPERT)
    kind = _absence(absence)
    why = text(reason, "reason", max_length=ABSENCE_REASON_MAX_CHARS)
    expert = Membership.objects.select_related("user").get(pk=expert.pk)
    if expert.study_id != study.pk or expert.role != Membership.Role.EXPERT:
        raise InvalidInput({"username": f"{expert.user.get_username()} is not an expert of this study"})
    was = expert.absence
    expert.absence, expert.absence_reason = kind, why
    expert.absent_since = expert.absent_since if was else timezone.now()
    expert.save(update_fields=["absence", "absence_reason", "absent_since"])
    if tell:  # the notifications app tells the expert (in the app, and by e-mail per their preferences)
        event_publish(
            "expert.excluded",
            study_id=study.pk,
            actor_id=acting.pk,
            membership_id=expert.pk,
            user_id=expert.user_id,
            absence=kind,
            reason=why,
        )
    return expert


@transaction.atomic
def expert_readmit(*, study: Study, expert: Membership, acting: User) -> Membership:
    """Let an excluded or abstaining expert take part again (until the study
    closes): their kept inputs count again, and any input still missing is
    asked of them before the assessment closes."""
    study = locked(study)
    require_role(study=study, user=acting, role=Membership.Role.DESIGNER, action="re-admit an expert")
    require_phase(study, Action.READMIT_EXPERT)
    expert = Membership.objects.select_related("user").get(pk=expert.pk)
    if expert.study_id != study.pk or not expert.absence:
        raise InvalidInput({"username": f"{expert.user.get_username()} takes part already"})
    expert.absence, expert.absence_reason, expert.absent_since = Membership.Absence.NONE, "", None
    expert.save(update_fields=["absence", "absence_reason", "absent_since"])
    _tell(expert, study, "The designer has re-admitted you to this study: your inputs count again.")
    return expert
