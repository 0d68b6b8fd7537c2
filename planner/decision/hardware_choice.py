"""Which hardware for this traffic: the cheapest fleet for the same traffic and TPOT SLO on each GPU type of the
catalogue, over its TPs (those that fit memory and meet the SLO), without speculation and with each method at its best
K; bills from the fleet functions (planner.money.spend.fleet_bills) at the user's prices. Like for like by default:
every GPU type runs the request's own weight format (bf16 stays bf16); with the request's compare_other_formats, every
weight format too, and the comparison then says what the format changed (`format_changes`).

Pruning, by floors no fleet of a configuration goes below: (1) a fleet keeps at least one replica up every hour, so TP
t on a GPU at p $/GPU-hour costs at least t x 24 h x days x p a month whatever the load; (2) for dense models, every
output token's verifier GEMMs and every prompt's prefill at the weight format's peak FLOP/s (_compute_floor). A
configuration whose floor is no lower than the cheapest fleet already found on its GPU type, with and without
speculation, cannot win and is not searched (configurations go from the lowest floor up); one whose floor only one
kind (no speculation, or the methods) has beaten is searched for the other kind only. A point's bill is at least
CPM_BOUND x the lowest full-load CPM of its workloads x the volume: searched points wait to be sized, lowest bound
first, each skipped once the best of its kind is at or below its bound (at the same bill the
configuration earlier in the floor order stands, so the order of sizing changes no answer). Weights that do not fit
the replica's memory are skipped before any search.

Serving: where the request's serving is "disaggregated" or "best", every GPU type also gets its cheapest disaggregated
fleet without and with speculation (planner.money.disagg: a prefill pool for the TTFT SLO and a decode pool for the TPOT
SLO, each at its own TP; the speculative one's decode pool at its K schedule, as plan() bills it), from the points of
the request's TP on its own GPU type (plan()'s) and of the smallest TP with a feasible point elsewhere. Four fleets per
GPU type; the cheapest is picked among those the serving allows ("disaggregated": the disaggregated two; "best": all
four), each meeting both SLOs (TPOT and a stated TTFT: an infeasible fleet is never an option).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from planner.answer import HardwareChoice, HardwareComparison, HardwareOption, OperatingPoint, option_order
from planner.context import BASELINE, make_context
from planner.fleet import monthly_bill_usd
from planner.formatting import fmt_usd
from planner.money.disagg import cheapest_disaggregated, disaggregated
from planner.money.sizing import traffic_hours
from planner.money.spend import FleetBill, fleet_bills
from planner.physics.roofline import replica_weight_bytes, usable_memory_bytes
from planner.physics.serving import TOKENS_PER_MTOK, prefill_time_s
from planner.price import gpu_price, price_label
from planner.request import NO_SPEC, TP_OPTIONS, PlanError, PlanRequest, is_number, validate
from planner.search.candidates import method_candidates
from planner.search.grid import search
from planner.search.points import points
from planner.types import WEIGHT_DTYPES, Catalog

# A fleet's bill is at least the volume times the lowest full-load cost per token of the point's workloads (each token
# costs at least its workload's full-load CPM; idle capacity, whole replicas and prefill sharing only add to it; the
# blended CPM is no bound for a mix: fleets measured down to 0.62 x it); sizing is skipped above this fraction of
# that bound (a margin: measured bills are at least 1.0 x it, single workloads and mixes, both billings). Not applied
# when the batch is capped at the traffic's concurrency: the capped CPM is above what the fleet, which is not capped,
# pays.
CPM_BOUND = 0.95
NOTE = ("Weight formats are compared on cost and speed only: 4-bit and fp8 weights may cost quality, which the planner "
        "does not price. Speculation does not change outputs.")
LIKE_FOR_LIKE_NOTE = ("Every GPU type runs your {dtype} weights (like for like); comparing other weight formats (the "
                      "Plan page's checkbox, --compare-other-formats) lets each GPU type pick fp8 or 4-bit weights "
                      "too. Speculation does not change outputs.")


def hardware_prices(req: PlanRequest, catalog: Catalog, prices: Mapping[str, float] | None = None
                    ) -> dict[str, tuple[float, str]]:
    """{GPU type: ($/GPU-hour, where it comes from)}: the stated price; the request's own GPU type at the request's
    price; else the list midpoint."""
    given = {**dict(req.hardware_prices), **dict(prices or {})}
    out = {}
    for name, hw in catalog.hardware.items():
        if name in given and not (is_number(given[name]) and 0 < given[name] <= 1000):
            raise PlanError(f"prices[{name}]", given[name], "a price above $0 and at most $1000 per GPU-hour")
        price = gpu_price(hw, given[name] if name in given else req.usd_per_gpu_hour if name == req.hardware else None)
        out[name] = (price.usd_per_gpu_hour, price_label(hw, price))
    for name in given:
        if name not in catalog.hardware:
            catalog.hardware[name]  # raises UnknownNameError listing the valid names
    return out


def _option(req: PlanRequest, hw_label: str, b: FleetBill) -> HardwareOption:
    return HardwareOption(hardware=req.hardware, hardware_label=hw_label, tp=req.tp, dtype=req.dtype, method=b.method,
                          method_label=b.label, k=b.k, peak_gpus=b.peak_gpus,
                          usd_per_gpu_hour=float(req.usd_per_gpu_hour),
                          usd_per_month=b.usd_per_month, billing=b.billing)


def _fits_weights(ctx) -> bool:
    usable = float(usable_memory_bytes(ctx.hw_params.hbm_bytes, ctx.tp))
    return float(replica_weight_bytes(ctx.target, tp=ctx.tp, attention_dp=ctx.attention_dp)) < usable


def _search(req: PlanRequest, catalog: Catalog, segs, names, kinds: tuple[bool, ...] = (False, True)
            ) -> tuple[object, list[OperatingPoint]]:
    """(context, the feasible points: no speculation and each method at its best K) of one configuration; kinds:
    which to search (False: no speculation, True: the methods). The search treats each candidate on its own (its
    batch grid is the same set of batches whatever the other candidates), so leaving a kind out changes nothing of
    the other's points."""
    ctx = make_context(req, catalog, segs)
    if not _fits_weights(ctx):
        return ctx, []
    cands = [BASELINE] if False in kinds else []
    if True in kinds:
        cands += method_candidates(ctx, names)[0]
    if not cands:
        return ctx, []
    return ctx, [p for p in points(ctx, cands, search(ctx, cands, ctx.mid_samples())) if p.feasible]


