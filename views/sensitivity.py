"""Sensitivity: speedup over alpha x K, speedup and CPM over batch with the crossover where speculation
stops paying, a tornado of CPM drivers and Monte Carlo bands over the alpha and price ranges. The money (the tornado's
bill saving, the Monte Carlo) is measured from the Plan's own "today" (plan.reference): where that runs in another
context than the request's (plain TP where the request runs data-parallel attention, another TP), the Monte Carlo is
the Plan's own (planner.uncertainty.risk.switch_risk) and the tornado's middle is the Plan's saving."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from i18n import tr, tr_known
from i18n.numbers import fmt_pct, fmt_usd
from planner.price import gpu_price
from planner.request import NO_SPEC
from planner.search import batch_sweeps as sweeps
from planner.uncertainty import sensitivity as sens
from planner.uncertainty.risk import switch_risk
from views.parts import widgets
from views.sidebar import state as S


@st.cache_data(max_entries=16, show_spinner=False)
def _heat(req, method, batch):
    return sweeps.alpha_k_heatmap(req, S.catalog(), method, batch=batch, alphas=np.round(np.arange(0.40, 0.96, 0.05), 2))


@st.cache_data(max_entries=16, show_spinner=False)
def _tree_vs_chain(req, method):
    return sweeps.tree_vs_chain(req, S.catalog(), method)


@st.cache_data(max_entries=16, show_spinner=False)
def _tornado(req, method):
    return sens.tornado(req, S.catalog(), method)


def today_elsewhere(p) -> bool:
    """True when the Plan's today (its reference) is not no speculation / today's method at the request's own TP and
    attention (the configuration the tornado and sensitivity.monte_carlo compare against): planner.uncertainty.risk's
    rule for drawing today in its own context."""
    ref, req = p.reference, p.request
    if ref is None:
        return False
    return not ((not ref.tp or ref.tp == req.tp) and ref.attention_dp in (None, req.attention_dp)
                and ref.method == req.current_method)


def today_offset_usd(p) -> float:
    """$/month to take off a bill saving measured against no speculation at the request's configuration so it is
    measured against the Plan's today: that configuration's bill minus today's, both the Plan's (0 when today is it)."""
    if not today_elsewhere(p) or p.reference_fleet is None:
        return 0.0
    here = next((b.usd_per_month for b in p.bills if b.method == NO_SPEC and b.feasible), None)
    return float(here - p.reference_fleet.usd_per_month) if here is not None and np.isfinite(here) else 0.0


@st.cache_data(max_entries=16, show_spinner=False)
def _plan_risk(req, key: str, samples: int, seed: int, _reference, _best):
    """The Plan's own Monte Carlo of the switch from its today (in its own context) to `_best`; key: both points'
    repr (the cache's key for them)."""
    return switch_risk(req, S.catalog(), reference=_reference, best=_best, samples=samples, seed=seed)


def sweep_figure(sw: sweeps.BatchSweep, label: str, slo_ms: float) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("Speedup vs no speculation (same batch)"),
                                                        tr("CPM, $ per million output tokens")))
    b = sw.batch
    fits = sw.fits_memory
    fig.add_scatter(x=b[fits], y=sw.speedup[fits], mode="lines+markers", name=tr("{label} speedup (best K)", label=label),
                    row=1, col=1)
    fig.add_hline(y=1.0, line_dash="dot", row=1, col=1)
    fig.add_scatter(x=b[fits], y=sw.usd_per_mtok[fits], mode="lines+markers", name=f"{label} CPM", row=1, col=2)
    fig.add_scatter(x=b[fits], y=sw.baseline_usd_per_mtok[fits], mode="lines+markers", name=tr("no speculation CPM"),
                    line={"dash": "dash"}, row=1, col=2)
    slow = b[fits & (sw.tpot_ms > slo_ms)]
    if slow.size:
        for col in (1, 2):
            fig.add_vrect(x0=float(slow.min()), x1=float(b[fits].max()), fillcolor="grey", opacity=0.12,
                          line_width=0, row=1, col=col)
    if sw.crossover_batch is not None:
        for col in (1, 2):
            fig.add_vline(x=sw.crossover_batch, line_color="#d62728", row=1, col=col)
        fig.add_annotation(x=np.log10(sw.crossover_batch), y=1.0, text=tr("crossover ~{batch}", batch=f"{sw.crossover_batch:.0f}"),
                           row=1, col=1, showarrow=True)
    fig.update_xaxes(type="log", title=tr("batch (sequences per replica)"))
    fig.update_layout(height=420, legend={"orientation": "h", "y": -0.25})
    return fig


