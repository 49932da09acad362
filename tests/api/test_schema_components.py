"""The schema says exactly what the server takes and gives (issue 18, items 1
and 2): JSON bodies only (the uploads excepted), required bodies marked
required, named components where generators would otherwise invent names
(the documents, the bundle, the errors), judgments typed, a licence.

Schema-level tests read ``/api/schema/``; the others check that the server
does what the schema says."""

import copy
import re

import jsonschema
import pytest

from workspace.api.schema import OPTIONAL_BODIES
from workspace.models import AttributeJudgment, Invitation, Phase, Study

API = "/api/v1"
METHODS = ("get", "put", "post", "patch", "delete")
REF = "#/components/schemas/"
UPLOADS = {("/api/v1/studies/{study_id}/predictions/", "post")}


@pytest.fixture
def schema(client, db):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return response.json()


def _operations(schema):
    return [
        (path, method, item[method]) for path, item in schema["paths"].items() for method in METHODS if method in item
    ]


def _ref(name):
    return {"$ref": REF + name}


def _body_schema(operation, media_type="application/json"):
    return operation["requestBody"]["content"][media_type]["schema"]


def _answer_schema(operation, status="200"):
    return operation["responses"][status]["content"]["application/json"]["schema"]


def _json_schema(schema, name):
    """The component ``name`` as plain JSON Schema (``nullable`` as a null
    type), with the schema's components beside it so that its references
    resolve."""
    components = copy.deepcopy(schema["components"])

    def plain(node):
        if isinstance(node, dict):
            if node.pop("nullable", False) and isinstance(node.get("type"), str):
                node["type"] = [node["type"], "null"]
            for value in node.values():
                plain(value)
        elif isinstance(node, list):
            for value in node:
                plain(value)

    plain(components)
    return {**components["schemas"][name], "components": components}


# --- item 1: JSON only, the uploads excepted ------------------------------------------


def test_only_the_uploads_take_other_bodies_than_json(schema):
    bodies = {}
    for path, method, operation in _operations(schema):
        if "requestBody" in operation:
            bodies[(path, method)] = sorted(operation["requestBody"]["content"])
    assert len(bodies) > 20
    for key, media_types in bodies.items():
        if key in UPLOADS:
            assert media_types == ["application/vnd.apache.parquet", "multipart/form-data", "text/csv"], key
        else:
            assert media_types == ["application/json"], key
    upload = schema["paths"]["/api/v1/studies/{study_id}/predictions/"]["post"]["requestBody"]["content"]
    assert upload["multipart/form-data"]["schema"] == _ref("PredictionUploadRequest")
    assert upload["text/csv"]["schema"]["format"] == "binary"
    # The 415 says what each operation reads.
    votes = schema["paths"]["/api/v1/studies/{study_id}/my/votes/"]["put"]["responses"]["415"]
    assert "(application/json)" in votes["description"]


@pytest.mark.parametrize(
    "path, body",
    [
        ("/studies/", "title=Formed"),
        ("/studies/{study}/attributes/", "name=Speed"),
        ("/studies/{study}/invitations/", "username=dora"),
        ("/auth/token/", "username=alice&password=x"),
    ],
)
def test_a_form_body_to_a_json_endpoint_is_a_415_naming_json(api, cast, make_study, path, body):
    study = make_study(Phase.DRAFT).study
    client = api(cast.alice)
    url = API + path.format(study=study.pk)
    before = (Study.objects.count(), study.attributes.count(), Invitation.objects.count())
    for content_type in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz"):
        response = client.generic("POST", url, body, content_type=content_type)
        assert response.status_code == 415, response.content
        media_type = content_type.split(";")[0]
        assert response.json()["detail"] == (
            f'Unsupported media type "{media_type}": this operation reads application/json only '
            "(send the body with that Content-Type)."
        )
    assert (Study.objects.count(), study.attributes.count(), Invitation.objects.count()) == before
    # The same body in JSON is read.
    fields = dict(pair.split("=") for pair in body.split("&"))
    assert client.post(url, fields, format="json").status_code in (201, 400)


# --- item 2: required bodies ---------------------------------------------------------


def test_request_bodies_are_required_where_the_server_needs_one(schema):
    optional = []
    for path, method, operation in _operations(schema):
        if "requestBody" not in operation:
            continue
        required = operation["requestBody"].get("required", False)
        if method in ("post", "put") and operation["operationId"] not in OPTIONAL_BODIES:
            assert required is True, f"{method} {path}"
        if not required:
            optional.append(operation["operationId"])
    # A PATCH changes the fields it gives; the three optional ones mean something empty.
    assert sorted(optional) == sorted(
        [*OPTIONAL_BODIES, *(op["operationId"] for _, m, op in _operations(schema) if m == "patch")]
    )
    ranges = schema["paths"]["/api/v1/studies/{study_id}/my/ranges/"]["put"]["requestBody"]
    assert ranges["required"] is True and ranges["content"]["application/json"]["schema"] == _ref("Ranges")


