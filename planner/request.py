"""The question the planner answers: `PlanRequest` (model, hardware, traffic, SLO, costs) and the one validator.

Every field is checked here, for `plan()` and for the single-point `evaluate` alike (one rule per field: a price
above $0, a TPOT SLO above 0, lengths of at least one token within the model's context); an error names the field,
the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_args

import numpy as np

from planner.fleet import SHAPES
from planner.physics.engines import DEFAULT_ENGINE, ENGINES
from planner.physics.ttft import MAX_TTFT_SLO_MS
from planner.types import KV_CACHE_DTYPES, WEIGHT_DTYPES, Acceptance, Catalog, Efficiency

NO_SPEC = "none"  # "current method": no speculative decoding today
# Output tokens a month when nobody gave a volume and no traffic profile brings its own: the CLI, the app's sidebar
# and PlanRequest all start from this one number.
DEFAULT_MONTHLY_OUTPUT_TOKENS = 1e10
MAX_BATCH = 4096  # sequences per replica the search considers (vLLM's max_num_seqs is far below this)
MAX_K = 32  # draft tokens per step a single-point evaluation accepts
# upper bounds of the request's numbers, declared once: validate() checks them, the app's URL schema reads them
MAX_USD_PER_GPU_HOUR = 1000.0
MAX_TPOT_SLO_MS = 60_000.0
MAX_SPEND_USD_PER_MONTH = 1e10
MAX_SPEND_GPUS = 1_000_000


class PlanError(ValueError):
    """A request value outside what is allowed; the message names the field, the value and what is allowed."""

    def __init__(self, field_name: str, value: Any, allowed: str):
        self.field = field_name
        self.value = value
        self.allowed = allowed  # the reader's language is the view's job (i18n.errors.error_text)
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


def default_costs(catalog: Catalog) -> CostAssumptions:
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


# The choices of the request, declared once as types: validate() checks them, the CLI's flags and the app's sidebar
# and URL schema read the tuples below (typing.get_args of the Literal).
Billing = Literal["autoscaled", "fixed"]
Serving = Literal["colocated", "disaggregated", "best"]
TensorParallel = Literal[1, 2, 4, 8]
WeightDtype = Literal["bf16", "fp8", "nvfp4", "mxfp4"]  # planner.types.WEIGHT_DTYPES
KvDtype = Literal["bf16", "fp8"]  # planner.types.KV_CACHE_DTYPES
Engine = Literal["vllm", "sglang", "trtllm"]  # planner.physics.engines.ENGINES
BILLINGS: tuple[str, ...] = get_args(Billing)
SERVINGS: tuple[str, ...] = get_args(Serving)
TP_OPTIONS: tuple[int, ...] = get_args(TensorParallel)
assert get_args(WeightDtype) == WEIGHT_DTYPES and get_args(KvDtype) == KV_CACHE_DTYPES
assert get_args(Engine) == tuple(ENGINES)
# The statistic a latency SLO is stated at (PlanRequest.tpot_percentile, ttft_percentile), declared once: the CLI's
# --tpot-percentile / --ttft-percentile, the sidebar's SLO box and the URL read them. "mean": the mean over requests
# (the default, as every plan before it); "p90": 90 % of requests see at most the SLO. The quantile of each:
SloStatistic = Literal["mean", "p50", "p90", "p99"]
SLO_PERCENTILES: dict[str, float | None] = dict(zip(get_args(SloStatistic), (None, 0.5, 0.9, 0.99), strict=True))


@dataclass(frozen=True)
class Deployment:
    """What runs, and how it is served: model M on hardware H at a TP, weights and KV formats, engine, method today."""

    model: str
    hardware: str
    tp: TensorParallel = 1
    # True: the tp GPUs run attention data parallel and the routed experts expert parallel (MoE models; vLLM
    # --data-parallel-size tp --enable-expert-parallel; planner.physics.roofline.step_time_terms); False: tensor
    # parallel
    attention_dp: bool = False
    dtype: WeightDtype = "bf16"  # weights (planner.types.WEIGHT_DTYPES)
    kv_dtype: KvDtype | None = None  # KV cache; None: fp8 with fp8 weights, else bf16
    current_method: str = NO_SPEC
    # the token tree deployed (or to deploy): tree-capable methods are verified with it
    # (planner.acceptance.trees.TreeShape); None: chains (lever 4 then prices the planner's default tree)
    tree_shape: Any = None
    # Prefill and decode on the same replicas ("colocated", today's fleet), on separate pools ("disaggregated": a
    # prefill pool sized for the TTFT SLO, a decode pool for the TPOT SLO, planner.money.disagg), or "best": the
    # cheaper of the two that meets both SLOs, with and without speculation
    serving: Serving = "colocated"
    # the serving engine (planner.physics.engines.ENGINES): its own speculation overheads, fitted to its published rows,
    # and its deploy command; engine_version None: the version the calibration pins (vLLM) or not stated
    engine: Engine = DEFAULT_ENGINE
    engine_version: str | None = None


@dataclass(frozen=True)
class ServiceLevel:
    """The latency users are promised."""

    tpot_slo_ms: float = 50.0
    # Mean time to first token a user may wait, ms (planner.physics.ttft): None = not stated (TTFT is reported, not a
    # constraint); stated, the search and the fleet honour it beside the TPOT SLO.
    ttft_slo_ms: float | None = None
    # The statistic each SLO is stated at (SLO_PERCENTILES): "mean" (default) or "p50", "p90", "p99" over requests.
    # TPOT's spread comes from the tokens each verifier step emits (planner.acceptance.tails; none without
    # speculation), TTFT's from the wait for the prefill lane (planner.physics.ttft.wait_quantile). A percentile
    # above the median is stricter than the mean: fewer sequences per replica meet it.
    tpot_percentile: SloStatistic = "mean"
    ttft_percentile: SloStatistic = "mean"


@dataclass(frozen=True)
class Traffic:
    """The traffic: its volume, mix, day and what the requests are like (acceptance, prefix cache, temperature)."""

    monthly_output_tokens: float = DEFAULT_MONTHLY_OUTPUT_TOKENS
    volume_source: str = "entered"  # where the monthly volume comes from (shown beside it)
    segments: tuple[TrafficSegment, ...] = ()  # empty: one segment of `workload` / `language`
    workload: str = "chat"
    language: str = "english"
    tuned: bool = False  # the methods' tuned alpha ranges (draft heads fine-tuned on the domain)
    batch_cap: float | None = None  # most concurrent sequences the traffic offers (Little's law)
    # A measured acceptance for one method (measured at K = acceptance_k); other methods keep the profiles'.
    acceptance: Acceptance | None = None
    acceptance_method: str | None = None
    acceptance_k: int | None = None
    # where that measurement comes from (an uploaded file's description); empty: entered by the user
    acceptance_source: str = ""
    # Fleet by hour (planner.fleet), always sized: None = the default shape (planner.money.sizing.DEFAULT_SHAPE); else
    # the day's shape. `hours` from a traffic trace wins over
    # `daily_shape` (planner.fleet.SHAPES: 'flat', 'business_hours', 'consumer_evening') on the monthly volume.
    daily_shape: str | None = None
    hours: tuple = ()  # planner.fleet.HourLoad per hour of the day (a trace's own shape)
    hours_source: str = ""
    # The share of prompt tokens served from the prefix cache, 0..1 (planner.physics.serving.prefill_time_s): those
    # tokens are not recomputed. None: 0, every prompt prefilled in full. prefix_cache_source: where the share comes
    # from (entered, a trace's block hashes), shown in the assumptions.
    prefix_cache_share: float | None = None
    prefix_cache_source: str = ""
    # sampling temperature of the requests (0: greedy, vLLM's temperature=0); acceptance falls as it rises
    # (planner.acceptance.tiers)
    temperature: float = 0.0


@dataclass(frozen=True)
class Money:
    """The price, the billing, the one-time costs, and how sure a recommendation must be."""

    usd_per_gpu_hour: float | None = None  # None: the hardware's list-price midpoint
    # "autoscaled" pays each hour's replicas, "fixed" a fleet sized for the peak (planner.money.bill)
    billing: Billing = "autoscaled"
    costs: CostAssumptions | None = None  # None: profiles/data/prices.yaml
    # the probability of a positive saving (Monte Carlo) a recommendation to deploy requires
    confidence: float = 0.8
    # True: the Monte Carlo and the tornado draw $/GPU-hour from the hardware's list range (never over an entered price)
    price_range: bool = False
    # Spend as an input (planner.money.spend): a monthly spend on the request's GPU type and TP replaces the volume by
    # the volume that fleet serves under the SLO; spend_gpus: the fleet's GPUs at the peak (None: not stated)
    spend_usd_per_month: float | None = None
    spend_gpus: int | None = None


@dataclass(frozen=True)
class Options:
    """What to search and show beyond the one deployment: the methods, the levers, other GPU types."""

    methods: tuple[str, ...] | None = None  # None: every method in the catalogue
    efficiency: Efficiency | None = None  # None: the hardware's (or a calibrated profile's)
    # the levers' starting method: "auto" = today's method (EAGLE-3 when today has no draft); None = no levers
    levers_start: str | None = None
    # the cheapest fleet over the catalogue's GPU types and TPs (planner.decision.hardware_choice), at these
    # prices ((hardware, $/GPU-hour) pairs; the others at their list midpoint, the request's own at its price);
    # compare_other_formats False: every GPU type runs the request's weight format (like for like); True: every
    # weight format too (the comparison then says what the format changed)
    compare_hardware: bool = False
    hardware_prices: tuple[tuple[str, float], ...] = ()
    compare_other_formats: bool = False


PARTS: dict[str, type] = {"deployment": Deployment, "slo": ServiceLevel, "traffic": Traffic, "money": Money,
                          "options": Options}
# each flat field name -> the part that holds it
PART_OF: dict[str, str] = {f.name: part for part, cls in PARTS.items() for f in dataclasses.fields(cls)}
T = TypeVar("T")


class Flat(Generic[T]):
    """A part's field read by its flat name: `req.tp` is `req.deployment.tp` (typed by T); on the class,
    `PlanRequest.tp` is the field's default, as a dataclass field's would be."""

    def __init__(self, part: str):
        self.part = part

    def __set_name__(self, owner: type, name: str) -> None:
        assert PART_OF[name] == self.part, (name, self.part)
        self.name = name

    def __get__(self, obj: PlanRequest | None, owner: type | None = None) -> T:
        if obj is None:
            default = {f.name: f.default for f in dataclasses.fields(PARTS[self.part])}[self.name]
            if default is dataclasses.MISSING:
                raise AttributeError(f"PlanRequest.{self.name} has no default")
            return default
        return getattr(getattr(obj, self.part), self.name)


@dataclass(frozen=True, init=False)
class PlanRequest:
    """The question: model M on hardware H (TP, weights dtype, price) for traffic T under a TPOT SLO, as five typed
    parts (deployment, slo, traffic, money, options).

    Built from the parts, from flat field names (`PlanRequest(model=..., hardware=..., tp=4)`: each name goes to its
    part, PART_OF) or both (flat names override the given parts); `dataclasses.replace(req, tp=8)` works the same way.
    Every part's field reads by its flat name too (`req.tp`)."""

    deployment: Deployment
    slo: ServiceLevel
    traffic: Traffic
    money: Money
    options: Options

    def __init__(self, model: str | None = None, hardware: str | None = None, *, deployment: Deployment | None = None,
                 slo: ServiceLevel | None = None, traffic: Traffic | None = None, money: Money | None = None,
                 options: Options | None = None, **flat: Any):
        if model is not None:
            flat["model"] = model
        if hardware is not None:
            flat["hardware"] = hardware
        unknown = sorted(set(flat) - set(PART_OF))
        if unknown:
            raise TypeError(f"PlanRequest got unknown field(s) {', '.join(unknown)}; the fields are "
                            + ", ".join(PART_OF))
        given = {"deployment": deployment, "slo": slo, "traffic": traffic, "money": money, "options": options}
        for part, cls in PARTS.items():
            own = {k: v for k, v in flat.items() if PART_OF[k] == part}
            value = given[part]
            if value is None:
                if part == "deployment" and not {"model", "hardware"} <= set(own):
                    raise TypeError("PlanRequest needs model and hardware (or a deployment)")
                value = cls(**own)
            elif own:
                value = dataclasses.replace(value, **own)
            object.__setattr__(self, part, value)

    def flat(self) -> dict[str, Any]:
        """Every part's fields by flat name (values as they are: segments stay records): PlanRequest(**req.flat())
        == req."""
        return {f.name: getattr(getattr(self, part), f.name)
                for part, cls in PARTS.items() for f in dataclasses.fields(cls)}

    # flat reads of the parts' fields
    model = Flat[str]("deployment")
    hardware = Flat[str]("deployment")
    tp = Flat[int]("deployment")
    attention_dp = Flat[bool]("deployment")
    dtype = Flat[str]("deployment")
    kv_dtype = Flat["str | None"]("deployment")
    current_method = Flat[str]("deployment")
    tree_shape = Flat[Any]("deployment")
    serving = Flat[str]("deployment")
    engine = Flat[str]("deployment")
    engine_version = Flat["str | None"]("deployment")
    tpot_slo_ms = Flat[float]("slo")
    ttft_slo_ms = Flat["float | None"]("slo")
    tpot_percentile = Flat[str]("slo")
    ttft_percentile = Flat[str]("slo")
    monthly_output_tokens = Flat[float]("traffic")
    volume_source = Flat[str]("traffic")
    segments = Flat["tuple[TrafficSegment, ...]"]("traffic")
    workload = Flat[str]("traffic")
    language = Flat[str]("traffic")
    tuned = Flat[bool]("traffic")
    batch_cap = Flat["float | None"]("traffic")
    acceptance = Flat["Acceptance | None"]("traffic")
    acceptance_method = Flat["str | None"]("traffic")
    acceptance_k = Flat["int | None"]("traffic")
    acceptance_source = Flat[str]("traffic")
    daily_shape = Flat["str | None"]("traffic")
    hours = Flat[tuple]("traffic")
    hours_source = Flat[str]("traffic")
    prefix_cache_share = Flat["float | None"]("traffic")
    prefix_cache_source = Flat[str]("traffic")
    temperature = Flat[float]("traffic")
    usd_per_gpu_hour = Flat["float | None"]("money")
    billing = Flat[str]("money")
    costs = Flat["CostAssumptions | None"]("money")
    confidence = Flat[float]("money")
    price_range = Flat[bool]("money")
    spend_usd_per_month = Flat["float | None"]("money")
    spend_gpus = Flat["int | None"]("money")
    methods = Flat["tuple[str, ...] | None"]("options")
    efficiency = Flat["Efficiency | None"]("options")
    levers_start = Flat["str | None"]("options")
    compare_hardware = Flat[bool]("options")
    hardware_prices = Flat["tuple[tuple[str, float], ...]"]("options")
    compare_other_formats = Flat[bool]("options")


