"""The search: for every (sample, candidate, K, segment) the best batch under memory, the TPOT SLO and the
traffic's concurrency cap, in one vectorised pass over a frozen evaluation grid; and each candidate's best K for
the whole mix. plan(), evaluate, the sensitivity views and the benchmarks call these functions.

Batch: the largest integer batch that fits memory, meets the TPOT SLO and the concurrency cap is found by
bracketing on a coarse grid and interpolated bisection (TPOT grows with batch); then the CPM there is compared
with the grid's smaller batches (CPM falls with batch in today's step-time model; the grid keeps the search right
if a fitted efficiency ever bends that).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.context import Candidate, Context, Samples, r5
from planner.physics.serving import SpecResult, evaluate_arrays, prefill_time_s
from planner.physics.ttft import ttft
from planner.request import MAX_BATCH, NO_SPEC, slo_quantile
from planner.search.candidates import candidate_taus, candidate_tpot_factor
from planner.search.drafting import DraftArrays, tree_overrides
from planner.search.drafting import drafts as draft_arrays
from planner.search.memory import candidate_max_batch

# Batches evaluated first for every configuration (with its own upper bound): they bracket the SLO boundary and
# check that CPM does fall with batch below it (powers of 4 up to MAX_BATCH).
_COARSE_BATCHES = 4.0 ** np.arange(0, 7)


@dataclass(frozen=True)
class EvalGrid:
    """What evaluate_arrays needs besides the networks, hardware and batch, on the five axes: K, acceptance
    length and verified tokens per sequence, and the lengths per segment (or hour)."""

    k: np.ndarray
    tau: np.ndarray
    verify_tokens: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    context_tokens: np.ndarray  # per sequence during decode: prompt + half the output on average


def evaluation_grid(*, k, tau, verify_tokens, prompt_tokens: Sequence[float], output_tokens: Sequence[float],
                    context_tokens: Sequence[float] | None = None) -> EvalGrid:
    """The one place an EvalGrid is built: lengths per segment go on axis 3; the context per sequence is prompt +
    half the output unless stated."""
    prompt = r5(prompt_tokens, 3)
    out = r5(output_tokens, 3)
    return EvalGrid(k=np.asarray(k, float), tau=np.asarray(tau, float), verify_tokens=np.asarray(verify_tokens, float),
                    prompt_tokens=prompt, output_tokens=out,
                    context_tokens=prompt + out / 2.0 if context_tokens is None else r5(context_tokens, 3))


def candidate_grid(ctx: Context, cands: Sequence[Candidate], smp: Samples, ks: np.ndarray) -> EvalGrid:
    """Every candidate at every K in `ks` on the context's segments (tau NaN -> 1: a K not searched)."""
    tau, nver, _ = candidate_taus(ctx, cands, smp, ks)
    return evaluation_grid(k=r5(ks, 2), tau=np.nan_to_num(tau, nan=1.0)[..., None], verify_tokens=nver[..., None],
                           prompt_tokens=[s.prompt_tokens for s in ctx.segs],
                           output_tokens=[s.output_tokens for s in ctx.segs])


def engine_args(ctx: Context, cands: Sequence[Candidate], smp: Samples, grid: EvalGrid,
                drafts: DraftArrays | None = None) -> dict[str, Any]:
    """evaluate_arrays' arguments for candidates along axis 1 (all but the batch)."""
    return dict(
        target=ctx.target, hw=ctx.sampled_hw(smp, cands), k=grid.k, tau=grid.tau,
        context_tokens=grid.context_tokens, prompt_tokens=grid.prompt_tokens, output_tokens=grid.output_tokens,
        usd_per_gpu_hour=r5(smp.usd_per_gpu_hour, 0), tp=ctx.tp, attention_dp=ctx.attention_dp,
        prefix_cache_share=ctx.prefix_cache_share, verify_tokens=grid.verify_tokens,
        draft_cost_factor=r5([c.draft_cost_factor for c in cands], 1),
        **tree_overrides(ctx, cands), **(drafts or draft_arrays(ctx, cands)).as_kwargs())


