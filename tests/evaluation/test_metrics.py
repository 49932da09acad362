"""evaluation.metrics (confusion-matrix metrics, kappa, lift/gain, thresholds,
AIC/BIC, consistency, efficiency) checked three ways: METHOD.md 7.4's
reference values, scikit-learn or a slow literal reference on random inputs
(Hypothesis), and the defining property of each quantity. Plain pytest, no
database."""

import math
import statistics
from fractions import Fraction

import numpy as np
import pytest
import sklearn.metrics
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from evaluation import metrics
from evaluation.metrics import (
    THRESHOLD_METHODS,
    cohen_kappa_score,
    confusion_matrix,
    consistency_score,
    efficiency_score,
    information_criteria,
    lift_gain,
    log_loss,
    recall_score,
    select_threshold,
    specificity_score,
)

SETTINGS = settings(max_examples=60, deadline=None)

binary_labels = st.lists(st.integers(0, 1), min_size=1, max_size=40)


@st.composite
def labelled_scores(draw, min_size=1, max_size=40, both_classes=False):
    """Binary labels with scores from a small grid, so that ties are common."""
    n = draw(st.integers(min_size, max_size))
    y_true = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    if both_classes:
        assume(0 < sum(y_true) < n)
    y_score = draw(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 0.75, 0.9, 1.0]), min_size=n, max_size=n))
    return np.array(y_true), np.array(y_score)


# --------------------------------------------------------------------------
# Reference values (METHOD.md 7.4, source 002 section IV)
# --------------------------------------------------------------------------


def raters_from_table(table):
    """Label vectors of two raters from a 2x2 table whose rows are rater B's
    class (1, 2) and whose columns are rater A's (source 002, Table 2)."""
    rater_a, rater_b = [], []
    for b_class, row in zip((1, 2), table, strict=True):
        for a_class, count in zip((1, 2), row, strict=True):
            rater_a += [a_class] * count
            rater_b += [b_class] * count
    return rater_a, rater_b


@pytest.mark.parametrize(
    ("table", "kappa"),
    [
        ([[25, 10], [5, 60]], 0.659),
        ([[25, 8], [7, 60]], 0.658),
        ([[81, 9], [6, 4]], 0.265),
    ],
)
def test_cohen_kappa_reproduces_the_published_tables(table, kappa):
    rater_a, rater_b = raters_from_table(table)
    assert confusion_matrix(rater_b, rater_a, labels=[1, 2]).tolist() == table
    assert cohen_kappa_score(rater_a, rater_b) == pytest.approx(kappa, abs=5e-4)
    assert cohen_kappa_score(rater_b, rater_a) == pytest.approx(kappa, abs=5e-4)


def test_the_first_table_has_the_published_observed_and_chance_agreement():
    # METHOD.md 7: P_o = 0.85, P_e = 0.56 for [[25, 10], [5, 60]].
    rater_a, rater_b = raters_from_table([[25, 10], [5, 60]])
    assert metrics.accuracy_score(rater_a, rater_b) == pytest.approx(0.85)
    kappa = cohen_kappa_score(rater_a, rater_b)
    assert pytest.approx(kappa) == (0.85 - 0.56) / (1 - 0.56)


def test_the_standard_metrics_are_scikit_learns_own():
    for name in (
        "accuracy_score",
        "balanced_accuracy_score",
        "precision_score",
        "recall_score",
        "f1_score",
        "confusion_matrix",
        "roc_curve",
        "roc_auc_score",
        "cohen_kappa_score",
        "log_loss",
    ):
        assert getattr(metrics, name) is getattr(sklearn.metrics, name)
        assert name in metrics.__all__
    assert all(hasattr(metrics, name) for name in metrics.__all__)


# --------------------------------------------------------------------------
# Specificity
# --------------------------------------------------------------------------


def literal_specificity(y_true, y_pred, pos_label):
    negatives = [p for t, p in zip(y_true, y_pred, strict=True) if t != pos_label]
    return sum(p != pos_label for p in negatives) / len(negatives)


