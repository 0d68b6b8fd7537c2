"""Fit the speculation overheads of planner/physics/serving.py to published, measured speculative-decoding speedups.

Data (pinned): profiles/data/published/published_specdec.csv, a copy of the shared training table (73 rows;
its README beside it says how to read each column). Only rows with `verified == yes` whose configuration is
stated (model, GPU, TP, batch, method, K) and whose acceptance length tau is given are fitted: USABLE below
maps each to one planner evaluation (planner.physics.serving.evaluate_arrays, the same call the planner makes) and
names every assumption it needs (context length where the source gives only the dataset, the mapping of a
disaggregated deployment onto one replica). Every other `yes` row is listed with the reason it is left out.
Rows measured on a serving engine (SERVING_ENGINES) are fitted; a research prototype's rows (MagicDec's gpt-fast
loop) are predicted with the fit and reported beside it, level and batch trend, never fitted (RESEARCH_LOOPS says
why), and the leave-one-source-out error is printed with and without them.

Model, per row (speedup as the source measures it: TPOT or per-user tok/s ratio at the same batch; the
P-EAGLE rows are TPS of P-EAGLE at K=7 against the best EAGLE-3 (the faster of K=3 and K=7, whose ALs the source
states) at the same concurrency, so the model's number is a ratio of evaluations):
    speedup = T_base(B) / (T_spec(B) / tau) ,  T_spec = T_verify + T_draft(t_fixed_draft_s)
              + t_spec_s + sampler_vocab_passes * B * (n - 1) * V * 4 B / HBM bandwidth  (+ t_ngram_s * B for n-gram)
(n - 1 drafted tokens per sequence reach the verifier: K for a chain, the tree's draft nodes for a tree; each adds
a target row of the V-token vocabulary to the sampler's fp32 work: planner.physics.serving.sampler_time_s)
with the step-time terms fixed at their kernel fit (tools/fit_steptime.py, via planner.search.scenario.efficiency_for).
Assumes measured = predicted * exp(eps): least squares on log(predicted / measured) (core.fit_relative).
Fitted: t_spec_s, sampler_vocab_passes, each held at its prior (PRIORS) where the table does not identify it
(core: on a bound, or a standard error above its value). Held at priors by design (PRIORS, T_NGRAM_S; the table
cannot identify them, see PRIORS): t_fixed_draft_s, moe_verify_overlap, t_ngram_s (one usable n-gram row).

Leave-one-source-out cross-validation: each source's rows are predicted by a fit to all other sources.

    python tools/fit_speculation.py            # fit, print residuals and CV, write the shipped YAML
    python tools/fit_speculation.py --check    # fit and compare with the shipped YAML (exit 1 on a mismatch)
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from calibration.fitting import specbundle
from calibration.fitting.core import FitResult, fit_relative
from planner.physics.roofline import head_net, hw_params, null_net, target_net
from planner.physics.serving import DRAFTING_MODE_CODE, evaluate_arrays
from planner.types import Efficiency, Hardware, ModelSpec

ROOT = Path(__file__).resolve().parents[2]

TABLE_CSV = ROOT / "profiles" / "data" / "published" / "published_specdec.csv"
OUT_YAML = ROOT / "profiles" / "data" / "fitted" / "speculation_vllm.yaml"
DATA_SOURCE = "published_specdec.csv (209 published speculative-decoding results, shared training table)"
TABLE_VERSION = "2026-12-02"
# Parameters a fit may set, their start values and bounds (seconds, fp32 vocabulary-row passes, seconds, share).
PARAM_NAMES = ("t_spec_s", "sampler_vocab_passes", "t_fixed_draft_s", "moe_verify_overlap")
P0 = (5e-4, 20.0, 3e-4, 0.5)
BOUNDS = ((0.0, 0.0, 0.0, 0.0), (5e-3, 1000.0, 3e-3, 1.0))
# The shipped fit's free parameters; the others are held at priors, because the table cannot identify them:
# - moe_verify_overlap: fitted, it came back 0 +- 0.8 (2026-11-30) and again after the row-mapping fixes: the
#   table's MoE rows (DeepSeek-V3 at batch 2, GPT-OSS P-EAGLE against EAGLE-3) cannot separate it from the
#   overheads. Prior 0: a sequence's verify tokens route independently (routed_tokens = B (K+1)), the first
#   planner's assumption and the bound every fit returned.
# - t_fixed_draft_s: only one source (P-EAGLE against EAGLE-3: one draft pass against K) varies the number of draft
#   passes at a fixed step; fitted, it is 0.34 ms with that source and 0.92 ms without it (leave-one-source-out),
#   trading off against t_spec_s. Prior: hardware.yaml's assumed 0.2 ms per draft pass (launch + draft sampling),
#   on top of the pass's kernel-fitted roofline and per-layer floors (planner.physics.roofline.step_time_terms).
# A parameter that one source alone identifies cannot be cross-validated; each fold would fit it to its own sources.
FIT_NAMES = ("t_spec_s", "sampler_vocab_passes")
# {name: (value, why)}: the value a parameter is held at, by design (not in FIT_NAMES) or when the fit finds the table
# does not identify it (core.least_squares).
PRIORS = {
    "moe_verify_overlap": (0.0, "0, a sequence's verify tokens route independently (the first planner's assumption; "
                                "fitted, 0 +- 0.8: the table does not identify it)"),
    "t_fixed_draft_s": (2e-4, "hardware.yaml's assumed 0.2 ms launch + draft sampling per draft pass (one source "
                              "alone identifies it: fitted 0.34 ms with it, 0.92 ms without it)"),
    "t_spec_s": (3e-4, "hardware.yaml's assumed 0.3 ms per speculative step (rejection sampling + proposer "
                       "bookkeeping)"),
    "sampler_vocab_passes": (0.0, "0, no sampler work per drafted token (the first planner's value)"),
}
# vLLM's n-gram proposer (numba prompt lookup) per sequence per step (assumption: tens of microseconds on a
# host core); held fixed: the table has one usable n-gram row.
T_NGRAM_S = 2e-5


@dataclass(frozen=True)
class SpecRow:
    """One published measurement as a planner evaluation. Units in names; None: the method's default."""

    id: str
    source: str  # the CSV's source column (LOSO groups)
    engine: str
    model: str
    hardware: str
    dtype: str
    tp: int
    batch: float
    method: str
    k: int
    tau: float  # measured acceptance length, bonus token included
    context_tokens: float
    speedup: float  # measured
    verify_tokens: float | None = None
    draft_passes: float | None = None
    draft_tokens_per_pass: float | None = None
    draft_layers: float | None = None  # the drafter's layers when the source states them
    draft_context_tokens: float | None = None
    self_speculative: bool = False  # the draft is the target itself with a reduced KV (MagicDec)
    # speedup against another speculative method at the same batch, at its best K: the candidate
    # configurations (method, K, tau) the source swept and states the acceptance of; the reference is the
    # fastest of them (the source picks "the K that maximizes TPS" per concurrency)
    reference: tuple[tuple[str, int, float], ...] | None = None
    kv_dtype: str | None = None  # the KV-cache dtype the source states (None: planner default)
    # the (hardware, dtype) whose kernel-fitted step-time terms stand in where this row's own has no fit
    step_fit_from: tuple[str, str] | None = None
    # the n-gram proposer of the timed runs is a GPU kernel inside the engine's CUDA graph (TensorRT-LLM's suffix
    # automaton since late 2025; not the TR7c runs, which predate it), not a host lookup per
    # sequence (vLLM's numba prompt lookup, t_ngram_s): no per-sequence host time
    ngram_on_gpu: bool = False
    # the deployment runs attention data parallel with expert-parallel MoE over its tp GPUs (SGLang DP attention,
    # vLLM --data-parallel-size --enable-expert-parallel): planner.physics.roofline.step_time_terms(attention_dp=1)
    attention_dp: bool = False
    interconnect_gb_s: float | None = None  # the all-to-all's per-GPU link when it crosses nodes (None: NVLink)
    assumption: str = ""


