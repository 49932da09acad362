"""Absent experts (issue 31, item 1; docs/method.md, "Absent experts"): the
designer excludes an expert or marks them abstaining in voting or the
assessment; their inputs are kept but not used, the run ranks without them
exactly as leave-one-expert-out removes them, closing needs the quorum, and
re-admitting is possible until the study closes."""

import numpy as np
import pytest
from django.core import mail

from engine import core, robustness
from engine import services as engine_services
from engine.models import Run
from engine.snapshot import snapshot_arrays, study_snapshot
from workspace import selectors, services
from workspace.errors import InvalidInput, PhaseConflict, RoleRequired
from workspace.models import Membership, Phase

pytestmark = pytest.mark.django_db


def _exclude(built, who="carol", absence="excluded", reason="on leave until March"):
    return services.expert_absence_set(
        study=built.study, expert=built.experts[who], absence=absence, reason=reason, acting=built.study.designer
    )


def _run(built):
    run = engine_services.run_launch(study=built.study, launched_by=built.study.designer)
    engine_services.run_execute(run_id=run.pk)
    return Run.objects.get(pk=run.pk)


def test_the_run_ranks_without_the_excluded_expert_as_leave_one_out_does(
    make_study, cast, django_capture_on_commit_callbacks, eager_celery
):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    cast.carol.email = "carol@example.org"
    cast.carol.save()
    full = study_snapshot(study=built.study)
    W, V, L, U, M = snapshot_arrays(full)
    carol = full["experts"].index("carol")
    expected = robustness.leave_one_out(weights=W, peer_weights=V, lower=L, upper=U, measurements=M, experts=[carol])

    with django_capture_on_commit_callbacks(execute=True):
        _exclude(built)
    services.study_close_assessment(study=built.study)
    run = _run(built)

    assert run.status == Run.Status.SUCCEEDED
    assert run.snapshot["experts"] == ["bob"]
    assert run.snapshot["absent"] == [{"expert": "carol", "absence": "excluded", "reason": "on leave until March"}]
    # bob's peer weights (0.6 on himself, 0.4 on carol) shared out: all on bob
    assert run.snapshot["peer_weights"] == [[1.0]]
    cef = {c["name"]: c["cef"] for c in run.results["candidates"]}
    names = full["candidates"]
    assert [cef[name] for name in names] == pytest.approx(expected.cef[0].tolist(), abs=1e-12)
    assert run.results["expert_influence"] == [pytest.approx(1.0)]  # bob alone
    # the expert was told, once the change committed (by the notifications task, run eagerly here)
    assert [m.to for m in mail.outbox] == [["carol@example.org"]]
    assert "on leave until March" in mail.outbox[0].body


def test_peer_weights_are_shared_out_by_the_one_rule_of_leave_one_out():
    V = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    keep = np.array([True, False, True])
    kept = core.peer_weights_kept(V, keep)
    # by hand: rows 0 and 2 without column 1, each divided by what is left
    assert kept.ravel().tolist() == pytest.approx([0.5 / 0.7, 0.2 / 0.7, 0.2 / 0.8, 0.6 / 0.8])
    _, V_without, _, _ = robustness.without_expert(1, np.zeros((3, 2)), V, np.zeros((3, 2)), np.zeros((3, 2)))
    assert V_without.tolist() == kept.tolist()
    # a row left with nothing stays 0 (the engine refuses it), a gap stays a gap
    lone = core.peer_weights_kept(np.array([[0.0, 1.0], [0.5, 0.5]]), np.array([True, False]))
    assert lone.tolist() == [[0.0]]
    gap = core.peer_weights_kept(np.array([[np.nan, 0.5, 0.5], [0.2, 0.4, 0.4], [1, 0, 0]]), keep)
    assert np.isnan(gap[0, 0]) and gap[1].tolist() == [1.0, 0.0]


