"""Fit the step-time terms of planner/roofline.py per (hardware, engine) to measured kernel data.

Data (pinned, extracted by tools/extract_aiconfigurator.py from NVIDIA aiconfigurator-core 0.12.0, its
vLLM 0.24.0 database; for A100 its only vLLM database, 0.14.0; no aiconfigurator needed here):
    profiles/data/fitted/aiconfigurator_ops.csv   measured decode kernels: GEMM, attention, all-reduce, MoE
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
                   attention-data-parallel deployments, planner.roofline.alltoall_time_s; A100 and L40S have
                   no such rows: their entries keep hardware.yaml's assumed all-to-all)
     moe        t = max(touched * expert bytes / tp / (BW eta_bw), FLOPs / (F eta_f)) + touched t_expert + t_moe
                    + m k t_moe_token ,   touched = E (1 - (1 + s m q)^(-1/s)), q = -ln(1 - k/E)
                -> t_expert_s, t_moe_layer_s, t_moe_token_s, moe_routing_skew (s) (eta_* from the GEMM fit),
                   on the token-to-expert distribution aiconfigurator's own decode estimate uses for that model
                   (MOE_ROUTING)
  B. end to end, on the TPOT grid's training cells: with the stage-A terms fixed, the remaining per-layer
     kernel cost (norms, activations, rotary, launch gaps), its per-token part and the per-step cost:
                TPOT = step_time_s(...; t_layer_s, t_fixed_s, t_layer_token_s)
                -> t_layer_s, t_fixed_s, t_layer_token_s (per token per layer: norms, rotary, activation
                   quantisation, MLA's per-head batched matmuls)
Held-out cells (never fitted): every cell at context 8,000 and every cell at batch 16 or 256.

    python tools/fit_steptime.py            # fit, print residuals, write profiles/data/fitted/steptime_vllm.yaml
    python tools/fit_steptime.py --check    # fit and compare with the shipped YAML (exit 1 on a mismatch)
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml
from scipy import optimize

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.roofline import Net, hw_params, step_time_s, target_net, touched_experts  # noqa: E402
from planner.types import Efficiency, Hardware, ModelSpec, Sourced  # noqa: E402

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


@dataclass(frozen=True)
class FitResult:
    """A least-squares fit: parameters, standard errors (same units), relative residuals."""

    names: tuple[str, ...]
    params: np.ndarray
    stderr: np.ndarray
    residuals: np.ndarray  # predicted / measured - 1, per point
    success: bool
    message: str

    @property
    def n_points(self) -> int:
        return int(self.residuals.size)

    @property
    def mape(self) -> float:
        return float(np.mean(np.abs(self.residuals))) if self.residuals.size else float("nan")

    def value(self, name: str) -> float:
        return float(self.params[self.names.index(name)])

    def as_dict(self) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.names, self.params)}


def fit_relative(
    model: Callable[[np.ndarray], np.ndarray],
    measured: np.ndarray,
    *,
    names: Sequence[str],
    p0: Sequence[float],
    bounds: tuple[Sequence[float], Sequence[float]],
) -> FitResult:
    """Fit `model(params) ~ measured` minimising sum(log(model / measured)^2) (relative error).

    Assumes measured = model(params) * exp(eps), eps ~ N(0, s^2). Standard errors from the Jacobian at
    the optimum: cov = s^2 (J^T J)^-1 with s^2 = sum(r^2) / (n - p).
    """
    y = np.asarray(measured, float)
    if y.size == 0:
        raise ValueError("no data points to fit")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("measured values must be finite and > 0")
    if y.size <= len(p0):
        raise ValueError(f"{y.size} points cannot identify {len(p0)} parameters {tuple(names)}")
    p0 = np.asarray(p0, float)
    scale = np.where(p0 != 0, np.abs(p0), 1.0)

    def resid(z: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(model(z * scale), 1e-30) / y)

    lo = np.asarray(bounds[0], float) / scale
    hi = np.asarray(bounds[1], float) / scale
    sol = optimize.least_squares(resid, p0 / scale, bounds=(lo, hi), method="trf", x_scale="jac",
                                 ftol=1e-12, xtol=1e-12, gtol=1e-12, max_nfev=2000)
    params = sol.x * scale
    r = sol.fun
    dof = max(y.size - len(p0), 1)
    s2 = float(r @ r) / dof
    jac = sol.jac
    try:
        cov = np.linalg.pinv(jac.T @ jac) * s2
        stderr = np.sqrt(np.clip(np.diag(cov), 0.0, None)) * scale
        # a parameter the data does not move at all is unidentified, not exact
        stderr = np.where(np.all(np.abs(jac) < 1e-12, axis=0), np.inf, stderr)
    except np.linalg.LinAlgError:
        stderr = np.full(len(p0), np.nan)
    return FitResult(tuple(names), params, stderr, np.expm1(r), bool(sol.success), str(sol.message))


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
    return fit_relative(lambda p: gemm_time_s(p, m, n, k, b, f, bw), lat * MS,
                        names=("eta_bw", "eta_bw_tokens_scale", "eta_flops", "flops_tokens_half", "t_gemm_s"),
                        p0=(0.8, 1e-3, 0.6, 8.0, 5e-6), bounds=((0.05, 0.0, 0.05, 0.0, 0.0),
                                                                 (1.0, 0.1, 1.0, 512.0, 1e-4)))


def attention_time_s(p: np.ndarray, batch, heads, ctx, kv_bytes, peak_flops_s, bw_bytes_s) -> np.ndarray:
    eta_kv, eta_a, t0 = p
    kv = batch * ctx * 2.0 * ATTN_KV_HEADS * ATTN_HEAD_DIM * kv_bytes
    flops = 4.0 * heads * ATTN_HEAD_DIM * ctx * batch
    return np.maximum(kv / (bw_bytes_s * eta_kv), flops / (peak_flops_s * eta_a)) + t0


def fit_attention(rows: list[dict[str, str]], hw: Hardware) -> FitResult:
    batch, heads, ctx, lat = _cols(rows, "m", "n", "k", "latency_ms")
    kvb = np.array([KV_BYTES[r["dtype"]] for r in rows])
    f = hw.bf16_tflops * 1e12
    bw = hw.hbm_bandwidth_gb_s * 1e9
    return fit_relative(lambda p: attention_time_s(p, batch, heads, ctx, kvb, f, bw), lat * MS,
                        names=("eta_kv_bw", "eta_attn_flops", "t_attn_s"), p0=(0.8, 0.3, 1e-5),
                        bounds=((0.05, 0.01, 0.0), (1.0, 1.0, 1e-4)))


def allreduce_time_s(p: np.ndarray, gpus, nbytes, link_bytes_s) -> np.ndarray:
    lat, eta = p
    return lat + 2.0 * (gpus - 1.0) / gpus * nbytes / (link_bytes_s * eta)


def fit_allreduce(rows: list[dict[str, str]], hw: Hardware) -> FitResult:
    rows = [r for r in rows if float(r["n"]) <= ALLREDUCE_MAX_ELEMENTS]
    gpus, elements, lat = _cols(rows, "m", "n", "latency_ms")
    nbytes = elements * ALLREDUCE_BYTES_PER_ELEMENT
    return fit_relative(lambda p: allreduce_time_s(p, gpus, nbytes, hw.interconnect_gb_s * 1e9), lat * MS,
                        names=("allreduce_latency_s", "eta_allreduce"), p0=(5e-6, 0.5),
                        bounds=((0.0, 0.01), (1e-4, 1.0)))


def alltoall_time_s(p: np.ndarray, gpus, tokens, topk, hidden, link_bytes_s) -> np.ndarray:
    """Dispatch + combine of one MoE layer (planner.roofline.alltoall_time_s with one layer)."""
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
    return fit_relative(lambda p: alltoall_time_s(p, gpus, tokens, topk, hidden, hw.interconnect_gb_s * 1e9), t,
                        names=("alltoall_latency_s", "eta_alltoall"), p0=(5e-5, 0.3),
                        bounds=((0.0, 0.01), (1e-3, 1.0)))


def moe_time_s(p: np.ndarray, tokens, hidden, inter, experts, topk, tp, bytes_pp, gemm: FitResult,
               peak_flops_s, bw_bytes_s) -> np.ndarray:
    t_expert, t0, t_token, skew = p
    touched = touched_experts(Net(0.0, 0.0, experts, topk, 0.0, 0.0, 0.0, 0.0, 0.0), tokens, skew)
    w = touched * 3.0 * hidden * inter * bytes_pp / tp
    flops = 2.0 * tokens * topk * 3.0 * hidden * inter / tp
    t_mem = w / (bw_bytes_s * gemm.value("eta_bw"))
    t_cmp = flops / (peak_flops_s * gemm.value("eta_flops"))
    return np.maximum(t_mem, t_cmp) + touched * t_expert + t0 + tokens * topk * t_token


def moe_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The fused-MoE rows on each shape's MOE_ROUTING distribution (op moe:hidden:inter:E:k:tp:distribution)."""
    out = []
    for r in rows:
        parts = r["op"].split(":")
        if parts[0] == "moe" and MOE_ROUTING.get(":".join(parts[1:6])) == parts[6]:
            out.append(r)
    return out