@SETTINGS
@given(st.data())
def test_specificity_is_the_recall_of_the_negative_class(data):
    y_true = data.draw(binary_labels)
    y_pred = data.draw(st.lists(st.integers(0, 1), min_size=len(y_true), max_size=len(y_true)))
    assume(0 in y_true)
    expected = literal_specificity(y_true, y_pred, 1)
    assert specificity_score(y_true, y_pred) == pytest.approx(expected, abs=1e-15)
    assert specificity_score(y_true, y_pred) == pytest.approx(recall_score(y_true, y_pred, pos_label=0), abs=1e-15)
    assert type(specificity_score(y_true, y_pred)) is float


def test_specificity_with_string_labels_and_a_chosen_positive():
    y_true = ["sick", "well", "well", "well", "sick"]
    y_pred = ["sick", "sick", "well", "well", "well"]
    assert specificity_score(y_true, y_pred, pos_label="sick") == pytest.approx(2 / 3)
    assert specificity_score(y_true, y_pred, pos_label="well") == pytest.approx(1 / 2)


def test_specificity_when_every_sample_is_negative():
    assert specificity_score([0, 0, 0], [0, 0, 0]) == 1.0
    assert specificity_score([0, 0, 0, 0], [0, 1, 1, 0]) == 0.5


@pytest.mark.parametrize(
    ("y_true", "y_pred", "kwargs", "message"),
    [
        ([1, 1, 1], [0, 1, 1], {}, "specificity is undefined: y_true has no negative samples"),
        ([], [], {}, "y_true and y_pred must not be empty"),
        ([0, 1], [0], {}, "inconsistent numbers of samples: y_true has 2, y_pred has 1"),
        ([0, 1, 2], [0, 1, 2], {}, "these metrics are binary, but the labels are 0, 1, 2"),
        (["a", "b"], ["a", "b"], {}, r"pos_label=1 is not one of the labels \['a', 'b'\]"),
        ([[0, 1]], [[0, 1]], {}, r"y_true must be a 1-D array, got shape \(1, 2\)"),
    ],
)
def test_specificity_undefined_cases(y_true, y_pred, kwargs, message):
    with pytest.raises(ValueError, match=message):
        specificity_score(y_true, y_pred, **kwargs)


def test_labels_mixing_numbers_and_strings_stay_distinct():
    # As an array of strings, 1 and "1" would be one label.
    with pytest.raises(ValueError, match="labels are"):
        specificity_score([0, 1, "1"], [0, 1, 1])


# --------------------------------------------------------------------------
# Lift and gain
# --------------------------------------------------------------------------


def literal_gain(y_true, y_score, fraction, pos_label=1):
    """Expected share of positives among the top fraction of the cases when
    tied cases are taken in random order: a case with `above` cases scored
    higher and `tied` cases sharing its score (itself included) is among the
    top x cases with probability clip((x - above) / tied, 0, 1)."""
    n = len(y_score)
    x = fraction * n
    expected = 0.0
    for i in range(n):
        if y_true[i] != pos_label:
            continue
        above = sum(1 for j in range(n) if y_score[j] > y_score[i])
        tied = sum(1 for j in range(n) if y_score[j] == y_score[i])
        expected += min(max((x - above) / tied, 0.0), 1.0)
    return expected / sum(1 for t in y_true if t == pos_label)


@SETTINGS
@given(labelled_scores(), st.integers(1, 12))
def test_gain_matches_the_literal_expected_gain(sample, quantiles):
    y_true, y_score = sample
    assume(y_true.any())
    fractions, gain, lift = lift_gain(y_true, y_score, quantiles=quantiles)
    assert fractions == pytest.approx([q / quantiles for q in range(1, quantiles + 1)])
    for fraction, value in zip(fractions, gain, strict=True):
        assert value == pytest.approx(literal_gain(y_true, y_score, fraction), abs=1e-12)
    assert lift == pytest.approx(gain / fractions)