# The engines the planner's deployments run on; the fit uses their rows only. A research prototype's rows measure
# its own per-step loop, which no serving engine shares (RESEARCH_LOOPS), so they are a check, not fit data.
SERVING_ENGINES = ("vllm", "sglang", "trtllm")
RESEARCH_LOOPS = {
    "gpt-fast": ("MagicDec's self-speculation benchmark (tests/StreamingLLM/selfspec_benchmark.py) verifies in a "
                 "Python loop each step: cumprod, boolean masks over batch x max-length position buffers, "
                 "`.any()` / `.max()` host synchronisations and a boolean-mask scatter into the output, where serving "
                 "engines run rejection sampling in fused GPU kernels inside the step; its per-step cost is the "
                 "prototype's, not a serving engine's"),
}


def split_rows(rows: Sequence[SpecRow]) -> tuple[list[SpecRow], list[SpecRow]]:
    """(rows the fit uses: serving engines, rows only checked against it: research prototypes' loops)."""
    return ([r for r in rows if r.engine in SERVING_ENGINES], [r for r in rows if r.engine not in SERVING_ENGINES])


# Per-GPU network link of a multi-node expert-parallel all-to-all: ConnectX-7 400 Gb/s (DeepEP README's test
# set-up: "CX7 InfiniBand 400 Gb/s RDMA network card (~50 GB/s maximum bandwidth)").
IB_GB_S = 50.0
# Share of that link DeepEP's low-latency kernels reach across nodes (its README: 39-46 GB/s "RDMA bandwidth" at
# EP64-EP256, 128 tokens per GPU, ~50 GB/s NICs); the kernel fit's eta_alltoall is a share of NVLink instead.
IB_ALLTOALL_SHARE = 0.8
# Each usable row: the planner configuration the source states; tau and speedup are read from the CSV.
USABLE: dict[str, dict] = {
    "LM1": dict(engine="sglang", model="deepseek-v3", hardware="h200", dtype="fp8", tp=16, batch=32, method="mtp",
                k=2, context_tokens=65536 + 2048, attention_dp=True, interconnect_gb_s=IB_GB_S,
                assumption="the 16 decode GPUs (2 nodes) as one replica with DP attention and EP16, 2 sequences per "
                           "GPU (batch 32); all-to-all on vLLM's fitted DeepEP latency over a 400 Gb/s NIC per GPU at "
                           "DeepEP's measured 80 % of it (the two nodes); '3-token MTP window' read as K=2; "
                           "context ISL 65536 + OSL/2"),
    "LM2": dict(engine="sglang", model="deepseek-v3", hardware="h200", dtype="fp8", tp=16, batch=32, method="mtp",
                k=3, context_tokens=65536 + 2048, attention_dp=True, interconnect_gb_s=IB_GB_S,
                assumption="as LM1; '4-token MTP window' read as K=3"),
    "TR7c": dict(engine="trtllm", model="llama-4-scout", hardware="b200", dtype="fp8", tp=8, batch=32,
                 method="ngram", k=3, context_tokens=1500, step_fit_from=("b200", "bf16"),
                 assumption="context ~1.5k tokens (Magpie 2nd turn); K = v = 3 (max_draft_len; k = 5 is the "
                            "matching n-gram size), AL 1.66 of the k=5, v=3 configuration (turn 2); the timed runs "
                            "used the host n-gram pool (a host lookup per sequence, t_ngram_s): the blog as first "
                            "published says 'N-Gram algorithm runs on the host with low overhead' with the same "
                            "speedups and figures; the pinned revision describes the later GPU suffix-automaton "
                            "kernel but kept those measurements ('TODO image needs to be updated'); no kernel data "
                            "for FP8 on B200: the B200 BF16 kernel fit's terms on B200's FP8 peaks"),
    **{f"PE_{ds}_{c}": dict(engine="vllm", model="gpt-oss-20b", hardware="b200", dtype="mxfp4", tp=1, batch=c,
                            method="p_eagle", k=7, context_tokens=1000, draft_layers=4.0, kv_dtype="fp8",
                            step_fit_from=("b200", "bf16"),
                            reference=(("eagle3", 3, tau3), ("eagle3", 7, tau7)),
                            assumption="context ~1k tokens (prompt + half the 2048-token output cap); speedup is "
                                       "P-EAGLE K=7 TPS over the best EAGLE-3 at the same concurrency: the faster "
                                       f"of K=3 (AL {tau3}) and K=7 (AL {tau7}) for {ds} (K=5's AL is not given); "
                                       "fp8 KV cache (the stated --kv-cache-dtype fp8); no kernel data for MXFP4: "
                                       "the B200 BF16 kernel fit's terms on B200's MXFP4 peaks")
       for ds, tau3, tau7, cs in (("MT-Bench", 2.70, 3.27, (1, 4, 16, 64)), ("HumanEval", 2.65, 3.03, (1, 64)),
                                  ("SPEED-Bench", 2.24, 2.59, (1, 64)))
       for c in cs},
    **{rid: dict(engine="gpt-fast", model="llama-3.1-8b", hardware=hw, dtype="bf16", tp=8, batch=b,
                 method="draft_model", k=k, context_tokens=32000, draft_context_tokens=512, self_speculative=True,
                 assumption="self-speculation: the target drafts with a 512-token StreamingLLM KV; tau from the "
                            "source's alpha 0.81 at 32k")
       for rid, hw, b, k in (("MD1", "a100-80gb-sxm", 32, 3), ("MD2", "a100-80gb-sxm", 64, 3),
                             ("MD3", "a100-80gb-sxm", 128, 4), ("MD10", "h100-sxm", 32, 3),
                             ("MD11", "h100-sxm", 64, 3))},
    "PI4": dict(engine="sglang", model="qwen3-8b", hardware="h100-sxm", dtype="bf16", tp=1, batch=1, method="eagle3",
                k=3, context_tokens=400, assumption="GSM8K context ~400 tokens; 'EAGLE' head taken as EAGLE-3"),
    "PI5": dict(engine="sglang", model="qwen3-8b", hardware="h100-sxm", dtype="bf16", tp=1, batch=1, method="eagle3",
                k=3, context_tokens=400, verify_tokens=21, draft_passes=3, draft_tokens_per_pass=4,
                assumption="tree depth 3 x branching 4, 21 verified tokens (SGLang num_draft_tokens); as PI4"),
}
@dataclass(frozen=True)
class Skipped:
    id: str
    reason: str


