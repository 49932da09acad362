"""Selectors: every read scoped to what the user may see."""

import numpy as np
import pytest

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine.models import Run
from engine.selectors import RUN_JSON_FIELDS
from workspace import selectors, services
from workspace.models import ApiToken, Candidate, Measurement, Membership, Metric, Study

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


# --- missing inputs: one definition --------------------------------------------------------


def test_every_view_of_missing_inputs_reads_the_same_gaps(make_study, cast):
    built = make_study("assessment", experts=("bob", "carol", "alice"))
    services.ranges_set(expert=built.carol, ranges={"AUC": [0.5, 0.9]})
    progress = {e.user.username: e for e in selectors.expert_progress_list(study=built.study)}
    gaps = {name: selectors.input_gaps(expert) for name, expert in progress.items()}
    assert gaps == {
        "bob": ["priorities", "ranges", "peer_weights"],
        "carol": ["priorities", "peer_weights"],
        "alice": ["priorities", "ranges", "peer_weights"],
    }
    # the close-phase check names the same experts, in the same order of inputs
    missing = selectors.missing_input_list(study=built.study)
    assert missing["carol"] == ["prioritisation of the attributes", "weights for fellow experts"]
    assert set(missing) == {name for name, owed in gaps.items() if owed}
    # the expert's steps
    steps = selectors.expert_steps_get(expert=built.carol)
    assert steps == {
        "votes": False,
        "priorities": False,
        "ranges": True,
        "peer_weights": False,
        "priorities_inconsistent": False,
        "ranges_unconfirmed": False,
    }


def test_missing_inputs_read_in_five_queries_however_many_experts(make_study, django_assert_num_queries):
    built = make_study("assessment", inputs=True)
    # experts with their progress, metrics needing a range, ranges, the ranges to confirm, elicited
    # metrics selected (none: their answers are not read; with some, one query more:
    # tests/evaluation/test_elicited_ranking.py)
    with django_assert_num_queries(5):
        assert selectors.missing_input_list(study=built.study) == {}


# --- reads the API and the pages used to make themselves ---------------------------------------


def test_setup_items_are_read_in_the_study_order_with_their_study(make_study, django_assert_num_queries):
    built = make_study("draft")
    with django_assert_num_queries(1):
        metrics = list(selectors.setup_item_list(study=built.study, model=Metric))
        assert [(m.study.pk, m.attribute.name) for m in metrics][0] == (built.study.pk, "Accuracy")
    assert [m.pk for m in metrics] == [m.pk for m in selectors.metric_list(study=built.study)]
    candidates = selectors.setup_item_list(study=built.study, model=Candidate)
    assert [c.name for c in candidates] == [c.name for c in selectors.candidate_list(study=built.study)]
    auc = built.metrics["AUC"]
    assert selectors.setup_item_get(study=built.study, model=Metric, pk=auc.pk) == auc
    other = make_study("draft", title="Another")
    with pytest.raises(Metric.DoesNotExist):
        selectors.setup_item_get(study=other.study, model=Metric, pk=auc.pk)


def test_tokens_are_read_only_by_their_owner(cast):
    token, key = services.api_token_create(user=cast.bob, name="laptop")
    assert list(selectors.api_token_list(user=cast.bob)) == [token]
    assert selectors.api_token_get(user=cast.bob, token_id=token.pk) == token
    with pytest.raises(ApiToken.DoesNotExist):
        selectors.api_token_get(user=cast.carol, token_id=token.pk)
    found = selectors.api_token_by_digest(digest=token.digest)
    assert found == token and found.user == cast.bob
    assert selectors.api_token_by_digest(digest="0" * 64) is None


def test_a_run_is_read_with_the_json_fields_asked_for(make_study, cast, django_assert_num_queries):
    built = make_study("closed")
    run = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    engine_services.run_execute(run_id=run.pk)  # as a worker would, with or without a broker
    for fields, loaded in [((), set()), (("results",), {"results"}), (RUN_JSON_FIELDS, set(RUN_JSON_FIELDS))]:
        with django_assert_num_queries(1):
            read = engine_selectors.run_get(run_id=run.pk, user=cast.bob, fields=fields)
            assert read.launched_by == cast.alice
        assert set(RUN_JSON_FIELDS) - read.get_deferred_fields() == loaded
    assert engine_selectors.run_get(run_id=run.pk, user=cast.bob).get_deferred_fields() == {"snapshot"}
    document = engine_selectors.run_get(run_id=run.pk, user=cast.bob, fields=("document",))
    assert engine_selectors.results_json(run=document) == engine_selectors.results_json(run=Run.objects.get(pk=run.pk))
    assert list(engine_selectors.run_list(study=built.study)) == [run]
    with pytest.raises(Run.DoesNotExist):
        engine_selectors.run_get(run_id=run.pk, user=cast.charlie)
    with pytest.raises(ValueError):
        engine_selectors.run_get(run_id=run.pk, user=cast.bob, fields=("document", "results"))


