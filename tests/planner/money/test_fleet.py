"""The fleet by hour: Little's law as a fixed point, the fewest replicas under the SLO and memory, the month."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from planner import fleet as F
from planner import plan as P
from planner.context import BASELINE, make_context, r5
from planner.search.grid import evaluate_at, evaluation_grid, max_batch


def test_littles_law_fixed_point_for_one_hour_by_hand():
    """TPOT(b) = 20 ms + 0.1 ms x b per replica, 40 requests/s of 100 output tokens, 10 ms of prefill each, SLO
    41 ms, memory for 1,000 sequences.
    One replica: prefill takes rho = 40 x 0.01 = 0.4 of its time; Little: b = 40 x 100 x TPOT(b) / 0.6, i.e.
    b = 6666.7 (0.02 + 0.0001 b) -> b = 400, where the TPOT seen is (0.02 + 0.04) / 0.6 = 100 ms > 41 ms.
    Two replicas: rho = 0.2, b = 2500 (0.02 + 0.0001 b) -> b = 50 / 0.75 = 66.7 sequences in flight each, TPOT
    seen (0.02 + 0.00667) / 0.8 = 33.3 ms <= 41 ms. So 2 replicas, ~66.7 sequences each, 33.3 ms."""
    b = np.arange(1, 1001, dtype=float)
    tpot = (0.02 + 0.0001 * b)[None, :]
    r, batch, seen, rho = F.replicas_for(requests_per_s=np.array([40.0]), output_tokens=np.array([100.0]),
                                         prefill_s=np.array([0.01]), tpot_s=tpot, max_batch=np.array([1000.0]),
                                         slo_s=0.041)
    assert r[0] == 2
    assert rho[0] == pytest.approx(0.2)
    assert batch[0] == pytest.approx(66.67, abs=0.15)  # the integer fixed point 67, read at its TPOT
    assert seen[0] * 1e3 == pytest.approx(33.33, abs=0.1)


def test_memory_and_prefill_limits_add_replicas():
    b = np.arange(1, 1001, dtype=float)
    tpot = (0.02 + 0.0001 * b)[None, :]
    common = dict(requests_per_s=np.array([40.0]), output_tokens=np.array([100.0]), tpot_s=tpot, slo_s=0.041)
    # memory for only 30 sequences per replica: 66.7 in flight on 2 replicas does not fit; 3 replicas hold ~35
    # each (still > 30); 4 replicas hold ~24
    r, batch, _, _ = F.replicas_for(prefill_s=np.array([0.01]), max_batch=np.array([30.0]), **common)
    assert r[0] == 4 and batch[0] <= 30
    # prefill alone beyond one replica's time: 40 x 0.03 = 1.2 -> at least 2 replicas
    r2, _, _, rho = F.replicas_for(prefill_s=np.array([0.03]), max_batch=np.array([1000.0]), **common)
    assert r2[0] >= 2 and rho[0] < 1


def _brute_force_replicas(lam, out, pre, tpot, mb, slo):
    for r in range(1, 10_000):
        lam_r, rho = lam / r, lam / r * pre
        if rho >= 1:
            continue
        for b in range(1, int(min(mb, tpot.size)) + 1):
            t = tpot[b - 1] / (1 - rho)
            if t > slo:
                break
            if lam_r * out * t <= b:
                return r
    return 0


def test_replicas_equal_a_brute_force_search_on_the_planners_own_tpot(catalog):
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", monthly_output_tokens=5e10,
                        daily_shape="business_hours")
    p = P.plan(req, catalog)
    base = p.fleet.config(P.NO_SPEC)
    ctx = make_context(req, catalog)
    h = base.hours[12]
    grid = evaluation_grid(k=r5([1], 1), tau=r5([1.0], 1), verify_tokens=r5([2], 1),
                           prompt_tokens=[h.prompt_tokens], output_tokens=[h.output_tokens])
    cands = [BASELINE]
    smp = ctx.mid_samples()
    mb = float(max_batch(ctx, cands, grid).max())
    res = evaluate_at(ctx, cands, smp, grid, r5(np.arange(1, mb + 1), 4))
    tpot = np.asarray(res.baseline_tpot_s).reshape(-1)
    from planner.physics.roofline import hw_params, target_net
    from planner.physics.serving import prefill_time_s

    pre_s = float(prefill_time_s(target_net(ctx.model), hw_params(ctx.hw, "bf16", ctx.eff),
                                 prompt_tokens=h.prompt_tokens))
    assert h.replicas == _brute_force_replicas(h.requests_per_s, h.output_tokens, pre_s, tpot, mb, 0.050)
    assert h.tpot_ms <= 50.0 + 1e-9


def test_month_of_the_fleet_and_the_peak(catalog):
    p = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=20,
                             segments=(P.TrafficSegment("code", "english", 1.0, 300, 600),),
                             monthly_output_tokens=5e10, daily_shape="business_hours"), catalog)
    for c in p.fleet.configs:
        gpus = [h.gpus for h in c.hours]
        assert c.peak_gpus == max(gpus) and all(g % 4 == 0 for g in gpus)
        assert c.gpu_hours_per_month_autoscaled == pytest.approx(sum(gpus) * F.DAYS_PER_MONTH)
        assert c.gpu_hours_per_month_fixed == pytest.approx(c.peak_gpus * 24 * F.DAYS_PER_MONTH)
        assert c.usd_per_month_autoscaled <= c.usd_per_month_fixed
        assert c.usd_per_month_fixed == pytest.approx(c.gpu_hours_per_month_fixed * p.usd_per_gpu_hour)
    # the arrivals integrate back to the monthly volume
    base = p.fleet.config(P.NO_SPEC)
    tokens = sum(h.requests_per_s * 3600 * 600 for h in base.hours) * F.DAYS_PER_MONTH
    assert tokens == pytest.approx(5e10, rel=1e-9)
    # speculation that cuts CPM here also cuts the GPUs needed at the peak
    best = p.fleet.config(p.best.method)
    assert best.peak_gpus <= base.peak_gpus


def test_fleet_in_the_cli_equals_plan(catalog):
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", monthly_output_tokens=3e10,
                        daily_shape="consumer_evening")
    p = P.plan(req, catalog)
    out = subprocess.run([sys.executable, "-m", "planner", "plan", "--model", "llama-3.1-8b", "--hardware",
                          "h100-sxm", "--monthly-output-tokens", "3e10", "--daily-shape", "consumer_evening",
                          "--no-levers"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    js = json.loads(out.stdout)["fleet"]
    for c in p.fleet.configs:
        jc = next(x for x in js["configs"] if x["method"] == c.method)
        assert jc["peak_gpus"] == c.peak_gpus
        assert jc["usd_per_month_autoscaled"] == pytest.approx(c.usd_per_month_autoscaled)
        assert [h["gpus"] for h in jc["hours"]] == [h.gpus for h in c.hours]


def test_bad_shape_is_refused(catalog):
    with pytest.raises(P.PlanError, match="daily_shape='weekly'"):
        P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", daily_shape="weekly"), catalog)
    assert math.isclose(F.daily_shape("business_hours").mean(), 1.0)


@pytest.mark.parametrize("rate", [0.05, 0.4, 3.0, 40.0])
def test_a_curve_cut_at_littles_bound_gives_the_same_fleet(rate):
    """replicas_for needs the TPOT curve only up to lambda * O * SLO (plan.fleet cuts it there for light loads):
    the answer equals the whole curve's, light to heavy load; a curve cut shorter is refused."""
    b = np.arange(1, 401, dtype=float)
    tpot = 0.012 + 4e-5 * b + 2e-7 * b ** 2  # rises with batch, TPOT / b falls
    lam = rate * np.array([0.5, 1.0, 2.0])
    out = np.array([300.0, 800.0, 500.0])
    pre = np.array([0.02, 0.05, 0.03])
    kw = dict(requests_per_s=lam, output_tokens=out, prefill_s=pre, max_batch=np.full(3, 400.0), slo_s=0.05)
    whole = F.replicas_for(tpot_s=np.tile(tpot, (3, 1)), **kw)
    cut = int(min(400, math.ceil(float((lam * out).max()) * 0.05) + 1))
    short = F.replicas_for(tpot_s=np.tile(tpot[:cut], (3, 1)), **kw)
    for a, c in zip(whole, short, strict=True):
        np.testing.assert_array_equal(a, c)
    if cut > 2:
        with pytest.raises(ValueError, match="need the curve"):
            F.replicas_for(tpot_s=np.tile(tpot[:cut - 2], (3, 1)), **kw)


