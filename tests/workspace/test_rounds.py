"""Revision rounds: opening, responding, closing (its snapshot), the
anonymised feedback and the convergence per round (issue 22)."""

import copy

import pytest

from engine import feedback as group_feedback
from engine.disagreement import ahp_consensus, weight_spread
from tests.api.conftest import launch_and_finish
from tests.fixtures import CAROL_JUDGMENTS, db_snapshot
from workspace import selectors, services
from workspace.bundles import study_export_bundle, study_import_bundle
from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import Phase, RevisionRound, RoundResponse
from workspace.selectors.snapshot import inputs_snapshot

pytestmark = pytest.mark.django_db

THREE = ("bob", "carol", "charlie")


@pytest.fixture
def panel(make_study):
    """An assessment with three experts (bob, carol, charlie) who gave every input."""
    built = make_study(Phase.ASSESSMENT, experts=THREE, votes={"bob": {"attributes": ["Efficiency"], "metrics": []}})
    charlie = built.experts["charlie"]
    services.prioritisation_set(
        expert=built.bob, method="direct", weights={"Accuracy": 50, "Consistency": 30, "Efficiency": 20}
    )
    services.prioritisation_set(expert=built.carol, method="ahp", judgments=copy.deepcopy(CAROL_JUDGMENTS))
    services.ranges_set(expert=built.bob, ranges={"AUC": [0.7, 0.95]})
    services.ranges_set(expert=built.carol, ranges={"AUC": [0.75, 0.9], "Success rate": [0.82, 0.9]})
    services.prioritisation_set(
        expert=charlie, method="direct", weights={"Accuracy": 1, "Consistency": 1, "Efficiency": 8}
    )
    for expert, row in ((built.bob, (0.6, 0.2, 0.2)), (built.carol, (0.3, 0.4, 0.3)), (charlie, (0.2, 0.2, 0.6))):
        services.peer_weights_set(expert=expert, weights=dict(zip(THREE, row, strict=True)))
    services.ranges_set(expert=charlie, ranges={"AUC": [0.6, 0.99]})
    return built


def test_a_round_opens_numbered_only_in_the_assessment_and_one_at_a_time(make_study, panel, cast):
    draft = make_study(Phase.DRAFT)
    before = db_snapshot()
    with pytest.raises(PhaseConflict, match="only possible in the assessment phase"):
        services.round_open(study=draft.study, by=cast.alice)
    first = services.round_open(study=panel.study, by=cast.alice, message="  Check your units  ")
    assert (first.number, first.message, first.opened_by, first.is_open) == (1, "Check your units", cast.alice, True)
    with pytest.raises(PhaseConflict) as refused:
        services.round_open(study=panel.study, by=cast.alice)
    assert refused.value.code == "round_open"
    assert "Round 1 is open" in str(refused.value)
    with pytest.raises(PhaseConflict, match="revision round 1 is open"):
        services.study_close_assessment(study=panel.study)
    services.round_close(study=panel.study, by=cast.alice)
    second = services.round_open(study=panel.study, by=cast.alice)
    assert second.number == 2
    # The one rule of an open round: the manager's open()/closed() and the instance's is_open agree.
    rounds = RevisionRound.objects.filter(study=panel.study)
    assert list(rounds.open()) == [second] and list(rounds.closed()) == [first]
    assert [r.is_open for r in rounds.order_by("number")] == [False, True]
    assert RevisionRound.objects.filter(study=draft.study).count() == 0
    assert before["counts"]["RevisionRound"] == 0


def test_a_message_too_long_is_refused_naming_the_field_and_writes_nothing(panel, cast):
    before = db_snapshot()
    with pytest.raises(InvalidInput) as refused:
        services.round_open(study=panel.study, by=cast.alice, message="x" * 2001)
    assert refused.value.errors == {"message": ["must be at most 2000 characters"]}
    assert db_snapshot() == before


