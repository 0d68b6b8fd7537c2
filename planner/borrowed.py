"""Step-time terms for hardware without kernel data, borrowed from the nearest kernel-fitted GPU (a stated assumption).

The kernel fit (tools/fit_steptime.py) gives each measured (GPU, weight dtype) a per-step floor, per-layer and
per-token kernel costs, MoE grouped-GEMM costs and collective latencies. A GPU with no kernel data (AMD Instinct
today) would otherwise run on its hardware.yaml efficiencies alone: a single roofline with a 1.5 ms step floor and
no per-layer, MoE or collective-latency terms, which makes a 61-layer MoE step on 8 GPUs a few ms and the extra
experts a verify step touches its dominant cost. Here such a GPU gets:

    time terms  t = donor's t * overhead_scale     (TIME_TERMS: per step, per layer, per token, per expert, latencies)
    shape terms   = donor's                         (SHAPE_TERMS: routing skew, tile shapes, collective shares)
    eta_bw, eta_flops = its own (hardware.yaml, or fitted to end-to-end measurements), never the donor's

donor = the kernel fit in the same dtype on the GPU with the nearest HBM bandwidth (log ratio), else the nearest GPU
in any dtype. overhead_scale and eta_bw come from a fit to published end-to-end no-speculation TPOT
(calibration/fitting/borrowed.py, profiles/data/fitted/steptime_borrowed.yaml) where one exists; otherwise
overhead_scale 1 with a wide stated band (ASSUMED_TPOT_ERROR).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from planner.types import Efficiency, Hardware, Sourced

# Seconds-valued terms that scale with the software stack's overheads (launch gaps, scheduling, kernel floors).
TIME_TERMS = ("t_fixed_s", "t_layer_s", "t_layer_token_s", "t_expert_s", "t_moe_layer_s", "t_moe_token_s",
              "allreduce_latency_s", "alltoall_latency_s")
# Dimensionless terms of the kernel fit that describe the workload or kernel shape rather than the GPU's speed.
SHAPE_TERMS = ("moe_routing_skew", "eta_bw_tokens_scale", "flops_tokens_half", "per_op_roofline", "eta_allreduce",
               "eta_alltoall")
# Relative TPOT error (a fraction, as the kernel fit's held-out MAPE) stated for a borrowed set that no end-to-end
# measurement checks: assumption (2026-12-02), twice the spread between vLLM and SGLang on the one public MI300X
# DeepSeek-R1 curve (profiles/data/published/amd_nospec_tpot.csv, ~25 %).
ASSUMED_TPOT_ERROR = 0.5
DTYPES = ("bf16", "fp8", "nvfp4", "mxfp4")


@dataclasses.dataclass(frozen=True)
class BorrowFit:
    """A GPU's end-to-end fit of the borrowed terms (calibration/fitting/borrowed.py): overhead_scale multiplies the
    donor's TIME_TERMS, eta_bw replaces the hardware's; tpot_error is the relative TPOT band (a fraction)."""

    overhead_scale: float
    eta_bw: float | None
    tpot_error: float
    source: str
    date: str


def nearest_donor(hardware: str, dtype: str, table: Mapping[str, Hardware],
                  fitted: Mapping[tuple[str, str], Efficiency]) -> tuple[str, str] | None:
    """The kernel-fitted (GPU, dtype) to borrow from: the same dtype on the GPU whose HBM bandwidth is nearest (in
    log ratio; ties: the lower bandwidth), else the nearest GPU in any dtype; None when nothing is fitted."""
    bw = table[hardware].hbm_bandwidth_gb_s

    def dist(key: tuple[str, str]) -> tuple[float, float]:
        other = table[key[0]].hbm_bandwidth_gb_s
        return abs(math.log(other / bw)), other

    keys = [k for k in fitted if k[0] in table and k[0] != hardware]
    same = [k for k in keys if k[1] == dtype]
    pool = same or keys
    return min(pool, key=dist) if pool else None


def borrow(own: Efficiency, donor: Efficiency, *, donor_key: tuple[str, str], fit: BorrowFit | None,
           hardware: str) -> Efficiency:
    """`own` (the hardware's assumed efficiencies) with the donor's TIME_TERMS (times the fit's overhead_scale) and
    SHAPE_TERMS, and the fit's eta_bw where it has one; the source names donor, scale and band."""
    scale = fit.overhead_scale if fit else 1.0
    values = {n: getattr(donor, n) * scale for n in TIME_TERMS}
    values.update({n: getattr(donor, n) for n in SHAPE_TERMS})
    if fit and fit.eta_bw is not None:
        values["eta_bw"] = fit.eta_bw
    err = fit.tpot_error if fit else ASSUMED_TPOT_ERROR
    own_bw = f"eta_bw {own.eta_bw:.3g} (hardware.yaml assumption)"
    if fit is None:
        how = f"overhead scale 1 (assumption; no end-to-end measurement), {own_bw}"
    elif fit.eta_bw is None:
        how = f"overhead scale {scale:.3g} fitted to {fit.source}, {own_bw}"
    else:
        how = f"overhead scale {scale:.3g} and eta_bw {fit.eta_bw:.3g} fitted to {fit.source}"
    src = Sourced(f"{hardware}: no kernel data; per-step, per-layer, MoE and collective-latency terms borrowed from "
                  f"the {donor_key[0]} / {donor_key[1]} kernel fit (assumption), {how}; TPOT band "
                  f"+-{100 * err:.0f} %", fit.date if fit else donor.source.date)
    return dataclasses.replace(own, source=src, **values)


def borrowed_efficiencies(table: Mapping[str, Hardware], fitted: Mapping[tuple[str, str], Efficiency],
                          fits: Mapping[str, BorrowFit] | None = None,
                          ) -> tuple[dict[tuple[str, str], Efficiency], dict[tuple[str, str], float]]:
    """For every GPU with no kernel fit in any dtype: ({(GPU, dtype): borrowed Efficiency}, {(GPU, dtype): TPOT
    band}) over DTYPES. A GPU with a kernel fit in some dtype keeps its own fallbacks (hardware.yaml)."""
    fits = fits or {}
    fitted_hw = {k[0] for k in fitted}
    out: dict[tuple[str, str], Efficiency] = {}
    err: dict[tuple[str, str], float] = {}
    for name, hw in table.items():
        if getattr(hw, "kind", "gpu") != "gpu" or name in fitted_hw or hw.efficiency.calibrated:
            continue
        for dtype in DTYPES:
            key = nearest_donor(name, dtype, table, fitted)
            if key is None:
                continue
            fit = fits.get(name)
            out[(name, dtype)] = borrow(hw.efficiency, fitted[key], donor_key=key, fit=fit, hardware=name)
            err[(name, dtype)] = fit.tpot_error if fit else ASSUMED_TPOT_ERROR
    return out, err
