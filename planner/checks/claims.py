"""Claims: each numeric claim of the seed article next to what the model says, and the conditions (alpha
convention, K, batch, hardware) under which it holds or fails.

The claims, who made them, the numbers each is evaluated at and the thresholds of its verdict are data
(profiles/data/claims.yaml, read by profiles.claims into `Claim` records); this module evaluates them with the
planner's public functions: `plan` and `levers` for operating points (each method at its best K and batch under the
SLO), planner.search.scenario for batch-1 speedups, planner.uncertainty.sensitivity for the batch sweep. One evaluation
per claim kind (`KINDS`); an evaluation returns None where its claim cannot be evaluated for the request (a method the
model does not run, a model or hardware not in the catalogue).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from planner.acceptance import rates as acc
from planner.plan import PlanRequest, fmt_pct, fmt_usd, levers, plan
from planner.search import scenario as sc
from planner.search.batch_sweeps import batch_sweep
from planner.types import Acceptance, Catalog, Scenario, Sourced

# What each parameter of a claim is: "number", "integer", "numbers" (a list), "band" ({low, high}), "text".
ParamKind = Literal["number", "integer", "numbers", "band", "text"]
class Status(enum.IntEnum):
    """A claim's status under the plan's inputs, as a number the views order and colour by."""

    OUTSIDE = 0  # not modelled (gray)
    DIFFERS = 1  # does not hold, or only in part or with a qualifier (orange)
    HOLDS = 2  # holds as stated (green)


@dataclass(frozen=True)
class Verdict:
    """A verdict's status and its words; the status is decided beside the words, never read back from them."""

    status: Status
    text: str


def holds(text: str = "holds") -> Verdict:
    return Verdict(Status.HOLDS, text)


def differs(text: str) -> Verdict:
    return Verdict(Status.DIFFERS, text)


@dataclass(frozen=True)
class Band:
    """A closed range [low, high] in the unit of the parameter that holds it."""

    low: float
    high: float

    def __contains__(self, x: float) -> bool:
        return self.low <= x <= self.high


@dataclass(frozen=True)
class Claim:
    """One claim: its words, who made it, where it was read, and what the planner evaluates it at."""

    name: str
    kind: str  # one of KINDS: which evaluation
    claim: str  # as the article words it
    attributed_to: str  # who made the claim, as the article attributes it
    source: Sourced  # the document the claim was read from, and its date
    params: Mapping[str, Any]  # numbers and thresholds, as KINDS[kind] lists them (bands as Band)


@dataclass(frozen=True)
class ClaimRow:
    """What the model says about one claim."""

    claim: str
    attributed_to: str
    model_says: str
    verdict: str
    conditions: str
    status: Status  # holds (green), differs (orange: not, or only in part), outside (gray: not modelled)

    def as_dict(self) -> dict[str, str]:
        """The Claims page's table columns."""
        return {"claim": self.claim, "attributed to": self.attributed_to, "what the model says": self.model_says,
                "verdict": self.verdict, "conditions": self.conditions}


@dataclass(frozen=True)
class _In:
    """A request's inputs every evaluation shares."""

    req: PlanRequest
    catalog: Any
    seg: Any  # the request's largest traffic segment (planner.plan.TrafficSegment)
    where: str  # "<model> on <tp> x <hardware>, <workload>"
    hw_label: str
    eagle_ok: bool
    memo: dict = dataclasses.field(default_factory=dict)  # what several claims share (levers, the baseline)


def _one(req: PlanRequest, seg, **kw) -> PlanRequest:
    """The request on one segment only, its whole traffic; no batch cap, no fleet."""
    return dataclasses.replace(req, segments=(dataclasses.replace(seg, share=1.0),), batch_cap=None, daily_shape=None,
                               hours=(), levers_start=None, **kw)


def _point(req: PlanRequest, catalog: Catalog, method: str):
    """(the method at its best K and batch under the SLO, its CPM change in % against no speculation at its own best
    batch (None unless both are feasible), whether no speculation is feasible)."""
    p = plan(dataclasses.replace(req, methods=(method,), current_method=PlanRequest.current_method), catalog)
    pt = p.method(method)
    return pt, (pt.cpm_change_pct if p.baseline.feasible and pt.feasible else None), p.baseline.feasible


