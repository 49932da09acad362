"""Compressed answers and repeated reads (issue 33, item 4;
workspace/downloads.py, docs/architecture.md "Compression and repeated
reads"): gzip for pages, JSON and CSV; ``ETag`` / ``Last-Modified`` on the
results, the bundle and an analysis's CSV, so a repeated read answers 304;
big downloads streamed. And as an attacker: a version tag is guessable
(``"run-5-results"``), so it must never say anything to someone who may not
read the run (404 first, never 304), and a 304 never carries the body."""

import gzip
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.http import http_date

from engine import analyses as engine_analyses
from engine import selectors as engine_selectors
from engine.models import Analysis
from tests.pages.test_studyhome import as_user
from workspace import downloads, services
from workspace.bundles import study_export_json
from workspace.models import Phase

from .conftest import launch_and_finish

pytestmark = pytest.mark.django_db
API = "/api/v1"
GZIP = {"HTTP_ACCEPT_ENCODING": "gzip, deflate, br"}


@pytest.fixture
def run(make_study, cast):
    return launch_and_finish(make_study(Phase.CLOSED), cast.alice)


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


# --- gzip ---------------------------------------------------------------------------------------


def test_results_bundle_and_csv_are_gzipped_for_a_client_that_accepts_it(api, cast, run):
    client = api(cast.alice)
    for url in (
        f"{API}/runs/{run.pk}/results/",
        f"{API}/runs/{run.pk}/results.csv",
        f"{API}/studies/{run.study_id}/export/",
    ):
        plain = client.get(url)
        packed = client.get(url, **GZIP)
        assert plain.status_code == packed.status_code == 200, url
        assert "Content-Encoding" not in plain, url
        assert packed["Content-Encoding"] == "gzip", url
        assert "Accept-Encoding" in packed["Vary"], url
        # the same bytes once unpacked, and fewer of them
        assert gzip.decompress(body(packed)) == body(plain), url
        assert len(body(packed)) < len(body(plain)), url
        # compressed, the strong tag becomes a weak one (RFC 9110 8.8.1)
        assert packed["ETag"] == f"W/{plain['ETag']}", url


def test_pages_are_gzipped_too_and_answers_under_200_bytes_are_not(client, api, cast, run):
    page = as_user(client, cast.alice).get(f"/runs/{run.pk}/", **GZIP)
    assert page.status_code == 200 and page["Content-Encoding"] == "gzip"
    assert b"</html>" in gzip.decompress(page.content)
    small = api(cast.alice).get(f"{API}/studies/{run.study_id}/version/", **GZIP)
    assert small.status_code == 200 and len(small.content) < 200
    assert "Content-Encoding" not in small and small.json()["study"] == run.study_id


def test_each_compressed_answer_differs_in_length_against_breach(api, cast, run):
    """GZipMiddleware adds up to 100 random bytes to each compressed answer:
    the same document twice rarely has the same compressed length, so its
    length does not tell an attacker whether a guess matched a secret."""
    client = api(cast.alice)
    lengths = {len(body(client.get(f"{API}/runs/{run.pk}/results/", **GZIP))) for _ in range(8)}
    assert len(lengths) > 1


# --- versions and 304 ----------------------------------------------------------------------------


def test_the_results_answer_304_to_their_tag_without_reading_the_document(api, cast, run):
    client = api(cast.alice)
    first = client.get(f"{API}/runs/{run.pk}/results/")
    tag = first["ETag"]
    assert tag == engine_selectors.results_version(run) == f'"run-{run.pk}-results"'
    assert first["Last-Modified"] == http_date(int(run.finished_at.timestamp()))
    assert first["Cache-Control"] == "private, no-cache"
    assert json.loads(body(first))["run"] == run.pk
    with CaptureQueriesContext(connection) as queries:
        again = client.get(f"{API}/runs/{run.pk}/results/", HTTP_IF_NONE_MATCH=tag)
    assert again.status_code == 304 and again.content == b""
    assert again["ETag"] == tag
    # the stored document (results -> document) is never read for a 304
    assert not any("document" in query["sql"] for query in queries.captured_queries)
    # the compressed answer's weak tag matches too, and so does a date since
    assert client.get(f"{API}/runs/{run.pk}/results/", HTTP_IF_NONE_MATCH=f"W/{tag}").status_code == 304
    since = client.get(f"{API}/runs/{run.pk}/results/", HTTP_IF_MODIFIED_SINCE=first["Last-Modified"])
    assert since.status_code == 304
    # another tag, or a date before the run finished: the document again
    other = client.get(f"{API}/runs/{run.pk}/results/", HTTP_IF_NONE_MATCH='"run-0-results"')
    assert other.status_code == 200 and body(other) == body(first)
    before = http_date(int(run.finished_at.timestamp()) - 3600)
    assert client.get(f"{API}/runs/{run.pk}/results/", HTTP_IF_MODIFIED_SINCE=before).status_code == 200


