"""Rate-limit headers on the throttled operations (issue 18, item 4): the
token request and the study import answer with ``RateLimit-Limit``,
``RateLimit-Remaining`` and ``RateLimit-Reset`` (docs/api.md, "Rate limits"),
and a 429 adds ``Retry-After``."""

import pytest
from rest_framework.throttling import SimpleRateThrottle

from workspace.api.throttling import LIMIT_HEADER, REMAINING_HEADER, RESET_HEADER

from .conftest import client_with_token, token_key

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def rates(monkeypatch):
    # DRF reads the rates into this class attribute at import.
    monkeypatch.setattr(
        SimpleRateThrottle,
        "THROTTLE_RATES",
        {**SimpleRateThrottle.THROTTLE_RATES, "login": "4/minute", "import": "3/hour"},
    )


def limits_of(response):
    return int(response[LIMIT_HEADER]), int(response[REMAINING_HEADER]), int(response[RESET_HEADER])


def test_the_token_request_counts_down_to_a_429(cast, rates):
    anonymous = client_with_token(None)
    answers = [
        anonymous.post(API + "/auth/token/", {"username": "alice", "password": f"guess-{i}"}, format="json")
        for i in range(4)
    ]
    assert [a.status_code for a in answers] == [400] * 4
    assert [limits_of(a)[:2] for a in answers] == [(4, 3), (4, 2), (4, 1), (4, 0)]
    assert all(0 < limits_of(a)[2] <= 60 for a in answers)
    refused = anonymous.post(API + "/auth/token/", {"username": "alice", "password": "x"}, format="json")
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert limits_of(refused)[:2] == (4, 0)
    assert 0 < limits_of(refused)[2] <= 60 and 0 < int(refused["Retry-After"]) <= 60


def test_imports_count_down_per_user(api, cast, rates):
    charlie = api(cast.charlie)
    answers = [
        charlie.post(API + "/studies/import/", {"format": "approve-study/1", "title": f"S{i}"}, format="json")
        for i in range(3)
    ]
    assert [a.status_code for a in answers] == [201] * 3
    assert [limits_of(a)[:2] for a in answers] == [(3, 2), (3, 1), (3, 0)]
    assert all(3000 < limits_of(a)[2] <= 3600 for a in answers)
    refused = charlie.post(API + "/studies/import/", {"format": "approve-study/1", "title": "S3"}, format="json")
    assert refused.status_code == 429 and limits_of(refused)[:2] == (3, 0)
    # another user's count is their own
    bob = api(cast.bob).post(API + "/studies/import/", {"format": "approve-study/1", "title": "B"}, format="json")
    assert bob.status_code == 201 and limits_of(bob)[:2] == (3, 2)


def test_operations_without_a_throttle_send_no_rate_limit_headers(cast):
    response = client_with_token(token_key(cast.alice)).get(API + "/studies/")
    assert response.status_code == 200
    assert not any(response.has_header(name) for name in (LIMIT_HEADER, REMAINING_HEADER, RESET_HEADER))


def test_the_schema_declares_them_on_the_throttled_operations_only(cast):
    schema = client_with_token(token_key(cast.alice)).get("/api/schema/?format=json").json()
    declared = {
        (path, method, code)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        for code, response in operation["responses"].items()
        if LIMIT_HEADER in response.get("headers", {})
    }
    assert {(path, method) for path, method, _ in declared} == {
        ("/api/v1/auth/token/", "post"),
        ("/api/v1/studies/import/", "post"),
        # with individual=true (tests/workspace/test_individual_score_pages.py)
        ("/api/v1/runs/{run_id}/results/", "get"),
    }
    assert {code for path, _, code in declared if path == "/api/v1/auth/token/"} == {"201", "400", "415", "429"}
    throttled = schema["paths"]["/api/v1/auth/token/"]["post"]["responses"]["429"]["headers"]
    assert {LIMIT_HEADER, REMAINING_HEADER, RESET_HEADER, "Retry-After"} <= set(throttled)
