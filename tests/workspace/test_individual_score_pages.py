"""A run's individual scores in pages (issue 29, finding 8): the whole
document with them was 64 MB at the documented limits, answered in 13-28 s
to any member, without a throttle. ``GET .../results/?individual=true``
now serves pages of at most ``RESULTS_INDIVIDUAL_PAGE_MAX_BYTES`` holding
whole candidates (as many as fit), linked by ``Link: <...>; rel="next"``,
and each user may ask for ``RESULTS_INDIVIDUAL_THROTTLE_RATE`` pages."""

import json
import re

import pytest
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.throttling import SimpleRateThrottle

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine.models import Run
from tests.api.conftest import client_with_token, finish_run, token_key
from tests.fixtures import error_fields
from workspace import services

pytestmark = pytest.mark.django_db

API = "/api/v1"
EXPERTS, METRICS, CANDIDATES = 3, 3, 12


@pytest.fixture
def run(cast):
    """A succeeded run of 3 experts x 3 metrics x 12 candidates whose scores differ."""
    study = services.study_create(designer=cast.alice, title="Paged scores")
    users = [cast.bob, cast.carol, get_user_model().objects.create(username="dave")]
    experts = [services.expert_add(study=study, user=user) for user in users]
    metrics = []
    for j in range(METRICS):
        attribute = services.attribute_add(study=study, name=f"Attribute {j}")
        metrics.append(services.metric_add(study=study, attribute=attribute, name=f"Metric {j}"))
    names = [f"Candidate {c}" for c in range(CANDIDATES)]
    for name in names:
        services.candidate_add(study=study, name=name)
    services.measurements_set(
        study=study,
        measurements=[
            {"candidate": name, "metric": m.name, "value": ((c + 1) * (j + 3) % 17) / 17}
            for c, name in enumerate(names)
            for j, m in enumerate(metrics)
        ],
    )
    services.study_open_voting(study=study)
    services.study_close_voting(study=study)
    for i, expert in enumerate(experts):
        services.priorities_set(expert=expert, method="direct", weights={f"Attribute {j}": 1 + i + j for j in range(3)})
        services.ranges_set(expert=expert, ranges={m.name: [0.1 * i, 0.6 + 0.1 * i] for m in metrics})
        services.peer_weights_set(expert=expert, weights={e.user.username: 1 / EXPERTS for e in experts})
    services.study_close_assessment(study=study)
    run = finish_run(engine_services.run_launch(study=study, launched_by=cast.alice).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def _pages(client, run_id):
    """Every page from the first, following the Link headers: (bytes, document) each."""
    url, pages = f"{API}/runs/{run_id}/results/?individual=true", []
    while url is not None:
        response = client.get(url)
        assert response.status_code == 200, response.content
        pages.append((response.content, json.loads(response.content)))
        link = response.headers.get("Link")
        url = None
        if link is not None:
            match = re.fullmatch(r'<http://testserver(/\S+)>; rel="next"', link)
            assert match, link
            url = match.group(1)
        assert len(pages) <= CANDIDATES, "the pages never end"
    return pages


def test_individual_scores_come_in_pages_under_the_limit(run, cast, settings):
    whole_bytes = engine_selectors.results_json(run=Run.objects.get(pk=run.pk), individual=True)
    whole = json.loads(whole_bytes)
    candidate_bytes = [len(json.dumps(c, separators=(",", ":")).encode()) for c in whole["candidates"]]
    limit = len(whole_bytes) // 3
    settings.RESULTS_INDIVIDUAL_PAGE_MAX_BYTES = limit
    pages = _pages(client_with_token(token_key(cast.bob)), run.pk)
    assert len(pages) >= 3
    # Every page is under the limit, and holds as many whole candidates as fit:
    # the next one would have taken it over.
    shown = 0
    for content, document in pages:
        assert len(content) <= limit
        shown += len(document["candidates"])
        if shown < CANDIDATES:
            assert len(content) + 1 + candidate_bytes[shown] > limit
        # Each page is the document, every key but the candidates unchanged.
        assert {k: v for k, v in document.items() if k != "candidates"} == {
            k: v for k, v in whole.items() if k != "candidates"
        }
        assert list(document) == list(whole)
    # Together, the pages are the whole document's candidates with their scores, in rank order.
    assert [c for _, document in pages for c in document["candidates"]] == whole["candidates"]
    assert all(len(c["individual_scores"]) == EXPERTS for c in whole["candidates"])
    # With one page for all, its bytes are the whole document's (run_validation --json --individual).
    settings.RESULTS_INDIVIDUAL_PAGE_MAX_BYTES = len(whole_bytes)
    assert [content for content, _ in _pages(client_with_token(token_key(cast.bob)), run.pk)] == [whole_bytes]


@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fraction=st.floats(min_value=0, max_value=1.2))
def test_pages_partition_the_candidates_at_any_limit(run, fraction):
    """At any limit, the pages hold each candidate once, in rank order; a
    page over the limit holds a single candidate (one never splits)."""
    stored = Run.objects.get(pk=run.pk)
    whole = json.loads(engine_selectors.results_json(run=stored, individual=True))
    limit = int(fraction * len(json.dumps(whole, separators=(",", ":")).encode()))
    start, seen = 0, []
    while start is not None:
        page, following = engine_selectors.results_individual_page(run=stored, start=start, max_bytes=limit)
        candidates = json.loads(page)["candidates"]
        assert candidates and (len(page) <= limit or len(candidates) == 1)
        assert following is None or following == start + len(candidates)
        seen += candidates
        start = following
    assert seen == whole["candidates"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("cursor=1", "only with individual=true (the document alone is one page)"),
        ("individual=true&cursor=12", "must be from 0 to 11 (a position among the run's candidates), got 12"),
        ("individual=true&cursor=-1", "must be a whole number from 0, got '-1'"),
        ("individual=true&cursor=x", "must be a whole number from 0, got 'x'"),
    ],
)
def test_a_bad_cursor_is_refused_by_name(run, cast, query, message):
    response = client_with_token(token_key(cast.bob)).get(f"{API}/runs/{run.pk}/results/?{query}")
    assert response.status_code == 400
    assert error_fields(response) == {"cursor": [message]}


def test_pages_of_individual_scores_are_throttled_per_user(run, cast, monkeypatch):
    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", {**SimpleRateThrottle.THROTTLE_RATES, "individual_scores": "2/minute"}
    )
    bob, carol = client_with_token(token_key(cast.bob)), client_with_token(token_key(cast.carol))
    url = f"{API}/runs/{run.pk}/results/?individual=true"
    answers = [bob.get(url) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0]["RateLimit-Limit"] == "2" and answers[1]["RateLimit-Remaining"] == "0"
    refused = answers[2].json()
    assert refused["code"] == "throttled"
    assert refused["detail"].startswith(
        "Too many requests for individual scores: each user may ask for at most 2 pages per minute "
        "(the site's RESULTS_INDIVIDUAL_THROTTLE_RATE)."
    )
    assert 0 < int(answers[2]["Retry-After"]) <= 60
    # The document alone is not throttled, and another user has their own count.
    assert bob.get(f"{API}/runs/{run.pk}/results/").status_code == 200
    assert "RateLimit-Limit" not in bob.get(f"{API}/runs/{run.pk}/results/")
    assert carol.get(url).status_code == 200
