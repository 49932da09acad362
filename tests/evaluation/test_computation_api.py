"""Study metrics computed from predictions through the REST API, the twins of
the evaluation pages: a metric's computation (read, set, removed), the
catalogue, computing the measurements, where computed values came from, and
a set's ``approve-evaluation/1`` document. Values are checked against
``evaluation.report`` on the demo's predictions file, read directly; every
refusal with its field, its message and nothing written; query counts that
do not grow with candidates, metrics or sets.

Who may do what (anonymous 401, outsider 404, expert reads, designer
writes, in every phase) is in the access matrix of
``tests/api/test_access.py``, with every other endpoint.
"""

import io
import json
from pathlib import Path

import pytest
from django.utils.dateparse import parse_datetime

from evaluation import report, services
from evaluation.models import MeasurementSource, MetricComputation
from evaluation.predictions import read_predictions
from tests.fixtures import api_error, error_fields
from workspace.bundles import study_import_bundle
from workspace.models import Measurement, Metric

from .test_pages import sized

pytestmark = pytest.mark.django_db

API = "/api/v1"
DEMO = Path(__file__).resolve().parents[2] / "workspace" / "demo"
PREDICTIONS = DEMO / "case-study-1-predictions.csv"
CANDIDATES = ["J48", "JRip", "RandomForest", "IBk"]
TYPED = {  # the demo bundle's measurements
    "Success rate": {"J48": 0.847, "JRip": 0.865, "RandomForest": 0.924, "IBk": 0.921},
    "Fold accuracy stdev": {"J48": 0.106, "JRip": 0.1, "RandomForest": 0.089, "IBk": 0.084},
}


@pytest.fixture
def demo():
    return study_import_bundle(bundle=json.loads((DEMO / "case-study-1.json").read_text(encoding="utf-8")))


@pytest.fixture
def designer(demo, api):
    return api(demo.designer)


@pytest.fixture
def expert(demo, api):
    return api(demo.memberships.get(user__username="statistician").user)


def stored_set(study, path=PREDICTIONS, name=None, **options):
    with path.open("rb") as stream:
        return services.prediction_set_import(
            study=study, stream=stream, name=name or path.name, uploaded_by=study.designer, **options
        )


def the_file():
    """The demo's predictions as the report module reads them, without a study."""
    return read_predictions(PREDICTIONS, positive="tumour")


def expected(key, **options):
    data = the_file()
    return {name: report.metric_value(data, name, key, report.Options(**options)) for name in CANDIDATES}


def metric(study, name):
    return Metric.objects.get(study=study, name=name)


def computation_url(study, name):
    return f"{API}/studies/{study.pk}/metrics/{metric(study, name).pk}/computation/"


def measured(client, study):
    """``{metric: {candidate: value}}`` as ``GET .../measurements/`` gives them."""
    rows = client.get(f"{API}/studies/{study.pk}/measurements/").json()["results"]
    values = {}
    for row in rows:
        values.setdefault(row["metric"], {})[row["candidate"]] = row["value"]
    return values


# --- a metric's computation ----------------------------------------------------------------


def test_put_answers_the_stored_mapping_which_members_then_read(demo, designer, expert):
    url = computation_url(demo, "Success rate")
    body = {"computation": "accuracy", "parameters": {"threshold_method": "max_kappa", "use_threshold": True}}
    response = designer.put(url, body, format="json")
    assert response.status_code == 200, response.content
    answer = {
        "computation": "accuracy",
        "name": "Accuracy (success rate)",
        "definition": "the share of instances whose predicted label is the true one",
        "parameters": {"threshold_method": "max_kappa", "use_threshold": True},
    }
    assert response.json() == answer
    mapping = MetricComputation.objects.get(metric__name="Success rate")
    assert (mapping.computation, mapping.parameters) == ("accuracy", body["parameters"])
    for client in (designer, expert):
        assert client.get(url).json() == answer
    # A second PUT replaces it whole: the parameters left out take their defaults again.
    replaced = designer.put(url, {"computation": "balanced_accuracy"}, format="json")
    assert replaced.json()["parameters"] == {} and replaced.json()["name"] == "Balanced accuracy"
    assert MetricComputation.objects.get().computation == "balanced_accuracy"


