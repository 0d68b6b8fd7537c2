"""Money, months and percentages as a finance reader sees them; the one formatting the pages, the CLI and the
report use (so a figure reads the same everywhere)."""

from __future__ import annotations

import math


def fmt_usd(x: float | None, digits: int = 0) -> str:
    """Money for a finance reader: '-$546', '$1,234', 'n/a'."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if round(x, digits) == 0:
        x = 0.0
    sign = "-" if x < 0 else ""
    return f"{sign}${abs(x):,.{digits}f}"


def fmt_cpm(x: float | None) -> str:
    return fmt_usd(x, 3)


def fmt_months(x: float | None) -> str:
    """'does not pay back', 'under 0.1 months', '1.7 months', '178 months'."""
    if x is None or not math.isfinite(x):
        return "does not pay back"
    if x < 0.05:
        return "under 0.1 months" if x > 0 else "immediately"
    return f"{x:.1f} months" if x < 100 else f"{x:,.0f} months"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    """'+3.2 %', '-7.0 %', '0.0 %' (never '-0.0 %'), 'n/a'."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if round(x, digits) == 0:
        return f"{0:.{digits}f} %"
    return f"{x:+.{digits}f} %"


def fmt_acceptance(pt) -> str:
    """Where a method's acceptance comes from, in one line: tau at its K (bonus token included), the tier
    (customer, public head, family fit, prior; planner.acceptance_tiers), the source and whether a head exists."""
    if not getattr(pt, "k", 0) or not getattr(pt, "acceptance_tier", ""):
        return ""
    head = f" {pt.head[0].upper()}{pt.head[1:]}." if getattr(pt, "head", "") else ""
    return (f"{pt.label}: acceptance length tau {pt.acceptance_length:.2f} tokens/step at K={pt.k} (bonus token "
            f"included), from the {pt.acceptance_tier} tier: {pt.acceptance_source}.{head}")
