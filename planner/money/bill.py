"""The bill: what a month of the customer's traffic costs on one configuration's fleet (planner.fleet), the money
number every saving, payback and NPV of a plan comes from.

Billing: "autoscaled" pays each hour's replicas (GPU-hours = sum over hours of replicas x TP, a month of days);
"fixed" pays the peak hour's replicas all month (peak GPUs x 24 h x days). A replica is TP GPUs and at least one
runs every hour. Effective CPM = bill / output tokens (the full-load CPM is one replica kept at its best batch).
"""

from __future__ import annotations

import dataclasses
import math

from planner.answer import Bill, OperatingPoint, PlanFleet
from planner.fleet import Fleet, FleetPlan
from planner.physics.serving import TOKENS_PER_MTOK
from planner.request import BILLINGS, NO_SPEC, PlanError, PlanRequest
from planner.types import Catalog

__all__ = ["BILLINGS", "Bill", "bill_of", "bills", "fleet_bill", "point_bill", "point_fleet", "headline_fleet",
           "band_bills"]


def bill_of(config: FleetPlan, *, billing: str, monthly_output_tokens: float, gpus_per_replica: int,
            usd_per_gpu_hour: float) -> Bill:
    """A fleet configuration's bill under `billing` ("autoscaled" or "fixed")."""
    if billing not in BILLINGS:
        raise PlanError("billing", billing, " or ".join(BILLINGS))
    fixed = billing == "fixed"
    usd = config.usd_per_month_fixed if fixed else config.usd_per_month_autoscaled
    hours = config.gpu_hours_per_month_fixed if fixed else config.gpu_hours_per_month_autoscaled
    if not config.feasible:
        usd = hours = math.inf
    eff = usd * TOKENS_PER_MTOK / monthly_output_tokens if monthly_output_tokens > 0 else math.nan
    w = [h.requests_per_s * h.output_tokens for h in config.hours]
    t = [h.tpot_ms for h in config.hours]
    live = [(wi, ti) for wi, ti in zip(w, t, strict=True) if wi > 0 and math.isfinite(ti)]
    tpot = sum(wi * ti for wi, ti in live) / sum(wi for wi, _ in live) if live else math.nan
    # TTFT is per request: the hours weighted by their arrivals
    first = [(h.requests_per_s, h.ttft_ms) for h in config.hours if h.requests_per_s > 0 and math.isfinite(h.ttft_ms)]
    ttft = sum(r * t for r, t in first) / sum(r for r, _ in first) if first else math.nan
    return Bill(config.method, config.label, config.k, billing, float(usd), float(hours), config.peak_gpus,
                gpus_per_replica, usd_per_gpu_hour, float(monthly_output_tokens), float(eff), config.feasible,
                float(tpot), float(ttft))


def bills(fleet: Fleet, *, billing: str, monthly_output_tokens: float) -> dict[str, Bill]:
    """Every configuration of a fleet, by method, under `billing`."""
    return {c.method: bill_of(c, billing=billing, monthly_output_tokens=monthly_output_tokens,
                              gpus_per_replica=fleet.tp, usd_per_gpu_hour=fleet.usd_per_gpu_hour)
            for c in fleet.configs}


def point_fleet(ctx, pt, *, cand=None) -> Fleet | None:
    """One operating point's fleet by hour on the plan's traffic, at the point's own TP (an alternative's may
    differ); None when the point is not feasible. cand: the candidate it came from (a lever's tree, draft cost),
    None: the method as the request deploys it."""
    from planner.money.sizing import plan_fleet

    ctx = point_context(ctx, pt)
    return plan_fleet(ctx, [pt], cands=None if cand is None else [cand])


def point_context(ctx, pt):
    """The context a point runs in: the plan's, at the point's own TP and attention (a reference at another TP, or on
    plain TP where the request runs data-parallel attention, has its own)."""
    from planner.context import make_context

    tp = pt.tp or ctx.tp
    dp = ctx.req.attention_dp if pt.attention_dp is None else pt.attention_dp
    if tp == ctx.tp and dp == ctx.req.attention_dp:
        return ctx
    return make_context(dataclasses.replace(ctx.req, tp=tp, attention_dp=dp), ctx.catalog, ctx.segs)


