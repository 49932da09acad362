"""Fixtures for the page tests: those of the workspace tests (the cast, the
study factory, the ``unchanged`` check, the test host and fast hashing)."""

from tests.api.conftest import api  # noqa: F401  (the API client, to compare pages with their API twins)
from tests.fixtures import (  # noqa: F401  (fixtures re-exported for tests/pages)
    case_study,
    cast,
    fast_password_hashing,
    make_study,
    test_host_and_clean_cache,
    unchanged,
)