assert {n for n, v in vars(PlanRequest).items() if isinstance(v, Flat)} == set(PART_OF), "a part's field lacks a read"


# ---------------------------------------------------------------------------------------------------
# Validation: one rule per field, shared by plan() (PlanRequest) and evaluate (planner.types.Scenario)
# ---------------------------------------------------------------------------------------------------


def is_number(x: Any) -> bool:
    """A finite number (or something float() reads as one)."""
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def check_deployment(q, model, hw) -> None:
    """The fields a PlanRequest and a Scenario share: TP, data-parallel attention, weight and KV-cache dtypes,
    price, TPOT SLO and monthly volume (`q` is either)."""
    if not isinstance(q.tp, (int, np.integer)) or q.tp not in TP_OPTIONS or q.tp > hw.max_tp:
        allowed = ", ".join(str(t) for t in TP_OPTIONS if t <= hw.max_tp)
        raise PlanError("tp", q.tp, f"one of {allowed} GPUs per replica on {hw.label}")
    if not isinstance(q.attention_dp, (bool, np.bool_)):
        raise PlanError("attention_dp", q.attention_dp, "true or false")
    if q.attention_dp and not model.experts:
        raise PlanError("attention_dp", q.attention_dp,
                        f"false for {model.label}: data-parallel attention with expert-parallel MoE needs a MoE "
                        f"model, and {model.label} is dense (tensor parallel splits it)")
    if q.dtype not in WEIGHT_DTYPES:
        raise PlanError("dtype", q.dtype, ", ".join(WEIGHT_DTYPES))
    if q.kv_dtype is not None and q.kv_dtype not in KV_CACHE_DTYPES:
        raise PlanError("kv_dtype", q.kv_dtype, ", ".join(KV_CACHE_DTYPES) + " (or none: follows the weights)")
    if q.usd_per_gpu_hour is not None and not (is_number(q.usd_per_gpu_hour)
                                               and 0 < q.usd_per_gpu_hour <= MAX_USD_PER_GPU_HOUR):
        raise PlanError("usd_per_gpu_hour", q.usd_per_gpu_hour,
                        f"a price above $0 and at most ${MAX_USD_PER_GPU_HOUR:g} per GPU-hour")
    if not (is_number(q.tpot_slo_ms) and 0 < q.tpot_slo_ms <= MAX_TPOT_SLO_MS):
        raise PlanError("tpot_slo_ms", q.tpot_slo_ms,
                        f"a latency above 0 and at most {MAX_TPOT_SLO_MS:g} ms per output token")
    v = q.monthly_output_tokens
    if not (is_number(v) and (v == 0 or 1 <= v <= 1e19)):  # 5e-324 tokens divided bills by an underflowed 0
        raise PlanError("monthly_output_tokens", v, "a volume of 0, or from 1 to 1e19 tokens a month")