def evaluate_at(ctx: Context, cands: Sequence[Candidate], smp: Samples, grid: EvalGrid, batch, *,
                with_memory: bool = True, draft_cost_ratio: float | None = None) -> SpecResult:
    """The candidates on the grid at given batches (axis 4); draft_cost_ratio: a stated c instead of the derived
    one (planner.physics.serving.evaluate_arrays)."""
    return evaluate_arrays(batch=batch, with_memory=with_memory, draft_cost_ratio=draft_cost_ratio,
                           **engine_args(ctx, cands, smp, grid))


def max_batch(ctx: Context, cands: Sequence[Candidate], grid: EvalGrid, drafts: DraftArrays | None = None
              ) -> np.ndarray:
    """Largest batch that fits memory for the candidates on the grid (planner.search.memory)."""
    return candidate_max_batch(ctx, cands, drafts or draft_arrays(ctx, cands), k=grid.k,
                               prompt_tokens=grid.prompt_tokens, output_tokens=grid.output_tokens,
                               verify_tokens=grid.verify_tokens)


@dataclass(frozen=True)
class SearchResult:
    """Per (sample, candidate, K, segment): the best batch and the numbers there."""

    ks: np.ndarray
    batch: np.ndarray
    res: SpecResult  # evaluated at `batch` (shape N, C, K, S, 1)
    ok: np.ndarray  # fits memory and meets the SLO at `batch`
    fits_any: np.ndarray  # batch 1 fits memory
    tpot_min_s: np.ndarray  # TPOT at batch 1
    max_batch: np.ndarray
    tau: np.ndarray
    alpha1: np.ndarray  # (N, C, S)
    valid_k: np.ndarray  # K allowed for this candidate (C, K)
    ttft_s: np.ndarray | None = None  # TTFT at full load at `batch` (planner.physics.ttft), shape of `batch`
    # the TPOT at the SLO's percentile over the mean TPOT (planner.acceptance.tails), shape of `batch`; None: 1
    tpot_factor: np.ndarray | None = None


