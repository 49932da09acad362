"""The schema's metadata, as generators and linters read it (issue 18, item 2):
a summary and exactly one declared tag per operation, ``servers``,
``security: []`` on the token request only, a ``type`` beside every
``nullable``, and the response headers the server sends (``Location`` on
201/202, ``WWW-Authenticate`` on 401, ``Retry-After`` on 429)."""

import pytest
from django.urls import path as route
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from drf_spectacular.validation import validate_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from workspace.api.schema import SchemaTagMissing, first_sentence

METHODS = ("get", "put", "post", "patch", "delete")
# The tags of SPECTACULAR_SETTINGS, then those the issue-32 apps add in their settings sections.
TAGS = [
    "studies",
    "setup",
    "inputs",
    "runs",
    "evaluation",
    "mlflow",
    "discussion",
    "invitations",
    "accounts",
    "notifications",
    "webhooks",
]


# The operations that need no credentials.
UNAUTHENTICATED = {
    ("/api/v1/auth/token/", "post"),
    ("/api/v1/accounts/signup/", "get"),
    ("/api/v1/accounts/signup/", "post"),
    ("/api/v1/accounts/signup/complete/", "post"),
}


@pytest.fixture
def schema(client, db):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return response.json()


def _operations(schema):
    return [
        (path, method, item[method]) for path, item in schema["paths"].items() for method in METHODS if method in item
    ]