MAX_TEMPERATURE = 2.0  # vLLM and the OpenAI API accept temperatures from 0 to 2


def check_temperature(value: Any) -> None:
    """A sampling temperature: a number from 0 (greedy) to 2."""
    if isinstance(value, bool) or not (is_number(value) and 0 <= float(value) <= MAX_TEMPERATURE):
        raise PlanError("temperature", value, f"a sampling temperature from 0 (greedy) to {MAX_TEMPERATURE:g}")


def check_ttft_slo(value: Any) -> None:
    """None (no TTFT SLO) or a mean time to first token above 0 and at most MAX_TTFT_SLO_MS."""
    if value is not None and (isinstance(value, (bool, np.bool_)) or not (
            is_number(value) and 0 < float(value) <= MAX_TTFT_SLO_MS)):
        raise PlanError("ttft_slo_ms", value, f"a time to first token above 0 and at most {MAX_TTFT_SLO_MS} ms "
                        "(one hour), or none (no TTFT SLO)")


def check_percentile(name: str, value: Any) -> None:
    """A latency SLO's statistic: one of SLO_PERCENTILES."""
    if not isinstance(value, str) or value not in SLO_PERCENTILES:
        raise PlanError(name, value, "one of " + ", ".join(SLO_PERCENTILES)
                        + " (the mean over requests, or the share of requests that must meet the SLO)")