def search(ctx: Context, cands: Sequence[Candidate], smp: Samples) -> SearchResult:
    """Best batch for every (sample, candidate, K, segment) in one vectorised pass."""
    k_all = sorted({k for c in cands for k in c.ks})
    ks = np.array(k_all, float)
    valid = np.array([[k in c.ks for k in k_all] for c in cands])
    tau_r, nver_stack, alpha1 = candidate_taus(ctx, cands, smp, ks)  # (N, C, K, S), (N, C, K, S), (N, C, S)
    valid = valid & ~np.isnan(tau_r).any(axis=(0, 3))  # measured positions end before K: not searched
    tau_r = np.nan_to_num(tau_r, nan=1.0)
    nver_r = np.broadcast_to(nver_stack, tau_r.shape)
    # Only the valid (candidate, K) pairs are evaluated: they lie along axis 1 (K axis of length 1) and are
    # put back on the (candidate, K) grid at the end.
    ci, ki = np.nonzero(valid)
    cq = [cands[c] for c in ci]
    grid_q = evaluation_grid(k=r5(ks[ki], 1), tau=tau_r[:, ci, ki][:, :, None, :, None],
                             verify_tokens=nver_r[:, ci, ki][:, :, None, :, None],
                             prompt_tokens=[s.prompt_tokens for s in ctx.segs],
                             output_tokens=[s.output_tokens for s in ctx.segs])
    is_base = np.array([c.method == NO_SPEC for c in cq])
    drafts = draft_arrays(ctx, cq)
    args = engine_args(ctx, cq, smp, grid_q, drafts)

    def ev(batch, a=args, with_memory=False):
        """The model at `batch`; memory only for the final evaluation (the search bounds come from max_batch)."""
        return evaluate_arrays(batch=batch, with_memory=with_memory, **a)

    def pick(res: SpecResult, name: str, base_mask=None):
        """Speculative arrays, or the baseline's for the no-speculation candidates."""
        spec, base = getattr(res, name), getattr(res, "baseline_" + name)
        return np.where(r5(is_base, 1) if base_mask is None else base_mask, base, spec)

    slo_s = ctx.req.tpot_slo_ms / 1e3
    ttft_slo_s = None if ctx.req.ttft_slo_ms is None else ctx.req.ttft_slo_ms / 1e3
    ttft_q = slo_quantile(ctx.req.ttft_percentile)
    # the TPOT at the SLO's percentile over the mean TPOT, (N, Q, 1, S, 1); None for a mean SLO (no work)
    tpot_q = slo_quantile(ctx.req.tpot_percentile)
    tail_q = (None if tpot_q is None else
              candidate_tpot_factor(ctx, cands, smp, ks, tau_r, tpot_q)[:, ci, ki][:, :, None, :, None])

    def latency(res: SpecResult, a=args, base_mask=None, batch=None, tail=tail_q):
        """The TPOT seen at full load at the SLO's percentile (the mean x `tail`), or with a TTFT SLO the larger of
        it and the TTFT at full load (at its percentile) scaled to the TPOT SLO (TTFT x TPOT SLO / TTFT SLO): <= the
        TPOT SLO exactly when both hold, and still near-affine in the batch for the bracket's interpolation."""
        seen = pick(res, "tpot_seen_s", base_mask)
        if tail is not None:
            seen = seen * tail
        if ttft_slo_s is None:
            return seen
        mask = r5(is_base, 1) if base_mask is None else base_mask
        return np.maximum(seen, full_load_ttft_s(res, a, mask, batch, ttft_q) * (slo_s / ttft_slo_s))

    # 1. each configuration's own upper bound: memory (no step time needed), the traffic's concurrency cap and
    #    MAX_BATCH; then a grid of batches (powers of 4 below the largest bound, and the bound itself)
    mb = max_batch(ctx, cq, grid_q, drafts)
    ub = np.minimum(mb, MAX_BATCH)
    if ctx.req.batch_cap is not None:
        ub = np.minimum(ub, max(1.0, math.floor(ctx.req.batch_cap)))
    ub = np.maximum(ub, 1.0)
    coarse = _COARSE_BATCHES[_COARSE_BATCHES < ub.max()]
    grid = np.minimum(np.concatenate([np.broadcast_to(coarse, ub.shape[:-1] + coarse.shape), ub], axis=-1), ub)
    rg = ev(grid)
    tg = latency(rg, batch=grid)
    lead = tg.shape[:-1]
    tail_full = None if tail_q is None else np.broadcast_to(tail_q, lead + (1,))
    seen_b, seen_c = [grid], [pick(rg, "usd_per_mtok")]
    tpot1 = tg[..., :1]
    ok_g = tg <= slo_s
    # 2. the largest integer batch <= ub with TPOT <= SLO. TPOT grows with batch: bracket it on the grid, then
    #    interpolate and test neighbours per round (TPOT is near-affine in batch within a bracket). Each round
    #    evaluates only the configurations whose bracket is still open (rows gathered by _take_rows).
    lo = np.where(ok_g, grid, 0.0).max(-1, keepdims=True)  # largest grid batch meeting the SLO (0: none)
    t_lo = np.where(lo > 0, np.take_along_axis(tg, np.argmax(np.where(ok_g, grid, -1.0), -1)[..., None], -1), 0.0)
    above = ~ok_g & (grid > lo)
    bad = np.where(above, grid, np.inf).min(-1, keepdims=True)  # smallest grid batch above lo missing it
    t_bad = np.take_along_axis(tg, np.argmin(np.where(above, grid, np.inf), -1)[..., None], -1)
    bad = np.where(lo > 0, bad, 1.0)  # nothing meets the SLO: batch 1 is reported (its lowest TPOT)
    base_full = np.broadcast_to(r5(is_base, 1), lead + (1,))
    for _ in range(40):
        open_ = (lo > 0) & np.isfinite(bad) & (bad - lo > 1)
        if not open_.any():
            break
        frac = np.clip((slo_s - t_lo) / np.where(t_bad > t_lo, t_bad - t_lo, 1.0), 0.0, 1.0)
        g = np.clip(np.floor(lo + frac * (bad - lo)), lo + 1, bad - 1)
        mid = np.floor((lo + bad) / 2)
        # the interpolated batch and its neighbours (two either side: the curvature of TPOT in batch rarely
        # moves the boundary further, so most brackets close in one round), and the bisection point
        trial = np.clip(np.concatenate([g - 2, g - 1, g, g + 1, g + 2, mid], axis=-1), lo + 1, bad - 1)
        rows = np.nonzero(open_[..., 0])
        sub = {name: _take_rows(a, rows, lead) for name, a in args.items()}
        rt = ev(trial[rows], sub)
        base_rows = base_full[rows]
        tt = np.full(trial.shape, np.inf)
        tt[rows] = latency(rt, sub, base_rows, trial[rows], None if tail_full is None else tail_full[rows])
        ct = np.full(trial.shape, np.inf)  # closed rows: not evaluated, never chosen
        ct[rows] = pick(rt, "usd_per_mtok", base_rows)
        seen_b.append(trial)
        seen_c.append(ct)
        okt = (tt <= slo_s) & open_
        new_lo = np.where(okt, trial, 0.0).max(-1, keepdims=True)
        idx_lo = np.argmax(np.where(okt, trial, -1.0), -1)[..., None]
        upd = new_lo > lo
        t_lo = np.where(upd, np.take_along_axis(tt, idx_lo, -1), t_lo)
        lo = np.where(upd, new_lo, lo)
        badt = (~okt) & open_ & (trial > lo)
        new_bad = np.where(badt, trial, np.inf).min(-1, keepdims=True)
        idx_bad = np.argmin(np.where(badt, trial, np.inf), -1)[..., None]
        updb = new_bad < bad
        t_bad = np.where(updb, np.take_along_axis(tt, idx_bad, -1), t_bad)
        bad = np.where(updb, new_bad, bad)
    boundary = np.maximum(lo, 1.0)
    # 3. the cheapest evaluated batch at or below the boundary (the boundary itself was evaluated: CPM falls with
    #    batch in today's step-time model; the smaller grid batches keep the search right if a fitted efficiency
    #    ever bends that), evaluated once more there for every number of the result.
    cand_b = np.concatenate([np.broadcast_to(b, lead + b.shape[-1:]) for b in seen_b], axis=-1)
    cpm = np.concatenate([np.broadcast_to(c, lead + c.shape[-1:]) for c in seen_c], axis=-1)
    cpm = np.where(cand_b <= boundary, cpm, np.inf)
    j = np.argmin(cpm, axis=-1)[..., None]
    best_b = np.take_along_axis(cand_b, j, axis=-1)
    res = ev(best_b, with_memory=True)
    meets = latency(res, batch=best_b) <= slo_s * (1 + 1e-12)
    ttft_best = full_load_ttft_s(res, args, r5(is_base, 1), best_b, ttft_q)
    fits = best_b <= mb
    n, c_, k_, s_ = smp.n, len(cands), len(ks), len(ctx.segs)

    def full(a, fill):
        """(N, Q, 1, S, 1) on the pairs -> (N, C, K, S, 1) on the grid; `fill` where a K is not searched."""
        a = np.asarray(a)
        g = np.full((n, c_, k_, s_, 1), fill, dtype=a.dtype)
        g[:, ci, ki] = np.broadcast_to(a, (n, len(ci), 1, s_, 1))[:, :, 0]
        return g

    res_full = SpecResult(**{f.name: full(getattr(res, f.name), False if getattr(res, f.name).dtype == bool
                                          else np.nan) for f in dataclasses.fields(SpecResult)})
    return SearchResult(ks=ks, batch=full(best_b, 1.0), res=res_full, ok=full(meets & fits, False),
                   fits_any=full(mb >= 1, False), tpot_min_s=full(tpot1, np.nan), max_batch=full(mb, 0.0),
                   tau=tau_r[..., None], alpha1=alpha1, valid_k=valid, ttft_s=full(ttft_best, np.nan),
                   tpot_factor=None if tail_q is None else full(np.broadcast_to(tail_q, best_b.shape), 1.0))


