"""Study bundles: the ``approve-study/1`` document (FORMATS.md).

Import checks the document's shape, then replays it through the same
services a person would use, phase by phase, inside one transaction: any
refusal rolls everything back and is reported with the bundle path of the
offending field (``peer_weights.clinician: row sums to 0.9, must be 1``).
Export writes back exactly what was entered (typed direct weights, the
judgments as given, only the ranges an expert set), so export → import →
export is the identity. A study's copy (``study_copy``) is its export, as a
draft without anyone's inputs or experts, imported again.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from django.contrib.auth.models import User
from django.db import transaction

from engine.rules import AHP_WEIGHTING_DEFAULT

from . import history, invitations, limits, services
from .errors import InvalidInput, PhaseConflict
from .events import events_quiet
from .extensions import BUNDLE_SECTIONS
from .limits import ATTRIBUTE_THRESHOLD_DEFAULT, METRIC_THRESHOLD_DEFAULT, TITLE_MAX_LENGTH
from .models import Measurement, Membership, Metric, Phase, QualityAttribute, Study
from .selectors import expert_inputs_list, expert_list, to_confirm
from .selectors import number_out as _number_out
from .services import imports
from .services._checks import expect as _expect
from .services._checks import keys as _keys
from .services.roles import require_role

FORMAT = "approve-study/1"
TOP_LEVEL = {
    "format",
    "title",
    "description",
    "phase",
    "attribute_threshold",
    "metric_threshold",
    "quorum",
    "ahp_weighting",
    "designer",
    "experts",
    "absent",
    "attributes",
    "metrics",
    "candidates",
    "votes",
    "priorities",
    "ranges",
    "ranges_to_confirm",
    "peer_weights",
    "rounds",
    "prediction_sets",
    "elicited_metrics",
}
PHASE_ORDER: list[str] = list(Phase.values)  # draft, voting, assessment, closed


def _per_expert(
    bundle: Mapping[str, Any], key: str, experts: Mapping[str, Membership], path: str | None = None
) -> dict[str, Any]:
    """A ``{username: section}`` map whose keys are the bundle's experts.
    ``path`` is where the map sits in the bundle (default ``key``)."""
    path = path or key
    section = bundle.get(key) or {}
    _expect(section, dict, path, "an object keyed by expert username")
    for username in section:
        if username not in experts:
            raise InvalidInput({f"{path}.{username}": "is not one of the bundle's experts"})
    return section


def _check_envelope(bundle: dict) -> tuple[str, list[str]]:
    _expect(bundle, dict, "bundle", "a JSON object")
    if bundle.get("format") != FORMAT:
        raise InvalidInput({"format": f"must be {FORMAT!r}, got {bundle.get('format')!r}"})
    unknown = sorted(set(bundle) - TOP_LEVEL)
    if unknown:
        raise InvalidInput({unknown[0]: "is not a field of an approve-study/1 bundle"})
    if "title" not in bundle:
        raise InvalidInput({"title": "is required"})
    phase = bundle.get("phase", Phase.DRAFT)
    if phase not in Phase.values:
        raise InvalidInput({"phase": f"must be one of {', '.join(Phase.values)}, got {phase!r}"})
    experts = _expect(bundle.get("experts", []), list, "experts", "a list of usernames")
    seen = set()
    for position, username in enumerate(experts):
        _expect(username, str, f"experts[{position}]", "a username")
        if username in seen:
            raise InvalidInput({f"experts[{position}]": f"{username!r} is listed twice"})
        seen.add(username)
    for key in ("attributes", "metrics", "candidates"):
        _expect(bundle.get(key, []), list, key, "a list")
    return phase, experts


def _later_sections_absent(bundle: dict, phase: str) -> None:
    """A study put in an early phase cannot carry inputs of a later one."""
    needs = {
        "votes": services.opens_in(services.Action.VOTE),
        "priorities": services.opens_in(services.Action.PRIORITISE),
        "ranges": services.opens_in(services.Action.SET_RANGES),
        "peer_weights": services.opens_in(services.Action.WEIGH_PEERS),
        "absent": services.opens_in(services.Action.EXCLUDE_EXPERT),
    }
    for key, first_phase in needs.items():
        section = bundle.get(key) or {}
        has_content = (
            any(section.get(kind) for kind in ("attributes", "metrics"))
            if key == "votes" and isinstance(section, dict)
            else bool(section)
        )
        if has_content and PHASE_ORDER.index(phase) < PHASE_ORDER.index(first_phase):
            raise InvalidInput(
                {
                    key: f"a study imported in the {phase} phase has no {key.replace('_', ' ')} yet "
                    f"(they start in the {first_phase} phase)"
                }
            )
    # An elicited metric's answers are an expert's input too.
    first_phase = services.opens_in(services.Action.ELICIT)
    elicited = bundle.get("elicited_metrics")
    if PHASE_ORDER.index(phase) < PHASE_ORDER.index(first_phase) and isinstance(elicited, dict):
        for name, entry in elicited.items():
            if isinstance(entry, dict) and entry.get("answers"):
                raise InvalidInput(
                    {
                        f"elicited_metrics.{name}.answers": f"a study imported in the {phase} phase has no answers "
                        f"yet (they start in the {first_phase} phase)"
                    }
                )


def _votes_present_unless_thresholds_decide(
    bundle: dict, votes: dict, attributes: dict[str, QualityAttribute], metrics: dict[str, Metric]
) -> None:
    """FORMATS.md: ``votes`` may be left out only when thresholds of 0
    decide every complementary attribute and every metric. Otherwise a
    missing section would silently select nothing by vote."""
    complementary = any(a.kind == "complementary" for a in attributes.values())
    needed = []
    if (
        "attributes" not in votes
        and complementary
        and bundle.get("attribute_threshold", ATTRIBUTE_THRESHOLD_DEFAULT) > 0
    ):
        needed.append("attributes")
    if "metrics" not in votes and metrics and bundle.get("metric_threshold", METRIC_THRESHOLD_DEFAULT) > 0:
        needed.append("metrics")
    if needed:
        field = "votes" if len(needed) == 2 or "votes" not in bundle else f"votes.{needed[0]}"
        raise InvalidInput(
            {
                field: f"the {' and '.join(needed)} votes are required: "
                "with a vote threshold above 0 they decide the selection"
            }
        )


def _transition(service: Callable[..., Study], study: Study, phase: str) -> Study:
    try:
        return service(study=study)
    except PhaseConflict as conflict:
        raise InvalidInput({"phase": f"cannot import the study as {phase}: {conflict}"}) from None


# --- import, step by step ----------------------------------------------------------
# Each step reads one part of the bundle, checks its shape and calls the
# services; a refusal names the offending field by its path in the bundle.


def _create_study(bundle: dict, importer: User | None) -> Study:
    """The study, designed by the importer (whoever the bundle names), or on
    the command line by the bundle's ``designer``."""
    designer_name = bundle.get("designer")
    if importer is not None:
        designer = importer
    elif designer_name is None:
        raise InvalidInput({"designer": "is required when no importing user is given"})
    else:
        designer = services.user_get_or_create(username=designer_name, field="designer")
    try:
        return services.study_create(
            designer=designer,
            title=bundle["title"],
            description=bundle.get("description", ""),
            attribute_threshold=bundle.get("attribute_threshold", ATTRIBUTE_THRESHOLD_DEFAULT),
            metric_threshold=bundle.get("metric_threshold", METRIC_THRESHOLD_DEFAULT),
            ahp_weighting=bundle.get("ahp_weighting", AHP_WEIGHTING_DEFAULT),
            quorum=bundle.get("quorum", 0),
        )
    except InvalidInput as error:
        raise error.prefixed(next(iter(error.errors))) from None


