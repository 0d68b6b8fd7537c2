"""Roofline step time for a verifier (target) step and a draft pass, vectorised over numpy arrays.

Per step and replica (DESIGN.md, "Step-time model"; issue 11 for the named terms), per GPU of a
tensor-parallel group of `tp`:
    t_weights  = weight bytes read / tp / (BW * eta_bw(m))           eta_bw(m) = eta_bw / (1 + m * s_bw)
    t_kv       = KV bytes read per GPU / (BW * eta_kv)               (GQA: / min(tp, kv_heads); MLA: / 1)
    t_gemm     = 2 * active_params * m / tp / (F * eta_f(m))          eta_f(m) = eta_f * m / (m + m_half)
    t_attn     = attention FLOPs / tp / (F * eta_attn)                (absorbed MLA: ~2.8x GQA's 4 h d)
    core       = (1 - p) * max(t_weights + t_kv, t_gemm + t_attn) + p * (max(t_weights, t_gemm)
                 + max(t_kv, t_attn))                                 p = per_op_roofline in [0, 1]
    T = core + t_experts + t_moe_tokens + t_allreduce + layers * (t_layer + m * t_layer_token) + t_fixed
with m = batch * n tokens in the step (n = K+1 for a chain, N nodes for a tree),
t_experts = MoE layers * (touched experts per layer * t_expert + t_moe_layer) (one grouped-GEMM problem
per touched expert, plus routing and permutation per layer),
t_moe_tokens = MoE layers * m * k * t_moe_token (per routed token: permutation and the row tiles of the
experts that skewed routing loads most; grows with m after every expert is touched) and
t_allreduce = 2 per layer * (latency + 2 (tp-1)/tp * m * hidden * 2 B / (interconnect * eta_allreduce)).
With the default parameters (s_bw = 0, m_half = 0, p = 0, t_layer = t_layer_token = t_expert =
t_moe_token = 0, uniform routing) this is the single
roofline max(bytes / (BW eta_bw), flops / (F eta_f)) + t_fixed + t_allreduce of the first planner.
Each term is one function below with its formula and source.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from planner.types import BYTES_PER_PARAM, KV_CACHE_DTYPES, Efficiency, Hardware, Method, ModelSpec

GB = 1e9
TFLOPS = 1e12
# vLLM's default gpu_memory_utilization; the rest is left to the framework and the CUDA context.
GPU_MEMORY_UTILIZATION = 0.9
# Activation and CUDA-graph workspace reserved out of the utilised memory (assumption, ~3 %).
ACTIVATION_RESERVE_FRACTION = 0.03
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
    # Added by issue 11; the defaults reproduce the first planner's numbers.
    kv_shards: np.ndarray | float = np.inf  # ways the KV cache splits under TP (GQA: kv_heads; MLA: 1)
    window_tokens: np.ndarray | float = 0.0  # sliding window of the windowed layers, tokens
    window_layer_share: np.ndarray | float = 0.0  # share of layers that attend within the window
    decode_attn_flop_factor: np.ndarray | float = 1.0  # decode attention FLOPs / (4 * attn_dim) per ctx token
    resident_only_bytes: np.ndarray | float = 0.0  # resident but not streamed (untied input embedding)
    moe_layers: np.ndarray | float = 0.0  # layers with routed experts (per-expert kernel cost)
    expert_params: np.ndarray | float = 0.0  # one routed expert summed over its layers (grouped-GEMM FLOPs)
    # Draft heads only (issue 11, step 4): a projection run once per speculative step over the verified tokens
    # (EAGLE-3's fusion of three target hidden states, 3h x h), outside the per-pass network.
    fusion_weight_bytes: np.ndarray | float = 0.0
    fusion_params: np.ndarray | float = 0.0
    # The output vocabulary a target's sampler works over (planner.serving.sampler_time_s); 0 for a draft head.
    vocab_size: np.ndarray | float = 0.0

    def scaled(self, factor: np.ndarray | float) -> Net:
        """The same network repeated `factor` times (MEDUSA: one head per draft position)."""
        return replace(
            self,
            dense_weight_bytes=np.asarray(self.dense_weight_bytes) * factor,
            active_params=np.asarray(self.active_params) * factor,
        )


@dataclass(frozen=True)
class HwParams:
    """Hardware and efficiency as arrays; build with hw_params() or stack_hw()."""

    bandwidth_bytes_s: np.ndarray | float
    peak_flops_s: np.ndarray | float
    eta_bw: np.ndarray | float
    eta_flops: np.ndarray | float
    t_fixed_s: np.ndarray | float
    t_fixed_draft_s: np.ndarray | float
    allreduce_latency_s: np.ndarray | float
    t_spec_s: np.ndarray | float
    interconnect_bytes_s: np.ndarray | float
    hbm_bytes: np.ndarray | float
    # Step-time terms added by issue 11 (Efficiency has the same fields); defaults reproduce the
    # single-roofline model.
    t_layer_s: np.ndarray | float = 0.0
    t_expert_s: np.ndarray | float = 0.0
    t_moe_layer_s: np.ndarray | float = 0.0
    t_moe_token_s: np.ndarray | float = 0.0
    moe_routing_skew: np.ndarray | float = 0.0
    t_layer_token_s: np.ndarray | float = 0.0
    eta_bw_tokens_scale: np.ndarray | float = 0.0
    flops_tokens_half: np.ndarray | float = 0.0
    eta_kv_bw: np.ndarray | float = 0.0
    eta_attn_flops: np.ndarray | float = 0.0
    eta_allreduce: np.ndarray | float = 1.0
    per_op_roofline: np.ndarray | float = 0.0
    alltoall_latency_s: np.ndarray | float = 5e-5
    eta_alltoall: np.ndarray | float = 0.3
    # Speculation terms (issue 11, step 4; planner.serving): defaults reproduce the first planner.
    sampler_vocab_passes: np.ndarray | float = 0.0
    t_ngram_s: np.ndarray | float = 0.0
    moe_verify_overlap: np.ndarray | float = 0.0


def hw_params(hw: Hardware, dtype: str = "bf16", efficiency: Efficiency | None = None) -> HwParams:
    eff = efficiency or hw.efficiency
    return HwParams(
        bandwidth_bytes_s=hw.hbm_bandwidth_gb_s * GB,
        peak_flops_s=hw.peak_tflops(dtype) * TFLOPS,
        eta_bw=eff.eta_bw,
        eta_flops=eff.eta_flops,
        t_fixed_s=eff.t_fixed_s,
        t_fixed_draft_s=eff.t_fixed_draft_s,
        allreduce_latency_s=eff.allreduce_latency_s,
        t_spec_s=eff.t_spec_s,
        interconnect_bytes_s=hw.interconnect_gb_s * GB,
        hbm_bytes=hw.hbm_gb * GB,
        t_layer_s=eff.t_layer_s,
        t_expert_s=eff.t_expert_s,
        t_moe_layer_s=eff.t_moe_layer_s,
        t_moe_token_s=eff.t_moe_token_s,
        moe_routing_skew=eff.moe_routing_skew,
        t_layer_token_s=eff.t_layer_token_s,
        eta_bw_tokens_scale=eff.eta_bw_tokens_scale,
        flops_tokens_half=eff.flops_tokens_half,
        eta_kv_bw=eff.eta_kv_bw,
        eta_attn_flops=eff.eta_attn_flops,
        eta_allreduce=eff.eta_allreduce,
        per_op_roofline=eff.per_op_roofline,
        alltoall_latency_s=eff.alltoall_latency_s,
        eta_alltoall=eff.eta_alltoall,
        sampler_vocab_passes=eff.sampler_vocab_passes,
        t_ngram_s=eff.t_ngram_s,
        moe_verify_overlap=eff.moe_verify_overlap,
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
    (DESIGN.md, "What measurements taught us")."""
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
    )


