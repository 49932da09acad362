"""Study metrics computed from predictions (issue 10, item 3): a metric is
mapped to a computation with its parameters, its measurements are filled on
demand through the measurement service with their provenance, and the next
run of the demo ranks the candidates by the computed values."""

import io
import json
from pathlib import Path

import pytest

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine.models import Run
from evaluation import report, services
from evaluation.models import MeasurementSource, MetricComputation
from evaluation.predictions import read_predictions
from workspace import services as workspace_services
from workspace.bundles import study_import_bundle
from workspace.errors import InvalidInput
from workspace.models import Measurement, Metric

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "workspace" / "demo"
PREDICTIONS = DEMO / "case-study-1-predictions.csv"


@pytest.fixture
def demo():
    bundle = json.loads((DEMO / "case-study-1.json").read_text(encoding="utf-8"))
    return study_import_bundle(bundle=bundle)


def upload(study, path=PREDICTIONS, **options):
    with path.open("rb") as stream:
        return services.prediction_set_import(
            study=study, stream=stream, name=path.name, uploaded_by=study.designer, **options
        )


def metric(study, name):
    return Metric.objects.get(study=study, name=name)


def measured(study, name):
    return dict(Measurement.objects.filter(study=study, metric__name=name).values_list("candidate__name", "value"))


def expected(key, **options):
    data = read_predictions(PREDICTIONS, positive="tumour")
    return {name: report.metric_value(data, name, key, report.Options(**options)) for name in data.candidates}


# --- mapping ----------------------------------------------------------------------------------


def test_a_mapping_is_checked_and_names_the_field(demo, unchanged):
    success = metric(demo, "Success rate")
    refusals = [
        ("speed", {}, "computation", "must be one of accuracy, balanced_accuracy"),
        ("log_loss", {}, "computation", "Log loss is lower-is-better and Success rate is higher-is-better"),
        ("accuracy", {"alpha": 2}, "parameters.alpha", "is not a parameter of accuracy (it takes threshold_method"),
        ("accuracy", {"threshold_method": "best"}, "parameters.threshold_method", "must be one of fixed,"),
        ("accuracy", {"threshold_sensitivity": 1.5}, "parameters.threshold_sensitivity", "must lie in (0, 1]"),
        ("accuracy", [], "parameters", "must be an object"),
        ("relevance_score", {"alpha": -1}, "parameters.alpha", "must be greater than 0, got -1"),
        ("a3r", {"root": "eight"}, "parameters.root", "must be a number"),
    ]
    with unchanged():
        for computation, parameters, field, message in refusals:
            with pytest.raises(InvalidInput) as refused:
                services.metric_computation_set(metric=success, computation=computation, parameters=parameters)
            assert list(refused.value.errors) == [field], computation
            assert refused.value.errors[field][0].startswith(message) or message in refused.value.errors[field][0]
    time = metric(demo, "Training time")
    with pytest.raises(InvalidInput) as refused:
        services.metric_computation_set(metric=time, computation="aic", parameters={"n_parameters": {"C4.5": 3}})
    assert refused.value.errors == {"parameters.n_parameters.C4.5": ["is not a candidate of this study"]}
    with pytest.raises(InvalidInput) as refused:
        services.metric_computation_set(metric=time, computation="aic", parameters={"n_parameters": {"J48": 2.5}})
    assert refused.value.errors == {"parameters.n_parameters.J48": ["must be a whole number of 0 or more, got 2.5"]}
    assert not MetricComputation.objects.exists()


def test_a_mapping_replaces_the_last_and_computes_nothing(demo):
    success = metric(demo, "Success rate")
    services.metric_computation_set(metric=success, computation="accuracy")
    mapping = services.metric_computation_set(
        metric=success, computation="balanced_accuracy", parameters={"threshold_method": "max_kappa"}
    )
    assert MetricComputation.objects.get() == mapping
    assert (mapping.computation, mapping.parameters) == ("balanced_accuracy", {"threshold_method": "max_kappa"})
    assert measured(demo, "Success rate")["J48"] == 0.847  # as typed: never computed behind the designer's back
    services.metric_computation_remove(metric=success)
    assert not MetricComputation.objects.exists()


# --- computing -------------------------------------------------------------------------------------


