"""Issue 17, finding 6: a launch reads no inputs. It records the study's
``input_version`` (copying the snapshot of an earlier run at that version, if
any); the worker that claims the run takes its snapshot while the version
holds, and every change that may alter a snapshot bumps that version after
giving the runs still waiting the inputs as they were, so the snapshot is
still the inputs at launch."""

import inspect
import threading

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import F
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from engine import services as engine_services
from engine.models import Run
from engine.services import run_launch
from engine.snapshot import RunInputError, inputs_complete, snapshot_arrays, study_snapshot
from evaluation import services as evaluation_services
from tracking import services as tracking_services
from workspace import bundles, invitations, reminders
from workspace import services as workspace
from workspace.admin import InputsAdmin
from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import (
    AcceptableRange,
    AttributeWeight,
    Candidate,
    Measurement,
    Membership,
    Metric,
    PeerWeight,
    Study,
)
from workspace.services import _checks as workspace_checks
from workspace.services import imports, phases

from .test_runs import case_study_bundle

ON_POSTGRESQL = connection.vendor == "postgresql"


@pytest.fixture
def study(db):
    return bundles.study_import_bundle(bundle=case_study_bundle())


def launch(study, **kwargs):
    return run_launch(study=study, launched_by=study.designer, **kwargs)


def version(study):
    return Study.objects.values_list("input_version", flat=True).get(pk=study.pk)


@pytest.fixture
def builds(monkeypatch):
    """How many times a launch or a worker read the study's inputs."""
    calls = []
    real = engine_services.study_snapshot

    def counting(**kwargs):
        calls.append(kwargs["study"].pk)
        return real(**kwargs)

    monkeypatch.setattr(engine_services, "study_snapshot", counting)
    return calls


def stored(run):
    return Run.objects.values_list("snapshot", flat=True).get(pk=run.pk)


def taken(run):
    """The run's snapshot once its worker has taken it (``run_snapshot_take``)."""
    engine_services.run_snapshot_take(run_id=run.pk)
    return stored(run)


# --- reuse ---------------------------------------------------------------------------


def test_two_launches_without_a_change_share_one_snapshot_read_once(study, builds):
    first, second = launch(study), launch(study)
    assert builds == [] and stored(first) is None and stored(second) is None  # the launches read nothing
    assert taken(second) == study_snapshot(study=study)
    # One read, stored in every run waiting at that version.
    assert builds == [study.pk] and stored(first) == stored(second)
    assert second.pk != first.pk and first.input_version == second.input_version == version(study)
    assert second.status == Run.Status.QUEUED and second.launched_by == study.designer
    # A launch after it copies the snapshot taken, and the run returned reads it on demand.
    third = launch(study)
    assert third.snapshot == stored(first) and builds == [study.pk]


def test_a_copied_run_executes_to_the_same_results(study):
    first, second = launch(study), launch(study)
    for run in (first, second):
        assert engine_services.run_execute(run_id=run.pk).status == Run.Status.SUCCEEDED
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.results == first.results


def test_another_tolerance_takes_its_own_snapshot(study, builds):
    first, other = launch(study), launch(study, tolerance=1e-6)
    assert taken(first)["tolerance"] != stored(other)["tolerance"] == 1e-6
    assert len(builds) == 1  # one read for both
    assert {**stored(first), "tolerance": 1e-6} == stored(other)
    assert launch(study, tolerance=1e-6).snapshot == stored(other)
    assert len(builds) == 1


def test_a_change_between_two_launches_gives_two_snapshots(study, builds):
    first = launch(study)
    before = study_snapshot(study=study)
    builds.clear()
    workspace.measurements_set(study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.5}])
    # The change gave the waiting run the inputs as they were, then changed them.
    assert len(builds) == 1 and stored(first) == before
    second = launch(study)
    assert taken(second) == study_snapshot(study=study) and len(builds) == 2
    assert stored(first)["measurements"][0][0] != 0.5 == stored(second)["measurements"][0][0]
    # And the one after copies the second, not the first.
    assert stored(launch(study)) == stored(second) and len(builds) == 2


