"""The elicitation resource of the API (issue 21): the source's Table 2
through the API with a scripted oracle, resuming from another client at the
same question, back and reset, the designer's design and progress, and the
refusals with the error envelope, nothing written."""

import numpy as np
import pytest

from evaluation import elicited as elicited_domain
from evaluation.elicitation import elicit_diagonal
from evaluation.models import ElicitationAnswers, ElicitedMetric, HistoricalElicitationAnswers
from tests.evaluation.elicited_fixtures import add_elicited_metric, linear_oracle, per_class_oracle, upload
from tests.evaluation.test_elicitation import THREE_CLASSES
from tests.evaluation.test_elicited import answer_all
from tests.fixtures import VOTES, complete_assessment
from workspace.services import metric_add, study_close_assessment, study_close_voting, study_open_voting, votes_set

pytestmark = pytest.mark.django_db
API = "/api/v1"


def to_assessment(built):
    """Through the vote as make_study goes (Efficiency selected)."""
    study_open_voting(study=built.study)
    for username, ballot in VOTES.items():
        votes_set(expert=built.experts[username], **ballot)
    study_close_voting(study=built.study)


@pytest.mark.parametrize("published", [(0.21, 0.59, 0.20), (0.23, 0.15, 0.62)])
def test_table_2_through_the_api(make_study, api, cast, published):
    """Source 003, Table 2 (k = 3): 56 questions, weights within 0.02, and
    exactly what elicit_diagonal gives with the same oracle."""
    built = make_study()
    elicited = add_elicited_metric(built, eta=THREE_CLASSES, epsilon=0.01)
    to_assessment(built)
    url = f"{API}/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/"
    oracle = linear_oracle(np.array(published) / sum(published))
    bob = api(cast.bob)
    state = bob.get(url).json()
    asked = 0
    while state["question"] is not None:
        question = state["question"]
        assert (question["number"], question["total"], state["answered"]) == (asked + 1, 56, asked)
        answer = "first" if oracle(question["first_values"], question["second_values"]) else "second"
        response = bob.post(url + "answers/", {"answer": answer, "question": question["number"]}, format="json")
        assert response.status_code == 200, response.json()
        state = response.json()
        asked += 1
    expected, count = elicit_diagonal(oracle, elicited_domain.reference_eta(elicited), epsilon=0.01)
    assert asked - 2 == count == 56  # Table 2's 56, then the consistency check's 2
    assert state["consistent"] is True and [c["question"] for c in state["check"]] == [1, 29]
    assert state["finished"] and state["weights"] == [float(w) for w in expected]
    assert np.abs(np.array(state["weights"]) - published).max() <= 0.02
    assert state["result"]["sentence"].startswith("Per 100 cases of each class, finding tumour A against finding")
    assert state["result"]["per_instance"].startswith("Per instance, at the study's prevalence (")
    assert not state["result"]["at_edge"] and [p["at_edge"] for p in state["result"]["pairs"]] == [False, False]


def test_resume_from_another_client_back_and_reset(make_study, api, cast):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    to_assessment(built)
    url = f"{API}/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/"
    oracle = linear_oracle([0.5, 0.3, 0.2])
    first_device = api(cast.bob)
    for number in range(1, 7):
        question = first_device.get(url).json()["question"]
        answer = "first" if oracle(question["first_values"], question["second_values"]) else "none"
        first_device.post(url + "answers/", {"answer": answer, "question": number}, format="json")
    where = first_device.get(url).json()
    # Another device (a new token, as after logging out): the same question.
    other_device = api(cast.bob)
    assert other_device.get(url).json() == where
    assert where["question"]["number"] == 7 and len(where["answers"]) == 6
    back = other_device.post(url + "back/").json()
    assert back["question"]["number"] == 6 and back["answers"] == where["answers"][:5]
    reset = other_device.post(url + "reset/").json()
    assert (reset["answered"], reset["answers"], reset["question"]["number"]) == (0, "", 1)