def test_an_uncomputed_metric_is_404_and_delete_stops_computing_but_keeps_the_values(demo, designer, expert):
    url = computation_url(demo, "Success rate")
    response = expert.get(url)
    assert (response.status_code, response.json()) == (
        404,
        api_error("not_found", "Success rate is not computed from predictions: PUT a computation here to compute it."),
    )
    assert designer.delete(url).status_code == 404
    stored_set(demo, positive="tumour")
    designer.put(url, {"computation": "accuracy"}, format="json")
    designer.post(f"{API}/studies/{demo.pk}/measurements/compute/")
    deleted = designer.delete(url)
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert not MetricComputation.objects.exists()
    assert expert.get(url).status_code == 404
    assert measured(expert, demo)["Success rate"] == expected("accuracy")  # the values stay


def test_a_metric_of_another_study_is_not_found(demo, designer, cast):
    other = study_import_bundle(bundle=json.loads((DEMO / "case-study-1.json").read_text(encoding="utf-8")))
    theirs = metric(other, "Success rate")
    services.metric_computation_set(metric=theirs, computation="accuracy")
    for method, body in (("get", None), ("put", {"computation": "f1"}), ("delete", None)):
        response = getattr(designer, method)(
            f"{API}/studies/{demo.pk}/metrics/{theirs.pk}/computation/", body, format="json"
        )
        assert (response.status_code, response.json()) == (404, api_error("not_found", "No such metric in this study."))
    assert MetricComputation.objects.get().computation == "accuracy"


SUCCESS_TAKES = "threshold_method, threshold_value, threshold_sensitivity, use_threshold"
ALL_KEYS = ", ".join(report.COMPUTATIONS)
PUT_REFUSALS = [
    ("Success rate", {}, {"computation": ["This field is required."]}),
    ("Success rate", {"computation": "speed"}, {"computation": [f"must be one of {ALL_KEYS}, got 'speed'"]}),
    (
        "Success rate",
        {"computation": "log_loss"},
        {
            "computation": [
                "Log loss is lower-is-better and Success rate is higher-is-better: choose a computation that runs "
                "the same way, or change the metric's direction first"
            ]
        },
    ),
    (
        "Success rate",
        {"computation": "accuracy", "parameters": {"threshold_sensitivity": 1.5}},
        {"parameters.threshold_sensitivity": ["must lie in (0, 1], got 1.5"]},
    ),
    (
        "Success rate",
        {"computation": "accuracy", "parameters": {"threshold_method": "best"}},
        {
            "parameters.threshold_method": [
                f"must be one of {', '.join(report.THRESHOLD_METHODS)}, got 'best'",
            ]
        },
    ),
    (
        "Success rate",
        {"computation": "accuracy", "parameters": {"alpha": 2}},
        {"parameters.alpha": [f"is not a parameter of accuracy (it takes {SUCCESS_TAKES})"]},
    ),
    (
        "Success rate",
        {"computation": "relevance_score", "parameters": {"alpha": 0}},
        {"parameters.alpha": ["must be greater than 0, got 0"]},
    ),
    (
        "Success rate",
        {"computation": "a3r", "parameters": {"root": "eight"}},
        {"parameters.root": ["must be a number, got 'eight'"]},
    ),
    ("Success rate", {"computation": "accuracy", "parameters": [1]}, {"parameters": ["must be an object"]}),
    (
        "Training time",
        {"computation": "aic", "parameters": {"n_parameters": {"J48": 12, "C4.5": 3}}},
        {"parameters.n_parameters.C4.5": ["is not a candidate of this study"]},
    ),
    (
        "Training time",
        {"computation": "aic", "parameters": {"n_parameters": {"J48": 2.5}}},
        {"parameters.n_parameters.J48": ["must be a whole number of 0 or more, got 2.5"]},
    ),
    (
        "Success rate",
        {"computation": "accuracy", "colour": "red"},
        {"colour": ["is not a field of this request (the fields are computation, parameters)"]},
    ),
    # What GET adds is read-only: sending it back is refused like any unknown field.
    (
        "Success rate",
        {"computation": "accuracy", "name": "Accuracy (success rate)"},
        {"name": ["is not a field of this request (the fields are computation, parameters)"]},
    ),
    (
        "Success rate",
        ["accuracy"],
        {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]},
    ),
]


