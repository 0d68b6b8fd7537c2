"""Money: monthly spend, savings, one-time costs, payback and NPV. Vectorised over numpy arrays.

monthly spend = monthly output tokens / 1e6 * CPM
payback months = one-time cost / monthly saving (inf when the saving is <= 0)
NPV = sum_{m=1..H} saving / (1 + r)^(m/12) - one-time cost   (monthly cash flows, annual rate r)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.answer import OperatingPoint, PlanEconomics
from planner.request import CostAssumptions

TOKENS_PER_MTOK = 1e6


@dataclass(frozen=True)
class Economics:
    baseline_monthly_usd: np.ndarray | float
    new_monthly_usd: np.ndarray | float
    monthly_saving_usd: np.ndarray | float
    one_time_usd: np.ndarray | float
    payback_months: np.ndarray | float  # inf when it never pays back
    npv_usd: np.ndarray | float
    horizon_months: int
    annual_discount_rate: float

    def to_dict(self) -> dict:
        return {k: (float(v) if np.ndim(v) == 0 else np.asarray(v).tolist())
                for k, v in self.__dict__.items()}


def monthly_spend_usd(usd_per_mtok, monthly_output_tokens):
    return np.asarray(usd_per_mtok, float) * np.asarray(monthly_output_tokens, float) / TOKENS_PER_MTOK


def annuity_factor(horizon_months: int, annual_discount_rate: float) -> float:
    """Present value of $1 a month for `horizon_months` months, discounted monthly at (1+r)^(1/12)."""
    if horizon_months < 0:
        raise ValueError(f"horizon_months={horizon_months} must be >= 0")
    if annual_discount_rate <= -1:
        raise ValueError(f"annual_discount_rate={annual_discount_rate} must be > -1")
    m = np.arange(1, horizon_months + 1, dtype=float)
    return float(np.sum((1.0 + annual_discount_rate) ** (-m / 12.0)))


def economics(
    *,
    baseline_usd_per_mtok,
    new_usd_per_mtok,
    monthly_output_tokens,
    one_time_usd,
    horizon_months: int = 36,
    annual_discount_rate: float = 0.10,
) -> Economics:
    for name, v in (("baseline_usd_per_mtok", baseline_usd_per_mtok), ("new_usd_per_mtok", new_usd_per_mtok),
                    ("monthly_output_tokens", monthly_output_tokens), ("one_time_usd", one_time_usd)):
        a = np.asarray(v, float)
        if np.any(np.isnan(a)) or np.any(a < 0):
            raise ValueError(f"{name}={v!r} must be a number >= 0")
    base = monthly_spend_usd(baseline_usd_per_mtok, monthly_output_tokens)
    new = monthly_spend_usd(new_usd_per_mtok, monthly_output_tokens)
    saving = base - new
    one = np.asarray(one_time_usd, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        payback = np.where(saving > 0, one / np.where(saving > 0, saving, 1.0), np.inf)
    npv = saving * annuity_factor(horizon_months, annual_discount_rate) - one
    return Economics(base, new, saving, one, payback, npv, horizon_months, annual_discount_rate)


def breakeven_monthly_spend_usd(*, cpm_reduction_fraction, one_time_usd, horizon_months: int = 36,
                                annual_discount_rate: float = 0.10):
    """Monthly spend above which a change that cuts CPM by `cpm_reduction_fraction` has NPV >= 0:
    spend * fraction * annuity = one-time cost. inf when the change does not cut CPM."""
    f = np.asarray(cpm_reduction_fraction, float)
    a = annuity_factor(horizon_months, annual_discount_rate)
    with np.errstate(divide="ignore"):
        return np.where(f > 0, np.asarray(one_time_usd, float) / (np.where(f > 0, f, 1.0) * a), np.inf)


def plan_economics(
    *,
    monthly_output_tokens: float,
    costs: CostAssumptions,
    reference: OperatingPoint | None,
    best: OperatingPoint | None,
    one_low: float,
    one_high: float,
) -> PlanEconomics:
    """Switching from the reference to the best method: saving (and its band over the best method's alpha range),
    one-time cost, payback and NPV; blank where either is missing."""
    one_mid = 0.5 * (one_low + one_high)
    vol = monthly_output_tokens
    inf = math.inf
    if reference is None or best is None:
        return PlanEconomics(
            reference.usd_per_mtok if reference else None,
            best.usd_per_mtok if best else None,
            vol,
            None,
            None,
            None,
            one_mid,
            one_low,
            one_high,
            inf,
            inf,
            inf,
            None,
            costs.horizon_months,
            costs.annual_discount_rate,
        )
    new = min(best.usd_per_mtok, reference.usd_per_mtok)
    e = economics(
        baseline_usd_per_mtok=reference.usd_per_mtok,
        new_usd_per_mtok=new,
        monthly_output_tokens=vol,
        one_time_usd=one_mid,
        horizon_months=costs.horizon_months,
        annual_discount_rate=costs.annual_discount_rate,
    )
    # uncertainty band: the best method at the low / high end of its alpha range against the same reference
    sav_lo = (
        max(0.0, reference.usd_per_mtok - best.usd_per_mtok_low) * vol / 1e6
        if math.isfinite(best.usd_per_mtok_low)
        else None
    )
    sav_hi = (
        max(0.0, reference.usd_per_mtok - best.usd_per_mtok_high) * vol / 1e6
        if math.isfinite(best.usd_per_mtok_high)
        else None
    )
    savings = sorted(s for s in (sav_lo, sav_hi, float(e.monthly_saving_usd)) if s is not None)

    def payback(one, sav):
        return one / sav if sav > 0 else inf

    return PlanEconomics(
        reference_usd_per_mtok=reference.usd_per_mtok,
        new_usd_per_mtok=new,
        monthly_output_tokens=vol,
        monthly_saving_usd=float(e.monthly_saving_usd),
        monthly_saving_low_usd=savings[0],
        monthly_saving_high_usd=savings[-1],
        one_time_usd=one_mid,
        one_time_low_usd=one_low,
        one_time_high_usd=one_high,
        payback_months=float(e.payback_months),
        payback_low_months=payback(one_low, savings[-1]),
        payback_high_months=payback(one_high, savings[0]),
        npv_usd=float(e.npv_usd),
        horizon_months=costs.horizon_months,
        annual_discount_rate=costs.annual_discount_rate,
    )
