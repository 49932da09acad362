"""Study bundles (FORMATS.md, ``approve-study/1``) and the commands around them.

Round trips: import → export gives back an equivalent bundle, and export →
import → export is the identity, for the case study, for studies built
through the services and for generated bundles. Refusals: every bad bundle
is refused with the bundle path of the offending field, and nothing at all
is written (not even the accounts of the bundle's experts).
"""

import copy
import io
import json
import math
import re
import time

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.rules import SCALE_VALUES
from tests.fixtures import CASE_STUDY_PATH, PASSWORD, db_snapshot
from workspace import services
from workspace.bundles import study_export_bundle, study_import_bundle
from workspace.errors import InvalidInput
from workspace.models import (
    AcceptableRange,
    AttributePrioritisation,
    Measurement,
    Membership,
    Metric,
    MetricPrioritisation,
    PeerWeight,
    QualityAttribute,
    Study,
)

pytestmark = pytest.mark.django_db

User = get_user_model()
NAN, INF = float("nan"), float("inf")
TOLERANCE = 1e-12


# --- comparing bundles -----------------------------------------------------------------


def canonical(bundle):
    """The bundle with every default filled in and every order that carries
    no meaning removed: missing fields take their documented defaults,
    missing per-expert vote lists are empty, vote lists are sets, metrics are
    grouped by attribute (the only order a study keeps), experts without
    ranges or peer weights are left out. Dict key order never matters to ``==``."""
    experts = list(bundle.get("experts", []))
    attribute_order = {a["name"]: position for position, a in enumerate(bundle.get("attributes", []))}
    metrics = sorted(
        enumerate(bundle.get("metrics", [])), key=lambda pair: (attribute_order[pair[1]["attribute"]], pair[0])
    )
    votes = bundle.get("votes") or {}

    def as_list(value):
        return list(value) if isinstance(value, (list, tuple)) else value

    return {
        "format": bundle["format"],
        "title": bundle["title"],
        "description": bundle.get("description", ""),
        "phase": bundle.get("phase", "draft"),
        "attribute_threshold": bundle.get("attribute_threshold", 1),
        "metric_threshold": bundle.get("metric_threshold", 0),
        "designer": bundle.get("designer"),
        "experts": experts,
        "attributes": [
            {"name": a["name"], "kind": a.get("kind", "main"), "description": a.get("description", "")}
            for a in bundle.get("attributes", [])
        ],
        "metrics": [
            {
                "name": m["name"],
                "attribute": m["attribute"],
                "better": m.get("better", "higher"),
                "unit": m.get("unit", ""),
                "default_range": as_list(m.get("default_range")),
            }
            for _, m in metrics
        ],
        "candidates": [
            {
                "name": c["name"],
                "description": c.get("description", ""),
                "measurements": dict(c.get("measurements", {})),
            }
            for c in bundle.get("candidates", [])
        ],
        "votes": {
            kind: {name: sorted((votes.get(kind) or {}).get(name, [])) for name in experts}
            for kind in ("attributes", "metrics")
        },
        "priorities": copy.deepcopy(bundle.get("priorities") or {}),
        "ranges": {
            name: {metric: as_list(pair) for metric, pair in ranges.items()}
            for name, ranges in (bundle.get("ranges") or {}).items()
            if ranges
        },
        "peer_weights": {name: dict(row) for name, row in (bundle.get("peer_weights") or {}).items() if row},
    }


