"""Metrics computed from a candidate's predictions (METHOD.md section 7).

The standard metrics are scikit-learn's own functions, re-exported here so a
caller imports one module: :func:`accuracy_score`, :func:`balanced_accuracy_score`,
:func:`precision_score`, :func:`recall_score` (sensitivity), :func:`f1_score`,
:func:`confusion_matrix`, :func:`roc_curve`, :func:`roc_auc_score`,
:func:`cohen_kappa_score` and :func:`log_loss`. This module adds what
scikit-learn does not have, written in its style (array-likes in, options
keyword-only, plain floats or NumPy arrays out):

* :func:`specificity_score`, :func:`lift_gain`, :func:`select_threshold` and
  :func:`information_criteria`: Misir, Mitra, Samanta, "A Study on
  Benchmarking Parameters for Intelligent Systems" (source 002);
* :func:`relevance_score`: Gopalakrishna, Ozcelebi, Liotta, Lukkien,
  "Relevance As a Metric for Evaluating Machine Learning Algorithms"
  (source 001, METHOD.md 7.1);
* :func:`arr`, :func:`a3r`, :func:`arr_scores`, :func:`a3r_scores`,
  :func:`arr_pole`, :func:`arr_domain`: Brazdil, Soares, Pinto da Costa (ARR)
  and Abdulrahman & Brazdil, "Measures for Combining Accuracy and Time for
  Meta-learning" (A3R, source 004, METHOD.md 7.2);
* :func:`consistency_score` and :func:`efficiency_score` (METHOD.md 7).

Every case where a metric is undefined (one class only, empty input, zero
time, a context never seen, probability 0 of the true label, ...) raises
``ValueError`` with the reason, or returns the value its docstring states;
nothing returns NaN or infinity. Indices in error messages are 0-based.

The functions are meant for arrays of millions of samples: each sorts at most
once and works with cumulative sums and ``np.unique`` codes, never a Python
loop over samples (except to factorize labels of mixed Python types, which
NumPy cannot sort).

No Django import here.
"""

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._checks import integer, listed, positive_number, renormalised_rows

if TYPE_CHECKING:
    from sklearn.metrics import (
        accuracy_score,
        balanced_accuracy_score,
        cohen_kappa_score,
        confusion_matrix,
        f1_score,
        log_loss,
        precision_score,
        recall_score,
        roc_auc_score,
        roc_curve,
    )

# scikit-learn's metrics this module gives as its own, imported on first use
# (``__getattr__``): scikit-learn and scipy cost 0.9 s at every command's start.
_SKLEARN = frozenset(
    {
        "accuracy_score",
        "balanced_accuracy_score",
        "cohen_kappa_score",
        "confusion_matrix",
        "f1_score",
        "log_loss",
        "precision_score",
        "recall_score",
        "roc_auc_score",
        "roc_curve",
    }
)


def __getattr__(name: str) -> Any:
    """scikit-learn's metric ``name`` (one of ``_SKLEARN``), imported when first asked for."""
    if name not in _SKLEARN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import sklearn.metrics

    value = getattr(sklearn.metrics, name)
    globals()[name] = value
    return value


__all__ = [
    "THRESHOLD_METHODS",
    "ArrDomain",
    "a3r",
    "a3r_scores",
    "accuracy_score",
    "arr",
    "arr_domain",
    "arr_pole",
    "arr_scores",
    "balanced_accuracy_score",
    "binary_roc_auc",
    "cohen_kappa_score",
    "confusion_matrix",
    "consistency_score",
    "efficiency_score",
    "f1_score",
    "information_criteria",
    "lift_gain",
    "log_loss",
    "precision_score",
    "recall_score",
    "relevance_score",
    "roc_auc_score",
    "roc_curve",
    "select_threshold",
    "specificity_score",
]

#: The probability threshold methods of source 002, Table 6 (METHOD.md 7).
THRESHOLD_METHODS = (
    "fixed",
    "lowest_positive",
    "fixed_sensitivity",
    "equal_sensitivity_specificity",
    "max_sensitivity_specificity",
    "max_kappa",
    "mean_probability",
    "equal_prevalence",
)


# --------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------


def _as_labels(values: ArrayLike, name: str, *, allow_rows: bool = False) -> np.ndarray:
    """A 1-D array of labels (or, with ``allow_rows``, a 2-D array of rows).

    A list mixing strings and numbers would become an array of strings, where
    1 and "1" are the same label; such a list is kept as Python objects.
    """
    array = np.asarray(values)
    if not isinstance(values, np.ndarray) and array.dtype.kind in "US" and array.size:
        as_objects = np.asarray(values, dtype=object)
        if as_objects.shape == array.shape and len({type(v) for v in as_objects.ravel().tolist()}) > 1:
            array = as_objects
    if array.ndim == 1 or (allow_rows and array.ndim == 2):
        return array
    expected = "a 1-D array, or a 2-D array of rows" if allow_rows else "a 1-D array"
    raise ValueError(f"{name} must be {expected}, got shape {array.shape}")


