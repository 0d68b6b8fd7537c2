"""The board report's content as one record (`BoardReport`), built from the Plan the pages show: the decision, the
money (today's bill, the recommended bill, the saving, payback, NPV, risk-weighted NPV and the probability it pays),
the fleet by hour, the saving's drivers (planner.uncertainty.sensitivity.tornado), the hardware comparison when the
request asked for it, and the assumptions in words. Every figure is formatted here, with its unit, by
planner.formatting; the renderers (report.board_html, report.board_pdf) lay the record out and compute no number. The
raw fields go to the JSON appendix (`appendix_json`, planner.formatting.plan_dict) and the CSV, not to these pages.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from planner.answer import Plan
from planner.checks.knee import knee_sentence, slo_knee
from planner.decision.hardware_choice import hardware_sentence
from planner.formatting import fmt_acceptance, fmt_months, fmt_usd, json_text, plan_dict
from planner.request import NO_SPEC, PlanRequest
from planner.uncertainty.sensitivity import PLAN_MC_SAMPLES, tornado

MAX_DRIVERS = 6  # the tornado's widest bars; the Sensitivity page shows them all
MAX_TEXT_CHARS = 260  # an assumption's value or source longer than this is cut (the JSON appendix has it whole)
ACCEPTANCE_CONVENTION = ("Acceptance: alpha is the per-token acceptance at draft position 1; the acceptance length "
                         "tau counts tokens per verifier step, the bonus token included. Each method is compared at "
                         "its own best batch under the same TPOT SLO; nothing that misses the SLO or does not fit "
                         "memory is recommended.")


@dataclass(frozen=True)
class Figure:
    """One money line: what it is, the figure with its unit ('$12,857/month') and how it is read."""

    label: str
    value: str
    note: str = ""


@dataclass(frozen=True)
class HourBar:
    hour: int  # 0-23
    today_gpus: int
    recommended_gpus: int | None  # None: no second fleet (the recommendation is today's configuration)


@dataclass(frozen=True)
class DriverBar:
    """One tornado bar: the monthly saving with the driver at its low and high end, the others at their middle."""

    driver: str
    range: str
    low_usd: float  # $/month
    high_usd: float
    low_text: str  # the same, formatted
    high_text: str


@dataclass(frozen=True)
class HardwareRow:
    gpu: str
    price: str  # '$4.40/GPU-hour (list midpoint)'
    without: str  # '$141,425/month: 44 GPUs, TP 4, bf16' or 'no fleet meets the SLO'
    with_speculation: str
    cheapest: bool  # the cheapest fleet over every GPU type is on this one


@dataclass(frozen=True)
class ServingRow:
    """One fleet the serving choice weighed (Plan.serving_options): served "best" or "disaggregated"."""

    fleet: str  # 'today (no speculation)' or 'with the best method (EAGLE-3 K=2)'
    serving: str  # 'co-located' or 'disaggregated: prefill 2 GPUs at TP 1, decode 12 at TP 1'
    bill: str  # '$44,999/month' or 'misses an SLO'
    latency: str  # 'TPOT 19.9 ms, TTFT 166.0 ms'
    picked: bool  # the headline's


@dataclass(frozen=True)
class AssumptionLine:
    what: str
    value: str
    source: str
    date: str


@dataclass(frozen=True)
class BoardReport:
    title: str
    generated: str  # ISO date
    scenario: str  # model, hardware, price, SLO, volume, in one line
    decision: str  # the plan's verdict: the decision in one sentence
    elsewhere: str  # '' or the verdict's sentence naming a cheaper GPU type (the hardware comparison's)
    knee: str  # '' or the sentence saying the saving sits on a knee of the SLO
    money: tuple[Figure, ...]
    fleet_note: str
    today_label: str  # the chart's legend: 'today (no speculation)'
    recommended_label: str  # 'recommended (EAGLE-3)' or 'EAGLE-3 (not recommended)'; '' when there is no second fleet
    hours: tuple[HourBar, ...]
    max_gpus: int  # the chart's scale: the most GPUs in any hour of either fleet
    drivers_note: str
    drivers: tuple[DriverBar, ...]
    drivers_mid_usd: float  # the middle saving the bars move around, $/month
    drivers_mid_text: str
    hardware_note: str
    hardware: tuple[HardwareRow, ...]  # empty: the request did not ask for the comparison
    acceptance: str  # the acceptance convention and the tier the plan used
    assumptions: tuple[AssumptionLine, ...]
    appendix_note: str
    serving_note: str = ""
    serving: tuple[ServingRow, ...] = ()  # empty: served co-located only


def _per_month(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{fmt_usd(x)}/month"


def _gpus(n: int) -> str:
    return f"{n:,} GPU" + ("" if n == 1 else "s")


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x * 100:.0f} %"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS - 3].rstrip() + "..."


def at_volume(req: PlanRequest) -> PlanRequest:
    """The plan's request with the spend cleared: its volume is already the one the spend buys (planner.plan derives
    it), so the tornado runs at the plan's volume, as the Sensitivity page's does
    (views.sidebar.state.at_spend_volume)."""
    return dataclasses.replace(req, spend_usd_per_month=None, spend_gpus=None)


def _money(p: Plan) -> tuple[Figure, ...]:
    e, req = p.economics, p.request
    today, best = p.reference_fleet, p.best_fleet
    switching = p.best is not None and p.reference is not None and p.best.method != p.reference.method
    out = [Figure("Today's monthly bill", _per_month(e.reference_bill_usd_per_month),
                  f"{today.label}: {_gpus(today.peak_gpus)} at the peak ({today.tp} per replica), {e.billing} fleet"
                  if today is not None else "no configuration serves the traffic under the SLO today")]
    if best is not None and (today is None or (best.method, best.tp) != (today.method, today.tp)):
        label = "Recommended monthly bill" if p.recommendation is not None else \
            f"Monthly bill with {best.label} (not recommended)"
        k = f" K={best.k}," if best.k else ""
        out.append(Figure(label, _per_month(e.new_bill_usd_per_month),
                          f"{best.label},{k} {_gpus(best.peak_gpus)} at the peak ({best.tp} per replica), "
                          f"{e.billing} fleet"))
    band = (f"5th to 95th percentile of the draws: {_per_month(e.saving_p05_usd)} to {_per_month(e.saving_p95_usd)}"
            if e.saving_p05_usd is not None else "")
    out.append(Figure("Monthly saving", _per_month(e.monthly_saving_usd) if switching else "none: no switch", band))
    if switching:
        out.append(Figure("Payback", fmt_months(e.payback_months),
                          f"one-time cost {fmt_usd(e.one_time_usd)} ({fmt_usd(e.one_time_low_usd)} to "
                          f"{fmt_usd(e.one_time_high_usd)}: training and engineering)"))
        out.append(Figure("NPV", fmt_usd(e.npv_usd), f"over {e.horizon_months} months at "
                          f"{e.annual_discount_rate * 100:g} %/year, at the middle saving"))
    if e.risk_weighted_npv_usd is not None:
        out.append(Figure("Risk-weighted NPV", fmt_usd(e.risk_weighted_npv_usd),
                          f"the NPV averaged over {PLAN_MC_SAMPLES} Monte Carlo draws"))
    if e.p_saving_positive is not None:
        out.append(Figure("Probability it pays", _pct(e.p_saving_positive),
                          f"P(saving > 0) over {PLAN_MC_SAMPLES} draws; pays back within {e.horizon_months} months "
                          f"in {_pct(e.p_payback_within_horizon)}; a recommendation needs "
                          f"{_pct(req.confidence)}"))
    return tuple(out)


def _hours(p: Plan) -> tuple[tuple[HourBar, ...], str, str, int]:
    today, best = p.reference_fleet, p.best_fleet
    if today is None and best is None:
        return (), "", "", 0
    if best is not None and today is not None and (best.method, best.tp) == (today.method, today.tp):
        best = None
    one = today or best
    other = {h.hour: h.gpus for h in best.hours} if best is not None and today is not None else {}
    bars = tuple(HourBar(h.hour, h.gpus, other.get(h.hour) if other else None) for h in one.hours)
    top = max([b.today_gpus for b in bars] + [b.recommended_gpus or 0 for b in bars], default=0)
    return bars, one.label if today is not None else "", best.label if best is not None and today is not None \
        else "", top


def _drivers(p: Plan, catalog) -> tuple[tuple[DriverBar, ...], float, str]:
    if p.best is None:
        return (), math.nan, ""
    bars = [b for b in tornado(at_volume(p.request), catalog, p.best.method)
            if math.isfinite(b.low_saving_usd) and math.isfinite(b.high_saving_usd)]
    bars.sort(key=lambda b: -abs(b.high_saving_usd - b.low_saving_usd))
    out = tuple(DriverBar(b.driver, b.range, b.low_saving_usd, b.high_saving_usd, _per_month(b.low_saving_usd),
                          _per_month(b.high_saving_usd)) for b in bars[:MAX_DRIVERS])
    mid = bars[0].mid_saving_usd if bars else math.nan
    return out, mid, _per_month(mid)


def _drivers_note(p: Plan, drivers: tuple[DriverBar, ...], mid_text: str) -> str:
    """What the tornado draws: the best method's saving against no speculation on the requested GPUs per replica
    (planner.uncertainty.sensitivity.tornado), and, when today is another configuration, that the headline's saving is
    not it."""
    if p.best is None:
        return "No method fits memory and meets the SLO, so there is no saving to draw."
    against = f"no speculation on {_gpus(p.request.tp)} per replica"
    if not drivers:
        return (f"No driver to draw: {p.best.label}'s saving is drawn against {against}, which cannot serve this "
                "traffic under the SLO.")
    ref = p.reference_fleet
    other = "" if ref is None or (ref.method, ref.tp) == (NO_SPEC, p.request.tp) else (
        f" Today runs {ref.label} on {_gpus(ref.tp)} per replica, so the headline's saving is against that fleet, "
        "not this one.")
    return (f"The monthly saving of {p.best.label} against {against} when one driver moves to its low or high end "
            f"and the others stay at their middle ({mid_text}); the widest {len(drivers)} of the Sensitivity page's "
            f"bars.{other}")


def _hardware(p: Plan) -> tuple[tuple[HardwareRow, ...], str]:
    hc = p.hardware_choice
    if hc is None:
        return (), ""
    best = hc.cheapest

    def opt(o) -> str:
        return f"{_per_month(o.usd_per_month)}: {o.short}" if o is not None else "no fleet meets the SLO"

    def row(c, serving: str, off, on) -> HardwareRow:
        return HardwareRow(c.label + ("" if not hc.disaggregated else f", {serving.replace('colo', 'co-lo')}"),
                           f"${c.usd_per_gpu_hour:.2f}/GPU-hour ({c.price_source.split(' (')[0]})", opt(off), opt(on),
                           best is not None and c.hardware == best.hardware and best.serving == serving)

    # served disaggregated or best: two rows per GPU type, co-located and disaggregated (hardware_choice's four fleets)
    rows = tuple(r for c in hc.choices for r in (
        row(c, "colocated", c.no_speculation, c.speculation),
        *((row(c, "disaggregated", c.disaggregated_no_speculation, c.disaggregated_speculation),)
          if hc.disaggregated else ())))
    note = (f"The cheapest fleet for the same traffic and SLO on each GPU type ({hc.billing} bills). "
            + (f"Cheapest overall: {best.description}, {_per_month(best.usd_per_month)}. " if best else "")
            + hc.note)
    return rows, note


def _serving(p: Plan) -> tuple[tuple[ServingRow, ...], str]:
    """The fleets the serving choice weighed, co-located and disaggregated, with and without speculation, and which the
    headline shows (none when served co-located)."""
    shown = {"today": p.reference_fleet, "best": p.best_fleet}

    def ms(v: float) -> str:
        return f"{v:.1f} ms" if math.isfinite(v) else "n/a"

    rows = []
    for f in p.serving_options:
        head = shown.get(f.role)
        how = "co-located" if f.serving == "colocated" else "disaggregated: " + ", ".join(
            f"{q.role} {_gpus(q.peak_gpus)} at TP {q.tp}" for q in f.pools)
        spec = "" if f.method == NO_SPEC else f" K={f.k}"
        rows.append(ServingRow(f"{'today' if f.role == 'today' else 'with the best method'} ({f.label}{spec})", how,
                               _per_month(f.usd_per_month) if f.feasible else "misses an SLO",
                               f"TPOT {ms(f.tpot_ms)}, TTFT {ms(f.ttft_ms)}",
                               head is not None and (head.serving, head.method, head.usd_per_month) == (
                                   f.serving, f.method, f.usd_per_month)))
    if not rows:
        return (), ""
    req = p.request
    ttft = f", TTFT SLO {req.ttft_slo_ms:g} ms" if req.ttft_slo_ms is not None else ", no TTFT SLO stated"
    return tuple(rows), (f"Served '{req.serving}': the fleets weighed for today and the best method ({req.billing} "
                         f"bills; TPOT SLO {req.tpot_slo_ms:g} ms{ttft}); the headline shows the cheaper that meets "
                         "both SLOs (marked).")


def _assumptions(p: Plan, catalog) -> tuple[AssumptionLine, ...]:
    """The plan's assumptions, without the acceptance priors of methods that are neither today's nor the best's."""
    keep = {p.best.method if p.best else None, p.reference.method if p.reference else None, p.request.current_method}
    others = [m.label for name, m in catalog.methods.items() if name not in keep]
    out = []
    for a in p.assumptions:
        if any(a.what.startswith(f"{lab} alpha") or a.what.startswith(f"{lab} acceptance") for lab in others):
            continue
        out.append(AssumptionLine(a.what, _cut(a.value), _cut(a.source), a.date or "undated"))
    return tuple(out)


