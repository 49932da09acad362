"""A Python client generated from the live schema with openapi-python-client
(the most used Python generator), used unchanged, as an integrator would
(issue 18, item 5).

The generated package is imported module by module, then a whole study is
scripted through it against a live server: the designer alice and the
experts bob and carol get tokens with their passwords, set the standard
study of ``tests/fixtures.py`` up, move it through its phases, give their
inputs, launch two runs, read the results, the CSV and the comparison,
upload predictions and read their evaluation, and meet three refusals. The
values are checked against the plain API (Django's test client, in-process)
and against the same study built through the services.

The test finds each operation by its method and path in the schema (its
``operationId`` names the generated module) and each request body's model
by the operation's type hints, so it depends on no generated class name:
only on what the API promises.
"""

import copy
import csv
import importlib
import io
import json
import pkgutil
import re
import types
import typing
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest
from rest_framework.test import APIClient

from engine import prioritisation as engine
from engine.models import Run
from tests.api.conftest import launch_and_finish
from tests.api.test_access import PREDICTIONS
from tests.fixtures import (
    ATTRIBUTES,
    CAROL_JUDGMENTS,
    MEASUREMENTS,
    METRICS,
    PASSWORD,
    SELECTED_ATTRIBUTES,
    SELECTED_METRICS,
    VOTES,
)
from workspace.models import Phase

from .conftest import PACKAGE, GeneratedClient, schema_operations

API = "/api/v1"
# The inputs complete_assessment() (tests/fixtures.py) gives, sent here through the client.
PRIORITIES = {
    "bob": {"method": "direct", "weights": {"Accuracy": 50, "Consistency": 30, "Efficiency": 20}},
    "carol": {"method": "ahp", "judgments": CAROL_JUDGMENTS},
}
RANGES = {"bob": {"AUC": [0.7, 0.95]}, "carol": {"AUC": [0.75, 0.9], "Success rate": [0.82, 0.9]}}
PEER_WEIGHTS = {"bob": {"bob": 0.6, "carol": 0.4}, "carol": {"bob": 0.5, "carol": 0.5}}
# bob's peer weights for the second run, the one the comparison reads.
SECOND_PEER_WEIGHTS = {"bob": 0.8, "carol": 0.2}


def generated_modules(package: str) -> list[str]:
    root = importlib.import_module(package)
    return sorted(info.name for info in pkgutil.walk_packages(root.__path__, package + "."))


def test_the_generator_warns_about_nothing(python_client: GeneratedClient) -> None:
    """Every operation and body became code: a warning means a piece of the
    client is missing (e.g. a body type the generator does not support)."""
    assert "Warning" not in python_client.output, python_client.output


def test_every_generated_module_imports(python_client: GeneratedClient, live_schema) -> None:
    modules = generated_modules(PACKAGE)
    failed = {}
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001  (every failure is listed)
            failed[name] = f"{type(error).__name__}: {error}"
    assert not failed, f"{len(failed)} of {len(modules)} generated modules fail to import:\n" + "\n".join(
        f"{name}: {error}" for name, error in failed.items()
    )
    # One module per operation of the schema, each under its area's package.
    schema = json.loads(live_schema.read_text(encoding="utf-8"))
    operations = schema_operations(schema)
    api_modules = {name.rsplit(".", 1)[1] for name in modules if name.count(".") == 3 and ".api." in name}
    assert api_modules == set(operations.values())
    areas = {name.split(".")[2] for name in modules if name.count(".") == 3 and ".api." in name}
    assert areas == {tag["name"] for tag in schema["tags"]}
    assert len(modules) > len(operations)  # and the models, the client, the types


# --- the generated client, by method and path --------------------------------------------


