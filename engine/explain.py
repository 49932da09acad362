"""Results in words: why a candidate was vetoed, what expert influence means.

Pure functions over the ``approve-results/1`` document's pieces (no Django,
no numpy), shared by the results page and its CSV download so both say the
same thing in the same words.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class MetricInfo:
    """What a sentence needs to know of a metric besides its name."""

    unit: str = ""
    better: str = "higher"  # or "lower"
    # An elicited metric: each expert reads their own value (docs/method.md 7.4).
    elicited: bool = False


def number(value: float) -> str:
    """A measured value or bound as people read it: six significant digits,
    no trailing zeros (0.8, 6, 1.23457e+06)."""
    return f"{value:.6g}"


def quantity(value: float, unit: str, *, bound: bool = True) -> str:
    """A value with its unit: ``50 ms``. A unit with digits in it names a
    scale rather than a unit (``1-10``): it is said once, after the bound
    (``6 (scale 1-10)``), and a measured value on it stands alone."""
    if not unit:
        return number(value)
    if any(character.isdigit() for character in unit):
        return f"{number(value)} (scale {unit})" if bound else number(value)
    return f"{number(value)} {unit}"


def join_names(names: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def veto_sentences(candidate: str, vetoes: list[Mapping], metrics: Mapping[str, MetricInfo] | None = None) -> list[str]:
    """One sentence per vetoing metric, naming every expert whose range the
    candidate missed, the bound each set and what the candidate measured.

    ``vetoes`` are the document's (``{"expert", "metric", "value",
    "range": [least acceptable, desired]}``). Several experts vetoing on the
    same metric share one sentence; experts with the same bound are named
    together::

        bob's least acceptable Success rate is 0.8; Stump measured 0.5.
        For statistician, informatician, researcher and clinician the least
        acceptable Comprehensibility rating is 6; IBk measured 0.
        For bob and dave the least acceptable Training time is 50 ms, for
        carol 40 ms (lower is better); Stump measured 60 ms.

    An elicited metric's value is each vetoing expert's own (the veto's
    ``value``), so the sentence gives each expert's, experts with the same
    value named together::

        For bob the least acceptable Cost is 0.02 expected cost per
        instance, for carol 0.05 expected cost per instance (lower is
        better); by each one's own elicited metric Stump has 0.03 expected
        cost per instance for bob, 0.06 expected cost per instance for carol.

    Values that differ between the experts of one metric are given per
    expert even without ``elicited`` (only an elicited metric has them).
    Usernames are kept as they are (never capitalised: that would change
    the name). Metrics come in the order of their first veto.
    """
    metrics = metrics or {}
    by_metric: dict[str, dict[float, list[str]]] = {}
    values: dict[str, dict[float, list[str]]] = {}
    for veto in vetoes:
        bounds = by_metric.setdefault(veto["metric"], {})
        bounds.setdefault(veto["range"][0], []).append(veto["expert"])
        values.setdefault(veto["metric"], {}).setdefault(veto["value"], []).append(veto["expert"])
    sentences = []
    for metric, bounds in by_metric.items():
        info = metrics.get(metric, MetricInfo())
        groups = [(experts, quantity(bound, info.unit)) for bound, experts in bounds.items()]
        if len(groups) == 1 and len(groups[0][0]) == 1:
            (expert,), bound = groups[0]
            claim = f"{expert}'s least acceptable {metric} is {bound}"
        else:
            (first, first_bound), *others = groups
            claim = f"For {join_names(first)} the least acceptable {metric} is {first_bound}"
            claim += "".join(f", for {join_names(experts)} {bound}" for experts, bound in others)
        if info.better == "lower":
            claim += " (lower is better)"
        sentences.append(f"{claim}; {_values_clause(candidate, values[metric], info)}.")
    return sentences


def _values_clause(candidate: str, values: Mapping[float, list[str]], info: MetricInfo) -> str:
    """What the candidate has on the metric: its one measured value, or an
    elicited metric's value by each vetoing expert's own metric."""
    if len(values) == 1 and not info.elicited:
        return f"{candidate} measured {quantity(next(iter(values)), info.unit, bound=False)}"
    if len(values) == 1 and len(experts := next(iter(values.values()))) == 1:
        value = quantity(next(iter(values)), info.unit, bound=False)
        return f"by {experts[0]}'s own elicited metric {candidate} has {value}"
    parts = [
        f"{quantity(value, info.unit, bound=False)} for {join_names(experts)}" for value, experts in values.items()
    ]
    return f"by each one's own elicited metric {candidate} has {', '.join(parts)}"


def influence_sentence(influence: Mapping[str, float]) -> str:
    """What the expert influence figures mean, with this run's extremes.

    Influence is the stationary distribution of the peer weights (METHOD.md
    6.1): the share of the final outcome each expert's opinions carry once
    everyone's weights on everyone have been applied over and over until the
    group agrees. Equal shares mean the experts rated each other evenly."""
    explanation = (
        "Influence is the share of the outcome each expert's opinions carry once the experts' weights on "
        "one another have been applied over and over until the group agrees."
    )
    if not influence:
        return explanation
    equal = 1 / len(influence)
    if len(influence) == 1:
        return f"{explanation} With a single expert, all of it is theirs."
    most = max(influence, key=lambda name: influence[name])
    least = min(influence, key=lambda name: influence[name])
    if influence[most] - influence[least] < 5e-5:
        return f"{explanation} Here every expert carries the same share, {percent(equal)}."
    return (
        f"{explanation} {most} carries the most, {percent(influence[most])}, and {least} the least, "
        f"{percent(influence[least])}, against {percent(equal)} each if the experts had rated one another evenly."
    )


def percent(share: float) -> str:
    return f"{share * 100:.1f} %"