def test_a_save_during_a_round_is_a_revision_and_a_response_a_confirmation(panel, cast):
    # Outside a round a save records nothing.
    services.ranges_set(expert=panel.bob, ranges={"AUC": [0.7, 0.96]})
    assert RoundResponse.objects.count() == 0
    round = services.round_open(study=panel.study, by=cast.alice)
    services.prioritisation_set(expert=panel.carol, method="ahp", judgments=copy.deepcopy(CAROL_JUDGMENTS))
    assert RoundResponse.objects.count() == 0  # the one-attribute-row service is the bundle's, not a step's
    services.priorities_set(
        expert=panel.bob, method="direct", weights={"Accuracy": 4, "Consistency": 3, "Efficiency": 3}
    )
    confirmed = services.round_respond(expert=panel.carol, step="ranges", reason="My range is what the clinic needs")
    revised = services.round_respond(expert=panel.bob, step="priorities", reason="I had Accuracy too low")
    assert (confirmed.action, confirmed.reason) == ("confirmed", "My range is what the clinic needs")
    assert (revised.action, revised.reason) == ("revised", "I had Accuracy too low")
    # A revision after a confirmation turns it into a revision and keeps the reason.
    services.ranges_set(expert=panel.carol, ranges={"AUC": [0.7, 0.9]})
    carol = RoundResponse.objects.get(round=round, expert=panel.carol, step="ranges")
    assert (carol.action, carol.reason) == ("revised", "My range is what the clinic needs")
    grid = {
        row.expert.user.username: {s: r.action if r else None for s, r in row.cells()}
        for row in selectors.round_responses(study=panel.study, round=round)
    }
    assert grid == {
        "bob": {"priorities": "revised", "ranges": None, "peer_weights": None},
        "carol": {"priorities": None, "ranges": "revised", "peer_weights": None},
        "charlie": {"priorities": None, "ranges": None, "peer_weights": None},
    }


def test_responding_needs_an_open_round_and_a_known_step(panel, cast):
    with pytest.raises(PhaseConflict) as refused:
        services.round_respond(expert=panel.bob, step="ranges")
    assert refused.value.code == "no_open_round"
    services.round_open(study=panel.study, by=cast.alice)
    before = db_snapshot()
    with pytest.raises(InvalidInput) as bad:
        services.round_respond(expert=panel.bob, step="votes")
    assert list(bad.value.errors) == ["step"]
    with pytest.raises(InvalidInput) as long:
        services.round_respond(expert=panel.bob, step="ranges", reason="x" * 501)
    assert list(long.value.errors) == ["reason"]
    assert db_snapshot() == before


def test_a_rounds_snapshot_equals_the_inputs_at_its_close(panel, cast):
    services.round_open(study=panel.study, by=cast.alice)
    services.ranges_set(expert=panel.bob, ranges={"AUC": [0.72, 0.97]})
    at_close = inputs_snapshot(study=panel.study)
    closed = services.round_close(study=panel.study, by=cast.alice)
    # Later changes do not reach a closed round.
    services.ranges_set(expert=panel.bob, ranges={"AUC": [0.5, 0.97]})
    closed.refresh_from_db()
    assert closed.snapshot == at_close
    assert closed.snapshot["lower"][0][1] == 0.72  # bob's AUC (the second selected metric)
    assert (closed.closed_by, closed.is_open) == (cast.alice, False)
    with pytest.raises(PhaseConflict) as refused:
        services.round_close(study=panel.study, by=cast.alice)
    assert refused.value.code == "no_open_round"


def test_s_star_per_round_equals_engine_disagreement_on_that_rounds_inputs(panel, cast):
    services.round_open(study=panel.study, by=cast.alice)
    first = services.round_close(study=panel.study, by=cast.alice)
    services.round_open(study=panel.study, by=cast.alice)
    # charlie moves towards the group
    services.priorities_set(
        expert=panel.experts["charlie"], method="direct", weights={"Accuracy": 4, "Consistency": 3, "Efficiency": 3}
    )
    second = services.round_close(study=panel.study, by=cast.alice)
    rows = selectors.round_convergence(study=panel.study)
    assert [r.number for r in rows] == [1, 2]
    for row, closed in zip(rows, (first, second), strict=True):
        closed.refresh_from_db()
        weights = closed.snapshot["attribute_weights"]
        assert row.attribute_consensus == ahp_consensus(weights)
        assert row.metric_consensus == ahp_consensus(closed.snapshot["metric_weights"])
        assert list(row.attribute_spread.values()) == weight_spread(weights).stdev.tolist()
        assert row.experts == 3
    # the slow literal reference: charlie's Efficiency went from 0.8 to 0.3
    assert rows[1].attribute_consensus > rows[0].attribute_consensus
    assert rows[1].attribute_spread["Efficiency"] < rows[0].attribute_spread["Efficiency"]


