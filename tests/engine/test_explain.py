"""Results in words (engine.explain): veto sentences grouped per metric and
the meaning of expert influence."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.explain import MetricInfo, influence_sentence, join_names, quantity, veto_sentences


def veto(expert, metric, value, least, desired=10):
    return {"expert": expert, "metric": metric, "value": value, "range": [least, desired]}


def test_one_expert_one_metric_reads_as_the_issue_says():
    sentences = veto_sentences("IBk", [veto("clinician", "Comprehensibility rating", 0, 6)])
    assert sentences == ["clinician's least acceptable Comprehensibility rating is 6; IBk measured 0."]


def test_an_elicited_metric_s_veto_gives_each_expert_s_own_value():
    """Issue 31: each expert has their own value of an elicited metric, so
    the sentence gives the vetoing expert's, not one shared measured value."""
    unit = "expected cost per instance"
    vetoes = [veto("bob", "Cost", 0.03, 0.02, 0.01), veto("carol", "Cost", 0.06, 0.05, 0.01)]
    infos = {"Cost": MetricInfo(unit=unit, better="lower", elicited=True)}
    assert veto_sentences("Stump", vetoes, infos) == [
        f"For bob the least acceptable Cost is 0.02 {unit}, for carol 0.05 {unit} (lower is better); "
        f"by each one's own elicited metric Stump has 0.03 {unit} for bob, 0.06 {unit} for carol."
    ]
    # Without knowing the metric is elicited, values that differ are still each expert's.
    assert veto_sentences("Stump", vetoes)[0].endswith("Stump has 0.03 for bob, 0.06 for carol.")
    alone = veto_sentences("Stump", vetoes[:1], infos)
    assert alone == [
        f"bob's least acceptable Cost is 0.02 {unit} (lower is better); "
        f"by bob's own elicited metric Stump has 0.03 {unit}."
    ]


def test_experts_with_the_same_bound_share_a_sentence():
    vetoes = [veto(name, "Comprehensibility rating", 0, 6) for name in ("statistician", "informatician", "clinician")]
    assert veto_sentences("IBk", vetoes) == [
        "For statistician, informatician and clinician the least acceptable Comprehensibility rating is 6; "
        "IBk measured 0."
    ]


def test_different_bounds_on_one_metric_are_listed_in_one_sentence():
    vetoes = [
        veto("bob", "Training time", 60, 50, 10),
        veto("carol", "Training time", 60, 40, 10),
        veto("dave", "Training time", 60, 50, 10),
    ]
    infos = {"Training time": MetricInfo(unit="ms", better="lower")}
    assert veto_sentences("Stump", vetoes, infos) == [
        "For bob and dave the least acceptable Training time is 50 ms, for carol 40 ms (lower is better); "
        "Stump measured 60 ms."
    ]


def test_one_sentence_per_metric_in_the_order_of_the_first_veto():
    vetoes = [
        veto("bob", "Success rate", 0.5, 0.8),
        veto("bob", "AUC", 0.6, 0.7),
        veto("carol", "Success rate", 0.5, 0.82),
    ]
    assert veto_sentences("Stump", vetoes) == [
        "For bob the least acceptable Success rate is 0.8, for carol 0.82; Stump measured 0.5.",
        "bob's least acceptable AUC is 0.7; Stump measured 0.6.",
    ]


def test_a_unit_with_digits_names_a_scale_and_is_said_once():
    infos = {"Comprehensibility rating": MetricInfo(unit="1-10")}
    sentence = veto_sentences("IBk", [veto("clinician", "Comprehensibility rating", 0, 6)], infos)
    assert sentence == ["clinician's least acceptable Comprehensibility rating is 6 (scale 1-10); IBk measured 0."]
    assert quantity(12.3, "ms") == "12.3 ms" and quantity(12.3, "") == "12.3"
    assert quantity(8, "1-10", bound=False) == "8"


def test_no_vetoes_no_sentences():
    assert veto_sentences("JRip", []) == []


@given(st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=6))
def test_join_names_names_everyone_once_in_order(names):
    joined = join_names(names)
    position = 0
    for name in names:
        found = joined.find(name, position)
        assert found >= position
        position = found + len(name)
    if len(names) > 1:
        assert " and " in joined


@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.lists(st.sampled_from([0.5, 0.6, 0.7]), min_size=1, max_size=3),
        min_size=1,
    )
)
def test_every_vetoing_expert_and_bound_is_named(bounds_by_expert):
    vetoes = [
        veto(expert, f"Metric {j}", 0.1, bound)
        for expert, bounds in bounds_by_expert.items()
        for j, bound in enumerate(bounds)
    ]
    sentences = veto_sentences("C", vetoes)
    metrics = {v["metric"] for v in vetoes}
    assert len(sentences) == len(metrics)
    for v in vetoes:
        sentence = next(s for s in sentences if f" {v['metric']} " in s)
        assert v["expert"] in sentence and f"{v['range'][0]:g}" in sentence and sentence.endswith("C measured 0.1.")


def test_influence_sentence_names_the_extremes_against_an_equal_share():
    sentence = influence_sentence(
        {"statistician": 0.3681, "informatician": 0.2454, "researcher": 0.1718, "clinician": 0.2147}
    )
    assert sentence.endswith(
        "statistician carries the most, 36.8 %, and researcher the least, 17.2 %, against 25.0 % each if the "
        "experts had rated one another evenly."
    )
    assert sentence.startswith("Influence is the share of the outcome each expert's opinions carry")


@pytest.mark.parametrize(
    ("influence", "ending"),
    [
        ({"bob": 0.5, "carol": 0.5}, "Here every expert carries the same share, 50.0 %."),
        ({"bob": 1.0}, "With a single expert, all of it is theirs."),
    ],
)
def test_influence_sentence_for_equal_shares_and_one_expert(influence, ending):
    assert influence_sentence(influence).endswith(ending)
