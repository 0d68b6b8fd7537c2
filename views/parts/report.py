"""Report builders (no Streamlit): a CSV of every scenario number (the board report itself is report.board).

CSV cells that a spreadsheet would run as a formula (starting with = + - @, tab, carriage return or line feed) are
prefixed with a single quote (OWASP "CSV injection"), and every cell holding a delimiter, a quote, a carriage
return or a line feed is quoted (RFC 4180 line ends: Python's csv writer quotes a field only for the characters of
its own line terminator, so with "\n" alone a bare "\r" went out unquoted and a spreadsheet started a new row,
and a new formula, after it).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from typing import Any

from planner.answer import LeverStep, Plan, PlanFleet
from planner.formatting import plan_dict

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\n")


def neutralise(cell: Any) -> Any:
    """A cell a spreadsheet would evaluate becomes text: a leading single quote."""
    if isinstance(cell, str) and cell.startswith(FORMULA_PREFIXES):
        return "'" + cell
    return cell


def to_csv(rows: list[dict[str, Any]]) -> str:
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow([neutralise(c) for c in cols])
    for r in rows:
        w.writerow([neutralise(_cell(r.get(c, ""))) for c in cols])
    return buf.getvalue()


def _cell(v: Any) -> Any:
    if isinstance(v, float):
        return "inf" if math.isinf(v) else (round(v, 6) if math.isfinite(v) else "")
    if isinstance(v, (list, tuple, dict)):
        return str(v)
    return v


# Plan fields the report shows in its own sections (below); any other field the Plan carries (added by other parts of
# the planner) is written by `extra_rows`, so it reaches the CSV without a change here.
SHOWN_PLAN_FIELDS = frozenset({"request", "segments", "usd_per_gpu_hour", "baseline", "reference", "reference_note",
                               "methods", "best", "recommendation", "verdict", "economics", "levers", "deploy",
                               "assumptions", "costs", "alternatives", "fleet", "reference_fleet", "best_fleet"})
SHOWN_ECONOMICS_FIELDS = frozenset({"reference_usd_per_mtok", "new_usd_per_mtok", "monthly_output_tokens",
                                    "monthly_saving_usd", "monthly_saving_low_usd", "monthly_saving_high_usd",
                                    "one_time_usd", "one_time_low_usd", "one_time_high_usd", "payback_months",
                                    "payback_low_months", "payback_high_months", "npv_usd", "horizon_months",
                                    "annual_discount_rate"})
# Fields read for the headline when the plan carries them (getattr, None when absent): the month's bills, effective
# CPMs, peak GPUs and the chance that switching pays, on the economics (or the Plan); the confidence a recommendation
# requires, on the request.
HEADLINE_FIELDS = (("billing", "billing", ""),
                   ("reference_bill_usd_per_month", "bill today", "$/month"),
                   ("new_bill_usd_per_month", "bill with the best method", "$/month"),
                   ("reference_effective_usd_per_mtok", "effective CPM today (bill / output tokens)", "$/Mtok output"),
                   ("new_effective_usd_per_mtok", "effective CPM with the best method (bill / output tokens)",
                    "$/Mtok output"),
                   ("reference_peak_gpus", "peak GPUs today", "GPUs"),
                   ("new_peak_gpus", "peak GPUs with the best method", "GPUs"),
                   ("p_saving_positive", "P(saving > 0)", "probability"),
                   ("p_payback_within_horizon", "P(payback within the horizon)", "probability"),
                   ("risk_weighted_npv_usd", "risk-weighted NPV (mean over the Monte Carlo's draws)", "$"),
                   ("saving_p05_usd", "monthly saving, 5th percentile of the draws", "$/month"),
                   ("saving_p95_usd", "monthly saving, 95th percentile of the draws", "$/month"))
REQUEST_FIELDS = (("confidence", "confidence a recommendation requires", "probability"),)
HARDWARE_FIELD = "hardware_choice"  # the cheapest fleet per GPU type, with and without speculation


def fleet_pair(p: Plan) -> tuple[PlanFleet | None, PlanFleet | None]:
    """(today's fleet, the best method's fleet), the plan's own two (Plan.reference_fleet / best_fleet, each at its
    own TP), the pair the Plan page draws; the best one None when it is today's configuration."""
    today, best = p.reference_fleet, p.best_fleet
    if best is not None and today is not None and (best.method, best.tp) == (today.method, today.tp):
        best = None
    return today, best


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (int, float, str, bool))


