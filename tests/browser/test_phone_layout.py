"""Every page of the page map fits a phone (issue 16, finding 3): at 390 px
no page is wider than its viewport, as the designer and as an expert, on the
demo study with a succeeded run, a second run to compare and a prediction
set, so that the results and the evaluation pages have their content. Wide
tables scroll inside their own box; the study's tabs wrap in their bar.
And at 1280 px the priorities step's weight panel keeps its names and values
inside (finding 10)."""

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from engine import services as engine_services
from evaluation import services as evaluation_services
from evaluation.models import PredictionSet
from tests.browser.support import TIMEOUT_MS, assert_accessible, axe_violations, describe_violations, login, screenshot
from tests.fixtures import PASSWORD
from workspace.models import Metric

PHONE = {"width": 390, "height": 844}
PREDICTIONS = Path("workspace/demo/case-study-1-predictions.csv")

# How wide the page is, and the elements reaching past the viewport's right
# edge that are not inside a box that scrolls or clips them (the culprits).
MEASURE = """(limit) => {
    const clipped = (el) => {
        for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
            const style = getComputedStyle(p);
            if (["auto", "scroll", "hidden", "clip"].includes(style.overflowX)) return true;
        }
        return false;
    };
    const wide = [];
    for (const el of document.body.querySelectorAll("*")) {
        const box = el.getBoundingClientRect();
        if (box.width && box.right > limit + 0.5 && !clipped(el)) {
            const name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
                (el.classList.length ? "." + [...el.classList].join(".") : "");
            wide.push(name + " (right " + Math.round(box.right) + ")");
        }
    }
    return {width: document.documentElement.scrollWidth, wide: wide.slice(0, 6)};
}"""


