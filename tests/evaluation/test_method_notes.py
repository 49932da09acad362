"""The figures of docs/method.md's notes (issue 16, finding 14), computed
from the code, so that the page cannot drift from what the product does:
case study 1's scores rebuilt, the literal reading of source 003's eta,
P(negative) from a score, lift against kds, and the Relevance Score of
wrong predictions in an equiprobable context."""

import io
import json
from pathlib import Path

import numpy as np
import pytest

from engine.core import evaluate, individual_scores
from evaluation import metrics
from evaluation.elicitation import elicit_diagonal
from evaluation.predictions import read_predictions
from evaluation.report import CandidateReport, Options

DEMO = Path(__file__).resolve().parents[2] / "workspace" / "demo"

W = [[0.63, 0.20, 0.17], [0.56, 0.25, 0.19], [0.47, 0.15, 0.38], [0.37, 0.31, 0.32]]
V = [[0.7, 0.1, 0.1, 0.1], [0.1, 0.5, 0.2, 0.2], [0.25, 0.25, 0.25, 0.25], [0.2, 0.2, 0.2, 0.4]]


def test_case_study_1_scores_rebuilt_by_normalising_to_the_best_candidate():
    """method.md 6.3: values over the best, ranges over their upper bound,
    consistency as 1 - the standard deviation with the unprinted bound 0.95."""
    bundle = json.loads((DEMO / "case-study-1.json").read_text(encoding="utf-8"))
    measured = {c["name"]: c["measurements"] for c in bundle["candidates"]}
    best = [
        max(m["Success rate"] for m in measured.values()),
        max(1 - m["Fold accuracy stdev"] for m in measured.values()),
        max(m["Comprehensibility rating"] for m in measured.values()),
    ]
    assert best == [0.924, pytest.approx(0.916), 8]
    lower, upper = np.array([[0.80 / 0.95, 0.95, 6 / 10]]), np.ones((1, 3))
    normalised = np.array(
        [
            [
                m["Success rate"] / best[0],
                (1 - m["Fold accuracy stdev"]) / best[1],
                m["Comprehensibility rating"] / best[2],
            ]
            for m in (measured["J48"], measured["JRip"])
        ]
    )
    scores = np.array([individual_scores(lower, upper, row)[0] for row in normalised])
    assert scores.round(4).tolist() == [[0.4722, 0.5197, 0.6875], [0.5956, 0.6507, 1.0]]
    paper = np.array([[0.475, 0.52, 0.687], [0.595, 0.66, 1.0]])
    assert (np.abs(scores - paper) <= 0.001).sum() == 4
    assert np.abs(scores - paper).max().round(4) == 0.0093
    run = evaluate(
        weights=W, peer_weights=V, lower=np.tile(lower, (4, 1)), upper=np.tile(upper, (4, 1)), measurements=normalised
    )
    assert run.cef.round(4).tolist() == [0.5354, 0.7065]
    assert np.abs(run.cef - [0.536, 0.707]).max() < 0.001
    assert (np.array([0.53, 0.23, 0.24]) @ scores.T).round(4).tolist() == [0.5348, 0.7053]


def _eta(slopes, *, softmax, n_points=20_001):
    x = np.linspace(-1.0, 1.0, n_points)
    if softmax:
        logits = np.outer(x, slopes)
        eta = np.exp(logits - logits.max(axis=1, keepdims=True))
    else:
        eta = 1 / (1 + np.exp(np.outer(x, slopes)))
    return eta / eta.sum(axis=1, keepdims=True)


@pytest.mark.parametrize(
    ("softmax", "misses"), [(True, (0.0005, 0.0005, 0.0047, 0.0069)), (False, (0.001, 0.020, 0.028, 0.249))]
)
def test_table_2_recovered_with_eta_read_as_a_softmax_and_missed_with_the_literal_reading(softmax, misses):
    """method.md 7.4: source 003's Table 2 under both readings of eta."""
    rows = [
        ((1, 3, 5), (0.21, 0.59, 0.20)),
        ((1, 3, 5), (0.23, 0.15, 0.62)),
        ((1, 3, 6, 10), (0.22, 0.13, 0.14, 0.52)),
        ((1, 3, 6, 10), (0.58, 0.17, 0.08, 0.18)),
    ]
    found = []
    for slopes, published in rows:
        target = np.array(published) / sum(published)
        weights, _ = elicit_diagonal(
            lambda a, b, t=target: bool(t @ a > t @ b), _eta(np.array(slopes, float), softmax=softmax)
        )
        found.append(float(np.abs(weights - np.array(published)).max()))
    digits = 4 if softmax else 3
    assert [round(miss, digits) for miss in found] == list(misses)


