"""Spend as an input: "we spend $X a month on this fleet" -> the output-token volume that fleet serves under the
TPOT SLO, so the plan can answer for that spend.

The fleet is today's configuration (the current method at its best K, or no speculation) on the request's GPU type,
TP and weights, sized hour by hour by planner.money.sizing / planner.fleet for the request's daily shape (or a trace's
hours) and workload mix. Its monthly bill B(V) at volume V (autoscaled: GPUs per hour summed over the month; fixed:
the peak GPUs all month) never falls as V grows, so the volume a spend S buys is
    V* = the largest V with B(V) <= S (and peak GPUs <= the stated GPU count, when one is given),
found by bracketing and bisection on V. A trace's hours keep their shape and have their rates scaled.

Granularity: B steps up by whole replicas (TP GPUs) per hour, so S - B(V*) is less than one replica all month
(tp x 24 h x days x $/GPU-hour): the spend's remainder that buys no whole replica.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from planner.answer import OperatingPoint, SpendVolume
from planner.context import BASELINE, Context, make_context
from planner.fleet import DAYS_PER_MONTH, HOURS_PER_DAY, Fleet, FleetPlan, monthly_bill_usd
from planner.formatting import fmt_usd
from planner.money.bill import bill_of
from planner.money.kday import deploy_schedule, scheduled_fleet
from planner.money.sizing import plan_fleet
from planner.price import gpu_price
from planner.request import BILLINGS, NO_SPEC, PlanError, PlanRequest, validate
from planner.search.candidates import method_candidates
from planner.search.grid import search
from planner.search.points import points
from planner.types import Catalog

HOURS_PER_MONTH = HOURS_PER_DAY * DAYS_PER_MONTH  # 730.5
_REL_TOL = 1e-6  # bisection stops when the bracket on V is this narrow (relative)


@dataclass(frozen=True)
class FleetBill:
    """One configuration's fleet for a month and its bill under the chosen billing."""

    method: str
    label: str
    k: int
    usd_per_month: float
    peak_gpus: int
    billing: str
    fleet: FleetPlan


def fleet_bills(ctx: Context, pts: Sequence[OperatingPoint], *, billing: str) -> dict[str, FleetBill]:
    """{method: its fleet's monthly bill} for the feasible points, from the fleet functions
    (planner.money.sizing.plan_fleet: replicas by hour under the SLO, at least one replica every hour) priced by
    planner.money.bill.bill_of, the bill the plan's economics use. The one place spend and the hardware comparison get a
    bill."""
    if billing not in BILLINGS:
        raise PlanError("billing", billing, " or ".join(BILLINGS))
    fleet = plan_fleet(ctx, pts)
    if fleet is None:
        return {}
    out = _bills(ctx, fleet, billing)
    # the cheapest method (its bill at its one K, the CPM breaking ties: plan()'s rule) runs the K its deployment
    # gives at each hour's batch, as plan() bills its best method (planner.money.kday), so the hardware comparison and
    # the spend bill the same fleet as the plan
    spec = [p for p in pts if p.method != NO_SPEC and p.method in out]
    if spec:
        best = min(spec, key=lambda p: (out[p.method].usd_per_month, p.usd_per_mtok))
        scheduled = scheduled_fleet(ctx, fleet, best, deploy_schedule(ctx, best))
        if scheduled is not fleet:
            out[best.method] = _bills(ctx, scheduled, billing)[best.method]
    return out


def _bills(ctx: Context, fleet: Fleet, billing: str) -> dict[str, FleetBill]:
    out = {}
    for c in fleet.configs:
        if not c.feasible:
            continue
        b = bill_of(c, billing=billing, monthly_output_tokens=ctx.req.monthly_output_tokens, gpus_per_replica=fleet.tp,
                    usd_per_gpu_hour=fleet.usd_per_gpu_hour)
        out[c.method] = FleetBill(c.method, c.label, c.k, float(b.usd_per_month), int(b.peak_gpus), billing, c)
    return out


