"""Elicited metrics in a study: an expert's questions made from the stored
predictions, the search replayed from the expert's stored answers, each
question in words and small tables, and the result as weights, a sentence
and a chart (METHOD.md 7.3, docs/method.md 7.4).

The search itself is ``evaluation.elicitation`` (pure NumPy). This module
adds what the study needs around it and is shared by the services (which
write answers), the selectors (which read an expert's state) and the pages
and the API (through those two): the reference candidate's class
probabilities, read once per process and kept (``reference_eta``), and the
plain-data views of a question and of a result.

An expert's answers are stored one character each (``ANSWER_CODES``):
``1`` the first outcome, ``2`` the second, ``0`` no preference. The
source's oracle answers "is the first better?", so *no preference* counts as
*not the first* (``False``), as the source's strict comparison does for two
equally good outcomes; it is kept as ``0`` so that the expert's own words
are shown back and counted.
"""

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import numpy as np

from .elicitation import DiagonalElicitation, OffDiagonalElicitation
from .models import CandidatePredictionArrays, ElicitedMetric
from .predictions import CandidatePredictions

__all__ = [
    "ANSWER_CODES",
    "Outcome",
    "Pair",
    "Question",
    "Result",
    "CHECKS",
    "check_positions",
    "cell_weights",
    "check_question",
    "class_prior",
    "consistent",
    "answers_problem",
    "elicitation_replayed",
    "final_weights",
    "question_for",
    "reference_eta",
    "diagonal_pairs",
    "result_for",
    "reference_ranges",
    "result_of",
    "typed_per_instance",
    "typed_ratio_problem",
]

#: What each stored character means, and the answer it gives the search.
ANSWER_CODES = {"1": True, "2": False, "0": False}
#: The answers as the API and the forms name them, and their codes.
ANSWER_CHOICES = {"first": "1", "second": "2", "none": "0"}

Elicitation = DiagonalElicitation | OffDiagonalElicitation

# The reference candidates' class probabilities, per (set, candidate): a
# set's arrays never change (a new upload is a new set), so what was read
# stays true; the few newest are kept, so each answer replays the search
# without unpacking the archive again.
_KEPT = 4
_etas: "OrderedDict[tuple[int, int], np.ndarray]" = OrderedDict()
_etas_lock = threading.Lock()


def reference_eta(elicited: ElicitedMetric) -> np.ndarray:
    """The reference candidate's class probabilities in the elicited
    metric's set, ``(n, k)``, columns in the order of the set's labels
    (read-only): its ``proba:<label>`` columns, or, in a binary set, its
    ``score`` when every score lies in [0, 1] (read as the positive label's
    probability, the other label's being one minus it). ``ValueError`` when
    the candidate has neither there."""
    key = (elicited.prediction_set_id, elicited.reference_candidate_id)
    with _etas_lock:
        if key in _etas:
            _etas.move_to_end(key)
            return _etas[key]
    stored = CandidatePredictionArrays.objects.filter(prediction_set_id=key[0], candidate_id=key[1]).select_related(
        "candidate", "prediction_set"
    )
    row = stored.first()
    if row is None:
        raise ValueError("the reference candidate has no predictions in the chosen set")
    eta = _class_probabilities(row.predictions(), list(row.prediction_set.labels), row.prediction_set.positive)
    eta.setflags(write=False)
    with _etas_lock:
        _etas[key] = eta
        while len(_etas) > _KEPT:
            _etas.popitem(last=False)
    return eta


def _class_probabilities(predictions: CandidatePredictions, labels: list[str], positive: str | None) -> np.ndarray:
    """The ``(n, len(labels))`` class probabilities of ``predictions`` (see ``reference_eta``)."""
    if predictions.proba is not None:
        return np.ascontiguousarray(predictions.proba, dtype=np.float64)
    score = predictions.score
    if score is not None and positive is not None and len(labels) == 2:
        if score.size and not (score.min() >= 0.0 and score.max() <= 1.0):
            raise ValueError(
                "the reference candidate's scores are not all between 0 and 1, so they are not probabilities: "
                "give its class probabilities (proba:<label> columns)"
            )
        eta = np.empty((len(score), 2), dtype=np.float64)
        column = labels.index(positive)
        eta[:, column] = score
        eta[:, 1 - column] = 1.0 - score
        return eta
    raise ValueError(
        "the reference candidate's predictions have no class probabilities "
        "(proba:<label> columns, or a binary score between 0 and 1)"
    )