@pytest.fixture
def phone(browser: Browser, live_server: LiveServer):
    context = browser.new_context(base_url=live_server.url, viewport=PHONE, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not errors, errors


@pytest.fixture
def full_demo(demo):
    """The demo with two succeeded runs and the demo's prediction set."""
    study = demo.study
    runs = []
    for _ in range(2):
        run = engine_services.run_launch(study=study, launched_by=study.designer)
        engine_services.run_execute(run_id=run.pk)
        runs.append(run)
    with PREDICTIONS.open("rb") as stream:
        evaluation_services.prediction_set_import(
            study=study, stream=stream, name=PREDICTIONS.name, uploaded_by=study.designer, positive="tumour"
        )
    demo.runs = runs
    return demo


def overflowing(page: Page, paths: list[str], shoot: str) -> list[str]:
    problems = []
    for number, path in enumerate(paths, start=1):
        response = page.goto(path)
        assert response is not None and response.status == 200, f"{path} answered {response and response.status}"
        measured = page.evaluate(MEASURE, PHONE["width"])
        if measured["width"] > PHONE["width"]:
            problems.append(f"{path}: {measured['width']} px wide; past the edge: {', '.join(measured['wide'])}")
        # What a phone's layout adds (scrolling regions, wrapped tabs) must stay accessible too.
        # Not on the API docs: Swagger UI's own colours (third-party, drawn after load) fail
        # axe's contrast rule whatever the width; the page's width is checked all the same.
        violations = [] if path.startswith("/api/docs/") else axe_violations(page)
        if violations:
            problems.append(f"{path} at {PHONE['width']} px:\n" + describe_violations(violations))
        screenshot(page, f"phone-{shoot}-{number:02d}")
    return problems


def study_paths(demo, *, designer: bool) -> list[str]:
    study, (first, second) = demo.study, demo.runs
    base = f"/studies/{study.pk}"
    candidate = study.candidates.order_by("name").first().name
    paths = [
        "/",
        "/accounts/password/",
        "/accounts/tokens/",
        "/studies/new/",
        f"{base}/",
        f"{base}/setup/",
        f"{base}/measurements/",
        f"{base}/discussion/",
        f"{base}/rounds/",
        f"{base}/runs/",
        f"{base}/history/",
        f"/runs/{second.pk}/",
        f"/runs/{second.pk}/candidates/{candidate}/",
        f"/runs/{second.pk}/compare/{first.pk}/",
    ]
    if designer:
        prediction_set = PredictionSet.objects.get(study=study)
        metric = Metric.objects.filter(attribute__study=study).order_by("pk").first()
        attribute = study.attributes.order_by("pk").first()
        paths += [
            f"{base}/phase/assessment/",
            f"{base}/delete/",
            f"{base}/setup/attributes/{attribute.pk}/",
            f"{base}/setup/attributes/{attribute.pk}/remove/",
            f"{base}/experts/",
            f"{base}/inputs/{demo.experts[0]}/",
            f"{base}/predictions/",
            f"{base}/predictions/metrics/{metric.pk}/",
            f"{base}/predictions/{prediction_set.pk}/candidates/{candidate}/",
            f"{base}/predictions/{prediction_set.pk}/compare/",
            f"{base}/predictions/{prediction_set.pk}/delete/",
        ]
    else:
        paths += [f"{base}/my/{step}/" for step in ("votes", "priorities", "ranges", "peer-weights")]
    return paths


def test_every_page_fits_a_phone_as_the_designer(phone: Page, full_demo) -> None:
    login(phone, full_demo.designer, PASSWORD)
    problems = overflowing(phone, study_paths(full_demo, designer=True), "designer")
    assert not problems, "pages wider than 390 px or not accessible there:\n" + "\n".join(problems)


def test_every_page_fits_a_phone_as_an_expert(phone: Page, full_demo) -> None:
    login(phone, full_demo.experts[0], PASSWORD)
    problems = overflowing(phone, study_paths(full_demo, designer=False), "expert")
    assert not problems, "pages wider than 390 px or not accessible there:\n" + "\n".join(problems)


def test_the_open_pages_fit_a_phone(phone: Page) -> None:
    problems = overflowing(phone, ["/accounts/login/", "/accounts/password/reset/", "/api/docs/"], "open")
    assert not problems, "pages wider than 390 px or not accessible there:\n" + "\n".join(problems)


def test_the_study_tabs_wrap_and_each_can_be_tapped_on_a_phone(phone: Page, full_demo) -> None:
    login(phone, full_demo.designer, PASSWORD)
    phone.goto(f"/studies/{full_demo.study.pk}/")
    tabs = phone.get_by_role("navigation", name="Study").get_by_role("link")
    names = tabs.all_inner_texts()
    assert len(names) >= 6
    screenshot(phone, "phone-study-home")
    for name in names[1:]:
        with phone.expect_navigation():
            phone.get_by_role("navigation", name="Study").get_by_role("link", name=name, exact=True).click()
        assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_the_weight_panel_keeps_names_and_values_inside_at_1280(page: Page, demo) -> None:
    """The demo's experts weigh Comprehensibility at about 30 %: the name is
    not broken inside the word and the value stays inside the panel."""
    for expert in demo.experts:
        page.context.clear_cookies()
        login(page, expert, PASSWORD)
        page.goto(f"/studies/{demo.study.pk}/my/priorities/")
        panel = page.locator(".priorities-result")
        expect(panel.locator(".weights").first).to_contain_text("Comprehensibility")
        overflow = panel.evaluate(
            """(panel) => {
                const edge = panel.getBoundingClientRect().right;
                const cells = [...panel.querySelectorAll(".weights th, .weights td")];
                const past = cells.filter((cell) => cell.getBoundingClientRect().right > edge + 0.5
                    || cell.scrollWidth > cell.clientWidth + 1);
                // A name set on two lines though it is one word: broken inside the word.
                const broken = [...panel.querySelectorAll(".weights th")].filter((th) =>
                    !th.innerText.trim().includes(" ") && th.getClientRects().length
                    && th.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(th).lineHeight || 20));
                return [...past, ...broken].map((cell) => cell.innerText.trim());
            }"""
        )
        assert overflow == [], f"{expert}: cells past the weight panel's edge or broken inside a word: {overflow}"
    screenshot(page, "expert-priorities-weights-1280")
    assert_accessible(page)


def test_the_api_docs_lead_back_to_the_site(page: Page) -> None:
    page.goto("/api/docs/")
    # The schema is large (seconds to build on a loaded machine) before Swagger UI draws it.
    expect(page.locator("#swagger-ui .info")).to_be_visible(timeout=30_000)
    screenshot(page, "api-docs-1280")
    with page.expect_navigation():
        page.get_by_role("link", name="← approve: your studies").click()
    assert page.url.split("?")[0].endswith("/accounts/login/")  # signed out: the studies ask to sign in first
