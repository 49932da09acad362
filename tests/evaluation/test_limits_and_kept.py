"""Issue 17, finding 1: a prediction set's labels are limited
(``PREDICTIONS_MAX_CLASSES``), refused with their count and the limit
through the page, the API and both commands, nothing stored, the reader
stopping at the chunk that passes the limit; a set's evaluation and each
candidate's report are computed once and kept with the set (deleted with
it), so asking again computes nothing; every per-label structure is
bounded by the limit."""

import io
from unittest import mock

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from evaluation import report, services
from evaluation.models import EvaluationCache, PredictionSet
from evaluation.predictions import PredictionFileError, PredictionFileTooManyClasses, precise, read_predictions
from tests.fixtures import error_fields
from tests.pages.test_studyhome import as_user, text_of
from workspace import limits
from workspace import services as workspace_services
from workspace.models import Phase

from .test_pages import PREDICTIONS, demo, stored_set, upload  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db

API = "/api/v1"
LIMIT = limits.PREDICTIONS_MAX_CLASSES
TAIL = (
    "are allowed in a prediction set (labels of y_true and y_pred, proba:<label> columns and the positive label, "
    "together)"
)


def many_labels(count: int, *, candidate: str = "J48", rows: int | None = None) -> bytes:
    """A file of ``count`` distinct labels, one a row (then repeated up to ``rows``)."""
    rows = count if rows is None else rows
    return ("candidate,y_true,y_pred\n" + "".join(f"{candidate},l{i % count},l0\n" for i in range(rows))).encode()


def refusal(count: int) -> str:
    return f"the file has {count:,} distinct labels; at most {LIMIT:,} {TAIL}"


# --- the limit, at the reader --------------------------------------------------------------------


def test_the_limit_is_named_and_a_file_at_it_is_read():
    assert LIMIT == 100
    data = read_predictions(io.BytesIO(many_labels(LIMIT)), max_classes=LIMIT)
    assert len(data.labels) == LIMIT


def test_a_file_past_the_limit_is_refused_with_its_count_and_the_limit():
    with pytest.raises(PredictionFileTooManyClasses) as refused:
        read_predictions(io.BytesIO(many_labels(20_000)), max_classes=LIMIT)
    assert refused.value.errors == [refusal(20_000)]
    # y_pred's labels count too (a label that is only predicted is still a class).
    text = "candidate,y_true,y_pred\n" + "".join(f"J48,a,p{i}\n" for i in range(LIMIT))
    with pytest.raises(PredictionFileTooManyClasses) as refused:
        read_predictions(io.BytesIO(text.encode()), max_classes=LIMIT)
    assert refused.value.errors == [refusal(LIMIT + 1)]


def test_declared_labels_count_and_too_many_proba_columns_are_refused_at_the_header():
    header = ",".join(f"proba:l{i}" for i in range(LIMIT + 1))
    row = ",".join(["1"] + ["0"] * LIMIT)
    text = f"candidate,y_true,{header}\nJ48,l0,{row}\n"
    reader = mock.patch.object(precise._Reader, "chunk", side_effect=AssertionError("no row is read"))
    with reader, pytest.raises(PredictionFileTooManyClasses) as refused:
        read_predictions(io.BytesIO(text.encode()), max_classes=LIMIT)
    assert refused.value.errors == [refusal(LIMIT + 1)]
    # The positive label is a class of its own.
    text = "candidate,y_true,y_pred\n" + "".join(f"J48,l{i},l0\n" for i in range(LIMIT))
    with pytest.raises(PredictionFileTooManyClasses) as refused:
        read_predictions(io.BytesIO(text.encode()), max_classes=LIMIT, positive="yes")
    assert refused.value.errors == [refusal(LIMIT + 1)]


