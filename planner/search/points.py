"""From search arrays to operating points: each candidate at its best K for the whole mix (the K with the lowest
blended CPM among those where every segment fits memory and meets the SLO), with its per-segment numbers, why it
is infeasible and what would make it feasible; and the methods with their uncertainty band.

A mix's CPM is sum_i share_i x CPM_i (cost is tokens x CPM; shares are of output tokens).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from planner.acceptance import rates as acc
from planner.acceptance import tiers
from planner.answer import OperatingPoint, SegmentPoint
from planner.context import BASELINE, Candidate, Context, make_context, r5
from planner.request import NO_SPEC, TP_OPTIONS, PlanError, PlanRequest
from planner.search.candidates import method_candidates
from planner.search.drafting import availability, draft_weight_bytes
from planner.search.grid import SearchResult, search
from planner.search.memory import memory_way_out, speculation_memory_way_out
from planner.types import LOOKUP_DRAFTING, Catalog


def pct(new: float, ref: float | None) -> float | None:
    """CPM change in percent against a reference; None without a positive reference (0 under 0.05 %)."""
    if ref is None or not (ref > 0) or not math.isfinite(new):
        return None
    v = (new / ref - 1.0) * 100.0
    return 0.0 if abs(v) < 0.05 else v


def points(ctx: Context, cands: Sequence[Candidate], sr: SearchResult, n: int = 0, count: int | None = None
            ) -> list[OperatingPoint]:
    """Sample n of a search -> one OperatingPoint per candidate (its K with the lowest blended CPM)."""
    share = ctx.share
    res = sr.res
    is_base = np.array([c.method == NO_SPEC for c in cands])

    def arr(name):
        spec, base = getattr(res, name), getattr(res, "baseline_" + name)
        return np.where(r5(is_base, 1), base, spec)[n, ..., 0]  # (C, K, S)

    cpm, tpot, thr = arr("usd_per_mtok"), arr("tpot_seen_s"), arr("output_tokens_per_s")
    bound = arr("compute_bound")
    ok = sr.ok[n, ..., 0] & sr.valid_k[:, :, None]
    mb = sr.max_batch[n, ..., 0] if sr.max_batch.shape[0] > 1 else sr.max_batch[0, ..., 0]
    mb = np.broadcast_to(mb, cpm.shape)
    batch = sr.batch[n, ..., 0]
    # the TPOT at the SLO's percentile over the mean (1: a mean SLO), (C, K, S)
    tail = np.broadcast_to(sr.tpot_factor[n, ..., 0] if sr.tpot_factor is not None else 1.0, cpm.shape)
    ttft = (sr.ttft_s[n, ..., 0] if sr.ttft_s is not None else np.full(cpm.shape, np.nan))  # (C, K, S)
    ttft_slo = ctx.req.ttft_slo_ms
    blended = (cpm * share).sum(-1)  # (C, K)
    all_ok = ok.all(-1)
    out = []
    for c, cand in enumerate(cands[:count]):
        valid = sr.valid_k[c]
        score = np.where(all_ok[c], blended[c], np.inf)
        if not np.isfinite(score).any():  # infeasible: report the K with the lowest TPOT among valid K's
            score = np.where(valid, (tpot[c] * share).sum(-1), np.inf)
        i = int(np.argmin(score))
        dom = int(np.argmax(share))
        kidx = np.full(len(ctx.segs), i)
        if cand.k_per_segment:  # each segment at its own cheapest feasible K
            seg_score = np.where(ok[c], cpm[c], np.inf)  # (K, S)
            has = np.isfinite(seg_score).any(0)
            kidx = np.where(has, np.argmin(seg_score, 0), i)
            i = int(kidx[dom])
        k = int(sr.ks[i]) if cand.method != NO_SPEC else 0
        sj = np.arange(len(ctx.segs))
        tau_s = sr.tau[n, c, kidx, sj, 0]
        bs, mbs = batch[c, kidx, sj], mb[c, kidx, sj]
        ts, cs, hs = tpot[c, kidx, sj], cpm[c, kidx, sj], thr[c, kidx, sj]
        sp = res.speedup[n, c, kidx, sj, 0] if cand.method != NO_SPEC else np.ones(len(sj))
        cols = zip(ctx.segs, bs.astype(int).tolist(), mbs.astype(int).tolist(), (ts * 1e3).tolist(), cs.tolist(),
                   hs.tolist(), tau_s.tolist(), sp.tolist(), sr.alpha1[n, c].tolist(), (bs <= mbs).tolist(),
                   ((ts * tail[c, kidx, sj] * 1e3 <= ctx.req.tpot_slo_ms * (1 + 1e-12))
                    & _ttft_meets(ttft[c, kidx, sj], ttft_slo)).tolist(),
                   bound[c, kidx, sj].tolist(), strict=True)
        seg_points = tuple(
            SegmentPoint(workload=s.workload, language=s.language, share=s.share, batch=b_, max_batch=mb_,
                         tpot_ms=t_, usd_per_mtok=c_, output_tokens_per_s=h_, acceptance_length=a_, speedup=x_,
                         alpha_position_1=a1_, fits_memory=f_, meets_slo=m_,
                         verifier_bound="compute" if cb_ else "memory")
            for s, b_, mb_, t_, c_, h_, a_, x_, a1_, f_, m_, cb_ in cols
        )
        fits = all(p.fits_memory for p in seg_points) and bool(sr.fits_any[n, c, kidx, sj, 0].all())
        meets = all(p.meets_slo for p in seg_points)
        tau = float(np.dot(share, tau_s))
        label = "no speculation" if cand.method == NO_SPEC else ctx.catalog.methods[cand.method].label
        reason, way = "", ""
        if not fits:
            draft_bytes = draft_weight_bytes(ctx, cand.method)
            reason = "does not fit memory"
            way = (memory_way_out(ctx, draft_bytes) if cand.method == NO_SPEC
                   else speculation_memory_way_out(ctx, cand, k, draft_bytes))
        elif not meets and not (tpot[c, kidx, sj] * tail[c, kidx, sj] * 1e3
                                <= ctx.req.tpot_slo_ms * (1 + 1e-12)).all():
            best_ms = float((tpot[c, kidx, sj] * tail[c, kidx, sj] * 1e3).max())
            reason = (f"misses the {ctx.req.tpot_slo_ms:g} ms {ctx.req.tpot_percentile} TPOT SLO: best achievable "
                      f"{best_ms:.1f} ms (batch 1)")
            way = "a larger TP, a smaller model or fp8 weights; or a looser SLO"
        elif not meets:
            best_ms = float((ttft[c, kidx, sj] * 1e3).max())
            reason = (f"misses the {ttft_slo:g} ms {ctx.req.ttft_percentile} TTFT SLO: best achievable "
                      f"{best_ms:,.0f} ms (batch 1)"
                      + (" (the draft's prefill and the longer speculative step add to it)" if k else ""))
            way = ("a larger TP, a prefix cache, shorter prompts" + (" or no speculation" if k else "")
                   + "; or a looser TTFT SLO")
        m = ctx.catalog.methods[cand.method] if cand.method != NO_SPEC else None
        one = tiers.one_time_usd(ctx, m) if m is not None else (0.0, 0.0)
        tier, tier_src = tiers.provenance(ctx, cand.method, cand.tuned) if m is not None else ("", "")
        out.append(
            dict(
                method=cand.method,
                label=label,
                available=True,
                k=k,
                batch=seg_points[dom].batch,
                max_batch=seg_points[dom].max_batch,
                fits_memory=fits,
                meets_slo=meets,
                feasible=fits and meets,
                tpot_ms=float(np.dot(share, tpot[c, kidx, sj] * 1e3)),
                tpot_at_slo_ms=float(np.dot(share, tpot[c, kidx, sj] * tail[c, kidx, sj] * 1e3)),
                ttft_ms=float(np.dot(share, ttft[c, kidx, sj] * 1e3)),
                usd_per_mtok=float(np.dot(share, cpm[c, kidx, sj])),
                output_tokens_per_s=float(1.0 / np.dot(share, 1.0 / thr[c, kidx, sj])),
                acceptance_length=tau,
                alpha_per_token=0.0,
                alpha_position_1=float(np.dot(share, sr.alpha1[n, c])),
                draft_acceptance_rate=float((tau - 1.0) / k) if k else 0.0,
                speedup=float(np.dot(share, [p.speedup for p in seg_points])),
                draft_cost_ratio=float(res.draft_cost_ratio[n, c, i, dom, 0]) if cand.method != NO_SPEC else 0.0,
                verifier_bound=seg_points[dom].verifier_bound,
                cpm_change_pct=None,
                reason=reason,
                way_out=way,
                segments=seg_points,
                one_time_usd_low=one[0],
                one_time_usd_high=one[1],
                alpha_convention=m.alpha_convention if m else "",
                alpha_source=f"{m.source.source} ({m.source.date})" if m else "",
                tp=ctx.tp,
                acceptance_tier=tier,
                acceptance_source=tier_src,
                head=tiers.head_status(ctx, cand.method).sentence if m is not None else "",
            )
        )
    # tau -> the i.i.d. per-token alpha with the same acceptance length, all candidates in one inversion
    ks_ = np.array([max(p["k"], 1) for p in out], float)
    taus = np.clip(np.array([p["acceptance_length"] for p in out]), 1.0, ks_ + 1.0)
    alphas = np.atleast_1d(acc.alpha_from_acceptance_length(taus, ks_, iterations=40))
    return [OperatingPoint(**{**p, "alpha_per_token": float(a) if p["k"] else 0.0})
            for p, a in zip(out, alphas, strict=True)]


def unavailable(ctx: Context, name: str, why: str) -> OperatingPoint:
    """A method that cannot run on the model: its costs, and why."""
    m = ctx.catalog.methods[name]
    one = tiers.one_time_usd(ctx, m)
    nan = math.nan
    return OperatingPoint(
        method=name,
        label=m.label,
        available=False,
        k=0,
        batch=0,
        max_batch=0,
        fits_memory=False,
        meets_slo=False,
        feasible=False,
        tpot_ms=nan,
        usd_per_mtok=nan,
        output_tokens_per_s=nan,
        acceptance_length=nan,
        alpha_per_token=nan,
        alpha_position_1=nan,
        draft_acceptance_rate=nan,
        speedup=nan,
        draft_cost_ratio=nan,
        verifier_bound="",
        cpm_change_pct=None,
        reason=f"unavailable: {why}",
        way_out="",
        one_time_usd_low=one[0],
        one_time_usd_high=one[1],
        alpha_convention=m.alpha_convention,
        alpha_source=f"{m.source.source} ({m.source.date})",
    )


def methods_with_band(ctx: Context, names: Sequence[str], *, band: bool = True) -> list[OperatingPoint]:
    """No speculation and every method at its best K and batch, with the uncertainty band: each method's CPM at the
    low and high end of its alpha range, each at its own best K and batch. One vectorised search: the band's
    ends are extra candidates with the alpha shifted by half the range (prompt lookup and measured acceptance
    have no range). band=False: the middle only (each band end at the middle), a third of the search."""
    cands, missing = method_candidates(ctx, names)
    with_band = band
    band, owner = [], []
    for c in (cands if with_band else ()):
        m = ctx.catalog.methods[c.method]
        if m.drafting in LOOKUP_DRAFTING or (ctx.req.acceptance is not None and ctx.req.acceptance_method == c.method):
            continue
        rng = m.alpha_tuned if c.tuned else m.alpha_default
        half = 0.5 * (rng.high - rng.low)
        band += [dataclasses.replace(c, alpha_shift=-half), dataclasses.replace(c, alpha_shift=half)]
        owner.append(c.method)
    main = [BASELINE, *cands]
    allc = main + band
    sr = search(ctx, allc, ctx.mid_samples())
    every = points(ctx, allc, sr)
    pts = {p.method: p for p in every[:len(main)]}
    ends = {name: (every[len(main) + 2 * i], every[len(main) + 2 * i + 1]) for i, name in enumerate(owner)}
    out = [pts[NO_SPEC]]
    for name in names:
        if name not in pts:
            out.append(unavailable(ctx, name, missing[name]))
            continue
        if name not in ends:
            out.append(dataclasses.replace(pts[name], usd_per_mtok_low=pts[name].usd_per_mtok,
                                           usd_per_mtok_high=pts[name].usd_per_mtok))
            continue
        lo, hi = ends[name]
        out.append(dataclasses.replace(
            pts[name], usd_per_mtok_low=lo.usd_per_mtok if lo.feasible else math.nan,
            usd_per_mtok_high=hi.usd_per_mtok if hi.feasible else math.nan,
            band_k_tau=tuple((e.k, e.acceptance_length) for e in (lo, hi) if e.feasible)))
    return out


def one_point(ctx: Context, cand: Candidate) -> OperatingPoint:
    """One candidate at its best K and batch for the context's mix (the middle of its alpha range)."""
    return points(ctx, [cand], search(ctx, [cand], ctx.mid_samples()))[0]


