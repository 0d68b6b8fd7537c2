"""Step-time terms for hardware without kernel data, borrowed from the nearest kernel-fitted GPU (a stated assumption).

The kernel fit (tools/fit_steptime.py) gives each measured (GPU, weight dtype) a per-step floor, per-layer and
per-token kernel costs, MoE grouped-GEMM costs and collective latencies. A GPU with no kernel data (AMD Instinct
today) would otherwise run on its hardware.yaml efficiencies alone: a single roofline with a 1.5 ms step floor and
no per-layer, MoE or collective-latency terms, which makes a 61-layer MoE step on 8 GPUs a few ms and the extra
experts a verify step touches its dominant cost. Here such a GPU gets:

    time terms  t = donor's t * overhead_scale     (TIME_TERMS: per step, per layer, per token, per expert, latencies)
    shape terms   = donor's                         (SHAPE_TERMS: routing skew, tile shapes, collective shares)
    eta_bw, eta_flops = its own (hardware.yaml, or fitted to end-to-end measurements); the donor's only from a donor
                        of the same architecture with no end-to-end fit (B300 from B200: the same kernels)

donor = a kernel fit of the same architecture first (B300 from B200), else of the same vendor, else any; among those
the same dtype first, then the GPU nearest in HBM bandwidth and interconnect bandwidth (sum of log ratios: a PCIe card
borrows a PCIe card's collective terms). A GPU whose figures equal a fitted GPU's (a user's spec copied from the
catalogue) is that GPU: it runs on that GPU's fit whole, with its held-out error. overhead_scale and eta_bw come from a
fit to published end-to-end no-speculation TPOT (calibration/fitting/borrowed.py,
profiles/data/fitted/steptime_borrowed.yaml) where one exists, or from such a fit of a GPU of the same architecture
(MI325X from MI300X's); otherwise overhead_scale 1 with a stated band: SAME_ARCH_TPOT_ERROR from a donor of the same
architecture, the wider ASSUMED_TPOT_ERROR across architectures.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from planner.types import Efficiency, Hardware, Sourced

# Seconds-valued terms that scale with the software stack's overheads (launch gaps, scheduling, kernel floors).
TIME_TERMS = ("t_fixed_s", "t_layer_s", "t_layer_token_s", "t_expert_s", "t_moe_layer_s", "t_moe_token_s",
              "t_mla_layer_s", "t_mla_head_token_s", "allreduce_latency_s", "alltoall_latency_s")
# Dimensionless terms of the kernel fit that describe the workload or kernel shape rather than the GPU's speed.
SHAPE_TERMS = ("moe_routing_skew", "eta_bw_tokens_scale", "flops_tokens_half", "per_op_roofline", "eta_allreduce",
               "eta_alltoall")
# The donor's achieved shares of peak, taken only from a donor of the same architecture (borrow's same_arch).
EFFICIENCY_TERMS = ("eta_bw", "eta_flops", "eta_kv_bw", "eta_attn_flops")
# Relative TPOT error (a fraction, as the kernel fit's held-out MAPE) stated for a borrowed set that no end-to-end
# measurement checks: assumption (2026-12-02), twice the spread between vLLM and SGLang on the one public MI300X
# DeepSeek-R1 curve (profiles/data/published/amd_nospec_tpot.csv, ~25 %).
ASSUMED_TPOT_ERROR = 0.5
# The same, from a donor of the same architecture (B300 from B200): assumption (2026-12-04), about twice the widest
# held-out TPOT error of the kernel fits (L40S BF16, ~11 %, steptime_vllm.yaml) for peaks and memory that differ.
SAME_ARCH_TPOT_ERROR = 0.25
DTYPES = ("bf16", "fp8", "nvfp4", "mxfp4")
# Architecture -> vendor. A bare vendor name is allowed where the architecture is not listed (a user's own GPU).
ARCHITECTURES = {"ampere": "nvidia", "ada": "nvidia", "hopper": "nvidia", "blackwell": "nvidia",
                 "blackwell-rtx": "nvidia", "cdna3": "amd", "cdna4": "amd", "nvidia": "nvidia", "amd": "amd"}
# The figures that make two GPUs the same chip for the step time (a spec that copies a catalogue entry).
TWIN_FIELDS = ("hbm_gb", "hbm_bandwidth_gb_s", "bf16_tflops", "fp8_tflops", "fp4_tflops", "interconnect_gb_s",
               "max_tp")


@dataclasses.dataclass(frozen=True)
class BorrowFit:
    """A GPU's end-to-end fit of the borrowed terms (calibration/fitting/borrowed.py): overhead_scale multiplies the
    donor's TIME_TERMS, eta_bw replaces the hardware's; tpot_error is the relative TPOT band (a fraction)."""

    overhead_scale: float
    eta_bw: float | None
    tpot_error: float
    source: str
    date: str


def _kin(a: Hardware, b: Hardware) -> int:
    """0: same architecture; 1: same vendor; 2: otherwise (or unknown)."""
    arch_a, arch_b = getattr(a, "architecture", ""), getattr(b, "architecture", "")
    if arch_a and arch_a == arch_b and arch_a in ARCHITECTURES and arch_a != ARCHITECTURES[arch_a]:
        return 0
    vendor_a, vendor_b = ARCHITECTURES.get(arch_a, ""), ARCHITECTURES.get(arch_b, "")
    return 1 if vendor_a and vendor_a == vendor_b else 2


def twin_of(hardware: str, table: Mapping[str, Hardware], fitted: Mapping[tuple[str, str], Efficiency]) -> str | None:
    """The kernel-fitted GPU whose TWIN_FIELDS all equal this one's (the same chip under another name), else None."""
    hw = table[hardware]
    for name in dict.fromkeys(k[0] for k in fitted):
        if name != hardware and name in table and all(
                getattr(table[name], f) == getattr(hw, f) for f in TWIN_FIELDS):
            return name
    return None


