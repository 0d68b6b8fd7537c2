"""What-if sweeps around an operating point, on the same vectorised search plan() uses (planner.search.grid):
speedup and CPM over batch, a token tree against a chain over batch, speedup over alpha x K at one batch, and
the K per batch size a deployment carries (K = 0 where speculating does not pay)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.context import (
    BASELINE,
    Candidate,
    Context,
    r5,
    single_segment,
)
from planner.request import PlanError, PlanRequest, TrafficSegment
from planner.search.candidates import alpha_position_1, candidate_taus
from planner.search.grid import candidate_grid, evaluate_at, evaluation_grid
from planner.types import Catalog


def method_candidates(ctx: Context, method: str, k: int | None = None, tuned: bool | None = None) -> list[Candidate]:
    m = ctx.catalog.methods[method]
    ks = (k,) if k else tuple(range(1, m.max_k + 1))
    return [BASELINE, Candidate(method, ks, tuned=ctx.req.tuned if tuned is None else tuned)]


# ---------------------------------------------------------------------------------------------------
# Speedup and CPM over batch
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchSweep:
    batch: np.ndarray  # sequences per replica
    best_k: np.ndarray  # the K with the lowest CPM at each batch (memory permitting)
    speedup: np.ndarray  # TPOT without speculation / with it, same batch
    usd_per_mtok: np.ndarray
    baseline_usd_per_mtok: np.ndarray
    tpot_ms: np.ndarray
    baseline_tpot_ms: np.ndarray
    fits_memory: np.ndarray
    compute_bound: np.ndarray
    baseline_compute_bound: np.ndarray
    crossover_batch: float | None  # first batch where speculation stops cutting CPM (log-interpolated)
    max_batch: float
    segment: TrafficSegment


def batch_sweep(
    req: PlanRequest, catalog: Catalog, method: str, *, segment: int | None = None, batches: np.ndarray | None = None
) -> BatchSweep:
    """Per batch: the method at its best K against no speculation at the same batch, on one segment (default: the
    largest); the crossover batch where speculation stops paying."""
    ctx, seg = single_segment(req, catalog, segment)
    cands = method_candidates(ctx, method)
    smp = ctx.mid_samples()
    ks = np.arange(1, catalog.methods[method].max_k + 1, dtype=float)
    b = np.asarray(batches if batches is not None else np.unique(np.round(np.geomspace(1, 1024, 40))), float)
    res = evaluate_at(ctx, cands, smp, candidate_grid(ctx, cands, smp, ks), b[None, None, None, None, :])
    cpm = res.usd_per_mtok[0, 1, :, 0, :]  # (K, B)
    fits_k = res.fits_memory[0, 1, :, 0, :]
    i = np.argmin(np.where(fits_k, cpm, np.inf), axis=0)
    cols = np.arange(b.size)
    spec_cpm = cpm[i, cols]
    base_cpm = res.baseline_usd_per_mtok[0, 0, 0, 0, :]
    fits = fits_k[i, cols]
    gain = base_cpm - spec_cpm
    crossover = None
    idx = np.flatnonzero(fits & (gain <= 0))
    if idx.size:
        c = int(idx[0])
        if c == 0:
            crossover = float(b[0])
        else:  # interpolate on log(batch) between the last paying and the first non-paying batch
            g0, g1 = gain[c - 1], gain[c]
            t = g0 / (g0 - g1) if g0 != g1 else 1.0
            crossover = float(np.exp(np.log(b[c - 1]) + t * (np.log(b[c]) - np.log(b[c - 1]))))
    return BatchSweep(
        batch=b,
        best_k=ks[i].astype(int),
        speedup=res.speedup[0, 1, i, 0, cols],
        usd_per_mtok=spec_cpm,
        baseline_usd_per_mtok=base_cpm,
        tpot_ms=res.tpot_s[0, 1, i, 0, cols] * 1e3,
        baseline_tpot_ms=res.baseline_tpot_s[0, 0, 0, 0, :] * 1e3,
        fits_memory=fits,
        compute_bound=res.compute_bound[0, 1, i, 0, cols],
        baseline_compute_bound=res.baseline_compute_bound[0, 0, 0, 0, :],
        crossover_batch=crossover,
        max_batch=float(np.max(res.max_batch[0, 1, :, 0, 0])),
        segment=seg,
    )


@dataclass(frozen=True)
class TreeVsChain:
    batch: np.ndarray
    chain_usd_per_mtok: np.ndarray  # the chain at its best K per batch
    tree_usd_per_mtok: np.ndarray  # the tree (stated, or the planner's default at its best depth) per batch
    fits_memory: np.ndarray
    crossover_batch: float | None  # first batch where the tree stops beating the chain (log-interpolated)
    tree_label: str


def tree_vs_chain(req: PlanRequest, catalog: Catalog, method: str, *, batches: np.ndarray | None = None) -> TreeVsChain:
    """Lever 4 over batch: a token tree verifies more tokens per sequence than a chain; where the verifier is
    memory-bound that is nearly free and the tree's longer acceptance wins, once it is compute-bound the extra
    verify tokens cost more than they return. Same segment (the largest) and batch for both."""
    m = catalog.methods[method]
    if not m.tree:
        raise PlanError("method", method, f"a method with tree verification ({m.label} has none)")
    ctx, seg = single_segment(req, catalog)
    shape = req.tree_shape
    ks = (shape.depth,) if shape is not None else tuple(range(1, m.max_k + 1))
    cands = [Candidate(method, tuple(range(1, m.max_k + 1)), tuned=req.tuned),
             Candidate(method, ks, tuned=req.tuned, tree=True, tree_shape=shape)]
    smp = ctx.mid_samples()
    kk = np.arange(1, m.max_k + 1, dtype=float)
    b = np.asarray(batches if batches is not None else np.unique(np.round(np.geomspace(1, 1024, 32))), float)
    tau, nver, _ = candidate_taus(ctx, cands, smp, kk)
    grid = evaluation_grid(k=r5(kk, 2), tau=tau[..., None], verify_tokens=nver[..., None],
                           prompt_tokens=[seg.prompt_tokens], output_tokens=[seg.output_tokens])
    res = evaluate_at(ctx, cands, smp, grid, b[None, None, None, None, :])
    cpm = np.broadcast_to(res.usd_per_mtok, (1, 2, kk.size, 1, b.size))[0, :, :, 0, :]  # (2, K, B)
    fits = np.broadcast_to(res.fits_memory, (1, 2, kk.size, 1, b.size))[0, :, :, 0, :]
    valid = np.array([[k in c.ks for k in kk] for c in cands])[:, :, None]
    best = np.where(fits & valid, cpm, np.inf).min(axis=1)  # (2, B)
    chain, tree = best[0], best[1]
    ok = np.isfinite(chain) & np.isfinite(tree)
    gain = np.where(ok, chain - np.where(ok, tree, 0.0), 0.0)
    crossover = None
    idx = np.flatnonzero(ok & (gain <= 0))
    if idx.size:
        c = int(idx[0])
        crossover = float(b[0]) if c == 0 else float(np.exp(np.log(b[c - 1]) + (gain[c - 1] / (gain[c - 1] - gain[c])
                                                             if gain[c - 1] != gain[c] else 1.0)
                                                            * (np.log(b[c]) - np.log(b[c - 1]))))
    label = (f"stated tree ({shape.verify_tokens_per_seq} tokens verified per sequence)" if shape is not None
             else "the planner's default tree (width 3) at its best depth")
    return TreeVsChain(b, chain, tree, ok, crossover, label)


def optimal_k_by_batch(req: PlanRequest, catalog: Catalog, method: str, batches) -> dict[int, int | None]:
    """The K with the lowest CPM at each batch among the K's that fit memory (None where none fits)."""
    sw = batch_sweep(req, catalog, method, batches=np.asarray(batches, float))
    return {int(b): (int(k) if f else None) for b, k, f in zip(sw.batch, sw.best_k, sw.fits_memory, strict=True)}


