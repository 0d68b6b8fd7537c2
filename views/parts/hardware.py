"""Plan page: which hardware for this traffic. The cheapest fleet on every GPU type of the catalogue for the same
traffic and TPOT SLO (planner.decision.hardware_choice, computed by plan() when the section's toggle is on), at the
user's prices per GPU type (editable here, carried in the link), as a table and a chart of the monthly bill with and
without speculation. Like for like by default (every GPU type at the sidebar's weight format); a checkbox lets each GPU
type pick other weight formats, and the section then says what the format changed."""

from __future__ import annotations

import dataclasses

import plotly.graph_objects as go
import streamlit as st

from i18n import N_, tr, tr_known
from i18n.numbers import fmt_per_month, fmt_usd
from planner.answer import Plan
from planner.request import PlanRequest
from views.parts import widgets
from views.sidebar import price as price_box
from views.sidebar import state as S

TOGGLE = "hw_compare"  # session / URL key: compare GPU types (off by default: it sizes dozens of fleets)
# session / URL key: let each GPU type pick other weight formats (off: like for like)
OTHER_FORMATS = "hw_other_formats"
PRICE_PREFIX = price_box.GPU_PRICE_PREFIX  # + GPU type: its $/GPU-hour (session / URL keys; views.sidebar.state.PARAMS)


def with_comparison(req: PlanRequest) -> PlanRequest:
    """The request with the hardware comparison when the toggle is on, at the prices entered (the request's own GPU
    type keeps the sidebar's price)."""
    ss = st.session_state
    if not ss.get(TOGGLE):
        return req
    cat = S.catalog()
    prices = tuple((name, float(ss[PRICE_PREFIX + name])) for name in cat.hardware
                   if name != req.hardware and PRICE_PREFIX + name in ss and price_box.gpu_price_entered(name))
    return dataclasses.replace(req, compare_hardware=True, hardware_prices=prices,
                               compare_other_formats=bool(ss.get(OTHER_FORMATS, False)))


SERIES = ((N_("no speculation"), lambda c: c.no_speculation, "#7f7f7f"),
          (N_("with speculation (cheapest method)"), lambda c: c.speculation, "#2ca02c"))
# where the request's serving is disaggregated or best (planner.decision.hardware_choice): two more bars per GPU type
DISAGG_SERIES = ((N_("disaggregated, no speculation"), lambda c: c.disaggregated_no_speculation, "#c7c7c7"),
                 (N_("disaggregated, with speculation"), lambda c: c.disaggregated_speculation, "#98df8a"))


def chart(cmp) -> go.Figure:
    """Monthly bill of the cheapest fleet per GPU type, without and with speculation (co-located and, compared,
    disaggregated)."""
    fig = go.Figure()
    labels = [c.label for c in cmp.choices]
    for name, pick, colour in SERIES + (DISAGG_SERIES if cmp.disaggregated else ()):
        opts = [pick(c) for c in cmp.choices]
        fig.add_bar(x=labels, y=[o.usd_per_month if o is not None else None for o in opts], name=tr(name),
                    marker_color=colour, customdata=[[o.description if o is not None else tr("no feasible fleet")]
                                                     for o in opts],
                    hovertemplate="%{x}<br>$%{y:,.0f}/month<br>%{customdata[0]}<extra></extra>")
    fig.update_layout(barmode="group", yaxis_title=tr("$ per month ({billing} fleet)", billing=tr_known(cmp.billing)), height=380,
                      margin={"t": 30, "b": 40}, legend={"orientation": "h", "y": -0.2})
    return fig


def _fleet(o, why: str) -> str:
    return o.short if o is not None else why


