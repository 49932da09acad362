"""The discussion page in a real browser: an expert posts in a thread with
JavaScript on and off, a refused post shows its error on that thread's form,
the designer hides a post and the author edits theirs. Screenshots of each
state, axe on each page."""

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.support import assert_accessible, javascript_disabled, login, screenshot
from tests.fixtures import PASSWORD, make_study  # noqa: F401  (fixture)
from workspace import services
from workspace.models import Phase, Post


@pytest.fixture
def world(make_study, cast):  # noqa: F811  (the imported fixture)
    built = make_study(Phase.ASSESSMENT)
    accuracy = built.attributes["Accuracy"]
    services.post_add(
        study=built.study,
        author=cast.carol,
        attribute=accuracy,
        body="Accuracy should weigh most: a wrong diagnosis costs more than a slow one.",
    )
    services.post_add(
        study=built.study,
        author=cast.alice,
        metric=built.metrics["AUC"],
        body="AUC is computed on each fold, then averaged.",
    )
    return built


def thread(page: Page, anchor: str):
    return page.locator(f"article#{anchor}")


def full_screenshot(page: Page, name: str) -> None:
    """A full-page picture taken from the top: scrolled to a thread, the
    index (sticky beside the threads) would be drawn halfway down."""
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, name)


def post_in_thread(page: Page, built, name: str) -> None:
    """As bob: follow the summary's link to a thread, post in it, and check
    the answer is that thread with the post and its count."""
    metric = built.metrics[name]
    anchor = f"metric-{metric.pk}"
    login(page, "bob", PASSWORD)
    page.goto(f"/studies/{built.study.pk}/discussion/")
    summary = page.get_by_role("navigation", name="Threads")
    expect(summary.get_by_role("link", name=name)).to_be_visible()
    summary.get_by_role("link", name=name).click()
    assert page.url.endswith(f"#{anchor}")

    box = page.get_by_label(f"Your post on {name}")
    box.fill("Measured per fold, as for AUC?")
    with page.expect_navigation():
        thread(page, anchor).get_by_role("button", name=f"Post on {name}").click()
    assert page.url.endswith(f"/studies/{built.study.pk}/discussion/#{anchor}")
    posts = thread(page, anchor).locator("li.post")
    expect(posts).to_have_count(1)
    assert posts.first.locator(".post__author").inner_text() == "bob"
    assert posts.first.locator(".post__body").inner_text().strip() == "Measured per fold, as for AUC?"
    expect(thread(page, anchor).locator(".thread__count")).to_have_text("1 post")
    expect(summary.locator("li", has_text=name).locator(".thread-index__count")).to_have_text("1 post")
    assert Post.objects.filter(metric=metric, author__username="bob").count() == 1


def refused_post_shows_its_error(page: Page, built) -> None:
    consistency = built.attributes["Consistency"]
    anchor = f"attribute-{consistency.pk}"
    with page.expect_navigation():
        thread(page, anchor).get_by_role("button", name="Post on Consistency").click()
    assert page.url.endswith(f"#{anchor}")
    alert = thread(page, anchor).get_by_role("alert")
    expect(alert).to_have_text("Your post on Consistency: This field is required.")
    field = page.get_by_label("Your post on Consistency")
    assert field.get_attribute("aria-invalid") == "true"
    # Only that thread's form shows an error.
    expect(page.get_by_role("alert")).to_have_count(1)
    alert.get_by_role("link").click()
    assert field.evaluate("el => el === document.activeElement")


def test_an_expert_posts_in_a_thread(page: Page, world) -> None:
    post_in_thread(page, world, "Training time")
    full_screenshot(page, "discussion-expert")
    assert_accessible(page)
    refused_post_shows_its_error(page, world)
    full_screenshot(page, "discussion-error")
    assert_accessible(page)


def test_posting_works_without_javascript(page_nojs: Page, world) -> None:
    assert javascript_disabled(page_nojs)
    post_in_thread(page_nojs, world, "Training time")
    refused_post_shows_its_error(page_nojs, world)
    full_screenshot(page_nojs, "discussion-error-nojs")


def test_the_designer_hides_a_post_and_the_expert_reads_that_it_was_hidden(page: Page, browser, live_server, world):
    carol_post = Post.objects.get(author__username="carol")
    login(page, "alice", PASSWORD)
    page.goto(f"/studies/{world.study.pk}/discussion/")
    post = page.locator(f"#post-{carol_post.pk}")
    with page.expect_navigation():
        post.get_by_role("button", name=re.compile(r"^Hide the post by carol")).click()
    assert page.url.endswith(f"#post-{carol_post.pk}")
    expect(post.locator(".badge--hidden")).to_have_text("Hidden")
    expect(post.locator(".post__body")).to_contain_text("a wrong diagnosis costs more")
    expect(post.get_by_role("button", name=re.compile(r"^Show again"))).to_be_visible()
    full_screenshot(page, "discussion-designer")
    assert_accessible(page)

    context = browser.new_context(base_url=live_server.url)
    try:
        expert = context.new_page()
        login(expert, "bob", PASSWORD)
        expert.goto(f"/studies/{world.study.pk}/discussion/")
        expect(expert.locator(f"#post-{carol_post.pk} .post__body")).to_have_text("Hidden by the designer.")
        assert "a wrong diagnosis" not in expert.content()
    finally:
        context.close()

    with page.expect_navigation():
        post.get_by_role("button", name=re.compile(r"^Show again")).click()
    expect(post.locator(".badge--hidden")).to_have_count(0)
    assert not Post.objects.get(pk=carol_post.pk).is_hidden


def test_the_author_edits_a_post(page: Page, world) -> None:
    mine = Post.objects.get(author__username="carol")
    login(page, "carol", PASSWORD)
    page.goto(f"/studies/{world.study.pk}/discussion/")
    page.locator(f"#post-{mine.pk}").get_by_role("link", name=re.compile(r"^Edit")).click()
    expect(page.get_by_role("heading", name="Edit your post on Accuracy")).to_be_visible()
    screenshot(page, "discussion-edit")
    assert_accessible(page)
    page.get_by_role("textbox", name="Your post on Accuracy").fill("Accuracy first, then consistency.")
    with page.expect_navigation():
        page.get_by_role("button", name="Save").click()
    assert page.url.endswith(f"#post-{mine.pk}")
    post = page.locator(f"#post-{mine.pk}")
    expect(post.locator(".post__body")).to_have_text("Accuracy first, then consistency.")
    expect(post.locator(".post__state")).to_contain_text("edited")
