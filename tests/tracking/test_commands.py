"""``manage.py import_mlflow`` and ``publish_mlflow`` on a local file: store."""

import json

import pytest
from django.core.management import CommandError, call_command
from mlflow.tracking import MlflowClient

from workspace.models import Phase

from .conftest import EXPERIMENT, log_models
from .test_services import close_and_run


def test_import_reimport_and_publish(make_study, tmp_path, settings, capsys):
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    uri = f"file:{tmp_path / 'mlruns'}"
    runs = log_models(uri)
    built = make_study(Phase.DRAFT)
    arguments = [
        str(built.study.pk),
        "--experiment", EXPERIMENT,
        "--filter", "tags.stage = 'candidate'",
        "--map", "accuracy=Success rate",
        "--map", "roc_auc=AUC",
        "--map", "fold_std=Fold stdev",
        "--map", "fit_seconds=Training time:s",
        "--artifact", "predictions/*.csv",
        "--positive", "benign",
    ]  # fmt: skip
    call_command("import_mlflow", *arguments, "--tracking-uri", uri)
    out = capsys.readouterr().out
    assert "4 runs read; 4 candidates added" in out and "16 values changed, 0 unchanged" in out

    # MLflow's latest value is the one of the highest step.
    MlflowClient(tracking_uri=uri).log_metric(runs["knn"], "accuracy", 0.75, step=2)
    call_command("import_mlflow", *arguments, "--json")
    outcome = json.loads(capsys.readouterr().out)
    assert [(c["candidate"], c["metric"], c["value"]) for c in outcome["changes"]] == [("knn", "Success rate", 0.75)]
    assert outcome["created"] == [] and outcome["unchanged"] == 15

    with pytest.raises(CommandError, match="mapping\\[0\\].unit: Training time is measured in s"):
        call_command(
            "import_mlflow", str(built.study.pk), "--experiment", EXPERIMENT, "--map", "fit_seconds=Training time:ms"
        )

    run = close_and_run(built)
    call_command("publish_mlflow", str(run.pk), "--base-url", "https://approve.example/")
    lines = capsys.readouterr().out.splitlines()
    assert sorted(lines[:-1]) == sorted(f"tagged {name}: {run_id}" for name, run_id in runs.items())
    summary = MlflowClient(tracking_uri=uri).get_run(lines[-1])
    assert summary.data.tags["approve.run_url"] == f"https://approve.example/runs/{run.pk}/"
