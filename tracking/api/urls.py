"""The MLflow link's API routes, mounted under ``/api/v1/`` in the ``api``
namespace with the other apps'."""

from django.urls import path

from . import views

urlpatterns = [
    path("studies/<int:study_id>/mlflow/connection/", views.ConnectionView.as_view(), name="mlflow-connection"),
    path("studies/<int:study_id>/mlflow/experiments/", views.ExperimentListView.as_view(), name="mlflow-experiments"),
    path("studies/<int:study_id>/mlflow/runs/", views.RunPreviewView.as_view(), name="mlflow-runs"),
    path("studies/<int:study_id>/mlflow/imports/", views.ImportListView.as_view(), name="mlflow-imports"),
    path("studies/<int:study_id>/mlflow/imports/<int:import_id>/", views.ImportView.as_view(), name="mlflow-import"),
    path("studies/<int:study_id>/mlflow/sources/", views.SourceListView.as_view(), name="mlflow-sources"),
    path("runs/<int:run_id>/mlflow/", views.PublicationView.as_view(), name="mlflow-publication"),
]
