"""The kernels of the robustness analyses (``engine.analyses.KERNELS``):
what each kind computes from a run's stored snapshot for a range of its
units, how chunks merge, and the summary the pages and the API show.

The mathematics is ``engine.core`` and ``engine.robustness``; this module
only cuts it into units and words."""

from collections.abc import Sequence

import numpy as np

from workspace import limits
from workspace.errors import InvalidInput

from . import core, robustness
from .analyses import KERNELS, RunInputs
from .models import Analysis
from .snapshot import snapshot_arrays, snapshot_expert_values, snapshot_standard_errors

# The candidates named in each left-out expert's row.
TOP = 3


def _names(names: Sequence[str], indices: Sequence[int]) -> list[str]:
    return [names[i] for i in indices]


def _evaluation_arguments(arrays: tuple[np.ndarray, ...], own: core.ExpertValues | None) -> dict:
    """``engine.core.evaluate``'s arguments from ``snapshot_arrays`` and
    ``snapshot_expert_values``."""
    weights, peer, lower, upper, measurements = arrays
    return {
        "weights": weights,
        "peer_weights": peer,
        "lower": lower,
        "upper": upper,
        "measurements": measurements,
        "expert_values": own,
    }


class LeaveOneOut:
    """Units are the run's experts, in the snapshot's order; each unit's
    outcome is the ranking of the run without that expert."""

    def check(self, spec: dict) -> dict:
        if spec:
            raise InvalidInput({"spec": "leaving one expert out takes no options"})
        return {}

    def prepare(self, run_id: int, spec: dict) -> dict:
        return spec

    def compute(self, run: RunInputs, spec: dict, seed: int, start: int, count: int) -> dict:
        snapshot = run.snapshot
        experts, candidates = snapshot["experts"], snapshot["candidates"]
        arrays = snapshot_arrays(snapshot)
        if len(experts) < 2:
            raise ValueError("leaving one expert out needs at least two experts")
        # The one implementation of the analysis (engine.robustness), for
        # this chunk's experts; this kernel only names what it returns.
        result = robustness.leave_one_out(
            **_evaluation_arguments(arrays, snapshot_expert_values(snapshot)),
            tolerance=snapshot["tolerance"],
            experts=range(start, start + count),
        )
        rows = []
        for row, expert in enumerate(result.experts.tolist()):
            order, ranks = result.order[row], result.ranks[row]
            tau = float(result.kendall_tau[row])
            rows.append(
                {
                    "index": expert,
                    "expert": experts[expert],
                    "winner": _names(candidates, [int(c) for c in order if ranks[c] == 1]),
                    "top_three": _names(candidates, order[:TOP].tolist()),
                    # Kendall's tau-b; 1 when the ranks are unchanged, None
                    # (undefined) when every candidate ties in one ranking only.
                    "tau": tau if np.isfinite(tau) else None,
                    "changes_winner": bool(result.winner_changed[row]),
                }
            )
        return {"rows": rows}

    def merge(self, counts: list[dict]) -> dict:
        return {"rows": sorted((row for chunk in counts for row in chunk["rows"]), key=lambda row: row["index"])}

    def summary(self, run: RunInputs, spec: dict, merged: dict) -> dict:
        results = run.results["candidates"]
        winner = [c["name"] for c in results if c["rank"] == 1]
        rows = merged["rows"]
        changed = [row for row in rows if row["changes_winner"]]
        if changed:
            sentence = " ".join(
                f"Without {row['expert']}, {' and '.join(row['winner'])} {'win' if len(row['winner']) > 1 else 'wins'}."
                for row in changed
            )
        else:
            sentence = f"No single expert's absence changes the winner ({' and '.join(winner)})."
        return {"winner": winner, "rows": rows, "changed": [row["expert"] for row in changed], "sentence": sentence}


KERNELS[Analysis.Kind.LEAVE_ONE_OUT] = LeaveOneOut()


# --- Monte Carlo (SMAA-2 rank acceptability) ---------------------------------------------

# The ranks each candidate's row of the summary lists (the counts keep every rank).
SUMMARY_RANKS = 10
# What a Monte Carlo spec holds, with its type: the page's and the API's choices.
MONTE_CARLO_OPTIONS = {"judgments": bool, "peer_weights": bool, "ranges_percent": float, "measurements": bool}
# Range bounds move by less than half the range's width (engine.robustness.SamplingSpec).
RANGES_PERCENT_MAX = limits.RANGES_PERCENT_MAX


