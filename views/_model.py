"""What the pages compute, without Streamlit: scenario inputs + a workload mix -> per-method numbers,
the headline, the recommendation, levers over the mix, sensitivity curves and the deployment command.

A mix is a tuple of segments (workload, language, output-token share, mean prompt tokens, mean output
tokens). Each method is evaluated per segment at its own best batch under the TPOT SLO (the honest
comparison, DESIGN.md) and blended by output-token share: cost is tokens x CPM, so the blended CPM is
sum(share_i x CPM_i). One K per method serves the whole mix (one vLLM deployment): the K with the lowest
blended CPM.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner import acceptance as acc
from planner import levers as lv
from planner import scenario as sc
from planner.deploy import speculative_config
from planner.economics import breakeven_monthly_spend_usd, economics, method_one_time_usd
from planner.serving import BATCH_GRID
from planner.types import Scenario

NO_SPEC = "none"  # "current method": no speculative decoding today
Seg = tuple[str, str, float, float, float]
Mix = tuple[Seg, ...]
WHICH = ("mid", "low", "high")
MIN_CUT_TO_RECOMMEND = 0.01  # below a 1 % CPM cut the engineering risk is not worth it (assumption)


@dataclass(frozen=True)
class PlanInputs:
    """The shared scenario inputs (sidebar); hashable so st.cache_data can key on it."""

    model: str = "llama-3.3-70b"
    hardware: str = "h100-sxm"
    usd_per_gpu_hour: float = 4.40  # H100 list-price midpoint (profiles/data/hardware.yaml)
    tp: int = 4
    dtype: str = "bf16"
    tpot_slo_ms: float = 50.0
    monthly_output_tokens: float = 2e10
    current_method: str = NO_SPEC
    workload: str = "chat"
    language: str = "english"
    tuned: bool = False


def default_mix(inp: PlanInputs, catalog) -> Mix:
    w = catalog.workloads[inp.workload]
    return ((inp.workload, inp.language, 1.0, float(w.prompt_tokens), float(w.output_tokens)),)


def batch_grid(cap: float | None) -> np.ndarray:
    if cap is None:
        return BATCH_GRID
    g = BATCH_GRID[BATCH_GRID <= max(1.0, cap)]
    return g if g.size else BATCH_GRID[:1]


def scenario_for(inp: PlanInputs, method: str, seg: Seg, catalog, *, tuned: bool | None = None,
                 k: int | None = None, alpha_shift_extra: float = 0.0, **extra) -> Scenario:
    w, lang, _share, prompt, out = seg
    model = catalog.models[inp.model]
    m = catalog.methods[method]
    out_t = int(min(max(1, round(out)), model.max_context_tokens // 2))
    prompt_t = int(min(max(1, round(prompt)), model.max_context_tokens - out_t))
    return Scenario(
        model=inp.model, hardware=inp.hardware, method=method, k=min(k or m.default_k, m.max_k),
        workload=w, language=lang, prompt_tokens=prompt_t, output_tokens=out_t, tp=inp.tp, dtype=inp.dtype,
        usd_per_gpu_hour=inp.usd_per_gpu_hour, tpot_slo_ms=inp.tpot_slo_ms,
        tuned=inp.tuned if tuned is None else tuned, monthly_output_tokens=inp.monthly_output_tokens,
        alpha_shift_extra=alpha_shift_extra, **extra,
    )


def _best_batch_per_row(cpm, tpot_s, fits, slo_ms):
    """For each row (K), the batch index with the lowest CPM that meets the SLO and fits; else the
    lowest-TPOT batch that fits (flagged as missing the SLO). Mirrors planner.scenario._best_index."""
    ok = fits & (tpot_s * 1e3 <= slo_ms)
    score = np.where(ok, cpm, np.inf)
    j = np.argmin(score, axis=-1)
    found = ok.any(axis=-1)
    fallback = np.argmin(np.where(fits, tpot_s, np.inf) if fits.any() else tpot_s, axis=-1)
    return np.where(found, j, fallback), found


def baseline_for_mix(inp: PlanInputs, mix: Mix, catalog, cap: float | None = None) -> dict[str, Any]:
    """No speculation: each segment at its own best batch under the SLO (the baseline arrays of any grid;
    memory from baseline_fits_memory, without draft weights)."""
    batches = batch_grid(cap)
    per = []
    for seg in mix:
        s = scenario_for(inp, "ngram", seg, catalog, k=1)
        res, _, bs = sc.grid(s, catalog, ks=[1], batches=batches)
        j, found = _best_batch_per_row(res.baseline_usd_per_mtok[0], res.baseline_tpot_s[0],
                                       res.baseline_fits_memory[0], inp.tpot_slo_ms)
        per.append({
            "workload": seg[0], "language": seg[1], "share": seg[2], "batch": int(bs[j]),
            "usd_per_mtok": float(res.baseline_usd_per_mtok[0, j]),
            "tpot_ms": float(res.baseline_tpot_s[0, j] * 1e3),
            "output_tokens_per_s": float(res.baseline_output_tokens_per_s[0, j]),
            "verifier_bound": "compute" if res.baseline_compute_bound[0, j] else "memory",
            "meets_slo": bool(found), "fits_memory": bool(res.fits_memory[0, j]),
        })
    w = np.array([p["share"] for p in per])
    return {
        "usd_per_mtok": float(np.dot(w, [p["usd_per_mtok"] for p in per])),
        "tpot_ms": float(np.dot(w, [p["tpot_ms"] for p in per])),
        "output_tokens_per_s": float(1.0 / np.dot(w, [1.0 / p["output_tokens_per_s"] for p in per])),
        "meets_slo": all(p["meets_slo"] for p in per), "fits_memory": all(p["fits_memory"] for p in per),
        "segments": per, "batch": per[int(np.argmax(w))]["batch"],
        "verifier_bound": per[int(np.argmax(w))]["verifier_bound"],
    }


def one_time_range_usd(method_name: str, catalog) -> tuple[float, float]:
    """Setup cost at the training GPU's low and high list price (+ engineering weeks)."""
    m = catalog.methods[method_name]
    train = catalog.hardware[catalog.prices["training_hardware"]]
    eng = catalog.engineering_usd_per_week
    return (method_one_time_usd(m, training_usd_per_gpu_hour=train.usd_per_gpu_hour_low,
                                engineering_usd_per_week=eng),
            method_one_time_usd(m, training_usd_per_gpu_hour=train.usd_per_gpu_hour_high,
                                engineering_usd_per_week=eng))


