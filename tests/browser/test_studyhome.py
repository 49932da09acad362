"""The dashboard, a study's home, its phase confirmation, the runs and a
run's page in Chromium: the designer of the demo study opens it from `/`,
launches a run and reads its ranking; a run's page turns from queued to
the ranking by polling; the phase confirmation works without JavaScript;
an expert confirms imported inputs. A screenshot and an axe scan of each
page."""

import json
import re

from playwright.sync_api import Page, expect

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine import snapshot as engine_snapshot
from engine.models import Run
from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import CASE_STUDY_PATH, PASSWORD
from workspace.bundles import study_import_bundle
from workspace.models import Invitation, Membership, Phase, Study
from workspace.templatetags.numbers import significant


def open_demo_from_home(page: Page, demo) -> None:
    page.get_by_role("link", name=demo.study.title).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(demo.study.title)


def test_designer_opens_the_demo_from_home_and_launches_a_run(page: Page, live_server, demo) -> None:
    login(page, demo.designer, PASSWORD)
    todo = page.locator("table tbody tr td").nth(4)
    expect(todo).to_contain_text("As designer: Closed: inputs are frozen. 0 validation runs so far.")
    screenshot(page, "studyhome-dashboard-designer")
    assert_accessible(page)

    open_demo_from_home(page, demo)
    assert page.url == f"{live_server.url}/studies/{demo.study.pk}/"
    current = page.locator('[aria-current="step"]')
    expect(current).to_contain_text("Closed")
    expect(current).to_contain_text("current phase")
    grid = page.locator("table.progress-grid tbody tr")
    expect(grid).to_have_count(4)
    expect(grid.first).to_contain_text(demo.experts[0])
    expect(page.get_by_role("link", name="Reopen assessment…")).to_be_visible()
    screenshot(page, "studyhome-study-designer")
    assert_accessible(page)

    page.get_by_role("navigation", name="Study").get_by_role("link", name="Runs").click()
    expect(page.get_by_text("No run yet.")).to_be_visible()
    screenshot(page, "studyhome-runs-empty")
    assert_accessible(page)
    page.get_by_role("button", name="Launch a validation run").click()

    # Celery is eager here: the run finished before the page answered.
    run = Run.objects.get(study=demo.study)
    assert page.url == f"{live_server.url}/runs/{run.pk}/"
    expect(page.get_by_role("heading", name="Status: Succeeded")).to_be_visible()
    rows = page.locator("table.ranking tbody tr")
    expect(rows).to_have_count(len(run.results["candidates"]))
    document = engine_selectors.results_document(run=run)
    best = document["candidates"][0]
    expect(rows.first).to_contain_text(best["name"])
    expect(rows.first).to_contain_text(significant(best["cef"]))
    vetoed = [c for c in document["candidates"] if c["vetoed"]]
    assert vetoed, "the demo's clinician vetoes the candidates without a comprehensibility rating"
    veto = vetoed[0]["vetoes"][0]
    experts = ", ".join(demo.experts[:-1]) + f" and {demo.experts[-1]}"
    expect(page.locator("table.ranking")).to_contain_text(
        f"For {experts} the least acceptable {veto['metric']} is {veto['range'][0]:.6g} (scale 1-10); "
        f"{vetoed[0]['name']} measured {veto['value']:.6g}."
    )
    expect(page.get_by_role("link", name=f"/api/v1/runs/{run.pk}/results/")).to_be_visible()
    screenshot(page, "studyhome-run-succeeded")
    assert_accessible(page)

    page.get_by_role("link", name="All runs of this study").click()
    expect(page.locator("#runs-live tbody tr")).to_have_count(1)
    expect(page.locator("#runs-live tbody tr")).to_contain_text("Succeeded")
    screenshot(page, "studyhome-runs")
    assert_accessible(page)


def queued_run(demo) -> Run:
    """A run waiting for a worker: created as run_launch would, without
    sending its message (eager Celery would execute it at once)."""
    return Run.objects.create(
        study=demo.study, launched_by=demo.study.designer, snapshot=engine_snapshot.study_snapshot(study=demo.study)
    )


