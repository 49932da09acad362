"""Log three scikit-learn models to MLflow, as a data scientist would, for
approve to import (README, "Candidates from MLflow").

    MLFLOW_TRACKING_URI=http://127.0.0.1:5000 .venv/bin/python docs/examples/mlflow_three_models.py

Each run has the metrics accuracy, roc_auc and fit_seconds, the tag
stage=candidate, and its test predictions as predictions/test.csv in the
approve-predictions/1 format (y_true, y_pred, score of "benign")."""

import os
import time

from mlflow.tracking import MlflowClient
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

EXPERIMENT = "approve-readme"
MODELS = {
    "logistic-regression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
    "decision-tree": DecisionTreeClassifier(max_depth=3, random_state=0),
    "naive-bayes": GaussianNB(),
}
LABELS = ("malignant", "benign")  # scikit-learn's classes 0 and 1


def main() -> None:
    client = MlflowClient(tracking_uri=os.environ.get("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000"))
    found = client.get_experiment_by_name(EXPERIMENT)
    experiment_id = found.experiment_id if found else client.create_experiment(EXPERIMENT)
    x, y = load_breast_cancer(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.3, random_state=1, stratify=y)
    for name, model in MODELS.items():
        start = time.perf_counter()
        model.fit(x_train, y_train)
        seconds = time.perf_counter() - start
        predicted, score = model.predict(x_test), model.predict_proba(x_test)[:, 1]
        run_id = client.create_run(experiment_id, run_name=name, tags={"stage": "candidate"}).info.run_id
        client.log_metric(run_id, "accuracy", float(accuracy_score(y_test, predicted)))
        client.log_metric(run_id, "roc_auc", float(roc_auc_score(y_test, score)))
        client.log_metric(run_id, "fit_seconds", max(seconds, 1e-4))
        rows = [f"{LABELS[t]},{LABELS[p]},{s:.6f}" for t, p, s in zip(y_test, predicted, score, strict=True)]
        client.log_text(run_id, "\n".join(["y_true,y_pred,score", *rows]) + "\n", "predictions/test.csv")
        client.set_terminated(run_id)
        print(f"{name}: run {run_id}")


if __name__ == "__main__":
    main()
