"""Ties (METHOD.md 6.2, Decision): two CEFs are equal when they differ by at
most ``engine.rules.TIE`` (1e-12), in every ranking: the results, the
what-if, the sensitivity of the weights, the comparison of two runs, the
Monte Carlo rank counts and leave one expert out."""

import copy
from fractions import Fraction

import numpy as np
import pytest
from django.urls import reverse
from django.utils.html import escape
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import compare, robustness, sensitivity, services
from engine.models import Run
from engine.rules import TIE
from workspace.bundles import study_import_bundle

from .test_runs import case_study_bundle

# Issue 31's example: weights 0.1 / 0.2 / 0.7, and two candidates that both
# score exactly 6/25.
WEIGHTS = (0.1, 0.2, 0.7)
SIX_25 = {"P": (0.1, 0.1, 0.3), "Q": (0.1, 0.8, 0.1)}
METRICS = ("Success rate", "Fold accuracy stdev", "Comprehensibility rating")
ATTRIBUTES = ("Accuracy", "Consistency", "Comprehensibility")


def six_25_bundle() -> dict:
    """The case study with every expert giving 0.1 / 0.2 / 0.7, the three
    metrics scored on [0, 1] (higher better) and P, Q and a clear third."""
    bundle = copy.deepcopy(case_study_bundle())
    for metric in bundle["metrics"]:
        if metric["name"] in METRICS:
            metric.update(better="higher", unit="", default_range=[0.0, 1.0])
    for priorities in bundle["priorities"].values():
        priorities["weights"] = dict(zip(ATTRIBUTES, WEIGHTS, strict=True))
    values = {**SIX_25, "R": (0.05, 0.05, 0.05)}
    bundle["candidates"] = [
        {
            "name": name,
            "description": "",
            "measurements": {**dict(zip(METRICS, scores, strict=True)), "Training time": 1.0},
        }
        for name, scores in values.items()
    ]
    return bundle


def test_the_exact_values_are_equal():
    # 6/25 both, in exact arithmetic: the floats differ only by rounding.
    for scores in SIX_25.values():
        assert sum(Fraction(w) * Fraction(g) for w, g in zip(WEIGHTS, scores, strict=True)) == pytest.approx(
            Fraction(6, 25), abs=1e-16
        )
        assert sum(Fraction(str(w)) * Fraction(str(g)) for w, g in zip(WEIGHTS, scores, strict=True)) == Fraction(6, 25)


@pytest.fixture
def six_25_run(db):
    study = study_import_bundle(bundle=six_25_bundle())
    run = services.run_launch(study=study, launched_by=study.designer)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def test_a_run_gives_two_roundings_of_six_25_the_same_rank(six_25_run):
    run = six_25_run
    candidates = {c["name"]: c for c in run.results["candidates"]}
    assert candidates["P"]["cef"] == pytest.approx(0.24, abs=1e-15)
    assert candidates["Q"]["cef"] == pytest.approx(0.24, abs=1e-15)
    assert abs(candidates["P"]["cef"] - candidates["Q"]["cef"]) <= TIE
    assert (candidates["P"]["rank"], candidates["Q"]["rank"], candidates["R"]["rank"]) == (1, 1, 3)
    # Listed by the tie's rule: P before Q (their weighted scores tie too, so by position).
    assert [c["name"] for c in run.results["candidates"]] == ["P", "Q", "R"]


def test_the_run_pages_say_the_tie_and_the_sensitivity_names_no_weight_for_noise(six_25_run, client):
    run = six_25_run
    client.force_login(run.study.designer)
    page = client.get(reverse("run_page", args=[run.pk])).content.decode()
    assert "P and Q share the first rank with a CEF of 0.2400." in page
    # The tie is exact (6/25 both): any move of a weight the two score
    # differently on breaks it, so those weights' intervals are [s, s] and
    # the sentence says the tie, whichever of the two roundings came first.
    stored = sensitivity.stored_ranking(run.results, run.snapshot["metrics"])
    reports = {report.name: report for report in sensitivity.weight_reports(stored)}
    assert reports["Accuracy"].fragility == float("inf")  # P and Q score alike on it
    for name in ("Consistency", "Comprehensibility"):
        assert reports[name].ranking == (reports[name].share, reports[name].share)
        assert reports[name].fragility == 0.0
    sentence = sensitivity.fragility_sentence(list(reports.values()), "P")
    assert sentence == (
        "The most fragile weight is Consistency's (0.200): Q and P tie there, and if it moved at all the tie "
        "would break (Q ahead if it rose, P if it fell)."
    )
    robustness_page = client.get(reverse("run_robustness", args=[run.pk])).content.decode()
    assert escape(sentence) in robustness_page
    # the same candidates listed the other way round say the same
    swapped = copy.deepcopy(run.results)
    swapped["candidates"] = swapped["candidates"][1::-1] + swapped["candidates"][2:]
    reports = sensitivity.weight_reports(sensitivity.stored_ranking(swapped, run.snapshot["metrics"]))
    assert [(r.ranking, r.winner, r.fragility) for r in reports] == [
        (r.ranking, r.winner, r.fragility)
        for r in sensitivity.weight_reports(sensitivity.stored_ranking(run.results, run.snapshot["metrics"]))
    ]


