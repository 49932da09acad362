"""``Idempotency-Key`` on run launch and every create (issue 18, item 4;
docs/api.md, "Idempotency")."""

import re
from datetime import timedelta

import pytest

from engine.models import Run
from tests.fixtures import api_error, error_fields
from workspace import limits
from workspace.models import IdempotencyKey, Phase, Study

from .test_locations import CREATES, create_url, upload

pytestmark = pytest.mark.django_db

API = "/api/v1"


def keyed(key):
    return {"HTTP_IDEMPOTENCY_KEY": key}


def test_a_replayed_launch_answers_the_first_answer_and_starts_no_second_run(api, cast, make_study):
    study = make_study(Phase.CLOSED).study
    alice = api(cast.alice)
    first = alice.post(f"{API}/studies/{study.pk}/runs/", **keyed("launch-1"))
    assert first.status_code == 202 and "Idempotent-Replayed" not in first
    again = alice.post(f"{API}/studies/{study.pk}/runs/", **keyed("launch-1"))
    assert again.status_code == 202
    assert again.json() == first.json()
    assert again["Location"] == first["Location"]
    assert again["Idempotent-Replayed"] == "true"
    assert Run.objects.filter(study=study).count() == 1
    # without a key, or with another, a launch is a launch
    assert alice.post(f"{API}/studies/{study.pk}/runs/", **keyed("launch-2")).status_code == 202
    assert alice.post(f"{API}/studies/{study.pk}/runs/").status_code == 202
    assert Run.objects.filter(study=study).count() == 3


def test_the_same_key_with_another_body_is_a_409_and_does_nothing(api, cast):
    alice = api(cast.alice)
    first = alice.post(f"{API}/studies/", {"title": "One"}, format="json", **keyed("k"))
    assert first.status_code == 201
    other = alice.post(f"{API}/studies/", {"title": "Two"}, format="json", **keyed("k"))
    assert other.status_code == 409
    assert other.json() == api_error(
        "idempotency_conflict",
        "This Idempotency-Key was used for another request (method, path or body) in the last 24 hours: "
        "send a new key with a new request.",
    )
    assert list(Study.objects.values_list("title", flat=True)) == ["One"]
    # another path with the same body is another request too
    elsewhere = alice.post(
        f"{API}/studies/{first.json()['id']}/candidates/", {"title": "One"}, format="json", **keyed("k")
    )
    assert elsewhere.json()["code"] == "idempotency_conflict"


def test_the_body_is_compared_as_json_not_as_text(api, cast):
    alice = api(cast.alice)
    compact = alice.post(
        f"{API}/studies/", '{"title":"One","description":"d"}', content_type="application/json", **keyed("k")
    )
    spaced = alice.post(
        f"{API}/studies/", '{ "description": "d",  "title": "One" }', content_type="application/json", **keyed("k")
    )
    assert (compact.status_code, spaced.status_code) == (201, 201)
    assert spaced["Idempotent-Replayed"] == "true" and spaced.json() == compact.json()
    assert Study.objects.count() == 1


def test_keys_are_per_user(api, cast):
    alice, bob = api(cast.alice), api(cast.bob)
    mine = alice.post(f"{API}/studies/", {"title": "Alice's"}, format="json", **keyed("shared"))
    theirs = bob.post(f"{API}/studies/", {"title": "Bob's"}, format="json", **keyed("shared"))
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert "Idempotent-Replayed" not in theirs
    assert mine.json()["id"] != theirs.json()["id"]
    same_body = bob.post(f"{API}/studies/", {"title": "Alice's"}, format="json", **keyed("alice-only"))
    assert same_body.status_code == 201 and same_body.json()["id"] != mine.json()["id"]
    assert sorted(Study.objects.values_list("title", flat=True)) == ["Alice's", "Alice's", "Bob's"]


def test_a_key_is_new_again_after_24_hours(api, cast):
    alice = api(cast.alice)
    first = alice.post(f"{API}/studies/", {"title": "One"}, format="json", **keyed("daily"))
    IdempotencyKey.objects.update(
        created_at=IdempotencyKey.objects.get().created_at
        - timedelta(seconds=limits.IDEMPOTENCY_KEY_LIFETIME_SECONDS + 1)
    )
    later = alice.post(f"{API}/studies/", {"title": "One"}, format="json", **keyed("daily"))
    assert later.status_code == 201 and "Idempotent-Replayed" not in later
    assert later.json()["id"] != first.json()["id"]
    assert Study.objects.count() == 2
    assert IdempotencyKey.objects.count() == 1  # the expired row was pruned


def test_a_key_still_in_progress_is_a_409(api, cast):
    IdempotencyKey.objects.create(user=cast.alice, key="busy", request_hash="0" * 64)
    response = api(cast.alice).post(f"{API}/studies/", {"title": "One"}, format="json", **keyed("busy"))
    assert response.json() == api_error(
        "idempotency_conflict",
        "A request with this Idempotency-Key is still in progress: try again once it has finished.",
    )
    assert not Study.objects.exists()
    # a claim older than a request may take has lapsed (its worker died)
    IdempotencyKey.objects.update(
        created_at=IdempotencyKey.objects.get().created_at - timedelta(seconds=limits.IDEMPOTENCY_CLAIM_SECONDS + 1)
    )
    assert api(cast.alice).post(f"{API}/studies/", {"title": "One"}, format="json", **keyed("busy")).status_code == 201