def test_a_refused_change_leaves_the_version_and_the_snapshot_is_copied(study, builds):
    launch(study)
    before = version(study)
    with pytest.raises(InvalidInput):
        workspace.measurements_set(
            study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": "high"}]
        )
    assert version(study) == before
    # The refused change's snapshot of the waiting run was rolled back with it.
    assert Run.objects.filter(study=study, snapshot__isnull=True).count() == 1
    assert taken(launch(study)) is not None
    assert len(builds) == 2  # the refused change's, rolled back, and the worker's


def test_runs_from_before_versions_are_never_copied(study, builds):
    old = launch(study)
    Run.objects.filter(pk=old.pk).update(input_version=None, snapshot={"stale": True})
    new = launch(study)
    assert stored(new) is None and taken(new) == study_snapshot(study=study)
    assert len(builds) == 1


def test_a_launch_refused_for_its_inputs_is_refused_again_not_copied(study):
    workspace.candidate_add(study=study, name="Unmeasured")
    for _ in range(2):
        with pytest.raises(PhaseConflict, match="a measurement is missing for Unmeasured"):
            launch(study)
    assert not Run.objects.filter(study=study).exists()


# --- every writer of a snapshot's inputs bumps the version ------------------------------


def _candidate(study, name="J48"):
    return Candidate.objects.get(study=study, name=name)


# The changes a closed study still allows (the phase table), each as a call.
# In any other phase no run can be launched, and leaving it takes
# ``study_close_assessment``, which bumps the version (below).
CLOSED_CHANGES = {
    "measurements_set": lambda s: workspace.measurements_set(
        study=s, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.5}]
    ),
    "candidate_add": lambda s: workspace.candidate_add(study=s, name="NaiveBayes"),
    "candidates_add": lambda s: workspace.candidates_add(study=s, candidates=[{"name": "NaiveBayes"}]),
    "candidate_update": lambda s: workspace.candidate_update(candidate=_candidate(s), name="C4.5"),
    "candidate_remove": lambda s: workspace.candidate_remove(candidate=_candidate(s)),
    "study_update": lambda s: workspace.study_update(study=s, title="Renamed"),
    "study_reopen_assessment": lambda s: workspace.study_reopen_assessment(study=s),
    "study_transition": lambda s: workspace.study_transition(study=s, to="assessment"),
}

# Services that change inputs in other phases (or new studies' inputs): they
# take the study's row lock (``locked`` bumps), directly or through the
# services named with them.
TAKE_THE_LOCK = {
    "attribute_add": (),
    "attribute_remove": (),
    "attribute_update": (),
    "metric_add": (),
    "metric_remove": (),
    "metric_update": (),
    "expert_add": (),
    "expert_remove": (),
    "experts_add": (),
    # who takes part (issue 31): an absent expert's inputs leave the snapshot
    "expert_absence_set": (),
    "expert_readmit": (),
    "votes_set": (),
    "votes_set_many": (),
    "prioritisation_set": (),
    "metric_prioritisation_set": (),
    "metric_prioritisation_clear": (),
    "priorities_set": (),
    "priorities_set_many": (),
    "ranges_set": (),
    "ranges_set_many": (),
    "peer_weights_set": (),
    "peer_weights_set_many": (),
    "study_open_voting": (),
    "study_close_voting": (),
    "study_close_assessment": (),
    "attributes_add_many": (),
    "metrics_add_many": (),
    "measurements_add_new": (),
    "invitations_create_many": (),
    "invitation_create": (),
    "member_add": ("invitation_create", "expert_add"),
    "invitation_revoke": ("_close",),
    "invitation_decline": ("_close",),
    "invitation_accept": (),  # through _relock
    "invitation_accept_link": ("invitation_accept",),
    "invitation_accept_with_signup": ("invitation_accept_link",),
    "import_experts": ("invitations_create_many", "expert_add", "_import_experts_trusted"),
    "measurements_compute": ("measurements_set", "_measurements_store"),  # the store step calls measurements_set
    "metric_computation_set": (),
    "metric_computation_remove": (),
    "prediction_set_import": ("_set_stored",),
    "prediction_set_delete": (),
    # tracking: candidates and measurements from MLflow, through the workspace's services
    "mlflow_import": ("_import_runs", "candidates_add", "measurements_set"),
    # the same import run by a task (more than MLFLOW_IMPORT_INLINE_RUNS runs)
    "import_execute": ("_import_execute_claimed",),  # through _import_runs
    # a bundle's prediction sets and answers, restored as they are stored
    "prediction_set_restore": ("_set_stored",),
    "elicitation_answers_restore": (),
    "elicited_metric_set": (),
    "elicited_metric_remove": (),
    "elicitation_answer": ("_answers_locked",),
    "elicitation_ratio_type": ("_answers_locked",),
    "elicitation_back": ("_answers_locked",),
    "elicitation_reset": ("_answers_locked",),
}