def _add_attributes(study: Study, entries: list) -> dict[str, QualityAttribute]:
    """Every attribute in one INSERT (``services.imports``)."""
    for position, entry in enumerate(entries):
        _keys(entry, f"attributes[{position}]", required=("name",), optional=("kind", "description"))
    added = imports.attributes_add_many(study=study, entries=entries)
    return {attribute.name: attribute for attribute in added}


def _add_metrics(study: Study, entries: list, attributes: dict[str, QualityAttribute]) -> dict[str, Metric]:
    """Every metric in one INSERT (``services.imports``)."""
    rows = []
    for position, entry in enumerate(entries):
        field = f"metrics[{position}]"
        _keys(entry, field, required=("name", "attribute"), optional=("better", "unit", "default_range"))
        attribute = attributes.get(entry["attribute"]) if isinstance(entry["attribute"], str) else None
        if attribute is None:
            raise InvalidInput({f"{field}.attribute": f"no attribute named {entry['attribute']!r} in the bundle"})
        rows.append({**entry, "attribute": attribute})
    added = imports.metrics_add_many(study=study, entries=rows)
    return {metric.name: metric for metric in added}


def _add_candidates(study: Study, entries: list, metrics: dict[str, Metric]) -> None:
    """Every candidate in one INSERT, then every measurement in one bulk
    upsert: the queries do not grow with the candidates."""
    measurements, fields = [], []
    for position, entry in enumerate(entries):
        field = f"candidates[{position}]"
        _keys(entry, field, required=("name",), optional=("description", "measurements", "standard_errors"))
        values = _expect(entry.get("measurements", {}), dict, f"{field}.measurements", "an object {metric: value}")
        for metric_name in values:
            if metric_name not in metrics:
                raise InvalidInput({f"{field}.measurements.{metric_name}": "no metric of that name in the bundle"})
        errors = _expect(
            entry.get("standard_errors", {}), dict, f"{field}.standard_errors", "an object {metric: standard error}"
        )
        for metric_name in errors:
            if metric_name not in values:
                raise InvalidInput(
                    {f"{field}.standard_errors.{metric_name}": "a standard error needs its value in measurements"}
                )
    candidates = services.candidates_add(study=study, candidates=entries)
    for position, (entry, candidate) in enumerate(zip(entries, candidates, strict=True)):
        errors = entry.get("standard_errors", {})
        for metric_name, value in entry.get("measurements", {}).items():
            row = {"candidate": candidate.name, "metric": metric_name, "value": value}
            if metric_name in errors:
                row["standard_error"] = errors[metric_name]
            measurements.append(row)
            fields.append(f"candidates[{position}].measurements.{metric_name}")
    try:
        imports.measurements_add_new(study=study, measurements=measurements)
    except InvalidInput as error:
        # Map "measurements[i].value" (or ".standard_error") back to the
        # candidate that holds it.
        field = next(iter(error.errors))
        index = int(field.split("[", 1)[1].split("]", 1)[0])
        where = fields[index]
        if field.endswith(".standard_error"):
            where = where.replace(".measurements.", ".standard_errors.", 1)
        raise InvalidInput({where: error.errors[field]}) from None


