"""Fixtures for the evaluation tests: the cast, the study factory and the API
clients of the API tests, and ``nothing_stored``, the ``unchanged`` check
with the prediction tables counted too."""

from contextlib import contextmanager

import pytest

from evaluation.models import CandidatePredictionArrays, MeasurementSource, MetricComputation, PredictionSet
from tests.api.conftest import (  # noqa: F401  (fixtures re-exported for tests/evaluation)
    _fresh_cache,
    _test_settings,
    api,
    cast,
    clients,
    db_snapshot,
    make_study,
    unchanged,
)


def stored():
    """Everything an import, a mapping or a computation could have written:
    the study's tables, the prediction sets with their arrays, the metrics'
    computations and where computed measurements came from."""
    return {
        **db_snapshot(),
        "prediction_sets": list(PredictionSet.objects.values_list("pk", "name", "row_count")),
        "candidate_arrays": CandidatePredictionArrays.objects.count(),
        "computations": sorted(MetricComputation.objects.values_list("metric_id", "computation", "parameters")),
        "sources": sorted(
            MeasurementSource.objects.values_list(
                "candidate_id", "metric_id", "prediction_set_id", "value", "computed_at"
            )
        ),
    }


@pytest.fixture
def nothing_stored(db):
    """``with nothing_stored(): ...`` fails unless the block leaves every
    table as it found it."""

    @contextmanager
    def check():
        before = stored()
        yield
        assert stored() == before, "a refused request stored something"

    return check
