"""REST API v1 for validation runs and their robustness analyses."""
