"""Real browser: a hostile prompt file uploaded to the Calibrate page of a running `streamlit run app.py` is refused
in plain text, the Run button stays disabled, and the server's peak RSS grows by less than 300 MB."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.app.live_app import ARGS, CHROMIUM, running_app

PEAK_RSS_GROWTH_MB = 300

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS from /proc (Linux)")]


def _hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


@pytest.fixture
def calibrate_server(tmp_path: Path):
    with running_app(tmp_path / "store.db", env={"SPECPLAN_CALIBRATE_TOKEN": "s3cret"}) as (url, pid):
        yield url, pid


def test_a_dictionary_bomb_uploaded_as_prompts_is_refused_without_the_servers_memory(calibrate_server, tmp_path):
    from playwright.sync_api import sync_playwright

    url, pid = calibrate_server
    # one 100,000-character prompt on 20,000 rows: 794 bytes on disk, 2 GB as Python strings
    rows = 20_000
    table = pa.table({"prompt_text": pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)),
                                                                    ["q" * 100_000])})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", write_statistics=False)
    bomb = tmp_path / "[prompts](https:attacker.example).parquet"
    bomb.write_bytes(buf.getvalue())
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(url + "/calibrate", wait_until="domcontentloaded")
        page.get_by_label("Access token").wait_for(timeout=90_000)
        page.get_by_label("Access token").fill("s3cret")
        page.keyboard.press("Enter")
        run = page.get_by_role("button", name="Run calibration")
        run.wait_for(timeout=90_000)
        assert run.is_enabled()
        before = _hwm_mb(pid)
        page.locator("[data-testid=stMain] input[type=file]").first.set_input_files(str(bomb))
        page.get_by_text("The uploaded prompt file is refused:").wait_for(timeout=60_000)
        refusal = page.get_by_text("at most 8,000 characters per prompt allowed").first
        refusal.wait_for(timeout=30_000)
        text = refusal.inner_text()
        assert "row 1, column 'prompt_text'" in text and "(100,000 characters)" in text
        assert "[prompts](https:attacker.example).parquet" in text  # the name as typed: plain text, no link
        assert page.locator("a[href*=attacker]").count() == 0
        page.locator("button:disabled", has_text="Run calibration").first.wait_for(timeout=30_000)
        page.wait_for_timeout(1500)
        assert page.locator("button:enabled", has_text="Run calibration").count() == 0
        grown = _hwm_mb(pid) - before
        browser.close()
    print(f"server peak RSS grew by {grown:.0f} MB during the refused upload")
    assert grown < PEAK_RSS_GROWTH_MB, f"server peak RSS grew by {grown:.0f} MB"
