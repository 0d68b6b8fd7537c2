"""A config.json's decoder stack layer by layer: each layer's token mixer (planner.types.AttentionBlock) and channel
mixer (MlpBlock) with its parameters, KV entry per token and fixed state per sequence, grouped by kind into
LayerGroup records. Parameters are counted as profiles/model_config.py says (norms, biases, rotary tables, SSM
A/D/dt vectors left out).

Three layouts beyond the plain stack:
- Nemotron-H (`hybrid_override_pattern`, transformers' NemotronHConfig): one mixer per layer, M = Mamba-2,
  * = attention, - = MLP, E = MoE; MLPs and experts are relu2 (two matrices, `mlp_hidden_act`).
- Nemotron-NAS (`block_configs`, DeciLM): per layer, attention is GQA with num_attention_heads / n_heads_in_group KV
  heads, a no-op or a hidden x hidden linear; the FFN is a SwiGLU of width ffn_to_width(ffn_mult), a no-op or a
  linear.
- per-layer MoE lists (moe_layer_freq as a list, mlp_only_layers, first_k_dense_replace, decoder_sparse_step) in
  profiles/model_config.py's moe_layer_flags.
"""

from __future__ import annotations

from typing import Any

from planner.types import AttentionBlock, LayerGroup, MlpBlock
from profiles.config_fields import SUPPORTED, Cfg, err, number

PATTERN_CODES = {"M": "Mamba-2", "*": "attention", "-": "MLP", "E": "MoE"}
NAS_ATTENTION_KEYS = ("no_op", "replace_with_linear", "n_heads_in_group")
NAS_FFN_KEYS = ("no_op", "replace_with_linear", "ffn_mult")
# Nemotron-NAS fields that change attention in ways the planner does not model: refused when set.
NAS_UNMODELLED = ("sparsify", "window_length", "num_sink_tokens")
BF16_BYTES = 2


def gqa_block(*, h: int, heads: int, kv_heads: int, head_dim: int, gate: int = 1, window: int = 0) -> AttentionBlock:
    """q (x2 with an output gate), k, v and o projections; 2 x kv_heads x head_dim cached per token."""
    params = h * heads * head_dim * gate + 2 * h * kv_heads * head_dim + heads * head_dim * h
    return AttentionBlock("sliding" if window else "gqa", params, kv_elements_per_token=2 * kv_heads * head_dim,
                          window_tokens=window, heads=heads, kv_heads=kv_heads, head_dim=head_dim)


def dense_mlp(*, h: int, width: int, gated: bool = True) -> MlpBlock:
    params = (3 if gated else 2) * h * width
    return MlpBlock("dense", params, params, width=width, gated=gated)


def moe_mlp(*, h: int, experts: int, top_k: int, width: int, shared_width: int, gated: bool = True) -> MlpBlock:
    """Routed experts of `width`, shared experts of `shared_width` in all, and a hidden x experts router."""
    mats = 3 if gated else 2
    expert, shared, router = mats * h * width, mats * h * shared_width, h * experts
    return MlpBlock("moe", experts * expert + shared + router, top_k * expert + shared + router, width=width,
                    experts=experts, experts_per_token=top_k, shared_width=shared_width, gated=gated,
                    expert_params=expert, shared_params=shared, router_params=router)


def gated_deltanet_block(cfg: Cfg, h: int) -> AttentionBlock:
    """Qwen3-Next / Qwen3.5 linear attention: q, k, v, z and the a, b gates in, a causal convolution over q, k, v,
    out; a fixed state of value heads x key dim x value dim (FP32 when mamba_ssm_dtype says so) and kernel - 1
    columns of convolution state per sequence."""
    nk, nv = cfg.int("linear_num_key_heads", hi=100_000), cfg.int("linear_num_value_heads", hi=100_000)
    dk, dv = cfg.int("linear_key_head_dim", hi=100_000), cfg.int("linear_value_head_dim", hi=100_000)
    kernel = cfg.int("linear_conv_kernel_dim", 4, hi=1_000)
    key_dim, value_dim = nk * dk, nv * dv
    conv_ch = 2 * key_dim + value_dim
    params = h * (2 * key_dim + 2 * value_dim) + h * 2 * nv + conv_ch * kernel + value_dim * h
    state_bytes = nv * dk * dv * (4 if cfg.str("mamba_ssm_dtype") in ("float32", "fp32") else BF16_BYTES)
    state_bytes += (kernel - 1) * conv_ch * BF16_BYTES
    return AttentionBlock("linear", params, state_bytes_per_sequence=state_bytes, heads=nv, kv_heads=nk,
                          head_dim=dk, state_size=dv, conv_kernel=kernel)


