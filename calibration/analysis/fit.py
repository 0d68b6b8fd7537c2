"""Fits (scipy): acceptance per draft position and workload with intervals, and step-time parameters by
bounded least squares with standard errors.

Acceptance: for each (configuration, workload) the counts give, per draft position i,
    unconditional p_i = accepted_per_pos[i] / drafts           (vllm/v1/spec_decode/metrics.py)
    conditional alpha_i = accepted_per_pos[i] / accepted_per_pos[i-1]   (alpha_1 = p_1)
Intervals: Jeffreys (Beta(x + 1/2, n - x + 1/2) quantiles) and Wilson score, both from Brown, Cai &
DasGupta (2001), "Interval Estimation for a Binomial Proportion", Statist. Sci. 16(2).
The interval of tau: where every record carries per-request counts (the measurement protocol stores them),
the ratio-estimator interval over requests (calibration.harness.protocol.acceptance_length_interval: requests are
the independent units); otherwise, since tau = 1 + sum_i prod_{j<=i} alpha_j is increasing in every
alpha_j, from the per-position Jeffreys bounds of alpha (conservative: the bounds are not joint, and
draft-level counts treat correlated drafts as independent).

Step time: `fit_least_squares` is calibration/fitting/core.py's bounded least squares (one for every fit of the
project): standard errors from the Jacobian at the optimum, and a parameter the data does not identify held at
its prior instead of shipped with an unbounded error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from calibration.fitting.core import Z95, FitResult, least_squares
from calibration.storage.records import GroupRecord

__all__ = ["Z95", "AcceptanceFit", "FitResult", "fit_acceptance", "fit_least_squares", "jeffreys_interval",
           "wilson_interval"]


def _check_counts(successes: int, trials: int, field_name: str) -> None:
    if trials < 0 or successes < 0 or successes > trials:
        raise ValueError(f"{field_name}: successes={successes}, trials={trials} not allowed: need 0 <= x <= n")


def jeffreys_interval(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Equal-tailed Jeffreys interval; (nan, nan) without trials. Ends pinned at 0 / 1 when x = 0 / n
    (Brown et al. 2001, section 4.1.2)."""
    _check_counts(successes, trials, "jeffreys_interval")
    if trials == 0:
        return math.nan, math.nan
    a = (1.0 - level) / 2.0
    lo = 0.0 if successes == 0 else float(stats.beta.ppf(a, successes + 0.5, trials - successes + 0.5))
    hi = 1.0 if successes == trials else float(stats.beta.ppf(1 - a, successes + 0.5, trials - successes + 0.5))
    return lo, hi


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval (Brown et al. 2001, eq. 4)."""
    _check_counts(successes, trials, "wilson_interval")
    if trials == 0:
        return math.nan, math.nan
    p = successes / trials
    denom = 1.0 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class AcceptanceFit:
    config_label: str
    workload: str
    method: str
    k: int
    num_drafts: int
    p_per_pos: tuple[float, ...]  # unconditional
    p_low: tuple[float, ...]  # Jeffreys 95 %
    p_high: tuple[float, ...]
    p_wilson_low: tuple[float, ...]
    p_wilson_high: tuple[float, ...]
    alpha_per_pos: tuple[float, ...]  # conditional
    alpha_low: tuple[float, ...]
    alpha_high: tuple[float, ...]
    acceptance_length: float  # tau, bonus token included
    acceptance_length_low: float
    acceptance_length_high: float
    draft_acceptance_rate: float  # vLLM's accepted / drafted, a fraction
    num_requests: int = 0  # requests with per-request counts (0: draft-level counts only)
    interval_method: str = "jeffreys-per-position"  # or "ratio-over-requests"

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


def fit_acceptance(records: Sequence[GroupRecord]) -> list[AcceptanceFit]:
    """Pool the counts of records with the same (configuration, workload) and fit each pool."""
    from calibration.harness.protocol import acceptance_length_interval

    pools: dict[tuple[str, str], list[GroupRecord]] = {}
    for r in records:
        if r.method == "none" or r.status != "finished":  # warm-up groups are never fitted
            continue
        pools.setdefault((r.config_label, r.workload), []).append(r)
    if not pools:
        raise ValueError("records: no speculative records (method != 'none') to fit acceptance on")
    out = []
    for (label, workload), recs in sorted(pools.items()):
        k = max(r.k for r in recs)
        drafts = sum(r.counts.num_drafts for r in recs)
        if drafts == 0:
            raise ValueError(f"num_drafts=0 for config={label!r}, workload={workload!r}: nothing was drafted")
        per_pos = [0] * k
        for r in recs:
            for i, a in enumerate(r.counts.accepted_per_pos[:k]):
                per_pos[i] += a
        accepted = sum(r.counts.num_accepted_tokens for r in recs)
        draft_tokens = sum(r.counts.num_draft_tokens for r in recs)
        p = [x / drafts for x in per_pos]
        jl, jh, wl, wh = [], [], [], []
        for x in per_pos:
            lo, hi = jeffreys_interval(x, drafts)
            jl.append(lo)
            jh.append(hi)
            lo, hi = wilson_interval(x, drafts)
            wl.append(lo)
            wh.append(hi)
        alpha, al, ah = [], [], []
        prev = drafts
        for x in per_pos:
            # A draft position is only tried when all earlier ones were accepted: x_i <= x_{i-1}.
            x = min(x, prev)
            if prev == 0:
                alpha.append(math.nan)
                al.append(0.0)
                ah.append(1.0)
            else:
                alpha.append(x / prev)
                lo, hi = jeffreys_interval(x, prev)
                al.append(lo)
                ah.append(hi)
            prev = x
        tau = 1.0 + accepted / drafts
        tau_lo = 1.0 + float(np.sum(np.cumprod(al)))
        tau_hi = 1.0 + float(np.sum(np.cumprod(ah)))
        n_req, method = 0, "jeffreys-per-position"
        if all("request_drafts" in r.extra for r in recs):
            req_d = [d for r in recs for d in r.extra["request_drafts"]]
            req_a = [a for r in recs for a in r.extra["request_accepted"]]
            iv = acceptance_length_interval(req_d, req_a)
            if math.isfinite(iv.half_width):
                tau_lo, tau_hi, n_req, method = iv.low, iv.high, iv.num_requests, "ratio-over-requests"
        out.append(AcceptanceFit(
            config_label=label, workload=workload, method=recs[0].method, k=k, num_drafts=drafts,
            p_per_pos=tuple(p), p_low=tuple(jl), p_high=tuple(jh), p_wilson_low=tuple(wl),
            p_wilson_high=tuple(wh), alpha_per_pos=tuple(alpha), alpha_low=tuple(al), alpha_high=tuple(ah),
            acceptance_length=tau, acceptance_length_low=tau_lo, acceptance_length_high=tau_hi,
            draft_acceptance_rate=accepted / draft_tokens if draft_tokens else math.nan,
            num_requests=n_req, interval_method=method,
        ))
    return out


# ---------------------------------------------------------------------------------------------------
# Bounded least squares with standard errors: the one of calibration/fitting/core.py.
# ---------------------------------------------------------------------------------------------------
def fit_least_squares(
    residual_fn: Callable[[np.ndarray], np.ndarray],
    *,
    names: Sequence[str],
    p0: Sequence[float],
    lower: Sequence[float],
    upper: Sequence[float],
    n_points: int,
    x_scale: Sequence[float] | None = None,
    priors: Mapping[str, tuple[float, str]] | None = None,
) -> FitResult:
    """Minimise sum(residual_fn(p)^2) within [lower, upper] (core.least_squares): residuals dimensionless, x_scale
    each parameter's typical magnitude; a parameter the data does not identify is held at its prior (default: its
    start value, e.g. the microbenchmark's eta_bw for the engine fit) and named in FitResult.held. Raises when the
    points cannot identify the parameters at all."""
    if n_points <= 0:
        raise ValueError(f"n_points={n_points}: a fit needs data points")
    return least_squares(residual_fn, names=names, p0=p0, lower=lower, upper=upper, x_scale=x_scale, priors=priors,
                         n_points=n_points)
