"""An absent expert in Chromium (issue 31, item 1): the designer of the demo
study reopens the assessment, excludes the clinician on the Experts tab
(how and why asked), closes the assessment (the confirmation names who is
left out) and launches a run, which ranks without them exactly as
leave-one-expert-out does; the run page says who was left out. Phone width
included."""

from playwright.sync_api import Page, expect

from engine import robustness
from engine.models import Run
from engine.snapshot import snapshot_arrays, study_snapshot
from tests.browser.support import assert_accessible, login, screenshot
from tests.fixtures import PASSWORD
from workspace import services
from workspace.models import Membership


def test_the_designer_excludes_an_expert_closes_and_the_run_ranks_without_them(page: Page, live_server, demo) -> None:
    services.study_reopen_assessment(study=demo.study)
    full = study_snapshot(study=demo.study)
    W, V, L, U, M = snapshot_arrays(full)
    left_out = "clinician"
    expected = robustness.leave_one_out(
        weights=W, peer_weights=V, lower=L, upper=U, measurements=M, experts=[full["experts"].index(left_out)]
    )

    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{demo.study.pk}/experts/")
    page.get_by_role("link", name=f"Exclude… {left_out}").click()
    expect(page.get_by_role("heading", name=f"Exclude the expert {left_out}?", level=2)).to_be_visible()
    screenshot(page, "absent-exclude-form")
    assert_accessible(page)
    page.get_by_role("button", name=f"Exclude {left_out}").click()
    expect(page.get_by_text("say why (recorded in the history and shown to them)").first).to_be_visible()
    page.get_by_label("Why").fill("on leave until March")
    page.get_by_role("button", name=f"Exclude {left_out}").click()
    expect(page.get_by_text(f"{left_out} is excluded: their inputs are kept but not used")).to_be_visible()
    row = page.locator("table tbody tr", has_text=left_out)
    expect(row).to_contain_text("Excluded")
    expect(row).to_contain_text("on leave until March")
    assert Membership.objects.get(study=demo.study, user__username=left_out, role="expert").absence == "excluded"

    page.goto(f"/studies/{demo.study.pk}/")
    page.get_by_role("link", name="Close assessment…").click()
    expect(page.locator(".absent-list")).to_contain_text(f"{left_out}, excluded since")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "absent-close-confirm-phone")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("button", name="Close assessment").click()
    expect(page.get_by_text("The assessment is closed: inputs are frozen.")).to_be_visible()

    page.goto(f"/studies/{demo.study.pk}/runs/")
    page.get_by_role("button", name="Launch a validation run").click()
    run = Run.objects.get(study=demo.study)
    expect(page.get_by_role("heading", name="Status: Succeeded")).to_be_visible()
    expect(page.locator(".run-absent")).to_contain_text(f"Without {left_out} (excluded: on leave until March)")
    assert run.snapshot["experts"] == [name for name in full["experts"] if name != left_out]
    cef = {c["name"]: c["cef"] for c in run.results["candidates"]}
    assert [round(cef[name], 12) for name in full["candidates"]] == [round(v, 12) for v in expected.cef[0].tolist()]
    screenshot(page, "absent-run")
    assert_accessible(page)
