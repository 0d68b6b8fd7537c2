"""TTFT (planner.physics.ttft): the chunked-prefill-share model by hand, the TTFT SLO in the search and the fleet, the
GigaChat-style closed loop on a catalogue model, and the CLI's --ttft-slo-ms."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from planner import fleet as F
from planner import plan as P
from planner.formatting import plan_dict
from planner.physics.ttft import DEFAULT_OVERHEAD_S, TtftInputs, closed_loop, ttft
from planner.search.ttft_scenario import closed_loop_pair
from planner.types import Scenario

RAG = dict(model="llama-3.1-8b", hardware="h100-sxm", workload="rag_summarization", monthly_output_tokens=1e11)


def test_ttft_by_hand():
    """2 requests/s of 4,000 new prompt tokens, 0.1 s of prefill GPU time each, decode step 20 ms at batch 32 with
    K=3 (4 tokens per sequence per step), a 2,048-token step budget:
        chunk c = 2048 - 32 x 4 = 1920 prompt tokens per step; the prompt rides ceil(4000 / 1920) = 3 steps
        own prefill S_own = 0.1 + 3 x 0.02 = 0.16 s
        lane occupancy S = 0.1 + 4000 / 1920 x 0.02 = 0.1416667 s; u = 2 x S = 0.2833333
        M/G/1 wait (cv^2 = 1) W = u S (1 + 1) / (2 (1 - u)) = 0.2833333 x 0.1416667 / 0.7166667 = 0.0560078 s
        the step in flight at arrival: half a step, 0.01 s
        the engine's front-end time t_front = 0.02071 s (vLLM's, the default where no engine is named)
        TTFT = 0.16 + 0.0560078 + 0.01 + 0.02071 = 0.2467178 s."""
    t = ttft(requests_per_s=2.0, prefill_s=0.1, new_prompt_tokens=4000.0, step_s=0.02, batch=32.0,
             tokens_per_seq=4.0, batched_tokens=2048.0)
    assert float(t.steps) == 3
    assert float(t.own_prefill_s) == pytest.approx(0.16)
    assert float(t.lane_share) == pytest.approx(0.2833333, rel=1e-6)
    assert float(t.queue_s) == pytest.approx(0.0560078, rel=1e-5)
    assert float(t.ttft_s) == pytest.approx(0.2467178, rel=1e-6)
    assert float(t.boundary_s) == pytest.approx(0.01)
    assert float(t.ttft_s - t.queue_s - t.own_prefill_s - t.boundary_s) == pytest.approx(DEFAULT_OVERHEAD_S) == 0.02071
    # equal prompts (M/D/1, cv^2 = 0) wait half as long; so do evenly spaced arrivals (Kingman: ca^2 = 0, D/M/1-like)
    half = ttft(requests_per_s=2.0, prefill_s=0.1, new_prompt_tokens=4000.0, step_s=0.02, batch=32.0,
                tokens_per_seq=4.0, batched_tokens=2048.0, service_scv=0.0)
    assert float(half.queue_s) == pytest.approx(0.0560078 / 2, rel=1e-5)
    even = ttft(requests_per_s=2.0, prefill_s=0.1, new_prompt_tokens=4000.0, step_s=0.02, batch=32.0,
                tokens_per_seq=4.0, batched_tokens=2048.0, arrival_scv=0.0)
    assert float(even.queue_s) == pytest.approx(0.0560078 / 2, rel=1e-5)
    # the front-end time is the caller's: none, and TTFT is the GPU's part alone (the wait, the step boundary, its own)
    bare = ttft(requests_per_s=2.0, prefill_s=0.1, new_prompt_tokens=4000.0, step_s=0.02, batch=32.0,
                tokens_per_seq=4.0, batched_tokens=2048.0, overhead_s=0.0)
    assert float(bare.ttft_s) == pytest.approx(0.2260078, rel=1e-6)


def test_a_saturated_prefill_lane_has_no_finite_ttft():
    t = ttft(requests_per_s=10.0, prefill_s=0.1, new_prompt_tokens=1000.0, step_s=0.02, batch=8.0)
    assert math.isinf(float(t.ttft_s)) and float(t.lane_share) >= 1.0


def test_speculation_lengthens_ttft_at_the_same_load():
    """The same arrivals and prompt: a speculative step (K=3: 4 tokens per sequence, a longer step) and the
    draft's own prefill make the first token later."""
    common = dict(requests_per_s=1.0, new_prompt_tokens=7900.0, batch=64.0, batched_tokens=2048.0)
    plain = ttft(prefill_s=0.2, step_s=0.03, tokens_per_seq=1.0, **common)
    spec = ttft(prefill_s=0.2 + 0.01, step_s=0.03 * 1.3, tokens_per_seq=4.0, **common)
    assert float(spec.steps) > float(plain.steps)
    assert float(spec.ttft_s) > float(plain.ttft_s)


