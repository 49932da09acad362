"""Elicited metrics in the ranking (issue 21, item 3; docs/method.md 7.4):
each expert's individual score of an elicited metric comes from their own
value of it, everything else exactly as before."""

import io

import numpy as np
import pytest
from django.utils.html import escape
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import core
from engine import selectors as engine_selectors
from engine.analysis_words import with_words
from engine.results import evaluate_snapshot
from engine.results_export import results_csv_bytes
from engine.snapshot import RunInputError, snapshot_arrays, snapshot_expert_values, study_snapshot
from evaluation import services
from evaluation.models import ElicitationAnswers
from tests.api.conftest import launch_and_finish
from tests.fixtures import VOTES, complete_assessment
from workspace import services as workspace_services

from .test_elicited import TWO_CLASSES

pytestmark = pytest.mark.django_db

# Bob values finding A four times as much as B; carol the other way round.
WEIGHTS = {"bob": [0.8, 0.2], "carol": [0.2, 0.8]}
# By hand (test_elicited): J48's diagonal is (4, 2) / 10, JRip's (2, 5) / 10.
OWN = {"J48": {"bob": 0.36, "carol": 0.24}, "JRip": {"bob": 0.26, "carol": 0.44}}


def elicited_study(make_study, *, finished=("bob", "carol"), carol=(0.1, 0.5)):
    """The standard study in assessment, its AUC elicited from J48's two-class predictions, every
    input given, each expert's AUC range [0.1, 0.5], and the ``finished`` experts' weights stored."""
    built = make_study()
    prediction_set = services.prediction_set_import(
        study=built.study, stream=io.BytesIO(TWO_CLASSES.encode()), name="two.csv", uploaded_by=None
    )
    elicited = services.elicited_metric_set(
        metric=built.metrics["AUC"], kind="diagonal", prediction_set=prediction_set.pk, reference_candidate="J48",
        epsilon=0.1,
    )  # fmt: skip
    workspace_services.study_open_voting(study=built.study)
    for username, ballot in VOTES.items():
        workspace_services.votes_set(expert=built.experts[username], **ballot)
    workspace_services.study_close_voting(study=built.study)
    built.refresh()
    complete_assessment(built)
    for expert in (built.bob, built.carol):
        workspace_services.ranges_set(expert=expert, ranges={"AUC": [0.1, 0.5]})
    for name in finished:
        # The weights a finished search stores (the search itself: test_elicited).
        ElicitationAnswers.objects.create(elicited_metric=elicited, expert=built.experts[name], answers="1",
                                          weights=WEIGHTS[name])  # fmt: skip
    workspace_services.ranges_set(expert=built.carol, ranges={"AUC": list(carol)})  # bumps the input version
    return built


def run_of(built):
    workspace_services.study_close_assessment(study=built.study)
    return launch_and_finish(built, built.study.designer)


def test_the_snapshot_carries_each_expert_s_value(make_study):
    built = elicited_study(make_study)
    snapshot = study_snapshot(study=built.study)
    assert snapshot["version"] == 3
    auc = [m["name"] for m in snapshot["metrics"]].index("AUC")
    [entry] = snapshot["expert_values"]
    assert entry["metric"] == auc and entry["reasons"] == {}
    for candidate, values in OWN.items():
        assert entry["values"][candidate] == pytest.approx([values["bob"], values["carol"]])
    # The shared column is the experts' median (what a page shows), not the typed 0.88 / 0.9.
    c = snapshot["candidates"].index("JRip")
    assert snapshot["measurements"][c][auc] == pytest.approx((0.26 + 0.44) / 2)


