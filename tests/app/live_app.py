"""The running app for real-browser tests: `streamlit run app.py` on a free loopback port with its own store, and
the headless Debian Chromium that drives it (Playwright)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from calibration.harness.procs import parent_death_hook

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


# Streamlit's frontend marks the app's root with the state of its script run (stApp's data-test-script-state)
SCRIPT_DONE = "() => document.querySelector('[data-testid=stApp]')?.dataset.testScriptState === 'notRunning'"


def settled(page, timeout_ms: int = 120_000) -> None:
    """The page's script run is over, and still so at two more looks 300 ms apart (a rerun the script asks for starts
    within that): what the page shows now is what it will show."""
    for _ in range(2):
        page.wait_for_function(SCRIPT_DONE, timeout=timeout_ms)
        page.wait_for_timeout(300)
    page.wait_for_function(SCRIPT_DONE, timeout=timeout_ms)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(store: Path, env: dict[str, str] | None = None, start_timeout_s: float = 60.0
                ) -> Iterator[tuple[str, int]]:
    """(url, server pid) of the app serving from the SQLite file `store` (not the user's), with `env` added;
    skips when Chromium is not installed, fails with the server's output when it does not start."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (./dev setup installs it)")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SPECPLAN_STORE_URL": f"sqlite:///{store}", **(env or {})},
        # a test process killed outright takes its server along (SIGKILL: a server whose output pipe lost its reader
        # did not stop on SIGTERM)
        preexec_fn=parent_death_hook(signal.SIGKILL))
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + start_timeout_s
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("streamlit did not start: " + proc.stdout.read().decode(errors="replace")[-2000:])
    try:
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=20)