def _records(value: Any) -> list[dict] | None:
    """A record or a list of records of the plan's JSON (planner.formatting.plan_dict) as plain rows (scalar fields
    only); None when `value` is neither."""
    value = [value] if isinstance(value, dict) else value
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        return None
    return [{k: x for k, x in v.items() if _scalar(x)} for v in value]


def bill_rows(p: Plan) -> list[dict]:
    """The fleet by hour and its month's bills, today and with the best method (autoscaled and fixed at the peak),
    every configuration's bills, as report rows."""
    rows: list[dict] = []
    today, best = fleet_pair(p)
    if today is None and best is None:
        return rows
    f = p.fleet
    one = today or best

    def add(section, item, value, unit, basis=""):
        rows.append({"section": section, "item": item, "value": value, "unit": unit, "basis": basis})

    add("fleet", "hours", one.hours_source, "", "where the hourly load comes from")
    add("fleet", "price", one.usd_per_gpu_hour, "$/GPU-hour", "")
    add("fleet", "GPUs per replica", p.request.tp, "GPUs", "tensor parallel requested")
    for role, cfg in (("today", today), ("with speculation", best)):
        if cfg is None:
            continue
        basis = f"{cfg.label}, TP={cfg.tp}" + (f", K={cfg.k}" if cfg.k else "") + f", batch {cfg.batch}"
        add("bill", f"{role}: autoscaled", cfg.usd_per_month_autoscaled, "$/month",
            f"{basis}; {cfg.gpu_hours_per_month_autoscaled:,.0f} GPU-hours/month")
        add("bill", f"{role}: fixed at the peak", cfg.usd_per_month_fixed, "$/month",
            f"{basis}; {cfg.gpu_hours_per_month_fixed:,.0f} GPU-hours/month")
        add("bill", f"{role}: peak GPUs", cfg.peak_gpus, "GPUs", basis)
        add("latency", f"{role}: TPOT", cfg.tpot_ms, "ms", f"{basis}; SLO {p.request.tpot_slo_ms:g} ms")
        add("latency", f"{role}: TTFT", cfg.ttft_ms, "ms", f"{basis}; SLO " + (
            "none stated" if p.request.ttft_slo_ms is None else f"{p.request.ttft_slo_ms:g} ms"))
        for q in cfg.pools:  # served disaggregated: each pool's share of the bill (planner.money.disagg)
            pool = f"{role}: {q.role} pool"
            add("bill", f"{pool}: {cfg.billing}", q.usd_per_month, "$/month", f"TP={q.tp}; peak {q.peak_gpus} GPUs")
            add("bill", f"{pool}: autoscaled", q.usd_per_month_autoscaled, "$/month", f"TP={q.tp}")
            add("bill", f"{pool}: fixed at the peak", q.usd_per_month_fixed, "$/month", f"TP={q.tp}")
        for h in cfg.hours:
            add(f"fleet by hour, {role}", f"hour {h.hour:02d}", h.gpus, "GPUs",
                f"{basis}; {h.replicas} replicas, {h.requests_per_s:.4g} requests/s, batch {h.batch:.1f}, "
                f"TPOT {h.tpot_ms:.1f} ms, prefill {h.prefill_share * 100:.0f} % of the time"
                + ("" if h.feasible else "; misses the SLO"))
            if cfg.k:  # the K the hour runs (planner.money.kday: the deployment's K per batch size at its batch)
                add(f"K by hour, {role}", f"hour {h.hour:02d}", cfg.k if h.k is None else h.k, "draft tokens",
                    f"{basis}; batch {h.batch:.1f}")
    sched = (p.deploy or {}).get("speculative_config", {}).get("num_speculative_tokens_per_batch_size")
    if sched:
        add("deploy", "K per batch size", "; ".join(f"{a}-{b}: K={k}" for a, b, k in sched), "batch: K",
            "num_speculative_tokens_per_batch_size, the schedule the fleet by hour bills")
    for cfg in f.configs if f is not None else ():
        add("bills by configuration", cfg.label, cfg.usd_per_month_autoscaled, "$/month autoscaled",
            f"fixed at the peak {cfg.usd_per_month_fixed:.2f} $/month; peak {cfg.peak_gpus} GPUs")
    return rows


