"""Suite-wide: in CI (SPECPLAN_FAIL_ON_SKIP=1, set by .ci/run) a skipped test is a failed test, so a missing
browser, PostgreSQL server or Ray cannot pass CI silently."""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if os.environ.get("SPECPLAN_FAIL_ON_SKIP") == "1" and rep.skipped and not hasattr(rep, "wasxfail"):
        rep.outcome = "failed"
        rep.longrepr = f"skipped, and CI does not accept skips (SPECPLAN_FAIL_ON_SKIP=1): {rep.longrepr}"


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    """Each test keeps uploads and calibration runs in its own store, never the user's (and never another test
    worker's: ./dev test runs files in parallel)."""
    monkeypatch.setenv("SPECPLAN_STORE_URL", f"sqlite:///{tmp_path / 'store.db'}")

