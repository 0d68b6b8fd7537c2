"""Money, months and percentages as a finance reader sees them; the one formatting the pages, the CLI and the
report use (so a figure reads the same everywhere). And the plan as JSON-ready data (`plan_dict`): the one
serialisation the CLI's `plan` output and the report read."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.answer import Plan


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
    (customer, public head, family fit, prior; planner.acceptance.tiers), the source and whether a head exists."""
    if not getattr(pt, "k", 0) or not getattr(pt, "acceptance_tier", ""):
        return ""
    head = f" {pt.head[0].upper()}{pt.head[1:]}." if getattr(pt, "head", "") else ""
    return (f"{pt.label}: acceptance length tau {pt.acceptance_length:.2f} tokens/step at K={pt.k} (bonus token "
            f"included), from the {pt.acceptance_tier} tier: {pt.acceptance_source}.{head}")


# What the plan's acceptance and money fields mean, printed with every `plan` JSON.
PLAN_CONVENTIONS = {
    "alpha_per_token": "i.i.d. per-token alpha with the same acceptance length",
    "alpha_position_1": "conditional per-token acceptance at draft position 1 (the profiles' ranges)",
    "draft_acceptance_rate": "vLLM: accepted / drafted = (acceptance_length - 1) / K",
    "acceptance_length": "tokens per verifier step, bonus token included",
    "usd_per_mtok": "$ per million output tokens at full load: one replica kept at its best batch under the SLO, "
                    "prefill sharing its time (planner.physics.replica)",
    "effective_usd_per_mtok": "the fleet's bill / the month's output tokens (bills, economics)",
    "monthly_saving_usd": "the reference fleet's bill - the best method's fleet's bill, under economics.billing",
    "reference_fleet": "today's fleet (the reference's configuration at its own TP): the headline's GPUs and bill",
    "best_fleet": "the best method's fleet: the headline's GPUs and bill with speculation",
    "ttft_ms": "time to first token (planner.physics.ttft), the mean or at latency.ttft_percentile: M/G/1 wait for the "
               "prefill lane + the prompt's own chunked prefill (target and draft) riding the decode steps; fleets: "
               "over the day, weighted by requests",
    "latency": "the headline's TPOT and TTFT for today and for the best method, beside the SLOs (ttft_slo_ms null: "
               "no TTFT SLO stated, TTFT reported only) and the statistic each SLO holds (tpot_percentile, "
               "ttft_percentile: mean, p50, p90 or p99 over requests; fleets' TTFT is stated at ttft_percentile)",
    "tpot_at_slo_ms": "TPOT at the SLO's percentile (planner.acceptance.tails: the spread of tokens per verifier "
                      "step; equal to tpot_ms for a mean SLO and without speculation)",
}
# Plan fields the JSON leaves out or writes elsewhere: the request (it holds traffic hours and tree shapes; its inputs
# are in `assumptions`), the reference's note (reference.note), the spend and the hardware comparison (below).
_PLAN_JSON_ELSEWHERE = frozenset({"request", "reference_note", "spend", "hardware_choice"})
NO_SPEC_REASON = "no speculation at its own best batch under the SLO"


def jsonable(x: Any) -> Any:
    """Records (dataclasses, their properties left out), tuples, dicts and numpy values -> plain JSON values (inf and
    nan stay floats: the CLI writes them as null)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if hasattr(x, "tolist"):  # numpy arrays and scalars
        return jsonable(x.tolist())
    return x


def json_text(obj: Any, *, indent: int | None = 2) -> str:
    """JSON text of plain values (jsonable's output): inf and nan are not JSON, so they are written as null with the
    key kept. The CLI's output and the report's JSON appendix are written by this one function."""
    def finite(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [finite(x) for x in v]
        return v

    return json.dumps(finite(jsonable(obj)), indent=indent, allow_nan=False)


def plan_dict(p: Plan) -> dict[str, Any]:
    """The plan as JSON-ready data, every field of the Plan's records: the CLI's `plan` output. The reference
    carries its note; the baseline's reason is never blank; the spend (with the volume it implies) and the hardware
    comparison (with the cheaper GPU type) only when the request asked for them."""
    out: dict[str, Any] = {f.name: jsonable(getattr(p, f.name)) for f in dataclasses.fields(p)
                           if f.name not in _PLAN_JSON_ELSEWHERE}
    out["baseline"]["reason"] = p.baseline.reason or NO_SPEC_REASON
    if p.reference is not None:
        out["reference"]["note"] = p.reference_note
    out["prefix_cache"] = {"share": p.request.prefix_cache_share or 0.0,
                           "source": p.request.prefix_cache_source or "default: none entered, the traffic gives none"}
    out["conventions"] = PLAN_CONVENTIONS
    out["latency"] = {"tpot_slo_ms": p.request.tpot_slo_ms, "ttft_slo_ms": p.request.ttft_slo_ms,
                      "tpot_percentile": p.request.tpot_percentile, "ttft_percentile": p.request.ttft_percentile,
                      **{role: None if f is None else {"label": f.label, "tpot_ms": f.tpot_ms, "ttft_ms": f.ttft_ms}
                         for role, f in (("today", p.reference_fleet), ("best", p.best_fleet))}}
    # how prefill and decode are served: asked, and each headline fleet's (its pools: reference_fleet / best_fleet)
    out["serving"] = {"asked": p.request.serving,
                      **{role: None if f is None else f.serving
                         for role, f in (("today", p.reference_fleet), ("best", p.best_fleet))}}
    if p.request.serving != "colocated":
        from planner.fleet import SERVING_ASSUMPTIONS

        out["serving"]["assumptions"] = list(SERVING_ASSUMPTIONS)
    if p.spend is not None:
        out["volume_source"] = p.request.volume_source
        out["spend"] = {**jsonable(p.spend), "volume_source": p.spend.volume_source}
    if p.hardware_choice is not None:
        c = p.hardware_choice
        out["hardware_comparison"] = {**jsonable(c), "cheaper_elsewhere": jsonable(c.cheaper_elsewhere),
                                      "format_changes": list(c.format_changes)}
    return out