def uncertainty_rows(mc) -> list[dict]:
    """The Monte Carlo (planner.uncertainty.sensitivity.monte_carlo, the Sensitivity page's call) as report rows."""
    if mc is None:
        return []
    basis = f"{mc.method} at K={mc.k}; {mc.samples} draws, seed {mc.seed}"
    return [{"section": "uncertainty", "item": item, "value": value, "unit": unit, "basis": b}
            for item, value, unit, b in (
                ("P(saving > 0)", mc.p_saves, "probability", basis),
                (f"P(payback within {mc.horizon_months} months)", mc.p_payback_within_horizon, "probability", basis),
                ("monthly saving p5", mc.saving_p05, "$/month", basis),
                ("monthly saving median", mc.saving_p50, "$/month", basis),
                ("monthly saving p95", mc.saving_p95, "$/month", basis),
                ("draws", mc.source, "", ""))]


def _headline_value(p: Plan, name: str) -> Any:
    v = getattr(p.economics, name, None)
    return getattr(p, name, None) if v is None else v


def hardware_rows(p: Plan) -> list[dict]:
    """The hardware comparison (the cheapest fleet per GPU type, without and with speculation) when the plan has
    one."""
    hc = getattr(p, HARDWARE_FIELD, None)
    rows: list[dict] = []
    if hc is None:
        return rows

    def option(section, item, opt, note=""):
        if opt is None:
            rows.append({"section": section, "item": item, "value": "none", "unit": "", "basis": note})
            return
        k = getattr(opt, "k", 0)
        rows.append({"section": section, "item": item, "value": getattr(opt, "usd_per_month", None), "unit": "$/month",
                     "basis": f"{getattr(opt, 'tp', '?')} x {getattr(opt, 'hardware_label', '?')} "
                              f"({getattr(opt, 'dtype', '?')}), {getattr(opt, 'method_label', '?')}"
                              + (f" K={k}" if k else "") + f", peak {getattr(opt, 'peak_gpus', '?')} GPUs at "
                              f"${getattr(opt, 'usd_per_gpu_hour', math.nan):.2f}/GPU-hour, "
                              f"{getattr(opt, 'billing', '')}"
                              + ("" if getattr(opt, "serving", "colocated") == "colocated" else f"; {opt.short}")})

    for ch in getattr(hc, "choices", ()):
        label = getattr(ch, "label", getattr(ch, "hardware", "?"))
        option("hardware comparison", f"{label}: no speculation", getattr(ch, "no_speculation", None),
               getattr(ch, "note", ""))
        option("hardware comparison", f"{label}: with speculation", getattr(ch, "speculation", None),
               getattr(ch, "note", ""))
        if getattr(hc, "disaggregated", False):  # served disaggregated or best: the disaggregated fleets too
            option("hardware comparison", f"{label}: disaggregated, no speculation",
                   getattr(ch, "disaggregated_no_speculation", None), "none meets both SLOs")
            option("hardware comparison", f"{label}: disaggregated, with speculation",
                   getattr(ch, "disaggregated_speculation", None), "none meets both SLOs")
    option("hardware comparison", "cheapest", getattr(hc, "cheapest", None), getattr(hc, "note", ""))
    option("hardware comparison", "requested hardware", getattr(hc, "requested", None))
    return rows


def extra_rows(p: Plan) -> list[dict]:
    """The bill and probability fields the plan carries when present, the hardware comparison, and any other Plan
    or economics field the report's own sections do not show (scalars, records and tuples of records)."""
    rows: list[dict] = []

    def add(section, item, value, unit="", basis=""):
        rows.append({"section": section, "item": item, "value": value, "unit": unit, "basis": basis})

    for name, label, unit in HEADLINE_FIELDS:
        if _headline_value(p, name) is not None:
            add("headline", label, _headline_value(p, name), unit, name)
    for name, label, unit in REQUEST_FIELDS:
        if getattr(p.request, name, None) is not None:
            add("headline", label, getattr(p.request, name), unit, f"request.{name}")
    named = {n for n, _, _ in HEADLINE_FIELDS}
    for f in dataclasses.fields(p.economics):
        v = getattr(p.economics, f.name)
        if f.name not in SHOWN_ECONOMICS_FIELDS | named and _scalar(v) and v is not None:
            add("economics", f.name, v)
    rows += hardware_rows(p)
    data = plan_dict(p)  # the one serialisation of the plan (the CLI's JSON)
    for f in dataclasses.fields(p):
        if f.name in SHOWN_PLAN_FIELDS | named | {HARDWARE_FIELD}:
            continue
        v = data.get(f.name)
        recs = _records(v)
        if recs is not None:
            for i, r in enumerate(recs, 1):
                for k, x in r.items():
                    add(f.name, k if len(recs) == 1 else f"{i}: {k}", x)
        elif _scalar(v) and v is not None:
            add("plan", f.name, v)
    return rows


