"""A study with an elicited metric: three classes whose probabilities follow
source 003's synthetic set-up (a softmax of ``p_i x`` on a grid of x), as
the reference candidate J48's predictions, and a scripted oracle."""

import io

import numpy as np

from evaluation import services as evaluation_services
from evaluation.elicitation import elicit_diagonal, elicit_offdiagonal
from workspace import services

LABELS = ["tumour A", "tumour B", "tumour C"]
P = np.array([0.5, -1.0, 1.5])


def softmax_eta(n: int = 201, p: np.ndarray = P) -> np.ndarray:
    x = np.linspace(-1, 1, n)
    z = np.exp(np.outer(x, p))
    return z / z.sum(axis=1, keepdims=True)


def predictions_csv(eta: np.ndarray, other: np.ndarray, labels: list[str] = LABELS) -> bytes:
    """J48's probabilities are ``eta``, JRip's ``other``; y_true is each row's most likely class under eta
    (the next class every third row)."""
    header = "candidate,y_true," + ",".join(f"proba:{label}" for label in labels)
    lines = [header]
    for name, proba in (("J48", eta), ("JRip", other)):
        for row, values in enumerate(proba):
            # The first rows name the labels in LABELS' order, which is the set's.
            k = len(labels)
            truth = labels[row if row < k else (int(np.argmax(eta[row])) + (row % 3 == 0)) % k]
            lines.append(f"{name},{truth}," + ",".join(repr(float(v)) for v in values))
    return ("\n".join(lines) + "\n").encode()


def upload(study, eta: np.ndarray | None = None, other: np.ndarray | None = None):
    eta = softmax_eta() if eta is None else eta
    other = softmax_eta(len(eta), np.linspace(1.0, -0.8, eta.shape[1])) if other is None else other
    labels = LABELS if eta.shape[1] == len(LABELS) else [f"class {c}" for c in range(eta.shape[1])]
    return evaluation_services.prediction_set_import(
        study=study, stream=io.BytesIO(predictions_csv(eta, other, labels)), name="tumours.csv", uploaded_by=None
    )


def add_elicited_metric(built, *, kind="diagonal", epsilon=0.01, name="Cost-weighted accuracy", eta=None):
    """An elicited metric under Accuracy, its questions from J48 in a new set (draft phase)."""
    prediction_set = upload(built.study, eta)
    metric = services.metric_add(
        study=built.study,
        attribute=built.attributes["Accuracy"],
        name=name,
        better="higher",
        unit="",
    )
    built.metrics[name] = metric
    elicited = evaluation_services.elicited_metric_set(
        metric=metric, kind=kind, prediction_set=prediction_set.pk, reference_candidate="J48", epsilon=epsilon
    )
    # A default range on the elicited scale (making it elicited cleared any
    # earlier one): a weighted accuracy, higher is better; a cost, lower.
    services.metric_update(metric=metric, default_range=[0.3, 0.9] if kind == "diagonal" else [0.9, 0.3])
    metric.refresh_from_db()
    return elicited


def linear_oracle(weights):
    a = np.asarray(weights, dtype=float)

    def oracle(first, second) -> bool:
        return bool(a @ np.asarray(first) > a @ np.asarray(second))

    return oracle


def per_class_oracle(weights, prior):
    """An expert who weighs the classes per 100 cases of each, as the questions show them:
    ``weights . (d / prior)``, which is the linear oracle of ``weights / prior``."""
    return linear_oracle(np.asarray(weights, dtype=float) / np.asarray(prior))


def skewed_binary_eta(n: int = 201) -> np.ndarray:
    """Two classes, the second (say, a cancer) a third of the instances, with probabilities from 0.0003 to 0.98."""
    x = np.linspace(-1, 1, n)
    second = 1 / (1 + np.exp(-(6 * x - 2)))
    return np.column_stack([1 - second, second])


def library_weights(kind, oracle, eta, epsilon):
    run = elicit_diagonal if kind == "diagonal" else elicit_offdiagonal
    return run(oracle, eta, epsilon=epsilon)
