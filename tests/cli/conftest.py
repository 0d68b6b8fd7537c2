"""The CLI's tests use the planner tests' catalogue fixtures."""

from tests.planner.conftest import catalog, prior_catalog  # noqa: F401