def compare_hardware(req: PlanRequest, catalog: Catalog, *, prices: Mapping[str, float] | None = None,
                     billing: str | None = None, own_price_source: str | None = None) -> HardwareComparison:
    """The cheapest fleet per GPU type for the request's traffic and SLO (module docstring). prices: $/GPU-hour per
    GPU type (default: the request's hardware_prices, then the list midpoints; the request's own GPU type at its
    price); billing: "autoscaled" or "fixed" (default: the request's); own_price_source: where the request's own
    price comes from when the request carries one the user did not type (a spend's list midpoint or implied price:
    planner.money.spend.spend_price), else the price rule's label."""
    segs = validate(req, catalog)
    billing = billing or req.billing
    if billing not in ("autoscaled", "fixed"):
        raise PlanError("billing", billing, "autoscaled or fixed")
    priced = hardware_prices(req, catalog, prices)
    if own_price_source is not None and own_price_source != "entered":  # carried, not typed
        listed = gpu_price(catalog.hardware[req.hardware], None)
        own_price = priced[req.hardware][0]
        priced[req.hardware] = (own_price, price_label(catalog.hardware[req.hardware], listed)
                                if own_price == listed.usd_per_gpu_hour else own_price_source)
    names = list(req.methods or catalog.methods)
    if req.current_method != NO_SPEC and req.current_method not in names:
        names.append(req.current_method)
    own_price = priced[req.hardware][0]
    own_req = dataclasses.replace(req, usd_per_gpu_hour=own_price)
    own_ctx, own_pts = _search(own_req, catalog, segs, names)
    requested = [_option(own_req, own_ctx.hw.label, b) for b in fleet_bills(own_ctx, own_pts, billing=billing).values()]
    choices = [_gpu_choice(req, catalog, segs, names, name, priced[name], billing, requested)
               for name in catalog.hardware]
    if req.serving != "colocated":
        choices = [_with_disaggregated(c, req, catalog, segs, names, billing, own=(own_ctx, own_pts))
                   for c in choices]
    every = [o for c in choices for o in c.options]
    cheapest = min(every, key=option_order) if every else None
    mine = list(requested) if req.serving != "disaggregated" else []
    if req.serving != "colocated":
        c = next(c for c in choices if c.hardware == req.hardware)
        mine += [o for o in (c.disaggregated_no_speculation, c.disaggregated_speculation)
                 if o is not None and o.dtype == req.dtype]
    own = min(mine, key=option_order) if mine else None
    note = NOTE if req.compare_other_formats else LIKE_FOR_LIKE_NOTE.format(dtype=req.dtype)
    if req.serving != "colocated":
        note += " " + SERVING_NOTE[req.serving]
    own_hw = own.hardware if own is not None else None
    changes = tuple(line for c in choices if (line := format_change(c, req.dtype, own_hardware=own_hw)))
    return HardwareComparison(tuple(choices), cheapest, own, billing, req.monthly_output_tokens, note, req.dtype,
                              bool(req.compare_other_formats), req.serving, changes)


