"""Each service publishes its event once, after it commits, with the data a
listener needs (workspace.events; docs/notifications.md)."""

import pytest
from django.utils import timezone

from engine import analyses
from engine import services as engine_services
from engine.models import Analysis, Run
from tracking import services as tracking_services
from tracking.models import MlflowRunLink
from tracking.remote import Connection
from workspace import events, invitations, reminders, services
from workspace.bundles import study_import_bundle
from workspace.models import Membership, Phase

from ..engine.test_runs import case_study_bundle


def test_a_phase_change_is_published_with_from_and_to(make_study, published, after_commit) -> None:
    built = make_study(Phase.DRAFT)
    with after_commit():
        services.study_open_voting(study=built.study)
    assert published == [("phase.changed", built.study.pk, None, {"from": "draft", "to": "voting"})]


def test_nothing_is_published_for_a_change_rolled_back(make_study, published, django_capture_on_commit_callbacks):
    built = make_study(Phase.DRAFT)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.study_open_voting(study=built.study)
    # The callbacks were captured, not run: the change's transaction never committed.
    assert len(callbacks) == 1 and published == []


def test_a_round_opened_and_closed_is_published(make_study, cast, published, after_commit) -> None:
    built = make_study(Phase.ASSESSMENT, inputs=True)
    with after_commit():
        opened = services.round_open(study=built.study, by=cast.alice, message="Please revise.")
    with after_commit():
        services.round_close(study=built.study, by=cast.alice)
    assert published == [
        ("round.opened", built.study.pk, cast.alice.pk, {"round_id": opened.pk, "number": 1}),
        ("round.closed", built.study.pk, cast.alice.pk, {"round_id": opened.pk, "number": 1}),
    ]


def test_a_reminder_is_published_with_the_experts_and_the_note(make_study, cast, published, after_commit) -> None:
    built = make_study(Phase.ASSESSMENT)
    with after_commit():
        reminders.reminders_send(
            study=built.study, experts=[built.bob, built.carol], link="https://x.test/studies/1/", note="Friday."
        )
    assert published == [
        (
            "reminder.sent",
            built.study.pk,
            cast.alice.pk,
            {"membership_ids": [built.bob.pk, built.carol.pk], "link": "https://x.test/studies/1/", "note": "Friday."},
        )
    ]


@pytest.mark.parametrize("absence", [Membership.Absence.EXCLUDED, Membership.Absence.ABSTAINING])
def test_an_exclusion_is_published_with_its_kind_and_reason(make_study, cast, published, after_commit, absence):
    built = make_study(Phase.VOTING)
    with after_commit():
        services.expert_absence_set(
            study=built.study, expert=built.bob, absence=absence, reason="on leave", acting=cast.alice
        )
    assert published == [
        (
            "expert.excluded",
            built.study.pk,
            cast.alice.pk,
            {
                "membership_id": built.bob.pk,
                "user_id": cast.bob.pk,
                "absence": str(absence),
                "reason": "on leave",
            },
        )
    ]


def test_an_imported_exclusion_is_not_told(make_study, cast, published, after_commit) -> None:
    built = make_study(Phase.VOTING)
    with after_commit():
        services.expert_absence_set(
            study=built.study, expert=built.bob, absence="excluded", reason="x", acting=cast.alice, tell=False
        )
    assert published == []


def test_an_invitation_by_username_is_published(make_study, cast, published, after_commit) -> None:
    built = make_study(Phase.DRAFT)
    with after_commit():
        invitation, _ = invitations.invitation_create(study=built.study, created_by=cast.alice, username="charlie")
        link, key = invitations.invitation_create(study=built.study, created_by=cast.alice)
    assert published == [
        (
            "invitation.created",
            built.study.pk,
            cast.alice.pk,
            {"invitation_id": invitation.pk, "username": "charlie", "email": None},
        ),
        # A plain link: its key is in no event (the designer hands it over).
        (
            "invitation.created",
            built.study.pk,
            cast.alice.pk,
            {"invitation_id": link.pk, "username": None, "email": None},
        ),
    ]
    assert key not in repr(published)


def test_an_imported_study_replays_its_phases_and_rounds_untold(cast, published, after_commit) -> None:
    """An import goes through the phases (and absences, rounds) again: old
    news to nobody. Only the invitations it makes are told (a designer's
    import invites the other experts)."""
    with after_commit():
        operator = study_import_bundle(bundle=case_study_bundle())
    assert operator.phase == Phase.CLOSED and published == []
    with after_commit():
        mine = study_import_bundle(bundle=case_study_bundle(), importer=cast.alice)
    assert {kind for kind, *_ in published} == {"invitation.created"}
    assert len(published) == mine.invitations.count() == 4
    assert mine.phase == Phase.DRAFT  # the others' inputs left out
    with after_commit():
        services.study_reopen_assessment(study=operator)
    assert published[-1][:2] == ("phase.changed", operator.pk)  # told again once imported


