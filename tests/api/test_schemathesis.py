"""Schemathesis over every operation of the OpenAPI schema (``/api/schema/``).

Each operation gets generated requests, valid and invalid (Schemathesis's
positive and negative modes), sent in-process to the WSGI application,
authenticated with a token of ``alice``, who designs the studies below and is
also one of their experts (so the ``my/`` endpoints get past the role check).
Every response must pass:

- ``not_a_server_error``: no 5xx, whatever the input;
- ``response_schema_conformance``: the body matches the documented schema
  for its status code (errors included);
- ``status_code_conformance``: the status code is one the operation
  documents;
- ``content_type_conformance``: so is the content type (JSON, 404s of
  URLs that match nothing included).

So that the generated ids hit something, path parameters are replaced, two
times in three, by those of real objects: one study per phase (draft,
voting, assessment, closed with a succeeded run) with its attributes,
metrics (one computed from predictions), candidates, experts, discussion
posts and a prediction set, a run and a token. Every request runs in a
savepoint that is rolled back afterwards, so each example meets the same
database (a generated DELETE does not take the study away from the next one).

Bounded and reproducible: at most ``MAX_EXAMPLES`` generated examples per
operation (plus Schemathesis's deterministic coverage cases), derandomised,
no deadline. ``test_fuzzing_reached_real_objects`` then checks that every
operation got past its lookups at least once.
"""

import io
from contextlib import contextmanager

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from rest_framework.throttling import SimpleRateThrottle
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from approve_site.wsgi import application
from evaluation import selectors
from evaluation.services import (
    elicitation_answer,
    elicited_metric_set,
    measurements_compute,
    metric_computation_set,
    prediction_set_import,
)
from tests.evaluation.elicited_fixtures import upload
from tests.fixtures import api_error, error_fields
from tracking import remote
from tracking.models import MlflowImport
from tracking.remote import TrackerError
from tracking.secrets import seal
from webhooks.models import SECRET_SEAL_INFO, Delivery, Webhook
from workspace import invitations, services
from workspace.models import Phase, Study

from .conftest import Built, launch_and_finish, token_key

MAX_EXAMPLES = 20
PREDICTIONS = b"candidate,y_true,y_pred\nJ48,yes,yes\nJ48,no,yes\nJRip,yes,no\nJRip,no,no\n"
# Status codes per operation label, to check that fuzzing reached real objects.
STATS = {}
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

# The objects the path parameters are mapped to; filled by the ``world``
# fixture before any example is generated.
REAL = {}


def _ids_for(path, world):
    """The value of ``{id}`` in ``path`` for a study's world."""
    for kind in ("attributes", "metrics", "candidates", "invitations", "posts", "predictions"):
        if f"/{kind}/" in path:
            return st.sampled_from(world[kind])
    return st.sampled_from(world["attributes"])


def _real(path, generated, world):
    """Path parameters naming the objects of ``world``."""
    strategies = {}
    for name in generated:
        if name == "study_id":
            strategies[name] = st.just(world["study"])
        elif name == "id":
            strategies[name] = _ids_for(path, world)
        elif name == "metric_id":  # the elicitation's resources: the study's elicited metric
            strategies[name] = st.just(world["elicited"])
        elif name == "webhook_id":  # a webhook of the study's
            strategies[name] = st.just(world["webhook"])
        elif name == "delivery_id":  # the webhook's delivery
            strategies[name] = st.just(world["delivery"])
        elif name == "import_id":  # an MLflow import of the study's
            strategies[name] = st.just(world["mlflow_import"])
        elif name == "run_id":
            strategies[name] = st.sampled_from(REAL["runs"])
        elif name == "token_id":
            strategies[name] = st.just(REAL["token"])
        elif name == "invitation_id":
            strategies[name] = st.sampled_from(REAL["my_invitations"])
        elif name == "username":
            strategies[name] = st.sampled_from(["bob", "carol", "alice", "charlie"])
        elif name == "name":
            strategies[name] = st.sampled_from(["J48", "JRip", "C4.5"])
        elif name == "number":  # a revision round: the assessment's open one, the closed study's kept one
            strategies[name] = st.just(1)
        else:  # a parameter this test does not know: keep the generated value
            strategies[name] = st.just(generated[name])
    return st.fixed_dictionaries(strategies)


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    if not REAL or not isinstance(path_parameters, dict) or not path_parameters:
        return st.just(path_parameters)
    path = context.operation.path
    real = st.sampled_from(REAL["worlds"]).flatmap(lambda world: _real(path, path_parameters, world))
    return st.one_of(real, real, st.just(path_parameters))


