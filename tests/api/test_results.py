"""Results at scale (issue 7, item 6; FORMATS.md ``approve-results/1``, "Size").

- ``GET .../results/`` serves compact JSON without individual scores unless
  ``?individual=true``; its bytes are those ``run_validation --json`` prints.
- ``GET .../candidates/{name}/scores/`` gives one candidate's.
- The document carries the disagreement measures stored with the run, and
  the schema describes the document, its optional fields included.
- The run detail, the results and the export take a fixed number of queries
  whatever the number of experts and candidates, and the run detail never
  loads the JSON fields.
"""

import json

import jsonschema
import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from engine import disagreement
from engine import selectors as engine_selectors
from engine.models import Run
from tests.fixtures import error_fields
from workspace.models import Phase

from .conftest import client_with_token, launch_and_finish, token_key
from .test_csrf_tokens_pagination import sized_study

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def closed_run(make_study, cast):
    built = make_study(Phase.CLOSED)
    return launch_and_finish(built, cast.alice)


def test_results_leave_individual_scores_out_by_default(closed_run, api, cast):
    client = api(cast.bob)
    response = client.get(f"{API}/runs/{closed_run.pk}/results/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    document = json.loads(response.content)
    assert document["format"] == "approve-results/1" and document["run"] == closed_run.pk
    assert [c["name"] for c in document["candidates"]] and all(
        "individual_scores" not in c for c in document["candidates"]
    )
    # Compact: no indentation, no spaces after separators; UTF-8 as written.
    assert b"\n" not in response.content and b'": ' not in response.content and b", " not in response.content
    assert response.content == engine_selectors.results_json(run=Run.objects.get(pk=closed_run.pk))
    assert client.get(f"{API}/runs/{closed_run.pk}/results/?individual=false").content == response.content


def test_results_with_individual_scores_on_request(closed_run, api, cast):
    client = api(cast.bob)
    response = client.get(f"{API}/runs/{closed_run.pk}/results/?individual=true")
    assert response.status_code == 200
    run = Run.objects.get(pk=closed_run.pk)
    assert response.content == engine_selectors.results_json(run=run, individual=True)
    document = response.json()
    for candidate in document["candidates"]:
        scores = client.get(f"{API}/runs/{run.pk}/candidates/{candidate['name']}/scores/").json()
        assert candidate["individual_scores"] == scores
        assert list(scores) == ["bob", "carol"]
        assert all(0 <= value <= 1 for row in scores.values() for value in row.values())
    compact = client.get(f"{API}/runs/{run.pk}/results/").json()
    assert [{k: v for k, v in c.items() if k != "individual_scores"} for c in document["candidates"]] == compact[
        "candidates"
    ]


@pytest.mark.parametrize("value", ["yes", "1", "True", ""])
def test_individual_must_be_true_or_false(closed_run, api, cast, value):
    response = api(cast.bob).get(f"{API}/runs/{closed_run.pk}/results/?individual={value}")
    assert response.status_code == 400
    assert error_fields(response) == {"individual": [f"must be true or false, got {value!r}"]}


def test_the_schema_documents_the_individual_parameter(api, cast):
    schema = api(cast.bob).get("/api/schema/?format=json").json()
    parameters = schema["paths"]["/api/v1/runs/{run_id}/results/"]["get"]["parameters"]
    individual = next(p for p in parameters if p["name"] == "individual")
    assert individual["in"] == "query" and individual["schema"] == {"type": "boolean", "default": False}
    assert "individual scores" in individual["description"]


def test_results_carry_the_disagreement_measures(closed_run, api, cast):
    """The measures of engine.disagreement on the run's own inputs, by name:
    Accuracy has two metrics (Success rate, AUC), so attribute and metric
    weights differ."""
    response = api(cast.bob).get(f"{API}/runs/{closed_run.pk}/results/")
    document = response.json()
    run = Run.objects.get(pk=closed_run.pk)
    assert response.content == engine_selectors.results_json(run=run)
    snapshot = run.snapshot
    attribute_weights = np.array(snapshot["attribute_weights"])
    metric_weights = np.array(snapshot["metric_weights"])
    measures = document["disagreement"]
    assert list(measures) == ["attribute_weights", "metric_weights", "consensus"]
    for key, names, weights in (
        ("attribute_weights", ["Accuracy", "Consistency", "Efficiency"], attribute_weights),
        ("metric_weights", ["Success rate", "AUC", "Fold stdev", "Training time"], metric_weights),
    ):
        spread = disagreement.weight_spread(weights)
        assert measures[key] == {
            name: {"min": low, "max": high, "mean": mean, "stdev": stdev}
            for name, low, high, mean, stdev in zip(names, *(values.tolist() for values in spread), strict=True)
        }
        value = disagreement.ahp_consensus(weights)
        assert measures["consensus"][key] == {"value": value, "wording": disagreement.consensus_wording(value)}
        assert 0 < value < 1
    assert measures["consensus"]["measure"] == "ahp_os_s_star" and measures["consensus"]["scale_max"] == 9
    # bob (direct 50/30/20) and carol (AHP) weigh Accuracy unequally.
    assert measures["attribute_weights"]["Accuracy"]["min"] < measures["attribute_weights"]["Accuracy"]["max"]
    shares = disagreement.veto_shares(snapshot["lower"], snapshot["upper"], snapshot["measurements"])
    for candidate in document["candidates"]:
        row = shares[snapshot["candidates"].index(candidate["name"])]
        assert candidate["veto_shares"] == dict(zip(document["metrics"], row.tolist(), strict=True))
        assert list(candidate)[-2:] == ["group_scores", "veto_shares"]
    # The per-expert weights are stored for the pages, never put in the document.
    assert run.results["expert_metric_weights"] == disagreement.weight_rows(metric_weights).tolist()
    assert b"expert_metric_weights" not in response.content and b"expert_attribute_weights" not in response.content


def _results_schema(client):
    """The document's schema (the ResultsDocument component), with the
    components beside it so that its references resolve."""
    schema = client.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/runs/{run_id}/results/"]["get"]
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/ResultsDocument"}
    return {**schema["components"]["schemas"]["ResultsDocument"], "components": schema["components"]}


def _resolved(schema, node):
    """A node of the schema, its reference followed."""
    ref = node.get("$ref", "")
    return schema["components"]["schemas"][ref.rpartition("/")[2]] if ref else node


def test_the_schema_describes_the_document_and_its_optional_fields(closed_run, api, cast):
    client = api(cast.bob)
    schema = _results_schema(client)
    candidate = _resolved(schema, schema["properties"]["candidates"]["items"])
    assert "disagreement" in schema["properties"] and "disagreement" not in schema["required"]
    assert "veto_shares" in candidate["properties"] and "veto_shares" not in candidate["required"]
    assert "individual_scores" in candidate["properties"] and "individual_scores" not in candidate["required"]
    disagreement = _resolved(schema, schema["properties"]["disagreement"])
    consensus = _resolved(schema, disagreement["properties"]["consensus"])
    assert consensus["properties"]["measure"]["enum"] == ["ahp_os_s_star"]
    document = client.get(f"{API}/runs/{closed_run.pk}/results/").json()
    jsonschema.validate(document, schema)
    # Every key of the document is described, in the document's order.
    assert list(schema["properties"]) == list(document)
    assert list(candidate["properties"]) == [*document["candidates"][0], "individual_scores"]
    jsonschema.validate(client.get(f"{API}/runs/{closed_run.pk}/results/?individual=true").json(), schema)
    # A run stored before the measures existed (layout 2) conforms too.
    document.pop("disagreement")
    for entry in document["candidates"]:
        entry.pop("veto_shares")
    jsonschema.validate(document, schema)
    # And the schema can refuse: a share that is not a number, a consensus outside [0, 1].
    broken = client.get(f"{API}/runs/{closed_run.pk}/results/").json()
    broken["candidates"][0]["veto_shares"]["AUC"] = "none"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    broken = client.get(f"{API}/runs/{closed_run.pk}/results/").json()
    broken["disagreement"]["consensus"]["metric_weights"]["value"] = 1.5
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


# Every run request starts with one query: the token with its user
# (authentication; last_used_at was just set, so it is not written again).
AUTH = 1
RUN_QUERIES = {
    # the run with who launched it, among the studies the user is a member
    # of (404 otherwise), without its snapshot and results
    "/runs/{run}/": AUTH + 1,
    # the run with who launched it, without its JSON (its version, for a
    # 304), then its stored document text alone
    "/runs/{run}/results/": AUTH + 2,
    # the same, with the snapshot too (the individual scores come from it)
    "/runs/{run}/results/?individual=true": AUTH + 1,
    # the run with its snapshot (not its results)
    "/runs/{run}/candidates/Candidate 1/scores/": AUTH + 1,
    # SCOPED (the token; the study with its designer; my memberships), then
    # one query each for: experts with their users; attributes; metrics with
    # their attributes; candidates; measurements (plain values); attribute
    # votes with their attributes; metric votes with their metrics; attribute
    # prioritisations; their weights with attributes; their judgments with
    # rows and columns; local prioritisations (none here, so nothing is
    # prefetched for them); ranges; peer weights with their ratees; the
    # revision rounds (none here, so their responses are not read); the
    # ranges to confirm
    "/studies/{study}/export/": 3 + 14 + 1,
}


@pytest.mark.parametrize("path", list(RUN_QUERIES))
def test_run_query_counts_do_not_grow_with_the_study(path, cast, django_assert_num_queries):
    client = client_with_token(token_key(cast.alice))
    sizes = {}
    for size in (2, 12):
        study = sized_study(size, cast.alice)
        run = Run.objects.filter(study=study).order_by("pk").first()
        url = API + path.format(run=run.pk, study=study.pk)
        with django_assert_num_queries(RUN_QUERIES[path]):
            response = client.get(url)
        assert response.status_code == 200
        sizes[size] = len(response.content)
    if path != "/runs/{run}/":  # the detail is the same size for any study
        assert sizes[12] > sizes[2]


def test_run_detail_never_loads_the_json_fields(closed_run, api, cast):
    client = api(cast.bob)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"{API}/runs/{closed_run.pk}/")
    assert response.json()["status"] == "succeeded"
    run_query = next(q["sql"] for q in queries.captured_queries if '"engine_run"."status"' in q["sql"])
    assert '"engine_run"."snapshot"' not in run_query and '"engine_run"."results"' not in run_query