def slo_quantile(name: str) -> float | None:
    """The quantile of an SLO statistic (None: the mean)."""
    return SLO_PERCENTILES[name]


def check_tpot_spread(spread: Any) -> None:
    """None, or a measured acceptance's per-request TPOT over the mean at percentiles 0..100: 101 finite numbers
    above 0, never falling (planner.acceptance.tails.SPREAD_PERCENTILES)."""
    if spread is None:
        return
    v = np.asarray(spread, float) if all(is_number(x) for x in spread) else None
    if v is None or v.ndim != 1 or v.size != 101 or np.any(v <= 0) or np.any(np.diff(v) < -1e-12):
        raise PlanError("acceptance.tpot_spread", tuple(spread)[:5],
                        "101 numbers above 0 that never fall: a request's TPOT over the mean at percentiles 0..100")


def check_tokens(name: str, value: Any, model) -> None:
    """A mean length in tokens: at least one, at most the model's context."""
    if not (is_number(value) and 1 <= value <= model.max_context_tokens):
        raise PlanError(name, value, f"1 to {model.max_context_tokens:,} tokens ({model.label}'s context)")


def validate_scenario(s, model, hw, method) -> None:
    """A single-point question (planner.types.Scenario): the shared rules, then K, batch and the tree."""
    if isinstance(s.k, bool) or not isinstance(s.k, (int, np.integer)) or not 1 <= s.k <= MAX_K:
        raise PlanError("k", s.k, f"an integer from 1 to {MAX_K}")
    if s.batch is not None and not (is_number(s.batch) and 1 <= s.batch <= MAX_BATCH):
        raise PlanError("batch", s.batch, f"an integer from 1 to {MAX_BATCH}")
    check_deployment(s, model, hw)
    check_temperature(getattr(s, "temperature", 0.0))
    if s.draft_cost_ratio is not None and not (is_number(s.draft_cost_ratio) and 0 <= s.draft_cost_ratio <= 10):
        raise PlanError("draft_cost_ratio", s.draft_cost_ratio, "a ratio in [0, 10]")
    for name in ("context_tokens", "prompt_tokens", "output_tokens"):
        if getattr(s, name) is not None:
            check_tokens(name, getattr(s, name), model)
    if (s.tree or s.tree_shape is not None) and not method.tree:
        raise PlanError("tree", True, f"false: {method.label} has no tree verification")
    if s.tree_shape is not None and s.k != s.tree_shape.depth:
        raise PlanError("k", s.k, f"the tree's depth {s.tree_shape.depth} (a stated tree fixes K)")


