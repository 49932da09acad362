"""Prediction sets through the REST API: upload (a multipart form or a raw
``text/csv`` body), list, read, delete; refusals with nothing stored; the
size limit of the upload endpoint; pinned query counts.

Who may do what (anonymous 401, outsider 404, expert reads, designer
writes, in every phase) is in the access matrix of
``tests/api/test_access.py``, with every other endpoint.
"""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.dateparse import parse_datetime

from evaluation.models import CandidatePredictionArrays, PredictionSet
from evaluation.services import prediction_set_import
from tests.fixtures import api_error, error_fields
from workspace import limits, services
from workspace.models import Phase

from ..api.test_access import PREDICTIONS, prediction_set_out, without_time

pytestmark = pytest.mark.django_db

API = "/api/v1"
HOLDOUT = PREDICTIONS.decode()


def upload(name="holdout.csv", content=HOLDOUT):
    return SimpleUploadedFile(name, content.encode("utf-8"), content_type="text/csv")


@pytest.fixture
def study(make_study):
    return make_study(Phase.VOTING).study


def test_the_designer_uploads_a_form_and_gets_the_set(study, clients):
    response = clients["alice"].post(
        f"{API}/studies/{study.pk}/predictions/", {"file": upload(), "positive": "spam"}, format="multipart"
    )
    assert response.status_code == 201, response.content
    prediction_set = PredictionSet.objects.get()
    assert without_time(response.json()) == prediction_set_out(prediction_set)
    assert parse_datetime(response.json()["uploaded_at"]) == prediction_set.uploaded_at
    assert (prediction_set.study, prediction_set.uploaded_by.username) == (study, "alice")
    # Members read the same representation.
    for actor in ("bob", "alice"):
        listed = clients[actor].get(f"{API}/studies/{study.pk}/predictions/").json()
        assert listed["count"] == 1 and listed["results"] == [response.json()]
        detail = clients[actor].get(f"{API}/studies/{study.pk}/predictions/{prediction_set.pk}/")
        assert detail.json() == response.json()


def test_a_raw_csv_body_takes_its_options_as_query_parameters(study, clients):
    one_candidate = "y_true,y_pred\nspam,spam\nham,spam\n"
    response = clients["alice"].generic(
        "POST",
        f"{API}/studies/{study.pk}/predictions/?candidate=JRip&name=JRip%20holdout",
        one_candidate.encode(),
        content_type="text/csv",
    )
    assert response.status_code == 201, response.content
    prediction_set = PredictionSet.objects.get()
    assert without_time(response.json()) == prediction_set_out(
        prediction_set,
        name="JRip holdout",
        positive=None,
        folds=[],
        rows=2,
        bytes=len(one_candidate),
        candidates=[{"name": "JRip", "instances": 2, "columns": ["y_pred"]}],
    )


def test_a_refused_file_is_a_400_listing_its_lines_and_stores_nothing(study, clients, nothing_stored):
    bad = HOLDOUT.replace("J48,2,ham,spam,0.6", "C4.5,2,ham,spam,high")
    with nothing_stored():
        response = clients["alice"].post(
            f"{API}/studies/{study.pk}/predictions/",
            {"file": upload(content=bad), "positive": "spam"},
            format="multipart",
        )
    assert response.status_code == 400
    assert error_fields(response) == {
        "file": [
            "line 3, column candidate: no candidate named 'C4.5' in this study",
            "line 3, column score: not a number ('high')",
        ]
    }


@pytest.mark.parametrize(
    "fields, query, errors",
    [
        (
            {"positive": "spam", "colour": "red"},
            "",
            {"colour": ["is not a field of this request (the fields are file, candidate, positive, name)"]},
        ),
        ({"positive": "spam"}, "?positive=ham", {"positive": ["given both in the body and as a query parameter"]}),
        ({"candidate": "C4.5"}, "", {"candidate": ["no candidate named 'C4.5' in this study"]}),
        ({}, "", {"file": ["line 1, column score: a score is the positive label's: name the positive label"]}),
        (
            {"name": "   "},
            "",
            {"file": ["line 1, column score: a score is the positive label's: name the positive label"]},
        ),
    ],
    ids=["unknown-field", "given-twice", "unknown-candidate", "no-positive", "blank-name-is-the-file-name"],
)
def test_fields_are_checked_and_nothing_is_stored(fields, query, errors, study, clients, nothing_stored):
    with nothing_stored():
        response = clients["alice"].post(
            f"{API}/studies/{study.pk}/predictions/{query}", {"file": upload(), **fields}, format="multipart"
        )
    assert response.status_code == 400
    assert error_fields(response) == errors