def method_row(inp: PlanInputs, method: str, mix: Mix, catalog, *, cap: float | None = None,
               which: str = "mid", tuned: bool | None = None, alpha_shift_extra: float = 0.0,
               baseline: dict | None = None) -> dict[str, Any]:
    """One method over the mix at one K (the lowest blended CPM), each segment at its best batch."""
    m = catalog.methods[method]
    model = catalog.models[inp.model]
    ok, why = sc.availability(model, m)
    tuned_ = inp.tuned if tuned is None else tuned
    rng = m.alpha_tuned if tuned_ else m.alpha_default
    low, high = one_time_range_usd(method, catalog)
    row: dict[str, Any] = {
        "method": method, "label": m.label, "available": ok, "unavailable_reason": why, "which": which,
        "tuned": tuned_, "alpha_range_low": rng.low, "alpha_range_high": rng.high,
        "alpha_convention": m.alpha_convention, "setup_gpu_hours": m.setup_gpu_hours,
        "setup_engineering_weeks": m.setup_engineering_weeks, "setup_note": m.setup_note,
        "one_time_usd_low": low, "one_time_usd_high": high, "claimed_speedup": m.claimed_speedup,
        "source": f"{m.source.source} ({m.source.date})", "vllm_method": m.vllm_method,
    }
    if not ok:
        return row
    base = baseline or baseline_for_mix(inp, mix, catalog, cap)
    batches = batch_grid(cap)
    ks = np.arange(1, m.max_k + 1)
    w = np.array([seg[2] for seg in mix], float)
    segs = []
    for seg in mix:
        s = scenario_for(inp, method, seg, catalog, tuned=tuned_, alpha_shift_extra=alpha_shift_extra)
        res, _, bs = sc.grid(s, catalog, ks=ks, batches=batches, which=which)
        j, found = _best_batch_per_row(res.usd_per_mtok, res.tpot_s, res.fits_memory, inp.tpot_slo_ms)
        r = np.arange(len(ks))
        wl, lang = catalog.workloads[seg[0]], catalog.languages[seg[1]]
        a1 = sc.base_alpha(s, m, wl, lang, which=which)
        segs.append({"seg": seg, "j": j, "found": found, "res": res, "bs": bs, "alpha_1": a1,
                     "cpm": res.usd_per_mtok[r, j]})
    cpm_k = np.sum([wi * sg["cpm"] for wi, sg in zip(w, segs, strict=True)], axis=0)
    all_found = np.all([sg["found"] for sg in segs], axis=0)
    score = np.where(all_found, cpm_k, np.inf) if all_found.any() else cpm_k
    i = int(np.argmin(score))
    k = int(ks[i])
    detail = []
    for wi, sg in zip(w, segs, strict=True):
        res, j = sg["res"], int(sg["j"][i])
        tau = float(res.acceptance_length[i, j])
        detail.append({
            "workload": sg["seg"][0], "language": sg["seg"][1], "share": float(wi), "k": k,
            "batch": int(sg["bs"][j]), "alpha_position_1": sg["alpha_1"],
            "alpha_per_token": math.nan,  # filled below in one vectorised inversion
            "draft_acceptance_rate": float(acc.draft_acceptance_rate(tau, k)), "acceptance_length": tau,
            "speedup": float(res.speedup[i, j]), "output_tokens_per_s": float(res.output_tokens_per_s[i, j]),
            "tpot_ms": float(res.tpot_s[i, j] * 1e3), "usd_per_mtok": float(res.usd_per_mtok[i, j]),
            "verifier_bound": "compute" if res.compute_bound[i, j] else "memory",
            "draft_cost_ratio": float(res.draft_cost_ratio[i, j]), "meets_slo": bool(sg["found"][i]),
            "fits_memory": bool(res.fits_memory[i, j]),
        })
    # tau -> i.i.d. per-token alpha for all segments at once (bisection is the costly part)
    taus = np.array([min(d["acceptance_length"], k + 1.0) for d in detail])
    for d, a in zip(detail, np.atleast_1d(acc.alpha_from_acceptance_length(taus, np.full(len(taus), k))),
                    strict=True):
        d["alpha_per_token"] = float(a)
    dom = detail[int(np.argmax(w))]

    def avg(key: str) -> float:
        return float(np.dot(w, [d[key] for d in detail]))

    row.update({
        "k": k, "batch": dom["batch"], "usd_per_mtok": float(cpm_k[i]),
        "baseline_usd_per_mtok": base["usd_per_mtok"], "baseline_batch": base["batch"],
        "cpm_change_vs_best_baseline": float(cpm_k[i]) / base["usd_per_mtok"] - 1.0,
        "alpha_position_1": avg("alpha_position_1"), "alpha_per_token": avg("alpha_per_token"),
        "draft_acceptance_rate": avg("draft_acceptance_rate"), "acceptance_length": avg("acceptance_length"),
        "speedup": avg("speedup"), "tpot_ms": avg("tpot_ms"),
        "output_tokens_per_s": float(1.0 / np.dot(w, [1.0 / d["output_tokens_per_s"] for d in detail])),
        "verifier_bound": dom["verifier_bound"], "draft_cost_ratio": dom["draft_cost_ratio"],
        "compute_bound_share": float(sum(d["share"] for d in detail if d["verifier_bound"] == "compute")),
        "meets_slo": all(d["meets_slo"] for d in detail), "fits_memory": all(d["fits_memory"] for d in detail),
        "segments": detail,
    })
    return row