def _scenario(x: _In, req: PlanRequest, method: str, **kw) -> Scenario:
    """The segment as a planner.search.scenario.Scenario at batch 1 (the claims about batch-1 speedups)."""
    seg = x.seg
    kw.setdefault("tuned", req.tuned)
    return Scenario(model=req.model, hardware=req.hardware, method=method, k=x.catalog.methods[method].default_k,
                    batch=1, workload=seg.workload, language=seg.language, prompt_tokens=int(seg.prompt_tokens),
                    output_tokens=int(seg.output_tokens), tp=req.tp, dtype=req.dtype,
                    usd_per_gpu_hour=req.usd_per_gpu_hour, tpot_slo_ms=req.tpot_slo_ms, engine=req.engine,
                    engine_version=req.engine_version, **kw)


def _best_at_batch1(s: Scenario, catalog: Catalog, ks: np.ndarray) -> tuple[float, int]:
    res, _, _ = sc.grid(s, catalog, ks=ks, batches=[1])
    i = int(np.argmax(res.speedup[:, 0]))
    return float(res.speedup[i, 0]), int(ks[i])


def _at_batch1(x: _In, req: PlanRequest, method: str, **kw) -> tuple[float, int]:
    """The method's best speedup at batch 1 over K = 1..max_k, and that K."""
    ks = np.arange(1, x.catalog.methods[method].max_k + 1)
    return _best_at_batch1(_scenario(x, req, method, **kw), x.catalog, ks)


def _cut_at_alpha(x: _In, req: PlanRequest, alpha: float) -> float | None:
    """CPM cut (a fraction) of EAGLE-3 at a per-token alpha vs no speculation, each at its best batch; None where
    either misses the SLO or memory."""
    if x.memo.get("no_baseline"):  # no speculation on this segment does not depend on alpha: no cut at any alpha
        return None
    _, change, base_ok = _point(_one(req, x.seg, acceptance=Acceptance("per_token", alpha),
                                     acceptance_method="eagle3"), x.catalog, "eagle3")
    x.memo["no_baseline"] = not base_ok
    return None if change is None else -change / 100.0


def _short(catalog: Catalog, model: str) -> str:
    """A model's label without its size note: 'DeepSeek-V3 (671B MoE, 37B active)' -> 'DeepSeek-V3'."""
    return catalog.models[model].label.split(" (")[0]


def _eagle3_levers(x: _In):
    """The lever waterfall from EAGLE-3 on the segment, computed once per evaluation."""
    if "levers" not in x.memo:
        x.memo["levers"] = levers(_one(x.req, x.seg), x.catalog, "eagle3")
    return x.memo["levers"]


def _row(c: Claim, model_says: str, verdict: Verdict, conditions: str) -> ClaimRow:
    return ClaimRow(c.claim, c.attributed_to, model_says, verdict.text, conditions, verdict.status)


# --- one evaluation per kind ----------------------------------------------------------------------------------


