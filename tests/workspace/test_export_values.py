"""Issue 19: the study export reads plain values (no model instance per
row) and writes exactly the bytes it wrote when it read model instances
(tests/workspace/export_reference.py, the export before the change)."""

import copy
from collections import Counter

import pytest
from django.db import transaction
from django.db.models.signals import post_init
from hypothesis import HealthCheck, given, settings
from rest_framework.renderers import JSONRenderer

from tests.workspace.export_reference import expert_inputs_list as reference_inputs
from tests.workspace.export_reference import reference_export_bundle
from tests.workspace.test_bundles import _scaled_bundle, bundles
from workspace import selectors
from workspace.bundles import study_export_bundle, study_export_json, study_import_bundle

pytestmark = pytest.mark.django_db


def _reference_json(study) -> bytes:
    return JSONRenderer().render(reference_export_bundle(study=study))


def test_the_case_studys_export_is_byte_for_byte_the_reference(case_study):
    study = study_import_bundle(bundle=case_study)
    assert study_export_json(study=study) == _reference_json(study)
    assert selectors.expert_inputs_list(study=study, with_results=True) == reference_inputs(
        study=study, with_results=True
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(bundle=bundles())
def test_a_random_studys_export_is_byte_for_byte_the_reference(bundle):
    with transaction.atomic():
        study = study_import_bundle(bundle=copy.deepcopy(bundle))
        assert study_export_json(study=study) == _reference_json(study)
        for sections in (["votes"], ["priorities"], ["ranges", "peer_weights"]):
            assert selectors.expert_inputs_list(study=study, sections=sections, with_results=True) == (
                reference_inputs(study=study, sections=sections, with_results=True)
            )
        transaction.set_rollback(True)


def test_the_export_builds_no_model_instance_per_row(django_assert_num_queries):
    study = study_import_bundle(bundle=_scaled_bundle(7, 30, "rows"))
    made: Counter[str] = Counter()

    def count(sender, **kwargs):
        made[sender.__name__] += 1

    post_init.connect(count)
    try:
        bundle = study_export_bundle(study=study)
    finally:
        post_init.disconnect(count)
    assert len(bundle["candidates"]) == 30 and len(bundle["peer_weights"]) == 7
    # the experts' memberships and their users only: nothing per row
    assert made == {"Membership": 7, "User": 8}, made
    assert bundle == reference_export_bundle(study=study)