def test_p_negative_from_a_score_loses_what_lies_below_1e_16():
    """method.md 7.2: 1 - score is exact to 1.1e-16 only; proba columns keep it."""
    assert 1 - np.nextafter(1.0, 0) == pytest.approx(1.1102230246251565e-16)
    from_score = b"candidate,y_true,score\nA,no,0.99999999999999999\nA,yes,0.9\n"
    from_proba = b"candidate,y_true,proba:no,proba:yes\nA,no,1e-17,1\nA,yes,0.1,0.9\n"
    options = Options(n_parameters={"A": 1})
    score = CandidateReport(read_predictions(io.BytesIO(from_score), positive="yes"), "A", options)
    proba = CandidateReport(read_predictions(io.BytesIO(from_proba), positive="yes"), "A", options)
    assert score.probabilities[0].tolist() == [0.0, 1.0] and proba.probabilities[0].tolist() == [1e-17, 1.0]
    assert score.log_loss() == proba.log_loss()  # log loss clips at 2.2e-16 either way
    with pytest.raises(ValueError, match="the likelihood is 0"):
        score.aic()
    assert proba.aic() == pytest.approx(2 - 2 * (np.log(1e-17) + np.log(0.9)))


def kds_lift(is_positive: np.ndarray, scores: np.ndarray, deciles: int = 10) -> np.ndarray:
    """kds.metrics.decile_table's cumulative lift: rows sorted by score (ties
    in the order given), deciles cut by row, cum_resp_pct / cum_cust_pct."""
    ranked = is_positive[np.argsort(-scores, kind="stable")]
    decile = np.linspace(1, deciles + 1, len(ranked), False, dtype=int)
    found = np.cumsum([ranked[decile == d].sum() for d in range(1, deciles + 1)])
    cases = np.cumsum([(decile == d).sum() for d in range(1, deciles + 1)])
    return (found / ranked.sum()) / (cases / len(ranked))


def test_lift_is_cumulative_spreads_ties_and_differs_from_kds_as_method_md_says():
    is_positive = np.array([1, 1, 0] + [0] * 7)
    scores = np.array([0.9, 0.5, 0.5] + [0.1] * 7)
    swapped = np.array([0, 2, 1, *range(3, 10)])
    ours = metrics.lift_gain(is_positive, scores, pos_label=1)[2]
    assert ours[1] == 3.75 and metrics.lift_gain(is_positive[swapped], scores[swapped], pos_label=1)[2][1] == 3.75
    assert kds_lift(is_positive, scores)[1] == 5.0 and kds_lift(is_positive[swapped], scores[swapped])[1] == 2.5
    # the demo's J48: kds cuts whole rows (11, 21, ... of 102), here 10.2, 20.4, ...
    data = read_predictions(DEMO / "case-study-1-predictions.csv", positive="tumour")
    j48 = CandidateReport(data, "J48")
    truth = (j48.y_true == j48.positive).astype(int)
    assert round(j48.lift_gain()[2][5], 4) == 1.6346 and round(kds_lift(truth, j48.scores)[5], 4) == 1.6135
    gaps = []
    for name in data.candidates:
        candidate = CandidateReport(data, name)
        positives = (candidate.y_true == candidate.positive).astype(int)
        gaps.append(np.abs(candidate.lift_gain()[2] - kds_lift(positives, candidate.scores)).max())
    assert round(max(gaps), 3) == 0.021


def test_an_equiprobable_context_gives_wrong_predictions_100():
    """method.md 7.1: plausible, not right."""
    context = np.array(["x"] * 4)
    wrong = metrics.relevance_score(
        np.array(["yes", "no", "yes", "no"]), np.array(["no", "yes", "no", "yes"]), context=context
    )
    assert wrong == 100.0
    three_to_one = metrics.relevance_score(
        np.array(["yes", "yes", "yes", "no"]), np.array(["no", "yes", "yes", "yes"]), context=context
    )
    assert three_to_one == pytest.approx((50 + 100 + 100 + 250 / 3) / 4) == pytest.approx(83.3333333)