def test_a_run_scores_each_expert_on_their_own_value_as_by_hand(make_study):
    run = run_of(elicited_study(make_study))
    results = run.results
    auc = results["metrics"].index("AUC")
    # pi from V = [[0.6, 0.4], [0.5, 0.5]]: pi_bob = 5/9, pi_carol = 4/9.
    assert results["expert_influence"] == pytest.approx([5 / 9, 4 / 9])
    by_name = {c["name"]: c for c in results["candidates"]}
    # m̄ = (x - 0.1) / 0.4: bob J48 0.65, JRip 0.4; carol J48 0.35, JRip 0.85.
    assert by_name["J48"]["group_scores"][auc] == pytest.approx(5 / 9 * 0.65 + 4 / 9 * 0.35)
    assert by_name["JRip"]["group_scores"][auc] == pytest.approx(5 / 9 * 0.4 + 4 / 9 * 0.85)
    # Every other metric scores exactly as the same run with the typed AUC.
    snapshot = run.snapshot
    typed = {**snapshot, "expert_values": []}
    for c, row in enumerate(typed["measurements"]):
        row[auc] = [0.88, 0.9][c]
    plain = {c["name"]: c for c in evaluate_snapshot(typed)["candidates"]}
    for name in OWN:
        for j, metric in enumerate(results["metrics"]):
            if metric != "AUC":
                assert by_name[name]["group_scores"][j] == plain[name]["group_scores"][j]
    # The CEF is the consensus weights times these scores (nobody vetoes).
    weights = np.array(results["metric_weights"])
    for candidate in by_name.values():
        assert not candidate["vetoed"]
        assert candidate["cef"] == pytest.approx(float(weights @ np.array(candidate["group_scores"])))


def test_an_expert_s_own_value_vetoes_and_is_listed(make_study):
    # Carol's least acceptable 0.3: her JRip 0.44 passes, her J48 0.24 vetoes it.
    run = run_of(elicited_study(make_study, carol=(0.3, 0.5)))
    by_name = {c["name"]: c for c in run.results["candidates"]}
    auc = run.results["metrics"].index("AUC")
    assert by_name["J48"]["vetoed"] and by_name["J48"]["cef"] == 0
    # Listed with carol's own value (expert 1, the metric's column), not the shared median.
    assert by_name["J48"]["vetoes"] == [[1, auc, pytest.approx(0.24), 0.3, 0.5]]
    assert by_name["J48"]["veto_shares"][auc] == 0.5
    assert not by_name["JRip"]["vetoed"]


def test_the_ranking_and_its_csv_say_the_vetoing_expert_s_own_elicited_value(make_study, client):
    # One expert vetoes: the sentence still says whose metric it is, not "J48 measured 0.24".
    built = elicited_study(make_study, carol=(0.3, 0.5))
    run = run_of(built)
    said = "by carol's own elicited metric J48 has 0.24"
    client.force_login(built.study.designer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert escape(said) in page and "J48 measured" not in page
    exported = results_csv_bytes(run=run).decode("utf-8-sig")
    assert said in exported and "J48 measured" not in exported
    # Read without every expert's values: the snapshot's elicited columns alone.
    inputs = engine_selectors.run_score_inputs(run_id=run.pk, keys=engine_selectors.METRIC_INPUT_KEYS)
    assert inputs["elicited_metrics"] == [run.results["metrics"].index("AUC")]


def test_an_unfinished_expert_refuses_the_launch_by_name(make_study):
    built = elicited_study(make_study, finished=("bob",))
    with pytest.raises(RunInputError, match="carol has not finished the elicited metric AUC"):
        snapshot_arrays(study_snapshot(study=built.study))


def test_a_study_without_elicited_metrics_runs_bit_for_bit_as_before(make_study):
    built = make_study("closed")
    snapshot = study_snapshot(study=built.study)
    assert snapshot["expert_values"] == [] and snapshot_expert_values(snapshot) is None
    # A version 2 snapshot (no key) and a version 3 one without elicited metrics give the same bits.
    old = {key: value for key, value in snapshot.items() if key != "expert_values"}
    assert evaluate_snapshot({**old, "version": 2}) == evaluate_snapshot(snapshot)
    arrays = dict(zip(("weights", "peer_weights", "lower", "upper", "measurements"), snapshot_arrays(snapshot),
                      strict=True))  # fmt: skip
    m, k = len(snapshot["candidates"]), len(snapshot["experts"])
    before = core.evaluate(**arrays)
    none = core.evaluate(**arrays, expert_values=core.ExpertValues(np.array([], dtype=np.intp), np.empty((m, k, 0))))
    for field in ("metric_weights", "group_scores", "weighted_scores", "cef", "vetoed"):
        assert np.array_equal(getattr(before, field), getattr(none, field))


@st.composite
def problems(draw):
    k = draw(st.integers(1, 4))
    n = draw(st.integers(1, 4))
    m = draw(st.integers(1, 12))
    unit = st.floats(0.05, 1.0)
    weights = np.array(draw(st.lists(st.lists(unit, min_size=n, max_size=n), min_size=k, max_size=k)))
    weights /= weights.sum(axis=1, keepdims=True)
    peer = np.array(draw(st.lists(st.lists(unit, min_size=k, max_size=k), min_size=k, max_size=k)))
    peer /= peer.sum(axis=1, keepdims=True)
    if k == 1:
        peer = np.ones((1, 1))
    lower = np.array(draw(st.lists(st.lists(st.floats(0, 0.45), min_size=n, max_size=n), min_size=k, max_size=k)))
    width = np.array(draw(st.lists(st.lists(st.floats(0.05, 0.5), min_size=n, max_size=n), min_size=k, max_size=k)))
    flip = np.array(draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=k, max_size=k)))
    upper = np.where(flip, lower, lower + width)
    lower = np.where(flip, lower + width, lower)
    measured = np.array(draw(st.lists(st.lists(st.floats(0, 1), min_size=n, max_size=n), min_size=m, max_size=m)))
    columns = np.array(sorted(draw(st.sets(st.integers(0, n - 1), min_size=1))), dtype=np.intp)
    return weights, peer, lower, upper, measured, columns


