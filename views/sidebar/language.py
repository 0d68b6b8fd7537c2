"""The sidebar's language switch (English / 简体中文) and the 万/亿 switch for Chinese money. The language defaults to
the browser's (st.context.locale, navigator.language; else the Accept-Language header) and is carried in the URL as
`lang` once the user picks one; `wan` (万/亿) likewise. URL keys: lang, wan (merged into views.sidebar.state's schema).
"""

from __future__ import annotations

import streamlit as st

import i18n
from i18n import tr
from views.sidebar.url_values import url_bool

AUTO = ""  # no language picked: the browser's



# URL parameters: (default, parser, check), turned into views.sidebar.state.Param by views.sidebar.state._params
PARAMS: dict[str, tuple] = {
    "lang": (AUTO, str, lambda v: v == AUTO or v in i18n.LANGUAGES),
    "wan": (False, url_bool, lambda v: isinstance(v, bool)),
}


def browser_language() -> str:
    """The browser's language: navigator.language, else the Accept-Language header; English when neither says."""
    try:
        locale = st.context.locale
    except Exception:  # no browser behind this run (a bare script run)
        locale = None
    try:
        accept = st.context.headers.get("Accept-Language")
    except Exception:
        accept = None
    return i18n.from_browser(locale, accept)


def chosen() -> str:
    """This session's language: the one picked (or the link's `lang`), else the browser's."""
    ss = st.session_state
    lang = ss.get("lang") if ss.get("_url_loaded") else st.query_params.get("lang")
    return lang if lang in i18n.LANGUAGES else browser_language()


def _wan_on() -> bool:
    ss = st.session_state
    if ss.get("_url_loaded"):
        return bool(ss.get("wan", False))
    try:
        return url_bool(st.query_params.get("wan", "false"))
    except ValueError:
        return False


def apply() -> str:
    """Set this run's language (i18n.use) before any text is written; the language is returned."""
    lang = chosen()
    i18n.use(lang, wan_units=_wan_on())
    return lang


def _picked() -> None:
    st.session_state["lang"] = st.session_state["lang_pick"]
    apply()


def language_switch() -> None:
    """The switch at the top of the sidebar; picking a language writes `lang` to the link."""
    ss = st.session_state
    ss["lang_pick"] = i18n.language()
    st.selectbox("Language / 语言", list(i18n.LANGUAGES), key="lang_pick", format_func=i18n.LANGUAGES.get,
                 on_change=_picked)
    if i18n.language() == "zh-CN":
        st.checkbox(tr("Money in 万 / 亿"), key="wan", on_change=apply,
                    help=tr("Large dollar amounts written in 万 (10,000) and 亿 (100,000,000)."))