def _build_world(phase, cast, title):
    """A study of alice in ``phase`` with experts alice, bob and carol; closed
    studies get a succeeded run."""
    study = services.study_create(designer=cast.alice, title=title, description="fuzzed")
    experts = {
        user.username: services.expert_add(study=study, user=user) for user in (cast.alice, cast.bob, cast.carol)
    }
    attributes = [
        services.attribute_add(study=study, name="Accuracy", kind="main"),
        services.attribute_add(study=study, name="Consistency", kind="main"),
        services.attribute_add(study=study, name="Efficiency", kind="complementary"),
    ]
    metrics = [
        services.metric_add(study=study, attribute=attributes[0], name="Success rate", default_range=[0.8, 0.95]),
        services.metric_add(study=study, attribute=attributes[0], name="AUC", default_range=[0.7, 0.9]),
        services.metric_add(
            study=study, attribute=attributes[1], name="Fold stdev", better="lower", default_range=[0.15, 0.05]
        ),
        services.metric_add(
            study=study, attribute=attributes[2], name="Training time", better="lower", default_range=[60, 1]
        ),
    ]
    candidates = [services.candidate_add(study=study, name=name) for name in ("J48", "JRip")]
    pending = [
        invitations.invitation_create(study=study, created_by=cast.alice, username="dave")[0],
        invitations.invitation_create(study=study, created_by=cast.alice)[0],
    ]
    services.measurements_set(
        study=study,
        measurements=[
            {"candidate": c.name, "metric": m.name, "value": value}
            for c, values in zip(candidates, ([0.85, 0.8, 0.1, 4], [0.87, 0.82, 0.09, 6]), strict=False)
            for m, value in zip(metrics, values, strict=False)
        ],
    )
    posts = [
        services.post_add(study=study, author=cast.alice, attribute=attributes[0], body="Accuracy first"),
        services.post_add(study=study, author=cast.alice, metric=metrics[1], body="AUC per fold"),
    ]
    services.post_hide(post=posts[1], by=cast.alice)
    prediction_sets = [
        prediction_set_import(study=study, stream=io.BytesIO(PREDICTIONS), name="holdout.csv", uploaded_by=cast.alice)
    ]
    # A metric computed from the set, so that its computation and the sources exist.
    metric_computation_set(metric=metrics[0], computation="accuracy")
    measurements_compute(study=study)
    # An elicited metric, its questions from J48's class probabilities in a second set.
    elicited = services.metric_add(
        study=study, attribute=attributes[0], name="Cost-weighted accuracy", default_range=[0.3, 0.9]
    )
    # Typed measurements too; runs use each expert's own value (the answers given below).
    services.measurements_set(
        study=study,
        measurements=[
            {"candidate": "J48", "metric": "Cost-weighted accuracy", "value": 0.6},
            {"candidate": "JRip", "metric": "Cost-weighted accuracy", "value": 0.7},
        ],
    )
    proba_set = upload(study)
    elicited_metric_set(
        metric=elicited, kind="diagonal", prediction_set=proba_set.pk, reference_candidate="J48", epsilon=0.2
    )
    # Making it elicited cleared the default range set for its typed values: one on its scale.
    services.metric_update(metric=elicited, default_range=[0.3, 0.9])
    world = {
        "study": study.pk,
        "attributes": [a.pk for a in attributes],
        "metrics": [m.pk for m in metrics],
        "candidates": [c.pk for c in candidates],
        "invitations": [i.pk for i in pending],
        "posts": [p.pk for p in posts],
        "predictions": [p.pk for p in prediction_sets],
        "elicited": elicited.pk,
        "mlflow_import": MlflowImport.objects.create(
            study=study,
            imported_at=study.created_at,
            experiment_id="7",
            status=MlflowImport.Status.FAILED,
            runs_total=60,
            error={"code": "mlflow_unreachable", "detail": "The MLflow server did not answer.", "fields": {}},
        ).pk,
    }
    webhook = Webhook.objects.create(
        study=study,
        url="https://hooks.example.com/in",
        events=["run.failed"],
        sealed_secret=seal("s", info=SECRET_SEAL_INFO),
    )
    delivery = Delivery.objects.create(webhook=webhook, event="run.failed", payload={"event": "run.failed"})
    world.update(webhook=webhook.pk, delivery=str(delivery.delivery_id))
    if phase == Phase.DRAFT:
        return world
    services.study_open_voting(study=study)
    services.votes_set(expert=experts["bob"], attributes=["Efficiency"], metrics=[])
    if phase == Phase.VOTING:
        return world
    services.study_close_voting(study=study)
    services.round_open(study=study, by=cast.alice, message="Check your units")
    if phase == Phase.ASSESSMENT:
        return world
    services.round_close(study=study, by=cast.alice)
    for expert in experts.values():
        services.priorities_set(
            expert=expert, method="direct", weights={"Accuracy": 3, "Consistency": 2, "Efficiency": 1}
        )
        services.peer_weights_set(expert=expert, weights={"alice": 0.5, "bob": 0.25, "carol": 0.25})
    services.priorities_set(
        expert=experts["carol"],
        method="ahp",
        judgments=[["Accuracy", "Consistency", 3], ["Accuracy", "Efficiency", 5], ["Consistency", "Efficiency", 2]],
        metric_priorities={
            "Accuracy": {"method": "direct", "weights": {"Success rate": 2, "AUC": 1, "Cost-weighted accuracy": 1}}
        },
    )
    services.ranges_set(expert=experts["bob"], ranges={"AUC": [0.75, 0.95]})
    # Each expert answers the elicited metric's questions (the consistency check's included).
    elicited_row = selectors.elicited_metric_get(study=study, metric_id=elicited.pk)
    for expert in experts.values():
        while (
            question := selectors.elicitation_state(elicited_metric=elicited_row, expert=expert).question
        ) is not None:
            elicitation_answer(elicited_metric=elicited_row, expert=expert, answer="first", question=question.number)
    services.study_close_assessment(study=study)
    return world


