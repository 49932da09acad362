"""Two runs of one study compared: how the ranking, the scores, the weights
and the influence moved, and what changed in the inputs between the two
snapshots, naming who changed what.

Pure functions over the stored documents and snapshots (no Django), so the
comparison page only reads and renders. The earlier run is always the
"before" side, whatever order the two are given in.
"""

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, overload

import numpy as np

from .explain import number
from .rules import AHP_WEIGHTING_DEFAULT, TIE, beats

# Differences below this are float noise from renormalisation, not changes.
EPSILON = 1e-12


class Movement(NamedTuple):
    """One candidate's place and scores in both runs (None where absent). A
    named tuple: a comparison makes one per candidate, a thousand, built a
    tenth as fast as a frozen dataclass."""

    name: str
    before_rank: int | None
    after_rank: int | None
    before_cef: float | None
    after_cef: float | None
    before_weighted: float | None
    after_weighted: float | None
    before_vetoed: bool | None
    after_vetoed: bool | None
    #: Places gained: candidates it passed minus candidates that passed it
    #: (see :func:`net_passes`); 0 when new or gone.
    gained: int = 0

    @property
    def status(self) -> str:
        """``up``, ``down``, ``same``, ``new`` (only in the later run) or ``gone``."""
        if self.before_rank is None:
            return "new"
        if self.after_rank is None:
            return "gone"
        if self.gained > 0:
            return "up"
        return "down" if self.gained < 0 else "same"

    @property
    def places(self) -> int:
        """How many places the candidate moved (0 when new, gone or only tied)."""
        return abs(self.gained)

    @property
    def tie_only(self) -> bool:
        """The rank number changed although no candidate passed it or was
        passed: a tie formed or broke around it (equal CEFs share a rank)."""
        return self.status == "same" and self.before_rank != self.after_rank

    @property
    def cef_delta(self) -> float | None:
        return _delta(self.before_cef, self.after_cef)

    @property
    def weighted_delta(self) -> float | None:
        return _delta(self.before_weighted, self.after_weighted)


@dataclass(frozen=True)
class Delta:
    """A named figure (a weight, an influence) in both runs."""

    name: str
    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        return _delta(self.before, self.after)

    @property
    def changed(self) -> bool:
        return self.delta is None or abs(self.delta) > EPSILON


@dataclass(frozen=True)
class InputChange:
    """One input that differs between the snapshots. ``who`` is the expert
    whose input it is, or ``None`` for the study's design (the designer's
    candidates, measurements, selection and settings)."""

    who: str | None
    what: str
    before: str
    after: str