def fit_moe(rows: list[dict[str, str]], hw: Hardware, gemm: FitResult) -> FitResult:
    tokens, lat = _cols(rows, "m", "latency_ms")
    shape = np.array([[float(x) for x in r["op"].split(":")[1:6]] for r in rows])  # hidden inter E k tp
    b = np.array([GEMM_BYTES[r["dtype"]] for r in rows])
    f = np.array([hw.peak_tflops(PEAK_DTYPE[r["dtype"]]) * 1e12 for r in rows])
    bw = hw.hbm_bandwidth_gb_s * 1e9
    return fit_relative(
        lambda p: moe_time_s(p, tokens, shape[:, 0], shape[:, 1], shape[:, 2], shape[:, 3], shape[:, 4], b,
                             gemm, f, bw),
        lat * MS, names=("t_expert_s", "t_moe_layer_s", "t_moe_token_s", "moe_routing_skew"),
        p0=(1e-7, 2e-5, 2e-8, 0.5), bounds=((0.0, 0.0, 0.0, 0.0), (1e-4, 1e-3, 1e-5, 50.0)))


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
    """The planner's baseline decode step (planner.roofline.step_time_s) for each cell, seconds."""
    out = np.empty(len(cells))
    for i, c in enumerate(cells):
        net = target_net(models[c.model], c.dtype, kv_dtype=c.kv_dtype)
        t, _ = step_time_s(net, hw_params(hw, c.dtype, eff), batch=c.batch, tokens_per_seq=1.0,
                           context_tokens=c.context_tokens, tp=c.tp)
        out[i] = float(t)
    return out


