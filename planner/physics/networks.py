"""The networks the roofline reads: a target model or a draft as a `Net` of byte and FLOP counts in given weight
and KV-cache formats, and what they hold in memory (resident and per-replica weights, KV cache per sequence).
Vectorised: every field may be a numpy array (planner.physics.roofline.stack puts records on an axis).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from planner.types import BYTES_PER_PARAM, KV_CACHE_DTYPES, Method, ModelSpec

GB = 1e9
# Parameters of one dense decoder layer ~ 12 * hidden^2 (attention 4h^2 + gated MLP ~8h^2);
# see Kaplan et al. 2020, eq. 2.1 (non-embedding params = 12 * n_layer * d_model^2).
PARAMS_PER_LAYER_PER_HIDDEN_SQ = 12.0
ACT_BYTES = 2.0  # bf16 activations in all-reduces


@dataclass(frozen=True)
class Net:
    """A network as the roofline sees it; every field may be a numpy array (broadcast together)."""

    dense_weight_bytes: np.ndarray | float  # read every step whatever the routing
    expert_bytes: np.ndarray | float  # one routed expert summed over its layers
    experts: np.ndarray | float  # routed experts per layer (0: dense)
    experts_per_token: np.ndarray | float
    active_params: np.ndarray | float  # params multiplied per token (FLOPs = 2 * this)
    attn_dim: np.ndarray | float  # sum over layers of heads * head_dim (attention FLOPs)
    kv_bytes_per_token: np.ndarray | float  # KV cache bytes per token of context
    layers: np.ndarray | float  # all-reduces under tensor parallel
    hidden_size: np.ndarray | float
    # Memory and format terms; the defaults reproduce the first planner's numbers (one roofline, plain GQA).
    kv_shards: np.ndarray | float = np.inf  # ways the KV cache splits under TP (GQA: kv_heads; MLA: 1)
    window_tokens: np.ndarray | float = 0.0  # sliding window of the windowed layers, tokens
    window_layer_share: np.ndarray | float = 0.0  # share of layers that attend within the window
    decode_attn_flop_factor: np.ndarray | float = 1.0  # decode attention FLOPs / (4 * attn_dim) per ctx token
    resident_only_bytes: np.ndarray | float = 0.0  # resident but not streamed (untied input embedding)
    moe_layers: np.ndarray | float = 0.0  # layers with routed experts (per-expert kernel cost)
    expert_params: np.ndarray | float = 0.0  # one routed expert summed over its layers (grouped-GEMM FLOPs)
    # Draft heads only: a projection run once per speculative step over the verified tokens
    # (EAGLE-3's fusion of three target hidden states, 3h x h), outside the per-pass network.
    fusion_weight_bytes: np.ndarray | float = 0.0
    fusion_params: np.ndarray | float = 0.0
    # The output vocabulary a target's sampler works over (planner.physics.serving.sampler_time_s); 0 for a draft head.
    vocab_size: np.ndarray | float = 0.0
    # Fixed recurrent state a sequence holds (linear attention, Mamba-2), bytes over the replica, and the share of
    # layers whose window stands in for it in the reads (ModelSpec.state_window_layers): memory charges the state
    # itself for those layers (kv_cache_bytes_per_sequence).
    state_bytes_per_sequence: np.ndarray | float = 0.0
    state_layer_share: np.ndarray | float = 0.0
    # Layers whose attention is an MLA block and their query heads (planner.physics.roofline.mla_kernel_time_s: the
    # block's kernel costs beyond its roofline, timed from the measured MLA decode module); 0 for GQA.
    mla_layers: np.ndarray | float = 0.0
    mla_heads: np.ndarray | float = 0.0

    def scaled(self, factor: np.ndarray | float) -> Net:
        """The same network repeated `factor` times (MEDUSA: one head per draft position)."""
        return replace(
            self,
            dense_weight_bytes=np.asarray(self.dense_weight_bytes) * factor,
            active_params=np.asarray(self.active_params) * factor,
        )


def stack(records: list, shape_axis: int = 0, ndim: int = 1):
    """Stack a list of Net or HwParams into one whose fields are arrays along `shape_axis` of `ndim`."""
    cls = type(records[0])
    out = {}
    for f in fields(cls):
        arr = np.array([np.asarray(getattr(r, f.name), float) for r in records])
        shape = [1] * ndim
        shape[shape_axis] = len(records)
        out[f.name] = arr.reshape(shape)
    return cls(**out)


def default_kv_dtype(weight_dtype: str) -> str:
    """The KV-cache dtype when none is chosen: an fp8 cache with fp8 weights (what the first planner
    assumed), BF16 otherwise (vLLM's `--kv-cache-dtype auto` for BF16 and 4-bit checkpoints)."""
    return "fp8" if weight_dtype == "fp8" else "bf16"


def _kv_bytes_per_element(kv_dtype: str) -> float:
    if kv_dtype not in KV_CACHE_DTYPES:
        raise ValueError(f"kv_dtype={kv_dtype!r} is not allowed: one of {', '.join(KV_CACHE_DTYPES)}")
    return BYTES_PER_PARAM[kv_dtype]


def mla_decode_attn_flop_factor(model: ModelSpec) -> float:
    """Absorbed-MLA decode attention FLOPs per context token relative to 4 * heads * head_dim.

    With W_UK absorbed into the query and W_UV applied after attention (DeepSeek-V2 paper, arXiv
    2405.04434, section 2.1.3; vLLM's MLA decode path), each head scores against the whole latent:
    QK^T is 2 * (kv_lora_rank + rope_dim) FLOPs and AV is 2 * kv_lora_rank per head per context token.
    DeepSeek-V3 (512 + 64, head_dim 192): (2 * 576 + 2 * 512) / (4 * 192) = 2.83. 1.0 for GQA.
    """
    if model.attention != "mla" or model.mla_kv_lora_rank <= 0:
        return 1.0
    r, rope = model.mla_kv_lora_rank, model.mla_qk_rope_head_dim
    return (2.0 * (r + rope) + 2.0 * r) / (4.0 * model.head_dim)


def kv_shards(model: ModelSpec) -> float:
    """Ways the KV cache splits across tensor-parallel ranks: GQA splits by KV head (a rank holds
    kv_heads / tp of them, replicated once tp > kv_heads); vLLM keeps MLA's single latent on every rank
    (DeepSeek-V3: 576 values x 61 layers per token on every GPU)."""
    return 1.0 if model.attention == "mla" else float(model.kv_heads)


def weight_bytes_by_component(model: ModelSpec, dtype: str = "bf16") -> dict[str, float]:
    """Weight bytes per component: {"streamed_dense", "experts_one", "resident_only"}.

    - bf16 / fp8: every weight in that format (ModelOpt/compressed-tensors FP8 checkpoints quantise the
      LM head too in the planner's simplification, as the first planner did).
    - nvfp4 / mxfp4: embeddings and LM head stay BF16; routed experts take the 4-bit format; the other
      linear layers take it when model.fp4_scope == "linear" and stay BF16 when it is "experts" (the
      GPT-OSS MXFP4 checkpoint quantises only the MoE experts: openai/gpt-oss-120b model card).
    - Untied embeddings: the input table is gathered (batch rows a step), so it is resident but not
      streamed; the LM head is streamed. Tied: one table, streamed as the LM head.
    """
    bpp = BYTES_PER_PARAM[dtype]
    four_bit = dtype in ("nvfp4", "mxfp4")
    emb_bpp = BYTES_PER_PARAM["bf16"] if four_bit else bpp
    other_bpp = bpp if (not four_bit or model.fp4_scope == "linear") else BYTES_PER_PARAM["bf16"]
    emb = model.embedding_params_b * 1e9
    tables = 1.0 if model.tied_embeddings else 2.0
    dense_non_emb = max(model.dense_params_b * 1e9 - tables * emb, 0.0)
    return {
        "streamed_dense": dense_non_emb * other_bpp + emb * emb_bpp,
        "experts_one": model.expert_params_b * 1e9 * bpp,
        "resident_only": 0.0 if model.tied_embeddings else emb * emb_bpp,
    }


def target_net(model: ModelSpec, dtype: str = "bf16", *, kv_dtype: str | None = None) -> Net:
    """The target network in weight format `dtype` with a KV cache in `kv_dtype` (default: see
    default_kv_dtype)."""
    kv_bpe = _kv_bytes_per_element(kv_dtype or default_kv_dtype(dtype))
    w = weight_bytes_by_component(model, dtype)
    # An embedding gather costs no FLOPs: drop the input table of an untied model from the GEMM params.
    active = model.active_params_b * 1e9 - (0.0 if model.tied_embeddings else model.embedding_params_b * 1e9)
    return Net(
        dense_weight_bytes=w["streamed_dense"],
        expert_bytes=w["experts_one"],
        experts=float(model.experts),
        experts_per_token=float(model.experts_per_token),
        active_params=active,
        attn_dim=float(model.layers * model.heads * model.head_dim),
        kv_bytes_per_token=float(model.layers * model.kv_elements_per_token_per_layer) * kv_bpe,
        layers=float(model.layers),
        hidden_size=float(model.hidden_size),
        kv_shards=kv_shards(model),
        window_tokens=float(model.sliding_window_tokens),
        window_layer_share=model.sliding_window_layers / model.layers if model.sliding_window_tokens else 0.0,
        decode_attn_flop_factor=mla_decode_attn_flop_factor(model),
        resident_only_bytes=w["resident_only"],
        moe_layers=float(model.moe_layers or model.layers) if model.experts else 0.0,
        expert_params=model.expert_params_b * 1e9,
        vocab_size=float(model.vocab_size),
        state_bytes_per_sequence=float(model.state_bytes_per_sequence),
        state_layer_share=model.state_window_layers / model.layers if model.sliding_window_tokens else 0.0,
        mla_layers=float(model.layers) if model.attention == "mla" else 0.0,
        mla_heads=float(model.heads) if model.attention == "mla" else 0.0,
    )


def head_net(method: Method, model: ModelSpec, dtype: str = "bf16", *, kv_dtype: str | None = None) -> Net:
    """One draft pass of a head (EAGLE-3, P-EAGLE, MEDUSA) or a native module (MTP) attached to `model`.

    - Heads (sequential_head, parallel_head) are dense: draft_layers * 12 h^2 parameters (Kaplan et al. 2020,
      eq. 2.1), plus the LM head over the draft vocabulary (EAGLE-3: 32k tokens, vocab * h; EAGLE-1/2 and MEDUSA:
      the target's full vocabulary) read once per pass when the method reads it, plus draft_pass_fc_inputs h^2 of
      a projection run on every pass (EAGLE-1/2: fc over [token embedding; hidden], 2h -> h; vLLM
      llama_eagle.py). EAGLE-3 fuses three target hidden states (low, middle, high layers) with one
      3h -> h projection once per speculative step over the verified tokens (vLLM's EAGLE proposer,
      combine_hidden_states), not once per pass: it is the net's fusion_* fields (draft_fusion_inputs h^2),
      timed by fusion_time_s. Heads ship in BF16 beside a 4-bit target (and in the target's bf16 / fp8).
    - A native module (DeepSeek-V3 MTP: arXiv 2412.19437 section 2.2) is one decoder layer of the model itself
      per draft_layers, routed experts included, plus its projection of [embedding; hidden] (2h -> h, eh_proj),
      and the model's shared LM head over the full vocabulary. Per-layer weights are the model's non-embedding
      dense weights / layers and one routed expert / MoE layers, in the model's weight format.
    The head's attention has the target's structure (GQA or MLA, windows excepted).
    """
    kv_bpe = _kv_bytes_per_element(kv_dtype or default_kv_dtype(dtype))
    h = float(model.hidden_size)
    vocab = method.draft_vocab or model.vocab_size
    lm_head_params = vocab * h if method.draft_reads_lm_head else 0.0
    kv_layers = method.draft_kv_layers
    fusion_params = float(method.draft_fusion_inputs) * h * h
    mla_module = method.drafting == "native_module" and model.attention == "mla"
    if method.drafting == "native_module":
        emb = model.embedding_params_b * 1e9
        tables = 1.0 if model.tied_embeddings else 2.0
        moe_layers = float(model.moe_layers or model.layers) if model.experts else 0.0
        layer_dense = max(model.dense_params_b * 1e9 - tables * emb, 0.0) / model.layers
        layer_expert = model.expert_params_b * 1e9 / moe_layers if moe_layers else 0.0
        module_dense = method.draft_layers * (layer_dense + 2.0 * h * h)  # + eh_proj [emb; hidden] -> h
        dense_bytes = module_dense * _linear_bpp(model, dtype) + lm_head_params * _emb_bpp(dtype)
        dense_params = module_dense + lm_head_params
        expert_params = layer_expert * method.draft_layers
        expert_bytes = expert_params * BYTES_PER_PARAM[dtype]
        experts = float(model.experts)
        active_params = dense_params + model.experts_per_token * expert_params
        fusion_bytes = 0.0
        fusion_params = 0.0
    else:
        if method.drafting == "block_parallel":
            # DFlash / DSpark: each verified token's fused target hidden state is projected to K/V for every draft
            # layer once per step (vLLM qwen3_dflash.py precompute_and_store_context_kv): draft_layers * (K and V
            # widths) * h more parameters on the fusion's GEMM over the verified tokens
            fusion_params += method.draft_layers * float(model.kv_elements_per_token_per_layer) * h
        head_bpp = BYTES_PER_PARAM[dtype] if dtype in ("bf16", "fp8") else BYTES_PER_PARAM["bf16"]
        # EAGLE-1/2: the fc over [token embedding; hidden] (2h -> h) runs on every pass, inside the per-pass network
        pass_fc_params = float(method.draft_pass_fc_inputs) * h * h
        dense_params = method.draft_layers * PARAMS_PER_LAYER_PER_HIDDEN_SQ * h * h + pass_fc_params + lm_head_params
        dense_bytes = dense_params * head_bpp
        fusion_bytes = fusion_params * head_bpp
        active_params = dense_params
        expert_bytes = expert_params = experts = 0.0
    return Net(
        dense_weight_bytes=dense_bytes,
        expert_bytes=expert_bytes,
        experts=experts,
        experts_per_token=float(model.experts_per_token) if experts else 0.0,
        active_params=active_params,
        attn_dim=float(kv_layers * model.heads * model.head_dim),
        kv_bytes_per_token=float(kv_layers * model.kv_elements_per_token_per_layer) * kv_bpe,
        layers=float(max(method.draft_layers, 1.0)),
        hidden_size=h,
        kv_shards=kv_shards(model),
        decode_attn_flop_factor=mla_decode_attn_flop_factor(model),
        moe_layers=float(max(method.draft_layers, 1.0)) if experts else 0.0,
        expert_params=expert_params,
        fusion_weight_bytes=fusion_bytes,
        fusion_params=fusion_params,
        # a native module is a decoder layer of the model itself, MLA block included; heads are GQA-style layers
        mla_layers=float(method.draft_layers) if mla_module else 0.0,
        mla_heads=float(model.heads) if mla_module else 0.0,
    )


def _linear_bpp(model: ModelSpec, dtype: str) -> float:
    """Bytes per non-expert linear parameter: 4-bit formats quantise them only when model.fp4_scope is
    "linear" (weight_bytes_by_component)."""
    if dtype in ("nvfp4", "mxfp4") and model.fp4_scope != "linear":
        return BYTES_PER_PARAM["bf16"]
    return BYTES_PER_PARAM[dtype]


def _emb_bpp(dtype: str) -> float:
    """Bytes per embedding / LM-head parameter: BF16 beside 4-bit formats (weight_bytes_by_component)."""
    return BYTES_PER_PARAM["bf16"] if dtype in ("nvfp4", "mxfp4") else BYTES_PER_PARAM[dtype]


def null_net() -> Net:
    """n-gram drafting: nothing runs on the accelerator."""
    z = 0.0
    return Net(z, z, z, z, z, z, z, z, z)


def effective_context_tokens(net: Net, context_tokens: np.ndarray | float) -> np.ndarray:
    """Context tokens a layer attends to, averaged over layers.

    Sliding-window layers attend to min(context, window) tokens (GPT-OSS: 18 of 36 layers, 128 tokens;
    openai/gpt-oss-120b config.json `sliding_window`, `layer_types`); vLLM's sliding-window KV manager
    keeps only the window for those layers, so KV memory and KV reads both follow this:
        ctx_eff = (1 - share) * ctx + share * min(ctx, window)
    """
    ctx = np.asarray(context_tokens, float)
    share = np.asarray(net.window_layer_share, float)
    window = np.asarray(net.window_tokens, float)
    windowed = np.where(window > 0, np.minimum(ctx, window), ctx)
    return (1.0 - share) * ctx + share * windowed


def kv_read_bytes_per_gpu(
    net: Net, *, batch: np.ndarray | float, context_tokens: np.ndarray | float, tp: np.ndarray | float = 1
) -> np.ndarray:
    """KV-cache bytes one GPU reads in a decode step: batch * ctx_eff * kv_bytes_per_token / min(tp, shards).

    GQA splits the cache by KV head (kv_shards = kv_heads); MLA's latent is replicated on every rank
    (kv_shards = 1: vLLM's MLA backends), so TP does not divide
    its read. A sequence's n verify tokens share one read of its KV.
    """
    split = np.minimum(np.asarray(tp, float), np.asarray(net.kv_shards, float))
    return (np.asarray(batch, float) * effective_context_tokens(net, context_tokens)
            * np.asarray(net.kv_bytes_per_token, float) / split)


def kv_cache_bytes_per_sequence(
    net: Net, *, sequence_tokens: np.ndarray | float, tp: np.ndarray | float = 1
) -> np.ndarray:
    """KV memory one sequence holds summed over the replica's tp GPUs, bytes:
        ctx_eff(tokens) * kv_bytes_per_token * tp / min(tp, kv_shards)
    (GQA: kv_bytes_per_token while tp <= kv_heads; MLA: tp copies of the latent). Pass it to max_batch.
    DeepSeek-V3 in an fp8 cache: 61 x 576 B = 35,136 B per token on each of the 8 GPUs at TP8.
    Layers with a fixed state (linear attention, Mamba-2) stand in the reads as windowed layers; here their window
    is taken out and the state itself is charged, state_bytes_per_sequence over the replica (split by heads)."""
    tp = np.asarray(tp, float)
    split = np.minimum(tp, np.asarray(net.kv_shards, float))
    tokens = np.asarray(sequence_tokens, float)
    window = np.asarray(net.window_tokens, float)
    stand_in = np.asarray(net.state_layer_share, float) * np.where(window > 0, np.minimum(tokens, window), 0.0)
    return ((effective_context_tokens(net, tokens) - stand_in) * np.asarray(net.kv_bytes_per_token, float)
            * tp / split + np.asarray(net.state_bytes_per_sequence, float))


def resident_weight_bytes(net: Net) -> np.ndarray:
    """Weights held in memory by the replica: dense + every routed expert + resident-only tables."""
    return (np.asarray(net.dense_weight_bytes, float)
            + np.asarray(net.experts, float) * np.asarray(net.expert_bytes, float)
            + np.asarray(net.resident_only_bytes, float))


def replica_weight_bytes(net: Net, *, tp: np.ndarray | float = 1, attention_dp: np.ndarray | float = 0.0
                         ) -> np.ndarray:
    """Weights the replica's tp GPUs hold together, bytes: resident_weight_bytes under tensor parallel (each
    weight once, split); under attention data parallel (step_time_terms) every GPU holds all non-expert weights
    and E / tp routed experts: tp * (dense + resident-only) + E * expert bytes."""
    whole = resident_weight_bytes(net)
    dp = np.asarray(attention_dp, float)
    if not np.any(dp > 0):
        return whole
    non_expert = np.asarray(net.dense_weight_bytes, float) + np.asarray(net.resident_only_bytes, float)
    return np.where(dp > 0, whole + (np.asarray(tp, float) - 1.0) * non_expert, whole)


def data_parallel_split(tp: np.ndarray | float = 1, attention_dp: np.ndarray | float = 0.0):
    """(tp_d, share, ep): the ways attention and the non-expert layers split, the share of the replica's
    sequences each GPU runs them for, and the expert-parallel ways. Tensor parallel: (tp, 1, 1); attention data
    parallel (step_time_terms): (1, 1 / tp, tp). tp_d is also the ways a sequence's KV cache spreads over: a
    data-parallel sequence lives on one GPU with all its heads, so MLA's latent is held once, not tp times."""
    tp = np.asarray(tp, float)
    dp = np.asarray(attention_dp, float)
    if not np.any(dp > 0):
        return tp, 1.0, 1.0
    on = dp > 0
    return np.where(on, 1.0, tp), np.where(on, 1.0 / tp, 1.0), np.where(on, tp, 1.0)