@settings(max_examples=200, deadline=None)
@given(problems())
def test_every_expert_giving_the_same_value_equals_typing_it(problem):
    weights, peer, lower, upper, measured, columns = problem
    arguments = {"weights": weights, "peer_weights": peer, "lower": lower, "upper": upper}
    typed = core.evaluate(**arguments, measurements=measured)
    k = len(weights)
    same = np.repeat(measured[:, None, columns], k, axis=1)  # (m, k, e): everyone's value the typed one
    # The shared column is ignored for those metrics: put nonsense there.
    scrambled = measured.copy()
    scrambled[:, columns] = 1e6
    own = core.ExpertValues(columns, same)
    elicited = core.evaluate(**arguments, measurements=scrambled, expert_values=own)
    assert np.array_equal(elicited.vetoed, typed.vetoed)
    np.testing.assert_allclose(elicited.group_scores, typed.group_scores, rtol=0, atol=1e-12)
    np.testing.assert_allclose(elicited.cef, typed.cef, rtol=0, atol=1e-12)
    assert np.array_equal(
        core.vetoing_judgments(lower, upper, scrambled, own), core.vetoing_judgments(lower, upper, measured)
    )


def test_leaving_an_expert_out_leaves_their_own_values_out(make_study):
    from engine.analyses import RunInputs
    from engine.robustness import without_expert
    from engine.robustness_kernels import LeaveOneOut

    def _evaluation_arguments(arrays, own, expert):
        """The study without ``expert``, by hand: their rows and their own values gone."""
        weights, peer, lower, upper = without_expert(expert, *arrays[:4])
        values = core.ExpertValues(own.columns, np.delete(own.values, expert, axis=1))
        return {
            "weights": weights,
            "peer_weights": peer,
            "lower": lower,
            "upper": upper,
            "measurements": arrays[4],
        }, values

    run = run_of(elicited_study(make_study))
    snapshot = run.snapshot
    auc = run.results["metrics"].index("AUC")
    arrays, own = snapshot_arrays(snapshot), snapshot_expert_values(snapshot)
    order = [snapshot["candidates"].index(name) for name in ("J48", "JRip")]
    # Without carol only bob's own values count (0.65, 0.4), without bob only carol's (0.35, 0.85).
    for left_out, expected in ((1, [0.65, 0.4]), (0, [0.35, 0.85])):
        reduced, values = _evaluation_arguments(arrays, own, left_out)
        alone = core.evaluate(**reduced, expert_values=values, tolerance=snapshot["tolerance"])
        assert alone.group_scores[order, auc] == pytest.approx(expected)
        assert alone.expert_influence.tolist() == [1.0]
    rows = LeaveOneOut().compute(RunInputs(snapshot=snapshot, results=run.results), {}, 0, 0, 2)["rows"]
    assert [row["expert"] for row in rows] == ["bob", "carol"]
    for row, left_out in zip(rows, (0, 1), strict=True):
        reduced, values = _evaluation_arguments(arrays, own, left_out)
        alone = core.evaluate(**reduced, expert_values=values, tolerance=snapshot["tolerance"])
        assert row["winner"] == [snapshot["candidates"][int(np.argmax(alone.cef))]]


