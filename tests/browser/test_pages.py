"""The pages that exist before the browser workspace, in a real browser:
login (with and without JavaScript) and the study list."""

from playwright.sync_api import Page

from tests.browser.support import assert_accessible, javascript_disabled, login, screenshot, submit_login
from tests.fixtures import PASSWORD

WRONG_LOGIN = "Please enter a correct username and password"


def test_login_page_loads_and_is_accessible(page: Page) -> None:
    response = page.goto("/accounts/login/")
    assert response.status == 200
    assert page.title() == "Sign in · approve"
    assert page.get_by_role("heading", level=1).inner_text() == "Sign in to approve"
    assert page.get_by_label("Username").evaluate("el => el === document.activeElement")
    screenshot(page, "login")
    assert_accessible(page)


def test_home_lists_the_demo_study_for_its_designer(page: Page, live_server, demo) -> None:
    login(page, demo.designer, PASSWORD)
    assert page.url == f"{live_server.url}/"
    assert page.get_by_role("heading", level=1).inner_text() == "Your studies"
    rows = page.locator("table tbody tr")
    assert rows.count() == 1
    cells = [cell.strip() for cell in rows.first.locator("td").all_inner_texts()]
    assert cells[0].startswith(demo.study.title)
    assert cells[1:4] == ["Closed", f"{demo.designer} (you)", "Designer"]
    assert cells[4].startswith("As designer: Closed: inputs are frozen.")
    screenshot(page, "home-designer")
    assert_accessible(page)


def test_home_of_someone_in_no_study_says_so(page: Page, cast) -> None:
    login(page, "charlie", PASSWORD)
    assert page.get_by_role("heading", level=2).inner_text() == "No studies yet"
    assert page.locator("table").count() == 0
    screenshot(page, "home-empty")
    assert_accessible(page)


def check_wrong_then_right_password(page: Page, home_url: str, demo, name: str) -> None:
    submit_login(page, demo.designer, "not-the-password")
    assert page.url.endswith("/accounts/login/")
    assert WRONG_LOGIN in page.get_by_role("alert").inner_text()
    assert page.get_by_label("Username").input_value() == demo.designer
    assert page.get_by_label("Password").input_value() == ""
    screenshot(page, name)
    if not javascript_disabled(page):
        assert_accessible(page)

    login(page, demo.designer, PASSWORD)
    assert page.url == home_url
    assert page.get_by_role("heading", level=1).inner_text() == "Your studies"
    assert page.get_by_text(demo.study.title).is_visible()


def test_wrong_password_shows_the_error_then_the_right_one_lands_on_the_study_list(
    page: Page, live_server, demo
) -> None:
    check_wrong_then_right_password(page, f"{live_server.url}/", demo, "login-error")


def test_login_works_without_javascript(page_nojs: Page, live_server, demo) -> None:
    check_wrong_then_right_password(page_nojs, f"{live_server.url}/", demo, "login-error-nojs")
