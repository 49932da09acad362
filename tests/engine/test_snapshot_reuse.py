"""Issue 17, finding 6: a launch copies the snapshot of an earlier run taken at
the same ``Study.input_version`` instead of reading the study again, and every
change that may alter a snapshot bumps that version, so the snapshot is still
the inputs at launch."""

import inspect
import threading

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import connection, transaction

from engine import services as engine_services
from engine.models import Run
from engine.services import run_launch
from engine.snapshot import study_snapshot
from evaluation import services as evaluation_services
from workspace import bundles, invitations, reminders
from workspace import services as workspace
from workspace.admin import InputsAdmin
from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import Candidate, Membership, Study
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
    """How many times a launch read the study's inputs."""
    calls = []
    real = engine_services.study_snapshot

    def counting(**kwargs):
        calls.append(kwargs["study"].pk)
        return real(**kwargs)

    monkeypatch.setattr(engine_services, "study_snapshot", counting)
    return calls


def stored(run):
    return Run.objects.values_list("snapshot", flat=True).get(pk=run.pk)


# --- reuse -------------------------------------------------------------------------


def test_two_launches_without_a_change_share_one_snapshot_read_once(study, builds):
    first, second = launch(study), launch(study)
    assert builds == [study.pk]
    assert stored(second) == stored(first) == study_snapshot(study=study)
    assert second.pk != first.pk and first.input_version == second.input_version == version(study)
    # The run returned reads its copied snapshot on demand, not the placeholder.
    assert second.snapshot == stored(first)
    assert second.status == Run.Status.QUEUED and second.launched_by == study.designer


def test_a_copied_run_executes_to_the_same_results(study):
    first, second = launch(study), launch(study)
    for run in (first, second):
        assert engine_services.run_execute(run_id=run.pk).status == Run.Status.SUCCEEDED
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.results == first.results


def test_another_tolerance_takes_its_own_snapshot(study, builds):
    first, other = launch(study), launch(study, tolerance=1e-6)
    assert len(builds) == 2
    assert stored(first)["tolerance"] != stored(other)["tolerance"] == 1e-6
    assert stored(launch(study, tolerance=1e-6)) == stored(other)
    assert len(builds) == 2


def test_a_change_between_two_launches_gives_two_snapshots(study, builds):
    first = launch(study)
    workspace.measurements_set(study=study, measurements=[{"candidate": "J48", "metric": "Success rate", "value": 0.5}])
    second = launch(study)
    assert len(builds) == 2
    assert stored(first)["measurements"][0][0] != 0.5 == stored(second)["measurements"][0][0]
    assert stored(second) == study_snapshot(study=study)
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
    launch(study)
    assert len(builds) == 1


def test_runs_from_before_versions_are_never_copied(study, builds):
    old = launch(study)
    Run.objects.filter(pk=old.pk).update(input_version=None, snapshot={"stale": True})
    new = launch(study)
    assert len(builds) == 2 and stored(new) == study_snapshot(study=study)


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
    "measurements_compute": ("measurements_set",),
    "metric_computation_set": (),
    "metric_computation_remove": (),
    "prediction_set_import": (),
    "prediction_set_delete": (),
}

# Writes and reads that hold nothing a snapshot reads.
NOT_INPUTS = {
    # checks, reads, previews, the phase table
    *("expect", "number", "text", "locked", "inputs_changed", "PHASE_RULES", "Action", "has_opened", "opens_in"),
    *("phase_allows", "phase_refusal", "require_phase", "selection_fixed", "prioritisation_preview", "range_check"),
    *("invitation_refusal", "invitation_list", "invitation_list_for_user", "invitation_get_for_user"),
    *("invitation_get_by_key", "invitation_inputs", "study_export_bundle", "study_export_json"),
    *("prediction_set_evaluation", "candidate_report_summary", "computation_parameter_names"),
    *("computation_parameters", "report_options"),
    # evaluations cached per prediction set, reminders' dates, a new or deleted study
    *("prediction_set_evaluations_keep", "reminders_send", "study_create", "study_delete"),
    # a new study (replayed through the services above), and a bundle's check before it
    *("study_import_bundle", "import_bundle_consented"),
    # accounts: e-mail, passwords, tokens, new users (a username never changes here: the admin, below)
    *("email_change_notify", "email_confirm", "email_confirmation_token", "user_email_set", "user_get_or_create"),
    *("users_get_or_create", "user_password_set", "api_token_create", "api_token_record_use", "api_token_revoke"),
    "api_tokens_revoke_all",
    # the discussion
    *("post_add", "post_edit", "post_hide", "post_unhide"),
    # revision rounds: their own rows (a round's snapshot is read from the inputs, never written to them)
    *("round_open", "round_close", "round_respond"),
}

MODULES = (workspace, invitations, bundles, reminders, evaluation_services, imports)


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
    before = version(study)
    CLOSED_CHANGES[name](study)
    assert version(study) > before
    study.refresh_from_db()
    if study.phase != "closed":
        workspace.study_close_assessment(study=study)
    fresh = study_snapshot(study=study)
    if name not in ("study_reopen_assessment", "study_transition"):  # the same inputs again
        assert fresh != stored(first)
    try:
        second = launch(study)
    except PhaseConflict:
        # A new candidate has no measurements yet: refused after reading it.
        assert any(None in row for row in fresh["measurements"])
        assert len(builds) == 2
        return
    assert len(builds) == 2 and stored(second) == fresh


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
    assert stored(first)["experts"][0] == "statistician"
    assert stored(second)["experts"][0] == "biostatistician"
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
    second = launch(study)
    assert stored(first)["candidates"][0] == "J48" and stored(second)["candidates"][0] == "C4.5"
    # A deletion of the whole list's selection (the admin's action) too.
    model_admin.delete_queryset(request, Candidate.objects.filter(study=study, name="JRip"))
    assert "JRip" not in stored(launch(study))["candidates"]
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
    assert set(registered) - read == {"ApiToken", "Group", "Run", "PredictionSet"}


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


# --- many at once (PostgreSQL) --------------------------------------------------------


@pytest.mark.skipif(not ON_POSTGRESQL, reason="concurrent launches: PostgreSQL (SQLite serialises every write)")
@pytest.mark.django_db(transaction=True)
def test_simultaneous_launches_read_the_study_once(monkeypatch):
    from django.db import connections

    study = bundles.study_import_bundle(bundle=case_study_bundle())
    monkeypatch.setattr(engine_services, "_enqueue", lambda run_id, *priority: True)
    reads, real = [], engine_services.study_snapshot
    entered = threading.Event()

    def slow_read(**kwargs):
        reads.append(1)
        entered.set()
        # Long enough for every other launch to find no run yet and wait.
        threading.Event().wait(0.5)
        return real(**kwargs)

    monkeypatch.setattr(engine_services, "study_snapshot", slow_read)
    count, barrier, runs, errors = 8, threading.Barrier(8), [], []

    def one():
        try:
            barrier.wait()
            runs.append(launch(study).pk)
        except Exception as error:  # reported below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == [] and len(runs) == count
    assert entered.is_set() and len(reads) == 1
    snapshots = list(Run.objects.filter(pk__in=runs).values_list("snapshot", flat=True))
    assert len(snapshots) == count and all(snapshot == snapshots[0] for snapshot in snapshots)
    assert snapshots[0] == real(study=study)
    Run.objects.filter(study=study).delete()
    study.delete()
