"""What the run pages offer, the API offers (issue 18, item 3): the results
CSV (``GET /api/v1/runs/{run}/results.csv``, the page's bytes) and two runs
compared (``GET /api/v1/runs/{run}/compare/{other}/``, engine.compare's
result as JSON); and a token client given a page's address is sent on to
the API."""

import pytest
from django.test import Client

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine.compare import compare_runs
from engine.models import Run
from tests.fixtures import api_error, error_fields
from tests.pages.test_studyhome import as_user
from workspace import services
from workspace.bundles import study_import_bundle
from workspace.models import Membership, Phase, Study

from .conftest import finish_run, token_key

pytestmark = pytest.mark.django_db

API = "/api/v1"


def launch_and_execute(study: Study) -> Run:
    run = finish_run(engine_services.run_launch(study=study, launched_by=study.designer).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


@pytest.fixture
def demo(case_study):
    """The demo study, closed, and a succeeded run of it."""
    study = study_import_bundle(bundle=case_study)
    return study, launch_and_execute(study)


@pytest.fixture
def demo_pair(demo):
    """Two runs of the demo: between them the statistician asks more of the
    success rate (so JRip's CEF drops)."""
    study, first = demo
    statistician = Membership.objects.get(study=study, user__username="statistician", role=Membership.Role.EXPERT)
    services.study_reopen_assessment(study=study)
    services.ranges_set(expert=statistician, ranges={"Success rate": [0.86, 0.95]})
    services.study_close_assessment(study=study)
    return study, first, launch_and_execute(study)


# --- the results CSV ---------------------------------------------------------------------------


def test_the_api_csv_is_the_pages_csv_byte_for_byte(client, api, demo):
    study, run = demo
    page = as_user(client, study.designer).get(f"/runs/{run.pk}/results.csv")
    assert page.status_code == 200
    response = api(study.designer).get(f"{API}/runs/{run.pk}/results.csv")
    assert response.status_code == 200
    assert response.content == page.content
    assert response.content.startswith(b"\xef\xbb\xbfrank,name,cef,weighted_score,vetoed,veto_reasons,")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="approve-run-{run.pk}-results.csv"'
    # the rows in the document's rank order
    lines = response.content.decode("utf-8-sig").splitlines()[1:]
    document = engine_selectors.results_document(run=run)
    assert [line.split(",")[1] for line in lines] == [c["name"] for c in document["candidates"]]
    # asking for text/csv explicitly is no 406
    explicit = api(study.designer).get(f"{API}/runs/{run.pk}/results.csv", HTTP_ACCEPT="text/csv")
    assert explicit.status_code == 200 and explicit.content == page.content


def test_the_api_csv_is_409_until_the_run_has_succeeded_and_404_for_outsiders(api, cast, make_study):
    built = make_study(Phase.CLOSED)
    queued = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    response = api(cast.bob).get(f"{API}/runs/{queued.pk}/results.csv")
    assert response.status_code == 409
    assert response["Content-Type"] == "application/json"
    assert response.json() == api_error(
        "run_not_finished", f"{queued.label} is queued; results exist once it has succeeded."
    )
    outsider = api(cast.charlie).get(f"{API}/runs/{queued.pk}/results.csv")
    assert (outsider.status_code, outsider.json()) == (404, api_error("not_found", "No such run."))
    missing = api(cast.charlie).get(f"{API}/runs/{queued.pk + 1000}/results.csv")
    assert missing.json() == outsider.json()
    assert api(None).get(f"{API}/runs/{queued.pk}/results.csv").status_code == 401


# --- two runs compared ---------------------------------------------------------------------------


def test_the_api_comparison_is_engine_compare_of_the_pair(api, demo_pair):
    study, first, second = demo_pair
    expected = compare_runs(
        engine_selectors.results_document(run=first),
        engine_selectors.results_document(run=second),
        first.snapshot,
        second.snapshot,
    )
    for url in (f"{API}/runs/{second.pk}/compare/{first.pk}/", f"{API}/runs/{first.pk}/compare/{second.pk}/"):
        response = api(study.designer).get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        # the earlier run is "before", whichever order the URL names them in
        assert (body["before"]["id"], body["after"]["id"]) == (first.pk, second.pk)
        assert body["before"]["status"] == "succeeded"
        moves = [
            (m["name"], m["status"], m["places"], m["before_rank"], m["after_rank"], m["cef_delta"])
            for m in body["candidates"]
        ]
        assert moves == [
            (m.name, m.status, m.places, m.before_rank, m.after_rank, m.cef_delta) for m in expected.candidates
        ]
        assert body["moved"] == expected.moved
        jrip = next(m for m in body["candidates"] if m["name"] == "JRip")
        assert jrip["cef_delta"] == pytest.approx(jrip["after_cef"] - jrip["before_cef"])
        assert jrip["cef_delta"] < 0
        assert jrip["weighted_delta"] == pytest.approx(jrip["after_weighted"] - jrip["before_weighted"])
        for key in ("attribute_weights", "metric_weights", "expert_influence"):
            assert body[key] == [
                {"name": d.name, "before": d.before, "after": d.after, "delta": d.delta, "changed": d.changed}
                for d in getattr(expected, key)
            ]
        assert body["changes"] == [
            {
                "expert": "statistician",
                "changes": [
                    {"what": "acceptable range of Success rate", "before": "[0.8, 0.95]", "after": "[0.86, 0.95]"}
                ],
            }
        ]
        assert body["changes_total"] == 1
        assert body["metrics_are_attributes"] == expected.metrics_are_attributes


def test_the_api_comparison_refuses_as_the_page_does(api, cast, make_study, case_study):
    study = make_study(Phase.CLOSED).study
    run = launch_and_execute(study)
    other_study = study_import_bundle(bundle={**case_study, "title": "Another choice", "designer": "alice"})
    other = launch_and_execute(other_study)
    alice = api(cast.alice)  # she designs both
    response = alice.get(f"{API}/runs/{run.pk}/compare/{other.pk}/")
    assert response.status_code == 400
    assert error_fields(response) == {
        "other_id": [
            f"{run.label} belongs to the study 'Choosing a classifier' and {other.label.lower()} to 'Another choice': "
            "only runs of the same study can be compared."
        ]
    }
    itself = alice.get(f"{API}/runs/{run.pk}/compare/{run.pk}/")
    assert (itself.status_code, itself.json()) == (
        409,
        api_error("same_run", f"{run.label} compared with itself changes nothing: choose another run of the study."),
    )
    queued = engine_services.run_launch(study=study, launched_by=cast.alice)
    unfinished = alice.get(f"{API}/runs/{run.pk}/compare/{queued.pk}/")
    assert (unfinished.status_code, unfinished.json()) == (
        409,
        api_error(
            "run_not_finished",
            f"{queued.label} has not succeeded (it is queued), so it has no results to compare yet.",
        ),
    )
    # bob is an expert of the first study only, charlie of neither: 404, as for a run that does not exist
    for user, url in [
        (cast.bob, f"{API}/runs/{run.pk}/compare/{other.pk}/"),
        (cast.charlie, f"{API}/runs/{run.pk}/compare/{other.pk}/"),
        (cast.bob, f"{API}/runs/{run.pk}/compare/999999/"),
    ]:
        response = api(user).get(url)
        assert (response.status_code, response.json()) == (404, api_error("not_found", "No such run."))
    assert api(None).get(f"{API}/runs/{run.pk}/compare/{queued.pk}/").status_code == 401


# --- token clients on the pages -----------------------------------------------------------------


def test_a_token_client_on_a_results_page_is_sent_on_to_the_api(demo_pair):
    study, first, second = demo_pair
    key = token_key(study.designer)
    token_client = Client(HTTP_AUTHORIZATION=f"Token {key}")
    for page, api_url in [
        (f"/runs/{first.pk}/results.csv", f"{API}/runs/{first.pk}/results.csv"),
        (f"/runs/{first.pk}/results.json", f"{API}/runs/{first.pk}/results/"),
        (f"/runs/{second.pk}/compare/{first.pk}/", f"{API}/runs/{second.pk}/compare/{first.pk}/"),
    ]:
        response = token_client.get(page)
        assert (response.status_code, response["Location"]) == (307, api_url)
        followed = token_client.get(api_url)
        assert followed.status_code == 200
    csv_page = token_client.get(f"/runs/{first.pk}/results.csv", follow=True)
    assert csv_page.content.startswith(b"\xef\xbb\xbfrank,name,")
    compared = token_client.get(f"/runs/{second.pk}/compare/{first.pk}/", follow=True).json()
    assert (compared["before"]["id"], compared["after"]["id"]) == (first.pk, second.pk)
    # without a token the page still asks a visitor to sign in; with a session it is the page
    assert Client().get(f"/runs/{first.pk}/results.csv").status_code == 302
    signed_in = as_user(Client(HTTP_AUTHORIZATION=f"Token {key}"), study.designer)
    assert signed_in.get(f"/runs/{second.pk}/compare/{first.pk}/").status_code == 200
