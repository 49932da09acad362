"""The whole journey of issue 8 in Chromium, as the people would live it.

The designer (alice, an existing user) starts at `/`, creates a study, sets
it up, enters its measurements and creates two invitation links; two new
people follow those links in their own browsers, sign up and join; the
designer opens voting, both vote, the designer closes voting; one expert
gives direct weights, the other an AHP matrix that the page flags as
inconsistent and that they repair with the suggested value before saving;
both give ranges and peer weights; the designer closes the assessment and
launches a run, whose page reaches "Succeeded" with the engine's ranking.

Everyone navigates by links and buttons: the only addresses typed are `/`
and the invitation links (which a real person receives by e-mail or chat).
Every distinct page is screenshot (``journey-*``) and scanned with axe.

Runs are executed in-process: the browser tests' settings make Celery eager
(``eager_celery``, autouse in ``conftest.py``) also when ``REDIS_URL`` is set
(as in CI), where a launch would otherwise go to a broker no worker reads.
"""

import re
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from engine import prioritisation
from engine import selectors as engine_selectors
from engine.models import Run
from tests.browser.conftest import _close_page, _open_page
from tests.browser.support import assert_accessible, screenshot
from tests.browser.test_designer import add_metric, submit
from tests.fixtures import PASSWORD
from workspace import selectors
from workspace.forms.expert import point_label
from workspace.models import (
    AcceptableRange,
    AttributePrioritisation,
    Invitation,
    Measurement,
    Membership,
    Phase,
    Study,
)
from workspace.templatetags.numbers import significant

TITLE = "Choosing a classifier for the clinic"
# name, attribute, direction, unit, least acceptable, desired
METRICS = [
    ("Success rate", "Accuracy", "Higher is better", "", "0.7", "0.95"),
    ("Training time", "Efficiency", "Lower is better", "s", "60", "1"),
    ("Stability", "Consistency", "Higher is better", "", "0.5", "1"),
    ("Retraining time", "Flexibility", "Lower is better", "min", "120", "5"),
]
CANDIDATES = ["J48", "JRip", "Naive Bayes"]
# A wide table pasted from a spreadsheet: one column per metric.
MEASUREMENTS_CSV = (
    "candidate\tSuccess rate\tTraining time\tStability\tRetraining time\n"
    "J48\t0.847\t4.1\t0.9\t30\n"
    "JRip\t0.865\t6.3\t0.85\t45\n"
    "Naive Bayes\t0.762\t0.3\t0.8\t10\n"
)
NEWCOMERS = {"erin": "erin-chooses-a-long-passphrase-8", "frank": "frank-chooses-a-long-passphrase-9"}

# Expert A (erin): direct weights in percent.
DIRECT = {"Accuracy": 40, "Efficiency": 25, "Consistency": 20, "Flexibility": 15}
# Expert B (frank): AHP, (more important, less important): strength. Nearly
# consistent but for Accuracy over Efficiency, said 9 where the others imply 2-3.
AHP = {
    ("Accuracy", "Efficiency"): 9,
    ("Accuracy", "Consistency"): 3,
    ("Accuracy", "Flexibility"): 5,
    ("Efficiency", "Consistency"): 2,
    ("Efficiency", "Flexibility"): 3,
    ("Consistency", "Flexibility"): 2,
}
# Frank's acceptable Success rate: stricter than the default, it vetoes Naive Bayes (0.762).
FRANK_SUCCESS_RATE = ("0.8", "0.95")


@pytest.fixture
def browsers(browser: Browser, live_server: LiveServer) -> Iterator[Callable[[], Page]]:
    """Opens a new browser context (its own cookies, JavaScript on) per
    call: each newcomer reads their invitation in a browser of their own."""
    contexts = []

    def open_browser() -> Page:
        context, opened = _open_page(browser, live_server, javascript=True)
        contexts.append(context)
        return opened

    yield open_browser
    for context in contexts:
        _close_page(context)


def check(page: Page, name: str, *, scan: bool = True) -> None:
    """Screenshot ``journey-<name>``; scan with axe (once per distinct page)."""
    screenshot(page, f"journey-{name}")
    if scan:
        assert_accessible(page)


def tab(page: Page, name: str) -> None:
    """Follow one of the study's tabs."""
    with page.expect_navigation():
        page.get_by_role("navigation", name="Study").get_by_role("link", name=name, exact=True).click()