def test_the_designer_designs_and_sees_progress(make_study, api, cast):
    built = make_study()
    prediction_set = upload(built.study)
    metric = metric_add(
        study=built.study,
        attribute=built.attributes["Accuracy"],
        name="Cost-weighted accuracy",
        better="higher",
        unit="",
        default_range=None,
    )
    url = f"{API}/studies/{built.study.pk}/metrics/{metric.pk}/elicitation/"
    alice, bob = api(cast.alice), api(cast.bob)
    assert alice.get(url).status_code == 404
    body = {"kind": "diagonal", "prediction_set": prediction_set.pk, "reference_candidate": "J48", "epsilon": 0.05}
    assert bob.put(url, body, format="json").status_code == 403
    refused = alice.put(url, {**body, "reference_candidate": "Nobody"}, format="json")
    assert refused.status_code == 400 and not ElicitedMetric.objects.exists()
    assert refused.json()["fields"] == {"reference_candidate": ["no candidate named 'Nobody' in this study"]}
    saved = alice.put(url, body, format="json")
    assert saved.status_code == 200
    assert saved.json() == {
        "metric": "Cost-weighted accuracy",
        "kind": "diagonal",
        "prediction_set": prediction_set.pk,
        "reference_candidate": "J48",
        "epsilon": 0.05,
        "labels": ["tumour A", "tumour B", "tumour C"],
    }
    assert bob.get(url).json() == saved.json()  # members read it
    to_assessment(built)
    me = f"{API}/studies/{built.study.pk}/my/elicitation/{metric.pk}/"
    bob.post(me + "answers/", {"answer": "first", "question": 1}, format="json")
    # In the assessment the design may still change: the answers given go.
    changed = alice.put(url, {**body, "epsilon": 0.1}, format="json")
    assert changed.status_code == 200 and changed.json()["epsilon"] == 0.1
    assert not ElicitationAnswers.objects.exists()
    assert alice.put(url, body, format="json").json()["epsilon"] == 0.05
    bob.post(me + "answers/", {"answer": "first", "question": 1}, format="json")
    progress = url + "progress/"
    assert bob.get(progress).status_code == 403
    rows = alice.get(progress).json()
    assert rows == [
        {"expert": "bob", "answered": 1, "total": 40, "finished": False, "consistent": None, "weights": None},
        {"expert": "carol", "answered": 0, "total": 40, "finished": False, "consistent": None, "weights": None},
    ]
    # Only experts answer: the designer is not one here.
    assert alice.get(me).status_code == 403
    assert alice.post(me + "answers/", {"answer": "first"}, format="json").status_code == 403


def test_results_are_shown_to_the_designer_after_the_phase_closes(make_study, api, cast):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.2)
    to_assessment(built)
    me = f"{API}/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/"
    # Both experts finish: one who has not is a missing input (the assessment cannot close).
    for expert in (cast.carol, cast.bob):
        client = api(expert)
        while (question := client.get(me).json()["question"]) is not None:
            client.post(me + "answers/", {"answer": "second", "question": question["number"]}, format="json")
    bob = api(cast.bob)
    weights = bob.get(me).json()["weights"]
    progress = f"{API}/studies/{built.study.pk}/metrics/{elicited.metric_id}/elicitation/progress/"
    alice = api(cast.alice)
    assert alice.get(progress).json()[0] == {
        "expert": "bob",
        "answered": 26,
        "total": 24,
        "finished": True,
        "consistent": True,
        "weights": None,
    }
    complete_assessment(built)
    study_close_assessment(study=built.study)
    assert alice.get(progress).json()[0]["weights"] == weights
    # Once closed, the design is frozen: the run's inputs are.
    design = f"{API}/studies/{built.study.pk}/metrics/{elicited.metric_id}/elicitation/"
    frozen = alice.put(
        design,
        {
            "kind": "diagonal",
            "prediction_set": elicited.prediction_set_id,
            "reference_candidate": "J48",
            "epsilon": 0.1,
        },
        format="json",
    )
    assert frozen.status_code == 409 and frozen.json()["code"] == "phase_conflict"
    assert ElicitedMetric.objects.get().epsilon == 0.2
    assert alice.delete(design).status_code == 409 and ElicitedMetric.objects.exists()


def test_refusals_use_the_envelope_and_write_nothing(make_study, api, cast):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    me = f"{API}/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/"
    bob = api(cast.bob)
    early = bob.post(me + "answers/", {"answer": "first"}, format="json")
    assert early.status_code == 409 and early.json()["code"] == "phase_conflict"
    to_assessment(built)
    bad = bob.post(me + "answers/", {"answer": "maybe"}, format="json")
    assert bad.status_code == 400 and list(bad.json()["fields"]) == ["answer"]
    stale = bob.post(me + "answers/", {"answer": "first", "question": 2}, format="json")
    assert stale.status_code == 400
    assert stale.json()["fields"] == {"question": ["question 2 is not the next one: question 1 is"]}
    assert not ElicitationAnswers.objects.exclude(answers="").exists()
    assert api(cast.charlie).get(me).status_code == 404
    missing = f"{API}/studies/{built.study.pk}/my/elicitation/{built.metrics['AUC'].pk}/"
    assert bob.get(missing).status_code == 404


