"""Fixtures for the accounts' tests: a real SMTP server for the real-stack ones."""

from tests.realstack_support import smtp_server  # noqa: F401  (fixture re-exported)
