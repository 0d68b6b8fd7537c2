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

from views import _model as mdl

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


def scenario_rows(inp: mdl.PlanInputs, summary: dict, mix: mdl.Mix, levers: list[dict]) -> list[dict]:
    """Every number behind the report, one row per quantity (section, item, value, unit, basis)."""
    rows: list[dict] = []

    def add(section, item, value, unit, basis=""):
        rows.append({"section": section, "item": item, "value": value, "unit": unit, "basis": basis})

    for k, v in vars(inp).items():
        add("inputs", k, v, "", "entered")
    for seg in mix:
        add("traffic mix", f"{seg[0]} / {seg[1]}", seg[2], "share of output tokens",
            f"prompt {seg[3]:.0f}, output {seg[4]:.0f} tokens")
    add("headline", "baseline CPM (no speculation)", summary["baseline"]["usd_per_mtok"], "$/Mtok output",
        f"best batch {summary['baseline']['batch']}")
    for w in mdl.WHICH:
        add("headline", f"current CPM ({w} alpha)", summary["current_usd_per_mtok"][w], "$/Mtok output",
            summary["current_method"])
    if summary.get("best"):
        for w in mdl.WHICH:
            add("headline", f"best method CPM ({w} alpha)", summary["best_usd_per_mtok"][w], "$/Mtok output",
                summary["best"]["method"])
            add("headline", f"monthly saving ({w} alpha)", summary["monthly_saving_usd"][w], "$/month", "")
        add("headline", "one-time cost low", summary["one_time_usd"][0], "$", "")
        add("headline", "one-time cost high", summary["one_time_usd"][1], "$", "")
        add("headline", "payback", summary["payback_months"], "months", "mid one-time / mid saving")
        add("headline", "NPV", summary["npv_usd"], "$", f"{summary['horizon_months']} months")
        add("headline", "recommendation", summary["recommendation"], "", "")
    for w in mdl.WHICH:
        for r in summary["tables"][w]:
            if not r["available"]:
                if w == "mid":
                    add(f"method {r['method']}", "unavailable", r["unavailable_reason"], "", "")
                continue
            for key, unit in (("k", "draft tokens"), ("batch", "sequences"), ("alpha_position_1", "per-token alpha"),
                              ("acceptance_length", "tokens/step (tau)"),
                              ("draft_acceptance_rate", "vLLM accepted/drafted"), ("speedup", "x"),
                              ("output_tokens_per_s", "tokens/s per replica"), ("tpot_ms", "ms"),
                              ("usd_per_mtok", "$/Mtok output"), ("cpm_change_vs_best_baseline", "fraction")):
                add(f"method {r['method']}", f"{key} ({w} alpha)", r[key], unit, r["source"])
    for s in levers:
        add(f"lever {s['number']}", s["label"], s["usd_per_mtok_after"], "$/Mtok after", s["reason"])
        add(f"lever {s['number']}", "one-time high", s["one_time_usd_high"], "$", s["source"])
        add(f"lever {s['number']}", "payback", s["payback_months"], "months", "")
    return rows


def assumptions(inp: mdl.PlanInputs, catalog, summary: dict) -> list[tuple[str, str, str, str]]:
    """(what, value, source, date) for every assumption behind the headline."""
    hw = catalog.hardware[inp.hardware]
    model = catalog.models[inp.model]
    out = [
        ("$/GPU-hour used", f"${inp.usd_per_gpu_hour:.2f} (list range ${hw.usd_per_gpu_hour_low:.2f}-"
                            f"${hw.usd_per_gpu_hour_high:.2f})", hw.price.source, hw.price.date),
        (f"{hw.label} specs", f"{hw.hbm_gb:g} GB, {hw.hbm_bandwidth_gb_s:g} GB/s, {hw.bf16_tflops:g} BF16 TFLOP/s",
         hw.specs.source, hw.specs.date),
        ("roofline efficiencies", f"eta_bw {hw.efficiency.eta_bw}, eta_flops {hw.efficiency.eta_flops}, "
                                  f"t_fixed {hw.efficiency.t_fixed_s * 1e3:g} ms",
         hw.efficiency.source.source, hw.efficiency.source.date),
        (f"{model.label} architecture", f"{model.total_params_b:g}B params ({model.active_params_b:g}B active)",
         model.source.source, model.source.date),
    ]
    for key, src in catalog.price_sources.items():
        out.append((key.replace("_", " "), str(catalog.prices[key]), src.source, src.date))
    for r in summary["tables"]["mid"]:
        m = catalog.methods[r["method"]]
        rng = m.alpha_tuned if inp.tuned else m.alpha_default
        out.append((f"{m.label} alpha ({'tuned' if inp.tuned else 'default'}, per-token, position 1)",
                    f"{rng.low:.2f}-{rng.high:.2f}, decay {m.position_decay} per position", m.source.source,
                    m.source.date))
    for seg in {s[0] for s in summary.get("mix", [])}:
        w = catalog.workloads[seg]
        out.append((f"workload {w.label}", f"alpha shift {w.alpha_shift:+.3f}", w.source.source, w.source.date))
    return out


