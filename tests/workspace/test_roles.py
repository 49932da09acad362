"""Who may make a change is one check (``workspace.services.roles``, issue 30
item 4): the services that need a role refuse anyone else whoever calls them
(a page, the API, a command, a task), with the message the pages and the API
show, and write nothing; the system (no acting user) may launch runs and
analyses."""

import pytest

from engine import analyses
from engine import services as engine_services
from engine.models import Analysis, Run
from tests.fixtures import db_snapshot
from workspace import services
from workspace.bundles import study_import_bundle
from workspace.errors import RoleRequired
from workspace.models import Membership, Phase, RevisionRound
from workspace.selectors import study_get
from workspace.services.roles import require_role, roles_of

from ..engine.test_runs import case_study_bundle

pytestmark = pytest.mark.django_db


def test_roles_come_from_the_prefetch_only_when_it_is_the_users(make_study, cast):
    built = make_study(Phase.ASSESSMENT)
    as_alice = study_get(study_id=built.study.pk, user=cast.alice)  # alice's memberships prefetched
    assert roles_of(study=as_alice, user=cast.alice) == {Membership.Role.DESIGNER}
    # The same object asked about bob: alice's prefetch is not bob's roles.
    assert roles_of(study=as_alice, user=cast.bob) == set()
    assert roles_of(study=built.study, user=cast.bob) == {Membership.Role.EXPERT}
    assert roles_of(study=built.study, user=None) == set()
    with pytest.raises(RoleRequired, match=r"^Only the designer of this study can open a round\.$"):
        require_role(study=built.study, user=cast.bob, role=Membership.Role.DESIGNER, action="open a round")
    with pytest.raises(RoleRequired, match=r"^Only the experts of this study can answer\.$"):
        require_role(study=built.study, user=cast.alice, role=Membership.Role.EXPERT, action="answer")


def test_an_expert_cannot_open_or_close_a_round_through_the_service(make_study, cast):
    built = make_study(Phase.ASSESSMENT)
    before = db_snapshot()
    with pytest.raises(RoleRequired, match="Only the designer of this study can open a revision round."):
        services.round_open(study=built.study, by=cast.bob)
    assert db_snapshot() == before
    services.round_open(study=built.study, by=cast.alice)
    with pytest.raises(RoleRequired, match="Only the designer of this study can close a revision round."):
        services.round_close(study=built.study, by=cast.bob)
    assert RevisionRound.objects.filter(study=built.study).open().count() == 1


def test_only_the_designer_or_the_system_launches_runs_and_analyses():
    study = study_import_bundle(bundle=case_study_bundle())
    expert = Membership.objects.filter(study=study, role=Membership.Role.EXPERT).first().user
    with pytest.raises(RoleRequired, match="Only the designer of this study can launch validation runs."):
        engine_services.run_launch(study=study, launched_by=expert)
    assert not Run.objects.exists()
    run = engine_services.run_launch(study=study, launched_by=None)  # a command's launch
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    with pytest.raises(RoleRequired, match="Only the designer of this study can launch robustness analyses."):
        analyses.analysis_launch(run=run, kind=Analysis.Kind.LEAVE_ONE_OUT, launched_by=expert)
    assert not Analysis.objects.exists()
    assert analyses.analysis_launch(run=run, kind=Analysis.Kind.LEAVE_ONE_OUT, launched_by=study.designer).units == 4
