"""The page tests use the workspace tests' cast, study factory and settings."""

from tests.workspace.conftest import (  # noqa: F401  (fixtures re-exported for tests/pages)
    cast,
    fast_password_hashing,
    make_study,
    test_host_and_clean_cache,
    unchanged,
)
