"""The probability that one change of configuration (a lever step: its before and after candidates) pays back its
one-time cost within the horizon, under the same seeded uncertainty as the plan's Monte Carlo
(planner.uncertainty.sensitivity.seeded_samples: acceptance, step-time efficiencies, speculation overheads; the price
only when the request asks for the list range; the speedup error of the plan's engine and target class:
planner.physics.engines). Each draw's full-load CPM comes from the one search (planner.search.grid) and its
fleet bill from the plan's fleet scaled by that draw's throughput (planner.uncertainty.sensitivity.bill_draws).
"""

from __future__ import annotations

import numpy as np

from planner.context import Candidate, Context
from planner.money.sizing import plan_fleet
from planner.physics.engines import with_speedup_error
from planner.search.grid import blended_cpm, search
from planner.uncertainty.sensitivity import PLAN_MC_SAMPLES, PLAN_MC_SEED, bill_draws, seeded_samples


def p_payback_within_horizon(ctx: Context, *, before: Candidate, after: Candidate, before_pt, after_pt,
                             one_time_usd: float, samples: int = PLAN_MC_SAMPLES, seed: int = PLAN_MC_SEED) -> float:
    """P(the monthly bill saving of `after` over `before` pays back one_time_usd within ctx.costs.horizon_months),
    over `samples` seeded draws (draw 0, the plan's middle, sizes both fleets and is not counted)."""
    smp, _ = seeded_samples(ctx, np.random.default_rng(seed), int(samples))
    cands = [before, after]
    cpm = with_speedup_error(ctx, cands, blended_cpm(ctx, cands, search(ctx, cands, smp))[0])
    cfgs = []
    for pt, cand in ((before_pt, before), (after_pt, after)):
        fleet = plan_fleet(ctx, [pt], cands=[cand]) if pt.feasible else None
        cfgs.append(fleet.config(pt.method) if fleet is not None else None)
    ref, new = bill_draws(cfgs, gpus_per_replica=ctx.tp, billing=ctx.req.billing, cpm=cpm,
                          price=np.asarray(smp.usd_per_gpu_hour, float))
    with np.errstate(invalid="ignore"):
        saving = np.nan_to_num(ref - new, nan=0.0, posinf=0.0, neginf=0.0)
    horizon = ctx.costs.horizon_months
    pays = (saving > 0) & (one_time_usd <= saving * horizon)
    return float(np.mean(pays))