def check_spend(req: PlanRequest, catalog: Catalog) -> None:
    """The spend and hardware-comparison fields (planner.money.spend, planner.decision.hardware_choice)."""
    s = req.spend_usd_per_month
    if s is not None and not (is_number(s) and 0 < s <= MAX_SPEND_USD_PER_MONTH):
        raise PlanError("spend_usd_per_month", s,
                        f"a monthly spend above $0 and at most ${MAX_SPEND_USD_PER_MONTH:,.0f}")
    g = req.spend_gpus
    if g is not None:
        if s is None:
            raise PlanError("spend_gpus", g, "none without a spend (spend_usd_per_month)")
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not req.tp <= g <= MAX_SPEND_GPUS:
            raise PlanError("spend_gpus", g,
                            f"a whole number of GPUs from {req.tp} (one replica) to {MAX_SPEND_GPUS:,}")
    if not isinstance(req.compare_other_formats, (bool, np.bool_)):
        raise PlanError("compare_other_formats", req.compare_other_formats, "true or false")
    for name, price in req.hardware_prices:
        if name not in catalog.hardware:
            catalog.hardware[name]  # raises UnknownNameError listing the valid names
        if not (is_number(price) and 0 < price <= MAX_USD_PER_GPU_HOUR):
            raise PlanError(f"hardware_prices[{name}]", price,
                            f"a price above $0 and at most ${MAX_USD_PER_GPU_HOUR:g} per GPU-hour")


