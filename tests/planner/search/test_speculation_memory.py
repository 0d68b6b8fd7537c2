"""Speculation's own memory (planner.physics.serving.sequence_memory): the max batch with speculation comes out of the
same memory function as without it, each running sequence charged the step's lookahead KV slots, the draft's own KV and,
on hybrid models, a recurrent state per verified token. Hand-computed figures in the comments."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.context import Candidate, make_context
from planner.physics.roofline import head_net, hw_params, resident_weight_bytes, target_net, usable_memory_bytes
from planner.physics.serving import (
    MODE_NONE,
    MODE_PARALLEL,
    MODE_SEQUENTIAL,
    memory_max_batch,
    sequence_memory,
)
from planner.plan import PlanRequest, TrafficSegment, plan
from planner.search.memory import speculation_memory_way_out
from profiles.model_config import parse_model_config

CONFIGS = Path(__file__).resolve().parents[2] / "profiles" / "model_configs"


def test_lookahead_slots_lower_the_eagle3_max_batch_of_llama_8b_on_one_h100(catalog):
    """Llama-3.1-8B (BF16) with an EAGLE-3 head at K=4 (a chain: 5 verified tokens) on one H100 SXM 80GB."""
    model, hw = catalog.models["llama-3.1-8b"], catalog.hardware["h100-sxm"]
    t, h = target_net(model, "bf16"), head_net(catalog.methods["eagle3"], model, "bf16")
    # usable: 80e9 B x gpu_memory_utilization 0.9 x (1 - activation reserve 0.03) = 69,840,000,000 B
    assert float(usable_memory_bytes(80e9)) == pytest.approx(69.84e9, rel=1e-12)
    # weights: 8.03e9 params x 2 B = 16,060,000,000 B; the head: one decoder layer 12 h^2 + its 32k-token LM head
    # 32,000 h = (12 x 4096 + 32,000) x 4096 x 2 B = 664,797,184 B, and its fusion fc 3 h^2 x 2 B = 100,663,296 B
    assert float(resident_weight_bytes(t)) == pytest.approx(16.06e9, rel=1e-12)
    assert float(resident_weight_bytes(h)) == (12 * 4096 + 32_000) * 4096 * 2 == 664_797_184
    assert float(h.fusion_weight_bytes) == 3 * 4096 * 4096 * 2 == 100_663_296
    # left for sequences: 69.84e9 - 16.06e9 = 53,780,000,000 B without the head; 53,014,539,520 B with it
    # KV per token: 32 layers x 2 x 8 KV heads x 128 x 2 B = 131,072 B; the head's one layer: 4,096 B
    assert (float(t.kv_bytes_per_token), float(h.kv_bytes_per_token)) == (131_072, 4_096)
    hp = hw_params(hw)

    def mb(tokens: float, verify: float) -> tuple[float, float]:
        with_spec, without = memory_max_batch(target=t, draft=h, hw=hp, mode=MODE_SEQUENTIAL, prompt_tokens=tokens,
                                              output_tokens=0.0, verify_tokens=verify)
        return float(with_spec), float(without)

    # a sequence of 8,004 tokens (an 8k context): without speculation 8,004 x 131,072 B = 1,049,100,288 B,
    # floor(53.78e9 / 1,049,100,288) = floor(51.26) = 51.
    # With the head, before the lookahead was charged: (8,004 x (131,072 + 4,096)) = 1,081,884,672 B per sequence,
    # floor(53,014,539,520 / 1,081,884,672) = floor(49.002) = 49.
    # With K=4 lookahead slots: 8,008 x 135,168 = 1,082,425,344 B (+540,672 B: 4 slots of the verifier's 131,072 B
    # and of the head's 4,096 B), floor(53,014,539,520 / 1,082,425,344) = floor(48.977) = 48.
    assert mb(8004.0, 5.0) == (48.0, 51.0)
    assert mb(8004.0, 1.0)[0] == 49.0  # no drafted tokens reserved: the batch before this change
    mem = sequence_memory(target=t, draft=h, mode=MODE_SEQUENTIAL, sequence_tokens=8004.0, verify_tokens=5.0)
    assert float(mem.lookahead_kv) == 4 * 131_072 and float(mem.draft_kv) == 8_008 * 4_096
    assert float(mem.draft_states) == 0.0  # no recurrent layers
    # at exactly 8,192 tokens the 4 slots are 0.05 % of a sequence and the floor stays: 53,014,539,520 /
    # (8,196 x 135,168) = 47.85 -> 47 (8,192: 47.88 -> 47)
    assert mb(8192.0, 5.0)[0] == mb(8192.0, 1.0)[0] == 47.0


def test_lookahead_only_where_the_engine_reserves_it(catalog):
    """vLLM reserves num_lookahead_tokens for EAGLE-type heads, MTP and draft models, not for n-gram or MEDUSA; a
    tree reserves its nodes."""
    model = catalog.models["llama-3.1-8b"]
    t, h = target_net(model, "bf16"), head_net(catalog.methods["eagle3"], model, "bf16")
    look = {mode: float(sequence_memory(target=t, draft=h, mode=mode, sequence_tokens=1000.0,
                                        verify_tokens=5.0).lookahead_kv)
            for mode in (MODE_SEQUENTIAL, MODE_PARALLEL, MODE_NONE)}
    assert look == {MODE_SEQUENTIAL: 4 * 131_072, MODE_PARALLEL: 0.0, MODE_NONE: 0.0}
    tree = sequence_memory(target=t, draft=h, mode=MODE_SEQUENTIAL, sequence_tokens=1000.0, verify_tokens=26.0)
    assert float(tree.lookahead_kv) == 25 * 131_072  # a 25-node tree


def _qwen35():
    return parse_model_config((CONFIGS / "Qwen--Qwen3.5-35B-A3B.json").read_bytes()).spec


def test_hybrid_draft_states_cap_concurrency_on_an_rtx_pro_6000(catalog):
    """Qwen3.5-35B-A3B (its config.json; BF16) with its native MTP module at K=3 on one RTX PRO 6000 (96 GB), 8,192
    tokens per sequence: SGLang keeps one recurrent state per verified token (K + 1 = 4) beside the running one."""
    spec = _qwen35()
    t, m = target_net(spec, "bf16"), head_net(catalog.methods["mtp"], spec, "bf16")
    # 30 Gated DeltaNet layers, each 32 value heads x 128 x 128 x 4 B (float32) + conv 3 x 8,192 x 2 B:
    # 30 x 2,146,304 = 64,389,120 B per sequence
    assert spec.state_bytes_per_sequence == 30 * (32 * 128 * 128 * 4 + 3 * 8192 * 2) == 64_389_120
    # usable: 96e9 x 0.9 x 0.97 = 83,808,000,000 B; weights 34,660,352,000 params x 2 B = 69,320,704,000 B;
    # the MTP module (one decoder layer with its 256 experts, eh_proj and the LM head) 2,716,057,600 B
    usable = float(usable_memory_bytes(96e9))
    assert usable == pytest.approx(83.808e9, rel=1e-12)
    assert float(resident_weight_bytes(t)) == 69_320_704_000 and float(resident_weight_bytes(m)) == 2_716_057_600
    # without speculation: 10 full-attention layers x 2 x 2 KV heads x 256 x 2 B = 20,480 B per token;
    # 8,192 x 20,480 + 64,389,120 = 232,161,280 B per sequence; (83.808e9 - 69.3207e9) = 14,487,296,000 B
    # -> floor(62.40) = 62
    # with MTP K=3: 11,771,238,400 B left after the module; per sequence 232,161,280 + lookahead 3 x 20,480
    # + the module's KV (8,192 + 3) x 2,048 = 16,783,360 + states 4 x 64,389,120 = 257,556,480
    # = 506,562,560 B -> floor(23.24) = 23 (charging the module's weights and KV only: 248,938,496 B -> 47)
    mb, base = memory_max_batch(target=t, draft=m, hw=hw_params(catalog.hardware["rtx-pro-6000"]),
                                mode=MODE_SEQUENTIAL, prompt_tokens=8192.0, output_tokens=0.0, verify_tokens=4.0)
    assert (float(mb), float(base)) == (23.0, 62.0)
    mem = sequence_memory(target=t, draft=m, mode=MODE_SEQUENTIAL, sequence_tokens=8192.0, verify_tokens=4.0)
    assert (float(mem.kv), float(mem.lookahead_kv), float(mem.draft_kv), float(mem.draft_states)) == (
        232_161_280, 61_440, 16_783_360, 257_556_480)
    # K=1 keeps 2 states: 232,161,280 + 20,480 + 8,193 x 2,048 + 128,778,240 = 377,739,264 B -> floor(31.16) = 31
    mb1, _ = memory_max_batch(target=t, draft=m, hw=hw_params(catalog.hardware["rtx-pro-6000"]),
                              mode=MODE_SEQUENTIAL, prompt_tokens=8192.0, output_tokens=0.0, verify_tokens=2.0)
    assert float(mb1) == 31.0
    # a model without recurrent layers keeps none
    dense = target_net(catalog.models["llama-3.1-8b"], "bf16")
    assert float(sequence_memory(target=dense, draft=dense, mode=MODE_SEQUENTIAL, sequence_tokens=10.0,
                                 verify_tokens=4.0).draft_states) == 0.0


def test_the_way_out_names_what_binds(catalog):
    """Qwen3-32B in FP8 (fp8 KV) on one L40S, 66,000-token prompts + 1,000 output tokens: one sequence fits without
    speculation, not with EAGLE-3; the way out names the sequence's terms and the largest speculative one."""
    req = PlanRequest(model="qwen3-32b", hardware="l40s", tp=1, dtype="fp8", methods=("eagle3",),
                      segments=(TrafficSegment(workload="chat", language="english", share=1.0, prompt_tokens=66_000,
                                               output_tokens=1_000),))
    p = plan(req, catalog)
    assert p.baseline.max_batch == 1
    e = p.method("eagle3")
    assert e.max_batch == 0 and e.reason == "does not fit memory"
    # KV: 64 layers x 2 x 8 KV heads x 128 x 1 B = 131,072 B per token; 67,000 tokens: 8,781,824,000 B = 8.18 GiB.
    # The head's one layer: 2,048 B per token over 67,000 + K tokens: 0.13 GiB, its largest speculative term
    assert "one sequence of 67,000 tokens" in e.way_out and "KV cache 8.18 GiB" in e.way_out
    assert f"lookahead KV slots for K={e.k} {e.k * 131_072 / 2**20:.1f} MiB" in e.way_out
    assert "the largest of speculation's terms: the draft's own KV, 130.9 MiB" in e.way_out
    assert "fp8 KV cache" not in e.way_out  # it is one already
    way = speculation_memory_way_out(make_context(req, catalog), Candidate("eagle3", (4,)), 4)
    assert "lookahead KV slots for K=4 0.5 MiB" in way


