"""Fit the step-time terms of planner/physics/roofline.py per (hardware, engine) to measured kernel data.

Data (pinned, extracted by tools/extract_aiconfigurator.py from NVIDIA aiconfigurator-core 0.12.0, its
vLLM 0.24.0 database; for A100 its only vLLM database, 0.14.0; no aiconfigurator needed here):
    profiles/data/fitted/aiconfigurator_ops.csv   measured decode kernels: GEMM, attention, all-reduce, all-to-all,
                                                  fused MoE (every measured shape), MLA decode module
    profiles/data/fitted/aiconfigurator_tpot.csv  aiconfigurator's static-decode TPOT on a model grid

Two stages, each a scipy least-squares fit on relative (log) residuals, each returning a FitResult:
  A. per kernel family, from the measured kernels (one fit each):
     gemm       t = max(n k b (1 + m s) / (BW eta_bw), 2 n k (m + m_half) / (F eta_f)) + t_gemm
                -> eta_bw, eta_bw_tokens_scale (s), eta_flops, flops_tokens_half (m_half)
     attention  t = max(kv bytes / (BW eta_kv), 4 h d ctx batch / (F eta_attn)) + t_attn
                -> eta_kv_bw, eta_attn_flops
     allreduce  t = latency + 2 (g-1)/g * bytes / (interconnect * eta_allreduce)
                -> allreduce_latency_s, eta_allreduce
     alltoall   t = 2 (latency + m k hidden 2 B (g-1)/g / (interconnect * eta_alltoall))   (dispatch + combine)
                -> alltoall_latency_s, eta_alltoall (vLLM's DeepEP low-latency kernels at EP8; used only by
                   attention-data-parallel deployments, planner.physics.roofline.alltoall_time_s; A100 and L40S have
                   no such rows: their entries keep hardware.yaml's assumed all-to-all)
     moe        t = max(touched * expert bytes / tp / (BW eta_bw), FLOPs / (F eta_f)) + touched t_expert + t_moe
                    + m k t_moe_token ,   touched = E (1 - (1 + s m q)^(-1/s)), q = -ln(1 - k/E)
                -> t_expert_s, t_moe_layer_s, t_moe_token_s, moe_routing_skew (s) (eta_*(m_e) from the GEMM fit at
                   each expert's rows m_e = m k / touched, as the planner runs them), over every measured shape,
                   each on the token-to-expert distribution aiconfigurator's own decode estimate uses for it
                   (moe_routing)
     mla        t = mla_roofline_s(batch, heads, ctx) + t_mla_layer + batch heads t_mla_head_token
                -> t_mla_layer_s, t_mla_head_token_s (the measured MLA decode module, DeepSeek-V3's block at 16-128
                   heads per GPU, beyond what the planner's core terms charge for it; A100 has no rows)
  B. end to end, on the TPOT grid's training cells: with the stage-A terms fixed, the remaining per-layer
     kernel cost (norms, activations, rotary, launch gaps), its per-token part and the per-step cost (cells of
     one model depth: the per-step cost held at the same GPU's bf16 fit's, the rest per layer):
                TPOT = step_time_s(...; t_layer_s, t_fixed_s, t_layer_token_s)
                -> t_layer_s, t_fixed_s, t_layer_token_s (per token per layer: norms, rotary, activation
                   quantisation, MLA's per-head batched matmuls)
Held-out cells (never fitted): every cell at context 8,000 and every cell at batch 16 or 256.

    python tools/fit_steptime.py            # fit, print residuals, write profiles/data/fitted/steptime_vllm.yaml
    python tools/fit_steptime.py --check    # fit and compare with the shipped YAML (exit 1 on a mismatch)
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from calibration.fitting.cli import run_cli
from calibration.fitting.core import FitResult, check_param, fit_relative, shipped_param
from planner.physics.roofline import Net, hw_params, step_time_s, target_net, touched_experts
from planner.types import Efficiency, Hardware, ModelSpec, Sourced

ROOT = Path(__file__).resolve().parents[2]
FIT_DIR = ROOT / "profiles" / "data" / "fitted"
OPS_CSV = FIT_DIR / "aiconfigurator_ops.csv"
TPOT_CSV = FIT_DIR / "aiconfigurator_tpot.csv"
OUT_YAML = FIT_DIR / "steptime_vllm.yaml"
ENGINE = "vllm"


def data_source(engine_version: str) -> str:
    return f"NVIDIA aiconfigurator-core 0.12.0 measured kernel database, vLLM {engine_version} backend"


HARDWARE = ("h100-sxm", "h200", "b200", "a100-80gb-sxm", "l40s")
# Planner weight dtype -> the measured kernel families fitted for it (vLLM: per-tensor FP8 for dense FP8
# checkpoints, DeepGEMM block FP8 for DeepSeek-style checkpoints).
DTYPE_KERNELS = {"bf16": ("bfloat16",), "fp8": ("fp8_block",)}
# Not fitted: aiconfigurator's B200 block-FP8 kernels (DeepGEMM) read as ~9 % of peak bandwidth and its
# DeepSeek-V3 B200 TPOT (37 ms at batch 1) is above H200's (15 ms): a database artefact to re-check with
# the next aiconfigurator release, not a fit target.
EXCLUDED = {("b200", "fp8")}
GEMM_MIN_WEIGHTS = 4 * 2**20  # n * k of the smallest decoder-layer GEMM in the catalogue's targets
# The fused-MoE rows each MoE shape is fitted on: the distribution aiconfigurator-core 0.12 composes its decode
# estimate with for that model (sdk/models/deepseek.py: power_law_1.01; sdk/models/moe.py, Qwen3-MoE:
# power_law_1.2). Real routing is skewed, not balanced: under the balanced rows a fused MoE stops growing once
# every expert is touched, under a power law its most-loaded experts keep adding row tiles with every token.
MOE_ROUTING = {"7168:2048:256:8:8": "power_law_1.01", "2048:768:128:8:1": "power_law_1.2"}


def moe_routing(shape: str) -> str:
    """The distribution a fused-MoE shape hidden:inter:E:k:tp is fitted on: MOE_ROUTING's for the catalogue's shapes,
    else aiconfigurator-core 0.12's own decode routing for it (the only one tools/extract_aiconfigurator.py extracts
    for the other shapes): power_law_1.01 for DeepSeek-style models (hidden 7168), power_law_1.2 otherwise."""
    if shape in MOE_ROUTING:
        return MOE_ROUTING[shape]
    return "power_law_1.01" if shape.split(":")[0] == "7168" else "power_law_1.2"
HELD_OUT_CONTEXT = 8000
HELD_OUT_BATCHES = (16, 256)
MS = 1e-3
# Bytes per element / peak-FLOPs dtype of the kernel families in the extract.
GEMM_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0}
PEAK_DTYPE = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8"}
KV_BYTES = {"bfloat16": 2.0, "fp8": 1.0}
ATTN_KV_HEADS, ATTN_HEAD_DIM = 8, 128  # the attention rows extracted (tools/extract_aiconfigurator.py)
ALLREDUCE_MAX_ELEMENTS = 16 * 2**20  # decode messages: up to 512 tokens x 16k hidden
ALLREDUCE_BYTES_PER_ELEMENT = 2.0  # aiconfigurator's message_size counts bf16 elements


# Terms added to a step (seconds): the data cannot tell them from 0 -> dropped (0, the single roofline's value).
# t_fixed_s too: hardware.yaml's assumed 1.5 ms step floor is the first planner's, not a measurement; where the TPOT
# cells cannot tell a per-step cost from the per-layer ones (a refit with a model held out, steptime_cv) the per-layer
# terms carry it, so no assumed floor is added to every step of every model.
ADDITIVE = ("t_gemm_s", "t_attn_s", "allreduce_latency_s", "alltoall_latency_s", "t_expert_s", "t_moe_layer_s",
            "t_moe_token_s", "t_mla_layer_s", "t_mla_head_token_s", "t_layer_s", "t_layer_token_s", "t_fixed_s")
# Shapes whose 0 is Efficiency's default: no token dependence, uniform routing.
SHAPES = {"eta_bw_tokens_scale": "no fall of weight streaming with tokens", "flops_tokens_half": "GEMMs at full "
          "compute efficiency from the first token", "moe_routing_skew": "uniform routing"}


def priors_for(hw: Hardware, names: Sequence[str], gemm: FitResult | None = None) -> dict[str, tuple[float, str]]:
    """The value each parameter of a stage is held at when the data does not identify it, and why: a term added to
    the step at 0 (dropped), a token-dependence or routing shape at Efficiency's 0, an efficiency or the per-step
    time at hardware.yaml's assumed value, or where that is 0 ('same as' another), at the GEMM fit's value it
    stands for."""
    out = {}
    for n in names:
        if n in ADDITIVE:
            out[n] = (0.0, "0, the term dropped")
        elif n in SHAPES:
            out[n] = (0.0, f"0, {SHAPES[n]}")
        elif n == "eta_kv_bw" and gemm is not None:
            out[n] = (gemm.value("eta_bw"), "the GEMM fit's eta_bw (what eta_kv_bw = 0 means)")
        elif getattr(hw, "efficiency", None) is not None:
            out[n] = (float(getattr(hw.efficiency, n)), f"hardware.yaml's assumed {n} for {hw.name}")
    return out


def _fit(model, measured, hw: Hardware, *, names, p0, bounds, gemm: FitResult | None = None,
         priors: Mapping[str, tuple[float, str]] | None = None, hold: Sequence[str] = ()) -> FitResult:
    return fit_relative(model, measured, names=names, p0=p0, bounds=bounds,
                        priors={**priors_for(hw, names, gemm), **(priors or {})}, hold=hold)


def _stage_fields(res: FitResult) -> dict[str, float]:
    return {n: float(v) for n, v in zip(res.names, res.params) if n in FITTED_FIELDS}


# ----------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------

def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _cols(rows: list[dict[str, str]], *names: str) -> list[np.ndarray]:
    return [np.array([float(r[n]) for r in rows]) for n in names]


# ----------------------------------------------------------------------------------------------
# Stage A: kernel families
# ----------------------------------------------------------------------------------------------

def gemm_time_s(p: np.ndarray, m, n, k, bytes_pp, peak_flops_s, bw_bytes_s) -> np.ndarray:
    eta_bw, s_bw, eta_f, m_half, t0 = p
    t_mem = n * k * bytes_pp * (1.0 + m * s_bw) / (bw_bytes_s * eta_bw)
    t_cmp = 2.0 * n * k * (m + m_half) / (peak_flops_s * eta_f)
    return np.maximum(t_mem, t_cmp) + t0


def fit_gemm(rows: list[dict[str, str]], hw: Hardware) -> FitResult:
    m, n, k, lat = _cols(rows, "m", "n", "k", "latency_ms")
    b = np.array([GEMM_BYTES[r["dtype"]] for r in rows])
    f = np.array([hw.peak_tflops(PEAK_DTYPE[r["dtype"]]) * 1e12 for r in rows])
    bw = hw.hbm_bandwidth_gb_s * 1e9
    return _fit(lambda p: gemm_time_s(p, m, n, k, b, f, bw), lat * MS, hw,
                        names=("eta_bw", "eta_bw_tokens_scale", "eta_flops", "flops_tokens_half", "t_gemm_s"),
                        p0=(0.8, 1e-3, 0.6, 8.0, 5e-6), bounds=((0.05, 0.0, 0.05, 0.0, 0.0),
                                                                 (1.0, 0.1, 1.0, 512.0, 1e-4)))


def attention_time_s(p: np.ndarray, batch, heads, ctx, kv_bytes, peak_flops_s, bw_bytes_s) -> np.ndarray:
    eta_kv, eta_a, t0 = p
    kv = batch * ctx * 2.0 * ATTN_KV_HEADS * ATTN_HEAD_DIM * kv_bytes
    flops = 4.0 * heads * ATTN_HEAD_DIM * ctx * batch
    return np.maximum(kv / (bw_bytes_s * eta_kv), flops / (peak_flops_s * eta_a)) + t0


def fit_attention(rows: list[dict[str, str]], hw: Hardware, gemm: FitResult | None = None, *,
                  eta_attn_prior: tuple[float, str] | None = None) -> FitResult:
    """eta_kv_bw, eta_attn_flops, t_attn_s. Priors of what the rows cannot identify: eta_kv_bw at the GEMM fit's
    eta_bw, eta_attn_flops at `eta_attn_prior` (default the bf16 GEMM efficiency `gemm`'s eta_flops): the decode
    attention rows are memory-bound throughout, so eta_attn_flops is held there."""
    if eta_attn_prior is None and gemm is not None:
        eta_attn_prior = (gemm.value("eta_flops"), "the bf16 GEMM fit's eta_flops (attention runs on bf16 tensor "
                                                   "cores)")
    batch, heads, ctx, lat = _cols(rows, "m", "n", "k", "latency_ms")
    kvb = np.array([KV_BYTES[r["dtype"]] for r in rows])
    f = hw.bf16_tflops * 1e12
    bw = hw.hbm_bandwidth_gb_s * 1e9
    return _fit(lambda p: attention_time_s(p, batch, heads, ctx, kvb, f, bw), lat * MS, hw, gemm=gemm,
                priors={"eta_attn_flops": eta_attn_prior} if eta_attn_prior else None,
                        names=("eta_kv_bw", "eta_attn_flops", "t_attn_s"), p0=(0.8, 0.3, 1e-5),
                        bounds=((0.05, 0.01, 0.0), (1.0, 1.0, 1e-4)))


def allreduce_time_s(p: np.ndarray, gpus, nbytes, link_bytes_s) -> np.ndarray:
    lat, eta = p
    return lat + 2.0 * (gpus - 1.0) / gpus * nbytes / (link_bytes_s * eta)


def fit_allreduce(rows: list[dict[str, str]], hw: Hardware) -> FitResult:
    rows = [r for r in rows if float(r["n"]) <= ALLREDUCE_MAX_ELEMENTS]
    gpus, elements, lat = _cols(rows, "m", "n", "latency_ms")
    nbytes = elements * ALLREDUCE_BYTES_PER_ELEMENT
    return _fit(lambda p: allreduce_time_s(p, gpus, nbytes, hw.interconnect_gb_s * 1e9), lat * MS, hw,
                        names=("allreduce_latency_s", "eta_allreduce"), p0=(5e-6, 0.5),
                        bounds=((0.0, 0.01), (1e-4, 1.0)))


def alltoall_time_s(p: np.ndarray, gpus, tokens, topk, hidden, link_bytes_s) -> np.ndarray:
    """Dispatch + combine of one MoE layer (planner.physics.roofline.alltoall_time_s with one layer)."""
    lat, eta = p
    return 2.0 * (lat + tokens * topk * hidden * 2.0 * (gpus - 1.0) / gpus / (link_bytes_s * eta))


def alltoall_rows(rows: list[dict[str, str]]) -> tuple[np.ndarray, ...]:
    """(EP GPUs, tokens per GPU, top-k, hidden, dispatch + combine seconds) per measured shape and token count,
    from the op alltoall:hidden:topk:experts:phase rows."""
    acc: dict[tuple, list[float]] = {}
    for r in rows:
        _, hidden, topk, experts, _phase = r["op"].split(":")
        key = (float(r["m"]), float(r["n"]), float(topk), float(hidden), experts)
        acc.setdefault(key, []).append(float(r["latency_ms"]) * MS)
    keys = [k for k, v in acc.items() if len(v) == 2]  # both phases measured
    cols = np.array([k[:4] for k in keys]).T if keys else np.zeros((4, 0))
    return (*cols, np.array([sum(acc[k]) for k in keys]))


def fit_alltoall(rows: list[dict[str, str]], hw: Hardware) -> FitResult | None:
    """None without measured rows (the hardware's assumed all-to-all stays)."""
    gpus, tokens, topk, hidden, t = alltoall_rows(rows)
    if not t.size:
        return None
    return _fit(lambda p: alltoall_time_s(p, gpus, tokens, topk, hidden, hw.interconnect_gb_s * 1e9), t, hw,
                        names=("alltoall_latency_s", "eta_alltoall"), p0=(5e-5, 0.3),
                        bounds=((0.0, 0.01), (1e-3, 1.0)))


def moe_time_s(p: np.ndarray, tokens, hidden, inter, experts, topk, tp, bytes_pp, gemm: FitResult,
               peak_flops_s, bw_bytes_s) -> np.ndarray:
    t_expert, t0, t_token, skew = p
    touched = touched_experts(Net(0.0, 0.0, experts, topk, 0.0, 0.0, 0.0, 0.0, 0.0), tokens, skew)
    w = touched * 3.0 * hidden * inter * bytes_pp / tp
    flops = 2.0 * tokens * topk * 3.0 * hidden * inter / tp
    # each expert's GEMM at its own rows, as the planner streams and multiplies experts (roofline
    # weight_stream_time_s, gemm_compute_time_s: eta_bw(m_e), eta_f(m_e), m_e = m k / touched)
    rows = tokens * topk / np.maximum(touched, 1e-12)
    eta_bw = gemm.value("eta_bw") / (1.0 + rows * gemm.value("eta_bw_tokens_scale"))
    eta_f = gemm.value("eta_flops") * rows / (rows + gemm.value("flops_tokens_half"))
    t_mem = w / (bw_bytes_s * eta_bw)
    t_cmp = flops / (peak_flops_s * eta_f)
    return np.maximum(t_mem, t_cmp) + touched * t_expert + t0 + tokens * topk * t_token


def moe_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The fused-MoE rows of every measured shape on its routing distribution (moe_routing; op
    moe:hidden:inter:E:k:tp:distribution)."""
    out = []
    for r in rows:
        parts = r["op"].split(":")
        if parts[0] == "moe" and moe_routing(":".join(parts[1:6])) == parts[6]:
            out.append(r)
    return out


def fit_moe(rows: list[dict[str, str]], hw: Hardware, gemm: FitResult) -> FitResult:
    tokens, lat = _cols(rows, "m", "latency_ms")
    shape = np.array([[float(x) for x in r["op"].split(":")[1:6]] for r in rows])  # hidden inter E k tp
    b = np.array([GEMM_BYTES[r["dtype"]] for r in rows])
    f = np.array([hw.peak_tflops(PEAK_DTYPE[r["dtype"]]) * 1e12 for r in rows])
    bw = hw.hbm_bandwidth_gb_s * 1e9
    return _fit(
        lambda p: moe_time_s(p, tokens, shape[:, 0], shape[:, 1], shape[:, 2], shape[:, 3], shape[:, 4], b,
                             gemm, f, bw),
        lat * MS, hw, names=("t_expert_s", "t_moe_layer_s", "t_moe_token_s", "moe_routing_skew"),
        p0=(1e-7, 2e-5, 2e-8, 0.5), bounds=((0.0, 0.0, 0.0, 0.0), (1e-4, 1e-3, 1e-5, 50.0)))


# The MLA block the mla_generation_module table measures: DeepSeek-V3's (config.json: hidden_size, q_lora_rank,
# kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim) at 1-128 heads per GPU.
MLA_HIDDEN, MLA_Q_LORA, MLA_KV_LORA, MLA_ROPE, MLA_NOPE, MLA_V = 7168, 1536, 512, 64, 128, 128


def mla_roofline_s(gemm: FitResult, attention: FitResult, batch, heads, ctx, bytes_pp, kv_bytes, peak_flops_s,
                   bw_bytes_s) -> np.ndarray:
    """What the planner's core terms charge for one MLA block (per-op roofline, as the fitted sets run): its
    projection weights (down-projections whole, up- and output projections for `heads` heads) at the GEMM fit's
    eta_bw(m) / eta_f(m), its latent KV reads at eta_kv_bw and its absorbed attention FLOPs (planner.physics.networks
    .mla_decode_attn_flop_factor) at eta_attn_flops, both on the weight dtype's peak as the planner applies them."""
    params = (MLA_HIDDEN * (MLA_Q_LORA + MLA_KV_LORA + MLA_ROPE) + MLA_Q_LORA * heads * (MLA_NOPE + MLA_ROPE)
              + MLA_KV_LORA * heads * (MLA_NOPE + MLA_V) + heads * MLA_V * MLA_HIDDEN)
    eta_bw = gemm.value("eta_bw") / (1.0 + batch * gemm.value("eta_bw_tokens_scale"))
    eta_f = gemm.value("eta_flops") * batch / (batch + gemm.value("flops_tokens_half"))
    t_w = params * bytes_pp / (bw_bytes_s * eta_bw)
    t_g = 2.0 * params * batch / (peak_flops_s * eta_f)
    t_kv = batch * ctx * (MLA_KV_LORA + MLA_ROPE) * kv_bytes / (bw_bytes_s * attention.value("eta_kv_bw"))
    t_a = (batch * ctx * heads * (2.0 * (MLA_KV_LORA + MLA_ROPE) + 2.0 * MLA_KV_LORA)
           / (peak_flops_s * attention.value("eta_attn_flops")))
    return np.maximum(t_w, t_g) + np.maximum(t_kv, t_a)


def fit_mla(rows: list[dict[str, str]], hw: Hardware, gemm: FitResult, attention: FitResult,
            dtype: str) -> FitResult:
    """t_mla_layer_s, t_mla_head_token_s (planner.physics.roofline.mla_kernel_time_s) on the measured MLA decode
    module rows (op mla:<gemm dtype>, m batch, n heads per GPU, k context):
        t = mla_roofline_s(...) + t_mla_layer_s + batch * heads * t_mla_head_token_s"""
    batch, heads, ctx, lat = _cols(rows, "m", "n", "k", "latency_ms")
    gemm_dtype = rows[0]["op"].split(":")[1]
    kvb = np.array([KV_BYTES[r["dtype"]] for r in rows])
    bw = hw.hbm_bandwidth_gb_s * 1e9
    roof = mla_roofline_s(gemm, attention, batch, heads, ctx, GEMM_BYTES[gemm_dtype], kvb,
                          hw.peak_tflops(dtype) * 1e12, bw)
    return _fit(lambda p: roof + p[0] + batch * heads * p[1], lat * MS, hw,
                names=("t_mla_layer_s", "t_mla_head_token_s"), p0=(5e-5, 1e-8), bounds=((0.0, 0.0), (1e-3, 1e-5)))


# ----------------------------------------------------------------------------------------------
# Stage B: end to end on the TPOT grid
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TpotCell:
    model: str
    hardware: str
    dtype: str
    kv_dtype: str
    tp: int
    batch: int
    isl: int
    osl: int
    tpot_ms: float

    @property
    def held_out(self) -> bool:
        return self.isl == HELD_OUT_CONTEXT or self.batch in HELD_OUT_BATCHES

    @property
    def context_tokens(self) -> float:
        # static decode from isl to isl + osl: the mean step sees isl + osl / 2 tokens of context
        return self.isl + self.osl / 2.0


def tpot_cells(rows: list[dict[str, str]]) -> list[TpotCell]:
    """The TPOT grid without cells aiconfigurator flags as out of memory."""
    return [TpotCell(r["model"], r["hardware"], r["dtype"], "fp8" if r["kv_dtype"] == "fp8" else "bf16",
                     int(r["tp"]), int(r["batch"]), int(r["isl"]), int(r["osl"]), float(r["tpot_ms"]))
            for r in rows if r["oom"] == "0"]


def predict_tpot_s(cells: Sequence[TpotCell], models: dict[str, ModelSpec], hw: Hardware,
                   eff: Efficiency) -> np.ndarray:
    """The planner's baseline decode step (planner.physics.roofline.step_time_s) for each cell, seconds."""
    out = np.empty(len(cells))
    for i, c in enumerate(cells):
        net = target_net(models[c.model], c.dtype, kv_dtype=c.kv_dtype)
        t, _ = step_time_s(net, hw_params(hw, c.dtype, eff), batch=c.batch, tokens_per_seq=1.0,
                           context_tokens=c.context_tokens, tp=c.tp)
        out[i] = float(t)
    return out


def fit_end_to_end(cells: Sequence[TpotCell], models: dict[str, ModelSpec], hw: Hardware,
                   eff: Efficiency, *, t_fixed_prior: tuple[float, str] | None = None) -> FitResult:
    """t_layer_s, t_fixed_s, t_layer_token_s on the training cells. Cells of one model depth cannot separate the
    per-layer from the per-step cost (layers * t_layer_s + t_fixed_s is one constant): there t_fixed_s is held at
    `t_fixed_prior` (the same GPU's bf16 fit: sampling, scheduling and the step's own launch do not depend on the
    weight dtype or the architecture) and the rest is per layer, so a model of another depth pays it for its own layers
    (H200 FP8's cells are DeepSeek-V3 alone: its MLA and MoE layer kernels, priced per layer, not as one per-step floor
    that a 47-layer model would pay whole)."""
    train = [c for c in cells if not c.held_out]
    y = np.array([c.tpot_ms for c in train]) * MS

    def model(p: np.ndarray) -> np.ndarray:
        return predict_tpot_s(train, models, hw, replace(eff, t_layer_s=p[0], t_fixed_s=p[1], t_layer_token_s=p[2]))

    one_depth = len({models[c.model].layers for c in train}) == 1
    hold = ("t_fixed_s",) if one_depth and t_fixed_prior is not None else ()
    return _fit(model, y, hw, names=("t_layer_s", "t_fixed_s", "t_layer_token_s"), p0=(2e-5, 5e-4, 1e-8),
                bounds=((0.0, 0.0, 0.0), (1e-3, 2e-2, 1e-5)),
                priors={"t_fixed_s": t_fixed_prior} if t_fixed_prior else None, hold=hold)


# ----------------------------------------------------------------------------------------------
# The whole fit
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HardwareFit:
    hardware: str
    dtype: str
    engine_version: str
    gemm: FitResult
    attention: FitResult
    allreduce: FitResult
    alltoall: FitResult | None  # None: no all-to-all rows for this hardware
    moe: FitResult | None  # None: no fused-MoE rows for this GPU
    end_to_end: FitResult | None  # None: no TPOT cells (terms of the same GPU's bf16 fit)
    efficiency: Efficiency
    tpot_residuals_train: np.ndarray
    tpot_residuals_held_out: np.ndarray
    # the catalogue models of its TPOT cells (planner.physics.step_scope: what its terms hold for)
    models: tuple[str, ...] = ()
    mla: FitResult | None = None  # None: no MLA decode-module rows for this GPU (A100)

    @property
    def key(self) -> str:
        return f"{self.hardware}/{self.dtype}"

    @property
    def stages(self) -> tuple[tuple[str, FitResult], ...]:
        return tuple((n, s) for n, s in (("gemm", self.gemm), ("attention", self.attention),
                                         ("allreduce", self.allreduce), ("alltoall", self.alltoall),
                                         ("moe", self.moe), ("mla", self.mla), ("end_to_end", self.end_to_end))
                     if s is not None)


STAGE_B_FIELDS = ("t_layer_s", "t_fixed_s", "t_layer_token_s")  # fit_end_to_end's
FITTED_FIELDS = ("eta_bw", "eta_bw_tokens_scale", "eta_flops", "flops_tokens_half", "eta_kv_bw", "eta_attn_flops",
                 "allreduce_latency_s", "eta_allreduce", "alltoall_latency_s", "eta_alltoall", "t_expert_s",
                 "t_moe_layer_s", "t_moe_token_s", "t_mla_layer_s", "t_mla_head_token_s",
                 "moe_routing_skew", "t_layer_s", "t_layer_token_s", "t_fixed_s")


def fit_hardware(name: str, dtype: str, ops: list[dict[str, str]], cells: Sequence[TpotCell], catalog, *,
                 date: str, engine_version: str, bf16: HardwareFit | None = None) -> HardwareFit:
    """Every stage for one (hardware, dtype). `bf16`: the same GPU's bf16 fit, whose bf16 GEMM efficiency is the
    attention compute prior (attention runs in bf16 whatever the weights) and whose per-layer cost is the prior where
    this dtype's TPOT cells have one model depth."""
    hw = catalog.hardware[name]
    kernels = DTYPE_KERNELS[dtype]
    mine = [r for r in ops if r["hardware"] == name]
    gemm = fit_gemm([r for r in mine if r["op"] == "gemm" and r["dtype"] in kernels
                     and float(r["n"]) * float(r["k"]) >= GEMM_MIN_WEIGHTS], hw)
    # the planner applies eta_attn_flops to this dtype's peak; the bf16 GEMM efficiency is on the bf16 peak
    ref = bf16.gemm if bf16 is not None else gemm
    eta_attn_prior = (ref.value("eta_flops") * hw.bf16_tflops / hw.peak_tflops(dtype),
                      f"the {name} bf16 GEMM fit's eta_flops on the bf16 peak (attention runs on bf16 tensor cores)"
                      + ("" if dtype == "bf16" else f", as a share of the {dtype} peak"))
    attention = fit_attention([r for r in mine if r["op"] == "attention"], hw, ref, eta_attn_prior=eta_attn_prior)
    allreduce = fit_allreduce([r for r in mine if r["op"] == "allreduce"], hw)
    alltoall = fit_alltoall([r for r in mine if r["op"].startswith("alltoall:")], hw)
    # this dtype's fused-MoE rows, else the GPU's rows in another kernel dtype (a table without this dtype's MoE shapes;
    # the shipped extract has rows for every fitted GPU and dtype), else none: the MoE terms stay at hardware.yaml's
    mine_moe = moe_rows(mine)
    moe_fit_rows = [r for r in mine_moe if r["dtype"] in kernels] or mine_moe
    moe = fit_moe(moe_fit_rows, hw, gemm) if moe_fit_rows else None
    mla_fit_rows = [r for r in mine if r["op"] in {f"mla:{k}" for k in kernels}]
    mla = fit_mla(mla_fit_rows, hw, gemm, attention, dtype) if mla_fit_rows else None
    src = Sourced(f"fitted to {data_source(engine_version)} (tools/fit_steptime.py)", date)
    a2a = _stage_fields(alltoall) if alltoall is not None else {}
    moe_fields = _stage_fields(moe) if moe is not None else {}
    moe_fields.update(_stage_fields(mla) if mla is not None else {})
    eff0 = replace(hw.efficiency, **_stage_fields(gemm), **_stage_fields(attention), **_stage_fields(allreduce),
                   **a2a, **moe_fields, per_op_roofline=1.0, t_layer_s=0.0,
                   t_fixed_s=0.0, source=src)
    hw_cells = [c for c in cells if c.hardware == name and c.dtype == dtype]
    if not hw_cells:  # no TPOT cells (a model held out, steptime_cv): the per-step and per-layer terms of the bf16 fit
        if bf16 is None:
            raise ValueError(f"{name} / {dtype}: no TPOT cells and no bf16 fit of {name} to take the per-step and "
                             "per-layer terms from")
        eff = replace(eff0, **{n: getattr(bf16.efficiency, n) for n in STAGE_B_FIELDS})
        empty = np.zeros(0)
        return HardwareFit(name, dtype, engine_version, gemm, attention, allreduce, alltoall, moe, None, eff,
                           empty, empty, (), mla)
    t_fixed_prior = None if bf16 is None or bf16.end_to_end is None else (
        bf16.end_to_end.value("t_fixed_s"), f"the {name} bf16 fit's t_fixed_s (per-step costs do not depend on the "
                                            "weight dtype; one model depth cannot tell them from per-layer ones)")
    e2e = fit_end_to_end(hw_cells, catalog.models, hw, eff0, t_fixed_prior=t_fixed_prior)
    eff = replace(eff0, **_stage_fields(e2e))
    pred = predict_tpot_s(hw_cells, catalog.models, hw, eff)
    meas = np.array([c.tpot_ms for c in hw_cells]) * MS
    res = pred / meas - 1.0
    held = np.array([c.held_out for c in hw_cells])
    src = Sourced(f"fitted to {data_source(engine_version)} (tools/fit_steptime.py); TPOT error "
                  f"{100 * np.mean(np.abs(res[held])):.1f} % on held-out cells", date)
    return HardwareFit(name, dtype, engine_version, gemm, attention, allreduce, alltoall, moe, e2e,
                       replace(eff, source=src),
                       res[~held], res[held], tuple(sorted({c.model for c in hw_cells})), mla)


def to_yaml_doc(fits: Sequence[HardwareFit], date: str) -> dict:
    entries = {}
    for f in fits:
        params = {}
        for stage_name, res in f.stages:
            for n in res.names:
                if n in FITTED_FIELDS:
                    params[n] = {**shipped_param(res, n), "fit": stage_name, "fit_mape": round(res.mape, 4),
                                 "points": res.n_points}
        entries[f.key] = {
            "hardware": f.hardware, "dtype": f.dtype,
            "engine": ENGINE, "engine_version": f.engine_version, "source": data_source(f.engine_version),
            "date": date,
            "per_op_roofline": 1.0,
            "params": params,
            "tpot_mape_train": round(float(np.mean(np.abs(f.tpot_residuals_train))), 4),
            "tpot_mape_held_out": round(float(np.mean(np.abs(f.tpot_residuals_held_out))), 4),
            "tpot_cells": int(f.tpot_residuals_train.size + f.tpot_residuals_held_out.size),
            # the per-step and per-layer terms hold for these models' architecture families (planner.physics.step_scope)
            "tpot_models": list(f.models),
        }
    return {
        "about": ("Step-time parameters of planner/physics/roofline.py per (hardware, weight dtype, engine), fitted by "
                  "tools/fit_steptime.py to the pinned CSVs beside this file. A parameter with `prior` instead of a "
                  "standard error is not identified by the data and is held at the value it names. Regenerate with "
                  "`python tools/fit_steptime.py`; do not edit by hand."),
        "held_out": f"TPOT cells at context {HELD_OUT_CONTEXT} and at batch {' or '.join(map(str, HELD_OUT_BATCHES))}",
        "entries": entries,
    }


def run_fit(ops_csv: Path = OPS_CSV, tpot_csv: Path = TPOT_CSV, *, date: str | None = None,
            hardware: Sequence[str] = HARDWARE) -> list[HardwareFit]:
    from profiles import load_catalog  # noqa: PLC0415

    catalog = load_catalog()
    date = date or dt.date.today().isoformat()
    ops = read_csv(ops_csv)
    tpot_rows = read_csv(tpot_csv)
    cells = tpot_cells(tpot_rows)
    versions = {r["hardware"]: r["engine_version"] for r in tpot_rows}  # the vLLM database each GPU's rows are from
    have = {(c.hardware, c.dtype) for c in cells}
    out = []
    for h in hardware:
        bf16 = None
        for d in DTYPE_KERNELS:  # bf16 first: the other dtypes' priors come from it
            if (h, d) not in have or (h, d) in EXCLUDED:
                continue
            fit = fit_hardware(h, d, ops, cells, catalog, date=date, engine_version=versions[h], bf16=bf16)
            bf16 = fit if d == "bf16" else bf16
            out.append(fit)
    return out


def print_report(fits: Sequence[HardwareFit]) -> None:
    for f in fits:
        print(f"== {f.key} / {ENGINE} {f.engine_version}")
        for _, stage in f.stages:
            print(f"  {stage.describe()}  | {stage.n_points} points, MAPE {100 * stage.mape:.1f} %, "
                  f"max |res| {100 * np.max(np.abs(stage.residuals)):.1f} %")
        print(f"  TPOT residuals: train MAPE {100 * np.mean(np.abs(f.tpot_residuals_train)):.1f} % "
              f"({f.tpot_residuals_train.size} cells), held-out MAPE "
              f"{100 * np.mean(np.abs(f.tpot_residuals_held_out)):.1f} % ({f.tpot_residuals_held_out.size} cells)")


def check(doc: Mapping, shipped: Mapping) -> list[str]:
    """Why the refit `doc` does not reproduce the `shipped` YAML (empty: it does): every parameter within the refit's
    standard error (core.check_param), the same parameters held at the same priors, the held-out TPOT error within
    0.1 percentage point."""
    bad = []
    if set(doc["entries"]) != set(shipped["entries"]):
        bad.append(f"entries: refit {sorted(doc['entries'])}, shipped {sorted(shipped['entries'])}")
    for key, e in doc["entries"].items():
        s = shipped["entries"].get(key)
        if s is None:
            continue
        for n, p in e["params"].items():
            why = check_param(n, p, s["params"].get(n))
            if why:
                bad.append(f"{key} {why}")
        if not abs(e["tpot_mape_held_out"] - s["tpot_mape_held_out"]) <= 1e-3:
            bad.append(f"{key} tpot_mape_held_out: refit {e['tpot_mape_held_out']}, shipped {s['tpot_mape_held_out']}")
    return bad


def main(argv: list[str] | None = None) -> int:
    return run_cli(argv, description=__doc__.splitlines()[0], out_yaml=OUT_YAML, refit=lambda checking: run_fit(),
                   report=print_report, to_doc=to_yaml_doc,
                   check=lambda fits, shipped: check(to_yaml_doc(fits, ""), shipped))
