"""The webhooks API (docs/webhooks.md, "API"): the designer registers,
changes, deletes, tests and reads; the secret only in the create and rotate
answers; every other person 403 (a member) or 404 (anyone else), on every
endpoint."""

import pytest
from rest_framework.test import APIClient

from tests.fixtures import api_error, error_fields
from webhooks import payloads
from webhooks.models import Delivery, Webhook
from workspace.models import Phase

API = "/api/v1"
ALL = list(payloads.SUBSCRIBABLE)


def client_of(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def study(make_study, cast):
    """alice's study (experts bob and carol), and charlie's own study."""
    built = make_study(Phase.DRAFT)
    return built.study


def register(client, study, receiver, events=ALL):
    answer = client.post(
        f"{API}/studies/{study.pk}/webhooks/", {"url": receiver.url(), "events": events}, format="json"
    )
    assert answer.status_code == 201, answer.content
    receiver.secret = answer.json()["secret"]
    return answer


def test_the_designer_registers_and_the_secret_is_shown_once(study, cast, receiver):
    alice = client_of(cast.alice)
    answer = register(alice, study, receiver, events=["run.failed", "phase.changed"])
    body = answer.json()
    webhook = Webhook.objects.get()
    assert answer["Location"] == f"http://testserver{API}/webhooks/{webhook.pk}/"
    assert body == {
        "id": webhook.pk,
        "study": study.pk,
        "url": receiver.url(),
        "events": ["phase.changed", "run.failed"],  # in the list's order
        "active": True,
        "created_by": "alice",
        "created_at": body["created_at"],
        "secret_rotated_at": None,
        "secret": webhook.secret,
    }
    assert len(webhook.secret) >= 40
    # Never again: not in the list, the detail, a change, the deliveries.
    for path in (f"/studies/{study.pk}/webhooks/", f"/webhooks/{webhook.pk}/", f"/webhooks/{webhook.pk}/deliveries/"):
        got = alice.get(API + path)
        assert got.status_code == 200 and webhook.secret not in got.content.decode(), path
    changed = alice.patch(f"{API}/webhooks/{webhook.pk}/", {"active": False}, format="json")
    assert changed.status_code == 200 and changed.json()["active"] is False and "secret" not in changed.json()
    listed = alice.get(f"{API}/studies/{study.pk}/webhooks/").json()
    assert listed["count"] == 1 and listed["results"][0]["url"] == receiver.url()


def test_rotating_the_secret_shows_the_new_one_once_and_signs_with_it(study, cast, receiver, after_commit):
    alice = client_of(cast.alice)
    old = register(alice, study, receiver).json()
    rotated = alice.post(f"{API}/webhooks/{old['id']}/rotate-secret/")
    assert rotated.status_code == 200
    new = rotated.json()["secret"]
    assert new != old["secret"] and rotated.json()["secret_rotated_at"] is not None
    receiver.secret = new
    with after_commit():
        tested = alice.post(f"{API}/webhooks/{old['id']}/test/")
    assert tested.status_code == 202
    (got,) = receiver.wait(1)
    assert got.verified and got.headers["X-Approve-Event"] == "webhook.test"
    delivery = Delivery.objects.get()
    assert tested["Location"] == f"http://testserver{API}/webhooks/{old['id']}/deliveries/{delivery.delivery_id}/"
    assert tested.json()["id"] == str(delivery.delivery_id) and tested.json()["event"] == "webhook.test"
    log = alice.get(f"{API}/webhooks/{old['id']}/deliveries/").json()
    assert log["count"] == 1
    (entry,) = log["results"]
    assert (entry["status"], entry["status_code"], entry["attempts"], entry["error"]) == ("succeeded", 200, 1, "")
    assert entry["payload"]["event"] == "webhook.test" and entry["payload"]["study"]["id"] == study.pk
    one = alice.get(f"{API}/webhooks/{old['id']}/deliveries/{delivery.delivery_id}/")
    assert one.status_code == 200 and one.json() == entry


def test_a_refused_url_or_event_names_the_field_and_writes_nothing(study, cast, settings):
    settings.WEBHOOK_ALLOWED_HOSTS, settings.DEBUG = [], False
    alice = client_of(cast.alice)
    path = f"{API}/studies/{study.pk}/webhooks/"
    answer = alice.post(path, {"url": "https://169.254.169.254/latest/", "events": ALL}, format="json")
    assert answer.status_code == 400
    (message,) = error_fields(answer)["url"]
    assert message.startswith("169.254.169.254 is a link-local address (169.254.169.254): ")
    assert answer.json()["detail"] == f"url: {message}"  # as docs/api.md shows it
    answer = alice.post(path, {"url": "https://hooks.example.com/", "events": ["invitation.created"]}, format="json")
    assert answer.status_code == 400 and "events" in str(error_fields(answer))
    answer = alice.post(path, {"url": "https://hooks.example.com/", "events": ALL, "secret": "mine"}, format="json")
    assert answer.status_code == 400 and "secret" in error_fields(answer)
    assert not Webhook.objects.exists()


def test_the_limit_of_webhooks_per_study(study, cast, receiver, settings):
    settings.WEBHOOK_MAX_PER_STUDY = 2
    alice = client_of(cast.alice)
    register(alice, study, receiver)
    register(alice, study, receiver)
    answer = alice.post(f"{API}/studies/{study.pk}/webhooks/", {"url": receiver.url(), "events": ALL}, format="json")
    assert answer.status_code == 409 and answer.json()["code"] == "webhook_limit"
    assert Webhook.objects.count() == 2


def test_a_second_test_while_one_is_pending_is_refused(study, cast, receiver):
    alice = client_of(cast.alice)
    webhook_id = register(alice, study, receiver).json()["id"]
    # Not after a commit: the first test stays pending.
    assert alice.post(f"{API}/webhooks/{webhook_id}/test/").status_code == 202
    refused = alice.post(f"{API}/webhooks/{webhook_id}/test/")
    assert refused.status_code == 409 and refused.json()["code"] == "webhook_test_pending"
    assert Delivery.objects.count() == 1


def test_delete(study, cast, receiver):
    alice = client_of(cast.alice)
    webhook_id = register(alice, study, receiver).json()["id"]
    assert alice.delete(f"{API}/webhooks/{webhook_id}/").status_code == 204
    assert not Webhook.objects.exists()
    assert alice.get(f"{API}/webhooks/{webhook_id}/").status_code == 404


def _endpoints(study, webhook, delivery):
    body = {"url": "http://127.0.0.1:8610/x", "events": ALL}
    return [
        ("get", f"{API}/studies/{study.pk}/webhooks/", None),
        ("post", f"{API}/studies/{study.pk}/webhooks/", body),
        ("get", f"{API}/webhooks/{webhook.pk}/", None),
        ("patch", f"{API}/webhooks/{webhook.pk}/", {"active": False}),
        ("delete", f"{API}/webhooks/{webhook.pk}/", None),
        ("get", f"{API}/webhooks/{webhook.pk}/deliveries/", None),
        ("get", f"{API}/webhooks/{webhook.pk}/deliveries/{delivery.delivery_id}/", None),
        ("post", f"{API}/webhooks/{webhook.pk}/test/", None),
        ("post", f"{API}/webhooks/{webhook.pk}/rotate-secret/", None),
    ]


def test_members_get_403_and_anyone_else_404_on_every_endpoint(study, cast, receiver, make_study):
    webhook = Webhook.objects.get(pk=register(client_of(cast.alice), study, receiver).json()["id"])
    delivery = Delivery.objects.create(webhook=webhook, event="run.failed", payload={"secret-ish": webhook.secret})
    before = (webhook.url, webhook.secret, webhook.active, Delivery.objects.count())
    # charlie designs a study of his own: a designer, but not of this one.
    from workspace import services as workspace_services

    workspace_services.study_create(designer=cast.charlie, title="Charlie's")
    for user, status in ((cast.bob, 403), (cast.carol, 403), (cast.charlie, 404)):
        client = client_of(user)
        for method, path, body in _endpoints(study, webhook, delivery):
            answer = getattr(client, method)(path, body, format="json")
            assert answer.status_code == status, (user.username, method, path, answer.content)
            assert webhook.secret not in answer.content.decode()
            if status == 404:
                assert answer.json()["code"] == "not_found"
            else:
                assert answer.json()["detail"].startswith("Only the designer of this study can ")
    anonymous = APIClient()
    for method, path, body in _endpoints(study, webhook, delivery):
        assert getattr(anonymous, method)(path, body, format="json").status_code == 401
    webhook.refresh_from_db()
    assert (webhook.url, webhook.secret, webhook.active, Delivery.objects.count()) == before


def test_a_webhook_that_does_not_exist_is_404_like_one_not_yours(cast, db):
    answer = client_of(cast.alice).get(f"{API}/webhooks/999999/")
    assert answer.status_code == 404 and answer.json() == api_error("not_found", "No such webhook.")


def test_the_secret_is_kept_sealed(study, cast, receiver, settings):
    """Stored encrypted (whoever reads the database reads no secret), under a
    key of its own: not the one that opens MLflow tokens."""
    from tracking import secrets

    plain = register(client_of(cast.alice), study, receiver).json()["secret"]
    stored = Webhook.objects.values_list("sealed_secret", flat=True).get()
    assert plain not in stored and Webhook.objects.get().secret == plain
    with pytest.raises(ValueError):
        secrets.unseal(stored)  # the MLflow tokens' key does not open it
    settings.SECRET_KEY_FALLBACKS, settings.SECRET_KEY = [settings.SECRET_KEY], "another-secret-key-" + "x" * 40
    assert Webhook.objects.get().secret == plain  # a rotated SECRET_KEY in the fallbacks still opens it