def test_the_plan_of_a_hybrid_config_charges_the_draft_states(capsys):
    """`plan --model-config` for Qwen3.5-35B-A3B on one RTX PRO 6000 (BF16, the chat workload: 800 + 400 tokens)."""
    import json

    from cli.main import main

    assert main(["plan", "--model-config", str(CONFIGS / "Qwen--Qwen3.5-35B-A3B.json"), "--hardware",
                 "rtx-pro-6000", "--tp", "1", "--dtype", "bf16", "--no-levers"]) == 0
    out = json.loads(capsys.readouterr().out)
    # without speculation: 1,200 x 20,480 + 64,389,120 = 88,965,120 B per sequence; 14,487,296,000 / 88,965,120
    # = 162.8 -> 162
    assert out["baseline"]["max_batch"] == 162
    # MTP at K=1: + 20,480 (one slot) + 1,201 x 2,048 (the module's KV) + 2 x 64,389,120 (states) = 220,223,488 B
    # in 11,771,238,400 B -> 53.45 -> 53 (the module's weights and KV alone: 91,422,720 B -> 128)
    mtp = next(m for m in out["methods"] if m["method"] == "mtp")
    assert (mtp["k"], mtp["max_batch"]) == (1, 53)
    assert any(a["what"] == "speculation's memory" and "61.4 MiB per sequence" in a["value"]
               for a in out["assumptions"])
