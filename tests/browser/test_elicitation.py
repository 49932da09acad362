"""An elicited metric's step in Chromium (issue 21): an expert reaches it
from their steps, answers questions with the keyboard through its plain
forms (the page loads no script of its own), goes back one, leaves and
comes back to the same question; the page fits a phone and passes axe."""

import re

import numpy as np
from playwright.sync_api import Page, expect

from tests.browser.conftest import _close_page, _open_page
from tests.browser.support import assert_accessible, login, screenshot
from tests.evaluation.elicited_fixtures import add_elicited_metric, library_weights, linear_oracle
from tests.fixtures import PASSWORD, VOTES
from workspace import services


def test_an_expert_answers_with_the_keyboard(page: Page, live_server, make_study, cast):
    built = make_study()
    elicited = add_elicited_metric(built, epsilon=0.05)
    services.study_open_voting(study=built.study)
    for username, ballot in VOTES.items():
        services.votes_set(expert=built.experts[username], **ballot)
    services.study_close_voting(study=built.study)
    login(page, "bob", PASSWORD)
    page.goto(f"/studies/{built.study.pk}/my/ranges/")
    page.get_by_role("link", name="Answer the questions of Cost-weighted accuracy").click()
    expect(page).to_have_url(re.compile(rf"/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/$"))
    expect(page.get_by_text("Question 1 of at most 40")).to_be_visible()
    assert_accessible(page)
    screenshot(page, "elicitation-question")
    for number, button in enumerate(["This one (outcome 1)", "The other one (outcome 2)", "No preference"], 1):
        target = page.get_by_role("button", name=button)
        target.focus()
        page.keyboard.press("Enter")
        expect(page.get_by_text(f"Question {number + 1} of at most 40")).to_be_visible()
    page.get_by_role("button", name="Go back one question").click()
    expect(page.get_by_text("Question 3 of at most 40")).to_be_visible()
    # Leave and come back (a new visit): the same question.
    page.goto(f"/studies/{built.study.pk}/")
    page.goto(f"/studies/{built.study.pk}/my/elicitation/{elicited.metric_id}/")
    expect(page.get_by_text("Question 3 of at most 40")).to_be_visible()
    from evaluation.models import ElicitationAnswers

    assert ElicitationAnswers.objects.get(expert=built.bob).answers == "12"
    # A phone: nothing scrolls sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "elicitation-phone")


def _answer_every_question(page: Page, study_pk: int, metric_id: int, weights: list[float]) -> int:
    """Answer the elicited metric's questions, the consistency check's
    included, with the keyboard, choosing as an expert with ``weights``
    would from the confusions the form carries (``data-*-values``); the
    number of questions answered."""
    oracle = linear_oracle(weights)
    page.goto(f"/studies/{study_pk}/my/elicitation/{metric_id}/")
    asked = 0
    while (form := page.locator("form.elicit__form")).count():
        first = [float(v) for v in (form.get_attribute("data-first-values") or "").split()]
        second = [float(v) for v in (form.get_attribute("data-second-values") or "").split()]
        name = "This one (outcome 1)" if oracle(first, second) else "The other one (outcome 2)"
        page.get_by_role("button", name=name).focus()
        with page.expect_navigation():
            page.keyboard.press("Enter")
        asked += 1
    expect(page.get_by_text("check questions answered")).to_be_visible()
    return asked


def test_two_experts_answer_in_the_browser_and_the_run_ranks_by_their_metrics(browser, live_server, make_study):
    """Bob and carol answer every question of an elicited two-class metric
    in their own browsers (the oracle of each one's weights, flipped), the
    designer closes the assessment and launches a run, and the candidate
    breakdown shows each expert's own value: their metric of J48's confusion."""
    from evaluation import elicited as elicited_domain
    from evaluation.models import ElicitationAnswers
    from tests.browser.test_journey import change_phase, submit, tab
    from tests.evaluation.test_elicited_ranking import WEIGHTS, elicited_study

    built = elicited_study(make_study, finished=())
    elicited = built.metrics["AUC"].elicitation
    pages = {}
    try:
        for name in ("bob", "carol", "alice"):
            context, pages[name] = _open_page(browser, live_server, javascript=True)
            login(pages[name], name, PASSWORD)
        for name in ("bob", "carol"):
            asked = _answer_every_question(pages[name], built.study.pk, elicited.metric_id, WEIGHTS[name])
            assert asked == 4 * 4 + 2  # 4 (k - 1) ceil(log2(1 / 0.1)) for k = 2, then the check's 2
            expect(pages[name].get_by_text("Your check answers agree with your first answers.")).to_be_visible()
        stored = {row.expert.user.username: row for row in ElicitationAnswers.objects.select_related("expert__user")}
        assert all(len(row.answers) == 18 and row.weights is not None for row in stored.values())
        # Through the pages, the library's weights with the same oracle (on ten
        # instances the finite sample, not epsilon, limits how close they come).
        eta = elicited_domain.reference_eta(elicited)
        for name in ("bob", "carol"):
            expected, count = library_weights("diagonal", linear_oracle(WEIGHTS[name]), eta, 0.1)
            assert count == 16 and stored[name].weights == [float(w) for w in expected]
        assert stored["bob"].weights[0] > stored["bob"].weights[1] and stored["carol"].weights[0] < 0.5
        designer = pages["alice"]
        designer.goto(f"/studies/{built.study.pk}/")
        change_phase(
            designer, "Close assessment", "Close the assessment?", "The assessment is closed", name="elicited-close"
        )
        tab(designer, "Runs")
        submit(designer, "Launch a validation run")
        from engine.models import Run

        run = Run.objects.get(study=built.study)
        assert run.status == Run.Status.SUCCEEDED, run.error
        designer.goto(f"/runs/{run.pk}/candidates/J48/")
        rows = designer.locator("#own-values tbody tr")
        expect(rows).to_have_count(2)
        shown = {row.locator("th").inner_text(): float(row.locator("td").first.inner_text()) for row in rows.all()}
        # J48 finds 4 of 5 of A and 2 of 5 of B: each expert's <a, diag C>.
        diagonal = np.diag([0.4, 0.2])
        for name in ("bob", "carol"):
            own = elicited_domain.metric_value("diagonal", stored[name].weights, diagonal)
            assert abs(shown[name] - own) < 0.006, (name, shown, own)
        assert shown["bob"] > shown["carol"]  # bob values finding A, which J48 finds more of
    finally:
        for opened in pages.values():
            _close_page(opened.context)
