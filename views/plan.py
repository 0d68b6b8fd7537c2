"""Plan (landing page): the headline for a CFO: baseline vs best method CPM, monthly saving, one-time cost,
payback, each with a range, the recommendation in one sentence, and CPM by method."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from views import _model as mdl
from views import _state as S

CONVENTION = ("Acceptance convention: alpha is the per-token conditional acceptance at draft position 1 "
              "(the seed article's ranges read that way); tau is the mean acceptance length (tokens per "
              "verifier step, bonus token included); vLLM's 'draft acceptance rate' is (tau-1)/K.")


def compute() -> dict:
    """Everything the page shows (cached planner calls); benchmarks time this function."""
    inp = S.inputs()
    mix, cap, is_profile = S.mix_and_cap(inp)
    summary = S.plan_summary(inp, mix, cap, is_profile)
    # the headline's tables already hold the sidebar's basis; compute the other basis only
    other = {w: S.method_table(inp, mix, cap, w, not inp.tuned) for w in mdl.WHICH}
    tabs = {inp.tuned: summary["tables"], not inp.tuned: other}
    return {"inp": inp, "mix": mix, "cap": cap, "is_profile": is_profile, "summary": summary,
            "tuned": tabs[True], "default": tabs[False]}


def cpm_chart(data: dict) -> go.Figure:
    summ = data["summary"]
    fig = go.Figure()
    for basis, tabs, color in (("default alpha", data["default"], "#1f77b4"),
                               ("tuned alpha", data["tuned"], "#2ca02c")):
        rows = [r for r in tabs["mid"] if r["available"]]
        lo = {r["method"]: r for r in tabs["low"]}
        hi = {r["method"]: r for r in tabs["high"]}
        y = [r["usd_per_mtok"] for r in rows]
        fig.add_bar(
            name=basis, x=[r["label"] for r in rows], y=y, marker_color=color,
            error_y={"type": "data", "symmetric": False,
                     "array": [max(0.0, lo[r["method"]]["usd_per_mtok"] - r["usd_per_mtok"]) for r in rows],
                     "arrayminus": [max(0.0, r["usd_per_mtok"] - hi[r["method"]]["usd_per_mtok"]) for r in rows]},
            customdata=[[r["k"], r["batch"], r["acceptance_length"]] for r in rows],
            hovertemplate="%{x}<br>$%{y:.3f}/Mtok<br>K=%{customdata[0]}, batch %{customdata[1]}<br>"
                          "tau=%{customdata[2]:.2f} tokens/step<extra>" + basis + "</extra>",
        )
    base = summ["baseline"]["usd_per_mtok"]
    fig.add_hline(y=base, line_dash="dash", line_color="#d62728",
                  annotation_text=f"no speculation ${base:.3f}/Mtok", annotation_position="top left")
    missing = [r for r in data["default"]["mid"] if not r["available"]]
    for r in missing:
        fig.add_annotation(text=f"{r['label']}: unavailable", showarrow=False, xref="paper", yref="paper",
                           x=1.0, y=1.08 + 0.06 * missing.index(r), xanchor="right")
    fig.update_layout(barmode="group", yaxis_title="$ per million output tokens (prefill included)",
                      height=420, margin={"t": 60, "b": 40}, legend={"orientation": "h", "y": -0.15})
    return fig


def render() -> None:
    inp = S.page_header("Plan: does speculative decoding pay for you?")
    if inp is None:
        return
    data = compute()
    summ = data["summary"]
    cat = S.catalog()
    hw = cat.hardware[inp.hardware]
    if summ.get("best") is None:
        st.warning(summ["recommendation"])
        return
    best = summ["best"]
    st.markdown(f"**Recommendation:** {summ['recommendation']}")
    if not best["meets_slo"]:
        st.warning(f"No configuration of {best['label']} meets the {inp.tpot_slo_ms:g} ms TPOT SLO on this "
                   "hardware; the numbers show its lowest-latency point.")
    cur = summ["current_method"]
    cur_label = "no speculation" if cur == mdl.NO_SPEC else cat.methods[cur].label
    c = st.columns(5)
    lo, hi = summ["current_usd_per_mtok_range"]
    c[0].metric(f"CPM today ({cur_label})", f"{S.fmt_cpm(summ['current_usd_per_mtok']['mid'])} /Mtok",
                help=f"$ per million output tokens at the best batch under the SLO "
                     f"(batch {summ['baseline']['batch']} without speculation), prefill GPU time included. "
                     f"Price ${inp.usd_per_gpu_hour:.2f}/GPU-hour ({hw.price.source}, {hw.price.date}).")
    c[0].caption(f"range {S.fmt_cpm(lo)}-{S.fmt_cpm(hi)}" if hi - lo > 1e-9 else
                 f"at ${inp.usd_per_gpu_hour:.2f}/GPU-h; list range "
                 f"{S.fmt_cpm(lo * hw.usd_per_gpu_hour_low / inp.usd_per_gpu_hour)}-"
                 f"{S.fmt_cpm(lo * hw.usd_per_gpu_hour_high / inp.usd_per_gpu_hour)}")
    blo, bhi = summ["best_usd_per_mtok_range"]
    c[1].metric(f"Best: {best['label']} (K={best['k']})", f"{S.fmt_cpm(summ['best_usd_per_mtok']['mid'])} /Mtok",
                delta=f"{-summ['cpm_cut'] * 100:+.1f} %", delta_color="inverse",
                help=f"At its own best batch ({best['batch']}) under the same SLO. alpha (per-token, position 1) "
                     f"{best['alpha_position_1']:.2f} from the {'tuned' if inp.tuned else 'default'} range "
                     f"{best['alpha_range_low']:.2f}-{best['alpha_range_high']:.2f} ({best['source']}), shifted "
                     f"for workload and language; tau {best['acceptance_length']:.2f} tokens/step; vLLM draft "
                     f"acceptance rate {best['draft_acceptance_rate'] * 100:.0f} %.")
    c[1].caption(f"range {S.fmt_cpm(blo)}-{S.fmt_cpm(bhi)} over alpha {best['alpha_range_low']:.2f}-"
                 f"{best['alpha_range_high']:.2f} (per-token)")
    slo_, shi = summ["monthly_saving_range_usd"]
    c[2].metric("Monthly saving", f"{S.fmt_usd(summ['monthly_saving_usd']['mid'])}/mo",
                help=f"(CPM today - CPM best) x {inp.monthly_output_tokens / 1e9:,.1f}B output tokens/month.")
    c[2].caption(f"range {S.fmt_usd(slo_)}-{S.fmt_usd(shi)} /month")
    olo, ohi = summ["one_time_usd"]
    train = cat.hardware[cat.prices["training_hardware"]]
    eng_src = cat.price_sources["engineering_usd_per_week"]
    c[3].metric("One-time cost", f"{S.fmt_usd(0.5 * (olo + ohi))}",
                help=f"{best['setup_gpu_hours']:g} {train.label} GPU-hours of draft training at "
                     f"${train.usd_per_gpu_hour_low:.2f}-${train.usd_per_gpu_hour_high:.2f}/GPU-hour "
                     f"({train.price.source}, {train.price.date}) + {best['setup_engineering_weeks']:g} "
                     f"engineering weeks at ${cat.engineering_usd_per_week:,.0f}/week ({eng_src.source}, "
                     f"{eng_src.date}). {best['setup_note']}")
    c[3].caption(f"range {S.fmt_usd(olo)}-{S.fmt_usd(ohi)}")
    plo, phi = summ["payback_months_range"]
    c[4].metric("Payback", f"{mdl.fmt_months(summ['payback_months'])} months",
                help=f"One-time cost / monthly saving. NPV over {summ['horizon_months']} months at "
                     f"{summ['annual_discount_rate'] * 100:.0f} %/year: {S.fmt_usd(summ['npv_usd'])}.")
    c[4].caption(f"range {mdl.fmt_months(plo)}-{mdl.fmt_months(phi)} months; NPV "
                 f"{S.fmt_usd(summ['npv_usd'])} over {summ['horizon_months']} months")
    if data["is_profile"]:
        cap = data["cap"]
        st.caption(f"Traffic profile '{st.session_state[S.PROFILE_KEY].name}' drives the workload and language "
                   f"mix ({len(data['mix'])} segments, weighted by output tokens)"
                   + (f"; batch capped at {cap:,.0f} concurrent sequences (median minute, Little's law)"
                      if cap is not None else "") + ".")
    st.subheader("CPM by method, each at its own best batch under the SLO")
    st.plotly_chart(cpm_chart(data), key="plan_cpm_chart", width="stretch")
    st.caption("Bars: alpha range midpoint; whiskers: the method's alpha range (low-high). " + CONVENTION)
    rows = []
    for r in summ["tables"]["mid"]:
        if r["available"]:
            rows.append({"method": r["label"], "K": r["k"], "best batch": r["batch"],
                         "CPM $/Mtok": round(r["usd_per_mtok"], 4),
                         "vs no speculation": f"{r['cpm_change_vs_best_baseline'] * 100:+.1f} %",
                         "tau (tokens/step)": round(r["acceptance_length"], 2),
                         "verifier": r["verifier_bound"] + "-bound", "meets SLO": r["meets_slo"]})
        else:
            rows.append({"method": r["label"], "K": None, "best batch": None, "CPM $/Mtok": None,
                         "vs no speculation": "unavailable: " + r["unavailable_reason"],
                         "tau (tokens/step)": None, "verifier": "", "meets SLO": None})
    st.dataframe(rows, key="plan_table", hide_index=True)
    st.caption(f"Prices: {hw.label} ${hw.usd_per_gpu_hour_low:.2f}-${hw.usd_per_gpu_hour_high:.2f}/GPU-hour "
               f"({hw.price.source}, {hw.price.date}); hardware specs: {hw.specs.source} ({hw.specs.date}); "
               f"roofline efficiencies: {hw.efficiency.source.source} ({hw.efficiency.source.date}).")


if __name__ == "__main__":
    render()
