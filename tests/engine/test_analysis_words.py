"""Robustness analyses store numbers and names; their sentences are written
when shown (``engine.analysis_words``, issue 30 item 2): nothing in English
in ``Analysis.result``, the page and the API showing the same words, and an
analysis stored with its sentences (before) shown as stored."""

import json

import pytest

from engine import analyses
from engine.analysis_words import leave_one_out_sentence, monte_carlo_sentence, sampled_words, with_words
from engine.models import Analysis
from engine.selectors.analyses import analysis_sentences


def loo(rows, winner=("A",)):
    return {"winner": list(winner), "rows": rows, "changed": [r["expert"] for r in rows if r["changes_winner"]]}


def test_leave_one_out_words():
    unchanged = loo([{"expert": "ann", "winner": ["A"], "changes_winner": False}])
    assert leave_one_out_sentence(unchanged) == "No single expert's absence changes the winner (A)."
    changed = loo(
        [
            {"expert": "ann", "winner": ["B"], "changes_winner": True},
            {"expert": "bob", "winner": ["A"], "changes_winner": False},
            {"expert": "cy", "winner": ["B", "C"], "changes_winner": True},
        ],
        winner=("A", "D"),
    )
    assert leave_one_out_sentence(changed) == "Without ann, B wins. Without cy, B and C win."


def test_monte_carlo_words():
    rows = [
        {"name": "A", "p_best": 0.614, "se_best": 0.011},
        {"name": "B", "p_best": 0.386, "se_best": 0.011},
        {"name": "C", "p_best": 0.0, "se_best": 0.0},
    ]
    assert monte_carlo_sentence({"candidates": rows}) == "A is best in 61 % ± 1 % of samples; B in 39 %."
    assert monte_carlo_sentence({"candidates": rows[:1]}) == "A is best in 61 % ± 1 % of samples."


@pytest.mark.parametrize(
    ("sampled", "words"),
    [
        (
            {"judgments": {"recorded": True, "ahp": 1, "others": 2}, "peer_weights": True, "ranges_percent": 12.5,
             "measurements": None},
            "the AHP judgments of 1 expert (each ± 1 step of the scale) and the weights of 2 other experts (each "
            "from a Dirichlet), the peer weights, the acceptable ranges (± 12.5 % of their width)",
        ),
        (
            {"judgments": None, "peer_weights": False, "ranges_percent": 0,
             "measurements": {"bootstrap": ["Accuracy"], "elicited": ["AUC"], "standard_errors": ["Cost", "Time"]}},
            "the measurements (bootstrap of Accuracy, AUC (each expert's own value); Cost, Time from their "
            "standard errors)",
        ),
        (
            {"judgments": None, "peer_weights": False, "ranges_percent": 0,
             "measurements": {"bootstrap": [], "elicited": [], "standard_errors": []}},
            "the measurements (none could be)",
        ),
    ],
)  # fmt: skip
def test_what_a_monte_carlo_moved_in_words(sampled, words):
    assert sampled_words(sampled) == words


def test_without_ahp_experts_the_dirichlet_experts_are_not_called_other():
    sampled = {"judgments": {"recorded": True, "ahp": 0, "others": 4}, "peer_weights": False, "ranges_percent": 0,
               "measurements": None}  # fmt: skip
    assert sampled_words(sampled) == "the weights of 4 experts (each from a Dirichlet)"


def test_a_summary_stored_with_its_sentences_is_shown_as_stored():
    legacy = {"winner": ["A"], "rows": [], "changed": [], "sentence": "As stored."}
    assert with_words("leave_one_out", legacy)["sentence"] == "As stored."
    legacy_mc = {"candidates": [], "sampled": "the peer weights", "sentence": "Stored."}
    assert with_words("monte_carlo", legacy_mc) == legacy_mc


def _english(value):
    """The phrases of the sentences the kernels used to store, wherever they appear in a result."""
    text = json.dumps(value)
    return [
        phrase for phrase in ("wins", "win.", "Without ", "absence", "is best in", "from a Dirichlet") if phrase in text
    ]


@pytest.mark.parametrize("kind", [Analysis.Kind.LEAVE_ONE_OUT, Analysis.Kind.MONTE_CARLO])
def test_nothing_in_english_is_stored_and_the_api_writes_the_words(run, client, kind):
    spec = {} if kind == Analysis.Kind.LEAVE_ONE_OUT else {"judgments": True, "peer_weights": True}
    analysis = analyses.analysis_launch(
        run=run, kind=kind, launched_by=run.study.designer, samples=None if spec == {} else 200, seed=3, spec=spec
    )
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    assert analysis.status == Analysis.Status.SUCCEEDED, analysis.error
    stored = analysis.result["summary"]
    assert "sentence" not in stored and "sampled" not in stored
    assert _english(analysis.result) == []
    client.force_login(run.study.designer)
    body = client.get(f"/api/v1/analyses/{analysis.pk}/").json()
    shown = with_words(kind, stored)
    assert body["summary"]["sentence"] == shown["sentence"] and shown["sentence"].endswith(".")
    page = client.get(f"/runs/{run.pk}/robustness/").content.decode()
    assert shown["sentence"].replace("'", "&#x27;") in page
    if kind == Analysis.Kind.MONTE_CARLO:
        assert body["summary"]["sampled"] == shown["sampled"] == sampled_words(stored["sampled_inputs"])
    # The run page's sentence, from the parts the database extracts, is the same words.
    assert analysis_sentences(run=run) == {kind: shown["sentence"]}
    # An analysis stored with its sentence (before the words were written when shown) keeps it.
    analysis.result["summary"]["sentence"] = "As it was stored."
    analysis.save(update_fields=["result"])
    assert analysis_sentences(run=run) == {kind: "As it was stored."}
    assert client.get(f"/api/v1/analyses/{analysis.pk}/").json()["summary"]["sentence"] == "As it was stored."