def new_elicitation(kind: str, eta: np.ndarray, epsilon: float) -> Elicitation:
    """A fresh search of ``kind`` (``ValueError`` when the probabilities cannot
    make its questions, with the library's reason)."""
    if kind == ElicitedMetric.Kind.DIAGONAL:
        return DiagonalElicitation(eta, epsilon=epsilon)
    return OffDiagonalElicitation(eta, epsilon=epsilon)


# The searches prepared (probabilities checked, ranges found: 90 ms at
# 100,000 x 10), per (set, candidate, kind, epsilon), with the class prior.
_prepared: "OrderedDict[tuple[int, int, str, float], tuple[Elicitation, np.ndarray]]" = OrderedDict()


def _prepared_search(elicited: ElicitedMetric) -> tuple[Elicitation, np.ndarray]:
    key = (elicited.prediction_set_id, elicited.reference_candidate_id, str(elicited.kind), float(elicited.epsilon))
    with _etas_lock:
        if key in _prepared:
            _prepared.move_to_end(key)
            return _prepared[key]
    eta = reference_eta(elicited)
    found = (new_elicitation(elicited.kind, eta, elicited.epsilon), eta.mean(axis=0))
    with _etas_lock:
        _prepared[key] = found
        while len(_prepared) > _KEPT:
            _prepared.popitem(last=False)
    return found


def elicitation_replayed(elicited: ElicitedMetric, answers: str) -> Elicitation:
    """The search after ``answers`` (stored codes), replayed from the start:
    no confusion is computed until the next question is asked. The
    consistency check's answers, stored after the search's, are not replayed."""
    elicitation = _prepared_search(elicited)[0].unanswered()
    elicitation.replay(ANSWER_CODES[code] for code in answers[: elicitation.total_queries])
    return elicitation


# --- the consistency check (source 003 section 5) -------------------------------------------------

#: How many of the search's questions are asked again once it is finished.
CHECKS = 2