def method_table(inp: PlanInputs, mix: Mix, catalog, *, cap: float | None = None, which: str = "mid",
                 tuned: bool | None = None, alpha_shift_extra: float = 0.0) -> list[dict[str, Any]]:
    base = baseline_for_mix(inp, mix, catalog, cap)
    return [method_row(inp, name, mix, catalog, cap=cap, which=which, tuned=tuned,
                       alpha_shift_extra=alpha_shift_extra, baseline=base)
            for name in catalog.methods]


# ---------------------------------------------------------------------------------------------------
# The headline
# ---------------------------------------------------------------------------------------------------

def _fmt_usd(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    if abs(x) >= 1e6:
        return f"${x / 1e6:,.2f}M"
    if abs(x) >= 1e3:
        return f"${x:,.0f}"
    return f"${x:,.2f}"


def fmt_months(x: float) -> str:
    if not math.isfinite(x):
        return "never"
    return f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def plan_summary(inp: PlanInputs, mix: Mix, catalog, *, cap: float | None = None,
                 mix_is_profile: bool = False) -> dict[str, Any]:
    """Baseline and best method with ranges over the method's alpha range (low / mid / high)."""
    tables = {w: method_table(inp, mix, catalog, cap=cap, which=w) for w in WHICH}
    base = baseline_for_mix(inp, mix, catalog, cap)
    by = {w: {r["method"]: r for r in tables[w]} for w in WHICH}
    cur = inp.current_method
    if cur != NO_SPEC and (cur not in by["mid"] or not by["mid"][cur]["available"]):
        cur = NO_SPEC
    cur_cpm = {w: (by[w][cur]["usd_per_mtok"] if cur != NO_SPEC else base["usd_per_mtok"]) for w in WHICH}
    avail = [r for r in tables["mid"] if r["available"] and r["meets_slo"]] or \
        [r for r in tables["mid"] if r["available"]]
    best = min(avail, key=lambda r: r["usd_per_mtok"]) if avail else None
    vol = inp.monthly_output_tokens
    horizon = int(catalog.prices["horizon_months"])
    rate = float(catalog.prices["annual_discount_rate"])
    out: dict[str, Any] = {"tables": tables, "baseline": base, "current_method": cur,
                           "current_usd_per_mtok": cur_cpm, "horizon_months": horizon,
                           "annual_discount_rate": rate, "monthly_output_tokens": vol}
    if best is None:
        out.update(recommended=None, recommendation="No speculative-decoding method is available for "
                   f"{catalog.models[inp.model].label}.")
        return out
    name = best["method"]
    best_cpm = {w: by[w][name]["usd_per_mtok"] for w in WHICH}
    saving = {w: (cur_cpm[w] - best_cpm[w]) * vol / 1e6 for w in WHICH}
    switching = name != cur
    one_low, one_high = (best["one_time_usd_low"], best["one_time_usd_high"]) if switching else (0.0, 0.0)
    one_mid = 0.5 * (one_low + one_high)
    econ = economics(baseline_usd_per_mtok=cur_cpm["mid"], new_usd_per_mtok=min(best_cpm["mid"], cur_cpm["mid"]),
                     monthly_output_tokens=vol, one_time_usd=one_mid, horizon_months=horizon,
                     annual_discount_rate=rate)
    cut = 1.0 - best_cpm["mid"] / cur_cpm["mid"]

    def payback(one, sav):
        return one / sav if sav > 0 else math.inf

    savings_sorted = sorted(saving.values())
    out.update({
        "best": best, "best_usd_per_mtok": best_cpm, "monthly_saving_usd": saving,
        "monthly_saving_range_usd": (savings_sorted[0], savings_sorted[-1]),
        "best_usd_per_mtok_range": (min(best_cpm.values()), max(best_cpm.values())),
        "current_usd_per_mtok_range": (min(cur_cpm.values()), max(cur_cpm.values())),
        "one_time_usd": (one_low, one_high),
        "payback_months": payback(one_mid, saving["mid"]),
        "payback_months_range": (payback(one_low, max(saving.values())), payback(one_high, min(saving.values()))),
        "npv_usd": float(econ.npv_usd), "cpm_cut": cut, "switching": switching,
    })
    pays = cut >= MIN_CUT_TO_RECOMMEND and out["payback_months"] <= horizon
    out["recommended"] = name if pays and switching else (cur if cur != NO_SPEC else None)
    out["recommendation"] = recommendation_sentence(inp, mix, catalog, out, pays, mix_is_profile)
    return out


def _mix_phrase(mix: Mix, catalog, is_profile: bool) -> str:
    w_share: dict[str, float] = {}
    for seg in mix:
        w_share[seg[0]] = w_share.get(seg[0], 0.0) + seg[2]
    top, share = max(w_share.items(), key=lambda kv: kv[1])
    label = catalog.workloads[top].label.lower()
    if not is_profile:
        lang = catalog.languages[mix[0][1]].label
        return f"your traffic is {label} in {lang}"
    return f"your traffic is {share * 100:.0f} % {label}"


def recommendation_sentence(inp: PlanInputs, mix: Mix, catalog, out: dict, pays: bool,
                            is_profile: bool) -> str:
    best = out["best"]
    slo = f"{inp.tpot_slo_ms:g} ms TPOT SLO"
    why_mix = _mix_phrase(mix, catalog, is_profile)
    bound = best["verifier_bound"]
    cur_cpm, best_cpm = out["current_usd_per_mtok"]["mid"], out["best_usd_per_mtok"]["mid"]
    cur_label = "no speculation" if out["current_method"] == NO_SPEC else \
        catalog.methods[out["current_method"]].label
    if pays and out["switching"]:
        one = _fmt_usd(0.5 * (out["one_time_usd"][0] + out["one_time_usd"][1]))
        link = ("where the verifier is memory-bound, so drafting cuts CPM" if bound == "memory" else
                "where the verifier is already compute-bound, yet drafting still cuts CPM")
        return (f"Deploy {best['label']} with K={best['k']}: {why_mix} at batch {best['batch']} under the {slo}, "
                f"{link} {out['cpm_cut'] * 100:.0f} % "
                f"(${cur_cpm:.3f} -> ${best_cpm:.3f} per million output tokens vs {cur_label}) and the "
                f"{one} setup pays back in {fmt_months(out['payback_months'])} months.")
    if pays and not out["switching"]:
        return (f"Keep {best['label']} (tune it to K={best['k']}): no other method beats it for {why_mix[15:]} "
                f"at batch {best['batch']} under the {slo}.")
    if out["cpm_cut"] < MIN_CUT_TO_RECOMMEND:
        return (f"Stay with {cur_label}: {why_mix} at batch {best['batch']} under the {slo}, where the verifier "
                f"is {bound}-bound, so the best method ({best['label']}, K={best['k']}) changes CPM by "
                f"{-out['cpm_cut'] * 100:+.1f} %, too little to pay for a change.")
    return (f"Stay with {cur_label}: {best['label']} would cut CPM {out['cpm_cut'] * 100:.1f} %, but at "
            f"{inp.monthly_output_tokens / 1e9:,.1f}B output tokens a month its {_fmt_usd(out['one_time_usd'][1])} "
            f"setup takes {fmt_months(out['payback_months'])} months to pay back, beyond the "
            f"{out['horizon_months']}-month horizon.")


# ---------------------------------------------------------------------------------------------------
# Levers over a mix
# ---------------------------------------------------------------------------------------------------

def lever_waterfall(inp: PlanInputs, mix: Mix, catalog, *, start_method: str,
                    order: list[str] | None = None) -> list[dict[str, Any]]:
    """planner.levers.waterfall per segment, blended by output-token share. A lever's compute cost
    is paid once per (language, workload) segment it changes (the seed: $400-1,800 per
    language-workload); engineering weeks once."""
    steps_per_seg = []
    for seg in mix:
        s = scenario_for(inp, start_method, seg, catalog, k=catalog.methods[start_method].default_k)
        steps_per_seg.append(lv.waterfall(s, catalog, order=order))
    eng = catalog.engineering_usd_per_week
    horizon = int(catalog.prices["horizon_months"])
    rate = float(catalog.prices["annual_discount_rate"])
    w = np.array([seg[2] for seg in mix])
    out = []
    for n in range(len(steps_per_seg[0])):
        col = [steps[n] for steps in steps_per_seg]
        lever = catalog.levers[col[0].lever]
        applied = [st.applied for st in col]
        n_applied = sum(applied)
        before = float(np.dot(w, [st.usd_per_mtok_before for st in col]))
        after = float(np.dot(w, [st.usd_per_mtok_after for st in col]))
        if n_applied:
            one_low = lever.one_time_usd.low * n_applied + lever.engineering_weeks * eng
            one_high = lever.one_time_usd.high * n_applied + lever.engineering_weeks * eng
        else:
            one_low = one_high = 0.0
        saving = (before - after) * inp.monthly_output_tokens / 1e6
        frac = 1.0 - after / before if before > 0 else 0.0
        reasons = sorted({st.reason for st in col})
        out.append({
            "lever": lever.name, "number": lever.number, "label": lever.label,
            "applied": n_applied > 0, "applied_segments": n_applied, "segments": len(col),
            "reason": "; ".join(reasons), "method": col[int(np.argmax(w))].method,
            "k": col[int(np.argmax(w))].k, "batch": col[int(np.argmax(w))].batch,
            "alpha_before": float(np.dot(w, [st.alpha_before for st in col])),
            "alpha_after": float(np.dot(w, [st.alpha_after for st in col])),
            "usd_per_mtok_before": before, "usd_per_mtok_after": after,
            "one_time_usd_low": one_low, "one_time_usd_high": one_high, "monthly_saving_usd": saving,
            "payback_months": one_high / saving if saving > 0 else math.inf,
            "breakeven_monthly_spend_usd": float(breakeven_monthly_spend_usd(
                cpm_reduction_fraction=frac, one_time_usd=one_high, horizon_months=horizon,
                annual_discount_rate=rate)) if n_applied else math.inf,
            "note": lever.note, "source": f"{lever.source.source} ({lever.source.date})",
        })
    return out


def order_by_return(steps: list[dict[str, Any]]) -> list[str]:
    """planner.levers.order_by_return over the blended steps."""
    fake = [lv.LeverStep(
        lever=s["lever"], number=s["number"], label=s["label"], applied=s["applied"], reason=s["reason"],
        method=s["method"], k=s["k"], batch=s["batch"], tree=False, alpha_before=s["alpha_before"],
        alpha_after=s["alpha_after"], usd_per_mtok_before=s["usd_per_mtok_before"],
        usd_per_mtok_after=s["usd_per_mtok_after"], one_time_usd_low=s["one_time_usd_low"],
        one_time_usd_high=s["one_time_usd_high"], monthly_saving_usd=s["monthly_saving_usd"],
        payback_months=s["payback_months"], breakeven_monthly_spend_usd=s["breakeven_monthly_spend_usd"])
        for s in steps]
    return lv.order_by_return(fake)


# ---------------------------------------------------------------------------------------------------
# Sensitivity
# ---------------------------------------------------------------------------------------------------

def dominant(mix: Mix) -> Seg:
    return max(mix, key=lambda s: s[2])


def batch_sweep(inp: PlanInputs, method: str, seg: Seg, catalog) -> dict[str, Any]:
    """Per batch: best-K speculative CPM / speedup vs baseline CPM; the crossover batch where
    speculation stops paying (first batch where the best K's CPM >= the baseline's at that batch)."""
    m = catalog.methods[method]
    s = scenario_for(inp, method, seg, catalog)
    ks = np.arange(1, m.max_k + 1)
    res, _, bs = sc.grid(s, catalog, ks=ks, batches=BATCH_GRID)
    cpm = np.where(res.fits_memory, res.usd_per_mtok, np.inf)
    i = np.argmin(cpm, axis=0)
    cols = np.arange(len(bs))
    spec_cpm = res.usd_per_mtok[i, cols]
    base_cpm = res.baseline_usd_per_mtok[0]
    fits = res.fits_memory[i, cols]
    gain = base_cpm - spec_cpm
    crossover = None
    idx = np.flatnonzero(fits & (gain <= 0))
    if idx.size:
        c = int(idx[0])
        if c == 0:
            crossover = float(bs[0])
        else:  # interpolate on log(batch) between the last paying and first non-paying grid point
            g0, g1 = gain[c - 1], gain[c]
            t = g0 / (g0 - g1) if g0 != g1 else 1.0
            crossover = float(np.exp(np.log(bs[c - 1]) + t * (np.log(bs[c]) - np.log(bs[c - 1]))))
    return {
        "batch": bs, "best_k": ks[i], "speedup": res.speedup[i, cols], "usd_per_mtok": spec_cpm,
        "baseline_usd_per_mtok": base_cpm, "tpot_ms": res.tpot_s[i, cols] * 1e3,
        "baseline_tpot_ms": res.baseline_tpot_s[0] * 1e3, "fits_memory": fits,
        "compute_bound": res.compute_bound[i, cols], "baseline_compute_bound": res.baseline_compute_bound[0],
        "crossover_batch": crossover, "max_batch": float(res.max_batch[0, 0]),
    }


def alpha_k_heatmap(inp: PlanInputs, method: str, seg: Seg, catalog, *, batch: int,
                    alphas: np.ndarray) -> dict[str, Any]:
    """Speedup over per-token alpha (position 1, the method's decay after) x K at one batch."""
    m = catalog.methods[method]
    ks = np.arange(1, m.max_k + 1)
    rows = []
    s0 = scenario_for(inp, method, seg, catalog)
    wl, lang = catalog.workloads[seg[0]], catalog.languages[seg[1]]
    a0 = sc.base_alpha(s0, m, wl, lang)
    for a in alphas:
        s = dataclasses.replace(s0, alpha_shift_extra=float(a) - a0, batch=batch)
        res, _, _ = sc.grid(s, catalog, ks=ks, batches=[batch])
        rows.append(res.speedup[:, 0])
    return {"alphas": alphas, "ks": ks, "speedup": np.array(rows), "alpha_now": a0}


def tornado(inp: PlanInputs, method: str, mix: Mix, catalog, *, cap: float | None = None) -> list[dict]:
    """CPM of `method` over the mix when one driver moves to its low / high end, others at mid."""
    hw = catalog.hardware[inp.hardware]
    mid = method_row(inp, method, mix, catalog, cap=cap)["usd_per_mtok"]

    def cpm(inp2=inp, mix2=mix, which="mid", **kw):
        return method_row(inp2, method, mix2, catalog, cap=cap, which=which, **kw)["usd_per_mtok"]

    def scaled_mix(i: int, f: float) -> Mix:
        return tuple((w, lang, sh, p * f if i == 3 else p, o * f if i == 4 else o) for w, lang, sh, p, o in mix)

    drivers = [
        ("Acceptance (method's alpha range)", "alpha low .. high", cpm(which="low"), cpm(which="high")),
        ("$/GPU-hour (hardware list range)", f"${hw.usd_per_gpu_hour_low:.2f} .. ${hw.usd_per_gpu_hour_high:.2f}",
         mid * hw.usd_per_gpu_hour_low / inp.usd_per_gpu_hour,
         mid * hw.usd_per_gpu_hour_high / inp.usd_per_gpu_hour),
        ("TPOT SLO", f"{inp.tpot_slo_ms / 2:g} .. {inp.tpot_slo_ms * 2:g} ms",
         cpm(dataclasses.replace(inp, tpot_slo_ms=inp.tpot_slo_ms / 2)),
         cpm(dataclasses.replace(inp, tpot_slo_ms=inp.tpot_slo_ms * 2))),
        ("Prompt length", "x0.5 .. x2", cpm(mix2=scaled_mix(3, 0.5)), cpm(mix2=scaled_mix(3, 2.0))),
        ("Output length", "x0.5 .. x2", cpm(mix2=scaled_mix(4, 0.5)), cpm(mix2=scaled_mix(4, 2.0))),
        ("Tuned vs default head", "default .. tuned", cpm(tuned=False), cpm(tuned=True)),
    ]
    out = [{"driver": d, "range": r, "low_usd_per_mtok": lo, "high_usd_per_mtok": hi, "mid_usd_per_mtok": mid,
            "swing": abs(hi - lo)} for d, r, lo, hi in drivers]
    return sorted(out, key=lambda d: d["swing"])


# ---------------------------------------------------------------------------------------------------
# Deployment
# ---------------------------------------------------------------------------------------------------

def vllm_command(inp: PlanInputs, method: str, k: int, catalog, *, max_num_seqs: int | None = None) -> dict:
    """The `vllm serve` command for a method (keys from planner.deploy); placeholders say what the operator
    must fill in."""
    model = catalog.models[inp.model]
    m = catalog.methods[method]
    target = model.hf_id or model.name
    dm = catalog.models[model.draft_model] if method == "draft_model" and model.draft_model else None
    head = f"<FILL IN: path or HF id of your {m.label} head for {target}>"
    cfg = speculative_config(m, model, k, draft_model=dm, head_path=head)
    notes = []
    if dm is not None:
        notes.append(f"draft model: {dm.label} (same tokenizer as {model.label})")
    elif m.drafting in ("sequential_head", "parallel_head"):
        notes.append(f"fill in 'model' with the {m.label} head trained for {target} (a local path or a Hugging "
                     f"Face id); {m.setup_note}")
        if cfg.get("parallel_drafting"):
            notes.append("P-EAGLE: parallel_drafting=true (vLLM >= 0.32) needs a head trained for parallel drafting")
    elif m.drafting == "native_module":
        notes.append(f"the MTP module ships inside {target}; nothing to fill in")
    parts = ["vllm serve", target]
    if inp.tp > 1:
        parts += ["--tensor-parallel-size", str(inp.tp)]
    if inp.dtype == "fp8":
        parts += ["--quantization", "fp8"]
    if max_num_seqs:
        parts += ["--max-num-seqs", str(int(max_num_seqs))]
    cmd = " ".join(parts) + " --speculative-config '" + json.dumps(cfg) + "'"
    return {"command": cmd, "speculative_config": cfg, "notes": notes}