def test_with_three_experts_feedback_tells_only_the_coarse_band_of_each_median(panel, cast):
    round = services.round_open(study=panel.study, by=cast.alice)
    feedback = selectors.round_feedback(study=panel.study, expert=panel.bob, round=round)
    accuracy = next(a for a in feedback.attributes if a.name == "Accuracy")
    snapshot = inputs_snapshot(study=panel.study)
    column = [row[0] for row in snapshot["attribute_weights"]]
    assert accuracy.group == group_feedback.summarise(column, step=0.05, top=1.0)
    low, mid, high = sorted(column)
    band = accuracy.group.band
    assert band[0] <= mid <= band[1] and band[1] - band[0] == pytest.approx(0.05)
    assert band[0] * 20 == pytest.approx(int(band[0] * 20 + 0.5))  # on the grid of 5 points
    assert (accuracy.group.q1, accuracy.group.median, accuracy.group.q3) == (None, None, None)
    assert accuracy.own == 0.5  # bob: 50 / 100
    # Ranges: each bound on its own, the band a twentieth of AUC's range
    # (its candidates' values and default range), never the sorted list.
    auc = next(r for r in feedback.ranges if r.name == "AUC")
    [span] = [s for m, s in zip(snapshot["metrics"], _spans(panel), strict=True) if m["name"] == "AUC"]
    assert auc.step == pytest.approx((span[1] - span[0]) / 20)
    assert auc.least_acceptable == group_feedback.summarise(
        [0.6, 0.7, 0.75], step=auc.step, origin=span[0], top=span[1]
    )
    assert auc.least_acceptable.band[0] <= 0.7 <= auc.least_acceptable.band[1]
    assert auc.desired.band[0] <= 0.95 <= auc.desired.band[1] and auc.desired.count == 3
    assert auc.own == (0.7, 0.95)
    # Peer weights: the weights each expert receives, (0.6, 0.3, 0.2) for
    # bob: median 0.3, in [0.3, 0.35].
    peers = {p.name: p.group.band for p in feedback.peer_weights}
    assert peers == {"bob": (0.3, 0.35), "carol": (0.2, 0.25), "charlie": (0.3, 0.35)}
    assert {p.name: p.own for p in feedback.peer_weights} == {"bob": 0.6, "carol": 0.2, "charlie": 0.2}


def _spans(built):
    return selectors.rounds.metric_spans(study=built.study, metrics=list(selectors.selected_metrics(built.study)))


def test_a_colleagues_save_during_the_round_changes_nothing_another_reads_until_the_next_round(panel, cast):
    round = services.round_open(study=panel.study, by=cast.alice)
    assert round.feedback == selectors.round_feedback_frozen(study=panel.study)  # kept when it opened
    before = selectors.round_feedback(study=panel.study, expert=panel.bob, round=round)
    # carol and charlie move their AUC bounds and charlie his weights, far.
    services.ranges_set(expert=panel.carol, ranges={"AUC": [0.5, 0.6], "Success rate": [0.82, 0.9]})
    services.ranges_set(expert=panel.experts["charlie"], ranges={"AUC": [0.5, 0.6]})
    services.priorities_set(
        expert=panel.experts["charlie"], method="direct", weights={"Accuracy": 8, "Consistency": 1, "Efficiency": 1}
    )
    services.peer_weights_set(expert=panel.carol, weights={"bob": 0.1, "carol": 0.8, "charlie": 0.1})
    after = selectors.round_feedback(
        study=panel.study, expert=panel.bob, round=selectors.round_current(study=panel.study)
    )
    for kind in ("attributes", "metrics", "ranges", "peer_weights"):
        assert getattr(after, kind) == getattr(before, kind), kind
    # bob's own revision is his own to see at once; the group still is not.
    services.ranges_set(expert=panel.bob, ranges={"AUC": [0.55, 0.65]})
    mine = selectors.round_feedback(study=panel.study, expert=panel.bob, round=round)
    auc = next(r for r in mine.ranges if r.name == "AUC")
    assert auc.own == (0.55, 0.65)
    assert auc.least_acceptable == next(r for r in before.ranges if r.name == "AUC").least_acceptable
    # The next round's feedback has the changes: AUC's desired values are now 0.6, 0.6, 0.65.
    services.round_close(study=panel.study, by=cast.alice)
    second = services.round_open(study=panel.study, by=cast.alice)
    auc = next(
        r for r in selectors.round_feedback(study=panel.study, expert=panel.bob, round=second).ranges if r.name == "AUC"
    )
    assert auc.desired.band[0] <= 0.6 <= auc.desired.band[1]
    assert auc.desired != next(r for r in before.ranges if r.name == "AUC").desired