def check_positions(total: int) -> list[int]:
    """The 0-based positions of the search's questions asked again: the first
    and the middle one (``total // 2``), always the same for a metric."""
    return [0, total // 2][:CHECKS]


def consistent(answers: str, total: int) -> bool | None:
    """Whether the check's answers (stored after the ``total`` answers of the
    search) agree with the originals: None until both are given. Two answers
    agree when they move the search the same way (``ANSWER_CODES``), so
    "the other one" and "no preference" agree, as the search cannot tell them apart."""
    checked = answers[total:]
    if len(checked) < CHECKS:
        return None
    return all(
        ANSWER_CODES[checked[j]] == ANSWER_CODES[answers[position]] for j, position in enumerate(check_positions(total))
    )


def final_weights(
    elicitation: Elicitation, answers: str, typed: dict[str, float] | None = None, prior: np.ndarray | None = None
) -> list[float] | None:
    """The weights stored for ``answers`` (``elicitation`` replayed from
    them): the search's once it and the check are answered (the search's
    total and ``CHECKS`` answers), else None. ``typed`` (a diagonal
    metric's) replaces the ratio of class ``int(key)`` to the reference
    class by the expert's, typed per 100 cases of each class, so read at the
    class ``prior`` (``typed_per_instance``)."""
    if len(answers) < elicitation.total_queries + CHECKS:
        return None
    if not typed or not isinstance(elicitation, DiagonalElicitation):
        return [float(w) for w in elicitation.weights]
    assert prior is not None
    ratios = elicitation.ratios
    for key, ratio in typed.items():
        ratios[int(key)] = typed_per_instance(ratio, prior, int(key))
    return [float(w) for w in ratios / ratios.sum()]


def answers_problem(answers: object, total: int) -> str | None:
    """Why ``answers`` cannot be an expert's stored answers to a search of
    ``total`` questions (a code other than ``ANSWER_CODES``', more answers
    than the search's and the check's), or None."""
    if not isinstance(answers, str):
        return f"must be the answers' codes as text (1 the first, 2 the second, 0 no preference), got {answers!r}"
    for position, code in enumerate(answers):
        if code not in ANSWER_CODES:
            return (
                f"answer {position + 1} is {code!r}: each answer is 1 (the first outcome), 2 (the second) or 0 "
                "(no preference)"
            )
    if len(answers) > total + CHECKS:
        return f"{len(answers)} answers, more than the search's {total} questions and the check's {CHECKS}"
    return None


def check_question(elicited: ElicitedMetric, answers: str, labels: list[str]) -> "Question | None":
    """The next question of the consistency check, once the search is
    finished (None before, and once both are answered): the search's
    question at its check position, asked again, replayed from the answers
    before it. Its ``number`` is its place in the stored answers (the
    search's total plus 1 or 2), its ``check`` 1 or 2."""
    total = _prepared_search(elicited)[0].total_queries
    j = len(answers) - total
    if j < 0 or j >= CHECKS:
        return None
    position = check_positions(total)[j]
    question = question_for(elicited, elicitation_replayed(elicited, answers[:position]), labels)
    assert question is not None  # position < total: the search asked it
    return replace(question, number=total + j + 1, check=j + 1)


def class_prior(elicited: ElicitedMetric) -> np.ndarray:
    """Each class's share of the instances, as the questions' tables use it: the mean of ``eta``."""
    return _prepared_search(elicited)[1]


def forget_prepared() -> None:
    """Drop what this process keeps (a benchmark's cold start)."""
    with _etas_lock:
        _etas.clear()
        _prepared.clear()


# --- a question in words and tables ----------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One of the two outcomes: per row, out of 100 instances of a true class,
    how many end in the column's class (``cells``, formatted); the rows and
    columns shown are the question's."""

    rows: list[list[str]]  # the cells of each row
    labels: list[str]  # each row's true class

    @property
    def labelled_rows(self) -> list[tuple[str, list[str]]]:
        return list(zip(self.labels, self.rows, strict=True))


@dataclass(frozen=True)
class Question:
    number: int  # 1-based: question i ...
    total: int  # ... of at most N
    kind: str
    classes: list[str]  # the labels the tables' rows name
    columns: list[str]  # the tables' column headings
    first: Outcome
    second: Outcome
    sentence_first: str
    sentence_second: str
    # The raw confusions compared (fractions of all instances), for the API.
    first_values: list[float]
    second_values: list[float]
    # 1 or 2 when this is the consistency check's question (asked again), else None.
    check: int | None = None


def _decimals(pairs: list[tuple[float, float]]) -> int:
    """The fewest decimals (1 to 4) at which some shown pair of rates differs."""
    for decimals in range(1, 5):
        if any(round(a, decimals) != round(b, decimals) for a, b in pairs):
            return decimals
    return 4


def _per_hundred(value: float, share: float) -> float:
    return 100.0 * value / share if share > 0 else 0.0


def _found_sentence(row: list[float], shown: list[int], labels: list[str], decimals: int) -> str:
    """A diagonal outcome in words: of 100 with each shown class, how many
    are found."""
    parts = [f"of 100 with {labels[c]}, {row[j]:.{decimals}f} found" for j, c in enumerate(shown)]
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def _diagonal_question(
    elicited: ElicitedMetric,
    labels: list[str],
    shown: list[int],
    prior: np.ndarray,
    query: tuple[np.ndarray, np.ndarray],
    number: int,
    total: int,
) -> Question:
    """A diagonal question: per shown class (the restricted classifier
    finds only class 0 and the searched class), how many of 100 each
    outcome finds."""
    first, second = query
    rates = [[_per_hundred(d[c], prior[c]) for c in shown] for d in (first, second)]
    decimals = _decimals(list(zip(rates[0], rates[1], strict=True)))
    outcomes = [Outcome([[f"{value:.{decimals}f}"] for value in row], [labels[c] for c in shown]) for row in rates]
    return Question(
        number,
        total,
        elicited.kind,
        [labels[c] for c in shown],
        ["found, of 100"],
        outcomes[0],
        outcomes[1],
        _found_sentence(rates[0], shown, labels, decimals),
        _found_sentence(rates[1], shown, labels, decimals),
        [float(v) for v in first],
        [float(v) for v in second],
    )


def _costly_sentence(rows: list[list[float]], labels: list[str], decimals: int) -> str:
    """An off-diagonal outcome in words: its most frequent confusion."""
    k = len(labels)
    i, j = max(((i, j) for i in range(k) for j in range(k) if i != j), key=lambda p: rows[p[0]][p[1]])
    return f"Most often wrong: of 100 with {labels[i]}, {rows[i][j]:.{decimals}f} taken for {labels[j]}."


def _offdiagonal_question(
    elicited: ElicitedMetric,
    elicitation: OffDiagonalElicitation,
    labels: list[str],
    prior: np.ndarray,
    query: tuple[np.ndarray, np.ndarray],
    number: int,
    total: int,
) -> Question:
    """An off-diagonal question: per true class, how many of 100 each
    outcome takes for each class."""
    first, second = query
    k = len(labels)
    matrices = [elicitation.confusion_matrix(c) for c in (first, second)]
    rates_m = [[[_per_hundred(m[i, j], prior[i]) for j in range(k)] for i in range(k)] for m in matrices]
    pairs = [(rates_m[0][i][j], rates_m[1][i][j]) for i in range(k) for j in range(k) if i != j]
    decimals = _decimals(pairs)
    outcomes = [Outcome([[f"{value:.{decimals}f}" for value in row] for row in rows], list(labels)) for rows in rates_m]
    return Question(
        number,
        total,
        elicited.kind,
        list(labels),
        [f"taken for {label}" for label in labels],
        outcomes[0],
        outcomes[1],
        _costly_sentence(rates_m[0], labels, decimals),
        _costly_sentence(rates_m[1], labels, decimals),
        [float(v) for v in first],
        [float(v) for v in second],
    )


def question_for(elicited: ElicitedMetric, elicitation: Elicitation, labels: list[str]) -> Question | None:
    """The next question, shown as rates out of 100 instances of each true
    class, or None when every question is answered."""
    query = elicitation.next_query()
    if query is None:
        return None
    prior = class_prior(elicited)
    number, total = elicitation.n_queries + 1, elicitation.total_queries
    if isinstance(elicitation, DiagonalElicitation):
        shown = [0, elicitation.search + 1]
        return _diagonal_question(elicited, labels, shown, prior, query, number, total)
    return _offdiagonal_question(elicited, elicitation, labels, prior, query, number, total)


# --- the result --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """One compared pair of a diagonal metric: the reference class (the
    first label, class 0 of the search) against ``label``. ``ratio`` is per
    100 cases of each class, as the questions show them: finding one more
    of 100 with ``label`` is worth ``ratio`` times finding one more of 100
    with the reference class (``a_i zeta_i / (a_0 zeta_0)``); ``per_instance``
    is the same at the study's prevalence, one instance against one
    (``a_i / a_0``). ``bound`` is ``at least`` or ``at most`` when the search
    ended at the edge of what the reference candidate's probabilities can
    show (``bound_ratio``, per class, is then all the answers tell);
    ``typed`` when the expert typed the ratio, which replaces the search's.
    ``shown`` is the range of per-class ratios those probabilities can show
    (None when the search was not replayed)."""

    reference: str
    label: str
    index: int  # the class's position in the labels (1..k-1)
    ratio: float
    per_instance: float
    bound: str | None
    bound_ratio: float | None
    typed: bool
    shown: tuple[float, float] | None

    @property
    def at_edge(self) -> bool:
        """The search stopped at the edge and no typed ratio replaces it."""
        return self.bound is not None and not self.typed

    @property
    def bound_words(self) -> str:
        """What the answers showed at the edge, e.g. ``at least 1 : 3.3`` ("" inside)."""
        return _bound_odds(self.bound, self.bound_ratio) if self.bound and self.bound_ratio is not None else ""

    @property
    def typed_value(self) -> str:
        """The typed ratio as the form shows it again ("" when none)."""
        return f"{self.ratio:g}" if self.typed else ""


@dataclass(frozen=True)
class Result:
    """The recovered metric: one weight per class (diagonal) or per
    confusion ``true → predicted`` (off-diagonal, as costs: ``-a``).
    ``sentence`` says it per 100 cases of each class (as the questions are
    asked), ``per_instance`` at the study's prevalence; a diagonal metric's
    ``pairs`` compare each class with the reference class."""

    labels: list[str]  # what each weight is of
    values: list[float]  # the weights (diagonal) or the costs (off-diagonal), >= 0
    sentence: str
    per_instance: str = ""
    pairs: list[Pair] = field(default_factory=list)

    @property
    def at_edge(self) -> bool:
        return any(pair.at_edge for pair in self.pairs)


def _times(high: float, low: float) -> str:
    return "infinitely many" if low <= 0 else f"{high / low:.1f}"


def _number(value: float) -> str:
    """A ratio as shown: one decimal from 1 on, two significant digits below."""
    if not math.isfinite(value):
        return "infinity"
    return f"{value:.1f}" if value >= 1 else f"{value:.2g}"


def _odds(ratio: float) -> str:
    """``1 : r`` (reference : other) from 1 on; below, the other way round, ``1/r : 1``."""
    return f"1 : {_number(ratio)}" if ratio >= 1 or ratio <= 0 else f"{_number(1 / ratio)} : 1"


def _bound_odds(bound: str, ratio: float) -> str:
    """``at least 1 : r`` (or at most); below 1 the other way round, which turns the bound."""
    if ratio >= 1 or ratio <= 0:
        return f"{bound} 1 : {_number(ratio)}"
    turned = "at most" if bound == "at least" else "at least"
    return f"{turned} {_number(1 / ratio)} : 1"


def _per_class(a: np.ndarray, prior: np.ndarray, i: int) -> float:
    """Per 100 cases of each class: ``a_i zeta_i / (a_0 zeta_0)``."""
    reference = a[0] * prior[0]
    return float(a[i] * prior[i] / reference) if reference > 0 else math.inf


def typed_per_instance(ratio: float, prior: np.ndarray, i: int) -> float:
    """A ratio typed per 100 cases of each class as ``a_i / a_0``."""
    return float(ratio * prior[0] / prior[i])


def diagonal_pairs(
    weights: list[float],
    labels: list[str],
    prior: np.ndarray,
    bounds: "tuple[tuple[str, float] | None, ...] | None" = None,
    typed: dict[str, float] | None = None,
    ranges: "tuple[tuple[float, float], ...] | None" = None,
) -> list[Pair]:
    """The pairs (reference class, class i) of a diagonal metric's stored
    ``weights`` (``Pair``): ``bounds`` and ``ranges`` are the search's
    (``DiagonalElicitation.bounds``, ``.ratio_ranges``, per instance; None
    when not replayed), ``typed`` the expert's typed ratios by class index."""
    a = np.asarray(weights, dtype=np.float64)
    typed = typed or {}
    pairs = []
    for i in range(1, len(labels)):
        bound = bounds[i - 1] if bounds is not None else None
        scale = prior[i] / prior[0] if prior[0] > 0 else math.inf
        pairs.append(
            Pair(
                reference=labels[0],
                label=labels[i],
                index=i,
                ratio=_per_class(a, prior, i),
                per_instance=float(a[i] / a[0]) if a[0] > 0 else math.inf,
                bound=bound[0] if bound is not None else None,
                bound_ratio=float(bound[1] * scale) if bound is not None else None,
                typed=str(i) in typed,
                shown=(float(ranges[i - 1][0] * scale), float(ranges[i - 1][1] * scale)) if ranges else None,
            )
        )
    return pairs


