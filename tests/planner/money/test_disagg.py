"""Disaggregated prefill/decode fleets (planner.money.disagg): a prefill pool sized for the TTFT SLO, a decode pool for
the TPOT SLO, each at its own TP, the bill the sum of both; asked for only, speculation on the decode pool (and the
draft's prefill on the prefill pool), "best" the cheaper of co-located and disaggregated."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from planner import plan as P
from planner.context import BASELINE, make_context, r5
from planner.fleet import DAYS_PER_MONTH
from planner.search.grid import evaluate_at, evaluation_grid

LAMBDA = 100.0  # requests/s every hour
ONE_K = (P.TrafficSegment("chat", "english", 1.0, 1000, 1000),)


def _req(**kw) -> P.PlanRequest:
    """1k in / 1k out, 100 requests/s all day (flat), Llama-3.1-8B on H100 SXM, TPOT 20 ms, TTFT 200 ms."""
    base = dict(model="llama-3.1-8b", hardware="h100-sxm", tpot_slo_ms=20.0, ttft_slo_ms=200.0, segments=ONE_K,
                monthly_output_tokens=LAMBDA * 1000 * 86400 * DAYS_PER_MONTH, serving="disaggregated",
                methods=("eagle3",))
    return P.PlanRequest(**{**base, **kw})


def _decode_tpot_ms(catalog, tp: int, batch: int) -> float:
    """The step model's decode TPOT without speculation at `batch` on `tp` GPUs (1k prompt, 1k output)."""
    ctx = make_context(_req(), catalog, tp=tp)
    g = evaluation_grid(k=r5([1.0], 1), tau=r5([1.0], 1), verify_tokens=r5([2.0], 1), prompt_tokens=[1000.0],
                        output_tokens=[1000.0])
    r = evaluate_at(ctx, [BASELINE], ctx.mid_samples(), g, r5([float(batch)], 4), with_memory=False)
    return float(np.asarray(r.baseline_tpot_s).reshape(-1)[0]) * 1e3


