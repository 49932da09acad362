"""evaluation.bootstrap against a literal loop over replicates with
scikit-learn's metrics on the resampled instances. Plain pytest."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, roc_auc_score

from evaluation.bootstrap import bootstrap_counts, bootstrap_indices, bootstrap_metrics, weighted_roc_auc


def prediction_set(seed: int, n: int = 80, candidates: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, size=n)
    # Scores on a coarse grid so that ties happen, within and across classes.
    scores = np.round(truth * rng.uniform(0.0, 0.6, size=(candidates, n)) + rng.uniform(0, 0.6, (candidates, n)), 1)
    labels = (scores >= 0.5).astype(int)
    return truth, labels, scores


@pytest.mark.parametrize("seed", range(3))
def test_equals_a_literal_loop_with_scikit_learn(seed: int) -> None:
    truth, labels, scores = prediction_set(seed)
    result = bootstrap_metrics(truth, y_pred=labels, y_score=scores, seed=seed, start=5, replicates=25)
    assert result.accuracy is not None and result.roc_auc is not None
    for b in range(25):
        drawn = bootstrap_indices(len(truth), seed, 5 + b)
        for c in range(3):
            assert result.accuracy[b, c] == pytest.approx(accuracy_score(truth[drawn], labels[c, drawn]), abs=1e-12)
            assert result.roc_auc[b, c] == pytest.approx(roc_auc_score(truth[drawn], scores[c, drawn]), abs=1e-12)


def test_replicates_do_not_depend_on_chunks() -> None:
    truth, labels, scores = prediction_set(4)
    whole = bootstrap_metrics(truth, y_pred=labels, y_score=scores, seed=1, replicates=30)
    first = bootstrap_metrics(truth, y_pred=labels, y_score=scores, seed=1, replicates=11)
    rest = bootstrap_metrics(truth, y_pred=labels, y_score=scores, seed=1, start=11, replicates=19)
    assert np.concatenate([first.roc_auc, rest.roc_auc]).tobytes() == whole.roc_auc.tobytes()
    assert np.concatenate([first.accuracy, rest.accuracy]).tobytes() == whole.accuracy.tobytes()


def test_counts_are_the_indices_counted() -> None:
    counts = bootstrap_counts(10, 3, 2, 4)
    assert counts.shape == (4, 10) and np.all(counts.sum(axis=1) == 10)
    assert counts[1].tolist() == np.bincount(bootstrap_indices(10, 3, 3), minlength=10).tolist()


def test_a_replicate_without_a_class_has_no_auc() -> None:
    weights = np.array([[2.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    auc = weighted_roc_auc([1, 0, 0], [[0.9, 0.1, 0.2]], weights)
    assert np.isnan(auc[0, 0]) and auc[1, 0] == 1.0


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="both the positive class"):
        weighted_roc_auc([1, 1], [[0.1, 0.2]], [[1.0, 1.0]])
    with pytest.raises(ValueError, match="y_score must have shape"):
        bootstrap_metrics([0, 1], y_score=[[0.1, 0.2, 0.3]], replicates=2)
    with pytest.raises(ValueError, match="replicates"):
        bootstrap_metrics([0, 1], y_score=[[0.1, 0.2]], replicates=-1)
