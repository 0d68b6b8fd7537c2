"""The seven levers as a waterfall over the whole mix, from today's configuration: each step at its own best batch
under the SLO, priced by its fleet's bill (planner.money.bill, the request's billing; served disaggregated or best, the
fleet as the request serves it: planner.money.disagg.served_bill). A step is applied only when the
bill it saves pays back its one-time cost within the horizon with a positive NPV, and it pays back within the horizon
with at least the request's confidence over the plan's seeded draws (planner.uncertainty.payback_draws); otherwise it is
skipped and says why.
When today runs no draft network (no speculation, or prompt lookup), step 0 adopts a method under the same rule (the
Plan's recommendation, with its own one-time cost: MTP for a model that ships it; EAGLE-3 when the Plan stays), and
the levers need it applied. The plan's waterfall starts from the Plan's own "today" (planner.plan: the reference, at
its own TP and attention, e.g. plain TP where the request runs data-parallel attention), so its start bill is the
Plan's. Payback, NPV and break-even spend come from planner.money.economics.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.acceptance.tiers import one_time_usd
from planner.answer import LeverStep, OperatingPoint
from planner.context import BASELINE, Candidate, Context, make_context
from planner.formatting import fmt_cpm, fmt_months, fmt_usd
from planner.money.bill import point_context
from planner.money.disagg import served_bill
from planner.money.economics import annuity_factor, breakeven_monthly_spend_usd
from planner.physics.serving import TOKENS_PER_MTOK
from planner.request import NO_SPEC, PlanError, PlanRequest
from planner.search.candidates import vsd_alpha_shift
from planner.search.drafting import availability
from planner.search.points import one_point
from planner.types import LOOKUP_DRAFTING, Catalog
from planner.uncertainty.payback_draws import p_payback_within_horizon
from planner.uncertainty.risk import switch_risk


def lever_waterfall(ctx: Context, start: str, order: Sequence[str] | None = None, *, adopt: str | None = None,
                    today: OperatingPoint | None = None) -> list[LeverStep]:
    """Apply the levers cumulatively from `start` at the plan's operating point (its best single K for the mix);
    lever 3 (tune K per workload) then gives each workload segment its own K. adopt: the method step 0 adopts when
    `start` runs no draft network (None: EAGLE-3, ADOPT); today: the Plan's reference point, the start when it runs
    `start` (at its own TP and attention: its bill is the Plan's "today").

    Each step is the whole mix at its own best batch under the SLO. A lever that raises CPM is skipped. A lever's
    compute cost is paid once per (language, workload) segment (the seed: $400-1,800 per language-workload);
    engineering weeks once. Payback and break-even spend use planner.money.economics.
    """
    cat = ctx.catalog
    names = [n for n in (order or sorted(cat.levers, key=lambda n: cat.levers[n].number)) if n != "adopt"]
    steps = []
    # today has no draft network (no speculation, or a lookup): adopt one first
    if start == NO_SPEC or cat.methods[start].drafting in LOOKUP_DRAFTING:
        now = BASELINE if start == NO_SPEC else _candidate(ctx, start)
        elsewhere = (today is not None and today.method == start and today.feasible
                     and point_context(ctx, today) is not ctx)
        pt = today if elsewhere else one_point(ctx, now)  # the Plan's today in its own context, else the request's
        bill = served_bill(ctx, pt, cand=now).usd_per_month
        step0, cur, pt, bill = _adopt(ctx, now, pt, bill, method=adopt if adopt not in (None, start) else ADOPT,
                                      elsewhere=elsewhere)
        steps.append(step0)
    else:
        cur = _candidate(ctx, start)  # the plan's operating point
        pt = one_point(ctx, cur)
        bill = served_bill(ctx, pt, cand=cur).usd_per_month
    eng = ctx.costs.engineering_usd_per_week
    n_segs = len({(s.workload, s.language) for s in ctx.segs})
    for name in names:
        lever = cat.levers[name]
        src = f"{lever.source.source} ({lever.source.date})"
        if cur.method == NO_SPEC:
            steps.append(_skip(lever, f"needs a draft network deployed: step 0 ({steps[0].label}) does not pay here",
                               cur, pt, src, bill))
            continue
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
            if method.drafting in LOOKUP_DRAFTING:
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
        if new is None:
            steps.append(_skip(lever, why, cur, before, src, bill))
            continue
        after = one_point(ctx, new)
        if not after.feasible:
            steps.append(_skip(lever, f"skipped: {why} does not fit or meet the SLO here", cur, before, src, bill))
            continue
        n_applied = n_segs if lever.kind == "alpha" else 1
        low = lever.one_time_usd.low * n_applied + lever.engineering_weeks * eng
        high = lever.one_time_usd.high * n_applied + lever.engineering_weeks * eng
        step, applied, after_bill = _judge(ctx, lever.name, lever.number, lever.label, why, new, before, after,
                                           bill, low, high, lever.note, src, tree_before=cur.tree, before_cand=cur)
        steps.append(step)
        if applied:
            cur, pt, bill = new, after, after_bill
    return steps


def _candidate(ctx: Context, method: str) -> Candidate:
    m = ctx.catalog.methods[method]
    return Candidate(method, tuple(range(1, m.max_k + 1)), tuned=ctx.req.tuned)


# the draft the levers build on when today has none and the Plan stays (the seed article's levers are EAGLE-3's)
ADOPT = "eagle3"


def _adopt(ctx: Context, today: Candidate, pt: OperatingPoint, bill: float, *, method: str = ADOPT,
           elsewhere: bool = False):
    """Step 0 from a configuration without a draft network: adopt `method` if it pays; (step, candidate, point,
    bill) after it (today's when it does not pay). elsewhere: today's point runs in another context than the
    request's (planner.money.bill.point_context); its probability of paying back is then the Plan's own
    (planner.uncertainty.risk.switch_risk)."""
    cat = ctx.catalog
    m = cat.methods[method]
    label = f"Adopt {m.label}"
    ok, why = availability(ctx.model, m)
    if not ok:
        return LeverStep("adopt", 0, label, False, f"unavailable: {why}", today.method, pt.k, pt.batch, False,
                         pt.alpha_position_1, pt.alpha_position_1, pt.usd_per_mtok, pt.usd_per_mtok, 0.0, 0.0,
                         0.0, math.inf, math.inf, "", "", bill, bill), today, pt, bill
    new = _candidate(ctx, method)
    after = one_point(ctx, new)
    if not after.feasible:
        return LeverStep("adopt", 0, label, False, f"skipped: {m.label} does not fit or meet the SLO here",
                         today.method, pt.k, pt.batch, False, pt.alpha_position_1, pt.alpha_position_1,
                         pt.usd_per_mtok, pt.usd_per_mtok, 0.0, 0.0, 0.0, math.inf, math.inf, "", "", bill,
                         bill), today, pt, bill
    low, high = one_time_usd(ctx, m)
    src = f"{m.source.source} ({m.source.date})"
    step, applied, after_bill = _judge(ctx, "adopt", 0, label, f"from {pt.label} to {m.label}", new, pt, after,
                                       bill, low, high, "", src, before_cand=today, before_elsewhere=elsewhere)
    return (step, new, after, after_bill) if applied else (step, today, pt, bill)


def _judge(ctx: Context, name: str, number: int, label: str, why: str, new: Candidate, before: OperatingPoint,
           after: OperatingPoint, bill: float, low: float, high: float, note: str, src: str, tree_before: bool = False,
           before_cand: Candidate | None = None, before_elsewhere: bool = False) -> tuple[LeverStep, bool, float]:
    """(the step, applied?, its fleet's bill after): applied when the bill it saves pays back its one-time cost
    (high end) within the horizon with a positive NPV at the middle acceptance, and the probability that it pays
    back within the horizon over the plan's seeded draws (planner.uncertainty.payback_draws) is at least the request's
    confidence."""
    costs = ctx.costs
    after_bill = served_bill(ctx, after, cand=new).usd_per_month
    saving = bill - after_bill if math.isfinite(bill) else (math.inf if math.isfinite(after_bill) else 0.0)
    annuity = annuity_factor(costs.horizon_months, costs.annual_discount_rate)
    payback = high / saving if saving > 0 else math.inf
    npv = saving * annuity - high if math.isfinite(saving) else math.inf
    frac = saving / bill if math.isfinite(bill) and bill > 0 else 0.0
    be = float(breakeven_monthly_spend_usd(cpm_reduction_fraction=frac, one_time_usd=high,
                                           horizon_months=costs.horizon_months,
                                           annual_discount_rate=costs.annual_discount_rate))
    cpm = f"{fmt_cpm(before.usd_per_mtok)} -> {fmt_cpm(after.usd_per_mtok)}/Mtok at full load"
    applied = saving > 0 and payback <= costs.horizon_months and npv > 0
    p_pay, conf = math.nan, ctx.req.confidence
    if applied and before_elsewhere and math.isfinite(saving):  # today in its own context: the Plan's own risk
        risk = switch_risk(ctx.req, ctx.catalog, reference=before, best=after)
        p_pay = risk.p_payback_within_horizon if risk is not None else math.nan
        applied = not math.isfinite(p_pay) or p_pay >= conf
    elif applied and before_cand is not None and math.isfinite(saving):
        p_pay = p_payback_within_horizon(ctx, before=before_cand, after=new, before_pt=before, after_pt=after,
                                         one_time_usd=high)
        applied = p_pay >= conf
    if applied:
        sure = f" (probability {p_pay * 100:.0f} % >= the {conf * 100:.0f} % asked)" if math.isfinite(p_pay) else ""
        reason = f"{why}: the bill falls {fmt_usd(saving)}/month ({cpm}); pays back in {fmt_months(payback)}{sure}"
    elif saving <= 0 and after.usd_per_mtok < before.usd_per_mtok:
        reason = (f"skipped: {why} cuts CPM ({cpm}) but not the bill ({fmt_usd(bill)}/month, "
                  f"{ctx.req.billing}): the same replicas serve the traffic")
    elif saving <= 0:
        reason = f"skipped: {why} raises CPM here ({fmt_cpm(before.usd_per_mtok)} -> {fmt_cpm(after.usd_per_mtok)}" \
                 f"/Mtok at its best batch {after.batch} under the SLO)"
    elif math.isfinite(p_pay):
        reason = (f"skipped: {why} saves {fmt_usd(saving)}/month at the middle acceptance, but pays back within "
                  f"{costs.horizon_months} months with probability {p_pay * 100:.0f} % < the {conf * 100:.0f} % asked")
    else:
        reason = (f"skipped: {why} saves {fmt_usd(saving)}/month on the bill, but its {fmt_usd(high)} one-time cost "
                  f"pays back in {fmt_months(payback)}, beyond the {costs.horizon_months}-month horizon"
                  if payback > costs.horizon_months else
                  f"skipped: {why} saves {fmt_usd(saving)}/month, NPV {fmt_usd(npv)} over the horizon")
    if not applied:
        return (LeverStep(name, number, label, False, reason, before.method, before.k, before.batch, tree_before,
                          before.alpha_position_1, before.alpha_position_1, before.usd_per_mtok, before.usd_per_mtok,
                          0.0, 0.0, float(max(saving, 0.0)) if math.isfinite(saving) else 0.0, float(payback), be,
                          note, src, bill, bill, float(npv), p_pay), False, after_bill)
    return (LeverStep(name, number, label, True, reason, new.method, after.k, after.batch, new.tree,
                      before.alpha_position_1, after.alpha_position_1, before.usd_per_mtok, after.usd_per_mtok, low,
                      high, float(saving), float(payback), be, note, src, bill, after_bill, float(npv), p_pay),
            True, after_bill)


def _skip(lever, why, cur: Candidate, pt: OperatingPoint, src: str, bill: float = math.nan) -> LeverStep:
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
        bill,
        bill,
    )


def levers(req: PlanRequest, catalog: Catalog, start: str, order: Sequence[str] | None = None, *,
           adopt: str | None = None, today: OperatingPoint | None = None) -> list[LeverStep]:
    """The waterfall for a request from a chosen starting method (NO_SPEC: no speculation today; the Levers page);
    adopt and today: lever_waterfall's (the Plan's recommendation and reference)."""
    ctx = make_context(req, catalog)
    for field, name in (("levers_start", start), ("levers_adopt", adopt)):
        if name not in (None, NO_SPEC):
            ok, why = availability(ctx.model, catalog.methods[name])
            if not ok:
                raise PlanError(field, name, why)
    return lever_waterfall(ctx, start, order, adopt=adopt, today=today)


def plan_start(reference: OperatingPoint | None, recommendation, current_method: str) -> tuple[str, str | None]:
    """(the method the Plan's waterfall starts from, the method its step 0 adopts): today's method (the Plan's
    reference's) and the Plan's recommended method (None when the Plan stays: step 0 then adopts EAGLE-3)."""
    start = reference.method if reference is not None else current_method
    adopt = recommendation.method if recommendation is not None and recommendation.method != start else None
    return start, adopt


def order_by_return(steps: Sequence[LeverStep]) -> list[str]:
    """Lever names sorted by CPM cut per one-time dollar (free levers first, then the best ratio); step 0 (adopting a
    draft) is not a lever: the waterfall always starts with it."""

    def key(st: LeverStep):
        cut = st.usd_per_mtok_before - st.usd_per_mtok_after
        if not st.applied or cut <= 0:
            return (2, 0.0, st.number)
        if st.one_time_usd_high <= 0:
            return (0, -cut, st.number)
        return (1, -cut / st.one_time_usd_high, st.number)

    return [st.lever for st in sorted(steps, key=key) if st.number > 0]  # step 0 (adopt a draft) stays first


# ---------------------------------------------------------------------------------------------------
# Assumptions
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WaterfallSummary:
    """A waterfall from end to end: CPM at full load at the start and after the last applied step, the fleet's bill
    there, the applied steps' one-time cost (high end), the monthly saving (from the bills; from the CPMs at the
    request's volume where no bill was sized), and the applied set's payback and NPV over the horizon."""

    start_usd_per_mtok: float
    end_usd_per_mtok: float
    one_time_usd_high: float
    monthly_saving_usd: float
    start_bill_usd_per_month: float = math.nan
    end_bill_usd_per_month: float = math.nan
    payback_months: float = math.inf
    npv_usd: float = math.nan


def summarize(steps: Sequence[LeverStep], monthly_output_tokens: float, *, horizon_months: int = 36,
              annual_discount_rate: float = 0.10) -> WaterfallSummary:
    start, end = steps[0].usd_per_mtok_before, steps[-1].usd_per_mtok_after
    b0, b1 = steps[0].bill_usd_per_month_before, steps[-1].bill_usd_per_month_after
    one = sum(s.one_time_usd_high for s in steps if s.applied)
    billed = math.isfinite(b0) and math.isfinite(b1)
    saving = (b0 - b1) if billed else (start - end) * monthly_output_tokens / TOKENS_PER_MTOK
    payback = one / saving if saving > 0 else (0.0 if one == 0 and saving == 0 else math.inf)
    npv = saving * annuity_factor(horizon_months, annual_discount_rate) - one
    return WaterfallSummary(start_usd_per_mtok=start, end_usd_per_mtok=end, one_time_usd_high=one,
                            monthly_saving_usd=saving, start_bill_usd_per_month=b0, end_bill_usd_per_month=b1,
                            payback_months=payback, npv_usd=npv)


def plan_levers(ctx: Context, *, reference: OperatingPoint | None = None, recommendation=None
                ) -> tuple[LeverStep, ...]:
    """The plan's waterfall from the request's levers_start ("auto": the Plan's today, its reference, in its own
    context; step 0 then adopts the Plan's recommendation, or EAGLE-3 when the Plan stays, if it pays); none when
    levers_start is None or that method cannot run here."""
    start, cat = ctx.req.levers_start, ctx.catalog
    if start is None:
        return ()
    adopt = None
    if start == "auto":
        start, adopt = plan_start(reference, recommendation, ctx.req.current_method)
    if start == NO_SPEC or (start in cat.methods and availability(ctx.model, cat.methods[start])[0]):
        return tuple(lever_waterfall(ctx, start, adopt=adopt, today=reference))
    return ()