def _pair_clause(pair: Pair, value: float, bound: float | None) -> str:
    """``1 : r`` (reference : other), or the bound at the edge."""
    if pair.at_edge and pair.bound is not None and bound is not None:
        return f"{_bound_odds(pair.bound, bound)} (the edge of what the reference candidate's probabilities can show)"
    return _odds(value) + (" (as you typed it)" if pair.typed else "")


def _diagonal_sentences(pairs: list[Pair], prior: np.ndarray, labels: list[str]) -> tuple[str, str]:
    """The per-class sentence and the per-instance one of a diagonal metric."""
    per_class = "; ".join(
        f"finding {pair.reference} against finding {pair.label}: {_pair_clause(pair, pair.ratio, pair.bound_ratio)}"
        for pair in pairs
    )
    prevalence = ", ".join(f"{label} {100 * share:.0f} %" for label, share in zip(labels, prior, strict=True))
    per_instance = "; ".join(
        f"one {pair.reference} found against one {pair.label}: "
        + _pair_clause(
            pair,
            pair.per_instance,
            typed_per_instance(pair.bound_ratio, prior, pair.index) if pair.bound_ratio is not None else None,
        )
        for pair in pairs
    )
    return (
        f"Per 100 cases of each class, {per_class}.",
        f"Per instance, at the study's prevalence ({prevalence}): {per_instance}.",
    )


