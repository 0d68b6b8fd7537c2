"""Spend as an input (planner.money.spend) and the cheapest fleet per GPU type (planner.decision.hardware_choice)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from planner import plan as P
from planner.decision import hardware_choice
from planner.decision.hardware_choice import compare_hardware
from planner.fleet import DAYS_PER_MONTH
from planner.money.spend import volume_for_spend
from planner.request import NO_SPEC, TP_OPTIONS, PlanError
from planner.types import WEIGHT_DTYPES

HOURS_A_MONTH = 24 * DAYS_PER_MONTH  # 730.5


def spend_request(**kw) -> P.PlanRequest:
    base = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, usd_per_gpu_hour=4.0, daily_shape="business_hours",
                spend_usd_per_month=100_000.0, billing="fixed")
    return P.PlanRequest(**{**base, **kw})


def resized_bill(req: P.PlanRequest, volume: float, catalog, billing: str) -> tuple[float, int]:
    """(bill, peak GPUs) of no speculation's fleet at `volume`, sized by plan() (the plan's own fleet functions)."""
    p = P.plan(dataclasses.replace(req, spend_usd_per_month=None, spend_gpus=None, monthly_output_tokens=volume),
               catalog)
    c = p.fleet.config(NO_SPEC)
    return (c.usd_per_month_fixed if billing == "fixed" else c.usd_per_month_autoscaled), c.peak_gpus


def test_a_fixed_spend_buys_whole_replicas_by_hand(catalog):
    # One replica is 4 H100 at $4.00/GPU-hour all month: 4 x 730.5 h x $4 = $11,688. $100,000 buys
    # floor(100,000 / 11,688) = 8 replicas (32 GPUs at the peak), billed $93,504; the $6,496 left buys no replica.
    sv = volume_for_spend(spend_request(), catalog)
    assert sv.replica_usd_per_month == pytest.approx(11_688.0)
    assert sv.peak_gpus == 32 and sv.bill_usd_per_month == pytest.approx(93_504.0)
    # sized back with the fleet functions, the derived volume costs the spend within one replica's month ...
    bill, peak = resized_bill(spend_request(), sv.monthly_output_tokens, catalog, "fixed")
    assert peak == 32 and bill == pytest.approx(93_504.0)
    assert 0 <= 100_000.0 - bill < 11_688.0
    # ... and it is the most that spend buys: 0.1 % more traffic needs a ninth replica
    more, peak_more = resized_bill(spend_request(), sv.monthly_output_tokens * 1.001, catalog, "fixed")
    assert peak_more == 36 and more > 100_000.0


def test_an_autoscaled_spend_is_met_within_one_replica_month(catalog):
    # Autoscaled, the bill steps by one replica for one hour a day (4 x 30.4375 h x $4 = $487) per hour that gains a
    # replica; a small step in volume adds at most one replica to each hour, so the spend left over is below one
    # replica all month ($11,688).
    req = spend_request(billing="autoscaled")
    sv = volume_for_spend(req, catalog)
    bill, _ = resized_bill(req, sv.monthly_output_tokens, catalog, "autoscaled")
    assert bill == pytest.approx(sv.bill_usd_per_month)
    assert 0 <= 100_000.0 - bill < 11_688.0
    more, _ = resized_bill(req, sv.monthly_output_tokens * 1.001, catalog, "autoscaled")
    assert more > 100_000.0


def test_a_stated_gpu_count_on_a_fixed_fleet_implies_the_price(catalog):
    # $100,000 over 32 GPUs all month: 100,000 / (32 x 730.5) = $4.2779/GPU-hour, the whole spend billed
    req = spend_request(usd_per_gpu_hour=None, spend_gpus=32)
    sv = volume_for_spend(req, catalog)
    assert sv.usd_per_gpu_hour == pytest.approx(100_000.0 / (32 * HOURS_A_MONTH))
    assert sv.peak_gpus == 32 and sv.bill_usd_per_month == pytest.approx(100_000.0)
    assert "implied by the spend" in sv.price_source


def test_the_plan_answers_for_the_spend(catalog):
    req = spend_request()
    sv = volume_for_spend(req, catalog)
    p = P.plan(req, catalog)
    assert p.spend == sv
    assert p.economics.monthly_output_tokens == pytest.approx(sv.monthly_output_tokens)
    assert p.request.volume_source.startswith("derived from a spend of $100,000/month")
    assert p.fleet.config(NO_SPEC).usd_per_month_fixed == pytest.approx(sv.bill_usd_per_month)


@pytest.mark.parametrize(("change", "field"), [
    ({"spend_usd_per_month": -5.0}, "spend_usd_per_month"),
    ({"spend_usd_per_month": float("nan")}, "spend_usd_per_month"),
    ({"spend_usd_per_month": None, "spend_gpus": 8}, "spend_gpus"),
    ({"spend_gpus": 2}, "spend_gpus"),  # fewer than one replica of TP 4
    ({"billing": "monthly"}, "billing"),
    ({"spend_usd_per_month": 5_000.0}, "spend_usd_per_month"),  # below one replica's month ($11,688)
    ({"hardware_prices": (("h200", 0.0),)}, "hardware_prices[h200]"),
])
def test_bad_spend_values_are_refused_naming_the_field(catalog, change, field):
    with pytest.raises(PlanError) as exc:
        P.plan(spend_request(**change), catalog)
    assert exc.value.field == field
    assert "is not allowed" in str(exc.value)


def test_an_unknown_gpu_in_the_prices_is_refused(catalog):
    with pytest.raises(KeyError, match="h300"):
        P.plan(spend_request(spend_usd_per_month=None, hardware_prices=(("h300", 2.0),)), catalog)


def cmp_request(**kw) -> P.PlanRequest:
    base = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, daily_shape="business_hours",
                monthly_output_tokens=1e10)
    return P.PlanRequest(**{**base, **kw})


MIX = (P.TrafficSegment("chat", "english", 0.5, 900.0, 350.0), P.TrafficSegment("code", "mandarin", 0.3, 2500.0, 150.0),
       P.TrafficSegment("rag_summarization", "english", 0.2, 12000.0, 400.0))


@pytest.mark.parametrize(("hardware", "volume", "mix", "cap"), [
    ("h100-sxm", 1e10, (), None), ("l40s", 1e10, (), None), ("b200", 5e11, (), None), ("h200", 1e11, MIX, 60.0),
    ("mi300x", 1e11, MIX, None)])
def test_the_cheapest_fleet_per_gpu_equals_a_brute_force_over_tps_and_weights(catalog, hardware, volume, mix, cap):
    # the comparison skips configurations by bounds (one replica every hour; the full-load CPM x volume): the
    # cheapest it finds must be the cheapest of every TP and weight format sized by plan(), for one workload and for
    # a mix with a concurrency cap (which the CPM search applies and the fleet does not); every weight format asked for
    kw = dict(monthly_output_tokens=volume, segments=mix, batch_cap=cap)
    cmp = compare_hardware(cmp_request(compare_other_formats=True, **kw), catalog)
    hw = catalog.hardware[hardware]
    best = {False: float("inf"), True: float("inf")}
    for tp in (t for t in TP_OPTIONS if t <= hw.max_tp):
        for dt in WEIGHT_DTYPES:
            try:
                p = P.plan(cmp_request(hardware=hardware, tp=tp, dtype=dt, usd_per_gpu_hour=hw.usd_per_gpu_hour_mid,
                                       **kw), catalog)
            except PlanError:
                continue
            for c in (p.fleet.configs if p.fleet is not None else ()):
                if c.feasible:
                    kind = c.method != NO_SPEC
                    best[kind] = min(best[kind], c.usd_per_month_autoscaled)
    ch = cmp.choice(hardware)
    assert ch.no_speculation.usd_per_month == pytest.approx(best[False])
    assert ch.speculation.usd_per_month == pytest.approx(best[True])


# a chatty mix with a rare long-prompt workload: the blended full-load CPM is no lower bound of its fleet's bill (the
# fleet measured at 0.62 x it on other GPUs); the lowest of its workloads' CPMs is
CHAT_AND_RAG = (P.TrafficSegment("chat", "english", 0.9, 300.0, 1200.0),
                P.TrafficSegment("rag_summarization", "english", 0.1, 30000.0, 100.0))


@pytest.mark.parametrize(("model", "hardware", "tp", "mix", "billing"), [
    ("qwen3-30b-a3b", "h200", 1, CHAT_AND_RAG, "autoscaled"), ("llama-3.3-70b", "h100-sxm", 4, MIX, "fixed"),
    ("llama-3.3-70b", "h100-sxm", 4, (), "autoscaled")])
def test_the_bounds_that_skip_work_change_no_answer(catalog, monkeypatch, model, hardware, tp, mix, billing):
    # every GPU type's cheapest fleet without and with speculation, and the configuration it runs, with the
    # comparison's bounds (searches stopped on the first batch grid, points not sized) and without any
    req = P.PlanRequest(model=model, hardware=hardware, tp=tp, monthly_output_tokens=1e11, segments=mix,
                        billing=billing, daily_shape="business_hours")

    def answer(cmp):
        return {(c.hardware, kind): None if o is None else (round(o.usd_per_month, 2), o.tp, o.method, o.k)
                for c in cmp.choices for kind, o in (("none", c.no_speculation), ("spec", c.speculation))}

    bounded = compare_hardware(req, catalog)
    monkeypatch.setattr(hardware_choice, "CPM_BOUND", 0.0)
    exhaustive = compare_hardware(req, catalog)
    assert answer(bounded) == answer(exhaustive)
    if not mix:  # one workload: its own CPM bounds the bill closely, and configurations go unsized
        assert sum(c.configs_sized for c in bounded.choices) < sum(c.configs_sized for c in exhaustive.choices)


def test_prices_scale_the_bills_and_the_verdict_names_a_cheaper_gpu(catalog):
    req = cmp_request(compare_hardware=True)
    p = P.plan(req, catalog)
    cmp = p.hardware_choice
    # the plan's own configuration is its fleet's cheapest bill
    own = min(c.usd_per_month_autoscaled for c in p.fleet.configs if c.feasible)
    assert cmp.requested.usd_per_month == pytest.approx(own)
    other = cmp.cheaper_elsewhere
    assert other is not None and other.hardware != "h100-sxm"
    assert "A cheaper GPU for this traffic" in p.verdict and other.hardware_label in p.verdict
    # a bill is GPU-hours x price: twice the price, twice every bill on that GPU type (the fleet is the same)
    h200 = cmp.choice("h200")
    twice = compare_hardware(req, catalog, prices={"h200": 2 * h200.usd_per_gpu_hour}).choice("h200")
    assert twice.no_speculation.usd_per_month == pytest.approx(2 * h200.no_speculation.usd_per_month)
    assert twice.price_source == "entered"
    # every other GPU at $1000/GPU-hour: nothing is cheaper than the plan's own, and the verdict says nothing more
    dear = tuple((n, 1000.0) for n in catalog.hardware if n != "h100-sxm")
    p2 = P.plan(dataclasses.replace(req, hardware_prices=dear), catalog)
    assert p2.hardware_choice.cheaper_elsewhere is None
    assert "cheaper GPU" not in p2.verdict


def run_cli(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "planner", "plan", "--model", "llama-3.3-70b", "--tp", "4",
                          "--no-levers", *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_cli_spend_and_compare_hardware(catalog):
    js = run_cli("--hardware", "h100-sxm", "--spend-usd-per-month", "100000", "--gpus", "32", "--billing", "fixed",
                 "--usd-per-gpu-hour", "4", "--daily-shape", "business_hours", "--compare-hardware",
                 "--gpu-price", "h200=3.1")
    sv = volume_for_spend(spend_request(spend_gpus=32), catalog)
    assert js["volume_source"].startswith("derived from a spend of $100,000/month")
    assert js["economics"]["monthly_output_tokens"] == pytest.approx(sv.monthly_output_tokens)
    assert js["spend"]["peak_gpus"] == 32
    choices = js["hardware_comparison"]["choices"]
    assert [c["hardware"] for c in choices] == list(catalog.hardware)
    assert next(c for c in choices if c["hardware"] == "h200")["usd_per_gpu_hour"] == pytest.approx(3.1)


def test_cli_refuses_gpus_without_a_spend():
    out = subprocess.run([sys.executable, "-m", "planner", "plan", "--model", "llama-3.3-70b", "--hardware",
                          "h100-sxm", "--tp", "4", "--gpus", "32"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "spend_gpus=32 is not allowed" in out.stderr


def test_a_fleet_whose_memory_holds_more_than_the_search_cap_is_sized(catalog):
    # 8 x H200 in fp8 hold more than MAX_BATCH sequences of this chat traffic and its busiest hours need them all: the
    # fleet caps the batch where the search does (it used to refuse the TPOT curve as too short)
    p = P.plan(cmp_request(hardware="h200", tp=8, dtype="fp8", monthly_output_tokens=5e11), catalog)
    base = p.fleet.config(NO_SPEC)
    assert base.feasible and max(h.batch for h in base.hours) <= P.MAX_BATCH


def test_4bit_weights_that_do_not_fit_say_so(catalog):
    p = P.plan(cmp_request(hardware="l40s", tp=1, dtype="nvfp4"), catalog)
    assert not p.baseline.fits_memory and "does not fit" in p.verdict
