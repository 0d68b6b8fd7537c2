"""Methods: every speculative-decoding method side by side, each at its own best K and batch under the same TPOT
SLO (plan()'s methods table); where a method is unavailable or infeasible, why and what would make it run."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from i18n import tr, tr_known
from i18n.numbers import fmt_cpm, fmt_pct, fmt_usd
from planner.answer import Plan
from views.parts import widgets
from views.plan import CONVENTION
from views.sidebar import state as S

# What a reader compares first, in view at 1280 px; the rest of the columns follow (scroll right)
FIRST_COLUMNS = ("method", "CPM $/Mtok", "vs today", "speedup (same batch)", "K", "best batch", "TPOT ms", "feasible")


def table_rows(p: Plan) -> list[dict]:
    out = []
    for m in p.methods:
        base = {"method": m.label, "available": "yes" if m.available else m.reason}
        if m.available:
            base.update({
                "feasible": "yes" if m.feasible else f"no: {m.reason}" + (f" ({m.way_out})" if m.way_out else ""),
                "K": m.k, "best batch": m.batch, "max batch (memory)": m.max_batch,
                "alpha (per-token, pos. 1)": round(m.alpha_position_1, 3),
                "tau (acceptance length, tokens/step)": round(m.acceptance_length, 3),
                "vLLM draft acceptance rate": f"{m.draft_acceptance_rate * 100:.1f} %",
                "speedup (same batch)": round(m.speedup, 2),
                "tokens/s per replica (decode)": round(m.output_tokens_per_s),
                "TPOT ms": round(m.tpot_ms, 1),
                "CPM $/Mtok": round(m.usd_per_mtok, 4),
                "vs today": fmt_pct(m.cpm_change_pct),
                "verifier": m.verifier_bound + "-bound",
                "draft cost ratio c": round(m.draft_cost_ratio, 3),
            })
        cat = S.catalog()
        meth = cat.methods[m.method]
        base.update({
            "one-time $": f"{fmt_usd(m.one_time_usd_low)} to {fmt_usd(m.one_time_usd_high)}",
            "setup": meth.setup_note,
            "claimed speedup (seed)": (f"{meth.claimed_speedup[0]:g}-{meth.claimed_speedup[1]:g}x"
                                       if meth.claimed_speedup else "none"),
            "alpha source": m.alpha_source,
        })
        out.append(base)
    return out


def methods_figure(avail: list, ref: object | None) -> go.Figure:
    """Tokens/s per replica (bars, left axis) and CPM (markers, right axis) per method, both axes from 0 so a bar's
    or a marker's height compares at sight (an axis starting at 0.858 made a 10 % difference look 5x); today's CPM
    as a dotted line on the CPM axis."""
    fig = go.Figure()
    fig.add_bar(x=[m.label for m in avail], y=[m.output_tokens_per_s for m in avail],
                name=tr("tokens/s per replica"), marker_color="#1f77b4", yaxis="y")
    fig.add_scatter(x=[m.label for m in avail], y=[m.usd_per_mtok for m in avail], name=tr("CPM $/Mtok"),
                    mode="markers+lines", marker={"size": 12, "color": "#d62728"}, yaxis="y2")
    if ref is not None:
        fig.add_scatter(x=[m.label for m in avail], y=[ref.usd_per_mtok] * len(avail), mode="lines", yaxis="y2",
                        name=tr("today's CPM ({label})", label=tr_known(ref.label)), line={"dash": "dot", "color": "#7f7f7f"})
    fig.update_layout(yaxis={"title": tr("decode tokens/s per replica"), "rangemode": "tozero"},
                      yaxis2={"title": tr("$ per million output tokens"), "overlaying": "y", "side": "right",
                              "rangemode": "tozero"},
                      height=400, legend={"orientation": "h", "y": -0.2})
    return fig


def render() -> None:
    req = S.page_header(tr("Methods side by side"))
    if req is None:
        return
    basis = st.radio(tr("Alpha basis"), ["default", "tuned"], key="methods_alpha", horizontal=True,
                     format_func={"default": tr("default heads (seed's default range)"),
                                  "tuned": tr("tuned heads (seed's tuned range)")}.get)
    p = S.plan(S.request(tuned=basis == "tuned"))
    ref = p.reference
    if ref is not None:
        st.markdown(tr("**Today ({label}):** {usd_per_mtok} per million output tokens at its own "
                    "best batch ({batch}) under the {tpot_slo_ms} ms TPOT SLO.", label=ref.label, usd_per_mtok=fmt_cpm(ref.usd_per_mtok), batch=ref.batch, tpot_slo_ms=f"{req.tpot_slo_ms:g}"))
    else:
        st.warning(p.reference_note)
    for m in p.methods:
        if not m.available:
            st.info(tr("{label} is {reason}.", label=m.label, reason=m.reason))
    widgets.table(table_rows(p), key="methods_table", first=FIRST_COLUMNS, widths={"method": 170})
    st.caption(tr(CONVENTION) + tr(" Speedup (same batch): against no speculation at the same batch; CPM compares each method at "
                                   "its own best batch (the honest comparison). ")
               + (tr("Numbers are blended over the traffic profile's workload and language mix, weighted by output "
                     "tokens.") if S.is_profile() else ""))
    widgets.glossary()
    avail = [m for m in p.methods if m.available and m.fits_memory]
    if avail:
        fig = methods_figure(avail, ref)
        st.plotly_chart(fig, key="methods_chart", width="stretch")
        if S.is_profile():
            with st.expander(tr("Per workload and language")):
                seg_rows = [{"method": m.label, "workload": s.workload, "language": s.language,
                             "share of output tokens": f"{s.share * 100:.1f} %", "K": m.k, "batch": s.batch,
                             "alpha (pos. 1)": round(s.alpha_position_1, 3), "tau": round(s.acceptance_length, 3),
                             "CPM $/Mtok": round(s.usd_per_mtok, 4)} for m in avail for s in m.segments]
                st.dataframe(seg_rows, key="methods_segments", hide_index=True,
                             column_config=widgets.headers(seg_rows))


if __name__ == "__main__":
    render()
