"""The product's answer in one call: `plan(PlanRequest, catalog) -> Plan`.

Every page of the app, the CLI (`python -m planner plan`) and the report format what this returns; none of
them choose a batch, a K, a baseline or a payback themselves.

How the answer is reached (DESIGN.md, "Batch size changes everything"):
1. Traffic is a tuple of segments (workload, language, share of output tokens, mean prompt and output
   tokens). Cost is tokens x CPM, so a mix's CPM is sum(share_i x CPM_i).
2. Each candidate (a method, or no speculation) is evaluated in one vectorised numpy pass over
   samples x candidates x K x segments x batch (planner.serving.evaluate_arrays).
3. Batch: for every (candidate, K, segment) the largest integer batch that fits memory, meets the TPOT SLO
   and the traffic's concurrency cap is found by bisection (TPOT grows with batch), then the CPM there is
   compared with a geometric grid of smaller batches (CPM falls with batch in today's step-time model; the
   grid keeps the search right if a fitted efficiency ever bends that).
4. One K per method serves the whole mix (one vLLM deployment): the K with the lowest blended CPM among
   the K's where every segment fits and meets the SLO.
5. Only candidates that fit memory and meet the SLO are ever recommended or used as "today". If the
   baseline misses the SLO, the cheapest configuration without speculation that meets it (another TP)
   becomes the reference, or the plan says plainly that none exists and shows no percentage cut.
6. Economics (saving, one-time cost, payback, NPV) come from planner.economics.economics, once.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner import acceptance as acc
from planner import trees
from planner.deploy import vllm_deployment
from planner.economics import breakeven_monthly_spend_usd, economics
from planner.roofline import (
    ACTIVATION_RESERVE_FRACTION,
    BYTES_PER_PARAM,
    GB,
    GPU_MEMORY_UTILIZATION,
    HwParams,
    default_kv_dtype,
    head_net,
    hw_params,
    null_net,
    replica_weight_bytes,
    resident_weight_bytes,
    stack,
    target_net,
)
from planner.scenario import MAX_ALPHA, availability, efficiency_for, tree_draft_overrides
from planner.serving import (
    DRAFTING_MODE_CODE,
    MODE_NONE,
    SpecResult,
    evaluate_arrays,
    memory_max_batch,
    prefill_time_s,
    sampler_time_s,
)
from planner.types import KV_CACHE_DTYPES, WEIGHT_DTYPES, Acceptance, Efficiency

NO_SPEC = "none"  # "current method": no speculative decoding today
MAX_BATCH = 4096  # sequences per replica the search considers (vLLM's max_num_seqs is far below this)
TP_OPTIONS = (1, 2, 4, 8)
# Batches evaluated first for every configuration (with its own upper bound): they bracket the SLO boundary and
# check that CPM does fall with batch below it (powers of 4 up to MAX_BATCH).
_COARSE_BATCHES = 4.0 ** np.arange(0, 7)
WHICH = ("mid", "low", "high")  # position in each method's alpha range: 0.5, 0, 1
WHICH_U = {"mid": 0.5, "low": 0.0, "high": 1.0}


class PlanError(ValueError):
    """A request value outside what is allowed; the message names the field, the value and what is allowed."""

    def __init__(self, field_name: str, value: Any, allowed: str):
        self.field = field_name
        self.value = value
        super().__init__(f"{field_name}={value!r} is not allowed: {allowed}")


# ---------------------------------------------------------------------------------------------------
# The request
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrafficSegment:
    """One slice of the traffic: its workload and language, its share of output tokens, and its mean lengths."""

    workload: str
    language: str
    share: float  # share of output tokens, (0, 1]; a request's shares sum to 1
    prompt_tokens: float  # mean prompt tokens per request
    output_tokens: float  # mean output tokens per request


@dataclass(frozen=True)
class CostAssumptions:
    """One-time and financial assumptions (editable in the app's sidebar, carried in its URL)."""

    engineering_usd_per_week: float
    training_usd_per_gpu_hour_low: float
    training_usd_per_gpu_hour_high: float
    annual_discount_rate: float
    horizon_months: int
    # per method: draft-training GPU-hours that replace the method's profile value
    setup_gpu_hours: tuple[tuple[str, float], ...] = ()
    # below this CPM cut a switch is not worth its engineering risk (assumption)
    min_cpm_cut: float = 0.01
    source: str = ""

    def gpu_hours(self, method) -> float:
        return dict(self.setup_gpu_hours).get(method.name, method.setup_gpu_hours)

    def one_time_usd(self, method) -> tuple[float, float]:
        """(low, high) setup cost: draft-training GPU-hours at the training GPU's low / high price plus
        engineering weeks at the weekly rate."""
        hours = self.gpu_hours(method)
        eng = method.setup_engineering_weeks * self.engineering_usd_per_week
        return (hours * self.training_usd_per_gpu_hour_low + eng, hours * self.training_usd_per_gpu_hour_high + eng)


def segments_from_mix(mix: Sequence[Sequence]) -> tuple[TrafficSegment, ...]:
    """(workload, language, share, prompt tokens, output tokens) tuples (a traffic profile's mix) -> segments,
    shares renormalised to sum to 1."""
    total = sum(float(m[2]) for m in mix)
    return tuple(TrafficSegment(str(w), str(lang), float(sh) / total, float(p), float(o)) for w, lang, sh, p, o in mix)


def default_costs(catalog) -> CostAssumptions:
    train = catalog.hardware[catalog.prices["training_hardware"]]
    src = catalog.price_sources
    return CostAssumptions(
        engineering_usd_per_week=float(catalog.prices["engineering_usd_per_week"]),
        training_usd_per_gpu_hour_low=train.usd_per_gpu_hour_low,
        training_usd_per_gpu_hour_high=train.usd_per_gpu_hour_high,
        annual_discount_rate=float(catalog.prices["annual_discount_rate"]),
        horizon_months=int(catalog.prices["horizon_months"]),
        source="; ".join(f"{k}: {v.source} ({v.date})" for k, v in src.items()),
    )


@dataclass(frozen=True)
class PlanRequest:
    """The question: model M on hardware H (TP, weights dtype, price) for traffic T under a TPOT SLO."""

    model: str
    hardware: str
    tp: int = 1
    # True: the tp GPUs run attention data parallel and the routed experts expert parallel (MoE models; vLLM
    # --data-parallel-size tp --enable-expert-parallel; planner.roofline.step_time_terms); False: tensor parallel
    attention_dp: bool = False
    dtype: str = "bf16"  # weights: bf16, fp8, nvfp4, mxfp4 (planner.types.WEIGHT_DTYPES)
    kv_dtype: str | None = None  # KV cache: bf16 or fp8; None: fp8 with fp8 weights, else bf16
    usd_per_gpu_hour: float | None = None  # None: the hardware's list-price midpoint
    tpot_slo_ms: float = 50.0
    monthly_output_tokens: float = 1e10
    volume_source: str = "entered"  # where the monthly volume comes from (shown beside it)
    segments: tuple[TrafficSegment, ...] = ()  # empty: one segment of `workload` / `language`
    workload: str = "chat"
    language: str = "english"
    current_method: str = NO_SPEC
    tuned: bool = False  # the methods' tuned alpha ranges (draft heads fine-tuned on the domain)
    batch_cap: float | None = None  # most concurrent sequences the traffic offers (Little's law)
    costs: CostAssumptions | None = None  # None: profiles/data/prices.yaml
    # A measured acceptance for one method (measured at K = acceptance_k); other methods keep the profiles'.
    acceptance: Acceptance | None = None
    acceptance_method: str | None = None
    acceptance_k: int | None = None
    methods: tuple[str, ...] | None = None  # None: every method in the catalogue
    efficiency: Efficiency | None = None  # None: the hardware's (or a calibrated profile's)
    # Fleet by hour (planner.fleet): None = no fleet; else the day's shape. `hours` from a traffic trace wins over
    # `daily_shape` (planner.fleet.SHAPES: 'flat', 'business_hours', 'consumer_evening') on the monthly volume.
    daily_shape: str | None = None
    hours: tuple = ()  # planner.fleet.HourLoad per hour of the day (a trace's own shape)
    hours_source: str = ""
    # the token tree deployed (or to deploy): tree-capable methods are verified with it (planner.trees.TreeShape);
    # None: chains (lever 4 then prices the planner's default tree)
    tree_shape: Any = None
    # the levers' starting method: "auto" = today's method (EAGLE-3 when today has no draft); None = no levers
    levers_start: str | None = None


# ---------------------------------------------------------------------------------------------------
# The answer
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentPoint:
    workload: str
    language: str
    share: float
    batch: int
    max_batch: int
    tpot_ms: float
    usd_per_mtok: float
    output_tokens_per_s: float  # decode tokens/s per replica
    acceptance_length: float
    speedup: float
    alpha_position_1: float
    fits_memory: bool
    meets_slo: bool
    verifier_bound: str


@dataclass(frozen=True)
class OperatingPoint:
    """A method (or no speculation) at its best K and batch for the whole mix."""

    method: str  # NO_SPEC for the baseline
    label: str
    available: bool
    k: int  # 0 for no speculation
    batch: int  # the dominant segment's batch (vLLM's --max-num-seqs)
    max_batch: int
    fits_memory: bool
    meets_slo: bool
    feasible: bool  # available, fits memory and meets the SLO
    tpot_ms: float
    usd_per_mtok: float  # blended over the mix, prefill GPU time included
    output_tokens_per_s: float
    acceptance_length: float  # tau, bonus token included (1 for no speculation)
    alpha_per_token: float  # i.i.d. per-token alpha with the same tau at this K
    alpha_position_1: float  # conditional per-token alpha at draft position 1 (profiles' convention)
    draft_acceptance_rate: float  # vLLM: accepted / drafted = (tau - 1) / K
    speedup: float  # TPOT without speculation / TPOT with it, at the same batch
    draft_cost_ratio: float  # Leviathan's c: one draft pass / one target step
    verifier_bound: str  # "memory" or "compute" (dominant segment)
    cpm_change_pct: float | None  # vs the plan's reference; None when there is no feasible reference
    reason: str  # why it is infeasible, or what it is
    way_out: str  # what would make it feasible ("" when it is)
    segments: tuple[SegmentPoint, ...] = ()
    one_time_usd_low: float = 0.0
    one_time_usd_high: float = 0.0
    alpha_convention: str = ""
    alpha_source: str = ""
    usd_per_mtok_low: float = math.nan  # at the low / high end of the alpha range (uncertainty band)
    usd_per_mtok_high: float = math.nan


@dataclass(frozen=True)
class Recommendation:
    method: str
    label: str
    k: int
    batch: int
    usd_per_mtok: float
    cpm_change_pct: float | None
    reason: str


@dataclass(frozen=True)
class PlanEconomics:
    reference_usd_per_mtok: float | None  # "CPM today" (None: no feasible reference)
    new_usd_per_mtok: float | None
    monthly_output_tokens: float
    monthly_saving_usd: float | None
    monthly_saving_low_usd: float | None  # over the alpha range
    monthly_saving_high_usd: float | None
    one_time_usd: float  # midpoint of the low / high training price
    one_time_low_usd: float
    one_time_high_usd: float
    payback_months: float  # inf: does not pay back
    payback_low_months: float
    payback_high_months: float
    npv_usd: float | None
    horizon_months: int
    annual_discount_rate: float


@dataclass(frozen=True)
class LeverStep:
    lever: str
    number: int
    label: str
    applied: bool
    reason: str
    method: str
    k: int
    batch: int
    tree: bool
    alpha_before: float
    alpha_after: float
    usd_per_mtok_before: float
    usd_per_mtok_after: float
    one_time_usd_low: float
    one_time_usd_high: float
    monthly_saving_usd: float
    payback_months: float
    breakeven_monthly_spend_usd: float
    note: str = ""
    source: str = ""


@dataclass(frozen=True)
class Assumption:
    what: str
    value: str
    source: str
    date: str


@dataclass(frozen=True)
class Plan:
    request: PlanRequest
    segments: tuple[TrafficSegment, ...]
    usd_per_gpu_hour: float
    baseline: OperatingPoint  # no speculation on the requested hardware and TP
    reference: OperatingPoint | None  # "today": the current method, or the cheapest feasible no-spec option
    reference_note: str  # how the reference was chosen
    methods: tuple[OperatingPoint, ...]
    best: OperatingPoint | None  # cheapest feasible method (recommended or not)
    recommendation: Recommendation | None  # None: stay with the reference
    verdict: str  # one sentence for a CFO
    economics: PlanEconomics
    levers: tuple[LeverStep, ...]
    deploy: dict[str, Any] | None  # vLLM command for the recommended (else best) method
    assumptions: tuple[Assumption, ...]
    costs: CostAssumptions
    alternatives: tuple[OperatingPoint, ...] = ()  # no speculation at other TP (the way out of an infeasible baseline)
    fleet: Any = None  # planner.fleet.Fleet: GPUs by hour with and without speculation, the month's bills

    def method(self, name: str) -> OperatingPoint:
        for m in self.methods:
            if m.method == name:
                return m
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the CLI's `plan` output and the report's data."""
        d = dataclasses.asdict(self)
        rec = d.pop("recommendation")
        d["recommendation"] = rec
        return d


# ---------------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------------


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def validate(req: PlanRequest, catalog) -> tuple[TrafficSegment, ...]:
    """Check every field; return the traffic segments (the request's, or one from workload / language)."""
    models, hardware = catalog.models, catalog.hardware
    if req.model not in models:
        models[req.model]  # raises UnknownNameError listing the valid names and the closest match
    if req.hardware not in hardware:
        hardware[req.hardware]
    hw = hardware[req.hardware]
    model = models[req.model]
    if not isinstance(req.tp, (int, np.integer)) or req.tp not in TP_OPTIONS or req.tp > hw.max_tp:
        allowed = ", ".join(str(t) for t in TP_OPTIONS if t <= hw.max_tp)
        raise PlanError("tp", req.tp, f"one of {allowed} GPUs per replica on {hw.label}")
    if not isinstance(req.attention_dp, (bool, np.bool_)):
        raise PlanError("attention_dp", req.attention_dp, "true or false")
    if req.attention_dp and not model.experts:
        raise PlanError("attention_dp", req.attention_dp,
                        f"false for {model.label}: data-parallel attention with expert-parallel MoE needs a MoE "
                        f"model, and {model.label} is dense (tensor parallel splits it)")
    if req.dtype not in WEIGHT_DTYPES:
        raise PlanError("dtype", req.dtype, ", ".join(WEIGHT_DTYPES))
    if req.kv_dtype is not None and req.kv_dtype not in KV_CACHE_DTYPES:
        raise PlanError("kv_dtype", req.kv_dtype, ", ".join(KV_CACHE_DTYPES) + " (or none: follows the weights)")
    if req.usd_per_gpu_hour is not None and not (_finite(req.usd_per_gpu_hour) and 0 < req.usd_per_gpu_hour <= 1000):
        raise PlanError("usd_per_gpu_hour", req.usd_per_gpu_hour, "a price above $0 and at most $1000 per GPU-hour")
    if not (_finite(req.tpot_slo_ms) and 0 < req.tpot_slo_ms <= 60_000):
        raise PlanError("tpot_slo_ms", req.tpot_slo_ms, "a latency above 0 and at most 60000 ms per output token")
    if not (_finite(req.monthly_output_tokens) and 0 <= req.monthly_output_tokens <= 1e19):
        raise PlanError("monthly_output_tokens", req.monthly_output_tokens, "a volume from 0 to 1e19 tokens a month")
    if req.batch_cap is not None and not (_finite(req.batch_cap) and req.batch_cap > 0):
        raise PlanError("batch_cap", req.batch_cap, "a positive number of concurrent sequences, or none")
    from planner.fleet import SHAPES

    if req.daily_shape is not None and req.daily_shape not in SHAPES:
        raise PlanError("daily_shape", req.daily_shape, f"one of {', '.join(SHAPES)} (or hours from a traffic trace)")
    for i, h in enumerate(req.hours):
        if not (_finite(h.requests_per_s) and h.requests_per_s >= 0):
            raise PlanError(f"hours[{i}].requests_per_s", h.requests_per_s, "an arrival rate >= 0 requests/s")
        for name in ("prompt_tokens", "output_tokens"):
            if not (_finite(getattr(h, name)) and getattr(h, name) >= 1):
                raise PlanError(f"hours[{i}].{name}", getattr(h, name), "a mean of at least 1 token")
    if req.current_method != NO_SPEC and req.current_method not in catalog.methods:
        catalog.methods[req.current_method]
    for name in req.methods or ():
        catalog.methods[name]
    if req.acceptance is not None:
        if req.acceptance_method is None:
            raise PlanError("acceptance_method", None, "the method the measured acceptance belongs to")
        catalog.methods[req.acceptance_method]
    if req.costs is not None:
        c = req.costs
        for name in ("engineering_usd_per_week", "training_usd_per_gpu_hour_low", "training_usd_per_gpu_hour_high"):
            v = getattr(c, name)
            if not (_finite(v) and 0 <= v <= 1e7):
                raise PlanError(f"costs.{name}", v, "a dollar amount from 0 to 10,000,000")
        if not (_finite(c.annual_discount_rate) and -0.5 < c.annual_discount_rate <= 1.0):
            raise PlanError("costs.annual_discount_rate", c.annual_discount_rate, "a yearly rate in (-0.5, 1.0]")
        if not (isinstance(c.horizon_months, (int, np.integer)) and 1 <= c.horizon_months <= 240):
            raise PlanError("costs.horizon_months", c.horizon_months, "a whole number of months from 1 to 240")
        for name, hours in c.setup_gpu_hours:
            catalog.methods[name]
            if not (_finite(hours) and 0 <= hours <= 1e6):
                raise PlanError(f"costs.setup_gpu_hours[{name}]", hours, "GPU-hours from 0 to 1,000,000")
    segs = req.segments or (
        TrafficSegment(
            req.workload,
            req.language,
            1.0,
            float(catalog.workloads[req.workload].prompt_tokens),
            float(catalog.workloads[req.workload].output_tokens),
        ),
    )
    total = 0.0
    for i, s in enumerate(segs):
        catalog.workloads[s.workload]
        catalog.languages[s.language]
        if not (_finite(s.share) and 0 < s.share <= 1):
            raise PlanError(f"segments[{i}].share", s.share, "a share of output tokens in (0, 1]")
        for name in ("prompt_tokens", "output_tokens"):
            v = getattr(s, name)
            if not (_finite(v) and 1 <= v <= model.max_context_tokens):
                raise PlanError(
                    f"segments[{i}].{name}", v, f"1 to {model.max_context_tokens:,} tokens ({model.label}'s context)"
                )
        total += s.share
    if abs(total - 1.0) > 1e-6:
        raise PlanError("segments.share", round(total, 6), "shares that sum to 1")
    # a request longer than the context is clipped to it (prompt + output <= context)
    out = []
    for s in segs:
        o = min(s.output_tokens, model.max_context_tokens / 2)
        p = min(s.prompt_tokens, model.max_context_tokens - o)
        out.append(dataclasses.replace(s, prompt_tokens=float(p), output_tokens=float(o)))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------
# The vectorised core
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One deployable configuration to search: a method (or no speculation) with lever adjustments."""

    method: str  # NO_SPEC for no speculation
    ks: tuple[int, ...]
    alpha_shift: float = 0.0  # added to per-token alpha (levers)
    draft_cost_factor: float = 1.0  # multiplies the draft pass time (FP8 head)
    tree: bool = False
    tuned: bool = False
    k_per_segment: bool = False  # lever 3: each workload segment at its own K (else one K for the whole mix)
    tree_shape: Any = None  # a stated tree (planner.trees.TreeShape): K is its depth


SAMPLED_SPEC_FIELDS = ("t_spec_s", "sampler_vocab_passes")  # Samples' optional speculation overheads


@dataclass(frozen=True)
class Samples:
    """The uncertain inputs, one value per sample (axis N): position in the alpha range (0 low .. 1 high),
    roofline efficiencies, fixed step time and price; optionally the speculation overheads (None: the plan's)."""

    alpha_u: np.ndarray
    eta_bw: np.ndarray
    eta_flops: np.ndarray
    t_fixed_s: np.ndarray
    usd_per_gpu_hour: np.ndarray
    t_spec_s: np.ndarray | None = None
    sampler_vocab_passes: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.alpha_u)


def samples_for(which: Sequence[str], eff: Efficiency, price: float) -> Samples:
    n = len(which)
    return Samples(
        np.array([WHICH_U[w] for w in which], float),
        np.full(n, eff.eta_bw),
        np.full(n, eff.eta_flops),
        np.full(n, eff.t_fixed_s),
        np.full(n, float(price)),
    )


@dataclass
class _Ctx:
    req: PlanRequest
    catalog: Any
    model: Any
    hw: Any
    segs: tuple[TrafficSegment, ...]
    eff: Efficiency
    price: float
    costs: CostAssumptions
    tp: int

    @property
    def share(self) -> np.ndarray:
        return np.array([s.share for s in self.segs])

    @functools.cached_property
    def target(self):
        """The target network in the request's weight and KV-cache formats."""
        return target_net(self.model, self.req.dtype, kv_dtype=self.req.kv_dtype)

    @functools.cached_property
    def segment_alphas(self) -> tuple[np.ndarray, np.ndarray]:
        """(n-gram alpha, workload + language alpha shift) per segment."""
        wl = [self.catalog.workloads[s.workload] for s in self.segs]
        return (np.array([w.ngram_alpha for w in wl]),
                np.array([w.alpha_shift + self.catalog.languages[s.language].alpha_shift
                          for w, s in zip(wl, self.segs, strict=True)]))


def _r5(values, axis: int) -> np.ndarray:
    """Values along one of the five axes (sample, candidate, K, segment, batch)."""
    shape = [1] * 5
    arr = np.asarray(values, float)
    shape[axis] = arr.size
    return arr.reshape(shape)


def _hw(ctx: _Ctx, smp: Samples) -> HwParams:
    base = hw_params(ctx.hw, ctx.req.dtype, ctx.eff)
    spec = {name: _r5(v, 0) for name in SAMPLED_SPEC_FIELDS if (v := getattr(smp, name)) is not None}
    return dataclasses.replace(
        base, eta_bw=_r5(smp.eta_bw, 0), eta_flops=_r5(smp.eta_flops, 0), t_fixed_s=_r5(smp.t_fixed_s, 0), **spec
    )


def _alpha1(ctx: _Ctx, cand: Candidate, smp: Samples) -> np.ndarray:
    """Per-token alpha at draft position 1, shape (N, S): the method's range (default or tuned) at the sample's
    position, shifted by each segment's workload and language; prompt lookup takes the workload's n-gram alpha."""
    m = ctx.catalog.methods[cand.method]
    ngram, shift = ctx.segment_alphas
    if m.drafting == "ngram":
        a = np.broadcast_to(ngram, (smp.n, ngram.size))
    else:
        rng = m.alpha_tuned if cand.tuned else m.alpha_default
        a = (rng.low + smp.alpha_u * (rng.high - rng.low))[:, None] + shift[None, :]
    return np.clip(a + cand.alpha_shift, 0.0, MAX_ALPHA)


def _measured_alpha(ctx: _Ctx, cand: Candidate, k_max: int) -> np.ndarray | None:
    """Conditional per-position alpha (k_max,) from the request's measured acceptance, or None."""
    req = ctx.req
    if req.acceptance is None or req.acceptance_method != cand.method:
        return None
    a = req.acceptance
    k_meas = req.acceptance_k or ctx.catalog.methods[cand.method].default_k
    if cand.tree_shape is not None:
        k_meas = cand.tree_shape.depth
    if a.per_position is not None:
        pp = np.asarray(a.per_position, float)
        acc._check_alpha(pp, "alpha_per_position")
        out = np.full(k_max, np.nan)  # positions beyond the measured ones: unknown (those K are not searched)
        out[: min(k_max, pp.size)] = pp[:k_max]
        return out
    if a.value is None or not _finite(a.value):
        raise PlanError(a.convention, a.value, "a measured number")
    if a.convention == "per_token":
        acc._check_alpha(np.asarray(a.value), "alpha")
        alpha = float(a.value)
    elif a.convention == "draft_acceptance_rate":
        alpha = float(acc.alpha_from_acceptance_length(acc.acceptance_length_from_rate(a.value, k_meas), k_meas))
    else:
        alpha = float(acc.alpha_from_acceptance_length(a.value, k_meas))
    return np.full(k_max, alpha)


def _tau(ctx: _Ctx, cand: Candidate, smp: Samples, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tau (N, K, S), verify tokens per sequence (N, K, S), alpha at position 1 (N, S))."""
    if cand.method == NO_SPEC:
        one = np.ones((smp.n, len(ks), len(ctx.segs)))
        return one, one, np.zeros((smp.n, len(ctx.segs)))
    m = ctx.catalog.methods[cand.method]
    k_max = int(ks.max())
    measured = _measured_alpha(ctx, cand, k_max)
    a1 = _alpha1(ctx, cand, smp)  # (N, S)
    if measured is not None:
        per_pos = np.clip(
            np.broadcast_to(measured[None, None, :] + cand.alpha_shift, (smp.n, len(ctx.segs), k_max)), 0.0, 1.0
        )
        a1 = per_pos[..., 0]
    else:
        decay = m.position_decay ** np.arange(k_max)
        per_pos = np.clip(a1[..., None] * decay, 0.0, 1.0)  # (N, S, Kmax)
    if cand.tree_shape is not None:  # a stated tree: K is its depth (the search offers that K only)
        shape = cand.tree_shape
        a = ctx.req.acceptance
        if a is not None and ctx.req.acceptance_method == cand.method and a.convention == "acceptance_length":
            t = np.full((smp.n, len(ctx.segs)), float(a.value))  # measured for this tree: used as given
        else:
            t = trees.expected_acceptance_length(shape, per_pos[..., : shape.depth])  # (N, S)
        tau = np.broadcast_to(t[:, None, :], (smp.n, len(ks), len(ctx.segs))).copy()
        return tau, np.full_like(tau, float(shape.verify_tokens_per_seq)), a1
    if not cand.tree:
        cum = 1.0 + np.cumsum(np.cumprod(np.nan_to_num(per_pos, nan=0.0), axis=-1), axis=-1)  # tau at K=1..Kmax
        tau = cum[..., ks.astype(int) - 1]  # (N, S, K)
        tau = np.where(np.isnan(per_pos[..., ks.astype(int) - 1]), np.nan, tau)
        return (
            np.moveaxis(tau, -1, 1),
            np.broadcast_to((ks + 1.0)[None, :, None], tau.shape[:1] + (len(ks), tau.shape[1])),
            a1,
        )
    # tree verification (planner default shape): per K a tree of depth K; sibling model in acceptance.py
    taus = np.empty((smp.n, len(ks), len(ctx.segs)))
    nver = np.empty_like(taus)
    width = 3
    for i, k in enumerate(ks.astype(int)):
        tree = acc.default_tree(k, width)
        q = (
            acc.sibling_acceptance(per_pos[..., 0], k, width)
            * (per_pos[..., :k] / np.maximum(per_pos[..., :1], 1e-12))[..., None]
        )
        taus[:, i, :] = acc.tree_acceptance_length(tree, q)
        nver[:, i, :] = acc.tree_node_count(tree) + 1.0
    return taus, nver, a1


def _taus(ctx: _Ctx, cands: Sequence[Candidate], smp: Samples, ks: np.ndarray):
    """_tau for every candidate, stacked on axis 1: chains with the profiles' acceptance in one vectorised pass
    (tau = 1 + sum_i prod_{j<=i} alpha_j, Leviathan et al. 2023), the others one by one."""
    n, s_, k_ = smp.n, len(ctx.segs), len(ks)
    tau = np.ones((n, len(cands), k_, s_))
    nver = np.ones_like(tau)
    a1 = np.zeros((n, len(cands), s_))
    simple = [i for i, c in enumerate(cands) if c.method != NO_SPEC and not c.tree and _measured_alpha(
        ctx, c, 1) is None]
    if simple:
        k_max = int(ks.max())
        a = np.stack([_alpha1(ctx, cands[i], smp) for i in simple], axis=1)  # (N, C', S)
        decay = np.array([ctx.catalog.methods[cands[i].method].position_decay for i in simple])
        per_pos = np.clip(a[..., None] * decay[None, :, None, None] ** np.arange(k_max), 0.0, 1.0)
        cum = 1.0 + np.cumsum(np.cumprod(per_pos, axis=-1), axis=-1)  # (N, C', S, Kmax)
        tau[:, simple] = np.moveaxis(cum[..., ks.astype(int) - 1], -1, 2)
        nver[:, simple] = (ks + 1.0)[None, None, :, None]
        a1[:, simple] = a
    for i, c in enumerate(cands):
        if c.method != NO_SPEC and i not in simple:
            tau[:, i], nver[:, i], a1[:, i] = _tau(ctx, c, smp, ks)
    return tau, nver, a1


def _draft(ctx: _Ctx, name: str):
    """(draft Net, drafting mode code, scales with K, resident draft weight bytes, is a separate model)."""
    model = ctx.model
    draft_spec = ctx.catalog.models[model.draft_model] if model.draft_model else None
    return _draft_net(ctx.catalog.methods[name] if name != NO_SPEC else None, model, draft_spec, ctx.req.dtype,
                      ctx.req.kv_dtype)


def _draft_net(m, model, draft_spec, dtype: str, kv_dtype: str | None):
    """_draft for a Method (None: no speculation)."""
    if m is None:
        return null_net(), MODE_NONE, False, 0.0, False
    mode = DRAFTING_MODE_CODE[m.drafting]
    if m.drafting == "draft_model":
        dnet = target_net(draft_spec, dtype, kv_dtype=kv_dtype)
        return dnet, mode, False, float(resident_weight_bytes(dnet)), True
    if m.drafting == "ngram":
        return null_net(), mode, False, 0.0, False
    return head_net(m, model, dtype, kv_dtype=kv_dtype), mode, m.draft_params_scale_with_k, 0.0, False


@dataclass(frozen=True)
class _Search:
    """Per (sample, candidate, K, segment): the best batch and the numbers there."""

    ks: np.ndarray
    batch: np.ndarray
    res: SpecResult  # evaluated at `batch` (shape N, C, K, S, 1)
    ok: np.ndarray  # fits memory and meets the SLO at `batch`
    fits_any: np.ndarray  # batch 1 fits memory
    tpot_min_s: np.ndarray  # TPOT at batch 1
    max_batch: np.ndarray
    tau: np.ndarray
    alpha1: np.ndarray  # (N, C, S)
    valid_k: np.ndarray  # K allowed for this candidate (C, K)


def _drafts(ctx: _Ctx, cands: Sequence[Candidate]) -> dict[str, Any]:
    """Draft networks and flags along axis 1 for the candidates (each distinct method built once)."""
    cat, model = ctx.catalog, ctx.model
    methods = tuple(cat.methods[c.method] if c.method != NO_SPEC else None for c in cands)
    draft_spec = cat.models[model.draft_model] if model.draft_model else None
    return _drafts_for(methods, model, draft_spec, ctx.req.dtype, ctx.req.kv_dtype)


@functools.lru_cache(maxsize=256)
def _drafts_for(methods: tuple, model, draft_spec, dtype: str, kv_dtype: str | None) -> dict[str, Any]:
    """_drafts for hashable inputs (Method, ModelSpec: frozen records), cached: every plan() asks the same few.
    The arrays are shared between calls and never written."""
    names = list(dict.fromkeys(m.name if m is not None else NO_SPEC for m in methods))
    by_name = {m.name: m for m in methods if m is not None}
    built = [_draft_net(by_name.get(n), model, draft_spec, dtype, kv_dtype) for n in names]
    idx = np.array([names.index(m.name if m is not None else NO_SPEC) for m in methods])
    nets = stack([b[0] for b in built], shape_axis=1, ndim=5)
    net = dataclasses.replace(nets, **{f.name: np.take(getattr(nets, f.name), idx, axis=1)
                                       for f in dataclasses.fields(nets)})
    col = np.array([b[1:] for b in built], dtype=float)[idx]  # mode, scales with K, draft bytes, is a model
    return {"draft": net, "mode": _r5(col[:, 0], 1), "draft_scales_with_k": _r5(col[:, 1], 1).astype(bool),
            "draft_weight_bytes_total": _r5(col[:, 2], 1), "draft_is_model": _r5(col[:, 3], 1).astype(bool)}


def _engine_args(ctx: _Ctx, cands: Sequence[Candidate], smp: Samples, pre, drafts=None) -> dict[str, Any]:
    """evaluate_arrays' arguments for candidates along axis 1 (all but the batch), built once per search."""
    return dict(
        target=ctx.target, hw=_hw(ctx, smp), k=pre["k"], tau=pre["tau"],
        context_tokens=pre["ctx"], prompt_tokens=pre["prompt"], output_tokens=pre["out"],
        usd_per_gpu_hour=_r5(smp.usd_per_gpu_hour, 0), tp=ctx.tp, attention_dp=_dp(ctx), verify_tokens=pre["nver"],
        draft_cost_factor=_r5([c.draft_cost_factor for c in cands], 1), **_tree_overrides(ctx, cands),
        **(drafts or _drafts(ctx, cands)))


def _dp(ctx: _Ctx) -> float:
    """evaluate_arrays' attention_dp for the request: 1.0 for data-parallel attention + expert parallel."""
    return 1.0 if ctx.req.attention_dp else 0.0


def _tree_overrides(ctx: _Ctx, cands: Sequence[Candidate]) -> dict[str, np.ndarray]:
    """A stated tree's draft steps and tokens per step along the candidates' axis (NaN: the method's default)."""
    if not any(c.tree_shape is not None for c in cands):
        return {}
    ov = [tree_draft_overrides(c.tree_shape, ctx.catalog.methods[c.method]) if c.tree_shape is not None else {}
          for c in cands]
    return {key: _r5([o.get(key, np.nan) for o in ov], 1)
            for key in ("draft_passes_override", "draft_tokens_per_pass_override")}


def _evaluate(ctx: _Ctx, cands: Sequence[Candidate], smp: Samples, batch, *, pre) -> SpecResult:
    return evaluate_arrays(batch=batch, **_engine_args(ctx, cands, smp, pre))


def search(ctx: _Ctx, cands: Sequence[Candidate], smp: Samples) -> _Search:
    """Best batch for every (sample, candidate, K, segment) in one vectorised pass."""
    k_all = sorted({k for c in cands for k in c.ks})
    ks = np.array(k_all, float)
    valid = np.array([[k in c.ks for k in k_all] for c in cands])
    tau_r, nver_stack, alpha1 = _taus(ctx, cands, smp, ks)  # (N, C, K, S), (N, C, K, S), (N, C, S)
    valid = valid & ~np.isnan(tau_r).any(axis=(0, 3))  # measured positions end before K: not searched
    tau_r = np.nan_to_num(tau_r, nan=1.0)
    nver_r = np.broadcast_to(nver_stack, tau_r.shape)
    # Only the valid (candidate, K) pairs are evaluated: they lie along axis 1 (K axis of length 1) and are
    # put back on the (candidate, K) grid at the end.
    ci, ki = np.nonzero(valid)
    cq = [cands[c] for c in ci]
    prompt = _r5([s.prompt_tokens for s in ctx.segs], 3)
    out = _r5([s.output_tokens for s in ctx.segs], 3)
    # context per sequence during decode: prompt + half the output on average
    pre = {"k": _r5(ks[ki], 1), "tau": tau_r[:, ci, ki][:, :, None, :, None],
           "nver": nver_r[:, ci, ki][:, :, None, :, None], "prompt": prompt, "out": out, "ctx": prompt + out / 2.0}
    is_base = np.array([c.method == NO_SPEC for c in cq])
    drafts = _drafts(ctx, cq)
    args = _engine_args(ctx, cq, smp, pre, drafts)

    def ev(batch, a=args, with_memory=False):
        """The model at `batch`; memory only for the final evaluation (the search bounds come from _memory)."""
        return evaluate_arrays(batch=batch, with_memory=with_memory, **a)

    def pick(res: SpecResult, name: str, base_mask=None):
        """Speculative arrays, or the baseline's for the no-speculation candidates."""
        spec, base = getattr(res, name), getattr(res, "baseline_" + name)
        return np.where(_r5(is_base, 1) if base_mask is None else base_mask, base, spec)

    slo_s = ctx.req.tpot_slo_ms / 1e3
    # 1. each configuration's own upper bound: memory (no step time needed), the traffic's concurrency cap and
    #    MAX_BATCH; then a grid of batches (powers of 4 below the largest bound, and the bound itself)
    mb = _memory(ctx, cq, pre, drafts)
    ub = np.minimum(mb, MAX_BATCH)
    if ctx.req.batch_cap is not None:
        ub = np.minimum(ub, max(1.0, math.floor(ctx.req.batch_cap)))
    ub = np.maximum(ub, 1.0)
    coarse = _COARSE_BATCHES[_COARSE_BATCHES < ub.max()]
    grid = np.minimum(np.concatenate([np.broadcast_to(coarse, ub.shape[:-1] + coarse.shape), ub], axis=-1), ub)
    rg = ev(grid)
    tg = pick(rg, "tpot_s")
    lead = tg.shape[:-1]
    seen_b, seen_c = [grid], [pick(rg, "usd_per_mtok")]
    tpot1 = tg[..., :1]
    ok_g = tg <= slo_s
    # 2. the largest integer batch <= ub with TPOT <= SLO. TPOT grows with batch: bracket it on the grid, then
    #    interpolate and test neighbours per round (TPOT is near-affine in batch within a bracket). Each round
    #    evaluates only the configurations whose bracket is still open (rows gathered by _take_rows).
    lo = np.where(ok_g, grid, 0.0).max(-1, keepdims=True)  # largest grid batch meeting the SLO (0: none)
    t_lo = np.where(lo > 0, np.take_along_axis(tg, np.argmax(np.where(ok_g, grid, -1.0), -1)[..., None], -1), 0.0)
    above = ~ok_g & (grid > lo)
    bad = np.where(above, grid, np.inf).min(-1, keepdims=True)  # smallest grid batch above lo missing it
    t_bad = np.take_along_axis(tg, np.argmin(np.where(above, grid, np.inf), -1)[..., None], -1)
    bad = np.where(lo > 0, bad, 1.0)  # nothing meets the SLO: batch 1 is reported (its lowest TPOT)
    base_full = np.broadcast_to(_r5(is_base, 1), lead + (1,))
    for _ in range(40):
        open_ = (lo > 0) & np.isfinite(bad) & (bad - lo > 1)
        if not open_.any():
            break
        frac = np.clip((slo_s - t_lo) / np.where(t_bad > t_lo, t_bad - t_lo, 1.0), 0.0, 1.0)
        g = np.clip(np.floor(lo + frac * (bad - lo)), lo + 1, bad - 1)
        mid = np.floor((lo + bad) / 2)
        # the interpolated batch and its neighbours (two either side: the curvature of TPOT in batch rarely
        # moves the boundary further, so most brackets close in one round), and the bisection point
        trial = np.clip(np.concatenate([g - 2, g - 1, g, g + 1, g + 2, mid], axis=-1), lo + 1, bad - 1)
        rows = np.nonzero(open_[..., 0])
        rt = ev(trial[rows], {name: _take_rows(a, rows, lead) for name, a in args.items()})
        base_rows = base_full[rows]
        tt = np.full(trial.shape, np.inf)
        tt[rows] = pick(rt, "tpot_s", base_rows)
        ct = np.full(trial.shape, np.inf)  # closed rows: not evaluated, never chosen
        ct[rows] = pick(rt, "usd_per_mtok", base_rows)
        seen_b.append(trial)
        seen_c.append(ct)
        okt = (tt <= slo_s) & open_
        new_lo = np.where(okt, trial, 0.0).max(-1, keepdims=True)
        idx_lo = np.argmax(np.where(okt, trial, -1.0), -1)[..., None]
        upd = new_lo > lo
        t_lo = np.where(upd, np.take_along_axis(tt, idx_lo, -1), t_lo)
        lo = np.where(upd, new_lo, lo)
        badt = (~okt) & open_ & (trial > lo)
        new_bad = np.where(badt, trial, np.inf).min(-1, keepdims=True)
        idx_bad = np.argmin(np.where(badt, trial, np.inf), -1)[..., None]
        updb = new_bad < bad
        t_bad = np.where(updb, np.take_along_axis(tt, idx_bad, -1), t_bad)
        bad = np.where(updb, new_bad, bad)
    boundary = np.maximum(lo, 1.0)
    # 3. the cheapest evaluated batch at or below the boundary (the boundary itself was evaluated: CPM falls with
    #    batch in today's step-time model; the smaller grid batches keep the search right if a fitted efficiency
    #    ever bends that), evaluated once more there for every number of the result.
    cand_b = np.concatenate([np.broadcast_to(b, lead + b.shape[-1:]) for b in seen_b], axis=-1)
    cpm = np.concatenate([np.broadcast_to(c, lead + c.shape[-1:]) for c in seen_c], axis=-1)
    cpm = np.where(cand_b <= boundary, cpm, np.inf)
    j = np.argmin(cpm, axis=-1)[..., None]
    best_b = np.take_along_axis(cand_b, j, axis=-1)
    res = ev(best_b, with_memory=True)
    meets = pick(res, "tpot_s") <= slo_s * (1 + 1e-12)
    fits = best_b <= mb
    n, c_, k_, s_ = smp.n, len(cands), len(ks), len(ctx.segs)

    def full(a, fill):
        """(N, Q, 1, S, 1) on the pairs -> (N, C, K, S, 1) on the grid; `fill` where a K is not searched."""
        a = np.asarray(a)
        g = np.full((n, c_, k_, s_, 1), fill, dtype=a.dtype)
        g[:, ci, ki] = np.broadcast_to(a, (n, len(ci), 1, s_, 1))[:, :, 0]
        return g

    res_full = SpecResult(**{f.name: full(getattr(res, f.name), False if getattr(res, f.name).dtype == bool
                                          else np.nan) for f in dataclasses.fields(SpecResult)})
    return _Search(ks=ks, batch=full(best_b, 1.0), res=res_full, ok=full(meets & fits, False),
                   fits_any=full(mb >= 1, False), tpot_min_s=full(tpot1, np.nan), max_batch=full(mb, 0.0),
                   tau=tau_r[..., None], alpha1=alpha1, valid_k=valid)


def _memory(ctx: _Ctx, cands: Sequence[Candidate], pre, drafts) -> np.ndarray:
    """Largest batch that fits memory along the candidates' axis: with the candidate's draft, or without one for
    no speculation (planner.serving.memory_max_batch)."""
    k = pre["k"]
    scaled = drafts["draft"].scaled(np.where(drafts["draft_scales_with_k"], k, 1.0))
    mb, base_mb = memory_max_batch(target=ctx.target, draft=scaled,
                                   hw=hw_params(ctx.hw, ctx.req.dtype, ctx.eff), mode=drafts["mode"],
                                   prompt_tokens=pre["prompt"], output_tokens=pre["out"], tp=ctx.tp,
                                   draft_weight_bytes_total=drafts["draft_weight_bytes_total"],
                                   draft_is_model=drafts["draft_is_model"], attention_dp=_dp(ctx))
    is_base = _r5([c.method == NO_SPEC for c in cands], 1).astype(bool)
    shape = np.broadcast_shapes(mb.shape, base_mb.shape, is_base.shape, k.shape, pre["prompt"].shape)
    return np.broadcast_to(np.where(is_base, base_mb, mb), shape)


def _take_rows(x: Any, rows: tuple[np.ndarray, ...], lead: tuple[int, ...]) -> Any:
    """An evaluate_arrays argument at some (sample, candidate, K, segment) rows only, shape (R, 1): each axis
    along which the argument varies is indexed, the others are read at 0; networks and hardware field by field;
    scalars as they are."""
    if dataclasses.is_dataclass(x):  # only the fields that vary (arrays); numbers stay as they are
        changes = {name: _take_rows(v, rows, lead) for name, v in vars(x).items()
                   if isinstance(v, np.ndarray) and v.ndim > 0}
        return dataclasses.replace(x, **changes) if changes else x
    if x is None or np.ndim(x) == 0:
        return x
    a = np.asarray(x)
    a = a.reshape((1,) * (len(lead) + 1 - a.ndim) + a.shape)
    idx = tuple(r if n > 1 else 0 for r, n in zip(rows, a.shape[:-1], strict=True))
    return a[idx]  # (R, 1); (1,) when the argument is the same on every row


def _ctx(req: PlanRequest, catalog, segs=None, tp: int | None = None) -> _Ctx:
    hw = catalog.hardware[req.hardware]
    eff = efficiency_for(catalog, req.hardware, req.dtype, req.efficiency)
    price = req.usd_per_gpu_hour if req.usd_per_gpu_hour is not None else hw.usd_per_gpu_hour_mid
    return _Ctx(
        req=req,
        catalog=catalog,
        model=catalog.models[req.model],
        hw=hw,
        segs=segs if segs is not None else validate(req, catalog),
        eff=eff,
        price=float(price),
        costs=req.costs or default_costs(catalog),
        tp=int(tp or req.tp),
    )


# ---------------------------------------------------------------------------------------------------
# From arrays to operating points
# ---------------------------------------------------------------------------------------------------


def _memory_way_out(ctx: _Ctx, extra_weight_bytes: float = 0.0) -> str:
    """What would make the weights fit: a larger TP, or fp8 weights."""
    model, hw = ctx.model, ctx.hw
    usable_per_gpu = hw.hbm_gb * GB * GPU_MEMORY_UTILIZATION * (1 - ACTIVATION_RESERVE_FRACTION)
    need = {}
    par = "DP" if ctx.req.attention_dp else "TP"
    for dtype in ("bf16", "fp8"):
        net = target_net(model, dtype)
        extra = extra_weight_bytes * BYTES_PER_PARAM[dtype] / BYTES_PER_PARAM[ctx.req.dtype]
        # the replica's weights on t GPUs (every GPU holds the non-expert weights under attention DP)
        wb_at = {t: float(replica_weight_bytes(net, tp=t, attention_dp=_dp(ctx))) + extra
                 for t in {ctx.tp, *TP_OPTIONS}}
        need[dtype] = (wb_at[ctx.tp], next((t for t in TP_OPTIONS if t <= hw.max_tp
                                            and usable_per_gpu * t > wb_at[t] * 1.05), None))
    wb, _ = need[ctx.req.dtype]
    parts = [
        f"weights need {wb / GB:,.0f} GB, {ctx.tp} x {hw.label} offer {usable_per_gpu * ctx.tp / GB:,.0f} GB usable"
    ]
    tp_same = need[ctx.req.dtype][1]
    ways = []
    if tp_same is not None and tp_same > ctx.tp:
        ways.append(f"{par} >= {tp_same}")
    if ctx.req.dtype != "fp8" and need["fp8"][1] is not None:
        ways.append(f"fp8 weights ({par} >= {need['fp8'][1]})" if need["fp8"][1] > ctx.tp else "fp8 weights")
    if not ways:
        ways.append(f"more memory per replica than {hw.max_tp} x {hw.label} (a larger GPU, or pipeline parallel)")
    return "; ".join(parts) + "; needs " + " or ".join(ways)


def _points(ctx: _Ctx, cands: Sequence[Candidate], sr: _Search, n: int = 0, count: int | None = None
            ) -> list[OperatingPoint]:
    """Sample n of a search -> one OperatingPoint per candidate (its K with the lowest blended CPM)."""
    share = ctx.share
    res = sr.res
    is_base = np.array([c.method == NO_SPEC for c in cands])

    def arr(name):
        spec, base = getattr(res, name), getattr(res, "baseline_" + name)
        return np.where(_r5(is_base, 1), base, spec)[n, ..., 0]  # (C, K, S)

    cpm, tpot, thr = arr("usd_per_mtok"), arr("tpot_s"), arr("output_tokens_per_s")
    bound = arr("compute_bound")
    ok = sr.ok[n, ..., 0] & sr.valid_k[:, :, None]
    mb = sr.max_batch[n, ..., 0] if sr.max_batch.shape[0] > 1 else sr.max_batch[0, ..., 0]
    mb = np.broadcast_to(mb, cpm.shape)
    batch = sr.batch[n, ..., 0]
    blended = (cpm * share).sum(-1)  # (C, K)
    all_ok = ok.all(-1)
    out = []
    for c, cand in enumerate(cands[:count]):
        valid = sr.valid_k[c]
        score = np.where(all_ok[c], blended[c], np.inf)
        if not np.isfinite(score).any():  # infeasible: report the K with the lowest TPOT among valid K's
            score = np.where(valid, (tpot[c] * share).sum(-1), np.inf)
        i = int(np.argmin(score))
        dom = int(np.argmax(share))
        kidx = np.full(len(ctx.segs), i)
        if cand.k_per_segment:  # each segment at its own cheapest feasible K
            seg_score = np.where(ok[c], cpm[c], np.inf)  # (K, S)
            has = np.isfinite(seg_score).any(0)
            kidx = np.where(has, np.argmin(seg_score, 0), i)
            i = int(kidx[dom])
        k = int(sr.ks[i]) if cand.method != NO_SPEC else 0
        sj = np.arange(len(ctx.segs))
        tau_s = sr.tau[n, c, kidx, sj, 0]
        bs, mbs = batch[c, kidx, sj], mb[c, kidx, sj]
        ts, cs, hs = tpot[c, kidx, sj], cpm[c, kidx, sj], thr[c, kidx, sj]
        sp = res.speedup[n, c, kidx, sj, 0] if cand.method != NO_SPEC else np.ones(len(sj))
        cols = zip(ctx.segs, bs.astype(int).tolist(), mbs.astype(int).tolist(), (ts * 1e3).tolist(), cs.tolist(),
                   hs.tolist(), tau_s.tolist(), sp.tolist(), sr.alpha1[n, c].tolist(), (bs <= mbs).tolist(),
                   (ts * 1e3 <= ctx.req.tpot_slo_ms * (1 + 1e-12)).tolist(), bound[c, kidx, sj].tolist(), strict=True)
        seg_points = tuple(
            SegmentPoint(workload=s.workload, language=s.language, share=s.share, batch=b_, max_batch=mb_,
                         tpot_ms=t_, usd_per_mtok=c_, output_tokens_per_s=h_, acceptance_length=a_, speedup=x_,
                         alpha_position_1=a1_, fits_memory=f_, meets_slo=m_,
                         verifier_bound="compute" if cb_ else "memory")
            for s, b_, mb_, t_, c_, h_, a_, x_, a1_, f_, m_, cb_ in cols
        )
        fits = all(p.fits_memory for p in seg_points) and bool(sr.fits_any[n, c, kidx, sj, 0].all())
        meets = all(p.meets_slo for p in seg_points)
        tau = float(np.dot(share, tau_s))
        label = "no speculation" if cand.method == NO_SPEC else ctx.catalog.methods[cand.method].label
        reason, way = "", ""
        if not fits:
            draft_bytes = float(_draft(ctx, cand.method)[3]) if cand.method != NO_SPEC else 0.0
            reason = "does not fit memory"
            way = _memory_way_out(ctx, draft_bytes)
        elif not meets:
            best_ms = float((tpot[c, kidx, sj] * 1e3).max())
            reason = f"misses the {ctx.req.tpot_slo_ms:g} ms TPOT SLO: best achievable {best_ms:.1f} ms (batch 1)"
            way = "a larger TP, a smaller model or fp8 weights; or a looser SLO"
        m = ctx.catalog.methods[cand.method] if cand.method != NO_SPEC else None
        one = ctx.costs.one_time_usd(m) if m is not None else (0.0, 0.0)
        out.append(
            OperatingPoint(
                method=cand.method,
                label=label,
                available=True,
                k=k,
                batch=seg_points[dom].batch,
                max_batch=seg_points[dom].max_batch,
                fits_memory=fits,
                meets_slo=meets,
                feasible=fits and meets,
                tpot_ms=float(np.dot(share, tpot[c, kidx, sj] * 1e3)),
                usd_per_mtok=float(np.dot(share, cpm[c, kidx, sj])),
                output_tokens_per_s=float(1.0 / np.dot(share, 1.0 / thr[c, kidx, sj])),
                acceptance_length=tau,
                alpha_per_token=0.0,
                alpha_position_1=float(np.dot(share, sr.alpha1[n, c])),
                draft_acceptance_rate=float((tau - 1.0) / k) if k else 0.0,
                speedup=float(np.dot(share, [p.speedup for p in seg_points])),
                draft_cost_ratio=float(res.draft_cost_ratio[n, c, i, dom, 0]) if cand.method != NO_SPEC else 0.0,
                verifier_bound=seg_points[dom].verifier_bound,
                cpm_change_pct=None,
                reason=reason,
                way_out=way,
                segments=seg_points,
                one_time_usd_low=one[0],
                one_time_usd_high=one[1],
                alpha_convention=m.alpha_convention if m else "",
                alpha_source=f"{m.source.source} ({m.source.date})" if m else "",
            )
        )
    # tau -> the i.i.d. per-token alpha with the same acceptance length, all candidates in one inversion
    ks_ = np.array([max(p.k, 1) for p in out], float)
    taus = np.clip(np.array([p.acceptance_length for p in out]), 1.0, ks_ + 1.0)
    alphas = np.atleast_1d(acc.alpha_from_acceptance_length(taus, ks_, iterations=40))
    return [dataclasses.replace(p, alpha_per_token=float(a) if p.k else 0.0) for p, a in zip(out, alphas, strict=True)]


def _unavailable(ctx: _Ctx, name: str, why: str) -> OperatingPoint:
    m = ctx.catalog.methods[name]
    one = ctx.costs.one_time_usd(m)
    nan = math.nan
    return OperatingPoint(
        method=name,
        label=m.label,
        available=False,
        k=0,
        batch=0,
        max_batch=0,
        fits_memory=False,
        meets_slo=False,
        feasible=False,
        tpot_ms=nan,
        usd_per_mtok=nan,
        output_tokens_per_s=nan,
        acceptance_length=nan,
        alpha_per_token=nan,
        alpha_position_1=nan,
        draft_acceptance_rate=nan,
        speedup=nan,
        draft_cost_ratio=nan,
        verifier_bound="",
        cpm_change_pct=None,
        reason=f"unavailable: {why}",
        way_out="",
        one_time_usd_low=one[0],
        one_time_usd_high=one[1],
        alpha_convention=m.alpha_convention,
        alpha_source=f"{m.source.source} ({m.source.date})",
    )


def method_candidates(ctx: _Ctx, names: Sequence[str], *, tuned: bool | None = None) -> tuple[list[Candidate], dict]:
    """Candidates for the available methods, and {name: reason} for the unavailable ones."""
    cands, missing = [], {}
    for name in names:
        m = ctx.catalog.methods[name]
        ok, why = availability(ctx.model, m)
        if not ok:
            missing[name] = why
            continue
        shape = ctx.req.tree_shape if m.tree else None
        ks = (shape.depth,) if shape is not None else tuple(range(1, m.max_k + 1))
        cands.append(Candidate(name, ks, tuned=ctx.req.tuned if tuned is None else tuned, tree=shape is not None,
                               tree_shape=shape))
    return cands, missing


# ---------------------------------------------------------------------------------------------------
# plan()
# ---------------------------------------------------------------------------------------------------


def blended_cpm(ctx: _Ctx, cands, sr) -> tuple[np.ndarray, np.ndarray]:
    """(CPM (N, C) blended over segments at each candidate's best feasible K, feasible (N, C)); nan where
    infeasible. The vectorised form of plan._points' choice of K."""
    is_base = _r5([c.method == NO_SPEC for c in cands], 1).astype(bool)
    cpm = np.where(is_base, sr.res.baseline_usd_per_mtok, sr.res.usd_per_mtok)[..., 0]  # (N, C, K, S)
    ok = sr.ok[..., 0] & sr.valid_k[None, :, :, None]
    blended = np.where(ok.all(-1), (cpm * ctx.share).sum(-1), np.inf)  # (N, C, K)
    best = blended.min(-1)
    feasible = np.isfinite(best)
    return np.where(feasible, best, np.nan), feasible


def _methods_with_band(ctx: _Ctx, names: Sequence[str]) -> list[OperatingPoint]:
    """No speculation and every method at its best K and batch, with the uncertainty band: each method's CPM at the
    low and high end of its alpha range, each at its own best K and batch. One vectorised search: the band's
    ends are extra candidates with the alpha shifted by half the range (prompt lookup and measured acceptance
    have no range)."""
    cands, missing = method_candidates(ctx, names)
    band, owner = [], []
    for c in cands:
        m = ctx.catalog.methods[c.method]
        if m.drafting == "ngram" or (ctx.req.acceptance is not None and ctx.req.acceptance_method == c.method):
            continue
        rng = m.alpha_tuned if c.tuned else m.alpha_default
        half = 0.5 * (rng.high - rng.low)
        band += [dataclasses.replace(c, alpha_shift=-half), dataclasses.replace(c, alpha_shift=half)]
        owner.append(c.method)
    main = [Candidate(NO_SPEC, (1,)), *cands]
    allc = main + band
    sr = search(ctx, allc, samples_for(("mid",), ctx.eff, ctx.price))
    pts = {p.method: p for p in _points(ctx, allc, sr, count=len(main))}
    cpm, _ = blended_cpm(ctx, allc, sr)
    ends = {name: (float(cpm[0, len(main) + 2 * i]), float(cpm[0, len(main) + 2 * i + 1]))
            for i, name in enumerate(owner)}
    out = [pts[NO_SPEC]]
    for name in names:
        if name not in pts:
            out.append(_unavailable(ctx, name, missing[name]))
            continue
        lo, hi = ends.get(name, (pts[name].usd_per_mtok, pts[name].usd_per_mtok))
        out.append(dataclasses.replace(pts[name], usd_per_mtok_low=lo, usd_per_mtok_high=hi))
    return out


def _pct(new: float, ref: float | None) -> float | None:
    if ref is None or not (ref > 0) or not math.isfinite(new):
        return None
    v = (new / ref - 1.0) * 100.0
    return 0.0 if abs(v) < 0.05 else v


def plan(req: PlanRequest, catalog) -> Plan:
    """The whole answer for one request (see the module docstring)."""
    segs = validate(req, catalog)
    ctx = _ctx(req, catalog, segs)
    names = list(req.methods or catalog.methods.keys())
    if req.current_method != NO_SPEC and req.current_method not in names:
        names.append(req.current_method)
    mid = _methods_with_band(ctx, names)
    baseline = mid[0]
    by = {p.method: p for p in mid[1:]}
    # Alternatives without speculation at other TP: the way out of an infeasible baseline.
    alternatives: list[OperatingPoint] = []
    if not baseline.feasible:
        for tp in TP_OPTIONS:
            if tp == req.tp or tp > ctx.hw.max_tp:
                continue
            c2 = _ctx(dataclasses.replace(req, tp=tp), catalog, segs)
            p = _points(
                c2,
                [Candidate(NO_SPEC, (1,))],
                search(c2, [Candidate(NO_SPEC, (1,))], samples_for(("mid",), c2.eff, c2.price)),
            )[0]
            alternatives.append(
                dataclasses.replace(
                    p, label=f"no speculation at {'DP' if req.attention_dp else 'TP'}={tp}",
                    reason=p.reason or f"no speculation on {tp} x {ctx.hw.label}"
                )
            )
    # The reference ("today"): the current method if it runs, else no speculation; only if feasible.
    cur = req.current_method
    cur_pt = by.get(cur) if cur != NO_SPEC else baseline
    reference, note = None, ""
    if cur_pt is not None and cur_pt.feasible:
        reference = cur_pt
        note = f"today: {cur_pt.label} at its best K and batch"
    else:
        why = cur_pt.reason if cur_pt is not None else "unavailable"
        feasible_alt = [a for a in alternatives if a.feasible]
        if feasible_alt:
            reference = min(feasible_alt, key=lambda a: a.usd_per_mtok)
            note = (
                f"today's configuration on {req.tp} x {ctx.hw.label} {why}; compared with the cheapest "
                f"configuration without speculation that meets the SLO: {reference.label}"
            )
        else:
            note = (
                f"today's configuration on {req.tp} x {ctx.hw.label} {why}; no configuration without "
                "speculation on this hardware meets the SLO, so no saving is computed against it"
            )
    ref_cpm = reference.usd_per_mtok if reference is not None else None
    methods = tuple(
        dataclasses.replace(p, cpm_change_pct=_pct(p.usd_per_mtok, ref_cpm) if p.feasible else None)
        for p in mid[1:]
        if p.method in (req.methods or catalog.methods.keys()) or p.method == cur
    )
    baseline = dataclasses.replace(
        baseline, cpm_change_pct=_pct(baseline.usd_per_mtok, ref_cpm) if baseline.feasible else None
    )
    feasible = [p for p in methods if p.feasible]
    best = min(feasible, key=lambda p: p.usd_per_mtok) if feasible else None
    costs = ctx.costs
    # economics of switching from the reference to the best method
    switching = best is not None and best.method != (reference.method if reference is not None else None)
    one_low, one_high = (
        (best.one_time_usd_low, best.one_time_usd_high) if (best is not None and switching) else (0.0, 0.0)
    )
    econ = _economics(req, costs, reference, best, one_low, one_high)
    rec, verdict = _decide(req, ctx, baseline, reference, note, best, econ, switching, alternatives)
    deploy_for = rec.method if rec is not None else (best.method if best is not None else None)
    deploy = None
    if deploy_for is not None:
        pt = next(p for p in methods if p.method == deploy_for)
        deploy = vllm_deployment(
            catalog.methods[deploy_for],
            ctx.model,
            pt.k,
            tp=req.tp,
            attention_dp=req.attention_dp,
            dtype=req.dtype,
            max_num_seqs=pt.batch,
            draft_model=catalog.models[ctx.model.draft_model]
            if catalog.methods[deploy_for].drafting == "draft_model"
            else None,
            tree_shape=req.tree_shape if catalog.methods[deploy_for].tree else None,
            kv_dtype=req.kv_dtype or default_kv_dtype(req.dtype),
        )
    levers: tuple[LeverStep, ...] = ()
    if req.levers_start is not None:
        start = req.levers_start
        if start == "auto":
            start = cur if cur != NO_SPEC and catalog.methods[cur].drafting != "ngram" else "eagle3"
        if start in catalog.methods and availability(ctx.model, catalog.methods[start])[0]:
            levers = tuple(lever_waterfall(ctx, start))
    fleet_plan = None
    if req.daily_shape is not None or req.hours:
        fleet_plan = fleet(ctx, [baseline, *methods])
    return Plan(
        fleet=fleet_plan,
        request=req,
        segments=segs,
        usd_per_gpu_hour=ctx.price,
        baseline=baseline,
        reference=reference,
        reference_note=note,
        methods=methods,
        best=best,
        recommendation=rec,
        verdict=verdict,
        economics=econ,
        levers=levers,
        deploy=deploy,
        assumptions=tuple(assumptions(ctx)),
        costs=costs,
        alternatives=tuple(alternatives),
    )


def fleet(ctx: _Ctx, points: Sequence[OperatingPoint]):
    """The fleet by hour for no speculation and every feasible method at the plan's K (planner.fleet)."""
    from planner.fleet import fleet_for_configs, hours_from_volume

    req = ctx.req
    if req.hours:
        hours, source = tuple(req.hours), req.hours_source or "traffic trace"
    else:
        shape = req.daily_shape or "flat"
        mean_out = sum(s.share * s.output_tokens for s in ctx.segs)
        # requests: output-token shares / mean output per segment -> request-weighted mean prompt
        req_w = np.array([s.share / s.output_tokens for s in ctx.segs])
        mean_prompt = float(np.dot(req_w / req_w.sum(), [s.prompt_tokens for s in ctx.segs]))
        mean_out = float(1.0 / req_w.sum())
        hours = hours_from_volume(req.monthly_output_tokens, mean_prompt, mean_out, shape)
        source = f"'{shape}' daily shape applied to {req.monthly_output_tokens / 1e9:,.2f}B output tokens/month"
    cfgs = [p for p in points if p.available and p.feasible]
    if not cfgs:
        return None
    cands = [Candidate(p.method, (max(p.k, 1),), tree=ctx.req.tree_shape is not None and p.method != NO_SPEC
                       and ctx.catalog.methods[p.method].tree, tree_shape=ctx.req.tree_shape if p.method != NO_SPEC
                       and ctx.catalog.methods[p.method].tree else None) for p in cfgs]
    prompt = _r5([h.prompt_tokens for h in hours], 3)
    out = _r5([h.output_tokens for h in hours], 3)
    k = _r5([max(p.k, 1) for p in cfgs], 1)
    nver = _r5([c.tree_shape.verify_tokens_per_seq if c.tree_shape is not None else max(p.k, 1) + 1
                for c, p in zip(cands, cfgs, strict=True)], 1)
    pre = {"k": k, "tau": _r5([p.acceptance_length for p in cfgs], 1), "nver": nver, "prompt": prompt, "out": out,
           "ctx": prompt + out / 2.0}
    smp = samples_for(("mid",), ctx.eff, ctx.price)
    drafts = _drafts(ctx, cands)
    mb = _memory(ctx, cands, pre, drafts)[0, :, 0, :, 0]  # (C, H)
    # Batches beyond Little's bound lambda * O * SLO never decide the fleet (planner.fleet.replicas_for): a light
    # load needs the TPOT curve only up to its few sequences in flight.
    in_flight = max(h.requests_per_s * h.output_tokens for h in hours) * req.tpot_slo_ms / 1e3
    bmax = int(min(MAX_BATCH, max(1.0, float(mb.max())), math.ceil(in_flight) + 1))
    res = evaluate_arrays(batch=_r5(np.arange(1, bmax + 1, dtype=float), 4), **_engine_args(ctx, cands, smp, pre,
                                                                                           drafts))
    is_base = _r5([c.method == NO_SPEC for c in cands], 1).astype(bool)
    tpot = np.broadcast_to(np.where(is_base, res.baseline_tpot_s, res.tpot_s), (1, len(cands), 1, len(hours), bmax))
    pre_s = np.broadcast_to(prefill_time_s(ctx.target, hw_params(ctx.hw, req.dtype, ctx.eff),
                                           prompt_tokens=np.array([h.prompt_tokens for h in hours]), tp=ctx.tp),
                            (len(hours),))
    return fleet_for_configs(configs=[(p.method, p.label, p.k) for p in cfgs], tpot_s=tpot[0, :, 0], max_batch=mb,
                             prefill_s=np.asarray(pre_s, float), hours=hours, tp=ctx.tp, usd_per_gpu_hour=ctx.price,
                             slo_ms=req.tpot_slo_ms, shape_source=source)


def _economics(
    req: PlanRequest,
    costs: CostAssumptions,
    reference: OperatingPoint | None,
    best: OperatingPoint | None,
    one_low: float,
    one_high: float,
) -> PlanEconomics:
    one_mid = 0.5 * (one_low + one_high)
    vol = req.monthly_output_tokens
    inf = math.inf
    if reference is None or best is None:
        return PlanEconomics(
            reference.usd_per_mtok if reference else None,
            best.usd_per_mtok if best else None,
            vol,
            None,
            None,
            None,
            one_mid,
            one_low,
            one_high,
            inf,
            inf,
            inf,
            None,
            costs.horizon_months,
            costs.annual_discount_rate,
        )
    new = min(best.usd_per_mtok, reference.usd_per_mtok)
    e = economics(
        baseline_usd_per_mtok=reference.usd_per_mtok,
        new_usd_per_mtok=new,
        monthly_output_tokens=vol,
        one_time_usd=one_mid,
        horizon_months=costs.horizon_months,
        annual_discount_rate=costs.annual_discount_rate,
    )
    # uncertainty band: the best method at the low / high end of its alpha range against the same reference
    sav_lo = (
        max(0.0, reference.usd_per_mtok - best.usd_per_mtok_low) * vol / 1e6
        if math.isfinite(best.usd_per_mtok_low)
        else None
    )
    sav_hi = (
        max(0.0, reference.usd_per_mtok - best.usd_per_mtok_high) * vol / 1e6
        if math.isfinite(best.usd_per_mtok_high)
        else None
    )
    savings = sorted(s for s in (sav_lo, sav_hi, float(e.monthly_saving_usd)) if s is not None)

    def payback(one, sav):
        return one / sav if sav > 0 else inf

    return PlanEconomics(
        reference_usd_per_mtok=reference.usd_per_mtok,
        new_usd_per_mtok=new,
        monthly_output_tokens=vol,
        monthly_saving_usd=float(e.monthly_saving_usd),
        monthly_saving_low_usd=savings[0],
        monthly_saving_high_usd=savings[-1],
        one_time_usd=one_mid,
        one_time_low_usd=one_low,
        one_time_high_usd=one_high,
        payback_months=float(e.payback_months),
        payback_low_months=payback(one_low, savings[-1]),
        payback_high_months=payback(one_high, savings[0]),
        npv_usd=float(e.npv_usd),
        horizon_months=costs.horizon_months,
        annual_discount_rate=costs.annual_discount_rate,
    )


def fmt_usd(x: float | None, digits: int = 0) -> str:
    """Money for a finance reader: '-$546', '$1,234', 'n/a'."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if round(x, digits) == 0:
        x = 0.0
    sign = "-" if x < 0 else ""
    return f"{sign}${abs(x):,.{digits}f}"


def fmt_cpm(x: float | None) -> str:
    return fmt_usd(x, 3)


def fmt_months(x: float | None) -> str:
    """'does not pay back', 'under 0.1 months', '1.7 months', '178 months'."""
    if x is None or not math.isfinite(x):
        return "does not pay back"
    if x < 0.05:
        return "under 0.1 months" if x > 0 else "immediately"
    return f"{x:.1f} months" if x < 100 else f"{x:,.0f} months"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    """'+3.2 %', '-7.0 %', '0.0 %' (never '-0.0 %'), 'n/a'."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if round(x, digits) == 0:
        return f"{0:.{digits}f} %"
    return f"{x:+.{digits}f} %"


def _traffic_phrase(ctx: _Ctx) -> str:
    """'chat in English' for one segment; '62 % code completion' for a mix (its largest workload)."""
    cat = ctx.catalog
    if len(ctx.segs) == 1:
        s = ctx.segs[0]
        return f"{cat.workloads[s.workload].label.lower()} in {cat.languages[s.language].label}"
    by: dict[str, float] = {}
    for s in ctx.segs:
        by[s.workload] = by.get(s.workload, 0.0) + s.share
    top, share = max(by.items(), key=lambda kv: kv[1])
    return f"{share * 100:.0f} % {cat.workloads[top].label.lower()}"


def _decide(req, ctx, baseline, reference, note, best, econ, switching, alternatives):
    slo = f"{req.tpot_slo_ms:g} ms TPOT SLO"
    traffic = f"for traffic that is {_traffic_phrase(ctx)}"
    if best is None:
        methods_way = baseline.way_out or "a larger TP, fp8 weights or a looser SLO"
        if not baseline.fits_memory:
            return None, (
                f"Nothing can run: {ctx.model.label} does not fit on {req.tp} x {ctx.hw.label} ({baseline.way_out})."
            )
        if reference is not None:
            return None, (f"Stay with {reference.label}: no speculative-decoding method fits and meets the {slo} here.")
        return None, (
            f"Nothing meets the {slo} on {req.tp} x {ctx.hw.label}: no speculation {baseline.reason}, and "
            f"no method fits and meets it either ({methods_way})."
        )
    if reference is None:
        return (
            Recommendation(
                best.method,
                best.label,
                best.k,
                best.batch,
                best.usd_per_mtok,
                None,
                f"speculation is what makes the {slo} reachable: no configuration without it meets "
                "the SLO on this hardware, so no saving is computed",
            ),
            f"Deploy {best.label} with K={best.k} at batch {best.batch} {traffic}: it meets the {slo} at "
            f"{fmt_cpm(best.usd_per_mtok)} per million output tokens where no configuration without speculation "
            f"does ({baseline.reason}).",
        )
    cut = 1.0 - best.usd_per_mtok / reference.usd_per_mtok
    within = econ.payback_months <= econ.horizon_months
    bound = (
        "the verifier is memory-bound, so drafting cuts CPM"
        if best.verifier_bound == "memory"
        else "the verifier is compute-bound, yet drafting still cuts CPM"
    )
    ref_phrase = reference.label
    if not switching:
        return None, (
            f"Keep {best.label} (K={best.k}, batch {best.batch}): no other method is cheaper under the {slo} "
            f"({fmt_cpm(best.usd_per_mtok)} per million output tokens)."
        )
    if cut >= ctx.costs.min_cpm_cut and within:
        reason = (
            f"at batch {best.batch} under the {slo} {bound} {cut * 100:.1f} % "
            f"({fmt_cpm(reference.usd_per_mtok)} -> {fmt_cpm(best.usd_per_mtok)} per million output tokens "
            f"vs {ref_phrase}); the {fmt_usd(econ.one_time_usd)} setup pays back in "
            f"{fmt_months(econ.payback_months)}"
        )
        return (
            Recommendation(
                best.method,
                best.label,
                best.k,
                best.batch,
                best.usd_per_mtok,
                _pct(best.usd_per_mtok, reference.usd_per_mtok),
                reason,
            ),
            f"Deploy {best.label} with K={best.k} {traffic}: {reason}.",
        )
    if cut < ctx.costs.min_cpm_cut:
        return None, (
            f"Stay with {ref_phrase} {traffic}: the best method ({best.label}, K={best.k}, batch {best.batch}) "
            f"changes CPM by {fmt_pct(-cut * 100)} under the {slo}, too little to pay for a change "
            f"(threshold {ctx.costs.min_cpm_cut * 100:g} %)."
        )
    return None, (
        f"Stay with {ref_phrase} {traffic}: {best.label} would cut CPM {cut * 100:.1f} %, but at "
        f"{req.monthly_output_tokens / 1e9:,.2f}B output tokens a month its {fmt_usd(econ.one_time_usd)} "
        + (f"setup takes {fmt_months(econ.payback_months)} to pay back, beyond the {econ.horizon_months}-month "
           "horizon." if math.isfinite(econ.payback_months) else "setup never pays back.")
    )


# ---------------------------------------------------------------------------------------------------
# Levers: the seed's seven, as a waterfall over the whole mix
# ---------------------------------------------------------------------------------------------------


def _one_point(ctx: _Ctx, cand: Candidate) -> OperatingPoint:
    smp = samples_for(("mid",), ctx.eff, ctx.price)
    return _points(ctx, [cand], search(ctx, [cand], smp))[0]


def _vsd_alpha_shift(ctx: _Ctx, cand: Candidate, factor: float) -> float:
    """VSD's gain is an acceptance gain: the alpha shift that multiplies the acceptance length at the
    method's default K by `factor` (i.i.d. inversion; capped at alpha MAX_ALPHA)."""
    m = ctx.catalog.methods[cand.method]
    k = m.default_k
    a1 = float(np.dot(ctx.share, _alpha1(ctx, cand, samples_for(("mid",), ctx.eff, ctx.price))[0]))
    tau = float(acc.acceptance_length_iid(a1, k))
    target = min(tau * factor, float(acc.acceptance_length_iid(MAX_ALPHA, k)))
    return float(acc.alpha_from_acceptance_length(target, k)) - a1


def lever_waterfall(ctx: _Ctx, start: str, order: Sequence[str] | None = None) -> list[LeverStep]:
    """Apply the levers cumulatively from `start` at the plan's operating point (its best single K for the mix);
    lever 3 (tune K per workload) then gives each workload segment its own K.

    Each step is the whole mix at its own best batch under the SLO. A lever that raises CPM is skipped. A lever's
    compute cost is paid once per (language, workload) segment (the seed: $400-1,800 per language-workload);
    engineering weeks once. Payback and break-even spend use planner.economics.
    """
    cat = ctx.catalog
    names = list(order or [n for n, _ in sorted(cat.levers.items(), key=lambda kv: kv[1].number)])
    m0 = cat.methods[start]
    cur = Candidate(start, tuple(range(1, m0.max_k + 1)), tuned=ctx.req.tuned)  # the plan's operating point
    pt = _one_point(ctx, cur)
    eng = ctx.costs.engineering_usd_per_week
    n_segs = len({(s.workload, s.language) for s in ctx.segs})
    steps = []
    for name in names:
        lever = cat.levers[name]
        method = cat.methods[cur.method]
        new, why = None, ""
        if lever.applies_to and cur.method not in lever.applies_to:
            why = f"does not apply to {method.label}"
        elif lever.kind == "alpha":
            if cur.tuned:
                why = "the tuned alpha range already includes a domain fine-tune (not counted twice)"
            else:
                new, why = (
                    dataclasses.replace(cur, alpha_shift=cur.alpha_shift + lever.alpha_gain.mid),
                    f"alpha +{lever.alpha_gain.mid:.2f} (per-token)",
                )
        elif lever.kind == "switch_to_head":
            e3 = cat.methods["eagle3"]
            new, why = (
                dataclasses.replace(cur, method="eagle3", ks=tuple(range(1, e3.max_k + 1))),
                "draft model -> EAGLE-3 head",
            )
        elif lever.kind == "tune_k":
            if len({(sg.workload, sg.language) for sg in ctx.segs}) < 2:
                why = "one workload: its K is already the best one (the plan picks K)"
            else:
                new, why = dataclasses.replace(cur, k_per_segment=True), "K chosen per workload (one K per segment)"
        elif lever.kind == "tree":
            if not method.tree:
                why = f"{method.label} has no tree verification"
            else:
                shape = ctx.req.tree_shape
                new = dataclasses.replace(cur, tree=True, tree_shape=shape, ks=(shape.depth,) if shape else cur.ks)
                why = (f"tree verification ({shape.verify_tokens_per_seq} tokens verified per sequence)" if shape
                       else "tree verification (the planner's default tree)")
        elif lever.kind == "draft_cost":
            if method.drafting == "ngram":
                why = "n-gram drafting has no draft network"
            else:
                new = dataclasses.replace(
                    cur,
                    draft_cost_factor=cur.draft_cost_factor * lever.draft_cost_factor,
                    alpha_shift=cur.alpha_shift + lever.alpha_gain.mid,
                )
                why = f"draft time x{lever.draft_cost_factor:g}, alpha {lever.alpha_gain.mid:+.2f}"
        elif lever.kind == "switch_to_mtp":
            if "mtp" not in ctx.model.native_methods:
                why = f"{ctx.model.label} ships no MTP module"
            elif cur.method == "mtp":
                why = "already on MTP"
            else:
                mtp = cat.methods["mtp"]
                new, why = (
                    Candidate("mtp", tuple(range(1, mtp.max_k + 1)), tuned=cur.tuned),
                    "switch to the model's MTP module",
                )
        elif lever.kind == "speedup":
            shift = _vsd_alpha_shift(ctx, cur, lever.speedup_factor)
            new, why = (
                dataclasses.replace(cur, alpha_shift=cur.alpha_shift + shift),
                f"acceptance length x{lever.speedup_factor:g} at K={method.default_k} (alpha {shift:+.3f})",
            )
        before = pt
        src = f"{lever.source.source} ({lever.source.date})"
        if new is None:
            steps.append(_skip(lever, why, cur, before, src))
            continue
        after = _one_point(ctx, new)
        if not (after.feasible and (not before.feasible or after.usd_per_mtok < before.usd_per_mtok)):
            msg = (
                (
                    f"skipped: {why} raises CPM here ({fmt_cpm(before.usd_per_mtok)} -> {fmt_cpm(after.usd_per_mtok)}"
                    f"/Mtok at its best batch {after.batch} under the SLO)"
                )
                if after.feasible
                else f"skipped: {why} does not fit or meet the SLO here"
            )
            steps.append(_skip(lever, msg, cur, before, src))
            continue
        n_applied = n_segs if lever.kind == "alpha" else 1
        low = lever.one_time_usd.low * n_applied + lever.engineering_weeks * eng
        high = lever.one_time_usd.high * n_applied + lever.engineering_weeks * eng
        e = economics(
            baseline_usd_per_mtok=before.usd_per_mtok,
            new_usd_per_mtok=min(after.usd_per_mtok, before.usd_per_mtok),
            monthly_output_tokens=ctx.req.monthly_output_tokens,
            one_time_usd=high,
            horizon_months=ctx.costs.horizon_months,
            annual_discount_rate=ctx.costs.annual_discount_rate,
        )
        frac = 1.0 - after.usd_per_mtok / before.usd_per_mtok if before.usd_per_mtok > 0 else 0.0
        be = float(
            breakeven_monthly_spend_usd(
                cpm_reduction_fraction=frac,
                one_time_usd=high,
                horizon_months=ctx.costs.horizon_months,
                annual_discount_rate=ctx.costs.annual_discount_rate,
            )
        )
        steps.append(
            LeverStep(
                name,
                lever.number,
                lever.label,
                True,
                why,
                new.method,
                after.k,
                after.batch,
                new.tree,
                before.alpha_position_1,
                after.alpha_position_1,
                before.usd_per_mtok,
                after.usd_per_mtok,
                low,
                high,
                float(e.monthly_saving_usd),
                float(e.payback_months),
                be,
                lever.note,
                src,
            )
        )
        cur, pt = new, after
    return steps


def _skip(lever, why, cur: Candidate, pt: OperatingPoint, src: str) -> LeverStep:
    return LeverStep(
        lever.name,
        lever.number,
        lever.label,
        False,
        why,
        cur.method,
        pt.k,
        pt.batch,
        cur.tree,
        pt.alpha_position_1,
        pt.alpha_position_1,
        pt.usd_per_mtok,
        pt.usd_per_mtok,
        0.0,
        0.0,
        0.0,
        math.inf,
        math.inf,
        lever.note,
        src,
    )


def operating_point(
    req: PlanRequest,
    catalog,
    method: str,
    *,
    ks: Sequence[int] | None = None,
    alpha_shift: float = 0.0,
    draft_cost_factor: float = 1.0,
    tree: bool = False,
    tuned: bool | None = None,
) -> tuple[OperatingPoint, OperatingPoint]:
    """(the method at its best K among `ks` and best batch, no speculation at its own best batch) for a request,
    with lever adjustments; the building block the Claims page and the levers share with plan()."""
    ctx = _ctx(req, catalog)
    m = catalog.methods[method]
    ok, why = availability(ctx.model, m)
    if not ok:
        raise PlanError("method", method, why)
    cand = Candidate(
        method,
        tuple(ks or range(1, m.max_k + 1)),
        alpha_shift=alpha_shift,
        draft_cost_factor=draft_cost_factor,
        tree=tree,
        tuned=req.tuned if tuned is None else tuned,
    )
    base = Candidate(NO_SPEC, (1,))
    sr = search(ctx, [base, cand], samples_for(("mid",), ctx.eff, ctx.price))
    b, pt = _points(ctx, [base, cand], sr)
    return dataclasses.replace(
        pt, cpm_change_pct=_pct(pt.usd_per_mtok, b.usd_per_mtok) if b.feasible and pt.feasible else None
    ), b


def levers(req: PlanRequest, catalog, start: str, order: Sequence[str] | None = None) -> list[LeverStep]:
    """The waterfall for a request from a chosen starting method (the Levers page)."""
    ctx = _ctx(req, catalog)
    m = catalog.methods[start]
    ok, why = availability(ctx.model, m)
    if not ok:
        raise PlanError("levers_start", start, why)
    return lever_waterfall(ctx, start, order)


def order_by_return(steps: Sequence[LeverStep]) -> list[str]:
    """Lever names sorted by CPM cut per one-time dollar (free levers first, then the best ratio)."""

    def key(st: LeverStep):
        cut = st.usd_per_mtok_before - st.usd_per_mtok_after
        if not st.applied or cut <= 0:
            return (2, 0.0, st.number)
        if st.one_time_usd_high <= 0:
            return (0, -cut, st.number)
        return (1, -cut / st.one_time_usd_high, st.number)

    return [st.lever for st in sorted(steps, key=key)]


# ---------------------------------------------------------------------------------------------------
# Assumptions
# ---------------------------------------------------------------------------------------------------


def assumptions(ctx: _Ctx) -> list[Assumption]:
    hw, model, req, cat = ctx.hw, ctx.model, ctx.req, ctx.catalog
    eff = ctx.eff
    sampler_us_per_token = 1e6 * float(sampler_time_s(hw_params(hw, req.dtype, eff), batch=1.0, drafted_tokens=1.0,
                                                      vocab_size=model.vocab_size))
    price_src = ("entered by the user", "") if req.usd_per_gpu_hour is not None else (hw.price.source, hw.price.date)
    out = [
        Assumption(
            "$/GPU-hour",
            f"${ctx.price:.2f} (list range ${hw.usd_per_gpu_hour_low:.2f}-${hw.usd_per_gpu_hour_high:.2f})",
            *price_src,
        ),
        Assumption(
            f"{hw.label} specs",
            f"{hw.hbm_gb:g} GB, {hw.hbm_bandwidth_gb_s:g} GB/s, {hw.bf16_tflops:g} BF16 TFLOP/s",
            hw.specs.source,
            hw.specs.date,
        ),
        Assumption(
            "step-time parameters",
            f"eta_bw {eff.eta_bw:.3f}, eta_flops {eff.eta_flops:.3f}, per-layer {eff.t_layer_s * 1e6:.1f} us, "
            f"fixed {eff.t_fixed_s * 1e3:.2f} ms/step, speculation {eff.t_spec_s * 1e3:.2f} ms/step + "
            f"{eff.sampler_vocab_passes:.0f} fp32 passes over the {model.vocab_size:,}-token vocabulary per drafted "
            f"token per sequence ({sampler_us_per_token:.1f} us each), "
            f"{eff.t_fixed_draft_s * 1e3:.2f} ms per draft pass",
            eff.source.source,
            eff.source.date,
        ),
        Assumption(
            f"{model.label} architecture",
            f"{model.total_params_b:g}B params ({model.active_params_b:g}B active)",
            model.source.source,
            model.source.date,
        ),
        Assumption("monthly output tokens", f"{req.monthly_output_tokens / 1e9:,.3g}B", req.volume_source, ""),
        Assumption(
            "engineering $/week",
            fmt_usd(ctx.costs.engineering_usd_per_week),
            *_price_src(cat, "engineering_usd_per_week", ctx.costs.engineering_usd_per_week),
        ),
        Assumption(
            "discount rate",
            f"{ctx.costs.annual_discount_rate * 100:g} %/year",
            *_price_src(cat, "annual_discount_rate", ctx.costs.annual_discount_rate),
        ),
        Assumption(
            "horizon",
            f"{ctx.costs.horizon_months} months",
            *_price_src(cat, "horizon_months", ctx.costs.horizon_months),
        ),
        Assumption(
            "draft training GPU price",
            f"${ctx.costs.training_usd_per_gpu_hour_low:.2f}-${ctx.costs.training_usd_per_gpu_hour_high:.2f}/GPU-hour",
            *_price_src(cat, "training_hardware", None),
        ),
        Assumption(
            "prefill",
            "prompt GPU time (compute-bound) charged to output tokens in CPM; TPOT is decode-only",
            "planner model",
            "",
        ),
    ]
    for m in cat.methods.values():
        rng = m.alpha_tuned if req.tuned else m.alpha_default
        out.append(
            Assumption(
                f"{m.label} alpha ({'tuned' if req.tuned else 'default'}, per-token, position 1)",
                f"{rng.low:.2f}-{rng.high:.2f}, decay {m.position_decay} per position; setup "
                f"{ctx.costs.gpu_hours(m):g} GPU-hours + {m.setup_engineering_weeks:g} eng. weeks",
                m.source.source,
                m.source.date,
            )
        )
    for w in sorted({s.workload for s in ctx.segs}):
        wl = cat.workloads[w]
        out.append(
            Assumption(
                f"workload {wl.label}",
                f"alpha shift {wl.alpha_shift:+.3f}, n-gram alpha {wl.ngram_alpha:.2f}",
                wl.source.source,
                wl.source.date,
            )
        )
    return out


def _price_src(cat, key: str, value) -> tuple[str, str]:
    src = cat.price_sources.get(key)
    if src is None:
        return ("", "")
    if value is not None and value != cat.prices.get(key):
        return ("entered by the user", "")
    return (src.source, src.date)
