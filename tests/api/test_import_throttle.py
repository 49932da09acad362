"""Imports are throttled per user (issue 17, finding 2): the API's
``POST studies/import/`` and the page's import share one counter; past the
rate both answer 429 with ``Retry-After`` and the rate named, and import
nothing. Other users, and the rest of the API, are not affected."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.throttling import SimpleRateThrottle

from workspace.models import Study

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def three_an_hour(monkeypatch):
    # DRF reads the rates into this class attribute at import.
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {**SimpleRateThrottle.THROTTLE_RATES, "import": "3/hour"})


def bundle(title):
    return {"format": "approve-study/1", "title": title}


def page_import(client, title):
    upload = SimpleUploadedFile("bundle.json", json.dumps(bundle(title)).encode(), content_type="application/json")
    return client.post("/studies/new/", {"form": "import", "bundle": upload}, secure=True)


def test_the_default_rate_is_named_in_the_settings(settings):
    assert settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["import"] == "20/hour"


def test_api_imports_past_the_rate_are_429_with_retry_after(api, cast, three_an_hour):
    client = api(cast.charlie)
    statuses = [client.post(API + "/studies/import/", bundle(f"S{i}"), format="json").status_code for i in range(3)]
    assert statuses == [201, 201, 201]
    refused = client.post(API + "/studies/import/", bundle("S3"), format="json")
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith(
        "Too many imports: each user may import at most 3 studies per hour (the site's IMPORT_THROTTLE_RATE). "
        "Expected available in "
    )
    assert 3000 < int(refused["Retry-After"]) <= 3600
    assert list(Study.objects.filter(designer=cast.charlie).values_list("title", flat=True).order_by("title")) == [
        "S0",
        "S1",
        "S2",
    ]
    # Another user may still import; the rest of the API answers.
    assert api(cast.bob).post(API + "/studies/import/", bundle("B"), format="json").status_code == 201
    assert client.get(API + "/studies/").status_code == 200
    assert client.post(API + "/studies/", {"title": "made by hand"}, format="json").status_code == 201


def test_a_refused_bundle_counts_too(api, cast, three_an_hour):
    client = api(cast.charlie)
    for _ in range(3):
        assert client.post(API + "/studies/import/", {"format": "nope"}, format="json").status_code == 400
    assert client.post(API + "/studies/import/", bundle("S"), format="json").status_code == 429
    assert not Study.objects.exists()


def test_the_page_and_the_api_share_the_counter(api, cast, three_an_hour):
    browser = Client()
    browser.force_login(cast.charlie)
    assert page_import(browser, "P0").status_code == 302
    client = api(cast.charlie)
    assert [client.post(API + "/studies/import/", bundle(f"A{i}"), format="json").status_code for i in range(2)] == [
        201,
        201,
    ]
    refused = page_import(browser, "P1")
    assert refused.status_code == 429
    assert 3000 < int(refused["Retry-After"]) <= 3600
    text = refused.content.decode()
    assert 'id="import-refused"' in text
    assert "Too many imports: each user may import at most 3 studies per hour" in text
    assert "Try again in 60 minutes." in text
    assert client.post(API + "/studies/import/", bundle("A2"), format="json").status_code == 429
    assert not Study.objects.filter(title__in=["P1", "A2"]).exists()
    # Creating a study by hand on the same page is not throttled.
    made = browser.post(
        "/studies/new/",
        {"title": "By hand", "description": "", "attribute_threshold": 1, "metric_threshold": 0},
        secure=True,
    )
    assert made.status_code == 302 and Study.objects.filter(title="By hand").exists()