def render() -> None:
    req = S.page_header(tr("Sensitivity"))
    if req is None:
        return
    req = S.at_spend_volume(req)  # the tornado and the Monte Carlo take the volume a stated spend buys
    cat = S.catalog()
    p = S.plan(req)
    avail = [m.method for m in p.methods if m.available]
    if not avail:
        st.warning(tr("No speculative-decoding method is available for this model."))
        return
    auto = p.best.method if p.best is not None else avail[0]
    options = ["auto"] + avail
    if st.session_state.get("sens_method") not in options:
        st.session_state["sens_method"] = "auto"
    st.selectbox(tr("Method"), options, key="sens_method",
                 format_func={"auto": tr("best method ({label})", label=cat.methods[auto].label),
                              **{n: cat.methods[n].label for n in avail}}.get)
    method = auto if st.session_state["sens_method"] == "auto" else st.session_state["sens_method"]
    label = cat.methods[method].label
    pt = p.method(method)

    widgets.glossary()
    st.subheader(tr("Speedup and CPM over batch size"))
    sw = S.batch_sweep(req, method)
    seg = sw.segment
    seg_note = (tr("the largest traffic segment ({workload}, {language}, {share} % of output tokens)",
                   workload=cat.workloads[seg.workload].label, language=cat.languages[seg.language].label,
                   share=f"{seg.share * 100:.0f}") if S.is_profile()
                else f"{cat.workloads[seg.workload].label}, {cat.languages[seg.language].label}")
    st.plotly_chart(sweep_figure(sw, label, req.tpot_slo_ms), key="sens_batch_chart", width="stretch")
    if sw.crossover_batch is not None:
        st.markdown(tr("**Crossover: speculation stops paying at batch ~{crossover_batch}** "
                    "({label} at its best K per batch vs no speculation at the same batch; {seg_note}).", crossover_batch=f"{sw.crossover_batch:.0f}", label=label, seg_note=seg_note))
    elif sw.fits_memory.any():
        st.markdown(tr("**No crossover up to batch {max}**: {label} still cuts CPM at "
                    "every batch that fits in memory ({seg_note}).", max=int(sw.batch[sw.fits_memory].max()), label=label, seg_note=seg_note))
    st.caption(tr("At the plan's operating point (batch {batch}) the verifier is {verifier_bound}-bound: "
               "memory-bound means the step time is set by reading the weights, so extra draft tokens are nearly "
               "free; compute-bound means they cost arithmetic time. "
               "Grey: batches whose TPOT misses the {tpot_slo_ms} ms SLO. Batches beyond "
               "{max_batch} sequences do not fit in memory and are not drawn.", batch=pt.batch, verifier_bound=pt.verifier_bound, tpot_slo_ms=f"{req.tpot_slo_ms:g}", max_batch=f"{sw.max_batch:.0f}"))

    if cat.methods[method].tree:
        st.subheader(tr("Tree or chain: where the tree's extra verify tokens stop paying"))
        tvc = _tree_vs_chain(req, method)
        fig = go.Figure()
        ok = tvc.fits_memory
        fig.add_scatter(x=tvc.batch[ok], y=tvc.chain_usd_per_mtok[ok], mode="lines+markers", name=f"{label}, chain (best K)")
        fig.add_scatter(x=tvc.batch[ok], y=tvc.tree_usd_per_mtok[ok], mode="lines+markers", name=f"{label}, {tvc.tree_label}")
        if tvc.crossover_batch is not None:
            fig.add_vline(x=tvc.crossover_batch, line_color="#d62728")
        fig.update_xaxes(type="log", title=tr("batch (sequences per replica)"))
        fig.update_layout(yaxis_title=tr("$ per million output tokens"), height=360, legend={"orientation": "h", "y": -0.3})
        st.plotly_chart(fig, key="sens_tree_chart", width="stretch")
        st.markdown(tr("**The tree beats the chain up to batch ~{batch}**, then its extra verify tokens cost more than "
                       "they return.", batch=f"{tvc.crossover_batch:.0f}") if tvc.crossover_batch is not None else
                    tr("**No crossover in this range**: the tree stays ahead of the chain at every batch that fits."))
        st.caption(tr("A token tree verifies many candidate tokens per sequence: nearly free while reading the weights "
                   "sets the step time (memory-bound), a real cost once arithmetic does (compute-bound). State your "
                   "own tree with `python -m planner ... --tree FILE` or SGLang's three flags."))

    st.subheader(tr("Speedup over alpha x K"))
    st.number_input(tr("Batch for the heatmap"), min_value=1, max_value=4096, step=1, key="sens_batch")
    heat = _heat(req, method, int(st.session_state["sens_batch"]))
    fig = go.Figure(go.Heatmap(z=heat["speedup"], x=[str(k) for k in heat["ks"]], y=[f"{a:.2f}" for a in heat["alphas"]],
                               colorscale="RdYlGn", zmid=1.0, colorbar={"title": "speedup"},
                               text=np.round(heat["speedup"], 2), texttemplate="%{text}"))
    fig.update_layout(xaxis_title=tr("K (draft tokens per step)"), yaxis_title=tr("alpha (per-token, position 1)"),
                      height=460)
    st.plotly_chart(fig, key="sens_heatmap", width="stretch")
    st.caption(tr("{label} at batch {sens_batch}; the method's position decay applies "
               "after position 1. Your alpha now: {alpha_now} (per-token, position 1). Speedup = TPOT "
               "without speculation / TPOT with it, at the same batch.", label=label, sens_batch=int(st.session_state['sens_batch']), alpha_now=f"{heat['alpha_now']:.2f}"))

    st.subheader(tr("Tornado: what moves the saving"))
    tor = _tornado(req, method)
    unit = st.radio(tr("Measure"), ["bill", "cpm"], key="sens_tornado_unit", horizontal=True,
                    format_func={"bill": tr("monthly bill saving, $/month"),
                                 "cpm": tr("CPM change at full load, %")}.get)
    shift = today_offset_usd(p)  # 0 unless the Plan's today runs elsewhere (plain TP, another TP)
    today_name = p.reference.label if shift else tr("no speculation")
    if unit == "bill":  # the money number: today's fleet bill - the method's fleet bill (planner.money.bill)
        mid, lows, highs = (tor[0].mid_saving_usd - shift, [d.low_saving_usd - shift for d in tor],
                            [d.high_saving_usd - shift for d in tor])
        xlab, mid_text = tr("{label}: monthly saving vs {today}, $/month ({billing} fleet)", label=label,
                            today=today_name, billing=tr_known(req.billing)), fmt_usd(mid)
        side = tr("Right of 0: speculation saves")
    else:
        mid, lows, highs = (tor[0].mid_cpm_change_pct, [d.low_cpm_change_pct for d in tor],
                            [d.high_cpm_change_pct for d in tor])
        xlab, mid_text = tr("{label}: CPM change vs no speculation, %", label=label), fmt_pct(mid)
        side = tr("Left of 0: speculation saves")
    fig = go.Figure()
    ylab = [f"{d.driver} ({d.range})" for d in tor]
    fig.add_bar(y=ylab, x=[lo - mid for lo in lows], base=mid, orientation="h",
                name=tr("driver at its low end"), marker_color="#1f77b4")
    fig.add_bar(y=ylab, x=[hi - mid for hi in highs], base=mid, orientation="h",
                name=tr("driver at its high end"), marker_color="#ff7f0e")
    fig.add_vline(x=0, line_dash="dot")
    fig.update_layout(barmode="overlay", xaxis_title=xlab, height=420, legend={"orientation": "h", "y": -0.25})
    st.plotly_chart(fig, key="sens_tornado", width="stretch")
    st.caption(tr("{label} against no speculation, both at their own best batch under the SLO, re-evaluated with one "
                  "driver at its low and high end ({mid} with every driver at its middle). {side}. Ranges: {ranges}.",
                  label=label, mid=mid_text, side=side, ranges=sens.UNCERTAINTY_SOURCE) + (
                   tr(" The Plan's today is {today}, which costs {shift}/month less than no speculation on this "
                      "configuration: the bill savings are measured from that today (each bar less that difference at "
                      "the middle); the CPM changes stay against no speculation here.", today=p.reference.label,
                      shift=fmt_usd(shift))
                   if shift else ""))

    st.subheader(tr("Monte Carlo over acceptance, price, step time and speculation overheads"))
    c = st.columns(4)
    c[0].number_input(tr("Samples"), min_value=50, max_value=5000, step=50, key="mc_samples")
    c[1].number_input(tr("Seed"), min_value=0, max_value=2**31 - 1, step=1, key="mc_seed")
    c[2].checkbox(tr("Sample $/GPU-hour within the list range"), key="mc_price")
    c[3].checkbox(tr("Sample step time and speculation overheads from their fits"), key="mc_hw")
    if not pt.feasible:
        st.info(tr("{label} {reason}: no Monte Carlo.", label=label, reason=pt.reason))
        return
    if today_elsewhere(p) and method != p.reference.method:
        _plan_today_risk(p, req, pt, label)
        return
    mc = S.monte_carlo(req, method, pt.k)
    st.markdown(
        tr("**{label} (K={k}): monthly saving p5 {saving_p05}, median {saving_p50}, "
        "p95 {saving_p95}; saves money in {v} % and pays back within "
        "{horizon_months} months in {v2} % of {samples} samples** "
        "(seed {seed}).", label=label, k=mc.k, saving_p05=fmt_usd(mc.saving_p05), saving_p50=fmt_usd(mc.saving_p50), saving_p95=fmt_usd(mc.saving_p95), v=f"{mc.p_saves * 100:.0f}", horizon_months=mc.horizon_months, v2=f"{mc.p_payback_within_horizon * 100:.0f}", samples=mc.samples, seed=mc.seed))
    fig = go.Figure()
    fig.add_scatter(x=mc.months, y=mc.cumulative_p95, line={"width": 0}, showlegend=False)
    fig.add_scatter(x=mc.months, y=mc.cumulative_p05, fill="tonexty", line={"width": 0},
                    name="p5-p95", fillcolor="rgba(31,119,180,0.25)")
    fig.add_scatter(x=mc.months, y=mc.cumulative_p50, name=tr("median"), line={"color": "#1f77b4"})
    fig.add_hline(y=0, line_dash="dot")
    fig.update_layout(xaxis_title=tr("months after switching"), yaxis_title=tr("cumulative net saving, $"), height=380)
    st.plotly_chart(fig, key="sens_mc_band", width="stretch")
    fig = go.Figure()
    fig.add_histogram(x=mc.cpm_change_pct[np.isfinite(mc.cpm_change_pct)], nbinsx=40, marker_color="#1f77b4")
    fig.add_vline(x=0, line_dash="dot")
    fig.update_layout(xaxis_title=tr("{label}: CPM change vs no speculation, %", label=label), yaxis_title=tr("samples"),
                      height=320)
    st.plotly_chart(fig, key="sens_mc_hist", width="stretch")
    price = gpu_price(S.catalog().hardware[req.hardware], req.usd_per_gpu_hour)
    price_text = (tr("drawn from the list range") if mc.price_drawn else
                  tr("the entered {price}, never drawn over", price=fmt_usd(price.usd_per_gpu_hour, 2)) if price.entered else
                  tr("the list midpoint {price} (tick the box above to draw it)", price=fmt_usd(price.usd_per_gpu_hour, 2)))
    st.caption(tr("Draws: {source}. Today's configuration and {label} at K={k} are both re-evaluated at their own "
               "best batch in every draw; the one-time cost is uniform within its range. $/GPU-hour: {price_text}.", source=mc.source, label=label, k=mc.k, price_text=price_text))


