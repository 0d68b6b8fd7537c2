"""Plan (landing page): the headline for a CFO, all of it from one planner.plan.plan() call. Money first: today's
bill (today named: the cheapest configuration without speculation, or the current method), the bill with the best
method, the saving, payback, NPV (and its risk-weighted value) and P(saving > 0); a warning when the saving sits on a
knee of the TPOT SLO (planner.checks.knee); then the CPMs at full load and effective, labelled, the one-time cost, the
recommendation in one sentence, and CPM by method."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import streamlit as st

import i18n
from i18n import N_, tr, tr_known
from i18n.numbers import fmt_acceptance, fmt_cpm, fmt_months, fmt_pct, fmt_per_month, fmt_tokens, fmt_usd
from planner.answer import OperatingPoint, Plan, SloKnee
from planner.checks.knee import slo_knee
from planner.decision.assumptions import CALIBRATED_PREFIX
from planner.decision.verdict import slo_phrase
from planner.request import PlanRequest
from report.board import headline, knee_text
from views.parts import hardware as hardware_part
from views.parts import widgets
from views.parts.text import plain, plain_in, quoted
from views.sidebar import state as S

CONVENTION = N_("Acceptance conventions: alpha is per-token (position 1); tau counts the bonus token; vLLM's draft "
                "acceptance rate is (tau-1)/K.")


# the statistic an SLO holds at (planner.request.PERCENTILES), as the fleet's TTFT caption names it
STAT_LABELS = {"mean": N_("Mean"), "p50": N_("Median (p50)"), "p90": N_("p90"), "p99": N_("p99")}
BILLINGS = {"autoscaled": N_("autoscaled (each hour's replicas)"), "fixed": N_("fixed (sized for the peak hour)")}


def compute(req: PlanRequest | None = None) -> Plan:
    """Everything the page shows: one cached plan() call, the fleet by hour and the billing chosen on the page
    included (both are part of the shared request; benchmarks time this)."""
    return S.plan(hardware_part.with_comparison(req or S.request()))


def cpm_chart(p: Plan) -> go.Figure:
    rows = [m for m in p.methods if m.available and m.fits_memory]
    fig = go.Figure()
    colours = ["#2ca02c" if m.feasible else "#bbbbbb" for m in rows]
    fig.add_bar(
        x=[m.label for m in rows], y=[m.usd_per_mtok for m in rows], marker_color=colours, name="CPM",
        error_y={"type": "data", "symmetric": False,
                 "array": [max(0.0, m.usd_per_mtok_low - m.usd_per_mtok) if math.isfinite(m.usd_per_mtok_low) else 0
                           for m in rows],
                 "arrayminus": [max(0.0, m.usd_per_mtok - m.usd_per_mtok_high) if math.isfinite(m.usd_per_mtok_high)
                                else 0 for m in rows]},
        customdata=[[m.k, m.batch, m.acceptance_length, tr("meets the SLO") if m.feasible else m.reason] for m in rows],
        hovertemplate="%{x}<br>$%{y:.3f}/Mtok<br>K=%{customdata[0]}, batch %{customdata[1]}<br>"
                      "tau=%{customdata[2]:.2f} tokens/step<br>%{customdata[3]}<extra></extra>")
    layout = {"yaxis_title": tr("$ per million output tokens at full load"), "height": 420,
              "margin": {"t": 60, "b": 40}, "showlegend": False}
    if p.reference is not None:  # today's CPM as a dashed line across the chart (a layout shape: add_hline is slow)
        y = p.reference.usd_per_mtok
        layout["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": y, "y1": y,
                             "line": {"dash": "dash", "color": "#d62728"}}]
        layout["annotations"] = [{"xref": "paper", "x": 0, "yref": "y", "y": y, "xanchor": "left",
                                  "yanchor": "bottom", "showarrow": False,
                                  "text": tr("today ({label}) {cpm}/Mtok", label=tr_known(p.reference.label), cpm=fmt_cpm(y))}]
    fig.update_layout(**layout)
    return fig


def _delta_usd(x: float | None) -> str | None:
    """A bill's change as a metric delta: None (no arrow) when it is zero or unknown."""
    if x is None or not math.isfinite(x) or abs(x) < 0.5:
        return None
    return fmt_per_month(x)


