"""A request's id reaches a real Celery worker's log lines (issue 32, item 7):
the run launched by a request is computed by a worker process through Redis,
and the worker's JSON lines for that task carry the request's id."""

import json
import time

import pytest
from django.conf import settings

from approve_site.celery import app as celery_app
from engine import services as engine_services
from engine.models import Run
from engine.tasks import execute_run
from workspace.models import Phase

pytestmark = [
    pytest.mark.realstack,
    pytest.mark.skipif(
        not (settings.REDIS_URL and settings.DATABASES["default"]["ENGINE"].endswith("postgresql")),
        reason="needs REDIS_URL and a PostgreSQL DATABASE_URL: a worker process must share the broker and database",
    ),
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def pool(tmp_path, monkeypatch):
    from tests.engine.test_realstack import Workers

    monkeypatch.setenv("LOG_FORMAT", "json")  # the worker's environment
    workers = Workers(tmp_path)

    def send(run_id, priority=engine_services.LAUNCH_PRIORITY):
        with celery_app.connection_for_write(workers.redis_url) as broker:
            execute_run.apply_async((run_id,), queue=workers.queue, priority=priority, connection=broker)

    monkeypatch.setattr(engine_services, "_send", send)
    yield workers
    workers.stop()
    workers.forget()


def test_a_worker_logs_the_task_with_the_id_of_the_request_that_launched_it(pool, make_study, client):
    from tests.engine.test_realstack import wait_for

    worker = pool.start()
    pool.wait_ready(worker)
    built = make_study(Phase.CLOSED)
    client.force_login(built.study.designer)
    response = client.post(f"/api/v1/studies/{built.study.pk}/runs/", HTTP_X_REQUEST_ID="realstack-launch-77")
    assert response.status_code == 202, response.content
    assert response["X-Request-ID"] == "realstack-launch-77"
    run = wait_for(Run.objects.get(study=built.study), {Run.Status.SUCCEEDED, Run.Status.FAILED}, 60, pool)
    assert run.status == Run.Status.SUCCEEDED, run.error

    # The task's line is written once it returns, after the run's status is stored: wait for it.
    deadline = time.monotonic() + 30
    while True:
        lines = [json.loads(text) for text in worker.log_path.read_text().splitlines() if text.startswith("{")]
        tasks = [line for line in lines if line["logger"] == "approve.task"]
        if any(line["task"] == "engine.tasks.execute_run" for line in tasks) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert tasks, pool.logs()
    (task,) = [line for line in tasks if line["task"] == "engine.tasks.execute_run"]
    assert task["request_id"] == "realstack-launch-77" and task["state"] == "SUCCESS"
    assert (task["user_id"], task["study_id"]) == (built.study.designer.pk, built.study.pk)
    assert task["duration_ms"] > 0 and task["task_id"]
    # Celery's own line for the task, written while it ran, carries it too.
    succeeded = [line for line in lines if line["logger"] == "celery.app.trace" and "succeeded" in line["message"]]
    assert succeeded and succeeded[0]["request_id"] == "realstack-launch-77"