def head_net(method: Method, model: ModelSpec, dtype: str = "bf16", *, kv_dtype: str | None = None) -> Net:
    """One draft pass of a head (EAGLE-3, P-EAGLE, MEDUSA) or a native module (MTP) attached to `model`.

    - Heads (sequential_head, parallel_head) are dense: draft_layers * 12 h^2 parameters (Kaplan et al. 2020,
      eq. 2.1), plus the LM head over the draft vocabulary (EAGLE-3: 32k tokens, vocab * h) read once per pass
      when the method reads it. EAGLE-3 fuses three target hidden states (low, middle, high layers) with one
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
        head_bpp = BYTES_PER_PARAM[dtype] if dtype in ("bf16", "fp8") else BYTES_PER_PARAM["bf16"]
        dense_params = method.draft_layers * PARAMS_PER_LAYER_PER_HIDDEN_SQ * h * h + lm_head_params
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


def weight_bytes_read(net: Net, tokens_in_step: np.ndarray | float) -> np.ndarray:
    """Weight bytes read in one step of `tokens_in_step` tokens (batch * tokens per sequence).

    MoE: each token picks k of E experts; with m tokens routed independently and uniformly, the expected
    number of distinct experts touched per layer is E * (1 - (1 - k/E)^m) (touched_experts). That lies
    between k (one token) and E (many tokens), so the bytes lie between the dense-plus-active bound and
    all experts. Untied input embeddings are gathered, not streamed, and are not counted here.
    """
    return np.asarray(net.dense_weight_bytes, float) + touched_experts(net, tokens_in_step) * np.asarray(
        net.expert_bytes, float)


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
    (kv_shards = 1: vLLM's MLA backends, DESIGN.md "What measurements taught us"), so TP does not divide
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
    DeepSeek-V3 in an fp8 cache: 61 x 576 B = 35,136 B per token on each of the 8 GPUs at TP8."""
    tp = np.asarray(tp, float)
    split = np.minimum(tp, np.asarray(net.kv_shards, float))
    return (effective_context_tokens(net, sequence_tokens) * np.asarray(net.kv_bytes_per_token, float)
            * tp / split)


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


