"""A model as a stack of layer kinds (profiles/model_layers.py): the parsed figures of every existing config and
catalogue model stay those of main, the three layouts main refused (Nemotron-H Mamba-2 hybrids, Nemotron-NAS
block_configs, per-layer MoE lists) are checked against hand arithmetic, and malformed fields are refused by name."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from planner.physics.networks import kv_cache_bytes_per_sequence, target_net, weight_bytes_by_component
from profiles import load_catalog
from profiles.model_config import ModelConfigError, parse_model_config
from profiles.model_layers import ffn_to_width

HERE = Path(__file__).resolve().parent
CONFIGS = HERE / "model_configs"
# Dumped from main at 7acc8c8 (before the stack was read layer by layer) by the figures() below.
MAIN = json.loads((HERE / "model_config_figures_main.json").read_text())
FIELDS = ("layers", "hidden_size", "heads", "kv_heads", "head_dim", "vocab_size", "total_params_b", "active_params_b",
          "experts", "experts_per_token", "expert_params_b", "kv_elements_per_token_per_layer", "native_methods",
          "max_context_tokens", "tied_embeddings", "attention", "mla_kv_lora_rank", "mla_qk_rope_head_dim",
          "sliding_window_tokens", "sliding_window_layers", "moe_layers", "fp4_scope")


def figures(spec) -> dict:
    out = {f: getattr(spec, f) for f in FIELDS}
    out["native_methods"] = list(out["native_methods"])
    for dtype in ("bf16", "fp8", "nvfp4"):
        net = target_net(spec, dtype)
        out[f"kv_bytes_per_token_{dtype}"] = float(net.kv_bytes_per_token)
        out[f"weights_{dtype}"] = {k: float(v) for k, v in weight_bytes_by_component(spec, dtype).items()}
        out[f"active_params_{dtype}"] = float(net.active_params)
    return out


def parsed(name: str):
    return parse_model_config((CONFIGS / f"{name}.json").read_bytes())


@pytest.mark.parametrize("name", sorted(MAIN["configs"]))
def test_every_config_main_parsed_keeps_its_figures(name):
    p = parsed(name)
    want = MAIN["configs"][name]
    got = {**figures(p.spec), "breakdown": dict(p.breakdown), "weight_dtype": p.weight_dtype}
    assert got == want  # exact: the layer groups sum to the same integers
    assert sum(g.count for g in p.spec.layer_groups) == p.spec.layers


def test_catalogue_models_keep_their_figures():
    cat = load_catalog()
    for name, want in MAIN["catalog"].items():
        assert figures(cat.models[name]) == want, name


def test_memory_unchanged_where_no_layer_holds_a_state():
    net = target_net(parsed("openai--gpt-oss-120b").spec, "bf16")  # sliding layers, no state
    tokens = 1000.0
    # 36 layers x 2 x 8 x 64 x 2 B = 73,728 B per token; 18 sliding layers keep 128 tokens
    assert float(kv_cache_bytes_per_sequence(net, sequence_tokens=tokens)) == (18 * tokens + 18 * 128) * 2 * 8 * 64 * 2


def test_nemotron_h_moe_hybrid_by_hand():
    """Nemotron-3 Nano 30B-A3B: 52 layers "MEMEM*EM...", 23 Mamba-2 (M), 23 MoE (E), 6 attention (*)."""
    p = parsed("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    s, h, vocab = p.spec, 2688, 131072
    # Mamba-2: d_inner 64 heads x 64 = 4096; in_proj to z, x (4096 each), B, C (8 groups x 128 each), dt (64 heads);
    # conv over x, B, C = 4096 + 2 x 8 x 128 = 6144 channels x kernel 4; out_proj 4096 -> h
    mamba = h * (2 * 4096 + 2 * 8 * 128 + 64) + 6144 * 4 + 4096 * h
    attn = 2 * h * 32 * 128 + 2 * h * 2 * 128  # q, o: 32 heads x 128; k, v: 2 KV heads x 128
    expert = 2 * h * 1856  # relu2: up and down only
    shared, router = 2 * h * 3712, h * 128
    total = 23 * mamba + 6 * attn + 23 * (128 * expert + shared + router) + 2 * vocab * h
    active = 23 * mamba + 6 * attn + 23 * (6 * expert + shared + router) + 2 * vocab * h
    assert s.total_params_b * 1e9 == pytest.approx(total, rel=1e-12)
    assert s.active_params_b * 1e9 == pytest.approx(active, rel=1e-12)
    assert (round(total / 1e9, 1), round(active / 1e9, 1)) == (31.6, 3.6)  # model card: 31.6B total, 3.6B active
    assert (s.layers, s.experts, s.experts_per_token, s.moe_layers) == (52, 128, 6, 23)
    assert s.expert_params_b * 1e9 == 23 * expert
    w = weight_bytes_by_component(s, "bf16")
    assert w["streamed_dense"] + w["resident_only"] + 128 * w["experts_one"] == pytest.approx(2 * total, rel=1e-12)
    kinds = {(g.attention.kind, g.mlp.kind): g.count for g in s.layer_groups}
    assert kinds == {("mamba2", "none"): 23, ("none", "moe"): 23, ("gqa", "none"): 6}
    # KV: only the 6 attention layers, 2 x 2 KV heads x 128 x 2 B = 1,024 B each: 6,144 B per token in BF16
    # State per Mamba-2 layer: 64 heads x 64 x 128 d_state x 4 B (mamba_ssm_cache_dtype float32) = 2,097,152 B
    # + (4 - 1) x 6144 conv channels x 2 B = 36,864 B; 23 layers: 49,082,368 B per sequence
    assert s.state_bytes_per_sequence == 23 * (64 * 64 * 128 * 4 + 3 * 6144 * 2) == 49_082_368
    net = target_net(s, "bf16")
    for tokens in (10.0, 8192.0):
        assert float(kv_cache_bytes_per_sequence(net, sequence_tokens=tokens)) == pytest.approx(
            tokens * 6 * 1024 + 49_082_368, rel=1e-12)
    # at TP2 the KV heads split (2 KV heads): the replica still holds one copy of KV and state
    assert float(kv_cache_bytes_per_sequence(net, sequence_tokens=8192.0, tp=2)) == pytest.approx(
        8192 * 6 * 1024 + 49_082_368, rel=1e-12)


def test_nemotron_h_dense_hybrid_by_hand():
    """Nemotron-H 56B: 118 layers, 54 Mamba-2, 54 relu2 MLPs, 10 attention; head width from attention_head_dim."""
    s = parsed("nvidia--Nemotron-H-56B-Base-8K").spec
    h = 8192
    d_inner, conv = 256 * 64, 256 * 64 + 2 * 8 * 256
    mamba = h * (2 * d_inner + 2 * 8 * 256 + 256) + conv * 4 + d_inner * h
    attn = 2 * h * 64 * 128 + 2 * h * 8 * 128
    total = 54 * mamba + 54 * 2 * h * 32768 + 10 * attn + 2 * 131072 * h
    assert s.total_params_b * 1e9 == pytest.approx(total, rel=1e-12)
    assert round(total / 1e9) == 56
    # no mamba_ssm_cache_dtype: a BF16 state, 256 x 64 x 256 x 2 B + 3 x 20,480 x 2 B per layer
    assert s.state_bytes_per_sequence == 54 * (256 * 64 * 256 * 2 + 3 * conv * 2)
    assert float(kv_cache_bytes_per_sequence(target_net(s, "fp8"), sequence_tokens=4096.0)) == pytest.approx(
        4096 * 10 * 2 * 8 * 128 * 1 + s.state_bytes_per_sequence, rel=1e-12)  # fp8 KV; the state stays BF16


def test_nemotron_nas_block_configs_by_hand():
    """Llama-3.3-Nemotron-Super-49B: 80 layers, 49 with GQA attention (8 heads per KV group), 31 with none; each
    FFN its own width from ffn_mult."""
    p = parsed("nvidia--Llama-3_3-Nemotron-Super-49B-v1")
    s, h = p.spec, 8192
    assert [ffn_to_width(m, h) for m in (5.25, 2.625, 1.3125, 1.0, 0.5, 3.28125)] == \
        [28672, 14336, 7168, 5632, 2816, 17920]  # int(2 m h / 3) rounded up to 256: 1.0 -> 5461 -> 5632
    widths = 49 * [28672] + 6 * [14336] + 10 * [7168] + 8 * [5632] + 6 * [2816] + [17920]  # 80 FFNs
    attn = 2 * h * 64 * 128 + 2 * h * 8 * 128  # 64 heads / 8 per group = 8 KV heads
    total = 49 * attn + sum(3 * h * w for w in widths) + 2 * 128256 * h
    assert s.total_params_b * 1e9 == pytest.approx(total, rel=1e-12)
    assert round(total / 1e9, 1) == 49.9
    assert s.kv_heads == 8 and s.state_bytes_per_sequence == 0
    # KV: 49 layers x 2 x 8 x 128 x 2 B = 200,704 B per token (not 80 layers' 327,680)
    net = target_net(s, "bf16")
    assert float(kv_cache_bytes_per_sequence(net, sequence_tokens=1000.0)) == pytest.approx(1000 * 200_704, rel=1e-12)
    assert sum(g.count for g in s.layer_groups if g.attention.kind == "none") == 31


def test_per_layer_moe_list_by_hand():
    """MiniMax-M3: moe_layer_freq is a list (3 dense layers of dense_intermediate_size 12,288, then 57 MoE)."""
    s = parsed("MiniMaxAI--MiniMax-M3").spec
    h = 6144
    attn = 2 * h * 64 * 128 + 2 * h * 4 * 128
    expert = 3 * h * 3072
    moe = 128 * expert + 3 * h * 3072 + h * 128  # routed, one shared expert, router
    total = 60 * attn + 3 * 3 * h * 12288 + 57 * moe + 2 * 200064 * h
    active = 60 * attn + 3 * 3 * h * 12288 + 57 * (4 * expert + 3 * h * 3072 + h * 128) + 2 * 200064 * h
    assert s.total_params_b * 1e9 == pytest.approx(total, rel=1e-12)
    assert s.active_params_b * 1e9 == pytest.approx(active, rel=1e-12)
    assert (s.moe_layers, s.experts, s.experts_per_token) == (57, 128, 4)
    assert target_net(s, "bf16").kv_bytes_per_token == 60 * 2 * 4 * 128 * 2


BASE = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 1000,
        "intermediate_size": 4096}
LINEAR = {"layer_types": ["linear_attention"] * 3 + ["full_attention"], "linear_num_key_heads": 2,
          "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8}
MOE = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256}
NAS_BLOCK = {"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 1.0}}


@pytest.mark.parametrize("change,pattern", [
    # these once escaped as ZeroDivisionError, TypeError, or a 0-byte KV cache
    ({"head_dim": 0, "hidden_size": 4, **LINEAR}, r"field 'head_dim' = 0: expected an integer in \[1,"),
    ({"head_dim": 0}, r"field 'head_dim' = 0: expected an integer in \[1,"),
    ({"quantization_config": {"quant_method": "compressed-tensors",
                              "config_groups": {"g": {"weights": {"num_bits": [8], "type": "float"}}}}},
     r"field 'quantization_config.config_groups.g.weights.num_bits' = \[8\]: expected an integer"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": [1]}},
     r"field 'quantization_config.config_groups' = \[1\]"),
    ({**MOE, "mlp_only_layers": [0, 1, 2, 3, 0]}, r"field 'mlp_only_layers' = .*at most 4 layer indices"),
    ({**MOE, "mlp_only_layers": [True]}, r"field 'mlp_only_layers' = \[True\]"),
    ({**MOE, "moe_layer_freq": [0, 1, 1]}, r"field 'moe_layer_freq' = \[0, 1, 1\]: expected a list of 4 entries"),
    ({**MOE, "moe_layer_freq": [0, 1, 2, 1]}, r"field 'moe_layer_freq' = \[0, 1, 2, 1\]"),
    ({"hybrid_override_pattern": "M*X-"}, r"field 'hybrid_override_pattern\[2\]' = 'X': expected one of M"),
    ({"hybrid_override_pattern": "M*-"}, r"field 'hybrid_override_pattern' = 'M\*-': expected a string of 4"),
    ({"hybrid_override_pattern": "M*E-", "mamba_num_heads": 8, "mamba_head_dim": 8, "ssm_state_size": 16},
     r"field 'n_routed_experts' = '\(missing\)'"),
    ({"hybrid_override_pattern": "M*--"}, r"field 'mamba_num_heads' = '\(missing\)'"),
    ({"block_configs": [NAS_BLOCK] * 3}, r"field 'block_configs' = .*expected a list of 4 layer configs"),
    ({"block_configs": [NAS_BLOCK] * 3 + [{"attention": {"n_heads_in_group": 3}, "ffn": {"ffn_mult": 1.0}}]},
     r"field 'block_configs\[3\].attention.n_heads_in_group' = 3: expected a divisor of num_attention_heads \(8\)"),
    ({"block_configs": [NAS_BLOCK] * 3 + [{"attention": {"no_op": "yes"}, "ffn": {"ffn_mult": 1.0}}]},
     r"field 'block_configs\[3\].attention.no_op' = 'yes': expected true or false"),
    ({"block_configs": [NAS_BLOCK] * 3 + [{"attention": {"n_heads_in_group": 2, "window_length": 512},
                                          "ffn": {"ffn_mult": 1.0}}]},
     r"field 'block_configs\[3\].attention.window_length' = 512: expected null"),
    ({"block_configs": [NAS_BLOCK] * 3 + [{"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": "x"}}]},
     r"field 'block_configs\[3\].ffn.ffn_mult' = 'x': expected a number"),
    ({"block_configs": [NAS_BLOCK] * 3 + [{"attention": {"n_heads_in_group": 4}, "ffn": {"ffn_mult": 1.0}}]},
     r"field 'block_configs' = '2 KV cache widths across attention layers'"),
])
def test_malformed_layer_fields_are_refused_by_name(change, pattern):
    with pytest.raises(ModelConfigError, match=pattern):
        parse_model_config({**BASE, **change})


def test_a_huge_mlp_only_layers_list_is_refused_at_once():
    """249,000 indices no layer has, on 10,000 layers: main scanned the whole list for every layer (18.2 s of CPU
    measured; this test's own figure is 0.16 s, mostly digesting the dict); now refused before any scan."""
    cfg = {**BASE, **MOE, "num_hidden_layers": 10_000, "mlp_only_layers": [10_000 + i for i in range(249_000)]}
    start = time.process_time()
    with pytest.raises(ModelConfigError, match=r"field 'mlp_only_layers' = .*at most 10000 layer indices"):
        parse_model_config(cfg)
    assert time.process_time() - start < 5.0


def test_a_long_valid_mlp_only_layers_list_is_read_as_a_set():
    cfg = {**BASE, **MOE, "num_hidden_layers": 10_000, "mlp_only_layers": list(range(0, 10_000, 2))}
    s = parse_model_config(cfg).spec
    assert s.moe_layers == 5_000
    assert {(g.mlp.kind, g.count) for g in s.layer_groups} == {("dense", 5_000), ("moe", 5_000)}


def test_no_op_attention_layers_keep_no_kv_cache():
    blocks = [NAS_BLOCK, {"attention": {"no_op": True}, "ffn": {"no_op": True}},
              {"attention": {"replace_with_linear": True}, "ffn": {"replace_with_linear": True}}, NAS_BLOCK]
    s = parse_model_config({**BASE, "block_configs": blocks, "intermediate_size": None}).spec
    h = 1024
    attn = 2 * h * 8 * 128 + 2 * h * 4 * 128  # 8 heads of 128, 8 / 2 = 4 KV heads
    assert s.total_params_b * 1e9 == 2 * (attn + 3 * h * ffn_to_width(1.0, h)) + 2 * h * h + 2 * 1000 * h
    net = target_net(s, "bf16")
    assert float(kv_cache_bytes_per_sequence(net, sequence_tokens=100.0)) == pytest.approx(100 * 2 * 2 * 4 * 128 * 2)
