"""The evaluation report (evaluation.report) and the evaluate_predictions
command: every metric a file's columns allow, agreeing with scikit-learn on
the same arrays; what does not apply left out; what is undefined null with
its reason."""

import io
import json
import math

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as sk

from evaluation import report
from evaluation.predictions import read_predictions
from evaluation.report import (
    COMPUTATIONS,
    DOCUMENT_KEYS,
    CandidateReport,
    NotApplicable,
    Options,
    evaluation_document,
    metric_value,
)


def csv_text(rows: list[dict]) -> str:
    columns = list(rows[0])
    lines = [",".join(columns)] + [",".join(str(row[c]) for c in columns) for row in rows]
    return "\n".join(lines) + "\n"


def read(rows: list[dict], **options):
    return read_predictions(io.BytesIO(csv_text(rows).encode()), **options)


def binary_rows(seed: int, candidates=("J48", "JRip"), n=60, with_time=True, with_fold=True):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    truth[:2] = [0, 1]  # both classes, always
    rows = []
    for c, name in enumerate(candidates):
        score = np.clip(truth * 0.3 + rng.random(n) * 0.7, 0.001, 0.999).round(4)
        for i in range(n):
            row = {"candidate": name, "y_true": "yes" if truth[i] else "no"}
            row["y_pred"] = "yes" if rng.random() < 0.8 * truth[i] + 0.15 else "no"
            row["score"] = score[i]
            if with_fold:
                row["fold"] = f"f{i % 3}"
            if with_time:
                row["time"] = round(0.001 * (c + 1) * (1 + rng.random()), 6)
            rows.append(row)
    return rows


def sklearn_binary(rows: list[dict], name: str) -> dict:
    mine = [r for r in rows if r["candidate"] == name]
    t = np.array([r["y_true"] == "yes" for r in mine])
    p = np.array([r["y_pred"] == "yes" for r in mine])
    s = np.array([r["score"] for r in mine], dtype=float)
    tn, fp, fn, tp = sk.confusion_matrix(t, p, labels=[False, True]).ravel()
    return {
        "accuracy": sk.accuracy_score(t, p),
        "balanced_accuracy": sk.balanced_accuracy_score(t, p),
        "precision": sk.precision_score(t, p, zero_division=np.nan),
        "recall": sk.recall_score(t, p),
        "specificity": tn / (tn + fp),
        "f1": sk.f1_score(t, p, zero_division=np.nan),
        "roc_auc": sk.roc_auc_score(t, s),
        "cohen_kappa": sk.cohen_kappa_score(t, p),
        "log_loss": sk.log_loss(t, np.column_stack([1 - s, s]), labels=[False, True]),
    }


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_binary_metrics_agree_with_scikit_learn(seed):
    rows = binary_rows(seed)
    document = evaluation_document(read(rows, positive="yes"))
    for name in ("J48", "JRip"):
        expected = sklearn_binary(rows, name)
        values = document["candidates"][name]
        for key, value in expected.items():
            if math.isnan(value):
                assert values[key] is None and key in document["notes"][name]
            else:
                assert values[key] == pytest.approx(value, abs=1e-12), key


def test_the_document_has_every_key_the_columns_allow_in_formats_order():
    rows = binary_rows(1)
    document = evaluation_document(read(rows, positive="yes"))
    assert document["format"] == "approve-evaluation/1" and document["positive"] == "yes"
    assert list(document["candidates"]) == ["J48", "JRip"]
    # relevance_score needs context columns, which this file has not
    assert list(document["candidates"]["J48"]) == [k for k in DOCUMENT_KEYS if k != "relevance_score"]
    assert document["notes"] == {}
    # consistency: the sample standard deviation of the accuracy per fold
    mine = [r for r in rows if r["candidate"] == "J48"]
    per_fold = [np.mean([r["y_true"] == r["y_pred"] for r in mine if r["fold"] == fold]) for fold in ("f0", "f1", "f2")]
    assert document["candidates"]["J48"]["consistency"] == pytest.approx(np.std(per_fold, ddof=1), abs=1e-12)
    assert document["candidates"]["J48"]["efficiency"] == pytest.approx(np.mean([r["time"] for r in mine]))


def test_without_time_or_folds_those_metrics_are_left_out():
    rows = binary_rows(2, with_time=False, with_fold=False)
    values = evaluation_document(read(rows, positive="yes"))["candidates"]["J48"]
    assert not {"consistency", "efficiency", "a3r", "arr"} & set(values)


