"""Suite-wide: in CI (SPECPLAN_FAIL_ON_SKIP=1, set by .ci/run) a skipped test is a failed test, so a missing
browser, PostgreSQL server or Ray cannot pass CI silently; `pytest -m quiet` (./dev test's second phase) and
`pytest -m engine` import only the test files that use that mark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Marks that select a few files: how a test is marked with one (`@pytest.mark.engine`, `pytestmark = [pytest.mark.
# engine, pytest.mark.quiet]`, `mark.engine`) names it in the file's text.
FILE_MARKS = ("engine", "quiet")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `-m quiet` or `-m engine` alone, a test file whose text never names that mark holds no test that would
    run: it is not imported (importing the ~110 others and deselecting their ~1,700 tests took ~15 s of a phase that
    runs alone on the machine)."""
    mark = config.getoption("markexpr", "")
    if mark not in FILE_MARKS or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    # True or None, never False: False would also override pytest's own --ignore checks for the file
    return True if f"mark.{mark}" not in collection_path.read_text(errors="replace") else None


# Files of few but long tests, longest first (seconds of one worker on the 2-core machine, ./dev test --durations,
# 2026-12-05). pytest-xdist's loadfile hands out files by number of tests, most first, which left these for the
# end, where one worker could run a minute alone; under `./dev test` (--no-loadscope-reorder) they go first and
# the short files fill in behind them. Only the order changes: a stale or missing entry costs time, never a test.
LONG_FILES_FIRST = (
    "tests/calibration/run/test_runners.py",  # ~105 s (41 s of it a real engine job, SIGKILLed)
    "tests/calibration/measure/test_serve.py",  # ~100 s (a real `vllm serve`; 36 s waiting out a stale limit)
    "tests/calibration/targets/test_heads.py",  # ~85 s (MEDUSA and MTP on a real engine)
    "tests/app/test_bombs_upload_browser.py",  # ~70 s, and it writes the upload bombs for the whole run
    "tests/app/test_i18n_browser.py",  # ~70 s
    "tests/cli/test_cli_bombs.py",  # ~55 s
    "tests/app/test_browser.py",  # ~50 s
    "tests/calibration/run/test_child_processes.py",  # ~30 s (a real engine, SIGKILLed)
    "tests/planner/physics/test_speculation_fit.py",  # ~30 s
    "tests/app/test_report_pdf_browser.py",  # ~30 s
    "tests/profiles/test_traffic_bombs.py",  # ~30 s
    "tests/cli/test_cli_fuzz.py",  # ~20 s
    "tests/calibration/storage/test_store_traffic_race.py",  # ~18 s
    "tests/planner/test_steptime_cv.py",  # ~16 s
    "tests/app/test_browser_model_box.py",  # ~14 s
    "tests/app/test_calibrate_upload_browser.py",  # ~14 s
    "tests/app/test_plain_text.py",  # ~14 s
    "tests/app/test_upload_memory.py",  # ~10 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker: LONG_FILES_FIRST first, then every other file by its number of tests, most first (xdist's
    own order); each file's tests stay together and in their order. Every worker sorts alike, so they agree."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    counts: dict[str, int] = {}
    for item in items:
        counts[item.nodeid.split("::")[0]] = counts.get(item.nodeid.split("::")[0], 0) + 1
    first = {f: i for i, f in enumerate(LONG_FILES_FIRST)}
    files = sorted(counts, key=lambda f: (first.get(f, len(first)), -counts[f]))
    rank = {f: i for i, f in enumerate(files)}
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


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

