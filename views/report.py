"""Report: a self-contained HTML report and a CSV of all scenario numbers, plus the vLLM command for the
recommended method; everything from the same plan() call as the Plan page."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from views import _report as rep
from views import _state as S
from views.levers import waterfall_figure
from views.plan import cpm_chart


def render() -> None:
    req = S.page_header("Report")
    if req is None:
        return
    cat = S.catalog()
    p = S.plan(req, levers=True)
    st.markdown(f"**Recommendation:** {p.verdict}")
    if p.deploy is not None:
        title = ("Deployment command for the recommended method" if p.recommendation is not None
                 else f"Deployment command for the cheapest method ({p.best.label}; not recommended here)")
        st.subheader(title)
        st.code(p.deploy["command"], language="bash")
        for n in p.deploy["notes"]:
            st.caption(n)
    S.glossary()
    levers = list(p.levers)
    figures = [("CPM by method (each at its own best batch under the SLO)", cpm_chart(p))]
    if levers:
        figures.append(("Levers in the article's order", waterfall_figure(
            levers, f"today ({cat.methods[levers[0].method].label if levers[0].method in cat.methods else 'no speculation'})",
            levers[0].usd_per_mtok_before, "Article order")))
    today = dt.date.today().isoformat()
    html_doc = rep.html_report(p=p, catalog=cat, figures=figures, levers=levers, today=today)
    csv_doc = rep.to_csv(rep.scenario_rows(p, levers))
    c = st.columns(2)
    c[0].download_button("Download the HTML report", html_doc.encode("utf-8"), file_name=f"specplan-{today}.html",
                         mime="text/html", key="report_html")
    c[1].download_button("Download all numbers (CSV)", csv_doc.encode("utf-8"), file_name=f"specplan-{today}.csv",
                         mime="text/csv", key="report_csv")
    st.caption(f"HTML: {len(html_doc) / 1e6:.1f} MB, self-contained (plotly.js inlined), assumptions with sources and "
               f"dates. CSV: {csv_doc.count(chr(10)) - 1} rows; cells starting with = + - @ (or tab / CR) are "
               "prefixed with a single quote so spreadsheets do not run them as formulas.")
    with st.expander("Assumptions (sources and dates)"):
        st.dataframe([a.__dict__ for a in p.assumptions], key="report_assumptions", hide_index=True)


if __name__ == "__main__":
    render()
