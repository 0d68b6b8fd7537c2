"""Report builders (no Streamlit): a self-contained HTML report and a CSV of every scenario number.

CSV cells that a spreadsheet would run as a formula (starting with = + - @, tab, carriage return or line feed) are
prefixed with a single quote (OWASP "CSV injection"), and every cell holding a delimiter, a quote, a carriage
return or a line feed is quoted (RFC 4180 line ends: Python's csv writer quotes a field only for the characters of
its own line terminator, so with "\n" alone a bare "\r" went out unquoted and a spreadsheet started a new row,
and a new formula, after it).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import html
import io
import math
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from planner.answer import LeverStep, Plan, PlanFleet
from planner.checks.knee import knee_sentence, slo_knee
from planner.formatting import fmt_acceptance, fmt_cpm, fmt_months, fmt_pct, fmt_usd, plan_dict

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
# the planner) is shown by `extra_rows` / `_extra_html`, so it reaches the board without a change here.
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
        for h in cfg.hours:
            add(f"fleet by hour, {role}", f"hour {h.hour:02d}", h.gpus, "GPUs",
                f"{basis}; {h.replicas} replicas, {h.requests_per_s:.4g} requests/s, batch {h.batch:.1f}, "
                f"TPOT {h.tpot_ms:.1f} ms, prefill {h.prefill_share * 100:.0f} % of the time"
                + ("" if h.feasible else "; misses the SLO"))
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
                              f"{getattr(opt, 'billing', '')}"})

    for ch in getattr(hc, "choices", ()):
        label = getattr(ch, "label", getattr(ch, "hardware", "?"))
        option("hardware comparison", f"{label}: no speculation", getattr(ch, "no_speculation", None),
               getattr(ch, "note", ""))
        option("hardware comparison", f"{label}: with speculation", getattr(ch, "speculation", None),
               getattr(ch, "note", ""))
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
    for k in ("model", "hardware", "tp", "dtype", "tpot_slo_ms", "monthly_output_tokens", "current_method", "tuned"):
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


def _fmt(v: Any, unit: str) -> str:
    if isinstance(v, float) and unit.startswith("$"):
        return fmt_cpm(v) if "Mtok" in unit else fmt_usd(v, 2 if "hour" in unit else 0)
    if isinstance(v, float) and unit == "probability":
        return f"{v * 100:.0f} %"
    if isinstance(v, float):
        return f"{v:,.4g}"
    return str(v)


def _rows_html(rows: list[dict]) -> str:
    e = html.escape
    return ("<table><tr><th>quantity</th><th>value</th><th>unit</th><th>basis</th></tr>"
            + "".join(f"<tr><td>{e(str(r['item']))}</td><td>{e(_fmt(r['value'], r['unit']))}</td><td>{e(r['unit'])}"
                      f"</td><td>{e(str(r['basis']))}</td></tr>" for r in rows) + "</table>")


def _fleet_html(p: Plan) -> str:
    """The bills and the fleet by hour (today and with the best method) as HTML tables."""
    today, best = fleet_pair(p)
    if today is None and best is None:
        return "<h2>The bill</h2><p>No configuration meets the SLO, so no fleet can be sized.</p>"
    e = html.escape
    rows = bill_rows(p)
    cols = [(f"GPUs today ({today.label})", today), (f"GPUs with {best.label}" if best else "", best)]
    cols = [(name, cfg) for name, cfg in cols if cfg is not None]
    out = [f"<h2>The bill: the fleet by hour</h2><p>{e(cols[0][1].hours_source)}. Autoscaled: each hour's replicas; "
           "fixed: a fleet sized for the busiest hour, all month.</p>",
           _rows_html([r for r in rows if r["section"] == "bill"]),
           "<h3>GPUs by hour</h3><table><tr><th>hour</th><th>requests/s</th>"
           + "".join(f"<th>{e(name)}</th>" for name, _ in cols) + "</tr>"]
    for i, h in enumerate(cols[0][1].hours):
        out.append(f"<tr><td>{h.hour:02d}</td><td>{h.requests_per_s:.4g}</td>"
                   + "".join(f"<td>{cfg.hours[i].gpus}</td>" for _, cfg in cols) + "</tr>")
    out.append("</table><h3>Every configuration</h3>")
    out.append(_rows_html([r for r in rows if r["section"] == "bills by configuration"]))
    return "".join(out)


def _extra_html(p: Plan) -> str:
    """The hardware comparison and any other Plan field the report's own sections do not show."""
    rows = [r for r in extra_rows(p) if r["section"] != "headline"]
    hw = [r for r in rows if r["section"] == "hardware comparison"]
    rest = [r for r in rows if r["section"] != "hardware comparison"]
    out = []
    if hw:
        out.append("<h2>Which hardware for this traffic: the cheapest fleet per GPU type</h2>" + _rows_html(hw))
    if rest:
        out.append("<h2>More from the plan</h2>" + _rows_html(rest))
    return "".join(out)