def test_the_ttft_slo_bounds_one_replicas_capacity_by_hand():
    """One hour, 30 requests/s of 100 output and 2,000 prompt tokens; TPOT(b) = 20 ms + 0.1 ms x b; prefill 10 ms;
    TPOT SLO 60 ms. Without a TTFT SLO a few replicas hold it; a TTFT SLO of 65 ms, just above one request's own
    prefill (10 ms + one 20 ms step, half a step in flight) and the engine's front-end time (20.71 ms,
    planner.physics.ttft.DEFAULT_OVERHEAD_S): 60.71 ms, leaves little room to queue: more replicas, each hour's TTFT
    within the SLO."""
    b = np.arange(1, 1001, dtype=float)
    tpot = (0.02 + 0.0001 * b)[None, None, :]
    hours = (F.HourLoad(0, 30.0, 2000.0, 100.0),)
    tin = TtftInputs(prefill_s=np.array([[0.01]]), new_prompt_tokens=np.array([2000.0]), step_factor=np.array([1.0]),
                     tokens_per_seq=np.array([1.0]))
    kw = dict(configs=[("none", "no speculation", 0)], tpot_s=tpot, max_batch=np.array([[1000.0]]),
              prefill_s=np.array([0.01]), hours=hours, tp=1, usd_per_gpu_hour=2.0, slo_ms=60.0, shape_source="test")
    free = F.fleet_for_configs(**kw, ttft_inputs=tin).configs[0].hours[0]
    bound = F.fleet_for_configs(**kw, ttft_inputs=dataclasses.replace(tin, slo_ms=65.0)).configs[0].hours[0]
    assert free.feasible and bound.feasible
    assert free.ttft_ms > 65.0  # the TPOT SLO alone lets the first token wait longer
    assert bound.replicas > free.replicas
    assert bound.ttft_ms <= 65.0
    # with the TTFT SLO stated but loose, nothing changes
    loose = F.fleet_for_configs(**kw, ttft_inputs=dataclasses.replace(tin, slo_ms=1e6)).configs[0].hours[0]
    assert loose.replicas == free.replicas and loose.ttft_ms == pytest.approx(free.ttft_ms)


def test_a_ttft_slo_makes_the_plan_need_more_replicas(catalog):
    """RAG traffic (long prompts) on Llama-3.1-8B: a 400 ms TTFT SLO lowers each replica's batch and adds GPUs to
    today's fleet and to EAGLE-3's; every hour of both fleets meets it; the verdict names both SLOs."""
    req = P.PlanRequest(**RAG, methods=("eagle3",))
    free = P.plan(req, catalog)
    bound = P.plan(dataclasses.replace(req, ttft_slo_ms=400.0), catalog)
    assert math.isfinite(free.reference_fleet.ttft_ms) and free.reference_fleet.ttft_ms > 400.0
    for a, b in ((free.reference_fleet, bound.reference_fleet), (free.best_fleet, bound.best_fleet)):
        assert b is not None and b.feasible
        assert b.peak_gpus > a.peak_gpus
        assert all(h.ttft_ms <= 400.0 for h in b.hours)
    assert bound.baseline.batch < free.baseline.batch and bound.baseline.ttft_ms <= 400.0
    assert "400 ms TTFT" in bound.verdict
    # under the TTFT SLO speculation stops paying here (its fleet grows more than today's), and the verdict says
    # what the TTFT SLO costs it against the TPOT SLO alone
    assert free.recommendation is not None and bound.recommendation is None
    e3 = next(b for b in bound.bills if b.method == "eagle3")
    assert f"Under the TPOT SLO alone EAGLE-3 at K={e3.k} would need" in bound.verdict
    assert f"holding the 400 ms TTFT SLO takes {e3.peak_gpus:,}" in bound.verdict


def test_the_verdict_says_when_speculation_meets_tpot_but_breaks_ttft(catalog):
    """RAG prompts on one H100: at batch 1 no speculation's first token takes ~309 ms, EAGLE-3's ~341 ms (its head's
    prefill and its longer step; both with vLLM's 16.97 ms front-end time and half a step in flight). A 320 ms TTFT
    SLO keeps today and rules EAGLE-3 out, and the verdict says why; at 270 ms neither holds on one GPU, and the
    verdict says no speculation breaks it too."""
    p = P.plan(P.PlanRequest(**RAG, methods=("eagle3",), ttft_slo_ms=320.0), catalog)
    e3 = next(m for m in p.methods if m.method == "eagle3")
    assert p.baseline.feasible and p.baseline.ttft_ms <= 320.0
    assert not e3.feasible and e3.fits_memory and "TTFT SLO" in e3.reason and e3.ttft_ms > 320.0
    assert ("EAGLE-3 (" in p.verdict and "meets the 50 ms TPOT SLO but breaks the 320 ms TTFT SLO: the draft's own "
            "prefill and the longer speculative step" in p.verdict)
    p = P.plan(P.PlanRequest(**RAG, methods=("eagle3",), ttft_slo_ms=270.0), catalog)
    assert "breaks the 270 ms TTFT SLO: so does no speculation" in p.verdict