def nearest_donor(hardware: str, dtype: str, table: Mapping[str, Hardware],
                  fitted: Mapping[tuple[str, str], Efficiency]) -> tuple[str, str] | None:
    """The kernel-fitted (GPU, dtype) to borrow from (module docstring): a twin's own fit for this dtype, else the
    same architecture, then vendor, first; the same dtype first; then the nearest HBM and interconnect bandwidths (log
    ratios; ties: the lower bandwidth); None when nothing is fitted."""
    twin = twin_of(hardware, table, fitted)
    if twin is not None:
        for key in ((twin, dtype), (twin, "bf16"), *sorted(k for k in fitted if k[0] == twin)):
            if key in fitted:
                return key
    hw = table[hardware]

    def rank(key: tuple[str, str]) -> tuple[int, bool, float, float]:
        other = table[key[0]]
        dist = abs(math.log(other.hbm_bandwidth_gb_s / hw.hbm_bandwidth_gb_s)) \
            + abs(math.log(other.interconnect_gb_s / hw.interconnect_gb_s))
        return _kin(hw, other), key[1] != dtype, dist, other.hbm_bandwidth_gb_s

    keys = [k for k in fitted if k[0] in table and k[0] != hardware]
    return min(keys, key=rank) if keys else None


def band_for(hardware: str, donor_key: tuple[str, str], table: Mapping[str, Hardware],
             fit: BorrowFit | None) -> float:
    """The relative TPOT band a borrowed set states: its end-to-end fit's error (fit_for), else SAME_ARCH_TPOT_ERROR
    from a donor of the same architecture, else ASSUMED_TPOT_ERROR."""
    if fit is not None:
        return fit.tpot_error
    return SAME_ARCH_TPOT_ERROR if _kin(table[hardware], table[donor_key[0]]) == 0 else ASSUMED_TPOT_ERROR


