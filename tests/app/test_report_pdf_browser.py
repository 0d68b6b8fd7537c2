"""Real browser: the Report page's "Download the board report (PDF)" button in headless Chromium gives a PDF that
opens (pypdf) and whose bills, saving and probability are the Plan page's and the CLI's, for a spend-mode link and
a hardware-comparison link."""

from __future__ import annotations

import re

import pytest
from pypdf import PdfReader

from planner.formatting import fmt_usd
from tests.app.live_app import ARGS, CHROMIUM, running_app, settled
from tests.app.pages import cli_plan

pytestmark = pytest.mark.browser
PLAN_FLAGS = ("--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4")  # the sidebar's defaults


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("store") / "store.db") as (url, _pid):
        yield url


def _download_pdf(page, url: str, tmp_path) -> tuple[str, list[str], int, str]:
    """(the Plan page's first money figures, the Report page's, the PDF's page count and text) for a link."""
    page.goto(url, wait_until="domcontentloaded")
    page.locator("[data-testid=stMetricValue]").first.wait_for(timeout=90_000)
    settled(page)
    plan_values = page.locator("[data-testid=stMetricValue]").all_inner_texts()
    page.get_by_role("link", name="Report").first.click()
    button = page.get_by_role("button", name="Download the board report (PDF)")
    button.wait_for(timeout=90_000)
    with page.expect_download(timeout=60_000) as info:
        button.click()
    path = tmp_path / info.value.suggested_filename
    info.value.save_as(path)
    reader = PdfReader(str(path))
    text = " ".join(" ".join(p.extract_text() for p in reader.pages).split())
    return info.value.suggested_filename, plan_values, len(reader.pages), text


@pytest.mark.parametrize("query,flags", [
    ("volume_source=spend&spend_usd=150000", ("--spend-usd-per-month", "150000")),
    ("hw_compare=true", ("--compare-hardware",)),
], ids=["spend", "hardware comparison"])
def test_the_downloaded_pdf_says_what_the_app_and_the_cli_say(server, tmp_path, query, flags):
    from playwright.sync_api import sync_playwright

    js = cli_plan(*PLAN_FLAGS, *flags)
    e = js["economics"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        name, plan_values, pages, text = _download_pdf(page, f"{server}/?{query}", tmp_path)
        browser.close()
    assert re.fullmatch(r"specplan-\d{4}-\d\d-\d\d\.pdf", name) and 1 <= pages <= 3
    bills = [f"{fmt_usd(e['reference_bill_usd_per_month'])}/month", f"{fmt_usd(e['new_bill_usd_per_month'])}/month"]
    saving = f"{fmt_usd(e['monthly_saving_usd'])}/month"
    assert bills[0] == plan_values[0]  # the Plan page leads with today's bill, the CLI's
    assert saving in plan_values
    for figure in (*bills, saving, f"{e['p_saving_positive'] * 100:.0f} %"):
        assert figure in text, (figure, text[:1200])
    if "hardware_comparison" in js:
        cheapest = js["hardware_comparison"]["cheapest"]
        assert "Which GPU type" in text and f"{fmt_usd(cheapest['usd_per_month'])}/month" in text
    else:
        assert "Which GPU type" not in text and "what a spend of $150,000/month buys" in text
