"""Report: the board report (report.board: one to three pages a CFO can forward) as a PDF and as HTML, the CSV of
every number and the JSON appendix (every field of the plan), plus the vLLM command for the recommended method. All
from the Plan page's own call, plan() with the hardware comparison when the Plan page asks for it; "How sure" is the
Sensitivity page's Monte Carlo at the plan's volume (the one a stated spend buys)."""

from __future__ import annotations

import datetime as dt

import streamlit as st

import i18n
from i18n import tr
from i18n.numbers import fmt_usd
from planner import plan as P
from report.board import BoardReport, appendix_json, board_report
from report.board_html import board_html
from report.board_pdf import board_pdf
from views.parts import hardware as hardware_part
from views.parts import report as rep
from views.parts import widgets
from views.parts.text import plain
from views.sidebar import state as S


@st.cache_resource(max_entries=16, show_spinner=False, hash_funcs={P.PlanRequest: repr})
def _documents(req: P.PlanRequest, day: str, lang: str = "en") -> tuple[BoardReport, bytes, str]:
    """(the board report's record, its PDF, its HTML) for the plan of `req` (S.plan's, levers included), dated
    `day`, written in `lang`; cached as the plan is (the record is immutable, the documents are bytes and text)."""
    r = board_report(S.plan(req, levers=True), S.catalog(), generated=day, lang=lang)
    return r, board_pdf(r), board_html(r)


def render() -> None:
    req = S.page_header(tr("Report"))
    if req is None:
        return
    cat = S.catalog()
    req = hardware_part.with_comparison(req)  # the Plan page's request: its hardware comparison reaches the report
    p = S.plan(req, levers=True)
    # the Monte Carlo takes the volume a stated spend buys, as the plan and the Sensitivity page do
    mc = S.monte_carlo(S.at_spend_volume(req), p.best.method, p.best.k) if p.best is not None else None
    day = dt.date.today().isoformat()
    board, pdf_doc, html_doc = _documents(req, day, i18n.language())
    # the planner's sentences as text: their dollar signs would otherwise open LaTeX (views.parts.text)
    st.markdown(tr("**Recommendation:** {decision}", decision=plain(board.decision)))
    if board.decision_note:
        st.caption(plain(board.decision_note))
    if board.elsewhere:
        st.markdown(plain(board.elsewhere))
    if board.knee:
        st.markdown(f"**{plain(board.knee)}**")
    st.markdown("\n".join(f"- {plain(f.label)}: **{plain(f.value)}**" + (f" ({plain(f.note)})" if f.note else "")
                           for f in board.money))
    if mc is not None:
        st.markdown(tr("**How sure:** {label} (K={k}) saves money in {v} % "
                    "of {samples} draws (monthly saving p5 {saving_p05}, median "
                    "{saving_p50}, p95 {saving_p95}; the Sensitivity page's Monte Carlo).", label=cat.methods[mc.method].label, k=mc.k, v=f"{mc.p_saves * 100:.0f}", samples=mc.samples, saving_p05=fmt_usd(mc.saving_p05), saving_p50=fmt_usd(mc.saving_p50), saving_p95=fmt_usd(mc.saving_p95)))
    csv_rows = rep.scenario_rows(p, list(p.levers), mc)
    c = st.columns(2) + st.columns(2)  # two rows of two: the labels whole at 1280 px
    c[0].download_button(tr("Download the board report (PDF)"), pdf_doc, file_name=f"specplan-{day}.pdf",
                         mime="application/pdf", key="report_pdf")
    c[1].download_button(tr("Download the board report (HTML)"), html_doc.encode("utf-8"),
                         file_name=f"specplan-{day}.html", mime="text/html", key="report_html")
    c[2].download_button(tr("Download all numbers (CSV)"), rep.to_csv(csv_rows).encode("utf-8"),
                         file_name=f"specplan-{day}.csv", mime="text/csv", key="report_csv")
    c[3].download_button(tr("Download the JSON appendix"), appendix_json(p).encode("utf-8"),
                         file_name=f"specplan-{day}.json", mime="application/json", key="report_json")
    st.caption(tr("The board report: the decision, the bills, the fleet by hour, what the probability depends on, ")
               + (tr("the GPU types compared, ") if board.hardware else "")
               + tr("and the assumptions with sources and dates, on one to three A4 pages. The CSV "
                    "({n} rows) and the JSON appendix hold every number behind it; CSV cells starting with "
                    "= + - @ (or tab / CR / LF) are prefixed with a single quote so spreadsheets do not run them as "
                    "formulas, and cells holding a line break, quote or comma are quoted.", n=len(csv_rows)))
    if p.deploy is not None:
        title = (tr("Deployment command for the recommended method") if p.recommendation is not None
                 else tr("Deployment command for the cheapest method ({label}; not recommended here)", label=p.best.label))
        st.subheader(title)
        st.code(p.deploy["command"], language="bash")
        for n in p.deploy["notes"]:
            st.caption(n)
    widgets.glossary()
    with st.expander(tr("Assumptions (sources and dates)")):
        st.dataframe([a.__dict__ for a in p.assumptions], key="report_assumptions", hide_index=True,
                     column_config=widgets.headers(columns=("what", "value", "source", "date")))


if __name__ == "__main__":
    render()
