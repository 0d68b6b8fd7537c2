"""The product in English and Simplified Chinese: one translation function (`tr`) over one message catalogue per
language (i18n/en.yaml, i18n/zh-CN.yaml), the language picked per run (`use`, `using`), and the browser's language
read from navigator.language or an Accept-Language header (`from_browser`).

A message's key is its English text (gettext's msgid convention), with named `{fields}` filled by str.format:
`tr("Monthly saving {saving}", saving=fmt_usd(x))`. A key missing from the active language's catalogue comes back
as its English text, or, with SPECPLAN_I18N_STRICT=1 (the tests: tests/app/test_i18n_pages.py,
tests/app/test_i18n_browser.py), as `MISSING.format(key)`, a marker they look for on every page. The views and
the board report translate; the planner stays English (its sentences reach a page as they are).

Imports only the standard library and PyYAML: app.py, views/, report/ and cli/ read it; it reads none of them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

import yaml

LANGUAGES = {"en": "English", "zh-CN": "简体中文"}
DEFAULT = "en"
MISSING = "⟦{}⟧"  # what tr() returns, when strict, for a key the catalogue lacks; no page may show it
STRICT_ENV = "SPECPLAN_I18N_STRICT"
CATALOGUE_DIR = Path(__file__).resolve().parent

_LANG: ContextVar[str] = ContextVar("specplan_language", default=DEFAULT)
_WAN: ContextVar[bool] = ContextVar("specplan_wan", default=False)


@functools.cache
def catalogue(lang: str) -> dict[str, str]:
    """The message catalogue of `lang` (a code in LANGUAGES): English key -> text in that language."""
    if lang not in LANGUAGES:
        raise ValueError(f"language={lang!r} is not allowed: one of {', '.join(LANGUAGES)}")
    data = yaml.safe_load((CATALOGUE_DIR / f"{lang}.yaml").read_text(encoding="utf-8")) or {}
    bad = [k for k, v in data.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise ValueError(f"i18n/{lang}.yaml: entries {bad[:3]} are not text: every key and value must be a string")
    return data


def language() -> str:
    """The language of this run (`use`); English until set."""
    return _LANG.get()


def wan() -> bool:
    """Whether money is written in 万 / 亿 (Chinese only; i18n.numbers)."""
    return _WAN.get() and _LANG.get() == "zh-CN"


def use(lang: str, *, wan_units: bool = False) -> None:
    """Set the language (and the 万/亿 switch) for the rest of this thread's run; an unknown code means English."""
    _LANG.set(lang if lang in LANGUAGES else DEFAULT)
    _WAN.set(bool(wan_units))


@contextlib.contextmanager
def using(lang: str, *, wan_units: bool = False) -> Iterator[None]:
    """`lang` inside the block, the previous language after it (the board report, the CLI)."""
    t1, t2 = _LANG.set(lang if lang in LANGUAGES else DEFAULT), _WAN.set(bool(wan_units))
    try:
        yield
    finally:
        _LANG.reset(t1)
        _WAN.reset(t2)


def tr(key: str, /, **values: object) -> str:
    """`key` (its English text) in this run's language, its `{fields}` filled from `values`."""
    text = catalogue(_LANG.get()).get(key)
    if text is None:
        text = MISSING.format(key) if os.environ.get(STRICT_ENV) == "1" else key
    return text.format(**values) if values else text


def N_(key: str) -> str:  # noqa: N802 (gettext's name for it)
    """`key` itself: marks a text kept in a module-level table (a widget's option labels) for the catalogue scan
    (tools/i18n_keys.py); the page translates it with tr(table[value]) where it draws it."""
    return key


def tr_known(text: str) -> str:
    """`text` translated when the catalogue has it, else as it is: for the planner's English phrases (a PlanError's
    'allowed', an acceptance tier's name), of which the catalogue holds the common ones under 'known:<text>'."""
    return catalogue(_LANG.get()).get(f"known:{text}", text)


def field_name(name: str) -> str:
    """A request field's name for a reader ('tpot_slo_ms' -> 'TPOT SLO (ms)'); indexed names ('hours[3].x') keep
    their index. An unlisted field is shown as it is, in code font by the caller."""
    base = re.sub(r"\[.*?\]", "", name)
    label = catalogue(_LANG.get()).get(f"field:{base}")
    return name if label is None else label + (f" ({name})" if base != name else "")


_TAG = re.compile(r"^([a-zA-Z]{2,3})(?:[-_]([a-zA-Z0-9]+))?")


def from_browser(locale: str | None, accept_language: str | None = None) -> str:
    """The language to show a browser: navigator.language first ('zh-CN', 'zh-TW', 'zh', 'en-GB'), else the best
    Accept-Language entry we have ('zh-CN,zh;q=0.9,en;q=0.8'); any Chinese tag reads Simplified Chinese (the only
    Chinese catalogue), anything else English."""
    tags: list[str] = []
    if locale:
        tags.append(locale)
    if accept_language:
        ranked = []
        for i, part in enumerate(accept_language.split(",")):
            tag, _, q = part.strip().partition(";q=")
            try:
                weight = float(q) if q else 1.0
            except ValueError:
                weight = 0.0
            if tag and weight > 0:
                ranked.append((-weight, i, tag))
        tags += [t for _w, _i, t in sorted(ranked)]
    for tag in tags:
        m = _TAG.match(tag.strip())
        if m is None:
            continue
        if m.group(1).lower() == "zh":
            return "zh-CN"
        if m.group(1).lower() == "en":
            return "en"
    return DEFAULT
