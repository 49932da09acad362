"""OpenAPI: every operation documents the errors it can answer with, and
every create answer links to the operations on what it made; every operation
has a summary and one tag (its area), and the headers the server sends are
declared."""

import copy
import re
from dataclasses import dataclass
from typing import Any, Literal, cast

from django.core.exceptions import ImproperlyConfigured
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.utils import OpenApiResponse
from rest_framework.pagination import BasePagination
from rest_framework.settings import api_settings

from workspace import extensions, limits

from . import invitation_serializers as inv
from .serializers import PrioritiesSerializer, WriteSerializer

# The lists' paginator: api_settings imports the class its setting names
# (the stubs type the setting as that name).
pagination_class = cast(type[BasePagination], api_settings.DEFAULT_PAGINATION_CLASS)

# --- named components ---------------------------------------------------------------
# Schemas given as JSON Schema (documents, maps keyed by names, the error
# bodies) are components of their own, referred to by name: generated clients
# get one class each, with a name of its meaning, instead of one per
# operation named after the operation.


def ref(name: str) -> dict[str, str]:
    """A reference to the component ``name`` (components/schemas)."""
    return {"$ref": f"#/components/schemas/{name}"}


_FIELDS = {
    "type": "object",
    "description": "errors per field: a dotted path (e.g. `weights.Accuracy`, `judgments[2]`) → messages",
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}
# The error envelope (docs/api.md, "Errors"): `fields` only in a 400's.
ERROR_BODY = {
    "type": "object",
    "description": "An error: a machine-readable code and the message.",
    "required": ["code", "detail"],
    "properties": {
        "code": {"type": "string", "description": "machine-readable, e.g. `not_found`, `phase_conflict`"},
        "detail": {"type": "string", "description": "the message, in words"},
        "fields": {**_FIELDS, "description": "absent (or empty) outside a 400"},
    },
    "example": {"code": "phase_conflict", "detail": "The study is in the draft phase; votes open in voting."},
}
VALIDATION_ERROR_BODY = {
    "type": "object",
    "description": "Invalid input: the messages per field. Nothing was written.",
    "required": ["code", "detail", "fields"],
    "properties": {
        "code": {
            "type": "string",
            "description": "machine-readable: `invalid_input` (`parse_error` for a body that is not JSON)",
        },
        "detail": {"type": "string", "description": "a summary in words"},
        "fields": _FIELDS,
    },
    "example": {
        "code": "invalid_input",
        "detail": "peer_weights.clinician: row sums to 0.9, must be 1",
        "fields": {"peer_weights.clinician": ["row sums to 0.9, must be 1"]},
    },
}

VALIDATION_ERROR = OpenApiResponse(
    response=ref("ValidationError"), description="Invalid input: errors per field. Nothing was written."
)


def error(description: str) -> OpenApiResponse:
    """An error answer other than a 400, in the shared ``ErrorBody``."""
    return OpenApiResponse(response=ref("ErrorBody"), description=description)


def components() -> dict[str, dict]:
    """The components given as JSON Schema, by name (added to the schema by
    ``postprocess_components``): workspace's own and those other apps
    registered (``extensions.SCHEMA_COMPONENTS``, made here)."""
    from . import serializers as s

    return {
        "ErrorBody": ERROR_BODY,
        "ValidationError": VALIDATION_ERROR_BODY,
        "ResultsDocument": s.RESULTS_SCHEMA,
        **{name: schema() for name, schema in extensions.SCHEMA_COMPONENTS.items()},
        "StudyBundle": s.BUNDLE_SCHEMA,
        "CandidateScores": s.SCORES_SCHEMA,
        "Ranges": s.RANGES_SCHEMA,
        "PeerWeights": s.PEER_WEIGHTS_SCHEMA,
        "Judgment": s.JUDGMENT_SCHEMA,
        "JudgmentObject": s.JUDGMENT_OBJECT_SCHEMA,
    }


HOIST = "x-component"
# The names of attributes, metrics, candidates... in lists (votes, the metrics
# to compute): one component, instead of a class per list named after its
# items (datamodel-code-generator made the study's Metric model ``Metric1``,
# the name ``Metric`` taken by the strings of a list of metrics).
NAME_SCHEMA = {"type": "string", "maxLength": limits.NAME_MAX_LENGTH, "description": "a name in the study"}


