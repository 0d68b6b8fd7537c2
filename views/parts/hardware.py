"""Plan page: which hardware for this traffic. The cheapest fleet on every GPU type of the catalogue for the same
traffic and TPOT SLO (planner.decision.hardware_choice, computed by plan() when the section's toggle is on), at the
user's prices per GPU type (editable here, carried in the link), as a table and a chart of the monthly bill with and
without speculation."""

from __future__ import annotations

import dataclasses

import plotly.graph_objects as go
import streamlit as st

from planner.answer import Plan
from planner.formatting import fmt_usd
from planner.request import PlanRequest
from views.sidebar import price as _price
from views.sidebar import state as S

TOGGLE = "hw_compare"  # session / URL key: compare GPU types (off by default: it sizes dozens of fleets)
PRICE_PREFIX = _price.GPU_PRICE_PREFIX  # + GPU type: its $/GPU-hour (session / URL keys; views.sidebar.state.PARAMS)


def with_comparison(req: PlanRequest) -> PlanRequest:
    """The request with the hardware comparison when the toggle is on, at the prices entered (the request's own GPU
    type keeps the sidebar's price)."""
    ss = st.session_state
    if not ss.get(TOGGLE):
        return req
    cat = S.catalog()
    prices = tuple((name, float(ss[PRICE_PREFIX + name])) for name in cat.hardware
                   if name != req.hardware and PRICE_PREFIX + name in ss and _price.gpu_price_entered(name))
    return dataclasses.replace(req, compare_hardware=True, hardware_prices=prices)


def chart(cmp) -> go.Figure:
    """Monthly bill of the cheapest fleet per GPU type, without and with speculation."""
    fig = go.Figure()
    labels = [c.label for c in cmp.choices]
    for name, pick, colour in (("no speculation", lambda c: c.no_speculation, "#7f7f7f"),
                               ("with speculation (cheapest method)", lambda c: c.speculation, "#2ca02c")):
        opts = [pick(c) for c in cmp.choices]
        fig.add_bar(x=labels, y=[o.usd_per_month if o is not None else None for o in opts], name=name,
                    marker_color=colour, customdata=[[o.description if o is not None else "no feasible fleet"]
                                                     for o in opts],
                    hovertemplate="%{x}<br>$%{y:,.0f}/month<br>%{customdata[0]}<extra></extra>")
    fig.update_layout(barmode="group", yaxis_title=f"$ per month ({cmp.billing} fleet)", height=380,
                      margin={"t": 30, "b": 40}, legend={"orientation": "h", "y": -0.2})
    return fig


def rows(cmp) -> list[dict]:
    out = []
    for c in cmp.choices:
        off, on = c.no_speculation, c.speculation
        out.append({
            "GPU": c.label, "$/GPU-hour": round(c.usd_per_gpu_hour, 2),
            "price": c.price_source.split(" (")[0],
            "$/month without speculation": round(off.usd_per_month) if off else None,
            "fleet without": off.short if off else "none fits and meets the SLO",
            "$/month with speculation": round(on.usd_per_month) if on else None,
            "fleet with": on.short if on else "none fits and meets the SLO"})
    return out


def _prices(req: PlanRequest) -> None:
    cat = S.catalog()
    with st.expander("Prices per GPU type, $/GPU-hour (defaults: list midpoints)"):
        cols = st.columns(3)
        for i, (name, hw) in enumerate(cat.hardware.items()):
            col = cols[i % 3]
            if name == req.hardware:
                col.caption(f"{hw.label}: ${_price.price_of(req, hw):.2f} (the sidebar's "
                            "price, the plan's GPU)")
                continue
            col.number_input(hw.label, min_value=0.01, max_value=1000.0, step=0.1, key=PRICE_PREFIX + name,
                             on_change=_price.mark_gpu_price_entered, args=(name,),
                             help=f"Default: midpoint of ${hw.usd_per_gpu_hour_low:.2f}-${hw.usd_per_gpu_hour_high:.2f} "
                                  f"({hw.price.source}, {hw.price.date}).")


def section(p: Plan) -> None:
    """The section: the toggle, the prices, then the comparison's table and chart."""
    st.subheader("Which hardware for this traffic")
    st.toggle("Compare every GPU type: the cheapest fleet for this traffic and SLO", key=TOGGLE,
              help="Every GPU type at each TP and weight format that fits and meets the SLO, without speculation and "
                   "with each method at its best K; the fleet sized by hour and billed as above.")
    if not st.session_state.get(TOGGLE):
        return
    _prices(p.request)
    cmp = p.hardware_choice
    if cmp is None:
        return
    st.plotly_chart(chart(cmp), key="plan_hardware_chart", width="stretch")
    st.dataframe(rows(cmp), key="plan_hardware_table", hide_index=True)
    listed = next((c.price_source for c in cmp.choices if c.price_source != "entered"), "")
    if listed:
        st.caption(f"Prices not entered: {listed}.")
    best, own = cmp.cheapest, cmp.requested
    if best is not None:
        st.caption(f"Cheapest: {best.description} at {fmt_usd(best.usd_per_month)}/month"
                   + (f"; the plan's own configuration: {own.description} at {fmt_usd(own.usd_per_month)}/month"
                      if own is not None else "") + f" ({cmp.monthly_output_tokens / 1e9:,.2f}B output tokens/month, "
                   f"billed {cmp.billing}). {cmp.note}")
