"""The words of a robustness analysis, written when it is shown.

The kernels (``engine.robustness_kernels``) store numbers and names only;
the sentences the pages and the API show are written here from them, at
render time, so changing a word needs no recomputation (issue 30, item 2).
Pure: no Django. An analysis stored before this module existed kept its
sentences in its summary; they are shown as stored.
"""

from collections.abc import Mapping, Sequence
from typing import Any

LEAVE_ONE_OUT = "leave_one_out"
MONTE_CARLO = "monte_carlo"


def _names(names: Sequence[str]) -> str:
    return " and ".join(names)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def leave_one_out_sentence(summary: Mapping[str, Any]) -> str:
    """Whose absence changes the winner, and to whom; or that nobody's does."""
    changed = [row for row in summary["rows"] if row["changes_winner"]]
    if not changed:
        return f"No single expert's absence changes the winner ({_names(summary['winner'])})."
    return " ".join(
        f"Without {row['expert']}, {_names(row['winner'])} {'win' if len(row['winner']) > 1 else 'wins'}."
        for row in changed
    )


def interval_words(interval: Sequence[float]) -> str:
    """A 95 % Wilson interval of a share, in percent ("95 %: 0.0–0.4 %")."""
    low, high = interval
    return f"95 %: {100 * low:.1f}–{100 * high:.1f} %"


def monte_carlo_sentence(summary: Mapping[str, Any]) -> str:
    """The candidate most often best, with its standard error and its
    Wilson interval (stored by analyses since issue 31), and the runner-up."""
    leaders = [row for row in summary["candidates"] if row["p_best"] > 0][:2]
    parts = [
        f"{row['name']} is best in {100 * row['p_best']:.0f} % ± {100 * row['se_best']:.0f} % of samples"
        + (f" ({interval_words(row['wilson_best'])})" if "wilson_best" in row else "")
        for row in leaders[:1]
    ]
    parts += [f"{row['name']} in {100 * row['p_best']:.0f} %" for row in leaders[1:]]
    return "; ".join(parts) + "."


def _judgment_words(judgments: Mapping[str, Any]) -> str:
    if not judgments["recorded"]:
        return (
            "the experts' weights (each from a Dirichlet: this run's snapshot predates the recorded AHP judgments, "
            "so they are not moved by steps of the scale)"
        )
    parts = []
    if judgments["ahp"]:
        parts.append(f"the AHP judgments of {_plural(judgments['ahp'], 'expert')} (each ± 1 step of the scale)")
    if judgments["others"]:
        # "other" only beside the AHP experts just named.
        who = _plural(judgments["others"], "other expert" if judgments["ahp"] else "expert")
        parts.append(f"the weights of {who} (each from a Dirichlet)")
    return " and ".join(parts)


def sampled_words(sampled: Mapping[str, Any]) -> str:
    """What a Monte Carlo moved, from the kernel's ``sampled_inputs``."""
    parts = []
    if sampled["judgments"] is not None:
        parts.append(_judgment_words(sampled["judgments"]))
    if sampled["peer_weights"]:
        parts.append("the peer weights")
    if sampled["ranges_percent"]:
        parts.append(f"the acceptable ranges (± {sampled['ranges_percent']:g} % of their width)")
    measurements = sampled["measurements"]
    if measurements is not None:
        bootstrapped = list(measurements["bootstrap"])
        bootstrapped += [f"{metric} (each expert's own value)" for metric in measurements["elicited"]]
        how = [f"bootstrap of {', '.join(bootstrapped)}"] if bootstrapped else []
        typed = measurements["standard_errors"]
        how += [f"{', '.join(typed)} from their standard errors"] if typed else []
        parts.append(f"the measurements ({'; '.join(how) if how else 'none could be'})")
    return ", ".join(parts)


def with_words(kind: str, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary as pages and the API show it: the stored numbers and
    names, with ``sentence`` (and a Monte Carlo's ``sampled``) in words."""
    shown = dict(summary)
    if "sentence" not in shown:
        shown["sentence"] = leave_one_out_sentence(summary) if kind == LEAVE_ONE_OUT else monte_carlo_sentence(summary)
    if kind == MONTE_CARLO and "sampled_inputs" in summary:
        shown["sampled"] = sampled_words(summary["sampled_inputs"])
    return shown