def spend_price(req: PlanRequest, catalog: Catalog) -> tuple[float, str]:
    """($/GPU-hour, where it comes from): the stated price; else, for a fixed fleet of a stated GPU count, the price
    the spend implies (spend / (GPUs x hours a month)); else the hardware's list midpoint (spend_price_listed)."""
    hw = catalog.hardware[req.hardware]
    price = gpu_price(hw, req.usd_per_gpu_hour)
    if price.entered:
        return price.usd_per_gpu_hour, "entered"
    if req.spend_gpus is not None and req.billing == "fixed":
        return (float(req.spend_usd_per_month) / (req.spend_gpus * HOURS_PER_MONTH),
                f"implied by the spend over {req.spend_gpus:,} GPUs all month")
    return price.usd_per_gpu_hour, f"{hw.label} list midpoint ({hw.price.source}, {hw.price.date})"


def spend_price_listed(req: PlanRequest, catalog: Catalog) -> bool:
    """Whether spend_price gives the hardware's list midpoint: no price entered, none implied by a fixed fleet."""
    return not gpu_price(catalog.hardware[req.hardware], req.usd_per_gpu_hour).entered and not (
        req.spend_gpus is not None and req.billing == "fixed")


def _today(ctx: Context) -> OperatingPoint:
    """Today's configuration at its best K and batch: the current method, or no speculation."""
    cur = ctx.req.current_method
    cands = [BASELINE] if cur == NO_SPEC else [BASELINE, *method_candidates(ctx, [cur])[0]]
    pts = points(ctx, cands, search(ctx, cands, ctx.mid_samples()))
    return pts[-1]


def _at_scale(req: PlanRequest, volume: float) -> PlanRequest:
    """The request at another monthly volume: a trace's hours keep their shape, their rates scaled."""
    if not req.hours or not (req.monthly_output_tokens > 0):
        return dataclasses.replace(req, monthly_output_tokens=volume)
    f = volume / req.monthly_output_tokens
    return dataclasses.replace(req, monthly_output_tokens=volume, hours=tuple(
        dataclasses.replace(h, requests_per_s=h.requests_per_s * f) for h in req.hours))


def hours_volume(req: PlanRequest) -> float:
    """The monthly output tokens a request's hours carry (a trace's own), as planner.fleet counts a month."""
    per_day = sum(h.requests_per_s * h.output_tokens for h in req.hours) * 3600.0 * HOURS_PER_DAY / len(req.hours)
    return per_day * DAYS_PER_MONTH