def assert_close(actual, expected, path="bundle"):
    """Structural equality with numbers compared to within 1e-12."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        assert actual is expected, f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        assert math.isclose(actual, expected, rel_tol=TOLERANCE, abs_tol=TOLERANCE), (
            f"{path}: {actual!r} != {expected!r}"
        )
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {actual!r} is not an object"
        assert set(actual) == set(expected), f"{path}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            assert_close(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: {actual!r} is not a list"
        assert len(actual) == len(expected), f"{path}: {len(actual)} items != {len(expected)}"
        for position, (a, e) in enumerate(zip(actual, expected, strict=False)):
            assert_close(a, e, f"{path}[{position}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def assert_round_trip(bundle):
    """import → export is equivalent to ``bundle``; export → import → export
    is identical, to the byte of its JSON."""
    first = study_export_bundle(study=study_import_bundle(bundle=bundle))
    assert_close(canonical(first), canonical(bundle))
    second = study_export_bundle(study=study_import_bundle(bundle=copy.deepcopy(first)))
    assert json.dumps(second) == json.dumps(first)
    return first


def study_state(study):
    """What a study holds, by name (no ids), including what the services
    computed: the selection, the weights, the consistency ratios."""
    study.refresh_from_db()

    def expert_name(membership_id):
        return Membership.objects.get(pk=membership_id).user.username

    return {
        "phase": study.phase,
        "thresholds": (study.attribute_threshold, study.metric_threshold),
        "selected": (
            sorted(QualityAttribute.objects.filter(study=study, is_selected=True).values_list("name", flat=True)),
            sorted(Metric.objects.filter(study=study, is_selected=True).values_list("name", flat=True)),
        ),
        "prioritisations": sorted(
            (
                expert_name(p.expert_id),
                p.method,
                round(p.consistency_ratio, 12) if p.consistency_ratio is not None else None,
                sorted((w.attribute.name, w.given, round(w.weight, 12)) for w in p.weights.all()),
            )
            for p in AttributePrioritisation.objects.filter(expert__study=study)
        ),
        "local": sorted(
            (
                expert_name(p.expert_id),
                p.attribute.name,
                p.method,
                sorted((w.metric.name, round(w.weight, 12)) for w in p.weights.all()),
            )
            for p in MetricPrioritisation.objects.filter(expert__study=study)
        ),
        "ranges": sorted(
            (expert_name(r.expert_id), r.metric.name, r.least_acceptable, r.desired)
            for r in AcceptableRange.objects.filter(expert__study=study)
        ),
        "peer_weights": sorted(
            (expert_name(p.rater_id), expert_name(p.ratee_id), p.weight)
            for p in PeerWeight.objects.filter(rater__study=study)
        ),
        "measurements": sorted(
            (m.candidate.name, m.metric.name, m.value) for m in Measurement.objects.filter(candidate__study=study)
        ),
    }


# --- the case study -------------------------------------------------------------------


def test_case_study_round_trip(case_study):
    exported = assert_round_trip(case_study)
    assert exported["phase"] == "closed"
    # the export spells out the empty metric votes the bundle left out
    assert exported["votes"]["metrics"] == {name: [] for name in case_study["experts"]}


def test_case_study_import_builds_the_study(case_study):
    study = study_import_bundle(bundle=case_study)
    assert (study.phase, study.designer.username, study.title) == ("closed", "designer", case_study["title"])
    assert list(
        Membership.objects.filter(study=study, role="expert").order_by("id").values_list("user__username", flat=True)
    ) == [
        "statistician",
        "informatician",
        "researcher",
        "clinician",
    ]
    state = study_state(study)
    assert state["selected"] == (
        ["Accuracy", "Comprehensibility", "Consistency"],
        ["Comprehensibility rating", "Fold accuracy stdev", "Success rate"],
    )
    statistician = [p for p in state["prioritisations"] if p[0] == "statistician"][0]
    assert statistician[3] == [("Accuracy", 0.63, 0.63), ("Comprehensibility", 0.17, 0.17), ("Consistency", 0.2, 0.2)]
    assert len(state["peer_weights"]) == 16
    # accounts created by the import have no usable password
    for username in ["designer", *case_study["experts"]]:
        assert not User.objects.get(username=username).has_usable_password()


def test_import_never_touches_an_existing_account(case_study, cast):
    case_study["designer"] = "alice"
    case_study["experts"][0] = "bob"
    for section in (
        case_study["priorities"],
        case_study["peer_weights"],
        case_study["votes"]["attributes"],
        *case_study["peer_weights"].values(),
    ):
        section["bob"] = section.pop("statistician")
    study = study_import_bundle(bundle=case_study)
    assert study.designer == cast.alice
    assert authenticate(username="bob", password=PASSWORD) == cast.bob
    assert authenticate(username="alice", password=PASSWORD) == cast.alice


def test_import_without_designer_uses_the_importing_user(case_study, cast, unchanged):
    del case_study["designer"]
    with unchanged(), pytest.raises(InvalidInput) as info:
        study_import_bundle(bundle=copy.deepcopy(case_study))
    assert set(info.value.errors) == {"designer"}
    # A closed study carries the experts' inputs, which only staff may import
    # in their names (tests/workspace/test_consent.py); a draft carries none.
    case_study["phase"] = "draft"
    for section in ("votes", "priorities", "ranges", "peer_weights"):
        del case_study[section]
    study = study_import_bundle(bundle=case_study, importer=cast.charlie)
    assert study.designer == cast.charlie
    assert study_export_bundle(study=study)["designer"] == "charlie"


@pytest.mark.parametrize("phase", ["draft", "voting", "assessment"])
def test_case_study_in_an_earlier_phase(case_study, phase):
    case_study["phase"] = phase
    if phase in ("draft", "voting"):
        for section in ("priorities", "ranges", "peer_weights"):
            del case_study[section]
    if phase == "draft":
        del case_study["votes"]
    exported = assert_round_trip(case_study)
    assert exported["phase"] == phase


# --- studies built through the services ---------------------------------------------------


def round_trip_study(study):
    """Export → import gives a study holding the same, and export → import →
    export is identical."""
    study.refresh_from_db()  # transitions save a locked copy of the study
    first = study_export_bundle(study=study)
    copy_ = study_import_bundle(bundle=copy.deepcopy(first))
    assert study_state(copy_) == study_state(study)
    second = study_export_bundle(study=copy_)
    assert json.dumps(second) == json.dumps(first)
    assert_close(canonical(second), canonical(first))
    return first


@pytest.mark.parametrize(
    "phase, inputs",
    [("draft", False), ("voting", False), ("assessment", False), ("assessment", True), ("closed", True)],
)
def test_built_studies_round_trip(make_study, phase, inputs):
    built = make_study(phase, inputs=inputs)
    exported = round_trip_study(built.study)
    assert exported["phase"] == phase
    assert exported["experts"] == ["bob", "carol"]
    assert exported["designer"] == "alice"
    if phase == "draft":
        assert exported["votes"] == {"attributes": {}, "metrics": {}}
    else:
        assert exported["votes"]["attributes"] == {"bob": ["Efficiency"], "carol": []}
    if phase == "closed" or inputs:
        assert exported["priorities"]["bob"] == {
            "method": "direct",
            "weights": {"Accuracy": 50, "Consistency": 30, "Efficiency": 20},
        }
        assert exported["priorities"]["carol"]["method"] == "ahp"
        assert exported["ranges"] == {
            "bob": {"AUC": [0.7, 0.95]},
            "carol": {"Success rate": [0.82, 0.9], "AUC": [0.75, 0.9]},
        }
        assert exported["peer_weights"] == {"bob": {"bob": 0.6, "carol": 0.4}, "carol": {"bob": 0.5, "carol": 0.5}}


@pytest.mark.parametrize("phase", ["assessment", "closed"])
def test_a_rich_study_round_trips(make_study, phase):
    """Every kind of input at once: AHP and LPR priorities with reversed and
    rounded judgments, metric priorities by all three methods, explicit
    ranges, votes decided by thresholds of 2 and 1, the designer as expert."""
    every_metric = ["Success rate", "AUC", "Fold stdev", "Training time", "Flexibility score"]
    built = make_study(
        "assessment",
        experts=("bob", "carol", "alice"),
        attribute_threshold=2,
        metric_threshold=1,
        votes={
            "bob": {"attributes": ["Efficiency", "Flexibility"], "metrics": every_metric},
            "carol": {"attributes": ["Flexibility"], "metrics": ["AUC"]},
            "alice": {"attributes": ["Flexibility"], "metrics": []},
        },
    )
    # Flexibility (3 votes) is selected, Efficiency (1 vote) is not.
    assert study_state(built.study)["selected"] == (
        ["Accuracy", "Consistency", "Flexibility"],
        ["AUC", "Flexibility score", "Fold stdev", "Success rate"],
    )
    alice = built.experts["alice"]
    services.priorities_set(
        expert=built.bob,
        method="lpr",
        judgments=[
            ["Consistency", "Accuracy", 1 / 3],
            ["Accuracy", "Flexibility", 7],
            ["Flexibility", "Consistency", 0.1111],
        ],
        metric_priorities={"Accuracy": {"method": "ahp", "judgments": [["AUC", "Success rate", 3]]}},
    )
    services.priorities_set(
        expert=built.carol,
        method="ahp",
        judgments=[
            ["Accuracy", "Consistency", 9],
            ["Accuracy", "Flexibility", 1 / 9],
            ["Consistency", "Flexibility", 2.5],
        ],
        metric_priorities={"Accuracy": {"method": "direct", "weights": {"Success rate": 70, "AUC": 30}}},
    )
    services.priorities_set(
        expert=alice,
        method="direct",
        weights={"Accuracy": 0.1, "Consistency": 1e-3, "Flexibility": 12.5},
        metric_priorities={"Accuracy": {"method": "lpr", "judgments": [["Success rate", "AUC", 8]]}},
    )
    services.ranges_set(
        expert=built.bob, ranges={"AUC": [0.5, 0.99], "Flexibility score": [2, 9], "Fold stdev": [0.3, 0.01]}
    )
    services.ranges_set(
        expert=built.carol, ranges={"AUC": [-1, 1e6], "Flexibility score": [0, 10], "Success rate": [0.1, 0.2]}
    )
    services.ranges_set(expert=alice, ranges={"AUC": [0.6, 0.61], "Flexibility score": [1, 2]})
    services.peer_weights_set(expert=built.bob, weights={"bob": 0.2 + 0.1, "carol": 0.3, "alice": 0.4})
    services.peer_weights_set(expert=built.carol, weights={"bob": 1 / 3, "carol": 1 / 3, "alice": 1 / 3})
    services.peer_weights_set(expert=alice, weights={"bob": 0.98, "carol": 0.01, "alice": 0.01})
    if phase == "closed":
        services.study_close_assessment(study=built.study)
    exported = round_trip_study(built.study)
    assert exported["phase"] == phase
    assert exported["priorities"]["bob"]["judgments"][2] == ["Flexibility", "Consistency", 0.1111]
    assert exported["priorities"]["carol"]["metric_priorities"] == {
        "Accuracy": {"method": "direct", "weights": {"Success rate": 70, "AUC": 30}}
    }
    assert exported["votes"]["metrics"]["carol"] == ["AUC"]


def test_a_lone_expert_study_round_trips(make_study):
    built = make_study("assessment", experts=("bob",), votes={"bob": {"attributes": ["Flexibility"]}})
    services.prioritisation_set(
        expert=built.bob,
        method="lpr",
        judgments=[["Accuracy", "Consistency", 2], ["Flexibility", "Accuracy", 4], ["Consistency", "Flexibility", 1]],
    )
    services.ranges_set(expert=built.bob, ranges={"AUC": [0.5, 0.75], "Flexibility score": [1, 9]})
    services.peer_weights_set(expert=built.bob, weights={"bob": 1})
    services.study_close_assessment(study=built.study)
    exported = round_trip_study(built.study)
    assert exported["peer_weights"] == {"bob": {"bob": 1.0}}
    assert exported["votes"]["attributes"] == {"bob": ["Flexibility"]}


# --- generated bundles (Hypothesis) ------------------------------------------------------

NAME = (
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_()%éμ", min_size=1, max_size=12)
    .map(str.strip)
    .filter(bool)
)
# Free text, minus the NUL character (refused: PostgreSQL cannot store it).
# Any storable text: no NUL, no lone surrogates (both are refused on import).
TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=30).map(str.strip)
USERNAME = st.from_regex(r"[a-z][a-z0-9_.@+-]{0,8}", fullmatch=True)
FINITE = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False, allow_subnormal=False)
MEASURE = st.one_of(FINITE, st.integers(min_value=-1000, max_value=1000))
SCALE = st.one_of(
    st.sampled_from([float(v) for v in SCALE_VALUES] + [1, 2, 3, 9]), st.floats(min_value=1 / 9, max_value=9)
)


@st.composite
def ordered_pair(draw, better):
    low, high = sorted(draw(st.lists(FINITE, min_size=2, max_size=2, unique=True)))
    return [low, high] if better == "higher" else [high, low]


@st.composite
def prioritisation(draw, items):
    method = draw(st.sampled_from(["direct", "ahp", "lpr"]))
    if method == "direct":
        # At most 8 items of at most 1e3 each: a weight of 1e-2 keeps its
        # share above rules.MIN_DIRECT_SHARE (1e-6), so every drawn bundle is
        # valid (1e-3 among weights summing to 1e3 fell just below it).
        values = draw(
            st.lists(st.one_of(st.integers(1, 100), st.floats(1e-2, 1e3)), min_size=len(items), max_size=len(items))
        )
        return {"method": method, "weights": dict(zip(items, values, strict=False))}
    judgments = []
    for i, row in enumerate(items):
        for column in items[i + 1 :]:
            pair = [row, column] if draw(st.booleans()) else [column, row]
            judgments.append([*pair, draw(SCALE)])
    return {"method": method, "judgments": draw(st.permutations(judgments))}


@st.composite
def bundles(draw):
    phase = draw(st.sampled_from(["draft", "voting", "assessment", "closed"]))
    people = draw(st.lists(USERNAME, min_size=2, max_size=4, unique=True))
    designer, experts = people[0], people[1:]
    if draw(st.booleans()):
        experts.append(designer)  # the designer also takes part
    attribute_names = draw(st.lists(NAME, min_size=1, max_size=4, unique=True))
    attributes = [
        {
            "name": name,
            "kind": "main" if position == 0 else draw(st.sampled_from(["main", "complementary"])),
            "description": draw(TEXT),
        }
        for position, name in enumerate(attribute_names)
    ]
    metric_names = iter(draw(st.lists(NAME, min_size=2 * len(attributes), max_size=2 * len(attributes), unique=True)))
    metrics = []
    for attribute in attributes:  # grouped by attribute: the order a study keeps
        for _ in range(draw(st.integers(1, 2))):
            better = draw(st.sampled_from(["higher", "lower"]))
            metric = {
                "name": next(metric_names),
                "attribute": attribute["name"],
                "better": better,
                "unit": draw(st.sampled_from(["", "s", "%"])),
            }
            if draw(st.booleans()):
                metric["default_range"] = draw(ordered_pair(better))
            metrics.append(metric)
    candidates = [
        {
            "name": name,
            "description": "",
            "measurements": {m["name"]: draw(MEASURE) for m in metrics if draw(st.booleans())},
        }
        for name in draw(st.lists(NAME, max_size=3, unique=True))
    ]
    bundle = {
        "format": "approve-study/1",
        "title": draw(NAME),
        "description": draw(TEXT),
        "phase": phase,
        "designer": designer,
        "experts": experts,
        "attributes": attributes,
        "metrics": metrics,
        "candidates": candidates,
        "attribute_threshold": draw(st.integers(0, len(experts))),
    }
    if phase == "draft":
        bundle["metric_threshold"] = draw(st.integers(0, 2))
        return bundle

    complementary = [a["name"] for a in attributes if a["kind"] == "complementary"]
    bundle["votes"] = {
        "attributes": {
            e: draw(st.lists(st.sampled_from(complementary), unique=True)) if complementary else [] for e in experts
        },
        "metrics": {e: draw(st.lists(st.sampled_from([m["name"] for m in metrics]), unique=True)) for e in experts},
    }
    # The selection the votes give; the metric threshold is capped so that
    # every selected attribute keeps a metric (else voting could not close).
    count = lambda kind, name: sum(name in bundle["votes"][kind][e] for e in experts)  # noqa: E731
    selected = [
        a["name"]
        for a in attributes
        if a["kind"] == "main" or count("attributes", a["name"]) >= bundle["attribute_threshold"]
    ]
    best = [max(count("metrics", m["name"]) for m in metrics if m["attribute"] == name) for name in selected]
    bundle["metric_threshold"] = min(draw(st.integers(0, 2)), min(best))
    if phase == "voting":
        return bundle

    chosen = [
        m for m in metrics if m["attribute"] in selected and count("metrics", m["name"]) >= bundle["metric_threshold"]
    ]
    everyone = phase == "closed"
    bundle["priorities"], bundle["ranges"], bundle["peer_weights"] = {}, {}, {}
    for expert in experts:
        if everyone or draw(st.booleans()):
            priority = draw(prioritisation(selected))
            local = {}
            for name in selected:
                items = [m["name"] for m in chosen if m["attribute"] == name]
                if len(items) > 1 and draw(st.booleans()):
                    local[name] = draw(prioritisation(items))
            if local:
                priority["metric_priorities"] = local
            bundle["priorities"][expert] = priority
        ranges = {
            m["name"]: draw(ordered_pair(m["better"]))
            for m in chosen
            if (everyone and "default_range" not in m) or draw(st.booleans())
        }
        if ranges:
            bundle["ranges"][expert] = ranges
        if everyone or draw(st.booleans()):
            raw = draw(st.lists(st.integers(1, 20), min_size=len(experts), max_size=len(experts)))
            bundle["peer_weights"][expert] = {e: r / sum(raw) for e, r in zip(experts, raw, strict=False)}
    return bundle


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(bundle=bundles())
def test_generated_bundles_round_trip(db, bundle):
    with transaction.atomic():
        exported = assert_round_trip(copy.deepcopy(bundle))
        assert exported["phase"] == bundle["phase"]
        transaction.set_rollback(True)


# --- bad bundles -----------------------------------------------------------------------


def _set(path, value):
    """A mutation setting the value at ``path`` (keys and list indices)."""

    def mutate(bundle):
        target = bundle
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return mutate


def _delete(path):
    def mutate(bundle):
        target = bundle
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return mutate


def _early(phase, **sections):
    """Put the bundle in an earlier phase, dropping the later inputs, then
    add ``sections``."""

    def mutate(bundle):
        bundle["phase"] = phase
        for key in ("priorities", "ranges", "peer_weights") + (("votes",) if phase == "draft" else ()):
            bundle.pop(key, None)
        bundle.update(copy.deepcopy(sections))

    return mutate


def _both(*mutations):
    def mutate(bundle):
        for mutation in mutations:
            mutation(bundle)

    return mutate


def _without_training_time(bundle):
    bundle["metrics"] = [m for m in bundle["metrics"] if m["name"] != "Training time"]
    for candidate in bundle["candidates"]:
        del candidate["measurements"]["Training time"]


AHP_CLINICIAN = {
    "method": "ahp",
    "judgments": [
        ["Accuracy", "Consistency", 3],
        ["Accuracy", "Comprehensibility", 0.5],
        ["Consistency", "Comprehensibility", 0.25],
    ],
}

BAD_BUNDLES = [
    # (id, mutation, field named by the error, fragment of its message)
    ("format-wrong", _set(["format"], "approve-study/2"), "format", "must be 'approve-study/1'"),
    ("format-missing", _delete(["format"]), "format", "must be 'approve-study/1'"),
    ("unknown-top-level-key", _set(["colour"], "blue"), "colour", "is not a field"),
    ("title-missing", _delete(["title"]), "title", "is required"),
    ("title-empty", _set(["title"], "  "), "title", "must not be empty"),
    (
        "name-with-a-lone-surrogate",
        _set(["candidates", 0, "name"], "J\ud80048"),
        "candidates[0].name",
        "lone surrogate",
    ),
    ("phase-unknown", _set(["phase"], "archived"), "phase", "must be one of"),
    ("threshold-negative", _set(["attribute_threshold"], -1), "attribute_threshold", "whole number"),
    ("threshold-float", _set(["metric_threshold"], 0.5), "metric_threshold", "whole number"),
    ("designer-invalid", _set(["designer"], "the designer"), "designer", "not a valid username"),
    ("experts-not-a-list", _set(["experts"], "statistician"), "experts", "list of usernames"),
    ("expert-twice", _set(["experts", 1], "statistician"), "experts[1]", "listed twice"),
    ("expert-invalid-username", _set(["experts", 1], "info matician"), "experts[1]", "not a valid username"),
    ("expert-not-text", _set(["experts", 1], 5), "experts[1]", "a username"),
    ("attribute-kind", _set(["attributes", 0, "kind"], "primary"), "attributes[0].kind", "'main' or 'complementary'"),
    ("attribute-name-twice", _set(["attributes", 1, "name"], "Accuracy"), "attributes[1].name", "already exists"),
    ("attribute-unknown-field", _set(["attributes", 0, "weight"], 2), "attributes[0].weight", "is not a field"),
    ("attribute-not-an-object", _set(["attributes", 2], "Comprehensibility"), "attributes[2]", "must be an object"),
    ("attributes-not-a-list", _set(["attributes"], {"Accuracy": "main"}), "attributes", "must be a list"),
    (
        "metric-range-wrong-direction",
        _set(["metrics", 1, "default_range"], [0.05, 0.15]),
        "metrics[1].default_range",
        "lower is better",
    ),
    (
        "metric-range-equal-bounds",
        _set(["metrics", 0, "default_range"], [0.9, 0.9]),
        "metrics[0].default_range",
        "must differ",
    ),
    ("metric-range-nan", _set(["metrics", 0, "default_range"], [NAN, 0.9]), "metrics[0].default_range", "finite"),
    ("metric-range-not-a-pair", _set(["metrics", 2, "default_range"], [6]), "metrics[2].default_range", "pair"),
    ("metric-better", _set(["metrics", 2, "better"], "up"), "metrics[2].better", "'higher' or 'lower'"),
    (
        "metric-unknown-attribute",
        _set(["metrics", 0, "attribute"], "Speed"),
        "metrics[0].attribute",
        "no attribute named 'Speed'",
    ),
    (
        "metric-attribute-not-text",
        _set(["metrics", 0, "attribute"], ["Accuracy"]),
        "metrics[0].attribute",
        "no attribute named",
    ),
    ("metric-attribute-missing", _delete(["metrics", 3, "attribute"]), "metrics[3].attribute", "is required"),
    ("metric-name-twice", _set(["metrics", 3, "name"], "Success rate"), "metrics[3].name", "already exists"),
    (
        "measurement-nan",
        _set(["candidates", 0, "measurements", "Success rate"], NAN),
        "candidates[0].measurements.Success rate",
        "finite",
    ),
    (
        "measurement-inf",
        _set(["candidates", 3, "measurements", "Training time"], -INF),
        "candidates[3].measurements.Training time",
        "finite",
    ),
    (
        "measurement-text",
        _set(["candidates", 2, "measurements", "Training time"], "fast"),
        "candidates[2].measurements.Training time",
        "number",
    ),
    (
        "measurement-bool",
        _set(["candidates", 1, "measurements", "Comprehensibility rating"], True),
        "candidates[1].measurements.Comprehensibility rating",
        "number",
    ),
    (
        "measurement-too-large",
        _set(["candidates", 0, "measurements", "Success rate"], 10**400),
        "candidates[0].measurements.Success rate",
        "too large",
    ),
    (
        "peer-weight-too-large",
        _set(["peer_weights", "clinician", "clinician"], 10**400),
        "peer_weights.clinician.clinician",
        "too large",
    ),
    ("description-with-nul", _set(["attributes", 1, "description"], "uniform\x00"), "attributes[1].description", "NUL"),
    ("title-with-nul", _set(["title"], "Cancer\x00"), "title", "NUL"),
    (
        "measurement-unknown-metric",
        _set(["candidates", 1, "measurements", "Recall"], 0.5),
        "candidates[1].measurements.Recall",
        "no metric",
    ),
    (
        "measurements-not-an-object",
        _set(["candidates", 1, "measurements"], [0.8]),
        "candidates[1].measurements",
        "an object",
    ),
    ("candidate-name-twice", _set(["candidates", 1, "name"], "J48"), "candidates[1].name", "already exists"),
    (
        "votes-in-a-draft-bundle",
        _early("draft", votes={"attributes": {"statistician": ["Efficiency"]}}),
        "votes",
        "draft phase has no votes",
    ),
    (
        "priorities-in-a-voting-bundle",
        _early("voting", priorities={"statistician": {"method": "direct", "weights": {"Accuracy": 1}}}),
        "priorities",
        "voting phase has no priorities",
    ),
    (
        "peer-weights-in-a-voting-bundle",
        _early("voting", peer_weights={"statistician": {"statistician": 1}}),
        "peer_weights",
        "no peer weights",
    ),
    (
        "votes-unknown-expert",
        _set(["votes", "attributes", "dave"], ["Efficiency"]),
        "votes.attributes.dave",
        "not one of the bundle's experts",
    ),
    (
        "votes-for-a-main-attribute",
        _set(["votes", "attributes", "clinician"], ["Accuracy"]),
        "votes.attributes.clinician",
        "main attribute",
    ),
    (
        "votes-unknown-metric",
        _set(["votes", "metrics", "researcher"], ["Recall"]),
        "votes.metrics.researcher",
        "no metric named 'Recall'",
    ),
    ("votes-unknown-field", _set(["votes", "candidates"], {}), "votes.candidates", "is not a field"),
    # A vote selects Efficiency: the direct weights then lack it.
    (
        "vote-selects-an-unprioritised-attribute",
        _set(["votes", "attributes", "statistician"], ["Efficiency"]),
        "priorities.statistician.weights",
        "missing weights for Efficiency",
    ),
    (
        "direct-weight-zero",
        _set(["priorities", "statistician", "weights", "Accuracy"], 0),
        "priorities.statistician.weights.Accuracy",
        "must be positive",
    ),
    (
        "direct-weight-negative",
        _set(["priorities", "informatician", "weights", "Consistency"], -0.25),
        "priorities.informatician.weights.Consistency",
        "must be positive",
    ),
    (
        "direct-weight-missing",
        _delete(["priorities", "statistician", "weights", "Consistency"]),
        "priorities.statistician.weights",
        "missing weights for Consistency",
    ),
    (
        "direct-weight-unselected-attribute",
        _set(["priorities", "statistician", "weights", "Efficiency"], 0.1),
        "priorities.statistician.weights.Efficiency",
        "not one of the items",
    ),
    (
        "priority-method",
        _set(["priorities", "clinician", "method"], "topsis"),
        "priorities.clinician.method",
        "'direct', 'ahp' or 'lpr'",
    ),
    (
        "priority-method-missing",
        _delete(["priorities", "clinician", "method"]),
        "priorities.clinician.method",
        "is required",
    ),
    (
        "priority-unknown-expert",
        _set(["priorities", "dave"], AHP_CLINICIAN),
        "priorities.dave",
        "not one of the bundle's experts",
    ),
    (
        "ahp-value-10",
        _set(
            ["priorities", "clinician"],
            {**AHP_CLINICIAN, "judgments": [["Accuracy", "Consistency", 10]] + AHP_CLINICIAN["judgments"][1:]},
        ),
        "priorities.clinician.judgments[0]",
        "outside the scale",
    ),
    (
        "ahp-pair-missing",
        _set(["priorities", "clinician"], {**AHP_CLINICIAN, "judgments": AHP_CLINICIAN["judgments"][:2]}),
        "priorities.clinician.judgments",
        "missing comparisons: Consistency / Comprehensibility",
    ),
    (
        "ahp-pair-twice",
        _set(
            ["priorities", "clinician"],
            {**AHP_CLINICIAN, "judgments": AHP_CLINICIAN["judgments"] + [["Consistency", "Accuracy", 1 / 3]]},
        ),
        "priorities.clinician.judgments[3]",
        "already judged",
    ),
    (
        "ahp-row-not-text",
        _set(
            ["priorities", "clinician"],
            {**AHP_CLINICIAN, "judgments": [[["Accuracy"], "Consistency", 3]] + AHP_CLINICIAN["judgments"][1:]},
        ),
        "priorities.clinician.judgments[0]",
        "must be [row, column, value]",
    ),
    (
        "lpr-self-comparison",
        _set(
            ["priorities", "clinician"],
            {"method": "lpr", "judgments": [["Accuracy", "Accuracy", 1]] + AHP_CLINICIAN["judgments"]},
        ),
        "priorities.clinician.judgments[0]",
        "with itself",
    ),
    (
        "metric-priorities-one-metric",
        _set(
            ["priorities", "statistician", "metric_priorities"],
            {"Accuracy": {"method": "direct", "weights": {"Success rate": 1}}},
        ),
        "priorities.statistician.metric_priorities.Accuracy.attribute",
        "one selected metric",
    ),
    (
        "ranges-unknown-expert",
        _set(["ranges", "dave"], {"Success rate": [0.8, 0.9]}),
        "ranges.dave",
        "not one of the bundle's experts",
    ),
    (
        "range-equal-bounds",
        _set(["ranges", "statistician"], {"Success rate": [0.9, 0.9]}),
        "ranges.statistician.Success rate",
        "must differ",
    ),
    (
        "range-wrong-direction",
        _set(["ranges", "researcher"], {"Fold accuracy stdev": [0.05, 0.15]}),
        "ranges.researcher.Fold accuracy stdev",
        "lower is better",
    ),
    (
        "range-unselected-metric",
        _set(["ranges", "statistician"], {"Training time": [60, 1]}),
        "ranges.statistician.Training time",
        "not a selected metric",
    ),
    (
        "range-nan",
        _set(["ranges", "clinician"], {"Success rate": [NAN, 0.9]}),
        "ranges.clinician.Success rate",
        "finite",
    ),
    ("ranges-not-an-object", _set(["ranges", "clinician"], [[0.8, 0.9]]), "ranges.clinician", "must map metric names"),
    (
        "peer-weights-row-sums-to-0.9",
        _set(["peer_weights", "clinician", "clinician"], 0.3),
        "peer_weights.clinician",
        "row sums to 0.9, must be 1",
    ),
    (
        "peer-weight-zero",
        _both(
            _set(["peer_weights", "clinician", "statistician"], 0),
            _set(["peer_weights", "clinician", "clinician"], 0.6),
        ),
        "peer_weights.clinician.statistician",
        "must be positive",
    ),
    (
        "peer-weight-unknown-expert",
        _set(["peer_weights", "clinician", "dave"], 0.1),
        "peer_weights.clinician.dave",
        "not an expert",
    ),
    (
        "peer-weights-row-incomplete",
        _delete(["peer_weights", "clinician", "researcher"]),
        "peer_weights.clinician",
        "missing weights for researcher",
    ),
    (
        "peer-weights-unknown-rater",
        _set(["peer_weights", "dave"], {"statistician": 1}),
        "peer_weights.dave",
        "not one of the bundle's experts",
    ),
    (
        "closed-with-a-missing-peer-weight-row",
        _delete(["peer_weights", "researcher"]),
        "phase",
        "researcher: weights for fellow experts",
    ),
    (
        "closed-with-a-missing-prioritisation",
        _delete(["priorities", "informatician"]),
        "phase",
        "informatician: prioritisation of the attributes",
    ),
    (
        "closed-with-a-missing-range",
        _set(["metrics", 0, "default_range"], None),
        "phase",
        "acceptable range for Success rate",
    ),
    (
        "voting-with-an-attribute-lacking-metrics",
        _both(_without_training_time, _early("voting")),
        "phase",
        "Efficiency",
    ),
    (
        "voting-without-experts",
        _both(_early("voting", votes={}), _set(["experts"], [])),
        "phase",
        "invite at least one expert",
    ),
    # FORMATS.md: votes may be left out only when thresholds of 0 decide everything.
    ("votes-omitted-with-an-attribute-threshold", _delete(["votes"]), "votes", "attributes votes are required"),
    ("attribute-votes-omitted", _delete(["votes", "attributes"]), "votes.attributes", "attributes votes are required"),
    (
        "metric-votes-omitted-with-a-metric-threshold",
        _both(_set(["metric_threshold"], 1), _delete(["votes", "metrics"])),
        "votes.metrics",
        "metrics votes are required",
    ),
]


@pytest.mark.parametrize("mutation, field, fragment", [pytest.param(m, f, fr, id=i) for i, m, f, fr in BAD_BUNDLES])
def test_bad_bundles_are_refused_and_write_nothing(case_study, unchanged, mutation, field, fragment):
    mutation(case_study)
    with unchanged(), pytest.raises(InvalidInput) as info:
        study_import_bundle(bundle=case_study)
    errors = info.value.errors
    assert list(errors) == [field], errors
    assert fragment in " ".join(errors[field]), errors
    assert Study.objects.count() == 0
    assert not User.objects.filter(username__in=["designer", "statistician", "dave"]).exists()


@pytest.mark.parametrize("bundle", [[], ["approve-study/1"], "approve-study/1", None, 1])
def test_a_bundle_must_be_an_object(unchanged, bundle):
    with unchanged(), pytest.raises(InvalidInput) as info:
        study_import_bundle(bundle=bundle)
    assert info.value.errors == {"bundle": ["must be a JSON object"]}


def _paths(value, path=()):
    """Every path into a JSON value."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for position, item in enumerate(value):
            yield from _paths(item, (*path, position))