def test_computing_fills_every_candidate_through_the_measurement_service(demo):
    prediction_set = upload(demo, positive="tumour")
    services.metric_computation_set(metric=metric(demo, "Success rate"), computation="accuracy")
    services.metric_computation_set(metric=metric(demo, "Fold accuracy stdev"), computation="consistency")
    before = measured(demo, "Success rate")
    outcome = services.measurements_compute(study=demo)
    accuracy, consistency = expected("accuracy"), expected("consistency")
    assert measured(demo, "Success rate") == accuracy
    assert measured(demo, "Fold accuracy stdev") == consistency
    assert measured(demo, "Comprehensibility rating")["IBk"] == 0  # not mapped: untouched
    assert outcome.not_computed == []
    j48 = next(c for c in outcome.computed if (c.metric, c.candidate) == ("Success rate", "J48"))
    assert (j48.before, j48.value, j48.prediction_set) == (before["J48"], accuracy["J48"], PREDICTIONS.name)
    sources = MeasurementSource.objects.filter(metric__name="Success rate").order_by("candidate__position")
    assert [(s.candidate.name, s.value, s.computation, s.prediction_set_id) for s in sources] == [
        (name, accuracy[name], "accuracy", prediction_set.pk) for name in ("J48", "JRip", "RandomForest", "IBk")
    ]


def test_a_candidate_without_predictions_or_an_undefined_value_is_listed_and_left_alone(demo):
    one = "candidate,y_true,y_pred,time\nJ48,tumour,tumour,0.1\nJ48,normal,normal,0.1\n"
    services.prediction_set_import(
        study=demo, stream=io.BytesIO(one.encode()), name="j48.csv", uploaded_by=demo.designer
    )
    services.metric_computation_set(metric=metric(demo, "Success rate"), computation="accuracy")
    services.metric_computation_set(metric=metric(demo, "Fold accuracy stdev"), computation="consistency")
    outcome = services.measurements_compute(study=demo)
    assert [(c.metric, c.candidate, c.value) for c in outcome.computed] == [("Success rate", "J48", 1.0)]
    reasons = {(n.metric, n.candidate): n.reason for n in outcome.not_computed}
    assert reasons[("Success rate", "IBk")] == "no predictions"
    assert reasons[("Fold accuracy stdev", "J48")] == "needs a fold column"
    assert measured(demo, "Success rate")["IBk"] == 0.921  # as it was


def test_the_newest_set_holding_a_candidate_is_used(demo):
    upload(demo, positive="tumour")
    newer = "candidate,y_true,y_pred\nJ48,tumour,normal\nJ48,normal,normal\n"
    services.prediction_set_import(
        study=demo, stream=io.BytesIO(newer.encode()), name="j48-again.csv", uploaded_by=demo.designer
    )
    services.metric_computation_set(metric=metric(demo, "Success rate"), computation="accuracy")
    outcome = services.measurements_compute(study=demo)
    values = {c.candidate: (c.value, c.prediction_set) for c in outcome.computed}
    assert values["J48"] == (0.5, "j48-again.csv")
    assert values["JRip"] == (expected("accuracy")["JRip"], PREDICTIONS.name)


def test_the_next_run_ranks_by_the_computed_values(demo):
    """Upload predictions for the demo's candidates, map Success rate to
    accuracy, reopen, close, run: the run's snapshot holds the computed
    success rates, and J48, now more accurate than JRip, overtakes it."""
    first = engine_services.run_launch(study=demo, launched_by=demo.designer)
    engine_services.run_execute(run_id=first.pk)
    upload(demo, positive="tumour")
    services.metric_computation_set(metric=metric(demo, "Success rate"), computation="accuracy")
    services.measurements_compute(study=demo)
    workspace_services.study_reopen_assessment(study=demo)
    workspace_services.study_close_assessment(study=demo)
    second = engine_services.run_launch(study=demo, launched_by=demo.designer)
    engine_services.run_execute(run_id=second.pk)
    second = Run.objects.get(pk=second.pk)
    accuracy = expected("accuracy")
    snapshot = second.snapshot
    column = [m["name"] for m in snapshot["metrics"]].index("Success rate")
    assert {name: row[column] for name, row in zip(snapshot["candidates"], snapshot["measurements"], strict=True)} == (
        accuracy
    )
    before = [c["name"] for c in engine_selectors.results_document(run=Run.objects.get(pk=first.pk))["candidates"]]
    after = [c["name"] for c in engine_selectors.results_document(run=second)["candidates"]]
    assert before[:2] == ["JRip", "J48"] and after[:2] == ["J48", "JRip"]
    assert accuracy["J48"] > accuracy["JRip"]