def _is_name(node: object) -> bool:
    return (
        isinstance(node, dict)
        and node.get("type") == "string"
        and node.get("maxLength") == limits.NAME_MAX_LENGTH
        and set(node) <= {"type", "maxLength", "minLength"}
    )


def _hoisted(node: object, schemas: dict) -> object:
    """``node`` with every nested schema marked ``x-component`` moved to
    the components (by that name) and referred to, and every list of names
    referring to ``Name``. A description or ``readOnly`` at the place of use
    is dropped (a reference has no siblings in OpenAPI 3.0): the component
    has its own description."""
    if isinstance(node, list):
        return [_hoisted(value, schemas) for value in node]
    if not isinstance(node, dict):
        return node
    if HOIST in node:
        name = node[HOIST]
        body = {key: _hoisted(value, schemas) for key, value in node.items() if key not in (HOIST, "readOnly")}
        known = schemas.setdefault(name, body)
        same = {key: value for key, value in known.items() if key != "description"}
        assert same == {key: value for key, value in body.items() if key != "description"}, f"two {name}"
        return ref(name)
    hoisted = {key: _hoisted(value, schemas) for key, value in node.items()}
    if hoisted.get("type") == "array" and _is_name(hoisted.get("items")):
        hoisted["items"] = ref("Name")
    return hoisted


