"""The message catalogues (i18n/en.yaml, i18n/zh-CN.yaml) against the code: every key the code translates is in
both, both hold the same keys, a translation fills the same named fields as its English, every request field a
PlanError names has a reader's name, and no Streamlit call in views/ is handed a bare English text."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

import i18n

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("i18n_keys", ROOT / "tools" / "i18n_keys.py")
keys_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(keys_tool)

# Streamlit calls whose first argument (or help=/label=/placeholder=) is text a reader sees
UI_CALLS = {"title", "header", "subheader", "caption", "markdown", "error", "warning", "info", "success", "button",
            "download_button", "selectbox", "radio", "checkbox", "number_input", "text_input", "text_area",
            "file_uploader", "expander", "toggle", "slider", "select_slider", "multiselect", "metric", "spinner",
            "form_submit_button", "popover", "tabs", "page_header"}
UI_KEYWORDS = {"help", "label"}
LOGGERS = {"log", "logger", "logging"}  # log.error(...) goes to the server log, not to a reader
BILINGUAL = {"Language / 语言"}  # the switch's own label is in both languages on purpose


def fields(text: str) -> set[str]:
    return set(re.findall(r"\{(\w+)", text.replace("{{", "").replace("}}", "")))


def test_every_key_the_code_translates_is_in_both_catalogues():
    used = keys_tool.used_keys()
    assert len(used) > 300  # the scan finds the pages' strings (a broken scan finds none)
    for lang in i18n.LANGUAGES:
        missing = {k: where for k, where in used.items() if k not in i18n.catalogue(lang)}
        assert not missing, f"{lang}: {len(missing)} missing, e.g. {list(missing.items())[:3]}"


def test_both_catalogues_hold_the_same_keys_and_no_key_unused():
    en, zh = i18n.catalogue("en"), i18n.catalogue("zh-CN")
    assert set(en) == set(zh), (sorted(set(en) - set(zh))[:5], sorted(set(zh) - set(en))[:5])
    used = keys_tool.used_keys()
    unused = [k for k in en if k not in used and not k.startswith(("field:", "known:"))]
    assert not unused, unused[:5]


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_a_translation_fills_only_the_fields_its_english_names(lang):
    for key, text in i18n.catalogue(lang).items():
        assert fields(text) <= fields(key), (key, text)
        values = {f: "x" for f in fields(key)}
        if values:
            text.format(**values)  # a stray brace raises here, not on a page


def test_the_english_catalogue_is_the_key_itself():
    for key, text in i18n.catalogue("en").items():
        if not key.startswith(("field:", "known:")):
            assert text == key, key
        elif key.startswith("known:"):
            assert text == key.removeprefix("known:"), key


def test_every_field_a_plan_error_names_has_a_readers_name():
    named = set()
    for f in sorted((ROOT / "planner").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "PlanError"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                named.add(node.args[0].value)
    assert len(named) > 20
    for lang in i18n.LANGUAGES:
        lacks = sorted(n for n in named if f"field:{n}" not in i18n.catalogue(lang))
        assert not lacks, (lang, lacks)


def _bare_texts(path: Path) -> list[str]:
    """Text literals (plain or f-strings with letters) handed straight to a Streamlit call in `path`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name not in UI_CALLS or (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                                    and f.value.id in LOGGERS):
            continue
        args = ([node.args[0]] if node.args else []) + [k.value for k in node.keywords if k.arg in UI_KEYWORDS]
        for a in args:
            parts = [a.value] if isinstance(a, ast.Constant) and isinstance(a.value, str) else [
                v.value for v in a.values if isinstance(v, ast.Constant)] if isinstance(a, ast.JoinedStr) else []
            if any(re.search(r"[A-Za-z]{3}", p) for p in parts) and "".join(parts) not in BILINGUAL:
                out.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno}: {ast.unparse(a)[:60]}")
    return out


def test_no_streamlit_call_in_views_gets_a_bare_english_text():
    bare = [t for f in sorted((ROOT / "views").rglob("*.py")) for t in _bare_texts(f)]
    bare += _bare_texts(ROOT / "app.py")
    assert not bare, "\n".join(bare)


@pytest.mark.parametrize("tags, want", [
    (("zh-CN", None), "zh-CN"), (("zh-TW", None), "zh-CN"), (("zh", None), "zh-CN"), (("en-GB", None), "en"),
    ((None, "zh-CN,zh;q=0.9,en;q=0.8"), "zh-CN"), ((None, "en-US,en;q=0.9,zh-CN;q=0.8"), "en"),
    ((None, "fr-FR,zh;q=0.5"), "zh-CN"), (("fr-FR", "fr,de"), "en"), ((None, None), "en"),
    ((None, "zh;q=0,en"), "en"), (("de-DE", "zh-CN;q=0.7"), "zh-CN"),
])
def test_the_browsers_language_picks_the_catalogue(tags, want):
    assert i18n.from_browser(*tags) == want


def test_a_missing_key_reads_english_and_is_marked_when_strict(monkeypatch):
    with i18n.using("zh-CN"):
        monkeypatch.delenv(i18n.STRICT_ENV, raising=False)
        assert i18n.tr("no such key {x}", x=1) == "no such key 1"
        monkeypatch.setenv(i18n.STRICT_ENV, "1")
        assert i18n.tr("no such key {x}", x=1) == i18n.MISSING.format("no such key 1")
        assert i18n.tr("Monthly saving") == "每月节省"
    assert i18n.tr("Monthly saving") == "Monthly saving"
