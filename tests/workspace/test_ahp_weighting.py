"""The study's AHP weighting (issue 16, finding 13): a setting of the
design (changed only while the phase table allows design changes), carried
by bundles (optional, the paper's method by default) and the API, and
recorded in each run's snapshot."""

import json

import numpy as np
import pytest
from django.test import Client

from engine.prioritisation import ahp_weights, pairwise_matrix
from engine.snapshot import study_snapshot
from tests.fixtures import error_fields
from workspace import services
from workspace.bundles import study_export_bundle, study_import_bundle
from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import AttributePrioritisation, Phase, Study


def test_the_designer_chooses_the_weighting_in_draft_only(make_study, cast):
    built = make_study(Phase.DRAFT)
    client = Client()
    client.force_login(cast.alice)
    form = {
        "title": built.study.title,
        "description": "",
        "attribute_threshold": 1,
        "metric_threshold": 0,
        "ahp_weighting": "eigenvector",
    }
    page = client.get(f"/studies/{built.study.pk}/setup/").content.decode()
    assert 'name="ahp_weighting"' in page and "Principal eigenvector" in page
    response = client.post(f"/studies/{built.study.pk}/setup/", form)
    assert response.status_code == 302
    assert Study.objects.get(pk=built.study.pk).ahp_weighting == "eigenvector"
    # a value that is not a weighting is refused, naming the field, and nothing changes
    refused = client.post(f"/studies/{built.study.pk}/setup/", {**form, "ahp_weighting": "median"})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert Study.objects.get(pk=built.study.pk).ahp_weighting == "eigenvector"


def test_after_the_draft_the_weighting_is_shown_disabled_and_the_service_refuses(make_study, cast):
    built = make_study(Phase.VOTING)
    client = Client()
    client.force_login(cast.alice)
    page = client.get(f"/studies/{built.study.pk}/setup/").content.decode()
    assert "Changing the AHP weighting is only possible in the draft phase" in page
    # a disabled field ignores what is posted
    client.post(
        f"/studies/{built.study.pk}/setup/",
        {"title": built.study.title, "attribute_threshold": 1, "metric_threshold": 0, "ahp_weighting": "eigenvector"},
    )
    assert Study.objects.get(pk=built.study.pk).ahp_weighting == "column_means"
    with pytest.raises(PhaseConflict, match="Changing the AHP weighting is only possible in the draft phase"):
        services.study_update(study=built.study, ahp_weighting="eigenvector")
    with pytest.raises(InvalidInput) as refused:
        services.study_update(study=built.study, ahp_weighting="median")
    assert "ahp_weighting" in refused.value.errors
    # the same value is no change, so it is accepted in any phase
    services.study_update(study=built.study, ahp_weighting="column_means")


def test_the_snapshot_records_the_weighting_and_the_weights_follow_it(make_study, cast):
    built = make_study(Phase.CLOSED)
    assert study_snapshot(study=built.study)["ahp_weighting"] == "column_means"
    Study.objects.filter(pk=built.study.pk).update(ahp_weighting="geometric_mean")
    study = Study.objects.get(pk=built.study.pk)
    assert study_snapshot(study=study)["ahp_weighting"] == "geometric_mean"


def test_bundles_carry_the_weighting_and_default_to_the_papers_method(case_study, db):
    plain = study_import_bundle(bundle=json.loads(json.dumps(case_study)))
    assert plain.ahp_weighting == "column_means"
    assert "ahp_weighting" not in study_export_bundle(study=plain)  # optional: old bundles unchanged
    eigen = study_import_bundle(bundle={**case_study, "ahp_weighting": "eigenvector"})
    assert eigen.ahp_weighting == "eigenvector"
    assert study_export_bundle(study=eigen)["ahp_weighting"] == "eigenvector"
    # the imported AHP judgments are weighed by the bundle's weighting
    for prioritisation in AttributePrioritisation.objects.filter(expert__study=eigen, method="ahp"):
        names = list(prioritisation.result_record["weights"])
        index = {name: i for i, name in enumerate(names)}
        judgments = [(index[j.row.name], index[j.column.name], j.value) for j in prioritisation.judgments.all()]
        expected = ahp_weights(pairwise_matrix(len(names), judgments), "eigenvector")
        np.testing.assert_allclose(list(prioritisation.result_record["weights"].values()), expected, atol=1e-12)
    with pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle={**case_study, "ahp_weighting": "median"})
    assert "ahp_weighting" in refused.value.errors


def test_the_api_reads_and_changes_the_weighting(make_study, cast):
    built = make_study(Phase.DRAFT)
    client = Client()
    client.force_login(cast.alice)
    path = f"/api/v1/studies/{built.study.pk}/"
    assert client.get(path).json()["ahp_weighting"] == "column_means"
    changed = client.patch(path, {"ahp_weighting": "geometric_mean"}, content_type="application/json")
    assert changed.status_code == 200 and changed.json()["ahp_weighting"] == "geometric_mean"
    refused = client.patch(path, {"ahp_weighting": "median"}, content_type="application/json")
    assert refused.status_code == 400 and "ahp_weighting" in json.dumps(refused.json())


def test_the_run_page_names_the_weighting_its_snapshot_used(make_study, cast):
    from engine import services as engine_services

    built = make_study(Phase.CLOSED)
    Study.objects.filter(pk=built.study.pk).update(ahp_weighting="eigenvector")
    run = engine_services.run_launch(study=Study.objects.get(pk=built.study.pk), launched_by=cast.alice)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.snapshot["ahp_weighting"] == "eigenvector"
    assert run.status == "succeeded", run.error
    # the page reads the run's own snapshot, not the study's current setting
    Study.objects.filter(pk=built.study.pk).update(ahp_weighting="geometric_mean")
    client = Client()
    client.force_login(cast.alice)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "AHP weights</dt><dd>computed by the principal eigenvector (as AHP-OS, AHPy and Expert Choice do)" in page


def test_the_api_names_the_field_among_those_it_accepts(make_study, cast):
    built = make_study(Phase.DRAFT)
    client = Client()
    client.force_login(cast.alice)
    refused = client.patch(f"/api/v1/studies/{built.study.pk}/", {"phase": "closed"}, content_type="application/json")
    assert refused.status_code == 400
    assert "ahp_weighting" in error_fields(refused)["phase"][0]
    voting = make_study(Phase.VOTING)
    conflict = client.patch(
        f"/api/v1/studies/{voting.study.pk}/", {"ahp_weighting": "eigenvector"}, content_type="application/json"
    )
    assert conflict.status_code == 409
    assert Study.objects.get(pk=voting.study.pk).ahp_weighting == "column_means"
