"""The evaluation pages (issue 10, item 4) through Django's test client:
prediction sets uploaded and refused, a metric mapped and computed, the
measurements page saying where values came from, a candidate's report, a
set's candidates compared; roles, and query counts that do not grow."""

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from evaluation import report, services
from evaluation.models import MeasurementSource, MetricComputation, PredictionSet
from evaluation.predictions import read_predictions
from tests.pages.test_studyhome import as_user, text_of
from workspace.bundles import study_import_bundle
from workspace.models import Measurement, Metric
from workspace.templatetags.numbers import significant

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "workspace" / "demo"
PREDICTIONS = DEMO / "case-study-1-predictions.csv"


@pytest.fixture
def demo():
    return study_import_bundle(bundle=json.loads((DEMO / "case-study-1.json").read_text(encoding="utf-8")))


def expert(study, name="statistician"):
    return study.memberships.get(user__username=name).user


def stored_set(study):
    with PREDICTIONS.open("rb") as stream:
        return services.prediction_set_import(
            study=study, stream=stream, name=PREDICTIONS.name, uploaded_by=study.designer, positive="tumour"
        )


def upload(client, study, content: bytes, name="p.csv", **fields):
    return client.post(f"/studies/{study.pk}/predictions/", {"file": SimpleUploadedFile(name, content), **fields})


def test_only_the_designer_works_with_predictions(client, cast, demo):
    path = f"/studies/{demo.pk}/predictions/"
    refused = as_user(client, expert(demo)).get(path)
    assert refused.status_code == 403
    assert "Only the designer of this study can work with predictions." in text_of(refused)
    assert as_user(client, cast.charlie).get(path).status_code == 404
    client.logout()
    assert client.get(path)["Location"].startswith("/accounts/login/")


def test_upload_stores_the_set_and_lists_it_with_its_reports(client, demo):
    as_user(client, demo.designer)
    response = upload(client, demo, PREDICTIONS.read_bytes(), name=PREDICTIONS.name, positive="tumour")
    assert response.status_code == 302 and response["Location"] == f"/studies/{demo.pk}/predictions/"
    prediction_set = PredictionSet.objects.get()
    assert (prediction_set.row_count, prediction_set.positive, prediction_set.uploaded_by) == (
        408,
        "tumour",
        demo.designer,
    )
    page = client.get(f"/studies/{demo.pk}/predictions/")
    text = text_of(page)
    assert "case-study-1-predictions.csv was stored: 408 rows for 4 candidates." in text
    assert "J48 (102) JRip (102) RandomForest (102) IBk (102) Compare the candidates (A3R, ARR)" in text
    body = page.content.decode()
    assert f'href="/studies/{demo.pk}/predictions/{prediction_set.pk}/candidates/J48/"' in body
    assert "normal, tumour (positive: tumour)" in text or "tumour, normal (positive: tumour)" in text


def test_a_bad_file_is_refused_line_by_line_and_nothing_is_stored(client, demo):
    as_user(client, demo.designer)
    bad = b"candidate,y_true,y_pred,time\nJ48,tumour,tumour,0.1\nC4.5,normal,normal,0.1\nJ48,normal,normal,-2\n"
    response = upload(client, demo, bad)
    assert response.status_code == 400
    text = text_of(response)
    assert "The file was refused; nothing was stored." in text
    assert "line 3, column candidate:" in text and "C4.5" in text
    assert "line 4, column time:" in text
    assert not PredictionSet.objects.exists()
    # a candidate that is not the study's, chosen for a one-candidate upload
    response = upload(client, demo, b"y_true,y_pred\ntumour,tumour\n", candidate="C4.5")
    assert response.status_code == 400 and "Select a valid choice. C4.5 is not one of the available choices." in (
        text_of(response)
    )
    assert not PredictionSet.objects.exists()


