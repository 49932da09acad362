"""The designer's console in a real browser: a study created, set up and
measured through the pages, an invitation link that a newcomer follows in a
second browser to create an account and join; then the same forms with
JavaScript off. A screenshot and an axe scan of every page."""

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from tests.browser.conftest import _close_page, _open_page
from tests.browser.support import assert_accessible, javascript_disabled, login, screenshot
from tests.fixtures import PASSWORD
from workspace.models import Invitation, Measurement, Membership, Study

NEW_PASSWORD = "a-fresh-passphrase-for-dana-31"
BAD_CSV = """candidate,metric,value
J48,Success rate,0.847
JRip,Success rate,n/a
J48,Training time,4.1
Naive Bayes,Training time,0.3
"""
GOOD_CSV = "candidate\tSuccess rate\tTraining time\nJ48\t0.847\t4.1\nJRip\t0.865\t6.3\n"


@pytest.fixture
def newcomer(browser: Browser, live_server: LiveServer) -> Iterator[Page]:
    """A second browser (its own cookies, JavaScript on): the person who
    receives the invitation link."""
    context, opened = _open_page(browser, live_server, javascript=True)
    yield opened
    _close_page(context)


def check(page: Page, name: str) -> None:
    """Screenshot the page; scan it with axe when JavaScript runs."""
    screenshot(page, name)
    if not javascript_disabled(page):
        assert_accessible(page)


def submit(page: Page, button: str) -> None:
    with page.expect_navigation():
        page.get_by_role("button", name=button, exact=True).click()


def create_study(page: Page, title: str) -> int:
    page.goto("/studies/new/")
    check(page, f"study-new{'-nojs' if javascript_disabled(page) else ''}")
    page.get_by_label("Title").fill(title)
    page.get_by_label("Description").fill("Which learner to deploy in the clinic")
    page.get_by_label("Attribute vote threshold").fill("1")
    submit(page, "Create study")
    match = re.search(r"/studies/(\d+)/$", page.url)
    assert match, f"not sent to the study home: {page.url}"
    study = Study.objects.get(pk=int(match.group(1)))
    assert study.title == title and study.designer.username == "alice"
    return study.pk


def add_metric(page: Page, attribute: str, name: str, better: str, unit: str, least: str, desired: str) -> None:
    form = page.locator("#add-metric form")
    form.get_by_label("Attribute").select_option(label=attribute)
    form.get_by_label("Name").fill(name)
    form.get_by_label("Direction").select_option(label=better)
    form.get_by_label("Unit").fill(unit)
    form.get_by_label("Least acceptable value").fill(least)
    form.get_by_label("Desired value").fill(desired)
    submit(page, "Add metric")


