"""AHP judgments in a run's snapshot (version 2) and the Monte Carlo
analysis that moves them by a step of the scale (issue 20, item 4); runs
whose snapshot predates them still analyse, with a Dirichlet for everyone."""

import itertools

import numpy as np
import pytest

from engine import analyses, robustness, services
from engine import snapshot as engine_snapshot
from engine.analyses import run_inputs
from engine.analysis_words import with_words
from engine.models import Analysis, Run
from engine.prioritisation import ahp_weights
from engine.robustness_kernels import MonteCarlo
from engine.rules import SCALE_VALUES
from workspace.bundles import study_import_bundle
from workspace.models import AttributeJudgment, Method

from .test_runs import case_study_bundle

ATTRIBUTES = ["Accuracy", "Consistency", "Comprehensibility"]
# Two AHP experts; the researcher's judgments are given column over row for
# two pairs (the snapshot must place each value and its reciprocal).
JUDGMENTS = {
    "statistician": [
        ["Accuracy", "Consistency", 3],
        ["Accuracy", "Comprehensibility", 4],
        ["Consistency", "Comprehensibility", 2],
    ],
    "researcher": [
        ["Consistency", "Accuracy", 1 / 3],
        ["Comprehensibility", "Accuracy", 1 / 2],
        ["Consistency", "Comprehensibility", 1 / 2],
    ],
}


def ahp_bundle():
    bundle = case_study_bundle()
    for expert, judgments in JUDGMENTS.items():
        bundle["priorities"][expert] = {"method": "ahp", "judgments": judgments}
    return bundle


def succeeded_run(bundle):
    study = study_import_bundle(bundle=bundle)
    run = services.run_launch(study=study, launched_by=study.designer)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


@pytest.fixture
def run(db):
    return succeeded_run(ahp_bundle())


def test_snapshot_holds_each_experts_method_and_ahp_matrix_as_stored(run):
    snapshot = Run.objects.get(pk=run.pk).snapshot  # as stored
    assert snapshot["version"] == engine_snapshot.SNAPSHOT_VERSION == 3
    assert snapshot["attributes"] == ATTRIBUTES
    experts = snapshot["experts"]
    assert snapshot["attribute_methods"] == ["ahp" if name in JUDGMENTS else "direct" for name in experts]
    stored = AttributeJudgment.objects.filter(prioritisation__expert__study=run.study)
    assert stored.count() == 6
    for judgment in stored.select_related("prioritisation__expert__user", "row", "column"):
        matrix = snapshot["attribute_judgments"][experts.index(judgment.prioritisation.expert.user.username)]
        r, c = ATTRIBUTES.index(judgment.row.name), ATTRIBUTES.index(judgment.column.name)
        assert matrix[r][c] == judgment.value
        assert matrix[c][r] == 1 / judgment.value
    for name, matrix in zip(experts, snapshot["attribute_judgments"], strict=True):
        if name not in JUDGMENTS:
            assert matrix is None
            continue
        assert [matrix[i][i] for i in range(3)] == [1.0, 1.0, 1.0]
        # The run's AHP weights are those of the snapshot's matrix.
        index = experts.index(name)
        assert np.allclose(ahp_weights(np.array(matrix)), snapshot["attribute_weights"][index], atol=1e-12)
    assert np.allclose(
        snapshot["attribute_judgments"][experts.index("researcher")],
        [[1, 3, 2], [1 / 3, 1, 1 / 2], [1 / 2, 2, 1]],
        atol=1e-12,
    )


def neighbour_weights(matrix):
    """The AHP weights of every matrix whose judgments are each within one
    step of the scale of ``matrix``'s (clipped at the ends)."""
    rows, columns = np.triu_indices(len(matrix), k=1)
    points = [
        int(np.argmin(np.abs(np.log(SCALE_VALUES) - np.log(matrix[r][c])))) for r, c in zip(rows, columns, strict=True)
    ]
    choices = [[q for q in (p - 1, p, p + 1) if 0 <= q < len(SCALE_VALUES)] for p in points]
    found = []
    for chosen in itertools.product(*choices):
        moved = np.ones((len(matrix), len(matrix)))
        for (r, c), q in zip(zip(rows, columns, strict=True), chosen, strict=True):
            moved[r, c], moved[c, r] = SCALE_VALUES[q], 1 / SCALE_VALUES[q]
        found.append(ahp_weights(moved))
    return np.array(found)


