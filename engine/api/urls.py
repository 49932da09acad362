"""The runs' REST endpoints, mounted under /api/v1/ in the "api" namespace
(approve_site/urls.py)."""

from django.urls import path

from . import robustness, runs

urlpatterns = [
    path("studies/<int:study_id>/runs/", runs.RunListView.as_view(), name="run-list"),
    path("runs/<int:run_id>/", runs.RunDetailView.as_view(), name="run-detail"),
    path("runs/<int:run_id>/results/", runs.RunResultsView.as_view(), name="run-results"),
    path("runs/<int:run_id>/results.csv", runs.RunResultsCsvView.as_view(), name="run-results-csv"),
    path("runs/<int:run_id>/compare/<int:other_id>/", runs.RunCompareView.as_view(), name="run-compare"),
    path(
        "runs/<int:run_id>/candidates/<str:name>/scores/", runs.CandidateScoresView.as_view(), name="candidate-scores"
    ),
    path("runs/<int:run_id>/robustness/", robustness.RunRobustnessView.as_view(), name="run-robustness"),
    path("runs/<int:run_id>/robustness/what-if/", robustness.RunWhatIfView.as_view(), name="run-what-if"),
    path("runs/<int:run_id>/analyses/", robustness.RunAnalysesView.as_view(), name="run-analyses"),
    path("analyses/<int:analysis_id>/", robustness.AnalysisDetailView.as_view(), name="analysis-detail"),
    path("analyses/<int:analysis_id>/cancel/", robustness.AnalysisCancelView.as_view(), name="analysis-cancel"),
    path("analyses/<int:analysis_id>/result.csv", robustness.AnalysisCsvView.as_view(), name="analysis-csv"),
]