def _take_rows(x: Any, rows: tuple[np.ndarray, ...], lead: tuple[int, ...]) -> Any:
    """An evaluate_arrays argument at some (sample, candidate, K, segment) rows only, shape (R, 1): each axis
    along which the argument varies is indexed, the others are read at 0; networks and hardware field by field;
    scalars as they are."""
    if dataclasses.is_dataclass(x):  # only the fields that vary (arrays); numbers stay as they are
        changes = {name: _take_rows(v, rows, lead) for name, v in vars(x).items()
                   if isinstance(v, np.ndarray) and v.ndim > 0}
        return dataclasses.replace(x, **changes) if changes else x
    if x is None or np.ndim(x) == 0:
        return x
    a = np.asarray(x)
    a = a.reshape((1,) * (len(lead) + 1 - a.ndim) + a.shape)
    idx = tuple(r if n > 1 else 0 for r, n in zip(rows, a.shape[:-1], strict=True))
    return a[idx]  # (R, 1); (1,) when the argument is the same on every row


def blended_cpm(ctx: Context, cands: Sequence[Candidate], sr: SearchResult) -> tuple[np.ndarray, np.ndarray]:
    """(CPM (N, C) blended over segments at each candidate's best feasible K, feasible (N, C)); nan where
    infeasible. The vectorised form of planner.search.points' choice of K."""
    is_base = r5([c.method == NO_SPEC for c in cands], 1).astype(bool)
    cpm = np.where(is_base, sr.res.baseline_usd_per_mtok, sr.res.usd_per_mtok)[..., 0]  # (N, C, K, S)
    ok = sr.ok[..., 0] & sr.valid_k[None, :, :, None]
    blended = np.where(ok.all(-1), (cpm * ctx.share).sum(-1), np.inf)  # (N, C, K)
    best = blended.min(-1)
    feasible = np.isfinite(best)
    return np.where(feasible, best, np.nan), feasible


