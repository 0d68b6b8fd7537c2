"""The product's answer in one call: `plan(PlanRequest, catalog) -> Plan`.

Every page of the app, the CLI (`python -m planner plan`) and the report format what this returns; none of
them choose a batch, a K, a baseline or a payback themselves.

How the answer is reached, one room per step:
1. planner.request validates the request; its traffic is a tuple of segments (workload, language, share of
   output tokens, mean prompt and output tokens). planner.context resolves it against the catalogue.
2. planner.search.grid evaluates every candidate (a method, or no speculation) in one vectorised pass over
   samples x candidates x K x segments x batch and finds, for each, the largest integer batch that fits memory
   (planner.search.memory), meets the TPOT SLO (and a stated TTFT SLO at full load, planner.physics.ttft) and the
   traffic's concurrency cap, and the cheapest batch below it.
3. planner.search.points: one K per method serves the whole mix (one vLLM deployment): the K with the lowest blended
   CPM among the K's where every segment fits and meets the SLO; with the band over the method's alpha range.
4. planner.decision.verdict: only candidates that fit memory and meet the SLO are ever recommended or used as "today";
   if the baseline misses the SLO, the cheapest configuration without speculation that meets it (another TP)
   becomes the reference, or the plan says plainly that none exists and shows no percentage cut.
5. planner.money.economics: saving, one-time cost, payback and NPV, once; planner.decision.levers, planner.money.sizing
(the fleet by
   hour) and planner.decision.assumptions complete the answer.
With PlanRequest.serving "disaggregated" or "best", planner.money.disagg sizes a prefill pool and a decode pool for
today and every feasible method; the headline's two fleets become the disaggregated ones (or the cheaper of the two).
A monthly spend instead of a volume (planner.money.spend) is turned into the volume that fleet serves first; on request,
planner.decision.hardware_choice compares the cheapest fleet on every GPU type, and the verdict names a cheaper one.
"""

from __future__ import annotations

import dataclasses

from planner.answer import (
    Assumption,
    LeverStep,
    OperatingPoint,
    Plan,
    PlanEconomics,
    PlanFleet,
    Recommendation,
    SegmentPoint,
)
from planner.context import Context, make_context
from planner.decision.assumptions import assumptions
from planner.decision.hardware_choice import compare_hardware, hardware_sentence
from planner.decision.levers import levers, order_by_return, plan_levers
from planner.decision.verdict import choose_reference, decide, ttft_fleet_sentence, ttft_sentence
from planner.formatting import fmt_cpm, fmt_months, fmt_pct, fmt_usd
from planner.money.bill import band_bills, bills, headline_fleet
from planner.money.disagg import ServingChoice, choose_serving, decode_context, decode_point
from planner.money.economics import plan_economics
from planner.money.kday import Schedule, deploy_schedule, scheduled_fleet
from planner.money.sizing import plan_fleet
from planner.money.spend import request_for_spend, volume_for_spend
from planner.physics.deploy import engine_deployment, vllm_deployment
from planner.physics.engines import DEFAULT_ENGINE_VERSION
from planner.physics.roofline import default_kv_dtype
from planner.request import (
    MAX_BATCH,
    NO_SPEC,
    TP_OPTIONS,
    CostAssumptions,
    PlanError,
    PlanRequest,
    TrafficSegment,
    default_costs,
    segments_from_mix,
    validate,
)
from planner.search.points import alternatives, methods_with_band, operating_point, pct, plain_tp_options
from planner.types import Catalog
from planner.uncertainty.risk import switch_risk

# plan() and, re-exported for the pages, the CLI and the report, the records and helpers of the rooms it calls.
__all__ = [
    "MAX_BATCH", "NO_SPEC", "TP_OPTIONS", "Assumption", "CostAssumptions", "LeverStep", "OperatingPoint", "Plan",
    "PlanEconomics", "PlanFleet", "PlanError", "PlanRequest", "Recommendation", "SegmentPoint", "TrafficSegment",
    "default_costs", "fmt_cpm", "fmt_months", "fmt_pct", "fmt_usd", "levers", "monthly_saving", "operating_point",
    "order_by_return", "plan", "segments_from_mix", "validate",
]


