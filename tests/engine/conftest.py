"""Fixtures shared by the engine's tests."""

import pytest

from engine import services
from engine.models import Run
from workspace.bundles import study_import_bundle

from .test_runs import case_study_bundle


@pytest.fixture
def run(db):
    """A succeeded run of the closed case study (a module may define its own ``run``)."""
    study = study_import_bundle(bundle=case_study_bundle())
    run = services.run_launch(study=study, launched_by=study.designer)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    return run