CASE_STUDY = json.loads(CASE_STUDY_PATH.read_text(encoding="utf-8"))
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, 2**31, -1, 0])
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["Accuracy", "statistician", "Success rate", "J48", "ahp", "draft", "closed"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(path=st.sampled_from([p for p in _paths(CASE_STUDY) if p]), value=JSON, delete=st.booleans())
def test_a_mangled_bundle_is_imported_or_refused_cleanly(db, path, value, delete):
    """Whatever is put anywhere in a bundle, the import either succeeds or
    raises InvalidInput having written nothing: never another exception."""
    bundle = copy.deepcopy(CASE_STUDY)
    target = bundle
    for step in path[:-1]:
        target = target[step]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    with transaction.atomic():
        before = db_snapshot()
        try:
            study_import_bundle(bundle=bundle)
        except InvalidInput as error:
            assert error.errors and all(isinstance(m, str) for ms in error.errors.values() for m in ms)
            assert db_snapshot() == before
        transaction.set_rollback(True)


# --- management commands ------------------------------------------------------------------


def _write(tmp_path, bundle, name="bundle.json"):
    path = tmp_path / name
    path.write_text(json.dumps(bundle), encoding="utf-8")
    return path


def test_import_study_command_prints_the_new_id(case_study, tmp_path):
    out = io.StringIO()
    call_command("import_study", str(_write(tmp_path, case_study)), stdout=out)
    printed = out.getvalue().strip()
    assert re.fullmatch(r"\d+", printed)
    study = Study.objects.get()
    assert int(printed) == study.pk
    assert_close(canonical(study_export_bundle(study=study)), canonical(case_study))


def test_import_study_command_reads_standard_input(case_study, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(case_study)))
    out = io.StringIO()
    call_command("import_study", "-", stdout=out)
    assert int(out.getvalue()) == Study.objects.get().pk