def _cast_votes(
    study: Study,
    bundle: dict,
    phase: str,
    experts: dict[str, Membership],
    attributes: dict[str, QualityAttribute],
    metrics: dict[str, Metric],
) -> None:
    votes = bundle.get("votes") or {}
    _keys(votes, "votes", required=(), optional=("attributes", "metrics"))
    if phase != Phase.VOTING:
        _votes_present_unless_thresholds_decide(bundle, votes, attributes, metrics)
    attribute_votes = _per_expert(votes, "attributes", experts, path="votes.attributes")
    metric_votes = _per_expert(votes, "metrics", experts, path="votes.metrics")
    # In the order of the bundle's experts, as one expert at a time would vote.
    voters = [username for username in experts if username in attribute_votes or username in metric_votes]
    try:
        services.votes_set_many(
            study=study,
            attributes={experts[username]: attribute_votes.get(username, []) for username in voters},
            metrics={experts[username]: metric_votes.get(username, []) for username in voters},
        )
    except InvalidInput as error:
        # The service names "attributes.<username>"; the bundle holds them
        # at votes.attributes.<username>.
        raise error.within("votes") from None


def _give_assessment_inputs(study: Study, bundle: dict, experts: dict[str, Membership]) -> None:
    """Each expert's priorities, ranges and peer weights, a section at a
    time for every expert at once (the queries do not grow with them)."""
    priorities = _per_expert(bundle, "priorities", experts)
    services.priorities_set_many(study=study, priorities={experts[name]: p for name, p in priorities.items()})
    ranges = {experts[name]: r for name, r in _per_expert(bundle, "ranges", experts).items()}
    if bundle.get("phase") == Phase.CLOSED:
        # A closed study's inputs are final: the defaults an expert did not
        # override were their ranges, confirmed (METHOD.md 4, Decision).
        ranges = {**{expert: {} for expert in experts.values()}, **ranges}
    # Ranges given in a bundle count as confirmed (services.ranges_set_many),
    # but those its "ranges_to_confirm" names (a metric made elicited since).
    to_confirm = {experts[name]: m for name, m in _per_expert(bundle, "ranges_to_confirm", experts).items()}
    services.ranges_set_many(study=study, ranges=ranges, to_confirm=to_confirm)
    peer_weights = _per_expert(bundle, "peer_weights", experts)
    try:
        services.peer_weights_set_many(study=study, weights={experts[name]: w for name, w in peer_weights.items()})
    except InvalidInput as error:
        raise error.prefixed("peer_weights") from None