def test_one_candidate_is_read_out_of_a_runs_results_and_snapshot(make_study, cast, django_assert_num_queries):
    built = make_study("closed")
    # A name that would break SQL or a JSON path written by hand.
    Candidate.objects.filter(pk=built.study.candidates.order_by("position", "id").first().pk).update(
        name='it\'s "quoted" $[*] é'
    )
    run = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    engine_services.run_execute(run_id=run.pk)
    whole = Run.objects.get(pk=run.pk)
    names = whole.snapshot["candidates"]
    assert 'it\'s "quoted" $[*] é' in names and len(names) > 1
    for c, name in enumerate(names):
        with django_assert_num_queries(1):
            one = engine_selectors.run_candidate_get(run_id=run.pk, user=cast.bob, name=name)
        assert one.results["candidates"] == [entry for entry in whole.results["candidates"] if entry["name"] == name]
        assert one.results["metric_weights"] == whole.results["metric_weights"]
        with django_assert_num_queries(1):
            inputs = engine_selectors.run_score_inputs(run_id=run.pk, candidate=name)
        assert inputs["candidates"] == [name] and inputs["measurements"] == [whole.snapshot["measurements"][c]]
        assert inputs["lower"] == whole.snapshot["lower"] and inputs["experts"] == whole.snapshot["experts"]
    assert engine_selectors.run_candidate_get(run_id=run.pk, user=cast.bob, name="nobody").results["candidates"] == []
    assert engine_selectors.run_score_inputs(run_id=run.pk, candidate="nobody")["measurements"] == []
    with pytest.raises(Run.DoesNotExist):
        engine_selectors.run_candidate_get(run_id=run.pk, user=cast.charlie, name=names[0])


def test_one_candidate_s_own_elicited_values_are_read_out_of_a_runs_snapshot(make_study, cast):
    built = make_study("closed")
    Candidate.objects.filter(pk=built.study.candidates.order_by("position", "id").first().pk).update(
        name='it\'s "quoted" $[*] é'
    )
    run = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    engine_services.run_execute(run_id=run.pk)
    names = Run.objects.get(pk=run.pk).snapshot["candidates"]
    quoted, other = names[0], names[1]
    # Two elicited metrics' entries, written directly: one candidate without a value in the second.
    entries = [
        {"metric": 0, "values": {quoted: [0.1, 0.2], other: [0.3, None]}, "reasons": {}},
        {"metric": 2, "values": {other: [0.5, 0.6]}, "reasons": {quoted: "it has no predictions in any set"}},
    ]
    snapshot = Run.objects.get(pk=run.pk).snapshot
    Run.objects.filter(pk=run.pk).update(snapshot={**snapshot, "expert_values": entries})
    assert engine_selectors.run_score_inputs(run_id=run.pk, candidate=quoted)["expert_values"] == [
        {"metric": 0, "values": {quoted: [0.1, 0.2]}, "reasons": {}},
        {"metric": 2, "values": {}, "reasons": {quoted: "it has no predictions in any set"}},
    ]
    assert engine_selectors.run_score_inputs(run_id=run.pk, candidate=other)["expert_values"] == [
        {"metric": 0, "values": {other: [0.3, None]}, "reasons": {}},
        {"metric": 2, "values": {other: [0.5, 0.6]}, "reasons": {}},
    ]
    assert engine_selectors.run_score_inputs(run_id=run.pk, candidate="nobody")["expert_values"] == [
        {"metric": 0, "values": {}, "reasons": {}},
        {"metric": 2, "values": {}, "reasons": {}},
    ]
    # The whole snapshot's, without a candidate; none in a snapshot before version 3.
    assert engine_selectors.run_score_inputs(run_id=run.pk)["expert_values"] == entries
    Run.objects.filter(pk=run.pk).update(snapshot={k: v for k, v in snapshot.items() if k != "expert_values"})
    assert engine_selectors.run_score_inputs(run_id=run.pk, candidate=quoted)["expert_values"] is None


