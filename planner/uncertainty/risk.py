"""How sure the plan's switch is, over the seeded Monte Carlo draws (planner.uncertainty.sensitivity.seeded_samples):
P(saving > 0), P(payback within the horizon), the saving's 5th and 95th percentiles and the risk-weighted NPV (each
draw's saving discounted over the horizon minus its one-time cost, averaged over the draws). Each draw's fleet bill
comes from the plan's fleet scaled by that draw's throughput (planner.uncertainty.sensitivity.bill_draws), so the
replica count moves with the draws. Today's configuration may run in another context than the request's (another TP, or
plain TP where the request runs data-parallel attention: planner.decision.verdict); it is then drawn in its own context
from the same samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.acceptance.tiers import one_time_usd
from planner.context import BASELINE, Candidate, make_context
from planner.money.bill import point_context
from planner.money.economics import annuity_factor
from planner.money.sizing import plan_fleet
from planner.physics.engines import with_speedup_error
from planner.request import NO_SPEC, PlanRequest, default_costs
from planner.search.grid import blended_cpm, search
from planner.search.points import points
from planner.types import Catalog
from planner.uncertainty.sensitivity import PLAN_MC_SAMPLES, PLAN_MC_SEED, bill_draws, monte_carlo, seeded_samples


@dataclass(frozen=True)
class SwitchRisk:
    """The switch from today to the best method over the draws (draw 0, the plan's middle, sizes the fleets and is
    not counted)."""

    p_saving_positive: float
    p_payback_within_horizon: float
    risk_weighted_npv_usd: float
    saving_p05_usd: float
    saving_p95_usd: float
    saving_usd: np.ndarray  # per draw


def switch_risk(req: PlanRequest, catalog: Catalog, *, reference, best, samples: int = PLAN_MC_SAMPLES,
                seed: int = PLAN_MC_SEED) -> SwitchRisk | None:
    """The risk of switching from `reference` (today) to `best`; None where there is no switch. Today at the
    request's TP and attention, and the request's current method: the Sensitivity page's Monte Carlo
    (planner.uncertainty.sensitivity.monte_carlo), so both show the same numbers; today elsewhere: `_elsewhere`."""
    if reference is None or best is None or reference.method == best.method:
        return None
    k = max(int(best.k), 1)
    same = ((not reference.tp or reference.tp == req.tp) and reference.attention_dp in (None, req.attention_dp)
            and reference.method == req.current_method)
    if same:
        mc = monte_carlo(req, catalog, best.method, k=k, samples=samples, seed=seed)
        saving, one, horizon = mc.monthly_saving_usd, mc.one_time_usd, mc.horizon_months
    else:
        saving, one, horizon = _elsewhere(req, catalog, reference, best.method, k, samples, seed)
    a = annuity_factor(horizon, (req.costs or default_costs(catalog)).annual_discount_rate)
    with np.errstate(divide="ignore", invalid="ignore"):
        payback = np.where(saving > 0, one / np.where(saving > 0, saving, 1.0), np.inf)
    return SwitchRisk(
        p_saving_positive=_share(saving > 0, unmeasured=req.attention_dp),
        p_payback_within_horizon=_share(payback <= horizon, unmeasured=req.attention_dp),
        risk_weighted_npv_usd=float(np.mean(saving * a - one)),
        saving_p05_usd=float(np.percentile(saving, 5)),
        saving_p95_usd=float(np.percentile(saving, 95)),
        saving_usd=saving,
    )


def _share(hits: np.ndarray, *, unmeasured: bool) -> float:
    """The share of draws where `hits` holds. For a deployment without an end-to-end measurement (data-parallel
    attention: planner.physics.engines.UNMEASURED_DP_SOURCE) the draws cannot cover an error outside the band assumed
    for it, so the share is Laplace's rule of succession, (hits + 1) / (draws + 2): never 0 % or 100 %."""
    if unmeasured:
        return float((np.sum(hits) + 1) / (hits.size + 2))
    return float(np.mean(hits))


def _elsewhere(req: PlanRequest, catalog: Catalog, reference, method: str, k: int, samples: int, seed: int
               ) -> tuple[np.ndarray, np.ndarray, int]:
    """(saving per draw, one-time cost per draw, horizon): the method at K in the request's context, today in its own
    (planner.money.bill.point_context), both drawn from the same seeded samples, each fleet at its own GPUs per
    replica."""
    ctx = make_context(req, catalog)
    gen = np.random.default_rng(seed)
    n = int(samples)
    smp, _ = seeded_samples(ctx, gen, n)
    price = np.asarray(smp.usd_per_gpu_hour, float)
    bills = []
    for c, cand in ((point_context(ctx, reference), _today(catalog, reference, req)),
                    (ctx, Candidate(method, (k,), tuned=req.tuned))):
        cpm = with_speedup_error(c, [cand], blended_cpm(c, [cand], sr := search(c, [cand], smp))[0])
        pt = points(c, [cand], sr, n=0)[0]
        fleet = plan_fleet(c, [pt], cands=[cand]) if pt.feasible else None
        cfg = fleet.config(cand.method) if fleet is not None else None
        bills.append(bill_draws([cfg], gpus_per_replica=c.tp, billing=req.billing, cpm=cpm, price=price)[0])
    lo, hi = one_time_usd(ctx, catalog.methods[method])
    one = gen.uniform(lo, hi, n) if hi > lo else np.full(n, lo)
    with np.errstate(invalid="ignore"):
        saving = np.nan_to_num(bills[0] - bills[1], nan=0.0, posinf=0.0, neginf=0.0)
    return saving, one, ctx.costs.horizon_months


def _today(catalog: Catalog, reference, req: PlanRequest) -> Candidate:
    if reference.method == NO_SPEC:
        return BASELINE
    return Candidate(reference.method, tuple(range(1, catalog.methods[reference.method].max_k + 1)), tuned=req.tuned)
