"""How sure we are: a tornado of CPM drivers and a Monte Carlo, both on the
same vectorised search that plan() uses (planner.search.grid), so they agree with the headline by construction.

Uncertain inputs and their ranges (assumptions, dated):
- acceptance: uniform over the method's alpha range (default or tuned; per-token, position 1) - seed article;
- $/GPU-hour: uniform over the hardware's list range (profiles/data/hardware.yaml), only when the request asks for it
  (price_range) and never over a price the user entered;
- weight-streaming efficiency eta_bw 0.60-0.85 and GEMM efficiency eta_flops 0.45-0.75: the span NVIDIA's
  aiconfigurator kernel database measures on H100 from batch 256 to batch 1 (read 2026-11-30);
- fixed time per step x0.5-x2 around the hardware's value (no measurement yet; an assumption).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from planner.acceptance.tiers import one_time_usd
from planner.context import (
    BASELINE,
    SAMPLED_SPEC_FIELDS,
    Candidate,
    Context,
    Samples,
    make_context,
)
from planner.fleet import monthly_bill_usd
from planner.money.sizing import plan_fleet
from planner.physics.engines import with_speedup_error
from planner.price import gpu_price
from planner.request import NO_SPEC, PlanError, PlanRequest, TrafficSegment
from planner.search.batch_sweeps import method_candidates
from planner.search.grid import blended_cpm, search
from planner.search.points import points
from planner.types import Catalog

ETA_BW_RANGE = (0.60, 0.85)  # aiconfigurator GEMMs at batch 256 .. batch 1 on H100 (read 2026-11-30)
ETA_FLOPS_RANGE = (0.45, 0.75)  # same source; compute efficiency of decode GEMMs
T_FIXED_FACTOR_RANGE = (0.5, 2.0)  # assumption (2026-11-30): per-step overhead not yet fitted
MAPE_TO_SIGMA = 1.2533  # sqrt(pi / 2): a normal error's standard deviation from its mean absolute value


def fit_sigma(catalog: Catalog, hardware: str, dtype: str) -> float | None:
    """The step-time fit's relative uncertainty (one sigma) for a (hardware, dtype), from its held-out TPOT error
    (a GPU without kernel data that borrows a fitted GPU's terms: the borrowed fit's leave-one-out error or stated
    band, planner/physics/borrowed.py); None where the hardware runs on assumed efficiencies (no fit)."""
    err = (getattr(catalog, "fitted_tpot_error", None) or {}).get((hardware, dtype))
    return None if err is None else float(err) * MAPE_TO_SIGMA


UNCERTAINTY_SOURCE = (
    "alpha: seed article ranges (2026-04-15); price: hardware list range; step time: the fit's held-out TPOT error "
    "where the hardware is fitted to aiconfigurator kernels or borrows a fitted GPU's terms (log-normal), else "
    "eta_bw 0.60-0.85 and eta_flops "
    "0.45-0.75 (aiconfigurator H100 kernel span, 2026-11-30); fixed step time x0.5-x2: assumption (2026-11-30); "
    "speculation overheads (per-step time, sampler passes): the published-speedup fit's standard errors, drawn "
    "independently (normal, cut at 0; tools/fit_speculation.py)"
)


def spec_sigma(catalog: Catalog, eff) -> dict[str, float]:
    """{field: one-sigma standard error} of the speculation overheads `eff` runs with, from the published-speedup
    fit; empty where a calibration measured them (they are not the published fit's then) or there is no fit."""
    if getattr(eff, "calibrated", False):
        return {}
    se = getattr(catalog, "fitted_speculation_stderr", None) or {}
    return {n: float(se[n]) for n in SAMPLED_SPEC_FIELDS if n in se and se[n] > 0}


# ---------------------------------------------------------------------------------------------------
# Tornado and Monte Carlo: the saving against no speculation, both re-evaluated under each draw
# ---------------------------------------------------------------------------------------------------


def _samples(*, alpha_u, eta_bw, eta_flops, t_fixed_s, price, spec=None) -> Samples:
    """spec: {Efficiency speculation field: values} to draw (SAMPLED_SPEC_FIELDS); None keeps the plan's."""
    spec = spec or {}
    n = max(np.size(x) for x in (alpha_u, eta_bw, eta_flops, t_fixed_s, price, *spec.values()))

    def full(x):
        return np.broadcast_to(np.asarray(x, float), (n,)).copy()

    return Samples(full(alpha_u), full(eta_bw), full(eta_flops), full(t_fixed_s), full(price),
                     **{k: full(v) for k, v in spec.items()})


def _cut_and_saving(ctx: Context, cands, smp: Samples) -> tuple[np.ndarray, np.ndarray]:
    """(the method's CPM change % vs no speculation, the monthly saving of its fleet's bill vs no speculation's
    under the request's billing) per sample; sample 0 (the middle) sizes both fleets, the other samples scale their
    replica capacity (bill_draws). nan where either cannot serve."""
    sr = search(ctx, cands, smp)
    cpm, _ = blended_cpm(ctx, cands, sr)  # tornado ends: one driver at a time, no speedup-error draw
    pts = points(ctx, cands, sr, n=0)
    fleet = plan_fleet(ctx, pts)
    have = {c.method for c in fleet.configs} if fleet is not None else set()
    cfgs = [fleet.config(p.method) if p.method in have else None for p in pts]
    fixed = ctx.req.billing == "fixed"
    first = [(c.usd_per_month_fixed if fixed else c.usd_per_month_autoscaled) if c is not None and c.feasible
             else np.inf for c in cfgs]
    draws = bill_draws(cfgs, gpus_per_replica=ctx.tp, billing=ctx.req.billing, cpm=cpm,
                       price=np.asarray(smp.usd_per_gpu_hour, float))
    ref, new = np.r_[first[0], draws[0]], np.r_[first[1], draws[1]]
    with np.errstate(invalid="ignore"):
        saving = np.where(np.isfinite(ref) & np.isfinite(new), ref - new, np.nan)
    return (cpm[:, 1] / cpm[:, 0] - 1.0) * 100.0, saving


@dataclass(frozen=True)
class TornadoBar:
    driver: str
    range: str
    low_cpm_change_pct: float  # the method's CPM change vs no speculation with the driver at its low end
    high_cpm_change_pct: float
    mid_cpm_change_pct: float
    swing_pct: float
    # the money: the method's fleet bill saving vs no speculation's (planner.money.bill, the request's billing), $/month
    low_saving_usd: float = math.nan
    high_saving_usd: float = math.nan
    mid_saving_usd: float = math.nan
    saving_swing_usd: float = math.nan


def tornado(req: PlanRequest, catalog: Catalog, method: str) -> list[TornadoBar]:
    """The method's CPM change against no speculation (both at their own best batch under the SLO), and the monthly
    saving of its fleet's bill against no speculation's, when one driver moves to its low / high end, the others at
    their middle; sorted by the CPM swing (smallest first). The price moves only when the request asks for the list
    range and never over an entered price."""
    ctx = make_context(req, catalog)
    hw, eff = ctx.hw, ctx.eff
    cands = method_candidates(ctx, method)
    sigma = fit_sigma(catalog, req.hardware, req.dtype)
    u = [0.5, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    if sigma is None:  # assumed efficiencies: the measured span of kernel efficiencies
        bw = [eff.eta_bw] * 3 + [ETA_BW_RANGE[0], ETA_BW_RANGE[1]] + [eff.eta_bw] * 6
        fl = [eff.eta_flops] * 5 + [ETA_FLOPS_RANGE[0], ETA_FLOPS_RANGE[1]] + [eff.eta_flops] * 4
    else:  # fitted: the fit's own error, +-2 sigma on the bandwidth and compute terms
        lo_f, hi_f = np.exp(-2 * sigma), np.exp(2 * sigma)
        # an efficiency never exceeds the peak
        bw = [eff.eta_bw] * 3 + [eff.eta_bw * lo_f, min(1.0, eff.eta_bw * hi_f)] + [eff.eta_bw] * 6
        fl = [eff.eta_flops] * 5 + [eff.eta_flops * lo_f, min(1.0, eff.eta_flops * hi_f)] + [eff.eta_flops] * 4
    tf = (
        [eff.t_fixed_s] * 7
        + [eff.t_fixed_s * T_FIXED_FACTOR_RANGE[0], eff.t_fixed_s * T_FIXED_FACTOR_RANGE[1]]
        + [eff.t_fixed_s] * 2
    )
    pr = [ctx.price] * 9 + [hw.usd_per_gpu_hour_low, hw.usd_per_gpu_hour_high]
    ssig = spec_sigma(catalog, eff)
    spec = {}
    if ssig:  # two more points: every fitted speculation overhead at -2 / +2 sigma together (cut at 0)
        u, bw, fl, tf, pr = (x + [x[0]] * 2 for x in (u, bw, fl, tf, pr))
        spec = {n: [getattr(eff, n)] * 11 + [max(0.0, getattr(eff, n) - 2 * ssig[n]), getattr(eff, n) + 2 * ssig[n]]
                for n in ssig}
    cut, sav = _cut_and_saving(ctx, cands, _samples(alpha_u=u, eta_bw=bw, eta_flops=fl, t_fixed_s=tf, price=pr,
                                                    spec=spec))
    mid, mid_sav = float(cut[0]), float(sav[0])
    rng = catalog.methods[method].alpha_tuned if req.tuned else catalog.methods[method].alpha_default
    bars = [
        ("Acceptance (method's alpha range)", f"alpha {rng.low:.2f} .. {rng.high:.2f}", 1, 2),
        ("Weight-streaming efficiency eta_bw", f"{bw[3]:.2f} .. {bw[4]:.2f}" + (
            "" if sigma is None else f" (fit +-2 sigma, {sigma * 100:.0f} % each)"), 3, 4),
        ("GEMM efficiency eta_flops", f"{fl[5]:.2f} .. {fl[6]:.2f}", 5, 6),
        (
            "Fixed time per step",
            f"{eff.t_fixed_s * 1e3 * T_FIXED_FACTOR_RANGE[0]:.2g} .. "
            f"{eff.t_fixed_s * 1e3 * T_FIXED_FACTOR_RANGE[1]:.2g} ms",
            7,
            8,
        ),
        (
            "$/GPU-hour (list range)",
            f"${hw.usd_per_gpu_hour_low:.2f} .. ${hw.usd_per_gpu_hour_high:.2f}",
            9,
            10,
        ),
    ]
    bars = [(d, r, (cut[i], sav[i]), (cut[j], sav[j])) for d, r, i, j in bars]
    if not (req.price_range and not gpu_price(hw, req.usd_per_gpu_hour).entered):  # asked for, and never if entered
        bars = [b for b in bars if not b[0].startswith("$/GPU-hour")]
    if sigma is not None:  # the fit's error covers the fixed time (fitted near 0 where a per-layer cost took it)
        bars = [b for b in bars if not b[0].startswith("Fixed time per step")]
    if ssig:
        fmt = {"t_spec_s": lambda lo, hi: f"{lo * 1e3:.2f} .. {hi * 1e3:.2f} ms per step",
               "sampler_vocab_passes": lambda lo, hi: f"{lo:.0f} .. {hi:.0f} vocabulary passes per drafted token"}
        rng = ", ".join(fmt[n](spec[n][11], spec[n][12]) for n in ssig)
        bars.append(("Speculation overheads (published fit +-2 sigma)", rng, (cut[11], sav[11]), (cut[12], sav[12])))
    one = _samples(
        alpha_u=0.5, eta_bw=eff.eta_bw, eta_flops=eff.eta_flops, t_fixed_s=eff.t_fixed_s, price=ctx.price
    )

    def cut_for(req2: PlanRequest, tuned: bool | None = None) -> tuple[float, float]:
        c2 = make_context(req2, catalog)
        c, v = _cut_and_saving(c2, method_candidates(c2, method, tuned=tuned), one)
        return float(c[0]), float(v[0])

    segs = ctx.segs

    def scaled(attr: str, f: float) -> tuple[TrafficSegment, ...]:
        lim = ctx.model.max_context_tokens
        return tuple(dataclasses.replace(s, **{attr: min(max(1.0, getattr(s, attr) * f), lim / 2)}) for s in segs)

    bars += [
        (
            "TPOT SLO",
            f"{req.tpot_slo_ms / 2:g} .. {req.tpot_slo_ms * 2:g} ms",
            cut_for(dataclasses.replace(req, tpot_slo_ms=req.tpot_slo_ms / 2)),
            cut_for(dataclasses.replace(req, tpot_slo_ms=req.tpot_slo_ms * 2)),
        ),
        (
            "Prompt length",
            "x0.5 .. x2",
            cut_for(dataclasses.replace(req, segments=scaled("prompt_tokens", 0.5))),
            cut_for(dataclasses.replace(req, segments=scaled("prompt_tokens", 2.0))),
        ),
        (
            "Output length",
            "x0.5 .. x2",
            cut_for(dataclasses.replace(req, segments=scaled("output_tokens", 0.5))),
            cut_for(dataclasses.replace(req, segments=scaled("output_tokens", 2.0))),
        ),
        ("Draft heads tuned on the domain", "default .. tuned", cut_for(req, tuned=False), cut_for(req, tuned=True)),
    ]
    out = [
        TornadoBar(d, r, float(lo), float(hi), mid, float(abs(hi - lo)) if np.isfinite(hi - lo) else math.inf,
                   float(lo_s), float(hi_s), mid_sav,
                   float(abs(hi_s - lo_s)) if np.isfinite(hi_s - lo_s) else math.inf)
        for d, r, (lo, lo_s), (hi, hi_s) in bars
    ]
    return sorted(out, key=lambda t: t.swing_pct if math.isfinite(t.swing_pct) else 1e9)


@dataclass(frozen=True)
class MonteCarlo:
    method: str
    k: int
    samples: int
    seed: int
    monthly_saving_usd: np.ndarray  # vs the plan's reference ("today"), per sample
    one_time_usd: np.ndarray
    cpm_change_pct: np.ndarray  # vs no speculation re-evaluated under the same draw
    method_usd_per_mtok: np.ndarray
    reference_usd_per_mtok: np.ndarray
    months: np.ndarray
    cumulative_p05: np.ndarray
    cumulative_p50: np.ndarray
    cumulative_p95: np.ndarray
    saving_p05: float
    saving_p50: float
    saving_p95: float
    p_saves: float
    p_payback_within_horizon: float
    horizon_months: int
    source: str = UNCERTAINTY_SOURCE
    reference_bill_usd_per_month: np.ndarray | None = None  # per draw, the fleets' bills the saving comes from
    method_bill_usd_per_month: np.ndarray | None = None
    price_drawn: bool = False  # $/GPU-hour drawn from the list range (only when asked, never over an entered price)
    billing: str = "autoscaled"


def monte_carlo(
    req: PlanRequest,
    catalog: Catalog,
    method: str,
    *,
    k: int,
    samples: int = 400,
    seed: int = 7,
    sample_price: bool | None = None,
    sample_hardware: bool = True,
) -> MonteCarlo:
    """Seeded draws of acceptance, step-time efficiencies (optionally) and the price (only when asked: sample_price,
    None = the request's price_range; never over a price the user entered); the method at the plan's K (a
    deployment fixes K) and today's configuration both re-evaluated at their own best batch per draw, and the
    monthly saving from their fleets' bills (planner.money.bill) under the request's billing: each draw's replica
    capacity is the plan's, scaled by that draw's full-load throughput, so the draw at the middle of every range
    is the plan's own fleet."""
    if not (10 <= samples <= 20_000):
        raise PlanError("samples", samples, "10 to 20,000 draws")
    ctx = make_context(req, catalog)
    gen = np.random.default_rng(seed)
    n = int(samples)
    smp, draw_price = seeded_samples(ctx, gen, n, sample_price=sample_price, sample_hardware=sample_hardware)
    cur = req.current_method
    cands = [BASELINE, Candidate(method, (k,), tuned=req.tuned)]
    if cur != NO_SPEC and cur != method:
        cands.append(Candidate(cur, tuple(range(1, catalog.methods[cur].max_k + 1)), tuned=req.tuned))
    sr = search(ctx, cands, smp)
    cpm = with_speedup_error(ctx, cands, blended_cpm(ctx, cands, sr)[0])  # the class's held-out speedup error
    ref_i = 0 if cur == NO_SPEC else (1 if cur == method else 2)
    pts = points(ctx, cands, sr, n=0)
    fleet = plan_fleet(ctx, [pts[ref_i], pts[1]])
    cfgs = [fleet.config(cands[i].method) if fleet is not None and pts[i].feasible else None for i in (ref_i, 1)]
    bills = bill_draws(cfgs, gpus_per_replica=ctx.tp, billing=req.billing, cpm=cpm[:, [ref_i, 1]],
                       price=smp.usd_per_gpu_hour)
    b_cpm, m_cpm, r_cpm = cpm[1:, 0], cpm[1:, 1], cpm[1:, ref_i]
    lo, hi = one_time_usd(ctx, catalog.methods[method]) if method != cur else (0.0, 0.0)
    one = gen.uniform(lo, hi, n) if hi > lo else np.full(n, lo)
    with np.errstate(invalid="ignore"):
        saving = np.nan_to_num(bills[0] - bills[1], nan=0.0, posinf=0.0, neginf=0.0)
    horizon = ctx.costs.horizon_months
    months = np.arange(0, horizon + 1)
    cumulative = saving[None, :] * months[:, None] - one[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        payback = np.where(saving > 0, one / np.where(saving > 0, saving, 1.0), np.inf)
    return MonteCarlo(
        method=method,
        k=k,
        samples=n,
        seed=seed,
        monthly_saving_usd=saving,
        one_time_usd=one,
        cpm_change_pct=(m_cpm / b_cpm - 1.0) * 100.0,
        method_usd_per_mtok=m_cpm,
        reference_usd_per_mtok=r_cpm,
        months=months,
        cumulative_p05=np.percentile(cumulative, 5, axis=1),
        cumulative_p50=np.percentile(cumulative, 50, axis=1),
        cumulative_p95=np.percentile(cumulative, 95, axis=1),
        saving_p05=float(np.percentile(saving, 5)),
        saving_p50=float(np.percentile(saving, 50)),
        saving_p95=float(np.percentile(saving, 95)),
        p_saves=float(np.mean(saving > 0)),
        p_payback_within_horizon=float(np.mean(payback <= horizon)),
        horizon_months=horizon,
        reference_bill_usd_per_month=bills[0],
        method_bill_usd_per_month=bills[1],
        price_drawn=bool(draw_price),
        billing=req.billing,
    )


def _draws(ctx: Context, gen: np.random.Generator, n: int, *, sample_price: bool | None, sample_hardware: bool):
    """(alpha position, eta_bw, eta_flops, fixed step time, $/GPU-hour, speculation overheads, price drawn?) for n
    draws: the price only when asked (sample_price; None = the request's price_range), never over an entered one."""
    req, hw, eff, catalog = ctx.req, ctx.hw, ctx.eff, ctx.catalog
    u = gen.uniform(0.0, 1.0, n)
    draw_price = bool((req.price_range if sample_price is None else sample_price)
                      and not gpu_price(hw, req.usd_per_gpu_hour).entered)
    price = gen.uniform(hw.usd_per_gpu_hour_low, hw.usd_per_gpu_hour_high, n) if draw_price else np.full(n, ctx.price)
    sigma = fit_sigma(catalog, req.hardware, req.dtype)
    if sample_hardware and sigma is not None:
        # fitted step time: the bandwidth and compute terms drawn from the fit's held-out error (log-normal)
        f = np.exp(gen.normal(0.0, sigma, n))
        bw, fl = np.minimum(1.0, eff.eta_bw / f), np.minimum(1.0, eff.eta_flops / f)
        tf = np.full(n, eff.t_fixed_s)
    elif sample_hardware:
        bw = gen.uniform(*ETA_BW_RANGE, n)
        fl = gen.uniform(*ETA_FLOPS_RANGE, n)
        tf = eff.t_fixed_s * np.exp(gen.uniform(*np.log(T_FIXED_FACTOR_RANGE), n))
    else:
        bw, fl, tf = (np.full(n, v) for v in (eff.eta_bw, eff.eta_flops, eff.t_fixed_s))
    # the speculation overheads from their published fit's standard errors (independent normals, cut at 0)
    spec = ({k: np.maximum(0.0, gen.normal(getattr(eff, k), se, n)) for k, se in spec_sigma(catalog, eff).items()}
            if sample_hardware else {})
    return u, bw, fl, tf, price, spec, draw_price


def seeded_samples(ctx: Context, gen: np.random.Generator, n: int, *, sample_price: bool | None = None,
                   sample_hardware: bool = True) -> tuple[Samples, bool]:
    """(n + 1 samples, price drawn?): draw 0 is the plan's own (the middle of every range, where fleets are sized),
    draws 1..n from _draws; the Monte Carlo and the levers' payback probability share it."""
    eff, mid = ctx.eff, ctx.mid_samples()
    u, bw, fl, tf, price, spec, draw_price = _draws(ctx, gen, n, sample_price=sample_price,
                                                    sample_hardware=sample_hardware)
    return _samples(alpha_u=np.r_[mid.alpha_u, u], eta_bw=np.r_[eff.eta_bw, bw], eta_flops=np.r_[eff.eta_flops, fl],
                    t_fixed_s=np.r_[eff.t_fixed_s, tf], price=np.r_[ctx.price, price],
                    spec={f: np.r_[getattr(eff, f), v] for f, v in spec.items()}), draw_price


def bill_draws(cfgs, *, gpus_per_replica: int, billing: str, cpm: np.ndarray, price: np.ndarray
               ) -> list[np.ndarray]:
    """Per fleet configuration (planner.fleet.FleetPlan sized at draw 0, None: none) its bill per draw 1..N.
    cpm: (N + 1, C) full-load CPM per draw and configuration; price: (N + 1,) $/GPU-hour. A draw's replica capacity
    each hour is draw 0's times that draw's full-load throughput over draw 0's (throughput ~ $/GPU-hour / CPM, the
    GPUs per replica being the same), the replicas ceil(arrivals / capacity), at least one; inf where the
    configuration cannot serve the draw."""
    out = []
    for c, cfg in enumerate(cfgs):
        thr = price / cpm[:, c]  # proportional to output tokens/s of one replica at full load
        if cfg is None or not cfg.feasible or not np.isfinite(thr[0]):
            out.append(np.full(len(price) - 1, np.inf))
            continue
        ratio = np.where(np.isfinite(thr[1:]), thr[1:] / thr[0], 0.0)  # 0: the draw cannot serve (infeasible)
        lam = np.array([h.requests_per_s for h in cfg.hours])
        cap = np.array([h.capacity_requests_per_s for h in cfg.hours])
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.maximum(1.0, np.ceil(lam[None, :] / (cap[None, :] * ratio[:, None]) * (1.0 - 1e-12)))
        gpus = r * gpus_per_replica
        usd = monthly_bill_usd(gpus, billing=billing, usd_per_gpu_hour=price[1:])
        out.append(np.where(ratio > 0, usd, np.inf))
    return out


PLAN_MC_SAMPLES = 100  # the draws behind the Plan's P(saving > 0); the Sensitivity page starts from the same
PLAN_MC_SEED = 7