def test_sampled_judgments_give_ahp_weights_of_matrices_one_step_away(run):
    spec = MonteCarlo().check({"judgments": True})
    inputs = MonteCarlo()._inputs(run_inputs(run.pk), spec)
    snapshot = run.snapshot
    experts = snapshot["experts"]
    assert np.asarray(inputs.ahp_experts).tolist() == [name in JUDGMENTS for name in experts]
    prepared = robustness._Prepared(inputs, MonteCarlo._sampling(spec))
    sampled = prepared.metric_weights(seed=11, block=0, size=400)  # (samples, experts, metrics)
    attribute = np.stack([[np.bincount(prepared.attribute_of, row, 3) for row in sample] for sample in sampled])
    for name in JUDGMENTS:
        i = experts.index(name)
        allowed = neighbour_weights(snapshot["attribute_judgments"][i])
        # Each sample's weights are those of a matrix one step away at most...
        distance = np.abs(attribute[:, i, None, :] - allowed[None]).max(axis=-1).min(axis=-1)
        assert distance.max() < 1e-12
        # ...they move (several distinct matrices are drawn), and the run's own weights are one of them.
        assert len(np.unique(np.round(attribute[:, i], 12), axis=0)) > 5
        assert np.abs(allowed - snapshot["attribute_weights"][i]).max(axis=-1).min() < 1e-12
        # Each metric keeps its share of its attribute.
        assert np.allclose(sampled[:, i] / attribute[:, i, prepared.attribute_of], prepared.shares[i], atol=1e-12)
    # The direct experts' weights come from the Dirichlet: off any grid, centred on theirs.
    for name in set(experts) - set(JUDGMENTS):
        i = experts.index(name)
        assert len(np.unique(np.round(attribute[:, i], 12), axis=0)) == 400
        assert np.allclose(attribute[:, i].mean(axis=0), snapshot["attribute_weights"][i], atol=0.02)


def test_a_monte_carlo_analysis_of_an_ahp_study_moves_the_judgments(run):
    analysis = analyses.analysis_launch(
        run=run,
        kind=Analysis.Kind.MONTE_CARLO,
        launched_by=run.study.designer,
        spec={"judgments": True},
        samples=600,
        seed=5,
    )
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    assert analysis.status == Analysis.Status.SUCCEEDED, analysis.error
    summary = analysis.result["summary"]
    assert summary["samples"] == 600
    # Stored as data, written out when shown.
    assert summary["sampled_inputs"]["judgments"] == {"recorded": True, "ahp": 2, "others": 2}
    assert with_words(analysis.kind, summary)["sampled"] == (
        "the AHP judgments of 2 experts (each ± 1 step of the scale) and the weights of 2 other experts "
        "(each from a Dirichlet)"
    )
    # The same analysis with every expert's weights from a Dirichlet counts otherwise.
    inputs = run_inputs(run.pk)
    spec = MonteCarlo().check({"judgments": True})
    dirichlet = robustness.monte_carlo_chunk(
        robustness.MonteCarloInputs(
            **{
                name: getattr(MonteCarlo()._inputs(inputs, spec), name)
                for name in ("weights", "peer_weights", "lower", "upper", "measurements", "attribute_of")
            }
        ),
        MonteCarlo._sampling(spec),
        5,
        0,
        600,
    )
    assert analysis.result["counts"] != robustness_counts(dirichlet)


def robustness_counts(counts):
    return counts.to_dict()