# ---------------------------------------------------------------------------------------------------
# Speedup over alpha x K at one batch
# ---------------------------------------------------------------------------------------------------


def alpha_k_heatmap(req: PlanRequest, catalog: Catalog, method: str, *, batch: int, alphas: np.ndarray) -> dict:
    """Speedup (TPOT without / with speculation, same batch) over per-token alpha at position 1 x K."""
    ctx, _ = single_segment(req, catalog)
    m = catalog.methods[method]
    smp = ctx.mid_samples()
    a_now = float(alpha_position_1(ctx, Candidate(method, (1,), tuned=req.tuned), smp)[0, 0])
    cands = [
        Candidate(method, tuple(range(1, m.max_k + 1)), alpha_shift=float(a) - a_now, tuned=req.tuned) for a in alphas
    ]
    ks = np.arange(1, m.max_k + 1, dtype=float)
    res = evaluate_at(ctx, cands, smp, candidate_grid(ctx, cands, smp, ks), np.full((1, 1, 1, 1, 1), float(batch)))
    return {
        "alphas": np.asarray(alphas),
        "ks": ks.astype(int),
        "speedup": res.speedup[0, :, :, 0, 0],
        "alpha_now": a_now,
    }


MAX_THRESHOLD_DROP = 0.05  # a K threshold may cost at most 5 % of a replica's throughput at its boundary


def k_by_batch(req: PlanRequest, catalog: Catalog, method: str, *, operating_batch: int,
               operating_k: int) -> list[tuple[int, int]]:
    """(batch, K) points for a deployment's K per batch size: every batch below the operating one where the best
    K changes, i.e. where the CPM curves of two K's cross (`batch_sweep` at every batch up to 1024, geometric
    above), 0 where speculating does not lower the CPM or no K fits memory; at the operating batch the plan's own
    K. A threshold where the replica's output throughput would drop by more than MAX_THRESHOLD_DROP from one
    batch to the next (a K change that slows the whole batch, vLLM issue 49548) is moved up: the smaller batch's
    K goes on until the drop is within the bound."""
    top = int(operating_batch)
    if top <= 1:
        return [(1, int(operating_k))]
    below = np.unique(np.concatenate([np.arange(1, min(top, 1024)), np.round(np.geomspace(1024, max(top, 1024), 64))]))
    below = below[below < top]
    sw = batch_sweep(req, catalog, method, batches=below.astype(float))
    pays = sw.fits_memory & (sw.usd_per_mtok < sw.baseline_usd_per_mtok)
    ks = np.where(pays, sw.best_k, 0).astype(int)
    thr = np.where(pays, sw.batch / sw.tpot_ms, sw.batch / sw.baseline_tpot_ms)  # tokens per ms per replica
    pts = [(int(sw.batch[0]), int(ks[0]))]
    cur_thr = thr[0]
    for j in range(1, ks.size):
        if ks[j] != pts[-1][1] and thr[j] >= (1.0 - MAX_THRESHOLD_DROP) * cur_thr:
            pts.append((int(sw.batch[j]), int(ks[j])))
        if ks[j] == pts[-1][1]:
            cur_thr = thr[j]
    return [*pts, (top, int(operating_k))]
