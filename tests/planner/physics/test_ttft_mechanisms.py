"""What a real engine adds to TTFT (planner.physics.ttft, planner.physics.serving.prefill_chunk_steps_s,
planner.search.ttft_scenario): the prompt's chunks as the step model runs them, the engine's fitted front-end time,
one user never queueing behind itself, evenly spaced arrivals, the fit that uses the "fit" rows only, and the
GigaChat-style case (TPOT better, TTFT worse, throughput flat) on a catalogue model, prefill-bound."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from planner.physics.roofline import step_time_terms
from planner.physics.serving import prefill_time_s
from planner.physics.ttft import ENGINE_OVERHEAD_S, closed_loop, engine_overhead_s
from planner.search.scenario import resolve, search_inputs
from planner.search.ttft_scenario import (
    closed_loop_pair,
    fitted_overhead_s,
    open_loop_pair,
    published_ttft_s,
)
from planner.types import Scenario
from profiles.catalog import DATA_DIR

TTFT_CSV = DATA_DIR / "published" / "published_ttft.csv"
L70 = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, method="ngram", k=3, prompt_tokens=1052,
           output_tokens=258, batch=1)


def _rows() -> list[dict]:
    with TTFT_CSV.open(newline="") as f:
        return list(csv.DictReader(f))


def _target(catalog, s: Scenario):
    _, _, _, workload, _ = resolve(s, catalog)
    ctx, _ = search_inputs(s, catalog, workload, [s.k])
    return ctx.target, ctx.hw_params


def test_a_chunked_prompt_is_its_chunks_steps_by_hand(catalog):
    """1,052 prompt tokens in 512-token chunks (vLLM V0's chunked-prefill budget): two full chunks and 28 tokens,
    each one step of the step model at one sequence, attending over the context before it (mid-chunk contexts 256,
    768 and 1,038). The closed form's mean context (512 for the full chunks) gives the same seconds."""
    net, hw = _target(catalog, Scenario(**L70))
    by_hand = sum(float(step_time_terms(net, hw, batch=1.0, tokens_per_seq=m, context_tokens=c, tp=4).total_s)
                  for m, c in ((512, 256), (512, 768), (28, 1038)))
    got = float(prefill_time_s(net, hw, prompt_tokens=1052, tp=4, chunk_tokens=512))
    assert got == pytest.approx(by_hand, rel=1e-9)


def test_a_real_prefill_costs_more_than_the_peak_flop_figure_and_more_in_small_chunks(catalog):
    """The compute-only figure (no chunk size: the fleet's per-token cost, unchanged) is the floor; one chunk of the
    whole prompt adds the TP all-reduces, the per-layer kernels and a GEMM efficiency below the plateau at
    M = 1,052; 512-token chunks add a weight stream and those fixed costs per chunk again."""
    net, hw = _target(catalog, Scenario(**L70))
    p = 1052.0
    flops = p * (2.0 * float(net.active_params) + 2.0 * float(net.attn_dim) * p)
    floor = flops / (float(hw.peak_flops_s) * float(hw.eta_flops) * 4)
    assert float(prefill_time_s(net, hw, prompt_tokens=p, tp=4)) == pytest.approx(floor, rel=1e-12)
    whole = float(prefill_time_s(net, hw, prompt_tokens=p, tp=4, chunk_tokens=8192))
    small = float(prefill_time_s(net, hw, prompt_tokens=p, tp=4, chunk_tokens=512))
    assert floor < whole < small


def test_ttft_at_concurrency_one_is_the_front_end_time_and_the_prompts_own_steps(catalog):
    """One user: no queue (it never waits behind itself), no other sequence decoding in its steps; TTFT is the
    engine's front-end time plus the prompt's chunks, exactly. The front-end time is the engine's own
    (ENGINE_OVERHEAD_S), and an explicit one replaces it one for one."""
    s = Scenario(**L70)
    net, hw = _target(catalog, s)
    steps = float(prefill_time_s(net, hw, prompt_tokens=1052, tp=4, chunk_tokens=512))
    for engine in ("vllm", "sglang"):
        pair = closed_loop_pair(Scenario(**L70, engine=engine), catalog, concurrency=1, batched_tokens=512)
        assert pair.baseline.ttft_s == pytest.approx(engine_overhead_s(engine) + steps, rel=1e-6)
    assert engine_overhead_s("sglang") == ENGINE_OVERHEAD_S["sglang"] != engine_overhead_s("vllm")
    assert engine_overhead_s("trtllm") == ENGINE_OVERHEAD_S["vllm"]  # no fitting row: vLLM's
    bare = closed_loop_pair(s, catalog, concurrency=1, batched_tokens=512, overhead_s=0.0)
    more = closed_loop_pair(s, catalog, concurrency=1, batched_tokens=512, overhead_s=0.05)
    assert more.baseline.ttft_s - bare.baseline.ttft_s == pytest.approx(0.05, rel=1e-6)
    assert more.speculative.ttft_s - bare.speculative.ttft_s == pytest.approx(0.05, rel=1e-6)


def test_one_user_never_queues_and_more_users_do():
    """The arrival theorem: an arriving user finds the lane as the other N - 1 keep it. N = 1: TTFT is the
    front-end time and the prompt's own prefill (no decode in its steps); N = 8 on the same replica waits."""
    kw = dict(output_tokens=200, prefill_s=0.05, new_prompt_tokens=2000, tpot_at=lambda b: 0.01 + 0.0002 * b,
              overhead_s=0.02)
    one = closed_loop(concurrency=1, **kw)
    assert one.ttft_s == pytest.approx(0.02 + 0.05, rel=1e-6)
    assert one.tpot_s == pytest.approx(0.01 + 0.0002 * max(one.batch, 1.0), rel=1e-9)  # no other prompt stretches it
    eight = closed_loop(concurrency=8, **kw)
    assert eight.ttft_s > one.ttft_s + 0.001
    with pytest.raises(ValueError, match="concurrency"):
        closed_loop(concurrency=0.5, **kw)


def test_evenly_spaced_arrivals_wait_less_than_poisson_ones(catalog):
    """An open loop at 6 requests/s: guidellm's constant profile (ca^2 = 0) waits less for the lane than Poisson
    arrivals; both see the same batch and TPOT (Little's law on decode: b = lambda O TPOT seen)."""
    s = Scenario(model="qwen3.5-35b-a3b", hardware="h200", dtype="fp8", method="mtp", k=1, prompt_tokens=2000,
                 output_tokens=300, batch=1)
    even, _ = open_loop_pair(s, catalog, requests_per_s=6.0, arrival_scv=0.0)
    poisson, _ = open_loop_pair(s, catalog, requests_per_s=6.0, arrival_scv=1.0)
    assert even.batch == pytest.approx(poisson.batch) and even.tpot_s == pytest.approx(poisson.tpot_s)
    assert even.batch == pytest.approx(6.0 * 300 * even.tpot_s, rel=1e-6)
    assert even.ttft_s < poisson.ttft_s


def test_the_front_end_fit_uses_the_fitting_rows_only(catalog):
    """Refitting on the published rows gives the shipped constants (to their rounding); changing a row marked
    "check" changes nothing, changing a fitting row moves its engine's value by its change."""
    rows = _rows()
    fit = fitted_overhead_s(rows, catalog)
    assert set(fit) == set(ENGINE_OVERHEAD_S)
    for engine, v in fit.items():
        assert v == pytest.approx(ENGINE_OVERHEAD_S[engine], abs=5e-6)
    assert sum(r["role"] == "check" for r in rows) >= 5
    assert {r["engine"] for r in rows if r["role"] == "fit"} == set(ENGINE_OVERHEAD_S)
    moved = [dict(r, ttft_ms=str(float(r["ttft_ms"]) * 3)) if r["role"] == "check" else r for r in rows]
    assert fitted_overhead_s(moved, catalog) == fit
    fit_row = next(r for r in rows if r["role"] == "fit" and r["engine"] == "sglang")
    bumped = [dict(r, ttft_ms=str(float(r["ttft_ms"]) + 10.0)) if r is fit_row else r for r in rows]
    assert fitted_overhead_s(bumped, catalog)["sglang"] == pytest.approx(fit["sglang"] + 0.010)
    with pytest.raises(ValueError, match="role"):
        fitted_overhead_s([r for r in rows if r["role"] != "fit"], catalog)


def test_every_checking_row_is_predicted_finite_with_speculation_and_without(catalog):
    """At least five held-out rows with speculation and their rows without are predicted; each is finite and
    positive (the accuracy itself is printed by benchmarks/accuracy.py, not pinned here)."""
    rows = [r for r in _rows() if r["role"] == "check"]
    assert sum(r["catalog_method"] != "none" for r in rows) >= 5
    assert sum(r["catalog_method"] == "none" for r in rows) >= 3
    for r in rows:
        t = published_ttft_s(r, catalog)
        assert math.isfinite(t) and t > 0.0, r["id"]


HYBRID = dict(model="qwen3.5-397b-a17b", hardware="h100-sxm", tp=8, dtype="fp8", method="mtp", k=3, engine="sglang",
              prompt_tokens=16384, output_tokens=512, batch=1)


def test_gigachat_style_speculation_on_a_prefill_bound_replica(catalog):
    """SGLang's GigaChat 3.5 runs (a hybrid MoE on 8 x H100, concurrency 64): MTP made TPOT 2.1x better, TTFT 2.8x
    worse, per-GPU throughput 0.99x. In kind on the catalogue's hybrid MoE, Qwen3.5-397B-A17B with MTP at K=3 on
    8 x H100 fp8, 64 users of 16k-token prompts and 512-token answers, SGLang with a 2,048-token chunk: the prefill
    lane is (nearly) always busy with and without speculation, so the lane sets the throughput; speculation's steps
    are longer and give B (K + 1) of each step's budget to decode, so each prompt takes the lane longer: the users
    speculation returns sooner wait longer for their first token, the decode batch falls and TPOT improves more
    than the acceptance length alone would make it, while throughput stays flat."""
    pair = closed_loop_pair(Scenario(**HYBRID), catalog, concurrency=64, batched_tokens=2048)
    b, sp = pair.baseline, pair.speculative
    assert b.lane_share > 0.9 and sp.lane_share > 0.9  # prefill-bound
    assert b.tpot_s / sp.tpot_s >= 1.5  # TPOT better
    assert sp.ttft_s >= 2.0 * b.ttft_s  # TTFT worse
    assert abs(sp.output_tokens_per_s / b.output_tokens_per_s - 1.0) <= 0.10  # per-GPU throughput flat
    assert sp.batch < b.batch
    # the same replica with 1k-token answers is decode-bound: speculation then pays in throughput too
    decode_bound = closed_loop_pair(Scenario(**dict(HYBRID, prompt_tokens=8192, output_tokens=1024)), catalog,
                                    concurrency=64, batched_tokens=2048)
    assert decode_bound.baseline.lane_share < 0.9
    assert decode_bound.speculative.output_tokens_per_s > 1.1 * decode_bound.baseline.output_tokens_per_s


def test_speculations_budget_share_slows_the_prompt_through_the_lane():
    """The mechanism alone, all else equal: 64 sequences at K = 3 take 256 of a 2,048-token step's budget (64 at
    K = 0), so a 16k prompt rides more steps and the lane is busy longer per request."""
    from planner.physics.ttft import ttft  # noqa: PLC0415

    kw = dict(requests_per_s=1.0, prefill_s=0.5, new_prompt_tokens=16384.0, step_s=0.05, batch=64.0,
              batched_tokens=2048.0)
    plain, spec = ttft(tokens_per_seq=1.0, **kw), ttft(tokens_per_seq=4.0, **kw)
    assert float(plain.steps) == np.ceil(16384 / (2048 - 64)) and float(spec.steps) == np.ceil(16384 / (2048 - 256))
    assert float(spec.lane_share) > float(plain.lane_share) and float(spec.ttft_s) > float(plain.ttft_s)