def check_engine(req: PlanRequest) -> None:
    """The serving engine: one of planner.physics.engines.ENGINES, and a version as a short string or none."""
    if not isinstance(req.engine, str) or req.engine not in ENGINES:
        raise PlanError("engine", req.engine, "one of " + ", ".join(f"{k} ({v})" for k, v in ENGINES.items()))
    v = req.engine_version
    if v is not None and not (isinstance(v, str) and 0 < len(v.strip()) <= 40):
        raise PlanError("engine_version", v, "a version string of 1 to 40 characters (e.g. 0.32.0), or none")


def check_prefix_cache_share(share: Any) -> None:
    """None (no prefix cache hits assumed) or a share of prompt tokens from 0 to 1."""
    if share is not None and (isinstance(share, (bool, np.bool_)) or not (is_number(share) and 0 <= share <= 1)):
        raise PlanError("prefix_cache_share", share,
                        "a share of prompt tokens served from the prefix cache, from 0 to 1 (e.g. 0.5), or none")


def validate(req: PlanRequest, catalog: Catalog) -> tuple[TrafficSegment, ...]:
    """Check every field; return the traffic segments (the request's, or one from workload / language)."""
    models, hardware = catalog.models, catalog.hardware
    if req.model not in models:
        models[req.model]  # raises UnknownNameError listing the valid names and the closest match
    if req.hardware not in hardware:
        hardware[req.hardware]
    hw = hardware[req.hardware]
    model = models[req.model]
    check_deployment(req, model, hw)
    check_ttft_slo(req.ttft_slo_ms)
    check_percentile("tpot_percentile", req.tpot_percentile)
    check_percentile("ttft_percentile", req.ttft_percentile)
    check_temperature(req.temperature)
    if req.batch_cap is not None and not (is_number(req.batch_cap) and req.batch_cap > 0):
        raise PlanError("batch_cap", req.batch_cap, "a positive number of concurrent sequences, or none")
    if req.billing not in BILLINGS:
        raise PlanError("billing", req.billing, " or ".join(BILLINGS))
    if req.serving not in SERVINGS:
        raise PlanError("serving", req.serving, " or ".join(SERVINGS))
    if not (is_number(req.confidence) and 0.5 <= req.confidence < 1):
        raise PlanError("confidence", req.confidence, "a probability from 0.5 to below 1 (e.g. 0.8)")
    if not isinstance(req.price_range, (bool, np.bool_)):
        raise PlanError("price_range", req.price_range, "true or false")
    if req.daily_shape is not None and req.daily_shape not in SHAPES:
        raise PlanError("daily_shape", req.daily_shape, f"one of {', '.join(SHAPES)} (or hours from a traffic trace)")
    for i, h in enumerate(req.hours):
        if not (is_number(h.requests_per_s) and h.requests_per_s >= 0):
            raise PlanError(f"hours[{i}].requests_per_s", h.requests_per_s, "an arrival rate >= 0 requests/s")
        for name in ("prompt_tokens", "output_tokens"):
            if not (is_number(getattr(h, name)) and getattr(h, name) >= 1):
                raise PlanError(f"hours[{i}].{name}", getattr(h, name), "a mean of at least 1 token")
    check_spend(req, catalog)
    check_engine(req)
    check_prefix_cache_share(req.prefix_cache_share)
    if req.current_method != NO_SPEC and req.current_method not in catalog.methods:
        catalog.methods[req.current_method]
    for name in req.methods or ():
        catalog.methods[name]
    if req.acceptance_k is not None and (isinstance(req.acceptance_k, bool) or not isinstance(
            req.acceptance_k, (int, np.integer)) or not 1 <= req.acceptance_k <= MAX_K):
        raise PlanError("acceptance_k", req.acceptance_k, f"the K the acceptance was measured at: an integer from 1 "
                        f"to {MAX_K}")
    if req.acceptance is not None:
        if req.acceptance_method is None:
            raise PlanError("acceptance_method", None, "the method the measured acceptance belongs to")
        catalog.methods[req.acceptance_method]
        check_tpot_spread(req.acceptance.tpot_spread)
    if req.costs is not None:
        c = req.costs
        for name in ("engineering_usd_per_week", "training_usd_per_gpu_hour_low", "training_usd_per_gpu_hour_high"):
            v = getattr(c, name)
            if not (is_number(v) and 0 <= v <= 1e7):
                raise PlanError(f"costs.{name}", v, "a dollar amount from 0 to 10,000,000")
        if not (is_number(c.annual_discount_rate) and -0.5 < c.annual_discount_rate <= 1.0):
            raise PlanError("costs.annual_discount_rate", c.annual_discount_rate, "a yearly rate in (-0.5, 1.0]")
        if not (isinstance(c.horizon_months, (int, np.integer)) and 1 <= c.horizon_months <= 240):
            raise PlanError("costs.horizon_months", c.horizon_months, "a whole number of months from 1 to 240")
        for name, hours in c.setup_gpu_hours:
            catalog.methods[name]
            if not (is_number(hours) and 0 <= hours <= 1e6):
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
        if not (is_number(s.share) and 0 < s.share <= 1):
            raise PlanError(f"segments[{i}].share", s.share, "a share of output tokens in (0, 1]")
        for name in ("prompt_tokens", "output_tokens"):
            check_tokens(f"segments[{i}].{name}", getattr(s, name), model)
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