# Writes and reads that hold nothing a snapshot reads.
NOT_INPUTS = {
    # checks, reads, previews, the phase table
    *("expect", "number", "text", "locked", "inputs_changed", "PHASE_RULES", "Action", "has_opened", "opens_in"),
    *("keys", "moment", "iso_moment"),
    # absent experts: the refusal an absent expert's input meets, the quorum's words, their names
    *("require_taking_part", "quorum_problem", "ABSENCES"),
    "before_inputs_change",
    *("phase_allows", "phase_refusal", "require_phase", "selection_fixed", "prioritisation_preview", "range_check"),
    *("invitation_refusal", "invitation_list", "invitation_list_for_user", "invitation_get_for_user"),
    *("invitation_get_by_key", "invitation_inputs", "study_export_bundle", "study_export_json"),
    # whether an invitation waits for an address (single sign-on may then create the account)
    "invitation_pending_for_email",
    *("prediction_set_evaluation", "candidate_report_summary", "computation_parameter_names"),
    *("computation_parameters", "report_options"),
    # the limits a prediction file's text is read under (issue 29)
    "prediction_text_limits",
    # evaluations cached per prediction set, reminders' dates, a new or deleted study
    *("prediction_set_evaluations_keep", "reminders_send", "study_create", "study_delete"),
    # a reminder's text, and the note that its mail was refused (issue 32: sent by the notifications' task)
    *("reminder_bodies", "reminder_unreached_set"),
    # the history of deleted studies past their retention (issue 22)
    "study_deletions_purge",
    # a new study (replayed through the services above), and a bundle's check before it
    *("study_import_bundle", "import_bundle_consented"),
    # a copy of a study, or an import, is a new study: it changes no other study's inputs (issue 31)
    *("study_import", "study_copy", "copy_title", "bundle_setup_only"),
    # accounts: e-mail, passwords, tokens, new users (a username never changes here: the admin, below)
    *("email_change_notify", "email_confirm", "email_confirmation_token", "user_email_set", "user_get_or_create"),
    *("users_get_or_create", "user_password_set", "api_token_create", "api_token_record_use", "api_token_revoke"),
    "api_tokens_revoke_all",
    # the discussion
    *("post_add", "post_edit", "post_hide", "post_unhide"),
    # tracking: a study's MLflow connection, a preview, a run published (none is an input)
    *("connection_of", "connection_set", "connection_remove", "import_preview", "mlflow_publish"),
    # the experiments of the server, for the page's picker (read from MLflow)
    "experiment_list",
    # the recovery sweep's part for imports: sent again or failed, nothing written to a study
    "imports_recover_stale",
    # revision rounds: their own rows (a round's snapshot is read from the inputs, never written to them)
    *("round_open", "round_close", "round_respond"),
}

MODULES = (workspace, invitations, bundles, reminders, evaluation_services, imports, tracking_services)


def _public(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            name
            for name, value in vars(module).items()
            if inspect.isfunction(value) and value.__module__ == module.__name__ and not name.startswith("_")
        ]
    return set(names)


