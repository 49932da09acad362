"""A measurement's optional standard error (issue 20, item 4): set, kept and
removed through the services, carried by the bundle, the API, the
measurement CSV, the measurements page and the run's snapshot."""

import math

import pytest

from engine import services as engine_services
from engine.snapshot import snapshot_standard_errors
from workspace import services
from workspace.bundles import study_export_bundle, study_import_bundle
from workspace.errors import InvalidInput
from workspace.measurement_csv import CsvRefused, measurements_csv_text, measurements_parse, rows_as_measurements
from workspace.models import Measurement

from ..engine.test_runs import case_study_bundle

CANDIDATES = {"J48", "JRip"}
METRICS = {"AUC", "Success rate"}


def _errors(built) -> dict:
    return {
        (c, m): e
        for c, m, e in Measurement.objects.filter(study=built.study).values_list(
            "candidate__name", "metric__name", "standard_error"
        )
    }


# --- services ------------------------------------------------------------------------


def test_measurements_set_sets_keeps_and_removes_a_standard_error(make_study):
    built = make_study("draft")
    assert set(_errors(built).values()) == {None}  # the fixture gives none
    services.measurements_set(
        study=built.study,
        measurements=[
            {"candidate": "J48", "metric": "AUC", "value": 0.8, "standard_error": 0.02},
            {"candidate": "JRip", "metric": "AUC", "value": 0.9, "standard_error": 0},
        ],
    )
    assert _errors(built)[("J48", "AUC")] == 0.02
    assert _errors(built)[("JRip", "AUC")] == 0.0
    # without the key the standard error stays; the value changes
    services.measurements_set(study=built.study, measurements=[{"candidate": "J48", "metric": "AUC", "value": 0.81}])
    row = Measurement.objects.get(study=built.study, candidate__name="J48", metric__name="AUC")
    assert (row.value, row.standard_error) == (0.81, 0.02)
    # null removes it, in the same call as one kept
    services.measurements_set(
        study=built.study,
        measurements=[
            {"candidate": "J48", "metric": "AUC", "value": 0.81, "standard_error": None},
            {"candidate": "JRip", "metric": "AUC", "value": 0.95},
        ],
    )
    assert _errors(built)[("J48", "AUC")] is None
    assert _errors(built)[("JRip", "AUC")] == 0.0
    assert Measurement.objects.get(study=built.study, candidate__name="JRip", metric__name="AUC").value == 0.95


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (-0.1, "must be 0 or more (a standard error), got -0.1"),
        (math.inf, "must be a finite number, got inf"),
        (math.nan, "must be a finite number, got nan"),
        ("0.1", "must be a number, got '0.1'"),
        (True, "must be a number, got True"),
    ],
)
def test_a_bad_standard_error_is_refused_naming_it_and_nothing_is_written(make_study, unchanged, error, message):
    built = make_study("draft")
    entries = [
        {"candidate": "J48", "metric": "AUC", "value": 0.5, "standard_error": 0.1},
        {"candidate": "JRip", "metric": "AUC", "value": 0.6, "standard_error": error},
    ]
    with unchanged(), pytest.raises(InvalidInput) as refused:
        services.measurements_set(study=built.study, measurements=entries)
    assert refused.value.errors == {"measurements[1].standard_error": [message]}


def test_an_unknown_key_is_still_refused(make_study, unchanged):
    built = make_study("draft")
    with unchanged(), pytest.raises(InvalidInput) as refused:
        services.measurements_set(
            study=built.study, measurements=[{"candidate": "J48", "metric": "AUC", "value": 0.5, "se": 0.1}]
        )
    assert refused.value.errors == {
        "measurements[0]": ["must be an object with candidate, metric and value (and optionally standard_error)"]
    }


