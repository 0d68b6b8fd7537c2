"""Every page in Simplified Chinese and in English (the link's lang=): it renders, and no text on it is a key the
active catalogue lacks (i18n.MISSING's marker). The real-browser check of the same, with the browser's own language,
is tests/app/test_i18n_browser.py."""

from __future__ import annotations

import os

import pytest

import i18n

PAGES = ["views/plan.py", "views/methods.py", "views/levers.py", "views/sensitivity.py", "views/traffic.py",
         "views/claims.py", "views/report.py", "views/calibrate.py", "views/history.py"]
MARK = i18n.MISSING.split("{}")[0]


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    """A key missing from the catalogue shows its marker (i18n.STRICT_ENV), not its English text."""
    monkeypatch.setenv(i18n.STRICT_ENV, "1")
    assert os.environ[i18n.STRICT_ENV] == "1"


def _texts(at) -> list[str]:
    """Every piece of text the run drew: text elements' values, widgets' labels, help texts and options (a widget's
    value is not read: AppTest formats it in the test's thread, in English)."""
    out: list[str] = []
    for kind in ("title", "header", "subheader", "caption", "markdown", "error", "warning", "info", "success"):
        out += [str(el.value) for el in getattr(at, kind, [])]
    for m in at.metric:
        out += [str(m.label), str(m.value), str(m.proto.help)]
    for kind in ("selectbox", "radio", "checkbox", "number_input", "button", "text_area", "text_input", "toggle",
                 "multiselect"):
        for el in getattr(at, kind, []):
            out += [str(el.proto.label), str(getattr(el.proto, "help", ""))]
            out += [str(o) for o in getattr(el.proto, "options", [])]
    out += [str(e.proto.label) for e in at.expander]
    return out


@pytest.mark.parametrize("lang", ["zh-CN", "en"])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_has_every_string_in_both_languages(app, page, lang):
    at = app({"lang": lang})
    at.switch_page(page).run()
    assert not at.exception, at.exception
    missing = [t for t in _texts(at) if MARK in t]
    assert not missing, f"{page} in {lang}: {missing[:3]}"
    side = [str(el.proto.label) for el in at.sidebar.selectbox]
    assert ("模型" in side) == (lang == "zh-CN"), side


def test_a_chinese_page_writes_money_in_us_dollars_per_month(app):
    at = app({"lang": "zh-CN"})
    bills = [m for m in at.metric if m.label.startswith("当前月度账单")]
    assert bills and bills[0].value.startswith("US$") and bills[0].value.endswith("/月"), [m.label for m in at.metric]


def test_a_plan_error_is_shown_in_chinese_with_the_field_named(app):
    at = app({"lang": "zh-CN", "volume_source": "spend", "spend_usd": "1"})
    errors = [e.value for e in at.error]
    assert any("每月支出" in e and "不被允许" in e for e in errors), errors
