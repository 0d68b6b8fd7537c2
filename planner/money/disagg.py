"""Disaggregated prefill/decode fleets: a prefill pool sized for the TTFT SLO and a decode pool for the TPOT SLO, each
at its own TP, the KV cache sent from one to the other; the bill is the sum of both pools' GPU-hours.

Prefill pool (prefill-only replicas of TP_p GPUs), per hour h with lambda_h requests/s of P_h prompt tokens:
    S_h   = t_p(P_h) at TP_p (planner.physics.serving.prefill_time_s: the prefix-cache share is not recomputed), plus
            for speculation the draft's own prefill of the prompt (planner.money.sizing.ttft_inputs does the same)
    x_h   = P_h x KV bytes per token (the target's, plus the draft's own KV) / the GPU's interconnect_gb_s
            (planner.fleet.SERVING_ASSUMPTIONS)
    TTFT  = W + S_h + x_h + t_front, W the M/G/1 wait of planner.physics.ttft with no decode in the step (a replica's
            prefill lane is the whole replica): W = u S (1 + cv^2) / (2 (1 - u)), u = (lambda_h / R) S_h; t_front the
            engine's front-end time (planner.physics.ttft.DEFAULT_OVERHEAD_S, as the co-located fleet's TTFT)
    With a TTFT SLO T, a replica may be busy u_max = L / (a + L), L = T - S_h - x_h - t_front, a = S_h (1 + cv^2) / 2
    (the u at which TTFT = T; none when L <= 0); without one, u_max = PREFILL_BUSY_CAP. One replica serves u_max / S_h
    requests/s; R_h = max(1, ceil(lambda_h S_h / u_max)).
Decode pool (decode-only replicas of TP_d GPUs): planner.money.sizing.plan_fleet with decode_only: the co-located
    fleet's replicas with no prefill sharing their time (TPOT seen = the decode TPOT, the SLO's), speculation at the
    operating point's K. The fleet that wins (the best method's, `schedule_decode`) then runs, as the co-located
    best does (planner.money.kday), the K its deployment's schedule gives at each hour's batch per decode replica:
    the schedule of the decode pool's own deployment (its TP, --max-num-seqs its busiest hour's batch), the one the
    deploy command prints.
Each pool's TP is the one of planner.request.TP_OPTIONS (up to the GPU's max_tp, where the weights fit) with the
fewest GPU-hours under the request's billing (the smaller TP on a tie). Speculation changes the decode pool, and the
prefill pool only by the draft's own prefill and KV. The bill: autoscaled, each pool's replicas every hour; fixed,
each pool sized for its own busiest hour all month.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from planner.answer import Bill, OperatingPoint, PlanFleet, ServingPool
from planner.context import Candidate, Context, make_context
from planner.fleet import PREFILL_BUSY_CAP, FleetHour, FleetPlan, gpu_hours_per_month
from planner.money.bill import bill_of
from planner.money.kday import Schedule, deploy_schedule, k_at_batch, scheduled_fleet
from planner.money.sizing import plan_fleet, traffic_hours
from planner.physics.networks import GB
from planner.physics.serving import prefill_time_s
from planner.physics.ttft import DEFAULT_OVERHEAD_S, SERVICE_SCV, ttft
from planner.request import MAX_BATCH, NO_SPEC, TP_OPTIONS
from planner.search.drafting import drafts as draft_arrays
from planner.search.memory import candidate_max_batch


@dataclasses.dataclass(frozen=True)
class _PrefillPool:
    tp: int
    replicas: np.ndarray  # (H,) 0: infeasible
    ttft_ms: np.ndarray  # (H,)
    busy: np.ndarray  # (H,) u per replica
    capacity: np.ndarray  # (H,) requests/s per replica
    transfer_ms: np.ndarray  # (H,)


def candidate_of(ctx: Context, pt: OperatingPoint) -> Candidate:
    """The candidate an operating point deploys (planner.money.sizing.plan_fleet's, the method as requested)."""
    tree = ctx.req.tree_shape is not None and pt.method != NO_SPEC and ctx.catalog.methods[pt.method].tree
    return Candidate(pt.method, (max(pt.k, 1),), tree=tree, tree_shape=ctx.req.tree_shape if tree else None)


def prefill_pool_at(ctx: Context, pt: OperatingPoint, hours: Sequence, tp: int, cand: Candidate | None = None
                    ) -> _PrefillPool:
    """The prefill pool at TP `tp` over the day's hours (module docstring); replicas 0 where no load meets the TTFT
    SLO or the weights do not fit. cand: the candidate `pt` came from (a lever's); None: the method as deployed."""
    tctx = ctx if tp == ctx.tp else make_context(ctx.req, ctx.catalog, ctx.segs, tp=tp)
    cand = cand or candidate_of(tctx, pt)
    d = draft_arrays(tctx, [cand])
    lam = np.array([h.requests_per_s for h in hours], float)
    p = np.array([h.prompt_tokens for h in hours], float)
    share = ctx.prefix_cache_share
    spec = pt.method != NO_SPEC
    s = np.asarray(prefill_time_s(tctx.target, tctx.hw_params, prompt_tokens=p, tp=tp, cached_share=share), float)
    kv_per_token = float(np.asarray(tctx.target.kv_bytes_per_token, float))
    if spec:
        own = prefill_time_s(d.draft, tctx.hw_params, prompt_tokens=p, tp=tp, cached_share=share)
        s = s + np.broadcast_to(np.asarray(own, float), (1, 1, 1, 1, len(p))).reshape(-1)
        kv_per_token += float(np.asarray(d.draft.kv_bytes_per_token, float).reshape(-1)[0])
    x = p * kv_per_token / (tctx.hw.interconnect_gb_s * GB)
    fits = _fits(tctx, cand, d, p, tp)
    slo = ctx.req.ttft_slo_ms
    a = s * (1.0 + SERVICE_SCV) / 2.0
    if slo is None:
        u_max = np.full(len(p), PREFILL_BUSY_CAP)
    else:
        room = slo / 1e3 - s - x - DEFAULT_OVERHEAD_S
        u_max = np.where(room > 0, room / (a + np.maximum(room, 0.0)), 0.0)
    cap = np.where(fits & (u_max > 0), u_max / s, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.ceil(lam / np.where(cap > 0, cap, 1.0) * (1.0 - 1e-12))
    r = np.where(cap > 0, np.clip(need, 1.0, None), 0.0)
    lam_r = lam / np.maximum(r, 1.0)
    t = ttft(requests_per_s=lam_r, prefill_s=s, new_prompt_tokens=p * (1.0 - share), step_s=0.0, batch=0.0)
    ttft_ms = np.where(r > 0, (t.ttft_s + x) * 1e3, np.nan)
    return _PrefillPool(tp, r.astype(int), ttft_ms, np.where(r > 0, t.lane_share, np.nan), cap, x * 1e3)


def _fits(ctx: Context, cand: Candidate, d, prompt: np.ndarray, tp: int) -> bool:
    """Whether one prompt's KV (and the draft) fits a prefill replica of `tp` GPUs beside the weights."""
    if tp > ctx.hw.max_tp:
        return False
    k = np.array([[[[[float(max(cand.ks[0], 1))]]]]])
    pr = np.array([[[[[float(prompt.max())]]]]])
    mb = candidate_max_batch(ctx, [cand], d, k=k, prompt_tokens=pr, output_tokens=np.ones_like(pr))
    return bool(np.all(mb >= 1))


def _pool(role: str, tp: int, gpus: np.ndarray, hours: tuple[FleetHour, ...], *, billing: str, price: float,
          batch: float, feasible: bool, transfer_ms: float = 0.0) -> ServingPool:
    auto = float(gpu_hours_per_month(gpus, billing="autoscaled"))
    fixed = float(gpu_hours_per_month(gpus, billing="fixed"))
    gh = fixed if billing == "fixed" else auto
    return ServingPool(role=role, tp=tp, batch=batch, peak_gpus=int(gpus.max()), gpu_hours_per_month=gh if feasible
                       else math.inf, usd_per_month=gh * price if feasible else math.inf,
                       gpu_hours_per_month_autoscaled=auto, gpu_hours_per_month_fixed=fixed,
                       usd_per_month_autoscaled=auto * price, usd_per_month_fixed=fixed * price, feasible=feasible,
                       hours=hours, kv_transfer_ms=transfer_ms)


def _tps(ctx: Context) -> list[int]:
    return [t for t in TP_OPTIONS if t <= ctx.hw.max_tp]


def prefill_pools(ctx: Context, pt: OperatingPoint, cand: Candidate | None = None) -> list[ServingPool]:
    """The prefill pool of `pt` at every TP of the GPU (ServingPool records, feasible or not); cand: as
    prefill_pool_at's."""
    hours, _ = traffic_hours(ctx)
    out = []
    for tp in _tps(ctx):
        pp = prefill_pool_at(ctx, pt, hours, tp, cand)
        ok = bool(np.all(pp.replicas > 0))
        hrs = tuple(FleetHour(h.hour, h.requests_per_s, h.prompt_tokens, h.output_tokens, int(r), int(r) * tp, 0.0,
                              math.nan, float(u), r > 0, float(c), None, float(t))
                    for h, r, u, c, t in zip(hours, pp.replicas, pp.busy, pp.capacity, pp.ttft_ms, strict=True))
        peak = int(np.argmax([h.requests_per_s for h in hours]))
        out.append(_pool("prefill", tp, pp.replicas * tp, hrs, billing=ctx.req.billing, price=ctx.price, batch=0.0,
                         feasible=ok, transfer_ms=float(pp.transfer_ms[peak])))
    return out


def decode_pools(ctx: Context, points: Sequence[OperatingPoint], cands: Sequence[Candidate] | None = None
                 ) -> dict[str, list[ServingPool]]:
    """Per method of `points`: its decode pool at every TP of the GPU (plan_fleet with decode-only replicas; one
    plan_fleet call per TP for all the points); cands: plan_fleet's (a lever's candidate per point)."""
    out: dict[str, list[ServingPool]] = {p.method: [] for p in points}
    pts = [dataclasses.replace(p, available=True, feasible=True) for p in points]
    for tp in _tps(ctx):
        tctx = ctx if tp == ctx.tp else make_context(ctx.req, ctx.catalog, ctx.segs, tp=tp)
        fleet = plan_fleet(tctx, pts, cands, decode_only=True)
        for p in points:
            cfg = fleet.config(p.method)
            gpus = np.array([h.gpus for h in cfg.hours])
            batch = max((h.batch for h in cfg.hours), default=0.0)
            out[p.method].append(_pool("decode", tp, gpus, cfg.hours, billing=ctx.req.billing, price=ctx.price,
                                       batch=float(min(batch, MAX_BATCH)), feasible=cfg.feasible))
    return out


def _cheapest(pools: Sequence[ServingPool]) -> ServingPool:
    """The pool with the fewest GPU-hours under the billing (the smaller TP on a tie; an infeasible one if all are)."""
    return min(pools, key=lambda q: (not q.feasible, q.gpu_hours_per_month, q.tp))


def disaggregated_fleet(ctx: Context, pt: OperatingPoint, prefill: ServingPool, decode: ServingPool, *, role: str
                        ) -> tuple[PlanFleet, Bill]:
    """The headline fleet of `pt` served disaggregated on these two pools, and its bill (the sum of the pools')."""
    hours, source = traffic_hours(ctx)
    hrs = tuple(FleetHour(h.hour, h.requests_per_s, h.prompt_tokens, h.output_tokens, ph.replicas + dh.replicas,
                          ph.gpus + dh.gpus, dh.batch, dh.tpot_ms, ph.prefill_share, ph.feasible and dh.feasible,
                          dh.capacity_requests_per_s, pt.k if dh.k is None else dh.k, ph.ttft_ms)
                for h, ph, dh in zip(hours, prefill.hours, decode.hours, strict=True))
    ok = prefill.feasible and decode.feasible
    both = (prefill, decode)
    auto = sum(q.gpu_hours_per_month_autoscaled for q in both)
    fixed = sum(q.gpu_hours_per_month_fixed for q in both)
    cfg = FleetPlan(pt.method, pt.label, pt.k, hrs, max(h.gpus for h in hrs), auto, fixed, auto * ctx.price,
                    fixed * ctx.price, ok)
    b = bill_of(cfg, billing=ctx.req.billing, monthly_output_tokens=ctx.req.monthly_output_tokens,
                gpus_per_replica=decode.tp, usd_per_gpu_hour=ctx.price)
    return PlanFleet(
        role=role, method=pt.method, label=pt.label, tp=decode.tp, k=pt.k, batch=decode_batch(decode),
        billing=b.billing, peak_gpus=b.peak_gpus, gpu_hours_per_month=b.gpu_hours_per_month,
        usd_per_month=b.usd_per_month, gpu_hours_per_month_autoscaled=auto, gpu_hours_per_month_fixed=fixed,
        usd_per_month_autoscaled=auto * ctx.price, usd_per_month_fixed=fixed * ctx.price,
        usd_per_gpu_hour=ctx.price, effective_usd_per_mtok=b.effective_usd_per_mtok, tpot_ms=b.tpot_ms,
        feasible=b.feasible, hours=hrs, hours_source=source, ttft_ms=b.ttft_ms, serving="disaggregated",
        pools=both), b


def decode_batch(decode: ServingPool) -> int:
    """The decode pool's --max-num-seqs: its busiest hour's sequences per replica, rounded up."""
    return max(1, math.ceil(decode.batch - 1e-9))


def decode_context(ctx: Context, decode: ServingPool) -> tuple[Context, bool]:
    """(the context of the decode pool's own deployment, whether it is the request's): the request at the pool's TP."""
    if decode.tp == ctx.req.tp:
        return ctx, True
    req = dataclasses.replace(ctx.req, tp=decode.tp)
    return make_context(req, ctx.catalog, ctx.segs), False


def decode_point(pt: OperatingPoint, decode: ServingPool) -> OperatingPoint:
    """`pt` as the decode pool deploys it: the pool's TP and batch (the method, K and acceptance unchanged)."""
    return dataclasses.replace(pt, batch=decode_batch(decode), tp=decode.tp)


def schedule_decode(ctx: Context, pt: OperatingPoint, f: PlanFleet) -> tuple[PlanFleet, Bill | None, Schedule | None]:
    """(the disaggregated fleet `f` of `pt` with its decode pool billed hour by hour at the K of its deployment's
    schedule, its bill, the schedule that bill used): the module docstring; `f` unchanged (bill None) without a
    schedule of more than one K or where every hour already runs `pt`'s K. Where the schedule's K's cannot be sized
    (planner.money.kday.scheduled_fleet keeps the one K), the schedule is that one K: the deploy command prints what
    the bill used."""
    if pt.method == NO_SPEC or len(f.pools) != 2:
        return f, None, None
    prefill, decode = f.pools
    dctx, _ = decode_context(ctx, decode)
    dpt = decode_point(pt, decode)
    schedule = deploy_schedule(dctx, dpt)
    if schedule is None or len({k for _, _, k in schedule}) < 2:
        return f, None, schedule
    one_k: Schedule = ((1, dpt.batch, int(pt.k)),)
    live = dataclasses.replace(dpt, available=True, feasible=True)
    fleet = plan_fleet(dctx, [live], decode_only=True)
    if fleet is None:
        return f, None, one_k
    at_k = scheduled_fleet(dctx, fleet, live, schedule, decode_only=True)
    if at_k is fleet:  # every hour already at pt's K (the schedule's K there), or a K that cannot be sized
        ran = all(not h.feasible or k_at_batch(schedule, h.batch) == pt.k for h in decode.hours)
        return f, None, schedule if ran else one_k
    cfg = at_k.config(pt.method)
    gpus = np.array([h.gpus for h in cfg.hours])
    new = _pool("decode", decode.tp, gpus, cfg.hours, billing=ctx.req.billing, price=ctx.price, batch=decode.batch,
                feasible=cfg.feasible)
    nf, nb = disaggregated_fleet(ctx, pt, prefill, new, role=f.role)
    return nf, nb, schedule


def disaggregated(ctx: Context, points: Sequence[OperatingPoint], *, role: str
                  ) -> dict[str, tuple[PlanFleet, Bill]]:
    """Per point (by method): its disaggregated fleet, each pool at its cheapest TP, and the fleet's bill."""
    dec = decode_pools(ctx, points)
    return {p.method: disaggregated_fleet(ctx, p, _cheapest(prefill_pools(ctx, p)), _cheapest(dec[p.method]),
                                          role=role) for p in points}


def served_bill(ctx: Context, pt: OperatingPoint, *, cand: Candidate | None = None) -> Bill:
    """One operating point's bill as the request serves it (a lever's step, planner.decision.levers): co-located
    (planner.money.bill.point_bill); "disaggregated", its disaggregated fleet at its cheapest pools; "best", the
    cheaper feasible of the two (co-located on a tie), the rule choose_serving applies to today."""
    from planner.money.bill import point_bill, point_context

    co = point_bill(ctx, pt, billing=ctx.req.billing, cand=cand)
    if ctx.req.serving == "colocated":
        return co
    pctx = point_context(ctx, pt)
    live = dataclasses.replace(pt, available=True, feasible=True)
    pre = prefill_pools(pctx, live, cand)
    dec = decode_pools(pctx, [live], None if cand is None else [cand])[pt.method]
    _, dis = disaggregated_fleet(pctx, live, _cheapest(pre), _cheapest(dec), role="today")
    if ctx.req.serving == "disaggregated" or not co.feasible:
        return dis
    return co if (not dis.feasible or co.usd_per_month <= dis.usd_per_month) else dis


@dataclasses.dataclass(frozen=True)
class ServingChoice:
    """The headline's two fleets once disaggregation is considered (planner.plan)."""

    reference_fleet: PlanFleet | None
    reference_bill: Bill | None
    best: OperatingPoint | None
    best_fleet: PlanFleet | None
    best_bill: Bill | None
    # the best fleet's K per batch size: the co-located one's (planner.money.kday) or, served disaggregated, its decode
    # pool's (schedule_decode); the deploy command prints it
    schedule: Schedule | None = None
    # the fleets the choice weighed, today's and the best method's, co-located ("best" only) and disaggregated, feasible
    # or not (Plan.serving_options)
    options: tuple[PlanFleet, ...] = ()


def cheapest_disaggregated(ctx: Context, options: Sequence[tuple[tuple[PlanFleet, Bill], OperatingPoint]]
                           ) -> tuple[tuple[PlanFleet, Bill], OperatingPoint, Schedule | None] | None:
    """The cheapest feasible disaggregated fleet of `options` ((fleet, bill), point), ranked at each method's one K as
    the co-located best is (planner.plan), then billed at its decode pool's K schedule (schedule_decode); None when no
    option is feasible."""
    live = [o for o in options if o[0][0].feasible]
    if not live:
        return None
    (f, b), pt = min(live, key=lambda o: (o[0][1].usd_per_month, o[1].usd_per_mtok))
    nf, nb, schedule = schedule_decode(ctx, pt, f)
    if nb is not None and nb.feasible:
        f, b = nf, nb
    elif nb is not None:  # the hours at the schedule's K's miss an SLO: the one K stands, and is what deploys
        schedule = ((1, f.batch, int(pt.k)),)
    return (f, b), pt, schedule


def choose_serving(ctx: Context, *, reference: OperatingPoint | None, methods: Sequence[OperatingPoint],
                   colocated: ServingChoice) -> ServingChoice:
    """Today and the best method under the request's serving: "disaggregated", both on disaggregated fleets; "best",
    today the cheaper feasible of its co-located and disaggregated fleets, the best method the cheaper of the cheapest
    co-located fleet (at its K schedule) and the cheapest disaggregated one (its decode pool at its K schedule). Only
    fleets that meet both SLOs (TPOT and a stated TTFT) are chosen."""
    mode = ctx.req.serving
    feasible = [p for p in methods if p.feasible]
    points = ([reference] if reference is not None and reference.method not in {p.method for p in feasible} else [])
    points += feasible
    fleets = disaggregated(ctx, points, role="best") if points else {}

    def as_role(f: tuple[PlanFleet, Bill], role: str) -> tuple[PlanFleet, Bill]:
        return dataclasses.replace(f[0], role=role), f[1]

    ref_f, ref_b = (as_role(fleets[reference.method], "today") if reference is not None else (None, None))
    if ref_f is not None and not ref_f.feasible:
        ref_f, ref_b = None, None
    options = []
    if (dis := cheapest_disaggregated(ctx, [(fleets[p.method], p) for p in feasible])) is not None:
        options.append(dis)
    weighed = _weighed(colocated if mode == "best" else None, reference, fleets, dis)
    if mode == "best":
        if colocated.reference_bill is not None and colocated.reference_bill.feasible and (
                ref_b is None or colocated.reference_bill.usd_per_month <= ref_b.usd_per_month):
            ref_f, ref_b = colocated.reference_fleet, colocated.reference_bill
        if colocated.best is not None and colocated.best_bill is not None and colocated.best_bill.feasible:
            options.append(((colocated.best_fleet, colocated.best_bill), colocated.best, colocated.schedule))
    if not options:
        return ServingChoice(ref_f, ref_b, None, None, None, options=weighed)
    # the cheapest month; on a tie the co-located fleet (one pool is the simpler deployment)
    (bf, bb), best, schedule = min(options, key=lambda o: (o[0][1].usd_per_month, o[0][0].serving != "colocated"))
    return ServingChoice(ref_f, ref_b, best, dataclasses.replace(bf, role="best"), bb, schedule, weighed)


def _weighed(colocated: ServingChoice | None, reference: OperatingPoint | None, fleets: dict, dis
             ) -> tuple[PlanFleet, ...]:
    """The fleets choose_serving weighed: today's and the best method's, co-located (where given) then
    disaggregated."""
    out = []
    if colocated is not None:
        out += [f for f in (colocated.reference_fleet, colocated.best_fleet) if f is not None]
    if reference is not None and reference.method in fleets:
        out.append(dataclasses.replace(fleets[reference.method][0], role="today"))
    if dis is not None:
        out.append(dataclasses.replace(dis[0][0], role="best"))
    return tuple(out)