def test_mixed_entries_cost_one_more_upsert(make_study, django_assert_num_queries):
    built = make_study("draft")
    entries = [
        {"candidate": "J48", "metric": "AUC", "value": 0.5, "standard_error": 0.1},
        {"candidate": "JRip", "metric": "AUC", "value": 0.6},
    ]
    with django_assert_num_queries(7):  # savepoint, lock, candidates, metrics, two upserts, release
        services.measurements_set(study=built.study, measurements=entries)


# --- bundle ----------------------------------------------------------------------------


def test_bundle_round_trip_with_and_without_standard_errors(db):
    bundle = case_study_bundle("draft")
    plain = study_export_bundle(study=study_import_bundle(bundle=bundle))
    # none set: no candidate has the key, the bundle is as before
    assert all("standard_errors" not in candidate for candidate in plain["candidates"])
    bundle["candidates"][0]["standard_errors"] = {"Success rate": 0.012, "Training time": 0}
    bundle["title"] = "With standard errors"
    study = study_import_bundle(bundle=bundle)
    exported = study_export_bundle(study=study)
    assert exported["candidates"][0]["standard_errors"] == {"Success rate": 0.012, "Training time": 0}
    assert all("standard_errors" not in candidate for candidate in exported["candidates"][1:])
    again = study_export_bundle(study=study_import_bundle(bundle={**exported, "title": "Again"}))
    assert again["candidates"] == exported["candidates"]


@pytest.mark.parametrize(
    ("errors", "field", "message"),
    [
        ({"Success rate": -1}, "candidates[0].standard_errors.Success rate", "must be 0 or more"),
        ({"Speed": 0.1}, "candidates[0].standard_errors.Speed", "a standard error needs its value in measurements"),
        ([0.1], "candidates[0].standard_errors", "must be an object {metric: standard error}"),
    ],
)
def test_bundle_refuses_a_bad_standard_error_naming_it(db, errors, field, message):
    from workspace.models import Study

    bundle = case_study_bundle("draft")
    bundle["candidates"][0]["standard_errors"] = errors
    with pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=bundle)
    assert list(refused.value.errors) == [field]
    assert refused.value.errors[field][0].startswith(message)
    assert not Study.objects.exists()


# --- CSV ---------------------------------------------------------------------------------


def test_long_csv_with_a_standard_error_column():
    rows = measurements_parse(
        "candidate,metric,value,standard_error\nJ48,AUC,0.8,0.03\nJRip,AUC,0.9,\n",
        candidates=CANDIDATES,
        metrics=METRICS,
        max_rows=10,
    )
    assert rows_as_measurements(rows) == [
        {"candidate": "J48", "metric": "AUC", "value": 0.8, "standard_error": 0.03},
        {"candidate": "JRip", "metric": "AUC", "value": 0.9, "standard_error": None},  # empty: removed
    ]
    # without the column, no standard_error key: they stay as they are
    plain = measurements_parse(
        "candidate,metric,value\nJ48,AUC,0.8\n", candidates=CANDIDATES, metrics=METRICS, max_rows=10
    )
    assert rows_as_measurements(plain) == [{"candidate": "J48", "metric": "AUC", "value": 0.8}]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "candidate,metric,value,standard_error\nJ48,AUC,0.8,-1\n",
            "line 2, column standard_error: a standard error must be 0 or more, got '-1'",
        ),
        (
            "candidate,metric,value,standard_error\nJ48,AUC,0.8,lots\n",
            "line 2, column standard_error: not a number ('lots')",
        ),
        (
            "candidate,AUC,AUC (standard error)\nJ48,,0.1\n",
            "line 2, column AUC (standard error): a standard error needs its value (the metric's cell is empty)",
        ),
        (
            "candidate,AUC (standard error)\nJ48,0.1\n",
            "line 1, column AUC (standard error): a standard-error column needs its metric's column too",
        ),
    ],
)
def test_csv_refuses_a_bad_standard_error_by_line_and_column(text, error):
    with pytest.raises(CsvRefused) as refused:
        measurements_parse(text, candidates=CANDIDATES, metrics=METRICS, max_rows=10)
    assert refused.value.errors == [error]