def plan(req: PlanRequest, catalog: Catalog) -> Plan:
    """The whole answer for one request (see the module docstring)."""
    h = _headline(req, catalog, band=True)
    req, ctx, reference, best, econ, switching = h.req, h.ctx, h.reference, h.best, h.econ, h.switching
    segs, spent, baseline, methods, fleet, by_bill = h.segs, h.spent, h.baseline, h.methods, h.fleet, h.by_bill
    note, alts, ref_fleet, best_fleet = h.note, h.alts, h.ref_fleet, h.best_fleet
    # the Monte Carlo draws co-located fleets: a disaggregated headline fleet goes without it (said in plan_dict)
    colocated = all(f is None or f.serving == "colocated" for f in (ref_fleet, best_fleet))
    if switching and econ.monthly_saving_usd is not None and colocated:
        if (risk := switch_risk(req, catalog, reference=reference, best=best)) is not None:
            econ = dataclasses.replace(
                econ, p_saving_positive=risk.p_saving_positive, p_payback_within_horizon=risk.p_payback_within_horizon,
                risk_weighted_npv_usd=risk.risk_weighted_npv_usd, saving_p05_usd=risk.saving_p05_usd,
                saving_p95_usd=risk.saving_p95_usd)
    rec, verdict = decide(ctx, baseline=baseline, reference=reference, best=best, econ=econ, switching=switching)
    for said in (ttft_sentence(ctx, methods, baseline), h.ttft_note):  # what a TTFT SLO rules out or costs
        verdict = f"{verdict} {said}" if said else verdict
    deploy_for = rec.method if rec is not None else (best.method if best is not None else None)
    hw_cmp = compare_hardware(req, catalog, own_price_source=spent.price_source if spent is not None else None
                              ) if req.compare_hardware else None
    if hw_cmp is not None and (elsewhere := hardware_sentence(hw_cmp, req, catalog)):
        verdict = f"{verdict} {elsewhere}"
    return Plan(
        fleet=fleet,
        bills=tuple(by_bill.values()),
        request=req,
        segments=segs,
        usd_per_gpu_hour=ctx.price,
        baseline=baseline,
        reference=reference,
        reference_note=note,
        methods=methods,
        best=best,
        recommendation=rec,
        verdict=verdict,
        economics=econ,
        levers=plan_levers(ctx, reference=reference, recommendation=rec),
        deploy=_deploy(h, deploy_for) if deploy_for else None,
        assumptions=tuple(assumptions(ctx)),
        costs=ctx.costs,
        alternatives=alts,
        spend=spent,
        hardware_choice=hw_cmp,
        reference_fleet=ref_fleet,
        best_fleet=best_fleet,
        serving_options=h.serving_options,
    )


@dataclasses.dataclass(frozen=True)
class _Headline:
    """What plan() computes before the Monte Carlo, the verdict, the levers and the deployment: today, the best
    method, their fleets and the economics of switching (plan() and monthly_saving() share it)."""

    req: PlanRequest
    ctx: Context
    segs: tuple
    spent: object
    baseline: OperatingPoint
    methods: tuple
    reference: OperatingPoint | None
    note: str
    alts: tuple
    fleet: object
    by_bill: dict
    best: OperatingPoint | None
    ref_fleet: PlanFleet | None
    best_fleet: PlanFleet | None
    econ: PlanEconomics
    switching: bool
    schedule: Schedule | None  # the best method's K per batch size: its fleet's and its deploy command's
    ttft_note: str = ""  # what the TTFT SLO costs speculation's fleet (planner.decision.verdict.ttft_fleet_sentence)
    serving_options: tuple = ()  # planner.money.disagg.ServingChoice.options (served "best" or "disaggregated")