def _section_answers(bundle: dict, key: str, experts: dict[str, Membership]) -> dict[str, dict[Membership, Any]]:
    """Each entry's ``answers`` of the bundle's section ``key`` (an elicited
    metric's), ``{entry: {expert: answers}}``, keyed by the bundle's experts
    (their shape checked by the import)."""
    section = bundle.get(key) or {}
    return {
        name: {
            experts[username]: codes
            for username, codes in _per_expert(entry, "answers", experts, f"{key}.{name}.answers").items()
        }
        for name, entry in section.items()
    }


def _mark_absent(study: Study, bundle: dict, experts: dict[str, Membership]) -> None:
    """The bundle's ``absent`` experts (``{username: {"absence", "reason"}}``)
    marked through the designer's service, once voting has opened."""
    for username, entry in _per_expert(bundle, "absent", experts).items():
        path = f"absent.{username}"
        _keys(entry, path, required=("absence", "reason"))
        try:
            services.expert_absence_set(
                study=study,
                expert=experts[username],
                absence=entry["absence"],
                reason=entry["reason"],
                acting=study.designer,
                tell=False,
            )
        except InvalidInput as error:
            raise error.within(path) from None


# The sections of a bundle holding the experts' inputs, or who takes part:
# a draft has none of them.
INPUT_SECTIONS = ("votes", "priorities", "ranges", "ranges_to_confirm", "peer_weights", "rounds", "absent")


def bundle_setup_only(bundle: dict) -> dict:
    """The bundle as a draft of its setup: phase ``draft``, without anyone's
    inputs (``INPUT_SECTIONS`` and the elicited metrics' answers); the
    experts stay listed (an import invites them)."""
    setup = {key: value for key, value in bundle.items() if key not in INPUT_SECTIONS}
    setup["phase"] = Phase.DRAFT
    elicited = bundle.get("elicited_metrics")
    if isinstance(elicited, dict):
        setup["elicited_metrics"] = {
            name: {key: value for key, value in entry.items() if key != "answers"} if isinstance(entry, dict) else entry
            for name, entry in elicited.items()
        }
    return setup


@dataclass(frozen=True)
class Imported:
    """What an import made: the study; the other experts whose inputs it left
    out (an import by someone not staff, ``invitations.import_bundle_consented``:
    the study is then a draft); the designer the bundle named when it was not
    the importer, who designs the study instead."""

    study: Study
    inputs_left_out: list[str] = field(default_factory=list)
    designer_named: str | None = None

    @property
    def notes(self) -> list[str]:
        """What the importer is told the import did otherwise than the bundle says."""
        notes = []
        if self.inputs_left_out:
            count = len(self.inputs_left_out)
            notes.append(
                f"The inputs of {count} expert{'s' if count != 1 else ''} ({', '.join(self.inputs_left_out)}) "
                f"were left out: {invitations.INPUTS_LEFT_OUT}. The study was imported as a draft, "
                "without anyone's inputs; the experts are invited and give their own."
            )
        if self.designer_named is not None:
            notes.append(f"The bundle named {self.designer_named} as its designer; you design the imported study.")
        return notes


def study_import_bundle(
    *, bundle: dict, importer: User | None = None, max_rows: int | None = limits.PREDICTIONS_MAX_ROWS
) -> Study:
    """``study_import``'s study."""
    return study_import(bundle=bundle, importer=importer, max_rows=max_rows).study


def study_import(
    *, bundle: dict, importer: User | None = None, max_rows: int | None = limits.PREDICTIONS_MAX_ROWS
) -> Imported:
    """See ``_import_bundle``; every row it writes is recorded as coming from
    an ``import`` (the importer's, or the command's user: none)."""
    with history.source("import", user=importer):
        return _import_bundle(bundle=bundle, importer=importer, max_rows=max_rows)