def _plan_today_risk(p, req, pt, label: str) -> None:
    """The Monte Carlo from the Plan's today in its own context (the Plan's own numbers: P(saving > 0), the saving's
    p5 and p95), with the page's samples and seed."""
    n, seed = int(st.session_state["mc_samples"]), int(st.session_state["mc_seed"])
    risk = _plan_risk(req, repr((p.reference, pt)), n, seed, p.reference, pt)
    if risk is None:
        st.info(tr("{label} is today's configuration: nothing to switch.", label=label))
        return
    sv = risk.saving_usd
    st.markdown(
        tr("**{label} (K={k}) against the Plan's today, {label2}: monthly saving p5 "
        "{saving_p05_usd}, median {percentile}, p95 "
        "{saving_p95_usd}; saves money in {v} % and pays back within "
        "{horizon_months} months in {v2} % of {size} samples** "
        "(seed {seed}).", label=label, k=pt.k, label2=p.reference.label, saving_p05_usd=fmt_usd(risk.saving_p05_usd), percentile=fmt_usd(float(np.percentile(sv, 50))), saving_p95_usd=fmt_usd(risk.saving_p95_usd), v=f"{risk.p_saving_positive * 100:.0f}", horizon_months=p.costs.horizon_months, v2=f"{risk.p_payback_within_horizon * 100:.0f}", size=sv.size, seed=seed))
    fig = go.Figure()
    fig.add_histogram(x=sv[np.isfinite(sv)], nbinsx=40, marker_color="#1f77b4")
    fig.add_vline(x=0, line_dash="dot")
    fig.update_layout(xaxis_title=f"{label}: monthly saving vs {p.reference.label}, $/month ({req.billing} fleet)",
                      yaxis_title="samples", height=320)
    st.plotly_chart(fig, key="sens_mc_hist", width="stretch")
    st.caption(tr("The Plan's today runs {label}, not this page's configuration: both fleets are drawn each "
               "in its own context from the same seeded samples (acceptance, step time, speculation overheads), the "
               "numbers the Plan's probability comes from. The samples and seed above apply.", label=p.reference.label))


if __name__ == "__main__":
    render()
