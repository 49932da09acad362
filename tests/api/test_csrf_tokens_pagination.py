"""Authentication details, paginated lists and their query counts.

- CSRF: writes authenticated by a session need the CSRF token (browsers);
  writes authenticated by a token do not (scripts).
- API tokens: created with a password (the key is shown once and only its
  digest is stored), listed by prefix, revoked; another user's token is
  "not found"; the token endpoint is throttled.
- Lists are paginated (``count``, ``next``, ``previous``, ``results``), and
  the number of queries a list or the study detail takes does not grow with
  the number of experts, candidates, attributes, metrics, runs or studies.
"""

import hashlib

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from tests.fixtures import api_error, error_fields
from workspace import services
from workspace.models import ApiToken, Membership, Phase, Study

from .conftest import PASSWORD, client_with_token, finish_run, token_key

pytestmark = pytest.mark.django_db

API = "/api/v1"


# --- CSRF -------------------------------------------------------------------------------


def test_session_writes_need_the_csrf_token(cast):
    client = APIClient(enforce_csrf_checks=True)
    # The login page sets the CSRF cookie, as it does for a browser.
    assert client.get("/accounts/login/").status_code == 200
    csrf = client.cookies["csrftoken"].value
    assert client.login(username="alice", password=PASSWORD)

    # Reads need no token.
    assert client.get(API + "/studies/").status_code == 200

    before = Study.objects.count()
    refused = client.post(API + "/studies/", {"title": "Forged"}, format="json")
    assert refused.status_code == 403
    assert refused.json() == api_error("permission_denied", "CSRF Failed: CSRF token missing.")
    wrong = client.post(API + "/studies/", {"title": "Forged"}, format="json", HTTP_X_CSRFTOKEN="x" * 32)
    assert wrong.status_code == 403 and wrong.json()["detail"].startswith("CSRF Failed")
    refused_delete = client.delete(f"{API}/studies/{services.study_create(designer=cast.alice, title='Kept').pk}/")
    assert refused_delete.status_code == 403 and "CSRF" in refused_delete.json()["detail"]
    assert Study.objects.count() == before + 1  # only the one created directly above
    assert not Study.objects.filter(title="Forged").exists()

    accepted = client.post(API + "/studies/", {"title": "Real"}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert accepted.status_code == 201, accepted.content
    assert accepted.json()["designer"] == "alice"
    assert Study.objects.filter(title="Real", designer=cast.alice).count() == 1


def test_token_writes_need_no_csrf_token(cast):
    client = client_with_token(token_key(cast.alice), enforce_csrf_checks=True)
    response = client.post(API + "/studies/", {"title": "Scripted"}, format="json")
    assert response.status_code == 201, response.content
    assert Study.objects.get(pk=response.json()["id"]).designer == cast.alice


# --- tokens -------------------------------------------------------------------------------


def create_token(username, password=PASSWORD, name="laptop"):
    return APIClient().post(
        API + "/auth/token/", {"username": username, "password": password, "name": name}, format="json"
    )


def test_a_token_is_shown_once_listed_by_prefix_and_revoked(cast):
    created = create_token("alice")
    assert created.status_code == 201
    body = created.json()
    key = body["token"]
    assert set(body) == {"token", "id", "name", "prefix", "created_at", "last_used_at", "expires_at"}
    assert len(key) == 40 and body["prefix"] == key[:8] and body["name"] == "laptop" and body["last_used_at"] is None
    # Only a digest is stored: the key is nowhere in the database.
    token = ApiToken.objects.get(pk=body["id"])
    assert token.user == cast.alice and token.digest == hashlib.sha256(key.encode()).hexdigest()
    assert key not in {token.digest, token.prefix, token.name}

    client = client_with_token(key)
    second = create_token("alice", name="desktop").json()
    listed = client.get(API + "/auth/tokens/")
    assert listed.status_code == 200
    page = listed.json()
    assert page["count"] == 2 and page["next"] is None and page["previous"] is None
    assert [t["name"] for t in page["results"]] == ["desktop", "laptop"]  # newest first
    for entry in page["results"]:
        assert set(entry) == {"id", "name", "prefix", "created_at", "last_used_at", "expires_at"}
    assert key not in listed.content.decode() and second["token"] not in listed.content.decode()
    assert page["results"][1]["prefix"] == key[:8]
    assert page["results"][1]["last_used_at"] is not None  # this request used it

    revoked = client.delete(f"{API}/auth/tokens/{body['id']}/")
    assert revoked.status_code == 204 and revoked.content == b""
    assert not ApiToken.objects.filter(pk=body["id"]).exists()
    after = client.get(API + "/auth/tokens/")
    assert after.status_code == 401
    assert (
        after.json() == api_error("authentication_failed", "Invalid or revoked token.")
        and after["WWW-Authenticate"] == "Token"
    )
    # The other token of the same user still works.
    other = client_with_token(second["token"]).get(API + "/auth/tokens/")
    assert other.status_code == 200 and [t["name"] for t in other.json()["results"]] == ["desktop"]


def test_another_users_token_is_not_found_and_stays(cast):
    alices = ApiToken.objects.get(pk=create_token("alice").json()["id"])
    bob = client_with_token(create_token("bob").json()["token"])
    response = bob.delete(f"{API}/auth/tokens/{alices.pk}/")
    assert response.status_code == 404
    assert ApiToken.objects.filter(pk=alices.pk).exists()
    assert [t["id"] for t in bob.get(API + "/auth/tokens/").json()["results"]] == [
        ApiToken.objects.get(user=cast.bob).pk
    ]


def test_bad_credentials_and_inactive_users_get_no_token(cast):
    wrong = create_token("alice", password="not-the-password")
    assert wrong.status_code == 400
    assert error_fields(wrong) == {"non_field_errors": ["Unable to log in with those credentials."]}
    assert create_token("nobody").status_code == 400
    cast.bob.is_active = False
    cast.bob.save()
    assert create_token("bob").status_code == 400
    assert not ApiToken.objects.exists()
    # A token of a user deactivated afterwards stops working.
    key = token_key(cast.carol)
    cast.carol.is_active = False
    cast.carol.save()
    assert client_with_token(key).get(API + "/studies/").status_code == 401


def test_the_token_endpoint_is_throttled(cast, monkeypatch):
    # DRF reads the rates into this class attribute at import; pin the
    # documented 10 a minute whatever LOGIN_THROTTLE_RATE says.
    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", {**SimpleRateThrottle.THROTTLE_RATES, "login": "10/minute"}
    )
    for attempt in range(10):
        assert create_token("alice", password=f"guess-{attempt}").status_code == 400
    throttled = create_token("alice")  # the right password, but the 11th request
    assert throttled.status_code == 429
    assert throttled.json()["detail"].startswith("Request was throttled.")
    assert 0 < int(throttled["Retry-After"]) <= 60
    assert not ApiToken.objects.exists()
    # Only the token endpoint is throttled.
    client = client_with_token(token_key(cast.alice))
    assert all(client.get(API + "/studies/").status_code == 200 for _ in range(12))