@pytest.mark.parametrize("name, body, errors", PUT_REFUSALS, ids=lambda v: None)
def test_a_refused_mapping_names_the_field_and_leaves_the_last_one(name, body, errors, demo, designer, nothing_stored):
    services.metric_computation_set(
        metric=metric(demo, name), computation="balanced_accuracy" if name == "Success rate" else "efficiency"
    )
    with nothing_stored():
        response = designer.put(computation_url(demo, name), body, format="json")
    assert (response.status_code, error_fields(response)) == (400, errors)


# --- the catalogue --------------------------------------------------------------------------


def test_the_catalogue_lists_every_computation_with_the_parameters_it_takes_and_their_defaults(demo, expert):
    response = expert.get(f"{API}/studies/{demo.pk}/computations/")
    assert response.status_code == 200
    catalogue = {entry["key"]: entry for entry in response.json()}
    assert list(catalogue) == list(report.COMPUTATIONS)
    for key, computation in report.COMPUTATIONS.items():
        entry = catalogue[key]
        assert (entry["name"], entry["definition"], entry["better"], entry["needs"]) == (
            computation.name,
            computation.definition,
            computation.better,
            computation.needs,
        )
    threshold = {"threshold_method": "fixed", "threshold_value": 0.5, "threshold_sensitivity": 0.95}
    assert catalogue["accuracy"]["parameters"] == {**threshold, "use_threshold": False}
    assert catalogue["relevance_score"]["parameters"] == {
        "alpha": 2.0,
        "beta": 1.0,
        **threshold,
        "use_threshold": False,
    }
    assert catalogue["aic"]["parameters"] == {"n_parameters": {}}
    assert catalogue["roc_auc"]["parameters"] == {} and catalogue["log_loss"]["better"] == "lower"
    # What the catalogue lists is exactly what a PUT takes.
    for key, entry in catalogue.items():
        assert services.computation_parameters(key, entry["parameters"], candidate_names=set()) == entry["parameters"]


# --- computing --------------------------------------------------------------------------------


def test_computing_fills_the_measurements_with_the_values_the_report_gives_for_the_file(demo, designer, expert):
    prediction_set = stored_set(demo, positive="tumour")
    options = {"threshold_method": "max_kappa", "use_threshold": True}
    designer.put(
        computation_url(demo, "Success rate"), {"computation": "accuracy", "parameters": options}, format="json"
    )
    designer.put(computation_url(demo, "Fold accuracy stdev"), {"computation": "consistency"}, format="json")
    accuracy, consistency = expected("accuracy", **options), expected("consistency")
    assert accuracy != expected("accuracy")  # the parameters changed something

    response = designer.post(f"{API}/studies/{demo.pk}/measurements/compute/")
    assert response.status_code == 200, response.content
    name = PREDICTIONS.name
    assert response.json() == {
        "computed": [
            {
                "metric": metric_name,
                "candidate": c,
                "before": TYPED[metric_name][c],
                "value": values[c],
                "prediction_set": name,
            }
            for metric_name, values in (("Success rate", accuracy), ("Fold accuracy stdev", consistency))
            for c in CANDIDATES
        ],
        "not_computed": [],
    }
    values = measured(expert, demo)
    assert values["Success rate"] == accuracy
    assert values["Fold accuracy stdev"] == consistency
    assert values["Training time"]["IBk"] == 0.2  # not mapped: as typed

    sources = expert.get(f"{API}/studies/{demo.pk}/measurements/sources/").json()
    assert sources["count"] == 8
    computed_at = {row.pop("computed_at") for row in sources["results"]}
    assert len(computed_at) == 1
    assert parse_datetime(computed_at.pop()) == MeasurementSource.objects.first().computed_at
    assert sources["results"] == [
        {
            "candidate": c,
            "metric": metric_name,
            "prediction_set": name,
            "prediction_set_id": prediction_set.pk,
            "computation": computation,
            "parameters": parameters,
            "value": values[metric_name][c],
            "edited": False,
        }
        for c in CANDIDATES
        for metric_name, computation, parameters in (
            ("Success rate", "accuracy", options),
            ("Fold accuracy stdev", "consistency", {}),
        )
    ]


