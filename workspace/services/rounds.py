"""Revision rounds (Delphi): during the assessment the designer opens a
numbered round, which keeps the group's anonymised feedback computed from
the inputs as they stand (``feedback``, METHOD.md 9 rule 4); each expert
reads it beside their own answers (``workspace.selectors.round_feedback``)
and revises or confirms each step, optionally with a reason; closing the
round freezes every expert's inputs in the round's ``snapshot``.

Who may call these is checked by the pages and the API: ``round_open`` and
``round_close`` the designer, ``round_respond`` the expert. ``round_mark_revised``
is called by the input services themselves (``priorities_set``,
``ranges_set``, ``peer_weights_set``) in their transaction, so a save during
an open round is the expert's revision of that step whoever saved it.
"""

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from .. import history
from ..errors import InvalidInput, PhaseConflict
from ..events import event_publish
from ..limits import ROUND_MESSAGE_MAX_CHARS, ROUND_REASON_MAX_CHARS, ROUNDS_MAX
from ..models import Membership, RevisionRound, RoundResponse, RoundStep, Study
from ..selectors import round_feedback_frozen
from ..selectors.snapshot import INPUT_KEYS, inputs_snapshot
from ._checks import expect, iso_moment, keys, moment, text
from .panel import require_taking_part
from .phases import Action, require_phase
from .roles import require_role

ROUND_ALREADY_OPEN = "round_open"
NO_OPEN_ROUND = "no_open_round"


def _open_round(study: Study) -> RevisionRound | None:
    return RevisionRound.objects.filter(study=study).open().first()


@transaction.atomic
def round_open(*, study: Study, by: User, message: str = "") -> RevisionRound:
    """Open the study's next revision round (numbered from 1) with an
    optional ``message`` to the experts, keeping the group feedback of the
    inputs as they stand now (``selectors.round_feedback_frozen``, under
    the study's row lock, which every input service takes): what every
    expert reads for the whole round. The assessment phase only, and one
    round at a time: a round already open is a ``PhaseConflict``
    (``round_open``)."""
    require_role(study=study, user=by, role=Membership.Role.DESIGNER, action="open a revision round")
    # Checked before the lock: a refused message writes nothing either way.
    message = text(message, "message", max_length=ROUND_MESSAGE_MAX_CHARS, required=False, multiline=True)
    study = Study.objects.select_for_update().get(pk=study.pk)
    require_phase(study, Action.OPEN_ROUND)
    current = _open_round(study)
    if current is not None:
        raise PhaseConflict(f"Round {current.number} is open: close it before opening another.", ROUND_ALREADY_OPEN)
    last = RevisionRound.objects.filter(study=study).aggregate(last=Max("number"))["last"] or 0
    opened = RevisionRound.objects.create(
        study=study, number=last + 1, message=message, opened_by=by, feedback=round_feedback_frozen(study=study)
    )
    event_publish("round.opened", study_id=study.pk, actor_id=by.pk, round_id=opened.pk, number=opened.number)
    return opened


@transaction.atomic
def round_close(*, study: Study, by: User) -> RevisionRound:
    """Close the open round, freezing every expert's inputs at this moment
    in its ``snapshot`` (``workspace.selectors.snapshot.inputs_snapshot``). Under the
    study's row lock, which every input service takes, so the snapshot is
    one consistent state. No open round is a ``PhaseConflict``
    (``no_open_round``)."""

    require_role(study=study, user=by, role=Membership.Role.DESIGNER, action="close a revision round")
    study = Study.objects.select_for_update().get(pk=study.pk)
    require_phase(study, Action.CLOSE_ROUND)
    current = _open_round(study)
    if current is None:
        raise PhaseConflict("No revision round is open.", NO_OPEN_ROUND)
    current.snapshot = inputs_snapshot(study=study)
    current.closed_at = timezone.now()
    current.closed_by = by
    current.save(update_fields=["snapshot", "closed_at", "closed_by"])
    event_publish("round.closed", study_id=study.pk, actor_id=by.pk, round_id=current.pk, number=current.number)
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
    require_taking_part(expert)
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
    history.update(
        RoundResponse.objects.filter(round=current, step=step, expert_id__in=existing),
        action=RoundResponse.Action.REVISED,
        responded_at=now,
    )
    history.bulk_create(
        RoundResponse,
        (
            RoundResponse(round=current, expert=e, step=step, action=RoundResponse.Action.REVISED, responded_at=now)
            for e in experts
            if e.pk not in existing
        ),
    )


# --- bundles (workspace.bundles): a study's rounds written and read back -----------------


@transaction.atomic
def rounds_import(
    *, study: Study, entries: Any, experts: dict[str, Membership], last_may_be_open: bool
) -> list[RevisionRound]:
    """The ``rounds`` of a bundle (FORMATS.md) for a study just imported in
    the assessment or closed phase: numbered 1, 2, ... in order, every round
    closed with its ``inputs`` (the snapshot at its close, with every key of
    ``workspace.selectors.snapshot.inputs_snapshot``) but the last when
    ``last_may_be_open`` (a study in assessment); ``responses`` keyed by the
    bundle's experts. Checked whole before anything is written; a bad entry
    is refused with its path (``rounds[1].responses.bob.ranges.action``)."""

    expect(entries, list, "rounds", "a list of rounds")
    if len(entries) > ROUNDS_MAX:
        raise InvalidInput({"rounds": f"too many rounds: {len(entries)} given, the limit is {ROUNDS_MAX}"})
    rounds: list[RevisionRound] = []
    responses: list[RoundResponse] = []
    for position, entry in enumerate(entries):
        last = position == len(entries) - 1
        round = _round_read(study, entry, position, may_be_open=last and last_may_be_open, input_keys=INPUT_KEYS)
        rounds.append(round)
        responses.extend(_round_responses_read(round, entry, f"rounds[{position}]", experts))
    history.bulk_create(RevisionRound, rounds)
    for response in responses:
        response.round_id = response.round.pk
    history.bulk_create(RoundResponse, responses)
    return rounds