def test_what_if_at_the_run_s_weights_gives_the_run_s_scores(make_study):
    from engine import sensitivity

    run = run_of(elicited_study(make_study))
    stored = sensitivity.stored_ranking(run.results, run.snapshot["metrics"])
    rows = {row.name: row for row in sensitivity.what_if(stored, stored.attribute_weights.tolist())}
    for candidate in run.results["candidates"]:
        assert rows[candidate["name"]].cef == pytest.approx(candidate["cef"], abs=1e-12)
        assert rows[candidate["name"]].rank == rows[candidate["name"]].run_rank == candidate["rank"]
    # Weighing only Accuracy (Success rate and the elicited AUC): the AUC group scores decide with Success rate's.
    accuracy = stored.attributes.index("Accuracy")
    only = [1.0 if i == accuracy else 0.0 for i in range(len(stored.attributes))]
    by_name = {row.name: row for row in sensitivity.what_if(stored, only)}
    weights = sensitivity.attribute_weights_to_metric_weights(stored, only)
    for c, name in enumerate(stored.candidates):
        assert by_name[name].cef == pytest.approx(float(stored.scores[c] @ weights))


# TWO_CLASSES' instances as cells of the confusion matrix (true * 2 + predicted, A = 0, B = 1), by hand.
CELLS = {"J48": [0, 0, 0, 0, 1, 2, 2, 2, 3, 3], "JRip": [0, 0, 1, 1, 1, 3, 3, 3, 3, 3]}
# Bob's and carol's weighted accuracy as weights of the cells (the diagonal's 0 and 3).
CELL_WEIGHTS = [[0.8, 0.0, 0.0, 0.2], [0.2, 0.0, 0.0, 0.8]]


def by_hand(run, seed: int, samples: int):
    """The Monte Carlo of the run's measurements built from the fixture's numbers, not from the
    kernel's reading: each expert's own AUC (OWN), recomputed from the cells by hand on each replicate."""
    from engine.robustness import ElicitedColumn, MonteCarloInputs, SamplingSpec, monte_carlo_chunk
    from evaluation.models import PredictionSet

    snapshot = run.snapshot
    names, experts = snapshot["candidates"], snapshot["experts"]
    auc = [m["name"] for m in snapshot["metrics"]].index("AUC")
    weights, peer, lower, upper, measurements = snapshot_arrays(snapshot)
    own = np.array([[[OWN[c][e]] for e in experts] for c in names])
    set_id = PredictionSet.objects.get(name="two.csv").pk
    inputs = MonteCarloInputs(
        weights=weights,
        peer_weights=peer,
        lower=lower,
        upper=upper,
        measurements=measurements,
        expert_values=core.ExpertValues(np.array([auc]), own),
        elicited=(
            ElicitedColumn(
                auc,
                np.array([CELL_WEIGHTS[experts.index(e)] for e in experts]),
                tuple(np.array(CELLS[c]) for c in names),
                (set_id,) * len(names),
            ),
        ),  # fmt: skip
    )
    return monte_carlo_chunk(inputs, SamplingSpec(bootstrap=True), seed, 0, samples)


def finished(analysis):
    from engine import analyses

    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    assert analysis.status == "succeeded", analysis.error
    return analysis


def test_a_monte_carlo_analysis_resamples_each_expert_s_own_values(make_study, settings):
    from engine import analyses
    from engine.models import Analysis
    from evaluation.models import PredictionSet

    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 70  # three chunks: merged, they are one run's counts
    run = run_of(elicited_study(make_study))
    analysis = analyses.analysis_launch(
        run=run, kind=Analysis.Kind.MONTE_CARLO, launched_by=None, spec={"measurements": True}, samples=200, seed=5
    )
    set_id = PredictionSet.objects.get().pk
    assert analysis.spec["elicited"] == [{"metric": "AUC", "prediction_sets": {"J48": set_id, "JRip": set_id}}]
    assert "AUC" not in [item["metric"] for item in analysis.spec["fixed"]]
    result = finished(analysis).result
    expected = by_hand(run, 5, 200)
    counts = result["counts"]
    assert counts["samples"] == 200
    ranks = np.zeros((2, 2), dtype=int)
    for c, r, count in counts["ranks"]:
        ranks[c, r] = count
    assert ranks.tolist() == expected.ranks.tolist()
    # The replicates move the ranking both ways (the run ranks one of them first in every sample otherwise).
    assert 0 < expected.ranks[0, 0] < 200 and 0 < expected.ranks[1, 0] < 200
    rows = {row["name"]: row for row in result["summary"]["candidates"]}
    names = run.snapshot["candidates"]
    for c, name in enumerate(names):
        assert rows[name]["p_best"] == pytest.approx(expected.ranks[c, 0] / 200)
    assert result["summary"]["sampled_inputs"]["measurements"]["elicited"] == ["AUC"]
    assert "AUC (each expert's own value)" in with_words("monte_carlo", result["summary"])["sampled"]


