"""The robustness API (``/api/v1/runs/{run}/robustness/``, ``…/analyses/``,
``/api/v1/analyses/{id}/``): values, refusals that name the field and write
nothing, and the page's numbers. Access is in test_access.py's matrix."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import analyses as engine_analyses
from engine import sensitivity
from engine.models import Analysis
from tests.fixtures import error_fields
from workspace.models import Phase

from .conftest import launch_and_finish

pytestmark = pytest.mark.django_db
API = "/api/v1"


@pytest.fixture
def run(make_study, cast):
    return launch_and_finish(make_study(Phase.CLOSED), cast.alice)


def test_stability_equals_the_engine_on_the_stored_scores(api, cast, run):
    body = api(cast.bob).get(f"{API}/runs/{run.pk}/robustness/").json()
    stored = sensitivity.stored_ranking(run.results, run.snapshot["metrics"])
    reports = sensitivity.weight_reports(stored)
    assert [w["name"] for w in body["weights"]] == [r.name for r in reports]
    for weight, report in zip(body["weights"], reports, strict=True):
        assert weight["share"] == pytest.approx(report.share)
        assert weight["ranking"] == pytest.approx(list(report.ranking))
        assert weight["winner"] == pytest.approx(list(report.winner))
    assert body["sentence"] == sensitivity.fragility_sentence(reports, stored.candidates[0])


def test_what_if_refuses_an_unknown_attribute_and_a_negative_weight(api, cast, run):
    client = api(cast.bob)
    url = f"{API}/runs/{run.pk}/robustness/what-if/"
    unknown = client.post(url, {"attribute_weights": {"Speed of light": 1}}, format="json")
    assert unknown.status_code == 400
    assert error_fields(unknown) == {"attribute_weights.Speed of light": ["not a selected attribute of this run"]}
    negative = client.post(url, {"attribute_weights": {"Accuracy": -1}}, format="json")
    assert negative.status_code == 400
    assert list(error_fields(negative)) == ["attribute_weights.Accuracy"]
    zero = client.post(url, {"attribute_weights": dict.fromkeys(run.results["selected_attributes"], 0)}, format="json")
    assert zero.status_code == 400
    assert error_fields(zero) == {"attribute_weights": ["at least one attribute weight must be above 0"]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "monte_carlo", "samples": 0}, "samples"),
        ({"kind": "monte_carlo", "samples": 100_001}, "samples"),
        ({"kind": "monte_carlo", "seed": -1}, "seed"),
        ({"kind": "leave_one_out", "samples": 10}, "samples"),
        ({"kind": "sideways"}, "kind"),
        ({}, "kind"),
    ],
)
def test_launch_refusals_name_the_field_and_write_nothing(api, cast, run, body, field):
    response = api(cast.alice).post(f"{API}/runs/{run.pk}/analyses/", body, format="json")
    assert response.status_code == 400
    assert list(error_fields(response)) == [field]
    assert not Analysis.objects.exists()


def test_launch_poll_and_cancel(api, cast, run, settings):
    settings.ENGINE_ANALYSIS_CHUNK_EXPERTS = 1
    client = api(cast.alice)
    launched = client.post(f"{API}/runs/{run.pk}/analyses/", {"kind": "leave_one_out"}, format="json")
    assert launched.status_code == 202
    body = launched.json()
    assert (body["units"], body["units_done"], body["summary"]) == (2, 0, None)
    engine_analyses.chunk_execute(chunk_id=Analysis.objects.get().chunks.order_by("index").first().pk)
    polled = client.get(launched["Location"]).json()
    assert (polled["status"], polled["units_done"]) == ("running", 1)
    cancelled = client.post(f"{API}/analyses/{body['id']}/cancel/")
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
    again = client.post(f"{API}/analyses/{body['id']}/cancel/")
    assert again.status_code == 409
    assert client.get(f"{API}/analyses/{body['id']}/result.csv").status_code == 409


def test_analyses_of_an_unfinished_run_are_refused(api, cast, make_study):
    from engine import services as engine_services

    built = make_study(Phase.CLOSED)
    queued = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    client = api(cast.alice)
    for response in (
        client.get(f"{API}/runs/{queued.pk}/robustness/"),
        client.post(f"{API}/runs/{queued.pk}/analyses/", {"kind": "leave_one_out"}, format="json"),
    ):
        assert response.status_code == 409, response.content
    assert not Analysis.objects.exists()


def test_what_if_takes_huge_weights_relative_to_each_other(api, cast, run):
    # 1e308 + 1e308 overflows: the weights are scaled by the largest before they are summed (issue 29).
    client = api(cast.bob)
    url = f"{API}/runs/{run.pk}/robustness/what-if/"
    attributes = run.results["selected_attributes"]
    huge = client.post(url, {"attribute_weights": dict.fromkeys(attributes, 1e308)}, format="json")
    assert huge.status_code == 200, huge.content
    ones = client.post(url, {"attribute_weights": dict.fromkeys(attributes, 1)}, format="json")
    assert huge.json() == ones.json()
    assert huge.json()["attribute_weights"] == pytest.approx(dict.fromkeys(attributes, 1 / len(attributes)))


def test_what_if_refuses_an_infinite_weight_naming_the_field(api, cast, run):
    client = api(cast.bob)
    url = f"{API}/runs/{run.pk}/robustness/what-if/"
    attribute = run.results["selected_attributes"][0]
    body = '{"attribute_weights": {' + json.dumps(attribute) + ": 1e309}}"  # (JSON's number, read as inf)
    refused = client.generic("POST", url, body, content_type="application/json")
    assert refused.status_code == 400
    assert list(error_fields(refused)) in (["attribute_weights"], [f"attribute_weights.{attribute}"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.floats(min_value=0, max_value=1.7976931348623157e308, allow_nan=False, allow_infinity=False),
        min_size=1,
        max_size=4,
    )
)
def test_any_finite_weights_give_shares_summing_to_1_or_a_400_naming_the_field(api, cast, run, values):
    client = api(cast.bob)
    attributes = run.results["selected_attributes"]
    weights = dict(zip(attributes, values, strict=False))
    response = client.post(f"{API}/runs/{run.pk}/robustness/what-if/", {"attribute_weights": weights}, format="json")
    if response.status_code == 200:
        shares = response.json()["attribute_weights"]
        assert sum(shares.values()) == pytest.approx(1)
        assert all(0 <= share <= 1 for share in shares.values())
        assert len(response.json()["candidates"]) == len(run.results["candidates"])
    else:
        assert response.status_code == 400, response.content
        assert list(error_fields(response)) == ["attribute_weights"]
        # (only when every weight given, and every one kept from the run, is 0)
        kept = [name for name in attributes if name not in weights]
        assert not any(weights.values()) and not kept


def test_a_monte_carlo_summary_gives_each_probability_its_wilson_interval(api, cast, run, settings):
    client = api(cast.alice)
    launched = client.post(
        f"{API}/runs/{run.pk}/analyses/",
        {"kind": "monte_carlo", "samples": 120, "seed": 4, "judgments": True, "peer_weights": True},
        format="json",
    )
    assert launched.status_code == 202
    analysis = Analysis.objects.get()
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        engine_analyses.chunk_execute(chunk_id=chunk_id)
    summary = client.get(launched["Location"]).json()["summary"]
    z2 = 1.959963984540054**2
    for row in summary["candidates"]:
        p = row["p_best"]
        # the Wilson score interval, written out
        centre = (p + z2 / 240) / (1 + z2 / 120)
        half = 1.959963984540054 / (1 + z2 / 120) * (p * (1 - p) / 120 + z2 / (4 * 120**2)) ** 0.5
        assert row["wilson_best"] == pytest.approx([max(centre - half, 0.0), min(centre + half, 1.0)], abs=1e-12)
        assert len(row["wilson_ranks"]) == len(row["ranks"])
        assert all(low <= share <= high for share, (low, high) in zip(row["ranks"], row["wilson_ranks"], strict=True))
    pairwise = summary["pairwise"]
    size = len(pairwise["candidates"])
    assert [len(pairwise[key]) for key in ("probabilities", "wilson_low", "wilson_high")] == [size] * 3