def test_import_study_command_designer_option(case_study, tmp_path, cast, unchanged):
    del case_study["designer"]
    path = _write(tmp_path, case_study)
    with unchanged(), pytest.raises(CommandError, match="--designer: no user named 'nobody'"):
        call_command("import_study", str(path), "--designer", "nobody", stdout=io.StringIO())
    with unchanged(), pytest.raises(CommandError, match="designer: is required"):
        call_command("import_study", str(path), stdout=io.StringIO())
    out = io.StringIO()
    call_command("import_study", str(path), "--designer", "alice", stdout=out)
    assert Study.objects.get(pk=int(out.getvalue())).designer == cast.alice


def test_import_study_command_refuses_a_bad_bundle(case_study, tmp_path, unchanged):
    case_study["peer_weights"]["clinician"]["clinician"] = 0.3
    path = _write(tmp_path, case_study)
    with unchanged(), pytest.raises(CommandError) as info:
        call_command("import_study", str(path), stdout=io.StringIO())
    message = str(info.value)
    assert "nothing was written" in message
    assert "peer_weights.clinician: row sums to 0.9, must be 1" in message
    assert Study.objects.count() == 0


def test_import_study_command_refuses_unreadable_files(tmp_path, unchanged):
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "approve-study/1",', encoding="utf-8")
    with unchanged():
        with pytest.raises(CommandError, match="is not valid JSON"):
            call_command("import_study", str(broken), stdout=io.StringIO())
        with pytest.raises(CommandError, match="cannot read"):
            call_command("import_study", str(tmp_path / "missing.json"), stdout=io.StringIO())