def test_a_round_without_kept_feedback_keeps_it_at_its_first_read(panel, cast):
    round = services.round_open(study=panel.study, by=cast.alice)
    kept = round.feedback
    RevisionRound.objects.filter(pk=round.pk).update(feedback=None)  # opened before feedback was kept
    services.ranges_set(expert=panel.carol, ranges={"AUC": [0.5, 0.6]})
    round = selectors.round_current(study=panel.study)
    selectors.round_feedback(study=panel.study, expert=panel.bob, round=round)
    first = RevisionRound.objects.get(pk=round.pk).feedback
    assert first is not None and first != kept  # computed from the inputs at that read
    services.ranges_set(expert=panel.carol, ranges={"AUC": [0.8, 0.9]})
    selectors.round_feedback(study=panel.study, expert=panel.bob, round=selectors.round_current(study=panel.study))
    assert RevisionRound.objects.get(pk=round.pk).feedback == first  # and kept from then on


FIVE = ("bob", "carol", "charlie", "dave", "erin")


def test_from_five_experts_the_median_and_inner_quartiles_are_shown_never_an_extreme(make_study, cast):
    from django.contrib.auth import get_user_model

    for name in ("dave", "erin"):
        setattr(cast, name, get_user_model().objects.create_user(username=name, password="x"))
    built = make_study(Phase.ASSESSMENT, experts=FIVE)
    weights = {"bob": 10, "carol": 20, "charlie": 30, "dave": 40, "erin": 90}
    bounds = {"bob": 0.5, "carol": 0.6, "charlie": 0.65, "dave": 0.7, "erin": 0.85}
    for name in FIVE:
        rest = 100 - weights[name]
        services.prioritisation_set(
            expert=built.experts[name],
            method="direct",
            weights={"Accuracy": weights[name], "Consistency": rest / 2, "Efficiency": rest / 2},
        )
        services.ranges_set(expert=built.experts[name], ranges={"AUC": [bounds[name], 0.95]})
    round = services.round_open(study=built.study, by=cast.alice)
    feedback = selectors.round_feedback(study=built.study, expert=built.experts["erin"], round=round)
    accuracy = next(a for a in feedback.attributes if a.name == "Accuracy")
    assert accuracy.group == group_feedback.Summary(5, q1=0.2, median=0.3, q3=0.4)  # never 0.1 nor 0.9
    assert accuracy.own == pytest.approx(0.9)
    auc = next(r for r in feedback.ranges if r.name == "AUC")
    assert auc.least_acceptable == group_feedback.Summary(5, q1=0.6, median=0.65, q3=0.7)
    assert auc.desired == group_feedback.Summary(5, q1=0.95, median=0.95, q3=0.95)


def test_with_fewer_than_three_answers_the_group_is_not_described(make_study, cast):
    built = make_study(Phase.ASSESSMENT, inputs=True)  # bob and carol
    round = services.round_open(study=built.study, by=cast.alice)
    feedback = selectors.round_feedback(study=built.study, expert=built.bob, round=round)
    assert all(a.group is None for a in feedback.attributes + feedback.metrics)
    assert all(r.least_acceptable is None and r.desired is None for r in feedback.ranges)
    assert all(p.group is None for p in feedback.peer_weights)
    assert feedback.attributes[0].own == 0.5