def html_report(*, inp: mdl.PlanInputs, catalog, summary: dict, mix: mdl.Mix, figures: list[tuple[str, go.Figure]],
                command: dict | None, levers: list[dict], today: str | None = None) -> str:
    """One self-contained HTML file: plotly.js inlined, no network needed to open it."""
    today = today or dt.date.today().isoformat()
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Speculative-decoding plan {e(today)}</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;}table{border-collapse:collapse;}"
             "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}"
             "pre{background:#f4f4f4;padding:1em;white-space:pre-wrap}</style></head><body>"]
    parts.append(f"<h1>Speculative-decoding plan</h1><p>Generated {e(today)}. "
                 f"{e(catalog.models[inp.model].label)} on {inp.tp} x {e(catalog.hardware[inp.hardware].label)} "
                 f"({e(inp.dtype)}), ${inp.usd_per_gpu_hour:.2f}/GPU-hour, TPOT SLO {inp.tpot_slo_ms:g} ms, "
                 f"{inp.monthly_output_tokens / 1e9:,.2f}B output tokens/month.</p>")
    parts.append(f"<h2>Recommendation</h2><p><b>{e(summary['recommendation'])}</b></p>")
    if summary.get("best"):
        b = summary["best"]
        lo, hi = summary["best_usd_per_mtok_range"]
        slo, shi = summary["monthly_saving_range_usd"]
        plo, phi = summary["payback_months_range"]
        parts.append("<h2>Headline (ranges over the method's alpha range)</h2><table>"
                     "<tr><th>quantity</th><th>mid</th><th>range</th><th>unit / basis</th></tr>")
        rows = [
            ("CPM today", f"{summary['current_usd_per_mtok']['mid']:.4f}",
             f"{summary['current_usd_per_mtok_range'][0]:.4f}-{summary['current_usd_per_mtok_range'][1]:.4f}",
             "$ per million output tokens, prefill included, best batch under the SLO"),
            (f"CPM with {b['label']} (K={b['k']})", f"{summary['best_usd_per_mtok']['mid']:.4f}",
             f"{lo:.4f}-{hi:.4f}", f"$ per million output tokens at batch {b['batch']}"),
            ("Monthly saving", f"{summary['monthly_saving_usd']['mid']:,.0f}", f"{slo:,.0f}-{shi:,.0f}", "$/month"),
            ("One-time cost", f"{sum(summary['one_time_usd']) / 2:,.0f}",
             f"{summary['one_time_usd'][0]:,.0f}-{summary['one_time_usd'][1]:,.0f}", "$ (training + engineering)"),
            ("Payback", mdl.fmt_months(summary["payback_months"]), f"{mdl.fmt_months(plo)}-{mdl.fmt_months(phi)}",
             "months"),
            ("NPV", f"{summary['npv_usd']:,.0f}", "", f"$ over {summary['horizon_months']} months at "
                                                        f"{summary['annual_discount_rate'] * 100:.0f} %/year"),
            ("Acceptance", f"alpha {b['alpha_position_1']:.3f}", f"tau {b['acceptance_length']:.3f}; vLLM rate "
             f"{b['draft_acceptance_rate'] * 100:.1f} %", "per-token alpha (position 1); tau incl. bonus token"),
        ]
        parts += [f"<tr><td>{e(a)}</td><td>{e(m)}</td><td>{e(r)}</td><td>{e(u)}</td></tr>" for a, m, r, u in rows]
        parts.append("</table>")
    if command:
        parts.append("<h2>Deployment (vLLM)</h2><pre>" + e(command["command"]) + "</pre><ul>"
                     + "".join(f"<li>{e(n)}</li>" for n in command["notes"]) + "</ul>")
    first = True
    for title, fig in figures:
        parts.append(f"<h2>{e(title)}</h2>")
        parts.append(pio.to_html(fig, full_html=False, include_plotlyjs="inline" if first else False))
        first = False
    parts.append("<h2>Methods (default alpha, mid)</h2><table><tr><th>method</th><th>available</th><th>K</th>"
                 "<th>batch</th><th>alpha</th><th>tau</th><th>CPM $/Mtok</th><th>vs no speculation</th></tr>")
    for r in summary["tables"]["mid"]:
        if r["available"]:
            parts.append(f"<tr><td>{e(r['label'])}</td><td>yes</td><td>{r['k']}</td><td>{r['batch']}</td>"
                         f"<td>{r['alpha_position_1']:.3f}</td><td>{r['acceptance_length']:.3f}</td>"
                         f"<td>{r['usd_per_mtok']:.4f}</td><td>{r['cpm_change_vs_best_baseline'] * 100:+.1f} %</td></tr>")
        else:
            parts.append(f"<tr><td>{e(r['label'])}</td><td colspan='7'>unavailable: {e(r['unavailable_reason'])}"
                         "</td></tr>")
    parts.append("</table><h2>Levers (article order)</h2><table><tr><th>#</th><th>lever</th><th>applied</th>"
                 "<th>CPM after</th><th>one-time $</th><th>payback months</th></tr>")
    for s in levers:
        parts.append(f"<tr><td>{s['number']}</td><td>{e(s['label'])}</td><td>{e(s['reason'])}</td>"
                     f"<td>{s['usd_per_mtok_after']:.4f}</td><td>{s['one_time_usd_low']:,.0f}-"
                     f"{s['one_time_usd_high']:,.0f}</td><td>{e(mdl.fmt_months(s['payback_months']))}</td></tr>")
    parts.append("</table><h2>Assumptions (sources and dates)</h2><table><tr><th>assumption</th><th>value</th>"
                 "<th>source</th><th>date</th></tr>")
    for a, v, s, d in assumptions(inp, catalog, {**summary, "mix": mix}):
        parts.append(f"<tr><td>{e(a)}</td><td>{e(v)}</td><td>{e(s)}</td><td>{e(d)}</td></tr>")
    parts.append("</table><p>Acceptance conventions: alpha = per-token conditional acceptance at draft position 1; "
                 "tau = mean acceptance length (tokens per verifier step, bonus token included); vLLM's draft "
                 "acceptance rate = (tau-1)/K. Each method is compared at its own best batch under the same TPOT "
                 "SLO.</p></body></html>")
    return "".join(parts)