def fit_end_to_end(cells: Sequence[TpotCell], models: dict[str, ModelSpec], hw: Hardware,
                   eff: Efficiency) -> FitResult:
    train = [c for c in cells if not c.held_out]
    y = np.array([c.tpot_ms for c in train]) * MS

    def model(p: np.ndarray) -> np.ndarray:
        return predict_tpot_s(train, models, hw, replace(eff, t_layer_s=p[0], t_fixed_s=p[1], t_layer_token_s=p[2]))

    return fit_relative(model, y, names=("t_layer_s", "t_fixed_s", "t_layer_token_s"), p0=(2e-5, 5e-4, 1e-8),
                        bounds=((0.0, 0.0, 0.0), (1e-3, 2e-2, 1e-5)))


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
    moe: FitResult
    end_to_end: FitResult
    efficiency: Efficiency
    tpot_residuals_train: np.ndarray
    tpot_residuals_held_out: np.ndarray

    @property
    def key(self) -> str:
        return f"{self.hardware}/{self.dtype}"

    @property
    def stages(self) -> tuple[tuple[str, FitResult], ...]:
        return tuple((n, s) for n, s in (("gemm", self.gemm), ("attention", self.attention),
                                         ("allreduce", self.allreduce), ("alltoall", self.alltoall),
                                         ("moe", self.moe), ("end_to_end", self.end_to_end)) if s is not None)


FITTED_FIELDS = ("eta_bw", "eta_bw_tokens_scale", "eta_flops", "flops_tokens_half", "eta_kv_bw", "eta_attn_flops",
                 "allreduce_latency_s", "eta_allreduce", "alltoall_latency_s", "eta_alltoall", "t_expert_s",
                 "t_moe_layer_s", "t_moe_token_s",
                 "moe_routing_skew", "t_layer_s", "t_layer_token_s", "t_fixed_s")


