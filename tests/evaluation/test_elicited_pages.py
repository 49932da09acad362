"""The elicited metric's pages through Django's test client: the designer's
design page, the expert's step answered question by question with plain
forms equals the library's search, go back, redo, the step listed with the
expert's others, roles, and query counts that do not grow with the answers."""

import re

import numpy as np
import pytest

from evaluation import elicited as elicited_domain
from evaluation import selectors
from evaluation.elicitation import DiagonalElicitation, elicit_diagonal
from evaluation.models import ElicitationAnswers, ElicitedMetric
from tests.pages.test_studyhome import as_user, text_of
from workspace.services import metric_add, study_close_voting, study_open_voting

from .elicited_fixtures import add_elicited_metric, linear_oracle, upload

pytestmark = pytest.mark.django_db


def page_question(response):
    """The question number and the two outcomes' rates as the page shows them."""
    body = response.content.decode()
    number = int(re.search(r'name="question" value="(\d+)"', body).group(1))
    return number


def test_the_designer_makes_a_metric_elicited(client, make_study, cast):
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
    url = f"/studies/{built.study.pk}/predictions/metrics/{metric.pk}/elicitation/"
    designer = as_user(client, cast.alice)
    page = designer.get(url)
    assert page.status_code == 200 and "Elicit Cost-weighted accuracy from each expert" in text_of(page)
    refused = designer.post(
        url, {"kind": "diagonal", "prediction_set": prediction_set.pk, "reference_candidate": "J48", "epsilon": "3"}
    )
    assert refused.status_code == 400 and not ElicitedMetric.objects.exists()
    assert "epsilon must lie in (0, 1)" in text_of(refused)
    saved = designer.post(
        url, {"kind": "diagonal", "prediction_set": prediction_set.pk, "reference_candidate": "J48", "epsilon": "0.05"}
    )
    assert saved.status_code == 302
    elicited = ElicitedMetric.objects.get(metric=metric)
    assert (elicited.kind, elicited.prediction_set_id, elicited.reference_candidate.name, elicited.epsilon) == (
        "diagonal",
        prediction_set.pk,
        "J48",
        0.05,
    )
    listed = text_of(designer.get(f"/studies/{built.study.pk}/predictions/"))
    assert "elicited from each expert (diagonal" in listed
    # An expert may not design it.
    assert as_user(client, cast.bob).get(url).status_code == 403