@SETTINGS
@given(labelled_scores(), st.integers(1, 12))
def test_gain_is_non_decreasing_and_ends_at_one_and_the_last_lift_is_one(sample, quantiles):
    y_true, y_score = sample
    assume(y_true.any())
    _, gain, lift = lift_gain(y_true, y_score, quantiles=quantiles)
    assert np.all(np.diff(gain) >= 0)
    assert gain[-1] == 1.0
    assert lift[-1] == 1.0
    assert np.all((gain >= 0) & (gain <= 1))


@SETTINGS
@given(labelled_scores(), st.randoms(use_true_random=False))
def test_gain_does_not_depend_on_the_order_of_the_cases(sample, random):
    y_true, y_score = sample
    assume(y_true.any())
    order = list(range(len(y_true)))
    random.shuffle(order)
    assert lift_gain(y_true[order], y_score[order])[1] == pytest.approx(lift_gain(y_true, y_score)[1], abs=1e-15)


def test_gain_and_lift_of_distinct_scores_count_whole_cases():
    # Ten cases ranked by score; positives at ranks 1, 3 and 6; the fifths
    # are the top 2, 4, 6, 8 and 10 cases.
    y_true = [1, 0, 1, 0, 0, 1, 0, 0, 0, 0]
    y_score = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]
    fractions, gain, lift = lift_gain(y_true, y_score, quantiles=5)
    assert fractions == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert gain == pytest.approx([1 / 3, 2 / 3, 1, 1, 1])
    assert lift == pytest.approx([5 / 3, 5 / 3, 5 / 3, 5 / 4, 1])


def test_a_tie_straddling_a_cut_shares_its_positives():
    # Four tied cases, three of them positive, then two negatives: the top
    # half (three cases) takes three quarters of the tie group.
    _, gain, _ = lift_gain([1, 1, 0, 1, 0, 0], [0.5, 0.5, 0.5, 0.5, 0.1, 0.1], quantiles=2)
    assert gain[0] == pytest.approx((3 / 4 * 3) / 3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"y_true": [0, 0], "y_score": [0.1, 0.2]}, "gain and lift are undefined: y_true has no positive samples"),
        ({"y_true": [], "y_score": []}, "y_true and y_score must not be empty"),
        ({"y_true": [0, 1], "y_score": [0.1, np.nan]}, "y_score must be finite; NaN or infinity at 1"),
        ({"y_true": [0, 1], "y_score": [0.1, 0.2], "quantiles": 0}, "quantiles must be a positive integer, got 0"),
        ({"y_true": [0, 1], "y_score": [0.1, 0.2], "quantiles": 2.5}, "quantiles must be a positive integer"),
    ],
)
def test_lift_gain_undefined_cases(kwargs, message):
    with pytest.raises(ValueError, match=message):
        lift_gain(**kwargs)


# --------------------------------------------------------------------------
# Threshold selection
# --------------------------------------------------------------------------


def exact_rates(y_true, y_score, threshold):
    """(sensitivity, specificity, kappa) as exact fractions, predicted positive when score >= threshold."""
    n = len(y_true)
    tp = sum(1 for t, s in zip(y_true, y_score, strict=True) if t == 1 and s >= threshold)
    fp = sum(1 for t, s in zip(y_true, y_score, strict=True) if t != 1 and s >= threshold)
    positives = sum(1 for t in y_true if t == 1)
    negatives = n - positives
    tn = negatives - fp
    observed = Fraction(tp + tn, n)
    chance = Fraction(positives, n) * Fraction(tp + fp, n) + Fraction(negatives, n) * Fraction(n - tp - fp, n)
    kappa = (observed - chance) / (1 - chance)
    return Fraction(tp, positives), Fraction(tn, negatives), kappa


def literal_best(y_score, objective):
    """The highest distinct score with the largest objective (exact)."""
    candidates = sorted(set(y_score), reverse=True)
    values = [objective(t) for t in candidates]
    best = max(values)
    return candidates[values.index(best)]


