"""Sensitivity: speedup over alpha x K, speedup and CPM over batch with the crossover where speculation
stops paying, a tornado of CPM drivers and Monte Carlo bands over the alpha and price ranges."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from views import _mc
from views import _model as mdl
from views import _state as S


@st.cache_data(max_entries=16, show_spinner=False)
def _sweep(inp, method, seg):
    return mdl.batch_sweep(inp, method, seg, S.catalog())


@st.cache_data(max_entries=16, show_spinner=False)
def _heat(inp, method, seg, batch):
    return mdl.alpha_k_heatmap(inp, method, seg, S.catalog(), batch=batch, alphas=np.round(np.arange(0.40, 0.96, 0.05), 2))


@st.cache_data(max_entries=16, show_spinner=False)
def _tornado(inp, method, mix, cap):
    return mdl.tornado(inp, method, mix, S.catalog(), cap=cap)


@st.cache_data(max_entries=16, show_spinner=False)
def _mc_run(inp, mix, method, samples, seed, sample_price, cap):
    return _mc.monte_carlo(inp, mix, S.catalog(), method=method, samples=samples, seed=seed,
                           sample_price=sample_price, cap=cap)


def sweep_figure(sw: dict, label: str, slo_ms: float) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Speedup vs no speculation (same batch)",
                                                        "CPM, $ per million output tokens"))
    b = sw["batch"]
    fits = sw["fits_memory"]
    fig.add_scatter(x=b[fits], y=sw["speedup"][fits], mode="lines+markers", name=f"{label} speedup (best K)",
                    row=1, col=1)
    fig.add_hline(y=1.0, line_dash="dot", row=1, col=1)
    fig.add_scatter(x=b[fits], y=sw["usd_per_mtok"][fits], mode="lines+markers", name=f"{label} CPM", row=1, col=2)
    fig.add_scatter(x=b[fits], y=sw["baseline_usd_per_mtok"][fits], mode="lines+markers", name="no speculation CPM",
                    line={"dash": "dash"}, row=1, col=2)
    slow = b[fits & (sw["tpot_ms"] > slo_ms)]
    if slow.size:
        for col in (1, 2):
            fig.add_vrect(x0=float(slow.min()), x1=float(b[fits].max()), fillcolor="grey", opacity=0.12,
                          line_width=0, row=1, col=col)
    if sw["crossover_batch"] is not None:
        for col in (1, 2):
            fig.add_vline(x=sw["crossover_batch"], line_color="#d62728", row=1, col=col)
        fig.add_annotation(x=np.log10(sw["crossover_batch"]), y=1.0, text=f"crossover ~{sw['crossover_batch']:.0f}",
                           row=1, col=1, showarrow=True)
    fig.update_xaxes(type="log", title="batch (sequences per replica)")
    fig.update_layout(height=420, legend={"orientation": "h", "y": -0.25})
    return fig


def render() -> None:
    inp = S.page_header("Sensitivity")
    if inp is None:
        return
    cat = S.catalog()
    mix, cap, is_profile = S.mix_and_cap(inp)
    summ = S.plan_summary(inp, mix, cap, is_profile)
    avail = [n for n in cat.methods if cat.method_available(n, inp.model)[0]]
    auto = summ["best"]["method"] if summ.get("best") else avail[0]
    options = ["auto"] + avail
    if st.session_state.get("sens_method") not in options:
        st.session_state["sens_method"] = "auto"
    st.selectbox("Method", options, key="sens_method",
                 format_func=lambda n: f"best method ({cat.methods[auto].label})" if n == "auto"
                 else cat.methods[n].label)
    method = auto if st.session_state["sens_method"] == "auto" else st.session_state["sens_method"]
    label = cat.methods[method].label
    seg = mdl.dominant(mix)
    seg_note = (f"the largest traffic segment ({cat.workloads[seg[0]].label}, {cat.languages[seg[1]].label}, "
                f"{seg[2] * 100:.0f} % of output tokens)" if is_profile
                else f"{cat.workloads[seg[0]].label}, {cat.languages[seg[1]].label}")

    st.subheader("Speedup and CPM over batch size")
    sw = _sweep(inp, method, seg)
    st.plotly_chart(sweep_figure(sw, label, inp.tpot_slo_ms), key="sens_batch_chart", width="stretch")
    if sw["crossover_batch"] is not None:
        st.markdown(f"**Crossover: speculation stops paying at batch ~{sw['crossover_batch']:.0f}** "
                    f"({label} at its best K per batch vs no speculation at the same batch; {seg_note}).")
    else:
        st.markdown(f"**No crossover up to batch {int(sw['batch'][sw['fits_memory']].max())}**: {label} still "
                    f"cuts CPM at every batch that fits in memory ({seg_note}); KV-cache reads keep the verifier "
                    "step close to memory-bound.")
    st.caption(f"Grey: batches whose TPOT misses the {inp.tpot_slo_ms:g} ms SLO. Batches beyond "
               f"{sw['max_batch']:.0f} sequences do not fit in memory and are not drawn.")

    st.subheader("Speedup over alpha x K")
    st.number_input("Batch for the heatmap", min_value=1, max_value=4096, step=1, key="sens_batch")
    heat = _heat(inp, method, seg, int(st.session_state["sens_batch"]))
    fig = go.Figure(go.Heatmap(z=heat["speedup"], x=[str(k) for k in heat["ks"]], y=[f"{a:.2f}" for a in heat["alphas"]],
                               colorscale="RdYlGn", zmid=1.0, colorbar={"title": "speedup"},
                               text=np.round(heat["speedup"], 2), texttemplate="%{text}"))
    fig.update_layout(xaxis_title="K (draft tokens per step)", yaxis_title="alpha (per-token, position 1)",
                      height=460)
    st.plotly_chart(fig, key="sens_heatmap", width="stretch")
    st.caption(f"{label} at batch {int(st.session_state['sens_batch'])}; the method's position decay applies "
               f"after position 1. Your alpha now: {heat['alpha_now']:.2f} (per-token). Speedup = TPOT without "
               "speculation / TPOT with it, at the same batch.")

    st.subheader("Tornado: what moves CPM")
    tor = _tornado(inp, method, mix, cap)
    mid = tor[0]["mid_usd_per_mtok"]
    fig = go.Figure()
    fig.add_bar(y=[d["driver"] + f" ({d['range']})" for d in tor], x=[d["low_usd_per_mtok"] - mid for d in tor],
                base=mid, orientation="h", name="driver at its low end", marker_color="#1f77b4")
    fig.add_bar(y=[d["driver"] + f" ({d['range']})" for d in tor], x=[d["high_usd_per_mtok"] - mid for d in tor],
                base=mid, orientation="h", name="driver at its high end", marker_color="#ff7f0e")
    fig.update_layout(barmode="overlay", xaxis_title="$ per million output tokens", height=380,
                      legend={"orientation": "h", "y": -0.25})
    st.plotly_chart(fig, key="sens_tornado", width="stretch")
    st.caption(f"{label} over the whole mix at ${mid:.3f}/Mtok with every driver at its middle; each bar moves "
               "one driver to its low and high end.")

    st.subheader("Monte Carlo over alpha and price ranges")
    c = st.columns(3)
    c[0].number_input("Samples", min_value=50, max_value=5000, step=50, key="mc_samples")
    c[1].number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, key="mc_seed")
    c[2].checkbox("Sample $/GPU-hour within the list range", key="mc_price")
    mc = _mc_run(inp, mix, method, int(st.session_state["mc_samples"]), int(st.session_state["mc_seed"]),
                 bool(st.session_state["mc_price"]), cap)
    hw = cat.hardware[inp.hardware]
    st.markdown(
        f"**{label}: monthly saving p5 {S.fmt_usd(mc['saving_p05'])}, median {S.fmt_usd(mc['saving_p50'])}, "
        f"p95 {S.fmt_usd(mc['saving_p95'])}; pays back within {mc['horizon_months']} months in "
        f"{mc['p_payback_within_horizon'] * 100:.0f} % of {mc['samples']} samples** (seed {mc['seed']}).")
    fig = go.Figure()
    fig.add_scatter(x=mc["months"], y=mc["cumulative_p95"], line={"width": 0}, showlegend=False)
    fig.add_scatter(x=mc["months"], y=mc["cumulative_p05"], fill="tonexty", line={"width": 0},
                    name="p5-p95", fillcolor="rgba(31,119,180,0.25)")
    fig.add_scatter(x=mc["months"], y=mc["cumulative_p50"], name="median", line={"color": "#1f77b4"})
    fig.add_hline(y=0, line_dash="dot")
    fig.update_layout(xaxis_title="months after switching", yaxis_title="cumulative net saving, $", height=380)
    st.plotly_chart(fig, key="sens_mc_band", width="stretch")
    fig = go.Figure()
    for name, vals in mc["cpm"].items():
        fig.add_box(y=vals, name=cat.methods[name].label, boxpoints=False)
    fig.add_box(y=mc["current_cpm"], name="today", boxpoints=False)
    fig.update_layout(yaxis_title="$ per million output tokens", height=380, showlegend=False)
    st.plotly_chart(fig, key="sens_mc_box", width="stretch")
    st.caption(f"Alpha uniform within each method's {'tuned' if inp.tuned else 'default'} range (per-token, "
               "position 1; seed article, 2026-04-15), shifted for workload and language; "
               + (f"$/GPU-hour uniform in ${hw.usd_per_gpu_hour_low:.2f}-${hw.usd_per_gpu_hour_high:.2f} "
                  f"({hw.price.source}, {hw.price.date})" if st.session_state["mc_price"]
                  else f"$/GPU-hour fixed at ${inp.usd_per_gpu_hour:.2f}")
               + "; one-time cost uniform within its range.")


if __name__ == "__main__":
    render()
