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
from planner.request import NO_SPEC
from planner.search.points import pct


def choose_reference(ctx: Context, current: OperatingPoint | None, alternatives: Sequence[OperatingPoint],
                     plain: Sequence[OperatingPoint] = ()) -> tuple[OperatingPoint | None, str]:
    """(the reference, how it was chosen): today's configuration if it runs, else the cheapest feasible
    alternative without speculation, else none. plain: no speculation on plain TP where the request runs
    data-parallel attention (planner.search.points.plain_tp_options); when today is no speculation, the honest today is
    the cheapest feasible of all these by the month's fleet bill, named in the note (a weak today inflates the
    saving)."""
    req = ctx.req
    if plain and current is not None and current.method == NO_SPEC:
        return _cheapest_today(ctx, current, [*alternatives, *plain])
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


def _cheapest_today(ctx: Context, current: OperatingPoint, others: Sequence[OperatingPoint]
                    ) -> tuple[OperatingPoint | None, str]:
    """The cheapest feasible configuration without speculation by the month's fleet bill (the full-load CPM breaks
    ties), data-parallel attention and plain TP alike, with a note naming it and the one it was preferred to."""
    from planner.money.bill import point_bill

    req = ctx.req
    options = [p for p in (current, *others) if p.feasible]
    if not options:
        return None, (f"no configuration without speculation on {ctx.hw.label}, data-parallel attention or plain TP, "
                      "meets the SLO, so no saving is computed against it")
    bill = {id(p): point_bill(ctx, p, billing=req.billing) for p in options}
    ranked = sorted(options, key=lambda p: (bill[id(p)].usd_per_month, p.usd_per_mtok))
    ref = ranked[0]
    dp_label = f"data-parallel attention on {req.tp} x {ctx.hw.label}"
    if ref is current:
        return ref, (f"today: {dp_label} without speculation, the cheapest configuration without speculation "
                     f"({fmt_usd(bill[id(ref)].usd_per_month)}/month, {bill[id(ref)].peak_gpus} GPUs at the peak)")
    b = bill[id(ref)]
    cur = (f"{dp_label} without speculation would cost {fmt_usd(bill[id(current)].usd_per_month)}/month "
           f"({bill[id(current)].peak_gpus} GPUs)" if current.feasible else f"{dp_label} {current.reason}")
    return ref, (f"today: {ref.label}, the cheapest configuration without speculation ({fmt_usd(b.usd_per_month)}"
                 f"/month, {b.peak_gpus} GPUs at the peak); {cur}")


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
    slo = slo_phrase(req)
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
    ref_phrase = reference.label
    if not switching:
        return None, (
            f"Keep {best.label} (K={best.k}, batch {best.batch}): no other method's fleet costs less under the {slo} "
            f"({fmt_usd(econ.new_bill_usd_per_month)}/month, {econ.billing}; {fmt_cpm(best.usd_per_mtok)} per million "
            "output tokens at full load)."
        )
    if econ.monthly_saving_usd is None:
        return None, f"Stay with {ref_phrase} {traffic}: the fleet for this traffic could not be sized."
    saving, ref_bill, new_bill = econ.monthly_saving_usd, econ.reference_bill_usd_per_month, econ.new_bill_usd_per_month
    fleet = (f"{fmt_usd(ref_bill)} -> {fmt_usd(new_bill)} a month, {econ.billing} fleet, "
             f"{econ.reference_peak_gpus} -> {econ.new_peak_gpus} GPUs at the peak")
    tpots_known = all(v is not None and math.isfinite(v) for v in (econ.new_tpot_ms, econ.reference_tpot_ms))
    if abs(saving) <= 1e-9 * max(ref_bill, 1.0) and not tpots_known:
        # no TPOT on the fleet to compare (a fleet serving no tokens): say why instead of "n/a TPOT instead of n/a"
        why = ("the monthly volume is 0, so the fleet serves no tokens and no TPOT is computed; enter the monthly "
               "volume to compare them" if req.monthly_output_tokens == 0 else "no TPOT could be computed on it")
        return None, (
            f"Speculation changes neither the bill nor a latency the fleet shows {traffic}: {best.label} at "
            f"K={best.k} runs on the same fleet ({econ.new_peak_gpus} GPU{'' if econ.new_peak_gpus == 1 else 's'} "
            f"at the peak, {fmt_usd(new_bill)}/month {econ.billing}), and {why}. Stay with {ref_phrase}."
        )
    if abs(saving) <= 1e-9 * max(ref_bill, 1.0):
        return None, (
            f"Speculation changes latency, not the bill {traffic}: {best.label} at K={best.k} serves it at "
            f"{_ms(econ.new_tpot_ms)} TPOT instead of {_ms(econ.reference_tpot_ms)} on the same fleet "
            f"({econ.new_peak_gpus} GPU{'' if econ.new_peak_gpus == 1 else 's'} at the peak, "
            f"{fmt_usd(new_bill)}/month {econ.billing}); stay with "
            f"{ref_phrase} unless that latency is worth its {fmt_usd(econ.one_time_usd)} setup."
        )
    if saving < 0:
        return None, (f"Stay with {ref_phrase} {traffic}: {best.label}'s fleet costs more ({fleet}) under the {slo}.")
    cut = saving / ref_bill
    within = econ.payback_months <= econ.horizon_months
    pays = within and econ.npv_usd is not None and econ.npv_usd > 0
    if cut < ctx.costs.min_cpm_cut:
        return None, (
            f"Stay with {ref_phrase} {traffic}: the best method ({best.label}, K={best.k}) cuts the bill "
            f"{fmt_pct(-cut * 100)} ({fleet}) under the {slo}, too little to pay for a change "
            f"(threshold {ctx.costs.min_cpm_cut * 100:g} %)."
        )
    if not pays:
        return None, (
            f"Stay with {ref_phrase} {traffic}: {best.label} would save {fmt_usd(saving)} a month ({fleet}), but its "
            f"{fmt_usd(econ.one_time_usd)} setup "
            + (f"takes {fmt_months(econ.payback_months)} to pay back, beyond the {econ.horizon_months}-month horizon"
               if math.isfinite(econ.payback_months) and not within else "never pays back")
            + f" (NPV {fmt_usd(econ.npv_usd)})."
        )
    sure = confidence_shortfall(ctx, econ)
    if sure:
        return None, f"Calibrate first {traffic}: {best.label} would save {fmt_usd(saving)} a month ({fleet}), {sure}"
    bound = ("the verifier is memory-bound, so drafting frees replicas" if best.verifier_bound == "memory"
             else "the verifier is compute-bound, yet drafting still frees replicas")
    reason = (
        f"under the {slo} {bound}: the bill falls {cut * 100:.1f} % ({fleet}, vs {ref_phrase}); "
        f"the {fmt_usd(econ.one_time_usd)} setup pays back in {fmt_months(econ.payback_months)}"
        + (f", P(saving > 0) = {econ.p_saving_positive * 100:.0f} %" if econ.p_saving_positive is not None else "")
    )
    return (
        _recommend(best, pct(best.usd_per_mtok, reference.usd_per_mtok), reason),
        f"Deploy {best.label} with K={best.k} {traffic}: {reason}.",
    )