def alternatives(ctx: Context) -> list[OperatingPoint]:
    """No speculation at every other TP the hardware offers: the way out of an infeasible baseline."""
    req, out = ctx.req, []
    for tp in TP_OPTIONS:
        if tp == req.tp or tp > ctx.hw.max_tp:
            continue
        c2 = make_context(dataclasses.replace(req, tp=tp), ctx.catalog, ctx.segs)
        p = one_point(c2, BASELINE)
        out.append(dataclasses.replace(p, label=f"no speculation at {'DP' if req.attention_dp else 'TP'}={tp}",
                                       reason=p.reason or f"no speculation on {tp} x {ctx.hw.label}"))
    return out


def plain_tp_options(ctx: Context, *, other_tps: bool) -> list[OperatingPoint]:
    """Where the request runs data-parallel attention: no speculation on plain TP (attention split over the GPUs) at
    the requested TP, and at every other TP when `other_tps` (the requested TP's options miss the SLO); [] otherwise.
    Today's honest configuration is the cheaper of these and data-parallel attention (planner.decision.verdict)."""
    req = ctx.req
    if not req.attention_dp:
        return []
    plain = make_context(dataclasses.replace(req, attention_dp=False), ctx.catalog, ctx.segs)
    out = [one_point(plain, BASELINE)] + (alternatives(plain) if other_tps else [])
    return [dataclasses.replace(p, attention_dp=False, label=f"no speculation on plain TP={p.tp or req.tp}",
                                reason=p.reason or f"no speculation on {p.tp or req.tp} x {ctx.hw.label}, plain TP")
            for p in out]


