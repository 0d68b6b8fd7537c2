"""Methods: every speculative-decoding method side by side, each at its own best K and batch under the
same TPOT SLO; where a method is unavailable, why."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from views import _state as S
from views.plan import CONVENTION


def table_rows(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        base = {"method": r["label"], "available": "yes" if r["available"] else "no: " + r["unavailable_reason"]}
        if r["available"]:
            base.update({
                "K": r["k"], "best batch": r["batch"],
                "alpha (per-token, pos. 1)": round(r["alpha_position_1"], 3),
                "tau (acceptance length, tokens/step)": round(r["acceptance_length"], 3),
                "vLLM draft acceptance rate": f"{r['draft_acceptance_rate'] * 100:.1f} %",
                "speedup vs no spec. at same batch": round(r["speedup"], 2),
                "tokens/s per replica (decode)": round(r["output_tokens_per_s"]),
                "TPOT ms": round(r["tpot_ms"], 1),
                "CPM $/Mtok": round(r["usd_per_mtok"], 4),
                "vs no speculation (own best batch)": f"{r['cpm_change_vs_best_baseline'] * 100:+.1f} %",
                "verifier": r["verifier_bound"] + "-bound",
                "draft cost ratio c": round(r["draft_cost_ratio"], 3),
                "meets SLO": r["meets_slo"],
            })
        base.update({
            "setup GPU-hours (A100)": r["setup_gpu_hours"], "setup eng. weeks": r["setup_engineering_weeks"],
            "one-time $": f"{S.fmt_usd(r['one_time_usd_low'])}-{S.fmt_usd(r['one_time_usd_high'])}",
            "setup": r["setup_note"],
            "claimed speedup (seed)": (f"{r['claimed_speedup'][0]:g}-{r['claimed_speedup'][1]:g}x"
                                       if r["claimed_speedup"] else "none"),
            "alpha range (source)": f"{r['alpha_range_low']:.2f}-{r['alpha_range_high']:.2f} ({r['source']})",
        })
        out.append(base)
    return out


def render() -> None:
    inp = S.page_header("Methods side by side")
    if inp is None:
        return
    mix, cap, is_profile = S.mix_and_cap(inp)
    basis = st.radio("Alpha basis", ["default", "tuned"], key="methods_alpha", horizontal=True,
                     format_func=lambda v: "default heads (seed's default range)" if v == "default"
                     else "tuned heads (seed's tuned range)")
    rows = S.method_table(inp, mix, cap, "mid", basis == "tuned")
    avail = [r for r in rows if r["available"]]
    if avail:
        base = avail[0]["baseline_usd_per_mtok"]
        st.markdown(f"**No speculation:** ${base:,.3f} per million output tokens at its own best batch "
                    f"({avail[0]['baseline_batch']}) under the {inp.tpot_slo_ms:g} ms TPOT SLO.")
    for r in rows:
        if not r["available"]:
            st.info(f"{r['label']} is unavailable here: {r['unavailable_reason']}.")
    st.dataframe(table_rows(rows), key="methods_table", hide_index=True)
    st.caption(CONVENTION + " Speedup is against no speculation at the same batch; CPM compares each method "
               "at its own best batch (the honest comparison). "
               + ("Numbers are blended over the traffic profile's workload and language mix, weighted by "
                  "output tokens." if is_profile else ""))
    if avail:
        fig = go.Figure()
        fig.add_bar(x=[r["label"] for r in avail], y=[r["output_tokens_per_s"] for r in avail],
                    name="tokens/s per replica", marker_color="#1f77b4", yaxis="y")
        fig.add_scatter(x=[r["label"] for r in avail], y=[r["usd_per_mtok"] for r in avail], name="CPM $/Mtok",
                        mode="markers+lines", marker={"size": 12, "color": "#d62728"}, yaxis="y2")
        fig.update_layout(yaxis={"title": "decode tokens/s per replica"},
                          yaxis2={"title": "$ per million output tokens", "overlaying": "y", "side": "right"},
                          height=400, legend={"orientation": "h", "y": -0.2})
        st.plotly_chart(fig, key="methods_chart", width="stretch")
        if is_profile:
            with st.expander("Per workload and language"):
                seg_rows = []
                for r in avail:
                    for d in r["segments"]:
                        seg_rows.append({"method": r["label"], "workload": d["workload"], "language": d["language"],
                                         "share of output tokens": f"{d['share'] * 100:.1f} %", "K": d["k"],
                                         "batch": d["batch"], "alpha (pos. 1)": round(d["alpha_position_1"], 3),
                                         "tau": round(d["acceptance_length"], 3),
                                         "CPM $/Mtok": round(d["usd_per_mtok"], 4)})
                st.dataframe(seg_rows, key="methods_segments", hide_index=True)


if __name__ == "__main__":
    render()