def _ms(v: float | None) -> str:
    return f"{v:.1f} ms" if v is not None and math.isfinite(v) else "n/a"


def confidence_shortfall(ctx: Context, econ: PlanEconomics) -> str:
    """'' when the Monte Carlo's P(saving > 0) reaches the request's confidence (or was not computed); else why
    not, with the command that calibrates the step time and acceptance."""
    p = econ.p_saving_positive
    if p is None or p >= ctx.req.confidence:
        return ""
    return (f"but only with P(saving > 0) = {p * 100:.0f} %, below the {ctx.req.confidence * 100:.0f} % asked: "
            f"measure the step time and acceptance on your hardware first ({calibrate_command(ctx)}), then plan "
            "again with the calibrated profile.")


def calibrate_command(ctx: Context) -> str:
    """The command that measures this plan's model and workloads (python -m calibration list registry names the
    models it can run)."""
    workloads = ",".join(sorted({s.workload for s in ctx.segs}))
    return f"python -m calibration run --model {ctx.req.model} --workloads {workloads}"


def slo_phrase(req) -> str:
    """The SLOs a plan honours, as the verdict names them: the TPOT SLO, and the TTFT SLO where one is stated."""
    if req.ttft_slo_ms is None:
        return f"{req.tpot_slo_ms:g} ms TPOT SLO"
    return f"{req.tpot_slo_ms:g} ms TPOT and {req.ttft_slo_ms:g} ms TTFT SLOs"