def test_computing_only_the_metrics_named(demo, designer):
    stored_set(demo, positive="tumour")
    services.metric_computation_set(metric=metric(demo, "Success rate"), computation="accuracy")
    services.metric_computation_set(metric=metric(demo, "Fold accuracy stdev"), computation="consistency")
    response = designer.post(
        f"{API}/studies/{demo.pk}/measurements/compute/", {"metrics": ["Fold accuracy stdev"]}, format="json"
    )
    assert response.status_code == 200
    assert [(row["metric"], row["candidate"]) for row in response.json()["computed"]] == [
        ("Fold accuracy stdev", c) for c in CANDIDATES
    ]
    values = measured(designer, demo)
    assert values["Fold accuracy stdev"] == expected("consistency")
    assert values["Success rate"] == TYPED["Success rate"]


def test_what_cannot_be_computed_is_listed_with_the_reason_and_left_as_it_was(demo, designer, nothing_stored):
    services.metric_computation_set(metric=metric(demo, "Success rate"), computation="accuracy")
    with nothing_stored():
        nothing = designer.post(f"{API}/studies/{demo.pk}/measurements/compute/")
    assert nothing.json() == {
        "computed": [],
        "not_computed": [{"metric": "Success rate", "candidate": c, "reason": "no predictions"} for c in CANDIDATES],
    }
    # J48 alone, without folds: its success rate is computed, not its consistency.
    one = "candidate,y_true,y_pred\nJ48,tumour,tumour\nJ48,normal,tumour\n"
    services.prediction_set_import(study=demo, stream=io.BytesIO(one.encode()), name="j48.csv", uploaded_by=None)
    services.metric_computation_set(metric=metric(demo, "Fold accuracy stdev"), computation="consistency")
    outcome = designer.post(f"{API}/studies/{demo.pk}/measurements/compute/").json()
    assert outcome["computed"] == [
        {"metric": "Success rate", "candidate": "J48", "before": 0.847, "value": 0.5, "prediction_set": "j48.csv"}
    ]
    reasons = {(row["metric"], row["candidate"]): row["reason"] for row in outcome["not_computed"]}
    assert reasons == {
        **{("Success rate", c): "no predictions" for c in CANDIDATES[1:]},
        ("Fold accuracy stdev", "J48"): "needs a fold column",
        **{("Fold accuracy stdev", c): "no predictions" for c in CANDIDATES[1:]},
    }
    assert measured(designer, demo)["Fold accuracy stdev"] == TYPED["Fold accuracy stdev"]


COMPUTE_REFUSALS = [
    (
        {"metrics": ["Nope", "Success rate", "Training time"]},
        {
            "metrics[0]": ["no metric named 'Nope' in this study"],
            "metrics[2]": ["Training time is not computed from predictions: map it to a computation first"],
        },
    ),
    ({"metrics": []}, {"metrics": ["This list may not be empty."]}),
    ({"metrics": "Success rate"}, {"metrics": ['Expected a list of items but got type "str".']}),
    ({"metric": ["Success rate"]}, {"metric": ["is not a field of this request (the fields are metrics)"]}),
]


@pytest.mark.parametrize("body, errors", COMPUTE_REFUSALS, ids=lambda v: None)
def test_a_refused_computation_names_the_field_and_computes_nothing(body, errors, demo, designer, nothing_stored):
    stored_set(demo, positive="tumour")
    services.metric_computation_set(metric=metric(demo, "Success rate"), computation="accuracy")
    with nothing_stored():
        response = designer.post(f"{API}/studies/{demo.pk}/measurements/compute/", body, format="json")
    assert (response.status_code, error_fields(response)) == (400, errors)


# --- where computed values came from -------------------------------------------------------------


