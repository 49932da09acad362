"""Bounded work per request (issue 11, item 1): the audit's requests and the
limits of workspace/limits.py.

Each refused request is answered with a 4xx naming the limit, writes
nothing, and takes well under a second (measured around the request alone).
"""

import json
import runpy
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.fixtures import api_error, error_fields
from workspace import limits
from workspace.models import ApiToken, Phase

API = "/api/v1"
ROOT = Path(__file__).resolve().parents[2]
_TOO_DEEP = f"JSON nested deeper than {limits.JSON_MAX_DEPTH} levels (the limit): refused before decoding"
# A body that cannot be parsed: the parse_error code, its message as detail and under non_field_errors.
DEPTH_REFUSED = {"code": "parse_error", "detail": _TOO_DEEP, "fields": {"non_field_errors": [_TOO_DEEP]}}


# What the timings below catch: the audit's refusals that took minutes (a
# body parsed before its size or depth was checked). Not a speed target
# (those are measured side by side in bench/): a loaded CI machine must not
# fail them, so the bound is generous.
PATHOLOGICAL_SECONDS = 5


def timed(call, *args, **kwargs):
    """``call(*args, **kwargs)`` and the seconds it took."""
    start = time.perf_counter()
    response = call(*args, **kwargs)
    return response, time.perf_counter() - start


def post_raw(client, path, body, method="post", content_type="application/json"):
    """Send ``body`` (text or bytes) exactly as given, timed."""
    return timed(getattr(client, method), path, data=body, content_type=content_type)


def nested(depth):
    """A JSON array nested ``depth`` levels deep."""
    return "[" * depth + "]" * depth


def token_body(name_json):
    return '{"username": "alice", "password": "whatever", "name": ' + name_json + "}"


def bundle_body(description_json):
    return '{"format": "approve-study/1", "title": "deep", "description": ' + description_json + "}"


@pytest.fixture
def written(unchanged):
    """``with written(): ...`` fails if the block writes a study, an account
    or an API token."""
    from contextlib import contextmanager

    @contextmanager
    def check():
        tokens = ApiToken.objects.count()
        with unchanged():
            yield
        assert ApiToken.objects.count() == tokens, "the refused request created a token"

    return check


# --- JSON depth: the audit's 330 and 10,000 levels ------------------------------------


@pytest.mark.parametrize("depth", [330, 10_000])
def test_deep_json_to_the_token_endpoint_is_a_400_naming_the_limit(depth, api, cast, written):
    with written():
        response, seconds = post_raw(api(None), API + "/auth/token/", token_body(nested(depth)))
    assert response.status_code == 400, response.content
    assert response.json() == DEPTH_REFUSED
    assert seconds < PATHOLOGICAL_SECONDS


@pytest.mark.parametrize("depth", [330, 10_000])
def test_deep_json_to_the_import_is_a_400_naming_the_limit(depth, api, cast, written):
    client = api(cast.charlie)
    with written():
        response, seconds = post_raw(client, API + "/studies/import/", bundle_body(nested(depth)))
    assert response.status_code == 400, response.content
    assert response.json() == DEPTH_REFUSED
    assert seconds < PATHOLOGICAL_SECONDS


@pytest.mark.parametrize("depth", [330, 10_000])
def test_deep_json_to_the_import_anonymously_is_a_401_without_parsing(depth, api, cast, written):
    with written():
        response, seconds = post_raw(api(None), API + "/studies/import/", bundle_body(nested(depth)))
    assert response.status_code == 401
    assert response.json() == api_error("not_authenticated", "Authentication credentials were not provided.")
    assert seconds < PATHOLOGICAL_SECONDS


def test_the_deepest_json_allowed_is_parsed_and_one_level_more_is_refused(api, cast):
    """The token body's own object is one level: ``name`` may hold
    ``JSON_MAX_DEPTH - 1`` levels."""
    client = api(None)
    at_limit, _ = post_raw(client, API + "/auth/token/", token_body(nested(limits.JSON_MAX_DEPTH - 1)))
    assert at_limit.status_code == 400
    assert error_fields(at_limit) == {"name": ["must be text, got list"]}  # parsed: the serializer saw it
    over, _ = post_raw(client, API + "/auth/token/", token_body(nested(limits.JSON_MAX_DEPTH)))
    assert over.status_code == 400
    assert over.json() == DEPTH_REFUSED