def test_every_public_service_is_classified():
    everything = set().union(*(_public(module) for module in MODULES))
    classified = set(CLOSED_CHANGES) | set(TAKE_THE_LOCK) | NOT_INPUTS
    assert everything - classified == set(), "classify each new service: does it change a snapshot's inputs?"
    assert classified - everything == set()


def _function(name):
    for module in (*MODULES, phases):
        found = getattr(module, name, None)
        if inspect.isfunction(found):
            return found
    raise LookupError(name)


@pytest.mark.parametrize("name", sorted(TAKE_THE_LOCK))
def test_a_service_that_changes_inputs_takes_the_lock(name):
    source = inspect.getsource(_function(name))
    through = TAKE_THE_LOCK[name]
    assert "locked(" in source or "_relock(" in source or any(f"{other}(" in source for other in through)
    for other in through:
        if not other.startswith("_"):
            assert other in TAKE_THE_LOCK or other in CLOSED_CHANGES


@pytest.mark.parametrize("name", sorted(CLOSED_CHANGES))
def test_each_change_a_closed_study_allows_bumps_the_version_and_the_next_launch_reads_it(study, builds, name):
    first = launch(study)
    before, at_launch = version(study), study_snapshot(study=study)
    builds.clear()
    CLOSED_CHANGES[name](study)
    assert version(study) > before
    # The run waiting for its snapshot got the inputs as they were at its launch.
    assert builds == [study.pk] and stored(first) == at_launch
    study.refresh_from_db()
    if study.phase != "closed":
        workspace.study_close_assessment(study=study)
    fresh = study_snapshot(study=study)
    if name not in ("study_reopen_assessment", "study_transition"):  # the same inputs again
        assert fresh != stored(first)
    builds.clear()
    try:
        second = launch(study)
    except PhaseConflict:
        # A new candidate has no measurements yet: refused after reading it.
        assert any(None in row for row in fresh["measurements"])
        assert len(builds) == 1
        return
    assert builds == [] and taken(second) == fresh and len(builds) == 1


def test_closing_the_assessment_bumps_the_version(study):
    workspace.study_reopen_assessment(study=study)
    before = version(study)
    workspace.study_close_assessment(study=study)
    assert version(study) == before + 1


def test_a_username_changed_in_the_admin_is_in_the_next_snapshot(study, builds, admin_client, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    first = launch(study)
    user = User.objects.get(username="statistician")
    page = admin_client.get(f"/admin/auth/user/{user.pk}/change/")
    form = page.context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and name != "password"}
    data.update(
        username="biostatistician",
        groups=[],
        user_permissions=[],
        date_joined_0=user.date_joined.strftime("%Y-%m-%d"),
        date_joined_1=user.date_joined.strftime("%H:%M:%S"),
        is_active="on",
    )
    for key in ("date_joined", "last_login", "is_staff", "is_superuser"):
        data.pop(key, None)
    answer = admin_client.post(f"/admin/auth/user/{user.pk}/change/", data)
    assert answer.status_code == 302, answer.context["adminform"].form.errors if answer.context else answer
    second = launch(study)
    assert stored(first)["experts"][0] == "statistician"  # taken by the admin's change, before it wrote
    assert taken(second)["experts"][0] == "biostatistician"
    assert len(builds) == 2


