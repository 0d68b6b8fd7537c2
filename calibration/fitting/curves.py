"""The MoE batch curves of the published table, checked against the speculation fit (never fitted): does the model's
speedup fall with batch as the data's does? LM1-LM3 (DeepSeek-V3 MTP, H200), ATOM4-ATOM64 (MiniMax-M3 EAGLE-3, an
assumed MI355X TP8), the P-EAGLE / EAGLE-3 ratio on GPT-OSS-20B, and the planner's DeepSeek-V3 MTP sweep."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from calibration.fitting.speculation import IB_GB_S, SpecRow, evaluate_row, predict_speedup
from planner.types import Efficiency, Hardware, ModelSpec, Sourced

# MoE batch curves checked for their trend (not fitted: LM3 gives no tau; ATOM states no GPU, TP or K).
LM3_TAU_PRIOR = 1.85  # DeepSeek-V3 report (arXiv 2412.19437, section 5.4.3): 85-90 % second-token acceptance
CURVE_ROWS: dict[str, dict] = {
    "LM3": dict(engine="sglang", model="deepseek-v3", hardware="h200", dtype="fp8", tp=96, batch=128 * 96,
                method="mtp", k=1, context_tokens=2050, tau=LM3_TAU_PRIOR, attention_dp=True,
                interconnect_gb_s=IB_GB_S,
                assumption="tau not given: DeepSeek-V3's 85-90 % second-token acceptance (tau 1.85); the 96 decode "
                           "GPUs (12 nodes) as one replica with DP attention and EP96, 128 sequences per GPU; "
                           "all-to-all as LM1 (the blog's two-batch overlap, which hides part of it, not modelled)"),
}


# For the ATOM MiniMax-M3 curve only (not in the catalogue: the shipped config.json was not available here).
# Architecture from Hugging Face transformers' MiniMaxM3VLTextConfig defaults (checkpoint MiniMaxAI/MiniMax-M3-
# preview): hidden 6144, 60 layers, 64 query / 4 KV heads of 128, vocab 200064, 128 routed experts of
# 3 x 6144 x 3072 (top 4) + 1 shared expert; the dense first layers are assumed to be 3 (moe_layer_freq not
# in the defaults). GPU: AMD Instinct MI355X (ATOM is AMD's MI355X engine; the PR does not name the GPU), TP 8.
MINIMAX_M3 = ModelSpec(
    name="minimax-m3", label="MiniMax-M3 (assumed architecture)", layers=60, hidden_size=6144, heads=64,
    kv_heads=4, head_dim=128, vocab_size=200064, total_params_b=425.8, active_params_b=25.7, experts=128,
    experts_per_token=4, expert_params_b=3.227, kv_elements_per_token_per_layer=2 * 4 * 128,
    native_methods=(), draft_model=None, max_context_tokens=524288,
    source=Sourced("transformers MiniMaxM3VLTextConfig defaults (MiniMaxAI/MiniMax-M3-preview); 3 dense layers "
                   "assumed", "2026-11-30"),
    tied_embeddings=False, moe_layers=57, fp4_scope="linear")
MI355X = Hardware(
    name="mi355x", label="AMD Instinct MI355X 288GB", hbm_gb=288, hbm_bandwidth_gb_s=8000, bf16_tflops=2500,
    fp8_tflops=5000, interconnect_gb_s=537.6, max_tp=8, usd_per_gpu_hour_low=2.0, usd_per_gpu_hour_high=6.0,
    price=Sourced("not used", "2026-11-30"),
    specs=Sourced("AMD Instinct MI355X datasheet: 288 GB HBM3E, 8 TB/s, 2.5 PF FP16 / 5 PF FP8 / 10 PF MXFP4 "
                  "dense; 7 Infinity Fabric links x 153.6 GB/s, ring share 537.6 GB/s (assumption)", "2025-06-12"),
    efficiency=Efficiency(eta_bw=0.65, eta_flops=0.5, t_fixed_s=0.0015, t_fixed_draft_s=0.0002,
                          allreduce_latency_s=0.00001, source=Sourced("mi300x's assumed defaults", "2026-11-29")),
    fp4_tflops=10000)
def mi355x_with_borrowed_terms(catalog) -> Hardware:
    """MI355X for the ATOM curve check. No AMD kernel data is pinned and no public MI355X end-to-end TPOT is in
    profiles/data/published/amd_nospec_tpot.csv, so it gets the general mechanism's assumption
    (planner.physics.borrowed): the nearest kernel-fitted GPU's per-step, per-layer, MoE and collective-latency terms at
    scale 1, on MI355X's own peaks and its assumed eta_bw / eta_flops (0.65 / 0.5, as MI300X); the curve's direction is
    checked, not its level."""
    from planner.physics.borrowed import borrow, nearest_donor  # noqa: PLC0415

    fitted = getattr(catalog, "fitted_efficiency", None) or {}
    table = {**catalog.hardware, MI355X.name: MI355X}
    key = nearest_donor(MI355X.name, "fp8", table, fitted)
    if key is None:
        return MI355X
    return replace(MI355X, efficiency=borrow(MI355X.efficiency, fitted[key], donor_key=key, fit=None,
                                             hardware=MI355X.name))


ATOM_ROWS = {  # concurrency: measured total-throughput gain (ROCm/ATOM PR #1333)
    "ATOM4": (4, 1.632), "ATOM16": (16, 1.424), "ATOM64": (64, 1.145)}
ATOM_TAU, ATOM_K = 3.21, 3  # avg tokens per forward; K = (3.21 - 1) / 0.7356 acceptance rate = 3.0


@dataclass(frozen=True)
class Curve:
    name: str
    batches: tuple[float, ...]
    measured: tuple[float, ...]
    predicted: tuple[float, ...]

    @property
    def falls_in_data(self) -> bool:
        return bool(np.all(np.diff(_by_batch(self.batches, self.measured)) < 0))

    @property
    def falls_in_model(self) -> bool:
        return bool(np.all(np.diff(_by_batch(self.batches, self.predicted)) < 0))


def _by_batch(batches, values) -> np.ndarray:
    """Values per distinct batch (several rows at one batch: their mean), in batch order."""
    b = np.asarray(batches, float)
    v = np.asarray(values, float)
    return np.array([v[b == x].mean() for x in np.unique(b)])


def batch_curves(catalog, params: Mapping[str, float], rows: Sequence[SpecRow]) -> list[Curve]:
    """Every MoE batch curve of the table, measured and predicted: LM1-LM3 (DeepSeek-V3 MTP, H200), ATOM4-ATOM64
    (MiniMax-M3 EAGLE-3, assumed MI355X TP8), and the P-EAGLE / EAGLE-3 ratio on GPT-OSS-20B (MT-Bench)."""
    by_id = {r.id: r for r in rows}
    lm3 = SpecRow(id="LM3", source="lmsys", speedup=1.142, **CURVE_ROWS["LM3"])
    lm = [by_id[i] for i in ("LM1", "LM2") if i in by_id] + [lm3]
    curves = [Curve("DeepSeek-V3 MTP, H200 (LM1-LM3)", tuple(r.batch for r in lm), tuple(r.speedup for r in lm),
                    tuple(predict_speedup(lm, catalog, params)))]
    atom = [SpecRow(id=i, source="atom", engine="atom", model="minimax-m3", hardware="mi355x", dtype="fp8", tp=8,
                    batch=b, method="eagle3", k=ATOM_K, tau=ATOM_TAU, context_tokens=8192 + 512, speedup=s,
                    assumption="GPU, TP and the architecture's dense layers assumed (see MINIMAX_M3)")
            for i, (b, s) in ATOM_ROWS.items()]
    curves.append(Curve("MiniMax-M3 EAGLE-3, AMD (ATOM4-ATOM64)", tuple(r.batch for r in atom),
                        tuple(r.speedup for r in atom),
                        tuple(predict_speedup(atom, catalog, params,
                                              hardware={"mi355x": mi355x_with_borrowed_terms(catalog)},
                                              models={"minimax-m3": MINIMAX_M3}))))
    pe = [r for r in rows if r.id.startswith("PE_MT-Bench")]
    if pe:
        curves.append(Curve("GPT-OSS-20B P-EAGLE / EAGLE-3, B200 (PE_MT-Bench)", tuple(r.batch for r in pe),
                            tuple(r.speedup for r in pe), tuple(predict_speedup(pe, catalog, params))))
    return curves


def deepseek_mtp_sweep(catalog, params: Mapping[str, float] | None = None,
                       batches: Sequence[float] = (1, 2, 4, 8, 16, 32, 64, 128, 256), *, tau: float = 1.85,
                       context_tokens: float = 1100.0, hardware: str = "h200") -> np.ndarray:
    """DeepSeek-V3 MTP K=1 on 8 GPUs (H200 by default), fp8: the planner's speedup per batch (the shipped parameters
    by default)."""
    from planner.search.scenario import efficiency_for  # noqa: PLC0415

    eff = efficiency_for(catalog, hardware, "fp8")
    if params:
        eff = replace(eff, **params)
    row = SpecRow(id="sweep", source="", engine="vllm", model="deepseek-v3", hardware=hardware, dtype="fp8", tp=8,
                  batch=1, method="mtp", k=1, tau=tau, context_tokens=context_tokens, speedup=1.0)
    return np.array([float(evaluate_row(replace(row, batch=float(b)), catalog, eff, method="mtp", k=1, tau=tau).speedup)
                     for b in batches])
