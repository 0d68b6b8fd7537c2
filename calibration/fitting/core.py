"""One bounded least squares and one FitResult for every fit of the project (kernel step time, speculation
overheads, engine calibration, tree sibling model).

A fit here reproduces on any machine: a parameter the data does not identify is held at a stated prior
instead of being shipped as a free value whose end point depends on the BLAS build. After each solve the
free parameters are checked, and the first failing ones are held and the rest re-fitted:

1. on a bound: the constrained optimum puts it at the bound (a time term driven to 0, an efficiency at 1);
   it is held at that bound, exactly (no 1e-33 left by the solver);
2. rank-deficient Jacobian or a zero column: the data does not move it; held at its prior;
3. relative standard error above REL_STDERR_MAX: the data cannot tell it from zero at one standard error;
   held at its prior, the worst first, one at a time.

Priors: the caller's (value, why) per parameter, else its start value. The held ones are in
FitResult.held as {name: "prior: <why>"} with no standard error.

The solve is made well posed: variables scaled by fixed typical magnitudes (never by the Jacobian, which
carries the machine's rounding), a deterministic start clipped inside the bounds, tight tolerances.
Standard errors from the Jacobian at the optimum: cov = s^2 (J^T J)^-1 with s^2 = RSS / (m - n)
(Gauss-Newton approximation, as scipy.optimize.curve_fit does); NaN with no spare points.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

Z95 = 1.959963984540054  # two-sided 95 % standard normal quantile
# A free parameter whose standard error exceeds this share of its value is not identified.
REL_STDERR_MAX = 1.0
# Distance to a bound, as a share of the bound interval (or of the scale when unbounded), that counts as on it.
BOUND_RTOL = 1e-6
# Singular values below this share of the largest: the Jacobian is rank deficient in their directions. The solver's
# Jacobian is finite-differenced (~sqrt(eps) relative noise): a pair the data sees only as a sum showed 5e-9 of the
# largest on an AMD EPYC, which a 1e-9 threshold took for data; 1e-6 is well above that noise, and both shipped fits
# hold the same parameters with it (--check).
RANK_RTOL = 1e-6
TOL = 1e-12  # ftol, xtol, gtol of scipy.optimize.least_squares
MAX_NFEV = 4000


@dataclass(frozen=True)
class FitResult:
    """A least-squares fit: every parameter (free and held) in the caller's order, its standard error (same units;
    NaN for a held one or without spare points), the residuals the fit minimised (or the relative errors, for
    fit_relative), and which parameters are held at a prior and why."""

    names: tuple[str, ...]
    params: tuple[float, ...]
    stderr: tuple[float, ...]
    residuals: tuple[float, ...]
    success: bool
    message: str
    cost: float = 0.0  # 0.5 * sum(residual^2) as minimised
    n_points: int = 0
    held: Mapping[str, str] = field(default_factory=dict)  # name -> "prior: <why>"
    extra: dict = field(default_factory=dict)

    def value(self, name: str) -> float:
        return self.params[self.names.index(name)]

    def error(self, name: str) -> float:
        return self.stderr[self.names.index(name)]

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.names, self.params, strict=True))

    @property
    def free(self) -> tuple[str, ...]:
        return tuple(n for n in self.names if n not in self.held)

    @property
    def mape(self) -> float:
        """Mean absolute residual (a relative error for fit_relative)."""
        return float(np.mean(np.abs(self.residuals))) if self.residuals else math.nan

    def describe(self, sep: str = " = ") -> str:
        """Every parameter as `name = value +- stderr`, or `name = value (prior: why)` where it is held."""
        return ", ".join(f"{n}{sep}{v:.4g} " + (f"({self.held[n]})" if n in self.held else f"+- {se:.2g}")
                         for n, v, se in zip(self.names, self.params, self.stderr, strict=True))

    def interval(self, name: str, z: float = Z95) -> tuple[float, float]:
        i = self.names.index(name)
        return self.params[i] - z * self.stderr[i], self.params[i] + z * self.stderr[i]

    def to_dict(self) -> dict:
        return {
            "names": list(self.names), "params": list(self.params), "stderr": list(self.stderr),
            "residuals": list(self.residuals), "success": self.success, "message": self.message,
            "cost": self.cost, "n_points": self.n_points, "held": dict(self.held), "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, d: dict) -> FitResult:
        return cls(tuple(d["names"]), tuple(d["params"]), tuple(d["stderr"]), tuple(d["residuals"]),
                   bool(d["success"]), d["message"], float(d["cost"]), int(d["n_points"]), dict(d.get("held", {})),
                   d.get("extra", {}))


def _check_inputs(names: Sequence[str], p0: np.ndarray, lo: np.ndarray, hi: np.ndarray, scale: np.ndarray) -> None:
    if not (len(names) == p0.size == lo.size == hi.size == scale.size):
        raise ValueError(f"names/p0/lower/upper/x_scale lengths differ: {len(names)}, {p0.size}, {lo.size}, "
                         f"{hi.size}, {scale.size}")
    if len(set(names)) != len(names):
        raise ValueError(f"names={tuple(names)} repeats a parameter")
    for arr, what in ((p0, "p0"), (scale, "x_scale")):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{what}={arr.tolist()} must be finite")
    if np.any(scale <= 0):
        raise ValueError(f"x_scale={scale.tolist()} must be > 0 (a typical magnitude per parameter)")
    bad = np.flatnonzero(~(lo < hi))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"bounds of {names[i]}: lower={lo[i]!r} must be < upper={hi[i]!r}")


def _default_scale(p0: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    width = np.where(np.isfinite(hi - lo), hi - lo, 1.0)
    return np.where(p0 != 0, np.abs(p0), np.where(width > 0, width, 1.0))


def _stderr(jac: np.ndarray, fun: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(standard errors in the solver's scaled variables, mask of all-zero Jacobian columns, each parameter's weight in
    the Jacobian's null space: 0 when the data sees it apart from the others)."""
    m, n = jac.shape
    if n == 0:
        return np.zeros(0), np.zeros(0, bool), np.zeros(0)
    _, s, vt = np.linalg.svd(jac, full_matrices=False)
    tiny = s <= RANK_RTOL * (s[0] if s.size and s[0] > 0 else 1.0)
    null = np.max(np.abs(vt[tiny]), axis=0) if np.any(tiny) else np.zeros(n)
    zero = np.all(jac == 0.0, axis=0)
    if m <= n:
        return np.full(n, math.nan), zero, null
    s2 = float(fun @ fun) / (m - n)
    keep = ~tiny
    var = (vt[keep].T ** 2) @ (1.0 / s[keep] ** 2) * s2
    return np.where(zero | (null > 1e-3), math.inf, np.sqrt(var)), zero, null


