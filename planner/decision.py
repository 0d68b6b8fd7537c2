"""The decision: which configuration is "today" (the reference), and the verdict a CFO reads with its
recommendation. Only feasible configurations are ever recommended or used as today; when the baseline misses the
SLO, the cheapest configuration without speculation that meets it (another TP) becomes the reference, or the plan
says plainly that none exists and shows no percentage cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from planner.answer import OperatingPoint, PlanEconomics, Recommendation
from planner.context import Context
from planner.formatting import fmt_cpm, fmt_months, fmt_pct, fmt_usd
from planner.points import pct


def choose_reference(ctx: Context, current: OperatingPoint | None, alternatives: Sequence[OperatingPoint]
                     ) -> tuple[OperatingPoint | None, str]:
    """(the reference, how it was chosen): today's configuration if it runs, else the cheapest feasible
    alternative without speculation, else none."""
    req = ctx.req
    if current is not None and current.feasible:
        return current, f"today: {current.label} at its best K and batch"
    why = current.reason if current is not None else "unavailable"
    feasible_alt = [a for a in alternatives if a.feasible]
    if feasible_alt:
        reference = min(feasible_alt, key=lambda a: a.usd_per_mtok)
        return reference, (
            f"today's configuration on {req.tp} x {ctx.hw.label} {why}; compared with the cheapest "
            f"configuration without speculation that meets the SLO: {reference.label}"
        )
    return None, (
        f"today's configuration on {req.tp} x {ctx.hw.label} {why}; no configuration without "
        "speculation on this hardware meets the SLO, so no saving is computed against it"
    )


def _recommend(best: OperatingPoint, cpm_change_pct: float | None, reason: str) -> Recommendation:
    return Recommendation(best.method, best.label, best.k, best.batch, best.usd_per_mtok, cpm_change_pct, reason)


def traffic_phrase(ctx: Context) -> str:
    """'chat in English' for one segment; '62 % code completion' for a mix (its largest workload)."""
    cat = ctx.catalog
    if len(ctx.segs) == 1:
        s = ctx.segs[0]
        return f"{cat.workloads[s.workload].label.lower()} in {cat.languages[s.language].label}"
    by: dict[str, float] = {}
    for s in ctx.segs:
        by[s.workload] = by.get(s.workload, 0.0) + s.share
    top, share = max(by.items(), key=lambda kv: kv[1])
    return f"{share * 100:.0f} % {cat.workloads[top].label.lower()}"


def decide(ctx: Context, *, baseline: OperatingPoint, reference: OperatingPoint | None, best: OperatingPoint | None,
           econ: PlanEconomics, switching: bool) -> tuple[Recommendation | None, str]:
    """(the recommendation, or None to stay; the verdict in one sentence)."""
    req = ctx.req
    slo = f"{req.tpot_slo_ms:g} ms TPOT SLO"
    traffic = f"for traffic that is {traffic_phrase(ctx)}"
    if best is None:
        methods_way = baseline.way_out or "a larger TP, fp8 weights or a looser SLO"
        if not baseline.fits_memory:
            return None, (
                f"Nothing can run: {ctx.model.label} does not fit on {req.tp} x {ctx.hw.label} ({baseline.way_out})."
            )
        if reference is not None:
            return None, (f"Stay with {reference.label}: no speculative-decoding method fits and meets the {slo} here.")
        return None, (
            f"Nothing meets the {slo} on {req.tp} x {ctx.hw.label}: no speculation {baseline.reason}, and "
            f"no method fits and meets it either ({methods_way})."
        )
    if reference is None:
        return (
            _recommend(best, None, f"speculation is what makes the {slo} reachable: no configuration without it "
                       "meets the SLO on this hardware, so no saving is computed"),
            f"Deploy {best.label} with K={best.k} at batch {best.batch} {traffic}: it meets the {slo} at "
            f"{fmt_cpm(best.usd_per_mtok)} per million output tokens where no configuration without speculation "
            f"does ({baseline.reason}).",
        )
    cut = 1.0 - best.usd_per_mtok / reference.usd_per_mtok
    within = econ.payback_months <= econ.horizon_months
    bound = (
        "the verifier is memory-bound, so drafting cuts CPM"
        if best.verifier_bound == "memory"
        else "the verifier is compute-bound, yet drafting still cuts CPM"
    )
    ref_phrase = reference.label
    if not switching:
        return None, (
            f"Keep {best.label} (K={best.k}, batch {best.batch}): no other method is cheaper under the {slo} "
            f"({fmt_cpm(best.usd_per_mtok)} per million output tokens)."
        )
    if cut >= ctx.costs.min_cpm_cut and within:
        reason = (
            f"at batch {best.batch} under the {slo} {bound} {cut * 100:.1f} % "
            f"({fmt_cpm(reference.usd_per_mtok)} -> {fmt_cpm(best.usd_per_mtok)} per million output tokens "
            f"vs {ref_phrase}); the {fmt_usd(econ.one_time_usd)} setup pays back in "
            f"{fmt_months(econ.payback_months)}"
        )
        return (
            _recommend(best, pct(best.usd_per_mtok, reference.usd_per_mtok), reason),
            f"Deploy {best.label} with K={best.k} {traffic}: {reason}.",
        )
    if cut < ctx.costs.min_cpm_cut:
        return None, (
            f"Stay with {ref_phrase} {traffic}: the best method ({best.label}, K={best.k}, batch {best.batch}) "
            f"changes CPM by {fmt_pct(-cut * 100)} under the {slo}, too little to pay for a change "
            f"(threshold {ctx.costs.min_cpm_cut * 100:g} %)."
        )
    return None, (
        f"Stay with {ref_phrase} {traffic}: {best.label} would cut CPM {cut * 100:.1f} %, but at "
        f"{req.monthly_output_tokens / 1e9:,.2f}B output tokens a month its {fmt_usd(econ.one_time_usd)} "
        + (f"setup takes {fmt_months(econ.payback_months)} to pay back, beyond the {econ.horizon_months}-month "
           "horizon." if math.isfinite(econ.payback_months) else "setup never pays back.")
    )