def _scenario(p: Plan, catalog) -> str:
    req = p.request
    volume = f"{req.monthly_output_tokens / 1e9:,.1f}B output tokens/month"
    if p.spend is not None:
        volume += f" (what a spend of {fmt_usd(p.spend.spend_usd_per_month)}/month buys)"
    return (f"{catalog.models[req.model].label} on {req.tp} x {catalog.hardware[req.hardware].label} ({req.dtype}) at "
            f"${p.usd_per_gpu_hour:.2f}/GPU-hour, TPOT SLO {req.tpot_slo_ms:g} ms ({req.tpot_percentile})"
            + (f", TTFT SLO {req.ttft_slo_ms:g} ms ({req.ttft_percentile})" if req.ttft_slo_ms is not None else "")
            + f", {volume}.")


def _decision(p: Plan, catalog) -> tuple[str, str]:
    """(the decision, the sentence on a cheaper GPU type): the plan's verdict, whose last sentence is the hardware
    comparison's when it names a cheaper GPU type (planner.plan appends it)."""
    elsewhere = hardware_sentence(p.hardware_choice, p.request, catalog) if p.hardware_choice is not None else ""
    if elsewhere and p.verdict.endswith(elsewhere):
        return p.verdict[:-len(elsewhere)].rstrip(), elsewhere
    return p.verdict, ""


