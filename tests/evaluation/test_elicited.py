"""Elicited metrics as an expert's step, through the services and selectors:
question by question equals the library's search with the same oracle,
resuming replays to the same question, back and reset, and the refusals."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation import elicited as elicited_domain
from evaluation import selectors, services
from evaluation.elicitation import DiagonalElicitation
from evaluation.models import ElicitationAnswers, ElicitedMetric
from workspace.errors import InvalidInput, PhaseConflict
from workspace.services import candidate_remove, study_close_voting, study_delete, study_open_voting

from .elicited_fixtures import (
    LABELS,
    add_elicited_metric,
    library_weights,
    linear_oracle,
    per_class_oracle,
    skewed_binary_eta,
    softmax_eta,
)


def to_assessment(built):
    study_open_voting(study=built.study)
    study_close_voting(study=built.study)
    built.refresh()


def answer_all(elicited, expert, oracle) -> int:
    asked = 0
    while (state := selectors.elicitation_state(elicited_metric=elicited, expert=expert)).question is not None:
        question = state.question
        assert question.number == asked + 1
        answer = "first" if oracle(question.first_values, question.second_values) else "second"
        services.elicitation_answer(elicited_metric=elicited, expert=expert, answer=answer, question=question.number)
        asked += 1
    return asked


@pytest.mark.parametrize(
    ("kind", "epsilon", "truth", "questions"),
    [
        ("diagonal", 0.01, [0.2, 0.5, 0.3], 56),  # source 003, Table 2: 4 (k - 1) ceil(log2(1/0.01)) for k = 3
        ("offdiagonal", 0.2, -np.array([1, 2, 3, 1, 1, 2]) / np.sqrt(20), 4 * 3 * 2 * 5),
    ],
)
def test_answering_question_by_question_equals_the_library(make_study, kind, epsilon, truth, questions):
    built = make_study()
    elicited = add_elicited_metric(built, kind=kind, epsilon=epsilon)
    to_assessment(built)
    oracle = linear_oracle(truth)
    asked = answer_all(elicited, built.bob, oracle)
    expected, expected_count = library_weights(kind, oracle, elicited_domain.reference_eta(elicited), epsilon)
    # Table 2's count, plus the consistency check's two questions asked again.
    assert asked - elicited_domain.CHECKS == expected_count == questions
    state = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)
    assert state.finished and state.answered - 2 == state.total == questions
    np.testing.assert_array_equal(state.weights, expected)
    stored = ElicitationAnswers.objects.get(elicited_metric=elicited, expert=built.bob)
    assert stored.weights == [float(w) for w in expected] and len(stored.answers) == questions + 2
    # A consistent oracle passes the check: questions 1 and questions // 2 + 1, answered as before.
    assert state.consistent is True
    assert [(c.question, c.answer) for c in state.check] == [
        (1, stored.answers[0]),
        (questions // 2 + 1, stored.answers[questions // 2]),
    ]
    if kind == "diagonal":
        # Recovered within the source's tolerance (Table 2: 0.02 in max norm).
        assert np.abs(np.array(state.weights) - truth).max() < 0.02
        assert state.result.labels == [f"finding {label}" for label in LABELS]
        # Per 100 cases of each class as asked (2.5 at the classes' shares), and per instance 2.5.
        prior = softmax_eta().mean(axis=0)
        per_class = 2.5 * prior[1] / prior[0]
        assert state.result.sentence.startswith(
            f"Per 100 cases of each class, finding tumour A against finding tumour B: 1 : {per_class:.1f}; "
        )
        assert "one tumour A found against one tumour B: 1 : 2.5;" in state.result.per_instance
        assert not state.result.at_edge
    # Carol has answered nothing: her state is the first question.
    assert selectors.elicitation_state(elicited_metric=elicited, expert=built.carol).question.number == 1
    # Read with the metric (the step's one query, issue 33): the same state, for that expert only.
    for reader, expert in ((built.bob, built.bob), (built.carol, built.carol), (built.carol, built.bob)):
        with_answers = selectors.elicited_metric_get(study=built.study, metric_id=elicited.metric_id, answers_of=reader)
        again = selectors.elicitation_state(elicited_metric=with_answers, expert=expert)
        plain = selectors.elicitation_state(elicited_metric=elicited, expert=expert)
        assert (again.answers, again.weights, again.answered) == (plain.answers, plain.weights, plain.answered)


def test_a_trade_off_meant_per_class_is_told_per_class_and_4_to_1_differs_from_5_to_1(make_study):
    # Issue 31: the questions show each class per 100 of its cases, so an expert for whom finding
    # one more of 100 with class 1 (a cancer, a third of the instances) is worth 5 of 100 with
    # class 0 is told 1 : 5, not the 1 : 9.9 of the weights per instance; 4 : 1 is told 4.
    built = make_study()
    elicited = add_elicited_metric(built, eta=skewed_binary_eta(), epsilon=0.01)
    to_assessment(built)
    prior = elicited_domain.class_prior(elicited)
    assert 0.3 < prior[1] < 0.35
    told = {}
    for expert, meant in ((built.bob, 4.0), (built.carol, 5.0)):
        answer_all(elicited, expert, per_class_oracle([1.0, meant], prior))
        result = selectors.elicitation_state(elicited_metric=elicited, expert=expert).result
        (pair,) = result.pairs
        assert (pair.reference, pair.label, pair.bound, result.at_edge) == ("class 0", "class 1", None, False)
        # Within the search's tolerance (epsilon 0.01 in m is 0.2 in the ratio here).
        assert pair.ratio == pytest.approx(meant, abs=0.2)
        assert pair.per_instance == pytest.approx(pair.ratio * prior[0] / prior[1], rel=1e-12)
        compared = "finding class 0 against finding class 1"
        assert result.sentence == f"Per 100 cases of each class, {compared}: 1 : {pair.ratio:.1f}."
        shares = f"class 0 {100 * prior[0]:.0f} %, class 1 {100 * prior[1]:.0f} %"
        assert result.per_instance == (
            f"Per instance, at the study's prevalence ({shares}): "
            f"one class 0 found against one class 1: 1 : {pair.per_instance:.1f}."
        )
        told[meant] = result.sentence
    assert told[5.0].endswith("1 : 5.0.") and told[4.0] != told[5.0]


def test_resuming_replays_to_the_same_question_and_back_and_reset(make_study):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    to_assessment(built)
    oracle = linear_oracle([0.6, 0.1, 0.3])
    uninterrupted = DiagonalElicitation(elicited_domain.reference_eta(elicited), epsilon=0.05)
    for number in range(1, 14):
        first, second = uninterrupted.next_query()
        # A new request each time: nothing but the stored answers carries over.
        state = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)
        assert state.question.number == number
        np.testing.assert_array_equal(state.question.first_values, first)
        np.testing.assert_array_equal(state.question.second_values, second)
        verdict = oracle(first, second)
        uninterrupted.answer(verdict)
        services.elicitation_answer(
            elicited_metric=elicited, expert=built.bob, answer="first" if verdict else "none", question=number
        )
    before_back = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob).question
    services.elicitation_back(elicited_metric=elicited, expert=built.bob)
    back = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)
    assert back.question.number == 13 and back.answered == 12
    services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer="second", question=13)
    again = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob).question
    assert again.number == before_back.number == 14
    # A second submission of question 13's form is refused, not taken as question 14's answer.
    with pytest.raises(InvalidInput) as refused:
        services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer="first", question=13)
    assert refused.value.errors == {"question": ["question 13 is not the next one: question 14 is"]}
    services.elicitation_reset(elicited_metric=elicited, expert=built.bob)
    reset = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)
    assert reset.answered == 0 and reset.question.number == 1 and reset.answers == ""


def test_a_question_in_words(make_study):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    to_assessment(built)
    question = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob).question
    prior = softmax_eta().mean(axis=0)
    first = np.array(question.first_values)
    assert question.total == 4 * 2 * 5 and question.classes == ["tumour A", "tumour B"]
    found_a = 100 * first[0] / prior[0]
    assert question.first.rows[0] == [f"{found_a:.1f}"]
    assert question.sentence_first.startswith(f"Of 100 with tumour A, {found_a:.1f} found; of 100 with tumour B, ")


def test_refusals_write_nothing(make_study):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    # Not before the assessment opens.
    with pytest.raises(PhaseConflict):
        services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer="first")
    to_assessment(built)
    with pytest.raises(InvalidInput) as bad:
        services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer="yes")
    assert bad.value.errors == {"answer": ["must be one of first, second, none; got 'yes'"]}
    with pytest.raises(InvalidInput) as nothing:
        services.elicitation_back(elicited_metric=elicited, expert=built.bob)
    assert nothing.value.errors == {"answer": ["no question is answered yet"]}
    assert set(ElicitationAnswers.objects.values_list("answers", flat=True)) <= {""}
    # In the assessment the design changes only for a metric the vote selected.
    unselected = built.metrics["AUC"]
    unselected.is_selected = False
    unselected.save()
    with pytest.raises(InvalidInput) as not_selected:
        services.elicited_metric_set(
            metric=unselected,
            kind="diagonal",
            prediction_set=elicited.prediction_set_id,
            reference_candidate="J48",
            epsilon=0.05,
        )
    assert not_selected.value.errors == {"metric": ["AUC was not selected by the vote: no run uses it"]}
    assert ElicitedMetric.objects.count() == 1


def test_the_designer_s_refusals(make_study):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    metric, set_id = elicited.metric, elicited.prediction_set_id
    cases = [
        ({"kind": "both"}, "kind", "must be one of diagonal, offdiagonal, got 'both'"),
        ({"epsilon": 2}, "epsilon", "epsilon must lie in (0, 1), the length of the searched interval; got 2.0"),
        ({"reference_candidate": "Nobody"}, "reference_candidate", "no candidate named 'Nobody' in this study"),
        ({"prediction_set": 999}, "prediction_set", "no prediction set 999 in this study"),
        (
            {"kind": "offdiagonal", "epsilon": 0.01},
            "epsilon",
            "would ask each expert 320 questions, more than 400: choose a larger tolerance, or the diagonal kind",
        ),
    ]
    for change, field, message in cases[:4]:
        arguments = {"kind": "diagonal", "prediction_set": set_id, "reference_candidate": "J48", "epsilon": 0.05}
        with pytest.raises(InvalidInput) as refused:
            services.elicited_metric_set(metric=metric, **{**arguments, **change})
        assert refused.value.errors == {field: [message]}
    # A lower-is-better metric made a weighted accuracy follows it: higher is
    # better, its unit the kind's, its default range (for the old values) gone.
    lower = built.metrics["Fold stdev"]
    assert lower.better == "lower"
    services.elicited_metric_set(
        metric=lower, kind="diagonal", prediction_set=set_id, reference_candidate="J48", epsilon=0.05
    )
    lower.refresh_from_db()
    assert (lower.better, lower.unit, lower.default_range) == ("higher", "weighted accuracy", None)
    services.elicited_metric_remove(metric=lower)
    # The set the questions come from cannot be deleted.
    with pytest.raises(InvalidInput) as kept:
        services.prediction_set_delete(prediction_set=elicited.prediction_set)
    assert "Cost-weighted accuracy" in kept.value.errors["prediction_set"][0]
    # Nor can the reference candidate be removed alone ...
    with pytest.raises(InvalidInput) as still:
        candidate_remove(candidate=built.candidates["J48"])
    assert still.value.errors == {
        "candidate": [
            "the elicited metric Cost-weighted accuracy asks its questions from J48's predictions: choose another "
            "reference candidate for it first"
        ]
    }
    # ... but the study goes with all of it.
    study_delete(study=built.study)
    assert not ElicitedMetric.objects.exists() and not ElicitationAnswers.objects.exists()


def test_changing_the_design_clears_the_answers(make_study):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    study_open_voting(study=built.study)  # the design may still change while the experts vote
    row = ElicitationAnswers.objects.create(elicited_metric=elicited, expert=built.bob, answers="12")
    same = services.elicited_metric_set(
        metric=elicited.metric,
        kind="diagonal",
        prediction_set=elicited.prediction_set_id,
        reference_candidate="J48",
        epsilon=0.05,
    )
    assert ElicitationAnswers.objects.filter(pk=row.pk).exists() and same.pk == elicited.pk
    services.elicited_metric_set(
        metric=elicited.metric,
        kind="diagonal",
        prediction_set=elicited.prediction_set_id,
        reference_candidate="JRip",
        epsilon=0.05,
    )
    assert not ElicitationAnswers.objects.filter(pk=row.pk).exists()


# Two classes, ten instances: J48 finds 4 of 5 of class A and 2 of 5 of B;
# JRip 2 of 5 of A and 5 of 5 of B. J48's probabilities are the questions'.
TWO_CLASSES = (
    "candidate,y_true,y_pred,proba:A,proba:B\n"
    + "".join(
        f"J48,{truth},{guess},{p},{1 - p}\n"
        for truth, guess, p in [
            ("A", "A", 0.9),
            ("A", "A", 0.8),
            ("A", "A", 0.7),
            ("A", "A", 0.6),
            ("A", "B", 0.4),
            ("B", "A", 0.55),
            ("B", "A", 0.52),
            ("B", "A", 0.51),
            ("B", "B", 0.3),
            ("B", "B", 0.2),
        ]
    )
    + "".join(
        f"JRip,{truth},{guess},0.5,0.5\n" for truth, guess in [("A", "A")] * 2 + [("A", "B")] * 3 + [("B", "B")] * 5
    )
)


def test_each_expert_s_value_flips_the_winner_as_a_hand_computation_says(make_study):
    import io

    built = make_study()
    prediction_set = services.prediction_set_import(
        study=built.study, stream=io.BytesIO(TWO_CLASSES.encode()), name="two.csv", uploaded_by=None
    )
    metric = built.metrics["AUC"]
    elicited = services.elicited_metric_set(
        metric=metric, kind="diagonal", prediction_set=prediction_set.pk, reference_candidate="J48", epsilon=0.1
    )
    # Bob values finding A four times as much as B; carol the other way round.
    values = selectors.elicited_values(elicited_metric=elicited, finished={"bob": [0.8, 0.2], "carol": [0.2, 0.8]})
    by_name = {row.candidate: row for row in values}
    # By hand: J48's diagonal is (4, 2) / 10 and JRip's (2, 5) / 10.
    assert by_name["J48"].values == pytest.approx({"bob": 0.8 * 0.4 + 0.2 * 0.2, "carol": 0.2 * 0.4 + 0.8 * 0.2})
    assert by_name["JRip"].values == pytest.approx({"bob": 0.8 * 0.2 + 0.2 * 0.5, "carol": 0.2 * 0.2 + 0.8 * 0.5})
    assert by_name["J48"].values["bob"] > by_name["JRip"].values["bob"]  # 0.36 > 0.26: J48 for bob
    assert by_name["J48"].values["carol"] < by_name["JRip"].values["carol"]  # 0.24 < 0.44: JRip for carol
    assert by_name["JRip"].spread == pytest.approx((0.26, 0.44))
    assert by_name["J48"].prediction_set == "two.csv" and by_name["J48"].reason == ""


def test_the_consistency_check_flags_a_flipped_answer_and_back_and_reset_work_through_it(make_study):
    built = make_study()
    elicited = add_elicited_metric(built, kind="diagonal", epsilon=0.01)
    to_assessment(built)
    oracle = linear_oracle([0.2, 0.5, 0.3])
    total = 56
    for _ in range(total):
        question = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob).question
        answer = "first" if oracle(question.first_values, question.second_values) else "second"
        services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer=answer, question=question.number)
    state = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)
    original = state.answers
    # The search is done, but the weights wait for the check: question 1 asked again, as it was.
    assert not state.finished and state.weights is None and state.consistent is None
    first_check = state.question
    assert (first_check.check, first_check.number, first_check.total) == (1, total + 1, total)
    replayed = selectors.elicitation_state(elicited_metric=elicited, expert=built.carol).question
    assert (first_check.first_values, first_check.second_values) == (replayed.first_values, replayed.second_values)
    assert ElicitationAnswers.objects.get(expert=built.bob).weights is None
    flipped = "second" if original[0] == "1" else "first"
    services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer=flipped, question=total + 1)
    second_check = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob).question
    assert second_check.check == 2 and second_check.number == total + 2
    same = {"1": "first", "2": "second"}[original[total // 2]]
    services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer=same, question=total + 2)
    state = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)
    assert state.finished and state.question is None and state.consistent is False
    assert [c.agrees for c in state.check] == [False, True]
    # Kept: the weights are the search's, stored; no third check.
    assert ElicitationAnswers.objects.get(expert=built.bob).weights == state.weights
    with pytest.raises(InvalidInput):
        services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer="first")
    # Back one question: the second check is asked again, the weights are not final.
    services.elicitation_back(elicited_metric=elicited, expert=built.bob)
    state = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)
    assert state.question.check == 2 and state.weights is None and state.consistent is None
    assert ElicitationAnswers.objects.get(expert=built.bob).weights is None
    # Back twice more: the search's last question again.
    services.elicitation_back(elicited_metric=elicited, expert=built.bob)
    services.elicitation_back(elicited_metric=elicited, expert=built.bob)
    state = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)
    assert state.question.check is None and state.question.number == total and state.check == []
    # Redo: from the first question.
    services.elicitation_reset(elicited_metric=elicited, expert=built.bob)
    state = selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)
    assert state.answers == "" and state.question.number == 1 and state.consistent is None


BINARY_SCORES = (
    "candidate,y_true,score\nJ48,tumour,0.9\nJ48,normal,0.25\nJ48,tumour,0.6\nJ48,normal,0\nJRip,tumour,0.7\n"
)


def test_a_binary_score_between_0_and_1_is_the_positive_label_s_probability(make_study):
    import io

    built = make_study()
    prediction_set = services.prediction_set_import(
        study=built.study,
        stream=io.BytesIO(BINARY_SCORES.encode()),
        name="scores.csv",
        uploaded_by=None,
        positive="tumour",
    )
    elicited = services.elicited_metric_set(
        metric=built.metrics["AUC"],
        kind="diagonal",
        prediction_set=prediction_set.pk,
        reference_candidate="J48",
        epsilon=0.1,
    )
    labels = list(prediction_set.labels)
    eta = elicited_domain.reference_eta(elicited)
    # Each row: the positive label's column holds the score, the other one minus it.
    expected = {"tumour": [0.9, 0.25, 0.6, 0.0], "normal": [0.1, 0.75, 0.4, 1.0]}
    for label, column in expected.items():
        assert eta[:, labels.index(label)].tolist() == pytest.approx(column)
    assert not eta.flags.writeable


def test_scores_outside_0_and_1_are_not_probabilities(make_study):
    import io

    built = make_study()
    prediction_set = services.prediction_set_import(
        study=built.study,
        stream=io.BytesIO(BINARY_SCORES.replace("0.9", "2.5").encode()),
        name="margins.csv",
        uploaded_by=None,
        positive="tumour",
    )
    with pytest.raises(InvalidInput) as refused:
        services.elicited_metric_set(
            metric=built.metrics["AUC"],
            kind="diagonal",
            prediction_set=prediction_set.pk,
            reference_candidate="J48",
            epsilon=0.1,
        )
    assert "not all between 0 and 1" in refused.value.errors["reference_candidate"][0]
    assert not ElicitedMetric.objects.exists()


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["diagonal", "offdiagonal"]),
    classes=st.integers(2, 4),
    candidates=st.integers(1, 6),
    experts=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_candidate_s_values_at_once_equal_a_literal_sum_over_the_cells(kind, classes, candidates, experts, seed):
    """``metric_values`` (the design page's and a run's, in one product) is each expert's
    ``sum_ij a_ij C_ij`` over the diagonal, or ``sum_ij -a_ij C_ij`` off it, written out cell by cell."""
    rng = np.random.default_rng(seed)
    confusions = rng.dirichlet(np.ones(classes * classes), candidates).reshape(candidates, classes, classes)
    size = classes if kind == "diagonal" else classes * (classes - 1)
    weights = [list(rng.uniform(-1, 1, size)) for _ in range(experts)]
    values = elicited_domain.metric_values(kind, weights, confusions)
    assert values.shape == (candidates, experts)
    for c in range(candidates):
        for e, a in enumerate(weights):
            cells = [(i, j) for i in range(classes) for j in range(classes) if (i == j) == (kind == "diagonal")]
            # The off-diagonal kind's value is the expected cost: the costs -a.
            sign = 1 if kind == "diagonal" else -1
            literal = sign * sum(a[n] * confusions[c][i][j] for n, (i, j) in enumerate(cells))
            assert values[c, e] == pytest.approx(literal, abs=1e-12)
            assert elicited_domain.metric_value(kind, a, confusions[c]) == pytest.approx(literal, abs=1e-12)
