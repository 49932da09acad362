"""Two-factor sign-in in the browser (issue 32, item 3): set it up with a
real authenticator (pyotp) from the page's own secret, keep the recovery
codes, then sign in with the password and the code; every page at 1280 and
390 px, without horizontal scrolling, accessible, the QR code inline under
the Content-Security-Policy."""

import time

import pyotp
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


def fits(page: Page, width: int) -> None:
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{page.url} is {scroll} px wide at {width} px"


def both_widths(page: Page, name: str) -> None:
    """Screenshots at 1280 and 390 px, each without horizontal scrolling, then back to 1280."""
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        fits(page, size["width"])
        screenshot(page, f"two-factor-{name}-{label}")
    page.set_viewport_size(DESKTOP)


def test_set_up_then_sign_in_with_the_code(page: Page, live_server: LiveServer, cast) -> None:
    login(page, "alice", PASSWORD)
    page.goto("/accounts/two-factor/")
    expect(page.get_by_role("heading", name="Set up two-factor sign-in")).to_be_visible()
    expect(page.get_by_role("img", name="QR code: scan it with your authenticator app")).to_be_visible()
    secret = page.locator("#two-factor-secret").inner_text().replace(" ", "")
    both_widths(page, "setup")
    assert_accessible(page)

    page.get_by_label("Code from the app").fill("000000" if pyotp.TOTP(secret).now() != "000000" else "111111")
    page.get_by_role("button", name="Confirm and turn on").click()
    expect(page.get_by_text("That code does not match")).to_have_count(2)  # above the form and at the field
    page.get_by_label("Code from the app").fill(pyotp.TOTP(secret).now())
    page.get_by_role("button", name="Confirm and turn on").click()
    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()
    codes = page.locator("ol.two-factor-codes__list code").all_inner_texts()
    assert len(codes) == 10
    both_widths(page, "recovery-codes")
    assert_accessible(page)
    page.get_by_role("link", name="I have saved them, continue").click()
    expect(page.get_by_role("heading", name="Your studies")).to_be_visible()

    page.goto("/accounts/two-factor/")
    expect(page.get_by_role("heading", name="Two-factor sign-in is on")).to_be_visible()
    both_widths(page, "on")
    assert_accessible(page)
    page.get_by_role("link", name="Turn off two-factor sign-in").click()
    expect(page.get_by_role("heading", name="Turn off two-factor sign-in?")).to_be_visible()
    both_widths(page, "turn-off")

    page.get_by_role("button", name="Log out").first.click()
    login(page, "alice", PASSWORD)
    assert "/accounts/two-factor/verify/" in page.url
    expect(page.get_by_role("heading", name="Enter your code")).to_be_visible()
    both_widths(page, "verify")
    assert_accessible(page)
    # The code of the next time step: the current one confirmed the set-up.
    page.get_by_label("Code", exact=True).fill(pyotp.TOTP(secret).at(time.time(), counter_offset=1))
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="Your studies")).to_be_visible()
    assert page.url == f"{live_server.url}/"


def test_staff_are_sent_to_set_it_up(page: Page, live_server: LiveServer, cast) -> None:
    cast.alice.is_staff = True
    cast.alice.save(update_fields=["is_staff"])
    login(page, "alice", PASSWORD)
    assert page.url.startswith(f"{live_server.url}/accounts/two-factor/?next=")
    expect(page.get_by_text("Your account must use two-factor sign-in.")).to_be_visible()
    both_widths(page, "setup-required")
    page.goto("/accounts/tokens/")
    assert page.url.startswith(f"{live_server.url}/accounts/two-factor/")