def _money(p: Plan, req: PlanRequest) -> None:
    """The first row: today's bill, the recommended (best) bill, the saving, payback, NPV and the chance it pays."""
    e, tf, bf = p.economics, p.reference_fleet, p.best_fleet
    row = st.columns(3) + st.columns(3)  # two rows of three: six money figures do not fit side by side at 1280 px
    if tf is not None:
        row[0].metric(tr("Bill today, {billing}", billing=tr_known(tf.billing)), fmt_per_month(tf.usd_per_month),
                      help=tr("Today: {reference_note}. The month's GPU-hours of today's fleet x $/GPU-hour (Fleet by "
                           "hour, below).", reference_note=p.reference_note))
        row[0].caption(tr("{label}: {peak_gpus} GPUs at the peak ({per_replica}); TPOT {ms}"
                       ", TTFT {ms2}", label=tr_known(tf.label), peak_gpus=f"{tf.peak_gpus:,}", per_replica=_per_replica(tf), ms=_ms(tf.tpot_ms), ms2=_ms(tf.ttft_ms)))
    else:
        row[0].metric(tr("Bill today"), "n/a", help=p.reference_note)
        row[0].caption(tr("no configuration without speculation meets the SLO"))
    if bf is not None:
        change = None if tf is None else bf.usd_per_month - tf.usd_per_month
        row[1].metric(tr("Bill with {label}", label=bf.label), fmt_per_month(bf.usd_per_month), delta=_delta_usd(change),
                      delta_color="inverse", help=tr("The best method's fleet for the same traffic and SLO; a green "
                                                  "arrow: the bill falls."))
        row[1].caption(tr("{peak_gpus} GPUs at the peak ({per_replica}); TPOT {ms}, "
                       "TTFT {ms2}", peak_gpus=f"{bf.peak_gpus:,}", per_replica=_per_replica(bf), ms=_ms(bf.tpot_ms), ms2=_ms(bf.ttft_ms)))
    else:
        row[1].metric(tr("Bill with speculation"), "n/a", help=tr("No method fits and meets the SLO."))
    sav = e.monthly_saving_usd
    row[2].metric(tr("Monthly saving"), "n/a" if sav is None else fmt_per_month(sav),
                  help=tr("Today's fleet bill - the best method's fleet bill ({billing}) for "
                       "{v} output tokens/month ({own}).", billing=e.billing, v=fmt_tokens(e.monthly_output_tokens), own=_own(tr_known(p.request.volume_source))))
    if sav is not None:
        row[2].caption(_saving_range(e))
    row[3].metric(tr("Payback"), fmt_months(e.payback_months), help=tr("One-time cost / monthly saving."))
    if fmt_months(e.payback_low_months) != fmt_months(e.payback_high_months):
        row[3].caption(tr("range {payback_low_months} to {payback_high_months}", payback_low_months=fmt_months(e.payback_low_months), payback_high_months=fmt_months(e.payback_high_months)))
    row[4].metric(tr("NPV over {horizon_months} months", horizon_months=e.horizon_months), fmt_usd(e.npv_usd),
                  help=tr("Monthly savings discounted at {v} %/year, minus the one-time "
                       "cost, at the middle of every range.", v=f"{e.annual_discount_rate * 100:g}"))
    if e.risk_weighted_npv_usd is not None:
        row[4].caption(tr("risk-weighted {risk_weighted_npv_usd} (the NPV averaged over the Monte Carlo's "
                       "draws)", risk_weighted_npv_usd=fmt_usd(e.risk_weighted_npv_usd)))
    if e.p_saving_positive is not None:
        row[5].metric(tr("P(saving > 0)"), f"{e.p_saving_positive * 100:.0f} %",
                      help=tr("Share of seeded draws (acceptance, step time, the speedup error; the price only if "
                           "asked) whose fleet bills save money. Deploying requires {v} %.", v=f"{req.confidence * 100:.0f}"))
        row[5].caption(tr("P(payback within {horizon_months} months) {v} %", horizon_months=e.horizon_months, v=f"{e.p_payback_within_horizon * 100:.0f}"))
    else:
        row[5].metric(tr("P(saving > 0)"), "n/a", help=tr("No switch to draw: today is already the cheapest, or there is no "
                                                   "feasible today or method."))