def test_a_forged_forwarded_for_header_does_not_escape_the_throttle(cast, monkeypatch):
    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", {**SimpleRateThrottle.THROTTLE_RATES, "login": "10/minute"}
    )
    client = APIClient()
    statuses = [
        client.post(
            API + "/auth/token/",
            {"username": "alice", "password": f"guess-{attempt}"},
            format="json",
            HTTP_X_FORWARDED_FOR=f"203.0.113.{attempt}",
        ).status_code
        for attempt in range(12)
    ]
    assert statuses == [400] * 10 + [429] * 2


# --- pagination -------------------------------------------------------------------------


def test_lists_are_paginated_by_50(cast):
    for number in range(51):
        services.study_create(designer=cast.alice, title=f"Study {number:02d}")
    client = client_with_token(token_key(cast.alice))
    first = client.get(API + "/studies/").json()
    assert first["count"] == 51 and len(first["results"]) == 50
    assert first["next"] == "http://testserver/api/v1/studies/?page=2" and first["previous"] is None
    assert first["results"][0]["title"] == "Study 50"  # newest first
    second = client.get(first["next"]).json()
    assert second["count"] == 51 and [s["title"] for s in second["results"]] == ["Study 00"]
    assert second["next"] is None and second["previous"] == "http://testserver/api/v1/studies/"
    ids = [s["id"] for s in first["results"] + second["results"]]
    assert sorted(ids) == sorted(Study.objects.values_list("pk", flat=True))
    beyond = client.get(API + "/studies/?page=3")
    assert beyond.status_code == 404 and beyond.json() == api_error("not_found", "Invalid page.")
    # Another user sees none of them, on any page.
    assert client_with_token(token_key(cast.bob)).get(API + "/studies/").json() == {
        "count": 0,
        "next": None,
        "previous": None,
        "results": [],
    }


@pytest.mark.parametrize(
    "query, message",
    [
        ("page=", "must not be empty: a page number from 1, or leave it out"),
        ("page=1&page=2", "must be given once, got 2 values"),
        ("page=2&page=", "must be given once, got 2 values"),
        ("page=0", "must be a whole number from 1, got '0'"),
        ("page=-1", "must be a whole number from 1, got '-1'"),
        ("page=1.0", "must be a whole number from 1, got '1.0'"),
        ("page=%D9%A3", "must be a whole number from 1, got '\u0663'"),  # an Arabic-Indic 3
        ("page=two", "must be a whole number from 1, got 'two'"),
    ],
)
@pytest.mark.parametrize("path", ["/studies/", "/auth/tokens/"])
def test_a_malformed_page_is_a_400_naming_it(cast, path, query, message):
    """Issue 17, finding 8: an empty page was page 1 and a repeated one its
    last value, both 200."""
    services.study_create(designer=cast.alice, title="Mine")
    response = client_with_token(token_key(cast.alice)).get(f"{API}{path}?{query}")
    assert response.status_code == 400
    assert error_fields(response) == {"page": [message]}


