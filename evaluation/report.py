"""Every metric a set of predictions allows, per candidate: the
``approve-evaluation/1`` document (FORMATS.md), the single values study
metrics are computed from, and the pictures of one candidate's report.

Pure: NumPy and scikit-learn through ``evaluation.metrics``, no Django. It
works on ``evaluation.predictions.PredictionData``, whose labels are integer
codes into ``data.labels``.

What applies depends on the columns: labels (``y_pred``, or labels derived
from scores by a threshold, or from class probabilities by the most probable
class) give the confusion-matrix metrics; scores or probabilities give AUC,
probabilities give log loss and AIC/BIC; folds give consistency, times
efficiency and, across candidates, A3R and ARR; context columns the
Relevance Score. A metric that applies but is undefined for these
predictions (one class only, no instance predicted positive, ARR past its
pole) is ``None`` with the reason, never NaN.
"""

import json
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from engine.rules import DISPLAY_SIGNIFICANT_DIGITS

from . import metrics
from ._checks import listed
from .predictions import PredictionData

FORMAT = "approve-evaluation/1"


@dataclass(frozen=True)
class Computation:
    """A metric a study can take from predictions: its key (the document's),
    its name and one-line definition for people, which way is better, what
    columns it needs and which parameters it takes."""

    key: str
    name: str
    definition: str
    better: str
    needs: str
    parameters: tuple[str, ...] = ()


_LABELS = "predicted labels (a y_pred column, or scores or class probabilities to derive them from)"
_SCORES = "scores (a score column, or proba:<label> columns)"
_PROBABILITIES = "probabilities (proba:<label> columns, or a score column between 0 and 1)"

COMPUTATIONS: dict[str, Computation] = {
    c.key: c
    for c in (
        Computation(
            "accuracy",
            "Accuracy (success rate)",
            "the share of instances whose predicted label is the true one",
            "higher",
            _LABELS,
            ("threshold",),
        ),
        Computation(
            "balanced_accuracy",
            "Balanced accuracy",
            "the mean over the classes of the share of each class predicted right",
            "higher",
            _LABELS,
            ("threshold",),
        ),
        Computation(
            "precision",
            "Precision",
            "of the instances predicted positive, the share that are positive, TP / (TP + FP); "
            "the mean over the classes when there are more than two",
            "higher",
            _LABELS,
            ("threshold",),
        ),
        Computation(
            "recall",
            "Recall (sensitivity)",
            "of the positive instances, the share predicted positive, TP / (TP + FN); "
            "the mean over the classes when there are more than two",
            "higher",
            _LABELS,
            ("threshold",),
        ),
        Computation(
            "specificity",
            "Specificity",
            "of the negative instances, the share predicted negative, TN / (TN + FP); "
            "the mean of each class against the rest when there are more than two",
            "higher",
            _LABELS,
            ("threshold",),
        ),
        Computation(
            "f1",
            "F1",
            "the harmonic mean of precision and recall; the mean over the classes when there are more than two",
            "higher",
            _LABELS,
            ("threshold",),
        ),
        Computation(
            "roc_auc",
            "ROC AUC",
            "the chance that a random positive instance scores above a random negative one (ties count half); "
            "the mean of each class against the rest when there are more than two",
            "higher",
            _SCORES,
        ),
        Computation(
            "cohen_kappa",
            "Cohen's kappa",
            "agreement of the predicted with the true labels beyond what chance gives, (Po - Pe) / (1 - Pe)",
            "higher",
            _LABELS,
            ("threshold",),
        ),
        Computation(
            "log_loss",
            "Log loss",
            "the mean of minus the natural log of the probability given to the true label",
            "lower",
            _PROBABILITIES,
        ),
        Computation(
            "aic",
            "AIC",
            "Akaike's information criterion 2K - 2 ln L, L the likelihood of the true labels under the predicted "
            "probabilities and K the candidate's number of free parameters",
            "lower",
            _PROBABILITIES,
            ("n_parameters",),
        ),
        Computation(
            "bic",
            "BIC",
            "the Bayesian information criterion K ln N - 2 ln L, N the number of instances",
            "lower",
            _PROBABILITIES,
            ("n_parameters",),
        ),
        Computation(
            "consistency",
            "Consistency (accuracy's spread over folds)",
            "the standard deviation of the accuracy over the folds (lower is steadier)",
            "lower",
            "folds (a fold column with two folds or more) and predicted labels",
            ("threshold",),
        ),
        Computation(
            "efficiency",
            "Efficiency (time per instance)",
            "the mean time spent predicting one instance, in seconds",
            "lower",
            "times (a time column)",
        ),
        Computation(
            "relevance_score",
            "Relevance Score",
            "100 for a right prediction, less the further the predicted outcome's probability in its context "
            "lies from the most probable's (alpha) and the actual's (beta); the mean over the instances, 0 to 100",
            "higher",
            "context:<name> columns and predicted labels",
            ("alpha", "beta", "threshold"),
        ),
        Computation(
            "a3r",
            "A3R",
            "the success rate ratio to each other candidate divided by the N-th root of the time ratio, "
            "averaged over the other candidates (monotonic in the time ratio)",
            "higher",
            "times and predicted labels for two candidates or more",
            ("root", "threshold"),
        ),
        Computation(
            "arr",
            "ARR",
            "the success rate ratio to each other candidate divided by 1 + AccD log10 of the time ratio, averaged "
            "over the other candidates; undefined past its pole, where A3R is the measure to use",
            "higher",
            "times and predicted labels for two candidates or more",
            ("acc_d", "threshold"),
        ),
    )
}