class Pipe:
    """A stream that can only be read, as standard input."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._data.read(size)


def test_the_reader_stops_at_the_chunk_that_passes_the_limit(monkeypatch):
    """No per-label structure grows past the limit by more than one chunk's
    rows: the rest of the file is not parsed, and the message says what was
    counted."""
    monkeypatch.setattr(precise, "CHUNK_ROWS", 50)
    sizes = []
    chunk = precise._Reader.chunk

    def counting(reader, rows, lines):
        chunk(reader, rows, lines)
        sizes.append(len(reader.true_codes))

    monkeypatch.setattr(precise._Reader, "chunk", counting)
    text = many_labels(100_000)  # a new label on every row
    with pytest.raises(PredictionFileTooManyClasses) as refused:
        read_predictions(io.BytesIO(text), max_classes=120)
    assert sizes == [50, 100, 150]
    assert refused.value.errors == [
        f"the file has more than 120 distinct labels (150 in its first 150 rows); at most 120 {TAIL}"
    ]
    # Without the limit (evaluate_predictions before, the reader alone), every row is read
    # (by the precise reader: a stream that cannot seek is not read by pyarrow).
    sizes.clear()
    read_predictions(Pipe(many_labels(1_000)))
    assert len(sizes) == 20 and sizes[-1] == 1_000


def test_a_file_that_ends_with_the_chunk_past_the_limit_has_its_exact_count(monkeypatch):
    monkeypatch.setattr(precise, "CHUNK_ROWS", 50)
    text = many_labels(30, rows=140).decode() + "J48,x1,l0\nJ48,x2,l0\n\n\n"
    with pytest.raises(PredictionFileTooManyClasses) as refused:
        read_predictions(io.BytesIO(text.encode()), max_classes=31)
    assert refused.value.errors == [f"the file has 32 distinct labels; at most 31 {TAIL}"]


# --- the limit, everywhere a file comes in ----------------------------------------------------------


def test_the_page_refuses_a_file_of_too_many_labels_and_stores_nothing(client, demo):  # noqa: F811
    as_user(client, demo.designer)
    response = upload(client, demo, many_labels(20_000))
    assert response.status_code == 400
    text = text_of(response)
    assert "The file was refused; nothing was stored." in text
    assert refusal(20_000) in text
    assert "At most 20 MB, 1000000 rows and 100 distinct labels." in text
    assert not PredictionSet.objects.exists()


def test_the_api_refuses_a_file_of_too_many_labels_and_stores_nothing(make_study, clients, nothing_stored):
    study = make_study(Phase.VOTING).study
    with nothing_stored():
        response = clients["alice"].generic(
            "POST", f"{API}/studies/{study.pk}/predictions/", many_labels(LIMIT + 1), content_type="text/csv"
        )
    assert response.status_code == 400
    assert error_fields(response) == {"file": [refusal(LIMIT + 1)]}


def test_import_predictions_refuses_too_many_labels_and_stores_nothing(make_study, tmp_path, nothing_stored):
    study = make_study(Phase.DRAFT).study
    path = tmp_path / "many.csv"
    path.write_bytes(many_labels(5_000))
    with nothing_stored(), pytest.raises(CommandError) as refused:
        call_command("import_predictions", str(study.pk), str(path))
    assert str(refused.value) == f"the file was refused, nothing was stored:\n  {refusal(5_000)}"


def test_evaluate_predictions_refuses_too_many_labels(tmp_path):
    path = tmp_path / "many.csv"
    path.write_bytes(many_labels(1_000))
    with pytest.raises(CommandError) as refused:
        call_command("evaluate_predictions", str(path))
    assert str(refused.value) == f"{path} was refused:\n  {refusal(1_000)}"


# --- computed once, kept with the set ----------------------------------------------------------------


def counted(function):
    """A mock that calls ``function`` and counts the calls."""
    return mock.Mock(side_effect=function)


def test_the_document_is_kept_equals_a_fresh_one_and_goes_with_the_set(client, demo, api):  # noqa: F811
    prediction_set = stored_set(demo)
    url = f"{API}/studies/{demo.pk}/predictions/{prediction_set.pk}/evaluation/"
    designer = api(demo.designer)
    fresh = report.document_json(report.evaluation_document(read_predictions(PREDICTIONS, positive="tumour")))
    computing = counted(report.evaluation_document)
    with mock.patch.object(report, "evaluation_document", computing):
        first = designer.get(url)
        again = designer.get(url)
        other = designer.get(url + "?use_threshold=true&threshold_method=max_kappa")
        other_again = designer.get(url + "?use_threshold=true&threshold_method=max_kappa")
    assert first.status_code == again.status_code == other.status_code == 200
    assert first.content.decode() == again.content.decode() == fresh
    assert other.content == other_again.content != first.content
    assert computing.call_count == 2  # once per choice of options
    kept = EvaluationCache.objects.filter(prediction_set=prediction_set)
    assert sorted(kept.values_list("kind", flat=True)) == ["document", "document"]
    assert kept.order_by("id").first().value == fresh
    # The compare page reads the same kept document.
    as_user(client, demo.designer)
    with mock.patch.object(report, "evaluation_document", computing):
        assert client.get(f"/studies/{demo.pk}/predictions/{prediction_set.pk}/compare/").status_code == 200
    assert computing.call_count == 2
    # Deleted with the set; a new upload of the same file is computed afresh.
    services.prediction_set_delete(prediction_set=prediction_set)
    assert not EvaluationCache.objects.exists()
    replaced = stored_set(demo)
    with mock.patch.object(report, "evaluation_document", computing):
        response = designer.get(f"{API}/studies/{demo.pk}/predictions/{replaced.pk}/evaluation/")
    assert response.content.decode() == fresh and computing.call_count == 3


def test_a_renamed_candidate_is_computed_afresh(demo, api):  # noqa: F811
    prediction_set = stored_set(demo)
    url = f"{API}/studies/{demo.pk}/predictions/{prediction_set.pk}/evaluation/"
    before = api(demo.designer).get(url).json()
    j48 = demo.candidates.get(name="J48")
    workspace_services.candidate_update(candidate=j48, name="C4.5")
    after = api(demo.designer).get(url).json()
    assert "J48" in before["candidates"] and "J48" not in after["candidates"]
    assert after["candidates"]["C4.5"] == before["candidates"]["J48"]


def test_a_report_page_is_computed_once(client, demo):  # noqa: F811
    prediction_set = stored_set(demo)
    as_user(client, demo.designer)
    url = f"/studies/{demo.pk}/predictions/{prediction_set.pk}/candidates/J48/"
    computing = counted(report.candidate_summary)
    with mock.patch.object(report, "candidate_summary", computing):
        first, again = client.get(url), client.get(url)
    assert first.status_code == again.status_code == 200
    assert text_of(first) == text_of(again) and computing.call_count == 1
    assert "Confusion matrix" in text_of(first) and "ROC curve of J48" in text_of(first)


def test_only_the_newest_evaluations_of_a_set_are_kept(demo):  # noqa: F811
    prediction_set = PredictionSet.objects.prefetch_related("candidate_arrays__candidate").get(pk=stored_set(demo).pk)
    kept = services.EVALUATIONS_KEPT_PER_SET
    for step in range(kept + 5):
        options = report.Options(threshold_method="fixed", threshold_value=step / 100, use_threshold=True)
        services.prediction_set_evaluation(prediction_set=prediction_set, options=options)
    assert EvaluationCache.objects.filter(prediction_set=prediction_set).count() == kept


# --- per-label structures bounded by the limit -------------------------------------------------------


def test_the_confusion_matrix_of_a_set_at_the_limit_is_labels_by_labels(client, demo):  # noqa: F811
    rows = "".join(f"J48,l{i % LIMIT},l{(i * 7) % LIMIT}\n" for i in range(3 * LIMIT))
    prediction_set = services.prediction_set_import(
        study=demo, stream=io.BytesIO(("candidate,y_true,y_pred\n" + rows).encode()), name="wide", uploaded_by=None
    )
    summary = services.candidate_report_summary(
        prediction_set=PredictionSet.objects.get(pk=prediction_set.pk), name="J48"
    )
    assert np.array(summary["confusion"]).shape == (LIMIT, LIMIT)
    assert len(summary["label_names"]) == LIMIT
    # Specificity, one pass over the confusion matrix, as each class against the rest.
    y_true = np.arange(3 * LIMIT) % LIMIT
    y_pred = (np.arange(3 * LIMIT) * 7) % LIMIT
    expected = np.mean([((y_true != c) & (y_pred != c)).sum() / (y_true != c).sum() for c in range(LIMIT)])
    assert summary["values"]["specificity"]["value"] == pytest.approx(expected, abs=1e-12)
    as_user(client, demo.designer)
    page = client.get(f"/studies/{demo.pk}/predictions/{prediction_set.pk}/candidates/J48/")
    assert page.status_code == 200
    assert page.content.decode().count('class="number confusion__right"') == LIMIT


def test_a_set_stored_before_the_limit_is_not_evaluated(client, demo, api):  # noqa: F811
    """A set of more labels than allowed (stored before the limit) is
    refused with the reason, and nothing is computed or kept."""
    prediction_set = stored_set(demo)
    labels = [*prediction_set.labels, *(f"extra {i}" for i in range(LIMIT))]
    PredictionSet.objects.filter(pk=prediction_set.pk).update(labels=labels)
    reason = (
        f"this set has {len(labels):,} distinct labels; at most {LIMIT} can be evaluated: upload its predictions "
        "again with fewer labels"
    )
    computing = counted(report.evaluation_document)
    with mock.patch.object(report, "evaluation_document", computing):
        response = api(demo.designer).get(f"{API}/studies/{demo.pk}/predictions/{prediction_set.pk}/evaluation/")
        as_user(client, demo.designer)
        for page in ("compare/", "candidates/J48/"):
            refused = client.get(f"/studies/{demo.pk}/predictions/{prediction_set.pk}/{page}")
            assert refused.status_code == 409
            assert reason[0].upper() + reason[1:] + "." in text_of(refused)
    assert response.status_code == 400 and error_fields(response) == {"labels": [reason]}
    assert computing.call_count == 0 and not EvaluationCache.objects.exists()
    # Nor are measurements computed from it: each candidate is listed with the reason.
    from workspace.models import Metric

    services.metric_computation_set(metric=Metric.objects.get(study=demo, name="Success rate"), computation="accuracy")
    outcome = services.measurements_compute(study=demo)
    assert outcome.computed == []
    assert {(n.candidate, n.reason) for n in outcome.not_computed} == {
        (name, reason) for name in ("J48", "JRip", "RandomForest", "IBk")
    }


def test_prediction_file_error_is_the_base_of_the_refusal():
    assert issubclass(PredictionFileTooManyClasses, PredictionFileError)


def test_the_predictions_page_lists_a_few_labels_of_a_wide_set(client, demo):  # noqa: F811
    long = "x" * 500
    rows = "".join(f"J48,{long}{i},{long}0\n" for i in range(LIMIT))
    services.prediction_set_import(
        study=demo, stream=io.BytesIO(("candidate,y_true,y_pred\n" + rows).encode()), name="wide", uploaded_by=None
    )
    as_user(client, demo.designer)
    page = client.get(f"/studies/{demo.pk}/predictions/")
    text = text_of(page)
    assert f"{'x' * 59}…, {'x' * 59}…" in text and "and 90 more" in text
    assert long not in page.content.decode()


def test_a_set_past_the_web_limits_is_evaluated_at_import_and_not_in_a_request(
    client,
    demo,  # noqa: F811
    api,
    tmp_path,
    monkeypatch,  # noqa: F811
):
    """``import_predictions`` lifts the size limits: it keeps the set's
    evaluation with the default options, and a request computes nothing
    for such a set (other options are refused, naming the rows)."""
    monkeypatch.setattr(limits, "PREDICTIONS_MAX_ROWS", 100)  # the demo's 408 rows are past it
    out = io.StringIO()
    call_command("import_predictions", str(demo.pk), str(PREDICTIONS), "--positive", "tumour", stdout=out)
    prediction_set = PredictionSet.objects.get()
    assert out.getvalue() == f"{prediction_set.pk}\n"
    kept = EvaluationCache.objects.filter(prediction_set=prediction_set)
    assert sorted(kept.values_list("kind", flat=True)) == ["document"] + ["report"] * 4
    url = f"{API}/studies/{demo.pk}/predictions/{prediction_set.pk}/evaluation/"
    fresh = report.document_json(report.evaluation_document(read_predictions(PREDICTIONS, positive="tumour")))
    computing = counted(report.evaluation_document)
    summarising = counted(report.candidate_summary)
    as_user(client, demo.designer)
    page = f"/studies/{demo.pk}/predictions/{prediction_set.pk}/candidates/J48/"
    with (
        mock.patch.object(report, "evaluation_document", computing),
        mock.patch.object(report, "candidate_summary", summarising),
    ):
        assert api(demo.designer).get(url).content.decode() == fresh
        assert client.get(page).status_code == 200
        other = api(demo.designer).get(url + "?threshold_value=0.7&use_threshold=true")
        other_page = client.get(page + "?threshold_method=max_kappa")
    assert computing.call_count == summarising.call_count == 0
    reason = (
        "this set has 408 rows, more than the 100 evaluated while you wait: only its evaluation with the default "
        "options, kept when it was imported, can be shown"
    )
    assert other.status_code == 400 and error_fields(other) == {"rows": [reason]}
    assert other_page.status_code == 409 and "This set has 408 rows" in text_of(other_page)


def test_computing_a3r_for_every_candidate_compares_the_set_once(demo):  # noqa: F811
    """A3R and ARR compare every candidate of a set: computing a study
    metric from them works the comparison out once per set, not once per
    candidate (at the limits, 10 candidates of a million rows: 1.6 s down
    to 0.2 s), with the values ``metric_value`` gives each."""
    from evaluation.models import MetricComputation
    from workspace.models import Metric

    prediction_set = stored_set(demo)
    metric = Metric.objects.get(study=demo, name="Success rate")
    services.metric_computation_set(metric=metric, computation="a3r")
    comparing = counted(report.pairwise_scores)
    with mock.patch.object(report, "pairwise_scores", comparing):
        outcome = services.measurements_compute(study=demo)
    assert comparing.call_count == 1
    data = read_predictions(PREDICTIONS, positive="tumour")
    assert {c.candidate: c.value for c in outcome.computed} == {
        name: report.metric_value(data, name, "a3r") for name in data.candidates
    }
    assert {c.prediction_set for c in outcome.computed} == {prediction_set.name}
    assert MetricComputation.objects.get(metric=metric).computation == "a3r"


def test_the_success_rates_per_fold_are_each_folds_accuracy():
    """A3R's and ARR's success rate per fold, counted in one pass per
    candidate, is the accuracy of the fold's instances."""
    from evaluation import metrics

    data = read_predictions(PREDICTIONS, positive="tumour")
    reports = [report.CandidateReport(data, name) for name in data.candidates]
    success, _ = report._success_and_time(reports)
    folds = np.unique(reports[0].predictions.fold)
    expected = [
        [metrics.accuracy_score(r.y_true[r.predictions.fold == f], r.y_pred[r.predictions.fold == f]) for r in reports]
        for f in folds
    ]
    assert success.shape == (len(folds), len(reports)) and len(folds) > 1
    assert success.tolist() == expected