def operating_point(
    req: PlanRequest,
    catalog: Catalog,
    method: str,
    *,
    ks: Sequence[int] | None = None,
    alpha_shift: float = 0.0,
    draft_cost_factor: float = 1.0,
    tree: bool = False,
    tuned: bool | None = None,
) -> tuple[OperatingPoint, OperatingPoint]:
    """(the method at its best K among `ks` and best batch, no speculation at its own best batch) for a request,
    with lever adjustments; the building block the Claims page and the levers share with plan()."""
    ctx = make_context(req, catalog)
    m = catalog.methods[method]
    ok, why = availability(ctx.model, m)
    if not ok:
        raise PlanError("method", method, why)
    cand = Candidate(method, tuple(ks or range(1, m.max_k + 1)), alpha_shift=alpha_shift,
                     draft_cost_factor=draft_cost_factor, tree=tree, tuned=req.tuned if tuned is None else tuned)
    b, pt = points(ctx, [BASELINE, cand], search(ctx, [BASELINE, cand], ctx.mid_samples()))
    return dataclasses.replace(
        pt, cpm_change_pct=pct(pt.usd_per_mtok, b.usd_per_mtok) if b.feasible and pt.feasible else None
    ), b


def _ttft_meets(ttft_s: np.ndarray, slo_ms: float | None) -> np.ndarray:
    """Per segment: the TTFT at full load meets the TTFT SLO (True without one)."""
    if slo_ms is None:
        return np.ones(np.shape(ttft_s), bool)
    return np.asarray(ttft_s) * 1e3 <= slo_ms * (1 + 1e-12)