def test_wide_csv_round_trip_with_standard_errors():
    rows = [
        {"candidate__name": "J48", "metric__name": "AUC", "value": 0.8, "standard_error": 0.025},
        {"candidate__name": "J48", "metric__name": "Success rate", "value": 0.85, "standard_error": None},
        {"candidate__name": "JRip", "metric__name": "AUC", "value": 0.9, "standard_error": None},
    ]
    text = measurements_csv_text(candidates=["J48", "JRip"], metrics=["Success rate", "AUC"], rows=rows)
    # only AUC has a standard error: its column follows it
    assert text.splitlines() == [
        "candidate,Success rate,AUC,AUC (standard error)",
        "J48,0.85,0.8,0.025",
        "JRip,,0.9,",
    ]
    parsed = rows_as_measurements(measurements_parse(text, candidates=CANDIDATES, metrics=METRICS, max_rows=10))
    assert parsed == [
        {"candidate": "J48", "metric": "Success rate", "value": 0.85},
        {"candidate": "J48", "metric": "AUC", "value": 0.8, "standard_error": 0.025},
        {"candidate": "JRip", "metric": "AUC", "value": 0.9, "standard_error": None},
    ]


# --- the measurements page -------------------------------------------------------------------


def test_the_page_shows_standard_errors_and_the_csv_upload_saves_them(make_study, cast, client):
    built = make_study("draft")
    client.force_login(cast.alice)
    path = f"/studies/{built.study.pk}/measurements/"
    response = client.post(path + "csv/", {"csv_text": "candidate,metric,value,standard_error\nJ48,AUC,0.88,0.0125\n"})
    assert response.status_code == 302
    assert _errors(built)[("J48", "AUC")] == 0.0125
    page = client.get(path).content.decode()
    assert page.count('class="cell__se"') == 1
    assert "± 0.0125</span>" in page
    # the download carries it back
    download = client.get(f"/studies/{built.study.pk}/measurements.csv").content.decode()
    assert "AUC (standard error)" in download.splitlines()[0]
    # a value changed in the table keeps its standard error
    from ..pages.test_designer import cell, table_data

    assert client.post(path, table_data(built, **{cell(built, "J48", "AUC"): "0.87"})).status_code == 302
    row = Measurement.objects.get(study=built.study, candidate__name="J48", metric__name="AUC")
    assert (row.value, row.standard_error) == (0.87, 0.0125)


# --- the snapshot ------------------------------------------------------------------------------


def test_the_snapshot_carries_the_standard_errors(db):
    bundle = case_study_bundle()
    bundle["candidates"][1]["standard_errors"] = {"Success rate": 0.02}
    study = study_import_bundle(bundle=bundle)
    run = engine_services.run_launch(study=study, launched_by=study.designer)
    snapshot = engine_services.run_snapshot_take(run_id=run.pk)  # as the run's worker takes it
    column = [m["name"] for m in snapshot["metrics"]].index("Success rate")
    assert snapshot["standard_errors"][1][column] == 0.02
    assert sum(e is not None for row in snapshot["standard_errors"] for e in row) == 1
    errors = snapshot_standard_errors(snapshot)
    assert errors[1, column] == 0.02 and int((~(errors != errors)).sum()) == 1  # NaN elsewhere
    # a snapshot from before standard errors reads as none at all
    old = {key: value for key, value in snapshot.items() if key != "standard_errors"}
    assert (snapshot_standard_errors(old) != snapshot_standard_errors(old)).all()


def test_the_model_refuses_a_negative_standard_error_in_forms(make_study):
    """What the admin's form runs (the services check it themselves)."""
    from django.core.exceptions import ValidationError

    built = make_study("draft")
    row = Measurement.objects.filter(study=built.study).first()
    row.standard_error = -0.1
    with pytest.raises(ValidationError) as refused:
        row.full_clean()
    assert list(refused.value.message_dict) == ["standard_error"]
    row.standard_error = 0.1
    row.full_clean()