def result_for(
    kind: str,
    weights: list[float],
    labels: list[str],
    prior: np.ndarray | None = None,
    pairs: list[Pair] | None = None,
) -> Result:
    """The stored weights in words: what each weighs and, diagonal, each
    class against the reference class per 100 cases of each class and per
    instance at the study's ``prior`` (``diagonal_pairs``; without ``prior``
    the classes are taken as equally common); off-diagonal, the heaviest
    cost against the lightest."""
    k = len(labels)
    if kind == ElicitedMetric.Kind.DIAGONAL:
        names = [f"finding {label}" for label in labels]
        values = [float(w) for w in weights]
        prior = np.full(k, 1.0 / k) if prior is None else np.asarray(prior, dtype=np.float64)
        pairs = diagonal_pairs(weights, labels, prior) if pairs is None else pairs
        sentence, per_instance = _diagonal_sentences(pairs, prior, labels)
        return Result(names, values, sentence, per_instance, pairs)
    pairs_ij = [(i, j) for i in range(k) for j in range(k) if i != j]
    names = [f"{labels[i]} taken for {labels[j]}" for i, j in pairs_ij]
    values = [max(-float(w), 0.0) for w in weights]
    top, bottom = int(np.argmax(values)), int(np.argmin(values))
    sentence = (
        f"Taking {labels[pairs_ij[top][0]]} for {labels[pairs_ij[top][1]]} costs you "
        f"{_times(values[top], values[bottom])} times as much as taking {labels[pairs_ij[bottom][0]]} for "
        f"{labels[pairs_ij[bottom][1]]}."
    )
    return Result(names, values, sentence)