def _round_read(
    study: Study, entry: Any, position: int, *, may_be_open: bool, input_keys: Sequence[str]
) -> RevisionRound:
    """The bundle's round at ``position`` as a round (not yet saved):
    numbered ``position + 1``, closed with its inputs unless it
    ``may_be_open``; refused with its path otherwise."""
    path = f"rounds[{position}]"
    keys(entry, path, required=("number", "opened_at"), optional=("message", "closed_at", "inputs", "responses"))
    if entry["number"] != position + 1 or isinstance(entry["number"], bool):
        raise InvalidInput({f"{path}.number": f"must be {position + 1} (rounds are numbered from 1, in order)"})
    closed = entry.get("closed_at") is not None
    if not closed and not may_be_open:
        raise InvalidInput(
            {f"{path}.closed_at": "is required: only the last round of a study in assessment may be open"}
        )
    inputs = _round_inputs_read(entry, path, closed=closed, input_keys=input_keys)
    return RevisionRound(
        study=study,
        number=position + 1,
        message=text(
            entry.get("message", ""),
            f"{path}.message",
            max_length=ROUND_MESSAGE_MAX_CHARS,
            required=False,
            multiline=True,
        ),
        opened_at=moment(entry["opened_at"], f"{path}.opened_at"),
        closed_at=moment(entry["closed_at"], f"{path}.closed_at") if closed else None,
        snapshot=inputs,
    )


def _round_inputs_read(entry: Any, path: str, *, closed: bool, input_keys: Sequence[str]) -> Any:
    """A round's ``inputs``: for a closed round every input key, its weights
    lists; an open round has none (refused if given)."""
    inputs = entry.get("inputs")
    if closed:
        keys(inputs, f"{path}.inputs", required=input_keys)
        for key in ("attribute_weights", "metric_weights"):
            expect(inputs[key], list, f"{path}.inputs.{key}", "a list of rows, one per expert")
    elif inputs is not None:
        raise InvalidInput({f"{path}.inputs": "an open round has no inputs yet"})
    return inputs


def _round_responses_read(
    round: RevisionRound, entry: Any, path: str, experts: dict[str, Membership]
) -> list[RoundResponse]:
    """The round's ``responses`` (not yet saved): keyed by the bundle's
    experts, then by step, each an action and an optional reason; refused
    with its path otherwise."""
    responses = []
    given = expect(entry.get("responses", {}), dict, f"{path}.responses", "an object keyed by expert username")
    for username, steps in given.items():
        if username not in experts:
            raise InvalidInput({f"{path}.responses.{username}": "is not one of the bundle's experts"})
        expect(steps, dict, f"{path}.responses.{username}", "an object keyed by step")
        for step, answer in steps.items():
            responses.append(
                _response_read(round, experts[username], step, answer, f"{path}.responses.{username}.{step}")
            )
    return responses


def _response_read(round: RevisionRound, expert: Membership, step: str, answer: Any, where: str) -> RoundResponse:
    """One expert's answer to one step of the round: a known step, an action
    (revised or confirmed) and an optional reason."""
    if step not in RoundStep.values:
        raise InvalidInput({where: f"is not a step (the steps are {', '.join(RoundStep.values)})"})
    keys(answer, where, required=("action",), optional=("reason",))
    if answer["action"] not in RoundResponse.Action.values:
        raise InvalidInput({f"{where}.action": "must be revised or confirmed"})
    reason = text(
        answer.get("reason", ""),
        f"{where}.reason",
        max_length=ROUND_REASON_MAX_CHARS,
        required=False,
        multiline=True,
    )
    return RoundResponse(
        round=round,
        expert=expert,
        step=step,
        action=answer["action"],
        reason=reason,
        responded_at=round.closed_at or round.opened_at,
    )


def rounds_export(*, study: Study) -> list[dict[str, Any]]:
    """The study's rounds as a bundle writes them (``rounds_import`` reads
    them back): one query, and one more for their responses when there are
    rounds."""
    rounds = list(
        RevisionRound.objects.filter(study=study)
        .order_by("number")
        .values_list("pk", "number", "message", "opened_at", "closed_at", "snapshot")
    )
    if not rounds:
        return []
    answers: dict[int, dict[str, dict[str, dict[str, str]]]] = {}
    responses = (
        RoundResponse.objects.filter(round__study=study)
        .order_by("round_id", "expert_id", "step")
        .values_list("round_id", "expert__user__username", "step", "action", "reason")
    )
    for round_id, username, step, action, reason in responses:
        answer = {"action": action, **({"reason": reason} if reason else {})}
        answers.setdefault(round_id, {}).setdefault(username, {})[step] = answer
    out = []
    for pk, number, message, opened_at, closed_at, snapshot in rounds:
        entry: dict[str, Any] = {"number": number, "message": message, "opened_at": iso_moment(opened_at)}
        if closed_at is not None:
            entry.update(closed_at=iso_moment(closed_at), inputs=snapshot)
        entry["responses"] = answers.get(pk, {})
        out.append(entry)
    return out