def _headline(req: PlanRequest, catalog: Catalog, *, band: bool) -> _Headline:
    """Steps 1-5 of the module docstring up to the economics; band: each method's band over its alpha range and the
    saving's band too, and the verdict's TTFT fleet sentence (False: the middle only, no sentence; today, the best
    method and the saving are the same)."""
    segs = validate(req, catalog)
    spent = volume_for_spend(req, catalog) if req.spend_usd_per_month is not None else None
    if spent is not None:  # the plan answers for the volume the spend buys
        req = request_for_spend(req, spent)
    ctx = make_context(req, catalog, segs)
    names = list(req.methods or catalog.methods.keys())
    cur = req.current_method
    if cur != NO_SPEC and cur not in names:
        names.append(cur)
    mid = methods_with_band(ctx, names, band=band)
    baseline, by = mid[0], {p.method: p for p in mid[1:]}
    alts = alternatives(ctx) if not baseline.feasible else []
    # with data-parallel attention, today may be cheaper on plain TP: the honest today is the cheaper of the two
    plain = plain_tp_options(ctx, other_tps=not baseline.feasible) if cur == NO_SPEC else []
    reference, note = choose_reference(ctx, by.get(cur) if cur != NO_SPEC else baseline, alts, plain)
    ref_cpm = reference.usd_per_mtok if reference is not None else None
    methods = tuple(
        dataclasses.replace(p, cpm_change_pct=pct(p.usd_per_mtok, ref_cpm) if p.feasible else None)
        for p in mid[1:]
        if p.method in (req.methods or catalog.methods.keys()) or p.method == cur
    )
    baseline = dataclasses.replace(
        baseline, cpm_change_pct=pct(baseline.usd_per_mtok, ref_cpm) if baseline.feasible else None
    )
    fleet = plan_fleet(ctx, [baseline, *methods])
    by_bill = bills(fleet, billing=req.billing, monthly_output_tokens=req.monthly_output_tokens) if fleet else {}
    # the verdict's sentence (plan() only: monthly_saving, the SLO knee's two calls, has no verdict to say it in)
    ttft_note = ttft_fleet_sentence(ctx, [baseline, *methods], fleet) if band else ""
    feasible = [p for p in methods if p.feasible and p.method in by_bill and by_bill[p.method].feasible]
    # the best method is the one whose fleet costs least a month (the full-load CPM breaks ties)
    best = min(feasible, key=lambda p: (by_bill[p.method].usd_per_month, p.usd_per_mtok)) if feasible else None
    # the best method's fleet runs the K its deployment gives at each hour's batch (planner.money.kday), the same
    # schedule the deploy command prints; the ranking above is at each method's one K
    schedule = deploy_schedule(ctx, best) if best is not None else None
    if schedule is not None and fleet is not None:
        fleet = scheduled_fleet(ctx, fleet, best, schedule)
        by_bill = bills(fleet, billing=req.billing, monthly_output_tokens=req.monthly_output_tokens)
    # the two fleets the headline compares, each at its own TP: every number "today" and "with the best method"
    ref_fleet, ref_bill = headline_fleet(ctx, reference, fleet, role="today")
    best_fleet, best_bill = headline_fleet(ctx, best, fleet, role="best")
    options: tuple = ()
    if req.serving != "colocated":  # disaggregated prefill/decode fleets (planner.money.disagg)
        served = choose_serving(ctx, reference=reference, methods=methods, colocated=ServingChoice(
            ref_fleet, ref_bill, best, best_fleet, best_bill, schedule))
        schedule = served.schedule  # served disaggregated: the decode pool's (planner.money.disagg.schedule_decode)
        options = served.options
        ref_fleet, ref_bill, best, best_fleet, best_bill = (served.reference_fleet, served.reference_bill, served.best,
                                                            served.best_fleet, served.best_bill)
    # economics of switching from the reference to the best method
    switching = best is not None and best.method != (reference.method if reference is not None else None)
    one_low, one_high = (best.one_time_usd_low, best.one_time_usd_high) if best is not None and switching else (0, 0)
    econ = plan_economics(monthly_output_tokens=req.monthly_output_tokens, costs=ctx.costs, reference=reference,
                          best=best, one_low=float(one_low), one_high=float(one_high), reference_bill=ref_bill,
                          best_bill=best_bill, band_bills=band_bills(ctx, best, billing=req.billing)
                          if band and (best_fleet is None or best_fleet.serving == "colocated") else ())
    return _Headline(req, ctx, segs, spent, baseline, methods, reference, note, tuple(alts + plain), fleet, by_bill,
                     best, ref_fleet, best_fleet, econ, switching, schedule, ttft_note, options)