# --- item 2: named components ----------------------------------------------------------


def test_every_400_refers_to_the_one_validation_error_and_other_errors_to_the_error_body(schema):
    seen = 0
    for path, method, operation in _operations(schema):
        for status, response in operation["responses"].items():
            if not status.startswith(("4", "5")):
                continue
            label = f"{method} {path} {status}"
            assert list(response["content"]) == ["application/json"], label
            expected = _ref("ValidationError") if status == "400" else _ref("ErrorBody")
            assert response["content"]["application/json"]["schema"] == expected, label
            seen += status == "400"
    assert seen > 30
    components = schema["components"]["schemas"]
    # The envelope workspace.api.exceptions answers with: fields required in a 400's only.
    assert components["ValidationError"]["required"] == ["code", "detail", "fields"]
    assert components["ErrorBody"]["required"] == ["code", "detail"]
    for name in ("ValidationError", "ErrorBody"):
        properties = components[name]["properties"]
        assert properties["code"]["type"] == properties["detail"]["type"] == "string"
        assert properties["fields"]["additionalProperties"] == {"type": "array", "items": {"type": "string"}}


@pytest.mark.parametrize(
    "path, method, where, name",
    [
        ("/api/v1/runs/{run_id}/results/", "get", "200", "ResultsDocument"),
        ("/api/v1/runs/{run_id}/candidates/{name}/scores/", "get", "200", "CandidateScores"),
        ("/api/v1/studies/{study_id}/predictions/{id}/evaluation/", "get", "200", "EvaluationDocument"),
        ("/api/v1/studies/{study_id}/export/", "get", "200", "StudyBundle"),
        ("/api/v1/studies/import/", "post", "request", "StudyBundle"),
        ("/api/v1/studies/{study_id}/my/ranges/", "get", "200", "Ranges"),
        ("/api/v1/studies/{study_id}/my/ranges/", "put", "request", "Ranges"),
        ("/api/v1/studies/{study_id}/my/peer-weights/", "put", "request", "PeerWeights"),
        ("/api/v1/studies/{study_id}/my/peer-weights/", "get", "200", "PeerWeights"),
    ],
)
def test_named_components_are_used_by_their_operations(schema, path, method, where, name):
    operation = schema["paths"][path][method]
    found = _body_schema(operation) if where == "request" else _answer_schema(operation, where)
    assert found == _ref(name)


def test_the_named_components_say_what_they_hold(schema):
    components = schema["components"]["schemas"]
    formats = {
        "ResultsDocument": "ResultsFormat",
        "EvaluationDocument": "EvaluationFormat",
        "StudyBundle": "BundleFormat",
    }
    for document, name in formats.items():
        assert components[document]["properties"]["format"] == _ref(name)
    assert components["ResultsFormat"]["enum"] == ["approve-results/1"]
    assert components["EvaluationFormat"]["enum"] == ["approve-evaluation/1"]
    assert components["BundleFormat"]["enum"] == ["approve-study/1"]
    bundle = components["StudyBundle"]
    assert bundle["required"] == ["format", "title"] and bundle["additionalProperties"] is False
    # Every top-level field the importer reads, no other.
    from workspace.bundles import TOP_LEVEL

    assert set(bundle["properties"]) == TOP_LEVEL
    assert components["CandidateScores"]["additionalProperties"]["additionalProperties"] == {"type": "number"}


def test_no_component_name_ends_in_a_digit_and_none_repeats_another(schema):
    components = schema["components"]["schemas"]
    assert len(components) > 80
    assert [name for name in components if re.search(r"\d$", name)] == []
    assert all(re.fullmatch(r"[A-Z][A-Za-z]+", name) for name in components), sorted(components)
    # No two components are the same schema under two names (one class each).
    bodies = {}
    for name, component in components.items():
        key = repr(sorted(component.items()))
        assert key not in bodies, f"{name} repeats {bodies.get(key)}"
        bodies[key] = name
    # No component is named after an operation (generators' long names).
    assert not [name for name in components if name.startswith(("V1", "Api"))]


