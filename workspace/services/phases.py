"""Phase transitions (METHOD.md sections 2-5): draft → voting → assessment
→ closed, and back from closed to assessment."""

from collections.abc import Callable

from django.db import transaction
from django.db.models import Count

from ..errors import InvalidInput, PhaseConflict
from ..models import Metric, Phase, QualityAttribute, Study
from ..selectors import expert_list, missing_input_list, unconfirmed_votes, vote_selection_get
from ._checks import locked, require_phase


@transaction.atomic
def study_open_voting(*, study: Study) -> Study:
    study = locked(study)
    require_phase(study, (Phase.DRAFT,), "Opening the vote")
    problems = []
    if not expert_list(study=study).exists():
        problems.append("invite at least one expert")
    attributes = QualityAttribute.objects.filter(study=study).annotate(metric_count=Count("metrics"))
    if not attributes:
        problems.append("add at least one quality attribute")
    bare = [a.name for a in attributes if a.metric_count == 0]
    if bare:
        problems.append(f"give every attribute at least one metric (none yet: {', '.join(bare)})")
    if problems:
        raise PhaseConflict("Voting cannot open yet: " + "; ".join(problems) + ".")
    return _move(study, Phase.VOTING)


@transaction.atomic
def study_close_voting(*, study: Study) -> Study:
    """Fix the selection and move to assessment; refused while a selected
    attribute would have no selected metric."""
    study = locked(study)
    require_phase(study, (Phase.VOTING,), "Closing the vote")
    unconfirmed = unconfirmed_votes(study=study)
    if unconfirmed:
        raise PhaseConflict(f"Voting cannot close: {'; '.join(unconfirmed)} (their votes count once confirmed).")
    attribute_ids, metric_ids = vote_selection_get(study=study)
    if not attribute_ids:
        raise PhaseConflict(
            "Voting cannot close: no attribute is selected "
            f"(no main attribute, and none has {study.attribute_threshold} votes)."
        )
    metric_attributes = set(Metric.objects.filter(pk__in=metric_ids).values_list("attribute_id", flat=True))
    orphans = QualityAttribute.objects.filter(pk__in=attribute_ids - metric_attributes).order_by("position", "id")
    if orphans:
        names = ", ".join(repr(a.name) for a in orphans)
        raise PhaseConflict(
            f"Voting cannot close: the selected attribute(s) {names} would have no selected metric "
            f"(none reaches the metric threshold of {study.metric_threshold} votes). "
            "Lower the metric threshold or ask the experts to vote on these metrics."
        )
    QualityAttribute.objects.filter(study=study).update(is_selected=False)
    QualityAttribute.objects.filter(pk__in=attribute_ids).update(is_selected=True)
    Metric.objects.filter(study=study).update(is_selected=False)
    Metric.objects.filter(pk__in=metric_ids).update(is_selected=True)
    return _move(study, Phase.ASSESSMENT)


@transaction.atomic
def study_close_assessment(*, study: Study) -> Study:
    study = locked(study)
    require_phase(study, (Phase.ASSESSMENT,), "Closing the assessment")
    gaps = missing_input_list(study=study)
    if gaps:
        detail = "; ".join(f"{name}: {', '.join(items)}" for name, items in gaps.items())
        raise PhaseConflict(f"Assessment cannot close, inputs are missing: {detail}.")
    return _move(study, Phase.CLOSED)


@transaction.atomic
def study_reopen_assessment(*, study: Study) -> Study:
    study = locked(study)
    require_phase(study, (Phase.CLOSED,), "Reopening the assessment")
    return _move(study, Phase.ASSESSMENT)


def _move(study: Study, phase: str) -> Study:
    study.phase = phase
    study.save(update_fields=["phase", "updated_at"])
    return study


TRANSITIONS: dict[tuple[str, str], Callable[..., Study]] = {
    (Phase.DRAFT, Phase.VOTING): study_open_voting,
    (Phase.VOTING, Phase.ASSESSMENT): study_close_voting,
    (Phase.ASSESSMENT, Phase.CLOSED): study_close_assessment,
    (Phase.CLOSED, Phase.ASSESSMENT): study_reopen_assessment,
}


def study_transition(*, study: Study, to: str) -> Study:
    """Move the study to phase ``to`` by the one transition that leads there."""
    if to not in Phase.values:
        raise InvalidInput({"to": f"must be one of {', '.join(Phase.values)}, got {to!r}"})
    transition = TRANSITIONS.get((study.phase, to))
    if transition is None:
        raise PhaseConflict(f"A study in the {study.phase} phase cannot move to {to}.")
    return transition(study=study)
