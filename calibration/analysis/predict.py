"""The planner's step-time model applied to calibration runs: fit its machine parameters, predict every
engine run with them, and compare with the measurement (in-sample and held out).

Wall time of one measured group (B prompts submitted together, greedy, fixed output length L_out, so every
sequence decodes in lockstep; planner/physics/roofline.py gives each step):
    T_prefill = step(target, batch=B, tokens_per_seq=L_in, context=L_in/2)   [+ same on the draft model]
    T_iter    = step(target, batch=B, tokens_per_seq=K+1, context=L_in+L_out/2, t_fixed=t_fixed_s)
              + t_spec_s  (any speculative config: proposer host work, rejection sampling, bookkeeping)
              + draft_model only: K * step(draft, batch=B, tokens_per_seq=1, ..., t_fixed=t_fixed_draft_s)
                (n-gram lookup runs on the host: no accelerator term)
    wall      = T_prefill + (L_out - 1) / tau * T_iter     (the first output token comes from the prefill)
    output_tokens_per_s = B * L_out / wall
(planner/physics/roofline.py for the step; Leviathan et al. 2023 for tokens per step = tau.)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibration.analysis.fit import FitResult, fit_least_squares
from calibration.analysis.head_cost import HEAD_METHODS, head_draft_times_s
from calibration.harness.engine_settings import DTYPE_BYTES_VS_BF16
from calibration.storage.records import GroupRecord
from calibration.targets.catalog import catalog, model_spec

# Parameter bounds for the fits (physical ranges: efficiencies are fractions of peak; fixed times are
# between 0 and 1 s per step on any machine this runs on).
ETA_BOUNDS = (1e-3, 1.0)  # fractions of a datasheet peak
# On a CPU the peaks are assumptions (profiles.cpu_hardware: cores x 2.5 GHz x 32 FP32 FLOP/cycle, 10 GB/s);
# bf16 matrix units (AMX, AVX512-BF16) beat them, so eta is "achieved / assumed peak" and may exceed 1.
ETA_BOUNDS_CPU = (1e-3, 8.0)
T_FIXED_BOUNDS_S = (0.0, 1.0)


def engine_net(name: str, dtype: str = "bfloat16") -> Any:
    """planner.physics.roofline.target_net of the model `name` with its weights and KV cache in `dtype`."""
    from planner.physics.roofline import target_net

    if dtype not in DTYPE_BYTES_VS_BF16:
        raise ValueError(f"dtype={dtype!r} not allowed; allowed: {tuple(DTYPE_BYTES_VS_BF16)}")
    net = target_net(model_spec(name))
    f = DTYPE_BYTES_VS_BF16[dtype]
    if f == 1.0:
        return net
    return dataclasses.replace(net, dense_weight_bytes=net.dense_weight_bytes * f, expert_bytes=net.expert_bytes * f,
                               kv_bytes_per_token=net.kv_bytes_per_token * f,
                               resident_only_bytes=net.resident_only_bytes * f)


@functools.lru_cache(maxsize=1)
def machine() -> Any:
    """planner.types.Hardware describing this machine (profiles.cpu_hardware on CPU)."""
    from profiles import cpu_hardware

    return cpu_hardware()


def machine_for(records: Sequence[GroupRecord], dtype: str = "bf16") -> Any:
    """The hardware the records were measured on, as the fit's starting point. A GPU run (records' `extra` from
    calibration.storage.records.device_identity) is the catalogue entry of its device (profiles.hardware_for_device)
    with that entry's fitted parameters (planner.search.scenario.efficiency_for), so its calibration refines the entry;
    CPU runs are this machine's CPU (machine()). Records from different devices, or a GPU the catalogue does
    not hold, are refused: its peaks are unknown, so its efficiencies would mean nothing."""
    from planner.search.scenario import efficiency_for
    from profiles import hardware_for_device

    devices = {(r.extra.get("device", "cpu"), r.extra.get("device_name", ""), r.extra.get("device_memory_gib"))
               for r in records}
    if len(devices) > 1:
        raise ValueError(f"records come from {len(devices)} devices {sorted(map(str, devices))}: fit one device's "
                         "runs at a time")
    kind, name, gib = devices.pop() if devices else ("cpu", "", None)
    if kind != "cuda":
        return machine()
    cat = catalog()
    key = hardware_for_device(cat, name, gib) if (cat is not None and name) else None
    if key is None:
        known = ", ".join(k for k, h in (cat.hardware.items() if cat else ()) if getattr(h, "kind", "gpu") == "gpu")
        raise ValueError(f"device {name or '(name not recorded)'!r} ({gib} GiB) matches no catalogue hardware entry "
                         f"({known}): add it to profiles/data/hardware.yaml with its datasheet peaks to calibrate "
                         "its step time")
    return dataclasses.replace(cat.hardware[key], efficiency=efficiency_for(cat, key, dtype))


@dataclass(frozen=True)
class EngineParams:
    eta_bw: float
    eta_flops: float
    t_fixed_s: float  # per verifier step
    t_fixed_draft_s: float  # per draft-model step
    t_spec_s: float  # per verifier step of any speculative config: proposer bookkeeping, rejection sampling
    # Compute efficiency of the prefill (NaN: eta_flops). A prefill multiplies hundreds of prompt tokens at once,
    # a decode step B * (K + 1): on the 2-core CPU the prefill reached ~2x the decode step's FLOP/s (code, B=8:
    # 5.6 ms per prompt token against ~10 ms per decoded token), which one eta_flops cannot express.
    eta_prefill_flops: float = math.nan
    # Per head method (calibration.analysis.method_costs): {method: {"t_fixed_draft_s": per pass, "t_spec_s": per
    # step}}; a method without an entry uses t_fixed_draft_s and t_spec_s above.
    method_terms: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["method_terms"] = {m: dict(t) for m, t in self.method_terms.items()}
        return d

    def term(self, method: str, name: str) -> float:
        """`name` (t_fixed_draft_s or t_spec_s) for `method`: its own calibrated value, else the shared one."""
        return float(self.method_terms.get(method, {}).get(name, getattr(self, name)))

    def with_method_terms(self, method: str, **terms: float) -> EngineParams:
        return dataclasses.replace(self, method_terms={**self.method_terms, method: {**self.method_terms.get(
            method, {}), **terms}})


def _hw(hw: Any, eta_bw: float, eta_flops: float) -> Any:
    from planner.physics.roofline import hw_params

    return dataclasses.replace(hw_params(hw), eta_bw=eta_bw, eta_flops=eta_flops)


def _group_shape(rec: GroupRecord) -> tuple[float, float, float]:
    b = float(rec.num_prompts)
    if b <= 0:
        raise ValueError(f"num_prompts={rec.num_prompts} not allowed for a prediction: must be >= 1")
    l_in = rec.prompt_tokens / b
    l_out = rec.max_output_tokens or rec.output_tokens / b
    return b, l_in, float(l_out)


def predict_wall_time_s(rec: GroupRecord, p: EngineParams, *, tau: float | None = None,
                        draft_tokens_per_step: float | None = None, hw: Any | None = None) -> float:
    """Predicted wall time of the group `rec` (shape, method, K) with parameters `p` and `tau` output tokens
    per verifier step per sequence (default: the measured `rec.tokens_per_sequence_step`)."""
    t_prefill, t_iter, steps = predict_times(rec, p, tau=tau, draft_tokens_per_step=draft_tokens_per_step, hw=hw)
    return t_prefill + steps * t_iter


def draft_tokens_per_sequence_step(rec: GroupRecord) -> float:
    """Draft tokens the verifier checks per sequence step, as measured: K on every step for a draft model;
    fewer for n-gram, which proposes nothing without a match and fewer than K tokens when the matched
    continuation is short. 0 for the baseline."""
    if rec.method == "none":
        return 0.0
    steps = rec.sequence_steps
    if steps <= 0 or rec.counts.num_draft_tokens <= 0:
        return float(rec.k)
    return min(float(rec.k), rec.counts.num_draft_tokens / steps)


def predict_times(rec: GroupRecord, p: EngineParams, *, tau: float | None = None,
                  draft_tokens_per_step: float | None = None,
                  hw: Any | None = None) -> tuple[float, float, float]:
    """(prefill time s, time per decode iteration s, decode iterations) of the group `rec`. The verifier
    step checks 1 + `draft_tokens_per_step` tokens per sequence (default: as measured,
    `draft_tokens_per_sequence_step`)."""
    from planner.physics.roofline import step_time_s

    hw = hw or machine()
    hwp = _hw(hw, p.eta_bw, p.eta_flops)
    dtype = str(rec.extra.get("dtype", "bfloat16"))  # records before the dtype choice ran bf16
    b, l_in, l_out = _group_shape(rec)
    measured_tau = tau is None
    tau = rec.tokens_per_sequence_step if tau is None else tau
    if not (tau >= 1.0 and math.isfinite(tau)):
        raise ValueError(f"acceptance_length={tau} not allowed for config {rec.config_label}: must be >= 1")
    target = engine_net(rec.model, dtype)
    ctx = l_in + l_out / 2.0
    hwp_prefill = _hw(hw, p.eta_bw, p.eta_prefill_flops if math.isfinite(p.eta_prefill_flops) else p.eta_flops)
    t_prefill, _ = step_time_s(target, hwp_prefill, batch=b, tokens_per_seq=l_in, context_tokens=l_in / 2.0,
                               t_fixed_s=p.t_fixed_s)
    verified = 1.0 + (draft_tokens_per_sequence_step(rec) if draft_tokens_per_step is None
                      else draft_tokens_per_step)
    t_iter, _ = step_time_s(target, hwp, batch=b, tokens_per_seq=verified, context_tokens=ctx,
                            t_fixed_s=p.t_fixed_s)
    if rec.method == "draft_model":
        if not rec.draft:
            raise ValueError(f"draft=None not allowed for method='draft_model' in config {rec.config_label}")
        draft = engine_net(rec.draft, dtype)
        t_dp, _ = step_time_s(draft, hwp_prefill, batch=b, tokens_per_seq=l_in, context_tokens=l_in / 2.0,
                              t_fixed_s=p.t_fixed_draft_s)
        t_d, _ = step_time_s(draft, hwp, batch=b, tokens_per_seq=1, context_tokens=ctx,
                             t_fixed_s=p.t_fixed_draft_s)
        t_prefill = t_prefill + t_dp
        t_iter = t_iter + rec.k * t_d
    if rec.method in HEAD_METHODS:
        t_draft, t_head_prefill = head_draft_times_s(rec, hwp, batch=b, verify_tokens=verified, context_tokens=ctx,
                                                     prompt_tokens=l_in, t_fixed_draft_s=p.term(rec.method,
                                                                                                "t_fixed_draft_s"))
        t_iter = t_iter + t_draft
        t_prefill = t_prefill + t_head_prefill
    if rec.method != "none":
        t_iter = t_iter + p.term(rec.method, "t_spec_s")
    steps = (l_out - 1.0) / tau
    if measured_tau and rec.extra.get("request_accepted_min") is not None:
        # An offline batch ends with its slowest sequence: it needs (L_out - 1) - accepted_i decode steps
        # (each step emits 1 + accepted tokens). The measured per-request acceptance gives that count; the
        # mean tau would describe a continuously refilled batch instead.
        steps = (l_out - 1.0) - float(rec.extra["request_accepted_min"])
    return float(t_prefill), float(t_iter), steps


# ---------------------------------------------------------------------------------------------------
# Fits
# ---------------------------------------------------------------------------------------------------
def fit_microbench(samples: Sequence[dict[str, Any]], *, model: str, hw: Any | None = None) -> FitResult:
    """eta_bw, eta_flops, t_fixed_s from microbenchmark samples (relative residuals: the step times span
    two orders of magnitude). Model: planner.physics.roofline.step_time_s(target_net(model))."""
    from planner.physics.roofline import step_time_s

    if not samples:
        raise ValueError("samples is empty: run the microbenchmark first")
    hw = hw or machine()
    dtypes = {str(s.get("dtype", "bfloat16")) for s in samples}
    if len(dtypes) != 1:
        raise ValueError(f"samples mix dtypes {sorted(dtypes)}: fit one microbenchmark run at a time")
    net = engine_net(model, dtypes.pop())
    b = np.array([s["batch"] for s in samples], float)
    n = np.array([s["tokens_per_seq"] for s in samples], float)
    c = np.array([s["context_tokens"] for s in samples], float)
    y = np.array([s["step_time_s"] for s in samples], float)
    for name, arr in (("batch", b), ("tokens_per_seq", n), ("context_tokens", c), ("step_time_s", y)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains a non-finite value: all microbenchmark fields must be finite")
    if np.any(y <= 0):
        raise ValueError(f"step_time_s={y[y <= 0][0]} not allowed: must be > 0")

    def resid(x: np.ndarray) -> np.ndarray:
        t, _ = step_time_s(net, _hw(hw, x[0], x[1]), batch=b, tokens_per_seq=n, context_tokens=c, t_fixed_s=x[2])
        return (t - y) / y

    eta_lo, eta_hi = ETA_BOUNDS_CPU if getattr(hw, "kind", "gpu") == "cpu" else ETA_BOUNDS
    r = fit_least_squares(resid, names=("eta_bw", "eta_flops", "t_fixed_s"), p0=(0.5, 0.3, 0.005),
                          lower=(eta_lo, eta_lo, T_FIXED_BOUNDS_S[0]),
                          upper=(eta_hi, eta_hi, T_FIXED_BOUNDS_S[1]), n_points=len(y),
                          x_scale=(0.1, 0.1, 0.01))
    return dataclasses.replace(r, extra={"model": model, "hardware": hw.name})


ENGINE_FIT_NAMES = ("t_fixed_s", "t_spec_s", "t_fixed_draft_s", "eta_flops", "eta_bw", "eta_prefill_flops")
MIN_BATCH_SIZES_FOR_SLOPE = 3  # distinct batch sizes before eta_flops and eta_bw are fitted


def fit_engine(records: Sequence[GroupRecord], *, eta_bw: float, eta_flops: float,
               hw: Any | None = None) -> FitResult:
    """Per-step fixed times of the engine (verifier step, speculative overhead per step, draft pass) from
    measured groups. At one or two batch sizes the efficiencies stay at the microbenchmark's values (the
    per-step and per-token terms are confounded there). With groups at >= 3 batch sizes both efficiencies
    are fitted too: the step time's per-token term (eta_flops: slope in tokens verified per step) separates
    from its per-step terms, and the weight stream (eta_bw) is the engine's own, not the torch microbenchmark's
    re-implementation. Why: on the 2-core CPU (float32, 2026-11-30) the microbenchmark's eta_bw made the
    memory term exceed the compute term at every measured shape, so the fit saw no slope, while the engine's
    step time grew ~20 ms per verified token from the first one (held-out MAPE 12 % -> 8.6 % on the test
    fixture's run). eta_bw and t_fixed_s are partly confounded (both per step; wide standard errors); the
    predictions are not. Parameters with no informing record (e.g. no speculative run) are not fitted and
    stay at their start value. Warm-up groups are left out."""
    recs = [r for r in records if r.wall_time_s > 0 and r.num_prompts > 0 and r.status == "finished"]
    if not recs:
        raise ValueError("records: no measured groups with wall_time_s > 0 to fit the engine step time on")
    hw = hw or machine()
    methods = {r.method for r in recs}
    batch_sizes = {r.num_prompts for r in recs}
    slope = len(batch_sizes) >= MIN_BATCH_SIZES_FOR_SLOPE
    prefill_measured = any(r.extra.get("prefill_time_s_sum", 0.0) > 0 for r in recs)
    free = ["t_fixed_s"] + (["t_spec_s"] if methods - {"none"} else []) + (
        ["t_fixed_draft_s"] if "draft_model" in methods else []) + (
        ["eta_flops", "eta_bw"] if slope else []) + (["eta_prefill_flops"] if slope and prefill_measured else [])
    if len(recs) <= len(free):
        raise ValueError(f"records has {len(recs)} groups: too few for {len(free)} parameters {free}")
    y = np.array([r.wall_time_s for r in recs])
    start = {"t_fixed_s": 0.01, "t_fixed_draft_s": 0.005, "t_spec_s": 0.001, "eta_flops": eta_flops,
             "eta_bw": eta_bw, "eta_prefill_flops": eta_flops if slope and prefill_measured else math.nan}
    eta_lo, eta_hi = ETA_BOUNDS_CPU if getattr(hw, "kind", "gpu") == "cpu" else ETA_BOUNDS
    lower = {"eta_flops": eta_lo, "eta_bw": eta_lo, "eta_prefill_flops": eta_lo}
    upper = {"eta_flops": eta_hi, "eta_bw": eta_hi, "eta_prefill_flops": eta_hi}
    scale = {"eta_flops": 0.1, "eta_bw": 0.1, "eta_prefill_flops": 0.1}

    def params(x: np.ndarray) -> EngineParams:
        vals = dict(start)
        vals.update(dict(zip(free, x, strict=True)))
        return EngineParams(**{k: float(v) for k, v in vals.items()})

    # The engine's own per-request prefill time (vLLM's request_prefill_time_seconds; every request of an offline
    # group is prefilled in the group's first step, so its mean is that step's time) pins the prefill: from wall
    # times alone, prefill and decode both grow with B and the fit can trade one for the other.
    pre = [(i, r.extra["prefill_time_s_sum"] / r.num_prompts) for i, r in enumerate(recs)
           if "eta_prefill_flops" in free and r.extra.get("prefill_time_s_sum", 0.0) > 0]

    def resid(x: np.ndarray) -> np.ndarray:
        p = params(x)
        wall = np.array([predict_wall_time_s(r, p, hw=hw) for r in recs]) / y - 1.0
        prefill = np.array([predict_times(recs[i], p, hw=hw)[0] / m - 1.0 for i, m in pre])
        return np.concatenate([wall, prefill])

    r = fit_least_squares(resid, names=tuple(free), p0=[start[f] for f in free],
                          lower=[lower.get(f, T_FIXED_BOUNDS_S[0]) for f in free],
                          upper=[upper.get(f, T_FIXED_BOUNDS_S[1]) for f in free],
                          n_points=len(recs), x_scale=[scale.get(f, 0.01) for f in free])
    full = params(np.array(r.params)).to_dict()
    return dataclasses.replace(r, extra={"params": full, "batch_sizes": sorted(batch_sizes),
                                         "records": [f"{x.config_label}/{x.workload}" for x in recs]})


def split_holdout(records: Sequence[GroupRecord]) -> tuple[list[GroupRecord], list[GroupRecord]]:
    """Train on the baseline and the smallest K of each (method, draft); hold out every larger K."""
    smallest: dict[tuple[str, str | None], int] = {}
    for r in records:
        if r.method != "none":
            key = (r.method, r.draft)
            smallest[key] = min(smallest.get(key, r.k), r.k)
    train = [r for r in records if r.method == "none" or r.k == smallest[(r.method, r.draft)]]
    held = [r for r in records if r not in train]
    return train, held


# ---------------------------------------------------------------------------------------------------
# Predicted vs measured
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    config_label: str
    workload: str
    split: str  # "train" | "held_out"
    measured_output_tokens_per_s: float
    predicted_output_tokens_per_s: float  # step-time model with the measured tau
    predicted_full_output_tokens_per_s: float  # tau predicted too (i.i.d. alpha from the train K)
    measured_speedup: float  # vs the baseline group of the same workload and run
    predicted_speedup: float
    measured_acceptance_length: float
    predicted_acceptance_length: float
    error_pct: float  # (predicted - measured) / measured * 100, throughput with measured tau
    error_full_pct: float
    # Decode rate per sequence slot, from vLLM's per-request decode-time histogram: what a continuously
    # batched server sees; free of the offline batch's tail (the last sequence to finish).
    measured_decode_tokens_per_s: float = math.nan
    predicted_decode_tokens_per_s: float = math.nan
    decode_error_pct: float = math.nan
    batch_size: int = 0  # prompts submitted together in the group
    method: str = ""  # the group's calibration method ("none" for the baseline)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _same_kind(rec: GroupRecord, train: Sequence[GroupRecord]) -> list[GroupRecord]:
    return [t for t in train if (t.method, t.draft, t.workload) == (rec.method, rec.draft, rec.workload)
            and t.method != "none" and t.status == "finished"]


def _predicted_tau(rec: GroupRecord, train: Sequence[GroupRecord]) -> tuple[float, float]:
    """(tau, tokens per sequence step) of `rec` predicted from the train records of the same (method, draft,
    workload), pooled over batch sizes and rounds: invert the i.i.d. tau(a, K) at the train K and evaluate
    it at rec.k (planner.acceptance.rates, Leviathan et al. 2023 eq. 1); steps without a draft keep the train
    records' draft coverage c: tokens per step = 1 + c * (tau - 1)."""
    from planner.acceptance.rates import acceptance_length_iid, alpha_from_acceptance_length

    if rec.method == "none":
        return 1.0, 1.0
    same = _same_kind(rec, train)
    drafts = sum(t.counts.num_drafts for t in same)
    if not same or drafts == 0:
        return math.nan, math.nan
    k_train = same[0].k
    tau_train = 1.0 + sum(t.counts.num_accepted_tokens for t in same) / drafts
    coverage = min(1.0, drafts / max(sum(t.sequence_steps for t in same), 1.0))
    alpha = float(alpha_from_acceptance_length(min(tau_train, k_train + 1.0), k_train))
    tau = float(acceptance_length_iid(alpha, rec.k))
    return tau, 1.0 + coverage * (tau - 1.0)


def _predicted_draft_tokens_per_step(rec: GroupRecord, train: Sequence[GroupRecord]) -> float:
    """Draft tokens per sequence step of `rec` at rec.k, from the train records of the same (method, draft,
    workload): their fill (draft tokens / (sequence steps x K_train)) times rec.k; NaN without them. The train
    group that ran the same prompts is used alone when there is one: how often n-gram finds a match depends on
    the prompts (code groups ranged 0.9-4.0 draft tokens per step at K=4)."""
    if rec.method == "none":
        return 0.0
    same = _same_kind(rec, train)
    match = [t for t in same if t.prompt_set_hash == rec.prompt_set_hash and t.sequence_steps > 0]
    same = match[:1] or same
    steps = sum(t.sequence_steps for t in same)
    if not same or steps <= 0:
        return math.nan
    fill = sum(t.counts.num_draft_tokens for t in same) / (steps * same[0].k)
    return min(1.0, fill) * rec.k


def _request_decode_steps(train: Sequence[GroupRecord], k: int) -> np.ndarray:
    """Decode steps each train request would need at K = k: per request, its acceptance length at the train
    K read as an i.i.d. alpha (planner.acceptance.rates), evaluated at k, with the request's own draft coverage."""
    from planner.acceptance.rates import acceptance_length_iid, alpha_from_acceptance_length

    steps = []
    for t in train:
        _, _, l_out = _group_shape(t)
        d = np.asarray(t.extra["request_drafts"], float)
        a = np.asarray(t.extra["request_accepted"], float)
        decode = (l_out - 1.0) - a  # each decode step emits 1 + accepted tokens
        tau_i = np.where(d > 0, 1.0 + a / np.maximum(d, 1.0), 1.0)
        cov = np.clip(d / np.maximum(decode, 1.0), 0.0, 1.0)
        alpha = alpha_from_acceptance_length(np.minimum(tau_i, t.k + 1.0), t.k)
        tau_k = acceptance_length_iid(alpha, k)
        steps.append((l_out - 1.0) / (1.0 + cov * (tau_k - 1.0)))
    return np.concatenate(steps) if steps else np.array([])


def _predicted_slowest_steps_tau(rec: GroupRecord, train: Sequence[GroupRecord]) -> float:
    """Tokens per step of the slowest sequence of `rec` (an offline batch lasts as long as it), predicted
    from the train records of the same (method, draft, workload) with per-request counts: the train group
    that ran the same prompts gives each request's steps at rec.k (`_request_decode_steps`) and the batch
    takes the slowest; without it, the pooled requests' steps at rec.k and the expected slowest of B draws
    (the B / (B + 1) quantile). Records without per-request counts: their slowest sequence, read as an i.i.d.
    acceptance length. NaN without any of these (then the mean is used)."""
    from planner.acceptance.rates import acceptance_length_iid, alpha_from_acceptance_length

    if rec.method == "none":
        return 1.0
    same = _same_kind(rec, train)
    if not same:
        return math.nan
    b, _, l_out = _group_shape(rec)
    with_req = [t for t in same if "request_drafts" in t.extra and "request_accepted" in t.extra]
    if with_req:
        match = [t for t in with_req if t.prompt_set_hash == rec.prompt_set_hash]
        if match:
            slow = float(np.max(_request_decode_steps(match[:1], rec.k)))
        else:
            slow = float(np.quantile(_request_decode_steps(with_req, rec.k), b / (b + 1.0)))
        return (l_out - 1.0) / slow if slow > 0 else math.nan
    t = same[0]
    if t.extra.get("request_accepted_min") is None:
        return math.nan
    _, _, t_out = _group_shape(t)
    steps = (t_out - 1.0) - float(t.extra["request_accepted_min"])
    slow_tau = min((t_out - 1.0) / steps, t.k + 1.0)
    alpha = float(alpha_from_acceptance_length(slow_tau, t.k))
    return float(acceptance_length_iid(alpha, rec.k))


def compare(records: Sequence[GroupRecord], params: EngineParams, train: Sequence[GroupRecord],
            hw: Any | None = None) -> list[Comparison]:
    hw = hw or machine()
    train_ids = {id(r) for r in train}
    records = [r for r in records if r.status == "finished"]  # warm-up groups are never compared
    # the baseline of the same run, workload and batch size (first such group)
    base: dict[tuple[str, str, int], GroupRecord] = {}
    for r in records:
        if r.method == "none":
            base.setdefault((r.run_id, r.workload, r.num_prompts), r)
    rows = []
    for r in records:
        b, _, l_out = _group_shape(r)
        tokens = b * l_out
        pred = tokens / predict_wall_time_s(r, params, hw=hw)
        tau_p, step_tau_p = _predicted_tau(r, train)
        # the offline batch lasts as long as its slowest sequence: predict that sequence's tokens per step
        # too when the train record has per-request acceptance, else fall back to the mean
        slow_tau_p = _predicted_slowest_steps_tau(r, train)
        full_tau = slow_tau_p if math.isfinite(slow_tau_p) else step_tau_p
        drafted_p = _predicted_draft_tokens_per_step(r, train)
        pred_full = (tokens / predict_wall_time_s(r, params, tau=full_tau, draft_tokens_per_step=drafted_p, hw=hw)
                     if math.isfinite(full_tau) and math.isfinite(drafted_p) else math.nan)
        meas = r.output_tokens_per_s
        bl = base.get((r.run_id, r.workload, r.num_prompts))
        if bl is not None:
            bb, _, bl_out = _group_shape(bl)
            pred_base = bb * bl_out / predict_wall_time_s(bl, params, hw=hw)
            m_speed, p_speed = meas / bl.output_tokens_per_s, pred_full / pred_base
        else:
            m_speed = p_speed = math.nan
        dec_m = dec_p = math.nan
        decode_sum = r.extra.get("decode_time_s_sum")
        if decode_sum:
            # mean per-request decode time = sum / B; B sequences each emit L_out - 1 decode tokens
            dec_m = b * (l_out - 1.0) / (decode_sum / b)
            _, t_iter, _ = predict_times(r, params, hw=hw)
            dec_p = b * r.tokens_per_sequence_step / t_iter
        rows.append(Comparison(
            config_label=r.config_label, workload=r.workload,
            split="train" if id(r) in train_ids else "held_out",
            measured_output_tokens_per_s=meas, predicted_output_tokens_per_s=pred,
            predicted_full_output_tokens_per_s=pred_full, measured_speedup=m_speed, predicted_speedup=p_speed,
            measured_acceptance_length=r.acceptance_length, predicted_acceptance_length=tau_p,
            error_pct=(pred - meas) / meas * 100.0, error_full_pct=(pred_full - meas) / meas * 100.0,
            measured_decode_tokens_per_s=dec_m, predicted_decode_tokens_per_s=dec_p,
            decode_error_pct=(dec_p - dec_m) / dec_m * 100.0, batch_size=r.num_prompts, method=r.method,
        ))
    return rows


def mape_pct(rows: Sequence[Comparison], split: str | None = None, full: bool = False,
             decode: bool = False) -> float:
    """Mean absolute percentage error of the throughput predictions (wall-clock by default; `full`: with
    predicted tau; `decode`: the per-slot decode rate)."""
    sel = [r for r in rows if split is None or r.split == split]
    errs = [abs(r.decode_error_pct if decode else r.error_full_pct if full else r.error_pct) for r in sel]
    errs = [e for e in errs if math.isfinite(e)]
    if not errs:
        raise ValueError(f"split={split!r}: no comparison rows with a finite error")
    return float(np.mean(errs))


def format_table(rows: Sequence[Comparison]) -> str:
    head = (f"{'config':34} {'workload':8} {'B':>3} {'split':8} {'meas tok/s':>10} {'pred tok/s':>10} {'err %':>7} "
            f"{'pred(tau) ':>10} {'err %':>7} {'meas S':>7} {'pred S':>7} {'meas tau':>8} {'pred tau':>8} "
            f"{'decode meas':>11} {'pred':>7} {'err %':>7}")
    lines = [head]
    for r in rows:
        lines.append(
            f"{r.config_label:34} {r.workload:8} {r.batch_size:3d} {r.split:8} {r.measured_output_tokens_per_s:10.1f} "
            f"{r.predicted_output_tokens_per_s:10.1f} {r.error_pct:7.1f} {r.predicted_full_output_tokens_per_s:10.1f} "
            f"{r.error_full_pct:7.1f} {r.measured_speedup:7.2f} {r.predicted_speedup:7.2f} "
            f"{r.measured_acceptance_length:8.3f} {r.predicted_acceptance_length:8.3f} "
            f"{r.measured_decode_tokens_per_s:11.1f} {r.predicted_decode_tokens_per_s:7.1f} {r.decode_error_pct:7.1f}"
        )
    return "\n".join(lines)