def _has_experts(net: Net) -> bool:
    """Whether any network on the grid has routed experts (dense networks skip the MoE terms, which are 0)."""
    return bool(np.any(np.asarray(net.experts, float) > 0))


def touched_experts(net: Net, tokens_in_step: np.ndarray | float, skew: np.ndarray | float = 0.0) -> np.ndarray:
    """Expected distinct routed experts per MoE layer for m tokens, each picking k of E; 0 for dense networks.

    Uniform routing (skew s = 0): E * (1 - (1 - k/E)^m), k at m = 1, E as m grows.
    Skewed routing (s > 0): real routers load some experts far more than others (DeepSeek-V3, arXiv 2412.19437,
    section 3.4: redundant copies of high-load experts; aiconfigurator-core 0.12 measures decode MoE under a
    power-law token distribution). With each expert's per-token hazard q_e = -ln(1 - p_e) gamma-distributed
    around its mean q = -ln(1 - k/E) with squared coefficient of variation s (shape 1/s), the chance an expert
    is missed by all m tokens is E[exp(-m q_e)] = (1 + s m q)^(-1/s) (the gamma Laplace transform), so
        touched(m) = E * (1 - (1 + s m q)^(-1/s)) ,
    which tends to the uniform form as s -> 0 and saturates ever more slowly (a power law in m) as s grows:
    cold experts wait for many tokens. s = moe_routing_skew (fitted, tools/fit_steptime.py)."""
    e = np.asarray(net.experts, float)
    k = np.asarray(net.experts_per_token, float)
    m = np.asarray(tokens_in_step, float)
    if not np.any(e > 0):  # dense networks: skip the power over the whole grid
        return np.zeros(np.broadcast_shapes(e.shape, k.shape, m.shape))
    s = np.asarray(skew, float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        share = np.where(e > 0, k / e, 0.0)
        uniform = (1.0 - share) ** m
        if np.any(s > 0):
            q = -np.log1p(-np.minimum(share, 1.0 - 1e-12))
            s_pos = np.where(s > 0, s, 1.0)
            missed = np.where(s > 0, (1.0 + s_pos * m * q) ** (-1.0 / s_pos), uniform)
        else:
            missed = uniform
        return np.where(e > 0, e * (1.0 - missed), 0.0)


def eta_bw_at(hw: HwParams, tokens_in_step: np.ndarray | float) -> np.ndarray:
    """Weight-streaming efficiency at m tokens: eta_bw / (1 + m * s_bw).

    Measured GEMMs stream weights at 85-88 % of H100 peak at batch 1 and 56-71 % at batch 256
    (aiconfigurator's kernel database; DESIGN.md): larger tiles re-read less often but reach the
    bandwidth less well. s_bw = eta_bw_tokens_scale (1 / tokens); 0 keeps it constant."""
    return np.asarray(hw.eta_bw, float) / (
        1.0 + np.asarray(tokens_in_step, float) * np.asarray(hw.eta_bw_tokens_scale, float))


def eta_flops_at(hw: HwParams, tokens_in_step: np.ndarray | float) -> np.ndarray:
    """GEMM compute efficiency at m tokens: eta_f * m / (m + m_half) (tile quantisation: a GEMM with
    few rows fills a fraction of each MMA tile). m_half = flops_tokens_half; 0 keeps it constant."""
    m = np.asarray(tokens_in_step, float)
    half = np.asarray(hw.flops_tokens_half, float)
    frac = np.where(half > 0, m / np.where(half > 0, m + half, 1.0), 1.0)
    return np.asarray(hw.eta_flops, float) * frac


def routed_tokens(batch: np.ndarray | float, tokens_per_seq: np.ndarray | float,
                  overlap: np.ndarray | float = 0.0) -> np.ndarray:
    """Independent routing draws in a step of `batch` sequences of n tokens each: B * (1 + (n - 1) (1 - rho)).

    The n tokens a sequence verifies are consecutive tokens of one text; consecutive tokens route to
    overlapping experts far more often than independent tokens do (Mixtral of Experts, arXiv 2401.04088,
    section 5: repeated assignments of consecutive tokens well above chance), so the experts one sequence
    touches grow as k (1 + (n - 1)(1 - rho)), not k n. rho = moe_verify_overlap (fitted,
    tools/fit_speculation.py): 0 routes every token independently (the first planner), 1 routes a
    sequence's verify tokens to its first token's experts. Equals B * n at rho = 0 and B at n = 1."""
    n = np.asarray(tokens_per_seq, float)
    return np.asarray(batch, float) * (1.0 + (n - 1.0) * (1.0 - np.asarray(overlap, float)))


def tokens_per_touched_expert(net: Net, tokens_in_step: np.ndarray | float,
                              routed: np.ndarray | float | None = None, skew: np.ndarray | float = 0.0) -> np.ndarray:
    """Rows of each expert's GEMM in a grouped GEMM: m * k / touched(routed) (k at m = 1, m k / E at large
    m); `routed` = independent routing draws (routed_tokens; default m), `skew` as in touched_experts."""
    m = np.asarray(tokens_in_step, float)
    if not np.any(np.asarray(net.experts, float) > 0):
        return m
    touched = touched_experts(net, m if routed is None else routed, skew)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(touched > 0, m * np.asarray(net.experts_per_token, float) / touched, m)


def weight_stream_time_s(net: Net, hw: HwParams, *, tokens_in_step, tp=1, routed=None, dense_tp=None,
                         dense_tokens=None) -> np.ndarray:
    """Weight bytes read per GPU over achieved bandwidth, seconds:
        dense / tp_d / (BW eta_bw(m_d)) + touched(m) * expert bytes / tp / (BW eta_bw(m_e))
    with m_e = tokens_per_touched_expert: each expert's GEMM sees only its own rows. With no token
    dependence (eta_bw_tokens_scale = 0) this is weight_bytes_read(m) / tp / (BW eta_bw). `routed`: the
    step's independent routing draws (routed_tokens), default m. tp_d, m_d (dense_tp, dense_tokens): how the
    non-expert weights split and the rows each GPU runs them on; tensor parallel (default): tp and m; attention
    data parallel (step_time_terms): 1 and m / tp, every GPU holding all of them for its own sequences."""
    m = np.asarray(tokens_in_step, float)
    bw_tp = np.asarray(hw.bandwidth_bytes_s, float) * np.asarray(tp, float)
    bw_d = bw_tp if dense_tp is None else np.asarray(hw.bandwidth_bytes_s, float) * np.asarray(dense_tp, float)
    m_d = m if dense_tokens is None else np.asarray(dense_tokens, float)
    dense = np.asarray(net.dense_weight_bytes, float) / (bw_d * eta_bw_at(hw, m_d))
    if not _has_experts(net):  # no routed experts: the second term is 0
        return dense
    r = m if routed is None else np.asarray(routed, float)
    skew = hw.moe_routing_skew
    experts = touched_experts(net, r, skew) * np.asarray(net.expert_bytes, float)
    return dense + experts / (bw_tp * eta_bw_at(hw, tokens_per_touched_expert(net, m, r, skew)))


def kv_stream_time_s(net: Net, hw: HwParams, *, batch, context_tokens, tp=1) -> np.ndarray:
    """KV bytes read per GPU over achieved bandwidth: kv_read_bytes_per_gpu / (BW * eta_kv), seconds;
    eta_kv = eta_kv_bw, or eta_bw when that is 0."""
    eta_kv = np.asarray(hw.eta_kv_bw, float)
    eta = np.where(eta_kv > 0, eta_kv, np.asarray(hw.eta_bw, float))
    return kv_read_bytes_per_gpu(net, batch=batch, context_tokens=context_tokens, tp=tp) / (
        np.asarray(hw.bandwidth_bytes_s, float) * eta)


def gemm_compute_time_s(net: Net, hw: HwParams, *, tokens_in_step, tp=1, routed=None, dense_tp=None,
                        dense_tokens=None) -> np.ndarray:
    """GEMM FLOPs per GPU over achieved FLOP/s, seconds (2 FLOPs per multiply-accumulate; Kaplan et al.
    2020, section 2.1):
        2 * (active - k * expert) * m_d / tp_d / (F eta_f(m_d)) + 2 * k * expert * m / tp / (F eta_f(m_e))
    routed experts run as a grouped GEMM of m_e rows each (tokens_per_touched_expert); tp_d, m_d as in
    weight_stream_time_s (tp and m under tensor parallel)."""
    m = np.asarray(tokens_in_step, float)
    f_tp = np.asarray(hw.peak_flops_s, float) * np.asarray(tp, float)
    f_d = f_tp if dense_tp is None else np.asarray(hw.peak_flops_s, float) * np.asarray(dense_tp, float)
    m_d = m if dense_tokens is None else np.asarray(dense_tokens, float)
    if not _has_experts(net):  # no routed experts: every active parameter is in the first term
        return 2.0 * np.asarray(net.active_params, float) * m_d / (f_d * eta_flops_at(hw, m_d))
    expert_active = np.asarray(net.experts_per_token, float) * np.asarray(net.expert_params, float)
    dense = np.asarray(net.active_params, float) - expert_active
    with np.errstate(divide="ignore", invalid="ignore"):
        return (2.0 * dense * m_d / (f_d * eta_flops_at(hw, m_d))
                + np.where(expert_active > 0, 2.0 * expert_active * m
                           / (f_tp * eta_flops_at(hw, tokens_per_touched_expert(net, m, routed,
                                                                                 hw.moe_routing_skew))), 0.0))


def attention_flops(net: Net, *, tokens_in_step, context_tokens) -> np.ndarray:
    """Decode attention FLOPs of a step: 4 * attn_dim * factor * ctx_eff * m.

    QK^T and AV are each 2 * head_dim FLOPs per head per context token (factor 1, GQA; Kaplan et al.
    2020 table 1 counts 2 * n_layer * n_ctx * d_attn per token forward for each). Absorbed MLA
    scores against the latent: factor = mla_decode_attn_flop_factor (~2.83 for DeepSeek-V3)."""
    return (4.0 * np.asarray(net.attn_dim, float) * np.asarray(net.decode_attn_flop_factor, float)
            * effective_context_tokens(net, context_tokens) * np.asarray(tokens_in_step, float))


def attention_compute_time_s(net: Net, hw: HwParams, *, tokens_in_step, context_tokens, tp=1) -> np.ndarray:
    """Attention FLOPs per GPU (heads split across ranks) over F * eta_attn (eta_flops when 0), seconds."""
    eta_a = np.asarray(hw.eta_attn_flops, float)
    eta = np.where(eta_a > 0, eta_a, np.asarray(hw.eta_flops, float))
    return attention_flops(net, tokens_in_step=tokens_in_step, context_tokens=context_tokens) / (
        np.asarray(hw.peak_flops_s, float) * eta * np.asarray(tp, float))


def moe_expert_time_s(net: Net, hw: HwParams, *, tokens_in_step, ep=1) -> np.ndarray:
    """Fixed costs of the MoE layers: moe_layers * (touched(m) / ep * t_expert + t_moe_layer), seconds.
    A grouped GEMM schedules one problem per expert that received tokens; each has a floor of tile
    set-up and epilogue whatever its size (seen as 50-120 us per MoE layer at batch 1 for DeepSeek-V3 on
    H200 in aiconfigurator's database, where bandwidth says ~15 us). Under tensor parallel (ep = 1) every GPU
    runs a slice of every touched expert; under expert parallel over ep GPUs each runs its own E / ep."""
    if not _has_experts(net):  # no MoE layers
        return np.zeros(())
    return np.asarray(net.moe_layers, float) * (
        touched_experts(net, tokens_in_step, hw.moe_routing_skew) / np.asarray(ep, float)
        * np.asarray(hw.t_expert_s, float) + np.asarray(hw.t_moe_layer_s, float))


def moe_token_time_s(net: Net, hw: HwParams, *, tokens_in_step, ep=1) -> np.ndarray:
    """Per-token cost of the MoE layers: moe_layers * m * k * t_moe_token_s, seconds (m tokens, k experts each).

    Every routed token-expert pair is gathered into its expert's rows and scattered back (permute / unpermute,
    2 x hidden activations each way), and a fused-MoE kernel tiles each expert's rows in blocks of BLOCK_M,
    re-reading that expert's weights once per block (vLLM's Triton fused_moe; DeepGEMM / TRT-LLM grouped
    GEMMs likewise): under real, skewed routing the most-loaded experts receive a share of all m tokens, so
    their row tiles, and the time, keep growing with m after every expert is touched (aiconfigurator-core
    0.12 measures vLLM 0.24's fused MoE under a power-law token distribution growing ~0.7 us per token per
    layer for DeepSeek-V3 at TP8 on H200 from 64 to 512 tokens, where the balanced distribution stays flat).
    t_moe_token_s is fitted per (hardware, dtype) to those power-law rows (tools/fit_steptime.py, fit_moe).
    Linear in m: moe_layers * k * t_moe_token_s at one token; 0 for dense networks. Under expert parallel over
    ep GPUs each GPU permutes and tiles its share, m k / ep pairs."""
    layers = np.asarray(net.moe_layers, float)
    if not np.any(layers > 0):  # dense networks: nothing to broadcast over the grid
        return np.zeros(())
    return (layers * np.asarray(tokens_in_step, float) * np.asarray(net.experts_per_token, float)
            * np.asarray(hw.t_moe_token_s, float) / np.asarray(ep, float))


def allreduce_time_s(net: Net, hw: HwParams, *, tokens_in_step, tp=1) -> np.ndarray:
    """Tensor-parallel all-reduces: 2 per layer (after attention and after the MLP; Megatron-LM,
    Shoeybi et al. 2019, section 3), each latency + ring bytes 2 (tp-1)/tp * m * hidden * 2 B over
    interconnect * eta_allreduce (Patarasuk & Yuan 2009). 0 at tp = 1."""
    tp = np.asarray(tp, float)
    msg = np.asarray(tokens_in_step, float) * np.asarray(net.hidden_size, float) * ACT_BYTES
    per = (2.0 * (tp - 1.0) / tp * msg
           / (np.asarray(hw.interconnect_bytes_s, float) * np.asarray(hw.eta_allreduce, float))
           + np.asarray(hw.allreduce_latency_s, float))
    return np.where(tp > 1, 2.0 * np.asarray(net.layers, float) * per, 0.0)


def alltoall_time_s(net: Net, hw: HwParams, *, tokens_per_gpu, gpus) -> np.ndarray:
    """Expert-parallel all-to-all of the MoE layers, seconds: per MoE layer a dispatch (each token's hidden state
    to the GPUs holding its k experts) and a combine (the k expert outputs back), each
        alltoall_latency_s + m_g * k * hidden * 2 B * (g - 1) / g / (interconnect * eta_alltoall)
    for m_g tokens per GPU over g GPUs (uniform routing: (g - 1) / g of the copies leave the GPU). Measured form:
    vLLM 0.24's DeepEP low-latency dispatch and combine at EP8 (aiconfigurator-core 0.12; ~50 us a phase up to
    ~32 tokens per GPU, then linear in tokens), fitted per GPU by tools/fit_steptime.py (fit_alltoall). 0 for
    dense networks (attention data parallel then needs no communication at all) and at g = 1."""
    layers = np.asarray(net.moe_layers, float)
    if not np.any(layers > 0):
        return np.zeros(())
    g = np.asarray(gpus, float)
    msg = (np.asarray(tokens_per_gpu, float) * np.asarray(net.experts_per_token, float)
           * np.asarray(net.hidden_size, float) * ACT_BYTES)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = (np.asarray(hw.alltoall_latency_s, float) + msg * (g - 1.0) / g
               / (np.asarray(hw.interconnect_bytes_s, float) * np.asarray(hw.eta_alltoall, float)))
    return np.where(g > 1, 2.0 * layers * per, 0.0)


def fusion_time_s(net: Net, hw: HwParams, *, batch, tokens_per_seq, tp=1) -> np.ndarray:
    """A draft head's once-per-step fusion projection over the verified tokens, seconds (EAGLE-3: three target
    hidden states, 3h -> h; head_net): one GEMM on the same roofline as the others,
        max(fusion bytes / tp / (BW eta_bw(m)), 2 * fusion params * m / tp / (F eta_f(m))) ,  m = B * n
    0 for a net without one (every target, MEDUSA, MTP, draft models)."""
    params = np.asarray(net.fusion_params, float)
    if not np.any(params > 0):  # no fusion layer on the grid
        return np.zeros(())
    m = np.asarray(batch, float) * np.asarray(tokens_per_seq, float)
    tp = np.asarray(tp, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_mem = np.asarray(net.fusion_weight_bytes, float) / (
            np.asarray(hw.bandwidth_bytes_s, float) * tp * eta_bw_at(hw, m))
        t_cmp = 2.0 * params * m / (np.asarray(hw.peak_flops_s, float) * tp * eta_flops_at(hw, m))
    return np.where(params > 0, np.maximum(t_mem, t_cmp), 0.0)


def layer_kernel_time_s(net: Net, hw: HwParams) -> np.ndarray:
    """Per-layer kernel floor: layers * t_layer (norms, rotary, activations, quantisation, launch gaps:
    the time a decoder layer costs at any size beyond its GEMMs and attention)."""
    return np.asarray(net.layers, float) * np.asarray(hw.t_layer_s, float)


def layer_token_time_s(net: Net, hw: HwParams, *, tokens_in_step) -> np.ndarray:
    """Per-token kernel cost of the decoder layers: layers * m * t_layer_token_s, seconds.

    The kernels around a layer's GEMMs and attention work on every token's activations and grow with m at
    any batch: residual add + RMSNorm twice, rotary, activation quantisation for FP8 GEMMs, and for absorbed
    MLA the per-head batched matmuls with W_UK / W_UV (aiconfigurator-core 0.12's per-op breakdown for
    DeepSeek-V3 at TP8 on H200: the MLA block grows 9.3 -> 18.3 ms per step from batch 128 to 512, its two
    add-norms 0.28 -> 0.61 ms, where the GEMM roofline adds ~2 ms). t_layer_token_s is fitted per (hardware,
    dtype) with t_layer_s and t_fixed_s to the TPOT grid (tools/fit_steptime.py, fit_end_to_end).
    Linear in m: layers * t_layer_token_s at one token."""
    return (np.asarray(net.layers, float) * np.asarray(tokens_in_step, float)
            * np.asarray(hw.t_layer_token_s, float))


@dataclass(frozen=True)
class StepTerms:
    """The named terms of one step, seconds, broadcast over the inputs (see the module docstring)."""

    weights_s: np.ndarray
    kv_s: np.ndarray
    gemm_s: np.ndarray
    attention_s: np.ndarray
    core_s: np.ndarray  # the roofline combination of the four above
    experts_s: np.ndarray
    allreduce_s: np.ndarray
    layers_s: np.ndarray
    fixed_s: np.ndarray
    total_s: np.ndarray
    compute_bound: np.ndarray
    moe_tokens_s: np.ndarray | float = 0.0  # moe_token_time_s
    layer_tokens_s: np.ndarray | float = 0.0  # layer_token_time_s


def step_time_terms(
    net: Net,
    hw: HwParams,
    *,
    batch: np.ndarray | float,
    tokens_per_seq: np.ndarray | float,
    context_tokens: np.ndarray | float,
    tp: np.ndarray | float = 1,
    t_fixed_s: np.ndarray | float | None = None,
    attention_dp: np.ndarray | float = 0.0,
) -> StepTerms:
    """One forward step as named terms (module docstring); a network with no parameters costs 0.

    attention_dp = 1 (per element): the replica's `tp` GPUs run attention and every non-expert layer data
    parallel, each GPU with all of those weights for its own batch / tp sequences, and the routed experts expert
    parallel over the tp GPUs, every GPU holding E / tp experts for all the replica's tokens (vLLM
    `--data-parallel-size tp --enable-expert-parallel`; SGLang's DP attention). Per GPU then: non-expert weights
    whole, at m / tp rows; KV and attention of batch / tp sequences, all heads (so MLA's latent is read once per
    sequence, not on every rank); experts as under TP (touched(m) / tp of them, all m tokens); MoE kernel costs
    for its E / tp experts; all-to-all dispatch and combine (alltoall_time_s) instead of all-reduces."""
    b = np.asarray(batch, float)
    m = b * np.asarray(tokens_per_seq, float)
    tp = np.asarray(tp, float)
    dp = np.asarray(attention_dp, float)
    tp_d, share, ep = data_parallel_split(tp, dp)  # per GPU: attention / dense ways and its share of sequences
    b_d, m_d = b * share, m * share
    # MoE routing draws: a sequence's verify tokens share experts (routed_tokens); m when dense or n = 1
    r = routed_tokens(b, tokens_per_seq, hw.moe_verify_overlap) if _has_experts(net) else m
    t_w = weight_stream_time_s(net, hw, tokens_in_step=m, tp=tp, routed=r, dense_tp=tp_d, dense_tokens=m_d)
    t_kv = kv_stream_time_s(net, hw, batch=b_d, context_tokens=context_tokens, tp=tp_d)
    t_g = gemm_compute_time_s(net, hw, tokens_in_step=m, tp=tp, routed=r, dense_tp=tp_d, dense_tokens=m_d)
    t_a = attention_compute_time_s(net, hw, tokens_in_step=m_d, context_tokens=context_tokens, tp=tp_d)
    p = np.asarray(hw.per_op_roofline, float)
    t_mem, t_cmp = t_w + t_kv, t_g + t_a
    core = (1.0 - p) * np.maximum(t_mem, t_cmp) + p * (np.maximum(t_w, t_g) + np.maximum(t_kv, t_a))
    t_e = moe_expert_time_s(net, hw, tokens_in_step=r, ep=ep)
    t_mt = moe_token_time_s(net, hw, tokens_in_step=m, ep=ep)  # every routed token pays, shared experts or not
    t_c = allreduce_time_s(net, hw, tokens_in_step=m, tp=tp)
    if np.any(dp > 0):  # expert parallel where attention is data parallel: all-to-all there instead
        t_c = np.where(dp > 0, alltoall_time_s(net, hw, tokens_per_gpu=m_d, gpus=tp), t_c)
    t_l = layer_kernel_time_s(net, hw)
    t_lt = layer_token_time_s(net, hw, tokens_in_step=m_d)
    fixed = np.asarray(hw.t_fixed_s if t_fixed_s is None else t_fixed_s, float)
    active = np.asarray(net.active_params) > 0
    total = np.where(active, core + t_e + t_mt + t_c + t_l + t_lt + fixed, 0.0)
    return StepTerms(t_w, t_kv, t_g, t_a, core, t_e, t_c, t_l, fixed, total, t_cmp > t_mem, moe_tokens_s=t_mt,
                     layer_tokens_s=t_lt)


def step_time_s(
    net: Net,
    hw: HwParams,
    *,
    batch: np.ndarray | float,
    tokens_per_seq: np.ndarray | float,
    context_tokens: np.ndarray | float,
    tp: np.ndarray | float = 1,
    t_fixed_s: np.ndarray | float | None = None,
    attention_dp: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """One forward step; returns (seconds, compute_bound) broadcast over all inputs."""
    terms = step_time_terms(net, hw, batch=batch, tokens_per_seq=tokens_per_seq,
                            context_tokens=context_tokens, tp=tp, t_fixed_s=t_fixed_s, attention_dp=attention_dp)
    return terms.total_s, terms.compute_bound


def ridge_tokens(hw: Hardware, dtype: str = "bf16") -> float:
    """Tokens per step where a dense verifier turns compute-bound, ignoring KV: F * bytes/param / (2 BW)
    (with the efficiencies applied)."""
    e = hw.efficiency
    return (hw.peak_tflops(dtype) * TFLOPS * e.eta_flops * BYTES_PER_PARAM[dtype]) / (
        2.0 * hw.hbm_bandwidth_gb_s * GB * e.eta_bw
    )


def max_batch(
    *,
    hw: HwParams,
    weight_bytes_total: np.ndarray | float,
    kv_bytes_per_sequence: np.ndarray | float,
    tp: np.ndarray | float = 1,
) -> np.ndarray:
    """Largest batch whose weights (target + draft) and KV caches fit; 0 when the weights alone don't.

    Usable memory = HBM * tp * gpu_memory_utilization * (1 - activation reserve) - weights.
    """
    usable = (
        np.asarray(hw.hbm_bytes) * np.asarray(tp) * GPU_MEMORY_UTILIZATION
        * (1.0 - ACTIVATION_RESERVE_FRACTION)
        - np.asarray(weight_bytes_total)
    )
    return np.floor(np.maximum(usable, 0.0) / np.asarray(kv_bytes_per_sequence))