def test_sources_say_which_values_were_typed_over_and_outlive_their_set(demo, designer, expert):
    prediction_set = stored_set(demo, positive="tumour")
    services.metric_computation_set(metric=metric(demo, "Success rate"), computation="accuracy")
    designer.post(f"{API}/studies/{demo.pk}/measurements/compute/")
    typed = designer.put(
        f"{API}/studies/{demo.pk}/measurements/",
        [{"candidate": "IBk", "metric": "Success rate", "value": 0.5}],
        format="json",
    )
    assert typed.status_code == 200
    assert designer.delete(f"{API}/studies/{demo.pk}/predictions/{prediction_set.pk}/").status_code == 204
    rows = expert.get(f"{API}/studies/{demo.pk}/measurements/sources/").json()["results"]
    accuracy = expected("accuracy")
    assert [(r["candidate"], r["value"], r["edited"], r["prediction_set"], r["prediction_set_id"]) for r in rows] == [
        (c, accuracy[c], c == "IBk", PREDICTIONS.name, None) for c in CANDIDATES
    ]
    assert Measurement.objects.get(candidate__name="IBk", metric__name="Success rate").value == 0.5


# --- a set's evaluation document ---------------------------------------------------------------------


def test_the_evaluation_document_is_the_reports_for_the_file(demo, expert):
    prediction_set = stored_set(demo, positive="tumour")
    url = f"{API}/studies/{demo.pk}/predictions/{prediction_set.pk}/evaluation/"
    response = expert.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    document = report.evaluation_document(the_file())
    assert response.json() == document
    assert response.content.decode() == report.document_json(document)  # compact, as evaluate_predictions --json
    # Every metric but the Relevance Score: the file has no context columns.
    assert set(document["candidates"]["J48"]) == set(report.DOCUMENT_KEYS) - {"relevance_score"}
    query = {
        "threshold_method": "max_kappa",
        "use_threshold": "true",
        "alpha": "3",
        "beta": "0.5",
        "root": "2",
        "acc_d": "1",
    }
    chosen = expert.get(url, query)
    options = report.Options(threshold_method="max_kappa", use_threshold=True, alpha=3, beta=0.5, root=2, acc_d=1)
    assert chosen.json() == report.evaluation_document(the_file(), options)
    assert chosen.json()["candidates"]["J48"]["a3r"] != document["candidates"]["J48"]["a3r"]
    # With AccD 1, J48 is past ARR's pole against IBk: every ARR is null, with the reason.
    assert chosen.json()["notes"]["J48"]["arr"].startswith("ARR is undefined at and below its pole")


def test_an_a3r_beyond_floating_point_is_null_with_the_reason(demo, expert):
    """It was NaN, which JSON cannot carry: the page showed "nan"."""
    prediction_set = stored_set(demo, positive="tumour")
    response = expert.get(f"{API}/studies/{demo.pk}/predictions/{prediction_set.pk}/evaluation/", {"root": "0.001"})
    assert response.status_code == 200
    assert {c["a3r"] for c in response.json()["candidates"].values()} == {None}
    assert response.json()["notes"]["IBk"]["a3r"] == (
        "A3R is beyond floating point with root 0.001: the times raised to the power 1/root are too large or too "
        "small to compare (a larger root keeps them in range)"
    )


@pytest.mark.parametrize(
    "query, errors",
    [
        (
            "threshold_method=best&root=0&alpha=high",
            {
                "threshold_method": [f"must be one of {', '.join(report.THRESHOLD_METHODS)}, got 'best'"],
                "root": ["must be greater than 0, got 0"],
                "alpha": ["must be a number, got 'high'"],
            },
        ),
        ("threshold_value=nan", {"threshold_value": ["must be a finite number, got nan"]}),
        ("threshold_sensitivity=1.5", {"threshold_sensitivity": ["must lie in (0, 1], got 1.5"]}),
        ("use_threshold=yes", {"use_threshold": ["must be true or false"]}),
        (
            "n_parameters=3",
            {
                "n_parameters": [
                    "is not a parameter of a report (they are threshold_method, threshold_value, "
                    "threshold_sensitivity, use_threshold, alpha, beta, root, acc_d)"
                ]
            },
        ),
    ],
    ids=["three-at-once", "nan", "sensitivity", "flag", "unknown"],
)
def test_bad_report_options_are_refused_naming_the_parameter(query, errors, demo, expert):
    prediction_set = stored_set(demo, positive="tumour")
    response = expert.get(f"{API}/studies/{demo.pk}/predictions/{prediction_set.pk}/evaluation/?{query}")
    assert (response.status_code, error_fields(response)) == (400, errors)


