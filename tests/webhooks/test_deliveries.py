"""Deliveries end to end: an event of the study becomes a signed JSON
document POSTed to a real receiver the test starts, which verifies the
signature and the timestamp; retries with back-off, failures at once, the
delivery log (docs/webhooks.md)."""

import time
import uuid
from types import SimpleNamespace

import pytest
from celery.exceptions import Retry

from engine import services as engine_services
from webhooks import payloads, services, tasks
from webhooks.models import Delivery, Webhook
from workspace import services as workspace_services
from workspace.bundles import study_import_bundle
from workspace.models import Phase

from ..engine.test_runs import case_study_bundle
from .conftest import SITE, refused_port, verify

ALL = list(payloads.SUBSCRIBABLE)


def register(study, receiver, events=ALL, path="/hook"):
    webhook = services.webhook_create(study=study, by=study.designer, url=receiver.url(path), events=events)
    receiver.secret = webhook.secret
    return webhook


def test_a_phase_change_is_delivered_signed_and_verified_by_the_receiver(make_study, receiver, after_commit):
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    (got,) = receiver.wait(1)
    assert got.verified and got.path == "/hook"
    document = got.document
    delivery = Delivery.objects.get(webhook=webhook)
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["User-Agent"] == "approve-webhooks/1"
    assert got.headers["X-Approve-Event"] == "phase.changed"
    assert got.headers["X-Approve-Delivery"] == str(delivery.delivery_id) == document["id"]
    assert abs(int(got.headers["X-Approve-Timestamp"]) - time.time()) < 30
    study = built.study
    assert document == {
        "id": str(delivery.delivery_id),
        "event": "phase.changed",
        "occurred_at": document["occurred_at"],
        "study": {"id": study.pk, "title": study.title, "url": f"{SITE}/studies/{study.pk}/"},
        "data": {"from": "draft", "to": "voting"},
        "text": f"“{study.title}” moved from Draft to Voting: {SITE}/studies/{study.pk}/",
    }
    assert document["occurred_at"].startswith(str(delivery.created_at.year))
    # The log: one attempt, 200, the answer's first KiB.
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.status_code, delivery.error) == ("succeeded", 1, 200, "")
    assert delivery.response_excerpt == ("ok " * 1000)[:1024]
    assert delivery.next_attempt_at is None and delivery.last_attempt_at is not None
    # Signed with this webhook's secret and no other; a changed byte or an old timestamp fails.
    assert not verify("another secret", got.headers, got.body)
    assert not verify(webhook.secret, got.headers, got.body.replace(b"voting", b"closed"))
    assert not verify(webhook.secret, got.headers, got.body, now=time.time() + 301)


@pytest.fixture
def closed_study(db):
    return study_import_bundle(bundle=case_study_bundle())


def test_a_run_that_succeeds_is_delivered_with_its_link(closed_study, receiver, after_commit):
    register(closed_study, receiver, events=["run.succeeded", "run.failed"])
    with after_commit():
        run = engine_services.run_launch(study=closed_study, launched_by=closed_study.designer)
    (got,) = receiver.wait(1)
    assert got.verified and got.headers["X-Approve-Event"] == "run.succeeded"
    url = f"{SITE}/runs/{run.pk}/"
    assert got.document["data"] == {"run_id": run.pk, "number": run.number, "status": "succeeded", "run_url": url}
    assert got.document["text"] == f"Run {run.number} of “{closed_study.title}” succeeded: {url}"


def test_only_the_events_chosen_and_only_active_webhooks(make_study, receiver, after_commit):
    built = make_study(Phase.DRAFT)
    register(built.study, receiver, events=["run.failed"])
    off = register(built.study, receiver, events=["phase.changed"])
    services.webhook_update(webhook=off, active=False)
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    assert receiver.received == [] and not Delivery.objects.exists()


def test_a_5xx_is_retried_with_back_off_until_it_succeeds(make_study, receiver, after_commit):
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    receiver.statuses = [500, 503, 429]
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    got = receiver.wait(4)
    assert len(got) == 4 and all(item.verified for item in got)
    assert len({item.headers["X-Approve-Delivery"] for item in got}) == 1  # one delivery, four attempts
    delivery = Delivery.objects.get(webhook=webhook)
    assert (delivery.status, delivery.attempts, delivery.status_code) == ("succeeded", 4, 200)


def test_retries_stop_after_the_most_allowed_and_the_delivery_fails(make_study, receiver, after_commit, settings):
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    receiver.default = 502
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    assert len(receiver.wait(settings.WEBHOOK_MAX_RETRIES + 1)) == settings.WEBHOOK_MAX_RETRIES + 1
    delivery = Delivery.objects.get(webhook=webhook)
    assert (delivery.status, delivery.attempts, delivery.status_code) == ("failed", 4, 502)
    assert delivery.response_excerpt == '{"error": "nope"}' and delivery.next_attempt_at is None


@pytest.mark.parametrize("status", [404, 400, 410, 302])
def test_other_answers_fail_at_once_and_a_redirect_is_not_followed(make_study, receiver, after_commit, status):
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    receiver.statuses = [status]
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    time.sleep(0.2)
    assert [item.path for item in receiver.received] == ["/hook"]  # never /elsewhere
    delivery = Delivery.objects.get(webhook=webhook)
    assert (delivery.status, delivery.attempts, delivery.status_code) == ("failed", 1, status)
    if status == 302:
        assert delivery.error == "a redirect: not followed"


def test_no_answer_is_retried_and_recorded(make_study, settings, after_commit):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    built = make_study(Phase.DRAFT)
    webhook = services.webhook_create(
        study=built.study, by=None, url=f"http://127.0.0.1:{refused_port()}/", events=["phase.changed"]
    )
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    delivery = Delivery.objects.get(webhook=webhook)
    assert (delivery.status, delivery.attempts, delivery.status_code) == ("failed", 4, None)
    assert "ConnectionRefusedError" in delivery.error