def postprocess_components(result: dict, generator: object, request: object, public: bool) -> dict:
    """drf-spectacular postprocessing hook: add the components given as JSON
    Schema (``components()``), which operations refer to with ``ref``, and
    those nested schemas name (``x-component``)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in components().items():
        assert name not in schemas, f"component {name} is also made by drf-spectacular"
        schemas[name] = copy.deepcopy(schema)
    schemas["Name"] = dict(NAME_SCHEMA)
    result["paths"] = _hoisted(result.get("paths", {}), schemas)
    for name in list(schemas):
        schemas[name] = _hoisted(schemas[name], schemas)
    result["components"]["schemas"] = dict(sorted(schemas.items()))
    return result


# Request bodies whose views refuse a field they do not know (besides every
# WriteSerializer): their schemas say so, so that a client (or a fuzzer) sending
# what the schema allows is not refused.
CLOSED_REQUESTS = (
    WriteSerializer,
    PrioritiesSerializer,
    inv.InvitationWriteSerializer,
    inv.AcceptSerializer,
    inv.AcceptLinkSerializer,
)


API = "/api/v1"

# Operations whose body may be left out: a link invitation (no username),
# accepting without importing inputs, computing every mapped metric.
OPTIONAL_BODIES = frozenset(
    {"v1_studies_invitations_create", "v1_invitations_accept_create", "v1_studies_measurements_compute_create"}
)

# --- tags and summaries -------------------------------------------------------------
# One tag per area, so that generated clients split into modules; the tags
# are declared at the top level with their descriptions
# (settings.SPECTACULAR_SETTINGS["TAGS"]). Each API view names its area in
# ``schema_tag`` (a class attribute, on a module's base class where all its
# views share it), and each operation its summary in
# ``@extend_schema(summary=...)``; an operation without one gets its
# docstring's first sentence.


class SchemaTagMissing(ImproperlyConfigured):
    """An API view without a ``schema_tag``, or with one that is not declared
    in ``SPECTACULAR_SETTINGS["TAGS"]``: the schema is not generated."""


def declared_tags() -> list[str]:
    """The tags the schema declares, in their order."""
    return [tag["name"] for tag in spectacular_settings.TAGS]


def view_tag(view: object) -> str:
    """The area (tag) a view declares in ``schema_tag``."""
    name = f"{type(view).__module__}.{type(view).__qualname__}"
    tag = getattr(view, "schema_tag", None)
    if tag is None:
        raise SchemaTagMissing(
            f"{name} declares no schema_tag: give it (or its module's base view) schema_tag = one of {declared_tags()}"
        )
    if tag not in declared_tags():
        raise SchemaTagMissing(
            f"{name}.schema_tag is {tag!r}, not a tag of SPECTACULAR_SETTINGS['TAGS'] ({declared_tags()})"
        )
    return str(tag)


def first_sentence(text: str) -> str:
    """The first sentence of a docstring, on one line, without its full stop."""
    line = " ".join(text.split())
    match = re.match(r"(.+?[.:;])(\s|$)", line)
    return (match.group(1) if match else line).rstrip(".:;")


class ApproveAutoSchema(AutoSchema):
    def get_tags(self) -> list[str]:
        return [view_tag(self.view)]

    def get_summary(self) -> str | None:
        # Reached when the method's @extend_schema gives no summary (its
        # override of get_summary returns the one it gives).
        summary = super().get_summary()
        if summary:
            return summary
        description = self.get_description()
        return first_sentence(description) if description else None

    def _get_request_body(self, direction: Literal["request", "response"] = "request") -> Any:
        # A POST or PUT needs its body (drf-spectacular marks one required
        # only when its serializer has a required field, never a body given
        # as a schema: the bundle, the ranges, the peer weights), except where
        # leaving it out means something (OPTIONAL_BODIES). A PATCH's fields
        # are all optional.
        body = super()._get_request_body(direction)
        if body is not None and self.method in ("POST", "PUT") and self.get_operation_id() not in OPTIONAL_BODIES:
            body["required"] = True
        return body

    def _map_serializer(self, serializer: object, direction: str, bypass_extensions: bool = False) -> dict:
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        closed = isinstance(force_instance(serializer), CLOSED_REQUESTS)
        if direction == "request" and closed and schema.get("type") == "object":
            schema["additionalProperties"] = False
        return schema

    def _get_paginator(self) -> Any:
        # Views built on PaginatedListMixin paginate their GET lists by hand
        # (they are APIViews, without a pagination_class): document the
        # {count, next, previous, results} envelope and the page parameter.
        if self.method == "GET" and getattr(self.view, "paginated_list", False):
            return pagination_class()
        return super()._get_paginator()

    def _get_response_bodies(self, direction: Literal["request", "response"] = "response") -> Any:
        # The success responses come from the view or its @extend_schema
        # (which replaces get_response_serializers, so the errors cannot be
        # added there); the error responses are added here, for every view.
        bodies = super()._get_response_bodies(direction)
        for code, response in self.error_responses().items():
            if str(code) not in bodies:
                bodies[str(code)] = self._get_response_for_code(response, str(code), direction=direction)
        return bodies

    def error_responses(self) -> dict[int, OpenApiResponse]:
        """The errors this operation can answer with (FORMATS.md, REST API)."""
        responses = {}
        writes = self.method in ("POST", "PUT", "PATCH", "DELETE")
        if writes:
            responses[400] = VALIDATION_ERROR
        if self.get_auth():
            responses[401] = error("Not authenticated.")
            responses[403] = error("Authenticated, but this role may not do it (or CSRF failed).")
        if "{" in self.path:
            responses[404] = error("Not found, or not a member of the study (its existence is never revealed).")
        if self._get_paginator() is not None:
            # workspace.api.pagination: a malformed ?page= (empty, repeated, not a number from 1)
            responses[400] = VALIDATION_ERROR
            responses.setdefault(404, error("No such page of the list."))
        if writes:
            # Answered before the view runs: by limits.BodySizeLimitMiddleware,
            # and by DRF for a body that is not JSON, a form or multipart.
            responses[413] = error("The request body is over this operation's size limit; the detail gives both.")
            if self.method != "DELETE":
                reads = ", ".join(parser.media_type for parser in self.view.get_parsers())
                responses[415] = error(f"The body's Content-Type is not one this operation reads ({reads}).")
        # Phases belong to studies (an import's phase problems are 400s).
        if (writes and "{study_id}" in self.path) or self.path.endswith(("/results/", "/scores/")):
            responses[409] = error("The study's phase (or the run's status) does not allow it; the detail says why.")
        return dict(sorted(responses.items()))


# --- links between operations (OpenAPI 3 `links`) -----------------------------------
# Each create answer (201, 202) links to the operations on the object it made,
# so that clients (and Schemathesis's stateful tests) can chain the calls:
# the created object's key goes into the path parameter that follows its
# collection in the target's path (``studies/{study_id}/...`` after
# ``studies/``), and the parameters the create's own path shares with the
# target are passed on as they were (``$request.path.study_id``).


@dataclass(frozen=True)
class Made:
    """What a create answer made: the collection it belongs to, the JSON
    pointer of its key in the answer, and other path prefixes of operations
    on it (a member's inputs, your own inputs once you are an expert)."""

    collection: str
    pointer: str = "/id"
    also: tuple[str, ...] = ()


# Creates whose object does not live under the create's own path, or whose key
# is not the answer's ``id``, and other answers that carry an object; any
# other create answering with an ``id`` makes an object of its own path's
# collection.
MADE = {
    (f"{API}/auth/token/", "201"): Made(f"{API}/auth/tokens/"),
    (f"{API}/studies/import/", "201"): Made(f"{API}/studies/"),
    # A study's copy: the new study, not an object under the copied one's path.
    (f"{API}/studies/{{study_id}}/copy/", "201"): Made(f"{API}/studies/"),
    (f"{API}/studies/{{study_id}}/runs/", "202"): Made(f"{API}/runs/", also=(f"{API}/studies/{{study_id}}/runs/",)),
    # Taking the expert role yourself: the membership, your inputs.
    (f"{API}/studies/{{study_id}}/members/", "201"): Made(
        f"{API}/studies/{{study_id}}/members/",
        pointer="/username",
        also=(f"{API}/studies/{{study_id}}/inputs/", f"{API}/studies/{{study_id}}/my/"),
    ),
    # Inviting someone else: the invitation.
    (f"{API}/studies/{{study_id}}/members/", "202"): Made(
        f"{API}/studies/{{study_id}}/invitations/", pointer="/invitation/id"
    ),
    # A revision round, named by its number.
    (f"{API}/studies/{{study_id}}/rounds/", "201"): Made(f"{API}/studies/{{study_id}}/rounds/", pointer="/number"),
    # A webhook lives under webhooks/, not under its study; a test delivery in its webhook's log.
    (f"{API}/studies/{{study_id}}/webhooks/", "201"): Made(f"{API}/webhooks/"),
    (f"{API}/webhooks/{{webhook_id}}/test/", "202"): Made(f"{API}/webhooks/{{webhook_id}}/deliveries/"),
    # Not a create, but the study in its new phase, where other operations open.
    (f"{API}/studies/{{study_id}}/transitions/", "200"): Made(f"{API}/studies/"),
    # Self sign-up (accounts): the link mailed, then the account, which asks for a token.
    (f"{API}/accounts/signup/", "202"): Made(f"{API}/accounts/signup/complete/"),
    (f"{API}/accounts/signup/complete/", "201"): Made(f"{API}/accounts/me/"),
}

# A new study's designer opens its voting (a 409 names what is missing).
OPEN_VOTING = (
    "OpenVoting",
    f"{API}/studies/{{study_id}}/transitions/",
    "post",
    {"study_id": "$response.body#/id"},
    {"to": "voting"},
)
# Links that also fill part of the request body (merged into the generated
# body), from the answer or with a constant: (source path, status) → [(name,
# target path, target method, parameters, body)].
# (name, target path, target method, parameters, body)
_BodyLink = tuple[str, str, str, dict[str, str], dict[str, str]]
BODY_LINKS: dict[tuple[str, str], list[_BodyLink]] = {
    # The mailed token goes into the next step (it is in the mail, not in this answer).
    (f"{API}/accounts/signup/", "202"): [("CompleteSignUp", f"{API}/accounts/signup/complete/", "post", {}, {})],
    # The new account asks for an API token with its password.
    (f"{API}/accounts/signup/complete/", "201"): [
        ("CreateAToken", f"{API}/auth/token/", "post", {}, {"username": "$response.body#/username"})
    ],
    (f"{API}/studies/", "201"): [
        # The designer takes the expert role in their new study.
        (
            "JoinAsExpert",
            f"{API}/studies/{{study_id}}/members/",
            "post",
            {"study_id": "$response.body#/id"},
            {"username": "$response.body#/designer"},
        ),
        OPEN_VOTING,
    ],
    (f"{API}/studies/import/", "201"): [OPEN_VOTING],
    (f"{API}/studies/{{study_id}}/copy/", "201"): [OPEN_VOTING],
    (f"{API}/studies/{{study_id}}/attributes/", "201"): [
        (
            "AddMetricToIt",
            f"{API}/studies/{{study_id}}/metrics/",
            "post",
            {"study_id": "$request.path.study_id"},
            {"attribute": "$response.body#/name"},
        ),
    ],
}

METHODS = ("get", "put", "post", "patch", "delete")


def _operations(paths: dict) -> list[tuple[str, str, dict]]:
    return [(path, method, item[method]) for path, item in paths.items() for method in METHODS if method in item]


def _path_parameters(path: str) -> list[str]:
    return re.findall(r"{([^}]+)}", path)


def _resolved(schema: dict, components: dict) -> dict:
    ref = schema.get("$ref", "")
    return components.get(ref.rpartition("/")[2], {}) if ref else schema


def _made(path: str, status: str, response: dict, components: dict) -> Made | None:
    if (path, status) in MADE:
        return MADE[(path, status)]
    if status not in ("201", "202"):
        return None
    body = response.get("content", {}).get("application/json", {}).get("schema", {})
    return Made(path) if "id" in _resolved(body, components).get("properties", {}) else None


def _link_parameters(source: str, made: Made, target: str, method: str) -> dict[str, str] | None:
    """The parameters of a link from a create at ``source`` to an operation at
    ``target``, or None when the target is not an operation on what it made."""
    for prefix in (made.collection, *made.also):
        if not target.startswith(prefix):
            continue
        rest = target[len(prefix) :]
        key = re.match(r"{([^}]+)}/", rest)
        # In the collection, the operations on one of its objects and its list
        # (not a sibling such as studies/import/, nor another create).
        if prefix == made.collection and key is None and (rest or method != "get"):
            continue
        parameters = {}
        for name in _path_parameters(target):
            if key is not None and name == key.group(1):
                parameters[name] = f"$response.body#{made.pointer}"
            elif name in _path_parameters(source):
                parameters[name] = f"$request.path.{name}"
            else:
                return None  # a key this answer does not give (another object's)
        return parameters
    return None


def postprocess_links(result: dict, generator: object, request: object, public: bool) -> dict:
    """drf-spectacular postprocessing hook: add the ``links`` of every create answer."""
    paths = result.get("paths", {})
    components = result.get("components", {}).get("schemas", {})
    operations = _operations(paths)
    for source, source_method, operation in operations:
        if source_method != "post":
            continue
        for status, response in operation.get("responses", {}).items():
            made = _made(source, status, response, components)
            if made is None:
                continue
            links = {}
            for target, method, target_operation in operations:
                parameters = None if target_operation is operation else _link_parameters(source, made, target, method)
                if parameters is not None:
                    links[target_operation["operationId"]] = {
                        "operationId": target_operation["operationId"],
                        "parameters": parameters,
                        "description": f"{method.upper()} {target} on what this made",
                    }
            for name, target, method, parameters, body in BODY_LINKS.get((source, status), ()):
                links[name] = {
                    "operationId": paths[target][method]["operationId"],
                    "parameters": parameters,
                    "requestBody": body,
                    "description": f"{method.upper()} {target} with a body taken from this answer",
                }
            if links:
                response["links"] = links
    return result


# --- what generators and linters need beyond drf-spectacular's output ---------------

# The headers the server sends, per status code: (name, required, description).
# Location: required once every create sends it (issue 18, item 4).
RESPONSE_HEADERS = {
    "201": [("Location", True, "The URL of what was created.")],
    "202": [("Location", True, "The URL of what was started (the run) or sent (the invitation).")],
    "401": [("WWW-Authenticate", True, "The scheme to authenticate with: `Token`.")],
    "429": [("Retry-After", True, "The seconds to wait before trying again.")],
}


# Headers of one operation's answers beyond those: (name, required, description).
OPERATION_HEADERS = {
    ("v1_runs_results_retrieve", "200"): [
        (
            "Link",
            False,
            'With individual=true and more candidates to come: `<URL>; rel="next"`, the next page '
            "(`?individual=true&cursor=N`).",
        )
    ],
}


def _nullable_types(schema: dict, components: dict) -> set[str | None]:
    """The types of the schemas that a nullable ``allOf`` or ``oneOf`` refers to
    (None for one without a type, such as drf-spectacular's NullEnum)."""
    types = set()
    for sub in schema.get("allOf", []) + schema.get("oneOf", []):
        resolved = _resolved(sub, components)
        if resolved.get("enum") == [None]:
            continue  # NullEnum: null, which `nullable` allows anyway
        types.add(resolved.get("type"))
    return types


def _fix_nullable(node: object, components: dict) -> None:
    """OpenAPI 3.0 wants a ``type`` beside ``nullable``: give a nullable
    reference (``allOf``/``oneOf`` of components) the type of what it refers
    to; and it has no list of types: ``[X, "null"]`` becomes X or null."""
    if isinstance(node, dict):
        _type_list_as_any_of(node)
        _nullable_ref_as_any_of(node)
        _nullable_type_add(node, components)
        for value in node.values():
            _fix_nullable(value, components)
    elif isinstance(node, list):
        for value in node:
            _fix_nullable(value, components)


def _type_list_as_any_of(node: dict) -> None:
    """A schema typed ``[X, "null"]`` becomes ``anyOf`` of its X schema and
    NullEnum."""
    kinds = node.get("type")
    if isinstance(kinds, list) and "null" in kinds and len(kinds) == 2:
        # OpenAPI 3.1's ["string", "null"] (inline schemas): in 3.0, the
        # value's schema or null (as drf-spectacular's NullEnum says it),
        # which plain JSON Schema validators read the same way.
        value = {key: node.pop(key) for key in list(node) if key not in ("description", "readOnly")}
        value["type"] = next(kind for kind in kinds if kind != "null")
        node["anyOf"] = [value, ref("NullEnum")]


def _nullable_ref_as_any_of(node: dict) -> None:
    """A nullable schema whose ``allOf``/``oneOf`` is one component
    reference becomes ``anyOf`` of that reference and NullEnum."""
    single = [key for key in ("allOf", "oneOf") if isinstance(node.get(key), list) and len(node[key]) == 1]
    if node.get("nullable") and single and "$ref" in node[single[0]][0]:
        # A nullable reference to a component: the component or null
        # (anyOf with NullEnum). Generated clients (openapi-python-client)
        # read `allOf` + `nullable` as never null and fail on a null.
        node.pop("nullable")
        node.pop("type", None)
        node["anyOf"] = [node.pop(single[0])[0], ref("NullEnum")]


def _nullable_type_add(node: dict, components: dict) -> None:
    """A nullable schema without a ``type`` gets the one type of the schemas
    it refers to, when they have exactly one."""
    if node.get("nullable") and "type" not in node:
        types = _nullable_types(node, components)
        if len(types) == 1 and None not in types:
            node["type"] = types.pop()


def postprocess_metadata(result: dict, generator: object, request: object, public: bool) -> dict:
    """drf-spectacular postprocessing hook: a type beside every ``nullable``,
    the response headers the server sends, and ``security: []`` on the
    operations that need no credentials (the token request)."""
    components = result.get("components", {}).get("schemas", {})
    components.setdefault("NullEnum", {"enum": [None]})  # (drf-spectacular's, for null in anyOf)
    _fix_nullable(components, components)
    for _path, _method, operation in _operations(result.get("paths", {})):
        _fix_nullable(operation, components)
        operation.setdefault("security", [])
        for status, response in operation.get("responses", {}).items():
            if status == "429" and not response.get("description"):
                response["description"] = "Too many requests: try again after `Retry-After` seconds."
            headers = [
                *RESPONSE_HEADERS.get(status, ()),
                *OPERATION_HEADERS.get((operation["operationId"], status), ()),
            ]
            for name, required, description in headers:
                response.setdefault("headers", {})[name] = {
                    "description": description,
                    "required": required,
                    "schema": {"type": "integer" if name == "Retry-After" else "string"},
                }
    return result
