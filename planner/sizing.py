"""The fleet a plan needs by hour: its feasible configurations' TPOT over every batch up to the busiest hour's
need, handed to planner.fleet (replicas per hour, GPUs, the month's bills)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from planner.answer import OperatingPoint
from planner.context import Candidate, Context, r5
from planner.drafting import drafts as draft_arrays
from planner.fleet import Fleet, fleet_for_configs, hours_from_volume
from planner.request import MAX_BATCH, NO_SPEC
from planner.search import engine_args, evaluation_grid, max_batch
from planner.serving import evaluate_arrays, prefill_time_s


def traffic_hours(ctx: Context) -> tuple[tuple, str]:
    """(the day's HourLoads, where they come from): a trace's own hours, or a daily shape on the monthly volume."""
    req = ctx.req
    if req.hours:
        return tuple(req.hours), req.hours_source or "traffic trace"
    shape = req.daily_shape or "flat"
    # requests: output-token shares / mean output per segment -> request-weighted mean prompt
    req_w = np.array([s.share / s.output_tokens for s in ctx.segs])
    mean_prompt = float(np.dot(req_w / req_w.sum(), [s.prompt_tokens for s in ctx.segs]))
    mean_out = float(1.0 / req_w.sum())
    hours = hours_from_volume(req.monthly_output_tokens, mean_prompt, mean_out, shape)
    return hours, f"'{shape}' daily shape applied to {req.monthly_output_tokens / 1e9:,.2f}B output tokens/month"


def plan_fleet(ctx: Context, points: Sequence[OperatingPoint]) -> Fleet | None:
    """The fleet by hour for no speculation and every feasible method at the plan's K (None: none is feasible)."""
    req = ctx.req
    hours, source = traffic_hours(ctx)
    cfgs = [p for p in points if p.available and p.feasible]
    if not cfgs:
        return None
    cat = ctx.catalog
    cands = [Candidate(p.method, (max(p.k, 1),), tree=req.tree_shape is not None and p.method != NO_SPEC
                       and cat.methods[p.method].tree, tree_shape=req.tree_shape if p.method != NO_SPEC
                       and cat.methods[p.method].tree else None) for p in cfgs]
    # hours of a daily shape share their mean lengths: the TPOT curves once per distinct (prompt, output) pair
    lengths, inv = np.unique([[h.prompt_tokens, h.output_tokens] for h in hours], axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    grid = evaluation_grid(
        k=r5([max(p.k, 1) for p in cfgs], 1), tau=r5([p.acceptance_length for p in cfgs], 1),
        verify_tokens=r5([c.tree_shape.verify_tokens_per_seq if c.tree_shape is not None else max(p.k, 1) + 1
                          for c, p in zip(cands, cfgs, strict=True)], 1),
        prompt_tokens=lengths[:, 0].tolist(), output_tokens=lengths[:, 1].tolist())
    smp = ctx.mid_samples()
    drafts = draft_arrays(ctx, cands)
    mb = np.minimum(max_batch(ctx, cands, grid, drafts)[0, :, 0, :, 0], MAX_BATCH)[:, inv]  # (C, H); as the search
    # Batches beyond Little's bound lambda * O * SLO never decide the fleet (planner.fleet.replicas_for): a light
    # load needs the TPOT curve only up to its few sequences in flight.
    in_flight = max(h.requests_per_s * h.output_tokens for h in hours) * req.tpot_slo_ms / 1e3
    bmax = int(min(MAX_BATCH, max(1.0, float(mb.max())), math.ceil(in_flight) + 1))
    res = evaluate_arrays(batch=r5(np.arange(1, bmax + 1, dtype=float), 4),
                          **engine_args(ctx, cands, smp, grid, drafts))
    is_base = r5([c.method == NO_SPEC for c in cands], 1).astype(bool)
    tpot = np.broadcast_to(np.where(is_base, res.baseline_tpot_s, res.tpot_s),
                           (1, len(cands), 1, len(lengths), bmax))[0, :, 0][:, inv]
    pre_s = np.broadcast_to(prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=lengths[:, 0], tp=ctx.tp),
                            (len(lengths),))[inv]
    return fleet_for_configs(configs=[(p.method, p.label, p.k) for p in cfgs], tpot_s=tpot, max_batch=mb,
                             prefill_s=np.asarray(pre_s, float), hours=hours, tp=ctx.tp, usd_per_gpu_hour=ctx.price,
                             slo_ms=req.tpot_slo_ms, shape_source=source)