def point_bill(ctx, pt, *, billing: str, cand=None) -> Bill:
    """One operating point's bill on the plan's traffic, at the point's own TP (point_fleet)."""
    fleet = point_fleet(ctx, pt, cand=cand)
    if fleet is None:
        return Bill(pt.method, pt.label, pt.k, billing, math.inf, math.inf, 0, pt.tp or ctx.tp, ctx.price,
                    ctx.req.monthly_output_tokens, math.inf, False)
    return bills(fleet, billing=billing, monthly_output_tokens=ctx.req.monthly_output_tokens)[pt.method]


def headline_fleet(ctx, pt: OperatingPoint | None, fleet: Fleet | None, *, role: str
                   ) -> tuple[PlanFleet | None, Bill | None]:
    """(the fleet the headline shows for `pt`, its bill under the request's billing): from the plan's `fleet` (every
    configuration at the requested TP) when it holds `pt` at that TP, else sized at `pt`'s own TP (a reference at
    another TP); (None, None) without a point or a feasible fleet. role: "today" or "best"."""
    if pt is None:
        return None, None
    own = (fleet is not None and (pt.tp or ctx.tp) == fleet.tp and pt.attention_dp in (None, ctx.req.attention_dp)
           and any(c.method == pt.method for c in fleet.configs))
    f = fleet if own else point_fleet(ctx, pt)
    if f is None:
        return None, None
    cfg = f.config(pt.method)
    b = bill_of(cfg, billing=ctx.req.billing, monthly_output_tokens=ctx.req.monthly_output_tokens,
                gpus_per_replica=f.tp, usd_per_gpu_hour=f.usd_per_gpu_hour)
    return PlanFleet(
        role=role, method=pt.method, label=pt.label, tp=f.tp, k=pt.k, batch=pt.batch, billing=b.billing,
        peak_gpus=b.peak_gpus, gpu_hours_per_month=b.gpu_hours_per_month, usd_per_month=b.usd_per_month,
        gpu_hours_per_month_autoscaled=cfg.gpu_hours_per_month_autoscaled,
        gpu_hours_per_month_fixed=cfg.gpu_hours_per_month_fixed, usd_per_month_autoscaled=cfg.usd_per_month_autoscaled,
        usd_per_month_fixed=cfg.usd_per_month_fixed, usd_per_gpu_hour=f.usd_per_gpu_hour,
        effective_usd_per_mtok=b.effective_usd_per_mtok, tpot_ms=b.tpot_ms, feasible=b.feasible, hours=cfg.hours,
        hours_source=f.shape_source, ttft_ms=b.ttft_ms,
    ), b


def fleet_bill(req: PlanRequest, catalog: Catalog, *, method: str = NO_SPEC, k: int | None = None,
               billing: str | None = None) -> Bill:
    """The month's bill for `req`'s traffic (its volume spread over its hours, or its daily shape, or the default
    shape) on `method` (NO_SPEC: no speculation) at K=`k` (None: its K with the lowest full-load CPM), on the
    request's hardware, TP and price, under `billing` (None: the request's). Infeasible: usd_per_month inf."""
    from planner.context import BASELINE, make_context
    from planner.request import validate
    from planner.search.candidates import method_candidates
    from planner.search.points import one_point

    segs = validate(req, catalog)
    ctx = make_context(req, catalog, segs)
    if method == NO_SPEC:
        cand = BASELINE
    else:
        cands, missing = method_candidates(ctx, [method])
        if not cands:
            raise PlanError("method", method, f"a method that runs on {ctx.model.label} ({missing.get(method, '')})")
        cand = cands[0] if k is None else dataclasses.replace(cands[0], ks=(int(k),))
    return point_bill(ctx, one_point(ctx, cand), billing=billing or req.billing)


def band_bills(ctx, best, *, billing: str) -> tuple[Bill, ...]:
    """The best method's bills at the two ends of its alpha range (its K and acceptance length there): the band of
    the monthly saving."""
    if best is None or not best.band_k_tau:
        return ()
    from planner.money.sizing import plan_fleet

    ends = [dataclasses.replace(best, k=k, acceptance_length=tau) for k, tau in best.band_k_tau]
    fleet = plan_fleet(ctx, ends)
    if fleet is None:
        return ()
    return tuple(bill_of(c, billing=billing, monthly_output_tokens=ctx.req.monthly_output_tokens,
                         gpus_per_replica=fleet.tp, usd_per_gpu_hour=fleet.usd_per_gpu_hour) for c in fleet.configs)
