"""What a run stores: ``evaluate_snapshot`` runs the engine on a snapshot
(``engine.snapshot``) and returns ``Run.results`` in layout
``RESULTS_LAYOUT``: candidates best first with their competition ranks,
vetoes and group scores, the disagreement measures, and the results
document's bytes (``engine.selectors.document_tail``), so serving it parses
and builds nothing. No database access here.
"""

import numpy as np

from . import core, disagreement
from .robustness import competition_ranks, ranking_order
from .rules import CONSISTENCY_THRESHOLD, SCALE_MAX, is_consistent
from .selectors import document_tail
from .snapshot import RunInputError, snapshot_arrays, snapshot_expert_values, snapshot_matrix

__all__ = ["RESULTS_LAYOUT", "evaluate_snapshot"]


def _vetoes(
    lower: np.ndarray,
    upper: np.ndarray,
    measurements: np.ndarray,
    vetoed: np.ndarray,
    expert_values: core.ExpertValues | None = None,
) -> list[list[list]]:
    """For each vetoed candidate (indices ``vetoed``), its vetoing judgments
    as ``[expert, metric, value, least acceptable, desired]``, ordered by
    expert then metric, from ``core.vetoing_judgments`` (one vectorised pass,
    the engine's own comparison, so the engine and the listed vetoes can
    never disagree on who vetoes what)."""
    position = {candidate: index for index, candidate in enumerate(vetoed.tolist())}
    found: list[list[list]] = [[] for _ in vetoed]
    candidate, expert, metric = core.vetoing_judgments(lower, upper, measurements, expert_values).T
    value = measurements[candidate, metric]
    if expert_values is not None:
        # An elicited metric's value is the vetoing expert's own.
        column = {int(j): e for e, j in enumerate(expert_values.columns)}
        for row in np.flatnonzero(np.isin(metric, expert_values.columns)).tolist():
            value[row] = expert_values.values[candidate[row], expert[row], column[int(metric[row])]]
    rows = zip(
        candidate.tolist(),
        expert.tolist(),
        metric.tolist(),
        value.tolist(),
        lower[expert, metric].tolist(),
        upper[expert, metric].tolist(),
        strict=True,
    )
    for vetoed_candidate, *veto in rows:
        found[position[vetoed_candidate]].append(veto)
    return found


# What ``Run.results`` holds (engine/models.py): everything the results
# document needs, so serving it never reads the snapshot; candidates best
# first, scores as arrays in the order of ``metrics``; and under "document"
# the document's compact JSON from "iterations" on (results_json).
# Layout 3 adds the disagreement measures (engine.disagreement) for the
# results pages: each expert's attribute and metric weights (rows in the
# order of ``experts``), "disagreement" (the weights' spreads and consensus)
# and each candidate's "veto_shares"; migration 0003 upgrades layout 2.
RESULTS_LAYOUT = 3


def _spread(weights: np.ndarray) -> dict:
    """``{"min", "max", "mean", "stdev"}``, each a list in column order."""
    return {key: values.tolist() for key, values in disagreement.weight_spread(weights)._asdict().items()}


def _consensus(weights: np.ndarray) -> dict:
    value = disagreement.ahp_consensus(weights)
    return {"value": value, "wording": disagreement.consensus_wording(value)}


def _disagreement_measures(snapshot: dict, metric_weights: np.ndarray) -> dict:
    """The results' disagreement fields (layout 3): each expert's attribute
    and metric weights, rows renormalised as the engine renormalises them,
    and their spreads and AHP consensus (``engine.disagreement``). Every
    measure starts from the snapshot's rows, so the stored spreads are those
    of the stored rows."""
    attribute_weights = snapshot_matrix(
        snapshot, "attribute_weights", snapshot["experts"], snapshot["attributes"], "a prioritisation"
    )
    return {
        "expert_attribute_weights": disagreement.weight_rows(attribute_weights).tolist(),
        "expert_metric_weights": disagreement.weight_rows(metric_weights).tolist(),
        "disagreement": {
            "attribute_weights": _spread(attribute_weights),
            "metric_weights": _spread(metric_weights),
            "consensus": {
                "measure": disagreement.CONSENSUS_MEASURE,
                "scale_max": SCALE_MAX,
                "attribute_weights": _consensus(attribute_weights),
                "metric_weights": _consensus(metric_weights),
            },
        },
    }