#: The metric keys of ``approve-evaluation/1`` (FORMATS.md), in its order.
#: AIC and BIC need each candidate's number of parameters, which a file does
#: not carry: they are computed when a study metric is mapped to them.
DOCUMENT_KEYS = (
    "accuracy",
    "balanced_accuracy",
    "precision",
    "recall",
    "specificity",
    "f1",
    "roc_auc",
    "cohen_kappa",
    "log_loss",
    "consistency",
    "efficiency",
    "relevance_score",
    "a3r",
    "arr",
)

#: What ``Options.threshold_method`` accepts, from the library.
THRESHOLD_METHODS = metrics.THRESHOLD_METHODS

#: Each threshold method's name for people (the pages' choices).
THRESHOLD_NAMES = {
    "fixed": "Fixed value",
    "lowest_positive": "Lowest score of a positive",
    "fixed_sensitivity": "Fixed sensitivity",
    "equal_sensitivity_specificity": "Sensitivity equal to specificity",
    "max_sensitivity_specificity": "Highest sensitivity + specificity",
    "max_kappa": "Highest kappa",
    "mean_probability": "Mean predicted probability",
    "equal_prevalence": "Predicted prevalence equal to the true one",
}
assert tuple(THRESHOLD_NAMES) == THRESHOLD_METHODS

# The threshold methods that need a positive instance in y_true, and those
# that need a negative one too (metrics.select_threshold).
_NEED_POSITIVES = frozenset(THRESHOLD_METHODS) - {"fixed", "mean_probability"}
_NEED_NEGATIVES = frozenset({"equal_sensitivity_specificity", "max_sensitivity_specificity", "max_kappa"})


@dataclass(frozen=True)
class Options:
    """Parameters of the computations, with METHOD.md 7's defaults.

    ``threshold_method`` turns a binary candidate's scores into labels when
    it has no ``y_pred`` column (or when ``use_threshold`` asks for it even
    so): predicted positive means score >= threshold."""

    threshold_method: str = "fixed"
    threshold_value: float = 0.5
    threshold_sensitivity: float = 0.95
    use_threshold: bool = False
    alpha: float = 2.0
    beta: float = 1.0
    root: float = 8.0
    acc_d: float = 0.1
    n_parameters: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.threshold_method not in THRESHOLD_METHODS:
            raise ValueError(
                f"threshold method {self.threshold_method!r} is unknown: use one of {', '.join(THRESHOLD_METHODS)}"
            )


class NotApplicable(ValueError):
    """The predictions lack the columns a metric needs (it is left out of
    the document rather than reported as undefined)."""


def _finite(value: float, what: str) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what} is not a finite number here")
    return value