def test_a_set_of_another_study_has_no_evaluation_here(demo, designer):
    other = study_import_bundle(bundle=json.loads((DEMO / "case-study-1.json").read_text(encoding="utf-8")))
    theirs = stored_set(other, positive="tumour")
    response = designer.get(f"{API}/studies/{demo.pk}/predictions/{theirs.pk}/evaluation/")
    assert (response.status_code, response.json()) == (
        404,
        api_error("not_found", "No such prediction set in this study."),
    )


# --- query counts ---------------------------------------------------------------------------------


def with_a_set_per_candidate(cast, size):
    """``sized`` (``size`` candidates and metrics, every metric computed
    from ``size // 2`` shared sets), then a set of each candidate's own: the
    newest set differs from one candidate to the next."""
    study = sized(cast, size)
    for candidate in study.candidates.all():
        services.prediction_set_import(
            study=study,
            stream=io.BytesIO(b"y_true,y_pred\nyes,no\nno,no\nyes,yes\n"),
            name=f"{candidate.name}.csv",
            uploaded_by=cast.alice,
            candidate=candidate.name,
        )
    return study


# 1. the token (with its user), 2. the study, 3. my memberships in it.
ACCESS = 3
READS = {
    # 4. the metric with its mapping
    "metrics/{metric}/computation/": ACCESS + 1,
    # nothing else: the catalogue is the code's
    "computations/": ACCESS,
    # 4. the count of sources, 5. the page of them with their candidates,
    # metrics and the measurements' current values
    "measurements/sources/": ACCESS + 2,
    # Asked for again (computed and kept by the first GET): 4. the set with
    # its uploader, 5. its candidates' names, 6. the document kept.
    "predictions/{set}/evaluation/": ACCESS + 3,
}
# The first GET of a set's evaluation: ACCESS, 4. the set, 5. its
# candidates' names, 6. nothing kept, 7. the set's contexts, 8. every
# candidate's arrays; kept in a transaction (9. savepoint): 10. the set
# locked, 11. the document inserted, 12. the oldest beyond those kept
# deleted, (13. release).
FIRST_EVALUATION = ACCESS + 10


@pytest.mark.parametrize("path", list(READS))
def test_reads_cost_the_same_queries_however_many_candidates_metrics_and_sets(
    path, cast, api, django_assert_num_queries
):
    client = api(cast.alice)
    for size in (2, 6):
        study = with_a_set_per_candidate(cast, size)
        url = f"{API}/studies/{study.pk}/" + path.format(
            metric=Metric.objects.filter(study=study).first().pk, set=study.prediction_sets.last().pk
        )
        if path == "predictions/{set}/evaluation/":
            with django_assert_num_queries(FIRST_EVALUATION):
                first = client.get(url)
            assert first.status_code == 200, first.content
        with django_assert_num_queries(READS[path]):
            response = client.get(url)
        assert response.status_code == 200, response.content
        if path == "measurements/sources/":
            assert response.json()["count"] == size * size


def test_computing_costs_the_same_queries_however_many_candidates_metrics_and_sets(
    cast, api, django_assert_num_queries
):
    client = api(cast.alice)
    for size in (2, 6):
        study = with_a_set_per_candidate(cast, size)
        url = f"{API}/studies/{study.pk}/measurements/compute/"
        # ACCESS, then 4. the mappings with their metrics, 5. the candidates,
        # 6. each candidate's newest set, 7. those sets, 8. all their arrays;
        # in a transaction (9. its savepoint): 10. the measurements before;
        # measurements_set in its own (11. savepoint): 12. the study locked,
        # 13. its candidates, 14. its metrics, 15. the measurements before (their
        # history's old values), 16. the upsert, 17. its history, (18. release);
        # 19. the sources' upsert, 20. their history, (21. release).
        with django_assert_num_queries(ACCESS + 18):
            response = client.post(url)
        assert len(response.json()["computed"]) == size * size
        assert {row["prediction_set"] for row in response.json()["computed"]} == {
            f"Candidate {n}.csv" for n in range(size)
        }
        # Naming the metrics adds 4. the named metrics with their mappings; the
        # values computed again are the same, so no measurement's history is written.
        names = list(Metric.objects.filter(study=study).values_list("name", flat=True))
        with django_assert_num_queries(ACCESS + 18):
            assert client.post(url, {"metrics": names}, format="json").status_code == 200
