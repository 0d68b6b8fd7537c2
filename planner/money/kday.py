"""K per hour's batch, as the engine runs it: the deployment's K per batch size (vLLM's
num_speculative_tokens_per_batch_size, planner.physics.deploy.k_schedule) priced hour by hour on the fleet.

One function produces the schedule (`deploy_schedule`); the deploy command (planner.plan.deployment) prints it and
the fleet (`scheduled_fleet`) bills it. Each hour runs the K the schedule gives at that hour's batch per replica
(sequences in flight, rounded up): the hour's fixed point is looked for at that K, and the K read again at the new
batch, until the two agree (where they cycle, the costlier hour stands). An hour at K = 0 drafts nothing and costs
like no speculation plus the engine's switch overhead (planner.physics.engines.SwitchingOverhead: the engine's own
per-batch speculation switch left on, vLLM issue 49548's figures; an assumption on the other engines), the TPOT without
speculation raised by that fraction at each batch. A schedule with one K is a static deployment: no switch, no
overhead, every hour at that K.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from planner.answer import OperatingPoint
from planner.context import Candidate, Context
from planner.fleet import Fleet, FleetHour, FleetPlan, gpu_hours_per_month
from planner.physics.deploy import k_schedule
from planner.physics.engines import SwitchingOverhead
from planner.request import NO_SPEC
from planner.search.candidates import candidate_taus

Schedule = tuple[tuple[int, int, int], ...]  # (first batch, last batch, K), inclusive, from batch 1


def deploy_schedule(ctx: Context, pt: OperatingPoint) -> Schedule | None:
    """The K per batch size the deployment of `pt` carries (planner.search.batch_sweeps.k_by_batch's points below
    the operating batch, planner.physics.deploy.k_schedule's ranges); None for a token tree or an operating batch of 1
    (one K)."""
    from planner.search.batch_sweeps import k_by_batch

    req, cat = ctx.req, ctx.catalog
    if pt.method == NO_SPEC or (req.tree_shape is not None and cat.methods[pt.method].tree):
        return None
    if not pt.batch or pt.batch <= 1:
        return None
    pts = k_by_batch(req, cat, pt.method, operating_batch=int(pt.batch), operating_k=int(pt.k))
    return tuple(k_schedule(pts, max_batch=int(pt.batch)))


def k_at_batch(schedule: Sequence[tuple[int, int, int]], batch: float) -> int:
    """The K `schedule` runs at `batch` sequences in flight (rounded up, at least 1; past the last range its K)."""
    b = max(1, math.ceil(batch - 1e-9))
    for lo, hi, k in schedule:
        if lo <= b <= hi:
            return int(k)
    return int(schedule[-1][2]) if b > schedule[-1][1] else int(schedule[0][2])


def switching_overhead(ctx: Context, measured: SwitchingOverhead | None = None) -> SwitchingOverhead | None:
    """The request's engine's switch overhead: `measured` (a calibration's, where one measured TPOT with the switch on
    and zero drafts; the calibration records carry no such field yet, so the plan passes None) else the catalogue's
    stated one (profiles/data/engine_switching.yaml); None where neither states one."""
    if measured is not None:
        return measured
    return ctx.catalog.speculation_switching.get(ctx.req.engine)


def scheduled_fleet(ctx: Context, fleet: Fleet, pt: OperatingPoint, schedule: Schedule | None, *,
                    measured: SwitchingOverhead | None = None, decode_only: bool = False) -> Fleet:
    """`fleet` with `pt`'s configuration billed hour by hour at the K `schedule` gives at each hour's batch (the
    module docstring); unchanged without a schedule of more than one K or without `pt` in it. decode_only: `fleet` is
    a disaggregated fleet's decode pool (planner.money.sizing.plan_fleet's decode_only), sized again the same way."""
    ks = sorted({int(k) for _, _, k in schedule or ()})
    if len(ks) < 2 or not any(c.method == pt.method for c in fleet.configs):
        return fleet
    if all(not h.feasible or k_at_batch(schedule, h.batch) == pt.k for h in fleet.config(pt.method).hours):
        return fleet  # every hour's batch already runs the plan's K: its hours stand
    from planner.money.sizing import plan_fleet

    over = switching_overhead(ctx, measured)
    taus = {**_taus(ctx, pt, [k for k in ks if k > 0 and k != pt.k]), int(pt.k): pt.acceptance_length}
    pts = [dataclasses.replace(pt, method=NO_SPEC, k=0, acceptance_length=1.0) if k == 0 else
           dataclasses.replace(pt, k=k, acceptance_length=taus[k]) for k in ks]
    cands = [Candidate(NO_SPEC if k == 0 else pt.method, (max(k, 1),)) for k in ks]  # as plan_fleet's own
    added = [over.fraction if (k == 0 and over is not None) else None for k in ks]
    at_k = plan_fleet(ctx, pts, cands, added_tpot=added, decode_only=decode_only)
    if at_k is None or len(at_k.configs) != len(ks):
        return fleet  # a K of the schedule cannot be sized here: the plan's one K stands
    by_k = dict(zip(ks, at_k.configs, strict=True))
    hours = tuple(_hour(by_k, schedule, h, int(pt.k) if int(pt.k) in by_k else ks[-1])
                  for h in range(len(at_k.configs[0].hours)))
    cfg = _config(fleet.config(pt.method), hours, fleet.usd_per_gpu_hour)
    return dataclasses.replace(fleet, configs=tuple(cfg if c.method == pt.method else c for c in fleet.configs))


def _taus(ctx: Context, pt: OperatingPoint, ks: list[int]) -> dict[int, float]:
    """The mix's acceptance length (output-token share-weighted over the segments) at each K, as planner.search.points
    weighs it."""
    import numpy as np

    if not ks:
        return {}
    tau, _, _ = candidate_taus(ctx, [Candidate(pt.method, tuple(ks), tuned=ctx.req.tuned)], ctx.mid_samples(),
                               np.asarray(ks, float))
    return {k: float(np.dot(ctx.share, tau[0, 0, i])) for i, k in enumerate(ks)}


def _hour(by_k: dict[int, FleetPlan], schedule: Schedule, h: int, k0: int) -> FleetHour:
    """Hour h at the K the schedule gives at its batch at that K (from the plan's K; a cycle: its costliest hour)."""
    seen: list[int] = []
    k = k0
    while k not in seen:
        seen.append(k)
        hour = by_k[k].hours[h]
        k = k_at_batch(schedule, hour.batch) if hour.feasible else k
    if k != seen[-1]:  # the K's cycle: the hour runs the costliest of them
        k = max(seen[seen.index(k):], key=lambda kk: (by_k[kk].hours[h].gpus, kk))
    return dataclasses.replace(by_k[k].hours[h], k=k)


def _config(cfg: FleetPlan, hours: tuple[FleetHour, ...], usd_per_gpu_hour: float) -> FleetPlan:
    gpus = [h.gpus for h in hours]
    auto = float(gpu_hours_per_month(gpus, billing="autoscaled"))
    fixed = float(gpu_hours_per_month(gpus, billing="fixed"))
    return dataclasses.replace(cfg, hours=hours, peak_gpus=int(max(gpus)), gpu_hours_per_month_autoscaled=auto,
                               gpu_hours_per_month_fixed=fixed, usd_per_month_autoscaled=auto * usd_per_gpu_hour,
                               usd_per_month_fixed=fixed * usd_per_gpu_hour, feasible=all(h.feasible for h in hours))
