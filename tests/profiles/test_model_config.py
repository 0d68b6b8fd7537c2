"""profiles.model_config on real config.json files (tests/profiles/model_configs/README.md names their source):
weight bytes, KV bytes per token and active parameters checked against hand arithmetic written here, the catalogue's
hand-entered models, published parameter counts, and the refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from planner.physics.networks import target_net, weight_bytes_by_component
from profiles import load_catalog
from profiles.catalog import ProfileError
from profiles.model_config import MAX_CONFIG_BYTES, ModelConfigError, is_config_name, parse_model_config

HERE = Path(__file__).resolve().parent / "model_configs"


def parsed(name: str):
    return parse_model_config((HERE / f"{name}.json").read_bytes())


def weight_bytes(spec, dtype: str) -> float:
    w = weight_bytes_by_component(spec, dtype)
    return w["streamed_dense"] + w["resident_only"] + spec.experts * w["experts_one"]


def test_dense_llama_405b_by_hand():
    p = parsed("meta-llama--Meta-Llama-3.1-405B")
    h, layers, vocab = 16384, 126, 128256
    attn = h * (128 * 128) * 2 + 2 * h * (8 * 128)  # q and o: 128 heads x 128; k and v: 8 KV heads x 128
    mlp = 3 * h * 53248
    total = layers * (attn + mlp) + 2 * vocab * h  # untied: input table + LM head
    assert p.spec.total_params_b * 1e9 == pytest.approx(total, rel=1e-9)
    assert p.spec.active_params_b == p.spec.total_params_b
    assert total / 1e9 == pytest.approx(405.85, rel=0.02)  # the model card's 405B (safetensors: 405.85B)
    assert weight_bytes(p.spec, "bf16") == pytest.approx(2 * total, rel=1e-9)
    assert weight_bytes(p.spec, "fp8") == pytest.approx(total, rel=1e-9)
    # KV: 126 layers x 2 (k, v) x 8 heads x 128 x 2 bytes = 516,096 bytes per token in BF16
    assert target_net(p.spec, "bf16").kv_bytes_per_token == 126 * 2 * 8 * 128 * 2 == 516_096
    assert p.spec.experts == 0 and p.spec.native_methods == () and p.weight_dtype is None
    assert is_config_name(p.spec.name) and p.spec.hf_id == "path/to/your-model"


def test_moe_mla_kimi_k2_by_hand():
    p = parsed("moonshotai--Kimi-K2-Instruct")
    h, heads, vocab = 7168, 64, 163840
    attn = (h * 1536 + 1536 * heads * (128 + 64)  # q_a, q_b (nope + rope per head)
            + h * (512 + 64)  # kv_a: latent + rope key
            + 512 * heads * (128 + 128)  # kv_b: k nope + v per head
            + heads * 128 * h)  # o
    expert = 3 * h * 2048
    dense_mlp = 3 * h * 18432  # first_k_dense_replace: 1 dense layer
    moe_layers = 60
    total = 61 * attn + dense_mlp + moe_layers * ((384 + 1) * expert + h * 384) + 2 * vocab * h
    active = 61 * attn + dense_mlp + moe_layers * ((8 + 1) * expert + h * 384) + 2 * vocab * h
    s = p.spec
    assert s.total_params_b * 1e9 == pytest.approx(total, rel=1e-9)
    assert s.active_params_b * 1e9 == pytest.approx(active, rel=1e-9)
    assert total / 1e12 == pytest.approx(1.04, rel=0.02)  # model card: 1T total (1.04T), 32B active
    assert active / 1e9 == pytest.approx(32.0, rel=0.03)
    assert (s.experts, s.experts_per_token, s.moe_layers) == (384, 8, 60)
    assert s.expert_params_b * 1e9 == pytest.approx(moe_layers * expert, rel=1e-9)
    assert s.attention == "mla" and (s.mla_kv_lora_rank, s.mla_qk_rope_head_dim) == (512, 64)
    assert p.weight_dtype == "fp8"  # quantization_config quant_method fp8 (block 128 x 128)
    assert weight_bytes(s, "fp8") == pytest.approx(total, rel=1e-9)
    # MLA caches the 512 latent + 64 rope key per layer: 61 x 576 x 1 byte in FP8
    assert target_net(s, "fp8").kv_bytes_per_token == 61 * 576 == 35_136
    assert s.native_methods == ()  # num_nextn_predict_layers 0


def test_native_mtp_deepseek_v32_by_hand():
    p = parsed("deepseek-ai--DeepSeek-V3.2")
    h, heads, vocab = 7168, 128, 129280
    attn = h * 1536 + 1536 * heads * 192 + h * 576 + 512 * heads * 256 + heads * 128 * h
    indexer = 1536 * 64 * 128 + h * 128 + h * 64  # DSA lightning indexer: wq_b, wk, weights_proj
    expert = 3 * h * 2048
    total = 61 * (attn + indexer) + 3 * 3 * h * 18432 + 58 * (257 * expert + h * 256) + 2 * vocab * h
    active = 61 * (attn + indexer) + 3 * 3 * h * 18432 + 58 * (9 * expert + h * 256) + 2 * vocab * h
    s = p.spec
    assert s.total_params_b * 1e9 == pytest.approx(total, rel=1e-9)
    assert s.active_params_b * 1e9 == pytest.approx(active, rel=1e-9)
    assert total / 1e9 == pytest.approx(671, rel=0.02)  # model card: 671B without the 14B MTP module
    assert s.native_methods == ("mtp",)  # num_nextn_predict_layers 1
    # KV per token per layer: latent 512 + rope 64 + the indexer's 128 FP8 key bytes as 64 BF16 elements
    assert target_net(s, "bf16").kv_bytes_per_token == 61 * (576 + 64) * 2 == 78_080
    assert weight_bytes(s, "fp8") == pytest.approx(total, rel=1e-9)
    assert any("sparse attention" in n for n in p.notes)


@pytest.mark.parametrize("file,entry", [
    ("meta-llama--Meta-Llama-3.1-8B", "llama-3.1-8b"),
    ("Qwen--Qwen3-32B", "qwen3-32b"),
    ("Qwen--Qwen3-30B-A3B", "qwen3-30b-a3b"),
    ("deepseek-ai--DeepSeek-V3", "deepseek-v3"),
    ("openai--gpt-oss-120b", "gpt-oss-120b"),
    ("openai--gpt-oss-20b", "gpt-oss-20b"),
    ("meta-llama--Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
    # the current models added to models.yaml from these configs
    ("deepseek-ai--DeepSeek-V3.2", "deepseek-v3.2"),
    ("moonshotai--Kimi-K2-Instruct", "kimi-k2"),
    ("Qwen--Qwen3-235B-A22B", "qwen3-235b-a22b"),
    ("Qwen--Qwen3.5-397B-A17B", "qwen3.5-397b-a17b"),
    ("Qwen--Qwen3.5-35B-A3B", "qwen3.5-35b-a3b"),
    ("zai-org--GLM-5", "glm-5"),
    ("MiniMaxAI--MiniMax-M2.5", "minimax-m2.5"),
    ("mistralai--Mixtral-8x7B-v0.1", "mixtral-8x7b"),
])
def test_matches_the_hand_entered_catalogue(file, entry):
    s, ref = parsed(file).spec, load_catalog().models[entry]
    assert s.total_params_b == pytest.approx(ref.total_params_b, rel=0.01)
    # GPT-OSS's model card (and so models.yaml) leaves the input embedding out of its active count
    emb = s.embedding_params_b if entry.startswith("gpt-oss") else 0.0
    assert s.active_params_b - emb == pytest.approx(ref.active_params_b, rel=0.02)
    for f in ("layers", "hidden_size", "heads", "kv_heads", "head_dim", "vocab_size", "experts", "experts_per_token",
              "kv_elements_per_token_per_layer", "tied_embeddings", "attention", "mla_kv_lora_rank",
              "sliding_window_tokens", "sliding_window_layers", "native_methods"):
        assert getattr(s, f) == getattr(ref, f), f
    assert s.expert_params_b == pytest.approx(ref.expert_params_b, rel=0.01)
    assert (s.moe_layers or s.layers) == (ref.moe_layers or ref.layers)


def test_gpt_oss_mxfp4_experts_only():
    p = parsed("openai--gpt-oss-20b")
    assert (p.weight_dtype, p.spec.fp4_scope) == ("mxfp4", "experts")  # modules_to_not_convert: self_attn, router


def test_linear_attention_as_a_window_of_equal_bytes():
    p = parsed("Qwen--Qwen3.5-397B-A17B")
    s = p.spec
    # Gated DeltaNet state per layer: 64 value heads x 128 x 128 in float32 (2 BF16 elements each) + conv state
    # (kernel 4 - 1) x (2 x 16 x 128 + 64 x 128); full layers cache 2 x 2 KV heads x 256 = 1024 elements a token
    state = 64 * 128 * 128 * 2 + 3 * (2 * 16 * 128 + 64 * 128)
    assert s.kv_elements_per_token_per_layer == 1024
    assert (s.sliding_window_layers, s.sliding_window_tokens) == (45, math.ceil(state / 1024))
    assert s.native_methods == ("mtp",)  # mtp_num_hidden_layers 1
    assert s.total_params_b == pytest.approx(397, rel=0.02) and s.active_params_b == pytest.approx(17, rel=0.03)
    assert any("linear attention" in n for n in p.notes) and any("text_config" in n for n in p.notes)


@pytest.mark.parametrize("file,total_b,active_b", [
    ("Qwen--Qwen3-235B-A22B", 235, 22),
    ("mistralai--Mixtral-8x7B-v0.1", 46.7, 12.9),
    ("zai-org--GLM-5", 744, None),
])
def test_published_counts(file, total_b, active_b):
    s = parsed(file).spec
    assert s.total_params_b == pytest.approx(total_b, rel=0.02)
    if active_b is not None:
        assert s.active_params_b == pytest.approx(active_b, rel=0.02)


def test_name_is_the_content_digest_and_dict_input_works():
    raw = (HERE / "meta-llama--Meta-Llama-3.1-8B.json").read_bytes()
    a, b = parse_model_config(raw), parse_model_config(raw + b"\n")
    assert a.spec.name != b.spec.name and a.spec.total_params_b == b.spec.total_params_b
    d = parse_model_config(json.loads(raw))
    assert d.spec.total_params_b == a.spec.total_params_b
    named = parse_model_config({**json.loads(raw), "_name_or_path": "org/My-Model<script>[x](y)"})
    assert named.spec.hf_id == "org/My-Modelscriptxy"  # plain text only


def test_with_models_adds_and_refuses_a_clash():
    cat = load_catalog()
    s = parsed("meta-llama--Meta-Llama-3.1-405B").spec
    cat2 = cat.with_models({s.name: s})
    assert cat2.models[s.name] is s and s.name not in cat.models
    with pytest.raises(ProfileError, match="clashes"):
        cat.with_models({"llama-3.1-8b": s})


BASE = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 1000,
        "intermediate_size": 4096}


@pytest.mark.parametrize("change,pattern", [
    ({"hidden_size": None}, r"field 'hidden_size' = '\(missing\)'"),
    ({"hidden_size": "1024"}, r"field 'hidden_size' = '1024': expected an integer"),
    ({"num_hidden_layers": -1}, r"field 'num_hidden_layers' = -1: expected an integer in \[1,"),
    ({"num_key_value_heads": 16}, r"field 'num_key_value_heads' = 16: expected an integer in \[1, 8\]"),
    ({"layer_types": ["full_attention"] * 3}, r"field 'layer_types' .*expected a list of 4 layer types"),
    ({"layer_types": ["full_attention"] * 3 + ["mamba"]}, r"field 'layer_types\[3\]' = 'mamba': expected one of"),
    ({"hybrid_override_pattern": "M-M-"}, r"field 'hybrid_override_pattern' = 'M-M-': expected at least one attention"),
    ({"moe_latent_size": 1024}, r"field 'moe_latent_size' = 1024: .*latent MoE"),
    ({"is_encoder_decoder": True}, r"field 'is_encoder_decoder' = True: expected false"),
    ({"num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": None},
     r"field 'moe_intermediate_size' = '\(missing\)'"),
    ({"num_experts": 8, "num_experts_per_tok": 9}, r"field 'num_experts_per_tok' = 9: expected an integer in \[1, 8\]"),
    ({"text_config": [1]}, r"field 'text_config' = \[1\]: expected a JSON object"),
])
def test_refusals_name_field_value_and_what_is_supported(change, pattern):
    cfg = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(ModelConfigError, match=pattern):
        parse_model_config(cfg)


def test_the_base_config_parses():
    s = parse_model_config(BASE).spec
    assert s.total_params_b * 1e9 == 4 * (4 * 1024 * 1024 + 3 * 1024 * 4096) + 2 * 1000 * 1024


@pytest.mark.parametrize("data,pattern", [
    (b"{not json", r"field '\(file\)' = 'line 1, column 2"),
    (b"[1, 2]", r"field '\(file\)' = 'list': expected a JSON object"),
    (b"\xff\xfe{}", r"expected UTF-8 JSON text"),
    (b" " * (MAX_CONFIG_BYTES + 1), r"expected a config.json of at most"),
    (b"[" * 100_000 + b"]" * 100_000, r"nested"),
    (b'{"a":' * 50 + b"1" + b"}" * 50, r"nested at most 32 levels"),
    (json.dumps({**BASE, "hidden_size": float("inf")}).encode(), r"field 'hidden_size' = inf: expected an integer"),
    (json.dumps({**BASE, "hidden_size": float("nan")}).encode(), r"field 'hidden_size' = nan: expected an integer"),
    (b'{"hidden_size": ' + b"9" * 5000 + b"}", r"a number too long to read"),
])
def test_bad_files(data, pattern):
    with pytest.raises(ModelConfigError, match=pattern):
        parse_model_config(data)


@pytest.mark.parametrize("q,dtype,scope,note", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8", "linear", None),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4", "linear", None),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "exclude_modules": ["model.layers.*.self_attn*"]}, "nvfp4",
     "experts", None),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}},
     "fp8", "linear", None),
    ({"quant_method": "awq", "bits": 4}, None, "linear", "quant_method_awq"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}},
     None, "linear", "compressed-tensors"),
])
def test_quantization_config(q, dtype, scope, note):
    p = parse_model_config({**BASE, "quantization_config": q})
    assert (p.weight_dtype, p.spec.fp4_scope) == (dtype, scope)
    if note:
        assert any(note in n and "the plan uses the weight format you pick" in n for n in p.notes)
    else:
        assert not any("quantization_config" in n for n in p.notes)