# What each searching method maximises, from exact (sensitivity, specificity, kappa).
OBJECTIVES = {
    "max_kappa": lambda rates: rates[2],
    "max_sensitivity_specificity": lambda rates: rates[0] + rates[1],
    "equal_sensitivity_specificity": lambda rates: -abs(rates[0] - rates[1]),
}


@pytest.mark.parametrize("method", OBJECTIVES)
@SETTINGS
@given(sample=labelled_scores(both_classes=True))
def test_no_other_cut_is_better_and_ties_go_to_the_highest(method, sample):
    y_true, y_score = sample
    threshold = select_threshold(y_true, y_score, method=method)
    objective = OBJECTIVES[method]
    assert threshold == literal_best(y_score.tolist(), lambda t: objective(exact_rates(y_true, y_score, t)))


@SETTINGS
@given(labelled_scores(both_classes=True))
def test_at_the_max_kappa_threshold_scikit_learns_kappa_is_highest(sample):
    y_true, y_score = sample
    threshold = select_threshold(y_true, y_score, method="max_kappa")
    best = cohen_kappa_score(y_true, (y_score >= threshold).astype(int))
    for other in set(y_score.tolist()):
        assert cohen_kappa_score(y_true, (y_score >= other).astype(int)) <= best + 1e-12


@SETTINGS
@given(labelled_scores(), st.sampled_from([0.05, 0.5, 0.8, 0.9, 0.95, 0.99, 1.0, 1 / 3]))
def test_fixed_sensitivity_is_the_highest_threshold_reaching_the_target(sample, target):
    y_true, y_score = sample
    assume(y_true.any())
    threshold = select_threshold(y_true, y_score, method="fixed_sensitivity", sensitivity=target)
    positives = y_score[y_true == 1]

    def sensitivity(t):
        return sum(1 for s in positives if s >= t) / len(positives)

    assert sensitivity(threshold) >= target
    assert all(sensitivity(higher) < target for higher in set(y_score.tolist()) if higher > threshold)
    assert threshold in positives


@SETTINGS
@given(labelled_scores())
def test_equal_prevalence_predicts_as_many_positives_as_there_are(sample):
    y_true, y_score = sample
    assume(y_true.any())
    threshold = select_threshold(y_true, y_score, method="equal_prevalence")
    positives = int(y_true.sum())
    counts = {t: int((y_score >= t).sum()) for t in set(y_score.tolist())}
    closest = min(abs(count - positives) for count in counts.values())
    assert abs(counts[threshold] - positives) == closest
    assert threshold == max(t for t, count in counts.items() if abs(count - positives) == closest)