def _deploy(h: _Headline, method: str) -> dict:
    """The deployment of `method` (the recommended, else the best): the best method's carries the schedule its fleet
    billed; served disaggregated, it is the decode pool's deployment (its TP, its batch), the prefill pool named."""
    pt = next(p for p in h.methods if p.method == method)
    f = h.best_fleet
    if h.best is None or method != h.best.method:
        return deployment(h.ctx, pt)
    if f is None or f.serving == "colocated" or len(f.pools) != 2:
        return deployment(h.ctx, pt, schedule=h.schedule)
    prefill, decode = f.pools
    dctx, _ = decode_context(h.ctx, decode)
    dep = deployment(dctx, decode_point(pt, decode), schedule=h.schedule)
    dep["notes"].append(f"disaggregated: this is the decode pool's command (TP {decode.tp}, up to "
                        f"{decode.peak_gpus:,} GPUs); the prefill pool runs the same model at TP {prefill.tp} (up to "
                        f"{prefill.peak_gpus:,} GPUs) and sends the KV cache to it (your engine's prefill/decode "
                        "disaggregation: Dynamo, llm-d, SGLang PD)")
    return dep


def monthly_saving(req: PlanRequest, catalog: Catalog) -> float | None:
    """plan(req, catalog).economics.monthly_saving_usd without the Monte Carlo, the levers or the deployment (the
    knee of the SLO asks it at two more SLOs: planner.checks.knee)."""
    return _headline(req, catalog, band=False).econ.monthly_saving_usd


def deployment(ctx: Context, pt: OperatingPoint, *, schedule: Schedule | None = None) -> dict:
    """The vLLM command for a method at its K and batch (planner.physics.deploy), with K per batch size below the
    operating batch (planner.money.kday.deploy_schedule, the one the fleet bills; `schedule`: it, computed already)."""
    req, cat = ctx.req, ctx.catalog
    m = cat.methods[pt.method]
    tree = req.tree_shape if m.tree else None
    if schedule is None:
        schedule = deploy_schedule(ctx, pt)
    dep = vllm_deployment(
        m, ctx.model, pt.k, tp=req.tp, attention_dp=req.attention_dp, dtype=req.dtype, max_num_seqs=pt.batch,
        draft_model=cat.models[ctx.model.draft_model] if m.drafting == "draft_model" else None,
        tree_shape=tree, kv_dtype=req.kv_dtype or default_kv_dtype(req.dtype), k_per_batch=schedule,
    )
    if schedule is not None and len({r[2] for r in schedule}) > 1:
        dep["notes"].append("the fleet by hour bills each hour at this schedule's K at its batch; an "
                            "hour at K=0 pays the engine's speculation switch overhead (the plan's assumptions)")
    return engine_deployment(req.engine, dep, m, ctx.model, pt.k, tp=req.tp, attention_dp=req.attention_dp,
                             max_num_seqs=pt.batch, tree_shape=tree, engine_version=req.engine_version
                             or DEFAULT_ENGINE_VERSION.get(req.engine))
