"""The robustness page (/runs/{run}/robustness/): the weights' stability,
the what-if, and the analyses launched, polled, cancelled and downloaded."""

import pytest
from django.urls import reverse
from django.utils.html import escape

from engine import analyses, services
from engine.models import Analysis
from workspace.bundles import study_import_bundle

from ..engine.test_runs import case_study_bundle


@pytest.fixture
def run(db):
    study = study_import_bundle(bundle=case_study_bundle())
    run = services.run_launch(study=study, launched_by=study.designer)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def login(client, run, who="designer"):
    user = run.study.designer if who == "designer" else run.study.memberships.filter(role="expert").first().user
    client.force_login(user)
    return user


def execute_all(analysis):
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    return analysis


def test_page_shows_each_attribute_weights_stability(client, run):
    login(client, run)
    response = client.get(reverse("run_robustness", args=[run.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "How far each weight can move" in html
    for attribute in run.results["selected_attributes"]:
        assert attribute in html
    assert "most fragile weight" in html or "No single weight changes the winner" in html


def test_leave_one_out_through_the_page(client, run, django_capture_on_commit_callbacks):
    login(client, run)
    response = client.post(reverse("run_robustness", args=[run.pk]), {"kind": "leave_one_out"})
    assert response.status_code == 302
    analysis = Analysis.objects.get()
    execute_all(analysis)
    assert analysis.status == "succeeded"
    html = client.get(reverse("run_robustness", args=[run.pk])).content.decode()
    assert escape(analysis.result["summary"]["sentence"]) in html
