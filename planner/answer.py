"""The planner's answer: a `Plan` holds the baseline, the reference ("today"), every method at its best K and batch
(`OperatingPoint`, per segment a `SegmentPoint`), the recommendation, the economics, the two fleets the headline
compares (`PlanFleet`: today's and the best method's), the levers and the assumptions it rests on. Records only;
planner.plan fills them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from planner.fleet import Fleet, FleetHour
from planner.request import NO_SPEC, CostAssumptions, PlanRequest, TrafficSegment


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
    usd_per_mtok: float  # CPM at full load: one replica kept at this batch under the SLO (planner.physics.replica)
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
    tp: int = 0  # GPUs per replica
    # (K, acceptance length) at the two ends of the alpha range (the fleet's bills for the saving's band)
    band_k_tau: tuple[tuple[int, float], ...] = ()
    # where the acceptance comes from (planner.acceptance.tiers): customer, public head, family fit or prior
    acceptance_tier: str = ""
    acceptance_source: str = ""
    head: str = ""  # "a public <method> head exists (...)" or "no public <method> head ...: training it costs ..."
    # None: attention as the request runs it; False: plain TP where the request asked for data-parallel attention
    # (today's option without speculation when it is the cheaper one: planner.decision.verdict.choose_reference)
    attention_dp: bool | None = None
    # time to first token at full load at its batch (planner.physics.ttft), output-token share-weighted over
    # segments: the mean, or at the request's ttft_percentile
    ttft_ms: float = math.nan
    # TPOT at the request's tpot_percentile (planner.acceptance.tails; = tpot_ms for a mean SLO): what the SLO holds
    tpot_at_slo_ms: float = math.nan


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
    reference_usd_per_mtok: float | None  # "CPM today" at full load (None: no feasible reference)
    new_usd_per_mtok: float | None  # the best method's CPM at full load
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
    # The money: the fleets' month under `billing` (planner.money.bill). The saving, payback and NPV above come from
    # these bills; reference_/new_usd_per_mtok are CPMs at full load (one replica kept at its best batch), the effective
    # CPMs are bill / output tokens.
    billing: str = ""
    reference_bill_usd_per_month: float | None = None
    new_bill_usd_per_month: float | None = None
    reference_effective_usd_per_mtok: float | None = None
    new_effective_usd_per_mtok: float | None = None
    reference_tpot_ms: float | None = None  # TPOT users see on each fleet over the day
    new_tpot_ms: float | None = None
    reference_peak_gpus: int | None = None
    new_peak_gpus: int | None = None
    # how sure (planner.uncertainty.sensitivity's Monte Carlo over fleet bills; None until computed)
    p_saving_positive: float | None = None
    p_payback_within_horizon: float | None = None
    # NPV averaged over the same draws (each draw's saving over the horizon, discounted, minus its one-time cost): the
    # NPV weighted by how likely each saving is, shown beside the middle one (npv_usd)
    risk_weighted_npv_usd: float | None = None
    # the saving's 5th and 95th percentiles over the same draws (the replica count moves with each draw)
    saving_p05_usd: float | None = None
    saving_p95_usd: float | None = None


@dataclass(frozen=True)
class SloKnee:
    """The saving at the request's TPOT SLO and at 0.8x and 1.2x it (planner.checks.knee): `on_knee` when it changes by
    more than half within that +-20 %, i.e. the answer depends on where exactly the SLO sits."""

    slo_ms: float
    saving_usd: float | None
    low_slo_ms: float
    low_saving_usd: float | None  # at 0.8x the SLO (None: no saving computed there)
    high_slo_ms: float
    high_saving_usd: float | None  # at 1.2x the SLO
    on_knee: bool


@dataclass(frozen=True)
class PlanFleet:
    """One of the two fleets the headline compares ("today" or the best method's): the configuration it runs, at its
    own TP (today's may be another TP when the requested one misses the SLO), hour by hour and over the month. The
    pages, the report and the CLI read these; the economics' bills and peak GPUs are the same numbers."""

    role: str  # "today" or "best"
    method: str  # NO_SPEC for no speculation
    label: str
    tp: int  # GPUs per replica
    k: int  # draft tokens per step (0: no speculation)
    batch: int  # the operating point's batch (vLLM's --max-num-seqs)
    billing: str  # "autoscaled" or "fixed": which of the two bills below is `usd_per_month`
    peak_gpus: int
    gpu_hours_per_month: float  # under `billing`
    usd_per_month: float  # the bill under `billing` (inf when the fleet cannot serve the traffic under the SLO)
    gpu_hours_per_month_autoscaled: float
    gpu_hours_per_month_fixed: float
    usd_per_month_autoscaled: float
    usd_per_month_fixed: float
    usd_per_gpu_hour: float
    effective_usd_per_mtok: float  # bill / output tokens
    tpot_ms: float  # TPOT users see over the day, weighted by output tokens
    feasible: bool
    hours: tuple[FleetHour, ...]
    hours_source: str  # where the hourly load comes from (a trace's hours or a daily shape on the volume)
    # time to first token over the day, weighted by requests (planner.physics.ttft): each hour's mean, or its value at
    # the request's ttft_percentile
    ttft_ms: float = math.nan
    # "colocated" (prefill and decode on the same replicas) or "disaggregated" (planner.money.disagg: `pools` holds the
    # prefill pool then the decode pool; `hours` then sum both pools' replicas and GPUs, TPOT is the decode pool's,
    # TTFT the prefill pool's with the KV transfer; `tp` is the decode pool's)
    serving: str = "colocated"
    pools: tuple[ServingPool, ...] = ()


@dataclass(frozen=True)
class ServingPool:
    """One pool of a disaggregated fleet (planner.money.disagg): prefill-only or decode-only replicas at their own TP,
    hour by hour and over the month."""

    role: str  # "prefill" or "decode"
    tp: int  # GPUs per replica of this pool
    batch: float  # decode: sequences per replica at the busiest hour; prefill: 0 (prompts run one after another)
    peak_gpus: int
    gpu_hours_per_month: float  # under the request's billing
    usd_per_month: float  # this pool's share of the bill (inf when it cannot serve the traffic under its SLO)
    gpu_hours_per_month_autoscaled: float
    gpu_hours_per_month_fixed: float
    usd_per_month_autoscaled: float
    usd_per_month_fixed: float
    feasible: bool
    # prefill: ttft_ms (queue + prefill + KV transfer) and prefill_share (the share of time a replica is busy);
    # decode: batch and tpot_ms (no chunked prefill: TPOT seen = decode TPOT)
    hours: tuple[FleetHour, ...]
    kv_transfer_ms: float = 0.0  # prefill: the KV cache of a mean prompt sent to the decode pool (busiest hour)


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
    # the money (planner.money.bill): the fleet's month before and after the step under the request's billing; the
    # monthly saving and payback above come from these bills; NPV of the step over the horizon
    bill_usd_per_month_before: float = math.nan
    bill_usd_per_month_after: float = math.nan
    npv_usd: float = math.nan
    # P(the step pays back within the horizon) over the plan's seeded Monte Carlo draws
    # (planner.uncertainty.payback_draws); nan where the step did not pass the rule at the middle acceptance
    p_payback_within_horizon: float = math.nan


@dataclass(frozen=True)
class Assumption:
    what: str
    value: str
    source: str
    date: str


@dataclass(frozen=True)
class Bill:
    """planner.money.bill: one configuration's month on its fleet under one billing."""

    method: str
    label: str
    k: int
    billing: str  # "autoscaled" or "fixed"
    usd_per_month: float  # the bill (inf when the configuration cannot serve the traffic under the SLO)
    gpu_hours_per_month: float
    peak_gpus: int
    gpus_per_replica: int
    usd_per_gpu_hour: float
    monthly_output_tokens: float
    effective_usd_per_mtok: float  # bill / output tokens (nan without a volume)
    feasible: bool
    tpot_ms: float = math.nan  # TPOT users see over the day, weighted by output tokens (prefill sharing included)
    ttft_ms: float = math.nan  # mean time to first token over the day, weighted by requests (planner.physics.ttft)


@dataclass(frozen=True)
class SpendVolume:
    """planner.money.spend: the volume a monthly spend buys, and how it was derived."""

    spend_usd_per_month: float
    hardware: str
    tp: int
    dtype: str
    gpus: int | None  # the stated fleet size (None: not stated)
    billing: str  # "autoscaled" or "fixed"
    usd_per_gpu_hour: float
    price_source: str
    method: str  # the configuration the fleet runs (today's)
    label: str
    k: int
    monthly_output_tokens: float
    peak_gpus: int
    bill_usd_per_month: float  # the fleet's bill at that volume: at most the spend
    replica_usd_per_month: float  # one replica all month: the bill's granularity
    binding: str  # what limits the volume: "spend" or "gpus"
    how: str  # one sentence
    price_listed: bool = False  # the price is the GPU's list midpoint (neither entered nor implied by the spend)
    volume_source: str = ""  # where the volume comes from, in words (the request's volume_source)


@dataclass(frozen=True)
class HardwareOption:
    """planner.decision.hardware_choice: one fleet, a GPU type at a TP and weight format running a method at its
    best K (or no speculation)."""

    hardware: str
    hardware_label: str
    tp: int
    dtype: str
    method: str  # NO_SPEC: no speculation
    method_label: str
    k: int
    peak_gpus: int
    usd_per_gpu_hour: float
    usd_per_month: float  # the fleet's monthly bill under `billing`
    billing: str
    # "colocated", or "disaggregated" (planner.money.disagg): then `tp` is the decode pool's, `peak_gpus` both pools'
    serving: str = "colocated"
    prefill_tp: int = 0  # disaggregated: the prefill pool's TP and peak GPUs (0: co-located)
    prefill_gpus: int = 0

    @property
    def _tp(self) -> str:
        if self.serving == "colocated":
            return f"TP {self.tp}"
        return f"disaggregated: prefill {self.prefill_gpus:,} at TP {self.prefill_tp}, decode TP {self.tp}"

    @property
    def short(self) -> str:
        spec = "" if self.method == NO_SPEC else f", {self.method_label} K={self.k}"
        return f"{self.peak_gpus:,} GPU{'' if self.peak_gpus == 1 else 's'}, {self._tp}, {self.dtype}{spec}"

    @property
    def description(self) -> str:
        spec = "no speculation" if self.method == NO_SPEC else f"{self.method_label} K={self.k}"
        return f"{self.peak_gpus:,} x {self.hardware_label} ({self._tp}, {self.dtype} weights, {spec})"


@dataclass(frozen=True)
class HardwareChoice:
    """A GPU type's cheapest fleet without and with speculation, at its price."""

    hardware: str
    label: str
    usd_per_gpu_hour: float
    price_source: str
    no_speculation: HardwareOption | None  # None: no TP and weight format fits memory and meets the SLO
    speculation: HardwareOption | None  # the cheapest method fleet (None: none fits and meets the SLO)
    configs_sized: int  # (TP, weights) configurations whose fleet was sized
    configs_skipped: int  # not sized: weights do not fit, a floor at or above the best found, or no point under it
    note: str  # why there is no fleet, when there is none
    # the cheapest fleet (either kind) at the request's own weight format: the like-for-like one when other formats
    # are compared (None: that format cannot run here; then `own_format_note` says why)
    own_format: HardwareOption | None = None
    own_format_note: str = ""
    # the cheapest disaggregated fleets (module docstring; None: not compared, or none meets both SLOs)
    disaggregated_no_speculation: HardwareOption | None = None
    disaggregated_speculation: HardwareOption | None = None
    serving: str = "colocated"  # the request's: which fleets `cheapest` may pick

    @property
    def options(self) -> tuple[HardwareOption, ...]:
        """The fleets the request's serving allows: co-located unless "disaggregated", disaggregated unless
        "colocated"."""
        co = (self.no_speculation, self.speculation) if self.serving != "disaggregated" else ()
        dis = (self.disaggregated_no_speculation, self.disaggregated_speculation) if self.serving != "colocated" else ()
        return tuple(o for o in (*co, *dis) if o is not None)

    @property
    def cheapest(self) -> HardwareOption | None:
        opts = self.options
        return min(opts, key=option_order) if opts else None


@dataclass(frozen=True)
class HardwareComparison:
    choices: tuple[HardwareChoice, ...]  # one per GPU type, in the catalogue's order
    cheapest: HardwareOption | None  # over every GPU type
    requested: HardwareOption | None  # the request's own GPU type, TP and weights at its cheapest (either way)
    billing: str
    monthly_output_tokens: float
    note: str  # what the comparison leaves out
    dtype: str = "bf16"  # the request's own weight format
    other_formats: bool = False  # True: every weight format compared; False: the request's own only (like for like)
    serving: str = "colocated"  # the request's: "disaggregated" or "best" compare disaggregated fleets too
    # What comparing other weight formats changed, in words: one line per GPU type whose cheapest fleet runs another
    # format than the request's (none when only the request's own format is compared;
    # planner.decision.hardware_choice.format_change)
    format_changes: tuple[str, ...] = ()

    @property
    def disaggregated(self) -> bool:
        """Whether disaggregated fleets are compared (the request's serving is not co-located only)."""
        return self.serving != "colocated"

    def choice(self, hardware: str) -> HardwareChoice:
        for c in self.choices:
            if c.hardware == hardware:
                return c
        raise KeyError(hardware)

    @property
    def cheaper_elsewhere(self) -> HardwareOption | None:
        """The cheapest fleet when it is on another GPU type and cheaper than the request's own configuration."""
        c, r = self.cheapest, self.requested
        if c is None or c.hardware == (r.hardware if r is not None else None):
            return None
        if r is not None and c.usd_per_month >= r.usd_per_month:
            return None
        return c


def option_order(o: HardwareOption) -> tuple[float, bool, bool]:
    """Cheapest first; at the same bill (to the cent), no speculation first: it needs no setup; then co-located (one
    pool is the simpler deployment)."""
    return round(o.usd_per_month, 2), o.method != NO_SPEC, o.serving != "colocated"


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
    fleet: Fleet | None = None  # planner.fleet.Fleet: GPUs by hour with and without speculation, the month's bills
    # planner.money.spend.SpendVolume: how a stated spend became the volume (None: a volume was given)
    spend: SpendVolume | None = None
    hardware_choice: HardwareComparison | None = None  # planner.decision.hardware_choice (None: not asked for)
    bills: tuple[Bill, ...] = ()  # planner.money.bill.Bill per fleet configuration under the request's billing
    # The two fleets the headline compares (None: no feasible one): today's (the reference's, at its own TP) and the
    # best method's. `fleet` above holds every configuration at the requested TP; these are what "today" and "with
    # the best method" mean everywhere.
    reference_fleet: PlanFleet | None = None
    best_fleet: PlanFleet | None = None
    # served "best" or "disaggregated" (planner.money.disagg.choose_serving): the fleets weighed for today and the best
    # method, co-located ("best" only) and disaggregated, feasible or not; the headline's two are among them
    serving_options: tuple[PlanFleet, ...] = ()

    def bill(self, method: str) -> Bill:
        """The month's bill of one configuration's fleet (planner.money.bill.Bill) under the request's billing."""
        for b in self.bills:
            if b.method == method:
                return b
        raise KeyError(method)

    def method(self, name: str) -> OperatingPoint:
        for m in self.methods:
            if m.method == name:
                return m
        raise KeyError(name)
