"""History: the nightly acceptance length per workload (`python -m calibration regress`, from cron or CI),
with its 95 % interval, regressions marked."""

from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go
import streamlit as st

from calibration.storage.store import Store, StoreError, default_url
from i18n import tr


@st.cache_resource
def _store(url: str) -> Store:
    return Store(url)


def store() -> Store:
    """The store at $SPECPLAN_STORE_URL (or the default SQLite file), one engine per URL."""
    return _store(default_url())


def history_figure(rows: list[dict]) -> go.Figure:
    fig = go.Figure()
    for w in sorted({r["workload"] for r in rows}):
        pts = [r for r in rows if r["workload"] == w]
        x = [dt.datetime.fromtimestamp(r["created_at"], tz=dt.UTC) for r in pts]
        fig.add_scatter(
            x=x, y=[r["acceptance_length"] for r in pts], mode="lines+markers", name=w,
            error_y={"type": "data", "symmetric": False,
                     "array": [r["high"] - r["acceptance_length"] for r in pts],
                     "arrayminus": [r["acceptance_length"] - r["low"] for r in pts]},
        )
        bad = [r for r in pts if r["regression"]]
        if bad:
            fig.add_scatter(x=[dt.datetime.fromtimestamp(r["created_at"], tz=dt.UTC) for r in bad],
                            y=[r["acceptance_length"] for r in bad], mode="markers", name=tr("{workload}: regression", workload=w),
                            marker={"symbol": "x", "size": 14, "color": "red"})
    fig.update_layout(xaxis_title=tr("run time (UTC)"), yaxis_title=tr("acceptance length tau (95 % interval)"),
                      height=420, margin={"t": 30})
    return fig


def render() -> None:
    st.title(tr("Nightly acceptance history"))
    st.caption(tr("Each point is one nightly run of `python -m calibration regress`: the mean acceptance length "
               "(tokens per verifier step, bonus token included) per workload with its 95 % interval. A red x "
               "marks a regression: the recent level (median of the previous runs) lies above today's interval."))
    try:
        rows = store().history()
    except StoreError as e:
        st.error(tr("{e}. Check $SPECPLAN_STORE_URL; the CLI shows the same: `python -m calibration list history`.", e=e))
        return
    if not rows:
        st.info(tr("No nightly history yet. Add `python -m calibration regress` to cron or CI; it appends here "
                "and exits non-zero on a regression."))
        return
    series = sorted({r["series"] for r in rows})
    chosen = st.selectbox(tr("Series (model / configuration)"), series, key="hist_series")
    sel = [r for r in rows if r["series"] == chosen]
    st.plotly_chart(history_figure(sel), key="hist_chart")
    n_bad = sum(r["regression"] for r in sel)
    if n_bad:
        st.error(tr("{n_bad} regression(s) in this series.", n_bad=n_bad))
        for r in sel:
            if r["regression"]:
                st.write(r["message"])
    with st.expander(tr("All points"), expanded=False):
        st.dataframe([{k: r[k] for k in ("workload", "run_id", "acceptance_length", "low", "high", "regression")}
                      for r in sel], key="hist_table", hide_index=True)


if __name__ == "__main__":
    render()
