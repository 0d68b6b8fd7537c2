"""The bill is the money number: every saving, payback and NPV of a plan comes from its fleets' bills (autoscaled or
fixed, as chosen), the effective CPM is bill / output tokens, and a speculation that changes latency but not the
bill says so."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from planner import plan as P
from planner.fleet import DAYS_PER_MONTH, HourLoad
from planner.money.bill import fleet_bill
from profiles.request import request_from_traffic
from profiles.traffic import parse_traffic

MIX = (P.TrafficSegment("chat", "english", 0.6, 900, 350), P.TrafficSegment("code", "english", 0.4, 2500, 180))


def _trace_request(catalog, **kw):
    """A traffic profile (one hour of chat, a request every 5 s), its volume typed, the fleet by hour from it."""
    rows = "".join(f"2026-11-02T10:{s // 60:02d}:{s % 60:02d}Z,chat,700,250\n" for s in range(0, 3600, 5))
    prof = parse_traffic("hour.csv", ("timestamp,workload,prompt_tokens,output_tokens\n" + rows).encode(), catalog)
    return request_from_traffic(prof, volume=2e11, volume_typed=True, volume_label="typed", tpot_slo_ms=40.0,
                                fleet=True, shape="business_hours", model="llama-3.1-8b", hardware="h100-sxm", **kw)


REQUESTS = [
    dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=30, monthly_output_tokens=5e11,
         daily_shape="business_hours"),
    dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=30, monthly_output_tokens=5e11,
         daily_shape="business_hours", billing="fixed"),
    dict(model="llama-3.1-8b", hardware="h100-sxm", monthly_output_tokens=1e11),  # default shape
    dict(model="llama-3.1-8b", hardware="h200", tpot_slo_ms=25, segments=MIX, monthly_output_tokens=3e11,
         daily_shape="consumer_evening", billing="fixed"),
    dict(model="qwen3-32b", hardware="h100-sxm", tp=2, monthly_output_tokens=2e10, current_method="eagle3"),
    dict(model="llama-3.1-8b", hardware="h100-sxm", tpot_slo_ms=40, monthly_output_tokens=1e9),
]


@pytest.mark.parametrize("i", range(len(REQUESTS) + 2))
def test_saving_is_the_reference_fleets_bill_minus_the_best_fleets_bill(catalog, i):
    if i < len(REQUESTS):
        req = P.PlanRequest(**REQUESTS[i])
    else:  # a traffic profile, autoscaled and fixed
        req = _trace_request(catalog, billing=("autoscaled", "fixed")[i - len(REQUESTS)])
    p = P.plan(req, catalog)
    e = p.economics
    assert p.fleet is not None and e.billing == req.billing
    assert p.reference is not None and p.best is not None
    ref, best = p.bill(p.reference.method), p.bill(p.best.method)
    cfg = p.fleet.config(p.reference.method)
    want = cfg.usd_per_month_fixed if req.billing == "fixed" else cfg.usd_per_month_autoscaled
    assert ref.usd_per_month == want and ref.billing == req.billing
    assert e.reference_bill_usd_per_month == ref.usd_per_month and e.new_bill_usd_per_month == best.usd_per_month
    assert e.monthly_saving_usd == pytest.approx(ref.usd_per_month - best.usd_per_month, rel=1e-12, abs=1e-9)
    # the effective CPM is the bill over the month's output tokens, beside the CPM at full load
    for b in p.bills:
        assert b.effective_usd_per_mtok == pytest.approx(b.usd_per_month / (req.monthly_output_tokens / 1e6))
    assert e.reference_effective_usd_per_mtok == ref.effective_usd_per_mtok
    assert e.reference_usd_per_mtok == p.reference.usd_per_mtok
    # a fleet costs at least its replicas kept full: the effective CPM is never below the full-load CPM by more
    # than the replica granularity can explain (it is above it once a replica is not full)
    assert ref.effective_usd_per_mtok >= p.reference.usd_per_mtok * 0.98
    # payback and NPV from that saving
    if e.monthly_saving_usd > 0:
        assert e.payback_months == pytest.approx(e.one_time_usd / e.monthly_saving_usd)
    else:
        assert math.isinf(e.payback_months) and p.recommendation is None
    # nothing infeasible is recommended or used as the reference
    assert p.reference.feasible and best.feasible and ref.feasible
    if p.recommendation is not None:
        assert e.npv_usd > 0 and e.payback_months <= e.horizon_months


def test_ten_billion_tokens_on_one_4xh100_replica_a_fixed_fleet_saves_nothing(catalog):
    """Llama-3.3-70B on 4 x H100 at $4.40/GPU-hour, chat, 50 ms TPOT SLO, 10B output tokens a month, flat day.
    By hand: 1e10 tokens / (30.4375 days x 86,400 s) = 3,802.6 output tokens/s every hour. One replica at its
    full-load batch b under the SLO serves b / TPOT seen tokens/s: b ~ 250 sequences at <= 50 ms is ~5,000
    tokens/s > 3,803, so one replica (4 GPUs) serves every hour without speculation, and with it no fewer than the
    minimum of one replica run. A fixed fleet therefore pays 4 GPUs x 24 h x 30.4375 days x $4.40 = $12,856.80 a
    month either way: the saving is $0, and the verdict says speculation changes latency, not the bill."""
    req = P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, usd_per_gpu_hour=4.40,
                        monthly_output_tokens=1e10, daily_shape="flat", billing="fixed")
    p = P.plan(req, catalog)
    tokens_per_s = 1e10 / (DAYS_PER_MONTH * 86400)
    assert tokens_per_s == pytest.approx(3802.6, abs=0.1)
    capacity = p.baseline.batch / (p.baseline.tpot_ms / 1e3)  # one replica at full load under the SLO
    assert capacity > tokens_per_s
    hand = 4 * 24 * 30.4375 * 4.40
    assert hand == pytest.approx(12856.80)
    assert p.bill(P.NO_SPEC).usd_per_month == pytest.approx(hand)
    assert p.bill(p.best.method).usd_per_month == pytest.approx(hand)
    assert p.bill(P.NO_SPEC).peak_gpus == p.bill(p.best.method).peak_gpus == 4
    assert p.economics.monthly_saving_usd == 0.0
    assert p.recommendation is None
    assert "changes latency, not the bill" in p.verdict
    # with the TPOT it buys: the best method's TPOT on the fleet, below no speculation's
    assert f"{p.economics.new_tpot_ms:.1f} ms TPOT instead of {p.economics.reference_tpot_ms:.1f} ms" in p.verdict
    assert p.economics.new_tpot_ms < p.economics.reference_tpot_ms
    assert p.economics.npv_usd < 0  # the setup is spent for nothing the bill shows


def test_fleet_bill_is_the_plans_bill(catalog):
    """planner.money.bill.fleet_bill (what the spend and hardware modules call) equals the bill plan() reports."""
    req = P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=30, monthly_output_tokens=5e11,
                        daily_shape="business_hours")
    p = P.plan(req, catalog)
    for method in (P.NO_SPEC, p.best.method):
        k = p.best.k if method != P.NO_SPEC else None
        for billing in ("autoscaled", "fixed"):
            b = fleet_bill(req, catalog, method=method, k=k, billing=billing)
            cfg = p.fleet.config(method)
            assert b.usd_per_month == pytest.approx(cfg.usd_per_month_fixed if billing == "fixed"
                                                    else cfg.usd_per_month_autoscaled)
            assert b.peak_gpus == cfg.peak_gpus and b.gpus_per_replica == 4


def test_the_fleet_is_sized_without_a_shape_and_the_default_is_stated(catalog):
    p = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), catalog)
    assert p.fleet is not None and "'flat' daily shape (no daily shape given" in p.fleet.shape_source
    assert any(a.what == "traffic by hour (fleet sizing)" and "flat" in a.value for a in p.assumptions)
    # a trace's hours win over any shape
    hours = tuple(HourLoad(h, 2.0 if 9 <= h < 18 else 0.2, 800.0, 300.0) for h in range(24))
    p2 = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", hours=hours, hours_source="trace"),
                catalog)
    assert [h.requests_per_s for h in p2.fleet.config(P.NO_SPEC).hours] == [h.requests_per_s for h in hours]


def test_full_load_cpm_is_the_fleets_replica(catalog):
    """One replica model: the fleet's busiest replica never runs a larger batch than the full-load search allows,
    and a replica kept full costs what the full-load CPM says."""
    req = P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=30, monthly_output_tokens=5e11,
                        daily_shape="flat", segments=(P.TrafficSegment("chat", "english", 1.0, 800, 400),))
    p = P.plan(req, catalog)
    base = p.fleet.config(P.NO_SPEC)
    # flat day at 5e11 tokens: many replicas, each within one sequence of the full-load batch
    for h in base.hours:
        assert h.batch <= p.baseline.batch + 1 and h.tpot_ms <= 30 + 1e-9
    full = p.baseline.batch / (p.baseline.tpot_ms / 1e3)  # tokens/s of one replica kept full
    hand_cpm = 4 * p.usd_per_gpu_hour * 1e6 / (3600 * full)
    assert p.baseline.usd_per_mtok == pytest.approx(hand_cpm, rel=1e-9)
    # the fleet's bill is within one replica of the volume at the full-load CPM
    at_full = p.baseline.usd_per_mtok * 5e11 / 1e6
    replica_month = 4 * 24 * DAYS_PER_MONTH * p.usd_per_gpu_hour
    assert at_full <= p.bill(P.NO_SPEC).usd_per_month <= at_full + replica_month


def test_billing_is_validated(catalog):
    with pytest.raises(P.PlanError, match="billing='monthly'"):
        P.plan(dataclasses.replace(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), billing="monthly"),
               catalog)
    with pytest.raises(P.PlanError, match="confidence=1.5"):
        P.plan(dataclasses.replace(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), confidence=1.5),
               catalog)


MC_REQ = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", monthly_output_tokens=1e11)


def test_monte_carlo_draws_the_price_only_when_asked_and_never_over_an_entered_one(catalog):
    from planner.uncertainty import sensitivity as S

    kw = dict(k=2, samples=60, seed=4)
    plain = S.monte_carlo(MC_REQ, catalog, "p_eagle", **kw)
    assert not plain.price_drawn
    ranged = S.monte_carlo(dataclasses.replace(MC_REQ, price_range=True), catalog, "p_eagle", **kw)
    assert ranged.price_drawn
    entered = dataclasses.replace(MC_REQ, price_range=True, usd_per_gpu_hour=2.5)
    for sample_price in (None, True):
        mc = S.monte_carlo(entered, catalog, "p_eagle", sample_price=sample_price, **kw)
        assert not mc.price_drawn
        # every bill is whole GPU-hours at the entered $2.50: GPUs per hour x 1 h x 30.4375 days x $2.50
        slots = mc.reference_bill_usd_per_month / (2.5 * DAYS_PER_MONTH)
        assert np.allclose(slots, np.round(slots), atol=1e-6)


def test_monte_carlo_saving_is_the_fleets_bills_and_its_middle_is_the_plans(catalog):
    from planner.uncertainty import sensitivity as S

    p = P.plan(MC_REQ, catalog)
    mc = S.monte_carlo(MC_REQ, catalog, p.best.method, k=p.best.k, samples=80, seed=2, sample_hardware=False)
    assert np.array_equal(mc.monthly_saving_usd, mc.reference_bill_usd_per_month - mc.method_bill_usd_per_month)
    # whole replicas every hour: each bill is a whole number of GPU-hour slots at the plan's price
    slots = mc.method_bill_usd_per_month / (p.usd_per_gpu_hour * DAYS_PER_MONTH)
    assert np.allclose(slots, np.round(slots), atol=1e-6) and slots.min() >= 24  # at least one GPU every hour
    # the plan's own bills lie within the draws' range (the plan is the middle of every range)
    assert mc.method_bill_usd_per_month.min() <= p.bill(p.best.method).usd_per_month
    assert p.bill(p.best.method).usd_per_month <= mc.method_bill_usd_per_month.max()
    # the plan states how sure: P(saving > 0) and P(payback within the horizon), from the same kind of draws
    e = p.economics
    assert e.p_saving_positive is not None and 0 <= e.p_payback_within_horizon <= e.p_saving_positive <= 1


def test_the_recommendation_requires_the_stated_confidence(catalog):
    """The same seeded draws, two confidence levels either side of the plan's own P(saving > 0): just under it the
    plan deploys and states P; just over it the plan says "calibrate first", with the command. (This scenario's P is
    0.63 with the speculation fit's held-out speedup error drawn, 0.91 without it.)"""
    prob = P.plan(MC_REQ, catalog).economics.p_saving_positive
    assert 0.5 < prob < 0.97  # an uncertain saving: both answers exist
    sure = P.plan(dataclasses.replace(MC_REQ, confidence=prob - 0.01), catalog)
    assert sure.recommendation is not None and sure.economics.p_saving_positive == prob
    assert f"P(saving > 0) = {prob * 100:.0f} %" in sure.verdict
    strict = P.plan(dataclasses.replace(MC_REQ, confidence=prob + 0.01), catalog)
    assert strict.recommendation is None
    assert strict.verdict.startswith("Calibrate first")
    assert "python -m calibration run --model llama-3.1-8b --workloads chat" in strict.verdict


def test_the_speedup_error_lowers_the_confidence(catalog):
    """The held-out speedup error of the fit (drawn per sample) widens the saving's spread: without it the same
    scenario is surer of a saving."""
    exact = dataclasses.replace(catalog, speculation_class_error={}, speculation_overall_error=None)
    assert P.plan(MC_REQ, exact).economics.p_saving_positive > P.plan(MC_REQ, catalog).economics.p_saving_positive


def test_deploy_never_with_a_negative_npv_or_a_payback_beyond_the_horizon(catalog):
    """A horizon shorter than the payback: the same saving (a few $k a month against a $5k-$10k setup, whichever
    method leads) no longer pays back."""
    base = P.plan(MC_REQ, catalog)
    horizon = 1
    assert base.economics.payback_months > horizon, "the payback fits one month: this test checks nothing"
    short = dataclasses.replace(base.costs, horizon_months=horizon)
    p = P.plan(dataclasses.replace(MC_REQ, costs=short), catalog)
    e = p.economics
    assert e.monthly_saving_usd == pytest.approx(base.economics.monthly_saving_usd)
    assert e.payback_months > horizon and e.npv_usd < 0
    assert p.recommendation is None and p.verdict.startswith("Stay with")


@pytest.mark.parametrize("volume", [1e9, 1e10, 1e11])
@pytest.mark.parametrize("model, tp", [("llama-3.3-70b", 4), ("llama-3.1-8b", 1)])
def test_the_fleets_replica_is_the_searchs_replica_at_any_load(catalog, volume, model, tp):
    """One model of a replica: the fleet's capacity per replica (light load or heavy) is the arrival rate that keeps
    the CPM search's replica full at its batch and TPOT seen, so the full-load CPM is that replica's cost per token
    and the fleet needs ceil(arrivals / capacity) replicas."""
    seg = P.TrafficSegment("chat", "english", 1.0, 800, 400)
    p = P.plan(P.PlanRequest(model=model, hardware="h100-sxm", tp=tp, segments=(seg,), monthly_output_tokens=volume),
               catalog)
    for pt in (p.baseline, *[m for m in p.methods if m.feasible]):
        cfg = p.fleet.config(pt.method)
        full = pt.batch / (pt.tpot_ms / 1e3) / 400  # requests/s of one replica kept full (Little's law)
        for h in cfg.hours:
            # an hour the deployment's K schedule runs at another K (planner.money.kday) has that K's replica
            cap = h.capacity_requests_per_s
            assert h.replicas == max(1, math.ceil(h.requests_per_s / cap - 1e-9))
            if h.k == pt.k:
                assert cap == pytest.approx(full, rel=1e-9)
        cpm = tp * p.usd_per_gpu_hour * 1e6 / (3600 * full * 400)
        assert pt.usd_per_mtok == pytest.approx(cpm, rel=1e-9)


def test_tornado_bars_carry_the_fleets_bill_saving(catalog):
    """Each tornado bar also gives the monthly saving of the method's fleet bill against no speculation's; at the
    middle of every range it is the plan's own saving (no speculation today, the best method)."""
    from planner.uncertainty import sensitivity as S

    req = P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=30, monthly_output_tokens=5e11,
                        daily_shape="business_hours")
    p = P.plan(req, catalog)
    bars = {b.driver: b for b in S.tornado(req, catalog, p.best.method)}
    acc = bars["Acceptance (method's alpha range)"]
    assert acc.mid_saving_usd == pytest.approx(p.economics.monthly_saving_usd)
    # more acceptance never costs more GPUs: the saving grows (or stays) from the low to the high end
    assert acc.low_saving_usd <= acc.mid_saving_usd <= acc.high_saving_usd
    assert acc.saving_swing_usd == pytest.approx(acc.high_saving_usd - acc.low_saving_usd)
    # a looser SLO (60 ms) lets every replica run a larger batch: the fleets and their saving are re-sized
    assert np.isfinite(bars["TPOT SLO"].high_saving_usd)


