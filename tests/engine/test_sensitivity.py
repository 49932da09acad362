"""engine.sensitivity: what the robustness page and API say of a run's
weights, checked on METHOD.md 8's reference case and against a literal
scan of the weight."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import sensitivity


def stored(g, a, vetoed=None, attribute_of=None):
    g = np.asarray(g, dtype=float)
    n = g.shape[1]
    attribute_of = list(range(n)) if attribute_of is None else attribute_of
    vetoed = [False] * len(g) if vetoed is None else vetoed
    cef = [0.0 if v else float(np.dot(row, a)) for row, v in zip(g, vetoed, strict=True)]
    order = sorted(range(len(g)), key=lambda c: -cef[c])
    results = {
        "selected_attributes": [f"A{i}" for i in range(max(attribute_of) + 1)],
        "metrics": [f"m{j}" for j in range(n)],
        "metric_weights": list(a),
        "candidates": [{"name": f"c{c}", "group_scores": list(g[c]), "vetoed": vetoed[c], "rank": 0} for c in order],
    }
    metrics = [{"name": f"m{j}", "attribute": f"A{attribute_of[j]}"} for j in range(n)]
    return sensitivity.stored_ranking(results, metrics)


def test_reference_case_sentence_names_the_first_overtaking():
    # METHOD.md 8: CEFs 0.5, 0.4, 0.35 at a = [0.5, 0.5]; candidate 1
    # overtakes 0 below 5/12 of metric 0's weight.
    ranking = stored([[0.9, 0.1], [0.2, 0.6], [0.3, 0.4]], [0.5, 0.5])
    reports = sensitivity.weight_reports(ranking)
    first = reports[0]
    assert first.ranking == pytest.approx((5 / 12, 2 / 3))
    assert first.winner == pytest.approx((5 / 12, 1.0))
    assert first.below.overtaker == "c1" and first.below.at == pytest.approx(5 / 12)
    assert first.above is None
    assert first.fragility == pytest.approx(float(Fraction(1, 2) - Fraction(5, 12)))
    # A0 falling below 5/12 is A1 rising above 7/12: the same change, equally near
    assert sensitivity.fragility_sentence(reports, "c0") in (
        "The most fragile weight is A0's (0.500): if it fell below 0.417, c1 would overtake c0.",
        "The most fragile weight is A1's (0.500): if it rose above 0.583, c1 would overtake c0.",
    )


def test_the_first_change_is_found_only_when_asked(monkeypatch):
    # The page asks it of the most fragile weight alone: 25 weights at the
    # limits are one search, not 25. Asked, it is what the search finds.
    ranking = stored([[0.9, 0.1, 0.5], [0.2, 0.6, 0.4], [0.3, 0.4, 0.9]], [0.4, 0.35, 0.25], attribute_of=[0, 0, 1])
    searched = []
    search = sensitivity._first_change
    monkeypatch.setattr(sensitivity, "_first_change", lambda *args: searched.append(args) or search(*args))
    reports = sensitivity.weight_reports(ranking)
    assert searched == []
    sentence = sensitivity.fragility_sentence(reports, "c0")
    assert len(searched) == 1 and "would overtake" in sentence
    fragile = sensitivity.most_fragile(reports)
    for report in reports:
        if np.isfinite(report.fragility):
            at = report._at
            assert report.first_change == search(
                ranking, report._group, report.share, at, report.intercepts, report.slopes
            )
        else:
            assert report.first_change is None
    # once each (the most fragile's kept from the sentence)
    assert len(searched) == sum(np.isfinite(report.fragility) for report in reports)
    assert fragile.first_change.overtaker in sentence


def test_no_change_anywhere_says_so():
    ranking = stored([[0.9, 0.9], [0.1, 0.1]], [0.5, 0.5])
    reports = sensitivity.weight_reports(ranking)
    assert sensitivity.most_fragile(reports) is None
    assert sensitivity.fragility_sentence(reports, "c0").startswith("No single weight changes the ranking")


def _sign(differences):
    return np.where(np.abs(differences) <= 1e-12, 0.0, np.sign(differences))


def literal_first_change(g, a, group, vetoed):
    """Scan the group's weight over [0, 1] in steps of 1e-5 and return the
    t nearest to its value where the ranking changes as METHOD.md 8 says:
    a pair ordered at its value in reverse order, or a pair tied at its
    value untied (None when that never happens)."""
    g, a = np.asarray(g), np.asarray(a)
    inside = np.zeros(len(a), dtype=bool)
    inside[group] = True
    s = a[inside].sum()
    t = np.linspace(0.0, 1.0, 100_001)[:, None]
    weights = np.where(inside, a * t / s, a * (1 - t) / (1 - s))  # (T, n)
    cef = np.where(vetoed, 0.0, weights @ g.T)  # (T, m)
    at_s = np.where(vetoed, 0.0, g @ a)
    # Differences within rounding (1e-12) are ties: two candidates whose lines
    # are the same (engine.robustness's _SAME_SLOPE) stay tied along the scan.
    base = _sign(at_s[:, None] - at_s[None, :])
    now = _sign(cef[:, :, None] - cef[:, None, :])
    changed = ((base != 0) & (now == -base) | (base == 0) & (now != 0)).any(axis=(1, 2))
    if not changed.any():
        return None
    ts = t[changed, 0]
    return float(ts[np.argmin(np.abs(ts - s))])


@settings(max_examples=30, deadline=None)
# Two candidates with the same line (0.5 whatever metric 0's weight) stay tied:
# the scan once saw them untied by rounding.
@example(case=([[0.5, 0.5, 0.5], [0.5, 0.75, 0.25]], [1.0, 0.5, 0.5]))
# Seeds 0 and 20240611 once found this: the scan saw metric 1 change the ranking at
# a share of 0.14285 while the reports said it never did (before crossings came
# from score differences).
@example(case=([[0.5, 0.25, 0.25], [0.25, 0.5, 0.5], [0.375, 0.5, 0.25]], [0.25, 1.0, 0.5]))
@given(
    st.integers(min_value=2, max_value=6).flatmap(
        lambda m: st.tuples(
            st.lists(
                st.lists(st.floats(min_value=0.05, max_value=0.95), min_size=3, max_size=3), min_size=m, max_size=m
            ),
            st.lists(st.floats(min_value=0.1, max_value=1.0), min_size=3, max_size=3),
        )
    )
)
def test_the_most_fragile_weight_is_where_a_literal_scan_first_sees_the_ranking_change(case):
    g, raw = case
    a = np.asarray(raw) / sum(raw)
    vetoed = [False] * len(g)
    ranking = stored(g, a, vetoed)
    reports = sensitivity.weight_reports(ranking)[len(a) :]  # each metric alone
    for j, report in enumerate(reports):
        literal = literal_first_change(g, a, [j], np.asarray(vetoed))
        if literal is None:
            assert (
                report.fragility == float("inf")
                or report.first_change is None
                or abs(report.first_change.at - report.share) < 1e-5
            )
        else:
            assert report.first_change is not None
            assert report.first_change.at == pytest.approx(literal, abs=2e-5)