def _as_numbers(values: ArrayLike, name: str, ndim: tuple[int, ...] = (1,)) -> np.ndarray:
    """A float64 array of finite numbers with one of the given numbers of dimensions."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of numbers: {exc}") from None
    if array.ndim not in ndim:
        dims = " or ".join(f"{d}-D" for d in ndim)
        raise ValueError(f"{name} must be a {dims} array, got shape {array.shape}")
    not_finite = np.flatnonzero(~np.isfinite(array.ravel()))
    if len(not_finite):
        positions = [tuple(int(i) for i in np.unravel_index(p, array.shape)) for p in not_finite]
        shown = [p[0] if len(p) == 1 else p for p in positions]
        raise ValueError(f"{name} must be finite; NaN or infinity at {listed(shown)}")
    return array


def _check_samples(**arrays: np.ndarray) -> int:
    """All arrays have the same, non-zero number of samples; return it."""
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name} has {length}" for name, length in lengths.items())
        raise ValueError(f"inconsistent numbers of samples: {described}")
    n_samples = next(iter(lengths.values()))
    if n_samples == 0:
        names = list(lengths)
        described = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        raise ValueError(f"{described} must not be empty")
    return n_samples


def _codes(values: np.ndarray) -> np.ndarray:
    """Integer codes 0..u-1, equal exactly where the values (or rows) are equal.

    Rows of a 2-D array are one key each. Integers of a moderate range are
    coded by counting, in linear time; other values by NumPy's sort; Python
    objects that cannot be ordered together (e.g. ``None`` beside strings)
    by a dictionary, in order of first appearance.
    """
    if values.ndim == 2:
        if values.shape[1] == 0:
            raise ValueError("a context given as rows of columns needs at least one column")
        # Column by column: a row's code so far (< n) times the next column's
        # number of values plus that column's code, recoded to stay below n.
        codes = np.zeros(len(values), dtype=np.int64)
        for column in range(values.shape[1]):
            column_codes = _codes(values[:, column])
            codes = _codes(codes * (int(column_codes.max(initial=0)) + 1) + column_codes)
        return codes
    if values.dtype.kind in "biu" and len(values):
        low, high = int(values.min()), int(values.max())
        if high - low <= max(2 * len(values), 1 << 16):
            # Unsigned values are shifted before the cast: above 2**63 they would wrap.
            offsets = (values - low).astype(np.int64) if values.dtype.kind == "u" else values.astype(np.int64) - low
            code_of_offset = np.cumsum(np.bincount(offsets, minlength=high - low + 1) > 0) - 1
            return code_of_offset[offsets]
    try:
        _, codes = np.unique(values, return_inverse=True)
        return codes.reshape(-1)
    except TypeError:
        pass
    first_seen: dict = {}
    try:
        return np.fromiter(
            (first_seen.setdefault(value, len(first_seen)) for value in values.tolist()),
            dtype=np.int64,
            count=len(values),
        )
    except TypeError as exc:
        raise ValueError(f"labels and contexts must be hashable: {exc}") from None


def codes_present(codes: np.ndarray) -> np.ndarray:
    """The distinct values of an array of codes (labels', folds': small
    non-negative integers, as the prediction reader gives them), sorted:
    ``np.unique``'s answer by one count, without its sort or hash of every
    value."""
    return np.flatnonzero(np.bincount(codes)) if len(codes) else np.arange(0)


def _distinct_labels(values: np.ndarray) -> list:
    """The distinct labels, sorted where NumPy can sort them; codes by one
    count (``codes_present``) instead of a sort."""
    if values.dtype.kind in "iu" and len(values) and values.min() >= 0 and values.max() < len(values) + 1024:
        return codes_present(values).tolist()
    try:
        return np.unique(values).tolist()
    except TypeError:
        return list(dict.fromkeys(values.tolist()))


def _binary_labels(labels: np.ndarray, pos_label: object) -> bool:
    """Check labels are binary (scikit-learn's rule); True when ``pos_label`` occurs.

    At most two distinct labels; when there are two, ``pos_label`` must be
    one of them. A single label is allowed: every sample is then positive,
    or every sample negative.
    """
    present = _distinct_labels(labels)
    if len(present) > 2:
        raise ValueError(
            f"these metrics are binary, but the labels are {listed(present)}; "
            "for several classes, binarise one class against the rest first"
        )
    if pos_label in present:
        return True
    if len(present) == 2:
        raise ValueError(f"pos_label={pos_label!r} is not one of the labels {present}; pass pos_label")
    return False


def _is_label(labels: np.ndarray, pos_label: object, pos_label_occurs: bool) -> np.ndarray:
    if not pos_label_occurs:
        return np.zeros(len(labels), dtype=bool)
    return np.asarray(labels == pos_label, dtype=bool)


def _binary_truth_and_scores(y_true: ArrayLike, y_score: ArrayLike, pos_label: object) -> tuple[np.ndarray, np.ndarray]:
    y_true = _as_labels(y_true, "y_true")
    y_score = _as_numbers(y_score, "y_score")
    _check_samples(y_true=y_true, y_score=y_score)
    return _is_label(y_true, pos_label, _binary_labels(y_true, pos_label)), y_score


def _require_both_classes(is_positive: np.ndarray, what: str, pos_label: object) -> tuple[int, int]:
    positives = int(np.count_nonzero(is_positive))
    negatives = len(is_positive) - positives
    if positives == 0:
        raise ValueError(f"{what} is undefined: y_true has no positive samples (pos_label={pos_label!r})")
    if negatives == 0:
        raise ValueError(
            f"{what} is undefined: y_true has no negative samples (every label is pos_label={pos_label!r})"
        )
    return positives, negatives


def _ranked_counts(is_positive: np.ndarray, y_score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cuts between distinct scores, from the highest score down.

    Returns ``(thresholds, cases, true_positives)``: ``thresholds`` the
    distinct scores in decreasing order and, for the cut "score >=
    thresholds[t]", ``cases[t]`` the samples predicted positive and
    ``true_positives[t]`` the positives among them (int64 counts). Tied
    scores are one cut: they are never split between the two sides.
    """
    # Any order within a tie will do (a tie is one cut), so NumPy's fastest
    # sort, not a stable one.
    order = np.argsort(-y_score)
    ranked_scores = y_score[order]
    true_positives = np.cumsum(is_positive[order], dtype=np.int64)
    last_of_tie = np.append(np.flatnonzero(np.diff(ranked_scores)), len(ranked_scores) - 1)
    return ranked_scores[last_of_tie], last_of_tie + 1, true_positives[last_of_tie]


def binary_roc_auc(is_positive: np.ndarray, y_score: np.ndarray) -> float:
    """ROC AUC of a binary task from its positives mask and scores, both
    classes present (the caller checks): the area under the ROC curve by
    the trapezoid rule, as scikit-learn's ``roc_auc_score`` (ties are one
    step of the curve, i.e. count half), computed in integer counts so that
    the only rounding is the final division. One sort, none of that
    function's input checks: for the arrays a prediction set has already
    validated (``evaluation.report``); agrees with it to 1e-15 (tests)."""
    _, cases, true_positives = _ranked_counts(is_positive, y_score)
    false_positives = cases - true_positives
    positives, negatives = int(true_positives[-1]), int(false_positives[-1])
    # Twice the area in count units: each step adds its width (new false
    # positives) times the sum of its two heights (true positives).
    widths = np.diff(false_positives, prepend=0)
    heights = true_positives + np.concatenate([[0], true_positives[:-1]])
    return int(widths @ heights) / (2 * positives * negatives)


# --------------------------------------------------------------------------
# Confusion-matrix metrics, lift and gain (source 002)
# --------------------------------------------------------------------------


def specificity_score(y_true: ArrayLike, y_pred: ArrayLike, *, pos_label: object = 1) -> float:
    """Specificity (true negative rate) of binary predictions.

    ``specificity = TN / (TN + FP)`` (source 002, Table 1): the share of the
    negative samples of ``y_true`` that are predicted negative. Sensitivity,
    its counterpart, is :func:`recall_score`.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels; together at most two distinct labels, as
        for ``precision_score(average="binary")``.
    pos_label : label, default 1
        The positive class; every other label is negative. It must be one of
        the labels when there are two.

    Returns
    -------
    float in [0, 1].

    Raises
    ------
    ValueError
        Empty or mismatched input, more than two labels, or no negative
        sample in ``y_true`` (0/0: specificity is undefined).
    """
    y_true = _as_labels(y_true, "y_true")
    y_pred = _as_labels(y_pred, "y_pred")
    _check_samples(y_true=y_true, y_pred=y_pred)
    pos_label_occurs = _binary_labels(_concatenated(y_true, y_pred), pos_label)
    is_negative = ~_is_label(y_true, pos_label, pos_label_occurs)
    negatives = int(np.count_nonzero(is_negative))
    if negatives == 0:
        raise ValueError(
            f"specificity is undefined: y_true has no negative samples (every label is pos_label={pos_label!r})"
        )
    predicted_positive = _is_label(y_pred, pos_label, pos_label_occurs)
    true_negatives = int(np.count_nonzero(is_negative & ~predicted_positive))
    return true_negatives / negatives


def lift_gain(
    y_true: ArrayLike, y_score: ArrayLike, *, pos_label: object = 1, quantiles: int = 10
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative gain and lift per quantile of the cases ranked by score.

    Source 002, sections VI and VII: rank the cases by decreasing score; the
    gain at fraction ``f`` is the share of all positives found among the top
    ``f`` of the cases, and the lift is ``gain / f`` (how many times better
    than picking cases at random, whose gain at ``f`` is ``f``).

    Tied scores are kept together: their order is arbitrary, so a group of
    tied cases that straddles a cut contributes its positives in proportion
    to the part of the group above the cut (the expected gain over all
    orders of the ties; the gain curve is linear across a tie group). The
    same rule takes a fractional number of cases when ``f * n_samples`` is
    not a whole number. The result never depends on the input order.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Binary labels.
    y_score : array-like of shape (n_samples,)
        Scores, higher meaning more likely positive (e.g. probabilities).
    pos_label : label, default 1
    quantiles : int, default 10
        Number of equal fractions (10: deciles).

    Returns
    -------
    fractions : ndarray of shape (quantiles,)
        ``(1, 2, ..., quantiles) / quantiles``.
    gain : ndarray of shape (quantiles,)
        Non-decreasing, in [0, 1], the last one 1.
    lift : ndarray of shape (quantiles,)
        ``gain / fractions``; the last one 1.

    Raises
    ------
    ValueError
        Empty or mismatched input, non-binary labels, non-finite scores,
        ``quantiles`` not a positive integer, or no positive sample (0/0:
        the gain is undefined).
    """
    quantiles = integer(quantiles, "quantiles", minimum=1)
    is_positive, y_score = _binary_truth_and_scores(y_true, y_score, pos_label)
    positives = int(np.count_nonzero(is_positive))
    if positives == 0:
        raise ValueError(f"gain and lift are undefined: y_true has no positive samples (pos_label={pos_label!r})")
    _, cases, true_positives = _ranked_counts(is_positive, y_score)
    fractions = np.arange(1, quantiles + 1) / quantiles
    found = np.interp(fractions * len(y_score), np.append(0, cases), np.append(0, true_positives))
    gain = found / positives
    return fractions, gain, gain / fractions


# --------------------------------------------------------------------------
# Probability thresholds (source 002, Table 6)
# --------------------------------------------------------------------------


def select_threshold(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    method: str,
    pos_label: object = 1,
    value: float = 0.5,
    sensitivity: float = 0.95,
) -> float:
    """A threshold that turns scores into labels, by one of source 002's methods.

    A sample is predicted positive when ``score >= threshold`` (source 002's
    convention for TP and FP). The methods (source 002, Table 6, after Liu
    et al. 2005):

    ``"fixed"``
        ``value`` itself (default 0.5).
    ``"lowest_positive"``
        The lowest score of a positive sample: every positive is predicted
        positive.
    ``"fixed_sensitivity"``
        The highest threshold at which the sensitivity ``TP / (TP + FN)``
        is at least ``sensitivity`` (default 0.95); it is always the score
        of a positive. Sensitivities are compared as computed, ``TP / P``.
    ``"equal_sensitivity_specificity"``
        The threshold where sensitivity and specificity are closest (they
        are rarely exactly equal on a finite sample).
    ``"max_sensitivity_specificity"``
        The threshold maximising sensitivity + specificity.
    ``"max_kappa"``
        The threshold maximising Cohen's kappa between ``y_true`` and the
        thresholded predictions, ``(P_o - P_e) / (1 - P_e)``.
    ``"mean_probability"``
        The mean score.
    ``"equal_prevalence"``
        The threshold predicting as many positives as ``y_true`` has: the
        score of the P-th highest-scored sample. When that score is tied with
        scores below the cut, no threshold predicts exactly P positives; the
        one whose count of predicted positives is closest to P is taken.

    The searching methods consider the distinct scores as thresholds (each
    gives a different labelling, with at least one positive prediction) and
    compute sensitivity, specificity and kappa from exact integer counts.
    **Ties**: when several thresholds are equally good, the highest one (the
    fewest positive predictions) is returned.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Binary labels.
    y_score : array-like of shape (n_samples,)
        Scores (e.g. predicted probabilities of ``pos_label``).
    method : str
        One of :data:`THRESHOLD_METHODS`.
    pos_label : label, default 1
    value : float, default 0.5
        The threshold of ``"fixed"``.
    sensitivity : float, default 0.95
        The target of ``"fixed_sensitivity"``, in (0, 1].

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Unknown method; empty or mismatched input, non-binary labels or
        non-finite scores; no positive sample (all methods but ``"fixed"`` and
        ``"mean_probability"``); no negative sample (the three methods using
        specificity or kappa); ``sensitivity`` outside (0, 1].
    """
    if method not in THRESHOLD_METHODS:
        raise ValueError(f"method must be one of {', '.join(THRESHOLD_METHODS)}; got {method!r}")
    is_positive, y_score = _binary_truth_and_scores(y_true, y_score, pos_label)

    if method == "fixed":
        try:
            threshold = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"value must be a number, got {value!r}") from None
        if not math.isfinite(threshold):
            raise ValueError(f"value must be finite, got {value!r}")
        return threshold
    if method == "mean_probability":
        # Divided first so that scores near the float maximum cannot overflow the sum.
        return float(np.sum(y_score / len(y_score)))

    positives = int(np.count_nonzero(is_positive))
    if positives == 0:
        raise ValueError(
            f"the {method} threshold is undefined: y_true has no positive samples (pos_label={pos_label!r})"
        )
    if method == "lowest_positive":
        return float(y_score[is_positive].min())
    if method == "fixed_sensitivity":
        try:
            target = float(sensitivity)
        except (TypeError, ValueError):
            raise ValueError(f"sensitivity must be a number in (0, 1], got {sensitivity!r}") from None
        if not 0 < target <= 1:
            raise ValueError(f"sensitivity must be in (0, 1], got {sensitivity!r}")
        positive_scores = np.sort(y_score[is_positive])[::-1]
        reached = np.arange(1, positives + 1) / positives >= target
        return float(positive_scores[np.argmax(reached)])

    thresholds, cases, true_positives = _ranked_counts(is_positive, y_score)
    if method == "equal_prevalence":
        return float(thresholds[np.argmin(np.abs(cases - positives))])

    positives, negatives = _require_both_classes(is_positive, f"the {method} threshold", pos_label)
    true_negatives = negatives - (cases - true_positives)
    # sensitivity = TP/P and specificity = TN/N, compared through the exact
    # integers TP*N and TN*P so that equal values tie exactly.
    if method == "equal_sensitivity_specificity":
        best = np.argmin(np.abs(true_positives * negatives - true_negatives * positives))
    elif method == "max_sensitivity_specificity":
        best = np.argmax(true_positives * negatives + true_negatives * positives)
    else:  # max_kappa
        n_samples = positives + negatives
        # kappa = (n (TP + TN) - E) / (n^2 - E) with E = P*PP + N*PN, the
        # chance agreement n^2 P_e; E < n^2 whenever both classes occur.
        chance = positives * cases + negatives * (n_samples - cases)
        kappa = (n_samples * (true_positives + true_negatives) - chance) / (n_samples * n_samples - chance)
        best = np.argmax(kappa)
    return float(thresholds[best])


# --------------------------------------------------------------------------
# Information criteria (source 002, section V)
# --------------------------------------------------------------------------


def information_criteria(
    y_true: ArrayLike, y_proba: ArrayLike, *, n_parameters: int, labels: ArrayLike | None = None
) -> tuple[float, float]:
    """Akaike and Bayesian information criteria of predicted probabilities.

    ``AIC = 2K - 2 ln L`` and ``BIC = K ln N - 2 ln L`` (source 002, section
    V; Akaike 1973, Schwarz 1978), natural logarithm, where ``ln L`` is the
    log-likelihood of the true labels under the predicted probabilities,
    ``sum_i ln p_i(y_i)`` (``-log_loss(..., normalize=False)`` without its
    clipping), ``K`` the candidate's number of free parameters and ``N`` the
    number of samples. Lower is better.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples,) or (n_samples, n_classes)
        As for :func:`log_loss`: one column per label in sorted order, rows
        summing to 1 (within 1e-6, then renormalised, METHOD.md intro); a
        1-D array is the probability of the greater of two labels.
    n_parameters : int
        ``K >= 0``, entered by the user.
    labels : array-like, optional
        All the labels, when ``y_true`` does not show every column's label.

    Returns
    -------
    (aic, bic) : tuple of float

    Raises
    ------
    ValueError
        Empty or mismatched input; probabilities outside [0, 1] or rows not
        summing to 1; columns not matching the labels; a label of ``y_true``
        not among ``labels``; and a probability of 0 for the true label of
        some sample: the likelihood is then 0 and both criteria infinite, so
        the samples are named instead (log_loss would clip to a finite value).
    """
    n_parameters = integer(n_parameters, "n_parameters", minimum=0)
    y_true = _as_labels(y_true, "y_true")
    y_proba = _as_numbers(y_proba, "y_proba", ndim=(1, 2))
    n_samples = _check_samples(y_true=y_true, y_proba=y_proba)
    outside = np.flatnonzero(((y_proba < 0) | (y_proba > 1)).reshape(n_samples, -1).any(axis=1))
    if len(outside):
        raise ValueError(f"y_proba must lie in [0, 1]; it does not for the samples {listed(outside)}")

    if labels is None:
        classes = np.asarray(_distinct_labels(y_true), dtype=y_true.dtype)
    else:
        classes = _as_labels(labels, "labels")
        if len(_distinct_labels(classes)) != len(classes):
            raise ValueError(f"labels must be distinct, got {listed(classes.tolist())}")
        classes = np.asarray(_distinct_labels(classes), dtype=classes.dtype)
    if y_proba.ndim == 1 or y_proba.shape[1] == 1:
        if len(classes) != 2:
            raise ValueError(
                f"a single column of probabilities needs exactly two labels, found {listed(classes.tolist())}; "
                "pass labels with both classes, or one column per class"
            )
        positive = y_proba.reshape(-1)
        y_proba = np.column_stack([1.0 - positive, positive])
    elif y_proba.shape[1] != len(classes):
        raise ValueError(
            f"y_proba has {y_proba.shape[1]} columns but there are {len(classes)} labels "
            f"({listed(classes.tolist())}); pass labels naming every column's class"
        )
    else:
        y_proba = renormalised_rows(y_proba, "y_proba")

    codes = _codes(_concatenated(classes, y_true))
    column_of_code = np.full(codes.max() + 1, -1)
    column_of_code[codes[: len(classes)]] = np.arange(len(classes))
    columns = column_of_code[codes[len(classes) :]]
    unknown = np.flatnonzero(columns < 0)
    if len(unknown):
        raise ValueError(
            f"y_true has labels not among labels ({listed(classes.tolist())}): "
            f"{listed(dict.fromkeys(y_true[unknown].tolist()))}"
        )
    true_label_probability = y_proba[np.arange(n_samples), columns]
    impossible = np.flatnonzero(true_label_probability == 0)
    if len(impossible):
        raise ValueError(
            "the likelihood is 0, so AIC and BIC are infinite: the predicted probability of the true label is 0 "
            f"for the samples {listed(impossible)}"
        )
    log_likelihood = float(np.sum(np.log(true_label_probability)))
    aic = 2.0 * n_parameters - 2.0 * log_likelihood
    bic = n_parameters * math.log(n_samples) - 2.0 * log_likelihood
    return aic, bic


# --------------------------------------------------------------------------
# Relevance Score (source 001, METHOD.md 7.1)
# --------------------------------------------------------------------------


def relevance_score(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    *,
    context: ArrayLike,
    alpha: float = 2.0,
    beta: float = 1.0,
    data_context: ArrayLike | None = None,
    data_outcome: ArrayLike | None = None,
) -> float:
    """Relevance Score, in [0, 100], of predictions whose context allows several outcomes.

    Source 001 (Gopalakrishna et al., eqs. 2-8), METHOD.md 7.1. From the whole
    data set, ``P(y | x) = count(x, y) / count(x)`` for the observed context
    ``x``. For a test sample with actual outcome ``O_A``, predicted ``O_P``
    and ``O_H`` the most probable outcome of its context::

        d_HP = |P(O_H) - P(O_P)|,   d_PA = |P(O_P) - P(O_A)|
        Score = 100                                         if O_P = O_A
              = (1 - (alpha d_HP + beta d_PA) / (alpha + beta)) * 100   otherwise
        RS = mean Score over the test samples

    As ``alpha`` grows the error tends to ``d_HP``, as ``beta`` grows to
    ``d_PA`` (source 001, eqs. 9-10). ``O_H`` ties are broken by the lowest
    label (METHOD.md 7.4); only ``P(O_H)``, the same for every tied outcome,
    enters the score. An outcome never seen in a context has probability 0
    there.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        Actual and predicted outcomes.
    context : array-like of shape (n_samples,) or (n_samples, n_columns)
        The observed context of each test sample: one hashable value, or a
        row of columns (compared as a whole).
    alpha, beta : float, default 2.0 and 1.0
        Positive weights of ``d_HP`` and ``d_PA`` (source 001's default).
    data_context, data_outcome : array-like, optional
        The whole data set's contexts and outcomes, from which ``P(y | x)``
        is estimated. Both or neither; by default the test set itself
        (``context``, ``y_true``).

    Returns
    -------
    float in [0, 100]; 100 when every prediction is right.

    Raises
    ------
    ValueError
        Empty or mismatched input, ``alpha`` or ``beta`` not positive, only
        one of ``data_context`` and ``data_outcome``, or a test context that
        does not occur in the data set (its ``P(y | x)`` is undefined; the
        contexts are named).
    """
    alpha = positive_number(alpha, "alpha")
    beta = positive_number(beta, "beta")
    y_true = _as_labels(y_true, "y_true")
    y_pred = _as_labels(y_pred, "y_pred")
    context = _as_labels(context, "context", allow_rows=True)
    n_samples = _check_samples(y_true=y_true, y_pred=y_pred, context=context)
    if (data_context is None) != (data_outcome is None):
        raise ValueError("data_context and data_outcome go together: pass both (the whole data set) or neither")
    if data_context is None or data_outcome is None:  # (both, as checked)
        test_contexts = _codes(context)
        data_contexts = test_contexts
        outcome_codes = _codes(_concatenated(y_true, y_pred))
        n_outcomes = int(outcome_codes.max()) + 1
        data_outcomes = outcome_codes[:n_samples]
    else:
        data_context = _as_labels(data_context, "data_context", allow_rows=True)
        data_outcome = _as_labels(data_outcome, "data_outcome")
        n_data = _check_samples(data_context=data_context, data_outcome=data_outcome)
        if data_context.ndim != context.ndim or data_context.shape[1:] != context.shape[1:]:
            raise ValueError(
                f"data_context rows must look like context rows: shapes {data_context.shape} and {context.shape}"
            )
        context_codes = _codes(_concatenated(data_context, context))
        data_contexts, test_contexts = context_codes[:n_data], context_codes[n_data:]
        outcome_codes = _codes(_concatenated(data_outcome, y_true, y_pred))
        n_outcomes = int(outcome_codes.max()) + 1
        data_outcomes, outcome_codes = outcome_codes[:n_data], outcome_codes[n_data:]
    actual, predicted = outcome_codes[:n_samples], outcome_codes[n_samples:]

    context_counts = np.bincount(data_contexts, minlength=int(test_contexts.max()) + 1)
    unseen = np.flatnonzero(context_counts[test_contexts] == 0)
    if len(unseen):
        named = dict.fromkeys(_context_label(context[i]) for i in unseen)
        raise ValueError(
            "P(y | x) is undefined for a context that does not occur in the data set: "
            f"{listed(named)} (test samples {listed(unseen)})"
        )
    # One code per (context, outcome) pair, for the data set's pairs and the
    # test samples' actual and predicted pairs alike; count(x, y) is then a
    # count of codes, and P(O_H) the largest count among a context's pairs.
    pair_codes = _codes(
        np.concatenate([data_contexts, test_contexts, test_contexts]) * n_outcomes
        + np.concatenate([data_outcomes, actual, predicted])
    )
    n_data = len(data_contexts)
    data_pairs, actual_pairs, predicted_pairs = np.split(pair_codes, [n_data, n_data + n_samples])
    pair_counts = np.bincount(data_pairs, minlength=int(pair_codes.max()) + 1)
    highest_count = np.zeros(len(context_counts), dtype=np.int64)
    np.maximum.at(highest_count, data_contexts, pair_counts[data_pairs])

    test_context_counts = context_counts[test_contexts]
    p_actual = pair_counts[actual_pairs] / test_context_counts
    p_predicted = pair_counts[predicted_pairs] / test_context_counts
    p_highest = highest_count[test_contexts] / test_context_counts
    error = (alpha * np.abs(p_highest - p_predicted) + beta * np.abs(p_predicted - p_actual)) / (alpha + beta)
    scores = np.where(actual == predicted, 100.0, (1.0 - error) * 100.0)
    return float(np.mean(scores))


def _concatenated(*arrays: np.ndarray) -> np.ndarray:
    """Arrays joined for one common coding; mixed kinds kept as Python objects."""
    if len({array.dtype.kind for array in arrays}) > 1:
        return np.concatenate([array.astype(object) for array in arrays])
    return np.concatenate(arrays)


def _context_label(context_row: object) -> object:
    return tuple(context_row.tolist()) if isinstance(context_row, np.ndarray) else context_row


# --------------------------------------------------------------------------
# ARR and A3R (source 004, METHOD.md 7.2)
# --------------------------------------------------------------------------


class ArrDomain(NamedTuple):
    """Where ARR cannot be used for a set of times (:func:`arr_domain`).

    Attributes
    ----------
    pole : float
        The time ratio ``T_p / T_q = 10**(-1/acc_d)`` where ARR's denominator
        ``1 + acc_d log10(T_p / T_q)`` is 0 (0.0 when it is below the
        smallest positive float).
    region : tuple of float
        ``(0.0, pole)``: the time ratios in ``(0, pole]``, where ARR is
        infinite or negative and so no longer decreases with the time ratio.
    pairs : ndarray of int, shape (n_pairs, 2)
        The ordered pairs ``(p, q)`` whose time ratio lies in the region.
    datasets : ndarray of int, shape (n_pairs,)
        The dataset (row of ``time``; 0 for a 1-D ``time``) of each pair.
    time_ratios : ndarray of float, shape (n_pairs,)
        Their ``T_p / T_q``.
    """

    pole: float
    region: tuple[float, float]
    pairs: np.ndarray
    datasets: np.ndarray
    time_ratios: np.ndarray

    @property
    def defined(self) -> bool:
        """True when no pair falls in the region: ARR is defined and monotonic here."""
        return len(self.pairs) == 0


def _candidate_table(values: ArrayLike, name: str) -> np.ndarray:
    """(datasets, m) table of positive finite numbers: every ratio to them is defined."""
    table = _as_numbers(values, name, ndim=(1, 2))
    table = table.reshape(1, -1) if table.ndim == 1 else table
    if table.size == 0:
        raise ValueError(f"{name} must have at least one dataset and one candidate, got shape {table.shape}")
    not_positive = np.argwhere(table <= 0)
    if len(not_positive):
        described = listed(f"candidate {c} on dataset {d} has {table[d, c]:g}" for d, c in not_positive)
        raise ValueError(f"{name} must be positive (a ratio to 0 is undefined): {described}")
    return table


def _candidate_tables(success_rate: ArrayLike, time: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    success_rate = _candidate_table(success_rate, "success_rate")
    time = _candidate_table(time, "time")
    if success_rate.shape != time.shape:
        raise ValueError(
            f"success_rate and time must have the same shape (candidates, or datasets x candidates), "
            f"got {success_rate.shape} and {time.shape}"
        )
    return success_rate, time


def arr_pole(*, acc_d: float) -> float:
    """The time ratio ``T_p / T_q`` at which ARR's denominator is 0: ``10**(-1/acc_d)``.

    ``1 + acc_d log10(T_p / T_q) = 0`` there (source 004, eq. 1 and Fig. 1).
    For ``acc_d = 0.1`` it is ``1e-10``: a candidate ten billion times faster
    than another. Returns 0.0 when the pole lies below the smallest positive
    float (``acc_d`` below about 0.0031), i.e. no time ratio reaches it.
    """
    acc_d = positive_number(acc_d, "acc_d")
    return 10.0 ** (-1.0 / acc_d)


def _log_time_ratios(time: np.ndarray) -> np.ndarray:
    """(datasets, m, m): log10(T_p / T_q), as a difference so it never overflows."""
    log_time = np.log10(time)
    return log_time[:, :, None] - log_time[:, None, :]


def arr_domain(time: ArrayLike, *, acc_d: float = 0.1) -> ArrDomain:
    """Where ARR is undefined or not monotonic for these times, to show beside it.

    ARR (source 004, eq. 1) divides the success-rate ratio by
    ``1 + acc_d log10(T_p / T_q)``. Above the pole ``10**(-1/acc_d)`` that
    denominator is positive and ARR decreases as the time ratio grows, as it
    should. At the pole it is 0 (ARR infinite), and below it negative: a
    candidate much faster than another gets a negative ARR, lower than a
    slower one's, so ARR is not monotonic over all time ratios (source 004,
    section 2 and Fig. 1). A3R (:func:`a3r`) has no such region. The pairs
    listed here are those for which :func:`arr` raises.

    Parameters
    ----------
    time : array-like of shape (m,) or (n_datasets, m)
        Positive times of the candidates (per dataset or fold).
    acc_d : float, default 0.1
        Accuracy traded for a tenfold speed-up, positive.

    Returns
    -------
    ArrDomain
    """
    acc_d = positive_number(acc_d, "acc_d")
    time = _candidate_table(time, "time")
    log_ratios = _log_time_ratios(time)
    dataset, p, q = np.nonzero(1.0 + acc_d * log_ratios <= 0)
    pole = arr_pole(acc_d=acc_d)
    return ArrDomain(
        pole=pole,
        region=(0.0, pole),
        pairs=np.column_stack([p, q]).astype(np.intp).reshape(-1, 2),
        datasets=dataset.astype(np.intp),
        time_ratios=10.0 ** log_ratios[dataset, p, q],
    )


def arr(success_rate: ArrayLike, time: ArrayLike, *, acc_d: float = 0.1) -> np.ndarray:
    """Adjusted Ratio of Ratios of every ordered pair of candidates.

    Brazdil, Soares, Pinto da Costa (2003), as quoted by source 004, eq. 1::

        ARR(p, q) = (SR_p / SR_q) / (1 + acc_d * log10(T_p / T_q))

    averaged over the datasets (rows) when there are several. The diagonal
    is 1. ARR is not monotonic in the time ratio (source 004): where the
    denominator is <= 0, i.e. ``T_p / T_q <= 10**(-1/acc_d)`` (the pole,
    :func:`arr_pole`), it would be infinite or negative, so no number is
    returned; :func:`arr_domain` lists such pairs so that a caller can show
    them, and :func:`a3r` is the monotonic alternative.

    Parameters
    ----------
    success_rate : array-like of shape (m,) or (n_datasets, m)
        Positive success rates (accuracy, or any positive "higher is better"
        measure: only ratios are used, so percentages work too).
    time : array-like of the same shape
        Positive times.
    acc_d : float, default 0.1
        The accuracy the user trades for a tenfold speed-up, positive.

    Returns
    -------
    ndarray of shape (m, m)
        ``[p, q]`` is ARR of p against q.

    Raises
    ------
    ValueError
        Shapes differ or are empty; a success rate or time that is not
        positive (a ratio to it is undefined); ``acc_d`` not positive; or
        pairs at or below the pole, named with their time ratios.
    """
    acc_d = positive_number(acc_d, "acc_d")
    success_rate, time = _candidate_tables(success_rate, time)
    denominator = 1.0 + acc_d * _log_time_ratios(time)
    if (denominator <= 0).any():
        domain = arr_domain(time, acc_d=acc_d)
        described = listed(
            f"(p={p}, q={q}{f', dataset {d}' if time.shape[0] > 1 else ''}) time ratio {ratio:.3g}"
            for (p, q), d, ratio in zip(domain.pairs, domain.datasets, domain.time_ratios, strict=True)
        )
        raise ValueError(
            f"ARR is undefined or not monotonic where 1 + acc_d*log10(T_p/T_q) <= 0, i.e. where the time ratio "
            f"T_p/T_q is at or below the pole 10**(-1/acc_d) = {domain.pole:.3g} (acc_d={acc_d:g}); "
            f"the pairs {described} fall there. Use a3r, which is monotonic, or a smaller acc_d."
        )
    ratios = (success_rate[:, :, None] / success_rate[:, None, :]) / denominator
    return ratios.mean(axis=0)


def a3r(success_rate: ArrayLike, time: ArrayLike, *, root: float = 8) -> np.ndarray:
    """A3R of every ordered pair of candidates (source 004, eq. 2).

    ::

        A3R(p, q) = (SR_p / SR_q) / (T_p / T_q) ** (1 / root)

    averaged over the datasets (rows) when there are several. The diagonal
    is 1. Monotonic: increasing in the success-rate ratio, decreasing in the
    time ratio. With ``root = 8`` a candidate ten times slower than another
    of equal success rate gets ``10**(-1/8) = 0.7499``, ten times faster
    ``10**(1/8) = 1.3335`` (source 004, section 3).

    Parameters
    ----------
    success_rate : array-like of shape (m,) or (n_datasets, m)
        Positive success rates (only ratios are used).
    time : array-like of the same shape
        Positive times.
    root : float, default 8
        The root ``N`` rescaling the time ratio, positive.

    Returns
    -------
    ndarray of shape (m, m)

    Raises
    ------
    ValueError
        Shapes differ or are empty, a success rate or time is not positive,
        ``root`` is not positive, or so small that the times raised to the
        power ``1 / root`` leave floating point.
    """
    root = positive_number(root, "root")
    success_rate, time = _candidate_tables(success_rate, time)
    # Each time is rooted before dividing, so that extreme ratios cannot
    # overflow; a root below 1 raises the times to a power instead, which can
    # leave floating point (0 / 0 or x / 0): refused rather than returned as NaN.
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        rooted_time = time ** (1.0 / root)
        ratios = (success_rate[:, :, None] / success_rate[:, None, :]) / (
            rooted_time[:, :, None] / rooted_time[:, None, :]
        )
    if not np.isfinite(ratios).all():
        raise ValueError(
            f"A3R is beyond floating point with root {root:g}: the times raised to the power 1/root are too large "
            "or too small to compare (a larger root keeps them in range)"
        )
    return ratios.mean(axis=0)


def _row_means_without_diagonal(pairwise: np.ndarray) -> np.ndarray:
    m = pairwise.shape[0]
    if m < 2:
        raise ValueError("a candidate's score is its mean against the other candidates: at least two are needed")
    return (pairwise.sum(axis=1) - np.diagonal(pairwise)) / (m - 1)


def arr_scores(success_rate: ArrayLike, time: ArrayLike, *, acc_d: float = 0.1) -> np.ndarray:
    """Each candidate's ARR: the mean of its row of :func:`arr` without the diagonal.

    ``ARR_p = sum_{q != p} ARR(p, q) / (m - 1)`` (METHOD.md 7.2). Raises as
    :func:`arr` does, and when there are fewer than two candidates.
    """
    return _row_means_without_diagonal(arr(success_rate, time, acc_d=acc_d))


def a3r_scores(success_rate: ArrayLike, time: ArrayLike, *, root: float = 8) -> np.ndarray:
    """Each candidate's A3R: the mean of its row of :func:`a3r` without the diagonal.

    ``A3R_p = sum_{q != p} A3R(p, q) / (m - 1)`` (METHOD.md 7.2). Raises as
    :func:`a3r` does, and when there are fewer than two candidates.
    """
    return _row_means_without_diagonal(a3r(success_rate, time, root=root))


# --------------------------------------------------------------------------
# Consistency and efficiency (METHOD.md 7)
# --------------------------------------------------------------------------


def consistency_score(y_true: ArrayLike, y_pred: ArrayLike, *, folds: ArrayLike) -> float:
    """Standard deviation of the accuracy over folds (lower is more consistent).

    ``sqrt(sum_f (acc_f - mean acc)^2 / (F - 1))``, the sample standard
    deviation (``ddof=1``) of the per-fold accuracies ``acc_f``, over the
    ``F`` distinct fold ids (METHOD.md 7: "standard deviation of accuracy
    over folds").

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
    folds : array-like of shape (n_samples,)
        The fold id (any hashable) of each sample.

    Returns
    -------
    float >= 0

    Raises
    ------
    ValueError
        Empty or mismatched input, or a single fold (a standard deviation
        over one value is undefined).
    """
    y_true = _as_labels(y_true, "y_true")
    y_pred = _as_labels(y_pred, "y_pred")
    folds = _as_labels(folds, "folds")
    _check_samples(y_true=y_true, y_pred=y_pred, folds=folds)
    fold_codes = _codes(folds)
    n_folds = int(fold_codes.max()) + 1
    if n_folds < 2:
        raise ValueError(
            f"consistency needs at least two folds (a standard deviation over one accuracy is undefined); "
            f"every sample is in fold {folds[:1].tolist()[0]!r}"
        )
    correct = np.bincount(fold_codes, weights=np.asarray(y_true == y_pred, dtype=np.float64), minlength=n_folds)
    fold_accuracy = correct / np.bincount(fold_codes, minlength=n_folds)
    return float(np.std(fold_accuracy, ddof=1))


def efficiency_score(time: ArrayLike) -> float:
    """Mean time per instance (lower is better), METHOD.md 7.

    Parameters
    ----------
    time : array-like of shape (n_instances,)
        The time taken for each instance, in any unit, non-negative.

    Returns
    -------
    float >= 0, in the unit of ``time``.

    Raises
    ------
    ValueError
        Empty input (the mean of nothing is undefined), a negative time, or
        NaN or infinity.
    """
    time = _as_numbers(time, "time")
    if len(time) == 0:
        raise ValueError("time must not be empty: the mean time per instance of no instance is undefined")
    negative = np.flatnonzero(time < 0)
    if len(negative):
        raise ValueError(f"time must not be negative; it is at the instances {listed(negative)}")
    # Divided first so that times near the float maximum cannot overflow the sum.
    return float(np.sum(time / len(time)))