def test_an_absent_expert_owes_nothing_and_gives_nothing(make_study):
    built = make_study(Phase.ASSESSMENT)  # no inputs yet
    assert set(selectors.missing_input_list(study=built.study)) == {"bob", "carol"}
    _exclude(built, absence="abstaining", reason="conflict of interest")
    assert set(selectors.missing_input_list(study=built.study)) == {"bob"}
    carol = Membership.objects.get(pk=built.carol.pk)
    with pytest.raises(PhaseConflict) as refused:
        services.ranges_set(expert=carol, ranges={"AUC": [0.7, 0.9]})
    assert refused.value.code == "expert_absent"
    assert "carol is abstaining in this study" in str(refused.value)
    assert not carol.ranges.exists()


def test_closing_needs_the_quorum_and_names_it(make_study):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    services.study_update(study=built.study, quorum=2)
    _exclude(built)
    with pytest.raises(PhaseConflict) as refused:
        services.study_close_assessment(study=built.study)
    assert str(refused.value) == (
        "Assessment cannot close: at least 2 experts must take part to close the assessment; "
        "1 does (1 excluded or abstaining)."
    )
    services.expert_readmit(study=built.study, expert=built.carol, acting=built.study.designer)
    assert services.study_close_assessment(study=built.study).phase == Phase.CLOSED
    # closed: no more changes of the panel
    with pytest.raises(PhaseConflict):
        _exclude(built)


def test_quorum_bounds(make_study):
    built = make_study(Phase.ASSESSMENT)
    assert services.study_update(study=built.study, quorum=1000).quorum == 1000
    for bad in (-1, 1001, "2", True, 1.5):
        with pytest.raises(InvalidInput) as refused:
            services.study_update(study=built.study, quorum=bad)
        assert list(refused.value.errors) == ["quorum"]


def test_an_excluded_experts_votes_do_not_count(make_study):
    # bob's vote alone selects Efficiency (threshold 1)
    built = make_study(Phase.VOTING)
    assert selectors.vote_selection_get(study=built.study)[0] >= {built.attributes["Efficiency"].pk}
    _exclude(built, who="bob", reason="left the team")
    attributes, _ = selectors.vote_selection_get(study=built.study)
    assert built.attributes["Efficiency"].pk not in attributes
    tallies = {a.name: a.vote_count for a in selectors.ballot_list(study=built.study, with_tallies=True)}
    assert tallies["Efficiency"] == 0


def test_who_may_exclude_and_when_and_the_checks_of_each_field(make_study, cast):
    draft = make_study(Phase.DRAFT)
    with pytest.raises(PhaseConflict) as refused:
        _exclude(draft)
    assert "Excluding an expert" in str(refused.value)
    built = make_study(Phase.ASSESSMENT, title="Another")
    with pytest.raises(RoleRequired):
        services.expert_absence_set(
            study=built.study, expert=built.carol, absence="excluded", reason="x", acting=cast.bob
        )
    for field, absence, reason in (
        ("absence", "gone", "why"),
        ("reason", "excluded", ""),
        ("reason", "excluded", "x" * 501),
    ):
        with pytest.raises(InvalidInput) as refused:
            _exclude(built, absence=absence, reason=reason)
        assert list(refused.value.errors) == [field]
    assert not Membership.objects.get(pk=built.carol.pk).absence
    assert _exclude(built, reason="x" * 500).absence_reason == "x" * 500
    with pytest.raises(InvalidInput) as refused:
        services.expert_readmit(study=built.study, expert=built.bob, acting=built.study.designer)
    assert refused.value.errors == {"username": ["bob takes part already"]}


def test_a_bundle_s_ahp_weighting_that_is_not_a_text_is_refused_naming_it(cast):
    """Found by schemathesis: an object for ahp_weighting was a server error."""
    from workspace.bundles import study_import_bundle

    for weighting in ({}, [], 3):
        with pytest.raises(InvalidInput) as refused:
            study_import_bundle(
                bundle={"format": "approve-study/1", "title": "T", "ahp_weighting": weighting}, importer=cast.alice
            )
        assert list(refused.value.errors) == ["ahp_weighting"]