@transaction.atomic
def _import_bundle(*, bundle: dict, importer: User | None, max_rows: int | None) -> Imported:
    """Create a study from an ``approve-study/1`` bundle; all or nothing.

    The study is built as a person would, phase by phase: setup in the
    draft (the prediction sets and elicited metrics with it), then the
    votes, then the assessment inputs (the elicited metrics' answers with
    them), stopping at the bundle's phase. ``importer`` is the user
    importing (the page, the API), who designs the study; None is the
    command line. What an import may write in other experts' names:
    ``workspace.invitations``; when it leaves some out, the study is a
    draft (``bundle_setup_only``: the phase came from inputs it no longer
    has). ``max_rows``: the most rows of a prediction set, as an upload's
    (None: any number, the operator's ``import_study``)."""
    phase, expert_names = _check_envelope(bundle)
    _later_sections_absent(bundle, phase)
    if bundle.get("rounds") and phase not in (Phase.ASSESSMENT, Phase.CLOSED):
        raise InvalidInput({"rounds": f"a study imported in the {phase} phase has no revision rounds yet"})
    bundle, left_out = invitations.import_bundle_consented(bundle=bundle, experts=expert_names, importer=importer)
    if left_out:
        bundle, phase = bundle_setup_only(bundle), Phase.DRAFT
    named = bundle.get("designer")
    imported = Imported(
        study=_create_study(bundle, importer),
        inputs_left_out=left_out,
        designer_named=named if importer is not None and named not in (None, importer.get_username()) else None,
    )
    study = imported.study
    experts = invitations.import_experts(study=study, usernames=expert_names, importer=importer)
    attributes = _add_attributes(study, bundle.get("attributes", []))
    metrics = _add_metrics(study, bundle.get("metrics", []), attributes)
    _add_candidates(study, bundle.get("candidates", []), metrics)
    # The sections the apps above add (evaluation: prediction sets, elicited metrics).
    states = [
        section.setup_import(study=study, bundle=bundle, metrics=metrics, max_rows=max_rows)
        for section in BUNDLE_SECTIONS
    ]
    if phase != Phase.DRAFT:
        # A replay, told to nobody: the experts are invited (above), not told of phases long past.
        with events_quiet():
            _import_phases(study, bundle, phase, experts, attributes, metrics, states)
    return imported


def _import_phases(
    study: Study,
    bundle: dict,
    phase: str,
    experts: dict[str, Membership],
    attributes: dict[str, QualityAttribute],
    metrics: dict[str, Metric],
    states: list[object],
) -> None:
    """From the draft to the bundle's ``phase``: the votes, then the
    assessment's inputs and rounds, closing last."""
    _transition(services.study_open_voting, study, phase)
    # Who does not take part, before any vote is counted or input owed.
    _mark_absent(study, bundle, experts)
    _cast_votes(study, bundle, phase, experts, attributes, metrics)
    if phase != Phase.VOTING:
        _transition(services.study_close_voting, study, phase)
        _give_assessment_inputs(study, bundle, experts)
        for section, state in zip(BUNDLE_SECTIONS, states, strict=True):
            section.answers_import(answers=_section_answers(bundle, section.answers_key, experts), state=state)
        if bundle.get("rounds"):
            services.rounds.rounds_import(
                study=study, entries=bundle["rounds"], experts=experts, last_may_be_open=phase == Phase.ASSESSMENT
            )
        if phase == Phase.CLOSED:
            _transition(services.study_close_assessment, study, phase)
    # The transitions saved locked copies: reread, or the caller gets "draft".
    study.refresh_from_db()


# --- a study's copy ----------------------------------------------------------------


def copy_title(title: str) -> str:
    """A copy's title unless another is given: "Copy of <title>", cut to
    the longest a title may be."""
    default = f"Copy of {title}"
    return default if len(default) <= TITLE_MAX_LENGTH else default[: TITLE_MAX_LENGTH - 1] + "…"