def least_squares(
    residual_fn: Callable[[np.ndarray], np.ndarray],
    *,
    names: Sequence[str],
    p0: Sequence[float],
    lower: Sequence[float],
    upper: Sequence[float],
    x_scale: Sequence[float] | None = None,
    priors: Mapping[str, tuple[float, str]] | None = None,
    hold: Sequence[str] = (),
    hold_unidentified: bool = True,
    n_points: int | None = None,
) -> FitResult:
    """Minimise sum(residual_fn(p)^2) within [lower, upper]; p holds every parameter in `names` order (held ones
    at their priors); residuals should be dimensionless. x_scale: each parameter's typical magnitude (default
    |p0|, else the bound interval). priors: {name: (value, why)} a parameter is held at when the data does not
    identify it (default: its start value). hold: parameters held at their priors from the start (the caller knows
the data cannot identify them). hold_unidentified=False: plain bounded least squares."""
    names = tuple(names)
    p0a = np.asarray(p0, float)
    lo, hi = np.asarray(lower, float), np.asarray(upper, float)
    scale = _default_scale(p0a, lo, hi) if x_scale is None else np.asarray(x_scale, float)
    _check_inputs(names, p0a, lo, hi, scale)
    priors = dict(priors or {})
    unknown = sorted(set(priors) - set(names))
    if unknown:
        raise ValueError(f"priors for {unknown}: not among the parameters {names}")
    missing = sorted(set(hold) - set(priors))
    if missing:
        raise ValueError(f"hold={tuple(hold)}: {missing} have no prior to be held at")
    start = np.clip(p0a, lo, hi)
    full = start.copy()
    held: dict[str, str] = {}
    for n in hold:
        full[names.index(n)] = priors[n][0]
        held[n] = f"prior: {priors[n][1]}"
    while True:
        free = np.array([n not in held for n in names])
        idx = np.flatnonzero(free)

        def fun(z: np.ndarray, idx=idx) -> np.ndarray:
            p = full.copy()
            p[idx] = z * scale[idx]
            return np.asarray(residual_fn(p), float)

        if idx.size:
            zlo, zhi = lo[idx] / scale[idx], hi[idx] / scale[idx]
            # start strictly inside the bounds (trf needs it), the same point on every machine
            z0 = np.clip(start[idx] / scale[idx], zlo + 1e-10 * (zhi - zlo), zhi - 1e-10 * (zhi - zlo))
            sol = optimize.least_squares(fun, z0, bounds=(zlo, zhi), method="trf", x_scale=1.0, ftol=TOL,
                                         xtol=TOL, gtol=TOL, max_nfev=MAX_NFEV)
            full[idx] = sol.x * scale[idx]
            r, jac, ok, msg = sol.fun, sol.jac, bool(sol.success), str(sol.message)
        else:
            r = fun(np.zeros(0))
            jac, ok, msg = np.zeros((r.size, 0)), True, "every parameter held at its prior"
        if not np.all(np.isfinite(r)):
            raise ValueError(f"residuals are not finite at {dict(zip(names, full.tolist()))}")
        se_z, zero_z, null_z = _stderr(jac, r)
        se = np.full(len(names), math.nan)
        se[idx] = se_z * scale[idx]
        zero, null = np.zeros(len(names), bool), np.zeros(len(names))
        zero[idx], null[idx] = zero_z, null_z
        if not hold_unidentified or not idx.size:
            break
        newly = _unidentified(names, idx, full, se, zero, null, lo, hi, scale, start, priors)
        if not newly:
            break
        for name, (value, why) in newly.items():
            full[names.index(name)] = value
            held[name] = why
    se[[names.index(n) for n in held]] = math.nan
    return FitResult(names=names, params=tuple(float(x) for x in full), stderr=tuple(float(x) for x in se),
                     residuals=tuple(float(x) for x in r), success=ok, message=msg, cost=0.5 * float(r @ r),
                     n_points=int(r.size if n_points is None else n_points), held=held)


