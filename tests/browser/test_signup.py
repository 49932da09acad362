"""Self sign-up in a real browser, at 1280 and 390 px: from the sign-in
page's *Sign up* link to the account's dashboard through the mailed link;
refusals under their fields; the closed policy's page. axe on each page,
no page wider than a phone, screenshots of each state."""

import re

import pytest
from django.contrib.auth.models import User
from django.core import mail
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from accounts.models import SitePolicy
from tests.browser.support import TIMEOUT_MS, assert_accessible, screenshot
from tests.browser.test_phone_layout import MEASURE
from workspace.models import EmailConfirmation

PASSWORD = "a-fresh-passphrase-31"
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(params=list(WIDTHS))
def sized(request, browser: Browser, live_server: LiveServer, transactional_db):
    context = browser.new_context(base_url=live_server.url, viewport=WIDTHS[request.param], locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: "Content Security Policy" in message.text and errors.append(message.text))
    yield request.param, page
    context.close()
    assert not errors, errors


def look(page: Page, name: str) -> None:
    """Fits its viewport, passes axe, and is kept as a screenshot."""
    width = page.viewport_size["width"]
    measured = page.evaluate(MEASURE, width)
    assert measured["width"] <= width, f"{page.url}: {measured['width']} px wide: {measured['wide']}"
    assert_accessible(page)
    screenshot(page, name)


def set_policy(kind: str, domains: str = "") -> None:
    policy = SitePolicy.current()
    policy.signup, policy.signup_domains = kind, domains
    policy.save()


def test_sign_up_from_the_sign_in_page_to_the_dashboard(sized) -> None:
    size, page = sized
    set_policy("domains", "example.org")
    User.objects.create_user("alice", "alice@example.org", "a-long-test-password-47")
    page.goto("/accounts/login/")
    page.get_by_role("link", name="Sign up").click()
    expect(page.get_by_role("heading", name="Create an account")).to_be_visible()
    look(page, f"signup-{size}")

    page.get_by_label("E-mail address").fill("dana@gmail.test")
    with page.expect_navigation():
        page.get_by_role("button", name="Send the link").click()
    expect(page.get_by_role("alert")).to_contain_text("open only to addresses at example.org")
    assert page.get_by_label("E-mail address").get_attribute("aria-invalid") == "true"
    look(page, f"signup-refused-{size}")

    page.get_by_label("E-mail address").fill("Dana@Example.org")
    with page.expect_navigation():
        page.get_by_role("button", name="Send the link").click()
    expect(page.get_by_role("heading", name="Check your e-mail")).to_be_visible()
    look(page, f"signup-sent-{size}")
    (message,) = mail.outbox
    link = re.search(r"http://\S+/accounts/signup/[A-Za-z0-9_-]+/", message.body).group(0)

    page.goto(link)
    expect(page.get_by_text("Dana@example.org")).to_be_visible()
    look(page, f"signup-link-{size}")
    page.get_by_label("Username").fill("Alice")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Create the account").click()
    expect(page.get_by_role("alert")).to_contain_text("this username is taken")
    look(page, f"signup-link-refused-{size}")

    page.get_by_label("Username").fill("dana")
    page.get_by_label("Your name").fill("Dana Scully")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Create the account").click()
    expect(page.get_by_role("status")).to_contain_text("Welcome, dana: your account is ready")
    expect(page.get_by_role("heading", name="Your studies")).to_be_visible()
    look(page, f"signup-done-{size}")
    dana = User.objects.get(username="dana")
    assert EmailConfirmation.objects.get(user=dana).email == "Dana@example.org"

    # The link is used up.
    page.context.clear_cookies()
    page.goto(link)
    expect(page.get_by_role("alert")).to_contain_text("already used")
    look(page, f"signup-link-used-{size}")


def test_invitation_only_says_where_accounts_come_from(sized) -> None:
    size, page = sized
    set_policy("invitation")
    page.goto("/accounts/login/")
    expect(page.get_by_role("link", name="Sign up")).to_have_count(0)
    page.goto("/accounts/signup/")
    expect(page.get_by_role("heading", name="No sign-up here")).to_be_visible()
    expect(page.get_by_text("come through a study's invitation")).to_be_visible()
    look(page, f"signup-invitation-only-{size}")
