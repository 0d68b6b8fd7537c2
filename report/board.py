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

from i18n import N_, language, tr, tr_known, using
from i18n.numbers import fmt_acceptance, fmt_gpus, fmt_months, fmt_per_month, fmt_share, fmt_tokens, fmt_usd, na
from planner.answer import Plan
from planner.checks.knee import knee_sentence, slo_knee
from planner.decision.hardware_choice import hardware_sentence
from planner.formatting import json_text, plan_dict
from planner.request import NO_SPEC, PlanRequest
from planner.uncertainty.sensitivity import PLAN_MC_SAMPLES, tornado

MAX_DRIVERS = 6  # the tornado's widest bars; the Sensitivity page shows them all
MAX_TEXT_CHARS = 260  # an assumption's value or source longer than this is cut (the JSON appendix has it whole)
ACCEPTANCE_CONVENTION = N_("Acceptance: alpha is the per-token acceptance at draft position 1; the acceptance length "
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
    lang: str = "en"  # the language the record is written in (i18n.LANGUAGES); the renderers label it in the same
    decision_note: str = ""  # in another language than English: the planner's own (English) sentence, in small type


def _per_month(x: float | None) -> str:
    return fmt_per_month(x)


def _pct(x: float | None) -> str:
    return fmt_share(x)


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
    out = [Figure(tr("Today's monthly bill"), _per_month(e.reference_bill_usd_per_month),
                  tr("{label}: {gpus} at the peak ({tp} per replica), {billing} fleet", label=tr_known(today.label),
                     gpus=fmt_gpus(today.peak_gpus), tp=today.tp, billing=tr_known(e.billing))
                  if today is not None else tr("no configuration serves the traffic under the SLO today"))]
    if best is not None and (today is None or (best.method, best.tp) != (today.method, today.tp)):
        label = tr("Recommended monthly bill") if p.recommendation is not None else \
            tr("Monthly bill with {label} (not recommended)", label=best.label)
        k = f" K={best.k}," if best.k else ""
        out.append(Figure(label, _per_month(e.new_bill_usd_per_month),
                          tr("{label},{k} {gpus} at the peak ({tp} per replica), {billing} fleet", label=best.label,
                             k=k, gpus=fmt_gpus(best.peak_gpus), tp=best.tp, billing=tr_known(e.billing))))
    band = (tr("5th to 95th percentile of the draws: {low} to {high}", low=_per_month(e.saving_p05_usd),
               high=_per_month(e.saving_p95_usd)) if e.saving_p05_usd is not None else "")
    out.append(Figure(tr("Monthly saving"), _per_month(e.monthly_saving_usd) if switching else tr("none: no switch"),
                      band))
    if switching:
        out.append(Figure(tr("Payback"), fmt_months(e.payback_months),
                          tr("one-time cost {cost} ({low} to {high}: training and engineering)",
                             cost=fmt_usd(e.one_time_usd), low=fmt_usd(e.one_time_low_usd),
                             high=fmt_usd(e.one_time_high_usd))))
        out.append(Figure(tr("NPV"), fmt_usd(e.npv_usd), tr("over {months} months at {rate} %/year, at the middle "
                                                             "saving", months=e.horizon_months,
                                                             rate=f"{e.annual_discount_rate * 100:g}")))
    if e.risk_weighted_npv_usd is not None:
        out.append(Figure(tr("Risk-weighted NPV"), fmt_usd(e.risk_weighted_npv_usd),
                          tr("the NPV averaged over {n} Monte Carlo draws", n=PLAN_MC_SAMPLES)))
    if e.p_saving_positive is not None:
        out.append(Figure(tr("Probability it pays"), _pct(e.p_saving_positive),
                          tr("P(saving > 0) over {n} draws; pays back within {months} months in {p_payback}; a "
                             "recommendation needs {confidence}", n=PLAN_MC_SAMPLES, months=e.horizon_months,
                             p_payback=_pct(e.p_payback_within_horizon), confidence=_pct(req.confidence))))
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
    return bars, tr_known(one.label) if today is not None else "", best.label if best is not None and \
        today is not None else "", top


def _drivers(p: Plan, catalog) -> tuple[tuple[DriverBar, ...], float, str]:
    if p.best is None:
        return (), math.nan, ""
    bars = [b for b in tornado(at_volume(p.request), catalog, p.best.method)
            if math.isfinite(b.low_saving_usd) and math.isfinite(b.high_saving_usd)]
    bars.sort(key=lambda b: -abs(b.high_saving_usd - b.low_saving_usd))
    out = tuple(DriverBar(tr_known(b.driver), b.range, b.low_saving_usd, b.high_saving_usd,
                          _per_month(b.low_saving_usd), _per_month(b.high_saving_usd)) for b in bars[:MAX_DRIVERS])
    mid = bars[0].mid_saving_usd if bars else math.nan
    return out, mid, _per_month(mid)


def _drivers_note(p: Plan, drivers: tuple[DriverBar, ...], mid_text: str) -> str:
    """What the tornado draws: the best method's saving against no speculation on the requested GPUs per replica
    (planner.uncertainty.sensitivity.tornado), and, when today is another configuration, that the headline's saving is
    not it."""
    if p.best is None:
        return tr("No method fits memory and meets the SLO, so there is no saving to draw.")
    against = tr("no speculation on {gpus} per replica", gpus=fmt_gpus(p.request.tp))
    if not drivers:
        return tr("No driver to draw: {label}'s saving is drawn against {against}, which cannot serve this traffic "
                  "under the SLO.", label=p.best.label, against=against)
    ref = p.reference_fleet
    other = "" if ref is None or (ref.method, ref.tp) == (NO_SPEC, p.request.tp) else tr(
        " Today runs {label} on {gpus} per replica, so the headline's saving is against that fleet, not this one.",
        label=ref.label, gpus=fmt_gpus(ref.tp))
    return tr("The monthly saving of {label} against {against} when one driver moves to its low or high end and the "
              "others stay at their middle ({mid}); the widest {n} of the Sensitivity page's bars.{other}",
              label=p.best.label, against=against, mid=mid_text, n=len(drivers), other=other)


def _hardware(p: Plan) -> tuple[tuple[HardwareRow, ...], str]:
    hc = p.hardware_choice
    if hc is None:
        return (), ""
    best = hc.cheapest

    def opt(o) -> str:
        return f"{_per_month(o.usd_per_month)}: {o.short}" if o is not None else tr("no fleet meets the SLO")

    def row(c, serving: str, off, on) -> HardwareRow:
        how = tr("co-located") if serving == "colocated" else tr("disaggregated")
        return HardwareRow(c.label + ("" if not hc.disaggregated else f", {how}"),
                           tr("{price}/GPU-hour ({source})", price=fmt_usd(c.usd_per_gpu_hour, 2),
                              source=c.price_source.split(' (')[0]), opt(off), opt(on),
                           best is not None and c.hardware == best.hardware and best.serving == serving)

    # served disaggregated or best: two rows per GPU type, co-located and disaggregated (hardware_choice's four fleets)
    rows = tuple(r for c in hc.choices for r in (
        row(c, "colocated", c.no_speculation, c.speculation),
        *((row(c, "disaggregated", c.disaggregated_no_speculation, c.disaggregated_speculation),)
          if hc.disaggregated else ())))
    note = (tr("The cheapest fleet for the same traffic and SLO on each GPU type ({billing} bills). ",
               billing=tr_known(hc.billing))
            + (tr("Cheapest overall: {what}, {bill}. ", what=best.description, bill=_per_month(best.usd_per_month))
               if best else "")
            + hc.note)
    return rows, note


def _serving(p: Plan) -> tuple[tuple[ServingRow, ...], str]:
    """The fleets the serving choice weighed, co-located and disaggregated, with and without speculation, and which the
    headline shows (none when served co-located)."""
    shown = {"today": p.reference_fleet, "best": p.best_fleet}

    def ms(v: float) -> str:
        return f"{v:.1f} ms" if math.isfinite(v) else na()

    rows = []
    for f in p.serving_options:
        head = shown.get(f.role)
        how = tr("co-located") if f.serving == "colocated" else tr("disaggregated: ") + ", ".join(
            tr("{role} {gpus} at TP {tp}", role=tr_known(q.role), gpus=fmt_gpus(q.peak_gpus), tp=q.tp) for q in f.pools)
        spec = "" if f.method == NO_SPEC else f" K={f.k}"
        who = tr("today ({label})", label=f"{tr_known(f.label)}{spec}") if f.role == "today" else \
            tr("with the best method ({label})", label=f"{f.label}{spec}")
        rows.append(ServingRow(who, how, _per_month(f.usd_per_month) if f.feasible else tr("misses an SLO"),
                               f"TPOT {ms(f.tpot_ms)}, TTFT {ms(f.ttft_ms)}",
                               head is not None and (head.serving, head.method, head.usd_per_month) == (
                                   f.serving, f.method, f.usd_per_month)))
    if not rows:
        return (), ""
    req = p.request
    ttft = tr(", TTFT SLO {ms} ms", ms=f"{req.ttft_slo_ms:g}") if req.ttft_slo_ms is not None else \
        tr(", no TTFT SLO stated")
    return tuple(rows), tr("Served '{serving}': the fleets weighed for today and the best method ({billing} bills; "
                           "TPOT SLO {slo} ms{ttft}); the headline shows the cheaper that meets both SLOs (marked).",
                           serving=tr_known(req.serving), billing=tr_known(req.billing), slo=f"{req.tpot_slo_ms:g}",
                           ttft=ttft)


def _assumptions(p: Plan, catalog) -> tuple[AssumptionLine, ...]:
    """The plan's assumptions, without the acceptance priors of methods that are neither today's nor the best's."""
    keep = {p.best.method if p.best else None, p.reference.method if p.reference else None, p.request.current_method}
    others = [m.label for name, m in catalog.methods.items() if name not in keep]
    out = []
    for a in p.assumptions:
        if any(a.what.startswith(f"{lab} alpha") or a.what.startswith(f"{lab} acceptance") for lab in others):
            continue
        out.append(AssumptionLine(a.what, _cut(a.value), _cut(a.source), a.date or tr("undated")))
    return tuple(out)


def _scenario(p: Plan, catalog) -> str:
    req = p.request
    volume = tr("{volume} output tokens/month", volume=fmt_tokens(req.monthly_output_tokens, 1))
    if p.spend is not None:
        volume += tr(" (what a spend of {spend}/month buys)", spend=fmt_usd(p.spend.spend_usd_per_month))
    ttft = (tr(", TTFT SLO {ms} ms ({stat})", ms=f"{req.ttft_slo_ms:g}", stat=req.ttft_percentile)
            if req.ttft_slo_ms is not None else "")
    return tr("{model} on {tp} x {gpu} ({dtype}) at {price}/GPU-hour, TPOT SLO {slo} ms ({stat}){ttft}, {volume}.",
              model=catalog.models[req.model].label, tp=req.tp, gpu=catalog.hardware[req.hardware].label,
              dtype=req.dtype, price=fmt_usd(p.usd_per_gpu_hour, 2), slo=f"{req.tpot_slo_ms:g}",
              stat=req.tpot_percentile, ttft=ttft, volume=volume)


def knee_text(k) -> str:
    """planner.checks.knee.knee_sentence in the reader's language ('' when the saving is steady within +-20 % of the
    SLO), from the SloKnee's fields."""
    if language() == "en" or not k.on_knee:
        return knee_sentence(k)

    def usd(v: float | None) -> str:
        return tr("no saving computed") if v is None else _per_month(v)

    return tr("This answer sits on a knee of the SLO: the saving is {saving} at {slo} ms TPOT, {low} at {low_slo} ms "
              "and {high} at {high_slo} ms; state the SLO you really need before you act on it.",
              saving=usd(k.saving_usd), slo=f"{k.slo_ms:g}", low=usd(k.low_saving_usd), low_slo=f"{k.low_slo_ms:g}",
              high=usd(k.high_saving_usd), high_slo=f"{k.high_slo_ms:g}")


def headline(p: Plan) -> str:
    """The decision in the reader's language, from the plan's fields (the planner's verdict is English): switch to the
    recommended method with the bills, saving, payback and probability, or stay with today and why not."""
    e = p.economics
    if p.reference is None and p.best is None:
        return tr("No configuration meets the SLO: nothing can be recommended.")
    if p.recommendation is not None:
        return tr("Switch to {label} (K={k}): the monthly bill goes from {today} to {new}, a saving of {saving}; "
                  "payback {payback}; P(saving > 0) {p}.", label=p.recommendation.label, k=p.recommendation.k,
                  today=_per_month(e.reference_bill_usd_per_month), new=_per_month(e.new_bill_usd_per_month),
                  saving=_per_month(e.monthly_saving_usd), payback=fmt_months(e.payback_months),
                  p=_pct(e.p_saving_positive))
    today = tr_known(p.reference_fleet.label) if p.reference_fleet is not None else tr("no speculation")
    return tr("Stay with {today}: no method saves enough to recommend (the best, {best}, saves {saving}; P(saving > 0) "
              "{p}).", today=today, best=p.best.label if p.best is not None else tr("none"),
              saving=_per_month(e.monthly_saving_usd), p=_pct(e.p_saving_positive))


def _decision(p: Plan, catalog) -> tuple[str, str]:
    """(the decision, the sentence on a cheaper GPU type): the plan's verdict, whose last sentence is the hardware
    comparison's when it names a cheaper GPU type (planner.plan appends it). In another language than English the
    report leads with `headline` and keeps this as a note (BoardReport.decision_note)."""
    elsewhere = hardware_sentence(p.hardware_choice, p.request, catalog) if p.hardware_choice is not None else ""
    verdict, other = p.verdict, ""
    if elsewhere and p.verdict.endswith(elsewhere):
        verdict, other = p.verdict[:-len(elsewhere)].rstrip(), elsewhere
    return verdict, other


def board_report(p: Plan, catalog, *, generated: str, lang: str = "en") -> BoardReport:
    """The board report's content for plan `p` (planner.plan.plan's answer, the one the pages show), written in
    `lang` (i18n.LANGUAGES; the planner's own sentences, the decision among them, stay English)."""
    with using(lang):
        return _board_report(p, catalog, generated=generated, lang=lang)


def _board_report(p: Plan, catalog, *, generated: str, lang: str) -> BoardReport:
    decision, elsewhere = _decision(p, catalog)
    note = ""
    if lang != "en":  # the decision from the plan's fields in the reader's language; the planner's sentence below
        decision, note = headline(p), tr("The planner, in English: {verdict}", verdict=decision)
    hours, today_label, rec_label, top = _hours(p)
    drivers, mid, mid_text = _drivers(p, catalog)
    hw, hw_note = _hardware(p)
    serving, serving_note = _serving(p)
    knee = knee_text(slo_knee(p, catalog)) if p.economics.monthly_saving_usd is not None else ""
    one = p.reference_fleet or p.best_fleet
    cur = catalog.methods[p.request.current_method].label if p.request.current_method != NO_SPEC else \
        tr("no speculation")
    tier = fmt_acceptance(p.best) if p.best is not None else ""
    return BoardReport(
        title=tr("Speculative decoding: the decision and the money"),
        generated=generated,
        scenario=_scenario(p, catalog),
        decision=decision,
        elsewhere=elsewhere,
        knee=knee,
        money=_money(p),
        fleet_note=(tr("{hours}. GPUs each hour of the day; the bill pays for these GPU-hours. Today runs {cur}.",
                       hours=one.hours_source, cur=cur) if one is not None
                    else tr("No configuration meets the SLO, so no fleet can be sized.")),
        today_label=tr("today ({label})", label=today_label) if today_label else "",
        recommended_label=("" if not rec_label else tr("recommended ({label})", label=rec_label)
                           if p.recommendation is not None else tr("{label} (not recommended)", label=rec_label)),
        hours=hours,
        max_gpus=top,
        drivers_note=_drivers_note(p, drivers, mid_text),
        drivers=drivers,
        drivers_mid_usd=mid,
        drivers_mid_text=mid_text,
        hardware_note=hw_note,
        hardware=hw,
        acceptance=" ".join(x for x in (tier, tr(ACCEPTANCE_CONVENTION)) if x),
        assumptions=_assumptions(p, catalog),
        serving_note=serving_note,
        serving=serving,
        appendix_note=tr("Every number behind these pages, field by field, is in the CSV and the JSON appendix "
                         "downloaded with this report."),
        lang=lang,
        decision_note=note,
    )


def appendix_json(p: Plan) -> str:
    """The JSON appendix: every field of the plan (planner.formatting.plan_dict, written as the CLI writes it)."""
    return json_text(plan_dict(p))