def ttft_sentence(ctx: Context, methods, baseline: OperatingPoint | None = None) -> str:
    """'' or the sentence that says which speculative methods meet the TPOT SLO but break the TTFT SLO (their draft's
    prefill and longer step push the first token past it even at batch 1; planner.search.points' reason), and whether no
    speculation breaks it too (`baseline`)."""
    slo = ctx.req.ttft_slo_ms
    if slo is None:
        return ""
    broke = [p for p in methods if p.available and p.fits_memory and not p.meets_slo and "TTFT SLO" in p.reason]
    if not broke:
        return ""
    names = ", ".join(f"{p.label} ({_ms(p.ttft_ms)} TTFT)" for p in broke[:4]) + (" and others" if len(broke) > 4
                                                                                 else "")
    verb = "meets" if len(broke) == 1 else "meet"
    base_breaks = baseline is not None and not baseline.meets_slo and "TTFT SLO" in baseline.reason
    why = (f"so does no speculation ({_ms(baseline.ttft_ms)} TTFT at its batch)" if base_breaks else
           "the draft's own prefill and the longer speculative step delay the first token past it")
    return (f"On {ctx.req.tp} x {ctx.hw.label}, {names} {verb} the {ctx.req.tpot_slo_ms:g} ms TPOT SLO but "
            f"break{'s' if len(broke) == 1 else ''} the {slo:g} ms TTFT SLO: {why}.")


def ttft_fleet_sentence(ctx: Context, points: Sequence[OperatingPoint], fleet) -> str:
    """'' or the sentence that says what the TTFT SLO costs the speculative method the TPOT SLO alone would bill
    least: its fleet under the TPOT SLO alone (GPUs, bill, TTFT) against its fleet holding both SLOs, where the
    TTFT SLO added replicas. `fleet`: the plan's fleet at each method's one K (planner.money.sizing.plan_fleet)."""
    import dataclasses

    from planner.context import make_context
    from planner.money.bill import bills
    from planner.money.sizing import plan_fleet

    req = ctx.req
    if req.ttft_slo_ms is None or fleet is None:
        return ""
    loose = make_context(dataclasses.replace(req, ttft_slo_ms=None), ctx.catalog, ctx.segs, tp=ctx.tp)
    free = plan_fleet(loose, [p for p in points if p.method != NO_SPEC])  # only the methods' bills are read
    if free is None:
        return ""
    kw = dict(billing=req.billing, monthly_output_tokens=req.monthly_output_tokens)
    held, alone = bills(fleet, **kw), bills(free, **kw)
    spec = [m for m, b in alone.items() if m != NO_SPEC and b.feasible and math.isfinite(b.usd_per_month)]
    if not spec:
        return ""
    m = min(spec, key=lambda name: alone[name].usd_per_month)
    a, h = alone[m], held.get(m)
    if h is not None and h.feasible and h.usd_per_month <= a.usd_per_month * (1 + 1e-9):
        return ""
    cost = (f"holding the {req.ttft_slo_ms:g} ms TTFT SLO takes {h.peak_gpus:,} ({fmt_usd(h.usd_per_month)}/month)"
            if h is not None and h.feasible else f"no fleet of it holds the {req.ttft_slo_ms:g} ms TTFT SLO")
    return (f"Under the TPOT SLO alone {a.label} at K={a.k} would need {a.peak_gpus:,} GPUs at the peak "
            f"({fmt_usd(a.usd_per_month)}/month {req.billing}) with a {_ms(a.ttft_ms)} first token; {cost}.")