def test_well_formed_pages_still_answer(cast):
    services.study_create(designer=cast.alice, title="Mine")
    client = client_with_token(token_key(cast.alice))
    for query in ("", "?page=1", "?page=last", "?other=x"):
        assert [s["title"] for s in client.get(f"{API}/studies/{query}").json()["results"]] == ["Mine"]
    assert client.get(f"{API}/studies/?page=99999999999999999999").status_code == 404


# --- query counts -----------------------------------------------------------------------


def sized_study(size, designer):
    """A closed study of ``designer`` where everything comes ``size`` times:
    experts, attributes (each with one metric), candidates, runs; and
    ``size`` more studies of the designer."""
    User = get_user_model()
    study = services.study_create(designer=designer, title=f"Sized {size}")
    experts = [
        services.expert_add(study=study, user=User.objects.create(username=f"expert{size}x{i}")) for i in range(size)
    ]
    attributes = [services.attribute_add(study=study, name=f"Attribute {i}") for i in range(size)]
    metrics = [
        services.metric_add(study=study, attribute=attribute, name=f"Metric {i}", default_range=[0.2, 0.8])
        for i, attribute in enumerate(attributes)
    ]
    candidates = [services.candidate_add(study=study, name=f"Candidate {i}") for i in range(size)]
    services.measurements_set(
        study=study,
        measurements=[{"candidate": c.name, "metric": m.name, "value": 0.5} for c in candidates for m in metrics],
    )
    services.study_open_voting(study=study)
    services.study_close_voting(study=study)
    for expert in experts:
        services.priorities_set(expert=expert, method="direct", weights={a.name: 1 for a in attributes})
        services.peer_weights_set(expert=expert, weights={e.user.username: 1 / size for e in experts})
    services.study_close_assessment(study=study)
    from engine import services as engine_services

    for _ in range(size):
        run = finish_run(engine_services.run_launch(study=study, launched_by=designer).pk)
        assert run.status == "succeeded", run.error
    for i in range(size):
        services.study_create(designer=designer, title=f"Other {size}.{i}")
    return study


# Every study-scoped request starts with the same three queries:
#   1. the token, with its user (authentication; last_used_at was just set,
#      so it is not written again);
#   2. the study, among those the user is a member of (404 otherwise);
#   3. the user's own memberships of it (prefetch: their roles).
SCOPED = 3
QUERIES = {
    # token; COUNT of my studies; the page of studies with their designers;
    # prefetch of my memberships in them (my_roles)
    "/studies/": 4,
    # the token; the study, among mine, with its designer (read once); prefetch
    # of my memberships (my_roles); of its experts with their users; of the
    # selected attributes; of the selected metrics (selection)
    "/studies/{study}/": 6,
    # SCOPED; COUNT of memberships; the page of memberships with their users
    "/studies/{study}/members/": SCOPED + 2,
    # SCOPED; COUNT of attributes; the page of attributes (with the study: selected)
    "/studies/{study}/attributes/": SCOPED + 2,
    # SCOPED; COUNT of metrics; the page of metrics with attribute and study
    "/studies/{study}/metrics/": SCOPED + 2,
    # SCOPED; COUNT of candidates; the page of candidates
    "/studies/{study}/candidates/": SCOPED + 2,
    # SCOPED; COUNT of measurements; the page of (candidate, metric, value) rows
    "/studies/{study}/measurements/": SCOPED + 2,
    # SCOPED; COUNT of runs; the page of runs with who launched them
    "/studies/{study}/runs/": SCOPED + 2,
}


@pytest.mark.parametrize("path", list(QUERIES))
def test_query_counts_do_not_grow_with_the_study(path, cast, django_assert_num_queries):
    client = client_with_token(token_key(cast.alice))
    seen = {}
    for size in (2, 12):
        study = sized_study(size, cast.alice)
        url = API + path.format(study=study.pk)
        with django_assert_num_queries(QUERIES[path]):
            response = client.get(url)
        assert response.status_code == 200
        body = response.json()
        seen[size] = body
    small, large = seen[2], seen[12]
    # The bigger study really is bigger in the answer.
    if path == "/studies/":
        assert (small["count"], large["count"]) == (3, 16)  # sized + its others, cumulated over both sizes
    elif path == "/studies/{study}/":
        assert (len(small["experts"]), len(large["experts"])) == (2, 12)
        assert (len(small["selection"]["metrics"]), len(large["selection"]["metrics"])) == (2, 12)
    else:
        expected = {
            "/studies/{study}/members/": (3, 13),
            "/studies/{study}/measurements/": (4, 144),
        }.get(path, (2, 12))
        assert (small["count"], large["count"]) == expected
        assert len(large["results"]) == min(expected[1], 50)


def test_the_memberships_of_a_sized_study_are_as_built(cast):
    study = sized_study(2, cast.alice)
    assert Membership.objects.filter(study=study, role="expert").count() == 2
    assert study.runs.filter(status="succeeded").count() == 2
    study.refresh_from_db()
    assert study.phase == Phase.CLOSED