def test_binary_without_a_positive_label_says_which_metrics_need_it():
    rows = [{k: v for k, v in r.items() if k != "score"} for r in binary_rows(3)]
    document = evaluation_document(read(rows))
    values, notes = document["candidates"]["J48"], document["notes"]["J48"]
    assert document["positive"] is None
    assert values["accuracy"] == pytest.approx(sklearn_binary(binary_rows(3), "J48")["accuracy"])
    for key in ("precision", "recall", "specificity", "f1"):
        assert values[key] is None and "needs the positive label" in notes[key]


def test_labels_come_from_scores_by_the_chosen_threshold():
    rows = [{k: v for k, v in r.items() if k != "y_pred"} for r in binary_rows(4)]
    data = read(rows, positive="yes")
    scores = np.array([r["score"] for r in rows if r["candidate"] == "J48"])
    truth = np.array([r["y_true"] == "yes" for r in rows if r["candidate"] == "J48"])
    fixed = CandidateReport(data, "J48")
    assert fixed.threshold == 0.5
    assert fixed.accuracy() == pytest.approx(sk.accuracy_score(truth, scores >= 0.5))
    best = CandidateReport(data, "J48", Options(threshold_method="max_kappa"))
    kappa = sk.cohen_kappa_score(truth, scores >= best.threshold)
    assert best.cohen_kappa() == pytest.approx(kappa)
    # no cut at a distinct score gives a higher kappa
    assert all(sk.cohen_kappa_score(truth, scores >= cut) <= kappa + 1e-12 for cut in np.unique(scores))


def test_multiclass_macro_averages_and_one_vs_rest_auc():
    rng = np.random.default_rng(7)
    labels = ["a", "b", "c"]
    rows = []
    truth = rng.integers(0, 3, 90)
    truth[:3] = [0, 1, 2]
    for i in range(90):
        proba = rng.dirichlet([1, 1, 1])
        proba[truth[i]] += 0.5
        proba = (proba / proba.sum()).round(6)
        proba[2] = round(1 - proba[0] - proba[1], 6)
        rows.append({"y_true": labels[truth[i]], **{f"proba:{label}": proba[j] for j, label in enumerate(labels)}})
    data = read(rows, candidate="NB")
    values = evaluation_document(data)["candidates"]["NB"]
    proba = np.array([[r[f"proba:{label}"] for label in labels] for r in rows])
    t = np.array([r["y_true"] for r in rows])
    p = np.array(labels)[proba.argmax(axis=1)]
    assert values["accuracy"] == pytest.approx(sk.accuracy_score(t, p), abs=1e-15)
    # From the report's confusion matrix, by scikit-learn's formulas.
    assert values["balanced_accuracy"] == pytest.approx(sk.balanced_accuracy_score(t, p), abs=1e-15)
    assert values["cohen_kappa"] == pytest.approx(sk.cohen_kappa_score(t, p, labels=labels), abs=1e-15)
    assert values["precision"] == pytest.approx(sk.precision_score(t, p, average="macro"))
    assert values["recall"] == pytest.approx(sk.recall_score(t, p, average="macro"))
    assert values["f1"] == pytest.approx(sk.f1_score(t, p, average="macro"))
    assert values["roc_auc"] == pytest.approx(
        sk.roc_auc_score(t, proba, multi_class="ovr", average="macro", labels=labels)
    )
    assert values["log_loss"] == pytest.approx(sk.log_loss(t, proba, labels=labels))
    specificities = [((t != label) & (p != label)).sum() / (t != label).sum() for label in labels]
    assert values["specificity"] == pytest.approx(np.mean(specificities))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(3, 6).flatmap(
        lambda classes: st.tuples(
            st.just(classes),
            st.lists(st.integers(0, classes - 1), min_size=classes, max_size=40),
            st.lists(
                st.lists(st.sampled_from([1, 2, 3, 4]), min_size=classes, max_size=classes), min_size=40, max_size=40
            ),
        )
    )
)
def test_one_vs_rest_auc_is_scikit_learns_with_ties(case):
    """Issue 33: the multiclass ROC AUC is each class's binary AUC (the
    report's own kernel) averaged; with coarse probabilities (many ties
    within and across classes) it is scikit-learn's ovr macro AUC to 1e-12."""
    classes, truth, weights = case
    truth = list(range(classes)) + truth  # (every class in y_true)
    labels = [f"c{k}" for k in range(classes)]
    rows = []
    for index, code in enumerate(truth):
        own = weights[index % len(weights)]
        proba = [weight / sum(own) for weight in own]
        rows.append({"y_true": labels[code], **{f"proba:{label}": proba[k] for k, label in enumerate(labels)}})
    values = evaluation_document(read(rows, candidate="NB"))["candidates"]["NB"]
    proba = np.array([[row[f"proba:{label}"] for label in labels] for row in rows])
    expected = sk.roc_auc_score(np.array(truth), proba, multi_class="ovr", average="macro", labels=list(range(classes)))
    assert values["roc_auc"] == pytest.approx(expected, abs=1e-12)