def _alpha_decides_the_cut(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    a = c.params["alphas"]
    cuts = [_cut_at_alpha(x, dataclasses.replace(x.req, tuned=False), v) for v in a]
    if None in cuts:
        return None
    return _row(c, f"EAGLE-3 at alpha {a[0]:.2f} vs {a[1]:.2f} (per-token): CPM cut {cuts[0] * 100:.0f} % vs "
                f"{cuts[1] * 100:.0f} % at each configuration's best batch under the SLO",
                differs("direction holds; size depends on batch" if cuts[1] > cuts[0] else "does not hold here"),
                f"{x.where}; TPOT SLO {x.req.tpot_slo_ms:g} ms")


def _speedup_by_alpha(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    a, top = c.params["alphas"], c.params["claimed_speedup"].high
    lo = dataclasses.replace(x.req, tuned=False)
    ks = np.arange(1, c.params["max_k"] + 1)
    sp = [_best_at_batch1(dataclasses.replace(_scenario(x, lo, "eagle3"), acceptance=Acceptance("per_token", v)),
                          x.catalog, ks)[0] for v in a]
    return _row(c, f"EAGLE-3 at batch 1, best K: {sp[0]:.2f}x at alpha {a[0]:.2f}, {sp[1]:.2f}x at alpha {a[1]:.2f}",
                differs("holds at batch 1 only in part") if sp[1] < top else differs("holds at batch 1"),
                f"{x.where}; batch 1 (memory-bound verifier); larger batches shrink the speedup")


def _production_alpha_target(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    p = c.params
    alphas = np.arange(p["alphas"].low, p["alphas"].high + p["alpha_step"] / 2, p["alpha_step"])
    lo = dataclasses.replace(x.req, tuned=False)
    cut = np.array([np.nan if v is None else v for v in (_cut_at_alpha(x, lo, float(a)) for a in alphas)])
    be = alphas[np.argmax(cut > 0)] if (cut > 0).any() else None
    need = p["cpm_cut"]
    a_need = alphas[np.argmax(cut >= need)] if (cut >= need).any() else None
    rate = acc.convert(k=p["rate_k"], alpha=p["rate_alpha"])["draft_acceptance_rate"]
    return _row(c, f"EAGLE-3 breaks even at alpha ~{be:.2f}" if be is not None else "EAGLE-3 never cuts CPM here",
                differs(f"a {need * 100:.0f} % CPM cut needs alpha >= {a_need:.2f}" if a_need is not None
                        else f"no alpha up to {p['alphas'].high:.2f} gives a {need * 100:.0f} % cut"),
                f"{x.where}; per-token alpha; vLLM's draft acceptance rate at K={p['rate_k']} for alpha "
                f"{p['rate_alpha']:.2f} is {rate * 100:.0f} % (a different number)")


def _code_cpm_cut(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    w = x.catalog.workloads[c.params["workload"]]
    seg = dataclasses.replace(x.seg, workload=w.name, language="english", share=1.0,
                              prompt_tokens=float(w.prompt_tokens), output_tokens=float(w.output_tokens))
    pt, change, _ = _point(_one(x.req, seg), x.catalog, "eagle3")
    if change is None:
        return None
    return _row(c, f"EAGLE-3 on {w.name}: CPM {fmt_pct(change)} (K={pt.k}, batch {pt.batch})",
                holds("consistent") if change / 100 in c.params["cpm_change"] else differs("differs here"),
                f"{x.catalog.models[x.req.model].label} on {x.hw_label}, {w.name} workload, "
                f"SLO {x.req.tpot_slo_ms:g} ms")


def _eagle3_speedup(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    band = c.params["speedup"]
    sp, k = _at_batch1(x, x.req, "eagle3", tuned=True)
    return _row(c, f"{sp:.2f}x at batch 1 with the tuned alpha range midpoint, best K={k}",
                holds() if sp in band else differs("below the claim" if sp < band.low else "above the claim"),
                f"{x.where}; batch 1; claims of this size need batch 1 and alpha >= 0.8")


def _finetune_speedup_gain(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    shift, band = c.params["alpha_gain"], c.params["speedup_gain"]
    base, _ = _at_batch1(x, x.req, "eagle3")
    gains = [_at_batch1(x, x.req, "eagle3", alpha_shift_extra=g)[0] - base for g in (shift.low, shift.high)]
    return _row(c, f"+{gains[0]:.2f}x to +{gains[1]:.2f}x at batch 1",
                holds() if band.low <= gains[0] and gains[1] <= band.high else differs("differs"),
                f"{x.where}; batch 1; alpha shift is per-token")


def _fp8_draft_head(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    band = c.params["throughput_gain"]
    s = _scenario(x, x.req, "eagle3")
    e1 = sc.evaluate(s, x.catalog)
    e2 = sc.evaluate(dataclasses.replace(s, draft_cost_factor=c.params["draft_cost_factor"],
                                         alpha_shift_extra=c.params["alpha_shift"]), x.catalog)
    g = e2.output_tokens_per_s / e1.output_tokens_per_s - 1
    return _row(c, f"{fmt_pct(g * 100)} throughput at batch 1, K={s.k} (draft cost ratio c={e1.draft_cost_ratio:.3f})",
                holds() if g in band else differs("smaller here" if g < band.low else "larger here"),
                f"{x.where}; the gain scales with the draft's share of step time (c)")


def _tree_acceptance(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    alpha, band = c.params["alpha"], c.params["effective_alpha"]
    s = dataclasses.replace(_scenario(x, x.req, "eagle3"), acceptance=Acceptance("per_token", alpha), tree=True)
    e = sc.evaluate(s, x.catalog)
    return _row(c, f"effective chain alpha with a width-{s.tree_width} tree at K={s.k}: {e.alpha_per_token:.2f}",
                holds() if e.alpha_per_token in band else differs("differs"),
                f"per-token alpha {alpha:.2f} chain; tree verifies {e.verify_tokens_per_seq} tokens per sequence, "
                "which costs compute at large batch")


def _p_eagle_over_eagle3(c: Claim, x: _In) -> ClaimRow | None:
    hw, cat = c.params["hardware"], x.catalog
    if not (cat.method_available("p_eagle", x.req.model)[0] and x.eagle_ok and hw in cat.hardware):
        return None
    band = c.params["ratio"]
    req = dataclasses.replace(x.req, hardware=hw, usd_per_gpu_hour=None, tp=min(x.req.tp, cat.hardware[hw].max_tp))
    pe, kp = _at_batch1(x, req, "p_eagle")
    ea, ke = _at_batch1(x, req, "eagle3")
    r = pe / ea
    return _row(c, f"{r:.2f}x (P-EAGLE {pe:.2f}x at K={kp} vs EAGLE-3 {ea:.2f}x at K={ke}, batch 1)",
                holds() if r in band else differs("smaller here" if r < band.low else "larger here"),
                f"{cat.models[x.req.model].label} on {hw.upper()}, batch 1, default alpha ranges")


def _mtp_deepseek(c: Claim, x: _In) -> ClaimRow | None:
    p, cat = c.params, x.catalog
    if p["model"] not in cat.models or p["hardware"] not in cat.hardware:
        return None
    seg = dataclasses.replace(x.seg, language="english")
    req = dataclasses.replace(_one(x.req, seg), model=p["model"], hardware=p["hardware"], tp=p["tp"], dtype=p["dtype"],
                              usd_per_gpu_hour=None)
    # MTP at this K only: the catalogue's MTP with max_k = K, so plan() searches batch alone
    at_k = dataclasses.replace(cat, methods={**cat.methods, "mtp": dataclasses.replace(cat.methods["mtp"],
                                                                                        max_k=p["k"])})
    pt, change, _ = _point(req, at_k, "mtp")
    conv = acc.convert(k=p["k"], alpha=p["alpha"])
    tau = conv["acceptance_length"]
    return _row(c, f"K={p['k']}, alpha {p['alpha']:.2f} = draft acceptance rate "
                f"{conv['draft_acceptance_rate'] * 100:.0f} % = tau {tau:.2f}: {tau:.1f}x is the acceptance length "
                f"itself. Model: {pt.speedup:.2f}x vs no speculation at the same batch ({pt.batch}, K={pt.k}, alpha "
                f"{pt.alpha_position_1:.2f}, best under the SLO), CPM "
                + (fmt_pct(change) if change is not None else "n/a (infeasible)"),
                differs("holds only as an upper bound (tau, ignoring draft and verify cost)"),
                f"{_short(cat, p['model'])} on {p['tp']} x {p['hardware'].upper()}, {p['dtype'].upper()}, K={p['k']}")


def _b200_cpm_by_software(c: Claim, x: _In) -> ClaimRow | None:
    p, cat = c.params, x.catalog
    if p["model"] not in cat.models or p["hardware"] not in cat.hardware:
        return None
    seg = dataclasses.replace(x.seg, workload=p["workload"], language="english", share=1.0,
                              prompt_tokens=float(p["prompt_tokens"]), output_tokens=float(p["output_tokens"]))
    g = PlanRequest(model=p["model"], hardware=p["hardware"], tp=p["tp"], dtype=p["dtype"],
                    tpot_slo_ms=x.req.tpot_slo_ms, segments=(seg,))
    pg = plan(g, cat)
    if not (pg.baseline.feasible and pg.best is not None):
        return None
    base, best = pg.baseline.usd_per_mtok, pg.best.usd_per_mtok
    end, start = p["usd_per_mtok"].low, p["usd_per_mtok"].high
    hw = p["hardware"].upper()
    return _row(c, f"model: ${base:.3f}/Mtok without speculation, ${best:.3f} with the best method",
                differs(("the end point is within reach" if best <= p["within_reach_usd_per_mtok"]
                         else f"the model's best is ${best:.3f}, above ${end:.2f}")
                        + f"; speculation alone cuts {(1 - best / base) * 100:.0f} % "
                        f"(the claim: {(1 - end / start) * 100:.0f} %)"),
                f"{_short(cat, p['model'])} on {p['tp']} x {hw}, {p['dtype'].upper()}, {p['workload']}, "
                f"SLO {x.req.tpot_slo_ms:g} ms at the {hw} list-price midpoint")


def _batch_sweet_spot(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    batches = np.array(c.params["batches"])
    top = c.params["sweet_spot_max_batch"]
    j = int(np.flatnonzero(batches == top)[0])
    sw = batch_sweep(_one(x.req, x.seg), x.catalog, "eagle3", batches=batches)
    cross = sw.crossover_batch
    end = f"crossover at batch ~{cross:.0f}" if cross else "no crossover up to the memory limit"
    s0, s1 = sw.speedup[0], sw.speedup[j]
    return _row(c, f"EAGLE-3 speedup {s0:.2f}x at batch {batches[0]:g}, {s1:.2f}x at batch {top}; {end}",
                holds("holds (largest gains at small batch)") if s0 >= s1 else differs("differs"),
                f"{x.where}; best K per batch")


def _not_modelled(c: Claim, x: _In) -> ClaimRow | None:
    return _row(c, f"not modelled ({c.params['why']})", Verdict(Status.OUTSIDE, "outside the model"), "-")


def _vsd_breakeven(c: Claim, x: _In) -> ClaimRow | None:
    lever = x.catalog.levers.get(c.params["lever"])
    if lever is None or not x.eagle_ok:
        return None
    v = next(s for s in _eagle3_levers(x) if s.lever == lever.name)
    return _row(c, f"break-even at {fmt_usd(v.breakeven_monthly_spend_usd * 12)} a year of spend" if v.applied
                else f"not applied: {v.reason}", differs("computed, not asserted"),
                f"{x.where}; one-time cost ${lever.one_time_usd.low:,.0f}-${lever.one_time_usd.high:,.0f} "
                f"+ {lever.engineering_weeks:g} weeks (assumption)")


def _alpha_by_lever(c: Claim, x: _In) -> ClaimRow | None:
    if not x.eagle_ok:
        return None
    name, target = c.params["lever"], c.params["alpha"]
    after = next(s for s in _eagle3_levers(x) if s.lever == name)
    return _row(c, f"EAGLE-3 default head after levers 1-{after.number}: alpha {after.alpha_after:.2f} "
                "(per-token, position 1)", holds() if after.alpha_after >= target else differs("does not hold here"),
                f"{x.where}; mid of each lever's range")


def _finetune_compute_cost(c: Claim, x: _In) -> ClaimRow | None:
    gpus, hours, usd = c.params["gpus"], c.params["hours"], c.params["usd"]
    train = x.catalog.hardware[x.catalog.prices["training_hardware"]]
    lo = gpus.low * hours.low * train.usd_per_gpu_hour_low
    hi = gpus.high * hours.high * train.usd_per_gpu_hour_high
    return _row(c, f"{gpus.low:g}-{gpus.high:g} A100 x {hours.low:g}-{hours.high:g} h at "
                f"${train.usd_per_gpu_hour_low:.2f}-${train.usd_per_gpu_hour_high:.2f}/GPU-hour = "
                f"${lo:,.0f}-${hi:,.0f}",
                holds("in range") if lo <= usd.high and hi >= usd.low else differs("differs"),
                f"{train.price.source} ({train.price.date})")


BAND, NUM, INT, NUMS, TEXT = "band", "number", "integer", "numbers", "text"
# kind -> (the evaluation, its parameters and what each is)
KINDS: dict[str, tuple[Callable[[Claim, _In], ClaimRow | None], dict[str, ParamKind]]] = {
    "alpha_decides_the_cut": (_alpha_decides_the_cut, {"alphas": NUMS}),
    "speedup_by_alpha": (_speedup_by_alpha, {"alphas": NUMS, "max_k": INT, "claimed_speedup": BAND}),
    "production_alpha_target": (_production_alpha_target, {"alphas": BAND, "alpha_step": NUM, "cpm_cut": NUM,
                                                           "rate_alpha": NUM, "rate_k": INT}),
    "code_cpm_cut": (_code_cpm_cut, {"workload": TEXT, "cpm_change": BAND}),
    "eagle3_speedup": (_eagle3_speedup, {"speedup": BAND}),
    "finetune_speedup_gain": (_finetune_speedup_gain, {"alpha_gain": BAND, "speedup_gain": BAND}),
    "fp8_draft_head": (_fp8_draft_head, {"draft_cost_factor": NUM, "alpha_shift": NUM, "throughput_gain": BAND}),
    "tree_acceptance": (_tree_acceptance, {"alpha": NUM, "effective_alpha": BAND}),
    "p_eagle_over_eagle3": (_p_eagle_over_eagle3, {"hardware": TEXT, "ratio": BAND}),
    "mtp_deepseek": (_mtp_deepseek, {"model": TEXT, "hardware": TEXT, "tp": INT, "dtype": TEXT, "k": INT,
                                     "alpha": NUM}),
    "b200_cpm_by_software": (_b200_cpm_by_software, {"model": TEXT, "hardware": TEXT, "tp": INT, "dtype": TEXT,
                                                     "workload": TEXT, "prompt_tokens": NUM, "output_tokens": NUM,
                                                     "usd_per_mtok": BAND, "within_reach_usd_per_mtok": NUM}),
    "batch_sweet_spot": (_batch_sweet_spot, {"batches": NUMS, "sweet_spot_max_batch": INT}),
    "not_modelled": (_not_modelled, {"why": TEXT}),
    "vsd_breakeven": (_vsd_breakeven, {"lever": TEXT}),
    "alpha_by_lever": (_alpha_by_lever, {"lever": TEXT, "alpha": NUM}),
    "finetune_compute_cost": (_finetune_compute_cost, {"gpus": BAND, "hours": BAND, "usd": BAND}),
}


def evaluate_claims(req: PlanRequest, catalog: Catalog, claims: tuple[Claim, ...]) -> tuple[ClaimRow, ...]:
    """Each claim that can be evaluated for the request, in the order given, next to what the model says.

    Claims about the request's own traffic use its largest segment; a PlanError or an unknown name in the request
    propagates (the page checks the request first).
    """
    p = plan(_one_of(req), catalog)
    seg = max(p.segments, key=lambda s: s.share)
    hw_label = catalog.hardware[req.hardware].label
    where = f"{catalog.models[req.model].label} on {req.tp} x {hw_label}, {catalog.workloads[seg.workload].label}"
    x = _In(req=req, catalog=catalog, seg=seg, where=where, hw_label=hw_label,
            eagle_ok=catalog.method_available("eagle3", req.model)[0])
    rows = (KINDS[c.kind][0](c, x) for c in claims)
    return tuple(r for r in rows if r is not None)


def _one_of(req: PlanRequest) -> PlanRequest:
    """The request's segments checked the way plan() checks them, at the cost of one method and no extras."""
    return dataclasses.replace(req, methods=("ngram",), daily_shape=None, hours=(), levers_start=None)


def seed_vs_library(catalog: Catalog) -> list[dict]:
    """Each method's seed alpha range beside what the acceptance library measured for it, in one convention: the
    seed range (per-token alpha at position 1, decaying by the method's assumed position_decay) converted to tau at
    each chain K the library measured, and the library's tau there (bonus token included) converted back to the
    i.i.d. per-token alpha with the same tau. A method the library has not measured shows its default K only."""
    from planner.acceptance import library
    from planner.acceptance import rates as acc_
    from planner.acceptance.tiers import library_of

    lib = library_of(catalog)
    out = []
    for name, m in catalog.methods.items():
        meas = library.method_measurements(lib, name)
        for k in sorted({x[0] for x in meas}) or [m.default_k]:
            here = [x for x in meas if x[0] == k]
            lo, hi = (float(acc_.acceptance_length_decay(a, k, m.position_decay))
                      for a in (m.alpha_default.low, m.alpha_default.high))
            row = {"method": m.label, "K": k,
                   "seed alpha (per-token, position 1)": f"{m.alpha_default.low:.2f}-{m.alpha_default.high:.2f}",
                   "seed as tau at K": f"{lo:.2f}-{hi:.2f}", "library tau at K": "not measured",
                   "library as i.i.d. alpha": "", "rows": "", "verdict": "no measurement"}
            if here:
                taus = sorted(x[1] for x in here)
                alphas = sorted(x[2] for x in here)
                row.update({"library tau at K": f"{taus[0]:.2f}-{taus[-1]:.2f} (median {np.median(taus):.2f}, "
                                                f"{len(taus)} rows)",
                            "library as i.i.d. alpha": f"{alphas[0]:.2f}-{alphas[-1]:.2f}",
                            "rows": ", ".join(x[3] for x in here[:8]) + (" ..." if len(here) > 8 else ""),
                            "verdict": "seed range below the measurements" if np.median(taus) > hi else
                            "seed range above the measurements" if np.median(taus) < lo else
                            "measurements' median inside the seed range"})
            out.append(row)
    return out


# What a library pair would have to differ in to measure each seed lever that moves acceptance (levers.yaml).
LEVER_PAIRS = {
    "domain_finetune": "the same head before and after an in-domain fine-tune, on that domain's dataset",
    "match_draft_size": "a separate draft model and a head on the same target and dataset",
    "fp8_draft": "the same head in BF16 and in FP8",
    "vsd": "an EAGLE-3 head and a VSD-trained head on the same target and dataset",
}


def seed_levers_vs_library(catalog: Catalog) -> list[dict]:
    """Each seed lever that claims an acceptance effect beside what the acceptance library measured for it: the tree
    lever from every (tree, chain of its depth) pair of the same model, head, dataset, engine and temperature (as
    i.i.d. per-token alpha at K = depth, the seed's "effective acceptance"); the others say which pair would measure
    them when the library holds none."""
    from planner.acceptance import library
    from planner.acceptance.tiers import library_of

    lib = library_of(catalog)
    out = []
    for name, lv in catalog.levers.items():
        if name == "tree_attention":
            pairs = library.tree_pairs(lib)
            row = {"lever": f"{lv.number}. {lv.label}", "seed claim": lv.note, "pairs": len(pairs)}
            if pairs:
                gains = np.array([p.alpha_gain for p in pairs])
                taus = np.array([p.tree_tau / p.chain_tau for p in pairs])
                row.update({"library measured": f"tree vs the chain of its depth: alpha {np.median(gains):+.3f} "
                                                f"(median; {gains.min():+.3f} to {gains.max():+.3f}), tau x "
                                                f"{np.median(taus):.2f}; trees of {min(p.nodes for p in pairs)}-"
                                                f"{max(p.nodes for p in pairs)} verified tokens, depth "
                                                f"{min(p.steps for p in pairs)}-{max(p.steps for p in pairs)}",
                            "rows": ", ".join(f"{p.tree_id}/{p.chain_id}" for p in pairs[:4])
                            + (" ..." if len(pairs) > 4 else ""),
                            "verdict": "holds" if np.median(gains) >= 0.10 else
                            "not seen: trees did not raise acceptance over the chain of their depth"
                            if np.median(gains) <= 0 else "smaller than claimed"})
            else:
                row.update({"library measured": "no tree and chain pair", "rows": "", "verdict": "no measurement"})
            out.append(row)
        elif name in LEVER_PAIRS:
            out.append({"lever": f"{lv.number}. {lv.label}",
                        "seed claim": (f"speedup x{lv.speedup_factor:g}" if lv.speedup_factor != 1.0 else
                                       f"alpha {lv.alpha_gain.low:+.2f} to {lv.alpha_gain.high:+.2f}") + f"; {lv.note}",
                        "pairs": 0, "library measured": f"no pair in the library ({LEVER_PAIRS[name]})", "rows": "",
                        "verdict": "no measurement"})
    return out
