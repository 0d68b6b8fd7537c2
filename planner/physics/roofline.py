"""Roofline step time for a verifier (target) step and a draft pass, vectorised over numpy arrays.

Per step and replica, per GPU of a
tensor-parallel group of `tp`:
    t_weights  = weight bytes read / tp / (BW * eta_bw(m))           eta_bw(m) = eta_bw / (1 + m * s_bw)
    t_kv       = KV bytes read per GPU / (BW * eta_kv)               (GQA: / min(tp, kv_heads); MLA: / 1)
    t_gemm     = 2 * active_params * m / tp / (F * eta_f(m))          eta_f(m) = eta_f * m / (m + m_half)
    t_attn     = attention FLOPs / tp / (F * eta_attn)                (absorbed MLA: ~2.8x GQA's 4 h d)
    core       = (1 - p) * max(t_weights + t_kv, t_gemm + t_attn) + p * (max(t_weights, t_gemm)
                 + max(t_kv, t_attn))                                 p = per_op_roofline in [0, 1]
    T = core + t_experts + t_moe_tokens + t_allreduce + t_mla + layers * (t_layer + m * t_layer_token) + t_fixed
with m = batch * n tokens in the step (n = K+1 for a chain, N nodes for a tree),
t_experts = MoE layers * (touched experts per layer * t_expert + t_moe_layer) (one grouped-GEMM problem
per touched expert, plus routing and permutation per layer),
t_mla = MLA layers * (t_mla_layer + m * heads / tp * t_mla_head_token) (mla_kernel_time_s),
t_moe_tokens = MoE layers * m * k * t_moe_token (per routed token: permutation and the row tiles of the
experts that skewed routing loads most; grows with m after every expert is touched) and
t_allreduce = 2 per layer * (latency + 2 (tp-1)/tp * m * hidden * 2 B / (interconnect * eta_allreduce)).
With the default parameters (s_bw = 0, m_half = 0, p = 0, t_layer = t_layer_token = t_expert =
t_moe_token = 0, uniform routing) this is the single
roofline max(bytes / (BW eta_bw), flops / (F eta_f)) + t_fixed + t_allreduce of the first planner.
Each term is one function below with its formula and source.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.physics.networks import (  # noqa: F401  (re-exported: the networks and their byte counts)
    ACT_BYTES,
    GB,
    PARAMS_PER_LAYER_PER_HIDDEN_SQ,
    Net,
    data_parallel_split,
    default_kv_dtype,
    effective_context_tokens,
    head_net,
    kv_cache_bytes_per_sequence,
    kv_read_bytes_per_gpu,
    kv_shards,
    mla_decode_attn_flop_factor,
    null_net,
    replica_weight_bytes,
    resident_weight_bytes,
    stack,
    target_net,
    weight_bytes_by_component,
)
from planner.types import BYTES_PER_PARAM, Efficiency, Hardware

TFLOPS = 1e12
# The one fraction of GPU memory vLLM may use, for the planner and for calibration runs alike: vLLM's default
# gpu_memory_utilization (the deployments the planner sizes run with it, so a calibration measures the same
# memory); the rest is left to the framework and the CUDA context.
GPU_MEMORY_UTILIZATION = 0.9
# Activation and CUDA-graph workspace reserved out of the utilised memory (assumption, ~3 %).
ACTIVATION_RESERVE_FRACTION = 0.03


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
    # Step-time terms beyond the single roofline (Efficiency has the same fields); defaults reproduce the
    # single-roofline model.
    t_layer_s: np.ndarray | float = 0.0
    t_expert_s: np.ndarray | float = 0.0
    t_moe_layer_s: np.ndarray | float = 0.0
    t_moe_token_s: np.ndarray | float = 0.0
    moe_routing_skew: np.ndarray | float = 0.0
    t_mla_layer_s: np.ndarray | float = 0.0
    t_mla_head_token_s: np.ndarray | float = 0.0
    t_layer_token_s: np.ndarray | float = 0.0
    eta_bw_tokens_scale: np.ndarray | float = 0.0
    flops_tokens_half: np.ndarray | float = 0.0
    eta_kv_bw: np.ndarray | float = 0.0
    eta_attn_flops: np.ndarray | float = 0.0
    eta_allreduce: np.ndarray | float = 1.0
    per_op_roofline: np.ndarray | float = 0.0
    alltoall_latency_s: np.ndarray | float = 5e-5
    eta_alltoall: np.ndarray | float = 0.3
    # Speculation terms (planner.physics.serving): defaults reproduce the first planner.
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
        t_mla_layer_s=eff.t_mla_layer_s,
        t_mla_head_token_s=eff.t_mla_head_token_s,
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


def _is_scalar(x, value: float) -> bool:
    """x is one number (not an array with axes) equal to `value`: the step-time terms then skip whole-grid work that
    cannot change a result (adding 0, multiplying by 1, a mask that is the same everywhere)."""
    return np.ndim(x) == 0 and float(x) == value


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


def weight_bytes_read(net: Net, tokens_in_step: np.ndarray | float) -> np.ndarray:
    """Weight bytes read in one step of `tokens_in_step` tokens (batch * tokens per sequence).

    MoE: each token picks k of E experts; with m tokens routed independently and uniformly, the expected
    number of distinct experts touched per layer is E * (1 - (1 - k/E)^m) (touched_experts). That lies
    between k (one token) and E (many tokens), so the bytes lie between the dense-plus-active bound and
    all experts. Untied input embeddings are gathered, not streamed, and are not counted here.
    """
    return np.asarray(net.dense_weight_bytes, float) + touched_experts(net, tokens_in_step) * np.asarray(
        net.expert_bytes, float)


def eta_bw_at(hw: HwParams, tokens_in_step: np.ndarray | float) -> np.ndarray:
    """Weight-streaming efficiency at m tokens: eta_bw / (1 + m * s_bw).

    Measured GEMMs stream weights at 85-88 % of H100 peak at batch 1 and 56-71 % at batch 256
    (NVIDIA aiconfigurator's kernel database, read 2026-11-30): larger tiles re-read less often but reach the
    bandwidth less well. s_bw = eta_bw_tokens_scale (1 / tokens); 0 keeps it constant."""
    return np.asarray(hw.eta_bw, float) / (
        1.0 + np.asarray(tokens_in_step, float) * np.asarray(hw.eta_bw_tokens_scale, float))


def eta_flops_at(hw: HwParams, tokens_in_step: np.ndarray | float) -> np.ndarray:
    """GEMM compute efficiency at m tokens: eta_f * m / (m + m_half) (tile quantisation: a GEMM with
    few rows fills a fraction of each MMA tile). m_half = flops_tokens_half; 0 keeps it constant."""
    m = np.asarray(tokens_in_step, float)
    half = np.asarray(hw.flops_tokens_half, float)
    if half.ndim == 0 and half > 0:  # one m_half for the whole grid: the masks below select everywhere alike
        return np.asarray(hw.eta_flops, float) * (m / (m + half))
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
    if tp.ndim == 0 and tp <= 1:  # no all-reduce anywhere on the grid: zeros of the result's shape
        return np.zeros(np.broadcast_shapes(np.shape(tokens_in_step), np.shape(net.hidden_size), np.shape(net.layers),
                                            np.shape(hw.interconnect_bytes_s), np.shape(hw.eta_allreduce),
                                            np.shape(hw.allreduce_latency_s)))
    msg = np.asarray(tokens_in_step, float) * np.asarray(net.hidden_size, float) * ACT_BYTES
    per = (2.0 * (tp - 1.0) / tp * msg
           / (np.asarray(hw.interconnect_bytes_s, float) * np.asarray(hw.eta_allreduce, float))
           + np.asarray(hw.allreduce_latency_s, float))
    if tp.ndim == 0:  # tp > 1 on the whole grid
        return 2.0 * np.asarray(net.layers, float) * per
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


def mla_kernel_time_s(net: Net, hw: HwParams, *, tokens_in_step, tp=1) -> np.ndarray:
    """Kernel costs of the MLA attention blocks beyond their roofline (their weights, latent KV reads and attention
    FLOPs are in the core terms), seconds:
        mla_layers * (t_mla_layer_s + m * heads / tp * t_mla_head_token_s)
    An absorbed-MLA decode block is ~10 kernels (q/kv down-projections, q_a/kv_a norms, q up-projection, the per-head
    W_UK batched matmul, rotary and the latent write, the MLA decode kernel, the per-head W_UV batched matmul, the
    output projection): aiconfigurator-core 0.12 measures vLLM 0.24's whole block (mla_generation_module) at
    ~0.11 ms per layer for DeepSeek-V3 at 16 heads per GPU on H200 at batch 1, where its bytes say ~10 us, growing
    with tokens x heads per GPU. Both terms are fitted per (hardware, dtype) to that table (tools/fit_steptime.py,
    fit_mla), so a held-out MLA model is priced from the measured kernels, not from its own TPOT cells. 0 for GQA."""
    layers = np.asarray(net.mla_layers, float)
    if not np.any(layers > 0):  # no MLA layers on the grid
        return np.zeros(())
    heads = np.asarray(net.mla_heads, float) / np.asarray(tp, float)
    return layers * (np.asarray(hw.t_mla_layer_s, float)
                     + np.asarray(tokens_in_step, float) * heads * np.asarray(hw.t_mla_head_token_s, float))


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
    mla_s: np.ndarray | float = 0.0  # mla_kernel_time_s


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
    b_d, m_d = (b, m) if _is_scalar(share, 1.0) else (b * share, m * share)
    # MoE routing draws: a sequence's verify tokens share experts (routed_tokens); m when dense or n = 1
    r = routed_tokens(b, tokens_per_seq, hw.moe_verify_overlap) if _has_experts(net) else m
    t_w = weight_stream_time_s(net, hw, tokens_in_step=m, tp=tp, routed=r, dense_tp=tp_d, dense_tokens=m_d)
    t_kv = kv_stream_time_s(net, hw, batch=b_d, context_tokens=context_tokens, tp=tp_d)
    t_g = gemm_compute_time_s(net, hw, tokens_in_step=m, tp=tp, routed=r, dense_tp=tp_d, dense_tokens=m_d)
    t_a = attention_compute_time_s(net, hw, tokens_in_step=m_d, context_tokens=context_tokens, tp=tp_d)
    p = np.asarray(hw.per_op_roofline, float)
    t_mem, t_cmp = t_w + t_kv, t_g + t_a
    # p the same on the whole grid: the other roofline's weight (0) adds nothing (finite terms), so it is skipped
    if _is_scalar(p, 1.0):
        core = np.maximum(t_w, t_g) + np.maximum(t_kv, t_a)
    elif _is_scalar(p, 0.0):
        core = np.maximum(t_mem, t_cmp)
    else:
        core = (1.0 - p) * np.maximum(t_mem, t_cmp) + p * (np.maximum(t_w, t_g) + np.maximum(t_kv, t_a))
    t_e = moe_expert_time_s(net, hw, tokens_in_step=r, ep=ep)
    t_mt = moe_token_time_s(net, hw, tokens_in_step=m, ep=ep)  # every routed token pays, shared experts or not
    t_c = allreduce_time_s(net, hw, tokens_in_step=m, tp=tp)
    if np.any(dp > 0):  # expert parallel where attention is data parallel: all-to-all there instead
        t_c = np.where(dp > 0, alltoall_time_s(net, hw, tokens_per_gpu=m_d, gpus=tp), t_c)
    t_l = layer_kernel_time_s(net, hw)
    has_mla = not _is_scalar(net.mla_layers, 0.0) and bool(np.any(np.asarray(net.mla_layers, float) > 0))
    t_mla = mla_kernel_time_s(net, hw, tokens_in_step=m_d, tp=tp_d) if has_mla else np.zeros(())
    per_token = not _is_scalar(hw.t_layer_token_s, 0.0)
    t_lt = layer_token_time_s(net, hw, tokens_in_step=m_d) if per_token else np.zeros(())
    fixed = np.asarray(hw.t_fixed_s if t_fixed_s is None else t_fixed_s, float)
    active = np.asarray(net.active_params) > 0
    # the sum in the formula's order; terms that are 0 on the whole grid (dense networks' MoE terms, no per-token
    # layer time) are not added (adding 0 changes no bit)
    total = core
    if _has_experts(net):
        total = total + t_e + t_mt
    total = total + t_c + t_l
    if has_mla:
        total = total + t_mla
    if per_token:
        total = total + t_lt
    total = total + fixed
    total = total if active.ndim == 0 and active else np.where(active, total, 0.0)
    return StepTerms(t_w, t_kv, t_g, t_a, core, t_e, t_c, t_l, fixed, total, t_cmp > t_mem, moe_tokens_s=t_mt,
                     layer_tokens_s=t_lt, mla_s=t_mla)


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


def usable_memory_bytes(hbm_bytes, tp=1):
    """Memory a replica of `tp` GPUs gives weights and KV caches: HBM x tp x gpu_memory_utilization x (1 - the
    activation reserve). Scalars or arrays."""
    return np.asarray(hbm_bytes) * np.asarray(tp) * GPU_MEMORY_UTILIZATION * (1.0 - ACTIVATION_RESERVE_FRACTION)


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
    usable = usable_memory_bytes(hw.hbm_bytes, tp) - np.asarray(weight_bytes_total)
    return np.floor(np.maximum(usable, 0.0) / np.asarray(kv_bytes_per_sequence))