def _unidentified(names, idx, p, se, zero, null, lo, hi, scale, start, priors) -> dict[str, tuple[float, str]]:
    """The parameters to hold next: every one the data does not move at all, else one of a set the data sees only
    together (rank-deficient Jacobian: the one with a stated prior and the largest weight in the null space), else
    every one on a bound, else the one with the largest relative standard error above REL_STDERR_MAX. Rank comes
    before bounds: along a direction the data does not see, where the solver stops (on a bound or not) depends on
    its path, which differs between BLAS builds and CPUs; holding the stated prior first gives every machine the
    same answer."""
    width = np.where(np.isfinite(hi - lo), hi - lo, scale)
    out = {}

    def prior(i: int, reason: str) -> tuple[float, str]:
        if names[i] not in priors:
            return float(start[i]), f"prior: its start value; {reason}"
        value, why = priors[names[i]]
        return float(value), f"prior: {why}; {reason}"

    for i in idx:
        if zero[i]:
            out[names[i]] = prior(i, "the data does not move it")
    if out:
        return out
    collinear = [i for i in idx if null[i] > 1e-3]
    if collinear:
        i = max(collinear, key=lambda j: (names[j] in priors, null[j], -j))
        return {names[i]: prior(i, "the data sees it only together with another parameter")}
    for i in idx:
        for side, b in (("lower", lo[i]), ("upper", hi[i])):
            if np.isfinite(b) and abs(p[i] - b) <= BOUND_RTOL * width[i]:
                out[names[i]] = (float(b), f"prior: its {side} bound {b:g} (the fit runs into it)")
    if out:
        return out
    rel = np.array([se[i] / abs(p[i]) if p[i] != 0 else math.inf for i in idx])
    rel = np.where(np.isnan(rel), 0.0, rel)  # no spare points: cannot judge
    worst = int(np.argmax(rel)) if rel.size else -1
    if worst >= 0 and rel[worst] > REL_STDERR_MAX:
        i = idx[worst]
        out[names[i]] = prior(i, f"not identified (fitted {p[i]:.3g} +- {se[i]:.2g})")
    return out