def test_brackets_inside_strings_are_not_nesting(api, cast):
    name = json.dumps('[{"\\' + "[" * 5000)  # brackets, a quote and a backslash, all text
    response, seconds = post_raw(api(None), API + "/auth/token/", token_body(name))
    assert response.status_code == 400
    assert error_fields(response) == {"name": ["Ensure this field has no more than 100 characters."]}
    assert seconds < PATHOLOGICAL_SECONDS


def test_normal_json_still_logs_in(api, cast):
    from tests.api.conftest import PASSWORD

    response = api(None).post(API + "/auth/token/", {"username": "alice", "password": PASSWORD}, format="json")
    assert response.status_code == 201
    assert ApiToken.objects.filter(user=cast.alice).count() == 1


def test_a_lone_surrogate_deep_in_a_document_is_still_refused(api, cast, written):
    body = bundle_body('{"a": ' * 20 + '"\\ud800"' + "}" * 20)
    client = api(cast.charlie)
    with written():
        response, _ = post_raw(client, API + "/studies/import/", body)
    assert response.status_code == 400
    message = "JSON parse error - the body contains a lone surrogate (\\ud800-\\udfff), which is not text"
    assert response.json() == {"code": "parse_error", "detail": message, "fields": {"non_field_errors": [message]}}


@pytest.mark.parametrize(
    "text, depth",
    [
        ("1", 0),
        ("[]", 1),
        ('{"a": [1, {"b": "]]]"}]}', 3),
        ('["\\"[[[", "\\\\", [[]]]', 3),
        ('{"a": "}}}}"', 1),
        ('"unterminated [[[', 0),
    ],
)
def test_json_depth_counts_brackets_outside_strings(text, depth):
    assert limits.json_depth(text) == depth


def test_json_depth_is_linear_even_for_unterminated_strings():
    """Escaped quotes after an unterminated one: a scan retried at every
    quote would take minutes on this megabyte."""
    text = '"' + '\\"' * 500_000
    _, seconds = timed(limits.json_depth, text)
    assert seconds < PATHOLOGICAL_SECONDS
    _, seconds = timed(limits.json_depth, "[" * 1_000_000)
    assert seconds < PATHOLOGICAL_SECONDS


# --- body size: the audit's 50 MB ---------------------------------------------------------

FIFTY_MB = 50 * limits.MB


def fifty_megabytes_of_json():
    return b'{"username": "alice", "password": "' + b"x" * FIFTY_MB + b'"}'


def test_a_50_mb_body_to_the_token_endpoint_is_a_413_naming_the_limit(api, cast, written):
    body = fifty_megabytes_of_json()
    with written():
        response, seconds = post_raw(api(None), API + "/auth/token/", body)
    assert response.status_code == 413
    assert response.json() == api_error(
        "request_too_large",
        f"The request body is {len(body)} bytes; the limit is {limits.BODY_MAX_BYTES} bytes (1 MB).",
    )
    assert seconds < PATHOLOGICAL_SECONDS


def test_a_50_mb_bundle_is_a_413_naming_the_import_limit(api, cast, written):
    body, client = fifty_megabytes_of_json(), api(cast.charlie)
    with written():
        response, seconds = post_raw(client, API + "/studies/import/", body)
    assert response.status_code == 413
    assert response.json() == api_error(
        "request_too_large",
        f"The request body is {len(body)} bytes; the limit is {limits.IMPORT_BODY_MAX_BYTES} bytes (10 MB).",
    )
    assert seconds < PATHOLOGICAL_SECONDS


