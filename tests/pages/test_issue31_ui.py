"""Issue 31's page findings 5, 6, 12 and 13: every what-if slider re-ranks,
an inconsistent save lands on its question and the repair hints say what
they replace (the smallest change first), the consistency table and the
AHP scale fit a phone, the Monte Carlo legend names only ranks that exist,
runs are numbered per study, open-round steps read "to revise", the
reference candidate's removal is refused before confirming, the demo's
experts have e-mail addresses, and tables that scroll say so."""

import re

import pytest
from django.urls import reverse

from engine import services as engine_services
from workspace.bundles import study_import_bundle

from ..engine.test_runs import case_study_bundle

# --- 5. every what-if slider triggers the live ranking --------------------------------


def _tag(html: str, pattern: str) -> str:
    found = re.search(pattern, html)
    assert found, f"no tag matching {pattern!r}"
    return found.group(0)


def _listened_inputs(form_tag: str, inputs: list[str]) -> set[str]:
    """The inputs whose ``input`` event reaches a listener of the form's
    hx-trigger, with htmx's meaning of ``from:``: none, the form itself
    (which every input inside it bubbles to); ``find <selector>``, the first
    matching input only; a plain selector, every matching element."""
    trigger = re.search(r'hx-trigger="([^"]*)"', form_tag)
    assert trigger, "the what-if form has no hx-trigger"
    listened: set[str] = set()
    for spec in (part.strip() for part in trigger.group(1).split(",")):
        if spec.split()[0] != "input":
            continue
        origin = re.search(r"from:(.+?)(?:\s+(?:delay|throttle|queue|target|changed|once|consume)\b|$)", spec)
        if origin is None:
            listened.update(inputs)  # the form: every input inside it bubbles up
        elif origin.group(1).startswith("find "):
            listened.update(inputs[:1])  # querySelector: the first match only
        elif origin.group(1).strip() in ("input", "input[type=range]", "closest form"):
            listened.update(inputs)
    return listened


@pytest.fixture
def run(db):
    study = study_import_bundle(bundle=case_study_bundle())
    run = engine_services.run_launch(study=study, launched_by=study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_every_what_if_slider_triggers_the_live_ranking(client, run):
    client.force_login(run.study.designer)
    html = client.get(reverse("run_robustness", args=[run.pk])).content.decode()
    form = _tag(html, r'<form[^>]*class="what-if"[^>]*>')
    body = html[html.index(form) : html.index("</form>", html.index(form))]
    sliders = re.findall(r'<input type="range" id="(w\d+)"', body)
    attributes = run.results["selected_attributes"]
    assert sliders == [f"w{i}" for i in range(len(attributes))] and len(sliders) >= 2
    assert _listened_inputs(form, sliders) == set(sliders)
    # Reset puts each slider back at the run's weight (static/js/robustness.js).
    at_run = [100 * w for w in run.results["attribute_weights"]]
    drawn = [float(v) for v in re.findall(r'data-run-value="([^"]+)"', body)]
    assert drawn == pytest.approx(at_run, abs=0.05)
    assert "data-what-if-reset" in body
