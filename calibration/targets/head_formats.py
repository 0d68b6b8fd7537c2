"""Config and random weights of cost-only speculative heads and of a tiny MTP target, in the layouts the
pinned vLLM loads: pure functions of (kind, the target's config.json, seed), so any node can build the head
for any Llama-like target from its config alone (never its weights).

Formats, from vLLM's own model files:
    eagle3  vllm/model_executor/models/llama_eagle3.py (Eagle3LlamaForCausalLM): architecture
            "LlamaForCausalLMEagle3"; one decoder layer stored as `midlayer.*` whose q/k/v projections read
            [embedding, hidden] (2 x hidden); `hidden_norm`; `fc` over 3 target hidden states (3 x hidden ->
            hidden); `norm`; its own `lm_head` over a draft vocabulary with `d2t` (draft id -> target id
            offset: target = draft + d2t[draft]) and `t2d` (a mask over the target vocabulary, skipped by
            vLLM but part of the format); `mask_hidden` and `ptd_token_id` for parallel drafting
            (vllm/v1/spec_decode/llm_base_proposer.py), ignored otherwise.
    eagle   vllm/model_executor/models/llama_eagle.py (EagleLlamaForCausalLM, from "LlamaForCausalLM" by
            vllm/transformers_utils/configs/eagle.py): `fc` over [embedding, hidden] (2 x hidden -> hidden,
            no bias), `layers.0.*` without input_layernorm; embeddings and LM head shared with the target.
    medusa  vllm/model_executor/models/medusa.py + vllm/transformers_utils/configs/medusa.py: `num_heads`
            residual blocks `blocks.{h}.layers.0.weight` (hidden x hidden, no bias) and `lm_heads.{h}.weight`.
    MTP     vllm/model_executor/models/mimo.py and mimo_mtp.py: a Qwen2-layout "MiMoForCausalLM" with
            `num_nextn_predict_layers` MTP layers stored as `model.mtp_layers.{i}.*` (token/hidden layernorms,
            `input_proj` over [hidden, embedding], one decoder layer, `final_layernorm`).

torch is imported only inside the weight builders.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

KINDS: tuple[str, ...] = ("eagle3", "eagle", "medusa")
FORMAT_VERSION = 1  # bump when a builder's output changes: it is part of the cache key
DEFAULT_SEED = 0
INIT_STD = 0.02
EAGLE3_DRAFT_VOCAB = 32000
MEDUSA_HEADS = 5
# The tiny MTP target: SmolLM2's vocabulary and width, a few Qwen2-layout layers (cheap on CPU).
MTP_LAYERS = 4
MTP_INTERMEDIATE = 1536
MTP_HEADS = 9
MTP_KV_HEADS = 3
MTP_NEXTN_LAYERS = 1
_ROPE_KEYS = ("rope_parameters", "rope_theta", "rope_scaling")
_COPIED_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "max_position_embeddings", "hidden_act")


def _int_field(cfg: dict[str, Any], key: str, default: int | None = None) -> int:
    v = cfg.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"target config.json field={key!r} value={v!r} not allowed: a positive integer")
    return v


def target_shapes(cfg: Any) -> dict[str, Any]:
    """The fields a head needs from a Llama-like HF config.json, validated; an error names field and value."""
    if not isinstance(cfg, dict):
        raise ValueError(f"target config.json value={type(cfg).__name__} not allowed: a JSON object")
    hidden = _int_field(cfg, "hidden_size")
    heads = _int_field(cfg, "num_attention_heads")
    if "head_dim" not in cfg and hidden % heads:
        raise ValueError(f"target config.json field='num_attention_heads' value={heads!r} not allowed: "
                         f"without head_dim it must divide hidden_size={hidden}")
    kv = _int_field(cfg, "num_key_value_heads", heads)
    if heads % kv:
        raise ValueError(f"target config.json field='num_key_value_heads' value={kv!r} not allowed: must divide "
                         f"num_attention_heads={heads}")
    eps = cfg.get("rms_norm_eps", 1e-6)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < 1:
        raise ValueError(f"target config.json field='rms_norm_eps' value={eps!r} not allowed: a number in (0, 1)")
    return {
        "hidden_size": hidden,
        "intermediate_size": _int_field(cfg, "intermediate_size"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": _int_field(cfg, "head_dim", hidden // heads),
        "vocab_size": _int_field(cfg, "vocab_size"),
        "rms_norm_eps": float(eps),
        "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", False)),
    }


def check_head_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} not allowed; head kinds: {KINDS}")
    return kind


def _check_heads(num_heads: Any) -> int:
    if not isinstance(num_heads, int) or isinstance(num_heads, bool) or not 1 <= num_heads <= 16:
        raise ValueError(f"num_heads={num_heads!r} not allowed: an integer in 1..16")
    return num_heads


def _check_layers(layers: Any) -> int:
    if not isinstance(layers, int) or isinstance(layers, bool) or not 1 <= layers <= 64:
        raise ValueError(f"layers={layers!r} not allowed: an integer in 1..64")
    return layers


def _llama_layer_config(target: dict[str, Any], shapes: dict[str, Any]) -> dict[str, Any]:
    cfg = {k: shapes[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                  "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps")}
    cfg.update({k: target[k] for k in _ROPE_KEYS + _COPIED_KEYS if k in target})
    cfg.setdefault("hidden_act", "silu")
    cfg.update({"model_type": "llama", "num_hidden_layers": 1, "attention_bias": False, "mlp_bias": False,
                "tie_word_embeddings": False, "torch_dtype": "bfloat16"})
    return cfg


def head_config(*, kind: str, target_config: dict[str, Any], num_heads: int = MEDUSA_HEADS) -> dict[str, Any]:
    """The head's config.json for `kind` built on the target's config.json."""
    check_head_kind(kind)
    shapes = target_shapes(target_config)
    if kind == "medusa":
        return {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": shapes["hidden_size"],
                "vocab_size": shapes["vocab_size"], "truncated_vocab_size": shapes["vocab_size"],
                "num_heads": _check_heads(num_heads), "num_hidden_layers": 1, "torch_dtype": "bfloat16"}
    cfg = _llama_layer_config(target_config, shapes)
    if kind == "eagle":
        cfg["architectures"] = ["LlamaForCausalLM"]
        return cfg
    cfg["architectures"] = ["LlamaForCausalLMEagle3"]
    cfg["draft_vocab_size"] = min(EAGLE3_DRAFT_VOCAB, shapes["vocab_size"])
    cfg["target_hidden_size"] = shapes["hidden_size"]
    # Parallel drafting (P-EAGLE) fills masked slots with this token id (and `mask_hidden`).
    pad = target_config.get("pad_token_id")
    cfg["ptd_token_id"] = pad if isinstance(pad, int) and 0 <= pad < shapes["vocab_size"] else 0
    return cfg


def cache_key(*, kind: str, target_config: dict[str, Any], seed: int = DEFAULT_SEED,
              num_heads: int = MEDUSA_HEADS) -> str:
    """12 hex digits: the kind, the target's config.json (canonical JSON), the seed, the head count and the
    builder's format version; equal keys mean byte-equal builds."""
    blob = json.dumps({"kind": check_head_kind(kind), "target": target_config, "seed": seed,
                       "num_heads": num_heads if kind == "medusa" else None, "format": FORMAT_VERSION},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _shapes_llama_layer(prefix: str, shapes: dict[str, Any], qkv_in: int, *, input_norm: bool,
                        qkv_bias: bool = False) -> dict[str, tuple[int, ...]]:
    h, hd = shapes["hidden_size"], shapes["head_dim"]
    q, kv, inter = shapes["num_attention_heads"] * hd, shapes["num_key_value_heads"] * hd, shapes["intermediate_size"]
    out = {
        f"{prefix}self_attn.q_proj.weight": (q, qkv_in),
        f"{prefix}self_attn.k_proj.weight": (kv, qkv_in),
        f"{prefix}self_attn.v_proj.weight": (kv, qkv_in),
        f"{prefix}self_attn.o_proj.weight": (h, q),
        f"{prefix}mlp.gate_proj.weight": (inter, h),
        f"{prefix}mlp.up_proj.weight": (inter, h),
        f"{prefix}mlp.down_proj.weight": (h, inter),
        f"{prefix}post_attention_layernorm.weight": (h,),
    }
    if input_norm:
        out[f"{prefix}input_layernorm.weight"] = (h,)
    if qkv_bias:
        out.update({f"{prefix}self_attn.q_proj.bias": (q,), f"{prefix}self_attn.k_proj.bias": (kv,),
                    f"{prefix}self_attn.v_proj.bias": (kv,)})
    return out


def head_weight_shapes(*, kind: str, target_config: dict[str, Any],
                       num_heads: int = MEDUSA_HEADS) -> dict[str, tuple[int, ...]]:
    """Checkpoint tensor name -> shape for the floating-point weights of `kind` (d2t/t2d excluded)."""
    check_head_kind(kind)
    s = target_shapes(target_config)
    h, vocab = s["hidden_size"], s["vocab_size"]
    if kind == "medusa":
        out: dict[str, tuple[int, ...]] = {}
        for i in range(_check_heads(num_heads)):
            out[f"blocks.{i}.layers.0.weight"] = (h, h)
            out[f"lm_heads.{i}.weight"] = (vocab, h)
        return out
    if kind == "eagle":
        out = _shapes_llama_layer("layers.0.", s, h, input_norm=False)
        out["fc.weight"] = (h, 2 * h)
        return out
    out = _shapes_llama_layer("midlayer.", s, 2 * h, input_norm=True)
    out.update({"midlayer.hidden_norm.weight": (h,), "fc.weight": (h, 3 * h), "norm.weight": (h,),
                "lm_head.weight": (min(EAGLE3_DRAFT_VOCAB, vocab), h), "mask_hidden": (1, 3 * h)})
    return out


def _random_tensors(shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, Any]:
    """Norm weights 1, everything else N(0, INIT_STD^2), drawn in sorted-name order from one seeded generator."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name in sorted(shapes):
        shape = shapes[name]
        if "norm" in name:
            t = torch.ones(shape, dtype=torch.float32)
        elif name.endswith(".bias"):
            t = torch.zeros(shape, dtype=torch.float32)
        else:
            t = torch.randn(shape, generator=gen, dtype=torch.float32) * INIT_STD
        out[name] = t.to(torch.bfloat16).contiguous()
    return out


def head_weights(*, kind: str, target_config: dict[str, Any], seed: int = DEFAULT_SEED,
                 num_heads: int = MEDUSA_HEADS) -> dict[str, Any]:
    """Checkpoint name -> torch tensor (bf16; d2t int64, t2d bool) for a random head of `kind`."""
    import torch

    shapes = head_weight_shapes(kind=kind, target_config=target_config, num_heads=num_heads)
    out = _random_tensors(shapes, seed)
    if kind == "eagle3":
        vocab = target_shapes(target_config)["vocab_size"]
        draft_vocab = min(EAGLE3_DRAFT_VOCAB, vocab)
        # The draft vocabulary is the target's first `draft_vocab` ids: d2t offsets are all 0.
        out["d2t"] = torch.zeros(draft_vocab, dtype=torch.int64)
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[:draft_vocab] = True
        out["t2d"] = t2d
    return out


# ---- the tiny MTP target ---------------------------------------------------------------------------------
def mtp_target_config(*, base_config: dict[str, Any], layers: int = MTP_LAYERS) -> dict[str, Any]:
    """A MiMo-architecture (Qwen2 layout) config with one MTP layer, on the base model's vocabulary/width."""
    s = target_shapes(base_config)
    cfg = {
        "architectures": ["MiMoForCausalLM"], "model_type": "qwen2",
        "hidden_size": s["hidden_size"], "intermediate_size": MTP_INTERMEDIATE,
        "num_attention_heads": MTP_HEADS, "num_key_value_heads": MTP_KV_HEADS,
        "head_dim": s["hidden_size"] // MTP_HEADS, "num_hidden_layers": _check_layers(layers),
        "vocab_size": s["vocab_size"], "rms_norm_eps": 1e-6, "hidden_act": "silu",
        "max_position_embeddings": 8192, "rope_theta": 10000.0, "use_sliding_window": False,
        "sliding_window": None, "max_window_layers": layers, "attention_dropout": 0.0,
        "tie_word_embeddings": False, "num_nextn_predict_layers": MTP_NEXTN_LAYERS, "torch_dtype": "bfloat16",
    }
    cfg.update({k: base_config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in base_config})
    return cfg


def mtp_weight_shapes(*, config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    s = target_shapes(config)
    h, vocab = s["hidden_size"], s["vocab_size"]
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,),
                                       "lm_head.weight": (vocab, h)}
    for i in range(config["num_hidden_layers"]):
        out.update(_shapes_llama_layer(f"model.layers.{i}.", s, h, input_norm=True, qkv_bias=True))
    for i in range(config["num_nextn_predict_layers"]):
        p = f"model.mtp_layers.{i}."
        out.update(_shapes_llama_layer(p, s, h, input_norm=True, qkv_bias=True))
        out.update({f"{p}token_layernorm.weight": (h,), f"{p}hidden_layernorm.weight": (h,),
                    f"{p}input_proj.weight": (h, 2 * h), f"{p}final_layernorm.weight": (h,)})
    return out


def mtp_weights(*, config: dict[str, Any], seed: int = DEFAULT_SEED) -> dict[str, Any]:
    return _random_tensors(mtp_weight_shapes(config=config), seed)
