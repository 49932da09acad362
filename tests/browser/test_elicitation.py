"""An elicited metric's step in Chromium (issue 21): an expert reaches it
from their steps, answers questions with the keyboard through its plain
forms (the page loads no script of its own), goes back one, leaves and
comes back to the same question; the page fits a phone and passes axe."""

import re

from playwright.sync_api import Page, expect

from tests.browser.support import assert_accessible, login, screenshot
from tests.evaluation.elicited_fixtures import add_elicited_metric
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