def test_a_candidate_renamed_in_the_admin_is_in_the_next_snapshot(study, builds, admin_client, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    first = launch(study)
    model_admin = admin.site._registry[Candidate]
    candidate = _candidate(study)
    candidate.name = "C4.5"
    request = admin_client.get("/admin/").wsgi_request
    with transaction.atomic():
        model_admin.save_model(request, candidate, None, True)
    assert stored(first)["candidates"][0] == "J48"  # taken by the admin's change, before it wrote
    second = launch(study)
    # A deletion of the whole list's selection (the admin's action) too: the
    # run waiting for its snapshot gets the renamed candidate and JRip still.
    model_admin.delete_queryset(request, Candidate.objects.filter(study=study, name="JRip"))
    assert stored(second)["candidates"][0] == "C4.5" and "JRip" in stored(second)["candidates"]
    assert "JRip" not in taken(launch(study))["candidates"]
    assert len(builds) == 3


def test_every_admin_of_a_model_a_snapshot_reads_bumps_the_version():
    # The snapshot reads these models (engine.snapshot) and the user's username.
    read = {
        "Study",
        "Membership",
        "QualityAttribute",
        "Metric",
        "Candidate",
        "Measurement",
        "AttributeVote",
        "MetricVote",
        "AttributePrioritisation",
        "MetricPrioritisation",
        "AttributeJudgment",
        "AttributeWeight",
        "MetricJudgment",
        "MetricWeight",
        "AcceptableRange",
        "PeerWeight",
        "User",
    }
    registered = {model.__name__: model_admin for model, model_admin in admin.site._registry.items()}
    assert read <= set(registered)
    assert {name for name in read if not isinstance(registered[name], InputsAdmin)} == set()
    # Everything else registered holds no input of a snapshot.
    # The history's records and the deleted studies (issue 22) are read-only there.
    history = {name for name in registered if name.startswith("Historical")} | {"StudyDeletion"}
    assert all(not registered[name].has_change_permission(None) for name in history)
    # Two-factor devices (django-otp's admin, accounts.otp) hold none either.
    devices = {"TOTPDevice", "StaticDevice"}
    # The notifications and their preferences (issue 32) hold none either.
    notifications = {"Notification", "NotificationPreference"}
    # Nor the site policy and the sign-up requests (accounts, issue 32).
    accounts = {"SitePolicy", "SignUpRequest"}
    assert set(registered) - read - history - devices == {
        "ApiToken",
        "Group",
        "Run",
        "PredictionSet",
        *notifications,
        *accounts,
    }


def test_admin_study_paths_lead_to_the_study(study):
    expert = Membership.objects.filter(study=study, role="expert").first()
    assert expert is not None
    checked = set()
    for model, model_admin in admin.site._registry.items():
        if isinstance(model_admin, InputsAdmin):
            some = list(model._default_manager.filter(**{model_admin.study_path: study.pk})[:1])
            if some:  # the case study has rows of most (its votes were decided by the thresholds)
                assert model_admin.studies_of([some[0].pk]) == [study.pk], model.__name__
                checked.add(model.__name__)
    assert {"Study", "Membership", "Candidate", "Measurement", "PeerWeight", "AttributeWeight", "User"} <= checked


# --- the launch reads no inputs; the worker or the next change takes them -------------------


def test_a_launch_after_a_change_builds_no_snapshot(study, monkeypatch):
    workspace.measurements_set(study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.5}])

    def not_in_the_request(*args, **kwargs):
        raise AssertionError("a launch must not read or check the whole inputs")

    monkeypatch.setattr(engine_services, "study_snapshot", not_in_the_request)
    monkeypatch.setattr(engine_services, "snapshot_arrays", not_in_the_request)
    run = launch(study)
    assert stored(run) is None and run.input_version == version(study) and run.status == Run.Status.QUEUED


def test_the_worker_takes_the_snapshot_of_the_inputs_at_launch_and_computes(study):
    run = launch(study)
    at_launch = study_snapshot(study=study)
    outcome = engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert outcome.status == run.status == Run.Status.SUCCEEDED
    assert run.snapshot == at_launch
    # The same results as from a snapshot taken in the request, as before.
    assert run.results == engine_services.evaluate_snapshot(at_launch)


def test_a_waiting_run_gets_the_inputs_before_a_change_and_computes_with_them(study):
    run = launch(study)
    j48 = study_snapshot(study=study)["measurements"][0][0]
    workspace.measurements_set(study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.5}])
    assert j48 != 0.5 and stored(run)["measurements"][0][0] == j48
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    first = {c["name"]: c for c in run.results["candidates"]}["J48"]
    assert run.status == Run.Status.SUCCEEDED and run.snapshot["measurements"][0][0] == j48
    assert first == {c["name"]: c for c in engine_services.evaluate_snapshot(run.snapshot)["candidates"]}["J48"]