def first_number(text: str) -> float | None:
    m = re.search(r"\d+(?:\.\d+)?", text or "")
    return float(m.group()) if m else None


def read_table(path: Path = TABLE_CSV) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# `verified` labels whose speedup is still one measured ratio at one stated configuration and batch: `yes`, and
# `yes (speedup derived)` (SpecBundle: the ratio of the two output throughputs the source states for the same target,
# benchmark, batch size and server settings, computed by us; the measurements are the source's). Not accepted: ranges
# over configurations or concurrencies (`yes (range)`, `yes (range only)`: no single batch), and rows that give only
# tau, only absolute numbers, an incomplete configuration or a headline (README beside the table).
ACCEPTED_LABELS = ("yes", "yes (speedup derived)")


def row_config(rid: str) -> dict | None:
    """The planner configuration of a row: USABLE's, else the SpecBundle id mapping (specbundle.config)."""
    return USABLE.get(rid) or specbundle.config(rid)


def usable_rows(table: Sequence[Mapping[str, str]]) -> tuple[list[SpecRow], list[Skipped]]:
    """The rows the fit uses, and every other `verified == yes...` row with why it is left out."""
    rows, skipped = [], []
    for r in table:
        rid, label = r["id"], r["verified"].strip()
        if not label.startswith("yes"):
            continue
        tau, speedup = first_number(r["tau"]), first_number(r["speedup"])
        if label not in ACCEPTED_LABELS:
            skipped.append(Skipped(rid, f"verified = {label!r}: not one measured ratio at a stated configuration "
                                        f"and batch (ACCEPTED_LABELS); {_why_not(r, tau, speedup)}"))
            continue
        cfg = row_config(rid)
        if cfg is not None and (why := specbundle.left_out(rid)):
            skipped.append(Skipped(rid, why))
            continue
        if cfg is None:
            skipped.append(Skipped(rid, _why_not(r, tau, speedup)))
            continue
        if tau is None or speedup is None:
            raise ValueError(f"row {rid}: tau={r['tau']!r}, speedup={r['speedup']!r}: USABLE needs both numbers")
        if rid.startswith("SBD_") and first_number(r["batch"]) != cfg["batch"]:
            raise ValueError(f"row {rid}: batch={r['batch']!r}, the mapping says {cfg['batch']}")
        rows.append(SpecRow(id=rid, source=r["source"], tau=tau, speedup=speedup, **cfg))
    return rows, skipped


