"""Real browser, both languages: headless Debian Chromium with its own locale (navigator.language and the
Accept-Language header) opens every page of `streamlit run app.py`; a zh-CN browser gets Chinese and an en-US one
English with no link parameter, no text on any page is a key the catalogue lacks (i18n.MISSING's marker), and the
sidebar's switch changes the language and writes lang= to the link."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import i18n
from tests.app.live_app import ARGS, CHROMIUM, running_app, settled

SCREENS = Path("/tmp/specplan-screens")
PAGES = ["", "methods", "levers", "sensitivity", "traffic", "claims", "report", "calibrate", "history"]
MARK = i18n.MISSING.split("{}")[0]
SIDEBAR = {"zh-CN": "场景（所有页面通用）", "en-US": "Scenario (all pages)"}

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("store") / "store.db", env={i18n.STRICT_ENV: "1"}) as (url, _pid):
        yield url


def _settled(page) -> None:
    """A title is drawn and the page's script run is over."""
    page.locator("[data-testid=stMain] h1").first.wait_for(timeout=120_000)
    settled(page)


@pytest.mark.parametrize("locale", ["zh-CN", "en-US"])
def test_every_page_in_the_browsers_language_without_a_missing_string(server, locale, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        ctx = browser.new_context(locale=locale, viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        for path in PAGES:
            page.goto(f"{server}/{path}", wait_until="domcontentloaded")
            _settled(page)
            text = page.locator("body").inner_text()
            assert MARK not in text, f"/{path} in {locale}: {text[text.index(MARK) - 80:text.index(MARK) + 120]}"
            assert SIDEBAR[locale] in text, f"/{path} in {locale}: the sidebar is not in the browser's language"
            if locale == "zh-CN" and path in ("", "report"):
                shot = tmp_path / f"zh_{path or 'plan'}.png"
                page.screenshot(path=str(shot), full_page=True)
                SCREENS.mkdir(parents=True, exist_ok=True)
                shutil.copy(shot, SCREENS / shot.name)
        title = page.locator("[data-testid=stMain] h1").first.inner_text()
        assert (title == "每晚接受率历史") == (locale == "zh-CN"), title
        browser.close()


def test_the_switch_changes_the_language_and_the_link_carries_it(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_context(locale="zh-CN", viewport={"width": 1280, "height": 900}).new_page()
        page.goto(server + "/", wait_until="domcontentloaded")
        _settled(page)
        assert "方案：投机解码对你划算吗？" in page.locator("[data-testid=stMain] h1").first.inner_text()
        switch = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").filter(has_text="Language / 语言")
        switch.first.click()
        page.get_by_role("option", name="English", exact=True).first.click()
        page.wait_for_function("() => /lang=en/.test(window.location.search)", timeout=60_000)
        _settled(page)
        title = page.locator("[data-testid=stMain] h1").first.inner_text()
        assert "Plan: does speculative decoding pay for you?" in title
        link = page.url
        # the link opens in English in a Chinese browser: the pick travels with it
        other = browser.new_context(locale="zh-CN", viewport={"width": 1280, "height": 900}).new_page()
        other.goto(link, wait_until="domcontentloaded")
        _settled(other)
        assert SIDEBAR["en-US"] in other.locator("body").inner_text()
        browser.close()