def test_no_ttft_slo_leaves_the_plan_as_it_was_and_states_ttft(catalog):
    """ttft_slo_ms=None (the default) is not a constraint: a loose stated SLO gives the same plan; TTFT is stated
    for today and the best method."""
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", tpot_slo_ms=20)
    a, b = P.plan(req, catalog), P.plan(dataclasses.replace(req, ttft_slo_ms=3_600_000), catalog)
    assert a.best.method == b.best.method and a.best.batch == b.best.batch
    assert a.best_fleet.usd_per_month == b.best_fleet.usd_per_month
    assert math.isfinite(a.reference_fleet.ttft_ms) and math.isfinite(a.best_fleet.ttft_ms)
    js = plan_dict(a)
    assert js["latency"]["ttft_slo_ms"] is None
    assert js["latency"]["today"]["ttft_ms"] == pytest.approx(a.reference_fleet.ttft_ms)
    assert js["latency"]["best"]["ttft_ms"] == pytest.approx(a.best_fleet.ttft_ms)


GIGA = dict(hardware="h200", tp=8, dtype="fp8", method="mtp", k=3, prompt_tokens=8192, output_tokens=1024, batch=1)


def test_gigachat_style_closed_loop_on_deepseek_v3(catalog):
    """SGLang's GigaChat 3.5 runs (8 x H100, ISL 8192 / OSL 1024, concurrency 64, profiles/data/published/
    published_ttft.csv): MTP made TPOT 2.1x better and TTFT 2.8x worse (18.8 s -> 52.3 s) at flat per-GPU
    throughput; its Low-Latency recipe pins a state pool that leaves the KV pool ~2.7x smaller than without MTP.
    In kind on DeepSeek-V3 (MTP, 8 x H200, fp8) under a closed loop of 64 users, the speculative deployment capped
    at the no-speculation memory limit / 2.7: TPOT better by >= 1.5x, TTFT several times worse (the users queue
    for admission). Throughput: the planner gives speculation 1.20x here, not the measured 0.99x: its step model keeps
    the MoE verifier memory-bound at ~45 sequences x 4 tokens, so drafting still pays there; the test pins that
    figure's range so a change to it shows (the prefill-bound case that reproduces the flat throughput without a
    pinned pool: tests/planner/physics/test_ttft_mechanisms.py)."""
    s = Scenario(model="deepseek-v3", **GIGA)
    free = closed_loop_pair(s, catalog, concurrency=64)
    pinned = closed_loop_pair(s, catalog, concurrency=64, speculative_max_num_seqs=free.max_batch_baseline / 2.7)
    b, sp = pinned.baseline, pinned.speculative
    assert b.tpot_s / sp.tpot_s >= 1.5
    assert sp.ttft_s >= 3.0 * b.ttft_s
    assert 1.1 <= sp.output_tokens_per_s / b.output_tokens_per_s <= 1.3
    # the same memory for both: speculation still delays the first token (the draft's prefill, longer steps), less
    assert free.speculative.ttft_s > free.baseline.ttft_s
    assert free.speculative.ttft_s < sp.ttft_s


def test_closed_loop_is_littles_law():
    """N users = X (TTFT + O x TPOT seen) at the solution, and the decode batch is X O TPOT seen."""
    cl = closed_loop(concurrency=32, output_tokens=200, prefill_s=0.02, new_prompt_tokens=1000,
                     tpot_at=lambda b: 0.01 + 0.0002 * b)
    assert cl.requests_per_s * (cl.ttft_s + 200 * cl.tpot_s) == pytest.approx(32, rel=1e-6)
    assert cl.batch == pytest.approx(cl.requests_per_s * 200 * cl.tpot_s, rel=1e-4)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=120)


def test_cli_ttft_slo_round_trip():
    r = run("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--workload", "rag_summarization",
            "--monthly-output-tokens", "1e11", "--ttft-slo-ms", "400")
    assert r.returncode == 0, r.stderr
    lat = json.loads(r.stdout)["latency"]
    assert lat["ttft_slo_ms"] == 400.0 and lat["tpot_slo_ms"] == 50.0
    assert lat["today"]["ttft_ms"] <= 400.0


@pytest.mark.parametrize("bad", ["-5", "0", "nan", "inf", "1e12"])
def test_cli_refuses_a_bad_ttft_slo_naming_the_field(bad):
    r = run("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--ttft-slo-ms", bad)
    assert r.returncode != 0
    assert "ttft_slo_ms" in r.stderr and "time to first token" in r.stderr


@pytest.mark.parametrize("bad", [-1.0, 0.0, float("nan"), 1e12, True, "fast"])
def test_plan_request_refuses_a_bad_ttft_slo(catalog, bad):
    with pytest.raises(P.PlanError) as e:
        P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", ttft_slo_ms=bad), catalog)
    assert e.value.field == "ttft_slo_ms"