def scenario_rows(p: Plan, levers: list[LeverStep], mc=None) -> list[dict]:
    """Every number behind the report, one row per quantity (section, item, value, unit, basis)."""
    rows: list[dict] = []

    def add(section, item, value, unit, basis=""):
        rows.append({"section": section, "item": item, "value": value, "unit": unit, "basis": basis})

    req = p.request
    for k in ("model", "hardware", "tp", "dtype", "tpot_slo_ms", "ttft_slo_ms", "serving", "monthly_output_tokens",
              "current_method", "tuned"):
        add("inputs", k, getattr(req, k), "", "entered")
    add("inputs", "usd_per_gpu_hour", p.usd_per_gpu_hour, "$/GPU-hour", "entered or list midpoint")
    for seg in p.segments:
        add("traffic mix", f"{seg.workload} / {seg.language}", seg.share, "share of output tokens",
            f"prompt {seg.prompt_tokens:.0f}, output {seg.output_tokens:.0f} tokens")
    e = p.economics
    add("headline", "recommendation", p.verdict, "", "")
    add("headline", "CPM today", e.reference_usd_per_mtok, "$/Mtok output", p.reference_note)
    if p.best is not None:
        add("headline", "best method", p.best.method, "", f"K={p.best.k}, batch {p.best.batch}")
        add("headline", "best method CPM", p.best.usd_per_mtok, "$/Mtok output", "alpha range midpoint")
        add("headline", "best method CPM (low alpha)", p.best.usd_per_mtok_low, "$/Mtok output", "")
        add("headline", "best method CPM (high alpha)", p.best.usd_per_mtok_high, "$/Mtok output", "")
    add("headline", "monthly saving", e.monthly_saving_usd, "$/month", "")
    add("headline", "one-time cost", e.one_time_usd, "$", f"range {e.one_time_low_usd:.0f}-{e.one_time_high_usd:.0f}")
    add("headline", "payback", e.payback_months, "months", "one-time / monthly saving")
    add("headline", "NPV", e.npv_usd, "$", f"{e.horizon_months} months at {e.annual_discount_rate * 100:g} %/year")
    for m in (p.baseline, *p.methods):
        if not m.available:
            add(f"method {m.method}", "unavailable", m.reason, "", "")
            continue
        for key, unit in (("k", "draft tokens"), ("batch", "sequences"), ("feasible", ""),
                          ("alpha_position_1", "per-token alpha"), ("acceptance_length", "tokens/step (tau)"),
                          ("draft_acceptance_rate", "vLLM accepted/drafted"), ("speedup", "x"),
                          ("output_tokens_per_s", "tokens/s per replica"), ("tpot_ms", "ms"),
                          ("usd_per_mtok", "$/Mtok output"), ("cpm_change_pct", "% vs today")):
            add(f"method {m.method}", key, getattr(m, key), unit, m.alpha_source or "no speculation")
        if m.acceptance_tier:
            add(f"method {m.method}", "acceptance_tier", m.acceptance_tier, "", m.acceptance_source)
            add(f"method {m.method}", "draft_head", m.head or "no trained head needed", "", "acceptance library")
    for s_ in levers:
        add(f"lever {s_.number}", s_.label, s_.usd_per_mtok_after, "$/Mtok after", s_.reason)
        add(f"lever {s_.number}", "one-time high", s_.one_time_usd_high, "$", s_.source)
        add(f"lever {s_.number}", "monthly saving", s_.monthly_saving_usd, "$/month", "")
        add(f"lever {s_.number}", "payback", s_.payback_months, "months", "")
    return rows + bill_rows(p) + uncertainty_rows(mc) + extra_rows(p)
