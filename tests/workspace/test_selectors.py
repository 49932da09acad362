"""Selectors: every read scoped to what the user may see."""

import pytest

from workspace import selectors
from workspace.models import Membership, Study

pytestmark = pytest.mark.django_db


def test_a_study_is_found_only_by_its_members(make_study, cast):
    built = make_study("assessment")
    for member in (cast.alice, cast.bob):
        study = selectors.study_get(study_id=built.study.pk, user=member)
        assert study.pk == built.study.pk and study.designer == cast.alice
    with pytest.raises(Study.DoesNotExist):
        selectors.study_get(study_id=built.study.pk, user=cast.charlie)
    with pytest.raises(Study.DoesNotExist):
        selectors.study_detail_get(study_id=built.study.pk, user=cast.charlie)


def test_the_study_detail_lists_roles_experts_and_selection(make_study, cast):
    built = make_study("assessment")
    study = selectors.study_detail_get(study_id=built.study.pk, user=cast.bob)
    assert [m.role for m in study.my_memberships] == ["expert"]
    assert [m.user.username for m in study.experts] == ["bob", "carol"]
    assert [a.name for a in study.selected_attributes] == ["Accuracy", "Consistency", "Efficiency"]
    assert [m.name for m in study.selected_metrics] == ["Success rate", "AUC", "Fold stdev", "Training time"]


def test_experts_are_listed_in_the_order_they_joined_and_found_by_name(make_study, cast):
    built = make_study("draft", experts=("carol", "bob"))
    assert [m.user.username for m in selectors.expert_list(study=built.study)] == ["carol", "bob"]
    assert selectors.expert_get(study=built.study, username="bob") == built.bob
    for nobody in ("alice", "charlie", "bob\x00"):  # the designer is not an expert; a NUL names nobody
        with pytest.raises(Membership.DoesNotExist):
            selectors.expert_get(study=built.study, username=nobody)


def test_expert_inputs_read_only_the_sections_asked_for(make_study, django_assert_num_queries):
    built = make_study("closed")
    bob = selectors.expert_get(study=built.study, username="bob")
    # the peer weights of bob, with the rated experts' users
    with django_assert_num_queries(1):
        inputs = selectors.expert_inputs_list(study=built.study, experts=[bob], sections=["peer_weights"])
    assert inputs == {"bob": {"peer_weights": {"bob": 0.6, "carol": 0.4}}}
    everything = selectors.expert_inputs_list(study=built.study)
    assert list(everything) == ["bob", "carol"]
    assert list(everything["carol"]) == ["votes", "priorities", "ranges", "peer_weights"]
    assert "result" not in everything["carol"]["priorities"]  # results only when asked for
    with_results = selectors.expert_inputs_list(study=built.study, experts=[built.carol], with_results=True)
    assert with_results["carol"]["priorities"]["result"]["consistency_ratio"] > 0