def _consistency_out(snapshot: dict) -> dict:
    """The snapshot's consistency ratios, each flagged against
    engine.rules.CONSISTENCY_THRESHOLD (the results document's optional
    "consistency"); nothing for a snapshot taken before they were recorded."""
    if "consistency" not in snapshot:
        return {}
    return {
        "consistency": {
            "threshold": CONSISTENCY_THRESHOLD,
            "prioritisations": [
                {**entry, "inconsistent": not is_consistent(entry["consistency_ratio"])}
                for entry in snapshot["consistency"]
            ],
        }
    }


def evaluate_snapshot(snapshot: dict) -> dict:
    """Run the engine on a snapshot; returns the results to store."""
    weights, peer_weights, lower, upper, measurements = snapshot_arrays(snapshot)
    own = snapshot_expert_values(snapshot)
    try:
        evaluation = core.evaluate(
            weights=weights,
            peer_weights=peer_weights,
            lower=lower,
            upper=upper,
            measurements=measurements,
            tolerance=snapshot["tolerance"],
            expert_values=own,
        )
    except ValueError as error:
        raise RunInputError(str(error)) from None
    if not all(
        np.isfinite(part).all() for part in (evaluation.metric_weights, evaluation.group_scores, evaluation.cef)
    ):
        # Never store a number JSON cannot carry; engine.core should make none.
        raise RunInputError("the engine produced a non-finite score; the inputs are numerically out of range")
    attribute_of = [m["attribute"] for m in snapshot["metrics"]]
    attribute_weights = [
        float(sum(w for w, attribute in zip(evaluation.metric_weights, attribute_of, strict=True) if attribute == name))
        for name in snapshot["attributes"]
    ]
    try:
        measures = _disagreement_measures(snapshot, weights)
    except ValueError as error:
        raise RunInputError(str(error)) from None
    shares = disagreement.veto_shares(lower, upper, measurements, own).tolist()
    cef = evaluation.cef.tolist()
    weighted = evaluation.weighted_scores.tolist()
    order = ranking_order(evaluation.cef, evaluation.weighted_scores).tolist()
    ranks = competition_ranks(evaluation.cef).tolist()
    vetoed = np.flatnonzero(evaluation.vetoed)
    vetoes = dict(zip(vetoed.tolist(), _vetoes(lower, upper, measurements, vetoed, own), strict=True))
    group_scores = evaluation.group_scores.tolist()
    names = snapshot["candidates"]
    results = {
        "layout": RESULTS_LAYOUT,
        "study": snapshot["study"]["title"],
        "iterations": int(evaluation.iterations),
        "selected_attributes": snapshot["attributes"],
        "metrics": [m["name"] for m in snapshot["metrics"]],
        "experts": snapshot["experts"],
        "attribute_weights": attribute_weights,
        "metric_weights": evaluation.metric_weights.tolist(),
        "expert_influence": evaluation.expert_influence.tolist(),
        **measures,
        **_consistency_out(snapshot),
        "candidates": [
            {
                "name": names[c],
                "rank": ranks[c],
                "cef": cef[c],
                "weighted_score": weighted[c],
                "vetoed": c in vetoes,
                "vetoes": vetoes.get(c, []),
                "group_scores": group_scores[c],
                "veto_shares": shares[c],
            }
            for c in order
        ],
    }
    # The document's bytes, so that serving it parses and builds nothing.
    results["document"] = document_tail(results)
    return results