@SETTINGS
@given(st.lists(st.integers(0, 1), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_equal_prevalence_is_exact_without_ties(y_true, random):
    assume(any(y_true))
    y_score = np.array(random.sample(range(1000), len(y_true))) / 1000
    threshold = select_threshold(y_true, y_score, method="equal_prevalence")
    assert int((y_score >= threshold).sum()) == sum(y_true)


@SETTINGS
@given(labelled_scores())
def test_lowest_positive_predicts_every_positive(sample):
    y_true, y_score = sample
    assume(y_true.any())
    threshold = select_threshold(y_true, y_score, method="lowest_positive")
    assert threshold == min(s for t, s in zip(y_true, y_score, strict=True) if t == 1)
    assert recall_score(y_true, (y_score >= threshold).astype(int)) == 1.0


@SETTINGS
@given(labelled_scores())
def test_mean_probability_and_fixed(sample):
    y_true, y_score = sample
    assert select_threshold(y_true, y_score, method="mean_probability") == pytest.approx(
        statistics.fmean(y_score), abs=1e-15
    )
    assert select_threshold(y_true, y_score, method="fixed") == 0.5
    assert select_threshold(y_true, y_score, method="fixed", value=0.3) == 0.3


def test_ties_between_equally_good_thresholds_go_to_the_highest():
    # Cutting at 0.9 or at 0.6 misclassifies one case either way: the same
    # kappa (1/2) and the same sensitivity + specificity (3/2).
    y_true = [1, 0, 1, 0]
    y_score = [0.9, 0.8, 0.6, 0.1]
    at_high, at_low = exact_rates(y_true, y_score, 0.9), exact_rates(y_true, y_score, 0.6)
    assert at_high[2] == at_low[2] == Fraction(1, 2)
    assert sum(at_high[:2]) == sum(at_low[:2]) == Fraction(3, 2)
    assert select_threshold(y_true, y_score, method="max_kappa") == 0.9
    assert select_threshold(y_true, y_score, method="max_sensitivity_specificity") == 0.9


def test_equal_prevalence_with_a_tie_at_the_cut_takes_the_closest_count():
    # Two positives; the second-highest score is shared by three cases, so
    # the cuts predict 1 or 4 positives: 1 is closer to 2.
    assert select_threshold([1, 1, 0, 0, 0], [0.9, 0.5, 0.5, 0.5, 0.1], method="equal_prevalence") == 0.9
    # Two positives and cuts predicting 1 or 3: equally close, so the higher threshold.
    assert select_threshold([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1], method="equal_prevalence") == 0.9


def test_a_worked_example_of_every_method():
    y_true = [1, 0, 1, 0, 0, 1, 0, 0, 0, 0]
    y_score = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]
    chosen = {method: select_threshold(y_true, y_score, method=method) for method in THRESHOLD_METHODS}
    assert chosen == {
        "fixed": 0.5,
        "lowest_positive": 0.4,  # the lowest-scored positive
        "fixed_sensitivity": 0.4,  # 0.95 needs all three positives
        "equal_sensitivity_specificity": 0.6,  # 2/3 and 5/7 are closest
        "max_sensitivity_specificity": 0.4,  # 1 + 4/7
        "max_kappa": 0.7,  # kappa 0.524
        "mean_probability": pytest.approx(0.45),
        "equal_prevalence": 0.7,  # three positives predicted
    }


@pytest.mark.parametrize(
    ("y_true", "method", "kwargs", "message"),
    [
        ([0, 1], "best", {}, "method must be one of fixed, lowest_positive"),
        ([0, 0], "lowest_positive", {}, "the lowest_positive threshold is undefined: y_true has no positive samples"),
        ([0, 0], "fixed_sensitivity", {}, "the fixed_sensitivity threshold is undefined: y_true has no positive"),
        ([0, 0], "equal_prevalence", {}, "the equal_prevalence threshold is undefined: y_true has no positive"),
        ([1, 1], "max_kappa", {}, "the max_kappa threshold is undefined: y_true has no negative samples"),
        ([1, 1], "max_sensitivity_specificity", {}, "the max_sensitivity_specificity threshold is undefined"),
        ([1, 1], "equal_sensitivity_specificity", {}, "the equal_sensitivity_specificity threshold is undefined"),
        ([0, 1], "fixed_sensitivity", {"sensitivity": 0}, r"sensitivity must be in \(0, 1\], got 0"),
        ([0, 1], "fixed_sensitivity", {"sensitivity": 1.5}, r"sensitivity must be in \(0, 1\], got 1.5"),
        ([0, 1], "fixed", {"value": math.inf}, "value must be finite"),
        ([0, 1], "fixed", {"value": "high"}, "value must be a number"),
    ],
)
def test_select_threshold_undefined_cases(y_true, method, kwargs, message):
    with pytest.raises(ValueError, match=message):
        select_threshold(y_true, [0.2, 0.7], method=method, **kwargs)


def test_select_threshold_rejects_empty_input():
    with pytest.raises(ValueError, match="y_true and y_score must not be empty"):
        select_threshold([], [], method="fixed")


# --------------------------------------------------------------------------
# Information criteria
# --------------------------------------------------------------------------


@st.composite
def probabilities(draw):
    n_classes = draw(st.integers(2, 4))
    n = draw(st.integers(1, 30))
    y_true = draw(st.lists(st.integers(0, n_classes - 1), min_size=n, max_size=n))
    raw = draw(
        st.lists(
            st.lists(st.floats(0.05, 1.0), min_size=n_classes, max_size=n_classes),
            min_size=n,
            max_size=n,
        )
    )
    raw = np.array(raw)
    return np.array(y_true), raw / raw.sum(axis=1, keepdims=True), n_classes


@SETTINGS
@given(probabilities(), st.integers(0, 20))
def test_information_criteria_match_log_loss_and_the_literal_formula(sample, n_parameters):
    y_true, y_proba, n_classes = sample
    labels = list(range(n_classes))
    aic, bic = information_criteria(y_true, y_proba, n_parameters=n_parameters, labels=labels)
    log_likelihood = sum(math.log(y_proba[i][y_true[i]]) for i in range(len(y_true)))
    assert aic == pytest.approx(2 * n_parameters - 2 * log_likelihood, rel=1e-12, abs=1e-12)
    assert bic == pytest.approx(n_parameters * math.log(len(y_true)) - 2 * log_likelihood, rel=1e-12, abs=1e-12)
    negative_log_likelihood = log_loss(y_true, y_proba, normalize=False, labels=labels)
    assert aic == pytest.approx(2 * n_parameters + 2 * negative_log_likelihood, rel=1e-9)
    assert type(aic) is float and type(bic) is float


def test_information_criteria_of_one_column_and_string_labels():
    y_true = ["no", "yes", "yes"]
    positive = [0.2, 0.7, 0.9]  # probability of "yes", the greater label
    aic, bic = information_criteria(y_true, positive, n_parameters=3)
    log_likelihood = math.log(0.8) + math.log(0.7) + math.log(0.9)
    assert aic == pytest.approx(6 - 2 * log_likelihood)
    assert bic == pytest.approx(3 * math.log(3) - 2 * log_likelihood)
    assert (aic, bic) == information_criteria(y_true, [[0.8, 0.2], [0.3, 0.7], [0.1, 0.9]], n_parameters=3)


def test_information_criteria_with_labels_not_all_in_y_true():
    aic, _ = information_criteria([2, 2], [[0.1, 0.2, 0.7], [0.2, 0.2, 0.6]], n_parameters=1, labels=[0, 1, 2])
    assert aic == pytest.approx(2 - 2 * (math.log(0.7) + math.log(0.6)))


@pytest.mark.parametrize(
    ("y_true", "y_proba", "kwargs", "message"),
    [
        (
            [0, 1, 1],
            [[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]],
            {},
            "the likelihood is 0, so AIC and BIC are infinite: the predicted probability of the true label is 0 "
            "for the samples 1",
        ),
        ([0, 1], [1.0, 1.0], {}, "the predicted probability of the true label is 0 for the samples 0"),
        ([], [], {}, "y_true and y_proba must not be empty"),
        ([0, 1], [[0.5, 0.6], [0.5, 0.5]], {}, "every row of y_proba must sum to 1 within 1e-06; rows 0 do not"),
        ([0, 1], [1.2, 0.5], {}, r"y_proba must lie in \[0, 1\]; it does not for the samples 0"),
        ([1, 1], [0.2, 0.5], {}, "a single column of probabilities needs exactly two labels, found 1"),
        ([0, 1], [[0.2, 0.3, 0.5]] * 2, {}, "y_proba has 3 columns but there are 2 labels"),
        ([0, 3], [[0.5, 0.5]] * 2, {"labels": [0, 1]}, r"y_true has labels not among labels \(0, 1\): 3"),
        ([0, 1], [0.5, 0.5], {"n_parameters": -1}, "n_parameters must be a non-negative integer, got -1"),
        ([0, 1], [0.5, 0.5], {"n_parameters": 2.5}, "n_parameters must be a non-negative integer, got 2.5"),
        ([0, 1], [0.5, 0.5], {"labels": [0, 0, 1]}, "labels must be distinct"),
    ],
)
def test_information_criteria_undefined_cases(y_true, y_proba, kwargs, message):
    kwargs = {"n_parameters": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        information_criteria(y_true, y_proba, **kwargs)


# --------------------------------------------------------------------------
# Consistency and efficiency
# --------------------------------------------------------------------------


@SETTINGS
@given(st.data())
def test_consistency_is_the_sample_standard_deviation_of_fold_accuracy(data):
    n = data.draw(st.integers(2, 40))
    y_true = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    y_pred = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    folds = data.draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=n, max_size=n))
    assume(len(set(folds)) >= 2)
    fold_accuracies = []
    for fold in sorted(set(folds)):
        members = [i for i in range(n) if folds[i] == fold]
        fold_accuracies.append(metrics.accuracy_score([y_true[i] for i in members], [y_pred[i] for i in members]))
    expected = statistics.stdev(fold_accuracies)
    assert consistency_score(y_true, y_pred, folds=folds) == pytest.approx(expected, abs=1e-12)


