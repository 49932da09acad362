"""The README's walk-through, step by step, against the real tracking server:
three models logged by docs/examples/mlflow_three_models.py, the study of
docs/examples/mlflow-study.json, import_mlflow, run_validation, publish_mlflow,
and the ranking tags read back from MLflow."""

import importlib.util
import io
from pathlib import Path

from django.contrib.auth.models import User
from django.core.management import call_command
from mlflow.tracking import MlflowClient

from engine import services as engine_services
from workspace.models import Study

from .conftest import ROOT

EXAMPLES = ROOT / "docs" / "examples"


def _example_script():
    spec = importlib.util.spec_from_file_location("mlflow_three_models", EXAMPLES / "mlflow_three_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_walk_through(db, mlflow_server, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    script = _example_script()
    script.main()
    out = io.StringIO()
    User.objects.create_user(username="dana", password="not used here")
    call_command("import_study", str(EXAMPLES / "mlflow-study.json"), "--designer", "dana", stdout=out)
    study_id = out.getvalue().strip()
    out = io.StringIO()
    call_command(
        "import_mlflow", study_id,
        "--tracking-uri", mlflow_server,
        "--experiment", script.EXPERIMENT,
        "--filter", "tags.stage = 'candidate'",
        "--map", "accuracy=Success rate", "--map", "roc_auc=AUC", "--map", "fit_seconds=Training time:s",
        "--artifact", "predictions/*.csv", "--positive", "benign",
        stdout=out,
    )  # fmt: skip
    assert "3 runs read; 3 candidates added" in out.getvalue()
    # run_validation, as a worker would run it (a test's transaction never
    # commits, so the command would wait for a run that never starts).
    study = Study.objects.get(pk=study_id)
    run = engine_services.run_launch(study=study, launched_by=study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    call_command("publish_mlflow", str(run.pk), stdout=io.StringIO())
    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name(script.EXPERIMENT)
    ranks = {
        found.info.run_name: found.data.tags.get("approve.rank")
        for found in client.search_runs([experiment.experiment_id], filter_string="tags.stage = 'candidate'")
    }
    expected = {entry["name"]: str(entry["rank"]) for entry in run.results["candidates"]}
    assert ranks == expected and set(ranks) == set(script.MODELS)
    assert Path(EXAMPLES / "mlflow-study.json").read_text().count('"candidates": []') == 1
