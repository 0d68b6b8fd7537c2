"""The bill: what a month of the customer's traffic costs on one configuration's fleet (planner.fleet), the money
number every saving, payback and NPV of a plan comes from.

Billing: "autoscaled" pays each hour's replicas (GPU-hours = sum over hours of replicas x TP, a month of days);
"fixed" pays the peak hour's replicas all month (peak GPUs x 24 h x days). A replica is TP GPUs and at least one
runs every hour. Effective CPM = bill / output tokens (the full-load CPM is one replica kept at its best batch).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from planner.fleet import FleetPlan
from planner.request import BILLINGS, NO_SPEC, PlanError, PlanRequest

__all__ = ["BILLINGS", "Bill", "bill_of", "fleet_bill"]
TOKENS_PER_MTOK = 1e6


@dataclass(frozen=True)
class Bill:
    """One configuration's month on its fleet under one billing."""

    method: str
    label: str
    k: int
    billing: str  # "autoscaled" or "fixed"
    usd_per_month: float  # the bill (inf when the configuration cannot serve the traffic under the SLO)
    gpu_hours_per_month: float
    peak_gpus: int
    gpus_per_replica: int
    usd_per_gpu_hour: float
    monthly_output_tokens: float
    effective_usd_per_mtok: float  # bill / output tokens (nan without a volume)
    feasible: bool


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
    eff = usd / (monthly_output_tokens / TOKENS_PER_MTOK) if monthly_output_tokens > 0 else math.nan
    return Bill(config.method, config.label, config.k, billing, float(usd), float(hours), config.peak_gpus,
                gpus_per_replica, usd_per_gpu_hour, float(monthly_output_tokens), float(eff), config.feasible)


def fleet_bill(req: PlanRequest, catalog, *, method: str = NO_SPEC, k: int | None = None,
               billing: str | None = None) -> Bill:
    """The month's bill for `req`'s traffic (its volume spread over its hours, or its daily shape, or the default
    shape) on `method` (NO_SPEC: no speculation) at K=`k` (None: its K with the lowest full-load CPM), on the
    request's hardware, TP and price, under `billing` (None: the request's). Infeasible: usd_per_month inf."""
    from planner.candidates import method_candidates
    from planner.context import BASELINE, make_context
    from planner.points import one_point
    from planner.request import validate
    from planner.sizing import plan_fleet

    segs = validate(req, catalog)
    ctx = make_context(req, catalog, segs)
    if method == NO_SPEC:
        cand = BASELINE
    else:
        cands, missing = method_candidates(ctx, [method])
        if not cands:
            raise PlanError("method", method, f"a method that runs on {ctx.model.label} ({missing.get(method, '')})")
        cand = cands[0] if k is None else dataclasses.replace(cands[0], ks=(int(k),))
    pt = one_point(ctx, cand)
    fleet = plan_fleet(ctx, [pt])
    how = billing or req.billing
    if fleet is None:
        return Bill(pt.method, pt.label, pt.k, how, math.inf, math.inf, 0, ctx.tp, ctx.price,
                    req.monthly_output_tokens, math.inf, False)
    return bill_of(fleet.configs[0], billing=how, monthly_output_tokens=req.monthly_output_tokens,
                   gpus_per_replica=ctx.tp, usd_per_gpu_hour=ctx.price)