def test_export_study_command_prints_the_bundle(make_study):
    built = make_study("closed")
    out = io.StringIO()
    call_command("export_study", str(built.study.pk), stdout=out)
    assert json.loads(out.getvalue()) == study_export_bundle(study=built.study)


def test_export_study_command_refuses_an_unknown_study(db):
    with pytest.raises(CommandError, match="no study with id 999"):
        call_command("export_study", "999", stdout=io.StringIO())


def _demo_accounts(output, *, addresses=None):
    """``{username: (password, role)}`` from load_demo's output; each
    account's printed e-mail address into ``addresses`` when given."""
    lines = output.split("Demo accounts", 1)[1].splitlines()[1:]
    accounts = {}
    for line in lines:
        if line.strip():
            username, password, email, role = line.split(None, 3)
            accounts[username] = (password, role)
            if addresses is not None:
                addresses[username] = email
    return accounts


def test_load_demo_refuses_without_debug(settings, unchanged):
    settings.DEBUG = False
    with unchanged(), pytest.raises(CommandError, match="only runs with DEBUG on"):
        call_command("load_demo", stdout=io.StringIO())


def test_load_demo_creates_the_demo_with_working_passwords(settings, case_study):
    settings.DEBUG = True
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    output = out.getvalue()
    study = Study.objects.get()
    assert f"Imported the demo study {case_study['title']!r} (id {study.pk})" in output
    assert study.phase == "closed" and study.designer.username == "designer"
    accounts = _demo_accounts(output)
    assert set(accounts) == {"admin", "designer", *case_study["experts"]}
    assert accounts["designer"][1] == "designer" and accounts["clinician"][1] == "expert"
    for username, (password, _) in accounts.items():
        user = authenticate(username=username, password=password)
        assert user is not None and user.username == username
        assert authenticate(username=username, password=password + "x") is None
    admin = User.objects.get(username="admin")
    assert admin.is_staff and admin.is_superuser

    # Twice: still one study, fresh passwords that work, old ones that do not.
    again = io.StringIO()
    call_command("load_demo", "--force", stdout=again)
    assert Study.objects.count() == 1
    assert f"is already there (id {study.pk})" in again.getvalue()
    renewed = _demo_accounts(again.getvalue())
    for username, (password, _) in renewed.items():
        assert authenticate(username=username, password=password) is not None
        assert authenticate(username=username, password=accounts[username][0]) is None


