"""Helpers for the browser tests: the Chromium launch options, logging in,
screenshots and the axe-core accessibility scan.

The fixtures that use these live in ``conftest.py``; tests import the
helpers from here (``from tests.browser.support import login, ...``).
"""

import os
import re
from pathlib import Path

from playwright.sync_api import Page

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# Debian's Chromium as Playwright drives it here: no sandbox (tests run as
# root in containers), no GPU, and nothing that talks to the internet on its own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
VIEWPORT = {"width": 1280, "height": 800}
# Long enough for a loaded CI machine, short enough that a missing element
# fails the test in seconds rather than Playwright's default 30.
TIMEOUT_MS = 10_000

# A test tool, kept out of static/ so that it never ships (tests/tools/README.md).
AXE_JS = REPO / "tests" / "tools" / "axe-core" / "axe.min.js"
BLOCKING_IMPACTS = ("serious", "critical")

SCREENSHOT_DIR_DEFAULT = REPO / ".artifacts" / "screenshots"
_SCREENSHOT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# Names written in this run: the folder of the summary, and a guard against
# two tests silently overwriting each other's picture.
screenshots_taken: list[Path] = []


def screenshot_dir() -> Path:
    """Where screenshots go: ``$SCREENSHOT_DIR`` if set, else
    ``.artifacts/screenshots/`` in the repository (git-ignored)."""
    configured = os.environ.get("SCREENSHOT_DIR")
    return Path(configured).resolve() if configured else SCREENSHOT_DIR_DEFAULT


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page PNG of ``page`` as ``<name>.png`` and return its path.

    The first screenshot of a run empties the default folder of old PNGs, so
    what it holds after a run is that run's pages (a folder given by
    ``$SCREENSHOT_DIR`` is never emptied)."""
    if not _SCREENSHOT_NAME.match(name):
        raise ValueError(f"screenshot name {name!r}: use lower-case letters, digits, '-' and '_'")
    folder = screenshot_dir()
    path = folder / f"{name}.png"
    if path in screenshots_taken:
        raise AssertionError(f"screenshot {name!r} was already taken in this run: give each page its own name")
    if not screenshots_taken and folder == SCREENSHOT_DIR_DEFAULT and folder.is_dir():
        for old in folder.glob("*.png"):
            old.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    screenshots_taken.append(path)
    return path


def submit_login(page: Page, username: str, password: str) -> None:
    """Open the login page, fill the form through its labels and submit it,
    waiting for the answer page to load (works with JavaScript off too)."""
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()


def login(page: Page, username: str, password: str) -> Page:
    """Log ``username`` in through the login form; fails with the page's own
    error message if the login page answers again."""
    submit_login(page, username, password)
    if page.url.split("?")[0].endswith("/accounts/login/"):
        errors = page.locator(".message--error, .field__errors").all_inner_texts()
        raise AssertionError(f"logging in as {username!r} failed: {' '.join(errors) or 'no error shown'}")
    return page


def javascript_disabled(page: Page) -> bool:
    return getattr(page.context, "approve_javascript_disabled", False)


def page_problems(page: Page) -> list[str]:
    """What the fixtures recorded on ``page`` so far (CSP refusals, JavaScript
    errors, static files answering an error): a list a test may clear."""
    return page.context.approve_problems


def axe_violations(page: Page, impacts: tuple[str, ...] = BLOCKING_IMPACTS) -> list[dict]:
    """Run axe-core on the page as it is now and return its violations of the
    given impacts (serious and critical by default), each as
    ``{"id", "impact", "help", "nodes": [{"target", "summary"}]}``: per
    element its CSS selector and axe's explanation (e.g. the contrast ratio
    it measured).

    axe is evaluated from the vendored file through Playwright, which runs it
    in the page without going through the page's Content-Security-Policy: the
    pages keep their real policy in these tests (see ``conftest.py``). With
    JavaScript disabled axe cannot run (its checks wait on timers the page
    never fires), so that is refused rather than left to hang."""
    if javascript_disabled(page):
        raise RuntimeError("axe needs JavaScript: scan the page from the `page` fixture, not `page_nojs`")
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE_JS.read_text(encoding="utf-8"))
    violations = page.evaluate(
        r"""async () => {
            const results = await window.axe.run(document, {resultTypes: ["violations"]});
            return results.violations.map(v => ({
                id: v.id,
                impact: v.impact,
                help: v.help,
                nodes: v.nodes.map(n => ({
                    target: n.target.join(" "),
                    summary: (n.failureSummary || "").replace(/\s+/g, " ").trim(),
                })),
            }));
        }"""
    )
    return [violation for violation in violations if violation["impact"] in impacts]


def describe_violations(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"- {v['id']} ({v['impact']}): {v['help']}")
        lines.extend(f"    on {node['target']}: {node['summary']}" for node in v["nodes"])
    return "\n".join(lines)


def assert_accessible(page: Page, known: frozenset[tuple[str, str]] = frozenset()) -> None:
    """Fail listing every serious or critical axe violation on the page:
    rule id, impact, what the rule asks and, per element, its selector and
    axe's explanation.

    ``known``: ``(rule id, selector)`` pairs of violations already reported
    and waiting for a fix elsewhere; they are tolerated on exactly those
    elements, and the check fails once one no longer occurs, so the
    allowance goes as soon as the fix lands."""
    violations, seen = [], set()
    for violation in axe_violations(page):
        seen.update((violation["id"], node["target"]) for node in violation["nodes"])
        nodes = [node for node in violation["nodes"] if (violation["id"], node["target"]) not in known]
        if nodes:
            violations.append({**violation, "nodes": nodes})
    problems = []
    if violations:
        problems.append(
            f"{len(violations)} serious or critical accessibility violation(s) on {page.url}:\n"
            + describe_violations(violations)
        )
    gone = sorted(known - seen)
    if gone:
        problems.append(f"known violation(s) no longer found on {page.url}, remove them from the allowance: {gone}")
    if problems:
        raise AssertionError("\n".join(problems))