def test_a_search_at_the_edge_says_so_and_takes_a_typed_ratio(make_study, api, cast):
    # Issue 31: J48's probabilities show tumour C against tumour A per class up to 1 : 3.3; an
    # expert who means 1 : 5 (or 1 : 4) is told "at least 1 : 3..." and may type the 5.
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.1)
    to_assessment(built)
    prior = elicited_domain.class_prior(elicited)
    answer_all(elicited, built.bob, per_class_oracle([1.0, 2.0, 5.0], prior))
    me = f"{API}/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/"
    bob = api(cast.bob)
    state = bob.get(me).json()
    b, c = state["result"]["pairs"]
    assert state["result"]["at_edge"] is True
    assert (b["class_label"], b["at_edge"], b["bound"], b["bound_ratio"]) == ("tumour B", False, None, None)
    assert b["ratio"] == pytest.approx(2.0, abs=0.3)
    assert (c["class_label"], c["at_edge"], c["bound"], c["typed"]) == ("tumour C", True, "at least", False)
    # The bound is true, and near the largest ratio the reference can show.
    assert c["shown"][1] == pytest.approx(3.306, abs=0.01) and 2.5 < c["bound_ratio"] < 3.306
    assert (
        f"finding tumour A against finding tumour C: at least 1 : {c['bound_ratio']:.1f} (the edge"
        in (state["result"]["sentence"])
    )
    ratio_url = me + "ratio/"
    row = ElicitationAnswers.objects.get(expert=built.bob)
    history = HistoricalElicitationAnswers.objects.count()
    for body, field, words in [
        ({"class_label": "tumour C", "ratio": "many"}, "ratio", "A valid number is required."),
        ({"class_label": "tumour C", "ratio": 2}, "ratio", "must be at least 2.9 (1 : ratio), as your answers showed"),
        ({"class_label": "tumour C", "ratio": -5}, "ratio", "must be a positive number"),
        ({"class_label": "tumour B", "ratio": 5}, "class_label", "inside what the reference can show"),
        ({"class_label": "tumour Z", "ratio": 5}, "class_label", "must be a class compared with tumour A"),
        ({"ratio": 5}, "class_label", "This field is required."),
    ]:
        refused = bob.post(ratio_url, body, format="json")
        assert refused.status_code == 400, refused.json()
        assert list(refused.json()["fields"]) == [field] and words in refused.json()["fields"][field][0]
    stored = ElicitationAnswers.objects.get(expert=built.bob)
    assert (stored.typed_ratios, stored.weights) == ({}, row.weights)
    assert HistoricalElicitationAnswers.objects.count() == history
    typed = bob.post(ratio_url, {"class_label": "tumour C", "ratio": 5}, format="json")
    assert typed.status_code == 200, typed.json()
    c = typed.json()["result"]["pairs"][1]
    assert (c["typed"], c["at_edge"], c["ratio"], c["bound"]) == (True, False, pytest.approx(5.0), "at least")
    assert typed.json()["result"]["at_edge"] is False
    assert "tumour C: 1 : 5.0 (as you typed it)" in typed.json()["result"]["sentence"]
    stored = ElicitationAnswers.objects.get(expert=built.bob)
    assert stored.typed_ratios == {"2": 5.0} and typed.json()["weights"] == stored.weights
    # The weights: tumour B's ratio as the answers gave it, tumour C's as typed (per instance at the prior).
    a = np.array(stored.weights)
    assert a[2] / a[0] == pytest.approx(5.0 * prior[0] / prior[2]) and a[1] / a[0] == pytest.approx(
        row.weights[1] / row.weights[0]
    )
    assert HistoricalElicitationAnswers.objects.count() == history + 1
    # Taken back: the search's weights again; going back one question drops typed ratios.
    back = bob.post(ratio_url, {"class_label": "tumour C", "ratio": None}, format="json").json()
    assert back["weights"] == row.weights and back["result"]["at_edge"] is True
    bob.post(ratio_url, {"class_label": "tumour C", "ratio": 4}, format="json")
    bob.post(me + "back/")
    assert ElicitationAnswers.objects.get(expert=built.bob).typed_ratios == {}
    # Before the end: nothing to type.
    early = bob.post(ratio_url, {"class_label": "tumour C", "ratio": 4}, format="json")
    assert early.status_code == 400 and list(early.json()["fields"]) == ["ratio"]