def test_the_run_page_and_the_list_turn_from_queued_to_done_by_polling(page: Page, live_server, demo) -> None:
    run = queued_run(demo)
    login(page, demo.designer, PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    expect(page.get_by_role("heading", name="Status: Queued")).to_be_visible()
    expect(page.get_by_text("This page updates by itself while the run is queued.")).to_be_visible()
    assert page.locator("table.ranking").count() == 0
    screenshot(page, "studyhome-run-queued")
    assert_accessible(page)

    with page.expect_response(re.compile(rf"/runs/{run.pk}/status/$")):
        pass  # the page polls its status
    engine_services.run_execute(run_id=run.pk)
    expect(page.get_by_role("heading", name="Status: Succeeded")).to_be_visible()
    expect(page.locator("table.ranking tbody tr")).to_have_count(4)
    assert page.locator("#run-live[hx-trigger]").count() == 0  # polling stopped

    second = queued_run(demo)
    page.goto(f"/studies/{demo.study.pk}/runs/")
    row = page.locator("#runs-live tbody tr").first
    expect(row).to_contain_text(f"Run {second.number}")
    expect(row).to_contain_text("Queued")
    screenshot(page, "studyhome-runs-queued")
    Run.objects.filter(pk=second.pk).update(status=Run.Status.FAILED, error="The inputs cannot be evaluated: test.")
    expect(row).to_contain_text("Failed")
    assert page.locator("#runs-live[hx-trigger]").count() == 0


def test_phase_confirmation_works_without_javascript(page_nojs: Page, live_server, demo) -> None:
    page = page_nojs
    login(page, demo.designer, PASSWORD)
    open_demo_from_home(page, demo)
    page.get_by_role("link", name="Reopen assessment…").click()
    assert page.url == f"{live_server.url}/studies/{demo.study.pk}/phase/assessment/"
    expect(page.get_by_role("heading", name="Reopen the assessment?")).to_be_visible()
    expect(page.get_by_text("Reopening the assessment lets experts change their priorities")).to_be_visible()
    screenshot(page, "studyhome-phase-reopen-nojs")
    page.get_by_role("button", name="Reopen assessment").click()
    assert page.url == f"{live_server.url}/studies/{demo.study.pk}/"
    expect(page.get_by_role("status")).to_contain_text("The assessment is open again.")
    assert Study.objects.get(pk=demo.study.pk).phase == Phase.ASSESSMENT

    page.get_by_role("link", name="Close assessment…").click()
    expect(page.get_by_text("Every expert has given every input.")).to_be_visible()
    page.get_by_role("button", name="Close assessment").click()
    expect(page.get_by_role("status")).to_contain_text("The assessment is closed: inputs are frozen.")
    assert Study.objects.get(pk=demo.study.pk).phase == Phase.CLOSED

    page.get_by_role("link", name="Delete study…").click()
    expect(page.get_by_role("heading", name=f"Delete “{demo.study.title}”?")).to_be_visible()
    screenshot(page, "studyhome-delete-nojs")
    page.get_by_role("link", name="Cancel").click()
    assert Study.objects.filter(pk=demo.study.pk).exists()


def test_confirmation_pages_are_accessible(page: Page, live_server, demo) -> None:
    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{demo.study.pk}/phase/assessment/")
    expect(page.get_by_role("heading", name="Reopen the assessment?")).to_be_visible()
    screenshot(page, "studyhome-phase-reopen")
    assert_accessible(page)
    page.goto(f"/studies/{demo.study.pk}/delete/")
    screenshot(page, "studyhome-delete")
    assert_accessible(page)


def test_an_expert_sees_their_steps(page: Page, live_server, demo) -> None:
    expert = demo.experts[-1]
    login(page, expert, PASSWORD)
    expect(page.locator("table tbody tr td").nth(4)).to_contain_text("As expert: Closed: your inputs are frozen")
    open_demo_from_home(page, demo)
    expect(page.get_by_text("Nothing left to do: the assessment is closed and your inputs are frozen.")).to_be_visible()
    steps = page.locator("ol.steps li")
    expect(steps).to_have_count(4)
    expect(steps.nth(1)).to_contain_text("Priorities")
    expect(steps.nth(1)).to_contain_text("Done")
    assert page.locator("table.progress-grid").count() == 0
    screenshot(page, "studyhome-study-expert")
    assert_accessible(page)


def test_an_expert_confirms_imported_inputs_from_the_dashboard(page: Page, live_server, cast) -> None:
    case_study = json.loads(CASE_STUDY_PATH.read_text(encoding="utf-8"))
    cast.alice.is_staff = True
    cast.alice.save(update_fields=["is_staff"])
    case_study["designer"], case_study["phase"] = "alice", "assessment"
    study = study_import_bundle(bundle=case_study, importer=cast.alice)
    clinician = Membership.objects.get(study=study, user__username="clinician").user
    clinician.set_password(PASSWORD)
    clinician.save(update_fields=["password"])

    login(page, "clinician", PASSWORD)
    expect(page.get_by_role("heading", name="Invitations for you (1)")).to_be_visible()
    expect(page.get_by_text("alice imported inputs in your name.")).to_be_visible()
    screenshot(page, "studyhome-dashboard-invitation")
    assert_accessible(page)
    page.get_by_role("link", name=re.compile("Review inputs and accept")).click()
    expect(page.get_by_role("heading", name="Inputs imported in your name by alice")).to_be_visible()
    page.get_by_role("button", name="Accept the invitation").click()
    expect(page.locator("#id_confirm_inputs_error")).to_contain_text("must be true: alice imported inputs")
    screenshot(page, "studyhome-invitation-confirm")
    assert_accessible(page)
    page.get_by_label("These inputs are mine").check()
    page.get_by_role("button", name="Accept the invitation").click()
    assert page.url == f"{live_server.url}/studies/{study.pk}/"
    expect(page.get_by_role("status")).to_contain_text(f"You joined “{study.title}” as an expert.")
    assert Invitation.objects.get(study=study, username="clinician").status == "accepted"