def test_a_50_mb_form_to_the_login_page_is_a_413(client, cast, written):
    body = b"username=alice&password=" + b"x" * FIFTY_MB
    with written():
        response, seconds = post_raw(client, "/accounts/login/", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 413
    assert f"the limit is {limits.BODY_MAX_BYTES} bytes" in response.json()["detail"]
    assert seconds < PATHOLOGICAL_SECONDS


def test_a_bundle_between_the_two_limits_is_imported(api, cast, case_study):
    """An import may be larger than other requests: the case study padded to
    2 MB (with JSON whitespace) is accepted there, refused elsewhere. (charlie
    is staff: only staff may import inputs that other experts entered, and
    those count once each expert confirms them, so the study stays in
    assessment.)"""
    del case_study["designer"]
    case_study["phase"] = "assessment"
    cast.charlie.is_staff = True
    cast.charlie.save(update_fields=["is_staff"])
    body = json.dumps(case_study) + " " * (2 * limits.MB)
    imported, seconds = post_raw(api(cast.charlie), API + "/studies/import/", body)
    assert imported.status_code == 201, imported.content
    assert imported.json()["designer"] == "charlie"
    elsewhere, _ = post_raw(api(cast.charlie), API + "/studies/", body)
    assert elsewhere.status_code == 413


# --- list sizes: the audit's 40,000 vote names and 60,001 experts ------------------------------


def test_40000_vote_names_are_a_400_naming_the_limit(make_study, api, cast, written):
    built = make_study(Phase.VOTING)
    names = [f"name{i}" for i in range(40_000)]
    client, path = api(cast.bob), f"{API}/studies/{built.study.pk}/my/votes/"
    with written():
        response, seconds = timed(client.put, path, {"attributes": names, "metrics": names}, format="json")
    assert response.status_code == 400
    assert error_fields(response) == {
        "attributes": [f"too many attributes voted for: 40000 given, the limit is {limits.MAX_ATTRIBUTES}"],
        "metrics": [f"too many metrics voted for: 40000 given, the limit is {limits.MAX_METRICS}"],
    }
    assert seconds < PATHOLOGICAL_SECONDS
    # Votes within the limits still count.
    ok = client.put(path, {"attributes": ["Flexibility"]}, format="json")
    assert ok.status_code == 200
    assert ok.json() == {"attributes": ["Flexibility"], "metrics": []}


def sixty_thousand_experts():
    return {"format": "approve-study/1", "title": "crowd", "experts": [f"expert{i}" for i in range(60_001)]}


def test_an_import_of_60001_experts_is_a_400_naming_the_limit(api, cast, written):
    body, client = json.dumps(sixty_thousand_experts()), api(cast.charlie)
    with written():
        response, seconds = post_raw(client, API + "/studies/import/", body)
    assert response.status_code == 400
    assert error_fields(response) == {"experts": [f"too many experts: 60001 given, the limit is {limits.MAX_EXPERTS}"]}
    assert seconds < PATHOLOGICAL_SECONDS


def test_the_import_command_refuses_60001_experts(tmp_path, cast, written):
    path = tmp_path / "crowd.json"
    path.write_text(json.dumps(sixty_thousand_experts()))
    start = time.perf_counter()
    with written(), pytest.raises(CommandError) as refused:
        call_command("import_study", str(path), "--designer", "alice")
    assert time.perf_counter() - start < PATHOLOGICAL_SECONDS
    assert f"experts: too many experts: 60001 given, the limit is {limits.MAX_EXPERTS}" in str(refused.value)


E, A, M, C = limits.MAX_EXPERTS, limits.MAX_ATTRIBUTES, limits.MAX_METRICS, limits.MAX_CANDIDATES
PUT_MAX = limits.MEASUREMENTS_PER_PUT_MAX

LIST_INPUTS = [
    # (phase, path, body, expected errors)
    (
        Phase.DRAFT,
        "measurements/",
        [{"candidate": "J48", "metric": "AUC", "value": 0.5}] * (PUT_MAX + 1),
        {"measurements": [f"too many measurements: {PUT_MAX + 1} given, the limit is {PUT_MAX}"]},
    ),
    (
        Phase.ASSESSMENT,
        "my/ranges/",
        {f"metric{i}": [0, 1] for i in range(M + 1)},
        {"ranges": [f"too many ranges: {M + 1} given, the limit is {M}"]},
    ),
    (
        Phase.ASSESSMENT,
        "my/peer-weights/",
        {f"expert{i}": 0.001 for i in range(E + 1)},
        {"weights": [f"too many peer weights: {E + 1} given, the limit is {E}"]},
    ),
    (
        Phase.ASSESSMENT,
        "my/priorities/",
        {"method": "direct", "weights": {f"attribute{i}": 1 for i in range(A + 1)}},
        {"weights": [f"too many attribute weights: {A + 1} given, the limit is {A}"]},
    ),
    (
        Phase.ASSESSMENT,
        "my/priorities/",
        {"method": "ahp", "judgments": [["Accuracy", "Consistency", 3]] * (limits.judgments_max(A) + 1)},
        {
            "judgments": [
                f"too many judgments (one per pair of {A} attributes): {limits.judgments_max(A) + 1} given, "
                f"the limit is {limits.judgments_max(A)}"
            ]
        },
    ),
    (
        Phase.ASSESSMENT,
        "my/priorities/",
        {
            "method": "direct",
            "weights": {"Accuracy": 1, "Consistency": 1, "Efficiency": 1},
            "metric_priorities": {"Accuracy": {"method": "direct", "weights": {f"m{i}": 1 for i in range(M + 1)}}},
        },
        {"metric_priorities.Accuracy.weights": [f"too many metric weights: {M + 1} given, the limit is {M}"]},
    ),
]


@pytest.mark.parametrize("phase, path, body, errors", LIST_INPUTS, ids=lambda v: None)
def test_list_inputs_over_their_limit_are_400_naming_the_field(
    phase, path, body, errors, make_study, api, cast, written
):
    built = make_study(phase)
    client = api(cast.alice if path == "measurements/" else cast.bob)
    with written():
        response, seconds = timed(client.put, f"{API}/studies/{built.study.pk}/{path}", body, format="json")
    assert response.status_code == 400, response.content
    assert error_fields(response) == errors
    assert seconds < PATHOLOGICAL_SECONDS


# --- bundle limits ------------------------------------------------------------------------------


def small_bundle(**sections):
    return {"format": "approve-study/1", "title": "t", **sections}


def many(prefix, count, make=lambda name: {"name": name}):
    return [make(f"{prefix}{i}") for i in range(count)]


def measured(name, metrics):
    return {"name": name, "measurements": {f"m{i}": 1 for i in range(metrics)}}


BUNDLES_OVER = [
    *[
        (small_bundle(**{key: many(key, n + 1)}), {key: [f"too many {key}: {n + 1} given, the limit is {n}"]})
        for key, n in (("attributes", A), ("metrics", M), ("candidates", C))
    ],
    (
        small_bundle(candidates=[measured("c", M + 1)]),
        {"candidates[0].measurements": [f"too many measurements: {M + 1} given, the limit is {M}"]},
    ),
    (
        small_bundle(votes={"attributes": {"bob": [f"a{i}" for i in range(A + 1)]}}),
        {"votes.attributes.bob": [f"too many attributes voted for: {A + 1} given, the limit is {A}"]},
    ),
    (
        small_bundle(votes={"metrics": {f"e{i}": [] for i in range(E + 1)}}),
        {"votes.metrics": [f"too many experts: {E + 1} given, the limit is {E}"]},
    ),
    (
        small_bundle(
            attributes=many("a", 3), priorities={"bob": {"method": "ahp", "judgments": [["a0", "a1", 3]] * 4}}
        ),
        {"priorities.bob.judgments": ["too many judgments (one per pair of 3 attributes): 4 given, the limit is 3"]},
    ),
    (
        small_bundle(
            attributes=many("a", 1),
            metrics=many("m", 2),
            priorities={
                "bob": {"method": "direct", "metric_priorities": {"a": {"method": "ahp", "judgments": [[]] * 2}}}
            },
        ),
        {
            "priorities.bob.metric_priorities.a.judgments": [
                "too many judgments (one per pair of 2 metrics): 2 given, the limit is 1"
            ]
        },
    ),
    (
        small_bundle(ranges={"bob": {f"m{i}": [0, 1] for i in range(M + 1)}}),
        {"ranges.bob": [f"too many ranges: {M + 1} given, the limit is {M}"]},
    ),
    (
        small_bundle(peer_weights={"bob": {f"e{i}": 0.001 for i in range(E + 1)}}),
        {"peer_weights.bob": [f"too many peer weights: {E + 1} given, the limit is {E}"]},
    ),
    (
        small_bundle(priorities={f"e{i}": {} for i in range(E + 1)}),
        {"priorities": [f"too many experts: {E + 1} given, the limit is {E}"]},
    ),
    (
        # Every list within its limit, but together over the bundle's.
        small_bundle(candidates=many("c", limits.BUNDLE_MAX_ENTRIES // M + 1, lambda name: measured(name, M))),
        {
            "bundle": [
                "too many entries (measurements, vote names, weights, judgments, ranges and peer weights together): "
                f"{(limits.BUNDLE_MAX_ENTRIES // M + 1) * M} given, the limit is {limits.BUNDLE_MAX_ENTRIES}"
            ]
        },
    ),
]


@pytest.mark.parametrize("bundle, errors", BUNDLES_OVER, ids=lambda v: None)
def test_bundles_over_a_limit_are_refused_naming_the_field(bundle, errors, api, cast, written):
    client = api(cast.charlie)
    with written():
        response, seconds = timed(client.post, API + "/studies/import/", bundle, format="json")
    assert response.status_code == 400, response.content
    assert error_fields(response) == errors
    assert seconds < PATHOLOGICAL_SECONDS


def test_bundles_at_every_limit_pass_the_check():
    at_limit = small_bundle(
        experts=[f"e{i}" for i in range(E)],
        attributes=many("a", A),
        metrics=many("m", M),
        candidates=many("c", 100, lambda name: measured(name, M)),  # 20,000 measurements
        votes={"attributes": {"e0": [f"a{i}" for i in range(A)]}, "metrics": {"e0": [f"m{i}" for i in range(M)]}},
        priorities={f"e{i}": {"method": "ahp", "judgments": [[]] * limits.judgments_max(A)} for i in range(20)},
        ranges={"e0": {f"m{i}": [0, 1] for i in range(M)}},
        peer_weights={"e0": {f"e{i}": 0.001 for i in range(E)}},
    )
    assert 20_000 + A + M + 20 * limits.judgments_max(A) + M + E <= limits.BUNDLE_MAX_ENTRIES
    assert limits.bundle_check_limits(at_limit) is None


def test_shapes_the_import_refuses_are_left_to_it(api, cast):
    """Sizes only: a section of the wrong type reaches the import's own
    check and its message."""
    assert limits.bundle_check_limits(["not", "a", "bundle"]) is None
    response = api(cast.charlie).post(API + "/studies/import/", small_bundle(experts="bob"), format="json")
    assert response.status_code == 400
    assert error_fields(response) == {"experts": ["must be a list of usernames"]}


# --- gunicorn ------------------------------------------------------------------------------------


def test_gunicorn_configuration_reads_its_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    monkeypatch.setenv("GUNICORN_THREADS", "2")
    monkeypatch.setenv("GUNICORN_MAX_REQUESTS", "500")
    config = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    assert (config["workers"], config["threads"], config["timeout"]) == (3, 2, 30)
    assert (config["max_requests"], config["max_requests_jitter"]) == (500, 50)
    assert config["accesslog"] == "-"
    assert (config["limit_request_line"], config["limit_request_fields"]) == (4094, 100)


def test_gunicorn_defaults_are_capped(monkeypatch):
    for name in ("WEB_CONCURRENCY", "GUNICORN_THREADS", "GUNICORN_TIMEOUT", "GUNICORN_MAX_REQUESTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("multiprocessing.cpu_count", lambda: 64)
    config = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    assert (config["workers"], config["threads"], config["graceful_timeout"]) == (8, 4, 30)
    assert (config["max_requests"], config["max_requests_jitter"]) == (1000, 100)


def test_the_image_and_the_compose_file_run_gunicorn_with_that_configuration():
    assert 'CMD ["gunicorn", "--config", "gunicorn.conf.py", "approve_site.wsgi"]' in (ROOT / "Dockerfile").read_text()
    assert "command: gunicorn --config gunicorn.conf.py approve_site.wsgi" in (ROOT / "docker-compose.yml").read_text()