def test_an_entered_price_is_entered_whatever_its_value(catalog):
    """The price rule in one place: the price the user typed, the list midpoint included, is an entered price; only
    no price at all falls back to the list midpoint."""
    from planner.price import GpuPrice, gpu_price

    hw = catalog.hardware["h100-sxm"]
    mid = hw.usd_per_gpu_hour_mid
    assert gpu_price(hw, None) == GpuPrice(mid, entered=False)
    assert gpu_price(hw, mid) == GpuPrice(mid, entered=True)
    assert gpu_price(hw, 1.25) == GpuPrice(1.25, entered=True)
    typed = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", usd_per_gpu_hour=mid), catalog)
    listed = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), catalog)
    typed_src, listed_src = (next(a.source for a in p.assumptions if a.what == "$/GPU-hour") for p in (typed, listed))
    assert typed_src == "entered by the user" and listed_src == hw.price.source
    assert typed.usd_per_gpu_hour == listed.usd_per_gpu_hour == mid


def test_the_month_of_gpu_hours_is_the_mean_or_the_peak_over_a_day():
    from planner.fleet import gpu_hours_per_month, monthly_bill_usd

    gpus = np.array([[8, 16, 8, 0], [4, 4, 4, 4]])  # two fleets, a day of four 6-hour slots
    assert gpu_hours_per_month(gpus, billing="autoscaled") == pytest.approx([8 * 24 * DAYS_PER_MONTH,
                                                                             4 * 24 * DAYS_PER_MONTH])
    assert gpu_hours_per_month(gpus, billing="fixed") == pytest.approx([16 * 24 * DAYS_PER_MONTH,
                                                                        4 * 24 * DAYS_PER_MONTH])
    assert monthly_bill_usd(gpus, billing="fixed", usd_per_gpu_hour=2.5) == pytest.approx(
        [16 * 24 * DAYS_PER_MONTH * 2.5, 4 * 24 * DAYS_PER_MONTH * 2.5])
