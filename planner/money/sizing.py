"""The fleet a plan needs by hour: its feasible configurations' TPOT over every batch up to the busiest hour's
need, handed to planner.fleet (replicas per hour, GPUs, the month's bills)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from planner.answer import OperatingPoint
from planner.context import Candidate, Context, r5
from planner.fleet import Fleet, fleet_for_configs, hours_from_volume
from planner.physics.replica import full_load_requests_per_s, replica_load
from planner.physics.serving import evaluate_arrays, prefill_time_s
from planner.physics.ttft import TtftInputs, ttft
from planner.request import MAX_BATCH, NO_SPEC, slo_quantile
from planner.search.candidates import candidate_taus, config_tpot_factor
from planner.search.drafting import drafts as draft_arrays
from planner.search.grid import engine_args, evaluation_grid, max_batch

# The daily shape when a request gives neither one nor a trace's hours: the same rate every hour (planner assumption,
# 2026-12-02; the app's default shape too). A stated shape or a trace's own hours replace it.
DEFAULT_SHAPE = "flat"


def traffic_hours(ctx: Context) -> tuple[tuple, str]:
    """(the day's HourLoads, where they come from): a trace's own hours, or a daily shape on the monthly volume."""
    req = ctx.req
    if req.hours:
        return tuple(req.hours), req.hours_source or "traffic trace"
    shape = req.daily_shape or DEFAULT_SHAPE
    # requests: output-token shares / mean output per segment -> request-weighted mean prompt
    req_w = np.array([s.share / s.output_tokens for s in ctx.segs])
    mean_prompt = float(np.dot(req_w / req_w.sum(), [s.prompt_tokens for s in ctx.segs]))
    mean_out = float(1.0 / req_w.sum())
    hours = hours_from_volume(req.monthly_output_tokens, mean_prompt, mean_out, shape)
    how = "" if req.daily_shape else " (no daily shape given: the default)"
    return hours, (f"'{shape}' daily shape{how} applied to {req.monthly_output_tokens / 1e9:,.2f}B output "
                   "tokens/month")


def plan_fleet(ctx: Context, points: Sequence[OperatingPoint], cands: Sequence[Candidate] | None = None,
               added_tpot: Sequence[Callable[[np.ndarray], np.ndarray] | None] | None = None, *,
               decode_only: bool = False) -> Fleet | None:
    """The fleet by hour for no speculation and every feasible method at the plan's K (None: none is feasible).
    cands: the candidate each point came from (a lever's tree, draft cost or acceptance shift), one per point; None:
    each method as the request deploys it. added_tpot: per point, None or the fraction of TPOT added at a batch
    (an engine's speculation switch left on where it drafts nothing: planner.money.kday). decode_only: replicas that
    only decode (a disaggregated fleet's decode pool, planner.money.disagg): no prefill shares their time and their
    TTFT is the prefill pool's."""
    req = ctx.req
    hours, source = traffic_hours(ctx)
    keep = [i for i, p in enumerate(points) if p.available and p.feasible]
    cfgs = [points[i] for i in keep]
    added = [None if added_tpot is None else added_tpot[i] for i in keep]
    if not cfgs:
        return None
    cat = ctx.catalog
    if cands is None:
        cands = [Candidate(p.method, (max(p.k, 1),), tree=req.tree_shape is not None and p.method != NO_SPEC
                           and cat.methods[p.method].tree, tree_shape=req.tree_shape if p.method != NO_SPEC
                           and cat.methods[p.method].tree else None) for p in cfgs]
    else:
        cands = [dataclasses.replace(cands[i], ks=(max(points[i].k, 1),)) for i in keep]
    # the step model depends on an hour's lengths only: evaluate each distinct (prompt, output) pair once
    lengths = np.array([(h.prompt_tokens, h.output_tokens) for h in hours], float)
    uniq, of_hour = np.unique(lengths, axis=0, return_inverse=True)
    of_hour = np.asarray(of_hour).reshape(-1)
    grid = evaluation_grid(
        k=r5([max(p.k, 1) for p in cfgs], 1), tau=r5([p.acceptance_length for p in cfgs], 1),
        verify_tokens=r5(_verify_tokens(ctx, cands, cfgs), 1),
        prompt_tokens=uniq[:, 0], output_tokens=uniq[:, 1])
    smp = ctx.mid_samples()
    drafts = draft_arrays(ctx, cands)
    mb = np.minimum(max_batch(ctx, cands, grid, drafts)[0, :, 0, :, 0], MAX_BATCH)  # (C, U): the search's bound too
    # the TPOT at the SLO's percentile over the mean, per configuration and distinct lengths (1: a mean SLO)
    q = slo_quantile(req.tpot_percentile)
    tail = None if q is None else np.stack([config_tpot_factor(ctx, c, p.k, uniq[:, 1], q)
                                            for c, p in zip(cands, cfgs, strict=True)])
    slo_s = req.tpot_slo_ms / 1e3 if tail is None else req.tpot_slo_ms / 1e3 / tail  # on the mean TPOT seen
    # Batches beyond Little's bound lambda * O * SLO never decide the fleet (planner.fleet.replicas_for): a light
    # load needs the TPOT curve only up to its few sequences in flight (at the SLO itself, as planner.fleet checks it,
    # or above it where a percentile below the mean, a p50, loosens it).
    in_flight = max(h.requests_per_s * h.output_tokens for h in hours) * max(req.tpot_slo_ms / 1e3,
                                                                            float(np.max(slo_s)))
    bmax = int(min(MAX_BATCH, max(1.0, float(mb.max())), math.ceil(in_flight) + 1))
    eng = engine_args(ctx, cands, smp, grid, drafts)
    res = evaluate_arrays(batch=r5(np.arange(1, bmax + 1, dtype=float), 4), with_memory=False, **eng)  # mb: above
    is_base = r5([c.method == NO_SPEC for c in cands], 1).astype(bool)
    tpot = np.broadcast_to(np.where(is_base, res.baseline_tpot_s, res.tpot_s), (1, len(cands), 1, len(uniq), bmax))
    if any(f is not None for f in added):
        tpot = tpot * _added_factor(added, np.arange(1, bmax + 1, dtype=float))[None, :, None, None, :]
    pre_s = np.asarray(np.broadcast_to(prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=uniq[:, 0], tp=ctx.tp,
                                                      cached_share=ctx.prefix_cache_share),
                                       (len(uniq),)), float)
    tin = ttft_inputs(ctx, cands, cfgs, pre_s, uniq[:, 0], is_base.reshape(-1), drafts)  # per distinct lengths
    if decode_only:
        return _decode_only_fleet(ctx, eng, is_base, tpot[0, :, 0], mb, uniq[:, 1], of_hour, cfgs, hours, source, added,
                                  tail)
    cap = _capacity_beyond(eng, is_base, tpot[0, :, 0], mb, pre_s, uniq[:, 1], slo_s, added, tin)
    return fleet_for_configs(configs=[(p.method, p.label, p.k) for p in cfgs], tpot_s=tpot[0, :, 0], max_batch=mb,
                             prefill_s=pre_s[of_hour], hours=hours, tp=ctx.tp, usd_per_gpu_hour=ctx.price,
                             slo_ms=req.tpot_slo_ms, shape_source=source, capacity_requests_per_s=cap,
                             curve_of_hour=of_hour, ttft_inputs=dataclasses.replace(
                                 tin, prefill_s=tin.prefill_s[:, of_hour],
                                 new_prompt_tokens=tin.new_prompt_tokens[of_hour]), tpot_factor=tail)


def _decode_only_fleet(ctx: Context, eng: dict, is_base: np.ndarray, tpot: np.ndarray, mb: np.ndarray, out: np.ndarray,
                       of_hour: np.ndarray, cfgs: Sequence[OperatingPoint], hours: Sequence, source: str,
                       added: Sequence, tail: np.ndarray | None) -> Fleet:
    """plan_fleet's fleet of decode-only replicas: no prefill share, no TTFT (nan); tail: (C, U) the TPOT at the SLO's
    percentile over the mean (None: a mean SLO)."""
    none = np.zeros(len(out))
    slo_s = ctx.req.tpot_slo_ms / 1e3 if tail is None else ctx.req.tpot_slo_ms / 1e3 / tail
    cap = _capacity_beyond(eng, is_base, tpot, mb, none, out, slo_s, added)
    return fleet_for_configs(configs=[(p.method, p.label, p.k) for p in cfgs], tpot_s=tpot, max_batch=mb,
                             prefill_s=none[of_hour], hours=hours, tp=ctx.tp, usd_per_gpu_hour=ctx.price,
                             slo_ms=ctx.req.tpot_slo_ms, shape_source=source, capacity_requests_per_s=cap,
                             curve_of_hour=of_hour, tpot_factor=tail)


def ttft_inputs(ctx: Context, cands: Sequence[Candidate], cfgs: Sequence[OperatingPoint], target_prefill_s: np.ndarray,
                prompt_tokens: np.ndarray, is_base: np.ndarray, drafts) -> TtftInputs:
    """The fleet's TTFT inputs (planner.physics.ttft.TtftInputs) per configuration and prompt length: the target's
    prefill (`target_prefill_s`, prefix-cache share applied) plus the draft's own prefill of the prompt (the draft
    network of each candidate: an EAGLE head's layer, a draft model, an MTP module; nothing for lookups and no
    speculation), the acceptance length (a speculative step is TPOT x tau) and the tokens a sequence puts in a step."""
    share = ctx.prefix_cache_share
    p = np.asarray(prompt_tokens, float)
    n_c = len(cands)
    draft_pre = np.broadcast_to(np.asarray(prefill_time_s(drafts.draft, ctx.hw_params, prompt_tokens=p, tp=ctx.tp,
                                                          cached_share=share), float), (1, n_c, 1, 1, len(p)))
    draft_pre = np.where(is_base[:, None], 0.0, draft_pre.reshape(n_c, len(p)))
    tau = np.array([1.0 if b else float(c.acceptance_length) for b, c in zip(is_base, cfgs, strict=True)])
    per_seq = np.where(is_base, 1.0, np.asarray(_verify_tokens(ctx, cands, cfgs), float))
    return TtftInputs(prefill_s=np.asarray(target_prefill_s, float)[None, :] + draft_pre,
                      new_prompt_tokens=p * (1.0 - share), step_factor=tau, tokens_per_seq=per_seq,
                      slo_ms=ctx.req.ttft_slo_ms, quantile=slo_quantile(ctx.req.ttft_percentile))


def _verify_tokens(ctx: Context, cands: Sequence[Candidate], cfgs: Sequence[OperatingPoint]) -> list[float]:
    """Tokens verified per sequence each step: a stated tree's, K + 1 for a chain, and for the planner's default
    tree (a lever's) its node count as the search prices it (output-token share-weighted over the segments)."""
    out = []
    for c, p in zip(cands, cfgs, strict=True):
        k = max(p.k, 1)
        if c.tree_shape is not None:
            out.append(float(c.tree_shape.verify_tokens_per_seq))
        elif c.tree and c.method != NO_SPEC:
            _, nver, _ = candidate_taus(ctx, [c], ctx.mid_samples(), np.array([float(k)]))
            out.append(float(np.dot(ctx.share, nver[0, 0, 0])))
        else:
            out.append(k + 1.0)
    return out


def _added_factor(added: Sequence[Callable[[np.ndarray], np.ndarray] | None], batch: np.ndarray) -> np.ndarray:
    """(C, *batch.shape[1:]) 1 + the fraction of TPOT each configuration adds at `batch` ((B,) or (C, ...))."""
    b = np.broadcast_to(batch, (len(added), *np.shape(batch)[-1:])) if np.ndim(batch) == 1 else batch
    return np.stack([1.0 + (np.zeros(np.shape(b[c])) if f is None else f(b[c])) for c, f in enumerate(added)])


def _capacity_beyond(eng: dict, is_base: np.ndarray, tpot: np.ndarray, mb: np.ndarray, pre: np.ndarray,
                     out: np.ndarray, slo_s: float | np.ndarray,
                     added: Sequence[Callable[[np.ndarray], np.ndarray] | None] = (),
                     tin: TtftInputs | None = None) -> np.ndarray:
    """(C, H) one replica's capacity (requests/s at full load, planner.physics.replica) where the TPOT curve stops below
    the batch limit while still meeting the SLO (a light load needs no more of it to size the fleet); NaN where the
    curve itself decides. The largest batch whose TPOT seen at full load meets the SLO is bisected up to the memory
    limit (the TPOT seen grows with the batch), as the CPM search finds it; with a TTFT SLO (tin: per configuration
    and prompt length), the TTFT at full load must meet it too. slo_s: the SLO on the mean TPOT seen, or (C, H) per
    row (a percentile SLO over the row's TPOT factor)."""
    n_c, n_h, bmax = tpot.shape
    end = replica_load(tpot_s=tpot[..., -1], batch=float(bmax), prefill_s=pre, output_tokens=out).tpot_seen_s
    need = (end <= slo_s) & (mb > bmax) & _ttft_ok(tin, tpot[..., -1], float(bmax), pre, out)
    if not need.any():
        return np.full((n_c, n_h), np.nan)
    lo, lo_t, hi = np.full((n_c, n_h), float(bmax)), tpot[..., -1].copy(), np.where(need, mb + 1.0, float(bmax))
    while np.any(hi - lo > 1):
        open_ = hi - lo > 1
        mid = np.where(open_, np.floor((lo + hi) / 2), lo)
        r = evaluate_arrays(batch=mid[None, :, None, :, None], with_memory=False, **eng)
        t = np.where(is_base, r.baseline_tpot_s, r.tpot_s)[0, :, 0, :, 0]
        if any(f is not None for f in added):
            t = t * _added_factor(added, mid)
        ok = (replica_load(tpot_s=t, batch=mid, prefill_s=pre, output_tokens=out).tpot_seen_s <= slo_s) & _ttft_ok(
            tin, t, mid, pre, out)
        lo_t = np.where(ok & open_, t, lo_t)
        lo, hi = np.where(ok & open_, mid, lo), np.where(~ok & open_, mid, hi)
    cap = full_load_requests_per_s(tpot_s=lo_t, batch=lo, prefill_s=pre, output_tokens=out)
    return np.where(need, cap, np.nan)


def _ttft_ok(tin: TtftInputs | None, tpot: np.ndarray, batch, pre: np.ndarray, out: np.ndarray) -> np.ndarray | bool:
    """(C, H) whether the TTFT at full load at `batch` (decode TPOT `tpot`) meets the TTFT SLO; True without one."""
    if tin is None or tin.slo_ms is None:
        return True
    lam = full_load_requests_per_s(tpot_s=tpot, batch=batch, prefill_s=pre, output_tokens=out)
    t = ttft(requests_per_s=lam, prefill_s=tin.prefill_s, new_prompt_tokens=tin.new_prompt_tokens[None, :],
             step_s=tpot * tin.step_factor[:, None], batch=batch, tokens_per_seq=tin.tokens_per_seq[:, None],
             batched_tokens=tin.batched_tokens, quantile=tin.quantile)
    return t.ttft_s * 1e3 <= tin.slo_ms