def fit_hardware(name: str, dtype: str, ops: list[dict[str, str]], cells: Sequence[TpotCell], catalog, *,
                 date: str, engine_version: str) -> HardwareFit:
    hw = catalog.hardware[name]
    kernels = DTYPE_KERNELS[dtype]
    mine = [r for r in ops if r["hardware"] == name]
    gemm = fit_gemm([r for r in mine if r["op"] == "gemm" and r["dtype"] in kernels
                     and float(r["n"]) * float(r["k"]) >= GEMM_MIN_WEIGHTS], hw)
    attention = fit_attention([r for r in mine if r["op"] == "attention"], hw)
    allreduce = fit_allreduce([r for r in mine if r["op"] == "allreduce"], hw)
    alltoall = fit_alltoall([r for r in mine if r["op"].startswith("alltoall:")], hw)
    moe = fit_moe([r for r in moe_rows(mine) if r["dtype"] in kernels], hw, gemm)
    src = Sourced(f"fitted to {data_source(engine_version)} (tools/fit_steptime.py)", date)
    a2a = _stage_fields(alltoall) if alltoall is not None else {}
    eff0 = replace(hw.efficiency, **_stage_fields(gemm), **_stage_fields(attention), **_stage_fields(allreduce),
                   **a2a, **_stage_fields(moe), per_op_roofline=1.0, t_layer_s=0.0,
                   t_fixed_s=0.0, source=src)
    hw_cells = [c for c in cells if c.hardware == name and c.dtype == dtype]
    e2e = fit_end_to_end(hw_cells, catalog.models, hw, eff0)
    eff = replace(eff0, **_stage_fields(e2e))
    pred = predict_tpot_s(hw_cells, catalog.models, hw, eff)
    meas = np.array([c.tpot_ms for c in hw_cells]) * MS
    res = pred / meas - 1.0
    held = np.array([c.held_out for c in hw_cells])
    src = Sourced(f"fitted to {data_source(engine_version)} (tools/fit_steptime.py); TPOT error "
                  f"{100 * np.mean(np.abs(res[held])):.1f} % on held-out cells", date)
    return HardwareFit(name, dtype, engine_version, gemm, attention, allreduce, alltoall, moe, e2e,
                       replace(eff, source=src),
                       res[~held], res[held])


def to_yaml_doc(fits: Sequence[HardwareFit], date: str) -> dict:
    entries = {}
    for f in fits:
        params = {}
        for stage_name, res in f.stages:
            for n, v, se in zip(res.names, res.params, res.stderr):
                if n not in FITTED_FIELDS:
                    continue
                params[n] = {"value": float(f"{v:.6g}"), "stderr": float(f"{se:.3g}"),
                             "fit": stage_name, "fit_mape": round(res.mape, 4), "points": res.n_points}
        entries[f.key] = {
            "hardware": f.hardware, "dtype": f.dtype,
            "engine": ENGINE, "engine_version": f.engine_version, "source": data_source(f.engine_version),
            "date": date,
            "per_op_roofline": 1.0,
            "params": params,
            "tpot_mape_train": round(float(np.mean(np.abs(f.tpot_residuals_train))), 4),
            "tpot_mape_held_out": round(float(np.mean(np.abs(f.tpot_residuals_held_out))), 4),
            "tpot_cells": int(f.tpot_residuals_train.size + f.tpot_residuals_held_out.size),
        }
    return {
        "about": ("Step-time parameters of planner/roofline.py per (hardware, weight dtype, engine), fitted by "
                  "tools/fit_steptime.py to the pinned CSVs beside this file. Regenerate with "
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
    return [fit_hardware(h, d, ops, cells, catalog, date=date, engine_version=versions[h]) for h in hardware
            for d in DTYPE_KERNELS if (h, d) in have and (h, d) not in EXCLUDED]


def print_report(fits: Sequence[HardwareFit]) -> None:
    for f in fits:
        print(f"== {f.key} / {ENGINE} {f.engine_version}")
        for _, stage in f.stages:
            body = ", ".join(f"{n} = {v:.4g} +- {se:.2g}" for n, v, se in zip(stage.names, stage.params, stage.stderr))
            print(f"  {body}  | {stage.n_points} points, MAPE {100 * stage.mape:.1f} %, "
                  f"max |res| {100 * np.max(np.abs(stage.residuals)):.1f} %")
        print(f"  TPOT residuals: train MAPE {100 * np.mean(np.abs(f.tpot_residuals_train)):.1f} % "
              f"({f.tpot_residuals_train.size} cells), held-out MAPE "
              f"{100 * np.mean(np.abs(f.tpot_residuals_held_out)):.1f} % ({f.tpot_residuals_held_out.size} cells)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped YAML instead of writing")
    ap.add_argument("--out", type=Path, default=OUT_YAML)
    args = ap.parse_args(argv)
    fits = run_fit()
    print_report(fits)
    shipped_date = None
    if args.out.exists():
        shipped = yaml.safe_load(args.out.read_text())
        shipped_date = next(iter(shipped["entries"].values()))["date"]
    if args.check:
        doc = to_yaml_doc(fits, shipped_date or "")
        shipped = yaml.safe_load(args.out.read_text())
        bad = [(h, n) for h, e in doc["entries"].items() for n, p in e["params"].items()
               if not np.isclose(p["value"], shipped["entries"][h]["params"][n]["value"], rtol=1e-3, atol=1e-12)]
        print("shipped parameters reproduced" if not bad else f"mismatch: {bad}")
        return 1 if bad else 0
    doc = to_yaml_doc(fits, dt.date.today().isoformat())
    args.out.write_text(yaml.safe_dump(doc, sort_keys=False, width=120))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