def mamba2_block(cfg: Cfg, h: int) -> AttentionBlock:
    """A Mamba-2 mixer (Nemotron-H): in_proj h -> (z, x: d_inner each; B, C: n_groups x d_state each; dt: heads),
    a causal convolution over x, B and C (conv_dim = d_inner + 2 n_groups d_state), out_proj d_inner -> h, with
    d_inner = mamba_num_heads x mamba_head_dim. State per sequence: heads x head_dim x d_state in
    mamba_ssm_cache_dtype (FP32 when it says so, else BF16) + (conv_kernel - 1) x conv_dim in BF16."""
    nh, hd = cfg.int("mamba_num_heads", hi=100_000), cfg.int("mamba_head_dim", hi=100_000)
    ds, ng = cfg.int("ssm_state_size", hi=100_000), cfg.int("n_groups", 1, hi=100_000)
    kernel = cfg.int("conv_kernel", 4, hi=1_000)
    if nh % ng:
        raise err(cfg.where("n_groups"), ng, f"a divisor of mamba_num_heads ({nh})")
    d_inner = nh * hd
    conv_dim = d_inner + 2 * ng * ds
    params = h * (2 * d_inner + 2 * ng * ds + nh) + conv_dim * kernel + d_inner * h
    ssm_bytes = 4 if cfg.str("mamba_ssm_cache_dtype") in ("float32", "fp32") else BF16_BYTES
    state = nh * hd * ds * ssm_bytes + (kernel - 1) * conv_dim * BF16_BYTES
    return AttentionBlock("mamba2", params, state_bytes_per_sequence=state, heads=nh, head_dim=hd, state_size=ds,
                          groups=ng, conv_kernel=kernel)


NO_ATTENTION = AttentionBlock("none", 0)
NO_MLP = MlpBlock("none", 0, 0)


def hybrid_pattern_layers(cfg: Cfg, *, h: int, layers: int, attention: AttentionBlock,
                          moe: MlpBlock | None, dense_width: int) -> tuple[list[AttentionBlock], list[MlpBlock]]:
    """Nemotron-H: one mixer per layer from hybrid_override_pattern."""
    where = cfg.where("hybrid_override_pattern")
    pattern = cfg.c.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != layers:
        raise err(where, pattern, f"a string of {layers} layer codes (num_hidden_layers), each one of "
                  + ", ".join(f"{c} ({w})" for c, w in PATTERN_CODES.items()))
    bad = next((i for i, c in enumerate(pattern) if c not in PATTERN_CODES), None)
    if bad is not None:
        raise err(f"{where}[{bad}]", pattern[bad], "one of " + ", ".join(f"{c} ({w})" for c, w in
                                                                        PATTERN_CODES.items()))
    if "*" not in pattern:
        raise err(where, pattern, f"at least one attention layer (*); {SUPPORTED}")
    if "E" in pattern and moe is None:
        raise err("n_routed_experts", "(missing)", "an integer: the pattern has MoE layers (E)")
    if "-" in pattern and not dense_width:
        raise err("intermediate_size", "(missing)", "an integer (the MLP layers' width): the pattern has '-'")
    gated = cfg.str("mlp_hidden_act") != "relu2"
    mamba = mamba2_block(cfg, h) if "M" in pattern else NO_ATTENTION
    mlp = dense_mlp(h=h, width=dense_width, gated=gated) if "-" in pattern else NO_MLP
    by_code: dict[str, tuple[AttentionBlock, MlpBlock]] = {
        "M": (mamba, NO_MLP), "*": (attention, NO_MLP), "-": (NO_ATTENTION, mlp), "E": (NO_ATTENTION, moe or NO_MLP)}
    return [by_code[c][0] for c in pattern], [by_code[c][1] for c in pattern]