def test_nested_objects_of_the_documents_are_named_components(schema):
    """datamodel-code-generator names a nested object after its property and
    numbers repeats (the study's Metric model was ``Metric1``, ``Metric``
    taken by a list of metric names): the documents' nested objects and the
    lists of names are components."""
    components = schema["components"]["schemas"]
    results = components["ResultsDocument"]["properties"]
    assert results["candidates"]["items"] == _ref("ResultsCandidate")
    assert components["ResultsCandidate"]["properties"]["vetoes"]["items"] == _ref("Veto")
    assert results["disagreement"] == _ref("Disagreement")
    bundle = components["StudyBundle"]["properties"]
    for section, name in (
        ("attributes", "BundleAttribute"),
        ("metrics", "BundleMetric"),
        ("candidates", "BundleCandidate"),
    ):
        assert bundle[section]["items"] == _ref(name)
    assert bundle["votes"] == _ref("BundleVotes")
    assert components["VotesRequest"]["properties"]["metrics"]["items"] == _ref("Name")
    assert components["Name"] == {"type": "string", "maxLength": 100, "description": "a name in the study"}
    for name in ("Computation", "ComputationWriteRequest", "CatalogueEntry", "MeasurementSource"):
        assert components[name]["properties"]["parameters"] == _ref("ComputationParameters"), name
    # No nested object without a name, in any component.
    for name, component in components.items():
        for where, node in _walk(component):
            if where and node.get("type") == "object" and node.get("properties"):
                raise AssertionError(f"{name}{where}: a nested object without a component")


def _walk(node, where=""):
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            yield from _walk(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{where}/{index}")


def test_no_operation_has_an_inline_object_body(schema):
    """Objects in requests and answers are components, so generated classes
    have the component's name (lists and pages of components are fine)."""
    for path, method, operation in _operations(schema):
        media = [*operation.get("requestBody", {}).get("content", {}).values()]
        media += [m for response in operation["responses"].values() for m in response.get("content", {}).values()]
        for content in media:
            body = content["schema"]
            assert body.get("type") != "object" or "$ref" in body, f"{method} {path}"


def test_judgments_are_triples_or_objects(schema):
    components = schema["components"]["schemas"]
    assert components["Judgment"] == {
        "type": "array",
        "description": components["Judgment"]["description"],
        "minItems": 3,
        "maxItems": 3,
        "items": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        "example": ["Accuracy", "Efficiency", 3],
    }
    assert components["JudgmentObject"]["required"] == ["row", "column", "value"]
    assert components["JudgmentObject"]["additionalProperties"] is False
    taken = {"oneOf": [_ref("Judgment"), _ref("JudgmentObject")]}
    assert components["PrioritiesRequest"]["properties"]["judgments"]["items"] == taken
    assert components["LocalPriorityRequest"]["properties"]["judgments"]["items"] == taken
    # Answers give them as stored: triples.
    assert components["PrioritiesResponse"]["properties"]["judgments"]["items"] == _ref("Judgment")
    assert components["LocalPriorityResponse"]["properties"]["judgments"]["items"] == _ref("Judgment")
    assert components["StudyBundle"]["properties"]["priorities"]["additionalProperties"] == _ref("BundlePrioritisation")
    for name in ("BundlePrioritisation", "BundleLocalPrioritisation"):
        assert components[name]["properties"]["judgments"]["items"] == taken
        assert components[name]["properties"]["method"] == _ref("PrioritisationMethodEnum")
    assert components["PrioritisationMethodEnum"]["enum"] == ["direct", "ahp", "lpr"]


def test_the_licence_is_in_info(schema):
    assert schema["info"]["license"] == {"name": "Proprietary: all rights reserved"}


# --- the server does what the components say ---------------------------------------------


def _stored(expert):
    return sorted(
        (j.row.name, j.column.name, j.value) for j in AttributeJudgment.objects.filter(prioritisation__expert=expert)
    )


def test_both_forms_of_judgments_store_the_same(api, cast, make_study, schema):
    built = make_study(Phase.ASSESSMENT)
    triples = [["Accuracy", "Consistency", 3], ["Accuracy", "Efficiency", 5], ["Consistency", "Efficiency", 1 / 2]]
    objects = [{"row": r, "column": c, "value": v} for r, c, v in triples]
    url = f"{API}/studies/{built.study.pk}/my/priorities/"
    as_triples = api(cast.bob).put(url, {"method": "ahp", "judgments": triples}, format="json")
    as_objects = api(cast.carol).put(url, {"method": "ahp", "judgments": objects}, format="json")
    assert as_triples.status_code == as_objects.status_code == 200, (as_triples.content, as_objects.content)
    assert _stored(built.bob) == _stored(built.carol) == sorted((r, c, float(v)) for r, c, v in triples)
    # Both answer with the judgments as stored, triples, and the same weights.
    assert as_triples.json()["judgments"] == as_objects.json()["judgments"] == triples
    assert as_triples.json()["result"] == as_objects.json()["result"]
    # The answer is what the schema says.
    response = _json_schema(schema, "PrioritiesResponse")
    jsonschema.validate(as_objects.json(), response)
    # The request schema takes both forms, and the server refuses an object with other keys.
    request = _json_schema(schema, "PrioritiesRequest")
    jsonschema.validate({"method": "ahp", "judgments": [triples[0], objects[1]]}, request)
    wrong = [*objects[:2], {"row": "Consistency", "column": "Efficiency", "value": 2, "note": "x"}]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"method": "ahp", "judgments": wrong}, request)
    refused = api(cast.carol).put(url, {"method": "ahp", "judgments": wrong}, format="json")
    assert refused.status_code == 400
    fields = refused.json().get("fields", refused.json())
    assert fields == {"judgments[2]": ["must be [row, column, value] or an object with exactly row, column and value"]}
    assert _stored(built.carol) == _stored(built.bob)


