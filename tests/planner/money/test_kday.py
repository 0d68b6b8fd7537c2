"""K per hour's batch (planner.money.kday): each hour of the fleet runs the K the deployment's schedule gives at its
batch, an hour at K = 0 pays the engine's switch overhead, and the deploy command prints the schedule the bill used."""

from __future__ import annotations

import dataclasses

import pytest

from planner.context import make_context
from planner.fleet import DAYS_PER_MONTH, HourLoad
from planner.money.kday import deploy_schedule, k_at_batch, scheduled_fleet, switching_overhead
from planner.money.sizing import plan_fleet
from planner.physics.deploy import k_schedule
from planner.physics.engines import SwitchingOverhead
from planner.plan import plan
from planner.request import NO_SPEC, PlanRequest, TrafficSegment, validate

NIGHT, PEAK = 30.0, 400.0  # requests/s: one replica at night, ten at the peak (mimo-7b on one H100 SXM)


def _day_request(night: float = NIGHT, peak: float = PEAK, **kw) -> PlanRequest:
    """09:00-18:00 at `peak` requests/s, the other hours at `night` (400 prompt, 300 output tokens)."""
    hours = tuple(HourLoad(h, peak if 9 <= h < 18 else night, 400.0, 300.0) for h in range(24))
    volume = sum(h.requests_per_s * h.output_tokens for h in hours) / 24 * DAYS_PER_MONTH * 24 * 3600
    return PlanRequest(model="mimo-7b", hardware="h100-sxm", tp=1, monthly_output_tokens=volume, hours=hours,
                       segments=(TrafficSegment("chat", "english", 1.0, 400, 300),), methods=("dflash",), **kw)


def _ctx(cat, req):
    return make_context(req, cat, validate(req, cat))


def _zero(engine: str = "vllm") -> SwitchingOverhead:
    return SwitchingOverhead(engine, (1.0,), (0.0,), True, "test: no overhead", "2026-12-04")


def test_vllm_switch_overhead_is_issue_49548s_line_in_concurrency(catalog):
    o = catalog.speculation_switching["vllm"]
    assert o.measured and o.date == "2026-08-24" and "49548" in o.source
    # by hand: 6.6 % at 2, 21.6 % at 189, linear between, held beyond
    assert o.fraction(2) == pytest.approx(0.066)
    assert o.fraction(189) == pytest.approx(0.216)
    assert o.fraction(95.5) == pytest.approx(0.066 + (95.5 - 2) / (189 - 2) * (0.216 - 0.066))
    assert o.fraction(1) == pytest.approx(0.066) and o.fraction(500) == pytest.approx(0.216)
    assert not catalog.speculation_switching["sglang"].measured  # an assumption, said so


def test_a_measured_overhead_replaces_the_stated_one(catalog):
    ctx = _ctx(catalog, _day_request())
    assert switching_overhead(ctx) is catalog.speculation_switching["vllm"]
    mine = _zero()
    assert switching_overhead(ctx, mine) is mine


def test_k_at_batch_reads_the_range_holding_the_batch():
    s = tuple(k_schedule([(1, 3), (50, 0), (200, 1)], max_batch=200))
    assert s == ((1, 49, 3), (50, 199, 0), (200, 200, 1))
    assert [k_at_batch(s, b) for b in (0.2, 1, 48.5, 49, 49.01, 199, 200, 900)] == [3, 3, 3, 3, 0, 0, 1, 1]


def _hand_schedule():
    return tuple(k_schedule([(1, 3), (150, 0)], max_batch=447))  # K=3 below batch 150, drafting off from 150