def test_a_slow_receiver_times_out(make_study, receiver, after_commit, settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = 1
    settings.WEBHOOK_MAX_RETRIES = 0
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    receiver.delay = 2.5
    started = time.monotonic()
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    assert time.monotonic() - started < 2.4
    delivery = Delivery.objects.get(webhook=webhook)
    assert (delivery.status, delivery.status_code) == ("failed", None)
    assert delivery.error == "no answer within 1 seconds"


def test_the_back_off_doubles_from_the_setting_up_to_an_hour(settings):
    settings.WEBHOOK_RETRY_SECONDS = 30
    assert [tasks.retry_in(n) for n in range(9)] == [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]


class _Worker:
    """A task as a worker runs it (not eager): ``retry`` records its countdown."""

    def __init__(self, retries: int) -> None:
        self.request = SimpleNamespace(retries=retries, is_eager=False)
        self.countdowns: list[int] = []

    def retry(self, countdown: int) -> Retry:
        self.countdowns.append(countdown)
        return Retry()


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_under_a_worker_a_retry_is_scheduled_with_the_back_off(make_study, receiver, settings, retries):
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    receiver.default = 500
    services.event_record(
        webhooks=[webhook], kind="phase.changed", data={"from": "draft", "to": "voting"}, at=built.study.created_at
    )
    delivery = Delivery.objects.get()
    Delivery.objects.update(attempts=retries)  # the attempts made before
    worker = _Worker(retries)
    with pytest.raises(Retry):
        tasks.send(worker, delivery.pk)
    assert worker.countdowns == [30 * 2**retries]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.status_code) == ("pending", retries + 1, 500)
    wait = (delivery.next_attempt_at - delivery.last_attempt_at).total_seconds()
    assert wait == 30 * 2**retries
    # The last retry allowed: failed, nothing scheduled.
    Delivery.objects.update(attempts=settings.WEBHOOK_MAX_RETRIES)
    final = _Worker(settings.WEBHOOK_MAX_RETRIES)
    assert tasks.send(final, delivery.pk) == "failed" and final.countdowns == []


def test_a_test_delivery_and_a_deleted_webhook(make_study, receiver, after_commit):
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver, events=["run.failed"])
    with after_commit():
        delivery = services.webhook_test(webhook=webhook)
    (got,) = receiver.wait(1)
    assert got.verified and got.headers["X-Approve-Event"] == "webhook.test"
    assert got.document["data"] == {} and got.document["text"].startswith("A test delivery from approve for “")
    delivery.refresh_from_db()
    assert delivery.status == "succeeded"
    # Deleted: its log goes with it, and a pending delivery is not sent.
    services.event_record(webhooks=[webhook], kind="run.failed", data={}, at=delivery.created_at)
    pending = Delivery.objects.get(status="pending")
    services.webhook_delete(webhook=webhook)
    assert tasks.send(_Worker(0), pending.pk) == "nothing to send"
    assert not Webhook.objects.exists() and not Delivery.objects.exists()


def test_the_log_keeps_the_newest_deliveries(make_study, receiver, settings):
    settings.WEBHOOK_DELIVERIES_KEPT = 3
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    ids = services.event_record(
        webhooks=[webhook] * 5, kind="round.opened", data={"round_id": 1, "number": 1}, at=built.study.created_at
    )
    assert list(Delivery.objects.order_by("id").values_list("id", flat=True)) == ids[2:]


def test_the_delivery_id_is_a_uuid_and_unique(make_study, receiver):
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    ids = services.event_record(webhooks=[webhook] * 2, kind="round.opened", data={}, at=built.study.created_at)
    first, second = (Delivery.objects.get(pk=pk) for pk in ids)
    assert first.delivery_id != second.delivery_id and isinstance(first.delivery_id, uuid.UUID)
    assert first.payload["id"] == str(first.delivery_id)


def test_the_recovery_sweep_sends_again_a_delivery_whose_message_was_lost(make_study, receiver, after_commit):
    from datetime import timedelta

    from django.utils import timezone

    from engine import tasks as engine_tasks

    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    lost, waiting, fresh = services.event_record(
        webhooks=[webhook] * 3, kind="round.opened", data={"round_id": 1, "number": 1}, at=built.study.created_at
    )
    long_ago = timezone.now() - timedelta(seconds=services.STALE_SECONDS + 60)
    Delivery.objects.filter(pk=lost).update(created_at=long_ago)  # its first attempt's message never came
    Delivery.objects.filter(pk=waiting).update(attempts=2, next_attempt_at=long_ago)  # a retry's message lost
    with after_commit():
        engine_tasks.sweep()
    got = receiver.wait(2)
    assert len(got) == 2 and all(item.verified for item in got)
    assert {item.headers["X-Approve-Delivery"] for item in got} == {
        str(Delivery.objects.get(pk=pk).delivery_id) for pk in (lost, waiting)
    }
    assert Delivery.objects.get(pk=waiting).attempts == 3  # went on where it stopped
    assert Delivery.objects.get(pk=fresh).status == "pending"  # not due long ago: its message may still come
    with after_commit():
        assert services.deliveries_recover_stale() == []  # nothing left behind


def test_a_test_delivery_is_tried_once(make_study, receiver, after_commit):
    built = make_study(Phase.DRAFT)
    webhook = register(built.study, receiver)
    receiver.default = 503
    with after_commit():
        delivery = services.webhook_test(webhook=webhook)
    assert len(receiver.wait(1)) == 1
    time.sleep(0.2)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.status_code, len(receiver.received)) == ("failed", 1, 503, 1)
