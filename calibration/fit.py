"""Fits (scipy): acceptance per draft position and workload with intervals, and step-time parameters by
bounded least squares with standard errors.

Acceptance: for each (configuration, workload) the counts give, per draft position i,
    unconditional p_i = accepted_per_pos[i] / drafts           (vllm/v1/spec_decode/metrics.py)
    conditional alpha_i = accepted_per_pos[i] / accepted_per_pos[i-1]   (alpha_1 = p_1)
Intervals: Jeffreys (Beta(x + 1/2, n - x + 1/2) quantiles) and Wilson score, both from Brown, Cai &
DasGupta (2001), "Interval Estimation for a Binomial Proportion", Statist. Sci. 16(2).
The interval of tau: where every record carries per-request counts (the measurement protocol stores them),
the ratio-estimator interval over requests (calibration.protocol.acceptance_length_interval: requests are
the independent units); otherwise, since tau = 1 + sum_i prod_{j<=i} alpha_j is increasing in every
alpha_j, from the per-position Jeffreys bounds of alpha (conservative: the bounds are not joint, and
draft-level counts treat correlated drafts as independent).

Step time: `fit_least_squares` wraps scipy.optimize.least_squares with bounds; standard errors from the
Jacobian at the optimum, cov = s^2 (J^T J)^-1 with s^2 = RSS / (m - n) (Gauss-Newton approximation,
as scipy.optimize.curve_fit does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from calibration.records import GroupRecord

Z95 = 1.959963984540054  # two-sided 95 % standard normal quantile


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
    from calibration.protocol import acceptance_length_interval

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
# Bounded least squares with standard errors.
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FitResult:
    """Result of a bounded least-squares fit (like scipy's OptimizeResult, frozen)."""

    names: tuple[str, ...]
    params: tuple[float, ...]
    stderr: tuple[float, ...]  # NaN where the Jacobian is singular or there are no spare points
    residuals: tuple[float, ...]
    success: bool
    message: str
    cost: float  # 0.5 * sum(residual^2)
    n_points: int
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.names, self.params, strict=True))

    def interval(self, name: str, z: float = Z95) -> tuple[float, float]:
        i = self.names.index(name)
        return self.params[i] - z * self.stderr[i], self.params[i] + z * self.stderr[i]

    def to_dict(self) -> dict:
        return {
            "names": list(self.names), "params": list(self.params), "stderr": list(self.stderr),
            "residuals": list(self.residuals), "success": self.success, "message": self.message,
            "cost": self.cost, "n_points": self.n_points, "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, d: dict) -> FitResult:
        return cls(tuple(d["names"]), tuple(d["params"]), tuple(d["stderr"]), tuple(d["residuals"]),
                   bool(d["success"]), d["message"], float(d["cost"]), int(d["n_points"]), d.get("extra", {}))


def _check_array(name: str, arr: np.ndarray, n_params: int) -> None:
    if arr.size == 0:
        raise ValueError(f"{name} is empty: a fit needs data points")
    if not np.all(np.isfinite(arr)):
        bad = arr[~np.isfinite(arr)].flat[0]
        raise ValueError(f"{name} contains {bad!r}: all values must be finite")
    if arr.shape[0] <= n_params:
        raise ValueError(
            f"{name} has {arr.shape[0]} points: too few for {n_params} parameters (need more than {n_params})"
        )


def fit_least_squares(
    residual_fn: Callable[[np.ndarray], np.ndarray],
    *,
    names: Sequence[str],
    p0: Sequence[float],
    lower: Sequence[float],
    upper: Sequence[float],
    n_points: int,
    x_scale: Sequence[float] | str = "jac",
) -> FitResult:
    """Minimise sum(residual_fn(p)^2) within [lower, upper]; residuals should be dimensionless."""
    p0a = np.asarray(p0, float)
    lo, hi = np.asarray(lower, float), np.asarray(upper, float)
    if not (len(names) == p0a.size == lo.size == hi.size):
        raise ValueError(f"names/p0/lower/upper lengths differ: {len(names)}, {p0a.size}, {lo.size}, {hi.size}")
    res = optimize.least_squares(residual_fn, np.clip(p0a, lo, hi), bounds=(lo, hi), x_scale=x_scale,
                                 method="trf")
    m, n = res.fun.size, res.x.size
    stderr = np.full(n, math.nan)
    if m > n:
        s2 = float(res.fun @ res.fun) / (m - n)
        jtj = res.jac.T @ res.jac
        try:
            cov = np.linalg.inv(jtj) * s2
            d = np.diag(cov)
            stderr = np.where(d >= 0, np.sqrt(np.abs(d)), math.nan)
        except np.linalg.LinAlgError:
            pass
    return FitResult(
        names=tuple(names), params=tuple(float(x) for x in res.x), stderr=tuple(float(x) for x in stderr),
        residuals=tuple(float(x) for x in res.fun), success=bool(res.success), message=str(res.message),
        cost=float(res.cost), n_points=n_points,
    )
