"""Levers: the seed's seven levers as a waterfall from today's CPM to the end state, in the article's order
and re-ordered by return on one-time cost; thresholds (payback, break-even spend) computed."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import streamlit as st

from views import _model as mdl
from views import _state as S


def waterfall_figure(steps: list[dict], start_label: str, start_cpm: float, title: str) -> go.Figure:
    x = [start_label] + [f"{s['number']}. {s['label']}" for s in steps] + ["end state"]
    y = [start_cpm] + [s["usd_per_mtok_after"] - s["usd_per_mtok_before"] for s in steps] + [0]
    measure = ["absolute"] + ["relative"] * len(steps) + ["total"]
    text = [f"${start_cpm:.3f}"] + [
        (f"{(s['usd_per_mtok_after'] - s['usd_per_mtok_before']):+.3f}" if s["applied"] else "skipped")
        for s in steps] + [f"${steps[-1]['usd_per_mtok_after']:.3f}" if steps else ""]
    fig = go.Figure(go.Waterfall(x=x, y=y, measure=measure, text=text, textposition="outside",
                                 decreasing={"marker": {"color": "#2ca02c"}},
                                 increasing={"marker": {"color": "#d62728"}},
                                 totals={"marker": {"color": "#1f77b4"}}))
    fig.update_layout(title=title, yaxis_title="$ per million output tokens", height=430, showlegend=False,
                      margin={"t": 50, "b": 120})
    return fig


def step_rows(steps: list[dict]) -> list[dict]:
    return [{
        "#": s["number"], "lever": s["label"], "applied": f"{s['applied_segments']}/{s['segments']} segments"
        if s["applied"] else "no", "what / why": s["reason"],
        "alpha before -> after (per-token, pos. 1)": f"{s['alpha_before']:.3f} -> {s['alpha_after']:.3f}",
        "CPM before -> after $/Mtok": f"{s['usd_per_mtok_before']:.3f} -> {s['usd_per_mtok_after']:.3f}",
        "one-time $": f"{S.fmt_usd(s['one_time_usd_low'])}-{S.fmt_usd(s['one_time_usd_high'])}",
        "monthly saving $": round(s["monthly_saving_usd"]),
        "payback months": mdl.fmt_months(s["payback_months"]),
        "pays above spend $/month": S.fmt_usd(s["breakeven_monthly_spend_usd"]),
        "source": s["source"],
    } for s in steps]


def render() -> None:
    inp = S.page_header("The seven levers")
    if inp is None:
        return
    cat = S.catalog()
    mix, _cap, is_profile = S.mix_and_cap(inp)
    spec_methods = [n for n, m in cat.methods.items() if m.drafting != "ngram"]
    if st.session_state.get("levers_start") not in spec_methods:
        st.session_state["levers_start"] = "eagle3"
    st.selectbox("Starting method (today's draft)", spec_methods, key="levers_start",
                 format_func=lambda n: cat.methods[n].label)
    start = st.session_state["levers_start"]
    ok, why = cat.method_available(start, inp.model)
    if not ok:
        st.warning(f"{cat.methods[start].label} is unavailable: {why}. Pick another starting method.")
        return
    article = S.lever_waterfall(inp, mix, start, None)
    by_return = tuple(mdl.order_by_return(article))
    reordered = S.lever_waterfall(inp, mix, start, by_return)
    base = S.plan_summary(inp, mix, _cap, is_profile)["baseline"]["usd_per_mtok"]
    start_cpm = article[0]["usd_per_mtok_before"]
    end_cpm = article[-1]["usd_per_mtok_after"]
    total_one = sum(s["one_time_usd_high"] for s in article)
    st.markdown(
        f"**From ${start_cpm:.3f} to ${end_cpm:.3f} per million output tokens** with {cat.methods[start].label} "
        f"at K={cat.methods[start].default_k} to start (no speculation: ${base:.3f}); one-time cost of the applied "
        f"levers up to {S.fmt_usd(total_one)}; saving "
        f"{S.fmt_usd((start_cpm - end_cpm) * inp.monthly_output_tokens / 1e6)} a month.")
    order = st.radio("Order", ["article", "return"], key="levers_order", horizontal=True,
                     format_func=lambda v: "the article's order" if v == "article"
                     else "by return on one-time cost")
    steps = article if order == "article" else reordered
    title = "Article order" if order == "article" else "Re-ordered by return on one-time cost"
    st.plotly_chart(waterfall_figure(steps, f"today ({cat.methods[start].label})", start_cpm, title),
                    key="levers_chart", width="stretch")
    st.dataframe(step_rows(steps), key="levers_table", hide_index=True)
    if order == "return":
        st.caption("Order by return: free levers first (largest CPM cut), then CPM cut per one-time dollar; "
                   "levers that do not cut CPM here go last. Order: " + " -> ".join(by_return))
    vsd = next((s for s in article if s["lever"] == "vsd"), None)
    if vsd is not None:
        if vsd["applied"] and math.isfinite(vsd["breakeven_monthly_spend_usd"]):
            be = vsd["breakeven_monthly_spend_usd"]
            st.info(f"VSD pays (NPV >= 0 over {int(cat.prices['horizon_months'])} months at "
                    f"{float(cat.prices['annual_discount_rate']) * 100:.0f} %/year) above "
                    f"{S.fmt_usd(be)} a month of inference spend ({S.fmt_usd(be * 12)} a year); the seed "
                    "article says $2M a year. Computed from its +9.6 % throughput and its one-time cost "
                    f"{S.fmt_usd(vsd['one_time_usd_low'])}-{S.fmt_usd(vsd['one_time_usd_high'])} (assumption).")
        else:
            st.info(f"VSD does not apply here: {vsd['reason']}.")
    st.caption("Each step is evaluated at its own best batch under the TPOT SLO, so a lever that helps only "
               "at batch 1 shows no gain where the verifier is compute-bound. Domain fine-tune compute is "
               "paid once per language-workload segment it changes; engineering weeks at "
               f"${cat.engineering_usd_per_week:,.0f}/week "
               f"({cat.price_sources['engineering_usd_per_week'].source}, "
               f"{cat.price_sources['engineering_usd_per_week'].date}).")


if __name__ == "__main__":
    render()