def html_report(*, p: Plan, catalog, figures: list[tuple[str, go.Figure]], levers: list[LeverStep],
                today: str | None = None, mc=None) -> str:
    """One self-contained HTML file: plotly.js inlined, no network needed to open it."""
    today = today or dt.date.today().isoformat()
    e = html.escape
    req = p.request
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Speculative-decoding plan {e(today)}</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;}table{border-collapse:collapse;}"
             "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}"
             "pre{background:#f4f4f4;padding:1em;white-space:pre-wrap}</style></head><body>"]
    parts.append(f"<h1>Speculative-decoding plan</h1><p>Generated {e(today)}. "
                 f"{e(catalog.models[req.model].label)} on {req.tp} x {e(catalog.hardware[req.hardware].label)} "
                 f"({e(req.dtype)}), ${p.usd_per_gpu_hour:.2f}/GPU-hour, TPOT SLO {req.tpot_slo_ms:g} ms, "
                 f"{req.monthly_output_tokens / 1e9:,.2f}B output tokens/month ({e(req.volume_source)}).</p>")
    parts.append(f"<h2>Recommendation</h2><p><b>{e(p.verdict)}</b></p>")
    if p.economics.monthly_saving_usd is not None and (knee := knee_sentence(slo_knee(p, catalog))):
        parts.append(f"<p><b>{e(knee)}</b></p>")
    ec = p.economics
    rows = [("CPM today", fmt_cpm(ec.reference_usd_per_mtok), "", "$ per million output tokens, prefill included; "
             + p.reference_note)]
    if p.best is not None:
        b = p.best
        rows.append((f"CPM with {b.label} (K={b.k})", fmt_cpm(b.usd_per_mtok),
                     f"{fmt_cpm(b.usd_per_mtok_high)} to {fmt_cpm(b.usd_per_mtok_low)}",
                     f"$ per million output tokens at batch {b.batch}; range over the alpha range"))
        rows.append(("Acceptance", f"alpha {b.alpha_position_1:.3f}", f"tau {b.acceptance_length:.3f}; vLLM rate "
                     f"{b.draft_acceptance_rate * 100:.1f} %", "per-token alpha (position 1); tau incl. bonus token"))
        if b.acceptance_tier:
            rows.append(("Acceptance from", b.acceptance_tier, b.acceptance_source, b.head or "no trained head needed"))
    rows += [
        ("Monthly saving", "n/a" if ec.monthly_saving_usd is None else f"{fmt_usd(ec.monthly_saving_usd)}/month",
         f"{fmt_usd(ec.monthly_saving_low_usd)} to {fmt_usd(ec.monthly_saving_high_usd)}", "$/month"),
        ("One-time cost", fmt_usd(ec.one_time_usd), f"{fmt_usd(ec.one_time_low_usd)} to "
                                                      f"{fmt_usd(ec.one_time_high_usd)}", "training + engineering"),
        ("Payback", fmt_months(ec.payback_months), f"{fmt_months(ec.payback_low_months)} to "
                                                     f"{fmt_months(ec.payback_high_months)}", ""),
        ("NPV", fmt_usd(ec.npv_usd), "", f"over {ec.horizon_months} months at {ec.annual_discount_rate * 100:g} "
                                            "%/year"),
    ]
    rows += [(r["item"], _fmt(r["value"], r["unit"]), "", r["basis"]) for r in extra_rows(p)
             if r["section"] == "headline"]
    parts.append("<h2>Headline</h2><table><tr><th>quantity</th><th>value</th><th>range</th><th>unit / basis</th></tr>")
    parts += [f"<tr><td>{e(a)}</td><td>{e(m)}</td><td>{e(r)}</td><td>{e(u)}</td></tr>" for a, m, r, u in rows]
    parts.append("</table>")
    parts.append(_fleet_html(p))
    parts.append("<h2>How sure: Monte Carlo</h2>" + (
        _rows_html(uncertainty_rows(mc)) if mc is not None else "<p>No feasible method to draw.</p>"))
    parts.append(_extra_html(p))
    if p.deploy:
        parts.append("<h2>Deployment (vLLM)</h2><pre>" + e(p.deploy["command"]) + "</pre><ul>"
                     + "".join(f"<li>{e(n)}</li>" for n in p.deploy["notes"]) + "</ul>")
    first = True
    for title, fig in figures:
        parts.append(f"<h2>{e(title)}</h2>")
        parts.append(pio.to_html(fig, full_html=False, include_plotlyjs="inline" if first else False))
        first = False
    parts.append("<h2>Methods (alpha range midpoint)</h2><table><tr><th>method</th><th>feasible</th><th>K</th>"
                 "<th>batch</th><th>alpha</th><th>tau</th><th>CPM $/Mtok</th><th>vs today</th></tr>")
    for m in (p.baseline, *p.methods):
        if m.available:
            parts.append(f"<tr><td>{e(m.label)}</td><td>{'yes' if m.feasible else e(m.reason)}</td><td>{m.k}</td>"
                         f"<td>{m.batch}</td><td>{m.alpha_position_1:.3f}</td><td>{m.acceptance_length:.3f}</td>"
                         f"<td>{m.usd_per_mtok:.4f}</td><td>{e(fmt_pct(m.cpm_change_pct))}</td></tr>")
            if m.acceptance_tier:
                parts.append(f"<tr><td></td><td colspan='7'>{e(fmt_acceptance(m))}</td></tr>")
        else:
            parts.append(f"<tr><td>{e(m.label)}</td><td colspan='7'>{e(m.reason)}</td></tr>")
    parts.append("</table><h2>Levers (article order)</h2><table><tr><th>#</th><th>lever</th><th>applied</th>"
                 "<th>CPM after</th><th>one-time $</th><th>payback</th></tr>")
    for s_ in levers:
        parts.append(f"<tr><td>{s_.number}</td><td>{e(s_.label)}</td><td>{e(s_.reason)}</td>"
                     f"<td>{s_.usd_per_mtok_after:.4f}</td><td>{fmt_usd(s_.one_time_usd_low)} to "
                     f"{fmt_usd(s_.one_time_usd_high)}</td><td>{e(fmt_months(s_.payback_months))}</td></tr>")
    parts.append("</table><h2>Assumptions (sources and dates)</h2><table><tr><th>assumption</th><th>value</th>"
                 "<th>source</th><th>date</th></tr>")
    for a in p.assumptions:
        parts.append(f"<tr><td>{e(a.what)}</td><td>{e(a.value)}</td><td>{e(a.source)}</td><td>{e(a.date)}</td></tr>")
    parts.append("</table><p>Acceptance conventions: alpha = per-token conditional acceptance at draft position 1; "
                 "tau = mean acceptance length (tokens per verifier step, bonus token included); vLLM's draft "
                 "acceptance rate = (tau-1)/K. Each method is compared at its own best batch under the same TPOT "
                 "SLO; nothing that misses the SLO or does not fit memory is recommended.</p></body></html>")
    return "".join(parts)