@pytest.fixture
def closed_study(db):
    return study_import_bundle(bundle=case_study_bundle())


def test_a_run_that_succeeds_is_published_once_after_its_status_is_stored(closed_study, monkeypatch, after_commit):
    seen = []

    def listener(event):  # what a listener reads of the run when told
        seen.append((event.kind, event.data, Run.objects.get(pk=event.data["run_id"]).status))

    monkeypatch.setattr(events, "LISTENERS", [listener])
    with after_commit():  # launched, then executed by eager Celery once the launch commits
        run = engine_services.run_launch(study=closed_study, launched_by=closed_study.designer)
    assert seen == [("run.succeeded", {"run_id": run.pk, "number": run.number, "status": "succeeded"}, "succeeded")]
    with after_commit():
        engine_services.run_execute(run_id=run.pk)  # a second delivery: finished already, told nobody
    assert len(seen) == 1


def test_a_run_that_fails_is_published(closed_study, published, after_commit, monkeypatch) -> None:
    run = engine_services.run_launch(study=closed_study, launched_by=closed_study.designer)

    def broken(snapshot):
        raise RuntimeError("boom")

    monkeypatch.setattr(engine_services, "evaluate_snapshot", broken)
    with after_commit():
        engine_services.run_execute(run_id=run.pk)
    assert published == [
        ("run.failed", closed_study.pk, None, {"run_id": run.pk, "number": run.number, "status": "failed"})
    ]


def test_a_run_past_its_time_limit_is_published_failed(closed_study, published, after_commit) -> None:
    run = engine_services.run_launch(study=closed_study, launched_by=closed_study.designer)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    with after_commit():
        engine_services.run_fail_timeout(run_id=run.pk, seconds=600)
        engine_services.run_fail_timeout(run_id=run.pk, seconds=600)  # already failed: not again
    assert published == [
        ("run.failed", closed_study.pk, None, {"run_id": run.pk, "number": run.number, "status": "failed"})
    ]


def test_an_analysis_that_finishes_is_published_with_its_status(closed_study, published, after_commit) -> None:
    run = engine_services.run_launch(study=closed_study, launched_by=closed_study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    # Launched, its chunks not sent (their callback waits for a commit that never comes).
    analysis = analyses.analysis_launch(
        run=run, kind=Analysis.Kind.LEAVE_ONE_OUT, launched_by=closed_study.designer, samples=None, seed=7
    )
    with after_commit():
        analyses._fail(analysis.pk, "stopped")
        analyses._fail(analysis.pk, "stopped")  # finished already: not again
    assert published == [
        (
            "analysis.finished",
            closed_study.pk,
            None,
            {
                "analysis_id": analysis.pk,
                "run_id": run.pk,
                "run_number": run.number,
                "analysis_kind": "leave_one_out",
                "status": "failed",
            },
        )
    ]


def test_an_analysis_that_succeeds_is_published(closed_study, published, after_commit) -> None:
    run = engine_services.run_launch(study=closed_study, launched_by=closed_study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    with after_commit():  # eager Celery computes its chunks and merges them
        analysis = analyses.analysis_launch(
            run=run, kind=Analysis.Kind.LEAVE_ONE_OUT, launched_by=closed_study.designer, samples=None, seed=7
        )
    analysis.refresh_from_db()
    assert analysis.status == Analysis.Status.SUCCEEDED
    assert [(kind, data["status"], data["analysis_id"]) for kind, _, _, data in published] == [
        ("analysis.finished", "succeeded", analysis.pk)
    ]


def test_a_decision_published_to_mlflow_is_published(closed_study, published, after_commit, monkeypatch) -> None:
    run = engine_services.run_launch(study=closed_study, launched_by=closed_study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    candidate = closed_study.candidates.order_by("id").first()
    MlflowRunLink.objects.create(
        candidate=candidate,
        tracking_uri="http://mlflow.test",
        run_id="r1",
        experiment_id="1",
        experiment_name="exp",
        imported_at=timezone.now(),
    )
    monkeypatch.setattr(tracking_services, "connection_of", lambda study: Connection("http://mlflow.test", None))
    monkeypatch.setattr(tracking_services.remote, "publish", lambda connection, **kwargs: "summary-1")
    with after_commit():
        tracking_services.mlflow_publish(run=run, published_by=closed_study.designer, run_url="http://x.test/runs/1/")
    assert published == [
        (
            "decision.recorded",
            closed_study.pk,
            closed_study.designer_id,
            {"run_id": run.pk, "number": run.number, "experiment_name": "exp", "times": 1},
        )
    ]