MIRROR_SCORES = (0.9, 0.4, 0.7, 0.2)
MIRROR_PRED = ("yes", "no", "yes", "no")  # the scores at the fixed threshold 0.5


def mirror_rows(truth: str, columns: str) -> list[dict]:
    """Four instances all of one class (``truth``), with a score column only
    or a y_pred column only; the same predictions either way."""
    rows = []
    for score, predicted in zip(MIRROR_SCORES, MIRROR_PRED, strict=True):
        row = {"candidate": "A", "y_true": truth}
        row.update({"score": score} if columns == "score" else {"y_pred": predicted})
        rows.append(row)
    return rows


@pytest.mark.parametrize("columns", ["score", "y_pred"])
@pytest.mark.parametrize("truth", ["yes", "no"])
def test_one_class_files_give_every_metric_or_its_reason_for_either_class(truth, columns):
    """Issue 16, finding 12: an all-positive file with a score only dropped
    every metric, an all-positive y_pred file naming the negative label was
    refused, and the notes named label codes ("pos_label=0")."""
    data = read(mirror_rows(truth, columns), positive="yes")
    document = evaluation_document(data)
    values, notes = document["candidates"]["A"], document["notes"].get("A", {})
    t, p = np.array([truth] * 4), np.array(MIRROR_PRED)
    expected = {
        "accuracy": sk.accuracy_score(t, p),
        "cohen_kappa": sk.cohen_kappa_score(t, p),
        "precision": sk.precision_score(t, p, pos_label="yes", zero_division=np.nan),
        "f1": sk.f1_score(t, p, pos_label="yes", zero_division=np.nan),
    }
    reasons = {
        "balanced_accuracy": f"only one class occurs in y_true ({truth!r}): balanced accuracy would be the "
        "accuracy of that class alone",
    }
    if truth == "yes":
        expected["recall"] = sk.recall_score(t, p, pos_label="yes")
        reasons["specificity"] = (
            "specificity is undefined: y_true has no negative instance (every label is 'yes', the positive label)"
        )
    else:
        expected["specificity"] = sk.recall_score(t, p, pos_label="no")
        reasons["recall"] = "recall is undefined: y_true has no positive instance ('yes'): every label is 'no'"
    if columns == "score":
        expected["log_loss"] = sk.log_loss(t == "yes", np.array(MIRROR_SCORES), labels=[False, True])
        reasons["roc_auc"] = (
            "ROC AUC is undefined: y_true has no negative instance (every label is 'yes', the positive label)"
            if truth == "yes"
            else "ROC AUC is undefined: y_true has no positive instance ('yes'): every label is 'no'"
        )
    assert set(values) == set(expected) | set(reasons)
    assert {key: value for key, value in values.items() if value is not None} == pytest.approx(expected)
    assert notes == reasons and all(values[key] is None for key in reasons)
    json.dumps(document, allow_nan=False)  # never a NaN in the document


def test_one_class_files_name_their_labels_and_the_unnamed_negative():
    positive_only = CandidateReport(read(mirror_rows("yes", "score"), positive="yes"), "A")
    assert positive_only.binary and positive_only.label_names == ["yes", "(not yes)"]
    assert positive_only.confusion_matrix().tolist() == [[2, 2], [0, 0]]
    assert read(mirror_rows("yes", "y_pred"), positive="yes").labels == ["yes", "no"]
    assert read(mirror_rows("no", "y_pred"), positive="yes").labels == ["no", "yes"]
    # the thresholds that need both classes say which one is missing, by name
    kappa = CandidateReport(
        read(mirror_rows("yes", "score"), positive="yes"), "A", Options(threshold_method="max_kappa")
    )
    with pytest.raises(ValueError) as refused:
        kappa.accuracy()
    assert str(refused.value) == (
        "the threshold of the method 'Highest kappa' is undefined: y_true has no negative instance (every label is "
        "'yes', the positive label)"
    )
    lowest = Options(threshold_method="lowest_positive")
    with pytest.raises(ValueError, match=r"^the threshold of the method 'Lowest score of a positive' is undefined: "):
        CandidateReport(read(mirror_rows("no", "score"), positive="yes"), "A", lowest).accuracy()
    assert CandidateReport(read(mirror_rows("yes", "score"), positive="yes"), "A", lowest).accuracy() == 1.0