def result_of(
    elicited: ElicitedMetric,
    weights: list[float],
    answers: str,
    typed: dict[str, float],
    elicitation: Elicitation | None = None,
) -> Result:
    """The result of an expert's stored ``weights`` with what their answers
    show (``elicitation``, replayed from them when not given: where a search
    stopped at the edge) and their typed ratios."""
    labels = [str(label) for label in elicited.prediction_set.labels]
    if elicited.kind != ElicitedMetric.Kind.DIAGONAL:
        return result_for(elicited.kind, weights, labels)
    prior = class_prior(elicited)
    elicitation = elicitation_replayed(elicited, answers) if elicitation is None else elicitation
    assert isinstance(elicitation, DiagonalElicitation)
    bounds = elicitation.bounds if elicitation.finished else None
    pairs = diagonal_pairs(weights, labels, prior, bounds, typed, elicitation.ratio_ranges)
    return result_for(elicited.kind, weights, labels, prior, pairs)


#: The most candidates whose ranges the design page shows (each read and checked).
RANGES_CANDIDATES_MAX = 10


def reference_ranges(elicited: ElicitedMetric) -> list[tuple[str, list[str] | None]]:
    """A diagonal design's "wider reference": for each candidate of its set
    (the first ``RANGES_CANDIDATES_MAX`` by name), the range of ratios per
    100 cases of each class its probabilities can show for each pair
    (reference class, class i), in words, or None when its predictions have
    no class probabilities or cannot weigh a pair. A search stops at the
    edge of its reference's range, so a candidate with a wider one can show
    stronger trade-offs."""
    labels = [str(label) for label in elicited.prediction_set.labels]
    rows = (
        CandidatePredictionArrays.objects.filter(prediction_set_id=elicited.prediction_set_id)
        .select_related("candidate")
        .order_by("candidate__name")[:RANGES_CANDIDATES_MAX]
    )
    found: list[tuple[str, list[str] | None]] = []
    for row in rows:
        try:
            eta = _class_probabilities(row.predictions(), labels, elicited.prediction_set.positive)
            search = DiagonalElicitation(eta)
        except ValueError:
            found.append((row.candidate.name, None))
            continue
        prior = eta.mean(axis=0)
        words = [
            f"{labels[i]}: {_odds(low * prior[i] / prior[0])} to {_odds(high * prior[i] / prior[0])}"
            for i, (low, high) in enumerate(search.ratio_ranges, start=1)
        ]
        found.append((row.candidate.name, words))
    return found