def test_the_pages_download_of_the_results_answers_304_too(client, cast, run):
    as_user(client, cast.alice)
    first = client.get(f"/runs/{run.pk}/results.json")
    assert first.status_code == 200
    assert first["Content-Disposition"] == f'attachment; filename="approve-run-{run.pk}-results.json"'
    assert body(first) == engine_selectors.results_json_read(run=run)
    assert client.get(f"/runs/{run.pk}/results.json", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    csv = client.get(f"/runs/{run.pk}/results.csv")
    assert client.get(f"/runs/{run.pk}/results.csv", HTTP_IF_NONE_MATCH=csv["ETag"]).status_code == 304


def test_a_guessed_tag_tells_an_outsider_nothing(api, client, cast, run):
    """Charlie is no member of the study: with the run's (guessable) tag he
    gets the same 404 as without it, from the API and from the page."""
    tag = f'"run-{run.pk}-results"'
    missing = api(cast.charlie).get(f"{API}/runs/{10**6}/results/")
    assert missing.status_code == 404
    for headers in ({}, {"HTTP_IF_NONE_MATCH": tag}, {"HTTP_IF_MODIFIED_SINCE": http_date(2**31)}):
        answer = api(cast.charlie).get(f"{API}/runs/{run.pk}/results/", **headers)
        # the answer for a run that does not exist, the tag that of its error (no Last-Modified)
        assert answer.status_code == 404, headers
        assert answer.json() == missing.json() and answer["ETag"] == missing["ETag"] != tag
        assert "Last-Modified" not in answer
        page = as_user(client, cast.charlie).get(f"/runs/{run.pk}/results.json", **headers)
        assert page.status_code == 404, headers
        assert page.get("ETag") != tag and "Last-Modified" not in page


def test_the_bundle_answers_304_until_the_study_changes(api, cast, run):
    client = api(cast.alice)
    url = f"{API}/studies/{run.study_id}/export/"
    first = client.get(url)
    assert first.status_code == 200
    study = run.study
    assert body(first) == study_export_json(study=study)
    assert first["ETag"] == downloads.content_tag(body(first))
    assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    services.study_update(study=study, title="Renamed for the test")
    changed = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert changed.status_code == 200
    assert changed["ETag"] != first["ETag"]
    assert json.loads(body(changed))["title"] == "Renamed for the test"
    # the page's download: the same bytes and the same tag
    page = as_user(api(None), cast.alice).get(f"/studies/{study.pk}/bundle.json")
    assert body(page) == body(changed) and page["ETag"] == changed["ETag"]


def test_an_analysis_csv_is_versioned_by_its_bytes_and_finished_time(api, cast, run):
    client = api(cast.alice)
    launched = client.post(
        f"{API}/runs/{run.pk}/analyses/", {"kind": "monte_carlo", "samples": 40, "judgments": True}, format="json"
    )
    assert launched.status_code == 202
    analysis = Analysis.objects.get()
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        engine_analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    first = client.get(f"{API}/analyses/{analysis.pk}/result.csv")
    assert first.status_code == 200
    assert first["Last-Modified"] == http_date(int(analysis.finished_at.timestamp()))
    assert first["ETag"] == downloads.content_tag(body(first))
    assert client.get(f"{API}/analyses/{analysis.pk}/result.csv", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    # its detail is versioned by the digest of the page (ConditionalGetMiddleware)
    detail = client.get(f"{API}/analyses/{analysis.pk}/")
    assert client.get(f"{API}/analyses/{analysis.pk}/", HTTP_IF_NONE_MATCH=detail["ETag"]).status_code == 304


# --- streamed downloads --------------------------------------------------------------------------


def test_a_big_download_is_streamed_in_pieces_with_its_length(api, cast, run, monkeypatch):
    client = api(cast.alice)
    whole = client.get(f"{API}/runs/{run.pk}/results/")
    assert not whole.streaming
    monkeypatch.setattr(downloads, "STREAM_FROM_BYTES", 100)
    monkeypatch.setattr(downloads, "PIECE_BYTES", 64)
    streamed = client.get(f"{API}/runs/{run.pk}/results/")
    assert streamed.streaming
    pieces = list(streamed.streaming_content)
    assert b"".join(pieces) == whole.content
    assert len(pieces) == -(-len(whole.content) // 64) and all(len(piece) == 64 for piece in pieces[:-1])
    assert streamed["Content-Length"] == str(len(whole.content))
    assert streamed["ETag"] == whole["ETag"]
    packed = client.get(f"{API}/runs/{run.pk}/results/", **GZIP)
    assert packed.streaming and packed["Content-Encoding"] == "gzip" and "Content-Length" not in packed
    assert gzip.decompress(b"".join(packed.streaming_content)) == whole.content
