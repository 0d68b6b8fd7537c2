"""Monte Carlo over the alpha ranges and price ranges (seeded, reproducible).

Sampling: alpha uniform within the method's range (default or tuned; per-token, position 1, shifted
for workload and language as on every page), $/GPU-hour uniform within the hardware's list range (or
fixed at the entered price), one-time cost uniform within its range.
Evaluation: CPM is smooth and monotone in alpha, so it is computed exactly on a grid of N_ALPHA_GRID
alphas across the range and interpolated per sample; CPM is linear in $/GPU-hour at a fixed best batch
(CPM = GPUs x $/GPU-hour x 1e6 / (3600 x tokens/s), DESIGN.md), so price scales it per sample.
"""

from __future__ import annotations

import numpy as np

from views import _model as mdl

N_ALPHA_GRID = 17  # grid points across the alpha range; interpolation error << the range itself


def cpm_over_alpha(inp: mdl.PlanInputs, method: str, mix: mdl.Mix, catalog, *, cap=None,
                   baseline=None) -> tuple[np.ndarray, np.ndarray]:
    """(u in [0, 1] across the alpha range, blended CPM at the entered price)."""
    m = catalog.methods[method]
    rng = m.alpha_tuned if inp.tuned else m.alpha_default
    u = np.linspace(0.0, 1.0, N_ALPHA_GRID)
    cpm = np.array([
        mdl.method_row(inp, method, mix, catalog, cap=cap, alpha_shift_extra=float((x - 0.5) * (rng.high - rng.low)),
                       baseline=baseline)["usd_per_mtok"]
        for x in u])
    return u, cpm


def monte_carlo(inp: mdl.PlanInputs, mix: mdl.Mix, catalog, *, method: str, samples: int, seed: int,
                sample_price: bool, cap=None) -> dict:
    hw = catalog.hardware[inp.hardware]
    gen = np.random.default_rng(seed)
    n = int(samples)
    u_s = gen.uniform(0.0, 1.0, n)
    price = gen.uniform(hw.usd_per_gpu_hour_low, hw.usd_per_gpu_hour_high, n) if sample_price \
        else np.full(n, inp.usd_per_gpu_hour)
    scale = price / inp.usd_per_gpu_hour if inp.usd_per_gpu_hour > 0 else np.zeros(n)
    base = mdl.baseline_for_mix(inp, mix, catalog, cap)
    per_method = {}
    for name in catalog.methods:
        ok, _ = catalog.method_available(name, inp.model)
        if not ok:
            continue
        u, cpm = cpm_over_alpha(inp, name, mix, catalog, cap=cap, baseline=base)
        per_method[name] = np.interp(u_s, u, cpm) * scale
    cur = inp.current_method
    cur_cpm = per_method[cur] if cur in per_method else base["usd_per_mtok"] * scale
    one_lo, one_hi = mdl.one_time_range_usd(method, catalog) if method != cur else (0.0, 0.0)
    one = gen.uniform(one_lo, one_hi, n) if one_hi > one_lo else np.full(n, one_lo)
    saving = (cur_cpm - per_method[method]) * inp.monthly_output_tokens / 1e6
    horizon = int(catalog.prices["horizon_months"])
    months = np.arange(0, horizon + 1)
    cumulative = saving[None, :] * months[:, None] - one[None, :]
    with np.errstate(divide="ignore"):
        payback = np.where(saving > 0, one / np.where(saving > 0, saving, 1.0), np.inf)
    return {
        "method": method, "samples": n, "seed": seed, "price": price, "alpha_u": u_s,
        "cpm": per_method, "current_cpm": cur_cpm, "monthly_saving_usd": saving, "one_time_usd": one,
        "months": months,
        "cumulative_p05": np.percentile(cumulative, 5, axis=1),
        "cumulative_p50": np.percentile(cumulative, 50, axis=1),
        "cumulative_p95": np.percentile(cumulative, 95, axis=1),
        "saving_p05": float(np.percentile(saving, 5)), "saving_p50": float(np.percentile(saving, 50)),
        "saving_p95": float(np.percentile(saving, 95)),
        "p_payback_within_horizon": float(np.mean(payback <= horizon)),
        "p_saves": float(np.mean(saving > 0)), "horizon_months": horizon,
    }
