"""The measurements page says which values were imported from MLflow, and from where."""

from django.test import Client

from tracking import services
from workspace import services as workspace_services
from workspace.models import Phase

from .conftest import EXPERIMENT, log_models


def test_the_measurements_page_shows_where_imported_values_came_from(make_study, cast, tmp_path, settings):
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    uri = f"file:{tmp_path / 'mlruns'}"
    runs = log_models(uri)
    study = make_study(Phase.DRAFT).study
    services.connection_set(study=study, tracking_uri=uri)
    services.mlflow_import(
        study=study, imported_by=None, experiment=EXPERIMENT, mapping=[{"key": "roc_auc", "metric": "AUC"}]
    )
    client = Client()
    client.force_login(cast.alice)
    page = client.get(f"/studies/{study.pk}/measurements/").content.decode()
    assert "Imported from MLflow" in page
    assert f"4 values imported from roc_auc at {uri}" in page
    assert f"of run {runs['tree']}" in page
    assert page.count(">MLflow</span>") == 4
    # A value typed over is no longer marked as imported.
    workspace_services.measurements_set(
        study=study, measurements=[{"candidate": "tree", "metric": "AUC", "value": 0.1}]
    )
    page = client.get(f"/studies/{study.pk}/measurements/").content.decode()
    assert page.count(">MLflow</span>") == 3
