"""The evaluation app's pages, under a study's ``predictions/`` (docs/pages.md)."""

from django.urls import path

from . import views

urlpatterns = [
    path("studies/<int:study_id>/predictions/", views.predictions_page, name="predictions"),
    path("studies/<int:study_id>/predictions/compute/", views.compute_page, name="predictions_compute"),
    path(
        "studies/<int:study_id>/predictions/metrics/<int:metric_id>/",
        views.computation_page,
        name="predictions_computation",
    ),
    path(
        "studies/<int:study_id>/predictions/metrics/<int:metric_id>/elicitation/",
        views.elicitation_design_page,
        name="predictions_elicitation",
    ),
    path("studies/<int:study_id>/my/elicitation/<int:metric_id>/", views.elicitation_page, name="expert_elicitation"),
    path(
        "studies/<int:study_id>/predictions/<int:set_id>/delete/",
        views.prediction_set_delete,
        name="prediction_set_delete",
    ),
    path(
        "studies/<int:study_id>/predictions/<int:set_id>/compare/",
        views.set_compare_page,
        name="prediction_set_compare",
    ),
    path(
        "studies/<int:study_id>/predictions/<int:set_id>/candidates/<path:name>/",
        views.candidate_report_page,
        name="prediction_report",
    ),
]