def click_link(page: Page, name: str | re.Pattern) -> None:
    with page.expect_navigation():
        page.get_by_role("link", name=name).first.click()


def change_phase(page: Page, action: str, question: str, done: str, *, name: str) -> None:
    """From the study home: the phase action, its confirmation page, confirm."""
    tab(page, "Home")
    click_link(page, f"{action}…")
    expect(page.get_by_role("heading", name=question)).to_be_visible()
    check(page, f"confirm-{name}")
    submit(page, action)
    expect(page.get_by_role("status")).to_contain_text(done)


def saved(page: Page, button: str, message: str) -> None:
    submit(page, button)
    expect(page.get_by_text(message)).to_be_visible()


def next_step(page: Page) -> None:
    click_link(page, re.compile(r"^Next: "))


# --- the designer's part -----------------------------------------------------------------


def designer_creates_the_study(page: Page) -> Study:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    check(page, "login")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    submit(page, "Sign in")
    expect(page.get_by_role("heading", name="Your studies")).to_be_visible()
    check(page, "dashboard-empty")

    click_link(page, "New study")
    page.get_by_label("Title").fill(TITLE)
    page.get_by_label("Description").fill("Which learner the clinic should deploy to triage referrals")
    page.get_by_label("Attribute vote threshold").fill("1")
    page.get_by_label("Metric vote threshold").fill("1")
    check(page, "study-new")
    submit(page, "Create study")
    match = re.search(r"/studies/(\d+)/$", page.url)
    assert match, f"not sent to the study home: {page.url}"
    study = Study.objects.get(pk=int(match.group(1)))
    assert (study.title, study.designer.username, study.phase) == (TITLE, "alice", Phase.DRAFT)
    expect(page.get_by_role("status")).to_contain_text(f"The study “{TITLE}” was created.")
    check(page, "home-draft-empty")
    return study


def designer_sets_it_up(page: Page, study: Study) -> None:
    tab(page, "Setup")
    for name in ("Accuracy", "Efficiency", "Consistency"):
        submit(page, f"Add {name} as main")
    submit(page, "Add Flexibility as complementary")
    for name, attribute, better, unit, least, desired in METRICS:
        add_metric(page, attribute, name, better, unit, least, desired)
    for name in CANDIDATES:
        form = page.locator("#add-candidate form")
        form.get_by_label("Name").fill(name)
        submit(page, "Add candidate")
    expect(page.locator("#attributes tbody tr")).to_have_count(4)
    expect(page.locator("#metrics tbody tr")).to_have_count(4)
    expect(page.locator("#metrics tbody tr").nth(1)).to_contain_text("60 (least acceptable) to 1 (desired)")
    expect(page.locator("#candidates tbody tr")).to_have_count(3)
    check(page, "setup")
    attributes = dict(study.attributes.values_list("name", "kind"))
    assert attributes == {
        "Accuracy": "main",
        "Efficiency": "main",
        "Consistency": "main",
        "Flexibility": "complementary",
    }
    metrics = {
        m.name: (m.attribute.name, m.better, tuple(m.default_range)) for m in study.metrics.select_related("attribute")
    }
    assert metrics == {
        name: (attribute, "higher" if better.startswith("Higher") else "lower", (float(least), float(desired)))
        for name, attribute, better, _unit, least, desired in METRICS
    }


def designer_enters_measurements(page: Page, study: Study) -> None:
    tab(page, "Measurements")
    page.get_by_label("Paste CSV").fill(MEASUREMENTS_CSV)
    submit(page, "Save from CSV")
    expect(page.locator(".messages")).to_contain_text("12 measured values saved from the CSV")
    expect(page.get_by_label("Training time of JRip", exact=True)).to_have_value("6.3")
    check(page, "measurements")
    stored = {
        (row["candidate__name"], row["metric__name"]): row["value"]
        for row in Measurement.objects.filter(candidate__study=study).values("candidate__name", "metric__name", "value")
    }
    header, *lines = MEASUREMENTS_CSV.splitlines()
    metrics = header.split("\t")[1:]
    expected = {}
    for line in lines:
        candidate, *values = line.split("\t")
        expected.update({(candidate, metric): float(value) for metric, value in zip(metrics, values, strict=True)})
    assert stored == expected