def test_hand_computed_disaggregated_fleet_for_a_1k_in_1k_out_trace(catalog):
    """Today's fleet (no speculation) served disaggregated, by hand.

    Prefill pool. Llama-3.1-8B: 7.504664e9 active parameters, attention dim 131072; H100 SXM bf16 989 TFLOP/s at
    eta_flops 0.86526 (hardware.yaml), so one 1000-token prompt on TP GPUs takes
        S = 1000 (2 x 7.504664e9 + 2 x 131072 x 1000) / (989e12 x 0.86526 x TP) = 17.846 ms / TP.
    KV: 131072 B per token (32 layers x 8 KV heads x 128 x 2 x 2 B), x = 1000 x 131072 / 450e9 = 0.2913 ms.
    The engine's front-end time t_front = 20.71 ms (planner.physics.ttft.DEFAULT_OVERHEAD_S) is in every TTFT.
    TTFT SLO 200 ms, M/M/1 (cv^2 = 1, a = S): u_max = L / (S + L), L = 200 - S - x - t_front.
        TP 1: L = 161.15 ms, u_max = 0.90030, one replica 50.45 req/s -> ceil(100 / 50.45) = 2 replicas, 2 GPUs.
        TP 2: S = 8.923 ms, u_max = 0.95 and more, over 100 req/s -> 1 replica, 2 GPUs (a tie: the smaller TP, 1).
        TP 4: 1 replica, 4 GPUs.
    At 2 replicas each gets 50 req/s: u = 0.8923, W = u S / (1 - u) = 147.85 ms, TTFT = 147.85 + 17.85 + 0.29
    + 20.71 = 186.69 ms (no decode shares a prefill replica's steps: no step boundary to wait for).
    Decode pool (no prefill interference: TPOT seen = decode TPOT t(b), from the step model): the largest batch
    with t(b) <= 20 ms and within memory is b_lim = 171 on TP 1 (t = 19.9933 ms; t(172) = 20.0744 ms; memory 205),
    one replica serves b_lim / (O t) = 171 / (1000 x 0.0199933) = 8.553 req/s -> ceil(100 / 8.553) = 12 replicas,
    12 GPUs. TP 2: b_lim = 367 (t = 19.954 ms), 18.39 req/s -> 6 replicas, 12 GPUs; TP 4: b_lim = 686
    (t = 19.992 ms), 34.31 req/s -> 3 replicas, 12 GPUs; TP 8: 59.64 req/s -> 2 replicas, 16 GPUs. Ties: TP 1.
    Bill (autoscaled = fixed, flat hours): (2 + 12) GPUs x 24 h x 30.4375 days = 10227 GPU-hours x $4.40
    (the H100 SXM list midpoint) = $44,998.80 a month.
    """
    for tp, b, t_ms in ((1, 171, 19.9933), (2, 367, 19.9538), (4, 686, 19.9918)):  # the step model's numbers read
        assert _decode_tpot_ms(catalog, tp, b) == pytest.approx(t_ms, abs=1e-3)
        assert _decode_tpot_ms(catalog, tp, b + 1) > 20.0
    p = P.plan(_req(), catalog)
    f = p.reference_fleet
    assert f.serving == "disaggregated" and f.method == P.NO_SPEC
    pre, dec = f.pools
    s = 1000 * (2 * 7.504664e9 + 2 * 131072 * 1000) / (989e12 * 0.86526)
    x = 1000 * 131072 / 450e9
    front = 0.02071
    room = 0.2 - s - x - front
    cap = room / (s + room) / s
    assert (pre.role, pre.tp, pre.peak_gpus) == ("prefill", 1, 2)
    assert pre.hours[0].capacity_requests_per_s == pytest.approx(cap, rel=1e-5)
    assert cap == pytest.approx(50.45, abs=0.01)
    u = 50.0 * s
    assert pre.hours[0].ttft_ms == pytest.approx((u * s / (1 - u) + s + x + front) * 1e3, rel=1e-5)
    assert pre.hours[0].ttft_ms == pytest.approx(186.69, abs=0.01)
    assert pre.kv_transfer_ms == pytest.approx(0.29127, abs=1e-5)
    assert (dec.role, dec.tp, dec.peak_gpus) == ("decode", 1, 12)
    assert dec.hours[0].capacity_requests_per_s == pytest.approx(171 / (1000 * _decode_tpot_ms(catalog, 1, 171) / 1e3))
    hours = 14 * 24 * DAYS_PER_MONTH
    assert f.gpu_hours_per_month == pytest.approx(hours) == pytest.approx(10227.0)
    assert f.usd_per_month == pytest.approx(hours * 4.40) == pytest.approx(44998.80)
    assert pre.usd_per_month + dec.usd_per_month == pytest.approx(f.usd_per_month)
    assert f.ttft_ms == pytest.approx(pre.hours[0].ttft_ms) and f.tpot_ms <= 20.0
    assert p.economics.reference_bill_usd_per_month == pytest.approx(44998.80)


def test_disaggregation_never_changes_a_colocated_plan_when_not_asked(catalog):
    fields = _req().flat()
    fields.pop("serving")
    fields["methods"] = None
    req = P.PlanRequest(**{**fields, "segments": ONE_K})  # serving not stated: co-located
    assert req.serving == "colocated"
    a = P.plan(req, catalog)
    for f in (a.reference_fleet, a.best_fleet):
        assert f.serving == "colocated" and f.pools == ()
    # the headline is the co-located fleet's bill, as before the option existed
    assert a.best_fleet.usd_per_month == pytest.approx(a.bill(a.best.method).usd_per_month)
    assert a.economics.new_bill_usd_per_month == pytest.approx(a.best_fleet.usd_per_month)
    assert a.deploy is not None and a.fleet is not None
    # asking for disaggregation here does change it (so the check above could fail)
    d = P.plan(dataclasses.replace(req, serving="disaggregated"), catalog)
    assert d.reference_fleet.usd_per_month != pytest.approx(a.reference_fleet.usd_per_month)


def test_speculation_changes_the_decode_pool_and_the_prefill_pool_only_by_the_draft(catalog):
    from planner.money.disagg import decode_pools, prefill_pools

    p = P.plan(_req(methods=("eagle3", "ngram")), catalog)
    ctx = make_context(p.request, catalog)
    base, eagle, ngram = p.baseline, p.method("eagle3"), p.method("ngram")
    pre_base, pre_eagle, pre_ngram = (prefill_pools(ctx, q) for q in (base, eagle, ngram))
    # n-gram lookups prefill nothing and hold no KV: the prefill pool is no speculation's at every TP
    assert pre_ngram == pre_base
    # EAGLE-3's head prefills the prompt too and its KV travels: a slower, costlier prefill pool, never cheaper
    for a, b in zip(pre_base, pre_eagle, strict=True):
        assert b.kv_transfer_ms > a.kv_transfer_ms
        assert b.hours[0].capacity_requests_per_s < a.hours[0].capacity_requests_per_s
        assert b.gpu_hours_per_month >= a.gpu_hours_per_month
    dec = decode_pools(ctx, [base, eagle])
    # the decode pool with EAGLE-3 needs fewer GPUs (more tokens per step under the same TPOT SLO)
    assert min(q.gpu_hours_per_month for q in dec["eagle3"]) < min(q.gpu_hours_per_month for q in dec[P.NO_SPEC])
    best = p.best_fleet
    assert best.serving == "disaggregated" and best.method in ("eagle3", "ngram")