def fit_for(hardware: str, table: Mapping[str, Hardware], fits: Mapping[str, BorrowFit]) -> BorrowFit | None:
    """The GPU's own end-to-end fit, else one of a GPU of the same architecture (its overhead scale is the software
    stack's on that donor; its band widened to SAME_ARCH_TPOT_ERROR at least, the chip differs), else None."""
    if hardware in fits:
        return fits[hardware]
    for name, fit in sorted(fits.items()):
        if name in table and _kin(table[hardware], table[name]) == 0:
            return dataclasses.replace(fit, tpot_error=max(fit.tpot_error, SAME_ARCH_TPOT_ERROR),
                                       source=f"{name}'s fit, same architecture: {fit.source}")
    return None


def borrow(own: Efficiency, donor: Efficiency, *, donor_key: tuple[str, str], fit: BorrowFit | None,
           hardware: str, band: float | None = None, twin: bool = False, same_arch: bool = False) -> Efficiency:
    """`own` (the hardware's assumed efficiencies) with the donor's TIME_TERMS (times the fit's overhead_scale) and
    SHAPE_TERMS, and the fit's eta_bw where it has one; the source names donor, scale and band (default: the fit's
    error, else ASSUMED_TPOT_ERROR). twin: the GPU has the donor GPU's figures: the donor's set whole. same_arch (and
    no end-to-end fit): the donor's EFFICIENCY_TERMS too, its kernels reach the same share of peak on a sibling chip
    (B300 on B200's sm_100 kernels) where hardware.yaml's generic defaults would make the newer part the slower."""
    if twin:
        return dataclasses.replace(donor, source=Sourced(
            f"{hardware}: the figures of {donor_key[0]}: its {donor_key[1]} kernel fit whole ({donor.source.source})",
            donor.source.date))
    scale = fit.overhead_scale if fit else 1.0
    values = {n: getattr(donor, n) * scale for n in TIME_TERMS}
    values.update({n: getattr(donor, n) for n in SHAPE_TERMS})
    if fit and fit.eta_bw is not None:
        values["eta_bw"] = fit.eta_bw
    err = band if band is not None else fit.tpot_error if fit else ASSUMED_TPOT_ERROR
    own_bw = f"eta_bw {own.eta_bw:.3g} (its own assumed value: hardware.yaml or the spec)"
    if same_arch and fit is None:
        values.update({n: getattr(donor, n) for n in EFFICIENCY_TERMS})
        own_bw = (f"eta_bw {donor.eta_bw:.3g} and eta_flops {donor.eta_flops:.3g} of the donor (same architecture; "
                  "assumption)")
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
                          fitted_error: Mapping[tuple[str, str], float] | None = None,
                          ) -> tuple[dict[tuple[str, str], Efficiency], dict[tuple[str, str], float]]:
    """For every GPU with no kernel fit in any dtype: ({(GPU, dtype): borrowed Efficiency}, {(GPU, dtype): TPOT
    band}) over DTYPES. A GPU with a kernel fit in some dtype keeps its own fallbacks (hardware.yaml). A twin of a
    fitted GPU (twin_of) takes that fit's held-out error (fitted_error) as its band."""
    fits = fits or {}
    fitted_hw = {k[0] for k in fitted}
    out: dict[tuple[str, str], Efficiency] = {}
    err: dict[tuple[str, str], float] = {}
    for name, hw in table.items():
        if getattr(hw, "kind", "gpu") != "gpu" or name in fitted_hw or hw.efficiency.calibrated:
            continue
        twin = twin_of(name, table, fitted)
        for dtype in DTYPES:
            key = nearest_donor(name, dtype, table, fitted)
            if key is None:
                continue
            fit = None if twin else fit_for(name, table, fits)
            # a twin states what the GPU it copies states in this dtype (nothing where that one has no band)
            band = (fitted_error or {}).get((twin, dtype)) if twin else band_for(name, key, table, fit)
            out[(name, dtype)] = borrow(hw.efficiency, fitted[key], donor_key=key, fit=fit, hardware=name,
                                        band=band, twin=twin is not None, same_arch=_kin(hw, table[key[0]]) == 0)
            if band is not None:
                err[(name, dtype)] = band
    return out, err