def volume_for_spend(req: PlanRequest, catalog: Catalog) -> SpendVolume:
    """The largest monthly output-token volume whose fleet (today's configuration, the request's GPU type, TP, weights,
    SLO, mix and daily shape or hours) costs at most req.spend_usd_per_month under req.billing, within
    req.spend_gpus GPUs at the peak when given (module docstring)."""
    if req.spend_usd_per_month is None:
        raise PlanError("spend_usd_per_month", None, "a monthly spend above $0 to derive the volume from")
    segs = validate(req, catalog)
    spend = float(req.spend_usd_per_month)
    price, price_source = spend_price(req, catalog)
    base = dataclasses.replace(req, usd_per_gpu_hour=price)
    if base.hours:  # the hours are the traffic: the volume they carry is the one to scale
        base = dataclasses.replace(base, monthly_output_tokens=hours_volume(base))
    ctx = make_context(base, catalog, segs)
    pt = _today(ctx)
    if not pt.feasible:
        raise PlanError("spend_usd_per_month", spend, f"a fleet that meets the SLO: {pt.label} on {req.tp} x "
                        f"{ctx.hw.label} {pt.reason} ({pt.way_out})")
    replica = float(monthly_bill_usd([req.tp], billing="fixed", usd_per_gpu_hour=price))  # one replica all month
    if spend < replica:
        raise PlanError("spend_usd_per_month", spend, f"at least one replica's month: {req.tp} x {ctx.hw.label} at "
                        f"${price:.2f}/GPU-hour cost {fmt_usd(replica)}/month (a service keeps one replica up)")
    if req.spend_gpus is not None and req.spend_gpus < req.tp:
        raise PlanError("spend_gpus", req.spend_gpus, f"at least one replica: {req.tp} GPUs (TP {req.tp})")

    def bill(volume: float) -> FleetBill | None:
        b = fleet_bills(make_context(_at_scale(base, volume), catalog, segs), [pt], billing=req.billing)
        return b.get(pt.method)

    def fits(b: FleetBill | None) -> bool:
        return b is not None and b.usd_per_month <= spend and (req.spend_gpus is None or b.peak_gpus <= req.spend_gpus)

    # bracket from the replica's own rate: the spend's replica-months at the point's tokens/s
    guess = max(spend / replica * pt.output_tokens_per_s * 3600.0 * HOURS_PER_MONTH, 1e6)
    lo, hi = 0.0, guess
    b_lo = bill(lo) if fits(bill(lo)) else None
    while fits(b := bill(hi)):
        lo, b_lo, hi = hi, b, hi * 4.0
        if hi > 1e19:
            raise PlanError("spend_usd_per_month", spend, "a spend whose fleet serves at most 1e19 tokens a month")
    while hi - lo > _REL_TOL * hi:
        mid = 0.5 * (lo + hi)
        b = bill(mid)
        if fits(b):
            lo, b_lo = mid, b
        else:
            hi = mid
    if b_lo is None:  # even an idle fleet (one replica every hour) is more than the spend or the GPU count
        raise PlanError("spend_gpus" if req.spend_gpus is not None else "spend_usd_per_month",
                        req.spend_gpus if req.spend_gpus is not None else spend,
                        "enough for one replica every hour of the month")
    over = bill(hi)
    binding = "gpus" if (over is not None and over.usd_per_month <= spend) else "spend"
    gpus_txt = f" (of the {req.spend_gpus:,} stated)" if req.spend_gpus is not None else ""
    how = (f"{req.tp} x {ctx.hw.label} replicas ({req.dtype}) at ${price:.2f}/GPU-hour ({price_source}), billed "
           f"{req.billing}, running {pt.label}{f' K={pt.k}' if pt.k else ''}, serve {lo / 1e9:,.3f}B output "
           f"tokens/month under the {req.tpot_slo_ms:g} ms TPOT SLO"
           + (f" and the {req.ttft_slo_ms:g} ms TTFT SLO" if req.ttft_slo_ms is not None else "")
           + f" with {b_lo.peak_gpus:,} GPUs at the peak{gpus_txt} for {fmt_usd(b_lo.usd_per_month)}/month; "
           + ("more would need more GPUs than stated" if binding == "gpus"
              else f"more would need another replica ({fmt_usd(replica)}/month for a whole month)"))
    return SpendVolume(spend_usd_per_month=spend, hardware=req.hardware, tp=req.tp, dtype=req.dtype,
                       gpus=req.spend_gpus, billing=req.billing, usd_per_gpu_hour=price, price_source=price_source,
                       method=pt.method, label=pt.label, k=pt.k, monthly_output_tokens=lo, peak_gpus=b_lo.peak_gpus,
                       bill_usd_per_month=b_lo.usd_per_month, replica_usd_per_month=replica, binding=binding, how=how,
                       price_listed=spend_price_listed(req, catalog),
                       volume_source=f"derived from a spend of {fmt_usd(spend)}/month: {how}")


def request_for_spend(req: PlanRequest, sv: SpendVolume) -> PlanRequest:
    """The request at the volume the spend buys: its price (a list midpoint stays unentered, so that it is labelled
    and drawn as a list price), volume and source; a trace's hours and concurrency cap scaled to it; the fleet sized
    (a flat day when no shape or hours are given, stated)."""
    scaled = _at_scale(dataclasses.replace(req, monthly_output_tokens=hours_volume(req)) if req.hours else req,
                       sv.monthly_output_tokens)
    cap = req.batch_cap
    if cap is not None and req.monthly_output_tokens > 0:
        cap = max(1.0, cap * sv.monthly_output_tokens / req.monthly_output_tokens)
    src = f"{req.hours_source}; rates scaled to the spend's volume" if req.hours else req.hours_source
    price = req.usd_per_gpu_hour if sv.price_listed else sv.usd_per_gpu_hour
    return dataclasses.replace(scaled, usd_per_gpu_hour=price, volume_source=sv.volume_source,
                               batch_cap=cap, daily_shape=req.daily_shape or (None if req.hours else "flat"),
                               hours_source=src)
