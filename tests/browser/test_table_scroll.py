"""Issue 31, finding 13, in Chromium: a table wider than its box says so.
At 390 px the demo's measurements table overflows: its box fades out at the
edge with more to see, and a caption before it, which the region is
described by, says to scroll sideways; scrolled to the end the fade moves
to the start. At 1280 px the same table fits: neither fade nor caption.
Screenshots at both widths."""

from playwright.sync_api import Page, expect

from tests.browser.support import login, screenshot
from tests.fixtures import PASSWORD

HINT = "⇆ Scroll sideways to see the whole table."
OVERFLOWS = "table-scroll table-scroll--overflows"


def test_a_table_wider_than_its_box_says_so(page: Page, demo) -> None:
    login(page, demo.designer, PASSWORD)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/studies/{demo.study.pk}/measurements/")
    box = page.locator(".measurement-table").locator("xpath=..")
    hint = page.locator(".table-scroll__hint")
    expect(box).to_have_class(f"{OVERFLOWS} table-scroll--more-end")
    expect(hint).to_have_count(1)
    expect(hint).to_be_visible()
    expect(hint).to_have_text(HINT)
    assert box.get_attribute("aria-describedby") == hint.get_attribute("id")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # the box scrolls, not the page
    screenshot(page, "table-scroll-measurements-390")
    box.evaluate("box => { box.scrollLeft = box.scrollWidth; }")
    expect(box).to_have_class(f"{OVERFLOWS} table-scroll--more-start")
    box.evaluate("box => { box.scrollLeft = box.scrollWidth / 3; }")
    expect(box).to_have_class(f"{OVERFLOWS} table-scroll--more-start table-scroll--more-end")
    # Wide enough: the cue goes.
    page.set_viewport_size({"width": 1280, "height": 800})
    expect(box).to_have_class("table-scroll")
    expect(hint).to_be_hidden()
    screenshot(page, "table-scroll-measurements-1280")