# --- competition ranks: a literal reference ------------------------------------------


def literal_ranks(cef: list[float]) -> list[int]:
    """METHOD.md 6.2 and 8, word for word: 1 + the number of candidates whose
    CEF exceeds this one's by more than TIE."""
    return [1 + sum(1 for other in cef if other > value + TIE) for value in cef]


@pytest.mark.parametrize(
    ("cef", "ranks"),
    [
        ([0.24, 0.24000000000000002, 0.1], [1, 1, 3]),
        ([0.24000000000000002, 0.24], [1, 1]),
        ([0.5, 0.5 - 2e-12, 0.5 - 4e-12], [1, 2, 3]),
        # equality within TIE is no equivalence: the ends of a chain differ
        ([0.0, 0.8e-12, 1.6e-12], [2, 1, 1]),
        ([0.3, 0.5, 0.3, 0.1, 0.0, 0.0, 0.3], [2, 1, 2, 5, 6, 6, 2]),
        ([], []),
    ],
)
def test_competition_ranks_with_tie(cef, ranks):
    assert literal_ranks(cef) == ranks
    assert robustness.competition_ranks(cef).tolist() == ranks
    if cef:
        assert robustness.competition_ranks([cef, cef[::-1]]).tolist() == [ranks, ranks[::-1]]


def test_the_results_order_lists_a_tie_by_weighted_score_then_position():
    cef = [0.24, 0.24000000000000002, 0.0, 0.0]
    weighted = [0.24, 0.24000000000000002, 0.5, 0.5 + 1e-13]
    assert robustness.ranking_order(cef, weighted).tolist() == [0, 1, 2, 3]
    assert robustness.what_if([0.1, 0.2, 0.7], list(SIX_25.values()), [False, False]).ranks.tolist() == [1, 1]


@st.composite
def scores_with_ties(draw):
    """A few exact values (multiples of 1/64, exact in binary), each given
    to several candidates, plus a rounding of at most TIE / 4 each, so the
    candidates of one value tie and those of two values are 1/64 apart."""
    values = draw(st.lists(st.integers(0, 64), min_size=1, max_size=5))
    m = draw(st.integers(1, 12))
    which = draw(st.lists(st.integers(0, len(values) - 1), min_size=m, max_size=m))
    noise = draw(st.lists(st.floats(-TIE / 4, TIE / 4), min_size=m, max_size=m))
    exact = [values[w] / 64 for w in which]
    return exact, [e + d for e, d in zip(exact, noise, strict=True)]


@settings(max_examples=200, deadline=None)
@given(scores_with_ties(), st.randoms(use_true_random=False))
def test_roundings_and_permutations_never_change_ranks(case, random):
    exact, rounded = case
    expected = literal_ranks(exact)
    assert robustness.competition_ranks(rounded).tolist() == expected
    assert robustness.competition_ranks(rounded).tolist() == literal_ranks(rounded)
    permutation = list(range(len(rounded)))
    random.shuffle(permutation)
    shuffled = robustness.competition_ranks([rounded[i] for i in permutation]).tolist()
    assert shuffled == [expected[i] for i in permutation]
    # pairwise wins: only the values apart count
    wins = robustness.pairwise_winning([rounded])
    assert wins.tolist() == [[float(a > b) for b in exact] for a in exact]


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0.0, 0.5),
    st.lists(st.one_of(st.floats(1.01 * TIE, 3 * TIE), st.floats(3 * TIE, 0.05)), min_size=1, max_size=10),
    st.randoms(use_true_random=False),
)
def test_scores_apart_by_more_than_tie_keep_their_order(start, gaps, random):
    # each next score more than TIE above the one before, in any order
    cef = [start]
    for gap in gaps:
        cef.append(cef[-1] + gap)
    random.shuffle(cef)
    ranks = robustness.competition_ranks(cef).tolist()
    assert ranks == [1 + sum(other > value for other in cef) for value in cef] == literal_ranks(cef)
    assert sorted(ranks) == list(range(1, len(cef) + 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=9), st.lists(st.floats(0.0, 2e-12), max_size=9))
