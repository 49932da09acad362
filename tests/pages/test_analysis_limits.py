"""Robustness launches at their limits (issue 29, finding 10), through the
page and the API: the page disables a button with a sentence naming the
limit met, and a launch past a limit is refused (the API's 409 for a cap,
429 for a throttle or the budget, with Retry-After), nothing written. The
rules themselves: tests/engine/test_analysis_bounds.py."""

import pytest
from django.urls import reverse
from django.utils.html import escape

from engine import analyses
from engine.models import Analysis
from tests.api.conftest import client_with_token, token_key

from .test_robustness import login, run  # noqa: F401  (fixture)

CAP = (
    "1 analysis of this run is already queued or running, the most allowed at once (ANALYSES_ACTIVE_PER_RUN_MAX): "
    "wait for one to finish, or cancel one."
)


def _launch(run, **kwargs):  # noqa: F811  (the fixture's name)
    return analyses.analysis_launch(run=run, launched_by=run.study.designer, **kwargs)


def test_the_page_says_why_a_launch_button_is_disabled(client, run, settings):  # noqa: F811
    settings.ANALYSES_ACTIVE_PER_RUN_MAX = 1
    settings.ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR = 500
    login(client, run)
    page = reverse("run_robustness", args=[run.pk])
    html = client.get(page).content.decode()
    assert "The button is disabled" not in html and " disabled aria-describedby" not in html
    monte_carlo = _launch(run, kind=Analysis.Kind.MONTE_CARLO, samples=500, spec={"peer_weights": True})
    html = client.get(page).content.decode()
    assert (
        '<p class="small" id="launch-refused-leave_one_out"><strong>The button is disabled:</strong> '
        f"{escape(CAP)}</p>" in html
    )
    assert 'disabled aria-describedby="launch-refused-leave_one_out"' in html
    # Launched anyway (a stale page): refused with the same sentence, nothing written.
    response = client.post(page, {"kind": "leave_one_out"}, follow=True)
    assert escape(CAP) in response.content.decode()
    assert Analysis.objects.count() == 1
    # Once cancelled, the cap is free, but the study's samples of the hour are spent.
    analyses.analysis_cancel(analysis=monte_carlo)
    html = client.get(page).content.decode()
    assert 'disabled aria-describedby="launch-refused-leave_one_out"' not in html
    assert 'disabled aria-describedby="launch-refused-monte_carlo"' in html
    assert (
        escape(
            "The study's Monte Carlo budget: at most 500 samples an hour for all its runs' analyses "
            "(ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR); 500 were launched in the last hour: none is left."
        )
        in html
    )
    # An expert sees no launch button, so no sentence either.
    login(client, run, who="expert")
    assert "The button is disabled" not in client.get(page).content.decode()


@pytest.mark.django_db
def test_the_api_answers_409_for_a_cap_and_429_for_the_budget(run, settings):  # noqa: F811
    settings.ANALYSES_ACTIVE_PER_RUN_MAX = 1
    settings.ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR = 800
    api = client_with_token(token_key(run.study.designer))
    url = f"/api/v1/runs/{run.pk}/analyses/"
    first = api.post(url, {"kind": "monte_carlo", "samples": 500, "peer_weights": True}, format="json")
    assert first.status_code == 202, first.content
    capped = api.post(url, {"kind": "leave_one_out"}, format="json")
    assert (capped.status_code, capped.json()) == (409, {"code": "analysis_limit", "detail": CAP, "fields": {}})
    api.post(f"/api/v1/analyses/{first.json()['id']}/cancel/")
    over = api.post(url, {"kind": "monte_carlo", "samples": 301, "peer_weights": True}, format="json")
    assert over.status_code == 429
    assert over.json() == {
        "code": "throttled",
        "detail": "The study's Monte Carlo budget: at most 800 samples an hour for all its runs' analyses "
        "(ANALYSIS_SAMPLES_PER_STUDY_PER_HOUR); 500 were launched in the last hour, and 301 more would exceed it.",
        "fields": {},
    }
    assert 3590 <= int(over["Retry-After"]) <= 3600
    assert Analysis.objects.count() == 1
    assert (
        api.post(url, {"kind": "monte_carlo", "samples": 300, "peer_weights": True}, format="json").status_code == 202
    )
