"""Copying a study in Chromium (issue 31, item 3): the designer of the demo
study (closed, four experts' inputs) clicks *Copy this study…* on its home,
reads what is copied and what never is, and lands on the copy's setup: a
draft with the same attributes, metrics and candidates, no experts and
nobody's inputs. The confirmation and the new-study page fit a phone."""

from playwright.sync_api import Page, expect

from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD
from workspace.bundles import study_export_bundle
from workspace.models import Membership, Phase, Study

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


def fits(page: Page, width: int) -> None:
    """Nothing wider than the viewport: no sideways scroll."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_designer_copies_the_demo_study_from_its_home(page: Page, live_server, demo) -> None:
    original = study_export_bundle(study=demo.study)
    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{demo.study.pk}/")
    page.get_by_role("link", name="Copy this study…").click()
    expect(page.get_by_role("heading", name=f"Copy “{demo.study.title}”", level=2)).to_be_visible()
    expect(page.locator("#copy-not-copied")).to_contain_text("Never copied: other people's inputs and the experts.")
    expect(page.get_by_label("Title of the new study")).to_have_value(f"Copy of {demo.study.title}")
    expect(page.get_by_label("Copy the measurements")).to_be_checked()
    expect(page.get_by_label("Copy the prediction sets")).not_to_be_checked()
    screenshot(page, "copy-study-confirm")
    assert_accessible(page)
    page.set_viewport_size(PHONE)
    fits(page, PHONE["width"])
    screenshot(page, "copy-study-confirm-phone")
    page.set_viewport_size(DESKTOP)

    page.get_by_label("Title of the new study").fill("Second panel")
    page.get_by_role("button", name="Copy the study").click()
    copy = Study.objects.exclude(pk=demo.study.pk).get()
    expect(page).to_have_url(f"{live_server.url}/studies/{copy.pk}/setup/")
    expect(page.get_by_text("The study “Second panel” was made from")).to_be_visible()
    expect(page.locator(".badge")).to_contain_text("Draft")
    screenshot(page, "copy-study-setup")

    assert (copy.title, copy.phase, copy.designer.username) == ("Second panel", Phase.DRAFT, demo.designer)
    copied = study_export_bundle(study=copy)
    for key in ("attributes", "metrics", "candidates", "attribute_threshold", "metric_threshold"):
        assert copied[key] == original[key], key
    assert copied["experts"] == [] and original["experts"] == demo.experts
    assert (copied["priorities"], copied["peer_weights"]) == ({}, {}) and original["priorities"]
    assert not Membership.objects.filter(study=copy, role="expert").exists()


def test_the_new_study_page_with_its_template_fits_a_phone(page: Page, live_server, demo) -> None:
    login(page, demo.designer, PASSWORD)
    page.set_viewport_size(PHONE)
    page.goto("/studies/new/")
    expect(page.get_by_role("heading", name="Or start from a template")).to_be_visible()
    expect(page.get_by_label("Study to start from")).to_contain_text(demo.study.title)
    fits(page, PHONE["width"])
    screenshot(page, "copy-study-new-page-phone")
    page.set_viewport_size(DESKTOP)
    screenshot(page, "copy-study-new-page")
    assert_accessible(page)
