"""Real browser (Chromium via Playwright): upload a real config.json in the sidebar's "Your model" box and get a
plan for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.test_browser import ARGS, CHROMIUM, server  # noqa: F401 - the module's streamlit server fixture

pytestmark = pytest.mark.browser
CONFIG = Path(__file__).resolve().parents[1] / "profiles" / "model_configs" / "deepseek-ai--DeepSeek-V3.2.json"


def test_upload_a_config_json_and_get_a_plan_for_it(server):  # noqa: F811
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(server + "/", wait_until="domcontentloaded")
        sidebar = page.locator("[data-testid=stSidebar]")
        sidebar.get_by_text("Your model (config.json)").click()
        box = sidebar.locator("[data-testid=stExpander]", has_text="Your model (config.json)")
        box.locator("input[type=file]").set_input_files(str(CONFIG))
        page.wait_for_timeout(1000)
        sidebar.get_by_role("button", name="Use this model").click()
        sidebar.get_by_text("Using deepseek-ai/DeepSeek-V3.2 (config").wait_for(timeout=60_000)
        rec = page.locator("[data-testid=stMarkdownContainer] p", has_text="Recommendation:").first
        rec.wait_for(timeout=60_000)
        # the plan is for the uploaded model, in its checkpoint's FP8 weights
        page.get_by_text("deepseek-ai/DeepSeek-V3.2 (config", exact=False).nth(1).wait_for(timeout=60_000)
        caption = page.locator("[data-testid=stCaptionContainer]", has_text="deepseek-ai/DeepSeek-V3.2").first
        assert "(fp8)" in caption.inner_text()
        # the link follows the page's rerun (history.replaceState): wait for it rather than read it at once
        page.wait_for_function("() => /model=config(%3A|:)/.test(window.location.search)", timeout=60_000)
        assert "model=config%3A" in page.url or "model=config:" in page.url
        browser.close()