def test_a_run_whose_version_moved_on_without_its_snapshot_fails_saying_so(study):
    run = launch(study)
    # A change made around the services (a migration's bump, raw SQL) takes no snapshot.
    Study.objects.filter(pk=study.pk).update(input_version=F("input_version") + 1)
    assert engine_services.run_snapshot_take(run_id=run.pk) is None
    outcome = engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert outcome.status == run.status == Run.Status.FAILED and run.snapshot is None
    assert run.error == engine_services.SNAPSHOT_LOST


def test_a_change_outside_the_closed_phase_looks_for_no_waiting_run(study, django_assert_num_queries):
    workspace.study_reopen_assessment(study=study)
    with django_assert_num_queries(1):  # the UPDATE that locks and bumps, nothing else
        workspace_checks.locked(study)
    # In the closed phase, one query more: are there runs waiting for their snapshot?
    workspace.study_close_assessment(study=study)
    with django_assert_num_queries(2):
        workspace_checks.locked(study)


def test_a_queued_run_without_its_snapshot_is_shown_and_served(study, client, admin_client, settings):
    run = launch(study)
    client.force_login(study.designer)
    assert stored(run) is None
    page = client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200 and b"Queued" in page.content
    answer = client.get(f"/api/v1/runs/{run.pk}/")
    assert answer.status_code == 200 and answer.json()["status"] == "queued"
    results = client.get(f"/api/v1/runs/{run.pk}/results/")
    assert results.status_code == 409
    assert client.get(f"/runs/{run.pk}/candidates/J48/").status_code == 409  # no results yet
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    assert admin_client.get(f"/admin/engine/run/{run.pk}/change/").status_code == 200
    assert stored(run) is None  # nothing read or took it


# --- the launch's check of the inputs, by counts --------------------------------------------


def _expert(study, name):
    return Membership.objects.get(study=study, user__username=name)


def _ranges_without_default(study, but):
    """Success rate loses its default range; every expert but ``but`` gives one."""
    metric = Metric.objects.get(study=study, name="Success rate")
    Metric.objects.filter(pk=metric.pk).update(default_least_acceptable=None, default_desired=None)
    experts = Membership.objects.filter(study=study, role="expert").exclude(user__username=but)
    AcceptableRange.objects.bulk_create(
        [AcceptableRange(expert=expert, metric=metric, least_acceptable=0.8, desired=0.95) for expert in experts]
    )


# Each change makes the inputs unfit for a run, or keeps them fit, written
# around the services (which refuse most of them) as an older version or the
# admin could have left them.
GAPS = {
    "nothing": lambda s: None,
    "a measurement": lambda s: Measurement.objects.filter(study=s, candidate__name="JRip").first().delete(),
    "a candidate without values": lambda s: Candidate.objects.create(study=s, name="New", position=99),
    "a peer weight": lambda s: PeerWeight.objects.filter(rater=_expert(s, "researcher")).first().delete(),
    "a peer weight of 1": lambda s: PeerWeight.objects.filter(
        rater=_expert(s, "researcher"), ratee=_expert(s, "clinician")
    ).update(weight=1),
    "peer weights summing to 1.1": lambda s: PeerWeight.objects.filter(
        rater=_expert(s, "researcher"), ratee=_expert(s, "researcher")
    ).update(weight=F("weight") + 0.1),
    "peer weights off by the tolerance": lambda s: PeerWeight.objects.filter(
        rater=_expert(s, "researcher"), ratee=_expert(s, "researcher")
    ).update(weight=F("weight") + 5e-7),
    "peer weights off by just over the tolerance": lambda s: PeerWeight.objects.filter(
        rater=_expert(s, "researcher"), ratee=_expert(s, "researcher")
    ).update(weight=F("weight") + 1.01e-6),
    "an attribute weight": lambda s: (
        AttributeWeight.objects.filter(prioritisation__expert=_expert(s, "clinician")).first().delete()
    ),
    "a range where the metric has no default": lambda s: _ranges_without_default(s, but="clinician"),
    "every range given where the metric has no default": lambda s: _ranges_without_default(s, but=None),
    "no expert": lambda s: Membership.objects.filter(study=s, role="expert").delete(),
}