def test_best_serving_picks_the_cheaper_of_colocated_and_disaggregated(catalog):
    colo = P.plan(_req(serving="colocated"), catalog)
    dis = P.plan(_req(serving="disaggregated"), catalog)
    best = P.plan(_req(serving="best"), catalog)
    for role in ("reference_fleet", "best_fleet"):
        cheaper = min(getattr(colo, role), getattr(dis, role),
                      key=lambda f: (f.usd_per_month, f.serving != "colocated"))
        got = getattr(best, role)
        assert got.usd_per_month == pytest.approx(cheaper.usd_per_month)
        assert got.serving == cheaper.serving
    # here disaggregation is the cheaper today (14 GPUs against the co-located fleet's)
    assert colo.reference_fleet.usd_per_month > dis.reference_fleet.usd_per_month
    assert best.reference_fleet.serving == "disaggregated"
    assert best.economics.reference_bill_usd_per_month == pytest.approx(dis.economics.reference_bill_usd_per_month)
    # a request without a TTFT SLO and a loose TPOT SLO: "best" still answers with a feasible fleet both SLOs meet
    loose = P.plan(_req(serving="best", ttft_slo_ms=None, tpot_slo_ms=60.0), catalog)
    assert loose.best_fleet is not None and loose.best_fleet.feasible


def test_a_bad_serving_value_is_refused_naming_the_field(catalog):
    with pytest.raises(P.PlanError) as e:
        P.plan(_req(serving="split"), catalog)
    assert e.value.field == "serving" and "colocated or disaggregated or best" in str(e.value)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", "plan", "--model", "llama-3.1-8b", "--hardware",
                           "h100-sxm", "--no-levers", *args], capture_output=True, text=True, timeout=120)


def test_cli_serving_round_trip_and_refusal(catalog):
    r = _cli("--serving", "disaggregated", "--tpot-slo-ms", "20", "--ttft-slo-ms", "200")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["serving"]["asked"] == "disaggregated" and d["serving"]["today"] == "disaggregated"
    pools = d["reference_fleet"]["pools"]
    assert [q["role"] for q in pools] == ["prefill", "decode"]
    assert sum(q["usd_per_month"] for q in pools) == pytest.approx(d["reference_fleet"]["usd_per_month"])
    assert d["economics"]["reference_bill_usd_per_month"] == pytest.approx(d["reference_fleet"]["usd_per_month"])
    assert all(math.isfinite(q["gpu_hours_per_month"]) and q["tp"] in P.TP_OPTIONS for q in pools)
    assert any("interconnect_gb_s" in a and "2026-12-04" in a for a in d["serving"]["assumptions"])
    bad = _cli("--serving", "split")
    assert bad.returncode != 0
    assert "serving='split' is not allowed" in bad.stderr + bad.stdout


def test_the_prefix_cache_share_speeds_the_prefill_pool_not_the_kv_transfer(catalog):
    from planner.money.disagg import prefill_pools

    cold = P.plan(_req(), catalog)
    warm_req = _req(prefix_cache_share=0.5)
    warm = P.plan(warm_req, catalog)
    a = prefill_pools(make_context(cold.request, catalog), cold.baseline)
    b = prefill_pools(make_context(warm_req, catalog), warm.baseline)
    for c, w in zip(a, b, strict=True):
        # half the prompt is not recomputed: one replica serves more prompts a second, the whole prompt's KV still moves
        assert w.hours[0].capacity_requests_per_s > 1.5 * c.hours[0].capacity_requests_per_s
        assert w.kv_transfer_ms == pytest.approx(c.kv_transfer_ms)
    assert warm.reference_fleet.pools[0].peak_gpus <= cold.reference_fleet.pools[0].peak_gpus