def test_a_form_without_a_file_and_a_json_body_are_refused(study, clients, nothing_stored):
    url = f"{API}/studies/{study.pk}/predictions/"
    with nothing_stored():
        no_file = clients["alice"].post(url, {"positive": "spam"}, format="multipart")
        as_json = clients["alice"].post(url, {"file": HOLDOUT}, format="json")
    assert (no_file.status_code, error_fields(no_file)) == (400, {"file": ["No file was submitted."]})
    assert as_json.status_code == 415
    assert as_json.json()["code"] == "unsupported_media_type"
    assert as_json.json()["detail"].startswith('Unsupported media type "application/json": this operation reads ')


def test_the_upload_takes_up_to_its_own_size_limit_and_answers_413_past_it(study, clients, nothing_stored):
    url = f"{API}/studies/{study.pk}/predictions/"
    # Over the 1 MB of other bodies, under the upload's 20 MB: taken.
    rows = "".join(
        f"{name},{n % 2 + 1},{('spam', 'ham')[n % 2]},ham,0.25\n" for n in range(40_000) for name in ("J48", "JRip")
    )
    big = "candidate,fold,y_true,y_pred,score\n" + rows
    assert limits.BODY_MAX_BYTES < len(big) < limits.PREDICTIONS_MAX_BYTES
    taken = clients["alice"].generic("POST", url + "?positive=spam", big.encode(), content_type="text/csv")
    assert taken.status_code == 201, taken.content[:300]
    assert taken.json()["rows"] == 80_000
    with nothing_stored():
        over = clients["alice"].generic("POST", url, b"x" * (limits.PREDICTIONS_MAX_BYTES + 1), content_type="text/csv")
    assert over.status_code == 413
    assert over.json() == api_error(
        "request_too_large", "The request body is 20971521 bytes; the limit is 20971520 bytes (20 MB)."
    )


def test_sets_of_another_study_are_not_found_and_the_designer_deletes_her_own(make_study, clients, cast):
    mine, other = make_study(Phase.DRAFT).study, make_study(Phase.DRAFT, title="Other").study
    theirs = prediction_set_import(
        study=other, stream=io.BytesIO(HOLDOUT.encode()), name="x.csv", uploaded_by=cast.alice, positive="spam"
    )
    response = clients["alice"].get(f"{API}/studies/{mine.pk}/predictions/{theirs.pk}/")
    assert (response.status_code, response.json()) == (
        404,
        api_error("not_found", "No such prediction set in this study."),
    )
    assert clients["alice"].delete(f"{API}/studies/{mine.pk}/predictions/{theirs.pk}/").status_code == 404
    assert PredictionSet.objects.filter(pk=theirs.pk).exists()
    assert clients["alice"].delete(f"{API}/studies/{other.pk}/predictions/{theirs.pk}/").status_code == 204
    assert not PredictionSet.objects.exists() and not CandidatePredictionArrays.objects.exists()


# --- query counts -------------------------------------------------------------------------


def add_sets(study, user, count):
    """``count`` sets, each with every candidate of the study."""
    names = list(study.candidates.values_list("name", flat=True))
    content = "candidate,y_true,y_pred\n" + "".join(f"{name},spam,ham\n{name},ham,ham\n" for name in names)
    for index in range(count):
        prediction_set_import(study=study, stream=io.BytesIO(content.encode()), name=f"set {index}", uploaded_by=user)


def test_the_list_and_a_set_cost_the_same_queries_however_many_sets_and_candidates(
    study, clients, cast, django_assert_num_queries
):
    url = f"{API}/studies/{study.pk}/predictions/"
    add_sets(study, cast.alice, 1)
    first = PredictionSet.objects.get()
    for extra in range(2):
        # The same queries with one set of two candidates, then six sets of five.
        # 1. the token (with its user), 2. the study, 3. my memberships in it,
        # 4. the count of sets, 5. the page of sets with their uploaders,
        # 6. their candidates' rows (no arrays) with the candidates' names.
        with django_assert_num_queries(6):
            listed = clients["alice"].get(url)
        assert listed.json()["count"] == PredictionSet.objects.count()
        # 1. token, 2. study, 3. memberships, 4. the set and its uploader, 5. its candidates.
        with django_assert_num_queries(5):
            detail = clients["bob"].get(f"{url}{first.pk}/")
        assert [c["name"] for c in detail.json()["candidates"]] == list(
            study.candidates.order_by("id").values_list("name", flat=True)
        )
        if not extra:
            for name in ("NaiveBayes", "IBk", "SMO"):
                services.candidate_add(study=study, name=name)
            first.delete()
            add_sets(study, cast.alice, 6)
            first = PredictionSet.objects.order_by("id").first()
    assert len(listed.json()["results"]) == 6
    assert {len(result["candidates"]) for result in listed.json()["results"]} == {5}