def _run_accepts(study):
    """Whether the run would accept the study's inputs as they stand (its own validity rules)."""
    try:
        snapshot_arrays(study_snapshot(study=study))
    except RunInputError:
        return False
    return True


@pytest.mark.parametrize("gap", sorted(GAPS))
def test_the_launchs_check_by_counts_agrees_with_reading_the_inputs(study, gap):
    GAPS[gap](study)
    fit = _run_accepts(study)
    # Never lets through inputs the run could not use; a doubt only costs the read.
    assert inputs_complete(study=study) == fit
    if fit:
        assert launch(study).snapshot is None
    else:
        with pytest.raises(PhaseConflict) as refused:
            launch(study)
        assert refused.value.code == "run_inputs_invalid" and str(refused.value).startswith("The run cannot start: ")


class _Rollback(Exception):
    """Undoes one example's changes (a savepoint) so the next starts from the case study."""


@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    gaps=st.one_of(st.just(set()), st.sets(st.sampled_from(sorted(set(GAPS) - {"nothing"})), max_size=3)),
    peer_shift=st.sampled_from([0.0, 5e-7, -5e-7, 9.9e-7, 1.01e-6, -1.01e-6, 1e-3]),
    weight=st.sampled_from([None, 1.0, 0.9999999, 1e-9]),
)
def test_the_check_by_counts_never_passes_inputs_the_run_refuses(study, gaps, peer_shift, weight):
    """Issue 30 item 3: launch completeness is checked against the snapshot's
    own validity rules (``snapshot_arrays``) for any mix of gaps, peer-weight
    rows off by around the tolerance and odd peer weights (equal range
    bounds and weights outside (0, 1] the database refuses): a "complete"
    the run would then refuse is the one answer it may never give; without
    a doubt (no change), the two agree."""
    # The two gaps of the default-less metric write the same ranges: one at a time.
    assume(not {"a range where the metric has no default", "every range given where the metric has no default"} <= gaps)
    try:
        with transaction.atomic():
            for gap in sorted(gaps, key=lambda gap: (gap == "no expert", gap)):  # the others name experts
                GAPS[gap](study)
            researcher = PeerWeight.objects.filter(rater__study=study, rater__user__username="researcher")
            researcher.filter(ratee__user__username="researcher").update(weight=F("weight") + peer_shift)
            if weight is not None:
                researcher.filter(ratee__user__username="clinician").update(weight=weight)
            fit = _run_accepts(study)
            complete = inputs_complete(study=study)
            assert fit or not complete
            if not gaps and peer_shift == 0.0 and weight is None:
                assert complete and fit
            raise _Rollback
    except _Rollback:
        pass


# --- many at once (PostgreSQL) --------------------------------------------------------


def _at_once(count, function):
    """``function(i)`` from ``count`` threads released together (each with
    its own connection); their answers, in order, or the first error."""
    from django.db import connections

    barrier, answers, errors = threading.Barrier(count), [None] * count, []

    def one(i):
        try:
            barrier.wait()
            answers[i] = function(i)
        except Exception as error:  # reported below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    return answers


@pytest.fixture
def slow_reads(monkeypatch):
    """Every read of a study's inputs by the engine, each taking 0.5 s more:
    long enough for whatever runs beside it to wait for it."""
    reads, real = [], engine_services.study_snapshot

    def slow_read(**kwargs):
        reads.append(kwargs["study"].pk)
        threading.Event().wait(0.5)
        return real(**kwargs)

    monkeypatch.setattr(engine_services, "study_snapshot", slow_read)
    monkeypatch.setattr(engine_services, "_enqueue", lambda run_id, *priority: True)
    return reads