@pytest.fixture
def world(cast, monkeypatch):
    """The studies, a run and a second token of alice; the throttles of the
    token endpoint and of imports raised, so generated logins and imports
    are answered, not throttled.
    DRF reads the throttle rates into a class attribute when it is imported,
    so that attribute is the one to change. Yields the auth header."""
    monkeypatch.setattr(
        SimpleRateThrottle,
        "THROTTLE_RATES",
        {**SimpleRateThrottle.THROTTLE_RATES, "login": "100000/minute", "import": "100000/minute"},
    )
    phases = (Phase.DRAFT, Phase.VOTING, Phase.ASSESSMENT, Phase.CLOSED)
    worlds = [_build_world(phase, cast, f"Fuzzed {phase} study") for phase in phases]
    closed = Study.objects.get(pk=worlds[-1]["study"])
    run = launch_and_finish(Built(study=closed, experts={}), cast.alice)
    spare, _ = services.api_token_create(user=cast.alice, name="spare")
    # Invitations addressed to alice, to two drafts of bob's.
    mine = []
    for title in ("Bob's draft", "Bob's other draft"):
        study = services.study_create(designer=cast.bob, title=title)
        mine.append(invitations.invitation_create(study=study, created_by=cast.bob, username="alice")[0].pk)
    REAL.update(worlds=worlds, runs=[run.pk], token=spare.pk, my_invitations=mine)
    key = token_key(cast.alice, name="fuzzing")
    # Schemathesis's WSGI transport does not undo gzip (it asks for it, as
    # requests does): plain answers here, compression in test_compression.py.
    yield {"Authorization": f"Token {key}", "Accept-Encoding": "identity"}
    REAL.clear()