class CandidateReport:
    """One candidate's predictions with what several metrics share (its
    scores, probabilities and predicted labels), each worked out once."""

    def __init__(self, data: PredictionData, name: str, options: Options = Options()) -> None:
        self.data, self.name, self.options = data, name, options
        self.predictions = data.candidates[name]
        self.positive = data.labels.index(data.positive) if data.positive is not None else None
        # A named positive label makes the task binary, even when the file
        # names no other label (every instance positive, a score column
        # only): the negative label is then unnamed, and shown as
        # "(not <positive>)".
        self.binary = len(data.labels) == 2 or (len(data.labels) == 1 and self.positive is not None)
        self.label_names = list(data.labels)
        if self.binary and len(data.labels) == 1:
            self.label_names.append(f"(not {data.positive})")
        self.codes = np.arange(len(self.label_names))

    @property
    def y_true(self) -> np.ndarray:
        return self.predictions.y_true

    @cached_property
    def present(self) -> np.ndarray:
        """The codes of the labels y_true holds, sorted (``np.unique``'s, by a count)."""
        return metrics.codes_present(self.y_true)

    def _positive_code(self, what: str) -> int:
        if self.positive is None:
            raise ValueError(f"{what} needs the positive label: name it (--positive, or the set's positive label)")
        return self.positive

    @cached_property
    def scores(self) -> np.ndarray:
        """The positive label's scores (binary)."""
        p = self.predictions
        if p.score is not None:
            return p.score
        if p.proba is not None and self.binary:
            return p.proba[:, self._positive_code("a score")]
        raise NotApplicable(f"needs {_SCORES}")

    @cached_property
    def probabilities(self) -> np.ndarray:
        """(n, labels) class probabilities: the proba columns, or a binary
        score between 0 and 1 read as the positive label's probability."""
        p = self.predictions
        if p.proba is not None:
            if p.proba.shape[1] < len(self.codes):  # the positive label's column only: the unnamed negative's is 0
                return np.hstack([p.proba, np.zeros((len(p.proba), len(self.codes) - p.proba.shape[1]))])
            return p.proba
        if p.score is not None and self.binary:
            positive = self._positive_code("probabilities from a score")
            if p.score.min() < 0 or p.score.max() > 1:
                raise ValueError("the scores are not probabilities (some lie outside 0..1)")
            proba = np.empty((len(p.score), 2))
            proba[:, positive], proba[:, 1 - positive] = p.score, 1 - p.score
            return proba
        raise NotApplicable(f"needs {_PROBABILITIES}")

    @cached_property
    def threshold(self) -> float | None:
        """The threshold that turns scores into labels, when labels come from scores."""
        if not self._labels_from_scores:
            return None
        o = self.options
        is_positive = (self.y_true == self._positive_code("a threshold")).astype(np.int8)
        missing = self.missing_class
        if (missing == "positive" and o.threshold_method in _NEED_POSITIVES) or (
            missing == "negative" and o.threshold_method in _NEED_NEGATIVES
        ):
            name = THRESHOLD_NAMES[o.threshold_method]
            raise ValueError(f"the threshold of the method {name!r} is undefined: {self.one_class_reason}")
        return metrics.select_threshold(
            is_positive,
            self.scores,
            method=o.threshold_method,
            pos_label=1,
            value=o.threshold_value,
            sensitivity=o.threshold_sensitivity,
        )

    @property
    def _has_scores(self) -> bool:
        p = self.predictions
        return self.binary and (p.score is not None or p.proba is not None)

    @property
    def _labels_from_scores(self) -> bool:
        return self._has_scores and (self.predictions.y_pred is None or self.options.use_threshold)

    @property
    def threshold_refusal(self) -> str | None:
        """Why labels cannot be derived from scores although the options ask
        for it (``use_threshold``): None when they can, or when not asked."""
        if not self.options.use_threshold or self._labels_from_scores:
            return None
        if not self.binary:
            labels = ", ".join(repr(label) for label in self.data.labels)
            if len(self.data.labels) > 2:
                return (
                    f"a threshold turns a binary task's scores into labels, and this set has "
                    f"{len(self.data.labels)} labels ({labels})"
                )
            return f"a threshold needs the positive label, and this set names none (its label is {labels})"
        return f"{self.name} has no score column (nor class probabilities) to derive labels from"

    def labels_shown(self) -> str:
        """Which predicted labels the confusion-matrix metrics use, for
        people: the file's ``y_pred``, or labels derived from the scores at
        which threshold by which method, or the most probable class.
        ValueError (from ``threshold``) when the threshold is undefined."""
        p = self.predictions
        if self._labels_from_scores:
            method = THRESHOLD_NAMES[self.options.threshold_method]
            source = "the scores" if p.score is not None else f"the probabilities of {self.data.positive}"
            threshold = f"{self.threshold:.{DISPLAY_SIGNIFICANT_DIGITS}g}"
            text = (
                f"derived from {source}: {self.data.positive} where it is at least {threshold}, "
                f"the threshold of the method {method!r}"
            )
            return text + (" (the file's y_pred is set aside)" if p.y_pred is not None else " (the file has no y_pred)")
        if p.y_pred is not None:
            return "the file's y_pred"
        if p.proba is not None:
            return "the most probable class of each instance (the file has no y_pred)"
        raise NotApplicable(f"needs {_LABELS}")

    @cached_property
    def missing_class(self) -> str | None:
        """ "positive" or "negative" when y_true lacks that class (binary), else None."""
        if not self.binary or self.positive is None:
            return None
        is_positive = self.y_true == self.positive
        if not is_positive.any():
            return "positive"
        return "negative" if is_positive.all() else None

    @property
    def one_class_reason(self) -> str:
        """Why a binary metric needing both classes is undefined, naming the
        labels as the file does."""
        positive = self.data.positive
        if self.missing_class == "negative":
            return f"y_true has no negative instance (every label is {positive!r}, the positive label)"
        present = ", ".join(repr(self.label_names[code]) for code in self.present)
        return f"y_true has no positive instance ({positive!r}): every label is {present}"

    @cached_property
    def y_pred(self) -> np.ndarray:
        """Predicted label codes: the y_pred column; or, for binary scores,
        positive where score >= threshold; or the most probable class."""
        p = self.predictions
        if self._labels_from_scores:
            positive = self._positive_code("labels from scores")
            return np.where(self.scores >= self.threshold, positive, 1 - positive).astype(np.int32)
        if p.y_pred is not None:
            return p.y_pred
        if p.proba is not None:
            return np.argmax(p.proba, axis=1).astype(np.int32)
        raise NotApplicable(f"needs {_LABELS}")

    # --- the metrics ----------------------------------------------------------------

    # Accuracy, balanced accuracy, binary precision, recall and F1, and
    # Cohen's kappa come from the confusion matrix (one bincount over the
    # label codes), by scikit-learn's own formulas on the same counts: the
    # same values, without a pass over the instances per metric.

    def accuracy(self) -> float:
        counts = self.confusion_matrix()
        return int(np.trace(counts)) / int(counts.sum())

    def balanced_accuracy(self) -> float:
        counts = self.confusion_matrix()
        true_totals = counts.sum(axis=1)
        present = np.flatnonzero(true_totals)
        if len(present) < 2:
            raise ValueError(
                f"only one class occurs in y_true ({self.label_names[present[0]]!r}): balanced accuracy would be "
                "the accuracy of that class alone"
            )
        # The recall of each class of y_true (declared labels absent from
        # y_true only count as errors), averaged.
        return float(np.mean(np.diag(counts)[present] / true_totals[present]))

    @cached_property
    def _precision_recall_f1(self) -> tuple[float, float, float]:
        """Precision, recall and F1 in one pass: of the positive label when
        binary, macro averages over the labels of y_true otherwise."""
        if self.binary:
            positive = self._positive_code("precision, recall and F1")
            counts = self.confusion_matrix()
            hits = int(counts[positive, positive])
            predicted, true = int(counts[:, positive].sum()), int(counts[positive].sum())

            def ratio(numerator: int, denominator: int) -> float:
                return numerator / denominator if denominator else math.nan

            return ratio(hits, predicted), ratio(hits, true), ratio(2 * hits, true + predicted)
        else:
            average, labels, pos_label = "macro", self.present, 1
        # imported on first use: scikit-learn (and scipy) cost 0.9 s at every command's start.
        from sklearn.exceptions import UndefinedMetricWarning
        from sklearn.metrics import precision_recall_fscore_support

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            precision, recall, f1, _ = precision_recall_fscore_support(
                self.y_true, self.y_pred, average=average, labels=labels, pos_label=pos_label, zero_division=np.nan
            )
        return float(precision), float(recall), float(f1)

    def _part(self, index: int, what: str, reason: str) -> float:
        value = self._precision_recall_f1[index]
        if math.isnan(value):
            raise ValueError(f"{what} is undefined: {reason}")
        return value

    def precision(self) -> float:
        positive = f" ({self.data.positive!r})" if self.binary else ""
        return self._part(0, "precision", f"no instance is predicted positive{positive}")

    def recall(self) -> float:
        return self._part(1, "recall", self.one_class_reason if self.binary else "no instance is positive")

    def f1(self) -> float:
        positive = f" ({self.data.positive!r})" if self.binary else ""
        return self._part(2, "F1", f"there is no positive instance{positive}, predicted or true")

    def specificity(self) -> float:
        if self.binary:
            positive = self._positive_code("specificity")
            if self.missing_class == "negative":
                raise ValueError(f"specificity is undefined: {self.one_class_reason}")
            return metrics.specificity_score(self.y_true, self.y_pred, pos_label=positive)
        present = self.present
        if len(present) < 2:  # (the one class has no negative instance: the library says why)
            return metrics.specificity_score(self.y_true == present[0], self.y_pred == present[0], pos_label=True)
        # Each class against the rest, from the confusion matrix: one pass
        # over the instances, not one per class.
        counts = self.confusion_matrix()
        right = np.diag(counts)
        true_totals, predicted_totals = counts.sum(axis=1), counts.sum(axis=0)
        negatives = len(self.y_true) - true_totals[present]
        false_positives = predicted_totals[present] - right[present]
        return float(np.mean((negatives - false_positives) / negatives))

    def roc_auc(self) -> float:
        p = self.predictions
        if self.binary and (p.score is not None or p.proba is not None):
            is_positive = self.y_true == self._positive_code("ROC AUC")
            if self.missing_class:
                raise ValueError(f"ROC AUC is undefined: {self.one_class_reason}")
            return metrics.binary_roc_auc(is_positive, self.scores)
        if p.proba is None:
            raise NotApplicable(f"needs {_SCORES}")
        if len(self.present) < len(self.codes):
            missing = [self.data.labels[c] for c in sorted(set(self.codes) - set(self.present.tolist()))]
            raise ValueError(f"one-vs-rest ROC AUC needs every class in y_true; missing: {', '.join(missing)}")
        # One-vs-rest, macro: each class's binary AUC against the rest,
        # averaged, as scikit-learn's roc_auc_score(multi_class="ovr",
        # average="macro") defines it, by the binary kernel (one unstable
        # sort a class, no input checks: 1.5 s of 2.3 at 1,000,000 rows x 10
        # classes went to that function's stable sorts and checks).
        return float(np.mean([metrics.binary_roc_auc(self.y_true == code, p.proba[:, code]) for code in self.codes]))

    def cohen_kappa(self) -> float:
        # scikit-learn's cohen_kappa_score on the confusion matrix of every
        # label: 1 - sum(w C) / sum(w E), w 0 on the diagonal, E the outer
        # product of the totals over their sum; NaN where it is undefined.
        confusion = self.confusion_matrix().astype(np.float64)
        sum0, sum1 = np.sum(confusion, axis=0), np.sum(confusion, axis=1)
        total = np.sum(sum0)
        kappa = math.nan
        if total != 0:
            expected = np.outer(sum0, sum1) / total
            off_diagonal = np.ones_like(confusion)
            np.fill_diagonal(off_diagonal, 0)
            chance = np.sum(off_diagonal * expected)
            if chance != 0:
                kappa = float(1 - np.sum(off_diagonal * confusion) / chance)
        if math.isnan(kappa):
            label = self.label_names[int(self.y_true[0])]
            raise ValueError(
                f"Cohen's kappa is undefined: chance agreement is 1 (every true and predicted label is {label!r})"
            )
        return kappa

    def log_loss(self) -> float:
        return metrics.log_loss(self.y_true, self.probabilities, labels=self.codes)

    def _information_criteria(self) -> tuple[float, float]:
        count = self.options.n_parameters.get(self.name)
        if count is None:
            raise NotApplicable(f"needs the number of parameters of {self.name}")
        return metrics.information_criteria(self.y_true, self.probabilities, n_parameters=count, labels=self.codes)

    def aic(self) -> float:
        return self._information_criteria()[0]

    def bic(self) -> float:
        return self._information_criteria()[1]

    def consistency(self) -> float:
        if self.predictions.fold is None:
            raise NotApplicable("needs a fold column")
        return metrics.consistency_score(self.y_true, self.y_pred, folds=self.predictions.fold)

    def efficiency(self) -> float:
        if self.predictions.time is None:
            raise NotApplicable("needs a time column")
        return metrics.efficiency_score(self.predictions.time)

    def relevance_score(self) -> float:
        if self.predictions.context is None:
            raise NotApplicable("needs context:<name> columns")
        o = self.options
        return metrics.relevance_score(
            self.y_true, self.y_pred, context=self.predictions.context, alpha=o.alpha, beta=o.beta
        )

    # --- pictures ---------------------------------------------------------------------

    def confusion_matrix(self) -> np.ndarray:
        """Counts, true labels down and predicted labels across, in label
        order: (labels, labels), bounded by the limit on a set's labels."""
        return self._confusion_matrix

    @cached_property
    def _confusion_matrix(self) -> np.ndarray:
        # scikit-learn's confusion_matrix(labels=codes), as one bincount of
        # the pairs (true, predicted) over the codes (small integers).
        count = len(self.codes)
        pairs = self.y_true.astype(np.intp) * count + self.y_pred
        return np.bincount(pairs, minlength=count * count).reshape(count, count)

    def roc_points(self, *, limit: int = 400) -> tuple[np.ndarray, np.ndarray]:
        """(false positive rates, true positive rates) of the ROC curve
        (binary), thinned to at most ``limit`` points for drawing."""
        is_positive = self.y_true == self._positive_code("a ROC curve")
        fpr, tpr, _ = metrics.roc_curve(is_positive, self.scores)
        return thinned(fpr, tpr, limit=limit)

    def lift_gain(self, *, quantiles: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.missing_class == "positive":
            raise ValueError(f"gain and lift are undefined: {self.one_class_reason}")
        is_positive = (self.y_true == self._positive_code("lift and gain")).astype(np.int8)
        return metrics.lift_gain(is_positive, self.scores, pos_label=1, quantiles=quantiles)


def thinned(x: np.ndarray, y: np.ndarray, *, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``limit`` points of a curve, always keeping its ends (a
    drawing cannot show a million points, and needs no more than its pixels)."""
    if len(x) <= limit:
        return x, y
    keep = np.unique(np.linspace(0, len(x) - 1, limit).round().astype(int))
    return x[keep], y[keep]


# --- values across candidates ------------------------------------------------------------


def _success_and_time(reports: list[CandidateReport]) -> tuple[np.ndarray, np.ndarray]:
    """Success rates and mean times per instance, ``(folds, m)`` when every
    candidate has the same folds (each fold a dataset of source 004),
    otherwise ``(m,)``."""
    if len(reports) < 2:
        raise NotApplicable("needs two candidates or more to compare")
    times = [r.predictions.time for r in reports if r.predictions.time is not None]
    if len(times) < len(reports):
        raise NotApplicable("needs a time column for every candidate")
    folds = [r.predictions.fold for r in reports if r.predictions.fold is not None]
    if len(folds) == len(reports) and len({tuple(metrics.codes_present(f)) for f in folds}) == 1:
        fold_codes = metrics.codes_present(folds[0])
        # Each fold's accuracy, the share of its instances predicted right:
        # counted in one pass per candidate (not one call per fold).
        success = np.array(
            [
                np.bincount(fold, weights=r.y_true == r.y_pred)[fold_codes] / np.bincount(fold)[fold_codes]
                for r, fold in zip(reports, folds, strict=True)
            ]
        ).T
        time = np.array([[t[fold == f].mean() for t, fold in zip(times, folds, strict=True)] for f in fold_codes])
        return success, time
    return np.array([r.accuracy() for r in reports]), np.array([t.mean() for t in times])


def _check_success(reports: list[CandidateReport], success: np.ndarray) -> None:
    """A success rate of 0 on any data set (a fold, when the candidates share
    folds) leaves A3R and ARR undefined for every candidate: each is a mean
    of ratios to the others' success rates. ValueError naming them."""
    if (success > 0).all():
        return
    if success.ndim == 1:
        where = [reports[c].name for c in np.flatnonzero(success <= 0)]
    else:
        fold = reports[0].predictions.fold
        assert fold is not None  # (a success rate per fold needs folds)
        fold_names = [reports[0].data.folds[code] for code in metrics.codes_present(fold)]
        where = [f"{reports[c].name} in fold {fold_names[f]!r}" for f, c in np.argwhere(success <= 0).tolist()]
    raise ValueError(
        "A3R and ARR are undefined for every candidate: each compares the candidates' success rates on each data "
        f"set as ratios (every fold is a data set), and the accuracy is 0 for {listed(where)}"
    )


def pairwise_scores(reports: list[CandidateReport], key: str, options: Options) -> np.ndarray:
    """A3R or ARR of every candidate against the others (``a3r_scores``,
    ``arr_scores``); ValueError where undefined (ARR past its pole, a
    success rate of 0)."""
    success, time = _success_and_time(reports)
    _check_success(reports, success)
    if key == "a3r":
        return metrics.a3r_scores(success, time, root=options.root)
    domain = metrics.arr_domain(time, acc_d=options.acc_d)
    if not domain.defined:
        pairs = [
            f"{reports[p].name} against {reports[q].name} (time ratio {ratio:.3g})"
            for (p, q), ratio in zip(domain.pairs.tolist(), domain.time_ratios.tolist(), strict=True)
        ]
        raise ValueError(
            f"ARR is undefined at and below its pole, a time ratio of {domain.pole:.3g} for AccD {options.acc_d:g}, "
            f"where it stops falling as the time ratio grows: {listed(pairs)}. A3R, which is monotonic, "
            "is the measure to use"
        )
    return metrics.arr_scores(success, time, acc_d=options.acc_d)


# --- the document --------------------------------------------------------------------------


def _constant(value: float) -> Callable[[], float]:
    """A computation whose value is already known (a pairwise score)."""
    return lambda: value


def _evaluate(compute: Callable[[], float], what: str) -> tuple[float | None, str | None]:
    """(value, None), (None, reason) when undefined; NotApplicable propagates."""
    try:
        return _finite(compute(), what), None
    except NotApplicable:
        raise
    except ValueError as error:
        return None, str(error)


def _let_go_of_arrays(report: CandidateReport) -> None:
    """The arrays a report computed and cached (its scores, probabilities,
    labels), dropped once its values are known: the pairwise measures that
    come after need its cached numbers only, and ten candidates of a
    million rows would otherwise hold a file's size again in copies."""
    for name, attribute in vars(CandidateReport).items():
        if isinstance(attribute, cached_property) and isinstance(report.__dict__.get(name), np.ndarray):
            del report.__dict__[name]


def _candidate_document(
    report: CandidateReport, keys: tuple[str, ...]
) -> tuple[dict[str, float | None], dict[str, str]]:
    """One candidate's metrics of ``keys`` but the pairwise ones, those its
    columns allow: their values (None where undefined) and the reasons
    where undefined."""
    values: dict[str, float | None] = {}
    reasons: dict[str, str] = {}
    for key in DOCUMENT_KEYS:
        if key in ("a3r", "arr") or key not in keys:
            continue
        try:
            values[key], reason = _evaluate(getattr(report, key), COMPUTATIONS[key].name)
        except NotApplicable:
            continue
        if reason:
            reasons[key] = reason
    return values, reasons


def _pairwise_document(
    reports: list[CandidateReport],
    key: str,
    options: Options,
    candidates: dict[str, dict[str, float | None]],
    notes: dict[str, dict[str, str]],
) -> None:
    """A3R or ARR (``key``) of every candidate added to ``candidates``, the
    reasons where undefined to ``notes``; nothing when the columns do not
    allow it, and null for all with the reason when it cannot be computed."""
    try:
        scores = pairwise_scores(reports, key, options)
    except NotApplicable:
        return
    except ValueError as error:
        for report in reports:
            candidates[report.name][key] = None
            notes[report.name][key] = str(error)
        return
    for report, score in zip(reports, scores.tolist(), strict=True):
        candidates[report.name][key], reason = _evaluate(_constant(score), COMPUTATIONS[key].name)
        if reason:
            notes[report.name][key] = reason


def evaluation_document(
    data: PredictionData, options: Options = Options(), *, keys: tuple[str, ...] = DOCUMENT_KEYS
) -> dict:
    """The ``approve-evaluation/1`` document: per candidate every metric of
    ``keys`` (by default all of ``DOCUMENT_KEYS``) its columns allow;
    ``null`` where one applies but is undefined, its reason under
    ``notes[candidate][metric]``. A page that shows a few metrics asks for
    those only."""
    reports = [CandidateReport(data, name, options) for name in data.candidates]
    candidates: dict[str, dict[str, float | None]] = {}
    notes: dict[str, dict[str, str]] = {}
    for report in reports:
        candidates[report.name], notes[report.name] = _candidate_document(report, keys)
        _let_go_of_arrays(report)
    for key in ("a3r", "arr"):
        if key in keys:
            _pairwise_document(reports, key, options, candidates, notes)
    return {
        "format": FORMAT,
        "positive": data.positive,
        "candidates": candidates,
        "notes": {name: reasons for name, reasons in notes.items() if reasons},
    }


def document_json(document: dict) -> str:
    """The document as compact JSON, the same text wherever it is served
    (``evaluate_predictions --json``, the API). Values are finite: a NaN
    here is a bug, and refused rather than written as JSON cannot carry it."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


PAIRWISE = ("a3r", "arr")


def pairwise_values(data: PredictionData, key: str, options: Options = Options()) -> dict[str, float | ValueError]:
    """A3R or ARR (``key``) of every candidate of the set against the
    others, computed once: ``{candidate: value}``, or the ValueError (a
    ``NotApplicable`` when columns are missing) that ``metric_value`` would
    raise for it."""
    reports = [CandidateReport(data, candidate, options) for candidate in data.candidates]
    try:
        scores = pairwise_scores(reports, key, options)
    except ValueError as error:
        return dict.fromkeys(data.candidates, error)
    values: dict[str, float | ValueError] = {}
    for candidate, score in zip(data.candidates, scores.tolist(), strict=True):
        try:
            values[candidate] = _finite(score, COMPUTATIONS[key].name)
        except ValueError as error:
            values[candidate] = error
    return values


def metric_value(data: PredictionData, name: str, key: str, options: Options = Options()) -> float:
    """One metric of one candidate, for a study metric computed from a
    prediction set: ValueError (a ``NotApplicable`` when columns are
    missing) with the reason when it cannot be given."""
    if key not in COMPUTATIONS:
        raise ValueError(f"unknown computation {key!r}")
    if key in ("a3r", "arr"):
        reports = [CandidateReport(data, candidate, options) for candidate in data.candidates]
        scores = pairwise_scores(reports, key, options)
        return _finite(scores[list(data.candidates).index(name)], COMPUTATIONS[key].name)
    report = CandidateReport(data, name, options)
    return _finite(getattr(report, key)(), COMPUTATIONS[key].name)


# --- one candidate's report, as numbers ----------------------------------------------------------


def _report_values(candidate: CandidateReport) -> dict[str, dict]:
    """Every computation with its value, why it is undefined, or what it needs."""
    values: dict[str, dict] = {}
    for key, computation in COMPUTATIONS.items():
        row: dict = {"value": None, "reason": "", "needs": ""}
        if key in ("a3r", "arr"):
            row["needs"] = "the other candidates of the set: see the comparison"
        else:
            try:
                row["value"], reason = _evaluate(getattr(candidate, key), computation.name)
            except NotApplicable as missing:
                row["needs"] = str(missing)
            else:
                row["reason"] = reason or ""
        values[key] = row
    return values


def _report_curves(candidate: CandidateReport) -> dict:
    """The ROC curve (thinned), and the gain and lift per tenth (binary,
    with scores), or why they are not drawn."""
    try:
        auc = candidate.roc_auc()
        fpr, tpr = candidate.roc_points()
        fractions, gain, lift = candidate.lift_gain()
    except ValueError as error:  # NotApplicable too: no scores, no positive label, one class
        return {"reason": str(error)}
    return {
        "auc": float(auc),
        "fpr": fpr.tolist(),
        "tpr": tpr.tolist(),
        "fractions": fractions.tolist(),
        "gain": gain.tolist(),
        "lift": lift.tolist(),
    }


def candidate_summary(data: PredictionData, name: str, options: Options = Options()) -> dict:
    """What one candidate's report shows, as JSON-ready numbers: how its
    labels were obtained, its confusion matrix (labels by labels, a size the
    limit on a set's labels bounds), its curves (at most ``roc_points``'
    points) and every value with its definition's reason. Kept once
    computed (``evaluation.services``): the page draws from it."""
    candidate = CandidateReport(data, name, options)
    summary: dict = {
        "instances": len(candidate.predictions),
        "label_names": candidate.label_names,
        "threshold_refusal": candidate.threshold_refusal,
        "labels_shown": "",
        "threshold_reason": "",
        "threshold": None,
    }
    try:
        summary["labels_shown"] = candidate.labels_shown()
        summary["threshold"] = candidate.threshold
    except ValueError as error:  # NotApplicable too: no labels at all
        summary["threshold_reason"] = str(error)
    try:
        summary["confusion"] = candidate.confusion_matrix().tolist()
    except ValueError:
        summary["confusion"] = None
    summary["curves"] = _report_curves(candidate)
    summary["values"] = _report_values(candidate)
    return summary