def test_mapping_a_metric_offers_what_runs_its_way_and_names_the_field_it_refuses(client, demo):
    as_user(client, demo.designer)
    success = Metric.objects.get(study=demo, name="Success rate")
    path = f"/studies/{demo.pk}/predictions/metrics/{success.pk}/"
    offered = [choice for choice, _ in client.get(path).context["form"].fields["computation"].choices]
    higher = [key for key, c in report.COMPUTATIONS.items() if c.better == "higher"]
    assert offered == higher and "log_loss" not in offered
    refused = client.post(path, {"computation": "accuracy", "threshold_method": "fixed", "threshold_value": "half"})
    assert refused.status_code == 400
    assert "Enter a number." in text_of(refused) and not MetricComputation.objects.exists()
    sensitivity = client.post(
        path,
        {
            "computation": "accuracy",
            "threshold_method": "fixed_sensitivity",
            "threshold_value": "0.5",
            "threshold_sensitivity": "0",
            "alpha": "2",
            "beta": "1",
            "root": "8",
            "acc_d": "0.1",
        },
    )
    assert sensitivity.status_code == 400
    assert sensitivity.context["form"].errors == {"threshold_sensitivity": ["must lie in (0, 1], got 0"]}
    saved = client.post(path, {**form_defaults(), "computation": "accuracy", "threshold_method": "max_kappa"})
    assert saved.status_code == 302
    mapping = MetricComputation.objects.get(metric=success)
    assert mapping.computation == "accuracy"
    assert mapping.parameters == {
        "threshold_method": "max_kappa",
        "threshold_value": 0.5,
        "threshold_sensitivity": 0.95,
        "use_threshold": False,
    }
    assert client.post(path, {"remove": "1"}).status_code == 302
    assert not MetricComputation.objects.exists()


def form_defaults() -> dict:
    defaults = report.Options()
    return {
        "threshold_method": defaults.threshold_method,
        "threshold_value": defaults.threshold_value,
        "threshold_sensitivity": defaults.threshold_sensitivity,
        "alpha": defaults.alpha,
        "beta": defaults.beta,
        "root": defaults.root,
        "acc_d": defaults.acc_d,
    }


def test_aic_takes_each_candidates_number_of_parameters(client, demo):
    as_user(client, demo.designer)
    time = Metric.objects.get(study=demo, name="Training time")  # lower is better, like AIC
    j48 = demo.candidates.get(name="J48")
    path = f"/studies/{demo.pk}/predictions/metrics/{time.pk}/"
    response = client.post(path, {**form_defaults(), "computation": "aic", f"n_parameters_{j48.pk}": "12"})
    assert response.status_code == 302
    assert MetricComputation.objects.get().parameters == {"n_parameters": {"J48": 12}}


def test_computing_says_what_changed_and_the_measurements_page_where_values_came_from(client, demo):
    prediction_set = stored_set(demo)
    services.metric_computation_set(metric=Metric.objects.get(study=demo, name="Success rate"), computation="accuracy")
    as_user(client, demo.designer)
    response = client.post(f"/studies/{demo.pk}/predictions/compute/")
    text = text_of(response)
    accuracy = {
        n: report.metric_value(read_predictions(PREDICTIONS, positive="tumour"), n, "accuracy") for n in ("J48",)
    }
    assert "4 measurements computed, 4 changed" in text
    # rounded on the page (issue 16, finding 9): 0.9019607843137255 shown as 0.9020
    assert f"Success rate J48 0.847 {significant(accuracy['J48'])} case-study-1-predictions.csv" in text
    assert "Not computed" not in text
    measurements = client.get(f"/studies/{demo.pk}/measurements/")
    page = text_of(measurements)
    assert page.count("computed") >= 4
    assert re.search(
        r"Success rate : 4 values computed as Accuracy \(success rate\) from case-study-1-predictions\.csv, last on",
        page,
    )
    # a value typed over is no longer called computed
    Measurement.objects.filter(candidate__name="IBk", metric__name="Success rate").update(value=0.5)
    page = text_of(client.get(f"/studies/{demo.pk}/measurements/"))
    assert "typed over since, so no longer computed: IBk." in page
    assert MeasurementSource.objects.get(candidate__name="IBk", metric__name="Success rate").prediction_set == (
        prediction_set
    )


