"""Revision rounds (Delphi): during the assessment the designer opens a
numbered round; each expert sees the group's anonymised answers beside
their own (``workspace.selectors.round_feedback``) and revises or confirms
each step, optionally with a reason; closing the round freezes every
expert's inputs in the round's ``snapshot``.

Who may call these is checked by the pages and the API: ``round_open`` and
``round_close`` the designer, ``round_respond`` the expert. ``round_mark_revised``
is called by the input services themselves (``priorities_set``,
``ranges_set``, ``peer_weights_set``) in their transaction, so a save during
an open round is the expert's revision of that step whoever saved it.
"""

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from ..errors import InvalidInput, PhaseConflict
from ..limits import ROUND_MESSAGE_MAX_CHARS, ROUND_REASON_MAX_CHARS
from ..models import Membership, RevisionRound, RoundResponse, RoundStep, Study
from ._checks import text
from .phases import Action, require_phase

ROUND_ALREADY_OPEN = "round_open"
NO_OPEN_ROUND = "no_open_round"


def _open_round(study: Study) -> RevisionRound | None:
    return RevisionRound.objects.filter(study=study, closed_at__isnull=True).first()


@transaction.atomic
def round_open(*, study: Study, by: User, message: str = "") -> RevisionRound:
    """Open the study's next revision round (numbered from 1) with an
    optional ``message`` to the experts. The assessment phase only, and one
    round at a time: a round already open is a ``PhaseConflict``
    (``round_open``)."""
    # Checked before the lock: a refused message writes nothing either way.
    message = text(message, "message", max_length=ROUND_MESSAGE_MAX_CHARS, required=False, multiline=True)
    study = Study.objects.select_for_update().get(pk=study.pk)
    require_phase(study, Action.OPEN_ROUND)
    current = _open_round(study)
    if current is not None:
        raise PhaseConflict(f"Round {current.number} is open: close it before opening another.", ROUND_ALREADY_OPEN)
    last = RevisionRound.objects.filter(study=study).aggregate(last=Max("number"))["last"] or 0
    return RevisionRound.objects.create(study=study, number=last + 1, message=message, opened_by=by)


@transaction.atomic
def round_close(*, study: Study, by: User) -> RevisionRound:
    """Close the open round, freezing every expert's inputs at this moment
    in its ``snapshot`` (``engine.snapshot.inputs_snapshot``). Under the
    study's row lock, which every input service takes, so the snapshot is
    one consistent state. No open round is a ``PhaseConflict``
    (``no_open_round``)."""
    from engine.snapshot import inputs_snapshot  # engine.snapshot reads workspace: imported when used

    study = Study.objects.select_for_update().get(pk=study.pk)
    require_phase(study, Action.CLOSE_ROUND)
    current = _open_round(study)
    if current is None:
        raise PhaseConflict("No revision round is open.", NO_OPEN_ROUND)
    current.snapshot = inputs_snapshot(study=study)
    current.closed_at = timezone.now()
    current.closed_by = by
    current.save(update_fields=["snapshot", "closed_at", "closed_by"])
    return current


def _step(step: object) -> str:
    if step not in RoundStep.values:
        raise InvalidInput({"step": f"must be one of {', '.join(RoundStep.values)}, got {step!r}"})
    return str(step)


@transaction.atomic
def round_respond(*, expert: Membership, step: str, reason: str = "") -> RoundResponse:
    """The expert's answer to the open round for ``step``: ``confirmed``
    (they keep their answer) unless they revised the step in this round,
    which stays ``revised``; ``reason`` (optional, one short paragraph)
    replaces any earlier one and is shown without its author to the group
    in the next round. No open round is a ``PhaseConflict`` (``no_open_round``)."""
    step = _step(step)
    reason = text(reason, "reason", max_length=ROUND_REASON_MAX_CHARS, required=False, multiline=True)
    study = Study.objects.select_for_update().get(pk=expert.study_id)
    current = _open_round(study)
    if current is None:
        raise PhaseConflict("No revision round is open: there is nothing to respond to.", NO_OPEN_ROUND)
    response, created = RoundResponse.objects.get_or_create(
        round=current,
        expert=expert,
        step=step,
        defaults={"action": RoundResponse.Action.CONFIRMED, "reason": reason},
    )
    if not created:
        response.reason = reason
        response.responded_at = timezone.now()
        response.save(update_fields=["reason", "responded_at"])
    return response


def round_mark_revised(*, experts: list[Membership], step: str) -> None:
    """Record that ``experts`` revised ``step`` in the study's open round, if
    one is open (one query when none is). Called inside the input services'
    transaction, under the study's row lock; keeps a reason already given."""
    if not experts:
        return
    current = _open_round(experts[0].study)
    if current is None:
        return
    now = timezone.now()
    existing = set(
        RoundResponse.objects.filter(round=current, step=step, expert__in=experts).values_list("expert_id", flat=True)
    )
    RoundResponse.objects.filter(round=current, step=step, expert_id__in=existing).update(
        action=RoundResponse.Action.REVISED, responded_at=now
    )
    RoundResponse.objects.bulk_create(
        RoundResponse(round=current, expert=e, step=step, action=RoundResponse.Action.REVISED, responded_at=now)
        for e in experts
        if e.pk not in existing
    )
