"""Real browser: headless Debian Chromium (Playwright) against `streamlit run app.py` on a free port."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.app.live_app import ARGS, CHROMIUM, running_app, settled

ROOT = Path(__file__).resolve().parents[2]
SCREENS = Path("/tmp/specplan-screens")

pytestmark = pytest.mark.browser



@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("store") / "store.db") as (url, _pid):
        yield url


def test_upload_sample_and_read_recommendation(server, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(server + "/traffic", wait_until="domcontentloaded")
        page.get_by_text("Traffic profile", exact=True).first.wait_for(timeout=60_000)
        page.locator("[data-testid=stMain] input[type=file]").first.set_input_files(
            str(ROOT / "profiles" / "samples" / "code_completion.jsonl"))
        page.get_by_text("Loaded 'code_completion.jsonl'").wait_for(timeout=60_000)
        page.get_by_role("link", name="Plan").first.click()
        rec = page.locator("[data-testid=stMarkdownContainer] p", has_text="Recommendation:").first
        rec.wait_for(timeout=60_000)
        # the trace's own volume is the default: the sidebar says so, nobody had to pick it
        page.get_by_text("Using the trace's own").first.wait_for(timeout=60_000)
        settled(page)
        text = rec.inner_text()
        assert "code completion" in text and "K=" in text
        values = page.locator("[data-testid=stMetricValue]").all_inner_texts()
        # money first: today's monthly bill leads the page; the CPMs come below the bills
        assert re.fullmatch(r"\$[\d,]+/month", values[0]), values
        cpms = [v for v in values if v.endswith("/Mtok")]
        assert cpms and all(re.fullmatch(r"\$\d+\.\d{3} /Mtok", v) for v in cpms), values
        assert values.index(cpms[0]) > 2, values
        # at 1280 px (a laptop with the sidebar open) no metric label or value is cut off
        page.set_viewport_size({"width": 1280, "height": 900})
        page.wait_for_timeout(1500)
        cut = page.evaluate("""() => [...document.querySelectorAll(
            '[data-testid=stMetricValue], [data-testid=stMetricLabel]')]
            .filter(e => e.offsetParent !== null)
            .filter(e => [e, ...e.querySelectorAll('*')].some(x => x.scrollWidth > x.clientWidth + 1))
            .map(e => e.innerText)""")
        assert cut == [], f"truncated at 1280 px: {cut}"
        # Streamlit's own toolbar "Deploy" button is hidden (it sat next to "Deploy <method>")
        assert page.get_by_role("button", name="Deploy", exact=True).count() == 0
        shot = tmp_path / "plan_with_code_profile.png"
        page.screenshot(path=str(shot), full_page=True)
        SCREENS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, SCREENS / shot.name)
        print(f"recommendation: {text}\nbills: {values[:3]}, CPMs: {cpms}\nscreenshot: {SCREENS / shot.name}")
        browser.close()


def _upload(page, path: Path) -> None:
    page.locator("[data-testid=stMain] input[type=file]").first.set_input_files(str(path))


def _pick(page, label: str, option: str) -> None:
    """Choose `option` in the Streamlit selectbox labelled `label` (BaseWeb select: click, then the option)."""
    box = page.locator("[data-testid=stSelectbox]").filter(has_text=label).first
    box.click()
    page.get_by_role("option", name=option, exact=True).first.click()
    page.wait_for_timeout(800)


def test_real_exports_xlsx_semicolon_csv_and_a_mapped_column(server, tmp_path):
    """A spreadsheet, a European-Excel CSV (';' and decimal commas) and a file whose columns nobody recognises,
    its columns then mapped in the page: each becomes the profile in use."""
    from openpyxl import Workbook
    from playwright.sync_api import sync_playwright

    xlsx = tmp_path / "gateway_export.xlsx"
    wb = Workbook()
    ws = wb.active
    ws.append(["timestamp", "workload", "prompt_tokens", "output_tokens"])
    for i in range(60):
        ws.append([f"2026-11-01T00:{i:02d}:00Z", "code" if i % 3 else "chat", 900 + i, 200 + i])
    wb.save(xlsx)
    semi = tmp_path / "europe.csv"
    semi.write_text("timestamp;workload;prompt_tokens;output_tokens;weight\n" + "".join(
        f"2026-11-01T01:{i:02d}:00Z;chat;{500 + i};{300 + i};1,5\n" for i in range(40)), encoding="utf-8")
    odd = tmp_path / "mystery.csv"
    odd.write_text("when,ask,answer\n" + "".join(f"2026-11-01T02:{i:02d}:00Z,{700 + i},{150 + i}\n"
                                                  for i in range(30)), encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1200})
        page.goto(server + "/traffic", wait_until="domcontentloaded")
        page.get_by_text("Traffic profile", exact=True).first.wait_for(timeout=60_000)
        _upload(page, xlsx)
        page.get_by_text("Loaded 'gateway_export.xlsx'").wait_for(timeout=60_000)
        _upload(page, semi)
        page.get_by_text("Loaded 'europe.csv'").wait_for(timeout=60_000)
        _upload(page, odd)
        page.get_by_text("Columns not recognised").first.wait_for(timeout=60_000)
        _pick(page, "timestamp (request start)", "when")
        _pick(page, "prompt tokens", "ask")
        _pick(page, "output tokens", "answer")
        page.get_by_text("Loaded 'mystery.csv'").wait_for(timeout=60_000)
        shot = tmp_path / "traffic_mapped.png"
        page.screenshot(path=str(shot), full_page=True)
        SCREENS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, SCREENS / shot.name)
        browser.close()


def test_a_shared_link_with_an_uploaded_profile_reopens_in_a_fresh_browser(server, tmp_path):
    """Upload in one browser context, open the page's link in a brand-new context (no cookies, no session):
    the same profile and the same numbers."""
    from playwright.sync_api import sync_playwright

    f = tmp_path / "team_trace.csv"
    f.write_text("timestamp,workload,language,prompt_tokens,output_tokens\n" + "".join(
        f"2026-11-01T03:{i:02d}:00Z,rag_summarization,english,{3000 + 10 * i},{180 + i}\n" for i in range(45)),
        encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        first = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        first.goto(server + "/traffic", wait_until="domcontentloaded")
        first.get_by_text("Traffic profile", exact=True).first.wait_for(timeout=60_000)
        _upload(first, f)
        first.get_by_text("Loaded 'team_trace.csv'").wait_for(timeout=60_000)
        first.get_by_role("link", name="Plan").first.click()
        first.locator("[data-testid=stMetricValue]").first.wait_for(timeout=60_000)
        first.wait_for_timeout(2000)
        link = first.url
        assert "profile=" in link
        values = first.locator("[data-testid=stMetricValue]").all_inner_texts()
        second = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        second.goto(link, wait_until="domcontentloaded")
        second.locator("[data-testid=stMetricValue]").first.wait_for(timeout=60_000)
        second.wait_for_timeout(2000)
        assert "team_trace.csv" in second.locator("body").inner_text()
        assert second.locator("[data-testid=stMetricValue]").all_inner_texts() == values
        browser.close()


# The columns a reader came for, per page: their headers must be in view at 1280 px (sidebar open).
NAMED_COLUMNS = {"methods": ("method", "CPM $/Mtok", "vs today", "speedup (same batch)"),
                 "levers": ("lever", "monthly saving", "payback")}


def _headers_in_view(page) -> dict:
    """The first table's column headers the grid draws in its visible area (Glide's accessibility tree lists the
    columns in view, the last one possibly cut), and whether the table scrolls sideways."""
    page.wait_for_function("""() => document.querySelector(
        '[data-testid=stDataFrame] table[role=grid] th[role=columnheader]') !== null""", timeout=60_000)
    page.wait_for_timeout(1000)
    return page.evaluate("""() => {
        const df = document.querySelector('[data-testid=stDataFrame]');
        const heads = [...df.querySelectorAll('table[role=grid] th[role=columnheader]')].map(e => e.textContent.trim());
        const sc = df.querySelector('.dvn-scroller');
        return {heads, overflow: sc ? sc.scrollWidth > sc.clientWidth + 1 : true};
    }""")


def test_tables_readable_and_page_links_at_1280px(server, tmp_path):
    """At 1280 px the Methods table's cost and speedup columns and the Levers table's saving and payback columns are
    in view; a typed /plan link (with a scenario) opens the Plan page with that scenario, as do the other pages'
    paths."""
    from playwright.sync_api import sync_playwright

    from profiles import load_catalog

    label = load_catalog().models["llama-3.1-8b"].label
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for path, named in NAMED_COLUMNS.items():
            page.goto(f"{server}/{path}", wait_until="domcontentloaded")
            seen = _headers_in_view(page)
            shot = tmp_path / f"{path}_1280.png"
            page.screenshot(path=str(shot), full_page=True)
            SCREENS.mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, SCREENS / shot.name)
            heads = seen["heads"]
            for col in named:
                assert col in heads, f"{path}: '{col}' is not in view at 1280 px; in view: {heads}"
                # the last column in view may be cut unless nothing is to its right
                assert col != heads[-1] or not seen["overflow"], f"{path}: '{col}' is cut at 1280 px: {heads}"
        page.goto(f"{server}/plan?model=llama-3.1-8b&tp=1", wait_until="domcontentloaded")
        page.get_by_text("Plan: does speculative decoding pay for you?").wait_for(timeout=60_000)
        page.locator("[data-testid=stMetricValue]").first.wait_for(timeout=60_000)
        settled(page)
        body = page.locator("body").inner_text()
        assert "Page not found" not in body
        assert label in body  # the link's model is the one planned
        assert "model=llama-3.1-8b" in page.url and "tp=1" in page.url
        for path, title in (("methods", "Methods side by side"), ("report", "Report")):
            page.goto(f"{server}/{path}?model=llama-3.1-8b&tp=1", wait_until="domcontentloaded")
            page.get_by_role("heading", name=title).first.wait_for(timeout=60_000)
            page.wait_for_timeout(1000)
            assert "Page not found" not in page.locator("body").inner_text()
        browser.close()
