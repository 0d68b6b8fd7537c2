"""Real browser against `streamlit run app.py`: a session that uploads file after file keeps one upload in the
server's memory, also when its client never deletes the replaced file (Streamlit frees a session's uploads only
when the browser deletes one or the session ends). Read from the server's own count of upload bytes
(/_stcore/metrics, cache_memory_bytes of the UploadedFileManager)."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.app.live_app import ARGS, CHROMIUM, running_app

FILE_BYTES = 2 * 2**20

pytestmark = pytest.mark.browser



@pytest.fixture
def server(tmp_path):
    with running_app(tmp_path / "store.db") as (url, _pid):
        yield url


def _upload_bytes(url: str) -> int:
    text = urllib.request.urlopen(url + "/_stcore/metrics?families=cache_memory_bytes", timeout=10).read().decode()
    return sum(int(float(m)) for m in re.findall(r'cache_type="UploadedFileManager"[^}]*\} (\S+)', text))


def test_a_session_keeps_one_upload_in_memory_when_its_client_deletes_none(server, tmp_path):
    from playwright.sync_api import sync_playwright

    files = []
    for i in range(3):  # columns the page does not recognise: it asks for a mapping, parses nothing
        f = tmp_path / f"export{i}.csv"
        f.write_bytes((f"col{i},other\n".encode() + b"1,2\n" * FILE_BYTES)[:FILE_BYTES])
        files.append(f)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.route("**/_stcore/upload_file/**",  # a client that never deletes a replaced upload
                   lambda route: route.abort() if route.request.method == "DELETE" else route.continue_())
        page.goto(server + "/traffic", wait_until="domcontentloaded")
        page.get_by_text("Traffic profile", exact=True).first.wait_for(timeout=60_000)
        for i, f in enumerate(files):
            page.locator("[data-testid=stMain] input[type=file]").first.set_input_files(str(f))
            page.get_by_text(f"col{i}").first.wait_for(timeout=60_000)  # the page has run with this file
        held = []
        for _ in range(12):  # the server refreshes this count at most every 5 s
            held.append(_upload_bytes(server))
            if held[-1] == FILE_BYTES:
                break
            time.sleep(1.0)
        browser.close()
    assert held[-1] == FILE_BYTES, f"upload bytes the server holds, polled: {held}"