def _saving_range(e) -> str:
    """The saving's ranges: over the Monte Carlo's draws (5th to 95th percentile) and over the alpha range; a range
    whose two ends are equal is said so, not printed as 'X to X'."""
    parts = []
    if e.saving_p05_usd is not None and e.saving_p95_usd is not None:
        parts.append(tr("Monte Carlo 5-95 %: {low} to {high}", low=fmt_usd(e.saving_p05_usd),
                        high=fmt_usd(e.saving_p95_usd))
                     if abs(e.saving_p95_usd - e.saving_p05_usd) >= 0.5 else
                     tr("the same {saving} in 90 % of the Monte Carlo's draws (whole replicas)",
                        saving=fmt_usd(e.saving_p05_usd)))
    lo, hi = e.monthly_saving_low_usd, e.monthly_saving_high_usd
    if lo is not None and hi is not None and abs(hi - lo) >= 0.5:
        parts.append(tr("alpha range {low} to {high}", low=fmt_usd(lo), high=fmt_usd(hi)))
    elif lo is not None:
        parts.append(tr("the same at both ends of the alpha range"))
    return tr("; ").join(parts)


def _metrics(p: Plan, req: PlanRequest) -> None:
    """The money first (_money), then the CPMs (full load and effective), labelled, and the one-time cost."""
    cat = S.catalog()
    hw = cat.hardware[req.hardware]
    e = p.economics
    ref = p.reference
    best = p.best
    _money(p, req)
    row = st.columns(3)
    if ref is not None:
        row[0].metric(tr("CPM today at full load"), tr("{cpm} /Mtok", cpm=fmt_cpm(ref.usd_per_mtok)),
                      help=tr("{label} at its best batch under the SLO ({reference_note}): one replica kept "
                           "full, prefill sharing its time; $ per million output tokens. Price "
                           "${usd_per_gpu_hour}/GPU-hour ({source}, {date}).", label=tr_known(ref.label), reference_note=p.reference_note, usd_per_gpu_hour=f"{p.usd_per_gpu_hour:,.2f}", source=hw.price.source, date=hw.price.date))
        row[0].caption(tr("{label}, batch {batch}; effective CPM on the fleet (bill / output tokens) "
                       "{reference_effective_usd_per_mtok} /Mtok", label=tr_known(ref.label), batch=f"{ref.batch:,}", reference_effective_usd_per_mtok=fmt_cpm(e.reference_effective_usd_per_mtok)))
    else:
        row[0].metric(tr("CPM today"), tr("not feasible"), help=p.reference_note)
        row[0].caption(p.baseline.reason)
    if best is not None:
        worse = best.cpm_change_pct is not None and best.cpm_change_pct > 0
        delta = None if best.cpm_change_pct is None or abs(best.cpm_change_pct) < 0.05 else fmt_pct(best.cpm_change_pct)
        title = tr("Cheapest-fleet method's CPM at full load") if worse else tr("Best method CPM at full load")
        row[1].metric(title, tr("{cpm} /Mtok", cpm=fmt_cpm(best.usd_per_mtok)), delta=delta, delta_color="inverse",
                      help=tr("{label} at K={k}, its own best batch ({batch}) under the same SLO. alpha "
                              "(per-token, position 1) {alpha}; tau {tau} tokens/step; vLLM draft acceptance rate "
                              "{rate} % ({source}).", label=best.label, k=best.k, batch=f"{best.batch:,}",
                              alpha=f"{best.alpha_position_1:.2f}", tau=f"{best.acceptance_length:.2f}",
                              rate=f"{best.draft_acceptance_rate * 100:.0f}", source=best.alpha_source)
                           + (tr(" Its CPM at full load is above today's: it is not better per token.") if worse else ""))
        row[1].caption(tr("{label}, K={k}; effective CPM on the fleet {new_effective_usd_per_mtok}"
                       " /Mtok; full load {min}-"
                       "{max} over its alpha range", label=best.label, k=best.k, new_effective_usd_per_mtok=fmt_cpm(e.new_effective_usd_per_mtok), min=fmt_cpm(min(best.usd_per_mtok_low, best.usd_per_mtok_high)), max=fmt_cpm(max(best.usd_per_mtok_low, best.usd_per_mtok_high))))
    else:
        row[1].metric(tr("Method CPM"), tr("none feasible"))
    row[2].metric(tr("One-time cost"), fmt_usd(e.one_time_usd),
                  help=tr("Draft training GPU-hours at {low}-{high}/GPU-hour + engineering weeks at {week}/week "
                          "(sidebar: Cost assumptions).", low=fmt_usd(p.costs.training_usd_per_gpu_hour_low, 2),
                          high=fmt_usd(p.costs.training_usd_per_gpu_hour_high, 2),
                          week=fmt_usd(p.costs.engineering_usd_per_week))
                       + (f" {best.label}: {fmt_usd(best.one_time_usd_low)}-{fmt_usd(best.one_time_usd_high)}."
                          if best else ""))
    if fmt_usd(e.one_time_low_usd) != fmt_usd(e.one_time_high_usd):
        row[2].caption(tr("range {one_time_low_usd} to {one_time_high_usd}", one_time_low_usd=fmt_usd(e.one_time_low_usd), one_time_high_usd=fmt_usd(e.one_time_high_usd)))
    if best is not None and fmt_acceptance(best):
        with st.expander(tr("Where the acceptance comes from")):
            st.caption(fmt_acceptance(best))