class Api:
    """The generated client's operations, found by method and path."""

    def __init__(self, schema: dict, base_url: str) -> None:
        self.base_url = base_url
        self.operations = schema_operations(schema)
        self.package = importlib.import_module(PACKAGE)
        self.modules = {
            name.rsplit(".", 1)[1]: name for name in generated_modules(PACKAGE + ".api") if name.count(".") == 3
        }

    def anonymous(self) -> Any:
        return self.package.Client(base_url=self.base_url, timeout=httpx.Timeout(60))

    def with_token(self, token: str) -> Any:
        return self.package.AuthenticatedClient(
            base_url=self.base_url, token=token, prefix="Token", timeout=httpx.Timeout(60)
        )

    def module(self, method: str, path: str) -> types.ModuleType:
        operation_id = self.operations[(method, path)]
        assert operation_id in self.modules, f"no generated module for {method} {path} ({operation_id})"
        return importlib.import_module(self.modules[operation_id])

    @staticmethod
    def body_of(module: types.ModuleType, body: Any) -> Any:
        """``body`` as the operation's body model: a dict (or a list of
        dicts) goes through the generated ``from_dict``."""
        if not isinstance(body, (dict, list)):
            return body
        hint = typing.get_type_hints(module.sync_detailed)["body"]
        kinds = {
            kind
            for kind in (
                typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
            )
            if kind is not type(None) and getattr(kind, "__name__", "") != "Unset"
        }
        assert len(kinds) == 1, f"{module.__name__}: more than one JSON body type: {kinds}"
        (kind,) = kinds
        if typing.get_origin(kind) is list:
            (item,) = typing.get_args(kind)
            assert isinstance(body, list)
            return [item.from_dict(copy.deepcopy(row)) for row in body]
        return kind.from_dict(copy.deepcopy(body))

    def call(self, client: Any, method: str, path: str, body: Any = None, **arguments: Any) -> Any:
        module = self.module(method, path)
        if body is not None:
            arguments["body"] = self.body_of(module, body)
        return module.sync_detailed(client=client, **arguments)


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, f"{response.status_code}: {response.content[:500]!r}"
    assert response.parsed is not None, f"the client parsed nothing from {response.content[:500]!r}"
    return response.parsed


def as_dict(parsed: Any) -> Any:
    """A parsed answer as plain data, through the generated ``to_dict``."""
    if isinstance(parsed, list):
        return [as_dict(item) for item in parsed]
    return parsed.to_dict()


