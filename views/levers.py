"""Levers: the seed's seven levers as a waterfall from today's configuration (step 0 adopts a draft when today has
none) to the end state, in the article's order and re-ordered by return on one-time cost; a step is applied only
when its fleet bill's saving pays back within the horizon; the applied set's bill, payback and NPV. The waterfall
starts where the Plan does: from its today (plan.reference, in its own context) and, when today has no draft network,
step 0 adopts the Plan's recommendation (MTP for a model that ships it; EAGLE-3 when the Plan stays)."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import streamlit as st

from i18n import tr
from i18n.numbers import fmt_cpm, fmt_months, fmt_per_month, fmt_usd
from planner.answer import LeverStep
from planner.decision.levers import levers, order_by_return, plan_start, summarize
from planner.request import NO_SPEC
from views.parts import widgets
from views.sidebar import state as S


@st.cache_data(max_entries=32, show_spinner=False)
def _waterfall(req, start: str, order: tuple[str, ...] | None, adopt: str | None, key: str, _today
               ) -> list[LeverStep]:
    """planner.decision.levers.levers, cached; key: the today point's repr (the cache's key for it)."""
    return levers(req, S.catalog(), start, list(order) if order else None, adopt=adopt, today=_today)


def pays_back(months: float, applied: int) -> str:
    """'pays back at once', 'pays back in 1.7 months', 'does not pay back'; 'no step applied' for an empty set."""
    if not applied:
        return tr("no step applied")
    if not math.isfinite(months):
        return tr("does not pay back")
    return tr("pays back at once") if months == 0 else tr("pays back in {months}", months=fmt_months(months))


def waterfall_figure(steps: list[LeverStep], start_label: str, start_cpm: float, title: str) -> go.Figure:
    x = [start_label] + [f"{s.number}. {s.label}" for s in steps] + [tr("end state")]  # step 0: adopt a draft
    y = [start_cpm] + [s.usd_per_mtok_after - s.usd_per_mtok_before for s in steps] + [0]
    measure = ["absolute"] + ["relative"] * len(steps) + ["total"]
    text = [f"${start_cpm:.3f}"] + [
        (f"{(s.usd_per_mtok_after - s.usd_per_mtok_before):+.3f}" if s.applied else tr("not applied"))
        for s in steps] + [f"${steps[-1].usd_per_mtok_after:.3f}" if steps else ""]
    fig = go.Figure(go.Waterfall(x=x, y=y, measure=measure, text=text, textposition="outside",
                                 decreasing={"marker": {"color": "#2ca02c"}},
                                 increasing={"marker": {"color": "#d62728"}},
                                 totals={"marker": {"color": "#1f77b4"}}))
    fig.update_layout(title=title, yaxis_title=tr("$ per million output tokens"), height=430, showlegend=False,
                      margin={"t": 50, "b": 120})
    return fig


def step_rows(steps: list[LeverStep]) -> list[dict]:
    """One row per step; a step not applied reads 'not applied: <reason>', its money columns blank."""
    rows = []
    for s in steps:
        why = s.reason.removeprefix("skipped: ")
        rows.append({
            "#": s.number, "lever": s.label, "applied": "yes" if s.applied else "no",
            "what / why": s.reason if s.applied else f"not applied: {why}",
            "alpha before -> after (per-token, pos. 1)": f"{s.alpha_before:.3f} -> {s.alpha_after:.3f}",
            "CPM at full load before -> after $/Mtok": f"{s.usd_per_mtok_before:.3f} -> {s.usd_per_mtok_after:.3f}",
            "bill before -> after": f"{fmt_usd(s.bill_usd_per_month_before)} -> {fmt_usd(s.bill_usd_per_month_after)}",
            "one-time $": f"{fmt_usd(s.one_time_usd_low)} to {fmt_usd(s.one_time_usd_high)}" if s.applied else "-",
            "monthly saving": fmt_per_month(s.monthly_saving_usd) if s.applied else "-",
            "payback": ("at once" if s.payback_months == 0 else fmt_months(s.payback_months)) if s.applied
            else "not applied",
            "P(pays back)": (f"{s.p_payback_within_horizon * 100:.0f} %" if math.isfinite(s.p_payback_within_horizon)
                             else "-"),
            "pays above spend $/month": fmt_usd(s.breakeven_monthly_spend_usd) if s.applied else "-",
            "source": s.source,
        })
    return rows


def render() -> None:
    req = S.page_header(tr("The seven levers"))
    if req is None:
        return
    req = S.at_spend_volume(req)  # the waterfall and its summary take the volume a stated spend buys
    cat = S.catalog()
    p = S.plan(req)
    plan_today, adopt = plan_start(p.reference, p.recommendation, req.current_method)
    starts = [NO_SPEC] + [n for n in cat.methods]
    label = {NO_SPEC: tr("no speculation"), **{n: m.label for n, m in cat.methods.items()}}
    if st.session_state.get("levers_start") not in starts:  # "auto": the Plan's today
        st.session_state["levers_start"] = plan_today if plan_today in starts else NO_SPEC
    adopt_label = label[adopt] if adopt is not None else label["eagle3"]
    st.selectbox(tr("Starting point (today's method)"), starts, key="levers_start", format_func=lambda n: label[n],
                 help=tr("The waterfall starts from the Plan's today; without a draft network today, step 0 adopts the "
                      "Plan's recommendation ({adopt_label}) if it pays.", adopt_label=adopt_label))
    start = st.session_state["levers_start"]
    if start != NO_SPEC:
        ok, why = cat.method_available(start, req.model)
        if not ok:
            st.warning(tr("{label} is unavailable: {why}. Pick another starting point.", label=cat.methods[start].label, why=why))
            return
    today = p.reference if p.reference is not None and p.reference.method == start else None
    adopt = adopt if adopt != start else None
    key = repr(today)
    article = _waterfall(req, start, None, adopt, key, today)
    by_return = tuple(order_by_return(article))
    reordered = _waterfall(req, start, by_return, adopt, key, today)
    start_name = today.label if today is not None else label[start]
    costs = p.costs
    total = summarize(article, req.monthly_output_tokens, horizon_months=costs.horizon_months,
                      annual_discount_rate=costs.annual_discount_rate)
    start_cpm = total.start_usd_per_mtok
    applied = [s for s in article if s.applied]
    st.markdown(
        tr("**From {start_bill_usd_per_month} to {end_bill_usd_per_month} a month "
        "({billing} fleet)** with the {n} step(s) that pay back within {horizon_months} months, "
        "starting from {start_name} (CPM at full load {start_cpm} -> "
        "{end_usd_per_mtok}/Mtok): saving {monthly_saving_usd}/month for "
        "{one_time_usd_high} one-time; the set {pays_back}, "
        "NPV {npv_usd} over {horizon_months} months.", start_bill_usd_per_month=fmt_usd(total.start_bill_usd_per_month), end_bill_usd_per_month=fmt_usd(total.end_bill_usd_per_month), billing=req.billing, n=len(applied), horizon_months=costs.horizon_months, start_name=start_name, start_cpm=fmt_cpm(start_cpm), end_usd_per_mtok=fmt_cpm(total.end_usd_per_mtok), monthly_saving_usd=fmt_usd(total.monthly_saving_usd), one_time_usd_high=fmt_usd(total.one_time_usd_high), pays_back=pays_back(total.payback_months, len(applied)), npv_usd=fmt_usd(total.npv_usd)))
    fleet = p.reference_fleet  # the Plan's "today" (planner.plan), at its own TP
    if fleet is not None and today is None:
        st.caption(tr("The Plan's today is {label} on {tp} GPUs per replica: {usd_per_month}"
                   "/month ({billing}), {peak_gpus} GPUs at the peak; this waterfall starts from "
                   "{v} on {tp2} GPUs per replica, as you picked.", label=fleet.label, tp=fleet.tp, usd_per_month=fmt_usd(fleet.usd_per_month), billing=fleet.billing, peak_gpus=f"{fleet.peak_gpus:,}", v=label[start], tp2=req.tp))
    widgets.glossary()
    order = st.radio(tr("Order"), ["article", "return"], key="levers_order", horizontal=True,
                     format_func={"article": tr("the article's order"), "return": tr("by return on one-time cost")}.get)
    steps = article if order == "article" else reordered
    title = tr("Article order") if order == "article" else tr("Re-ordered by return on one-time cost")
    st.plotly_chart(waterfall_figure(steps, tr("today ({label})", label=start_name), start_cpm, title),
                    key="levers_chart", width="stretch")
    widgets.table(step_rows(steps), key="levers_table", first=("#", "lever", "applied", "monthly saving", "payback",
                                                          "P(pays back)", "one-time $", "bill before -> after"),
            widths={"#": 40})
    if order == "return":
        st.caption(tr("Order by return: free levers first (largest CPM cut), then CPM cut per one-time dollar; "
                      "levers that do not cut CPM here go last. Order: ") + " -> ".join(by_return))
    vsd = next((s for s in article if s.lever == "vsd"), None)
    if vsd is not None:
        if vsd.applied and math.isfinite(vsd.breakeven_monthly_spend_usd):
            be = vsd.breakeven_monthly_spend_usd
            st.info(tr("VSD pays (NPV >= 0 over {horizon_months} months at "
                    "{v} %/year) above {be} a month of inference spend "
                    "({v2} a year); the seed article says $2M a year. Computed from its +9.6 % "
                    "acceptance-length gain and its one-time cost {one_time_usd_low} to "
                    "{one_time_usd_high} (assumption).", horizon_months=costs.horizon_months, v=f"{costs.annual_discount_rate * 100:g}", be=fmt_usd(be), v2=fmt_usd(be * 12), one_time_usd_low=fmt_usd(vsd.one_time_usd_low), one_time_usd_high=fmt_usd(vsd.one_time_usd_high)))
        else:
            st.info(tr("VSD is not applied here: {reason}.", reason=vsd.reason))
    st.caption(tr("Each step is evaluated at its own best batch under the TPOT SLO and priced by its fleet's bill; a "
               "step is applied only when that bill's saving pays back its one-time cost within the horizon with a "
               "positive NPV. A lever that helps only "
               "at batch 1 shows no gain where the verifier is compute-bound. Domain fine-tune compute is "
               "paid once per language-workload segment; engineering weeks at "
               "{engineering_usd_per_week}/week (sidebar: Cost assumptions).", engineering_usd_per_week=fmt_usd(costs.engineering_usd_per_week)))


if __name__ == "__main__":
    render()