def test_hours_that_share_a_curve_give_the_fleet_of_each_hour_on_its_own():
    """fleet_for_configs computes each distinct hour once (a daily shape repeats its rates; plan_fleet hands one TPOT
    curve per distinct lengths): the fleet equals the one from every hour's own curve, and each hour equals
    replicas_and_capacity on that hour alone."""
    b = np.arange(1, 301, dtype=float)
    curves = np.stack([np.stack([0.012 + 4e-5 * b, 0.015 + 9e-5 * b]),  # (config, distinct lengths, batch)
                       np.stack([0.010 + 6e-5 * b, 0.011 + 2e-4 * b])])
    mb = np.array([[300.0, 250.0], [280.0, 300.0]])
    cap = np.array([[np.nan, 0.9], [np.nan, np.nan]])  # a stated capacity past the curve for one (config, lengths)
    lengths = [(900.0, 350.0), (2500.0, 150.0)]
    pre_of = np.array([0.03, 0.08])
    of = np.array([h % 2 for h in range(24)])
    rates = 6.0 * F.daily_shape("business_hours")
    hours = tuple(F.HourLoad(h, float(rates[h]), *lengths[of[h]]) for h in range(24))
    common = dict(configs=[("none", "no speculation", 0), ("eagle3", "EAGLE-3", 3)], prefill_s=pre_of[of], hours=hours,
                  tp=4, usd_per_gpu_hour=2.5, slo_ms=30.0, shape_source="test")
    shared = F.fleet_for_configs(tpot_s=curves, max_batch=mb, capacity_requests_per_s=cap, curve_of_hour=of, **common)
    own = F.fleet_for_configs(tpot_s=curves[:, of], max_batch=mb[:, of], capacity_requests_per_s=cap[:, of], **common)
    assert repr(shared) == repr(own)
    assert len({h.replicas for h in shared.configs[1].hours}) > 1  # the day's load moves the fleet
    for c, plan in enumerate(shared.configs):
        for h, fh in enumerate(plan.hours):
            r, batch, seen, rho, one = F.replicas_and_capacity(
                requests_per_s=np.array([rates[h]]), output_tokens=np.array([lengths[of[h]][1]]),
                prefill_s=pre_of[of[h]:of[h] + 1], tpot_s=curves[c, of[h]][None, :], max_batch=mb[c, of[h]:of[h] + 1],
                slo_s=0.03, capacity=cap[c, of[h]:of[h] + 1])
            assert (fh.replicas, fh.batch, fh.prefill_share, fh.capacity_requests_per_s) == (
                r[0], batch[0], rho[0], one[0])
