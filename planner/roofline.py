"""Roofline step time for a verifier (target) step and a draft pass, vectorised over numpy arrays.

Per step and replica (DESIGN.md, "Step-time model"):
    bytes = weight bytes actually read + KV bytes (batch * context * kv_bytes_per_token)
    flops = 2 * active_params * batch * n + attention flops
    T = max(bytes / (BW * eta_bw), flops / (F * eta_flops)) + t_fixed + t_allreduce
with n tokens per sequence in the step (K+1 for a chain, N nodes for a tree). Tensor parallel divides
bytes and flops by tp and adds two ring all-reduces per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from planner.types import BYTES_PER_PARAM, Efficiency, Hardware, Method, ModelSpec

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


def target_net(model: ModelSpec, dtype: str = "bf16") -> Net:
    bpp = BYTES_PER_PARAM[dtype]
    return Net(
        dense_weight_bytes=model.dense_params_b * 1e9 * bpp,
        expert_bytes=model.expert_params_b * 1e9 * bpp,
        experts=float(model.experts),
        experts_per_token=float(model.experts_per_token),
        active_params=model.active_params_b * 1e9,
        attn_dim=float(model.layers * model.heads * model.head_dim),
        kv_bytes_per_token=float(model.layers * model.kv_elements_per_token_per_layer) * bpp,
        layers=float(model.layers),
        hidden_size=float(model.hidden_size),
    )


def head_net(method: Method, model: ModelSpec, dtype: str = "bf16") -> Net:
    """A draft head (EAGLE-3, P-EAGLE, MEDUSA) or a native module (MTP) attached to `model`.

    Heads are dense: draft_layers * 12 h^2 parameters, plus the LM head (vocab * h) read once per pass
    when the method reads it. A native module of a MoE model is a slice of the model itself
    (draft_layers / layers of it, routed experts included), plus the shared LM head.
    """
    bpp = BYTES_PER_PARAM[dtype]
    h = float(model.hidden_size)
    vocab = method.draft_vocab or model.vocab_size
    lm_head_params = vocab * h if method.draft_reads_lm_head else 0.0
    kv_layers = method.draft_kv_layers
    if method.drafting == "native_module":
        share = method.draft_layers / model.layers
        dense_params = model.dense_params_b * 1e9 * share + lm_head_params
        active_params = model.active_params_b * 1e9 * share + lm_head_params
        expert_bytes = model.expert_params_b * 1e9 * share * bpp
        experts = float(model.experts)
    else:
        dense_params = method.draft_layers * PARAMS_PER_LAYER_PER_HIDDEN_SQ * h * h + lm_head_params
        active_params = dense_params
        expert_bytes = 0.0
        experts = 0.0
    return Net(
        dense_weight_bytes=dense_params * bpp,
        expert_bytes=expert_bytes,
        experts=experts,
        experts_per_token=float(model.experts_per_token) if experts else 0.0,
        active_params=active_params,
        attn_dim=float(kv_layers * model.heads * model.head_dim),
        kv_bytes_per_token=float(kv_layers * model.kv_elements_per_token_per_layer) * bpp,
        layers=float(max(method.draft_layers, 1.0)),
        hidden_size=h,
    )


def null_net() -> Net:
    """n-gram drafting: nothing runs on the accelerator."""
    z = 0.0
    return Net(z, z, z, z, z, z, z, z, z)


def weight_bytes_read(net: Net, tokens_in_step: np.ndarray | float) -> np.ndarray:
    """Weight bytes read in one step of `tokens_in_step` tokens (batch * tokens per sequence).

    MoE: each token picks k of E experts; with m tokens routed independently and uniformly, the expected
    number of distinct experts touched per layer is E * (1 - (1 - k/E)^m). That lies between k (one
    token) and E (many tokens), so the bytes lie between the dense-plus-active bound and all experts.
    """
    e = np.asarray(net.experts, float)
    k = np.asarray(net.experts_per_token, float)
    m = np.asarray(tokens_in_step, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        touched = np.where(e > 0, e * (1.0 - (1.0 - np.where(e > 0, k / e, 0.0)) ** m), 0.0)
    return np.asarray(net.dense_weight_bytes, float) + touched * np.asarray(net.expert_bytes, float)


def step_time_s(
    net: Net,
    hw: HwParams,
    *,
    batch: np.ndarray | float,
    tokens_per_seq: np.ndarray | float,
    context_tokens: np.ndarray | float,
    tp: np.ndarray | float = 1,
    t_fixed_s: np.ndarray | float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One forward step; returns (seconds, compute_bound) broadcast over all inputs."""
    b = np.asarray(batch, float)
    n = np.asarray(tokens_per_seq, float)
    ctx = np.asarray(context_tokens, float)
    tp = np.asarray(tp, float)
    tokens = b * n
    bytes_ = weight_bytes_read(net, tokens) + b * ctx * np.asarray(net.kv_bytes_per_token)
    # 2 FLOPs per multiply-accumulate; attention: QK^T and AV are each 2 * head_dim per head per
    # context token, so 4 * sum(heads * head_dim) * context per query token.
    flops = 2.0 * np.asarray(net.active_params) * tokens + 4.0 * np.asarray(net.attn_dim) * ctx * tokens
    t_mem = bytes_ / (np.asarray(hw.bandwidth_bytes_s) * np.asarray(hw.eta_bw) * tp)
    t_cmp = flops / (np.asarray(hw.peak_flops_s) * np.asarray(hw.eta_flops) * tp)
    # Ring all-reduce moves 2 (tp-1)/tp of the message per device; two per layer (attention, MLP).
    msg = tokens * np.asarray(net.hidden_size) * ACT_BYTES
    t_comm = np.where(
        tp > 1,
        2.0 * np.asarray(net.layers)
        * (2.0 * (tp - 1.0) / tp * msg / np.asarray(hw.interconnect_bytes_s)
           + np.asarray(hw.allreduce_latency_s)),
        0.0,
    )
    fixed = hw.t_fixed_s if t_fixed_s is None else t_fixed_s
    active = np.asarray(net.active_params) > 0
    t = np.where(active, np.maximum(t_mem, t_cmp) + t_comm + np.asarray(fixed), 0.0)
    return t, t_cmp > t_mem


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
