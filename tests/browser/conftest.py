"""Browser tests: Playwright for Python driving Debian's Chromium against
pytest-django's ``live_server``.

Chromium
    The tests launch ``/usr/bin/chromium`` (Debian's package; Playwright's own
    browser download is never used). ``.ci/run`` installs it when missing.
    On a machine without it the browser tests are *skipped* with that reason
    (shown by ``-ra``), so ``make test`` works on a fresh machine; but when
    the environment variable ``CI`` is set and not empty (``.ci/run`` sets
    it, as CI services do), a missing Chromium makes every browser test
    *fail*: CI never passes without having run them.

Fixtures
    ``browser``    one Chromium for the whole test session;
    ``page``       a new browser context per test (fresh cookies), JavaScript
                   on, ``base_url`` set to the live server: ``page.goto("/")``;
    ``page_nojs``  the same with JavaScript disabled, for the forms that must
                   work without it;
    ``demo``       the case-study-1 study imported from its bundle, its
                   designer and experts with the password ``PASSWORD``;
    plus ``cast`` (alice, bob, carol, charlie) from the workspace tests.
    Helpers (``login``, ``screenshot``, ``axe_violations``,
    ``assert_accessible``) are in ``support.py``.

Content-Security-Policy
    The contexts do NOT set Playwright's ``bypass_csp``: with it Chromium
    ignores the page's policy altogether (inline scripts and style attributes
    would run in the tests and be blocked for real users). axe is evaluated
    through Playwright instead, which needs no bypass. Each page records
    CSP refusals, uncaught JavaScript errors and static files answering an
    error status; a test that leaves any fails at teardown with the list.
    A test that provokes one on purpose clears ``support.page_problems(page)``.

Screenshots
    ``screenshot(page, name)`` writes ``<name>.png`` to ``$SCREENSHOT_DIR``
    or ``.artifacts/screenshots/``; the run ends by printing the folder.

Every test under ``tests/browser`` gets the ``browser`` marker: select or
leave them out with ``-m browser`` / ``-m "not browser"``.
"""

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, Response, sync_playwright
from pytest_django.fixtures import Settings
from pytest_django.live_server_helper import LiveServer

from tests.browser import support
from tests.fixtures import CASE_STUDY_PATH, PASSWORD, cast  # noqa: F401  (fixture re-exported)
from workspace.bundles import study_import_bundle
from workspace.models import Study

# Playwright's sync API keeps an event loop on the main thread, where Django's
# ORM then refuses to run; the tests and the live server are synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.browser)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if support.screenshots_taken:
        terminalreporter.write_sep("-", "browser screenshots")
        terminalreporter.write_line(f"{len(support.screenshots_taken)} screenshot(s) in {support.screenshot_dir()}")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not support.CHROMIUM.exists():
        message = f"Chromium not found at {support.CHROMIUM}: install Debian's package (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI is set, so the browser tests may not be skipped", pytrace=False)
        pytest.skip(f"{message} to run the browser tests (they fail instead when CI is set)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(support.CHROMIUM), args=support.CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(autouse=True)
def _browser_test_settings(settings: Settings, eager_celery: object) -> Iterator[None]:
    """Fast password hashing (the cast and the demo have real passwords), no
    login-failure counts carried over from another test, and runs launched
    in the browser executed at once: with REDIS_URL set (CI) no worker takes
    them; the real-stack tests cover workers."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    cache.clear()
    yield
    cache.clear()


def _open_page(browser: Browser, live_server: LiveServer, *, javascript: bool) -> tuple[BrowserContext, Page]:
    context = browser.new_context(
        base_url=live_server.url, viewport=support.VIEWPORT, java_script_enabled=javascript, locale="en-GB"
    )
    context.set_default_timeout(support.TIMEOUT_MS)
    context.approve_javascript_disabled = not javascript
    problems = context.approve_problems = []

    def on_console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            problems.append(f"CSP: {message.text}")

    def on_response(response: Response) -> None:
        if response.status >= 400 and "/static/" in response.url:
            problems.append(f"static file {response.url} answered {response.status}")

    context.on("console", on_console)
    context.on("weberror", lambda error: problems.append(f"JavaScript error: {error.error}"))
    context.on("response", on_response)
    return context, context.new_page()


def _close_page(context: BrowserContext) -> None:
    problems = list(context.approve_problems)
    context.close()
    if problems:
        pytest.fail("the page reported problems:\n" + "\n".join(f"- {p}" for p in problems), pytrace=False)


@pytest.fixture
def page(browser: Browser, live_server: LiveServer) -> Iterator[Page]:
    context, opened = _open_page(browser, live_server, javascript=True)
    yield opened
    _close_page(context)


@pytest.fixture
def page_nojs(browser: Browser, live_server: LiveServer) -> Iterator[Page]:
    context, opened = _open_page(browser, live_server, javascript=False)
    yield opened
    _close_page(context)


@dataclass
class Demo:
    study: Study
    designer: str  # usernames, all with the password PASSWORD
    experts: list[str]


@pytest.fixture
def demo(transactional_db: None) -> Demo:
    """The demo study (case-study-1) as ``load_demo`` imports it, its
    designer and experts with known passwords."""
    bundle = json.loads(CASE_STUDY_PATH.read_text(encoding="utf-8"))
    study = study_import_bundle(bundle=bundle)
    User = get_user_model()
    for user in User.objects.filter(username__in=[bundle["designer"], *bundle["experts"]]):
        user.set_password(PASSWORD)
        user.save(update_fields=["password"])
    return Demo(study=study, designer=bundle["designer"], experts=list(bundle["experts"]))