def test_a_run_whose_snapshot_predates_the_judgments_still_analyses(db):
    run = succeeded_run(ahp_bundle())
    old = {key: value for key, value in run.snapshot.items() if key not in ("attribute_methods", "attribute_judgments")}
    Run.objects.filter(pk=run.pk).update(snapshot={**old, "version": 1})
    run.refresh_from_db()
    spec = MonteCarlo().check({"judgments": True})
    inputs = MonteCarlo()._inputs(run_inputs(run.pk), spec)
    assert inputs.ahp_experts is None and inputs.ahp_matrices is None

    analysis = analyses.analysis_launch(
        run=run,
        kind=Analysis.Kind.MONTE_CARLO,
        launched_by=run.study.designer,
        spec={"judgments": True},
        samples=300,
        seed=5,
    )
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    assert analysis.status == Analysis.Status.SUCCEEDED, analysis.error
    assert analysis.result["summary"]["sampled_inputs"]["judgments"] == {"recorded": False, "ahp": 0, "others": 0}
    assert with_words(analysis.kind, analysis.result["summary"])["sampled"].startswith(
        "the experts' weights (each from a Dirichlet: this run's snapshot predates the recorded AHP judgments"
    )
    direct = robustness.monte_carlo_chunk(inputs, MonteCarlo._sampling(spec), 5, 0, 300)
    assert analysis.result["counts"] == robustness_counts(direct)


def test_an_ahp_matrix_with_a_pair_missing_falls_back_to_the_dirichlet(run):
    snapshot = dict(run.snapshot)
    experts = snapshot["experts"]
    matrices = [None if m is None else [list(row) for row in m] for m in snapshot["attribute_judgments"]]
    i = experts.index("statistician")
    matrices[i][0][1] = matrices[i][1][0] = None
    snapshot["attribute_judgments"] = matrices
    spec = MonteCarlo().check({"judgments": True})
    inputs = MonteCarlo()._inputs(analyses.RunInputs(snapshot=snapshot, results=run.results), spec)
    assert np.asarray(inputs.ahp_experts).tolist() == [name == "researcher" for name in experts]


def test_the_layout_migration_bumps_every_study_so_no_old_snapshot_is_copied(run):
    # engine migration 0006 (SNAPSHOT_VERSION 2): without it a launch at the
    # study's unchanged input_version would copy this version 1 snapshot.
    import importlib

    from django.apps import apps

    study = run.study
    Run.objects.filter(pk=run.pk).update(snapshot={**run.snapshot, "version": 1})
    before = study.input_version
    importlib.import_module("engine.migrations.0006_snapshot_judgments").bump_input_versions(apps, None)
    study.refresh_from_db()
    assert study.input_version == before + 1
    again = services.run_launch(study=study, launched_by=study.designer)
    assert Run.objects.get(pk=again.pk).snapshot is None  # not copied: taken by its worker
    stored = services.run_snapshot_take(run_id=again.pk)
    assert stored["version"] == engine_snapshot.SNAPSHOT_VERSION
    assert stored["attribute_methods"].count(Method.AHP) == 2


def test_the_expert_values_migration_bumps_every_study_too(run):
    # engine migration 0009 (SNAPSHOT_VERSION 3, "expert_values").
    import importlib

    from django.apps import apps

    study = run.study
    before = study.input_version
    importlib.import_module("engine.migrations.0011_snapshot_expert_values").bump_input_versions(apps, None)
    study.refresh_from_db()
    assert study.input_version == before + 1


def test_packed_counts_keep_their_layout_and_unpack_to_the_same_counts():
    # Counts.to_dict/from_dict, the one counts format, are vectorised; the stored layout is
    # [candidate, rank, count] triples of the non-zero entries, row by row.
    rng = np.random.default_rng(3)
    ranks = rng.integers(0, 4, size=(30, 30)) * (rng.random((30, 30)) < 0.3)
    counts = robustness.Counts(
        samples=17,
        ranks=ranks.astype(np.int64),
        pairwise=rng.integers(0, 9, size=(5, 5)),
        pairwise_candidates=np.array([0, 3, 7, 8, 29]),
        central_weights=rng.integers(0, 2**40, size=(30, 4)),
    )
    packed = counts.to_dict()
    assert packed["ranks"] == [[c, r, int(ranks[c, r])] for c in range(30) for r in range(30) if ranks[c, r] > 0]
    assert all(type(value) is int for triple in packed["ranks"] for value in triple)  # JSON-ready
    again = robustness.Counts.from_dict(packed)
    assert np.array_equal(again.ranks, counts.ranks) and again.samples == 17
    assert np.array_equal(again.pairwise, counts.pairwise)
    assert np.array_equal(again.central_weights, counts.central_weights)
    merged = robustness.merge([counts, again, counts])
    assert np.array_equal(merged.ranks, 3 * counts.ranks) and merged.samples == 51
    assert np.array_equal(merged.central_weights, 3 * counts.central_weights)
