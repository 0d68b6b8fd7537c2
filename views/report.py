"""Report: a self-contained HTML report and a CSV of all scenario numbers, plus the vLLM command for the
recommended method; everything from the same calls as the pages: the Plan page's plan() (the fleet by hour and its
bills included) and the Sensitivity page's Monte Carlo."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from planner.formatting import fmt_usd
from views.levers import waterfall_figure
from views.parts import report as rep
from views.parts import widgets
from views.parts.text import plain_in
from views.plan import cpm_chart
from views.sidebar import state as S


def render() -> None:
    req = S.page_header("Report")
    if req is None:
        return
    cat = S.catalog()
    p = S.plan(req, levers=True)
    mc = S.monte_carlo(req, p.best.method, p.best.k) if p.best is not None else None
    st.markdown(f"**Recommendation:** {plain_in(p.verdict, getattr(st.session_state.get(S.PROFILE_KEY), 'name', None))}")
    today, best = rep.fleet_pair(p)
    parts = []
    if today is not None:
        parts.append(f"**The bill today ({today.label}):** {fmt_usd(today.usd_per_month_autoscaled)}/month "
                     f"autoscaled, {fmt_usd(today.usd_per_month_fixed)}/month fixed at the peak ({today.peak_gpus:,} GPUs)")
    if best is not None:
        parts.append(f"**with {best.label}:** {fmt_usd(best.usd_per_month_autoscaled)}/month autoscaled, "
                     f"{fmt_usd(best.usd_per_month_fixed)}/month fixed ({best.peak_gpus:,} GPUs)")
    if parts:
        st.markdown("; ".join(parts) + ".")
    if mc is not None:
        st.markdown(f"**How sure:** {cat.methods[mc.method].label} (K={mc.k}) saves money in {mc.p_saves * 100:.0f} % "
                    f"of {mc.samples} draws (monthly saving p5 {fmt_usd(mc.saving_p05)}, median "
                    f"{fmt_usd(mc.saving_p50)}, p95 {fmt_usd(mc.saving_p95)}; the Sensitivity page's Monte Carlo).")
    if p.deploy is not None:
        title = ("Deployment command for the recommended method" if p.recommendation is not None
                 else f"Deployment command for the cheapest method ({p.best.label}; not recommended here)")
        st.subheader(title)
        st.code(p.deploy["command"], language="bash")
        for n in p.deploy["notes"]:
            st.caption(n)
    widgets.glossary()
    levers = list(p.levers)
    figures = [("CPM by method (each at its own best batch under the SLO)", cpm_chart(p))]
    if levers:
        figures.append(("Levers in the article's order", waterfall_figure(
            levers, f"today ({cat.methods[levers[0].method].label if levers[0].method in cat.methods else 'no speculation'})",
            levers[0].usd_per_mtok_before, "Article order")))
    day = dt.date.today().isoformat()
    html_doc = rep.html_report(p=p, catalog=cat, figures=figures, levers=levers, today=day, mc=mc)
    csv_rows = rep.scenario_rows(p, levers, mc)
    csv_doc = rep.to_csv(csv_rows)
    c = st.columns(2)
    c[0].download_button("Download the HTML report", html_doc.encode("utf-8"), file_name=f"specplan-{day}.html",
                         mime="text/html", key="report_html")
    c[1].download_button("Download all numbers (CSV)", csv_doc.encode("utf-8"), file_name=f"specplan-{day}.csv",
                         mime="text/csv", key="report_csv")
    st.caption(f"HTML: {len(html_doc) / 1e6:.1f} MB, self-contained (plotly.js inlined): the headline, the bills and "
               "the fleet by hour, the Monte Carlo, methods, levers and assumptions with sources and dates. CSV: "
               f"{len(csv_rows)} rows; cells starting with = + - @ (or tab / CR / LF) are "
               "prefixed with a single quote so spreadsheets do not run them as formulas, and cells holding a line "
               "break, quote or comma are quoted.")
    with st.expander("Assumptions (sources and dates)"):
        st.dataframe([a.__dict__ for a in p.assumptions], key="report_assumptions", hide_index=True)


if __name__ == "__main__":
    render()