def ffn_to_width(ffn_mult: float, h: int) -> int:
    """Nemotron-NAS FFN width: int(2 ffn_mult h / 3) rounded up to a multiple of 256 (DeciLM's
    _ffn_mult_to_intermediate_size; Llama-3.3-Nemotron-Super-49B: 5.25 x 8192 -> 28,672)."""
    width = int(2 * ffn_mult * h / 3)
    return -(-width // 256) * 256


def _flag(block: dict[str, Any], key: str, where: str) -> bool:
    v = block.get(key, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise err(f"{where}.{key}", v, "true or false")
    return v


def nas_layers(cfg: Cfg, *, h: int, heads: int, head_dim: int,
               layers: int) -> tuple[list[AttentionBlock], list[MlpBlock]]:
    """Nemotron-NAS: block_configs, one entry per layer."""
    where = cfg.where("block_configs")
    blocks = cfg.c.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != layers:
        raise err(where, blocks, f"a list of {layers} layer configs (num_hidden_layers)")
    attn_out: list[AttentionBlock] = []
    mlp_out: list[MlpBlock] = []
    for i, block in enumerate(blocks):
        here = f"{where}[{i}]"
        if not isinstance(block, dict):
            raise err(here, block, "a JSON object with 'attention' and 'ffn'")
        a, f = block.get("attention"), block.get("ffn")
        if not isinstance(a, dict):
            raise err(f"{here}.attention", a, "a JSON object (" + ", ".join(NAS_ATTENTION_KEYS) + ")")
        if not isinstance(f, dict):
            raise err(f"{here}.ffn", f, "a JSON object (" + ", ".join(NAS_FFN_KEYS) + ")")
        for key in NAS_UNMODELLED:
            if a.get(key) not in (None, False):
                raise err(f"{here}.attention.{key}", a[key], f"null: this attention variant is not modelled; "
                          f"{SUPPORTED}")
        attn: AttentionBlock
        mlp: MlpBlock  # replace_with_linear: one hidden x hidden projection in place of the block
        if _flag(a, "no_op", f"{here}.attention"):
            attn = NO_ATTENTION
        elif _flag(a, "replace_with_linear", f"{here}.attention"):
            attn = AttentionBlock("linear_replacement", h * h)
        else:
            group = number(a.get("n_heads_in_group"), f"{here}.attention.n_heads_in_group", lo=1, hi=heads)
            if heads % group:
                raise err(f"{here}.attention.n_heads_in_group", group,
                          f"a divisor of num_attention_heads ({heads})")
            attn = gqa_block(h=h, heads=heads, kv_heads=heads // group, head_dim=head_dim)
        if _flag(f, "no_op", f"{here}.ffn"):
            mlp = NO_MLP
        elif _flag(f, "replace_with_linear", f"{here}.ffn"):
            mlp = MlpBlock("linear_replacement", h * h, h * h)
        else:
            mult = number(f.get("ffn_mult"), f"{here}.ffn.ffn_mult", lo=0.001, hi=1_000, integer=False)
            width = ffn_to_width(mult, h)
            mlp = dense_mlp(h=h, width=width)
        attn_out.append(attn)
        mlp_out.append(mlp)
    return attn_out, mlp_out


def group_layers(attention: list[AttentionBlock], mlp: list[MlpBlock]) -> tuple[LayerGroup, ...]:
    """Layers of the same (attention, mlp) kind counted together, in order of first appearance."""
    counts: dict[tuple[AttentionBlock, MlpBlock], int] = {}
    for pair in zip(attention, mlp, strict=True):
        counts[pair] = counts.get(pair, 0) + 1
    return tuple(LayerGroup(n, a, m) for (a, m), n in counts.items())


def stand_in_window(groups: tuple[LayerGroup, ...], kv_elements: int) -> tuple[int, int, int]:
    """(layers without a KV cache, their fixed state in bytes per sequence, the window in tokens whose BF16 KV holds
    as many bytes in those layers together: at least 1)."""
    layers = sum(g.count for g in groups if not g.attention.kv_elements_per_token)
    state = sum(g.count * g.attention.state_bytes_per_sequence for g in groups)
    if not layers:
        return 0, state, 0
    return layers, state, max(1, -(-state // (BF16_BYTES * layers * kv_elements)))