def _ahp_judgments(snapshot: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """``(ahp_matrices (k, A, A), ahp_experts (k,))`` from a snapshot's
    ``attribute_judgments``: the experts who prioritised the attributes by
    AHP with every pair judged (all-ones matrices, never read, for the others). None for
    a snapshot from before they were recorded (version 1)."""
    grids = snapshot.get("attribute_judgments")
    if grids is None:
        return None
    count = len(snapshot["attributes"])
    matrices = np.ones((len(grids), count, count))  # all-ones (consistent) for the experts not sampled by AHP
    experts = np.zeros(len(grids), dtype=bool)
    for i, grid in enumerate(grids):
        if grid is not None and all(value is not None for row in grid for value in row):
            matrices[i] = np.array(grid, dtype=float).reshape(count, count)
            experts[i] = True
    return matrices, experts


def _judgment_words(snapshot: dict) -> str:
    judgments = _ahp_judgments(snapshot)
    if judgments is None:
        return (
            "the experts' weights (each from a Dirichlet: this run's snapshot predates the recorded AHP judgments, "
            "so they are not moved by steps of the scale)"
        )
    ahp = int(judgments[1].sum())
    others = len(judgments[1]) - ahp
    parts = []
    if ahp:
        parts.append(f"the AHP judgments of {ahp} expert{'s' if ahp != 1 else ''} (each ± 1 step of the scale)")
    if others:
        parts.append(f"the weights of {others} other expert{'s' if others != 1 else ''} (each from a Dirichlet)")
    return " and ".join(parts)


def _sampled_words(spec: dict, snapshot: dict) -> str:
    parts = []
    if spec["judgments"]:
        parts.append(_judgment_words(snapshot))
    if spec["peer_weights"]:
        parts.append("the peer weights")
    if spec["ranges_percent"]:
        parts.append(f"the acceptable ranges (± {spec['ranges_percent']:g} % of their width)")
    if spec["measurements"]:
        bootstrapped = [column["metric"] for column in spec.get("bootstrap", [])]
        typed = spec.get("standard_errors", [])
        bootstrapped += [f"{column['metric']} (each expert's own value)" for column in spec.get("elicited", [])]
        how = [f"bootstrap of {', '.join(bootstrapped)}"] if bootstrapped else []
        how += [f"{', '.join(typed)} from their standard errors"] if typed else []
        parts.append(f"the measurements ({'; '.join(how) if how else 'none could be'})")
    return ", ".join(parts)


class MonteCarlo:
    """Units are samples; each unit's outcome depends on (seed, index) only
    (``engine.robustness.monte_carlo_chunk``)."""

    def check(self, spec: dict) -> dict:
        unknown = sorted(set(spec) - set(MONTE_CARLO_OPTIONS))
        if unknown:
            raise InvalidInput(dict.fromkeys(unknown, "not an option of a Monte Carlo analysis"))
        checked: dict = {}
        for name, kind in MONTE_CARLO_OPTIONS.items():
            value = spec.get(name, kind())
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, kind) or (kind is float and not np.isfinite(value)):
                raise InvalidInput({name: "true or false" if kind is bool else "a number"})
            checked[name] = value
        if not 0 <= checked["ranges_percent"] < RANGES_PERCENT_MAX:
            raise InvalidInput({"ranges_percent": f"a percentage from 0 to below {RANGES_PERCENT_MAX}"})
        if not (
            checked["judgments"] or checked["peer_weights"] or checked["ranges_percent"] or checked["measurements"]
        ):
            raise InvalidInput({"spec": "choose at least one input to sample"})
        return checked

    def prepare(self, run_id: int, spec: dict) -> dict:
        """At launch: which metrics the bootstrap resamples (the elicited
        ones candidate by candidate, under ``elicited``), and why the others
        stay fixed (recorded in the spec). Every sample scores each expert
        on their own value of an elicited metric, as the run does
        (docs/method.md 7.4)."""
        if not spec["measurements"]:
            return spec
        from .analyses import run_inputs
        from .bootstrap_sources import bootstrap_plan, elicited_plan, typed_sampled

        snapshot = run_inputs(run_id).snapshot
        columns, fixed = bootstrap_plan(snapshot)
        elicited, held = elicited_plan(snapshot)
        # "standard_errors": the typed metrics drawn from Normal(value, SE);
        # "elicited": the elicited metrics resampled; each written only when
        # there are any, so specs without stay as they were.
        typed = typed_sampled(snapshot, columns)
        return {
            **spec,
            "bootstrap": columns,
            "fixed": fixed + held,
            **({"standard_errors": typed} if typed else {}),
            **({"elicited": elicited} if elicited else {}),
        }

    def _inputs(self, run: RunInputs, spec: dict) -> robustness.MonteCarloInputs:
        snapshot = run.snapshot
        weights, peer, lower, upper, measurements = snapshot_arrays(snapshot)
        attributes = {name: i for i, name in enumerate(snapshot["attributes"])}
        columns: tuple[robustness.BootstrapColumn, ...] = ()
        if spec.get("bootstrap"):
            from .bootstrap_sources import bootstrap_columns

            columns = bootstrap_columns(snapshot, spec["bootstrap"])
        elicited: tuple[robustness.ElicitedColumn, ...] = ()
        if spec.get("elicited"):
            from .bootstrap_sources import elicited_columns

            elicited = elicited_columns(snapshot, spec["elicited"])
        # AHP experts' judgments move by a step of the scale; without them
        # (a version 1 snapshot) every expert's weights come from a Dirichlet.
        matrices, ahp_experts = _ahp_judgments(snapshot) or (None, None)
        return robustness.MonteCarloInputs(
            weights=weights,
            peer_weights=peer,
            lower=lower,
            upper=upper,
            measurements=measurements,
            attribute_of=np.array([attributes[m["attribute"]] for m in snapshot["metrics"]], dtype=np.intp),
            ahp_matrices=matrices,
            ahp_experts=ahp_experts,
            ahp_weighting=snapshot.get("ahp_weighting") or "column_means",
            # NaN (none given, or a snapshot from before standard errors): fixed
            standard_errors=snapshot_standard_errors(snapshot),
            bootstrap=columns,
            # Each expert's own value of the elicited metrics, in every sample as in the run.
            expert_values=snapshot_expert_values(snapshot),
            elicited=elicited,
        )

    @staticmethod
    def _sampling(spec: dict) -> robustness.SamplingSpec:
        return robustness.SamplingSpec(
            judgments=spec["judgments"],
            peer_weights=spec["peer_weights"],
            range_fraction=spec["ranges_percent"] / 100,
            measurements=bool(spec.get("standard_errors")),
            bootstrap=bool(spec.get("bootstrap") or spec.get("elicited")),
        )

    def compute(self, run: RunInputs, spec: dict, seed: int, start: int, count: int) -> dict:
        counts = robustness.monte_carlo_chunk(self._inputs(run, spec), self._sampling(spec), seed, start, count)
        return counts.to_dict()

    def merge(self, counts: list[dict]) -> dict:
        return robustness.merge([robustness.Counts.from_dict(chunk) for chunk in counts]).to_dict()

    def summary(self, run: RunInputs, spec: dict, merged: dict) -> dict:
        result = robustness.summary(robustness.Counts.from_dict(merged))
        snapshot = run.snapshot
        names = snapshot["candidates"]
        attributes = snapshot["attributes"]
        attribute_of = [attributes.index(m["attribute"]) for m in snapshot["metrics"]]
        order = sorted(
            range(len(names)), key=lambda c: (-result.best[c], -result.rank_acceptability[c, :SUMMARY_RANKS].sum(), c)
        )

        def central(c: int) -> list[float] | None:
            if not result.best[c] > 0:
                return None
            return np.bincount(attribute_of, weights=result.central_weights[c], minlength=len(attributes)).tolist()

        rows = [
            {
                "name": names[c],
                "p_best": float(result.best[c]),
                "se_best": float(result.best_se[c]),
                "ranks": result.rank_acceptability[c, :SUMMARY_RANKS].tolist(),
                "central_weights": central(c),
            }
            for c in order
        ]
        leaders = [row for row in rows if row["p_best"] > 0][:2]
        parts = [
            f"{row['name']} is best in {100 * row['p_best']:.0f} % ± {100 * row['se_best']:.0f} % of samples"
            for row in leaders[:1]
        ]
        parts += [f"{row['name']} in {100 * row['p_best']:.0f} %" for row in leaders[1:]]
        return {
            "samples": result.samples,
            "sampled": _sampled_words(spec, snapshot),
            "attributes": attributes,
            "candidates": rows,
            "pairwise": {
                "candidates": [names[c] for c in result.pairwise_candidates.tolist()],
                "probabilities": result.pairwise.tolist(),
            },
            "sentence": "; ".join(parts) + ".",
            "fixed": spec.get("fixed", []),
        }


KERNELS[Analysis.Kind.MONTE_CARLO] = MonteCarlo()