@pytest.mark.skipif(not ON_POSTGRESQL, reason="concurrent launches: PostgreSQL (SQLite serialises every write)")
@pytest.mark.django_db(transaction=True)
def test_simultaneous_launches_read_nothing_and_their_workers_read_the_study_once(slow_reads, monkeypatch):
    study = bundles.study_import_bundle(bundle=case_study_bundle())
    checks, real_check = [], engine_services.inputs_complete

    def slow_check(**kwargs):
        checks.append(kwargs["study"].pk)
        threading.Event().wait(0.3)  # long enough for the other launches to find no run yet
        return real_check(**kwargs)

    monkeypatch.setattr(engine_services, "inputs_complete", slow_check)
    # A change first: no run has a snapshot at the new version.
    workspace.measurements_set(study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.5}])
    runs = _at_once(8, lambda i: launch(study).pk)
    # One launch checked the inputs (by counts), the others waited for it; none read them.
    assert checks == [study.pk] and slow_reads == [] and len(set(runs)) == 8
    assert Run.objects.filter(pk__in=runs, snapshot__isnull=True).count() == 8
    # Eight workers claim them at once: one reads the inputs, the others wait for it.
    snapshots = _at_once(8, lambda i: engine_services.run_snapshot_take(run_id=runs[i]))
    assert slow_reads == [study.pk]
    assert all(snapshot == snapshots[0] for snapshot in snapshots)
    assert snapshots[0] == study_snapshot(study=study) and snapshots[0]["measurements"][0][0] == 0.5
    Run.objects.filter(study=study).delete()
    study.delete()


@pytest.mark.skipif(not ON_POSTGRESQL, reason="a change racing a worker: PostgreSQL row locks")
@pytest.mark.django_db(transaction=True)
def test_a_change_racing_the_worker_taking_the_snapshot_waits_and_the_snapshot_is_the_inputs_at_launch(slow_reads):
    study = bundles.study_import_bundle(bundle=case_study_bundle())
    run = launch(study)
    at_launch = study_snapshot(study=study)

    def one(i):
        if i == 0:
            return engine_services.run_snapshot_take(run_id=run.pk)
        threading.Event().wait(0.2)  # while the worker reads the inputs
        return workspace.measurements_set(
            study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.5}]
        )

    taken_by_worker, _ = _at_once(2, one)
    assert taken_by_worker == at_launch == stored(run) and at_launch["measurements"][0][0] != 0.5
    # The change waited for the worker, found nothing left to take, and was made.
    assert slow_reads == [study.pk] and study_snapshot(study=study)["measurements"][0][0] == 0.5
    Run.objects.filter(study=study).delete()
    study.delete()


@pytest.mark.skipif(not ON_POSTGRESQL, reason="launches racing a change: PostgreSQL row locks")
@pytest.mark.django_db(transaction=True)
def test_launches_racing_changes_each_get_the_inputs_of_their_version(monkeypatch):
    study = bundles.study_import_bundle(bundle=case_study_bundle())
    monkeypatch.setattr(engine_services, "_enqueue", lambda run_id, *priority: True)

    def one(i):
        if i % 2:
            return launch(study).pk
        workspace.measurements_set(
            study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.5 + i / 100}]
        )
        return None

    runs = [pk for pk in _at_once(8, one) if pk is not None]
    values = {}
    for pk in runs:
        snapshot = stored(Run.objects.get(pk=pk)) or engine_services.run_snapshot_take(run_id=pk)
        values.setdefault(Run.objects.get(pk=pk).input_version, set()).add(snapshot["measurements"][0][0])
    # One value per version; and the last version's is the study's now.
    assert all(len(seen) == 1 for seen in values.values())
    assert values.get(version(study), {study_snapshot(study=study)["measurements"][0][0]}) == {
        study_snapshot(study=study)["measurements"][0][0]
    }
    Run.objects.filter(study=study).delete()
    study.delete()