def checks_for(case, response):
    """``CHECKS``; but a 502 of an MLflow operation is the documented answer
    of an unreachable server (``offline_mlflow``), not a crash."""
    if response.status_code == 502 and "/mlflow/" in case.operation.path:
        assert response.json()["code"] == "mlflow_unreachable", response.content
        return [check for check in CHECKS if check is not not_a_server_error]
    return CHECKS


@pytest.fixture
def offline_mlflow(monkeypatch):
    """No generated tracking URI reaches the network: every MLflow call is
    answered as an unreachable server would be (502 mlflow_unreachable, the
    one 5xx the MLflow operations document); file: stores are allowed nowhere
    (TRACKING_FILE_ROOTS is empty). tests/tracking uses a real server. No
    generated webhook URL is looked up either: every host is one that does
    not resolve (tests/webhooks uses a real receiver)."""

    @contextmanager
    def unreachable(connection):
        raise TrackerError(f"MLflow at {connection.tracking_uri} is unreachable: offline", "mlflow_unreachable")
        yield  # pragma: no cover

    monkeypatch.setattr(remote, "connected", unreachable)

    def unresolved(where, policy=remote.TRACKING_HOSTS):
        remote.judge(where, policy)
        raise TrackerError(remote.UNREACHABLE, "mlflow_unreachable")

    monkeypatch.setattr(remote, "addresses", unresolved)