def _walk(node, where=""):
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            yield from _walk(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{where}/{index}")


def test_the_tags_are_declared_with_descriptions(schema):
    assert [tag["name"] for tag in schema["tags"]] == TAGS
    assert all(len(tag["description"]) > 20 for tag in schema["tags"])


def test_every_operation_has_a_summary_and_one_declared_tag(schema):
    operations = _operations(schema)
    assert len(operations) > 60
    summaries = set()
    for path, method, operation in operations:
        label = f"{method.upper()} {path}"
        assert len(operation["tags"]) == 1 and operation["tags"][0] in TAGS, label
        summary = operation["summary"]
        assert 5 < len(summary) <= 80 and summary[0].isupper() and not summary.endswith("."), label
        assert " a attribute" not in summary, label
        summaries.add(summary)
    # One sentence per operation, none repeated.
    assert len(summaries) == len(operations)
    # Every area has operations.
    assert {operation["tags"][0] for _, _, operation in operations} == set(TAGS)


@pytest.mark.parametrize(
    ("path", "method", "tag", "summary"),
    [
        ("/api/v1/auth/token/", "post", "accounts", "Create an API token with a username and password"),
        ("/api/v1/accounts/signup/", "post", "accounts", "Ask for a sign-up link by e-mail"),
        ("/api/v1/accounts/signup/complete/", "post", "accounts", "Create your account with the mailed sign-up token"),
        ("/api/v1/studies/", "post", "studies", "Create a study"),
        ("/api/v1/studies/import/", "post", "studies", "Import a study bundle"),
        ("/api/v1/studies/{study_id}/transitions/", "post", "studies", "Move the study to another phase"),
        ("/api/v1/studies/{study_id}/attributes/", "post", "setup", "Add an attribute"),
        ("/api/v1/studies/{study_id}/members/{username}/", "delete", "setup", "Remove an expert"),
        ("/api/v1/studies/{study_id}/my/ranges/", "put", "inputs", "Set your acceptable ranges"),
        ("/api/v1/studies/{study_id}/measurements/", "put", "inputs", "Set measured values"),
        ("/api/v1/studies/{study_id}/runs/", "post", "runs", "Launch a validation run"),
        ("/api/v1/runs/{run_id}/results/", "get", "runs", "Get a run's results document"),
        ("/api/v1/studies/{study_id}/predictions/", "post", "evaluation", "Upload a prediction set"),
        (
            "/api/v1/studies/{study_id}/measurements/compute/",
            "post",
            "evaluation",
            "Compute the measurements from predictions",
        ),
        ("/api/v1/studies/{study_id}/discussion/posts/{id}/hide/", "post", "discussion", "Hide a post"),
        ("/api/v1/invitations/accept/", "post", "invitations", "Accept a link invitation with its key"),
        ("/api/v1/studies/{study_id}/invitations/", "post", "invitations", "Invite an expert"),
    ],
)
def test_operations_get_their_area_and_sentence(schema, path, method, tag, summary):
    operation = schema["paths"][path][method]
    assert operation["tags"] == [tag]
    assert operation["summary"] == summary


class _Tagged(APIView):
    schema_tag = "runs"

    @extend_schema(summary="Get the thing, as its view says", responses={200: None})
    def get(self, request: object) -> Response:
        """Not the summary. Only the description."""
        return Response()

    @extend_schema(request=None, responses={200: None})
    def post(self, request: object) -> Response:
        """The docstring's sentence, on one
        line. The rest is the description."""
        return Response()


class _Untagged(APIView):
    @extend_schema(summary="Get nothing", responses={200: None})
    def get(self, request: object) -> Response:
        return Response()


class _Undeclared(_Untagged):
    schema_tag = "runz"


def _generated(view: type[APIView]) -> dict:
    return SchemaGenerator(patterns=[route("api/v1/thing/", view.as_view())]).get_schema(request=None, public=True)


def test_a_view_declares_its_area_and_its_methods_their_summaries():
    item = _generated(_Tagged)["paths"]["/api/v1/thing/"]
    assert (item["get"]["tags"], item["post"]["tags"]) == (["runs"], ["runs"])
    assert item["get"]["summary"] == "Get the thing, as its view says"
    assert item["get"]["description"] == "Not the summary. Only the description."
    # Without a summary, the docstring's first sentence.
    assert item["post"]["summary"] == "The docstring's sentence, on one line"


def test_a_view_without_a_declared_area_is_an_error():
    with pytest.raises(SchemaTagMissing, match=r"test_schema_metadata\._Untagged declares no schema_tag"):
        _generated(_Untagged)
    with pytest.raises(SchemaTagMissing, match=r"_Undeclared\.schema_tag is 'runz', not a tag of"):
        _generated(_Undeclared)


def test_first_sentence():
    assert first_sentence("The run's results as CSV, one row\n    per candidate. 409 until done.") == (
        "The run's results as CSV, one row per candidate"
    )
    assert first_sentence("Revoke one token") == "Revoke one token"


def test_servers_and_security(schema):
    assert schema["servers"] == [{"url": "/", "description": "this server (the host the schema was fetched from)"}]
    for path, method, operation in _operations(schema):
        if (path, method) in UNAUTHENTICATED:
            # The token request and self sign-up need no credentials: said explicitly.
            assert operation["security"] == []
        else:
            assert operation["security"] == [{"tokenAuth": []}, {"cookieAuth": []}], f"{method} {path}"


def test_every_nullable_has_a_type(schema):
    nullable = [(where, node) for where, node in _walk(schema) if node.get("nullable") is True]
    assert nullable
    for where, node in nullable:
        assert "type" in node, where
    properties = schema["components"]["schemas"]["StudyDetail"]["properties"]
    # a nullable reference: the component or null (what generated clients read as optional)
    assert properties["selection"] == {
        "anyOf": [{"$ref": "#/components/schemas/Selection"}, {"$ref": "#/components/schemas/NullEnum"}],
        "readOnly": True,
    }
    method = schema["components"]["schemas"]["PrioritiesResponse"]["properties"]["method"]
    assert method["type"] == "string" and method["nullable"] is True


def test_response_headers_are_declared(schema):
    seen = {"201": 0, "202": 0, "401": 0, "429": 0}
    expected = {
        "201": ("Location", True, "string"),
        "202": ("Location", True, "string"),
        "401": ("WWW-Authenticate", True, "string"),
        "429": ("Retry-After", True, "integer"),
    }
    for path, method, operation in _operations(schema):
        for status, response in operation["responses"].items():
            # RateLimit-* on the throttled operations: tests/api/test_rate_limit_headers.py
            headers = {name for name in response.get("headers", {}) if not name.startswith("RateLimit-")}
            if (operation["operationId"], status) == ("v1_runs_results_retrieve", "200"):
                # the next page of individual scores (tests/workspace/test_individual_score_pages.py)
                link = response["headers"]["Link"]
                assert link["required"] is False and link["schema"] == {"type": "string"}
                assert 'rel="next"' in link["description"]
                headers.discard("Link")
            if status not in expected:
                assert not headers, f"{method} {path} {status}"
                continue
            seen[status] += 1
            name, required, kind = expected[status]
            header = response["headers"][name]
            assert header["required"] is required and header["schema"] == {"type": kind}, f"{method} {path}"
            assert header["description"]
    # Every create, every launch (runs, analyses), invitation, queued MLflow import, sign-up link or webhook test
    # delivery, every authenticated operation, the five throttled ones (token request, import, individual scores,
    # the two sign-up steps) and the analyses' launch (its limits).
    assert seen["201"] >= 10 and seen["202"] == 6 and seen["401"] == len(_operations(schema)) - len(UNAUTHENTICATED)
    assert seen["429"] == 6
    assert schema["paths"]["/api/v1/studies/import/"]["post"]["responses"]["429"]["description"]


def test_the_headers_declared_are_sent(client, db, cast):
    """WWW-Authenticate on a 401 (Retry-After on a 429: tests/api/test_import_throttle.py)."""
    response = client.get("/api/v1/studies/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_the_schema_is_valid_openapi_3_0(schema):
    """Against the OpenAPI 3.0 meta-schema (drf-spectacular's copy): no
    3.1-style ``"type": [X, "null"]`` is left (the results document's
    ``attribute`` and ``acknowledged_at`` had them)."""
    validate_schema(schema)
    assert not [where for where, node in _walk(schema) if isinstance(node.get("type"), list)]
    components = schema["components"]["schemas"]
    consistency = components["ConsistencyReport"]
    assert components["ResultsDocument"]["properties"]["consistency"] == {
        "$ref": "#/components/schemas/ConsistencyReport"
    }
    items = consistency["properties"]["prioritisations"]["items"]
    assert items == {"$ref": "#/components/schemas/PrioritisationConsistency"}
    prioritisation = components["PrioritisationConsistency"]["properties"]
    null = {"$ref": "#/components/schemas/NullEnum"}
    assert components["NullEnum"] == {"enum": [None]}
    assert prioritisation["acknowledged_at"]["anyOf"] == [{"type": "string", "format": "date-time"}, null]
    assert prioritisation["attribute"]["anyOf"] == [{"type": "string"}, null]
    assert prioritisation["attribute"]["description"].startswith("null: the prioritisation of the attributes")