def test_reasons_reach_the_next_round_without_their_authors(panel, cast):
    services.round_open(study=panel.study, by=cast.alice)
    services.round_respond(expert=panel.carol, step="priorities", reason="Zeta: efficiency matters in clinics")
    services.round_respond(expert=panel.bob, step="priorities", reason="Alpha: accuracy first")
    services.round_close(study=panel.study, by=cast.alice)
    second = services.round_open(study=panel.study, by=cast.alice)
    feedback = selectors.round_feedback(study=panel.study, expert=panel.experts["charlie"], round=second)
    assert feedback.previous_reasons == {
        "priorities": ["Alpha: accuracy first", "Zeta: efficiency matters in clinics"],
        "ranges": [],
        "peer_weights": [],
    }
    assert feedback.mine == {}


def test_a_run_records_the_round_it_used_and_a_comparison_shows_both(panel, cast, client):
    services.round_open(study=panel.study, by=cast.alice)
    services.round_close(study=panel.study, by=cast.alice)
    services.study_close_assessment(study=panel.study)
    first = launch_and_finish(panel, cast.alice)
    services.study_reopen_assessment(study=panel.study)
    services.round_open(study=panel.study, by=cast.alice)
    services.priorities_set(
        expert=panel.experts["charlie"], method="direct", weights={"Accuracy": 4, "Consistency": 3, "Efficiency": 3}
    )
    services.round_close(study=panel.study, by=cast.alice)
    services.study_close_assessment(study=panel.study)
    second = launch_and_finish(panel, cast.alice)
    assert (first.revision_round, second.revision_round) == (1, 2)
    client.force_login(cast.alice)
    page = client.get(f"/runs/{first.pk}/compare/{second.pk}/").content.decode()
    assert "after revision round 1" in page and "after revision round 2" in page
    assert "Round 1 → round 2" in page


def test_bundles_carry_rounds_and_read_them_back(panel, cast):
    services.round_open(study=panel.study, by=cast.alice, message="Units!")
    services.round_respond(expert=panel.bob, step="ranges", reason="Kept")
    services.ranges_set(expert=panel.carol, ranges={"AUC": [0.7, 0.9]})
    services.round_close(study=panel.study, by=cast.alice)
    services.round_open(study=panel.study, by=cast.alice)
    bundle = study_export_bundle(study=panel.study)
    assert [r["number"] for r in bundle["rounds"]] == [1, 2]
    first = bundle["rounds"][0]
    assert first["message"] == "Units!"
    assert first["responses"] == {
        "bob": {"ranges": {"action": "confirmed", "reason": "Kept"}},
        "carol": {"ranges": {"action": "revised"}},
    }
    assert first["inputs"] == RevisionRound.objects.get(study=panel.study, number=1).snapshot
    assert "closed_at" not in bundle["rounds"][1] and "inputs" not in bundle["rounds"][1]
    copy_ = study_import_bundle(bundle={**bundle, "title": "Copy"}, importer=None)
    again = study_export_bundle(study=copy_)
    assert again["rounds"] == bundle["rounds"]
    assert selectors.round_current(study=copy_).number == 2


def test_bundles_without_rounds_stay_as_they_were_and_bad_rounds_are_refused(panel, cast, case_study):
    assert "rounds" not in study_export_bundle(study=panel.study)
    services.round_open(study=panel.study, by=cast.alice)
    services.round_close(study=panel.study, by=cast.alice)
    bundle = study_export_bundle(study=panel.study)
    before = db_snapshot()
    for change, field in (
        (lambda r: r[0].update(number=2), "rounds[0].number"),
        (lambda r: r[0].pop("closed_at"), "rounds[0].inputs"),  # an open round with kept inputs
        (lambda r: r[0]["responses"].update(dave={}), "rounds[0].responses.dave"),
        (lambda r: r[0]["inputs"].pop("experts"), "rounds[0].inputs.experts"),
    ):
        rounds = copy.deepcopy(bundle["rounds"])
        change(rounds)
        with pytest.raises(InvalidInput) as refused:
            study_import_bundle(bundle={**bundle, "rounds": rounds}, importer=None)
        assert field in refused.value.errors, refused.value.errors
    assert db_snapshot() == before