@transaction.atomic
def study_copy(
    *, study: Study, designer: User, title: str | None = None, measurements: bool = True, predictions: bool = False
) -> Study:
    """A new draft study designed by ``designer``, the study's designer
    (anyone else: ``RoleRequired``), with its setup: the title (``title``,
    else ``copy_title``), description, vote thresholds, AHP weighting,
    quorum, attributes, metrics and candidates; the measurements (with
    their standard errors) when ``measurements``; every prediction set, and
    the elicited metrics' designs with them, when ``predictions`` (the
    sections of ``BUNDLE_SECTIONS``; without them an elicited metric is an
    ordinary one). Never anyone's inputs, nor the experts: the designer
    invites them again. The study's export, as ``bundle_setup_only`` and
    without experts, imported by the designer."""
    require_role(study=study, user=designer, role=Membership.Role.DESIGNER, action="copy the study")
    title = copy_title(study.title) if title is None else services.text(title, "title", max_length=TITLE_MAX_LENGTH)
    bundle = bundle_setup_only(study_export_bundle(study=study, every_prediction_set=predictions))
    del bundle["designer"]  # the importer's
    bundle.update(title=title, experts=[])
    if not measurements:
        bundle["candidates"] = [
            {key: value for key, value in entry.items() if key not in ("measurements", "standard_errors")}
            for entry in bundle["candidates"]
        ]
    if not predictions:
        for key in ("prediction_sets", "elicited_metrics"):
            bundle.pop(key, None)
    # The sets were uploaded here already: the upload's limit is not asked again.
    return study_import_bundle(bundle=bundle, importer=designer, max_rows=None)


def _measurements_out(study: Study, metrics: Sequence[Mapping[str, Any]]) -> tuple[dict[int, dict], dict[int, dict]]:
    """``{candidate id: {metric name: value}}`` in metric position order,
    and the same of the standard errors that are set, from one query of
    plain values (no model instances)."""
    metric_of = {m["pk"]: m for m in metrics}
    rows = sorted(
        Measurement.objects.filter(study=study).values_list("candidate_id", "metric_id", "value", "standard_error"),
        key=lambda row: (row[0], metric_of[row[1]]["position"], row[1]),
    )
    measurements: dict[int, dict[str, Any]] = {}
    errors: dict[int, dict[str, Any]] = {}
    for candidate_id, metric_id, value, error in rows:
        name = metric_of[metric_id]["name"]
        measurements.setdefault(candidate_id, {})[name] = _number_out(value)
        if error is not None:
            errors.setdefault(candidate_id, {})[name] = _number_out(error)
    return measurements, errors


def study_export_bundle(*, study: Study, every_prediction_set: bool = False) -> dict:
    """The study as an ``approve-study/1`` document, read as plain values
    (issue 19: no model instance per attribute, metric, candidate or input
    row; only the experts' memberships are instances). With
    ``every_prediction_set`` (a copy's), every prediction set of the study
    is written, not only those its elicited metrics need."""
    experts = list(expert_list(study=study))
    attributes = QualityAttribute.objects.filter(study=study).order_by("position", "id")
    metrics = list(
        Metric.objects.filter(study=study)
        .order_by("attribute__position", "attribute__id", "position", "id")
        .values(
            "pk",
            "name",
            "attribute__name",
            "better",
            "unit",
            "default_least_acceptable",
            "default_desired",
            "position",
            # Whether it is elicited, in the same query (a study without any reads nothing more).
            "elicitation",
        )
    )
    candidates = study.candidates.order_by("position", "id").values_list("pk", "name", "description")
    measurements, standard_errors = _measurements_out(study, metrics)
    sections = expert_inputs_list(study=study, experts=experts)
    # Revision rounds exist from the assessment on: no query before.
    rounds = (
        services.rounds.rounds_export(study=study) if services.has_opened(study, services.Action.OPEN_ROUND) else []
    )

    # "ahp_weighting" is optional, the paper's method by default: written
    # only for another weighting, so bundles of studies using the paper's
    # method stay as they were (and import anywhere the field is unknown).
    weighting = {} if study.ahp_weighting == AHP_WEIGHTING_DEFAULT else {"ahp_weighting": study.ahp_weighting}
    return {
        "format": FORMAT,
        "title": study.title,
        "description": study.description,
        "phase": study.phase,
        "attribute_threshold": study.attribute_threshold,
        "metric_threshold": study.metric_threshold,
        **weighting,
        # "quorum" and "absent" (optional) only when set: bundles of studies
        # without them stay as they were.
        **({"quorum": study.quorum} if study.quorum else {}),
        "designer": study.designer.get_username(),
        "experts": list(sections),
        **_absent_out(experts),
        "attributes": list(attributes.values("name", "kind", "description")),
        "metrics": _metrics_out(metrics),
        # "standard_errors" (optional) only for a candidate with any: bundles
        # of studies without them stay as they were.
        "candidates": _candidates_out(candidates, measurements, standard_errors),
        # Before voting opens nobody has voted: the votes are empty, not "no" votes.
        "votes": _votes_out(study, sections),
        "priorities": {name: s["priorities"] for name, s in sections.items() if s["priorities"] is not None},
        "ranges": {name: s["ranges"] for name, s in sections.items() if s["ranges"]},
        # "ranges_to_confirm" (optional) only while a range is to confirm:
        # bundles of studies without one stay as they were.
        **_to_confirm_out(study),
        "peer_weights": {name: s["peer_weights"] for name, s in sections.items() if s["peer_weights"]},
        # "rounds" (optional) only for a study with revision rounds: bundles
        # of studies without them stay as they were.
        **({"rounds": rounds} if rounds else {}),
        # "prediction_sets" and "elicited_metrics" (optional) only for a study
        # with elicited metrics: the same.
        **_elicited_out(study, metrics, sections, every_prediction_set),
    }