def test_a_candidates_report(client, demo):
    prediction_set = stored_set(demo)
    as_user(client, demo.designer)
    path = f"/studies/{demo.pk}/predictions/{prediction_set.pk}/candidates/J48/"
    response = client.get(path)
    assert response.status_code == 200
    data = read_predictions(PREDICTIONS, positive="tumour")
    candidate = report.CandidateReport(data, "J48")
    values = {row["computation"].key: row for row in response.context["values"]}
    assert values["accuracy"]["value"] == candidate.accuracy()
    assert values["roc_auc"]["value"] == candidate.roc_auc()
    assert values["aic"]["value"] is None and values["aic"]["needs"] == "needs the number of parameters of J48"
    counts = candidate.confusion_matrix()
    confusion = response.context["confusion"]
    assert [[cell["count"] for cell in row["cells"]] for row in confusion["rows"]] == counts.tolist()
    body = response.content.decode()
    for title in ("ROC curve of J48 (AUC", "Cumulative gain of J48", "Lift of J48"):
        assert title in body
    text = text_of(response)
    assert f"Accuracy (success rate) {significant(candidate.accuracy())} The share of instances" in text
    # labels from the scores, by the threshold asked for
    chosen = client.get(path, {"threshold_method": "max_kappa", "use_threshold": "on"})
    threshold = report.CandidateReport(data, "J48", report.Options(threshold_method="max_kappa", use_threshold=True))
    assert chosen.context["threshold"] == threshold.threshold
    assert f"at least {threshold.threshold:.4g}" in text_of(chosen)
    assert client.get(f"/studies/{demo.pk}/predictions/{prediction_set.pk}/candidates/C4.5/").status_code == 404
    assert client.get(f"/studies/{demo.pk}/predictions/999/candidates/J48/").status_code == 404


def test_a_chosen_threshold_method_is_applied_or_the_form_says_why_not(client, demo):
    """Issue 16, finding 6: with y_pred in the file, the method chosen on
    the report was silently ignored; the report now applies it and says
    which labels it shows."""
    prediction_set = stored_set(demo)
    as_user(client, demo.designer)
    path = f"/studies/{demo.pk}/predictions/{prediction_set.pk}/candidates/J48/"
    data = read_predictions(PREDICTIONS, positive="tumour")
    assert "Labels shown: the file's y_pred." in text_of(client.get(path))
    chosen = client.get(path, {"threshold_method": "max_kappa"})
    derived = report.CandidateReport(data, "J48", report.Options(threshold_method="max_kappa", use_threshold=True))
    file_labels = report.CandidateReport(data, "J48")
    assert derived.accuracy() != file_labels.accuracy()  # the test tells them apart
    assert chosen.context["threshold"] == derived.threshold
    values = {row["computation"].key: row["value"] for row in chosen.context["values"]}
    assert values["accuracy"] == derived.accuracy()
    assert (
        f"Labels shown: derived from the scores: tumour where it is at least {derived.threshold:.4g}, the threshold "
        "of the method 'Highest kappa' (the file's y_pred is set aside)."
    ) in text_of(chosen)
    # "None" keeps the file's labels
    assert client.get(path, {"threshold_method": ""}).context["threshold"] is None
    # a file without scores: the form says why no threshold applies, and the labels stay the file's
    labels_only = services.prediction_set_import(
        study=demo,
        stream=io.BytesIO(b"candidate,y_true,y_pred\nJ48,tumour,tumour\nJ48,normal,tumour\n"),
        name="labels.csv",
        uploaded_by=demo.designer,
        positive="tumour",
    )
    refused = client.get(
        f"/studies/{demo.pk}/predictions/{labels_only.pk}/candidates/J48/", {"threshold_method": "max_kappa"}
    )
    assert refused.context["options_form"].errors == {
        "threshold_method": [
            "No threshold can be applied: J48 has no score column (nor class probabilities) to derive labels from."
        ]
    }
    assert "Labels shown: the file's y_pred." in text_of(refused)


def test_a_report_of_a_file_whose_instances_are_all_positive(client, demo):
    """Issue 16, finding 12 on the page: a score column only, every instance
    positive; every value or its reason, the negative label unnamed."""
    prediction_set = services.prediction_set_import(
        study=demo,
        stream=io.BytesIO(b"candidate,y_true,score\nJ48,tumour,0.9\nJ48,tumour,0.2\n"),
        name="positives.csv",
        uploaded_by=demo.designer,
        positive="tumour",
    )
    as_user(client, demo.designer)
    response = client.get(f"/studies/{demo.pk}/predictions/{prediction_set.pk}/candidates/J48/")
    values = {row["computation"].key: row for row in response.context["values"]}
    assert values["recall"]["value"] == 0.5 and values["log_loss"]["value"] == pytest.approx(
        -(np.log(0.9) + np.log(0.2)) / 2
    )
    assert values["specificity"]["reason"] == (
        "specificity is undefined: y_true has no negative instance (every label is 'tumour', the positive label)"
    )
    assert response.context["confusion"]["labels"] == ["tumour", "(not tumour)"]
    assert "Labels shown: derived from the scores: tumour where it is at least 0.5, the threshold of the method " in (
        text_of(response)
    )