SERVING_NOTE = {
    "disaggregated": ("Disaggregated fleets (a prefill pool for the TTFT SLO, a decode pool for the TPOT SLO) are the "
                      "ones picked, as asked; the co-located fleets are shown beside them."),
    "best": ("Co-located and disaggregated fleets, with and without speculation: the cheapest that meets both SLOs is "
             "picked."),
}


def _with_disaggregated(c: HardwareChoice, req: PlanRequest, catalog: Catalog, segs, names, billing: str, *,
                        own: tuple) -> HardwareChoice:
    """GPU type c with its cheapest disaggregated fleets without and with speculation (module docstring), at every
    weight format compared; the request's own GPU type and format from plan()'s points (`own`: its context and
    points at the request's TP)."""
    hw = catalog.hardware[c.hardware]
    best: dict[bool, HardwareOption] = {}
    for dt in WEIGHT_DTYPES if req.compare_other_formats else (req.dtype,):
        found = None
        if (c.hardware, dt) == (req.hardware, req.dtype) and own[1]:
            ctx0, pts0 = own
            found = (make_context(dataclasses.replace(ctx0.req, billing=billing), catalog, segs), pts0)
        for tp in (t for t in TP_OPTIONS if t <= hw.max_tp) if found is None else ():
            r = dataclasses.replace(req, hardware=c.hardware, tp=tp, dtype=dt, usd_per_gpu_hour=c.usd_per_gpu_hour,
                                    billing=billing)
            ctx, pts = _search(r, catalog, segs, names)
            if pts:
                found = (ctx, pts)
                break
        if found is None:
            continue
        ctx, pts = found
        fleets = disaggregated(ctx, pts, role="best")
        base = next((fleets[p.method] for p in pts if p.method == NO_SPEC), None)
        if base is not None and base[0].feasible:
            _keep(best, _disagg_option(ctx, hw.label, dt, base[0], base[1]))
        spec = cheapest_disaggregated(ctx, [(fleets[p.method], p) for p in pts if p.method != NO_SPEC])
        if spec is not None:
            _keep(best, _disagg_option(ctx, hw.label, dt, *spec[0]))
    return dataclasses.replace(c, disaggregated_no_speculation=best.get(False),
                               disaggregated_speculation=best.get(True), serving=req.serving)


def _disagg_option(ctx, label: str, dtype: str, f, b) -> HardwareOption:
    pre, dec = f.pools
    return HardwareOption(hardware=ctx.req.hardware, hardware_label=label, tp=dec.tp, dtype=dtype, method=f.method,
                          method_label=f.label, k=f.k, peak_gpus=f.peak_gpus, usd_per_gpu_hour=ctx.price,
                          usd_per_month=b.usd_per_month, billing=b.billing, serving="disaggregated",
                          prefill_tp=pre.tp, prefill_gpus=pre.peak_gpus)


def _compute_floor(req: PlanRequest, catalog: Catalog, segs, hardware: str, dtype: str, price: float) -> float:
    """A month's bill no fleet of this GPU type and weight format goes below, whatever its TP and method: every output
    token's verifier GEMMs (2 x active parameters per token verified, and a step verifies at least the tokens it
    emits) and every prompt's prefill, at the peak FLOP/s times the compute efficiency (planner.physics.roofline: a step
    takes at least its GEMM time). Dense models only (a MoE step's routed tokens share experts); 0 otherwise."""
    if catalog.models[req.model].experts or req.attention_dp:
        return 0.0
    ctx = make_context(dataclasses.replace(req, hardware=hardware, tp=1, dtype=dtype, usd_per_gpu_hour=price),
                       catalog, segs)
    hours, _ = traffic_hours(ctx)
    hp = ctx.hw_params
    per_token_s = 2.0 * float(np.asarray(ctx.target.active_params)) / float(np.asarray(hp.peak_flops_s * hp.eta_flops))
    # GPU-seconds of work per second in each hour: the GPUs that hour keeps busy, paid hour by hour
    busy_gpus = [h.requests_per_s * (h.output_tokens * per_token_s + float(
        prefill_time_s(ctx.target, hp, prompt_tokens=h.prompt_tokens, tp=1,
                       cached_share=ctx.prefix_cache_share))) for h in hours]
    return float(monthly_bill_usd(busy_gpus, billing="autoscaled", usd_per_gpu_hour=price))


