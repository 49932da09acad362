"""The evaluation app's API routes. The project's URLs mount them with the
workspace's under ``/api/v1/`` in one ``api`` namespace, so their names
(``api:prediction-set-list``...) and paths are the API's own."""

from django.urls import path

from . import computations, elicitation, predictions

urlpatterns = [
    path(
        "studies/<int:study_id>/metrics/<int:metric_id>/elicitation/",
        elicitation.ElicitationDesignView.as_view(),
        name="metric-elicitation",
    ),
    path(
        "studies/<int:study_id>/metrics/<int:metric_id>/elicitation/progress/",
        elicitation.ElicitationProgressView.as_view(),
        name="metric-elicitation-progress",
    ),
    path(
        "studies/<int:study_id>/my/elicitation/<int:metric_id>/",
        elicitation.MyElicitationView.as_view(),
        name="my-elicitation",
    ),
    path(
        "studies/<int:study_id>/my/elicitation/<int:metric_id>/answers/",
        elicitation.MyElicitationAnswerView.as_view(),
        name="my-elicitation-answers",
    ),
    path(
        "studies/<int:study_id>/my/elicitation/<int:metric_id>/ratio/",
        elicitation.MyElicitationRatioView.as_view(),
        name="my-elicitation-ratio",
    ),
    path(
        "studies/<int:study_id>/my/elicitation/<int:metric_id>/back/",
        elicitation.MyElicitationBackView.as_view(),
        name="my-elicitation-back",
    ),
    path(
        "studies/<int:study_id>/my/elicitation/<int:metric_id>/reset/",
        elicitation.MyElicitationResetView.as_view(),
        name="my-elicitation-reset",
    ),
    path(
        "studies/<int:study_id>/metrics/<int:pk>/computation/",
        computations.MetricComputationView.as_view(),
        name="metric-computation",
    ),
    path("studies/<int:study_id>/computations/", computations.ComputationListView.as_view(), name="computation-list"),
    path(
        "studies/<int:study_id>/measurements/compute/",
        computations.MeasurementComputeView.as_view(),
        name="measurements-compute",
    ),
    path(
        "studies/<int:study_id>/measurements/sources/",
        computations.MeasurementSourceListView.as_view(),
        name="measurement-sources",
    ),
    path(
        "studies/<int:study_id>/predictions/", predictions.PredictionSetListView.as_view(), name="prediction-set-list"
    ),
    path(
        "studies/<int:study_id>/predictions/<int:pk>/",
        predictions.PredictionSetDetailView.as_view(),
        name="prediction-set-detail",
    ),
    path(
        "studies/<int:study_id>/predictions/<int:pk>/evaluation/",
        computations.PredictionSetEvaluationView.as_view(),
        name="prediction-set-evaluation",
    ),
]
