"""A bundle's elicited metrics through the API (docs/formats.md,
``prediction_sets`` and ``elicited_metrics``; docs/api.md): the export
carries them, an import stores them, each refusal names its path, and the
row limit of an upload holds."""

import base64
import copy

import pytest

from evaluation.models import CandidatePredictionArrays, ElicitationAnswers, ElicitedMetric, PredictionSet
from tests.workspace.test_bundle_elicited import elicited_study
from workspace.bundles import study_export_bundle, study_import
from workspace.models import Study

pytestmark = pytest.mark.django_db
API = "/api/v1"


def stored():
    return [m.objects.count() for m in (Study, PredictionSet, CandidatePredictionArrays, ElicitedMetric,
                                        ElicitationAnswers)]  # fmt: skip


def test_export_and_import_through_the_api(make_study, clients, cast):
    built = elicited_study(make_study)
    response = clients["alice"].get(f"{API}/studies/{built.study.pk}/export/")
    assert response.status_code == 200
    bundle = response.json()
    assert bundle == study_export_bundle(study=built.study)
    assert bundle["elicited_metrics"]["AUC"]["reference_candidate"] == "J48"
    assert [s["name"] for s in bundle["prediction_sets"]] == ["two.csv", "jrip.csv"]

    # alice (no staff) imports the design as a draft: the sets and the elicited metric, nobody's answers.
    draft = {key: bundle[key] for key in ("format", "title", "attributes", "metrics", "candidates", "prediction_sets")}
    draft["elicited_metrics"] = {"AUC": {**bundle["elicited_metrics"]["AUC"], "answers": {}}}
    response = clients["alice"].post(f"{API}/studies/import/", draft, format="json")
    assert response.status_code == 201, response.json()
    again = clients["alice"].get(f"{API}/studies/{response.json()['id']}/export/").json()
    assert again["prediction_sets"] == bundle["prediction_sets"]
    assert again["elicited_metrics"] == draft["elicited_metrics"]
    elicited = ElicitedMetric.objects.get(metric__study_id=response.json()["id"])
    design = (elicited.prediction_set.name, elicited.reference_candidate.name, elicited.epsilon)
    assert design == ("two.csv", "J48", 0.1)


def test_refusals_through_the_api_name_the_path_and_store_nothing(make_study, clients):
    bundle = study_export_bundle(study=elicited_study(make_study).study)
    # Everyone's answers in alice's import: only staff imports others' inputs, so they are left out.
    left_out = clients["alice"].post(f"{API}/studies/import/", bundle, format="json")
    assert left_out.status_code == 201
    assert (left_out.json()["phase"], left_out.json()["inputs_left_out"]) == ("draft", ["bob", "carol"])
    assert not ElicitationAnswers.objects.filter(elicited_metric__metric__study_id=left_out.json()["id"]).exists()
    before = stored()
    bad = copy.deepcopy(bundle)
    bad["prediction_sets"][0]["candidates"][1]["arrays"] = base64.b64encode(b"PK\x03\x04 not a zip").decode()
    draft = {key: bad[key] for key in ("format", "title", "attributes", "metrics", "candidates", "prediction_sets")}
    refused = clients["alice"].post(f"{API}/studies/import/", draft, format="json")
    assert refused.status_code == 400
    [(field, [message])] = refused.json()["fields"].items()
    assert field == "prediction_sets[0].candidates[1].arrays"
    assert message.startswith("not an archive of predictions: not a NumPy .npz archive")
    assert stored() == before


def test_the_api_keeps_an_upload_s_row_limit(make_study, clients, monkeypatch):
    bundle = study_export_bundle(study=elicited_study(make_study).study)
    draft = {key: bundle[key] for key in ("format", "title", "attributes", "metrics", "candidates", "prediction_sets")}
    monkeypatch.setitem(study_import.__kwdefaults__, "max_rows", 9)
    before = stored()
    refused = clients["alice"].post(f"{API}/studies/import/", draft, format="json")
    assert refused.status_code == 400
    assert list(refused.json()["fields"]) == ["prediction_sets[0].candidates[0].arrays"]
    assert "more than 9 instances together" in refused.json()["fields"]["prediction_sets[0].candidates[0].arrays"][0]
    assert stored() == before