@st.cache_resource(max_entries=32, show_spinner=False, hash_funcs={PlanRequest: repr})
def _knee(req: PlanRequest) -> SloKnee:
    """The saving at +-20 % of the SLO (planner.checks.knee, the CLI's and the report's too), for the page's plan."""
    return slo_knee(compute(req), S.catalog())


def _own(text: str) -> str:
    """A planner sentence with the traffic profile's name (a visitor's file name) in it shown as text."""
    prof = st.session_state.get(S.PROFILE_KEY)
    return plain_in(text, prof.name if prof is not None else None)


def _per_replica(f) -> str:
    """A headline fleet's replica size: its TP, or each pool's where prefill and decode are disaggregated."""
    if not f.pools:
        return tr("{tp} per replica", tp=f.tp)
    return tr("disaggregated: ") + ", ".join(tr("{role} {n} GPUs at TP {tp}", role=tr_known(q.role), n=f"{q.peak_gpus:,}",
                                                tp=q.tp) for q in f.pools)


def pool_rows(p: Plan) -> list[dict]:
    """The prefill and decode pools of the headline fleets served disaggregated (none when both are co-located)."""
    rows = []
    for role, f in (("today", p.reference_fleet), ("with the best method", p.best_fleet)):
        for q in f.pools if f is not None else ():
            busiest = max(q.hours, key=lambda h: h.requests_per_s)
            rows.append({"fleet": f"{role} ({f.label})", "pool": q.role, "TP": q.tp, "peak GPUs": q.peak_gpus,
                         "batch per replica": round(q.batch, 1) if q.role == "decode" else None,
                         f"GPU-hours/month ({f.billing})": round(q.gpu_hours_per_month),
                         "$/month": fmt_usd(q.usd_per_month),
                         "busiest hour": (f"TTFT {_ms(busiest.ttft_ms)} (KV transfer {q.kv_transfer_ms:.2f} ms)"
                                          if q.role == "prefill" else f"TPOT {_ms(busiest.tpot_ms)}")})
    return rows


