"""``?page_size=`` on every paginated list (issue 18, item 4): from 1 to
``limits.PAGE_SIZE_MAX``, refused (400 naming it) otherwise, declared in the
schema with its maximum."""

import pytest

from tests.fixtures import error_fields
from workspace import limits, services

from .conftest import client_with_token, token_key

pytestmark = pytest.mark.django_db

API = "/api/v1"


def test_page_size_sets_how_many_items_a_page_holds_and_the_links_keep_it(cast):
    for number in range(5):
        services.study_create(designer=cast.alice, title=f"Study {number}")
    client = client_with_token(token_key(cast.alice))
    first = client.get(API + "/studies/?page_size=2").json()
    assert first["count"] == 5
    assert [s["title"] for s in first["results"]] == ["Study 4", "Study 3"]
    assert first["next"] == "http://testserver/api/v1/studies/?page=2&page_size=2"
    last = client.get(API + "/studies/?page_size=2&page=3").json()
    assert [s["title"] for s in last["results"]] == ["Study 0"] and last["next"] is None
    everything = client.get(f"{API}/studies/?page_size={limits.PAGE_SIZE_MAX}").json()
    assert len(everything["results"]) == 5 and everything["next"] is None


def test_the_maximum_page_size_is_served(cast):
    for number in range(limits.PAGE_SIZE_MAX + 1):
        services.study_create(designer=cast.alice, title=f"Study {number}")
    body = client_with_token(token_key(cast.alice)).get(f"{API}/studies/?page_size={limits.PAGE_SIZE_MAX}").json()
    assert len(body["results"]) == limits.PAGE_SIZE_MAX and body["count"] == limits.PAGE_SIZE_MAX + 1


@pytest.mark.parametrize(
    "query, message",
    [
        (
            f"page_size={limits.PAGE_SIZE_MAX + 1}",
            f"must be a whole number from 1 to {limits.PAGE_SIZE_MAX} (the maximum), got '{limits.PAGE_SIZE_MAX + 1}'",
        ),
        ("page_size=0", f"must be a whole number from 1 to {limits.PAGE_SIZE_MAX} (the maximum), got '0'"),
        ("page_size=", f"must be a whole number from 1 to {limits.PAGE_SIZE_MAX} (the maximum), got ''"),
        ("page_size=ten", f"must be a whole number from 1 to {limits.PAGE_SIZE_MAX} (the maximum), got 'ten'"),
        ("page_size=1&page_size=2", "must be given once, got 2 values"),
    ],
)
@pytest.mark.parametrize("path", ["/studies/", "/auth/tokens/", "/invitations/"])
def test_a_bad_page_size_is_a_400_naming_it(cast, path, query, message):
    response = client_with_token(token_key(cast.alice)).get(f"{API}{path}?{query}")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert error_fields(response) == {"page_size": [message]}


def test_every_paginated_list_declares_page_size_with_its_maximum(cast):
    schema = client_with_token(token_key(cast.alice)).get("/api/schema/?format=json").json()
    lists = 0
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            names = {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}
            if "page" not in names:
                continue
            lists += 1
            assert names["page_size"]["schema"] == {"type": "integer", "minimum": 1, "maximum": limits.PAGE_SIZE_MAX}, (
                path,
                method,
            )
            # page=0 is a 400: the schema says so (schemathesis sent it, issue 29, finding 11).
            assert names["page"]["schema"] == {"type": "integer", "minimum": 1}, (path, method)
    assert lists >= 10
