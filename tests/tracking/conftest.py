"""An MLflow tracking server for the tests, and an experiment of four
scikit-learn models logged to it (or to a local ``file:`` store).

The server is the full ``mlflow`` package's ``mlflow server``, started once
per session on a free port with a temporary SQLite backend and artifact
folder. ``mlflow`` cannot be installed beside the project's own pins
(it caps pyarrow and gunicorn below them), so ``make install`` puts it in a
virtualenv of its own, ``.venv-mlflow`` (requirements-mlflow-server.txt);
``MLFLOW_SERVER`` names another ``mlflow`` executable. Without either the
tests that need the server skip, saying so (fail, with ``CI`` set)."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import cross_val_score, train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from tests.fixtures import cast, make_study, unchanged  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = "breast-cancer"
MODELS = {
    "logistic": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
    "tree": lambda: DecisionTreeClassifier(max_depth=3, random_state=0),
    "naive-bayes": GaussianNB,
    "knn": lambda: make_pipeline(StandardScaler(), KNeighborsClassifier(7)),
}


def _mlflow_executable() -> str | None:
    chosen = os.environ.get("MLFLOW_SERVER") or str(ROOT / ".venv-mlflow" / "bin" / "mlflow")
    return chosen if Path(chosen).is_file() else shutil.which("mlflow")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(autouse=True)
def _file_store_allowed(monkeypatch):
    """The tests log to file: stores with the client directly (approve's own
    calls allow them by themselves: tracking.remote)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """The URI of a running ``mlflow server``."""
    executable = _mlflow_executable()
    if executable is None:
        reason = "no mlflow server executable: run `make install-mlflow` (it creates .venv-mlflow) or set MLFLOW_SERVER"
        if os.environ.get("CI"):
            pytest.fail(reason)  # .ci/run installs it: a missing server is a failure there
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    log = (folder / "server.log").open("wb")
    process = subprocess.Popen(
        [
            executable, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
            "--artifacts-destination", str(folder / "artifacts"),
        ],
        stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180  # the machine may be busy
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process, signal.SIGKILL)
            pytest.fail(f"mlflow server did not start: {(folder / 'server.log').read_text()[-2000:]}")
        time.sleep(0.5)
    yield uri
    _stop(process, signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        _stop(process, signal.SIGKILL)
    log.close()


def _stop(process: subprocess.Popen, how: signal.Signals) -> None:
    """The server and what it started (uvicorn, its job runner and their
    workers: its own process group), never left running after the tests."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, how)


def log_models(uri: str, experiment: str = EXPERIMENT, models: dict | None = None) -> dict[str, str]:
    """Four classifiers trained on scikit-learn's breast cancer data, each
    logged as an MLflow run: metrics ``accuracy``, ``roc_auc``, ``fit_seconds``, ``fold_std``
    (and ``accuracy`` at steps 0 and 1), tag ``stage=candidate``, and its
    test predictions as ``predictions/test.csv`` (approve-predictions/1).
    ``{model name: run id}``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    x, y = load_breast_cancer(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.3, random_state=1, stratify=y)
    runs = {}
    for name, build in (models or MODELS).items():
        start = time.perf_counter()
        model = build().fit(x_train, y_train)
        seconds = time.perf_counter() - start
        score = model.predict_proba(x_test)[:, 1]
        predicted = model.predict(x_test)
        run = client.create_run(experiment_id, run_name=name, tags={"stage": "candidate", "family": name.upper()})
        run_id = run.info.run_id
        client.log_metric(run_id, "accuracy", 0.5, step=0)
        client.log_metric(run_id, "accuracy", float(accuracy_score(y_test, predicted)), step=1)
        client.log_metric(run_id, "roc_auc", float(roc_auc_score(y_test, score)))
        client.log_metric(run_id, "fit_seconds", max(seconds, 1e-4))
        client.log_metric(run_id, "fold_std", float(cross_val_score(build(), x_train, y_train, cv=3).std()))
        lines = ["y_true,y_pred,score"] + [
            f"{'malignant' if t == 0 else 'benign'},{'malignant' if p == 0 else 'benign'},{s:.6f}"
            for t, p, s in zip(y_test, predicted, np.asarray(score), strict=True)
        ]
        client.log_text(run_id, "\n".join(lines) + "\n", "predictions/test.csv")
        client.set_terminated(run_id)
        runs[name] = run_id
    return runs