ISO_MOMENT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def same_data(value: Any) -> Any:
    """``value`` with its moments as datetimes: the client writes a parsed
    moment back as ``+00:00`` where the server wrote ``Z``."""
    if isinstance(value, dict):
        return {key: same_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [same_data(item) for item in value]
    if isinstance(value, str) and ISO_MOMENT.match(value):
        return datetime.fromisoformat(value)
    return value


def refused(response: Any, status: int, code: str) -> dict:
    """The error envelope ``{"code", "detail", "fields"}`` of a refusal,
    read by the client as well (its parsed model gives back the body)."""
    body = json.loads(response.content)
    assert (response.status_code, body.get("code")) == (status, code), f"{response.status_code}: {body}"
    assert isinstance(body["detail"], str) and body["detail"]
    assert isinstance(body["fields"], dict)
    assert response.parsed is not None and as_dict(response.parsed) == body
    return body


@dataclass
class People:
    api: Api
    clients: dict  # username -> the generated client with their token
    tokens: dict  # username -> the token

    def plain(self, username: str) -> APIClient:
        """The same person on the plain API: Django's test client, in-process."""
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {self.tokens[username]}")
        return client


@pytest.fixture
def people(python_client, live_schema, live_server, cast, eager_celery) -> People:
    """alice, bob, carol and charlie with tokens from the token endpoint,
    asked for through the generated client. Launched runs execute at once
    (Celery eager, also with REDIS_URL set: no worker runs in the tests)."""
    api = Api(json.loads(live_schema.read_text(encoding="utf-8")), live_server.url)
    tokens = {}
    for username in ("alice", "bob", "carol", "charlie"):
        body = {"username": username, "password": PASSWORD, "name": "generated client"}
        token = ok(api.call(api.anonymous(), "POST", f"{API}/auth/token/", body), 201)
        assert (len(token.token), token.prefix, token.name) == (40, token.token[:8], "generated client")
        tokens[username] = token.token
    return People(api=api, clients={u: api.with_token(t) for u, t in tokens.items()}, tokens=tokens)


def test_a_whole_study_through_the_generated_client(people, live_server, make_study):
    api, alice, bob, carol = people.api, people.clients["alice"], people.clients["bob"], people.clients["carol"]

    # --- setup (draft) -------------------------------------------------------------------
    created = api.call(
        alice,
        "POST",
        f"{API}/studies/",
        {
            "title": "Choosing a classifier",
            "description": "which learner to deploy",
            "attribute_threshold": 1,
            "metric_threshold": 0,
        },
    )
    study = ok(created, 201)
    assert (study.phase, study.designer, study.my_roles) == ("draft", "alice", ["designer"])
    assert created.headers["Location"] == f"{live_server.url}{API}/studies/{study.id}/"
    sid = {"study_id": study.id}

    for position, (name, kind) in enumerate(ATTRIBUTES, start=1):
        body = {"name": name, "kind": kind, "description": f"{name} matters"}
        attribute = ok(api.call(alice, "POST", f"{API}/studies/{{study_id}}/attributes/", body, **sid), 201)
        assert (attribute.name, attribute.kind, attribute.position) == (name, kind, position)
    for name, attribute_name, better, unit, default_range in METRICS:
        body = {"name": name, "attribute": attribute_name, "better": better, "unit": unit}
        body["default_range"] = default_range
        metric = ok(api.call(alice, "POST", f"{API}/studies/{{study_id}}/metrics/", body, **sid), 201)
        assert {key: as_dict(metric)[key] for key in body} == body
    for name in MEASUREMENTS:
        body = {"name": name, "description": f"{name} learner"}
        candidate = ok(api.call(alice, "POST", f"{API}/studies/{{study_id}}/candidates/", body, **sid), 201)
        assert (candidate.name, candidate.description) == (name, f"{name} learner")
    measurements = [
        {"candidate": c, "metric": m, "value": v} for c, values in MEASUREMENTS.items() for m, v in values.items()
    ]
    stored = ok(api.call(alice, "PUT", f"{API}/studies/{{study_id}}/measurements/", measurements, **sid))
    assert as_dict(stored) == measurements

    # Each expert is invited and joins by accepting.
    for username, client in (("bob", bob), ("carol", carol)):
        invited = ok(
            api.call(alice, "POST", f"{API}/studies/{{study_id}}/members/", {"username": username}, **sid), 202
        )
        assert (invited.invitation.username, invited.invitation.status) == (username, "pending")
        mine = ok(api.call(client, "GET", f"{API}/invitations/")).results
        assert [(i.study.id, i.invited_by) for i in mine] == [(study.id, "alice")]
        accepted = ok(
            api.call(client, "POST", f"{API}/invitations/{{invitation_id}}/accept/", {}, invitation_id=mine[0].id)
        )
        assert (accepted.study, accepted.role) == (study.id, "expert")
    assert ok(api.call(alice, "GET", f"{API}/studies/{{study_id}}/", **sid)).experts == ["bob", "carol"]

    # --- voting ----------------------------------------------------------------------------
    def move(to: str) -> Any:
        moved = ok(api.call(alice, "POST", f"{API}/studies/{{study_id}}/transitions/", {"to": to}, **sid))
        assert moved.phase == to
        return moved

    move("voting")
    for username, client in (("bob", bob), ("carol", carol)):
        ballot = ok(api.call(client, "PUT", f"{API}/studies/{{study_id}}/my/votes/", VOTES[username], **sid))
        assert as_dict(ballot) == VOTES[username]
    assessment = move("assessment")
    assert as_dict(assessment.selection) == {"attributes": SELECTED_ATTRIBUTES, "metrics": SELECTED_METRICS}

    # --- assessment ------------------------------------------------------------------------
    for username, client in (("bob", bob), ("carol", carol)):
        priorities = ok(
            api.call(client, "PUT", f"{API}/studies/{{study_id}}/my/priorities/", PRIORITIES[username], **sid)
        )
        given = as_dict(priorities)
        assert {key: given[key] for key in PRIORITIES[username]} == PRIORITIES[username]
        ranges = ok(api.call(client, "PUT", f"{API}/studies/{{study_id}}/my/ranges/", RANGES[username], **sid))
        assert as_dict(ranges) == RANGES[username]
        weights = ok(
            api.call(client, "PUT", f"{API}/studies/{{study_id}}/my/peer-weights/", PEER_WEIGHTS[username], **sid)
        )
        assert as_dict(weights) == PEER_WEIGHTS[username]
    # carol's AHP result, as the engine computes it.
    result = as_dict(ok(api.call(carol, "GET", f"{API}/studies/{{study_id}}/my/priorities/", **sid)))["result"]
    expected = engine.prioritise(
        "ahp",
        3,
        judgments=[
            (SELECTED_ATTRIBUTES.index(r), SELECTED_ATTRIBUTES.index(c), float(v)) for r, c, v in CAROL_JUDGMENTS
        ],
    )
    assert list(result["weights"]) == SELECTED_ATTRIBUTES
    assert list(result["weights"].values()) == pytest.approx(expected.weights.tolist(), abs=1e-12)
    assert result["consistency_ratio"] == pytest.approx(expected.consistency_ratio, abs=1e-12)

    # Refused: a negative weight (invalid_input, naming the field); a launch
    # before the assessment is closed (phase_conflict). Nothing changes.
    bad = {"method": "direct", "weights": {"Accuracy": -50, "Consistency": 30, "Efficiency": 20}}
    invalid = refused(
        api.call(bob, "PUT", f"{API}/studies/{{study_id}}/my/priorities/", bad, **sid), 400, "invalid_input"
    )
    assert "weights.Accuracy" in invalid["fields"], invalid
    refused(api.call(alice, "POST", f"{API}/studies/{{study_id}}/runs/", **sid), 409, "phase_conflict")
    kept = as_dict(ok(api.call(bob, "GET", f"{API}/studies/{{study_id}}/my/priorities/", **sid)))
    assert kept["weights"] == PRIORITIES["bob"]["weights"]
    assert ok(api.call(alice, "GET", f"{API}/studies/{{study_id}}/runs/", **sid)).count == 0

    # --- the first run ---------------------------------------------------------------------
    move("closed")

    def launch() -> int:
        launched = api.call(alice, "POST", f"{API}/studies/{{study_id}}/runs/", **sid)
        run = ok(launched, 202)
        assert launched.headers["Location"] == f"{live_server.url}{API}/runs/{run.id}/"
        polled = ok(api.call(alice, "GET", f"{API}/runs/{{run_id}}/", run_id=run.id))
        assert (polled.status, polled.launched_by, polled.study) == ("succeeded", "alice", study.id), polled
        return run.id

    first = launch()
    plain = people.plain("bob")
    results = as_dict(ok(api.call(bob, "GET", f"{API}/runs/{{run_id}}/results/", run_id=first)))
    assert same_data(results) == same_data(plain.get(f"{API}/runs/{first}/results/").json())
    assert results["format"] == "approve-results/1" and results["run"] == first
    # The same study built through the services gives the same document.
    built = make_study(Phase.CLOSED)
    reference = launch_and_finish(built, built.study.designer)
    expected_document = people.plain("alice").get(f"{API}/runs/{reference.pk}/results/").json()
    moment = ("run", "launched_at")
    assert {k: v for k, v in results.items() if k not in moment} == {
        k: v for k, v in expected_document.items() if k not in moment
    }
    ranking = [(c["rank"], c["name"]) for c in results["candidates"]]
    assert ranking == [(c["rank"], c["name"]) for c in expected_document["candidates"]] and len(ranking) == 2

    full = as_dict(ok(api.call(bob, "GET", f"{API}/runs/{{run_id}}/results/", run_id=first, individual=True)))
    assert same_data(full) == same_data(plain.get(f"{API}/runs/{first}/results/?individual=true").json())
    scores = ok(api.call(bob, "GET", f"{API}/runs/{{run_id}}/candidates/{{name}}/scores/", run_id=first, name="J48"))
    assert as_dict(scores) == {c["name"]: c for c in full["candidates"]}["J48"]["individual_scores"]
    assert set(as_dict(scores)) == {"bob", "carol"}

    # The results CSV: the plain API's bytes, a row per candidate in rank order.
    table = api.call(bob, "GET", f"{API}/runs/{{run_id}}/results.csv", run_id=first)
    assert table.status_code == 200 and table.headers["Content-Type"].startswith("text/csv")
    assert table.content == plain.get(f"{API}/runs/{first}/results.csv").content
    rows = list(csv.reader(io.StringIO(table.content.decode("utf-8-sig"))))
    assert [row[1] for row in rows[1:]] == [name for _, name in ranking]

    # --- a second run, after bob changes his peer weights; the two compared ------------------
    move("assessment")
    changed = ok(api.call(bob, "PUT", f"{API}/studies/{{study_id}}/my/peer-weights/", SECOND_PEER_WEIGHTS, **sid))
    assert as_dict(changed) == SECOND_PEER_WEIGHTS
    move("closed")
    second = launch()
    compared = as_dict(
        ok(api.call(bob, "GET", f"{API}/runs/{{run_id}}/compare/{{other_id}}/", run_id=second, other_id=first))
    )
    assert same_data(compared) == same_data(plain.get(f"{API}/runs/{second}/compare/{first}/").json())
    # The earlier run is before, whichever order the URL names them in; bob's change is listed.
    assert (compared["before"]["id"], compared["after"]["id"]) == (first, second)
    assert [entry["expert"] for entry in compared["changes"]] == ["bob"]
    assert compared["changes_total"] == len(compared["changes"][0]["changes"]) == 2  # his two peer weights
    influence = {row["name"]: row for row in compared["expert_influence"]}
    assert influence["bob"]["after"] == pytest.approx(
        as_dict(ok(api.call(bob, "GET", f"{API}/runs/{{run_id}}/results/", run_id=second)))["expert_influence"]["bob"]
    )
    assert influence["bob"]["delta"] > 0  # bob weighs himself more: more influence
    assert Run.objects.filter(study_id=study.id, status=Run.Status.SUCCEEDED).count() == 2

    # --- predictions: a multipart upload, their evaluation, and a raw CSV upload --------------------------------
    upload = api.module("POST", f"{API}/studies/{{study_id}}/predictions/")
    body_type = next(
        kind
        for kind in typing.get_args(typing.get_type_hints(upload.sync_detailed)["body"])
        if hasattr(kind, "to_multipart")
    )
    file = api.package.types.File(payload=io.BytesIO(PREDICTIONS), file_name="holdout.csv", mime_type="text/csv")
    prediction_set = ok(upload.sync_detailed(client=alice, body=body_type(file=file, positive="spam"), **sid), 201)
    assert (prediction_set.name, prediction_set.rows, prediction_set.positive) == ("holdout.csv", 4, "spam")
    assert [c.name for c in prediction_set.candidates] == ["J48", "JRip"]
    evaluation = as_dict(
        ok(
            api.call(
                bob, "GET", f"{API}/studies/{{study_id}}/predictions/{{id}}/evaluation/", id=prediction_set.id, **sid
            )
        )
    )
    plain_evaluation = plain.get(f"{API}/studies/{study.id}/predictions/{prediction_set.id}/evaluation/").json()
    assert same_data(evaluation) == same_data(plain_evaluation)
    assert (evaluation["format"], evaluation["positive"], list(evaluation["candidates"])) == (
        "approve-evaluation/1",
        "spam",
        ["J48", "JRip"],
    )
    # J48 calls both rows spam (one right), JRip both ham (one right).
    j48, jrip = evaluation["candidates"]["J48"], evaluation["candidates"]["JRip"]
    assert (j48["accuracy"], j48["recall"], j48["specificity"]) == (0.5, 1.0, 0.0)
    assert (jrip["accuracy"], jrip["recall"], jrip["specificity"]) == (0.5, 0.0, 1.0)

    # The same endpoint takes one candidate's predictions as a raw text/csv body,
    # its options as query parameters.
    raw = api.package.types.File(payload=io.BytesIO(b"y_true,y_pred\nspam,spam\nham,spam\n"), mime_type="text/csv")
    one = ok(upload.sync_detailed(client=alice, body=raw, candidate="JRip", name="JRip holdout", **sid), 201)
    assert (one.name, one.rows, [c.name for c in one.candidates]) == ("JRip holdout", 2, ["JRip"])
    listed = ok(api.call(bob, "GET", f"{API}/studies/{{study_id}}/predictions/", **sid))
    assert sorted(p.name for p in listed.results) == ["JRip holdout", "holdout.csv"]

    # --- an outsider learns nothing: 404 not_found, for the study and its runs ---------------
    charlie = people.clients["charlie"]
    refused(api.call(charlie, "GET", f"{API}/studies/{{study_id}}/", **sid), 404, "not_found")
    refused(api.call(charlie, "GET", f"{API}/runs/{{run_id}}/results/", run_id=first), 404, "not_found")