def test_load_demo_with_force_runs_without_debug(settings):
    settings.DEBUG = False
    out = io.StringIO()
    call_command("load_demo", "--force", stdout=out)
    assert Study.objects.count() == 1
    password = _demo_accounts(out.getvalue())["statistician"][0]
    assert authenticate(username="statistician", password=password) is not None


def test_votes_may_be_omitted_when_thresholds_of_0_decide(case_study):
    del case_study["votes"]
    case_study["attribute_threshold"] = 0  # Efficiency is then selected without votes
    case_study["phase"] = "assessment"
    for section in ("priorities", "ranges", "peer_weights"):
        case_study.pop(section)
    study = study_import_bundle(bundle=case_study)
    assert sorted(study.attributes.filter(is_selected=True).values_list("name", flat=True)) == [
        "Accuracy",
        "Comprehensibility",
        "Consistency",
        "Efficiency",
    ]


# --- at scale ----------------------------------------------------------------------------


def _with_candidates(bundle, count):
    """The bundle with ``count`` more candidates, each measured on every metric."""
    bundle = copy.deepcopy(bundle)
    bundle["candidates"] += [
        {
            "name": f"Extra {i}",
            "description": "",
            "measurements": {m["name"]: 0.5 + i / 1000 for m in bundle["metrics"]},
        }
        for i in range(count)
    ]
    return bundle


def test_import_queries_do_not_grow_with_candidates(case_study):
    study_import_bundle(bundle=case_study)  # the accounts exist from now on: each import then writes the same
    counts = {}
    for extra in (0, 40):
        bundle = _with_candidates(case_study, extra)
        bundle["title"] = f"With {extra} more"
        with CaptureQueriesContext(connection) as queries:
            study = study_import_bundle(bundle=bundle)
        counts[extra] = len(queries)
        names = list(study.candidates.order_by("position").values_list("name", flat=True))
        assert names == [c["name"] for c in bundle["candidates"]]
        assert list(study.candidates.order_by("position").values_list("position", flat=True)) == list(
            range(1, len(names) + 1)
        )
        assert Measurement.objects.filter(candidate__study=study).count() == 4 * len(names)
        assert study_export_bundle(study=study)["candidates"] == bundle["candidates"]
    assert counts[40] == counts[0]


def test_a_long_expert_list_is_checked_in_linear_time(case_study, unchanged):
    """60,001 experts, the last a repeat: refused at once (the check was
    quadratic and took 30 s), naming the repeat's position."""
    case_study["experts"] = [f"expert{i}" for i in range(60_000)] + ["expert17"]
    started = time.perf_counter()
    with unchanged(), pytest.raises(InvalidInput) as info:
        study_import_bundle(bundle=case_study)
    assert time.perf_counter() - started < 5
    assert info.value.errors == {"experts[60000]": ["'expert17' is listed twice"]}