def test_arr_past_its_pole_is_reported_and_a3r_still_given():
    rows = []
    for name, seconds in (("fast", 1e-12), ("slow", 1.0)):
        rows += [
            {"candidate": name, "y_true": "yes", "y_pred": "yes", "time": seconds},
            {"candidate": name, "y_true": "no", "y_pred": "no", "time": seconds},
        ]
    document = evaluation_document(read(rows, positive="yes"), Options(acc_d=0.1))
    assert document["candidates"]["fast"]["arr"] is None
    assert document["notes"]["fast"]["arr"] == (
        "ARR is undefined at and below its pole, a time ratio of 1e-10 for AccD 0.1, where it stops falling as "
        "the time ratio grows: fast against slow (time ratio 1e-12). A3R, which is monotonic, is the measure to use"
    )
    a3r = document["candidates"]["fast"]["a3r"]
    assert a3r == pytest.approx(1e12 ** (1 / 8))


def test_a_root_so_small_that_a3r_leaves_floating_point_is_null_with_the_reason():
    """The times raised to the power 1 / 0.001 are 0: A3R was NaN, which JSON cannot carry."""
    rows = [
        {"candidate": name, "y_true": label, "y_pred": label, "time": seconds}
        for name, seconds in (("fast", 0.0005), ("slow", 0.001))
        for label in ("yes", "no")
    ]
    document = evaluation_document(read(rows, positive="yes"), Options(root=0.001))
    assert document["candidates"]["fast"]["a3r"] is None
    assert document["notes"]["fast"]["a3r"].startswith("A3R is beyond floating point with root 0.001")
    json.dumps(document, allow_nan=False)


def test_a_pairwise_score_that_is_not_finite_is_null_with_the_reason(monkeypatch):
    # No input known today gives one (a3r refuses them); the document stays JSON if one ever does.
    monkeypatch.setattr(report, "pairwise_scores", lambda reports, key, options: np.array([math.inf, 1.0]))
    document = evaluation_document(read(binary_rows(3), positive="yes"))
    assert [document["candidates"][name]["arr"] for name in ("J48", "JRip")] == [None, 1.0]
    assert document["notes"]["J48"]["arr"] == "ARR is not a finite number here"
    json.dumps(document, allow_nan=False)


def test_metric_value_for_study_metrics_and_its_refusals():
    data = read(binary_rows(5), positive="yes")
    assert metric_value(data, "J48", "accuracy") == CandidateReport(data, "J48").accuracy()
    aic = metric_value(data, "J48", "aic", Options(n_parameters={"J48": 12}))
    proba = CandidateReport(data, "J48").probabilities
    log_likelihood = np.log(proba[np.arange(len(proba)), data.candidates["J48"].y_true]).sum()
    assert aic == pytest.approx(2 * 12 - 2 * log_likelihood)
    with pytest.raises(NotApplicable, match="number of parameters of J48"):
        metric_value(data, "J48", "aic")
    with pytest.raises(ValueError, match="unknown computation 'speed'"):
        metric_value(data, "J48", "speed")
    assert set(COMPUTATIONS) >= set(DOCUMENT_KEYS) | {"aic", "bic"}


# --- the command ------------------------------------------------------------------------------


def write(tmp_path, rows, name="predictions.csv"):
    path = tmp_path / name
    path.write_text(csv_text(rows), encoding="utf-8")
    return path


def test_command_json_agrees_with_scikit_learn(tmp_path):
    rows = binary_rows(11)
    out = io.StringIO()
    call_command("evaluate_predictions", str(write(tmp_path, rows)), "--positive", "yes", "--json", stdout=out)
    document = json.loads(out.getvalue())
    assert document["format"] == "approve-evaluation/1" and document["positive"] == "yes"
    for name in ("J48", "JRip"):
        for key, value in sklearn_binary(rows, name).items():
            assert document["candidates"][name][key] == pytest.approx(value, abs=1e-12)


def test_command_report_in_words(tmp_path):
    out = io.StringIO()
    call_command("evaluate_predictions", str(write(tmp_path, binary_rows(12))), "--positive", "yes", stdout=out)
    text = out.getvalue()
    assert text.startswith("120 rows, 2 candidates, labels: ")
    assert "Accuracy (success rate)" in text and "\nJRip\n" in text


