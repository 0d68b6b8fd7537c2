"""Suite-wide: in CI (SPECPLAN_FAIL_ON_SKIP=1, set by .ci/run) a skipped test is a failed test, so a missing
browser, PostgreSQL server or Ray cannot pass CI silently; `pytest -m engine` (./dev test's second phase) imports
only the test files that use the engine mark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# How every engine-marked test is marked (`@pytest.mark.engine`, `pytestmark = pytest.mark.engine`, `mark.engine`).
ENGINE_MARK_TEXT = "mark.engine"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `-m engine` alone, a test file whose text never names the engine mark holds no test that would run:
    it is not imported (importing the ~110 others and deselecting their ~1,600 tests took ~15 s of a phase that
    runs alone on the machine)."""
    if config.getoption("markexpr", "") != "engine" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    # True or None, never False: False would also override pytest's own --ignore checks for the file
    return True if ENGINE_MARK_TEXT not in collection_path.read_text(errors="replace") else None


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

