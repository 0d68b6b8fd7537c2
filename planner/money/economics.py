"""Money: monthly spend, savings, one-time costs, payback and NPV. Vectorised over numpy arrays.

monthly spend = monthly output tokens / 1e6 * CPM (a plan's spend is its fleet's bill: planner.money.bill)
payback months = one-time cost / monthly saving (inf when the saving is <= 0)
NPV = sum_{m=1..H} saving / (1 + r)^(m/12) - one-time cost   (monthly cash flows, annual rate r)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.answer import Bill, OperatingPoint, PlanEconomics
from planner.physics.serving import TOKENS_PER_MTOK
from planner.request import CostAssumptions


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
    return economics_of_bills(baseline_monthly_usd=monthly_spend_usd(baseline_usd_per_mtok, monthly_output_tokens),
                              new_monthly_usd=monthly_spend_usd(new_usd_per_mtok, monthly_output_tokens),
                              one_time_usd=one_time_usd, horizon_months=horizon_months,
                              annual_discount_rate=annual_discount_rate)


def economics_of_bills(*, baseline_monthly_usd, new_monthly_usd, one_time_usd, horizon_months: int = 36,
                       annual_discount_rate: float = 0.10) -> Economics:
    """Saving (baseline bill - new bill, below 0 when the new one costs more), payback and NPV from two monthly
    bills (planner.money.bill) and a one-time cost."""
    base = np.asarray(baseline_monthly_usd, float)
    new = np.asarray(new_monthly_usd, float)
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
    reference_bill: Bill | None,
    best_bill: Bill | None,
    band_bills: Sequence[Bill] = (),
) -> PlanEconomics:
    """Switching from the reference to the best method, in fleet bills (planner.money.bill): monthly saving = the
    reference fleet's bill - the best method's fleet's bill (its band: the best method's fleets at the ends of its
    alpha range), one-time cost, payback and NPV; blank where either is missing. The CPMs are at full load; the
    effective CPMs are bill / output tokens."""
    one_mid = 0.5 * (one_low + one_high)
    vol = monthly_output_tokens
    inf = math.inf
    billing = (reference_bill or best_bill).billing if (reference_bill or best_bill) else ""
    bill_fields = dict(
        billing=billing,
        reference_bill_usd_per_month=reference_bill.usd_per_month if reference_bill else None,
        new_bill_usd_per_month=best_bill.usd_per_month if best_bill else None,
        reference_effective_usd_per_mtok=reference_bill.effective_usd_per_mtok if reference_bill else None,
        new_effective_usd_per_mtok=best_bill.effective_usd_per_mtok if best_bill else None,
        reference_tpot_ms=reference_bill.tpot_ms if reference_bill else None,
        new_tpot_ms=best_bill.tpot_ms if best_bill else None,
        reference_peak_gpus=reference_bill.peak_gpus if reference_bill else None,
        new_peak_gpus=best_bill.peak_gpus if best_bill else None,
    )
    usable = (reference is not None and best is not None and reference_bill is not None and best_bill is not None
              and math.isfinite(reference_bill.usd_per_month) and math.isfinite(best_bill.usd_per_month))
    if not usable:
        return PlanEconomics(
            reference.usd_per_mtok if reference else None,
            best.usd_per_mtok if best else None,
            vol, None, None, None, one_mid, one_low, one_high, inf, inf, inf, None,
            costs.horizon_months, costs.annual_discount_rate, **bill_fields,
        )
    e = economics_of_bills(baseline_monthly_usd=reference_bill.usd_per_month, new_monthly_usd=best_bill.usd_per_month,
                           one_time_usd=one_mid, horizon_months=costs.horizon_months,
                           annual_discount_rate=costs.annual_discount_rate)
    saving, npv = float(e.monthly_saving_usd), float(e.npv_usd)
    ends = [reference_bill.usd_per_month - b.usd_per_month for b in band_bills if math.isfinite(b.usd_per_month)]
    savings = sorted([saving, *ends])

    def payback(one, sav):
        return one / sav if sav > 0 else inf

    return PlanEconomics(
        reference_usd_per_mtok=reference.usd_per_mtok,
        new_usd_per_mtok=best.usd_per_mtok,
        monthly_output_tokens=vol,
        monthly_saving_usd=saving,
        monthly_saving_low_usd=savings[0],
        monthly_saving_high_usd=savings[-1],
        one_time_usd=one_mid,
        one_time_low_usd=one_low,
        one_time_high_usd=one_high,
        payback_months=float(e.payback_months),
        payback_low_months=payback(one_low, savings[-1]),
        payback_high_months=payback(one_high, savings[0]),
        npv_usd=float(npv),
        horizon_months=costs.horizon_months,
        annual_discount_rate=costs.annual_discount_rate,
        **bill_fields,
    )