def test_candidates_add_appends_in_one_insert(make_study):
    built = make_study()
    before = list(built.study.candidates.order_by("position").values_list("name", "position"))
    with CaptureQueriesContext(connection) as queries:
        added = services.candidates_add(
            study=built.study, candidates=[{"name": f" New {i} ", "description": "d"} for i in range(30)]
        )
    inserts = [q for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    # savepoint, the lock, the names taken, the last position, one INSERT, its history's INSERT, release
    assert len(inserts) == 2 and len(queries) == 7
    assert '"workspace_historicalcandidate"' in inserts[1]["sql"]
    assert [c.name for c in added] == [f"New {i}" for i in range(30)]  # trimmed, as candidate_add does
    after = list(built.study.candidates.order_by("position").values_list("name", "position"))
    last = before[-1][1]
    assert after == before + [(f"New {i}", last + 1 + i) for i in range(30)]


@pytest.mark.parametrize(
    "candidates, field, fragment",
    [
        ([{"name": "A"}, {"name": "J48"}], "candidates[1].name", "candidate 'J48' already exists in this study"),
        ([{"name": "A"}, {"name": "A "}], "candidates[1].name", "candidate 'A' already exists"),
        ([{"name": "A"}, {"name": "x" * 101}], "candidates[1].name", "at most 100 characters"),
        ([{"name": "A", "description": "a\x00"}], "candidates[0].description", "NUL"),
        ([{"name": 5}], "candidates[0].name", "must be text"),
    ],
)
def test_candidates_add_refuses_and_writes_nothing(make_study, unchanged, candidates, field, fragment):
    built = make_study()
    with unchanged(), pytest.raises(InvalidInput) as info:
        services.candidates_add(study=built.study, candidates=candidates)
    assert list(info.value.errors) == [field] and fragment in info.value.errors[field][0]


# --- imports at scale: a constant number of queries, the rows of one expert at a time -----


def _scaled_bundle(experts, candidates, tag):
    """A closed study with ``experts`` experts and ``candidates`` candidates,
    each expert giving every kind of input: votes, direct or AHP priorities
    (half of them with a local prioritisation of Accuracy's metrics), ranges
    and a row of peer weights."""
    names = [f"{tag}-expert{i}" for i in range(experts)]
    metrics = [
        ("Success rate", "Accuracy", "higher", [0.8, 0.95]),
        ("AUC", "Accuracy", "higher", None),
        ("Fold stdev", "Consistency", "lower", [0.15, 0.05]),
        ("Training time", "Efficiency", "lower", [60, 1]),
        ("Flexibility score", "Flexibility", "higher", None),
    ]

    def priorities(i):
        if i % 2:
            judgments = [
                ["Accuracy", "Consistency", 3],
                ["Accuracy", "Efficiency", 1 / (i + 1)],
                ["Consistency", "Efficiency", 2],
            ]
            return {"method": "ahp", "judgments": judgments}
        local = {"Accuracy": {"method": "ahp", "judgments": [["Success rate", "AUC", i + 2]]}}
        weights = {"Accuracy": 5 + i, "Consistency": 3, "Efficiency": 2}
        return {"method": "direct", "weights": weights, "metric_priorities": local}

    return {
        "format": "approve-study/1",
        "title": f"Scaled {tag}",
        "description": "",
        "phase": "closed",
        "attribute_threshold": 1,
        "metric_threshold": 1,
        "designer": f"{tag}-designer",
        "experts": names,
        "attributes": [
            {"name": name, "kind": kind, "description": ""}
            for name, kind in (
                ("Accuracy", "main"),
                ("Consistency", "main"),
                ("Efficiency", "complementary"),
                ("Flexibility", "complementary"),
            )
        ],
        "metrics": [
            {"name": name, "attribute": attribute, "better": better, "unit": "", "default_range": default}
            for name, attribute, better, default in metrics
        ],
        "candidates": [
            {
                "name": f"Candidate {c}",
                "description": f"number {c}",
                "measurements": {name: round(0.1 + (c * 7 + m) % 10 / 12, 6) for m, (name, *_) in enumerate(metrics)},
            }
            for c in range(candidates)
        ],
        "votes": {
            "attributes": {name: ["Efficiency"] if i % 2 == 0 else [] for i, name in enumerate(names)},
            "metrics": {name: ["Success rate", "AUC", "Fold stdev", "Training time"] for name in names},
        },
        "priorities": {name: priorities(i) for i, name in enumerate(names)},
        "ranges": {
            name: {"AUC": [0.6 + i / 100, 0.95]} | ({"Success rate": [0.7, 0.9]} if i % 3 == 0 else {})
            for i, name in enumerate(names)
        },
        "peer_weights": {
            rater: {ratee: (j + 1 + (i == j)) / (experts * (experts + 1) / 2 + 1) for j, ratee in enumerate(names)}
            for i, rater in enumerate(names)
        },
    }


# The whole import of _scaled_bundle, however many experts and candidates
# (new accounts for the designer and the experts every time; a staff import's
# designer is the importer, whose account is not looked up).
# A staff import stops at voting: the experts' imported inputs count only once
# they accept, so voting cannot close. Closing the assessment reads what is
# missing in three queries (selectors.missing_input_list). Saving the ranges
# marks them confirmed in one UPDATE (issue 16: ranges_confirmed_at). New
# accounts (the designer's, the experts') cost one read each for look-alike
# names (services.usernames_taken). Each bulk write also records its rows'
# history in one INSERT per table (issue 22; workspace.history). Closing the
# assessment first looks for an open revision round (one query).
# The command line closes the assessment: its missing-input check reads the
# selected elicited metrics too (issue 21), and it counts the experts who
# take part against the quorum (one query, issue 31: absent experts), and
# the ranges still to confirm (one query, issue 31: a metric made elicited).
IMPORT_QUERIES = {"command line": 137, "staff": 70}


@pytest.mark.parametrize("importer", ["command line", "staff"])
def test_import_queries_do_not_grow_with_experts_or_candidates(django_assert_num_queries, importer):
    """The same number of queries for 2 experts and 3 candidates as for 6
    experts and 9 candidates: each section of the bundle is written in bulk."""
    staff = User.objects.create_user(username="operator", is_staff=True) if importer == "staff" else None
    for experts, candidates, tag in ((2, 3, "small"), (6, 9, "large")):
        bundle = _scaled_bundle(experts, candidates, tag)
        if staff is not None:
            bundle["designer"] = staff.username  # the importer designs the study, whoever the bundle names
            _early("voting")(bundle)
        with django_assert_num_queries(IMPORT_QUERIES[importer]):
            study = study_import_bundle(bundle=bundle, importer=staff)
        assert canonical(study_export_bundle(study=study)) == canonical(bundle)
        assert study.phase == bundle["phase"]
        memberships = Membership.objects.filter(study=study, role="expert")
        assert memberships.count() == experts
        if staff is not None:  # pending until each accepts, with an invitation each
            assert set(memberships.values_list("status", "inputs_imported_by")) == {("pending", staff.pk)}
            assert study.invitations.filter(membership__in=memberships).count() == experts


def _outsider_bundle(importer, experts, items, candidates):
    """A draft bundle a signed-in user who is not staff imports: they are
    its designer and first expert, the others are invited."""
    attributes = [{"name": f"A{i}", "kind": "main" if i % 2 else "complementary"} for i in range(items)]
    metrics = [
        {"name": f"M{i}", "attribute": f"A{i % items}", "better": "lower" if i % 3 else "higher", "unit": "s"}
        for i in range(2 * items)
    ]
    return {
        "format": "approve-study/1",
        "title": f"Outsider {experts}",
        "designer": importer.username,
        "experts": [importer.username] + [f"invitee{experts}-{i}" for i in range(experts - 1)],
        "attributes": attributes,
        "metrics": metrics,
        "candidates": [
            {"name": f"C{c}", "measurements": {m["name"]: c / 10 for m in metrics}} for c in range(candidates)
        ],
    }


def test_an_outsiders_import_makes_as_many_queries_however_large(django_assert_num_queries):
    """Issue 17, finding 2: each invitation, attribute and metric took its
    own service call (2,800 queries at every limit, 460 of them locking the
    study again); they are written in bulk, in the bundle's order."""
    importer = User.objects.create_user(username="outsider")
    for experts, items, candidates in ((2, 2, 3), (9, 7, 11)):
        bundle = _outsider_bundle(importer, experts, items, candidates)
        # 45, and the history of each bulk write (issue 22); the importer designs it: no account looked up.
        with django_assert_num_queries(52):
            study = study_import_bundle(bundle=bundle, importer=importer)
        invited = list(study.invitations.order_by("id").values_list("username", flat=True))
        assert invited == bundle["experts"][1:]
        assert list(Membership.objects.filter(study=study, role="expert").values_list("user", flat=True)) == [
            importer.pk
        ]
        exported = study_export_bundle(study=study)
        assert [(a["name"], a["kind"]) for a in exported["attributes"]] == [
            (a["name"], a["kind"]) for a in bundle["attributes"]
        ]
        # Metrics are listed by attribute, each attribute's in the bundle's order.
        by_attribute = sorted(bundle["metrics"], key=lambda m: int(m["attribute"][1:]))
        assert [(m["name"], m["attribute"], m["better"], m["unit"]) for m in exported["metrics"]] == [
            (m["name"], m["attribute"], m["better"], m["unit"]) for m in by_attribute
        ]
        positions = Metric.objects.filter(study=study).order_by("attribute__position", "position")
        assert [m.position for m in positions if m.attribute.name == "A0"] == [1, 2]
        assert [c["measurements"] for c in exported["candidates"]] == [c["measurements"] for c in bundle["candidates"]]


@pytest.mark.parametrize(
    "mutate, field, message",
    [
        (lambda b: b["attributes"].append({"name": "A0"}), "attributes[2].name", "quality attribute 'A0' already"),
        (lambda b: b["attributes"][1].update(kind="minor"), "attributes[1].kind", "must be 'main' or"),
        (lambda b: b["metrics"].append({"name": "M1", "attribute": "A0"}), "metrics[4].name", "metric 'M1' already"),
        (lambda b: b["metrics"][2].update(default_range=[1]), "metrics[2].default_range", ""),
        (lambda b: b["metrics"][3].update(unit="u" * 51), "metrics[3].unit", "at most 50 characters"),
        (lambda b: b["experts"].append("no spaces"), "experts[2]", "is not a valid username"),
    ],
)
def test_an_outsiders_bulk_import_refuses_as_one_at_a_time_and_writes_nothing(unchanged, mutate, field, message):
    importer = User.objects.create_user(username="outsider")
    bundle = _outsider_bundle(importer, 2, 2, 1)
    mutate(bundle)
    with unchanged(), pytest.raises(InvalidInput) as info:
        study_import_bundle(bundle=bundle, importer=importer)
    assert list(info.value.errors) == [field] and message in info.value.errors[field][0]


def _replay_one_expert_at_a_time(bundle):
    """Build the bundle's study as a person would, through the one-expert
    services (what the importer did before it wrote each section in bulk)."""
    designer = services.user_get_or_create(username=bundle["designer"])
    study = services.study_create(
        designer=designer,
        title=bundle["title"],
        description=bundle["description"],
        attribute_threshold=bundle["attribute_threshold"],
        metric_threshold=bundle["metric_threshold"],
    )
    experts = {
        name: services.expert_add(study=study, user=services.user_get_or_create(username=name))
        for name in bundle["experts"]
    }
    attributes = {
        a["name"]: services.attribute_add(study=study, name=a["name"], kind=a["kind"], description=a["description"])
        for a in bundle["attributes"]
    }
    for m in bundle["metrics"]:
        services.metric_add(
            study=study,
            attribute=attributes[m["attribute"]],
            name=m["name"],
            better=m["better"],
            unit=m["unit"],
            default_range=m["default_range"],
        )
    for c in bundle["candidates"]:
        services.candidate_add(study=study, name=c["name"], description=c["description"])
        services.measurements_set(
            study=study,
            measurements=[{"candidate": c["name"], "metric": m, "value": v} for m, v in c["measurements"].items()],
        )
    services.study_open_voting(study=study)
    for name, expert in experts.items():
        services.votes_set(
            expert=expert, attributes=bundle["votes"]["attributes"][name], metrics=bundle["votes"]["metrics"][name]
        )
    services.study_close_voting(study=study)
    for name, priority in bundle["priorities"].items():
        services.priorities_set(expert=experts[name], **priority)
    for name, ranges in bundle["ranges"].items():
        services.ranges_set(expert=experts[name], ranges=ranges)
    for name, weights in bundle["peer_weights"].items():
        services.peer_weights_set(expert=experts[name], weights=weights)
    services.study_close_assessment(study=study)
    study.refresh_from_db()
    return study


def _stored(study):
    """What the study stores, beyond its bundle: each expert's inputs with
    the prioritisation results computed when they were saved, and every
    weight and judgment row by item name."""
    from workspace.models import AttributeJudgment, AttributeWeight, MetricJudgment, MetricWeight
    from workspace.selectors import expert_inputs_list

    by_expert = "prioritisation__expert__user__username"
    return {
        "inputs": expert_inputs_list(study=study, with_results=True),
        "attribute_weights": sorted(
            AttributeWeight.objects.filter(prioritisation__expert__study=study).values_list(
                by_expert, "attribute__name", "given", "weight"
            )
        ),
        "attribute_judgments": sorted(
            AttributeJudgment.objects.filter(prioritisation__expert__study=study).values_list(
                by_expert, "row__name", "column__name", "value"
            )
        ),
        "metric_weights": sorted(
            MetricWeight.objects.filter(prioritisation__expert__study=study).values_list(
                by_expert, "prioritisation__attribute__name", "metric__name", "given", "weight"
            )
        ),
        "metric_judgments": sorted(
            MetricJudgment.objects.filter(prioritisation__expert__study=study).values_list(
                by_expert, "row__name", "column__name", "value"
            )
        ),
        "consistency": sorted(
            AttributePrioritisation.objects.filter(expert__study=study).values_list(
                "expert__user__username", "method", "consistency_ratio"
            )
        )
        + sorted(
            MetricPrioritisation.objects.filter(expert__study=study).values_list(
                "expert__user__username", "attribute__name", "method", "consistency_ratio"
            )
        ),
        "measurements": sorted(
            Measurement.objects.filter(study=study).values_list("candidate__name", "metric__name", "value")
        ),
    }


def test_the_bulk_import_writes_what_one_expert_at_a_time_writes(db):
    bundle = _scaled_bundle(5, 4, "same")
    one_at_a_time = _replay_one_expert_at_a_time(bundle)
    expected_export, expected_rows = study_export_bundle(study=one_at_a_time), _stored(one_at_a_time)
    one_at_a_time.delete()
    imported = study_import_bundle(bundle=bundle)
    assert study_export_bundle(study=imported) == expected_export
    assert _stored(imported) == expected_rows
    # Every expert's stored result is there (read by GET my/priorities and the pages).
    results = {name: section["priorities"] for name, section in expected_rows["inputs"].items()}
    assert all(r["result"]["weights"] and set(r["result"]) >= {"consistency_ratio"} for r in results.values())
    assert all(r["metric_results"]["Accuracy"]["weights"] for r in list(results.values())[::2])


def test_the_bulk_import_refuses_the_first_expert_in_order(case_study, unchanged):
    """Two bad rows: the one a one-expert-at-a-time import meets first is
    named, as before."""
    case_study["peer_weights"]["informatician"]["informatician"] = 0.9
    case_study["peer_weights"]["clinician"]["clinician"] = 0.3
    first = next(name for name in case_study["peer_weights"] if name in ("informatician", "clinician"))
    with unchanged(), pytest.raises(InvalidInput) as info:
        study_import_bundle(bundle=case_study)
    assert list(info.value.errors) == [f"peer_weights.{first}"]
    assert "must be 1" in info.value.errors[f"peer_weights.{first}"][0]
