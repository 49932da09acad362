"""The MLflow pages (docs/pages.md, "MLflow")."""

from django.urls import path

from . import views

urlpatterns = [
    path("studies/<int:study_id>/mlflow/", views.mlflow_page, name="mlflow"),
    path("studies/<int:study_id>/mlflow/connection/", views.connection_save, name="mlflow_connection"),
    path("studies/<int:study_id>/mlflow/import/", views.mlflow_import, name="mlflow_import"),
    path("runs/<int:run_id>/mlflow/publish/", views.publish_page, name="mlflow_publish"),
]
