"""Every traffic bomb (benchmarks.bench_traffic_ingest, benchmarks.bench_xlsx_ingest) uploaded through a real
Chromium to a running `streamlit run app.py`: the Traffic page refuses each one with its error message, and the
server's peak RSS (VmHWM of the server process) stays under 300 MB above what the server held once the page had
rendered, over all the uploads. Each refused file is removed from the uploader (its chip's x) before the next is
dropped, as a user replacing a file does, and the server's allocator hands freed upload buffers back
(views/parts/memory.py), so the peak is the largest single upload's, not the sum of those before it. The files are read
in a child process under the OS limits (profiles/sandbox.py), whose memory is not the server's.
The server's CPU time per upload is printed (the parse functions' own CPU bound is asserted
in tests/profiles/test_traffic_bombs.py; here the upload's transfer and the page's rerun are in it too). The 100 MiB +
1 byte file reaches the page too (Streamlit's browser side counts decimal MB: .streamlit/config.toml)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.app.live_app import ARGS, CHROMIUM, running_app
from tests.upload_bombs import every_upload_bomb

PEAK_RSS_MB = 300
SERVER_CPU_S = 5.0  # per upload, the transfer and the page's rerun included

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="server RSS from /proc (Linux)")]



def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    return every_upload_bomb(tmp_path_factory)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("store") / "store.db") as (url, pid):
        yield url, pid


def test_every_bomb_uploaded_to_the_running_app_is_refused_within_the_memory_bound(server, bombs):
    from playwright.sync_api import sync_playwright

    url, pid = server
    refused, rows = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/traffic", wait_until="domcontentloaded")
        page.get_by_text("Traffic profile", exact=True).first.wait_for(timeout=120_000)
        base_kib = _status_kib(pid, "VmHWM")
        for i, (label, path) in enumerate(bombs.items()):
            # a fresh name per upload: the message names the file, so the wait below sees this upload's refusal
            named = path.with_name(f"bomb{i}{path.suffix}")
            if not named.exists():
                named.symlink_to(path)
            cpu0, t0 = _cpu_s(pid), time.perf_counter()
            page.locator("[data-testid=stMain] input[type=file]").first.set_input_files(str(named))
            alert = page.locator("[data-testid=stAlert]", has_text=f"bomb{i}{path.suffix}").first
            alert.wait_for(timeout=240_000)
            text = alert.inner_text()
            rows.append((label, time.perf_counter() - t0, _cpu_s(pid) - cpu0, _status_kib(pid, "VmHWM")))
            print(f"{label:60s} wall {rows[-1][1]:6.2f} s  server CPU {rows[-1][2]:5.2f} s  "
                  f"peak RSS +{(rows[-1][3] - base_kib) / 1024:6.0f} MB", flush=True)
            if "was not loaded" in text:
                refused.append(label)
            # Drop this upload before the next arrives, as a user replacing a refused file does with the chip's x:
            # Streamlit keeps an upload in memory until its widget lets it go, and holds an incoming one about
            # twice over, so two 100 MiB bombs held at once would be measured as one upload's peak.
            page.locator("[data-testid=stMain] [data-testid=stFileChipDeleteBtn] button").first.click()
            alert.wait_for(state="detached", timeout=120_000)
        browser.close()
    assert refused == list(bombs), f"not refused: {[k for k in bombs if k not in refused]}"
    slow = [(label, round(cpu, 1)) for label, _, cpu, _ in rows if cpu > SERVER_CPU_S]
    assert not slow, f"server CPU over {SERVER_CPU_S} s for an upload: {slow}"
    peak_mb = (_status_kib(pid, "VmHWM") - base_kib) / 1024
    assert peak_mb < PEAK_RSS_MB, f"server peak RSS grew {peak_mb:.0f} MB over {len(bombs)} bomb uploads"