def _why_not(r: Mapping[str, str], tau: float | None, speedup: float | None) -> str:
    if tau is None and not r["id"].startswith(("RDD_", "RE3_", "RSX_", "SGO_")):
        return "no acceptance length given"
    if speedup is None:
        return "no speedup given"
    if r["id"] in ("TR7a", "TR7b"):
        return ("the AL 1.66 (k=3, v=5, turn 2) was measured over 3000 sampled conversations, the speedups over "
                "20 x batch requests: at batch 1 the speedup 1.96 exceeds that AL, impossible for one sample (a "
                "verify step is never cheaper than a decode step), so the AL does not describe the timed runs")
    if r["id"].startswith("IX"):
        return "B300 and MiniMax-M3 are not in the catalogue (no verified public specs/config.json here)"
    if r["id"].startswith("ATOM"):
        return "GPU, TP and K not stated (trend checked in batch_curves, not fitted)"
    why = {"RDD_": "AMD 'Deep Dive' (MI300X, draft models): mean end-to-end request latency under a request-rate load "
                   "(concurrency not stated), K not stated for the 70B rows, and no acceptance length",
           "RE3_": "AMD MI355X EAGLE-3 (the AE1/AE2 measurements): MI355X is not in the catalogue (and K is not stated "
                   "for the Kimi-K2.5 rows)",
           "RSX_": "AMD MI300X draft models: a range over 8 target/draft pairs or the side of 1.0 read off a figure",
           "SGO_": "SGLang gpt-oss-120b: the GPU is not stated (the fa3 backend runs on H100 and H200 alike) and the "
                   "speedup is the best over three datasets"}
    for prefix, text in why.items():
        if r["id"].startswith(prefix):
            return text + ("" if tau is not None else "; no acceptance length given")
    return "configuration not fully stated"