def test_a_sets_candidates_compared_with_a3r_and_where_arr_is_undefined(client, demo):
    prediction_set = stored_set(demo)
    as_user(client, demo.designer)
    path = f"/studies/{demo.pk}/predictions/{prediction_set.pk}/compare/"
    response = client.get(path)
    document = report.evaluation_document(read_predictions(PREDICTIONS, positive="tumour"))
    rows = {row["name"]: row["values"] for row in response.context["rows"]}
    assert {name: values["a3r"] for name, values in rows.items()} == {
        name: values["a3r"] for name, values in document["candidates"].items()
    }
    assert '<title id="chart-a3r-title">A3R against the time ratio</title>' in response.content.decode()
    assert response.context["a3r"]["pole"] == pytest.approx(1e-10)
    # with AccD 1 the pole is a time ratio of 0.1: J48 is 50 times faster than IBk, past it
    steep = client.get(path, {"acc_d": "1"})
    text = text_of(steep)
    assert "ARR is undefined at and below its pole, a time ratio of 0.1 for AccD 1" in text
    assert "J48 against IBk" in text
    assert all(row["values"]["arr"] is None for row in steep.context["rows"])


def test_report_options_are_checked_by_the_service_the_api_uses(client, demo):
    prediction_set = stored_set(demo)
    as_user(client, demo.designer)
    path = f"/studies/{demo.pk}/predictions/{prediction_set.pk}/compare/"
    refused = client.get(path, {"root": "0", "acc_d": "1"})
    assert refused.context["options_form"].errors == {"root": ["must be greater than 0, got 0"]}
    assert refused.context["options"] == report.Options()  # the defaults, not half of what was asked
    assert "must be greater than 0, got 0" in text_of(refused)
    # A threshold of 0 is a value (it was taken for "not given"): every score is then positive.
    report_page = f"/studies/{demo.pk}/predictions/{prediction_set.pk}/candidates/J48/"
    zero = client.get(report_page, {"threshold_value": "0", "use_threshold": "on"})
    assert zero.context["threshold"] == 0.0
    confusion = zero.context["confusion"]
    normal = confusion["labels"].index("normal")
    assert [row["cells"][normal]["count"] for row in confusion["rows"]] == [0, 0]
    # A root this small took A3R beyond floating point: the page said "nan".
    tiny = client.get(path, {"root": "0.001"})
    assert "A3R is beyond floating point with root 0.001" in text_of(tiny)
    assert all(row["values"]["a3r"] is None for row in tiny.context["rows"])


def test_deleting_a_set_asks_first(client, demo):
    prediction_set = stored_set(demo)
    as_user(client, demo.designer)
    path = f"/studies/{demo.pk}/predictions/{prediction_set.pk}/delete/"
    asked = text_of(client.get(path))
    assert "Delete the prediction set case-study-1-predictions.csv?" in asked
    assert "Its 408 rows of predictions for 4 candidates are deleted." in asked
    assert PredictionSet.objects.exists()
    assert client.post(path).status_code == 302
    assert not PredictionSet.objects.exists()


# --- query counts -----------------------------------------------------------------------------

# Every page: the session and the user (2), the study and my roles in it (2),
# the header's unread notifications (1).
PAGE = 5
QUERIES = {
    # candidates (the upload form's choice); the sets with their uploaders, and
    # their candidates; metrics with their attributes and mappings, measured
    # values, candidate names, where computed values came from
    "predictions/": PAGE + 1 + 2 + 4,
    # Seen again (computed and kept the first time): the set with its
    # uploader, its candidates; the numbers kept
    "predictions/{set}/candidates/Candidate 1/": PAGE + 2 + 1,
    "predictions/{set}/compare/": PAGE + 2 + 1,
    # the metric with its mapping; the candidates (a field each for AIC/BIC)
    "predictions/metrics/{metric}/": PAGE + 2,
}


# The first time a report or a comparison is seen: the set with its
# uploader, its candidates; nothing kept, the set's contexts, the arrays; kept
# in a transaction (savepoint, the set locked, inserted, the oldest beyond
# those kept deleted, release).
FIRST_SEEN = {
    "predictions/{set}/candidates/Candidate 1/": PAGE + 2 + 3 + 5,
    "predictions/{set}/compare/": PAGE + 2 + 3 + 5,
}