def designer_creates_two_links(page: Page, live_server: LiveServer) -> list[str]:
    tab(page, "Experts")
    links = []
    for _ in range(2):
        submit(page, "Create an invitation link")
        link = page.get_by_label("Link to send").input_value()
        assert re.fullmatch(rf"{re.escape(live_server.url)}/invitations/[A-Za-z0-9_-]{{20,}}/", link), link
        links.append(link)
    assert links[0] != links[1]
    expect(page.get_by_role("region", name="Invitations").locator("tbody tr")).to_have_count(2)
    check(page, "experts-links")
    return links


# --- the experts' part -------------------------------------------------------------------


def newcomer_joins(page: Page, link: str, username: str, study: Study, *, first: bool) -> None:
    page.goto(link)  # received by e-mail or chat
    expect(page.get_by_role("heading", level=1)).to_have_text(TITLE)
    if first:
        check(page, "invitation-signup")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password", exact=True).fill(NEWCOMERS[username])
    page.get_by_label("Password confirmation").fill(NEWCOMERS[username])
    submit(page, "Create account and join")
    expect(page).to_have_url(re.compile(rf"/studies/{study.pk}/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(TITLE)
    expect(page.get_by_text("Nothing to do yet: the designer is setting the study up.")).to_be_visible()
    if first:
        check(page, "home-expert-draft")
    membership = Membership.objects.get(study=study, user__username=username)
    assert (membership.role, membership.status) == ("expert", "active")


def expert_votes(page: Page, *, attributes: list[str], metrics: list[str], name: str | None) -> None:
    tab(page, "Home")
    expect(page.locator(".next-step")).to_contain_text("Your next step:")
    click_link(page, "Votes")
    expect(page.get_by_role("heading", name="Votes")).to_be_visible()
    for label in (*attributes, *metrics):
        page.get_by_role("checkbox", name=label, exact=True).check()
    if name:
        check(page, name)
    saved(page, "Save my votes", "Your votes were saved.")


def erin_gives_direct_weights(page: Page, study: Study) -> None:
    tab(page, "Home")
    click_link(page, "Priorities")
    expect(page.get_by_role("heading", name="Priorities")).to_be_visible()
    page.get_by_label("Direct weights").first.check()
    for name, value in DIRECT.items():
        page.get_by_label(f"Weight of {name} (%)").fill(str(value))
    expect(page.locator('[data-total-prefix="direct-"]')).to_contain_text("Total: 100 % ✓")
    expect(page.locator("#priorities-result .weights").first).to_contain_text("40.0 %")
    check(page, "priorities-direct")
    saved(page, "Save my priorities", "Your priorities were saved.")
    stored = selectors.expert_inputs_list(study=study, experts=[expert(study, "erin")])["erin"]["priorities"]
    assert stored == {"method": "direct", "weights": DIRECT}


def expert(study: Study, username: str) -> Membership:
    return Membership.objects.get(study=study, user__username=username, role=Membership.Role.EXPERT)


def ahp_judgments(order: list[str], said: dict[tuple[str, str], int]) -> list[tuple[str, str, float]]:
    """``said`` as (row, column, value) over the attributes in page order."""
    judgments = []
    for (winner, loser), strength in said.items():
        if order.index(winner) < order.index(loser):
            judgments.append((winner, loser, float(strength)))
        else:
            judgments.append((loser, winner, 1 / strength))
    return judgments


def engine_ahp(order: list[str], judgments: list[tuple[str, str, float]]) -> tuple[float, list]:
    """The engine's consistency ratio and the repairs the page offers for
    these judgments (the smallest change first)."""
    index = {name: i for i, name in enumerate(order)}
    matrix = prioritisation.pairwise_matrix(len(order), [(index[a], index[b], v) for a, b, v in judgments])
    return prioritisation.consistency(matrix).ratio, prioritisation.smallest_repairs(matrix)


def ahp_label(order: list[str], winner: str, loser: str, strength: int) -> str:
    """The spoken label of the point saying ``winner`` over ``loser`` by ``strength``."""
    if order.index(winner) < order.index(loser):
        return point_label("ahp", winner, loser, str(strength))
    return point_label("ahp", loser, winner, f"1/{strength}")


def frank_repairs_an_inconsistent_ahp(page: Page, study: Study) -> None:
    tab(page, "Home")
    click_link(page, "Priorities")
    page.get_by_label("AHP pairwise comparisons").first.check()
    order = [a.name for a in selectors.selected_attributes(study)]
    assert sorted(order) == sorted(DIRECT)
    for (winner, loser), strength in AHP.items():
        page.get_by_role("radio", name=ahp_label(order, winner, loser, strength), exact=True).check()

    ratio, hints = engine_ahp(order, ahp_judgments(order, AHP))
    assert ratio > 0.1, "the journey's matrix must be inconsistent"
    verdict = page.locator("#priorities-result [data-consistency]").first
    expect(verdict).to_have_attribute("data-consistency", "inconsistent")
    expect(verdict).to_contain_text(f"Judgments: inconsistent (CR {ratio:.2f} > 0.10)")
    check(page, "priorities-ahp-inconsistent")

    # The smallest change that makes the judgments consistent, one click away.
    smallest = hints[0]
    row, column, suggested = order[smallest.row], order[smallest.column], int(smallest.suggested_value)
    assert {row, column} == {"Accuracy", "Efficiency"} and smallest.suggested_value == suggested
    expect(page.locator("#priorities-result .hint").first).to_contain_text(
        f"replaces your “{ahp_label(order, 'Accuracy', 'Efficiency', AHP[('Accuracy', 'Efficiency')])}” "
        f"by “{ahp_label(order, 'Accuracy', 'Efficiency', suggested)}”"
    )
    page.get_by_role("button", name=f"Apply {suggested} to {row} / {column}").click()
    repaired = {**AHP, ("Accuracy", "Efficiency"): suggested}
    repaired_ratio, _ = engine_ahp(order, ahp_judgments(order, repaired))
    assert repaired_ratio <= 0.1
    expect(verdict).to_have_attribute("data-consistency", "consistent")
    expect(verdict).to_contain_text(f"Judgments: consistent (CR {repaired_ratio:.2f} ≤ 0.10)")
    expect(
        page.get_by_role("radio", name=ahp_label(order, "Accuracy", "Efficiency", suggested), exact=True)
    ).to_be_checked()
    assert (
        not AttributePrioritisation.objects.filter(expert__study=study).exclude(expert__user__username="erin").exists()
    ), "nothing of frank's is saved before Save"
    check(page, "priorities-ahp-repaired", scan=False)  # the same page as scanned above

    saved(page, "Save my priorities", "Your priorities were saved.")
    stored = selectors.expert_inputs_list(study=study, experts=[expert(study, "frank")])["frank"]["priorities"]
    assert stored["method"] == "ahp"
    assert sorted(map(tuple, stored["judgments"])) == sorted(ahp_judgments(order, repaired))


def expert_gives_ranges(page: Page, study: Study, username: str, *, change: tuple[str, str] | None) -> None:
    next_step(page)
    expect(page.get_by_role("heading", name="Acceptable ranges")).to_be_visible()
    summary = page.locator("#veto-summary")
    expect(summary).to_contain_text("no candidate would be vetoed")
    if change:
        page.get_by_label("Success rate: least acceptable").fill(change[0])
        page.get_by_label("Success rate: desired").fill(change[1])
        expect(summary).to_contain_text("1 candidate would be vetoed: Naive Bayes (by Success rate)")
        check(page, "ranges-veto")
    else:
        check(page, "ranges-defaults")
    # Unchanged defaults are confirmed; a changed range is saved (issue 16, finding 7).
    saved(page, "Save my ranges" if change else "Confirm these ranges", "Your acceptable ranges were saved.")
    stored = {
        r.metric.name: [r.least_acceptable, r.desired]
        for r in AcceptableRange.objects.filter(expert=expert(study, username)).select_related("metric")
    }
    expected = {name: [float(least), float(desired)] for name, _a, _b, _u, least, desired in METRICS}
    if change:
        expected["Success rate"] = [float(change[0]), float(change[1])]
    assert stored == expected


def expert_gives_peer_weights(page: Page, study: Study, username: str, weights: dict[str, int], *, scan: bool) -> None:
    next_step(page)
    for name, value in weights.items():
        label = f"{name}, self-confidence (%)" if name == username else f"{name} (%)"
        page.get_by_label(label, exact=True).fill(str(value))
    expect(page.locator(".live-total")).to_contain_text("Total: 100 % ✓")
    check(page, f"peer-weights-{username}", scan=scan)
    saved(page, "Save my peer weights", "Your peer weights were saved.")
    stored = selectors.expert_inputs_list(study=study, experts=[expert(study, username)])[username]["peer_weights"]
    assert stored == {name: value / 100 for name, value in weights.items()}


# --- the journey -----------------------------------------------------------------------------


def test_a_study_from_creation_to_a_succeeded_run(
    page: Page, browsers: Callable[[], Page], live_server: LiveServer, cast: object
) -> None:
    designer = page
    study = designer_creates_the_study(designer)
    designer_sets_it_up(designer, study)
    designer_enters_measurements(designer, study)
    links = designer_creates_two_links(designer, live_server)

    erin, frank = browsers(), browsers()
    newcomer_joins(erin, links[0], "erin", study, first=True)
    newcomer_joins(frank, links[1], "frank", study, first=False)
    assert set(Invitation.objects.filter(study=study).values_list("status", flat=True)) == {"accepted"}

    # Voting: erin brings Flexibility in; both vote for the metrics.
    tab(designer, "Home")
    expect(designer.locator("table.progress-grid tbody tr")).to_have_count(2)
    check(designer, "home-designer-draft")
    change_phase(designer, "Open voting", "Open the vote?", "Voting is open.", name="open-voting")
    metrics = [name for name, *_ in METRICS]
    expert_votes(erin, attributes=["Flexibility"], metrics=metrics, name="votes")
    expert_votes(frank, attributes=[], metrics=metrics[:3], name=None)
    change_phase(
        designer, "Close voting", "Close the vote?", "Voting is closed: the selection is fixed", name="close-voting"
    )
    assert sorted(a.name for a in selectors.selected_attributes(study)) == sorted(DIRECT)
    assert sorted(m.name for m in selectors.selected_metrics(study)) == sorted(metrics)

    # The assessment: erin by direct weights, frank by a repaired AHP matrix.
    erin_gives_direct_weights(erin, study)
    expert_gives_ranges(erin, study, "erin", change=None)
    expert_gives_peer_weights(erin, study, "erin", {"erin": 60, "frank": 40}, scan=True)
    frank_repairs_an_inconsistent_ahp(frank, study)
    expert_gives_ranges(frank, study, "frank", change=FRANK_SUCCESS_RATE)
    expert_gives_peer_weights(frank, study, "frank", {"erin": 50, "frank": 50}, scan=False)
    tab(frank, "Home")
    expect(frank.get_by_text("Nothing is missing.")).to_be_visible()
    check(frank, "home-expert-done")

    # The designer sees everyone done, closes and launches a run.
    tab(designer, "Home")
    grid = designer.locator("table.progress-grid tbody")
    expect(grid.locator(".badge", has_text=re.compile("missing", re.I))).to_have_count(0)
    check(designer, "home-designer-assessment")
    change_phase(
        designer,
        "Close assessment",
        "Close the assessment?",
        "The assessment is closed: inputs are frozen.",
        name="close-assessment",
    )
    tab(designer, "Runs")
    expect(designer.get_by_text("No run yet.")).to_be_visible()
    check(designer, "runs-empty")
    submit(designer, "Launch a validation run")

    run = Run.objects.get(study=study)
    assert designer.url == f"{live_server.url}/runs/{run.pk}/"
    assert run.status == Run.Status.SUCCEEDED, run.error
    expect(designer.get_by_role("heading", name="Status: Succeeded")).to_be_visible()
    document = engine_selectors.results_document(run=run)
    rows = designer.locator("table.ranking tbody tr")
    expect(rows).to_have_count(len(CANDIDATES))
    for row, candidate in zip(rows.all(), document["candidates"], strict=True):
        expect(row.locator("th")).to_have_text(candidate["name"])
        expect(row.locator("td.number").first).to_have_text(significant(candidate["cef"]))
    best = document["candidates"][0]
    assert best["cef"] > 0 and not best["vetoed"]
    vetoed = [c for c in document["candidates"] if c["vetoed"]]
    assert [c["name"] for c in vetoed] == ["Naive Bayes"], "frank's Success rate range vetoes Naive Bayes"
    assert [(v["expert"], v["metric"]) for v in vetoed[0]["vetoes"]] == [("frank", "Success rate")]
    expect(rows.filter(has_text="Naive Bayes").locator(".veto-reasons")).to_have_text(
        f"frank's least acceptable Success rate is {FRANK_SUCCESS_RATE[0]}; Naive Bayes measured 0.762."
    )
    check(designer, "run-succeeded")

    click_link(designer, "All runs of this study")
    expect(designer.locator("#runs-live tbody tr")).to_contain_text("Succeeded")
    check(designer, "runs", scan=False)  # scanned empty above
