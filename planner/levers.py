"""The seven levers as a waterfall over the whole mix: each applied cumulatively from a starting method at the
plan's operating point, each step at its own best batch under the SLO; a lever that raises CPM is skipped.
Payback and break-even spend come from planner.economics.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.answer import LeverStep, OperatingPoint
from planner.candidates import vsd_alpha_shift
from planner.context import Candidate, Context, make_context
from planner.drafting import availability
from planner.economics import TOKENS_PER_MTOK, breakeven_monthly_spend_usd, economics
from planner.formatting import fmt_cpm
from planner.points import one_point
from planner.request import NO_SPEC, PlanError, PlanRequest


def lever_waterfall(ctx: Context, start: str, order: Sequence[str] | None = None) -> list[LeverStep]:
    """Apply the levers cumulatively from `start` at the plan's operating point (its best single K for the mix);
    lever 3 (tune K per workload) then gives each workload segment its own K.

    Each step is the whole mix at its own best batch under the SLO. A lever that raises CPM is skipped. A lever's
    compute cost is paid once per (language, workload) segment (the seed: $400-1,800 per language-workload);
    engineering weeks once. Payback and break-even spend use planner.economics.
    """
    cat = ctx.catalog
    names = list(order or [n for n, _ in sorted(cat.levers.items(), key=lambda kv: kv[1].number)])
    m0 = cat.methods[start]
    cur = Candidate(start, tuple(range(1, m0.max_k + 1)), tuned=ctx.req.tuned)  # the plan's operating point
    pt = one_point(ctx, cur)
    eng = ctx.costs.engineering_usd_per_week
    n_segs = len({(s.workload, s.language) for s in ctx.segs})
    steps = []
    for name in names:
        lever = cat.levers[name]
        method = cat.methods[cur.method]
        new, why = None, ""
        if lever.applies_to and cur.method not in lever.applies_to:
            why = f"does not apply to {method.label}"
        elif lever.kind == "alpha":
            if cur.tuned:
                why = "the tuned alpha range already includes a domain fine-tune (not counted twice)"
            else:
                new, why = (
                    dataclasses.replace(cur, alpha_shift=cur.alpha_shift + lever.alpha_gain.mid),
                    f"alpha +{lever.alpha_gain.mid:.2f} (per-token)",
                )
        elif lever.kind == "switch_to_head":
            e3 = cat.methods["eagle3"]
            new, why = (
                dataclasses.replace(cur, method="eagle3", ks=tuple(range(1, e3.max_k + 1))),
                "draft model -> EAGLE-3 head",
            )
        elif lever.kind == "tune_k":
            if len({(sg.workload, sg.language) for sg in ctx.segs}) < 2:
                why = "one workload: its K is already the best one (the plan picks K)"
            else:
                new, why = dataclasses.replace(cur, k_per_segment=True), "K chosen per workload (one K per segment)"
        elif lever.kind == "tree":
            if not method.tree:
                why = f"{method.label} has no tree verification"
            else:
                shape = ctx.req.tree_shape
                new = dataclasses.replace(cur, tree=True, tree_shape=shape, ks=(shape.depth,) if shape else cur.ks)
                why = (f"tree verification ({shape.verify_tokens_per_seq} tokens verified per sequence)" if shape
                       else "tree verification (the planner's default tree)")
        elif lever.kind == "draft_cost":
            if method.drafting == "ngram":
                why = "n-gram drafting has no draft network"
            else:
                new = dataclasses.replace(
                    cur,
                    draft_cost_factor=cur.draft_cost_factor * lever.draft_cost_factor,
                    alpha_shift=cur.alpha_shift + lever.alpha_gain.mid,
                )
                why = f"draft time x{lever.draft_cost_factor:g}, alpha {lever.alpha_gain.mid:+.2f}"
        elif lever.kind == "switch_to_mtp":
            if "mtp" not in ctx.model.native_methods:
                why = f"{ctx.model.label} ships no MTP module"
            elif cur.method == "mtp":
                why = "already on MTP"
            else:
                mtp = cat.methods["mtp"]
                new, why = (
                    Candidate("mtp", tuple(range(1, mtp.max_k + 1)), tuned=cur.tuned),
                    "switch to the model's MTP module",
                )
        elif lever.kind == "speedup":
            shift = vsd_alpha_shift(ctx, cur, lever.speedup_factor)
            new, why = (
                dataclasses.replace(cur, alpha_shift=cur.alpha_shift + shift),
                f"acceptance length x{lever.speedup_factor:g} at K={method.default_k} (alpha {shift:+.3f})",
            )
        before = pt
        src = f"{lever.source.source} ({lever.source.date})"
        if new is None:
            steps.append(_skip(lever, why, cur, before, src))
            continue
        after = one_point(ctx, new)
        if not (after.feasible and (not before.feasible or after.usd_per_mtok < before.usd_per_mtok)):
            msg = (
                (
                    f"skipped: {why} raises CPM here ({fmt_cpm(before.usd_per_mtok)} -> {fmt_cpm(after.usd_per_mtok)}"
                    f"/Mtok at its best batch {after.batch} under the SLO)"
                )
                if after.feasible
                else f"skipped: {why} does not fit or meet the SLO here"
            )
            steps.append(_skip(lever, msg, cur, before, src))
            continue
        n_applied = n_segs if lever.kind == "alpha" else 1
        low = lever.one_time_usd.low * n_applied + lever.engineering_weeks * eng
        high = lever.one_time_usd.high * n_applied + lever.engineering_weeks * eng
        e = economics(
            baseline_usd_per_mtok=before.usd_per_mtok,
            new_usd_per_mtok=min(after.usd_per_mtok, before.usd_per_mtok),
            monthly_output_tokens=ctx.req.monthly_output_tokens,
            one_time_usd=high,
            horizon_months=ctx.costs.horizon_months,
            annual_discount_rate=ctx.costs.annual_discount_rate,
        )
        frac = 1.0 - after.usd_per_mtok / before.usd_per_mtok if before.usd_per_mtok > 0 else 0.0
        be = float(
            breakeven_monthly_spend_usd(
                cpm_reduction_fraction=frac,
                one_time_usd=high,
                horizon_months=ctx.costs.horizon_months,
                annual_discount_rate=ctx.costs.annual_discount_rate,
            )
        )
        steps.append(
            LeverStep(
                name,
                lever.number,
                lever.label,
                True,
                why,
                new.method,
                after.k,
                after.batch,
                new.tree,
                before.alpha_position_1,
                after.alpha_position_1,
                before.usd_per_mtok,
                after.usd_per_mtok,
                low,
                high,
                float(e.monthly_saving_usd),
                float(e.payback_months),
                be,
                lever.note,
                src,
            )
        )
        cur, pt = new, after
    return steps


def _skip(lever, why, cur: Candidate, pt: OperatingPoint, src: str) -> LeverStep:
    return LeverStep(
        lever.name,
        lever.number,
        lever.label,
        False,
        why,
        cur.method,
        pt.k,
        pt.batch,
        cur.tree,
        pt.alpha_position_1,
        pt.alpha_position_1,
        pt.usd_per_mtok,
        pt.usd_per_mtok,
        0.0,
        0.0,
        0.0,
        math.inf,
        math.inf,
        lever.note,
        src,
    )


def levers(req: PlanRequest, catalog, start: str, order: Sequence[str] | None = None) -> list[LeverStep]:
    """The waterfall for a request from a chosen starting method (the Levers page)."""
    ctx = make_context(req, catalog)
    m = catalog.methods[start]
    ok, why = availability(ctx.model, m)
    if not ok:
        raise PlanError("levers_start", start, why)
    return lever_waterfall(ctx, start, order)


def order_by_return(steps: Sequence[LeverStep]) -> list[str]:
    """Lever names sorted by CPM cut per one-time dollar (free levers first, then the best ratio)."""

    def key(st: LeverStep):
        cut = st.usd_per_mtok_before - st.usd_per_mtok_after
        if not st.applied or cut <= 0:
            return (2, 0.0, st.number)
        if st.one_time_usd_high <= 0:
            return (0, -cut, st.number)
        return (1, -cut / st.one_time_usd_high, st.number)

    return [st.lever for st in sorted(steps, key=key)]


# ---------------------------------------------------------------------------------------------------
# Assumptions
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WaterfallSummary:
    """A waterfall from end to end: CPM at the start and after the last applied lever, the applied levers' one-time
    cost (high end) and the monthly saving at the request's volume."""

    start_usd_per_mtok: float
    end_usd_per_mtok: float
    one_time_usd_high: float
    monthly_saving_usd: float


def summarize(steps: Sequence[LeverStep], monthly_output_tokens: float) -> WaterfallSummary:
    start, end = steps[0].usd_per_mtok_before, steps[-1].usd_per_mtok_after
    return WaterfallSummary(start_usd_per_mtok=start, end_usd_per_mtok=end,
                            one_time_usd_high=sum(s.one_time_usd_high for s in steps),
                            monthly_saving_usd=(start - end) * monthly_output_tokens / TOKENS_PER_MTOK)


def plan_levers(ctx: Context) -> tuple[LeverStep, ...]:
    """The plan's waterfall from the request's levers_start ("auto": today's method, EAGLE-3 when today has no
    draft); none when levers_start is None or that method cannot run here."""
    start, cat = ctx.req.levers_start, ctx.catalog
    if start is None:
        return ()
    cur = ctx.req.current_method
    if start == "auto":
        start = cur if cur != NO_SPEC and cat.methods[cur].drafting != "ngram" else "eagle3"
    if start in cat.methods and availability(ctx.model, cat.methods[start])[0]:
        return tuple(lever_waterfall(ctx, start))
    return ()