def test_command_refuses_a_bad_file_with_its_lines(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("candidate,y_true,y_pred,time\nA,yes,yes,0.1\nA,no,no,-1\n", encoding="utf-8")
    with pytest.raises(CommandError) as refused:
        call_command("evaluate_predictions", str(path), "--json")
    assert "bad.csv was refused" in str(refused.value) and "line 3, column time" in str(refused.value)
    with pytest.raises(CommandError, match="missing.csv"):
        call_command("evaluate_predictions", str(tmp_path / "missing.csv"))


def test_multiclass_macro_averages_run_over_the_labels_of_y_true():
    """METHOD.md 7.2 (issue 16, finding 14): a declared label that never occurs
    in y_true (here 'c', predicted once) is left out of the macro averages, as
    balanced accuracy leaves it out; scikit-learn's default would average over
    every label seen, 'c' included, with its precision 0 and recall 0/0."""
    rows = [
        {"candidate": "A", "y_true": t, "proba:a": pa, "proba:b": pb, "proba:c": pc}
        for t, pa, pb, pc in (("a", 0.8, 0.1, 0.1), ("a", 0.2, 0.2, 0.6), ("b", 0.1, 0.8, 0.1), ("b", 0.3, 0.6, 0.1))
    ]
    values = evaluation_document(read(rows))["candidates"]["A"]
    t, p = ["a", "a", "b", "b"], ["a", "c", "b", "b"]
    own = {"labels": ["a", "b"], "average": "macro"}
    assert values["precision"] == pytest.approx(sk.precision_score(t, p, **own)) == 1.0
    assert values["recall"] == pytest.approx(sk.recall_score(t, p, **own)) == 0.75
    assert values["f1"] == pytest.approx(sk.f1_score(t, p, **own))
    with pytest.warns(UserWarning, match="y_pred contains classes not in y_true"):
        assert values["balanced_accuracy"] == pytest.approx(sk.balanced_accuracy_score(t, p)) == 0.75
    assert values["specificity"] == 1.0
    # scikit-learn's default, every label seen: 'c' drags both down
    assert sk.precision_score(t, p, average="macro", zero_division=0) == pytest.approx(2 / 3)
    assert sk.recall_score(t, p, average="macro", zero_division=0) == pytest.approx(0.5)


def test_one_fold_of_accuracy_0_leaves_a3r_and_arr_undefined_for_every_candidate():
    """METHOD.md 7.2: the folds are A3R's and ARR's data sets, and a success
    rate of 0 on one of them is a ratio's zero denominator; the note names
    the candidate and the fold (it said "candidate 0 on dataset 1")."""
    rows = []
    for name, seconds in (("A", 0.001), ("B", 0.002)):
        for fold in ("1", "2"):
            for truth in ("yes", "no"):
                wrong = name == "A" and fold == "2"
                predicted = {"yes": "no", "no": "yes"}[truth] if wrong else truth
                rows.append({"candidate": name, "y_true": truth, "y_pred": predicted, "fold": fold, "time": seconds})
    document = evaluation_document(read(rows, positive="yes"))
    note = (
        "A3R and ARR are undefined for every candidate: each compares the candidates' success rates on each data "
        "set as ratios (every fold is a data set), and the accuracy is 0 for A in fold '2'"
    )
    for name in ("A", "B"):
        assert document["candidates"][name]["a3r"] is None and document["candidates"][name]["arr"] is None
        assert document["notes"][name] == {"a3r": note, "arr": note}
    assert document["candidates"]["A"]["accuracy"] == 0.5  # over the whole file it is defined


def test_a_threshold_asked_for_where_none_applies_says_why():
    """Issue 16, finding 6: the report page shows these under the threshold method."""
    labels_only = read(
        [{"candidate": "A", "y_true": "yes", "y_pred": "no"}, {"candidate": "A", "y_true": "no", "y_pred": "no"}],
        positive="yes",
    )
    asked = Options(threshold_method="max_kappa", use_threshold=True)
    assert CandidateReport(labels_only, "A", asked).threshold_refusal == (
        "A has no score column (nor class probabilities) to derive labels from"
    )
    assert CandidateReport(labels_only, "A").threshold_refusal is None  # not asked
    three = read(
        [
            {"candidate": "A", "y_true": label, "proba:a": 0.2, "proba:b": 0.3, "proba:c": 0.5}
            for label in ("a", "b", "c")
        ]
    )
    assert CandidateReport(three, "A", asked).threshold_refusal == (
        "a threshold turns a binary task's scores into labels, and this set has 3 labels ('a', 'b', 'c')"
    )
    one = read([{"candidate": "A", "y_true": "a", "y_pred": "a"}])
    assert CandidateReport(one, "A", asked).threshold_refusal == (
        "a threshold needs the positive label, and this set names none (its label is 'a')"
    )
    assert CandidateReport(one, "A", asked).labels_shown() == "the file's y_pred"