def _to_confirm_out(study: Study) -> dict[str, dict[str, list[str]]]:
    """``{"ranges_to_confirm": {username: [metric, ...]}}``: the ranges their
    experts must still confirm (``selectors.to_confirm``), or nothing."""
    found: dict[str, list[str]] = {}
    for username, metric in (
        to_confirm()
        .filter(expert__study=study)
        .order_by("expert_id", "metric__attribute__position", "metric__attribute_id", "metric__position", "metric_id")
        .values_list("expert__user__username", "metric__name")
    ):
        found.setdefault(username, []).append(metric)
    return {"ranges_to_confirm": found} if found else {}


def _metrics_out(metrics: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The bundle's metrics: name, attribute, direction, unit, and the
    default range (None when it has none)."""
    return [
        {
            "name": m["name"],
            "attribute": m["attribute__name"],
            "better": m["better"],
            "unit": m["unit"],
            "default_range": None
            if m["default_least_acceptable"] is None
            else [_number_out(m["default_least_acceptable"]), _number_out(cast(float, m["default_desired"]))],
        }
        for m in metrics
    ]


def _candidates_out(
    candidates: Iterable[tuple[int, str, str]],
    measurements: Mapping[int, dict[str, Any]],
    standard_errors: Mapping[int, dict[str, Any]],
) -> list[dict[str, Any]]:
    """The bundle's candidates with their measurements, and their standard
    errors only for a candidate with any."""
    return [
        {
            "name": name,
            "description": description,
            "measurements": measurements.get(pk, {}),
            **({"standard_errors": standard_errors[pk]} if pk in standard_errors else {}),
        }
        for pk, name, description in candidates
    ]


def _votes_out(study: Study, sections: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each expert's attribute and metric votes; empty while the study is a
    draft (nobody has voted)."""
    return {
        kind: {} if study.phase == Phase.DRAFT else {name: s["votes"][kind] for name, s in sections.items()}
        for kind in ("attributes", "metrics")
    }


def _elicited_out(
    study: Study, metrics: Sequence[Mapping[str, Any]], sections: Mapping[str, dict[str, Any]], every_set: bool
) -> dict[str, Any]:
    """The elicited metrics' sections of the bundle; nothing (and no query)
    for a study without elicited metrics, unless ``every_set``."""
    elicited = [m["name"] for m in metrics if m["elicitation"]]
    if not elicited and not every_set:
        return {}
    out: dict[str, Any] = {}
    for section in BUNDLE_SECTIONS:
        out.update(section.export(study=study, metrics=elicited, experts=list(sections), every_set=every_set))
    return out


def _absent_out(experts: Sequence[Membership]) -> dict[str, Any]:
    absent = {e.user.get_username(): {"absence": e.absence, "reason": e.absence_reason} for e in experts if e.absence}
    return {"absent": absent} if absent else {}


def study_export_json(*, study: Study) -> bytes:
    """``study_export_bundle`` as the API's export sends it: the same bytes
    (DRF's JSON renderer), for the study home's download."""
    # Imported here: the renderer reads DRF's settings, which the API loads.
    from rest_framework.renderers import JSONRenderer

    return JSONRenderer().render(study_export_bundle(study=study))
