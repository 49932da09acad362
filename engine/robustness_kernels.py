"""The kernels of the robustness analyses (``engine.analyses.KERNELS``):
what each kind computes from a run's stored snapshot for a range of its
units, how chunks merge, and the summary the pages and the API show.

The mathematics is ``engine.core`` and ``engine.robustness``; this module
only cuts it into units and words."""

from collections.abc import Sequence

import numpy as np
from scipy.stats import kendalltau

from workspace.errors import InvalidInput

from . import core
from .analyses import KERNELS, RunInputs
from .models import Analysis
from .results import competition_ranks
from .snapshot import snapshot_arrays

# The candidates named in each left-out expert's row.
TOP = 3


def _names(names: Sequence[str], indices: Sequence[int]) -> list[str]:
    return [names[i] for i in indices]


def _ranking(cef: np.ndarray, weighted: np.ndarray) -> tuple[list[int], list[int]]:
    return competition_ranks(cef.tolist(), weighted.tolist())


def _without(arrays: tuple[np.ndarray, ...], expert: int) -> dict[str, np.ndarray]:
    """The engine's inputs without one expert: their weights and ranges,
    and their row and column of the peer weights, every other row
    renormalised to sum to 1 (METHOD.md 6.1's V for the remaining panel)."""
    weights, peer, lower, upper, measurements = arrays
    keep = np.arange(len(weights)) != expert
    remaining = peer[np.ix_(keep, keep)]
    remaining = remaining / remaining.sum(axis=1, keepdims=True)
    return {
        "weights": weights[keep],
        "peer_weights": remaining,
        "lower": lower[keep],
        "upper": upper[keep],
        "measurements": measurements,
    }


class LeaveOneOut:
    """Units are the run's experts, in the snapshot's order; each unit's
    outcome is the ranking of the run without that expert."""

    def check(self, spec: dict) -> dict:
        if spec:
            raise InvalidInput({"spec": "leaving one expert out takes no options"})
        return {}

    def compute(self, run: RunInputs, spec: dict, seed: int, start: int, count: int) -> dict:
        snapshot = run.snapshot
        experts, candidates = snapshot["experts"], snapshot["candidates"]
        arrays = snapshot_arrays(snapshot)
        if len(experts) < 2:
            raise ValueError("leaving one expert out needs at least two experts")
        full = core.evaluate(**_all(arrays), tolerance=snapshot["tolerance"])
        rows = []
        for expert in range(start, start + count):
            result = core.evaluate(**_without(arrays, expert), tolerance=snapshot["tolerance"])
            order, ranks = _ranking(result.cef, result.weighted_scores)
            tau = kendalltau(full.cef, result.cef).statistic
            rows.append(
                {
                    "index": expert,
                    "expert": experts[expert],
                    "winner": _names(candidates, [c for c in order if ranks[c] == 1]),
                    "top_three": _names(candidates, order[:TOP]),
                    # Kendall's tau-b; undefined (NaN) when either ranking is all ties: 1 if both are.
                    "tau": float(tau) if np.isfinite(tau) else float(np.array_equal(full.cef, result.cef)),
                }
            )
        return {"rows": rows}

    def merge(self, counts: list[dict]) -> dict:
        return {"rows": sorted((row for chunk in counts for row in chunk["rows"]), key=lambda row: row["index"])}

    def summary(self, run: RunInputs, spec: dict, merged: dict) -> dict:
        results = run.results["candidates"]
        winner = [c["name"] for c in results if c["rank"] == 1]
        rows = [{**row, "changes_winner": sorted(row["winner"]) != sorted(winner)} for row in merged["rows"]]
        changed = [row for row in rows if row["changes_winner"]]
        if changed:
            sentence = " ".join(
                f"Without {row['expert']}, {' and '.join(row['winner'])} {'win' if len(row['winner']) > 1 else 'wins'}."
                for row in changed
            )
        else:
            sentence = f"No single expert's absence changes the winner ({' and '.join(winner)})."
        return {"winner": winner, "rows": rows, "changed": [row["expert"] for row in changed], "sentence": sentence}


def _all(arrays: tuple[np.ndarray, ...]) -> dict[str, np.ndarray]:
    weights, peer, lower, upper, measurements = arrays
    return {"weights": weights, "peer_weights": peer, "lower": lower, "upper": upper, "measurements": measurements}


KERNELS[Analysis.Kind.LEAVE_ONE_OUT] = LeaveOneOut()