def test_competition_ranks_equal_the_literal_reference(values, offsets):
    # values near each other at TIE's scale as well as far apart
    cef = values + [values[0] + offset for offset in offsets]
    assert robustness.competition_ranks(cef).tolist() == literal_ranks(cef)
    stack = np.array([cef, cef[::-1]])
    assert robustness.competition_ranks(stack).tolist() == [literal_ranks(cef), literal_ranks(cef[::-1])]


# --- leave one out, Monte Carlo, comparison ------------------------------------------

# Four experts whose weights all score P and Q alike (a_2 = 3.5 a_1), so that
# every consensus does: the CEFs are equal, their roundings not.
TIED_PANEL = {
    "weights": np.array([[0.1, 0.2, 0.7], [0.55, 0.1, 0.35], [0.325, 0.15, 0.525], [0.01, 0.22, 0.77]]),
    "peer_weights": np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.5, 0.2, 0.2], [0.25] * 4, [0.2, 0.2, 0.2, 0.4]]),
    "lower": np.zeros((4, 3)),
    "upper": np.ones((4, 3)),
    "measurements": np.array([*SIX_25.values(), (0.05, 0.05, 0.05)]),
}


def test_leaving_an_expert_out_changes_no_winner_by_rounding():
    result = robustness.leave_one_out(**TIED_PANEL)
    # The two first candidates are tied within TIE in every panel, however the
    # CPU rounds them: on some machines the roundings differ from one panel to
    # the next (0.24 above or below 0.24000000000000002), on others they do not.
    cef = result.cef.tolist()
    assert all(abs(row[0] - row[1]) <= TIE for row in cef) and any(row[0] != row[1] for row in cef)
    # The rankings are the same either way.
    assert result.full_ranks.tolist() == [1, 1, 3]
    assert result.ranks.tolist() == [[1, 1, 3]] * 4
    assert result.order.tolist() == [[0, 1, 2]] * 4
    assert result.winner_changed.tolist() == [False] * 4
    assert result.kendall_tau.tolist() == [1.0] * 4


def test_monte_carlo_counts_a_rounding_as_a_tie():
    # nothing sampled: every sample is the run, whose CEFs tie
    counts = robustness.monte_carlo_chunk(
        robustness.MonteCarloInputs(**TIED_PANEL), robustness.SamplingSpec(), seed=1, start=0, count=70
    )
    assert counts.ranks.tolist() == [[70, 0, 0], [70, 0, 0], [0, 0, 70]]
    assert counts.pairwise.tolist() == [[0, 0, 70], [0, 0, 70], [0, 0, 0]]
    summary = robustness.summary(counts)
    assert summary.best.tolist() == [1.0, 1.0, 0.0]
    assert robustness.rank_acceptability([[0.24, 0.24000000000000002]]).tolist() == [[1.0, 0.0], [1.0, 0.0]]
    assert robustness.pairwise_winning([[0.24, 0.24000000000000002]]).tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_pairwise_wins_are_counted_on_the_scores_not_the_ranks():
    # 0, 0.8e-12 and 1.6e-12 rank 2, 1, 1: only the last beats the first
    chain = [[0.0, 0.8e-12, 1.6e-12]]
    assert robustness.competition_ranks(chain).tolist() == [[2, 1, 1]]
    assert robustness.pairwise_winning(chain).tolist() == [[0, 0, 0], [0, 0, 0], [1, 0, 0]]


def test_two_runs_compared_move_nobody_for_a_rounding():
    before = {"P": 0.24, "Q": 0.24000000000000002, "R": 0.05}
    after = {"P": 0.24000000000000002, "Q": 0.24, "R": 0.05}
    assert compare.all_net_passes(before, after) == {"P": 0, "Q": 0, "R": 0}
    assert [compare.net_passes(name, before, after) for name in before] == [0, 0, 0]
    # a new candidate within TIE of P passes nobody; one above by more does
    assert compare.all_net_passes(before, {**after, "N": 0.24 + 0.5e-12})["P"] == 0
    assert compare.all_net_passes(before, {**after, "N": 0.24 + 5e-12})["P"] == -1
    # a gone candidate within TIE above counts as no pass
    assert compare.all_net_passes({**before, "G": 0.24 + 0.5e-12}, after)["P"] == 0
    assert compare.all_net_passes({**before, "G": 0.24 + 5e-12}, after)["P"] == 1
    # real moves still count (P and Q were tied: Q passes nobody by coming ahead of P)
    assert compare.all_net_passes(before, {"P": 0.1, "Q": 0.24, "R": 0.2}) == {"P": -1, "Q": 0, "R": 1}