def set_up(page: Page, study_id: int, *, screenshots: str) -> None:
    """Attributes from the catalogue and written by hand, metrics (one
    refused first), candidates."""
    page.goto(f"/studies/{study_id}/setup/")
    check(page, f"setup-empty{screenshots}")
    submit(page, "Add Accuracy as main")
    submit(page, "Add Efficiency as complementary")
    form = page.locator("#add-attribute form.form")
    form.get_by_label("Name").fill("Robustness")
    form.get_by_label("Complementary (selected by vote)").check()
    form.get_by_label("Definition").fill("keeps working on data unlike its training data")
    submit(page, "Add attribute")
    rows = page.locator("#attributes tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("correct and precise")  # the catalogue's definition

    # A default range with one bound is refused, naming the field.
    add_metric(page, "Accuracy", "Success rate", "Higher is better", "", "0.8", "")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Desired value")
    expect(page.locator("#add-metric .field--invalid")).to_contain_text("give both values")
    check(page, f"setup-metric-error{screenshots}")
    add_metric(page, "Accuracy", "Success rate", "Higher is better", "", "0.8", "0.95")
    add_metric(page, "Efficiency", "Training time", "Lower is better", "s", "60", "1")

    for name in ("J48", "JRip"):
        form = page.locator("#add-candidate form")
        form.get_by_label("Name").fill(name)
        submit(page, "Add candidate")
    expect(page.locator("#metrics tbody tr")).to_have_count(2)
    expect(page.locator("#metrics tbody tr").nth(1)).to_contain_text("60 (least acceptable) to 1 (desired)")
    expect(page.locator("#candidates tbody tr")).to_have_count(2)
    check(page, f"setup-designer{screenshots}")


def measure(page: Page, study_id: int, *, screenshots: str) -> None:
    """A wrong CSV is refused whole with its lines named; a right one is
    saved; then one cell of the table is edited."""
    page.goto(f"/studies/{study_id}/measurements/")
    page.get_by_label("Paste CSV").fill(BAD_CSV)
    submit(page, "Save from CSV")
    problems = page.locator("#csv-problems li").all_inner_texts()
    assert problems == [
        "line 3, column value: not a number ('n/a')",
        "line 5, column candidate: no candidate named 'Naive Bayes' in this study",
    ]
    assert Measurement.objects.filter(candidate__study_id=study_id).count() == 0
    check(page, f"measurements-csv-error{screenshots}")

    page.get_by_label("Paste CSV").fill(GOOD_CSV)
    submit(page, "Save from CSV")
    expect(page.locator(".messages")).to_contain_text("4 measured values saved from the CSV")
    cell = page.get_by_label("Training time of JRip")
    expect(cell).to_have_value("6.3")
    cell.fill("5.9")
    submit(page, "Save measurements")
    expect(page.get_by_label("Training time of JRip")).to_have_value("5.9")
    values = dict(
        Measurement.objects.filter(candidate__study_id=study_id)
        .values_list("metric__name", "value")
        .filter(candidate__name="JRip")
    )
    assert values == {"Success rate": 0.865, "Training time": 5.9}
    check(page, f"measurements-designer{screenshots}")


def build_study(page: Page, title: str) -> int:
    """alice creates, sets up and measures a study through the pages."""
    suffix = "-nojs" if javascript_disabled(page) else ""
    login(page, "alice", PASSWORD)
    study_id = create_study(page, title)
    set_up(page, study_id, screenshots=suffix)
    measure(page, study_id, screenshots=suffix)
    return study_id


def test_designer_sets_up_a_study_and_a_newcomer_joins_by_link(
    page: Page, newcomer: Page, live_server: LiveServer, cast: object
) -> None:
    study_id = build_study(page, "Choosing a classifier")

    # An item's edit page and a removal's confirmation.
    page.goto(f"/studies/{study_id}/setup/")
    page.get_by_role("link", name="Edit Success rate").click()
    expect(page.get_by_label("Least acceptable value")).to_have_value("0.8")
    check(page, "setup-edit-metric")
    page.goto(f"/studies/{study_id}/setup/")
    page.get_by_role("link", name="Remove JRip").click()
    expect(page.locator(".consequences")).to_contain_text("2 measured values of this candidate are deleted")
    check(page, "setup-remove-candidate")
    page.get_by_role("link", name="Cancel").click()

    # The experts page: a link invitation shown once, with a copy button.
    page.goto(f"/studies/{study_id}/experts/")
    check(page, "experts-empty")
    submit(page, "Create an invitation link")
    link = page.get_by_label("Link to send").input_value()
    assert re.fullmatch(rf"{re.escape(live_server.url)}/invitations/[A-Za-z0-9_-]{{20,}}/", link), link
    copy = page.locator("button[data-copy='new-link']")
    expect(copy).to_be_visible()
    copy.click()
    expect(page.locator(".new-link .copy-status")).not_to_be_empty()
    check(page, "experts-new-link")

    # The newcomer opens it in another browser, creates an account and joins.
    newcomer.goto(link)
    expect(newcomer.get_by_role("heading", level=1)).to_have_text("Choosing a classifier")
    expect(newcomer.locator(".facts")).to_contain_text("alice")
    check(newcomer, "invitation-signup")
    newcomer.get_by_label("Username").fill("dana")
    newcomer.get_by_label("Password", exact=True).fill("short")
    newcomer.get_by_label("Password confirmation").fill("short")
    submit(newcomer, "Create account and join")
    expect(newcomer.locator(".field--invalid")).to_contain_text("too short")
    check(newcomer, "invitation-signup-error")
    # A name that reads as the designer's (full width, upper case) is taken.
    newcomer.get_by_label("Username").fill("ＡＬＩＣＥ")
    newcomer.get_by_label("Password", exact=True).fill(NEW_PASSWORD)
    newcomer.get_by_label("Password confirmation").fill(NEW_PASSWORD)
    submit(newcomer, "Create account and join")
    expect(newcomer.locator(".field--invalid")).to_contain_text("this username is taken")
    check(newcomer, "invitation-signup-taken")
    newcomer.get_by_label("Username").fill("dana")
    newcomer.get_by_label("Password", exact=True).fill(NEW_PASSWORD)
    newcomer.get_by_label("Password confirmation").fill(NEW_PASSWORD)
    submit(newcomer, "Create account and join")
    assert newcomer.url == f"{live_server.url}/studies/{study_id}/"
    membership = Membership.objects.get(study_id=study_id, user__username="dana")
    assert (membership.role, membership.status) == ("expert", "active")

    # The newcomer reads the setup; the used link now says so.
    newcomer.goto(f"/studies/{study_id}/setup/")
    expect(newcomer.get_by_role("button", name="Add candidate")).to_have_count(0)
    expect(newcomer.locator("#candidates")).to_contain_text("JRip")
    check(newcomer, "setup-expert")
    newcomer.goto(f"/studies/{study_id}/measurements/")
    expect(newcomer.locator(".measurement-table input")).to_have_count(0)
    check(newcomer, "measurements-expert")
    newcomer.goto(link)
    expect(newcomer.get_by_role("alert")).to_contain_text("already been used")
    check(newcomer, "invitation-used")

    # The designer sees dana as an active expert and the link as accepted.
    page.goto(f"/studies/{study_id}/experts/")
    expect(page.get_by_role("region", name="Members")).to_contain_text("dana")
    expect(page.get_by_role("region", name="Invitations")).to_contain_text("Accepted by dana")
    check(page, "experts-designer")
    page.get_by_role("link", name="Inputs of dana").click()
    expect(page.get_by_role("heading", name="Inputs of dana")).to_be_visible()
    check(page, "inputs")
    page.goto(f"/studies/{study_id}/experts/dana/remove/")
    expect(page.locator(".consequences")).to_contain_text("their votes, priorities, acceptable ranges")
    check(page, "experts-remove")


def test_an_existing_user_logs_in_through_the_link_and_accepts(
    page: Page, newcomer: Page, live_server: LiveServer, cast: object
) -> None:
    from workspace import invitations, services

    study = services.study_create(designer=cast.alice, title="Picking a learner")
    _invitation, key = invitations.invitation_create(study=study, created_by=cast.alice)
    newcomer.goto(f"/invitations/{key}/")
    newcomer.get_by_role("link", name="Log in").click()
    newcomer.get_by_label("Username").fill("bob")
    newcomer.get_by_label("Password").fill(PASSWORD)
    submit(newcomer, "Sign in")
    assert newcomer.url == f"{live_server.url}/invitations/{key}/"
    check(newcomer, "invitation-accept")
    newcomer.get_by_role("link", name="Decline").click()
    check(newcomer, "invitation-decline")
    newcomer.get_by_role("link", name="Back").click()
    submit(newcomer, "Accept and join")
    assert newcomer.url == f"{live_server.url}/studies/{study.pk}/"
    assert Membership.objects.filter(study=study, user=cast.bob, role="expert", status="active").exists()
    assert Invitation.objects.get(study=study).status == "accepted"

    page.goto("/invitations/not-a-key-of-any-invitation/")
    check(page, "invitation-unknown")


def test_the_designer_forms_work_without_javascript(page_nojs: Page, live_server: LiveServer, cast: object) -> None:
    page = page_nojs
    study_id = build_study(page, "Without JavaScript")

    # Removing a candidate through its confirmation page.
    page.goto(f"/studies/{study_id}/setup/")
    page.get_by_role("link", name="Remove JRip").click()
    submit(page, "Remove candidate")
    expect(page.locator(".messages")).to_contain_text("The candidate “JRip” was removed.")
    expect(page.locator("#candidates tbody tr")).to_have_count(1)

    # Invitations by username and by link; the copy button stays hidden.
    page.goto(f"/studies/{study_id}/experts/")
    page.get_by_label("Username").fill("bob")
    submit(page, "Invite")
    expect(page.locator(".messages")).to_contain_text("bob is invited")
    submit(page, "Create an invitation link")
    link = page.get_by_label("Link to send")
    expect(link).to_have_value(re.compile(r"/invitations/"))
    expect(page.locator("button[data-copy='new-link']")).to_be_hidden()
    screenshot(page, "experts-new-link-nojs")
    assert Invitation.objects.filter(study_id=study_id, status="pending").count() == 2


def test_the_demo_study_as_its_designer_sees_it_once_closed(page: Page, demo) -> None:
    """A closed study: setup and measurements read-only with the reasons,
    each expert's saved inputs, what is still missing, the reminder link."""
    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{demo.study.pk}/setup/")
    expect(page.locator("#attributes .lock-note")).to_contain_text("the study is in the closed phase")
    expect(page.get_by_role("button", name="Add attribute")).to_have_count(0)
    check(page, "setup-closed")
    page.goto(f"/studies/{demo.study.pk}/measurements/")
    check(page, "measurements-closed")
    page.goto(f"/studies/{demo.study.pk}/experts/")
    expect(page.get_by_label("Reminder link (the study's home page)")).to_have_value(
        re.compile(rf"/studies/{demo.study.pk}/$")
    )
    check(page, "experts-closed")
    expert = demo.experts[-1]
    page.get_by_role("link", name=f"Inputs of {expert}").click()
    expect(page.get_by_role("heading", name=f"Inputs of {expert}")).to_be_visible()
    expect(page.locator("section[aria-labelledby='priorities-title']")).to_contain_text("Weight")
    check(page, "inputs-demo")