def typed_ratio_problem(pair: Pair, ratio: float) -> str | None:
    """Why ``ratio`` (per 100 cases of each class, finite) cannot replace
    ``pair``'s, or None: it must be positive and agree with what the answers
    showed (at least, or at most, the bound as shown)."""
    if ratio <= 0:
        return f"must be a positive number (1 : {ratio:g} weighs {pair.label} at nothing or less), got {ratio:g}"
    if pair.bound is None or pair.bound_ratio is None:
        return None
    shown = float(_number(pair.bound_ratio))
    if (pair.bound == "at least" and ratio < shown) or (pair.bound == "at most" and ratio > shown):
        return (
            f"must be {pair.bound} {_number(pair.bound_ratio)} (1 : ratio), as your answers showed "
            f"({pair.bound_words}); got {ratio:g}"
        )
    return None


def cell_weights(kind: str, weights: list[float], classes: int) -> np.ndarray:
    """An expert's elicited metric as a weight per cell of the confusion
    matrix, ``(classes * classes,)`` row-major (true class down, predicted
    across): ``a`` on the diagonal (weighted accuracy) or the costs ``-a``
    off it (``a <= 0``: expected cost), 0 elsewhere, so that the metric is
    ``cell_weights @ C.ravel()`` (``metric_value``)."""
    a = np.asarray(weights, dtype=np.float64)
    grid = np.zeros((classes, classes))
    if kind == ElicitedMetric.Kind.DIAGONAL:
        np.fill_diagonal(grid, a)
    else:
        grid[~np.eye(classes, dtype=bool)] = -a
    return grid.ravel()


def metric_value(kind: str, weights: list[float], confusion: np.ndarray) -> float:
    """An expert's elicited metric of a confusion matrix ``C_ij = P(Y = i, h = j)``
    (fractions of all instances): ``<a, diag C>`` (weighted accuracy, higher
    is better) or ``<-a, offdiag C>`` (``a <= 0``: the expected cost, lower
    is better),
    from the weights of its cells (``cell_weights``): ``metric_values`` of one."""
    return float(metric_values(kind, [weights], np.asarray(confusion, dtype=np.float64)[None])[0, 0])


def metric_values(kind: str, weights: list[list[float]], confusions: np.ndarray) -> np.ndarray:
    """``metric_value`` of each of ``confusions`` ``(n, k, k)`` for each
    expert's ``weights``: ``(n, experts)``, in one product (the design page
    and a run's snapshot: 1,000 candidates x 100 experts)."""
    n, classes = len(confusions), confusions.shape[-1]
    cells = np.stack([cell_weights(kind, expert, classes) for expert in weights])
    values: np.ndarray = np.asarray(confusions, dtype=np.float64).reshape(n, classes * classes) @ cells.T
    return values
