"""The import page past the import throttle (issue 17, finding 2): the
reason and when to try again, in the import card, with status 429; nothing
imported. Screenshots at 1280 and 390 px, and an axe scan."""

import json

import pytest
from playwright.sync_api import Page
from rest_framework.throttling import SimpleRateThrottle

from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD
from workspace.models import Study

PHONE = {"width": 390, "height": 844}


def import_bundle(page: Page, path, status: int) -> None:
    page.goto("/studies/new/")
    page.get_by_label("Bundle file").set_input_files(str(path))
    with page.expect_response(lambda r: r.url.endswith("/studies/new/") and r.request.method == "POST") as answer:
        page.get_by_role("button", name="Import bundle", exact=True).click()
    assert answer.value.status == status
    page.wait_for_load_state()


@pytest.mark.django_db(transaction=True)
def test_the_import_page_says_when_to_try_again(page: Page, cast, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {**SimpleRateThrottle.THROTTLE_RATES, "import": "1/hour"})
    login(page, "alice", PASSWORD)
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(json.dumps({"format": "approve-study/1", "title": "Imported once"}))
    second.write_text(json.dumps({"format": "approve-study/1", "title": "Imported twice"}))
    import_bundle(page, first, 302)
    import_bundle(page, second, 429)
    refused = page.locator("#import-refused")
    assert refused.inner_text().startswith(
        "Too many imports: each user may import at most 1 study per hour (the site's IMPORT_THROTTLE_RATE). "
        "Try again in 60 minutes."
    )
    assert list(Study.objects.values_list("title", flat=True)) == ["Imported once"]
    refused.scroll_into_view_if_needed()
    screenshot(page, "study-new-import-throttled")
    assert_accessible(page)
    page.set_viewport_size(PHONE)
    screenshot(page, "study-new-import-throttled-phone")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"]