def full_load_ttft_s(res: SpecResult, a: dict[str, Any], base_mask, batch, quantile: float | None = None
                     ) -> np.ndarray:
    """The TTFT (planner.physics.ttft; at `quantile`, None: the mean) of a replica kept at `batch` (the full-load
    arrival rate, planner.physics.replica) from an evaluation `res` with evaluate_arrays' arguments `a`: the target's
    prefill and the draft's own (none without speculation), the decode step (TPOT x acceptance length) and the decode
    tokens a sequence puts in a step."""
    base = np.asarray(base_mask, bool)
    tpot = np.where(base, res.baseline_tpot_s, res.tpot_s)
    eff = np.where(base, res.baseline_effective_output_tokens_per_s, res.effective_output_tokens_per_s)
    lam = eff / np.asarray(a["output_tokens"], float)
    share = a["prefix_cache_share"]
    pre = prefill_time_s(a["target"], a["hw"], prompt_tokens=a["prompt_tokens"], tp=a["tp"], cached_share=share)
    draft_pre = prefill_time_s(a["draft"], a["hw"], prompt_tokens=a["prompt_tokens"], tp=a["tp"], cached_share=share)
    return ttft(requests_per_s=lam, prefill_s=pre + np.where(base, 0.0, draft_pre),
                new_prompt_tokens=np.asarray(a["prompt_tokens"], float) * (1.0 - share),
                step_s=tpot * np.where(base, 1.0, a["tau"]), batch=batch,
                tokens_per_seq=np.where(base, 1.0, a["verify_tokens"]), quantile=quantile).ttft_s
