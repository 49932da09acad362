"""Paired bootstrap of metrics computed from a prediction set (docs/method.md,
"Robustness": measurements sampled from the data's side).

Replicate ``b`` resamples the set's ``N`` instances with replacement, the
same instances for every candidate (paired: a hard instance drawn twice
counts twice for all of them, so differences between candidates keep their
correlation). A replicate is represented by its counts ``w`` (how often each
instance was drawn, summing to N), and every metric is computed from the
whole set weighted by ``w``, vectorised over replicates: no Python loop over
replicates or instances.

* accuracy: ``sum_i w_i [pred_i == y_i] / N``, one matrix product for all
  replicates and candidates;
* ROC AUC (binary): the rank statistic with ties counted half, weighted,
  ``sum_{i pos, j neg} w_i w_j ([s_i > s_j] + [s_i = s_j] / 2) / (W_pos W_neg)``:
  each candidate's scores are sorted once, and per replicate the weighted
  negatives below each tie group are a cumulative sum. It equals
  scikit-learn's ``roc_auc_score`` on the resampled instances (tests).

Replicate ``b`` draws from ``numpy.random.default_rng([seed, b])``, so
replicates are the same however they are split into chunks. Pure NumPy,
no Django.
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "BootstrapMetrics",
    "bootstrap_counts",
    "bootstrap_indices",
    "bootstrap_metrics",
    "weighted_accuracy",
    "weighted_roc_auc",
]

# Replicates handled at once, sized so a chunk's (replicates, N) weights stay
# near this many entries.
_CHUNK_ENTRIES = 4_000_000


def _count(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def bootstrap_indices(n_instances: int, seed: int, replicate: int) -> np.ndarray:
    """The instances (N,) drawn, with replacement, by replicate ``replicate``
    of a bootstrap seeded ``seed``: ``default_rng([seed, replicate])``."""
    n = _count(n_instances, "n_instances", 1)
    return np.random.default_rng([_count(seed, "seed", 0), _count(replicate, "replicate", 0)]).integers(0, n, size=n)


def bootstrap_counts(n_instances: int, seed: int, start: int, count: int) -> np.ndarray:
    """(count, N) how often each instance is drawn by replicates ``start ..
    start + count - 1`` (each row sums to N)."""
    n = _count(n_instances, "n_instances", 1)
    rows = [np.bincount(bootstrap_indices(n, seed, start + b), minlength=n) for b in range(_count(count, "count", 0))]
    return np.array(rows, dtype=np.float64).reshape(len(rows), n)


def _matrix(values: ArrayLike, name: str, n: int) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != n:
        raise ValueError(f"{name} must have shape (candidates, {n}) (one row per candidate), got {array.shape}")
    return array


def weighted_accuracy(y_true: ArrayLike, y_pred: ArrayLike, weights: ArrayLike) -> np.ndarray:
    """(R, C) accuracy of each candidate's labels ``y_pred`` (C, N) under each
    replicate's instance counts ``weights`` (R, N)."""
    truth = np.asarray(y_true)
    n = len(truth)
    predicted = _matrix(y_pred, "y_pred", n)
    counts = _matrix(weights, "weights", n).astype(np.float64)
    correct = (predicted == truth[None, :]).astype(np.float64)  # (C, N)
    return (counts @ correct.T) / counts.sum(axis=1, keepdims=True)


def weighted_roc_auc(y_true: ArrayLike, y_score: ArrayLike, weights: ArrayLike, *, pos_label: object = 1) -> np.ndarray:
    """(R, C) binary ROC AUC of each candidate's scores ``y_score`` (C, N)
    under each replicate's instance counts ``weights`` (R, N), ties counted
    half. NaN for a replicate that drew no positive or no negative (the AUC
    is undefined there)."""
    truth = np.asarray(y_true)
    n = len(truth)
    scores = _matrix(y_score, "y_score", n).astype(np.float64)
    if not np.isfinite(scores).all():
        raise ValueError("y_score contains NaN or infinity")
    counts = _matrix(weights, "weights", n).astype(np.float64)
    positive = truth == pos_label
    if not positive.any() or positive.all():
        raise ValueError(f"y_true must hold both the positive class {pos_label!r} and another")
    result = np.empty((len(counts), len(scores)))
    positive_total = counts @ positive.astype(np.float64)
    negative_total = counts.sum(axis=1) - positive_total
    defined = (positive_total > 0) & (negative_total > 0)
    scale = np.where(defined, 1.0, 0.0) / np.where(defined, positive_total * negative_total, 1.0)
    for c, row in enumerate(scores):
        order = np.argsort(row, kind="stable")
        ordered = row[order]
        starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        is_positive = positive[order]
        drawn = counts[:, order]
        positives = np.add.reduceat(np.where(is_positive, drawn, 0.0), starts, axis=1)  # (R, groups)
        negatives = np.add.reduceat(np.where(is_positive, 0.0, drawn), starts, axis=1)
        below = np.cumsum(negatives, axis=1) - negatives
        result[:, c] = (positives * (below + 0.5 * negatives)).sum(axis=1) * scale
    return np.where(defined[:, None], result, np.nan)


@dataclass(frozen=True, eq=False)
class BootstrapMetrics:
    """Result of :func:`bootstrap_metrics`: ``accuracy`` and ``roc_auc``
    (R, C), one row per replicate (None for a metric not asked)."""

    accuracy: np.ndarray | None
    roc_auc: np.ndarray | None


def bootstrap_metrics(
    y_true: ArrayLike,
    *,
    y_pred: ArrayLike | None = None,
    y_score: ArrayLike | None = None,
    seed: int = 0,
    start: int = 0,
    replicates: int = 2000,
    pos_label: object = 1,
) -> BootstrapMetrics:
    """Accuracy (from ``y_pred``, (C, N) labels) and binary ROC AUC (from
    ``y_score``, (C, N) scores) of every candidate on replicates ``start ..
    start + replicates - 1`` of the paired bootstrap seeded ``seed``,
    computed a chunk of replicates at a time (memory ``O(chunk N)``)."""
    truth = np.asarray(y_true)
    if truth.ndim != 1 or not len(truth):
        raise ValueError(f"y_true must be a non-empty 1-D array, got shape {truth.shape}")
    n = len(truth)
    total = _count(replicates, "replicates", 0)
    step = max(1, _CHUNK_ENTRIES // n)
    accuracy, auc = [], []
    for first in range(0, total, step):
        counts = bootstrap_counts(n, seed, start + first, min(step, total - first))
        if y_pred is not None:
            accuracy.append(weighted_accuracy(truth, y_pred, counts))
        if y_score is not None:
            auc.append(weighted_roc_auc(truth, y_score, counts, pos_label=pos_label))

    def stacked(parts: list[np.ndarray], given: ArrayLike | None) -> np.ndarray | None:
        if given is None:
            return None
        return np.concatenate(parts) if parts else np.empty((0, len(_matrix(given, "predictions", n))))

    return BootstrapMetrics(accuracy=stacked(accuracy, y_pred), roc_auc=stacked(auc, y_score))