def test_a_monte_carlo_analysis_without_the_measurements_keeps_each_expert_s_own_values(make_study):
    from engine import analyses
    from engine.models import Analysis

    run = run_of(elicited_study(make_study))
    analysis = analyses.analysis_launch(
        run=run, kind=Analysis.Kind.MONTE_CARLO, launched_by=None, spec={"ranges_percent": 10.0}, samples=64, seed=3
    )
    assert "elicited" not in analysis.spec
    result = finished(analysis).result
    # Literal: the ranking of each sample's ranges, each expert scored on their own AUC.
    from engine.robustness import SamplingSpec, _Prepared, competition_ranks, rank_counts
    from engine.robustness_kernels import MonteCarlo

    inputs = MonteCarlo()._inputs(analyses.run_inputs(run.pk), analysis.spec)
    assert inputs.expert_values is not None
    np.testing.assert_allclose(
        inputs.expert_values.values[:, :, 0],
        [[OWN[c][e] for e in run.snapshot["experts"]] for c in run.snapshot["candidates"]],
        rtol=0,
        atol=1e-12,
    )
    cef, _ = _Prepared(inputs, SamplingSpec(range_fraction=0.1)).cef(3, 0, 64)
    ranks = np.zeros((2, 2), dtype=int)
    for c, r, count in result["counts"]["ranks"]:
        ranks[c, r] = count
    assert ranks.tolist() == rank_counts(competition_ranks(cef)).tolist()


def test_a_candidate_whose_newest_set_changed_is_held_fixed_with_the_reason(make_study):
    from engine import analyses
    from engine.models import Analysis
    from evaluation.models import PredictionSet

    run = run_of(elicited_study(make_study))
    # A newer upload gives JRip other instances: its values in the run are no longer its newest set's.
    newer = TWO_CLASSES.replace("JRip,A,A,", "JRip,B,A,")
    services.prediction_set_import(
        study=run.study, stream=io.BytesIO(newer.encode()), name="newer.csv", uploaded_by=None
    )
    analysis = analyses.analysis_launch(
        run=run, kind=Analysis.Kind.MONTE_CARLO, launched_by=None, spec={"measurements": True}, samples=64, seed=1
    )
    # J48's instances are the same in the newer set: resampled from it.
    newest = PredictionSet.objects.get(name="newer.csv").pk
    assert analysis.spec["elicited"] == [{"metric": "AUC", "prediction_sets": {"J48": newest}}]
    held = [item for item in analysis.spec["fixed"] if item["metric"] == "AUC"]
    assert held and all("newest prediction set" in item["reason"] for item in held)
    assert "JRip" in held[0]["reason"]
    assert finished(analysis).result["summary"]["fixed"] == analysis.spec["fixed"]


def test_closing_the_assessment_names_the_expert_who_has_not_finished(make_study):
    from workspace.errors import PhaseConflict
    from workspace.models import Phase
    from workspace.selectors import missing_input_list

    built = elicited_study(make_study, finished=("bob",))
    assert missing_input_list(study=built.study) == {"carol": ["answers to the elicited metric AUC"]}
    with pytest.raises(PhaseConflict, match="carol: answers to the elicited metric AUC"):
        workspace_services.study_close_assessment(study=built.study)
    built.refresh()
    assert built.study.phase == Phase.ASSESSMENT
    # Once both have finished nothing is missing.
    finished = elicited_study(make_study, finished=("bob", "carol"))
    assert missing_input_list(study=finished.study) == {}


