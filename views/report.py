"""Report: a self-contained HTML report and a CSV of all scenario numbers, plus the vLLM command for the
recommended method."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from views import _model as mdl
from views import _report as rep
from views import _state as S
from views.levers import waterfall_figure
from views.plan import compute, cpm_chart


def render() -> None:
    inp = S.page_header("Report")
    if inp is None:
        return
    cat = S.catalog()
    data = compute()
    summ = data["summary"]
    mix = data["mix"]
    st.markdown(f"**Recommendation:** {summ['recommendation']}")
    method = summ.get("recommended") or (summ["best"]["method"] if summ.get("best") else None)
    command = None
    if method:
        row = next(r for r in summ["tables"]["mid"] if r["method"] == method)
        command = mdl.vllm_command(inp, method, row["k"], cat, max_num_seqs=row["batch"])
        title = ("Deployment command for the recommended method" if summ.get("recommended")
                 else f"Deployment command for the best method ({row['label']}; not recommended here)")
        st.subheader(title)
        st.code(command["command"], language="bash")
        for n in command["notes"]:
            st.caption(n)
    start = "eagle3" if cat.method_available("eagle3", inp.model)[0] else None
    levers = S.lever_waterfall(inp, mix, start, None) if start else []
    figures = [("CPM by method (each at its own best batch under the SLO)", cpm_chart(data))]
    if levers:
        figures.append(("Levers in the article's order", waterfall_figure(
            levers, "today (EAGLE-3)", levers[0]["usd_per_mtok_before"], "Article order")))
    today = dt.date.today().isoformat()
    html_doc = rep.html_report(inp=inp, catalog=cat, summary=summ, mix=mix, figures=figures, command=command,
                               levers=levers, today=today)
    csv_doc = rep.to_csv(rep.scenario_rows(inp, summ, mix, levers))
    c = st.columns(2)
    c[0].download_button("Download the HTML report", html_doc.encode("utf-8"), file_name=f"specplan-{today}.html",
                         mime="text/html", key="report_html")
    c[1].download_button("Download all numbers (CSV)", csv_doc.encode("utf-8"), file_name=f"specplan-{today}.csv",
                         mime="text/csv", key="report_csv")
    st.caption(f"HTML: {len(html_doc) / 1e6:.1f} MB, self-contained (plotly.js inlined), assumptions with sources and "
               f"dates. CSV: {csv_doc.count(chr(10)) - 1} rows; cells starting with = + - @ (or tab / CR) are "
               "prefixed with a single quote so spreadsheets do not run them as formulas.")
    with st.expander("Assumptions (sources and dates)"):
        st.dataframe([{"assumption": a, "value": v, "source": s, "date": d}
                      for a, v, s, d in rep.assumptions(inp, cat, {**summ, "mix": mix})],
                     key="report_assumptions", hide_index=True)


if __name__ == "__main__":
    render()