def test_an_export_is_a_study_bundle_and_imports_as_one(api, cast, make_study, schema):
    built = make_study(Phase.CLOSED)
    client = api(cast.alice)
    bundle = client.get(f"{API}/studies/{built.study.pk}/export/").json()
    bundle_schema = _json_schema(schema, "StudyBundle")
    jsonschema.validate(bundle, bundle_schema)
    assert bundle["priorities"]["carol"]["judgments"]  # (the AHP expert's triples are in it)
    # A field the importer refuses, the schema refuses too.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**bundle, "colour": "red"}, bundle_schema)
    bundle.pop("designer")
    for section in ("experts", "votes", "priorities", "ranges", "peer_weights"):
        bundle.pop(section, None)
    bundle["phase"] = "draft"
    jsonschema.validate(bundle, bundle_schema)
    imported = client.post(f"{API}/studies/import/", bundle, format="json")
    assert imported.status_code == 201, imported.content
    assert imported.json()["title"] == built.study.title


def test_the_case_study_is_a_study_bundle(schema, case_study):
    jsonschema.validate(case_study, _json_schema(schema, "StudyBundle"))


def test_a_bundle_takes_judgments_as_objects_too(make_study):
    """The bundle's judgments go through the same services as the API's:
    written as objects, they import as the triples do (the command line's
    import, trusted with every expert's inputs)."""
    from workspace.bundles import study_export_bundle, study_import_bundle

    bundle = study_export_bundle(study=make_study(Phase.CLOSED).study)
    as_objects = copy.deepcopy(bundle)
    judgments = as_objects["priorities"]["carol"]["judgments"]
    as_objects["priorities"]["carol"]["judgments"] = [{"row": r, "column": c, "value": v} for r, c, v in judgments]
    assert len(judgments) == 3
    first = study_export_bundle(study=study_import_bundle(bundle=bundle))
    second = study_export_bundle(study=study_import_bundle(bundle=as_objects))
    assert second == first
    assert second["priorities"]["carol"]["judgments"] == judgments


def test_each_set_of_choices_is_one_enum_named_after_its_meaning(schema):
    components = schema["components"]["schemas"]
    enums = {name: component["enum"] for name, component in components.items() if "enum" in component}
    by_values = {}
    for name, values in enums.items():
        assert tuple(values) not in by_values, f"{name} repeats {by_values.get(tuple(values))}"
        by_values[tuple(values)] = name
    # A transition's `to` is a phase; a new attribute's kind is an attribute's kind.
    assert components["TransitionRequest"]["properties"]["to"] == {"$ref": REF + "PhaseEnum"}
    assert components["AttributeWriteRequest"]["properties"]["kind"]["allOf"] == [{"$ref": REF + "AttributeKindEnum"}]
    # A query parameter's enum is a component too (not a class named after its operation).
    evaluation = schema["paths"]["/api/v1/studies/{study_id}/predictions/{id}/evaluation/"]["get"]
    threshold = next(p for p in evaluation["parameters"] if p["name"] == "threshold_method")
    assert threshold["schema"] == _ref("ThresholdMethodEnum")
    assert "fixed" in components["ThresholdMethodEnum"]["enum"]
    for path, method, operation in _operations(schema):
        for parameter in operation.get("parameters", []):
            assert "enum" not in parameter["schema"], f"{method} {path} {parameter['name']}"