def test_the_candidate_breakdown_shows_each_expert_s_own_value(make_study, client):
    import re

    from tests.pages.test_studyhome import as_user, text_of

    built = elicited_study(make_study)
    run = run_of(built)
    response = as_user(client, built.study.designer).get(f"/runs/{run.pk}/candidates/J48/")
    assert response.status_code == 200
    table = re.search(r'<table[^>]*id="own-values".*?</table>', response.content.decode(), flags=re.S)
    assert table is not None
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", table.group(0))).strip()
    assert "bob 0.36" in text and "carol 0.24" in text
    assert "median of the experts' own" in text_of(response)
    # Each expert's score of AUC comes from their own value: 0.65 and 0.35.
    assert re.search(r"0\.65\b", text_of(response)) and re.search(r"0\.35\b", text_of(response))


def test_the_measurements_page_shows_the_spread_across_experts_once_closed(make_study, client):
    import re

    from tests.pages.test_studyhome import as_user, text_of

    built = elicited_study(make_study)
    page = as_user(client, built.study.designer)
    url = f"/studies/{built.study.pk}/measurements/"
    assert "each expert's own value" not in text_of(page.get(url))  # the answers stay the experts' until closed
    workspace_services.study_close_assessment(study=built.study)
    response = page.get(url)
    assert response.status_code == 200
    text = text_of(response)
    assert "AUC: each expert's own value" in text and "2 experts finished" in text
    table = re.search(r'<table class="table table--compact elicited-spread">.*?</table>', response.content.decode(),
                      flags=re.S)  # fmt: skip
    assert table is not None
    rows = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", table.group(0)))
    assert "J48 0.24 0.36 two.csv" in rows and "JRip 0.26 0.44 two.csv" in rows
    # Paged like the table: a page lists the spreads of its own candidates only.
    for number in range(30):
        workspace_services.candidate_add(study=built.study, name=f"Later {number:02d}")
    first, second = (text_of(page.get(f"{url}?page={n}")) for n in (1, 2))
    assert "J48 0.24 0.36 two.csv" in first and "The candidates of this page." in first
    assert "AUC: each expert's own value" in second and "J48 0.24" not in second


def test_an_expert_reads_the_values_across_experts_only_as_a_rounds_summary_never_the_extremes(make_study, client):
    """The lowest and highest of the experts' values are each one expert's
    own (METHOD.md 9): an expert reads the summary of a round's feedback,
    which for two experts is nothing; the designer still reads both."""
    import re

    from tests.pages.test_studyhome import as_user, text_of

    built = elicited_study(make_study)
    workspace_services.study_close_assessment(study=built.study)
    response = as_user(client, built.bob.user).get(f"/studies/{built.study.pk}/measurements/")
    assert response.status_code == 200
    table = re.search(r'<table class="table table--compact elicited-spread">.*?</table>', response.content.decode(),
                      flags=re.S)  # fmt: skip
    assert table is not None
    rows = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", table.group(0)))
    assert "Lowest" not in rows and "Highest" not in rows
    assert "J48 fewer than 3 experts: not shown two.csv" in rows
    for secret in ("0.24", "0.36", "0.26", "0.44"):  # carol's and bob's own values
        assert secret not in rows
    assert "no expert's value is shown" in text_of(response)


def test_the_api_accepts_a_monte_carlo_analysis_of_such_a_run_and_returns_its_values(make_study, api, cast):
    from engine import analyses
    from engine.models import Analysis

    run = run_of(elicited_study(make_study))
    response = api(cast.alice).post(
        f"/api/v1/runs/{run.pk}/analyses/",
        {"kind": "monte_carlo", "measurements": True, "samples": 128, "seed": 9},
        format="json",
    )
    assert response.status_code == 202, response.json()
    analysis = Analysis.objects.get(run=run)
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    body = api(cast.alice).get(f"/api/v1/analyses/{analysis.pk}/").json()
    assert body["status"] == "succeeded"
    expected = by_hand(run, 9, 128)
    rows = {row["name"]: row for row in body["summary"]["candidates"]}
    for c, name in enumerate(run.snapshot["candidates"]):
        assert rows[name]["p_best"] == pytest.approx(expected.ranks[c, 0] / 128)
        assert rows[name]["ranks"] == pytest.approx((expected.ranks[c] / 128).tolist())
    assert body["spec"]["elicited"][0]["metric"] == "AUC"
    assert "AUC (each expert's own value)" in body["summary"]["sampled"]