def serving_rows(p: Plan) -> list[dict]:
    """The fleets the serving choice weighed (Plan.serving_options): today and the best method, co-located and
    disaggregated, each's bill and latencies, whether it meets both SLOs and which the headline shows."""
    shown = {"today": p.reference_fleet, "best": p.best_fleet}
    rows = []
    for f in p.serving_options:
        head = shown.get(f.role)
        rows.append({"fleet": tr("today") if f.role == "today" else tr("with the best method"),
                     "configuration": tr_known(f.label),
                     "serving": tr("co-located") if f.serving == "colocated" else tr("disaggregated"),
                     "peak GPUs": f.peak_gpus if f.feasible else None,
                     f"$/month ({f.billing})": fmt_usd(f.usd_per_month) if f.feasible else tr("misses an SLO"),
                     "TPOT": _ms(f.tpot_ms), "TTFT": _ms(f.ttft_ms), "meets both SLOs": f.feasible,
                     "in the headline": head is not None and (head.serving, head.method, head.usd_per_month) == (
                         f.serving, f.method, f.usd_per_month)})
    return rows


def _ms(v: float | None) -> str:
    return f"{v:.1f} ms" if v is not None and math.isfinite(v) else "n/a"


def _slo_line(p: Plan) -> str:
    """The SLOs the plan holds, each with its statistic (mean by default), and the best method's TPOT at it."""
    req = p.request
    line = tr("Held: the {slo}", slo=slo_phrase(req))
    if req.tpot_percentile == "mean" and (req.ttft_slo_ms is None or req.ttft_percentile == "mean"):
        return line + tr(" (means over requests: the default; p50, p90 or p99 in the sidebar).")
    b = p.best
    tail = ("" if b is None or req.tpot_percentile == "mean" else
            tr("; {label}'s {stat} TPOT {at}, its mean {mean} (a request's TPOT varies with the drafts each verifier "
               "step accepts; without speculation it is not modelled to vary)", label=b.label,
               stat=req.tpot_percentile, at=_ms(b.tpot_at_slo_ms), mean=_ms(b.tpot_ms)))
    return line + tail + "."


def render() -> None:
    req = S.page_header(tr("Plan: does speculative decoding pay for you?"))
    if req is None:
        return
    st.radio(tr("Billing"), list(BILLINGS), key="billing", horizontal=True,
             format_func={k: tr(v) for k, v in BILLINGS.items()}.get,
             help=tr("The bill every saving, payback and NPV comes from: GPUs paid hour by hour (autoscaled) or a fleet "
                  "sized for the busiest hour all month (fixed)."))
    p = compute(req)
    cat = S.catalog()
    hw = cat.hardware[req.hardware]
    if i18n.language() == "en":
        st.markdown(tr("**Recommendation:** {own}", own=_own(p.verdict)))
    else:  # the decision from the plan's fields in the reader's language, the planner's English sentence below it
        st.markdown(tr("**Recommendation:** {own}", own=plain(headline(p))))
        st.caption(tr("The planner, in English: {verdict}", verdict=_own(p.verdict)))
    st.caption(_slo_line(p))
    if p.economics.monthly_saving_usd is not None and (knee := knee_text(_knee(req))):
        st.warning(knee)
    if p.spend is not None:  # the volume line: how the spend became the volume (planner.money.spend.SpendVolume)
        st.caption(tr("Volume: {v} output tokens/month, "
                   "{own}.", v=fmt_tokens(p.request.monthly_output_tokens), own=_own(p.spend.volume_source)))
    if not p.baseline.feasible:
        msg = tr("Without speculation, {reason}", reason=p.baseline.reason)
        if p.baseline.way_out:
            msg += f" ({p.baseline.way_out})"
        st.warning(msg + ". " + p.reference_note + ".")
    _metrics(p, req)
    if S.is_profile():
        cap = req.batch_cap
        st.caption(tr("Traffic profile {name} drives the workload and language mix ({n} segments, weighted by "
                      "output tokens)", name=quoted(st.session_state[S.PROFILE_KEY].name), n=len(p.segments))
                   + (tr("; batch capped at {cap} concurrent sequences (median minute, Little's law)", cap=f"{cap:,.0f}")
                      if cap is not None else "") + tr("."))
    widgets.glossary()
    st.subheader(tr("CPM at full load by method, each at its own best K and batch under the SLO"))
    st.plotly_chart(cpm_chart(p), key="plan_cpm_chart", width="stretch")
    st.caption(tr("Bars: the alpha range's midpoint; whiskers: the method's alpha range (low-high). Grey bars miss the "
                  "SLO. ") + tr(CONVENTION))
    rows = method_rows(p)
    st.dataframe(rows, key="plan_table", hide_index=True, column_config=widgets.headers(rows))
    _fleet(p)
    hardware_part.section(p)
    if p.deploy is not None:
        title = (tr("Deployment command") if p.recommendation is not None
                 else tr("Deployment command for the cheapest method ({label}; not recommended here)", label=p.best.label))
        with st.expander(title):
            st.code(p.deploy["command"], language="bash")
            for n in p.deploy["notes"]:
                st.caption(n)
    steps = next(a for a in p.assumptions if a.what == "step-time parameters")
    for a in p.assumptions:
        if a.what.startswith(CALIBRATED_PREFIX):
            st.caption(tr("Calibrated ({date}): {removeprefix}: {value}. Source: {source}.", date=a.date, removeprefix=a.what.removeprefix(CALIBRATED_PREFIX), value=a.value, source=a.source))
    st.caption(tr("Prices: {label} ${usd_per_gpu_hour_low}-${usd_per_gpu_hour_high}/GPU-hour "
               "({source}, {date}); hardware specs: {source2} ({date2}); "
               "step-time parameters ({value}): {source3} ({date3}).", label=hw.label, usd_per_gpu_hour_low=f"{hw.usd_per_gpu_hour_low:.2f}", usd_per_gpu_hour_high=f"{hw.usd_per_gpu_hour_high:.2f}", source=hw.price.source, date=hw.price.date, source2=hw.specs.source, date2=hw.specs.date, value=steps.value, source3=steps.source, date3=steps.date))


