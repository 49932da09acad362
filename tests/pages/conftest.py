"""The page tests use the workspace tests' cast (alice, bob, carol,
charlie), study factory and checks."""

from tests.workspace.conftest import (  # noqa: F401  (fixtures re-exported for tests/pages)
    case_study,
    cast,
    fast_password_hashing,
    make_study,
    test_host_and_clean_cache,
    unchanged,
)
