"""Money, months, percentages and counts in the reader's language: the one formatting the pages and the board
report use. English is planner.formatting's own text (so the CLI, the pages and the report read the same); Chinese
writes dollars as US$ (every price and bill in this product is in US dollars), percentages without the space,
months as 个月, and, when the 万/亿 switch is on (i18n.use(wan_units=True)), large amounts in 万 (10^4) and 亿 (10^8).
"""

from __future__ import annotations

import math

from i18n import language, tr, tr_known, wan
from planner import formatting as F

ZH_CURRENCY = "US$"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def na() -> str:
    return tr("n/a")


def _zh_amount(x: float, digits: int) -> str:
    """An amount without sign or symbol: '12,857', or with 万/亿 when the switch is on and the amount is that large."""
    if wan() and x >= 1e8:
        return f"{x / 1e8:,.2f}亿"
    if wan() and x >= 1e4:
        return f"{x / 1e4:,.2f}万"
    return f"{x:,.{digits}f}"


def fmt_usd(x: float | None, digits: int = 0) -> str:
    """'-$546', '$1,234'; Chinese 'US$1,234' (or 'US$12.86万'); 'n/a' / '不适用'."""
    if language() == "en":
        return F.fmt_usd(x, digits)
    if not _finite(x):
        return na()
    if round(x, digits) == 0:
        x = 0.0
    return f"{'-' if x < 0 else ''}{ZH_CURRENCY}{_zh_amount(abs(x), digits)}"


def fmt_cpm(x: float | None) -> str:
    """$ per million output tokens, three decimals (never in 万)."""
    if language() == "en":
        return F.fmt_cpm(x)
    if not _finite(x):
        return na()
    x = 0.0 if round(x, 3) == 0 else x
    return f"{'-' if x < 0 else ''}{ZH_CURRENCY}{abs(x):,.3f}"


def fmt_per_month(x: float | None, digits: int = 0) -> str:
    """'$12,857/month' / 'US$12,857/月'; 'n/a' / '不适用'."""
    if not _finite(x):
        return na()
    return tr("{amount}/month", amount=fmt_usd(x, digits))


def fmt_months(x: float | None) -> str:
    """'does not pay back', 'under 0.1 months', 'immediately', '1.7 months' in the reader's language."""
    if language() == "en":
        return F.fmt_months(x)
    if not _finite(x):
        return tr("does not pay back")
    if x < 0.05:
        return tr("under 0.1 months") if x > 0 else tr("immediately")
    return tr("{n} months", n=f"{x:.1f}" if x < 100 else f"{x:,.0f}")


def fmt_pct(x: float | None, digits: int = 1) -> str:
    """'+3.2 %' (English, planner.formatting) or '+3.2%' (Chinese); 'n/a' / '不适用'."""
    if language() == "en":
        return F.fmt_pct(x, digits)
    if not _finite(x):
        return na()
    if round(x, digits) == 0:
        return f"{0:.{digits}f}%"
    return f"{x:+.{digits}f}%"


def fmt_share(x: float | None, digits: int = 0) -> str:
    """A probability or share (0..1) as a percentage: '58 %' / '58%'."""
    if not _finite(x):
        return na()
    sep = " " if language() == "en" else ""
    return f"{x * 100:.{digits}f}{sep}%"


def fmt_tokens(x: float | None, digits: int = 2, *, en_spec: str = "") -> str:
    """A token count: '10.00B' (billions; `en_spec` formats them otherwise) in English; in Chinese in 亿 (10^8) or
    万 (10^4): '100.00 亿'."""
    if not _finite(x):
        return na()
    if language() == "en":
        return f"{x / 1e9:{en_spec or f',.{digits}f'}}B"
    if abs(x) >= 1e8:
        return f"{x / 1e8:,.{digits}f} 亿"
    if abs(x) >= 1e4:
        return f"{x / 1e4:,.{digits}f} 万"
    return f"{x:,.0f}"


def fmt_gpus(n: int) -> str:
    """'1 GPU', '44 GPUs' / '44 块 GPU'."""
    return tr("{n} GPU", n=f"{n:,}") if n == 1 else tr("{n} GPUs", n=f"{n:,}")


def fmt_acceptance(pt) -> str:
    """planner.formatting.fmt_acceptance in the reader's language (the tier and source stay the planner's words)."""
    if language() == "en":
        return F.fmt_acceptance(pt)
    if not getattr(pt, "k", 0) or not getattr(pt, "acceptance_tier", ""):
        return ""
    head = f" {pt.head[0].upper()}{pt.head[1:]}." if getattr(pt, "head", "") else ""
    return tr("{label}: acceptance length tau {tau} tokens/step at K={k} (bonus token included), from the {tier} "
              "tier: {source}.", label=pt.label, tau=f"{pt.acceptance_length:.2f}", k=pt.k,
              tier=tr_tier(pt.acceptance_tier), source=pt.acceptance_source) + head


def tr_tier(tier: str) -> str:
    """An acceptance tier's name (planner.acceptance.tiers.TIERS) in the reader's language."""
    return tr_known(tier)