def board_report(p: Plan, catalog, *, generated: str) -> BoardReport:
    """The board report's content for plan `p` (planner.plan.plan's answer, the one the pages show)."""
    decision, elsewhere = _decision(p, catalog)
    hours, today_label, rec_label, top = _hours(p)
    drivers, mid, mid_text = _drivers(p, catalog)
    hw, hw_note = _hardware(p)
    serving, serving_note = _serving(p)
    knee = knee_sentence(slo_knee(p, catalog)) if p.economics.monthly_saving_usd is not None else ""
    one = p.reference_fleet or p.best_fleet
    cur = catalog.methods[p.request.current_method].label if p.request.current_method != NO_SPEC else \
        "no speculation"
    tier = fmt_acceptance(p.best) if p.best is not None else ""
    return BoardReport(
        title="Speculative decoding: the decision and the money",
        generated=generated,
        scenario=_scenario(p, catalog),
        decision=decision,
        elsewhere=elsewhere,
        knee=knee,
        money=_money(p),
        fleet_note=(f"{one.hours_source}. GPUs each hour of the day; the bill pays for these GPU-hours. Today runs "
                    f"{cur}." if one is not None else "No configuration meets the SLO, so no fleet can be sized."),
        today_label=f"today ({today_label})" if today_label else "",
        recommended_label=("" if not rec_label else f"recommended ({rec_label})" if p.recommendation is not None
                           else f"{rec_label} (not recommended)"),
        hours=hours,
        max_gpus=top,
        drivers_note=_drivers_note(p, drivers, mid_text),
        drivers=drivers,
        drivers_mid_usd=mid,
        drivers_mid_text=mid_text,
        hardware_note=hw_note,
        hardware=hw,
        acceptance=" ".join(x for x in (tier, ACCEPTANCE_CONVENTION) if x),
        assumptions=_assumptions(p, catalog),
        serving_note=serving_note,
        serving=serving,
        appendix_note="Every number behind these pages, field by field, is in the CSV and the JSON appendix "
                      "downloaded with this report.",
    )


def appendix_json(p: Plan) -> str:
    """The JSON appendix: every field of the plan (planner.formatting.plan_dict, written as the CLI writes it)."""
    return json_text(plan_dict(p))