def test_peak_hours_at_k0_night_hours_at_k3_and_the_bill_by_hand(catalog):
    ctx = _ctx(catalog, _day_request())
    best = plan(ctx.req, catalog).best
    assert best is not None and best.method == "dflash"
    sched = _hand_schedule()
    fleet = plan_fleet(ctx, [best])
    day = scheduled_fleet(ctx, fleet, best, sched).config("dflash")
    ks = [h.k for h in day.hours]
    assert ks == [3] * 9 + [0] * 9 + [3] * 6
    for h in day.hours:  # each hour's K is the schedule's at its own batch
        assert h.k == k_at_batch(sched, h.batch) and h.feasible and h.tpot_ms <= ctx.req.tpot_slo_ms
    # the bill by hand: each hour's GPUs x $/GPU-hour, the day repeated over the month's days
    price = fleet.usd_per_gpu_hour
    by_hand = sum(h.gpus * price for h in day.hours) * DAYS_PER_MONTH
    assert day.usd_per_month_autoscaled == pytest.approx(by_hand, rel=1e-12)
    assert day.usd_per_month_fixed == pytest.approx(max(h.gpus for h in day.hours) * price * 24 * DAYS_PER_MONTH)
    assert day.peak_gpus == max(h.gpus for h in day.hours)


def test_k0_hours_cost_no_speculation_plus_the_switch_overhead(catalog):
    ctx = _ctx(catalog, _day_request())
    best = plan(ctx.req, catalog).best
    fleet = plan_fleet(ctx, [best])
    base = plan_fleet(ctx, [dataclasses.replace(best, method=NO_SPEC, k=0, acceptance_length=1.0)]).configs[0]
    free = scheduled_fleet(ctx, fleet, best, _hand_schedule(), measured=_zero()).config("dflash")
    stated = scheduled_fleet(ctx, fleet, best, _hand_schedule()).config("dflash")
    heavy = scheduled_fleet(ctx, fleet, best, _hand_schedule(), measured=SwitchingOverhead(
        "vllm", (1.0,), (0.6,), True, "test: 60 %", "2026-12-04")).config("dflash")
    peak = range(9, 18)
    # no overhead: a K=0 hour is the fleet without speculation, replica for replica, TPOT for TPOT
    for h in peak:
        assert free.hours[h].k == 0
        assert (free.hours[h].replicas, free.hours[h].tpot_ms) == (base.hours[h].replicas, base.hours[h].tpot_ms)
    # the overhead slows each K=0 hour: its TPOT rises, and more of it takes more replicas
    assert all(stated.hours[h].k == 0 and stated.hours[h].tpot_ms > free.hours[h].tpot_ms for h in peak)
    assert sum(heavy.hours[h].gpus for h in peak) > sum(free.hours[h].gpus for h in peak)
    # the night hours at K=3 pay no overhead
    assert [stated.hours[h].gpus for h in range(9)] == [free.hours[h].gpus for h in range(9)]


def test_one_k_schedule_leaves_the_fleet_as_it_was(catalog):
    ctx = _ctx(catalog, _day_request())
    best = plan(ctx.req, catalog).best
    fleet = plan_fleet(ctx, [best])
    assert scheduled_fleet(ctx, fleet, best, ((1, 447, best.k),)) is fleet
    assert scheduled_fleet(ctx, fleet, best, None) is fleet


def test_the_plans_best_fleet_runs_the_schedule_its_deploy_command_prints(catalog):
    req = _day_request(night=40.0, peak=60.0)
    p = plan(req, catalog)
    cfg = p.deploy["speculative_config"]
    printed = tuple(tuple(r) for r in cfg["num_speculative_tokens_per_batch_size"])
    assert printed == deploy_schedule(_ctx(catalog, req), p.best)
    ks = [h.k for h in p.best_fleet.hours]
    assert len(set(ks)) > 1  # the day switches K
    assert ks == [k_at_batch(printed, h.batch) for h in p.best_fleet.hours]
    # the plan's bill of the method, its headline fleet and the economics are one number
    by_hand = sum(h.gpus for h in p.best_fleet.hours) * p.usd_per_gpu_hour * DAYS_PER_MONTH
    assert p.best_fleet.usd_per_month == pytest.approx(by_hand, rel=1e-12)
    assert p.bill(p.best.method).usd_per_month == p.best_fleet.usd_per_month
    assert p.economics.new_bill_usd_per_month == p.best_fleet.usd_per_month