def test_a_refusal_is_not_kept_so_the_key_may_try_again(api, cast, make_study):
    study = make_study(Phase.ASSESSMENT).study
    alice = api(cast.alice)
    refused = alice.post(f"{API}/studies/{study.pk}/runs/", **keyed("launch"))
    assert refused.status_code == 409 and refused.json()["code"] == "phase_conflict"
    assert not IdempotencyKey.objects.exists()
    invalid = alice.post(f"{API}/studies/", {"title": ""}, format="json", **keyed("create"))
    assert invalid.status_code == 400 and not IdempotencyKey.objects.exists()
    assert alice.post(f"{API}/studies/", {"title": "Fixed"}, format="json", **keyed("create")).status_code == 201


@pytest.mark.parametrize(
    "key, message",
    [
        ("", "must be 1 to 255 visible ASCII characters, got 0 characters"),
        (
            "k" * (limits.IDEMPOTENCY_KEY_MAX_LENGTH + 1),
            "must be 1 to 255 visible ASCII characters, got 256 characters",
        ),
        ("clé", "must be 1 to 255 visible ASCII characters, got 3 characters with some not ASCII"),
    ],
)
def test_a_bad_key_is_a_400_naming_the_header(key, message, api, cast):
    response = api(cast.alice).post(f"{API}/studies/", {"title": "One"}, format="json", **keyed(key))
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert error_fields(response) == {"Idempotency-Key": [message]}
    assert not Study.objects.exists()


def test_the_schema_declares_the_key_the_api_takes(api, cast):
    # Schemathesis sent an empty key, which the schema allowed and the API refuses (issue 29, finding 11).
    schema = api(cast.alice).get("/api/schema/?format=json").json()
    declared = [
        parameter["schema"]
        for operations in schema["paths"].values()
        for operation in operations.values()
        for parameter in operation.get("parameters", [])
        if parameter["name"] == "Idempotency-Key"
    ]
    assert len(declared) >= 10
    assert all(
        found
        == {
            "type": "string",
            "minLength": 1,
            "maxLength": limits.IDEMPOTENCY_KEY_MAX_LENGTH,
            "pattern": "^[!-~]([ -~]*[!-~])?$",
        }
        for found in declared
    )
    pattern = re.compile(declared[0]["pattern"])
    # Whatever the pattern matches, the API takes: every visible ASCII character, spaces inside.
    for key in ("a", "a b", "~!", "k" * limits.IDEMPOTENCY_KEY_MAX_LENGTH):
        assert pattern.fullmatch(key)
    for key in ("", " ", " a", "clé", "a\tb"):
        assert not pattern.fullmatch(key)


def test_the_longest_key_is_accepted(api, cast):
    key = "k" * limits.IDEMPOTENCY_KEY_MAX_LENGTH
    alice = api(cast.alice)
    assert alice.post(f"{API}/studies/", {"title": "One"}, format="json", **keyed(key)).status_code == 201
    assert alice.post(f"{API}/studies/", {"title": "One"}, format="json", **keyed(key))["Idempotent-Replayed"] == "true"


# The token request and the two sign-up steps are anonymous: a key is per user, they have none.
ANONYMOUS = ("/auth/token/", "/accounts/signup/", "/accounts/signup/complete/")
AUTHENTICATED_CREATES = [create for create in CREATES if not create.path.endswith(ANONYMOUS)]


@pytest.mark.parametrize("create", AUTHENTICATED_CREATES, ids=lambda c: f"{c.path}-{c.status}")
def test_every_create_honours_the_key(create, api, cast, make_study, case_study, settings, tmp_path, monkeypatch):
    built = make_study(create.phase)
    url = create_url(create, built, cast.alice, (tmp_path, settings, monkeypatch))

    def body():
        if create.body == "<bundle>":
            bundle = {**case_study, "designer": "alice", "phase": "draft"}
            for section in ("votes", "priorities", "ranges", "peer_weights"):
                del bundle[section]
            return bundle
        return upload() if create.body == "<upload>" else create.body

    alice = api(cast.alice)
    first = alice.post(url, body(), format=create.fmt, **keyed("create-once"))
    assert first.status_code == create.status, first.content[:300]
    again = alice.post(url, body(), format=create.fmt, **keyed("create-once"))
    assert (again.status_code, again["Idempotent-Replayed"]) == (create.status, "true")
    assert again.json() == first.json() and again["Location"] == first["Location"]


def test_the_schema_declares_the_header_on_every_create(api, cast):
    schema = api(cast.alice).get("/api/schema/?format=json").json()
    for create in AUTHENTICATED_CREATES:
        parameters = schema["paths"][create.path]["post"].get("parameters", [])
        assert [p["name"] for p in parameters if p["in"] == "header"] == ["Idempotency-Key"], create.path
        assert "409" in schema["paths"][create.path]["post"]["responses"], create.path  # idempotency_conflict
