"""Levers: the seed's seven levers as a waterfall from today's configuration (step 0 adopts a draft when today has
none) to the end state, in the article's order and re-ordered by return on one-time cost; a step is applied only
when its fleet bill's saving pays back within the horizon; the applied set's bill, payback and NPV."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import streamlit as st

from planner.answer import LeverStep
from planner.decision.levers import order_by_return, summarize
from planner.formatting import fmt_cpm, fmt_months, fmt_usd
from planner.request import NO_SPEC
from views.parts import widgets
from views.sidebar import state as S


def waterfall_figure(steps: list[LeverStep], start_label: str, start_cpm: float, title: str) -> go.Figure:
    x = [start_label] + [f"{s.number}. {s.label}" for s in steps] + ["end state"]  # step 0: adopt a draft
    y = [start_cpm] + [s.usd_per_mtok_after - s.usd_per_mtok_before for s in steps] + [0]
    measure = ["absolute"] + ["relative"] * len(steps) + ["total"]
    text = [f"${start_cpm:.3f}"] + [
        (f"{(s.usd_per_mtok_after - s.usd_per_mtok_before):+.3f}" if s.applied else "skipped")
        for s in steps] + [f"${steps[-1].usd_per_mtok_after:.3f}" if steps else ""]
    fig = go.Figure(go.Waterfall(x=x, y=y, measure=measure, text=text, textposition="outside",
                                 decreasing={"marker": {"color": "#2ca02c"}},
                                 increasing={"marker": {"color": "#d62728"}},
                                 totals={"marker": {"color": "#1f77b4"}}))
    fig.update_layout(title=title, yaxis_title="$ per million output tokens", height=430, showlegend=False,
                      margin={"t": 50, "b": 120})
    return fig


def step_rows(steps: list[LeverStep]) -> list[dict]:
    return [{
        "#": s.number, "lever": s.label, "applied": "yes" if s.applied else "no", "what / why": s.reason,
        "alpha before -> after (per-token, pos. 1)": f"{s.alpha_before:.3f} -> {s.alpha_after:.3f}",
        "CPM at full load before -> after $/Mtok": f"{s.usd_per_mtok_before:.3f} -> {s.usd_per_mtok_after:.3f}",
        "bill before -> after": f"{fmt_usd(s.bill_usd_per_month_before)} -> {fmt_usd(s.bill_usd_per_month_after)}",
        "one-time $": f"{fmt_usd(s.one_time_usd_low)} to {fmt_usd(s.one_time_usd_high)}",
        "monthly saving": f"{fmt_usd(s.monthly_saving_usd)}/month",  # the fleet bill's, before -> after
        "payback": fmt_months(s.payback_months),
        "P(pays back)": (f"{s.p_payback_within_horizon * 100:.0f} %" if math.isfinite(s.p_payback_within_horizon)
                         else "-"),
        "pays above spend $/month": fmt_usd(s.breakeven_monthly_spend_usd),
        "source": s.source,
    } for s in steps]


def render() -> None:
    req = S.page_header("The seven levers")
    if req is None:
        return
    req = S.at_spend_volume(req)  # the waterfall and its summary take the volume a stated spend buys
    cat = S.catalog()
    starts = [NO_SPEC] + [n for n in cat.methods]
    label = {NO_SPEC: "no speculation", **{n: m.label for n, m in cat.methods.items()}}
    if st.session_state.get("levers_start") not in starts:  # "auto": today's method (the sidebar's)
        st.session_state["levers_start"] = req.current_method if req.current_method in starts else NO_SPEC
    st.selectbox("Starting point (today's method)", starts, key="levers_start", format_func=lambda n: label[n],
                 help="The waterfall starts from today's configuration; without a draft network today, step 0 "
                      "adopts EAGLE-3 if it pays.")
    start = st.session_state["levers_start"]
    if start != NO_SPEC:
        ok, why = cat.method_available(start, req.model)
        if not ok:
            st.warning(f"{cat.methods[start].label} is unavailable: {why}. Pick another starting point.")
            return
    article = S.lever_waterfall(req, start, None)
    by_return = tuple(order_by_return(article))
    reordered = S.lever_waterfall(req, start, by_return)
    p = S.plan(req)
    costs = p.costs
    total = summarize(article, req.monthly_output_tokens, horizon_months=costs.horizon_months,
                      annual_discount_rate=costs.annual_discount_rate)
    start_cpm = total.start_usd_per_mtok
    applied = [s for s in article if s.applied]
    st.markdown(
        f"**From {fmt_usd(total.start_bill_usd_per_month)} to {fmt_usd(total.end_bill_usd_per_month)} a month "
        f"({req.billing} fleet)** with the {len(applied)} step(s) that pay back within {costs.horizon_months} months, "
        f"starting from {label[start]} (CPM at full load {fmt_cpm(start_cpm)} -> "
        f"{fmt_cpm(total.end_usd_per_mtok)}/Mtok): saving {fmt_usd(total.monthly_saving_usd)}/month for "
        f"{fmt_usd(total.one_time_usd_high)} one-time; the set pays back in {fmt_months(total.payback_months)}, "
        f"NPV {fmt_usd(total.npv_usd)} over {costs.horizon_months} months.")
    today = p.reference_fleet  # the Plan's "today" (planner.plan), at its own TP
    if today is not None and (today.method, today.tp) != (start, req.tp):
        st.caption(f"The Plan's today is {today.label} on {today.tp} GPUs per replica: {fmt_usd(today.usd_per_month)}"
                   f"/month ({today.billing}), {today.peak_gpus:,} GPUs at the peak; this waterfall starts from "
                   f"{label[start]} on {req.tp} GPUs per replica.")
    widgets.glossary()
    order = st.radio("Order", ["article", "return"], key="levers_order", horizontal=True,
                     format_func=lambda v: "the article's order" if v == "article"
                     else "by return on one-time cost")
    steps = article if order == "article" else reordered
    title = "Article order" if order == "article" else "Re-ordered by return on one-time cost"
    st.plotly_chart(waterfall_figure(steps, f"today ({label[start]})", start_cpm, title),
                    key="levers_chart", width="stretch")
    widgets.table(step_rows(steps), key="levers_table", first=("#", "lever", "applied", "monthly saving", "payback",
                                                          "P(pays back)", "one-time $", "bill before -> after"),
            widths={"#": 40})
    if order == "return":
        st.caption("Order by return: free levers first (largest CPM cut), then CPM cut per one-time dollar; "
                   "levers that do not cut CPM here go last. Order: " + " -> ".join(by_return))
    vsd = next((s for s in article if s.lever == "vsd"), None)
    if vsd is not None:
        if vsd.applied and math.isfinite(vsd.breakeven_monthly_spend_usd):
            be = vsd.breakeven_monthly_spend_usd
            st.info(f"VSD pays (NPV >= 0 over {costs.horizon_months} months at "
                    f"{costs.annual_discount_rate * 100:g} %/year) above {fmt_usd(be)} a month of inference spend "
                    f"({fmt_usd(be * 12)} a year); the seed article says $2M a year. Computed from its +9.6 % "
                    f"acceptance-length gain and its one-time cost {fmt_usd(vsd.one_time_usd_low)} to "
                    f"{fmt_usd(vsd.one_time_usd_high)} (assumption).")
        else:
            st.info(f"VSD is not applied here: {vsd.reason}.")
    st.caption("Each step is evaluated at its own best batch under the TPOT SLO and priced by its fleet's bill; a "
               "step is applied only when that bill's saving pays back its one-time cost within the horizon with a "
               "positive NPV. A lever that helps only "
               "at batch 1 shows no gain where the verifier is compute-bound. Domain fine-tune compute is "
               "paid once per language-workload segment; engineering weeks at "
               f"{fmt_usd(costs.engineering_usd_per_week)}/week (sidebar: Cost assumptions).")


if __name__ == "__main__":
    render()
