"""Every CSV the product writes goes through one writer
(``workspace.csv_safe``) that defuses text a spreadsheet would run as a
formula (OWASP's CSV injection: a cell starting with ``=``, ``+``, ``-``,
``@``, a tab or a carriage return gets a leading ``'``), numbers staying
numbers (issue 29, finding 11: the Monte Carlo analysis CSV wrote
``=HYPERLINK(…)`` raw).

The CSVs are enumerated, not listed by hand: every URL of the URL conf
whose view names a CSV content type must be in ``CSV_URLS`` (or in
``READS_CSV``, the views that only take CSV in), and no module of the
product but ``csv_safe`` calls ``csv.writer``, so a new export written
without the writer fails here."""

import ast
import csv
import inspect
import io
import json
import math
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from engine import analyses
from engine import services as engine_services
from engine.models import Run
from engine.results_export import results_csv_bytes
from workspace import csv_safe
from workspace.bundles import study_import_bundle

from ..engine.test_runs import CASE_STUDY_PATH

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("approve_site", "workspace", "engine", "evaluation", "tracking")

FORMULA = '=HYPERLINK("http://evil.example","x")'
# Names of the case study made to start as formulas: a candidate, a
# candidate that is not a number for all its minus, a metric and an expert.
RENAMED = {"J48": FORMULA, "IBk": "-IBk", "Training time": "+Training time", "clinician": "@clinician"}

# Views that take CSV in and write none.
READS_CSV = {"api:prediction-set-list": "uploads an approve-predictions/1 CSV or Parquet file"}


def walk(patterns, prefix="", namespace=None):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from walk(pattern.url_patterns, prefix + str(pattern.pattern), pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}:{pattern.name}" if namespace else pattern.name
            yield prefix + str(pattern.pattern), name, pattern.callback


def answers_csv(callback) -> bool:
    view = getattr(callback, "view_class", None) or getattr(callback, "cls", None) or inspect.unwrap(callback)
    source = inspect.getsource(view)
    return "text/csv" in source or "CSV_CONTENT_TYPE" in source


@pytest.fixture
def study(db):
    text = CASE_STUDY_PATH.read_text(encoding="utf-8")
    for old, new in RENAMED.items():
        assert text.count(json.dumps(old)) >= 1, old
        text = text.replace(json.dumps(old), json.dumps(new))
    bundle = json.loads(text)
    bundle["phase"] = "closed"
    return study_import_bundle(bundle=bundle)


def succeeded(study) -> Run:
    run = engine_services.run_launch(study=study, launched_by=study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def finished(run, kind, **options):
    analysis = analyses.analysis_launch(run=run, kind=kind, launched_by=None, **options)
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    assert analysis.status == "succeeded", analysis.error
    return analysis


@pytest.fixture
def made(study):
    run, other = succeeded(study), succeeded(study)
    return {
        "study": study,
        "run": run,
        "other": other,
        "monte_carlo": finished(run, "monte_carlo", samples=64, seed=7, spec={"peer_weights": True}),
        "leave_one_out": finished(run, "leave_one_out"),
    }


# Every CSV URL: how to reach it on ``made`` (the page's and the API's).
CSV_URLS = {
    "run_results_csv": lambda m: [f"/runs/{m['run'].pk}/results.csv"],
    "api:run-results-csv": lambda m: [f"/api/v1/runs/{m['run'].pk}/results.csv"],
    "run_candidate_scores_csv": lambda m: [f"/runs/{m['run'].pk}/candidates/{name}/scores.csv" for name in ("JRip",)],
    "run_compare_csv": lambda m: [f"/runs/{m['run'].pk}/compare/{m['other'].pk}/compared.csv"],
    "run_analysis_csv": lambda m: [
        f"/runs/{m['run'].pk}/robustness/analyses/{m[kind].pk}.csv" for kind in ("monte_carlo", "leave_one_out")
    ],
    "api:analysis-csv": lambda m: [
        f"/api/v1/analyses/{m[kind].pk}/result.csv" for kind in ("monte_carlo", "leave_one_out")
    ],
    "measurements_csv_download": lambda m: [f"/studies/{m['study'].pk}/measurements.csv"],
    "study_history": lambda m: [f"/studies/{m['study'].pk}/history/?format=csv"],
}


def test_every_url_that_answers_csv_is_checked_here():
    found = {name for _, name, callback in walk(get_resolver().url_patterns) if answers_csv(callback)}
    assert found == set(CSV_URLS) | set(READS_CSV)


def test_no_module_but_the_one_writer_calls_csv_writer():
    writers = []
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                called = isinstance(node, ast.Attribute) and node.attr in ("writer", "DictWriter")
                called = called and isinstance(node.value, ast.Name) and node.value.id == "csv"
                imported = isinstance(node, ast.ImportFrom) and node.module == "csv"
                imported = imported and any(alias.name in ("writer", "DictWriter") for alias in node.names)
                if called or imported:
                    writers.append(str(path.relative_to(ROOT)))
    assert writers == ["workspace/csv_safe.py"]


def is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def cells(content: bytes) -> list[str]:
    return [value for row in csv.reader(io.StringIO(content.decode("utf-8-sig"))) for value in row]


def assert_defused(content: bytes, where: str) -> None:
    written = cells(content)
    running = [value for value in written if value.startswith(csv_safe.FORMULA_START) and not is_number(value)]
    assert running == [], where
    defused = [value for value in written if value.startswith("'") and value[1:].startswith(csv_safe.FORMULA_START)]
    assert defused, f"{where}: no name of the study starting as a formula was written"


def test_every_csv_defuses_formulas_and_keeps_numbers(client, made):
    client.force_login(made["study"].designer)
    for name, urls in CSV_URLS.items():
        for url in urls(made):
            response = client.get(url)
            assert response.status_code == 200, (name, url, response.content[:300])
            assert response["Content-Type"].startswith("text/csv"), (name, url)
            assert_defused(response.content, f"{name} {url}")
    # The results CSV that a decision publishes to MLflow is the download's bytes.
    assert_defused(results_csv_bytes(run=made["run"]), "results.csv published to MLflow")


def test_the_monte_carlo_csv_names_the_candidate_defused(client, made):
    # (The finding: the analysis CSV wrote the candidate's name as it is.)
    client.force_login(made["study"].designer)
    response = client.get(f"/api/v1/analyses/{made['monte_carlo'].pk}/result.csv")
    names = [row[0] for row in csv.reader(io.StringIO(response.content.decode()))][1:]
    assert sorted(names) == sorted(["'" + FORMULA, "'-IBk", "JRip", "RandomForest"])


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-x", "'-x"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("plain", "plain"),
        (-0.5, "-0.5"),  # a number stays a number (docs/formats.md)
        (0.1 + 0.2, "0.30000000000000004"),  # at full precision
        (3, "3"),
        (True, "True"),
        (None, ""),
    ],
)
def test_a_cell_is_written_as_the_rule_says(value, written):
    assert csv_safe.cell(value) == written
    assert cells(csv_safe.csv_download([[value]])) == [written] or written == ""
