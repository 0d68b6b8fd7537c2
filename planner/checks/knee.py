"""Whether the plan's answer sits on a knee of the TPOT SLO: the monthly saving at 0.8x and 1.2x the SLO, from the
same steps plan() takes up to its economics at those SLOs (planner.plan.monthly_saving: the volume the plan answered
for; no Monte Carlo, levers, deployment or hardware comparison). Computed on demand, through this one function, so
the Plan page, the report and the CLI say the same.
"""

from __future__ import annotations

import dataclasses

from planner.answer import Plan, SloKnee
from planner.formatting import fmt_usd
from planner.types import Catalog

KNEE_SLO_FACTORS = (0.8, 1.2)  # +-20 % of the TPOT SLO
KNEE_CHANGE = 0.5  # the saving changes by more than half of the plan's own saving


def slo_knee(p: Plan, catalog: Catalog) -> SloKnee:
    """The saving at the plan's SLO and at KNEE_SLO_FACTORS times it; `on_knee` when either differs from the plan's
    by more than KNEE_CHANGE of the plan's saving (any change from $0 counts; no saving computed there counts as $0)."""
    from planner.plan import monthly_saving

    req = p.request
    base = dataclasses.replace(req, spend_usd_per_month=None, spend_gpus=None, levers_start=None,
                               compare_hardware=False)
    s = p.economics.monthly_saving_usd
    at = {}
    for f in KNEE_SLO_FACTORS:
        at[f] = monthly_saving(dataclasses.replace(base, tpot_slo_ms=req.tpot_slo_ms * f), catalog)
    knee = False
    if s is not None:
        for v in at.values():
            other = v or 0.0
            knee = knee or (abs(other - s) > KNEE_CHANGE * abs(s) if s != 0 else other != 0)
    lo, hi = KNEE_SLO_FACTORS
    return SloKnee(slo_ms=req.tpot_slo_ms, saving_usd=s, low_slo_ms=req.tpot_slo_ms * lo, low_saving_usd=at[lo],
                   high_slo_ms=req.tpot_slo_ms * hi, high_saving_usd=at[hi], on_knee=knee)


def knee_sentence(k: SloKnee) -> str:
    """One sentence for the headline ('' when the saving is steady within +-20 % of the SLO)."""
    if not k.on_knee:
        return ""

    def usd(v: float | None) -> str:
        return "no saving computed" if v is None else f"{fmt_usd(v)}/month"

    return (f"This answer sits on a knee of the SLO: the saving is {usd(k.saving_usd)} at {k.slo_ms:g} ms TPOT, "
            f"{usd(k.low_saving_usd)} at {k.low_slo_ms:g} ms and {usd(k.high_saving_usd)} at {k.high_slo_ms:g} ms; "
            "state the SLO you really need before you act on it.")