# ----------------------------------------------------------------------------------------------
# The planner evaluation of a row
# ----------------------------------------------------------------------------------------------

def base_efficiency(catalog, hardware: str, dtype: str, step_fit_from: tuple[str, str] | None = None,
                    model: ModelSpec | None = None) -> Efficiency:
    """The step-time parameters the planner runs this (hardware, dtype) with, before any speculation fit
    (planner.context.step_efficiency, the planner's own choice): the kernel fit, else the kernel fit of
    `step_fit_from` (a row's named assumption: the same GPU's fit in another dtype; efficiencies and per-layer,
    per-token and MoE terms carry over, the peaks stay the row's), else the same GPU's fit in another dtype, else for
    a GPU without kernel data the borrowed terms (planner.physics.borrowed), else the hardware's defaults; per-step
    terms from a fit that covers the model's architecture family."""
    from planner.context import step_efficiency  # noqa: PLC0415

    return step_efficiency(catalog, hardware, dtype, model, fit_from=step_fit_from)


def evaluate_row(row: SpecRow, catalog, eff: Efficiency, *, method: str, k: int, tau: float,
         hardware: Hardware | None = None, model: ModelSpec | None = None):
    model = model or catalog.models[row.model]
    hw = hardware or catalog.hardware[row.hardware]
    if row.interconnect_gb_s is not None:  # a multi-node all-to-all: the NIC, at DeepEP's measured share of it
        hw = replace(hw, interconnect_gb_s=row.interconnect_gb_s)
        eff = replace(eff, eta_alltoall=IB_ALLTOALL_SHARE)
    m = catalog.methods[method]
    if row.draft_layers is not None and method == row.method:
        m = replace(m, draft_layers=row.draft_layers)
    target = target_net(model, row.dtype, kv_dtype=row.kv_dtype)
    draft_total, is_model = 0.0, m.drafting == "draft_model"
    if is_model:
        dm = model if row.self_speculative else catalog.models[model.draft_model]
        draft = target_net(dm, row.dtype, kv_dtype=row.kv_dtype)
    elif m.drafting == "ngram":
        draft = null_net()
    else:
        draft = head_net(m, model, row.dtype, kv_dtype=row.kv_dtype)
    tree = {}
    if method == row.method and row.draft_passes is not None:
        tree = dict(draft_passes_override=row.draft_passes, draft_tokens_per_pass_override=row.draft_tokens_per_pass)
    return evaluate_arrays(
        target=target, draft=draft, hw=hw_params(hw, row.dtype, eff), mode=DRAFTING_MODE_CODE[m.drafting],
        draft_scales_with_k=m.draft_params_scale_with_k, k=float(k), batch=float(row.batch), tau=float(tau),
        context_tokens=row.context_tokens, prompt_tokens=row.context_tokens, output_tokens=256.0,
        usd_per_gpu_hour=1.0, tp=row.tp,
        verify_tokens=row.verify_tokens if method == row.method and row.verify_tokens else None,
        draft_weight_bytes_total=draft_total, draft_is_model=is_model,
        draft_context_tokens=row.draft_context_tokens if method == row.method else None,
        attention_dp=1.0 if row.attention_dp else 0.0, **tree)


def engine_params(params: Mapping[str, float], engine: str) -> dict[str, float]:
    """The Efficiency fields of `params` for a row of `engine`: an engine's own term (`name@engine`, engines.key)
    replaces the pooled one; other engines' terms are dropped."""
    out = {n: v for n, v in params.items() if "@" not in n}
    suffix = f"@{engine}"
    out.update({n[: -len(suffix)]: v for n, v in params.items() if n.endswith(suffix)})
    return out