@pytest.mark.parametrize(
    "change",
    [
        None,
        ("measurements", 0, 0),
        ("upper", 1, 0),
        ("lower", 0, 1),
        ("peer_weights", 0, 1),
        ("metric_weights", 1, 1),
        ("attribute_weights", 0, 0),
        ("tolerance", None, None),
    ],
)
def test_a_pair_of_runs_is_compared_as_from_their_whole_snapshots(make_study, cast, change):
    from engine.compare import snapshot_changes
    from engine.results_export import run_comparison

    built = make_study("closed")
    first = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    engine_services.run_execute(run_id=first.pk)
    second = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    engine_services.run_execute(run_id=second.pk)
    snapshot = Run.objects.get(pk=second.pk).snapshot
    if change is not None:
        key, i, j = change
        if i is None:
            snapshot[key] = snapshot[key] * 2 + 0.5
        else:
            snapshot[key][i][j] = (snapshot[key][i][j] or 0) + 0.125
        Run.objects.filter(pk=second.pk).update(snapshot=snapshot)
    whole = {run.pk: Run.objects.get(pk=run.pk) for run in (first, second)}
    expected = snapshot_changes(whole[first.pk].snapshot, whole[second.pk].snapshot)
    assert bool(expected) == (change is not None)
    a, b = engine_selectors.run_pair_get(run_id=second.pk, other_id=first.pk, user=cast.bob)
    changed = {change[0]} if change else set()
    if "lower" in changed or "upper" in changed:
        changed = {"lower", "upper"}
    if "attribute_weights" in changed:
        changed.add("metric_weights")
    assert a.inputs_same == {"measurements", "metric_weights", "lower", "upper", "peer_weights"} - changed
    compared = run_comparison(a, b)
    assert compared.comparison.changes == expected
    full = run_comparison(whole[second.pk], whole[first.pk])
    assert compared.comparison.candidates == full.comparison.candidates
    assert compared.comparison.metric_weights == full.comparison.metric_weights


def test_a_runs_ranking_is_read_as_from_its_whole_results(make_study, cast, django_assert_num_queries):
    from engine import sensitivity

    built = make_study("closed")
    run = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    engine_services.run_execute(run_id=run.pk)
    whole = Run.objects.get(pk=run.pk)
    with django_assert_num_queries(1):
        read = engine_selectors.run_ranking_get(run_id=run.pk, user=cast.bob)
    assert read.results["experts"] == whole.results["experts"]
    assert read.results["candidates"] == [
        {key: c[key] for key in ("name", "group_scores", "vetoed")} for c in whole.results["candidates"]
    ]
    metrics = whole.snapshot["metrics"]
    a, b = sensitivity.stored_ranking(read.results, metrics), sensitivity.stored_ranking(whole.results, metrics)
    assert a.candidates == b.candidates and (a.scores == b.scores).all() and (a.vetoed == b.vetoed).all()
    assert (a.weights == b.weights).all()
    with pytest.raises(Run.DoesNotExist):
        engine_selectors.run_ranking_get(run_id=run.pk, user=cast.charlie)


def test_the_selected_measurements_are_packed_as_their_rows_say(make_study, django_assert_num_queries):
    from django.db import connection

    from workspace.selectors import design

    built = make_study("assessment")
    study = built.study
    # a candidate whose position puts it first, and one unmeasured metric
    first, last = study.candidates.order_by("position", "id")[0], study.candidates.order_by("position", "id").last()
    Candidate.objects.filter(pk=last.pk).update(position=10_000)
    Candidate.objects.filter(pk=first.pk).update(position=last.position)
    Candidate.objects.filter(pk=last.pk).update(position=first.position)
    with django_assert_num_queries(1):
        metric_ids, positions, values, candidates = selectors.selected_measurement_arrays(study=study)
    rows = selectors.selected_measurement_list(study=study)
    assert candidates[0] == last.name and len(candidates) == len({row[1] for row in rows})
    assert sorted(zip(metric_ids.tolist(), [candidates[p] for p in positions], values.tolist(), strict=True)) == sorted(
        (metric, name, value) for metric, _candidate, value, name in rows
    )
    expected = design._selected_measurement_arrays_of_rows(study)
    if connection.vendor == "postgresql":  # the packed arrays are the rows' arrays, in the same order
        order = np.lexsort((metric_ids, positions))
        order_expected = np.lexsort((expected[0], expected[1]))
        assert (metric_ids[order] == expected[0][order_expected]).all()
        assert (positions[order] == expected[1][order_expected]).all()
        assert (values[order] == expected[2][order_expected]).all() and candidates == expected[3]
    Measurement.objects.filter(study=study).delete()
    metric_ids, positions, values, candidates = selectors.selected_measurement_arrays(study=study)
    assert metric_ids.size == positions.size == values.size == 0 and candidates == []
