"""The account pages in a real browser: change the password, create an API
token (its key shown once) and revoke it after confirming; with JavaScript
and without. Screenshots of each state, axe on each page."""

from playwright.sync_api import Page, expect

from tests.browser.support import assert_accessible, javascript_disabled, login, screenshot, submit_login
from tests.fixtures import PASSWORD
from workspace.models import ApiToken

NEW_PASSWORD = "a-new-and-long-password-52"


def check(page: Page, name: str) -> None:
    screenshot(page, name)
    if not javascript_disabled(page):
        assert_accessible(page)


def change_password(page: Page, suffix: str) -> None:
    login(page, "alice", PASSWORD)
    page.get_by_role("link", name="Account").click()
    expect(page.get_by_role("heading", name="Change your password")).to_be_visible()
    assert page.url.endswith("/accounts/password/")
    check(page, f"account-password{suffix}")

    # Refused: the current password is wrong and the new ones differ.
    page.get_by_label("Old password").fill("not-my-password")
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password confirmation").fill(NEW_PASSWORD + "x")
    with page.expect_navigation():
        page.get_by_role("button", name="Change password").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Old password:")
    expect(alert).to_contain_text("New password confirmation:")
    assert page.get_by_label("Old password").get_attribute("aria-invalid") == "true"
    check(page, f"account-password-errors{suffix}")

    page.get_by_label("Old password").fill(PASSWORD)
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password confirmation").fill(NEW_PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("status")).to_contain_text("Your password was changed.")
    check(page, f"account-password-changed{suffix}")

    # Still signed in here; the new password is the one that works.
    page.context.clear_cookies()
    submit_login(page, "alice", PASSWORD)
    assert page.url.endswith("/accounts/login/")
    login(page, "alice", NEW_PASSWORD)


def test_change_the_password(page: Page, cast) -> None:
    change_password(page, "")


def test_change_the_password_without_javascript(page_nojs: Page, cast) -> None:
    change_password(page_nojs, "-nojs")


def create_and_revoke_a_token(page: Page, suffix: str) -> None:
    login(page, "alice", PASSWORD)
    page.goto("/accounts/tokens/")
    expect(page.get_by_role("heading", name="Tokens (0)")).to_be_visible()
    check(page, f"account-tokens-empty{suffix}")

    page.get_by_label("Lifetime in days").fill("0")
    with page.expect_navigation():
        page.get_by_role("button", name="Create token").click()
    expect(page.get_by_role("alert")).to_contain_text("Lifetime in days:")
    assert ApiToken.objects.count() == 0
    check(page, f"account-tokens-error{suffix}")

    page.get_by_label("Name").fill("laptop")
    page.get_by_label("Lifetime in days").fill("30")
    with page.expect_navigation():
        page.get_by_role("button", name="Create token").click()
    key = page.get_by_label("Key").input_value()
    token = ApiToken.objects.get(user__username="alice")
    assert token.name == "laptop" and key.startswith(token.prefix) and len(key) > 30
    expect(page.get_by_role("heading", name="Tokens (1)")).to_be_visible()
    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("laptop")
    check(page, f"account-tokens-created{suffix}")

    # The key is shown once: the page read again does not show it.
    page.goto("/accounts/tokens/")
    expect(page.get_by_label("Key")).to_have_count(0)
    assert key not in page.content()

    page.get_by_role("link", name="Revoke laptop").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Revoke the token “laptop”")
    check(page, f"account-token-revoke{suffix}")
    with page.expect_navigation():
        page.get_by_role("button", name="Revoke token").click()
    expect(page.get_by_role("status")).to_contain_text("was revoked")
    expect(page.get_by_role("heading", name="Tokens (0)")).to_be_visible()
    assert not ApiToken.objects.exists()


def test_create_and_revoke_a_token(page: Page, cast) -> None:
    create_and_revoke_a_token(page, "")


def test_create_and_revoke_a_token_without_javascript(page_nojs: Page, cast) -> None:
    create_and_revoke_a_token(page_nojs, "-nojs")