class Movements(Sequence[Movement]):
    """Every candidate's :class:`Movement`, in the comparison's order, each
    built when read: a page of 25 of a thousand candidates builds 25. How
    many moved is counted from the places gained alone."""

    def __init__(
        self, names: list[str], earlier: Mapping[str, Mapping], later: Mapping[str, Mapping], gains: Mapping[str, int]
    ) -> None:
        self._names, self._earlier, self._later, self._gains = names, earlier, later, gains
        self.moved = sum(1 for gained in gains.values() if gained)

    def _movement(self, name: str) -> Movement:
        b, a = self._earlier.get(name, _ABSENT), self._later.get(name, _ABSENT)
        return Movement(
            name,
            b.get("rank"),
            a.get("rank"),
            b.get("cef"),
            a.get("cef"),
            b.get("weighted_score"),
            a.get("weighted_score"),
            b.get("vetoed"),
            a.get("vetoed"),
            self._gains.get(name, 0),  # only candidates of both runs have gains
        )

    def __len__(self) -> int:
        return len(self._names)

    @overload
    def __getitem__(self, index: int) -> Movement: ...
    @overload
    def __getitem__(self, index: slice) -> list[Movement]: ...
    def __getitem__(self, index: int | slice) -> Movement | list[Movement]:
        if isinstance(index, slice):
            return [self._movement(name) for name in self._names[index]]
        return self._movement(self._names[index])

    def __iter__(self) -> Iterator[Movement]:
        return map(self._movement, self._names)

    def __eq__(self, other: object) -> bool:
        """Equal to the same movements, built or listed."""
        if isinstance(other, Movements | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal by value, so unhashable (object's __hash__ is a method)


_ABSENT: Mapping = {}


@dataclass
class Comparison:
    candidates: Sequence[Movement]
    attribute_weights: list[Delta]
    metric_weights: list[Delta]
    expert_influence: list[Delta]
    changes: list[InputChange] = field(default_factory=list)

    @property
    def metrics_are_attributes(self) -> bool:
        """Whether every attribute has a single metric in both runs, so the
        metric weights repeat the attribute weights."""
        same = zip(self.attribute_weights, self.metric_weights, strict=False)
        return len(self.attribute_weights) == len(self.metric_weights) and all(
            (a.before, a.after) == (m.before, m.after) for a, m in same
        )

    @property
    def moved(self) -> int:
        if isinstance(self.candidates, Movements):
            return self.candidates.moved
        return sum(1 for movement in self.candidates if movement.status in ("up", "down"))


def _delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def _differs(before: float | None, after: float | None) -> bool:
    if before is None or after is None:
        return before is not after
    return abs(after - before) > EPSILON


def net_passes(name: str, before: Mapping[str, float], after: Mapping[str, float]) -> int:
    """Places a candidate present in both runs gained: the candidates it
    passed minus those that passed it, by CEF. Candidate ``x`` passed ``y``
    when ``y`` was strictly ahead in the earlier run and is strictly behind
    in the later one; a new candidate strictly ahead in the later run passed
    it, and a gone candidate strictly ahead in the earlier run counts as
    passed. Ties pass nobody: equal CEFs (within ``engine.rules.TIE``,
    METHOD.md 6.2) share a competition rank
    (``engine.robustness.competition_ranks``), so a tie that forms or breaks
    around a candidate (a third candidate vetoed down to the same CEF 0)
    changes its rank number but is no move of its own, and two roundings
    of one score are no move at all. "Strictly ahead" is ahead by more
    than TIE."""
    mine_before, mine_after = before[name], after[name]
    gained = 0
    for other in before.keys() | after.keys():
        if other == name:
            continue
        was_ahead = other in before and before[other] > mine_before + TIE
        was_behind = other in before and mine_before > before[other] + TIE
        is_ahead = other in after and after[other] > mine_after + TIE
        is_behind = other in after and mine_after > after[other] + TIE
        if other not in after:
            gained += was_ahead
        elif other not in before:
            gained -= is_ahead
        else:
            gained += (was_ahead and is_behind) - (was_behind and is_ahead)
    return gained


# Rows of the (candidates x candidates) comparisons ``all_net_passes`` makes
# at once: bounds its memory whatever the number of candidates.
_PASSES_BLOCK = 256


def all_net_passes(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, int]:
    """:func:`net_passes` of every candidate present in both runs, at once:
    the same counts, by NumPy comparisons of the CEFs (a thousand candidates
    are a million pairs, too many for a Python loop on a page view)."""
    both = [name for name in after if name in before]
    if not both:
        return {}
    mine_before = np.array([before[name] for name in both], dtype=float)
    mine_after = np.array([after[name] for name in both], dtype=float)
    gained = np.zeros(len(both), dtype=np.int64)
    for start in range(0, len(both), _PASSES_BLOCK):
        rows = slice(start, start + _PASSES_BLOCK)
        was_ahead = beats(mine_before[None, :], mine_before[rows, None])
        was_behind = beats(mine_before[rows, None], mine_before[None, :])
        is_ahead = beats(mine_after[None, :], mine_after[rows, None])
        is_behind = beats(mine_after[rows, None], mine_after[None, :])
        gained[rows] = (was_ahead & is_behind).sum(axis=1) - (was_behind & is_ahead).sum(axis=1)
    # a gone candidate strictly ahead before counts as passed; a new one
    # strictly ahead after passed it (ahead by more than TIE: above x + TIE)
    gone = np.sort(np.array([cef for name, cef in before.items() if name not in after], dtype=float))
    new = np.sort(np.array([cef for name, cef in after.items() if name not in before], dtype=float))
    gained += len(gone) - np.searchsorted(gone, mine_before + TIE, side="right")
    gained -= len(new) - np.searchsorted(new, mine_after + TIE, side="right")
    return {name: int(g) for name, g in zip(both, gained, strict=True)}


def compare_results(before: Mapping, after: Mapping) -> Comparison:
    """The ranking, scores, weights and influence of two ``approve-results/1``
    documents side by side: candidates in the later run's rank order, then
    those only the earlier run had. Ranks are the documents' competition
    ranks; a move is counted by :func:`net_passes`, so candidates with equal
    CEFs are never moved against each other."""
    earlier = {c["name"]: c for c in before["candidates"]}
    later = {c["name"]: c for c in after["candidates"]}
    names = [c["name"] for c in after["candidates"]] + [
        c["name"] for c in before["candidates"] if c["name"] not in later
    ]
    cef_before = {name: c["cef"] for name, c in earlier.items()}
    cef_after = {name: c["cef"] for name, c in later.items()}
    gains = all_net_passes(cef_before, cef_after)
    return Comparison(
        candidates=Movements(names, earlier, later, gains),
        attribute_weights=_deltas(before["attribute_weights"], after["attribute_weights"]),
        metric_weights=_deltas(before["metric_weights"], after["metric_weights"]),
        expert_influence=_deltas(before["expert_influence"], after["expert_influence"]),
    )


def _deltas(before: Mapping[str, float], after: Mapping[str, float]) -> list[Delta]:
    names = list(after) + [name for name in before if name not in after]
    return [Delta(name, before.get(name), after.get(name)) for name in names]


# --- what changed in the inputs -------------------------------------------------------


def _index(names: Sequence[str]) -> dict[str, int]:
    return {name: position for position, name in enumerate(names)}


def _membership_changes(before: Sequence[str], after: Sequence[str], what: str) -> list[InputChange]:
    kept = set(after)
    gone = [InputChange(None, f"{what} {name}", "included", "not included") for name in before if name not in kept]
    known = set(before)
    new = [InputChange(None, f"{what} {name}", "not included", "included") for name in after if name not in known]
    return gone + new


def _range(lower: float, upper: float) -> str:
    return f"[{number(lower)}, {number(upper)}]"


@dataclass(frozen=True)
class _Positions:
    """Where each name shared by two snapshots sits in either, and the
    metrics and attributes they share, in the later snapshot's order."""

    before: Mapping
    after: Mapping
    b_metric: dict[str, int]
    a_metric: dict[str, int]
    b_attribute: dict[str, int]
    a_attribute: dict[str, int]
    b_expert: dict[str, int]
    common_metrics: list[str]
    common_attributes: list[str]

    @classmethod
    def of(cls, before: Mapping, after: Mapping) -> "_Positions":
        b_metric = _index([m["name"] for m in before["metrics"]])
        a_metric = _index([m["name"] for m in after["metrics"]])
        b_attribute = _index(before["attributes"])
        return cls(
            before=before,
            after=after,
            b_metric=b_metric,
            a_metric=a_metric,
            b_attribute=b_attribute,
            a_attribute=_index(after["attributes"]),
            b_expert=_index(before["experts"]),
            common_metrics=[name for name in a_metric if name in b_metric],
            common_attributes=[name for name in after["attributes"] if name in b_attribute],
        )


def _design_changes(before: Mapping, after: Mapping) -> list[InputChange]:
    """Experts, attributes, metrics and candidates included or not, the
    tolerance and how AHP weights were computed (``ahp_weighting``)."""
    changes = []
    changes += _membership_changes(before["experts"], after["experts"], "expert")
    changes += _membership_changes(before["attributes"], after["attributes"], "attribute")
    metric_names = ([m["name"] for m in before["metrics"]], [m["name"] for m in after["metrics"]])
    changes += _membership_changes(*metric_names, "metric")
    changes += _membership_changes(before["candidates"], after["candidates"], "candidate")
    if _differs(before["tolerance"], after["tolerance"]):
        changes.append(InputChange(None, "tolerance", f"{before['tolerance']:g}", f"{after['tolerance']:g}"))
    # snapshots taken before the setting existed used the paper's method
    weighting = (before.get("ahp_weighting", AHP_WEIGHTING_DEFAULT), after.get("ahp_weighting", AHP_WEIGHTING_DEFAULT))
    if weighting[0] != weighting[1]:
        changes.append(
            InputChange(None, "AHP weighting", weighting[0].replace("_", " "), weighting[1].replace("_", " "))
        )
    return changes


def _measurement_changes(at: _Positions) -> list[InputChange]:
    """The measured values of the candidates and metrics both snapshots have."""
    changes = []
    b_candidate = _index(at.before["candidates"])
    for c_after, candidate in enumerate(at.after["candidates"]):
        if candidate not in b_candidate:
            continue
        old_row, new_row = at.before["measurements"][b_candidate[candidate]], at.after["measurements"][c_after]
        for metric in at.common_metrics:
            old, new = old_row[at.b_metric[metric]], new_row[at.a_metric[metric]]
            if _differs(old, new):
                changes.append(InputChange(None, f"{candidate}'s {metric}", _shown(old), _shown(new)))
    return changes


def _priority_changes(
    at: _Positions, expert: str, i_before: int, i_after: int, same: Collection[str] = ()
) -> list[InputChange]:
    """One expert's attribute weights and metric shares within their attributes."""
    before, after = at.before, at.after
    changes = []
    for attribute in at.common_attributes:
        old = before["attribute_weights"][i_before][at.b_attribute[attribute]]
        new = after["attribute_weights"][i_after][at.a_attribute[attribute]]
        if _differs(old, new):
            changes.append(InputChange(expert, f"weight of {attribute}", _shown(old), _shown(new)))
    attribute_of = {m["name"]: m["attribute"] for m in after["metrics"]}
    shares_same = "metric_weights" in same and before["attribute_weights"] == after["attribute_weights"]
    for metric in () if shares_same else at.common_metrics:
        attribute = attribute_of[metric]
        if attribute not in at.b_attribute:
            continue
        old = _share(before, i_before, at.b_metric[metric], at.b_attribute[attribute])
        new = _share(after, i_after, at.a_metric[metric], at.a_attribute[attribute])
        if _differs(old, new):
            changes.append(InputChange(expert, f"share of {metric} within {attribute}", _shown(old), _shown(new)))
    return changes


def _range_and_peer_changes(
    at: _Positions, expert: str, i_before: int, i_after: int, same: Collection[str] = ()
) -> list[InputChange]:
    """One expert's acceptable ranges and peer weights."""
    before, after = at.before, at.after
    changes = []
    for metric in () if {"lower", "upper"} <= set(same) else at.common_metrics:
        jb, ja = at.b_metric[metric], at.a_metric[metric]
        old = (before["lower"][i_before][jb], before["upper"][i_before][jb])
        new = (after["lower"][i_after][ja], after["upper"][i_after][ja])
        if _differs(old[0], new[0]) or _differs(old[1], new[1]):
            changes.append(InputChange(expert, f"acceptable range of {metric}", _range(*old), _range(*new)))
    for k_after, ratee in enumerate(() if "peer_weights" in same else after["experts"]):
        if ratee not in at.b_expert:
            continue
        old = before["peer_weights"][i_before][at.b_expert[ratee]]
        new = after["peer_weights"][i_after][k_after]
        if _differs(old, new):
            changes.append(InputChange(expert, f"weight on {ratee}", _shown(old), _shown(new)))
    return changes


# The inputs of a snapshot ``snapshot_changes`` can be told are the same.
SAME_INPUTS = frozenset({"measurements", "metric_weights", "lower", "upper", "peer_weights"})


def snapshot_changes(before: Mapping, after: Mapping, same: Collection[str] = ()) -> list[InputChange]:
    """Every input that differs between two snapshots of one study, the
    design's first (experts, selection, candidates, measurements, tolerance),
    then each expert's (attribute weights, the share of each metric within
    its attribute, acceptable ranges, peer weights), in the later
    snapshot's order of experts and metrics.

    ``same`` names inputs (of ``SAME_INPUTS``) known equal in both, which
    may then be absent from them: the caller knows (the database compared
    them) and the snapshots' experts, attributes, metrics and candidates
    are equal too, so nothing in those inputs changed."""
    unknown = set(same) - SAME_INPUTS
    if unknown:
        raise ValueError(f"not inputs that can be the same: {sorted(unknown)}")
    if same and any(before[key] != after[key] for key in ("experts", "attributes", "metrics", "candidates")):
        raise ValueError("inputs are the same only between snapshots of the same experts, metrics and candidates")
    at = _Positions.of(before, after)
    changes = _design_changes(before, after) + ([] if "measurements" in same else _measurement_changes(at))
    for i_after, expert in enumerate(after["experts"]):
        if expert not in at.b_expert:
            continue
        i_before = at.b_expert[expert]
        changes += _priority_changes(at, expert, i_before, i_after, same)
        changes += _range_and_peer_changes(at, expert, i_before, i_after, same)
    return changes


def _shown(value: float | None) -> str:
    return "missing" if value is None else number(value)


def _share(snapshot: Mapping, expert: int, metric: int, attribute: int) -> float | None:
    """A metric's share of its attribute's weight in one expert's priorities
    (1 when the attribute has one metric): the local prioritisation, which
    the snapshot stores multiplied into the metric weight."""
    metric_weight = snapshot["metric_weights"][expert][metric]
    attribute_weight = snapshot["attribute_weights"][expert][attribute]
    if metric_weight is None or not attribute_weight:
        return None
    return metric_weight / attribute_weight


def compare_runs(
    before: Mapping, after: Mapping, before_snapshot: Mapping, after_snapshot: Mapping, same: Collection[str] = ()
) -> Comparison:
    """``compare_results`` with ``snapshot_changes`` filled in (``same``: as there)."""
    comparison = compare_results(before, after)
    comparison.changes = snapshot_changes(before_snapshot, after_snapshot, same)
    return comparison