def fit_relative(
    model: Callable[[np.ndarray], np.ndarray],
    measured: Sequence[float] | np.ndarray,
    *,
    names: Sequence[str],
    p0: Sequence[float],
    bounds: tuple[Sequence[float], Sequence[float]],
    priors: Mapping[str, tuple[float, str]] | None = None,
    x_scale: Sequence[float] | None = None,
    hold: Sequence[str] = (),
    hold_unidentified: bool = True,
    shrink: Mapping[str, tuple[float, float]] | None = None,
    noise: float | None = None,
) -> FitResult:
    """Fit `model(params) ~ measured` minimising sum(log(model / measured)^2) (relative error), as least_squares.

    Assumes measured = model(params) * exp(eps), eps ~ N(0, s^2). The result's residuals are the relative errors
    predicted / measured - 1 per point.

    shrink: {name: (centre, width)}, a Gaussian prior on each named parameter's relative distance from its centre,
    p / centre - 1 ~ N(0, width^2), with the data's noise s = `noise` (log residual, stated by the caller): the fit is
    the posterior mode (each prior adds the residual noise * (p / centre - 1) / width). Standard errors and the
    held/identified tests then include the prior; residuals and the point count are the data's only.
    """
    y = np.asarray(measured, float)
    if y.size == 0:
        raise ValueError("no data points to fit")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("measured values must be finite and > 0")
    if y.size <= len(p0):
        raise ValueError(f"{y.size} points cannot identify {len(p0)} parameters {tuple(names)}")
    shrink = dict(shrink or {})
    if shrink and not (noise is not None and noise > 0):
        raise ValueError(f"shrink={shrink}: needs the data's noise (> 0), got noise={noise!r}")
    bad = sorted(n for n, (c, w) in shrink.items() if n not in names or not (c > 0 and w > 0))
    if bad:
        raise ValueError(f"shrink: {bad} not among {tuple(names)} or centre/width not > 0")
    idx = [list(names).index(n) for n in shrink]
    centre = np.array([shrink[n][0] for n in shrink], float)
    width = np.array([shrink[n][1] for n in shrink], float)

    def residual(p: np.ndarray) -> np.ndarray:
        r = np.log(np.maximum(model(p), 1e-300) / y)
        if not idx:
            return r
        return np.concatenate([r, noise * (p[idx] / centre - 1.0) / width])

    res = least_squares(residual, names=names, p0=p0, lower=bounds[0], upper=bounds[1], x_scale=x_scale,
                        priors=priors, hold=hold, hold_unidentified=hold_unidentified, n_points=int(y.size))
    data = np.asarray(res.residuals[:y.size])
    return FitResult(res.names, res.params, res.stderr, tuple(float(x) for x in np.expm1(data)),
                     res.success, res.message, 0.5 * float(data @ data), res.n_points, res.held, res.extra)


# ---------------------------------------------------------------------------------------------------
# Shipping a fit: one parameter as YAML, and the --check of a refit against the shipped value
# ---------------------------------------------------------------------------------------------------
# A refitted value matches the shipped one within the fit's own standard error, never tighter than this relative
# floor (the shipped six significant digits and the solver's tolerance sit far below it).
CHECK_REL_FLOOR = 1e-3


def shipped_param(res: FitResult, name: str) -> dict:
    """One parameter as the shipped YAML states it: value and standard error, or value and the prior it is held at
    (no standard error: it is not fitted)."""
    v = res.value(name)
    if name in res.held:
        return {"value": float(f"{v:.6g}"), "stderr": None, "prior": res.held[name]}
    return {"value": float(f"{v:.6g}"), "stderr": float(f"{res.error(name):.3g}")}


def check_param(name: str, refit: Mapping, shipped: Mapping | None) -> str | None:
    """Why a refitted parameter (shipped_param's form) does not reproduce the shipped one, or None. Refuses a
    shipped free value the data does not support (no finite standard error, or one above REL_STDERR_MAX of it)."""
    if shipped is None:
        return f"{name}: not in the shipped YAML"
    v, sv = float(refit["value"]), float(shipped["value"])
    if (refit.get("prior") is None) != (shipped.get("prior") is None):
        now = "held at a prior" if refit.get("prior") else "fitted"
        return f"{name}: {now} now, shipped {'fitted' if shipped.get('prior') is None else 'at a prior'}"
    if shipped.get("prior") is None:
        se = shipped.get("stderr")
        if se is None or not math.isfinite(float(se)) or float(se) > REL_STDERR_MAX * abs(sv):
            return f"{name}: shipped {sv:g} +- {se}: the data does not support it (hold it at a prior)"
        tol = max(float(refit["stderr"]), CHECK_REL_FLOOR * abs(sv))
    else:
        tol = CHECK_REL_FLOOR * abs(sv)
    if not abs(v - sv) <= tol:
        return f"{name}: refit {v:g}, shipped {sv:g} (allowed +- {tol:.3g})"
    return None