@pytest.fixture
def in_process_requests():
    """Requests go through the WSGI handler in the test's own connection and
    transaction. The handler closes "old" connections when a request starts
    and ends, which inside a test's transaction would throw it away; Django's
    test client disconnects that handler the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api(case, world, in_process_requests, offline_mlflow):
    with transaction.atomic():
        response = case.call(app=application, headers=world)
        transaction.set_rollback(True)
    STATS.setdefault(case.operation.label, []).append(response.status_code)
    case.validate_response(response, checks=checks_for(case, response), headers=world)


def test_fuzzing_reached_real_objects():
    """Every operation was answered at least once past its lookups (not 404
    or 405): the mapped path parameters did hit real studies, runs, tokens."""
    if len(STATS) < len(list(schema.get_all_operations())):
        pytest.skip("runs only after the whole of test_api")
    missed = sorted(label for label, statuses in STATS.items() if not set(statuses) - {404, 405})
    assert not missed, f"never reached a real object: {missed}"
    examples = sum(len(statuses) for statuses in STATS.values())
    print(f"\nschemathesis: {len(STATS)} operations, {examples} requests")


# --- inputs that answered 5xx (or broke the schema) before the fixes ----------------
# Fuzzing found some; the rest are their siblings. Several only failed on
# PostgreSQL (a NUL character cannot reach a query there), so they are pinned
# here for both databases.

NUL = "a\x00b"
TEXT_NOT_JSON = object()
REGRESSIONS = [
    # (actor, phase, method, path, body, status, expected body or a fragment of it)
    ("alice", Phase.DRAFT, "get", "/studies/{study}/inputs/a%00b/", None, 404, api_error("not_found", "Not found.")),
    (
        "alice",
        Phase.DRAFT,
        "delete",
        "/studies/{study}/members/a%00b/",
        None,
        404,
        api_error("not_found", "Not found."),
    ),
    (
        "alice",
        Phase.DRAFT,
        "post",
        "/studies/import/",
        {"format": "approve-study/1", "title": NUL},
        400,
        {"title": ["must not contain NUL characters"]},
    ),
    (
        "alice",
        Phase.DRAFT,
        "post",
        "/studies/import/",
        {"format": "approve-study/1", "title": "t", "attributes": [{"name": "Accuracy", "description": NUL}]},
        400,
        {"attributes[0].description": ["must not contain NUL characters"]},
    ),
    (
        "alice",
        Phase.DRAFT,
        "post",
        "/studies/import/",
        {"format": "approve-study/1", "title": "t", "metric_threshold": 10**12},
        400,
        {"metric_threshold": ["must be at most 10000, got 1000000000000"]},
    ),
    (
        "bob",
        Phase.ASSESSMENT,
        "put",
        "/studies/{study}/my/priorities/",
        {
            "method": "direct",
            "weights": {"Accuracy": 1, "Consistency": 1, "Efficiency": 1},
            "metric_priorities": {NUL: {"method": "direct", "weights": {}}},
        },
        400,
        {f"metric_priorities.{NUL}": ["no attribute of that name in this study"]},
    ),
    (
        "bob",
        Phase.ASSESSMENT,
        "put",
        "/studies/{study}/my/priorities/",
        {
            "method": "ahp",
            "judgments": [
                [["Accuracy"], "Consistency", 3],
                ["Accuracy", "Efficiency", 2],
                ["Consistency", "Efficiency", 1],
            ],
        },
        400,
        {"judgments[0]": ["must be [row, column, value] with row and column naming items"]},
    ),
    (
        "alice",
        Phase.DRAFT,
        "put",
        "/studies/{study}/measurements/",
        [{"candidate": ["J48"], "metric": {"AUC": 1}, "value": 1}],
        400,
        {
            "measurements[0].candidate": ["no candidate named ['J48'] in this study"],
            "measurements[0].metric": ["no metric named {'AUC': 1} in this study"],
        },
    ),
    (
        "alice",
        Phase.DRAFT,
        "post",
        "/studies/",
        TEXT_NOT_JSON,
        400,
        {
            "non_field_errors": [
                "JSON parse error - Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
            ]
        },
    ),
    # Valid JSON, but a lone surrogate cannot reach a query (found by Hypothesis in the bundle tests).
    (
        "alice",
        Phase.DRAFT,
        "post",
        "/studies/{study}/metrics/",
        '{"name": "m", "attribute": "\\ud800"}',
        400,
        {
            "non_field_errors": [
                "JSON parse error - the body contains a lone surrogate (\\ud800-\\udfff), which is not text"
            ]
        },
    ),
    ("alice", Phase.DRAFT, "get", "/studies/not-a-number/", None, 404, api_error("not_found", "Not found.")),
    ("alice", Phase.DRAFT, "get", "/studies/?page=99", None, 404, api_error("not_found", "Invalid page.")),
]


@pytest.mark.django_db
@pytest.mark.parametrize("actor, phase, method, path, body, status, expected", REGRESSIONS, ids=lambda v: None)
def test_inputs_that_used_to_crash_are_refused(actor, phase, method, path, body, status, expected, make_study, clients):
    built = make_study(phase)
    url = "/api/v1" + path.format(study=built.study.pk)
    client = clients[actor]
    if body is TEXT_NOT_JSON:
        response = client.generic(method.upper(), url, "{title: 1}", content_type="application/json")
    elif isinstance(body, str):  # raw JSON text
        response = client.generic(method.upper(), url, body, content_type="application/json")
    elif body is None:
        response = getattr(client, method)(url)
    else:
        response = getattr(client, method)(url, body, format="json")
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    if status == 400:  # the envelope: its code, and the table's messages per field
        code = "parse_error" if "non_field_errors" in expected else "invalid_input"
        assert (response.json()["code"], error_fields(response)) == (code, expected)
    else:
        assert response.json() == expected