def sized(cast, size):
    """A study of ``size`` candidates and metrics, ``size // 2`` sets of
    predictions and every metric computed."""
    from workspace import services as workspace_services

    study = workspace_services.study_create(designer=cast.alice, title=f"Sized {size}")
    attribute = workspace_services.attribute_add(study=study, name="Accuracy")
    metrics = [
        workspace_services.metric_add(study=study, attribute=attribute, name=f"Metric {i}", default_range=[0, 1])
        for i in range(size)
    ]
    names = [f"Candidate {i}" for i in range(size)]
    for name in names:
        workspace_services.candidate_add(study=study, name=name)
    rows = "".join(
        f"{name},yes,{'yes' if i % 3 else 'no'},0.{i % 9 + 1},{0.001 * (n + 1)}\n"
        for n, name in enumerate(names)
        for i in range(30)
    )
    for _ in range(size // 2):
        services.prediction_set_import(
            study=study,
            stream=io.BytesIO(("candidate,y_true,y_pred,score,time\n" + rows.replace(",yes,", ",no,", 10)).encode()),
            name="sized.csv",
            uploaded_by=cast.alice,
            positive="yes",
        )
    for metric in metrics:
        services.metric_computation_set(metric=metric, computation="accuracy")
    services.measurements_compute(study=study)
    return study


@pytest.mark.parametrize("path", list(QUERIES))
def test_query_counts_do_not_grow_with_sets_candidates_or_metrics(path, client, cast, django_assert_num_queries):
    as_user(client, cast.alice)
    for size in (2, 6):
        study = sized(cast, size)
        url = f"/studies/{study.pk}/" + path.format(
            set=study.prediction_sets.first().pk, metric=Metric.objects.filter(study=study).first().pk
        )
        if path in FIRST_SEEN:
            with django_assert_num_queries(FIRST_SEEN[path]):
                first = client.get(url)
            assert first.status_code == 200, url
        with django_assert_num_queries(QUERIES[path]):
            again = client.get(url)
            assert again.status_code == 200, url
        if path in FIRST_SEEN:
            assert text_of(again) == text_of(first)


@pytest.mark.parametrize(
    ("use_threshold", "words"),
    [(False, "labels from the file's y_pred where it has one"), (True, "labels derived from scores")],
)
def test_where_labels_come_from_reads_as_words(client, demo, use_threshold, words):
    """Issue 16, finding 10: not "labels from scores False"."""
    as_user(client, demo.designer)
    success = Metric.objects.get(study=demo, name="Success rate")
    services.metric_computation_set(metric=success, computation="accuracy", parameters={"use_threshold": use_threshold})
    for path in (f"/studies/{demo.pk}/predictions/", f"/studies/{demo.pk}/predictions/metrics/{success.pk}/"):
        page = text_of(client.get(path))
        assert words in page
        assert "labels from scores False" not in page and "labels from scores True" not in page


def test_a_run_launched_right_after_computing_uses_the_computed_values_without_reopening(client, demo):
    """Issue 16, finding 10: the README said to reopen and close the
    assessment before the next run; computing is allowed while closed and
    the next run reads the measurements as they are now."""
    from engine import selectors as engine_selectors
    from engine import services as engine_services
    from engine.models import Run

    stored_set(demo)
    services.metric_computation_set(metric=Metric.objects.get(study=demo, name="Success rate"), computation="accuracy")
    as_user(client, demo.designer)
    before = engine_services.run_launch(study=demo, launched_by=demo.designer)
    engine_services.run_execute(run_id=before.pk)
    assert client.post(f"/studies/{demo.pk}/predictions/compute/").status_code == 200
    demo.refresh_from_db()
    assert demo.phase == "closed"
    launched = client.post(f"/studies/{demo.pk}/runs/")
    assert launched.status_code == 302
    after = Run.objects.exclude(pk=before.pk).get(study=demo)
    engine_services.run_execute(run_id=after.pk)
    after.refresh_from_db()
    before.refresh_from_db()
    ranking = [c["name"] for c in engine_selectors.results_document(run=after)["candidates"]]
    previous = [c["name"] for c in engine_selectors.results_document(run=before)["candidates"]]
    assert previous[:2] == ["JRip", "J48"] and ranking[:2] == ["J48", "JRip"]
