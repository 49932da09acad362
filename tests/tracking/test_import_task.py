"""An MLflow import of more runs than ``limits.MLFLOW_IMPORT_INLINE_RUNS``
runs as a Celery task: 202 with a status resource that shows its progress,
then exactly the report an inline import gives, or the named error with
nothing written; the page shows the progress (polled), then the report."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tracking import services
from tracking.models import MlflowImport, MlflowRunLink, MlflowValueSource
from workspace import limits
from workspace.models import Candidate, Measurement, Phase

from .conftest import EXPERIMENT, log_models
from .test_mlflow_pages import form_values

BODY = {
    "experiment": EXPERIMENT,
    "filter": "tags.stage = 'candidate'",
    "mapping": [{"key": "roc_auc", "metric": "AUC"}, {"key": "accuracy", "metric": "Success rate"}],
}


@pytest.fixture
def store(tmp_path, settings):
    settings.TRACKING_FILE_ROOTS = [str(tmp_path)]
    uri = f"file:{tmp_path / 'mlruns'}"
    return uri, log_models(uri)


def connected_study(make_study, uri):
    study = make_study(Phase.DRAFT).study
    services.connection_set(study=study, tracking_uri=uri)
    return study


def api_client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def written(study):
    """What an import writes, in the study."""
    return (
        sorted(Candidate.objects.filter(study=study).values_list("name", flat=True)),
        sorted(Measurement.objects.filter(study=study).values_list("candidate__name", "metric__name", "value")),
        MlflowValueSource.objects.filter(study=study).count(),
        MlflowRunLink.objects.filter(candidate__study=study).count(),
    )


def without_id(outcome):
    return {key: value for key, value in outcome.items() if key != "import_id"}


def test_a_large_import_is_queued_then_reports_what_an_inline_one_does(
    make_study, cast, store, monkeypatch, eager_celery, django_capture_on_commit_callbacks
):
    uri, runs = store
    inline_study, queued_study = connected_study(make_study, uri), connected_study(make_study, uri)
    inline = api_client(inline_study.designer).post(
        f"/api/v1/studies/{inline_study.pk}/mlflow/imports/", BODY, format="json"
    )
    assert inline.status_code == 200, inline.content
    report = inline.json()
    assert sorted(report["created"]) == sorted(runs) and len(report["changes"]) == 8

    monkeypatch.setattr(limits, "MLFLOW_IMPORT_INLINE_RUNS", 3)  # 4 runs match: one too many
    client = api_client(queued_study.designer)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        answer = client.post(f"/api/v1/studies/{queued_study.pk}/mlflow/imports/", BODY, format="json")
    assert answer.status_code == 202, answer.content
    assert len(callbacks) == 1
    record = MlflowImport.objects.get(study=queued_study)
    location = f"http://testserver/api/v1/studies/{queued_study.pk}/mlflow/imports/{record.pk}/"
    assert answer["Location"] == location
    queued = answer.json()
    assert (queued["status"], queued["runs_total"], queued["runs_read"]) == ("queued", 4, 0)
    assert queued["outcome"] is None and queued["error"] is None

    done = client.get(location).json()
    assert (done["status"], done["runs_total"], done["runs_read"], done["error"]) == ("succeeded", 4, 4, None)
    assert done["outcome"]["import_id"] == record.pk
    assert without_id(done["outcome"]) == without_id(report)
    assert written(queued_study)[1:] == written(inline_study)[1:]
    # Recorded once in the History, complete.
    assert [(h.history_type, h.status) for h in MlflowImport.history.filter(study=queued_study)] == [("+", "succeeded")]
    # A second delivery does nothing.
    assert services.import_execute(import_id=record.pk) == "not claimed"


def test_a_failing_queued_import_names_the_error_and_writes_nothing(
    make_study, cast, store, monkeypatch, eager_celery, django_capture_on_commit_callbacks
):
    uri, _ = store
    study = connected_study(make_study, uri)
    before = written(study)
    monkeypatch.setattr(limits, "MLFLOW_IMPORT_INLINE_RUNS", 1)
    body = {**BODY, "mapping": [{"key": "roc_auc", "metric": "AUC"}, {"key": "missing", "metric": "Success rate"}]}
    client = api_client(study.designer)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(f"/api/v1/studies/{study.pk}/mlflow/imports/", body, format="json")
    assert answer.status_code == 202, answer.content
    failed = client.get(answer["Location"]).json()
    assert failed["status"] == "failed" and failed["outcome"] is None
    assert failed["error"]["code"] == "invalid_input"
    assert sorted(failed["error"]["fields"]) == ["runs[0]", "runs[1]", "runs[2]", "runs[3]"]
    assert "has no metric 'missing'" in failed["error"]["fields"]["runs[0]"][0]
    assert "has no metric 'missing'" in failed["error"]["detail"]
    assert written(study) == before
    assert not MlflowImport.history.filter(study=study).exists()


def test_bad_input_is_refused_at_once_and_others_imports_are_not_found(make_study, cast, store, monkeypatch):
    uri, _ = store
    study, other = connected_study(make_study, uri), connected_study(make_study, uri)
    monkeypatch.setattr(limits, "MLFLOW_IMPORT_INLINE_RUNS", 1)
    client = api_client(study.designer)
    body = {**BODY, "mapping": [{"key": "roc_auc", "metric": "Nope"}]}
    answer = client.post(f"/api/v1/studies/{study.pk}/mlflow/imports/", body, format="json")
    assert answer.status_code == 400
    assert answer.json()["fields"] == {"mapping[0].metric": ["no metric named 'Nope' in this study"]}
    assert not MlflowImport.objects.exists()
    record = MlflowImport.objects.create(study=other, imported_at=other.created_at, experiment_id="1")
    assert client.get(f"/api/v1/studies/{study.pk}/mlflow/imports/{record.pk}/").status_code == 404


def test_the_page_shows_the_progress_then_the_report(
    make_study, cast, store, monkeypatch, eager_celery, django_capture_on_commit_callbacks
):
    uri, runs = store
    study = connected_study(make_study, uri)
    monkeypatch.setattr(limits, "MLFLOW_IMPORT_INLINE_RUNS", 2)
    client = Client()
    client.force_login(cast.alice)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        answer = client.post(f"/studies/{study.pk}/mlflow/import/", form_values(study, AUC="roc_auc"))
    record = MlflowImport.objects.get(study=study)
    assert answer.status_code == 302
    assert answer["Location"] == f"/studies/{study.pk}/mlflow/?report={record.pk}#report"
    page = client.get(f"/studies/{study.pk}/mlflow/", {"report": record.pk}).content.decode()
    report = page.split('id="report"')[1].split("</section>")[0]
    assert "0 of 4 runs read" in report and 'hx-trigger="every 2s"' in report
    assert f'<a href="?report={record.pk}#report">Refresh</a>' in report
    assert "Queued" in page.split('id="imports-title"')[1]  # the recent imports list
    # htmx polls the report alone.
    fragment = client.get(f"/studies/{study.pk}/mlflow/", {"report": record.pk}, HTTP_HX_REQUEST="true")
    assert "<html" not in fragment.content.decode() and "0 of 4 runs read" in fragment.content.decode()

    for callback in callbacks:
        callback()  # the worker takes it
    fragment = client.get(f"/studies/{study.pk}/mlflow/", {"report": record.pk}, HTTP_HX_REQUEST="true")
    report = fragment.content.decode()
    assert f"Import {record.pk}: what changed" in report and "hx-trigger" not in report
    assert "4 runs of experiment" in report and "4 values changed" in report
    table = report.split('id="changes"')[1]
    for name in runs:
        assert name in table
    assert MlflowValueSource.objects.filter(study=study, metric__name="AUC").count() == 4


def test_the_runs_read_are_recorded_as_they_are_read(
    make_study, cast, store, monkeypatch, eager_celery, django_capture_on_commit_callbacks
):
    uri, _ = store
    study = connected_study(make_study, uri)
    monkeypatch.setattr(limits, "MLFLOW_IMPORT_INLINE_RUNS", 1)
    seen = []
    recording = services._import_progress

    def spying(import_id, total):
        progress = recording(import_id, total)

        def spy(read):
            progress(read)
            record = MlflowImport.objects.get(pk=import_id)
            seen.append((record.status, record.runs_read, record.runs_total))

        return spy

    monkeypatch.setattr(services, "_import_progress", spying)
    with django_capture_on_commit_callbacks(execute=True):
        api_client(study.designer).post(f"/api/v1/studies/{study.pk}/mlflow/imports/", BODY, format="json")
    assert seen == [("running", read, 4) for read in (1, 2, 3, 4)]
    # Recorded about every 2 % of the runs.
    record = MlflowImport.objects.get(study=study)
    progress = recording(record.pk, 200)
    progress(3)
    record.refresh_from_db()
    assert record.runs_read == 4
    progress(4)
    record.refresh_from_db()
    assert (record.runs_read, record.runs_total) == (4, 200)


def test_an_import_the_broker_cannot_take_is_marked_failed(
    make_study, cast, store, monkeypatch, django_capture_on_commit_callbacks
):
    from kombu.exceptions import OperationalError

    from tracking import tasks

    def unreachable(*args, **kwargs):
        raise OperationalError("connection refused")

    uri, _ = store
    study = connected_study(make_study, uri)
    monkeypatch.setattr(limits, "MLFLOW_IMPORT_INLINE_RUNS", 1)
    monkeypatch.setattr(tasks.execute_import, "delay", unreachable)
    with django_capture_on_commit_callbacks(execute=True):
        answer = api_client(study.designer).post(f"/api/v1/studies/{study.pk}/mlflow/imports/", BODY, format="json")
    assert answer.status_code == 202
    failed = api_client(study.designer).get(answer["Location"]).json()
    assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
    assert "could not be queued" in failed["error"]["detail"]


def test_the_recovery_sweep_sends_a_lapsed_queued_import_again_and_fails_a_running_one_whose_worker_stopped(
    make_study, cast, store, monkeypatch, eager_celery, django_capture_on_commit_callbacks
):
    """Imports are leased as runs are (engine.services): queued, until its
    message is awaited; running, by the worker's heartbeat. The engine's
    recovery sweep sends a queued one whose message was lost again, and
    fails a running one whose worker died (nothing was written)."""
    from datetime import timedelta

    from django.utils import timezone

    from engine.tasks import sweep

    uri, _ = store
    study = connected_study(make_study, uri)
    monkeypatch.setattr(limits, "MLFLOW_IMPORT_INLINE_RUNS", 1)
    client = api_client(study.designer)

    def queue():
        # The message is "lost": its on-commit send is never run.
        with django_capture_on_commit_callbacks(execute=False):
            answer = client.post(f"/api/v1/studies/{study.pk}/mlflow/imports/", BODY, format="json")
        assert answer.status_code == 202
        return MlflowImport.objects.get(pk=answer.json()["id"])

    lost = queue()
    assert lost.status == "queued"
    assert timedelta(seconds=100) < lost.lease_expires_at - timezone.now() <= timedelta(seconds=120)
    before = written(study)
    assert sweep() == [] and MlflowImport.objects.get(pk=lost.pk).status == "queued"  # not lapsed yet: left alone
    past = timezone.now() - timedelta(seconds=1)
    MlflowImport.objects.filter(pk=lost.pk).update(lease_expires_at=past)
    sweep()  # sent again: with eager Celery the task runs at once, claims it, and completes it
    done = MlflowImport.objects.get(pk=lost.pk)
    assert (done.status, done.runs_read, done.lease_expires_at) == ("succeeded", 4, None)
    assert written(study) != before
    # A worker claimed this one, then died: its lease lapses without renewals.
    dead = queue()
    MlflowImport.objects.filter(pk=dead.pk).update(status="running", lease_expires_at=past)
    alive = queue()
    MlflowImport.objects.filter(pk=alive.pk).update(status="running", lease_expires_at=timezone.now() + timedelta(60))
    after_first = written(study)
    sweep()
    failed = MlflowImport.objects.get(pk=dead.pk)
    assert (failed.status, failed.error, failed.lease_expires_at) == ("failed", services.WORKER_LOST, None)
    assert MlflowImport.objects.get(pk=alive.pk).status == "running"  # a live lease is the worker's
    assert written(study) == after_first
    assert services.import_execute(import_id=dead.pk) == "not claimed"
    # The API says why.
    shown = client.get(f"/api/v1/studies/{study.pk}/mlflow/imports/{dead.pk}/").json()
    assert shown["status"] == "failed" and shown["error"]["code"] == "worker_lost"
    assert "stopped before it finished; nothing was written" in shown["error"]["detail"]


def test_a_running_import_s_lease_is_renewed_only_while_it_runs(make_study):
    from datetime import timedelta

    from django.utils import timezone

    study = make_study(Phase.DRAFT).study
    soon = timezone.now() + timedelta(seconds=1)
    record = MlflowImport.objects.create(
        study=study, imported_at=timezone.now(), experiment_id="1", status="running", lease_expires_at=soon
    )
    assert services._renew_lease(record.pk) is True
    renewed = MlflowImport.objects.get(pk=record.pk).lease_expires_at
    assert timedelta(seconds=25) < renewed - timezone.now() <= timedelta(seconds=30)  # ENGINE_RUN_LEASE_SECONDS
    MlflowImport.objects.filter(pk=record.pk).update(status="succeeded")
    assert services._renew_lease(record.pk) is False
