"""A delivery through a real Celery worker on Redis and PostgreSQL, to the
receiver the test starts, which verifies its signature: the first attempt
answered 503, the retry comes from the broker after its back-off (a real
``task.retry`` with a countdown, not eager mode's loop). Runs where .ci/run
sets DATABASE_URL and REDIS_URL; skipped without them, for that stated
reason."""

import time

import pytest

from tests.realstack_support import POSTGRES_AND_REDIS, worker_taking
from webhooks import services, tasks
from webhooks.models import Delivery
from workspace import events
from workspace import services as workspace_services
from workspace.models import Phase

from .conftest import SITE

pytestmark = pytest.mark.realstack


@POSTGRES_AND_REDIS
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_delivers_and_retries_with_back_off(make_study, receiver, tmp_path, monkeypatch) -> None:
    log_path = tmp_path / "worker.log"
    env = {
        "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "WEBHOOK_RETRY_SECONDS": "1",
        "WEBHOOK_MAX_RETRIES": "3",
        "WEBHOOK_SITE_URL": SITE,
    }
    monkeypatch.setattr(events, "LISTENERS", [tasks.event_enqueue])  # the webhooks' listener alone
    with worker_taking(tasks, "event_deliver", log_path=log_path, monkeypatch=monkeypatch, env=env):
        built = make_study(Phase.DRAFT)
        webhook = services.webhook_create(study=built.study, by=None, url=receiver.url(), events=["phase.changed"])
        receiver.secret = webhook.secret
        receiver.statuses = [503]
        workspace_services.study_open_voting(study=built.study)  # committed: the listener enqueues at once
        got = receiver.wait(2, timeout=60)
        assert len(got) == 2, log_path.read_text()
        assert all(item.verified for item in got)
        assert got[0].headers["X-Approve-Delivery"] == got[1].headers["X-Approve-Delivery"]
        # The retry came from the broker after its countdown (1 s), signed afresh.
        first, second = (int(item.headers["X-Approve-Timestamp"]) for item in got)
        assert second >= first
        assert got[1].document["data"] == {"from": "draft", "to": "voting"}
        deadline = time.monotonic() + 10
        while (delivery := Delivery.objects.get(webhook=webhook)).status != "succeeded":
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        assert (delivery.attempts, delivery.status_code) == (2, 200)
        assert "retried in 1 s" in log_path.read_text()