def _lowest_cpm(p: OperatingPoint) -> float:
    """The lowest full-load $/Mtok of the point's workloads (its own CPM for one workload)."""
    return min((s.usd_per_mtok for s in p.segments), default=p.usd_per_mtok)


def _gpu_choice(req: PlanRequest, catalog: Catalog, segs, names, name: str, priced: tuple[float, str], billing: str,
                requested: list[HardwareOption]) -> HardwareChoice:
    """One GPU type's cheapest fleet without and with speculation (module docstring: the bounds that skip work), and
    its cheapest at the request's own weight format."""
    hw, model = catalog.hardware[name], catalog.models[req.model]
    price, source = priced
    volume = req.monthly_output_tokens
    # a batch capped at the traffic's concurrency raises the full-load CPM above what the fleet (uncapped) pays
    cpm_bound = CPM_BOUND if req.batch_cap is None else 0.0
    best: dict[bool, HardwareOption] = {}
    own: dict[bool, HardwareOption] = {}  # at the request's weight format
    # each kept option's configuration's place in the floor order (-1: the request's own): at the same bill, the
    # earlier configuration stands, whatever order the configurations were sized in
    place: dict[tuple[int, bool], int] = {}

    def keep(o: HardwareOption, i: int) -> None:
        kind = o.method != NO_SPEC
        for d in (best, own) if o.dtype == req.dtype else (best,):
            if kind not in d or (o.usd_per_month, i) < (d[kind].usd_per_month, place[id(d), kind]):
                d[kind] = o
                place[id(d), kind] = i

    for o in requested if name == req.hardware else ():
        keep(o, -1)
    sized = 0
    fits_any = False

    def beaten(kind: bool, bound: float, dt: str) -> bool:
        """No fleet of this kind at this floor can beat the best found (nor, at the request's format, its best)."""
        return all(kind in b and b[kind].usd_per_month <= bound * (1.0 - 1e-9)
                   for b in ((best, own) if dt == req.dtype else (best,)))

    dtypes = WEIGHT_DTYPES if req.compare_other_formats else (req.dtype,)
    compute = {dt: _compute_floor(req, catalog, segs, name, dt, price) for dt in dtypes}
    # best first: from the lowest floor up; once the best of both kinds is at or below a floor, the rest cannot win
    configs = sorted((max(float(monthly_bill_usd([tp], billing="fixed", usd_per_gpu_hour=price)), compute[dt]), tp, dt)
                     for tp in TP_OPTIONS if tp <= hw.max_tp for dt in dtypes)
    # searched points wait here to be sized, cheapest bound first: (bound, config's place, point)
    pending: list[tuple[float, int, OperatingPoint]] = []
    searched: dict[int, tuple[PlanRequest, object]] = {}  # config's place -> (its request, its context)

    def size_below(limit: float) -> None:
        """Size the waiting points whose bound is below `limit`, lowest bound first, each with the other waiting
        points of its configuration that could still win (one fleet_bills call per configuration); a point whose
        bound the best of its kind has reached by then is dropped."""
        nonlocal sized
        while pending:
            pending[:] = [w for w in pending if not beaten(w[2].method != NO_SPEC, w[0], configs[w[1]][2])]
            if not pending:
                return
            low = min(pending, key=lambda w: (w[0], w[1]))
            if low[0] >= limit:
                return
            i = low[1]
            group = [w[2] for w in pending if w[1] == i]
            pending[:] = [w for w in pending if w[1] != i]
            r, ctx = searched[i]
            sized += 1
            for b in fleet_bills(ctx, group, billing=billing).values():
                keep(_option(r, hw.label, b), i)

    for i, (floor, tp, dt) in enumerate(configs):
        # a waiting point whose bound is below this floor may bring the best under it: sized before the floor test
        size_below(floor)
        if all(beaten(k, floor, d) for k in (False, True) for d in {c[2] for c in configs[i:]}):
            break
        if (name, tp, dt) == (req.hardware, req.tp, req.dtype):  # sized already (`requested`)
            fits_any = fits_any or _fits_weights(make_context(dataclasses.replace(req, usd_per_gpu_hour=price),
                                                              catalog, segs))
            continue
        r = dataclasses.replace(req, hardware=name, tp=tp, dtype=dt, usd_per_gpu_hour=price)
        # a kind already beaten at this floor is not searched (its points would not be sized)
        ctx, pts = _search(r, catalog, segs, names, tuple(k for k in (False, True) if not beaten(k, floor, dt)))
        fits_any = fits_any or (dt == req.dtype and _fits_weights(ctx))
        # a point's bill is at least its bound: the floor, and CPM_BOUND x its workloads' lowest full-load CPM x the
        # volume
        searched[i] = (r, ctx)
        pending += [(max(floor, cpm_bound * _lowest_cpm(p) * volume / TOKENS_PER_MTOK), i, p) for p in pts]
    size_below(float("inf"))
    skipped = len(configs) - sized - sum(1 for c in configs if (name, c[1], c[2]) == (req.hardware, req.tp, req.dtype))
    tps = f"TP up to {hw.max_tp}"
    own_note = "" if own else (
        f"cannot run {model.label} at {req.dtype}: its {req.dtype} weights do not fit in memory at any {tps}"
        if not fits_any else
        f"cannot serve this traffic at {req.dtype} under the {req.tpot_slo_ms:g} ms TPOT SLO at any {tps}")
    if best:
        note = ""
    elif req.compare_other_formats:
        note = (f"no {tps} and no weight format fits {model.label} in memory and meets the {req.tpot_slo_ms:g} ms "
                f"TPOT SLO on {hw.label}")
    else:
        note = own_note
    for kind, o in own.items():  # at the same bill (to the cent), the request's own weights: nothing to trade
        if kind in best and round(o.usd_per_month, 2) <= round(best[kind].usd_per_month, 2):
            best[kind] = o
    own_best = min(own.values(), key=option_order) if own else None
    return HardwareChoice(name, hw.label, price, source, best.get(False), best.get(True), sized, skipped, note,
                          own_best, own_note)


