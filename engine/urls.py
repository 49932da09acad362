"""The run pages' URLs. Paths are binding (docs/pages.md): a study's runs,
one run, its results, comparisons and robustness (engine/views/)."""

from django.urls import path

from .views import results, robustness, runs

urlpatterns = [
    path("studies/<int:study_id>/runs/", runs.runs_page, name="runs_page"),
    path("studies/<int:study_id>/runs/status/", runs.runs_status, name="runs_status"),
    path("runs/<int:run_id>/", runs.run_page, name="run_page"),
    path("runs/<int:run_id>/status/", runs.run_status, name="run_status"),
    path("runs/<int:run_id>/results.json", results.results_json_download, name="run_results_json"),
    path("runs/<int:run_id>/results.csv", results.results_csv_download, name="run_results_csv"),
    path("runs/<int:run_id>/weights/", results.weights_section, name="run_weights"),
    path(
        "runs/<int:run_id>/candidates/<path:name>/scores.csv",
        results.candidate_scores_csv,
        name="run_candidate_scores_csv",
    ),
    path("runs/<int:run_id>/candidates/<path:name>/", results.candidate_page, name="run_candidate"),
    path("runs/<int:run_id>/compare/", results.compare_choose, name="run_compare_choose"),
    path("runs/<int:run_id>/compare/<int:other_id>/", results.compare_page, name="run_compare"),
    path("runs/<int:run_id>/compare/<int:other_id>/compared.csv", results.compare_csv, name="run_compare_csv"),
    path("runs/<int:run_id>/robustness/", robustness.robustness_page, name="run_robustness"),
    path("runs/<int:run_id>/robustness/what-if/", robustness.robustness_what_if, name="run_robustness_what_if"),
    path(
        "runs/<int:run_id>/robustness/analyses/<int:analysis_id>/status/",
        robustness.analysis_status,
        name="run_analysis_status",
    ),
    path(
        "runs/<int:run_id>/robustness/analyses/<int:analysis_id>/cancel/",
        robustness.analysis_cancel,
        name="run_analysis_cancel",
    ),
    path(
        "runs/<int:run_id>/robustness/analyses/<int:analysis_id>.csv",
        robustness.analysis_csv,
        name="run_analysis_csv",
    ),
]