def test_the_expert_answers_with_plain_forms(client, make_study, cast, django_assert_num_queries):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    study_open_voting(study=built.study)
    study_close_voting(study=built.study)
    url = f"/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/"
    bob = as_user(client, cast.bob)
    oracle = linear_oracle([0.2, 0.5, 0.3])
    eta = elicited_domain.reference_eta(elicited)
    expected, count = elicit_diagonal(oracle, eta, epsilon=0.05)
    shadow = DiagonalElicitation(eta, epsilon=0.05)
    for asked in range(1, count + 1):
        page = bob.get(url)
        assert page.status_code == 200 and page_question(page) == asked
        assert f"Question {asked} of at most {count}" in text_of(page)
        first, second = shadow.next_query()
        verdict = oracle(first, second)
        shadow.answer(verdict)
        answered = bob.post(url, {"question": asked, "answer": "first" if verdict else "second"})
        assert answered.status_code == 302 and answered["Location"] == url
        if asked == 3:
            # Go back one question, then answer it again.
            bob.post(url, {"back": "1"})
            assert page_question(bob.get(url)) == 3
            bob.post(url, {"question": 3, "answer": "first" if verdict else "second"})
    # The check: two of the questions asked again; bob changes his mind on the first.
    original = shadow.answers
    check = bob.get(url)
    assert page_question(check) == count + 1 and "A check: question 1 of 2" in text_of(check)
    assert "keep my answers" not in text_of(check)
    bob.post(url, {"question": count + 1, "answer": "second" if original[0] else "first"})
    check = bob.get(url)
    assert page_question(check) == count + 2 and "A check: question 2 of 2" in text_of(check)
    bob.post(url, {"question": count + 2, "answer": "first" if original[count // 2] else "second"})
    done = bob.get(url)
    text = text_of(done)
    assert f"All {count} questions and the 2 check questions answered" in text
    assert "Your check answers disagree with your first answers" in text and "question 1 asked again" in text
    assert "keep my answers" in text and "Start again (redo)" in text
    prior = elicited_domain.class_prior(elicited)
    per_class = expected[1] * prior[1] / (expected[0] * prior[0])
    assert f"Per 100 cases of each class, finding tumour A against finding tumour B: 1 : {per_class:.1f};" in text
    assert "Per instance, at the study's prevalence (tumour A 29 %, tumour B 36 %, tumour C 35 %)" in text
    assert "<svg" in done.content.decode() and "edge of what" not in text
    stored = ElicitationAnswers.objects.get(expert=built.bob)
    np.testing.assert_array_equal(stored.weights, expected)
    # The step is listed with the expert's others, done.
    # Session, user, study with roles, the elicited metric with the expert's
    # answers (one query: issue 33, item 6), the messages, the header's
    # unread notifications (6), however many answers are stored.
    with django_assert_num_queries(6):
        bob.get(url)
    ranges = text_of(bob.get(f"/studies/{built.study.pk}/my/ranges/"))
    assert "Answer the questions of Cost-weighted accuracy (done)" in ranges
    # Redo clears the answers.
    bob.post(url, {"reset": "1"})
    assert ElicitationAnswers.objects.get(expert=built.bob).answers == ""
    with django_assert_num_queries(6):
        page = bob.get(url)
    assert 'name="question" value="1"' in page.content.decode()  # the cleared answers read with the metric


def test_roles_and_refusals(client, make_study, cast):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    url = f"/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/"
    # Before the assessment: read-only with the reason; an answer is refused and nothing stored.
    bob = as_user(client, cast.bob)
    page = bob.get(url)
    assert "only possible in the assessment phase" in text_of(page)
    bob.post(url, {"question": 1, "answer": "first"})
    assert not ElicitationAnswers.objects.filter(answers__gt="").exists()
    # The designer (not an expert here) may not answer; an outsider sees nothing.
    assert as_user(client, cast.alice).get(url).status_code == 403
    assert as_user(client, cast.charlie).get(url).status_code == 404
    # A metric that is not elicited: 404.
    other = built.metrics["AUC"].pk
    assert as_user(client, cast.bob).get(f"/studies/{built.study.pk}/my/elicitation/{other}/").status_code == 404


def closed_with_answers(make_study):
    """A closed study whose Cost-weighted accuracy is elicited from J48's two-class predictions, bob's
    and carol's weights stored: (built, metric)."""
    import io

    from evaluation.services import prediction_set_import
    from workspace.models import Metric, Phase

    from .test_elicited import TWO_CLASSES

    built = make_study(Phase.CLOSED)
    prediction_set = prediction_set_import(
        study=built.study, stream=io.BytesIO(TWO_CLASSES.encode()), name="two.csv", uploaded_by=None
    )
    # Written directly: a metric is added in the draft only.
    metric = Metric.objects.create(
        study=built.study, attribute=built.attributes["Accuracy"], name="Cost-weighted accuracy", position=99
    )
    elicited = ElicitedMetric.objects.create(
        metric=metric,
        kind="diagonal",
        prediction_set=prediction_set,
        reference_candidate=built.candidates["J48"],
        epsilon=0.1,
    )
    ElicitationAnswers.objects.create(elicited_metric=elicited, expert=built.bob, answers="1", weights=[0.8, 0.2])
    ElicitationAnswers.objects.create(elicited_metric=elicited, expert=built.carol, answers="2", weights=[0.2, 0.8])
    return built, metric


def test_the_designer_sees_each_expert_s_values_once_the_assessment_has_closed(client, make_study, cast):
    built, metric = closed_with_answers(make_study)
    page = as_user(client, cast.alice).get(f"/studies/{built.study.pk}/predictions/metrics/{metric.pk}/elicitation/")
    text = text_of(page)
    # Per 100 cases of each class (A has 54.6 % of J48's probability, B 45.4 %): bob's 0.8 and 0.2
    # (4 : 1 per instance) are 4.8 : 1 per class; carol's the other way round, 1 : 3.3.
    assert "Per 100 cases of each class, finding A against finding B: 4.8 : 1." in text
    assert "Per 100 cases of each class, finding A against finding B: 1 : 3.3." in text
    # By hand (tests/evaluation/test_elicited.py): J48 0.36 for bob, 0.24 for carol; JRip 0.26 and 0.44.
    assert "J48 two.csv 0.3600 0.2400 0.2400–0.3600" in text
    assert "JRip two.csv 0.2600 0.4400 0.2600–0.4400" in text


def test_with_many_experts_the_design_page_shows_the_median_and_the_spread(client, make_study, cast):
    from django.contrib.auth.models import User

    from workspace.models import Membership

    built, metric = closed_with_answers(make_study)
    elicited = metric.elicitation
    ElicitationAnswers.objects.filter(elicited_metric=elicited).delete()
    # Nine experts: bob, carol and seven more, the weight of A rising from 0.1 to 0.9.
    experts = [built.bob, built.carol] + [
        Membership.objects.create(
            study=built.study, user=User.objects.create_user(f"panel{i}"), role=Membership.Role.EXPERT
        )
        for i in range(7)
    ]
    for i, expert in enumerate(experts):
        a = (i + 1) / 10
        ElicitationAnswers.objects.create(elicited_metric=elicited, expert=expert, answers="1", weights=[a, 1 - a])
    text = text_of(
        as_user(client, cast.alice).get(f"/studies/{built.study.pk}/predictions/metrics/{metric.pk}/elicitation/")
    )
    assert "the median and the spread are shown" in text
    # By hand: J48's diagonal is (0.4, 0.2), so a value of 0.2 + 0.2 a: median a = 0.5 gives 0.3000,
    # a = 0.1 and 0.9 the ends; JRip's (0.2, 0.5) gives 0.5 - 0.3 a.
    assert "J48 two.csv 0.3000 0.2200–0.3800" in text
    assert "JRip two.csv 0.3500 0.2300–0.4700" in text
    assert "panel3" not in text.split("Each expert's Cost-weighted accuracy")[1].split("Spread")[0]


def test_the_design_page_pages_the_candidates_values_as_the_measurements_table(client, make_study, cast, monkeypatch):
    from workspace import limits

    monkeypatch.setattr(limits, "CANDIDATES_PER_PAGE", 1)
    built, metric = closed_with_answers(make_study)
    url = f"/studies/{built.study.pk}/predictions/metrics/{metric.pk}/elicitation/"
    designer = as_user(client, cast.alice)
    first, second = text_of(designer.get(url)), text_of(designer.get(url + "?page=2"))
    # By hand (as above): J48 0.36 for bob, 0.24 for carol; JRip 0.26 and 0.44; one candidate a page.
    assert "J48 two.csv 0.3600 0.2400 0.2400–0.3600" in first and "JRip two.csv" not in first
    assert "JRip two.csv 0.2600 0.4400 0.2600–0.4400" in second and "J48 two.csv" not in second
    assert "Candidates 1–1 of 2, 1 a page." in first and "Candidates 2–2 of 2" in second
    assert 'href="?page=2#values-title"' in designer.get(url).content.decode()


def test_in_the_assessment_a_change_that_deletes_answers_asks_first(client, make_study, cast):
    from evaluation import services as evaluation_services

    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    study_open_voting(study=built.study)
    study_close_voting(study=built.study)
    evaluation_services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer="first", question=1)
    url = f"/studies/{built.study.pk}/predictions/metrics/{elicited.metric_id}/elicitation/"
    designer = as_user(client, cast.alice)
    design = {"kind": "diagonal", "prediction_set": elicited.prediction_set_id, "reference_candidate": "J48"}
    # Saving the same design deletes nothing, so it asks nothing.
    assert designer.post(url, {**design, "epsilon": "0.05"}).status_code == 302
    asked = designer.post(url, {**design, "epsilon": "0.1"})
    assert asked.status_code == 200
    assert "it deletes the answers 1 expert gave, and they answer again" in text_of(asked)
    assert ElicitedMetric.objects.get().epsilon == 0.05 and ElicitationAnswers.objects.get().answers == "1"
    confirmed = designer.post(url, {**design, "epsilon": "0.1", "confirm": "1"})
    assert confirmed.status_code == 302
    assert ElicitedMetric.objects.get().epsilon == 0.1 and not ElicitationAnswers.objects.exists()
    # Stopping asks too once someone has answered.
    evaluation_services.elicitation_answer(elicited_metric=elicited, expert=built.carol, answer="second", question=1)
    asked = designer.post(url, {"remove": "1"})
    assert "Stopping eliciting Cost-weighted accuracy deletes the answers 1 expert gave to it" in text_of(asked)
    assert ElicitedMetric.objects.exists()
    assert designer.post(url, {"remove": "confirm"}).status_code == 302
    assert not ElicitedMetric.objects.exists() and not ElicitationAnswers.objects.exists()


def test_the_questions_are_one_of_the_expert_s_steps_everywhere(client, make_study, cast, django_assert_num_queries):
    """The study home lists an elicited metric's questions with the expert's
    other steps (and *My steps* opens them once the rest is done), the
    designer's grid has a column for them, and the dashboard names them: an
    unfinished elicitation is never "nothing left to do"."""
    from evaluation import services as evaluation_services
    from tests.fixtures import VOTES, complete_assessment
    from workspace.services import votes_set

    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.2)
    study_open_voting(study=built.study)
    for username, ballot in VOTES.items():
        votes_set(expert=built.experts[username], **ballot)
    study_close_voting(study=built.study)
    complete_assessment(built)
    home = f"/studies/{built.study.pk}/"
    bob = as_user(client, cast.bob)
    text = text_of(bob.get(home))
    assert "Your next step: Questions on Cost-weighted accuracy" in text
    assert "Missing Questions on Cost-weighted accuracy No question answered yet." in text
    assert "Nothing is missing" not in text
    # A revision round card only where there is something in it: none for an expert before any round.
    assert "Revision rounds" not in text
    assert (
        bob.get(f"/studies/{built.study.pk}/my/").url
        == f"/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/"
    )
    dashboard = text_of(bob.get("/"))
    assert "Still to give: the questions on Cost-weighted accuracy." in dashboard
    evaluation_services.elicitation_answer(elicited_metric=elicited, expert=built.bob, answer="first", question=1)
    assert "Missing Questions on Cost-weighted accuracy 1 question answered; not finished yet." in text_of(
        bob.get(home)
    )
    # bob finishes (the check's two answers included).
    while (state := selectors.elicitation_state(elicited_metric=elicited, expert=built.bob)).question is not None:
        evaluation_services.elicitation_answer(
            elicited_metric=elicited, expert=built.bob, answer="second", question=state.question.number
        )
    text = text_of(bob.get(home))
    assert (
        "Done Questions on Cost-weighted accuracy Answered (" in text
        and "your own Cost-weighted accuracy is known" in text
    )
    assert "Nothing is missing" in text
    assert "Still to give" not in text_of(bob.get("/"))
    # The designer's grid: a column, bob done, carol missing; the home's queries stay fixed.
    designer = as_user(client, cast.alice)
    # the home's 9, the elicited metrics' answers, the rounds, the header's unread count
    with django_assert_num_queries(12):
        grid = text_of(designer.get(home))
    assert "Questions on Cost-weighted accuracy" in grid
    assert "their own Cost-weighted accuracy is known" in grid and "No question answered yet." in grid


def test_the_ranges_step_previews_vetoes_on_the_expert_s_own_values(client, make_study, cast):
    """A run reads an expert's own value of an elicited metric, so the
    ranges step shows and vetoes on it (not the typed measurement); before
    they finish, it says where the values will come from."""
    from .test_elicited_ranking import elicited_study

    built = elicited_study(make_study, finished=("bob",), carol=(0.3, 0.5))
    url = f"/studies/{built.study.pk}/my/ranges/"
    bob = text_of(as_user(client, cast.bob).get(url))
    # By hand (test_elicited_ranking.OWN): bob's J48 0.36, JRip 0.26; his AUC range [0.1, 0.5]:
    # scores (0.36 - 0.1) / 0.4 = 0.65 and 0.4; the typed AUC (0.88, 0.9) would score 1.
    assert "AUC is elicited: these are your own values of it (from your answers), which a run reads for you." in bob
    assert "J48 0.36 0.65 accepted" in bob and "JRip 0.26 0.4 accepted" in bob
    carol = text_of(as_user(client, cast.carol).get(url))
    assert "AUC is elicited: a run reads your own value of it for each candidate, known once you have answered" in carol
    # Her range of 0.3 would veto J48 for bob's values, not hers: nothing is previewed before she finishes.
    assert "J48 0.36" not in carol


def test_once_closed_the_design_is_shown_as_stored_with_why(client, make_study, cast):
    from workspace.models import Phase

    built = make_study(Phase.CLOSED)
    page = as_user(client, cast.alice).get(
        f"/studies/{built.study.pk}/predictions/metrics/{built.metrics['AUC'].pk}/elicitation/"
    )
    text = text_of(page)
    assert page.status_code == 200
    assert (
        "Changing an elicited metric is only possible in the draft or voting or assessment phase; the study is in "
        "the closed phase: reopen the assessment (on the study's home) to change it." in text
    )
    body = page.content.decode()
    assert re.search(r'<select name="kind"[^>]*disabled', body) and re.search(r'name="epsilon"[^>]*disabled', body)
    assert ">Save</button>" not in body


def test_at_the_edge_the_page_says_at_least_and_takes_a_typed_ratio(client, make_study, cast):
    # Issue 31: tumour C against tumour A per class reaches only 1 : 3.3 with J48's probabilities.
    from tests.evaluation.elicited_fixtures import per_class_oracle
    from tests.evaluation.test_elicited import answer_all

    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.1)
    study_open_voting(study=built.study)
    study_close_voting(study=built.study)
    answer_all(elicited, built.bob, per_class_oracle([1.0, 2.0, 5.0], elicited_domain.class_prior(elicited)))
    url = f"/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/"
    bob = as_user(client, cast.bob)
    text = text_of(bob.get(url))
    assert "finding tumour A against finding tumour C: at least 1 : 2.9 (the edge of what" in text
    assert "Your answers reached the edge of what the reference candidate's probabilities can show (J48)" in text
    assert "ask the study's designer to choose a wider reference" in text
    assert "Finding tumour A against finding tumour C, per 100 cases of each class: 1 :" in text
    refused = bob.post(url, {"class_label": "tumour C", "ratio": "2"}, follow=True)
    assert "must be at least 2.9 (1 : ratio)" in text_of(refused)
    assert ElicitationAnswers.objects.get(expert=built.bob).typed_ratios == {}
    assert bob.post(url, {"class_label": "tumour C", "ratio": "5"}).status_code == 302
    typed = text_of(bob.get(url))
    assert "finding tumour A against finding tumour C: 1 : 5.0 (as you typed it)" in typed
    assert "You typed the ratio where your answers reached the edge" in typed
    assert ElicitationAnswers.objects.get(expert=built.bob).typed_ratios == {"2": 5.0}
    # The designer's page lists what each candidate's probabilities can show: a wider reference.
    design = text_of(
        as_user(client, cast.alice).get(
            f"/studies/{built.study.pk}/predictions/metrics/{elicited.metric_id}/elicitation/"
        )
    )
    assert "J48 (the reference) tumour B: 3.5 : 1 to 1 : 5.7; tumour C: 2.2 : 1 to 1 : 3.3" in design
    assert "JRip tumour B:" in design