def rows(cmp) -> list[dict]:
    """One row per GPU type: its price and where it comes from, and its cheapest fleet without and with speculation,
    the money formatted; a GPU type that cannot run the weights says why."""
    out = []
    for c in cmp.choices:
        off, on = c.no_speculation, c.speculation
        why = c.note or tr("none meets the SLO")
        out.append({
            "GPU": c.label, "$/GPU-hour": fmt_usd(c.usd_per_gpu_hour, 2),
            "price": c.price_source,
            "without speculation": fmt_per_month(off.usd_per_month) if off else "-",
            "fleet without": _fleet(off, why),
            "with speculation": fmt_per_month(on.usd_per_month) if on else "-",
            "fleet with": _fleet(on, why)})
        if cmp.disaggregated:
            d_off, d_on = c.disaggregated_no_speculation, c.disaggregated_speculation
            out[-1].update({
                "disaggregated without": fmt_per_month(d_off.usd_per_month) if d_off else "-",
                "disaggregated with": fmt_per_month(d_on.usd_per_month) if d_on else "-",
                "disaggregated fleet with": _fleet(d_on, tr("none meets both SLOs"))})
    return out


def _prices(req: PlanRequest) -> None:
    cat = S.catalog()
    with st.expander(tr("Prices per GPU type, $/GPU-hour (defaults: list prices, the midpoints of their ranges)")):
        cols = st.columns(3)
        for i, (name, hw) in enumerate(cat.hardware.items()):
            col = cols[i % 3]
            if name == req.hardware:
                col.caption(tr("{label}: ${price_of} (the sidebar's "
                            "price, the plan's GPU)", label=hw.label, price_of=f"{price_box.price_of(req, hw):.2f}"))
                continue
            col.number_input(hw.label, min_value=0.01, max_value=1000.0, step=0.1, key=PRICE_PREFIX + name,
                             on_change=price_box.mark_gpu_price_entered, args=(name,),
                             help=tr("Default: midpoint of ${usd_per_gpu_hour_low}-${usd_per_gpu_hour_high} "
                                  "({source}, {date}).", usd_per_gpu_hour_low=f"{hw.usd_per_gpu_hour_low:.2f}", usd_per_gpu_hour_high=f"{hw.usd_per_gpu_hour_high:.2f}", source=hw.price.source, date=hw.price.date))


def section(p: Plan) -> None:
    """The section: the toggle, the prices, then the comparison's table and chart."""
    st.subheader(tr("Which hardware for this traffic"))
    st.toggle(tr("Compare every GPU type: the cheapest fleet for this traffic and SLO"), key=TOGGLE,
              help=tr("Every GPU type at each TP that fits and meets the SLO, at your weight format, without speculation "
                   "and with each method at its best K; the fleet sized by hour and billed as above."))
    if not st.session_state.get(TOGGLE):
        return
    st.checkbox(tr("Compare other weight formats too (your weights: {dtype})", dtype=p.request.dtype), key=OTHER_FORMATS,
                help=tr("Off: every GPU type runs your weight format, like for like. On: each GPU type may pick fp8 or "
                     "4-bit weights, which may cost quality the planner does not price; the section then says where "
                     "cheaper weights, not only a cheaper GPU, made the saving."))
    _prices(p.request)
    cmp = p.hardware_choice
    if cmp is None:
        return
    st.plotly_chart(chart(cmp), key="plan_hardware_chart", width="stretch")
    # at 1280 px with the sidebar open the table shows ~820 px: the GPU, both bills and the fleet with speculation
    widgets.table(rows(cmp), key="plan_hardware_table",
                  first=("GPU", "without speculation", "with speculation", "fleet with", "fleet without", "$/GPU-hour"),
                  widths={"GPU": 190, "without speculation": 135, "with speculation": 135, "fleet with": 230,
                          "fleet without": 230, "$/GPU-hour": 90})
    if changes := cmp.format_changes:
        st.info(tr("What the other weight formats changed:") + "\n\n" + "\n".join(f"- {line}." for line in changes))
    best, own = cmp.cheapest, cmp.requested
    if best is not None:
        st.caption(f"Cheapest: {best.description} at {fmt_usd(best.usd_per_month)}/month"
                   + (f"; the plan's own configuration: {own.description} at {fmt_usd(own.usd_per_month)}/month"
                      if own is not None else "") + f" ({cmp.monthly_output_tokens / 1e9:,.2f}B output tokens/month, "
                   f"billed {cmp.billing}). {cmp.note}")