def predict_speedup(rows: Sequence[SpecRow], catalog, params: Mapping[str, float], *,
                    hardware: Mapping[str, Hardware] | None = None,
                    models: Mapping[str, ModelSpec] | None = None) -> np.ndarray:
    """The planner's speedup for each row with the speculation parameters `params` (Efficiency fields)."""
    out = np.empty(len(rows))
    for i, row in enumerate(rows):
        row_params = engine_params(params, row.engine)
        hw = (hardware or {}).get(row.hardware)
        model = (models or {}).get(row.model)
        base = (base_efficiency(catalog, row.hardware, row.dtype, row.step_fit_from,
                                model or catalog.models.get(row.model)) if hw is None else hw.efficiency)
        eff = replace(base, t_ngram_s=0.0 if row.ngram_on_gpu else T_NGRAM_S, **row_params)
        res = evaluate_row(row, catalog, eff, method=row.method, k=row.k, tau=row.tau, hardware=hw, model=model)
        s = float(res.speedup)
        if row.reference is not None:  # against the other method at its best K: its fastest candidate
            ref_tpot_s = min(float(evaluate_row(row, catalog, eff, method=m, k=k, tau=t, hardware=hw,
                                                model=model).tpot_s) for m, k, t in row.reference)
            s = ref_tpot_s / float(res.tpot_s)
        out[i] = s
    return out


# ----------------------------------------------------------------------------------------------
# The fit
# ----------------------------------------------------------------------------------------------

def fit_speculation(rows: Sequence[SpecRow], catalog, *, names: Sequence[str] = FIT_NAMES,
                    p0: Sequence[float] | None = None, fixed: Mapping[str, float] | None = None) -> FitResult:
    """Least squares of log(predicted / measured speedup) over `rows` for the parameters `names`
    (Efficiency fields of PARAM_NAMES, seconds or a share); `fixed` holds others (PRIORS for any not named).
    A named parameter the rows do not identify is held at its PRIORS value (FitResult.held says why)."""
    if not rows:
        raise ValueError("no rows to fit")
    names = tuple(names)
    fixed = {**{n: v for n, (v, _) in PRIORS.items() if n not in names}, **(fixed or {})}
    idx = [PARAM_NAMES.index(n) for n in names]
    p0 = tuple(P0[i] for i in idx) if p0 is None else tuple(p0)
    bounds = (tuple(BOUNDS[0][i] for i in idx), tuple(BOUNDS[1][i] for i in idx))
    y = np.array([r.speedup for r in rows])

    def model(p: np.ndarray) -> np.ndarray:
        return predict_speedup(rows, catalog, {**fixed, **dict(zip(names, map(float, p)))})

    return fit_relative(model, y, names=names, p0=p0, bounds=bounds, priors={n: PRIORS[n] for n in names})


def fitted_params(fit: FitResult) -> dict[str, float]:
    """Every speculation parameter a fit implies: its fitted values and the PRIORS it held."""
    return {**{n: v for n, (v, _) in PRIORS.items()}, **fit.as_dict()}


@dataclass(frozen=True)
class CrossValidation:
    """Leave-one-source-out: each row predicted by a fit to the other sources' rows."""

    rows: tuple[SpecRow, ...]
    residuals: np.ndarray  # predicted / measured - 1, held out
    fits: Mapping[str, FitResult]  # per held-out source

    @property
    def mape(self) -> float:
        return float(np.mean(np.abs(self.residuals)))

    def mape_by(self, key) -> dict[str, float]:
        groups = defaultdict(list)
        for r, e in zip(self.rows, self.residuals):
            groups[key(r)].append(abs(e))
        return {g: float(np.mean(v)) for g, v in groups.items()}


def cross_validate(rows: Sequence[SpecRow], catalog) -> CrossValidation:
    sources = list(dict.fromkeys(r.source for r in rows))
    res = np.empty(len(rows))
    fits = {}
    for src in sources:
        train = [r for r in rows if r.source != src]
        test = [i for i, r in enumerate(rows) if r.source == src]
        fit = fit_speculation(train, catalog)
        fits[src] = fit
        pred = predict_speedup([rows[i] for i in test], catalog, fitted_params(fit))
        res[test] = pred / np.array([rows[i].speedup for i in test]) - 1.0
    return CrossValidation(tuple(rows), res, fits)