def test_consistency_of_identical_folds_is_zero_and_of_two_folds_is_their_spread():
    assert consistency_score([1, 0, 1, 0], [1, 1, 1, 1], folds=[0, 0, 1, 1]) == 0.0
    # Fold accuracies 1 and 0: stdev sqrt(0.5).
    assert consistency_score([1, 1, 1, 1], [1, 1, 0, 0], folds=[7, 7, 9, 9]) == pytest.approx(math.sqrt(0.5))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"y_true": [1, 0], "y_pred": [1, 1], "folds": [3, 3]},
            "consistency needs at least two folds .* every sample is in fold 3",
        ),
        ({"y_true": [], "y_pred": [], "folds": []}, "y_true, y_pred and folds must not be empty"),
        ({"y_true": [1, 0], "y_pred": [1, 1], "folds": [0]}, "inconsistent numbers of samples"),
    ],
)
def test_consistency_undefined_cases(kwargs, message):
    with pytest.raises(ValueError, match=message):
        consistency_score(**kwargs)


@SETTINGS
@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=50))
def test_efficiency_is_the_mean_time_per_instance(time):
    assert efficiency_score(time) == pytest.approx(statistics.fmean(time), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(
    ("time", "message"),
    [
        ([], "time must not be empty: the mean time per instance of no instance is undefined"),
        ([0.1, -0.2, 0.3], "time must not be negative; it is at the instances 1"),
        ([0.1, math.nan], "time must be finite; NaN or infinity at 1"),
        ([[0.1]], r"time must be a 1-D array, got shape \(1, 1\)"),
    ],
)
def test_efficiency_undefined_cases(time, message):
    with pytest.raises(ValueError, match=message):
        efficiency_score(time)


# --------------------------------------------------------------------------
# Binary ROC AUC from counts (what evaluation.report uses)
# --------------------------------------------------------------------------


@SETTINGS
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 6)), min_size=2, max_size=60),
    st.sampled_from([0.5, 0.25, 1e-3]),
)
def test_binary_roc_auc_equals_scikit_learns_with_ties(rows, step):
    """Scores on a coarse grid, so that most are tied, across classes too."""
    is_positive = np.array([positive for positive, _ in rows])
    assume(is_positive.any() and not is_positive.all())
    scores = np.array([point * step for _, point in rows])
    expected = sklearn.metrics.roc_auc_score(is_positive, scores)
    assert metrics.binary_roc_auc(is_positive, scores) == pytest.approx(expected, abs=1e-15)


def test_binary_roc_auc_of_a_known_case():
    # Positives 0.9, 0.5; negatives 0.5, 0.1: pairs won 1 + 1 + 0.5 (tie) + 1 of 4.
    auc = metrics.binary_roc_auc(np.array([True, True, False, False]), np.array([0.9, 0.5, 0.5, 0.1]))
    assert auc == 3.5 / 4
