"""The rules of engine.rules as the services apply them: each bound is
tried on both sides, a refusal names the field and writes nothing."""

import math
import time

import pytest

from engine import services as engine_services
from engine.models import Run
from engine.rules import MIN_PEER_WEIGHT, SCALE_INPUT_SLACK, SCALE_MIN
from workspace import limits, services
from workspace.models import AttributeVote, PeerWeight

from .test_services import refused

pytestmark = pytest.mark.django_db


# --- sums (peer weights) ----------------------------------------------------------------


@pytest.mark.parametrize("carol", [0.399999, 0.400001])
def test_peer_weights_one_millionth_from_1_are_accepted_on_both_sides(make_study, carol):
    built = make_study("assessment")
    services.peer_weights_set(expert=built.bob, weights={"bob": 0.6, "carol": carol})
    assert sorted(PeerWeight.objects.filter(rater=built.bob).values_list("weight", flat=True)) == [carol, 0.6]


@pytest.mark.parametrize("carol, total", [(0.3999989, "0.9999989"), (0.4000011, "1.0000011")])
def test_peer_weights_further_from_1_are_refused_on_both_sides(make_study, unchanged, carol, total):
    built = make_study("assessment")
    weights = {"bob": 0.6, "carol": carol}
    errors = refused(unchanged, lambda: services.peer_weights_set(expert=built.bob, weights=weights))
    assert errors == {"weights": [f"row sums to {total}, must be 1"]}


# --- the smallest peer weight ---------------------------------------------------------------


@pytest.mark.parametrize("tiny", [5e-324, 1e-300, math.nextafter(MIN_PEER_WEIGHT, 0)])
def test_a_peer_weight_below_the_minimum_is_refused_naming_it(make_study, unchanged, tiny):
    built = make_study("assessment")
    errors = refused(
        unchanged, lambda: services.peer_weights_set(expert=built.bob, weights={"bob": 0.999999, "carol": tiny})
    )
    assert list(errors) == ["weights.carol"]
    assert errors["weights.carol"][0].startswith(f"must be at least {MIN_PEER_WEIGHT:g}, got")


def test_peer_weights_at_the_minimum_are_accepted_and_the_run_succeeds(make_study):
    built = make_study("assessment", inputs=True)
    for rater, ratee in (("bob", "carol"), ("carol", "bob")):
        weights = {rater: 1 - MIN_PEER_WEIGHT, ratee: MIN_PEER_WEIGHT}
        services.peer_weights_set(expert=built.experts[rater], weights=weights)
    services.study_close_assessment(study=built.study)
    run = engine_services.run_launch(study=built.study, launched_by=built.study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    # Each expert trusts themself almost entirely and the weights differ, so
    # the consensus takes millions of layers, counted in bounded time.
    assert run.results["iterations"] > 1_000_000


# --- the smallest direct share -----------------------------------------------------------------


def test_a_direct_weight_share_below_the_minimum_is_refused_naming_it(make_study, unchanged):
    built = make_study("assessment")
    weights = {"Accuracy": 1, "Consistency": 1e6, "Efficiency": 1e6}  # a share of 5e-7
    errors = refused(unchanged, lambda: services.prioritisation_set(expert=built.bob, method="direct", weights=weights))
    assert list(errors) == ["weights.Accuracy"]
    assert "share would be 5e-07" in errors["weights.Accuracy"][0] and "at least 1e-06" in errors["weights.Accuracy"][0]


def test_a_direct_weight_share_above_the_minimum_is_accepted(make_study):
    built = make_study("assessment")
    weights = {"Accuracy": 1, "Consistency": 2.5e5, "Efficiency": 2.5e5}  # a share of about 2e-6
    saved = services.prioritisation_set(expert=built.bob, method="direct", weights=weights)
    assert saved.result_record["weights"]["Accuracy"] == pytest.approx(1 / 500_001, rel=1e-12)


# --- the pairwise scale --------------------------------------------------------------------------


def _judgments(value):
    return [["Accuracy", "Consistency", value], ["Accuracy", "Efficiency", 1], ["Consistency", "Efficiency", 1]]


@pytest.mark.parametrize("value", [SCALE_MIN * (1 - SCALE_INPUT_SLACK), 9.0])
def test_judgments_at_the_edges_of_the_scale_are_accepted(make_study, value):
    built = make_study("assessment")
    saved = services.prioritisation_set(expert=built.carol, method="ahp", judgments=_judgments(value))
    assert saved.judgments.get(row__name="Accuracy", column__name="Consistency").value == value


@pytest.mark.parametrize("value", [math.nextafter(SCALE_MIN * (1 - SCALE_INPUT_SLACK), 0), math.nextafter(9.0, 10)])
def test_judgments_just_outside_the_scale_are_refused(make_study, unchanged, value):
    built = make_study("assessment")
    errors = refused(
        unchanged, lambda: services.prioritisation_set(expert=built.carol, method="ahp", judgments=_judgments(value))
    )
    assert errors == {"judgments[0]": [f"value {value:g} is outside the scale 1/9..9"]}


# --- duplicate names are found in linear time -------------------------------------------------------


def test_forty_thousand_vote_names_are_answered_well_under_a_second(make_study, unchanged):
    built = make_study("voting")
    distinct = [f"attribute {i}" for i in range(40_000)]
    started = time.perf_counter()
    errors = refused(unchanged, lambda: services.votes_set(expert=built.bob, attributes=distinct))
    assert time.perf_counter() - started < 0.5
    assert len(errors["attributes"]) == 40_000
    twice = [f"x{i % 20_000}" for i in range(40_000)]
    started = time.perf_counter()
    errors = refused(unchanged, lambda: services.votes_set(expert=built.bob, metrics=twice))
    assert time.perf_counter() - started < 0.5
    assert errors["metrics"][0].startswith("names given twice: x0, x1, x10, x100,")


def test_votes_given_twice_are_refused_by_name(make_study, unchanged):
    built = make_study("voting")
    errors = refused(
        unchanged,
        lambda: services.votes_set(expert=built.bob, attributes=["Efficiency", "Flexibility", "Efficiency"]),
    )
    assert errors == {"attributes": ["names given twice: Efficiency"]}
    services.votes_set(expert=built.bob, attributes=["Efficiency", "Flexibility"])
    assert AttributeVote.objects.filter(expert=built.bob).count() == 2


# --- vote thresholds -----------------------------------------------------------------------------------


def test_a_vote_threshold_at_the_maximum_is_accepted_and_above_it_refused(make_study, unchanged):
    built = make_study("draft")
    services.study_update(study=built.study, attribute_threshold=limits.MAX_THRESHOLD)
    built.study.refresh_from_db()
    assert built.study.attribute_threshold == 10000
    errors = refused(unchanged, lambda: services.study_update(study=built.study, metric_threshold=10001))
    assert errors == {"metric_threshold": ["must be at most 10000, got 10001"]}
