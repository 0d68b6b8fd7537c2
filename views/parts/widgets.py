"""Widgets every page uses: a table readable at 1280 px, and the glossary of the jargon."""

import streamlit as st

from i18n import N_, tr, tr_known

TEXT_COLUMN_PX = 200  # a column of long text is this wide (its cells show the start; hover shows the rest)
LONG_TEXT_CHARS = 28  # a column whose longest cell is longer than this is long text


def table(rows: list[dict], *, key: str, first: tuple[str, ...] = (), widths: dict[str, int] | None = None) -> None:
    """st.dataframe readable on a 1280 px laptop with the sidebar open: the `first` columns (those present) lead, in
    that order, so the numbers a reader came for are in view without scrolling; a column of long text gets a fixed
    width instead of growing to its longest cell; `widths` (px) overrides per column; no index column."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    order = [c for c in first if c in cols] + [c for c in cols if c not in first]
    px = {c: TEXT_COLUMN_PX for c in cols
          if max((len(str(r.get(c, ""))) for r in rows), default=0) > LONG_TEXT_CHARS}
    px.update({c: w for c, w in (widths or {}).items() if c in cols})
    st.dataframe(rows, key=key, hide_index=True, column_order=order,  # headers in the reader's language (tr_known)
                 column_config={c: st.column_config.Column(label=tr_known(c), width=px.get(c)) for c in cols})


def headers(rows: list[dict] | None = None, *, columns: tuple[str, ...] = ()) -> dict:
    """st.dataframe's column_config naming each column (a row key, English) in the reader's language (tr_known)."""
    cols = list(dict.fromkeys([*columns, *(k for r in rows or [] for k in r)]))
    return {c: st.column_config.Column(label=tr_known(c)) for c in cols}


GLOSSARY = N_(
    "**alpha**: the probability that the target model accepts a drafted token (per token, at draft position 1; "
    "the seed article's ranges read that way). **tau** (acceptance length): tokens emitted per verifier step, "
    "bonus token included. **vLLM's draft acceptance rate** = (tau - 1) / K: a different number from alpha. "
    "**K**: draft tokens proposed per step. **TPOT**: time per output token, the latency a user sees. "
    "**Verifier**: the target model checking the drafts in one forward pass. **Memory-bound / compute-bound**: "
    "whether a step's time is set by reading the weights (speculation is nearly free) or by arithmetic "
    "(speculation's extra tokens cost real time). **CPM**: dollars per million output tokens, prefill GPU time "
    "included.")


def glossary() -> None:
    """The jargon, explained where it first appears on each page."""
    with st.expander(tr("What the words mean")):
        st.markdown(tr(GLOSSARY))