def format_change(c: HardwareChoice, dtype: str, *, own_hardware: str | None = None) -> str:
    """'H200 at fp8: cheaper weights, not only a cheaper GPU (...)' when GPU type c's cheapest fleet runs another weight
    format than `dtype` (the request's); 'cheaper weights on your own GPU type' on own_hardware; "" otherwise."""
    best = c.cheapest
    if best is None or best.dtype == dtype:
        return ""
    if c.own_format is not None and round(best.usd_per_month, 2) >= round(c.own_format.usd_per_month, 2):
        return ""
    head = (f"{c.label} at {best.dtype}: cheaper weights on your own GPU type" if c.hardware == own_hardware else
            f"{c.label} at {best.dtype}: cheaper weights, not only a cheaper GPU")
    if c.own_format is None:
        return f"{head} ({fmt_usd(best.usd_per_month)}/month; at your {dtype} weights it {c.own_format_note})"
    return (f"{head} ({fmt_usd(best.usd_per_month)}/month against {fmt_usd(c.own_format.usd_per_month)}/month at "
            f"your {dtype} weights, {c.own_format.short})")


def _keep(best: dict[bool, HardwareOption], o: HardwareOption) -> None:
    kind = o.method != NO_SPEC
    if kind not in best or o.usd_per_month < best[kind].usd_per_month:
        best[kind] = o


def hardware_sentence(cmp: HardwareComparison, req: PlanRequest, catalog: Catalog) -> str:
    """One sentence for the verdict when another GPU type serves this traffic for less ("" otherwise)."""
    c = cmp.cheaper_elsewhere
    if c is None:
        return ""
    own = cmp.requested
    hw = catalog.hardware[req.hardware]
    against = (f"against {fmt_usd(own.usd_per_month)}/month on {own.peak_gpus:,} x {hw.label}" if own is not None
               else f"where {req.tp} x {hw.label} ({req.dtype}) cannot serve it under the SLO")
    if c.dtype != req.dtype:
        changed = format_change(cmp.choice(c.hardware), req.dtype, own_hardware=req.hardware)
        return (f"A cheaper fleet for this traffic: {c.description} at ${c.usd_per_gpu_hour:.2f}/GPU-hour costs "
                f"{fmt_usd(c.usd_per_month)}/month billed {c.billing}, {against}. {changed}; its {c.dtype} weights "
                f"may cost quality against {req.dtype}, which the planner does not price.")
    return (f"A cheaper GPU for this traffic: {c.description} at ${c.usd_per_gpu_hour:.2f}/GPU-hour costs "
            f"{fmt_usd(c.usd_per_month)}/month billed {c.billing}, {against}.")
