"""Report builders (no Streamlit): a self-contained HTML report and a CSV of every scenario number.

CSV cells that a spreadsheet would run as a formula (starting with = + - @, tab or carriage return) are
prefixed with a single quote (OWASP "CSV injection").
"""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
import math
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from planner.answer import LeverStep, Plan
from planner.formatting import fmt_cpm, fmt_months, fmt_pct, fmt_usd

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


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
    w = csv.writer(buf, lineterminator="\n")
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


def scenario_rows(p: Plan, levers: list[LeverStep]) -> list[dict]:
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
    for s_ in levers:
        add(f"lever {s_.number}", s_.label, s_.usd_per_mtok_after, "$/Mtok after", s_.reason)
        add(f"lever {s_.number}", "one-time high", s_.one_time_usd_high, "$", s_.source)
        add(f"lever {s_.number}", "payback", s_.payback_months, "months", "")
    return rows


def html_report(*, p: Plan, catalog, figures: list[tuple[str, go.Figure]], levers: list[LeverStep],
                today: str | None = None) -> str:
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
    parts.append("<h2>Headline</h2><table><tr><th>quantity</th><th>value</th><th>range</th><th>unit / basis</th></tr>")
    parts += [f"<tr><td>{e(a)}</td><td>{e(m)}</td><td>{e(r)}</td><td>{e(u)}</td></tr>" for a, m, r, u in rows]
    parts.append("</table>")
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