def _fleet(p: Plan) -> None:
    from planner.fleet import SHAPE_LABELS

    st.subheader(tr("Fleet by hour: GPUs with and without speculation"))
    st.selectbox(tr("Daily traffic shape (when the traffic profile does not cover a whole day)"), list(SHAPE_LABELS),
                 key="fleet_shape", format_func=lambda v: SHAPE_LABELS[v])
    f = p.fleet
    today, best = p.reference_fleet, p.best_fleet
    if today is None and best is None:
        st.info(tr("No configuration meets the SLO, so no fleet can be sized."))
        return
    if best is not None and today is not None and (best.method, best.tp) == (today.method, today.tp):
        best = None  # today's configuration is the best one
    c = st.columns(3)
    if today is not None:
        c[0].metric(tr("Peak GPUs today ({label})", label=tr_known(today.label)), f"{today.peak_gpus:,}",
                    help=tr("The fewest replicas that keep every user's TPOT (and mean TTFT, where a TTFT SLO is "
                         "stated) under the SLO and the batch in memory at the "
                         "busiest hour (Little's law: sequences in flight = arrivals x time in system), x TP "
                         "({tp}).", tp=today.tp))
    else:
        c[0].metric(tr("Peak GPUs today"), tr("none meets the SLO"), help=p.reference_note)
    if best is not None:
        gap = None if today is None else best.peak_gpus - today.peak_gpus
        delta = None if not gap else tr("{gap} GPUs", gap=f"{gap:+,}")
        c[1].metric(tr("Peak GPUs with {label}", label=best.label), f"{best.peak_gpus:,}", delta=delta, delta_color="inverse")
        c[2].metric(tr("Monthly bill, {billing}", billing=tr_known(best.billing)), fmt_per_month(best.usd_per_month),
                    delta=None if today is None else _delta_usd(best.usd_per_month - today.usd_per_month),
                    delta_color="inverse",
                    help=tr("GPUs per hour x {price}/GPU-hour, summed over the month. A fleet sized for the peak: "
                            "{fixed} with {label}", price=fmt_usd(best.usd_per_gpu_hour, 2),
                            fixed=fmt_per_month(best.usd_per_month_fixed), label=best.label)
                         + ("" if today is None else tr(", {fixed} today", fixed=fmt_per_month(today.usd_per_month_fixed)))
                         + tr("."))
    fig = go.Figure()
    for cfg, name in ((today, tr("today ({label})", label=tr_known(today.label)) if today else ""), (best, best.label if best else "")):
        if cfg is not None:
            fig.add_scatter(x=[h.hour for h in cfg.hours], y=[h.gpus for h in cfg.hours], mode="lines+markers",
                            line_shape="hv", name=name)
    fig.update_layout(xaxis_title=tr("hour of day"), yaxis_title="GPUs", height=320, legend={"orientation": "h", "y": -0.3})
    st.plotly_chart(fig, key="plan_fleet_chart", width="stretch")
    bill = ("" if today is None else tr("Today's bill: {auto} autoscaled, {fixed} for a fleet sized for the peak ({tp} "
                                        "GPUs per replica). ", auto=fmt_per_month(today.usd_per_month_autoscaled),
                                        fixed=fmt_per_month(today.usd_per_month_fixed), tp=today.tp))
    ttft = ", ".join(f"{cfg.label} {_ms(cfg.ttft_ms)}" for cfg in (today, best) if cfg is not None)
    split = [cfg for cfg in (today, best) if cfg is not None and cfg.pools]
    shares = (tr("Prefill shares each replica's time with decoding") if not split else
              tr("Disaggregated fleets prefill on their own pool and send the KV cache to the decode pool (its GPUs "
                 "above are both pools')"))
    st.caption(tr("Hours: {own}. {bill}{shares}; at least one replica runs every hour. "
                  "{stat} TTFT over the day: {ttft}.", own=_own((today or best).hours_source), bill=bill, shares=shares,
                  stat=tr(STAT_LABELS[p.request.ttft_percentile]), ttft=ttft))
    if split:
        st.markdown(tr("**Prefill and decode pools**"))
        st.dataframe(pool_rows(p), key="plan_pool_table", hide_index=True, column_config=widgets.headers(pool_rows(p)))
    if p.serving_options:
        st.markdown(tr("**Co-located or disaggregated: the fleets weighed**"))
        st.dataframe(serving_rows(p), key="plan_serving_table", hide_index=True,
                     column_config=widgets.headers(serving_rows(p)))
    if f is None:
        return
    ttft_of = {b.method: b.ttft_ms for b in p.bills if math.isfinite(b.ttft_ms)}
    with st.expander(tr("Fleet by hour, every configuration at the requested TP ({tp} GPUs per replica)", tp=f.tp)):
        st.dataframe([{"configuration": cfg.label, "K": cfg.k or None, "peak GPUs": cfg.peak_gpus,
                       "GPU-hours/month (autoscaled)": round(cfg.gpu_hours_per_month_autoscaled),
                       "$/month autoscaled": fmt_usd(cfg.usd_per_month_autoscaled),
                       "$/month fixed at peak": fmt_usd(cfg.usd_per_month_fixed),
                       f"{p.request.ttft_percentile} TTFT, ms": round(ttft_of[cfg.method], 1) if cfg.method in ttft_of else None}
                      for cfg in f.configs],
                     key="plan_fleet_table", hide_index=True,
                     column_config=widgets.headers(columns=("configuration", "K", "peak GPUs",
                                                            "GPU-hours/month (autoscaled)", "$/month autoscaled",
                                                            "$/month fixed at peak", "mean TTFT, ms")))


def method_rows(p: Plan) -> list[dict]:
    rows = [_row(p.baseline)]
    rows += [_row(m) for m in p.methods]
    return rows


def _row(m: OperatingPoint) -> dict:
    if not m.available:
        return {"method": m.label, "K": None, "best batch": None, "CPM at full load $/Mtok": None, "vs today": m.reason,
                "tau (tokens/step)": None, "verifier": "", "meets SLO": None}
    return {"method": m.label, "K": m.k or None, "best batch": m.batch,
            "CPM at full load $/Mtok": round(m.usd_per_mtok, 4),
            "vs today": (fmt_pct(m.cpm_change_pct) if m.cpm_change_pct is not None else
                         (m.reason if not m.feasible else "n/a (no feasible reference)")),
            "tau (tokens/step)": round(m.acceptance_length, 2), "verifier": m.verifier_bound + "-bound",
            "meets SLO": m.feasible, "acceptance from": m.acceptance_tier or "none"}


if __name__ == "__main__":
    render()
