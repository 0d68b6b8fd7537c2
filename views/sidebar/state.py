"""Shared state for every page: the catalogue, the scenario inputs (sidebar), the traffic profile, the
URL round trip and cached planner calls.

Widget values live in st.session_state under their keys. Keys listed in PARAMS are (1) read from the URL
query string once per session, (2) re-assigned at the top of every run so Streamlit keeps them when a
page that does not draw them is shown, and (3) written back to the URL (non-default values only) at the
end of every run, so a link reopens the same scenario.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from calibration.storage import kept_traffic
from calibration.storage.calibrated_catalog import calibrated_files, with_calibrated
from calibration.storage.store import default_url
from i18n import N_, tr, tr_known
from i18n import numbers as num
from i18n.errors import error_text
from planner import plan as P
from planner.fleet import SHAPES
from planner.money import spend
from planner.physics.engines import ENGINES
from planner.request import (
    BILLINGS,
    DEFAULT_MONTHLY_OUTPUT_TOKENS,
    MAX_SPEND_GPUS,
    MAX_SPEND_USD_PER_MONTH,
    MAX_TEMPERATURE,
    MAX_TPOT_SLO_MS,
    MAX_USD_PER_GPU_HOUR,
    TP_OPTIONS,
)
from planner.search import batch_sweeps as sweeps
from planner.types import KV_CACHE_DTYPES, WEIGHT_DTYPES
from planner.uncertainty import sensitivity as sens
from profiles import load_catalog, sandbox
from profiles.request import request_from_traffic
from profiles.traffic import ParseOptions, TrafficError, TrafficProfile
from profiles.uploads import read_traffic
from views.parts.text import cut_value, plain, plain_in, quoted
from views.sidebar import acceptance_box, hardware_box, language, model_box, slo_box
from views.sidebar import price as price_box
from views.sidebar.client import client_address
from views.sidebar.url_values import url_bool

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "profiles" / "samples"
SAMPLES = {
    "bilingual_saas": ("Bilingual SaaS (English, Mandarin, Cantonese chat)", "bilingual_saas.csv"),
    "code_completion": ("Code-completion product", "code_completion.jsonl"),
    "rag_summarization": ("RAG summarization service", "rag_summarization.parquet"),
}
PROFILE_KEY = "traffic_profile"  # TrafficProfile | None (plain session key, not a widget)
PROFILE_ORIGIN_KEY = "traffic_origin"  # "sample:<name>" or "upload:<file name>"
sandbox.start()  # the readers' fork server warms up now (seconds), once per process, not at the first upload


@st.cache_resource(max_entries=64)
def _catalog_with(calibrated: tuple[tuple[str, float], ...], specs: tuple[str, ...] = (), models: tuple[str, ...] = ()):
    """The catalogue with the calibrated profiles (per profile files and mtimes), the session's GPU specs and its
    parsed configs, each added explicitly (Catalog.with_hardware / with_models)."""
    cat = with_calibrated(load_catalog(), tuple(name for name, _mtime in calibrated))
    return model_box.with_models(hardware_box.with_specs(cat, specs), models)


def catalog():
    return _catalog_with(calibrated_files(), hardware_box.spec_names(), model_box.model_names())


@dataclass(frozen=True)
class Param:
    default: Any
    parse: Callable[[str], Any]
    valid: Callable[[Any], bool] = lambda v: True



def _finite(lo: float, hi: float) -> Callable[[Any], bool]:
    return lambda v: math.isfinite(v) and lo <= v <= hi


# The sidebar's volume with no trace loaded is the CLI's default (planner.request.DEFAULT_MONTHLY_OUTPUT_TOKENS).
DEFAULTS = {"model": "llama-3.3-70b", "hardware": "h100-sxm", "tp": 4, "dtype": "bf16", "slo": 50.0,
            "volume_b": DEFAULT_MONTHLY_OUTPUT_TOKENS / 1e9, "workload": "chat", "language": "english"}
VOLUME_SOURCES = {"profile": N_("the trace's own"), "manual": N_("the number I type"),
                  "spend": N_("what we spend a month")}


def _params() -> dict[str, Param]:
    cat = catalog()
    costs = P.default_costs(cat)
    hw = cat.hardware[DEFAULTS["hardware"]]
    params = {
        "model": Param(DEFAULTS["model"], str, lambda v: v in cat.models or model_box.known(v)),
        "hardware": Param(DEFAULTS["hardware"], str, lambda v: v in cat.hardware or hardware_box.known(v)),
        # a price of 0 makes every CPM zero and every saving a division by zero: at least a cent
        "price": Param(hw.usd_per_gpu_hour_mid, float, _finite(0.01, MAX_USD_PER_GPU_HOUR)),
        price_box.PRICE_SET: Param(False, url_bool, lambda v: isinstance(v, bool)),  # typed: entered (views.sidebar.price)
        "tp": Param(DEFAULTS["tp"], int, lambda v: v in TP_OPTIONS),
        "attn_dp": Param(False, url_bool, lambda v: isinstance(v, bool)),
        "dtype": Param(DEFAULTS["dtype"], str, lambda v: v in WEIGHT_DTYPES),
        "kv": Param("auto", str, lambda v: v == "auto" or v in KV_CACHE_DTYPES),
        "slo": Param(DEFAULTS["slo"], float, _finite(1.0, MAX_TPOT_SLO_MS)),
        "volume_b": Param(DEFAULTS["volume_b"], float, _finite(0.0, 1e7)),
        # "profile": a loaded trace's own volume (the typed number without one); "manual": the typed number always
        "volume_source": Param("profile", str, lambda v: v in VOLUME_SOURCES),
        # "spend": the volume that a monthly spend's fleet serves under the SLO (planner.money.spend); 0 GPUs: not
        # stated
        "spend_usd": Param(100_000.0, float, lambda v: math.isfinite(v) and 0.0 < v <= MAX_SPEND_USD_PER_MONTH),
        "spend_gpus": Param(0, int, lambda v: 0 <= v <= MAX_SPEND_GPUS),
        "current": Param(P.NO_SPEC, str, lambda v: v == P.NO_SPEC or v in cat.methods),
        "workload": Param(DEFAULTS["workload"], str, lambda v: v in cat.workloads),
        "language": Param(DEFAULTS["language"], str, lambda v: v in cat.languages),
        "tuned": Param(False, url_bool, lambda v: isinstance(v, bool)),
        # sampling temperature of the requests (planner.request.check_temperature): 0 greedy .. 2
        "temperature": Param(0.0, float, _finite(0.0, MAX_TEMPERATURE)),
        "eng_week": Param(costs.engineering_usd_per_week, float, _finite(0.0, 1e6)),
        "disc_pct": Param(round(costs.annual_discount_rate * 100, 6), float, _finite(-49.0, 100.0)),
        "horizon": Param(costs.horizon_months, int, lambda v: 1 <= v <= 240),
        "methods_alpha": Param("default", str, lambda v: v in ("default", "tuned")),
        "levers_start": Param("auto", str, lambda v: v in ("auto", "none") or v in cat.methods),
        "levers_order": Param("article", str, lambda v: v in ("article", "return")),
        "sens_method": Param("auto", str, lambda v: v == "auto" or v in cat.methods),
        "sens_batch": Param(1, int, lambda v: 1 <= v <= 4096),
        # the Plan's P(saving > 0) is this Monte Carlo at these defaults (planner.uncertainty.risk.switch_risk)
        "mc_samples": Param(sens.PLAN_MC_SAMPLES, int, lambda v: 50 <= v <= 5000),
        "mc_seed": Param(sens.PLAN_MC_SEED, int, lambda v: 0 <= v <= 2**31 - 1),
        # $/GPU-hour drawn from the list range only when asked (the request's price_range), never over an entered one
        "mc_price": Param(False, url_bool, lambda v: isinstance(v, bool)),
        "mc_hw": Param(True, url_bool, lambda v: isinstance(v, bool)),
        "traffic_cap": Param(True, url_bool, lambda v: isinstance(v, bool)),
        "traffic": Param("", str, lambda v: v == "" or v in SAMPLES),
        "profile": Param("", str, lambda v: v == "" or (len(v) == 64 and all(c in "0123456789abcdef" for c in v))),
        "fleet_shape": Param("flat", str, lambda v: v in SHAPES),
        # how the fleet is paid (planner.money.bill): every page's bills, savings and paybacks use it
        "billing": Param(P.PlanRequest.billing, str, lambda v: v in BILLINGS),
        # the serving engine (planner.physics.engines): its own speculation overheads and deploy command
        "engine": Param("vllm", str, lambda v: v in ENGINES),
        "sens_tornado_unit": Param("bill", str, lambda v: v in ("bill", "cpm")),
        # the share of prompt tokens served from the prefix cache (PlanRequest.prefix_cache_share): off = the trace's
        # own (a Mooncake trace's hash_ids), else 0; on = prefix_pct, which then overrides the trace's
        "prefix_set": Param(False, url_bool, lambda v: isinstance(v, bool)),
        "prefix_pct": Param(0.0, float, _finite(0.0, 100.0)),
    }
    for name, m in cat.methods.items():  # setup GPU-hours per method (draft training)
        params[f"gpuh_{name}"] = Param(float(m.setup_gpu_hours), float, _finite(0.0, 1e6))
    params["hw_compare"] = Param(False, url_bool, lambda v: isinstance(v, bool))  # Plan page: compare GPU types
    params["hw_other_formats"] = Param(False, url_bool, lambda v: isinstance(v, bool))  # ... at other weight formats too
    for name, h in cat.hardware.items():  # ... at these $/GPU-hour (views.parts.hardware)
        params[f"gpu_price_{name}"] = Param(h.usd_per_gpu_hour_mid, float, _finite(0.01, 1000.0))
    params[price_box.GPU_PRICES_SET] = Param("", str, lambda v: all(n in cat.hardware for n in v.split(",") if n))
    params |= {key: Param(*p) for key, p in language.PARAMS.items()}  # lang, wan (views.sidebar.language)
    return params | {key: Param(*p) for key, p in slo_box.PARAMS.items()}  # the TTFT SLO (views.sidebar.slo_box)


def init() -> list[str]:
    """Call first in every run (app.py). Returns the URL problems to show (bad values are ignored)."""
    params = _params()
    ss = st.session_state
    problems: list[str] = []
    if not ss.get("_url_loaded"):
        ss["_url_loaded"] = True
        for key, p in params.items():
            ss[key] = p.default
        for key, raw in st.query_params.to_dict().items():
            if key not in params:
                continue
            p = params[key]
            try:
                val = p.parse(raw)
            except (TypeError, ValueError):
                problems.append(tr("URL parameter {key}={value} is not a valid value; using {default}", key=key,
                                            value=plain(cut_value(raw)), default=repr(p.default)))
                continue
            if not p.valid(val):
                problems.append(tr("URL parameter {key}={value} is out of range or unknown; using {default}", key=key,
                                            value=plain(cut_value(raw)), default=repr(p.default)))
                continue
            ss[key] = val
            price_box.from_link(key)
        if "hardware" in st.query_params and "price" not in st.query_params:
            ss["price"] = cat_hw_price(ss["hardware"])  # a link's hardware brings its own list price
        ss["_url_problems"] = problems
        if ss["traffic"]:
            load_sample(ss["traffic"])
        elif ss.get("profile"):
            load_kept(ss["profile"])
    else:
        for key in params:  # keep widget values alive across pages that do not draw them
            if key in ss:
                ss[key] = ss[key]
    return ss.get("_url_problems", [])


def cat_hw_price(hardware: str) -> float:
    return catalog().hardware[hardware].usd_per_gpu_hour_mid


def write_url() -> None:
    """Call last in every run: the non-default parameters go to the URL query string."""
    params = _params()
    ss = st.session_state
    want = {}
    for key, p in params.items():
        v = ss.get(key, p.default)
        default = cat_hw_price(ss.get("hardware", DEFAULTS["hardware"])) if key == "price" else p.default
        if v != default:
            want[key] = str(v).lower() if isinstance(v, bool) else str(v)
    current = st.query_params.to_dict()
    if current != want:
        st.query_params.from_dict(want)


# ---------------------------------------------------------------------------------------------------
# Sidebar: the shared scenario inputs
# ---------------------------------------------------------------------------------------------------

def sidebar() -> None:
    cat = catalog()
    ss = st.session_state
    with st.sidebar:
        language.language_switch()
        st.subheader(tr("Scenario (all pages)"))
        st.selectbox(tr("Model"), model_box.model_options(cat), key="model", format_func=lambda n: model_box.label(cat, n))
        model_box.model_box(cat)
        acceptance_box.acceptance_box(cat)
        st.selectbox(tr("Hardware"), list(cat.hardware), key="hardware", format_func=lambda n: hardware_box.label(cat, n),
                     on_change=price_box.on_hardware_change, args=(cat,))
        hardware_box.hardware_box()
        hw = cat.hardware[ss["hardware"]]
        st.number_input(tr("Price, $/GPU-hour"), min_value=0.01, max_value=1000.0, step=0.1, key="price", on_change=price_box.typed,
                        help=tr("Default: midpoint of the {label} list range ${usd_per_gpu_hour_low}-"
                             "${usd_per_gpu_hour_high} ({source}, {date}).", label=hw.label, usd_per_gpu_hour_low=f"{hw.usd_per_gpu_hour_low:.2f}", usd_per_gpu_hour_high=f"{hw.usd_per_gpu_hour_high:.2f}", source=hw.price.source, date=hw.price.date))
        c1, c2 = st.columns(2)
        c1.selectbox(tr("GPUs per replica (TP)"), [1, 2, 4, 8], key="tp",
                     help=tr("Tensor parallel: the model's weights are split over this many GPUs, which serve as one "
                          "replica."))
        c2.selectbox(tr("Weights"), list(WEIGHT_DTYPES), key="dtype",
                     help=tr("Weight format. nvfp4 / mxfp4: 4-bit checkpoints (GPT-OSS ships MXFP4 experts)."))
        if cat.models[ss["model"]].experts:
            st.checkbox(tr("Data-parallel attention, expert-parallel MoE"), key="attn_dp",
                        help=tr("MoE models: each of the replica's GPUs runs attention for its own sequences (all "
                             "heads, so an MLA latent is stored once, not on every GPU) and holds 1/N of the "
                             "experts; tokens reach their experts by all-to-all (vLLM --data-parallel-size N "
                             "--enable-expert-parallel). Off: tensor parallel."))
        st.selectbox(tr("Serving engine"), list(ENGINES), key="engine", format_func=lambda v: ENGINES[v],
                     help=tr("Its own per-step and per-draft-pass speculation overheads, fitted to its published rows "
                          "(held at the pooled fit where they do not identify them), its deploy command, and the "
                          "speedup error measured for its class. vLLM: the version the calibration pins (0.32.0)."))
        kv_auto = tr("auto (fp8 with fp8 weights, else bf16)")  # formatted in this run's language, whatever thread asks
        st.selectbox(tr("KV cache"), ["auto", *KV_CACHE_DTYPES], key="kv",
                     format_func=lambda v: kv_auto if v == "auto" else v,
                     help=tr("The KV cache's own format: it sets how many sequences fit and how long attention "
                          "reads take; the deploy command sets --kv-cache-dtype from it."))
        slo_box.slo_inputs()
        prof: TrafficProfile | None = ss.get(PROFILE_KEY)
        has_volume = prof is not None and prof.monthly_output_tokens is not None
        st.radio(tr("Monthly output-token volume"), list(VOLUME_SOURCES), key="volume_source", horizontal=True,
                 format_func={k: tr(v) for k, v in VOLUME_SOURCES.items()}.get,
                 help=tr("A loaded trace's own volume is used unless you pick 'the number I type'; with no trace "
                      "(or one without a volume) the number below is used. 'What we spend a month': the volume "
                      "that a fleet of this GPU type and TP costing that much serves under the SLO (today's method, "
                      "the trace's mix and hourly shape)."))
        if ss["volume_source"] == "spend":
            s1, s2 = st.columns(2)
            s1.number_input(tr("Spend, $/month"), min_value=0.0, max_value=MAX_SPEND_USD_PER_MONTH, step=10_000.0,
                            key="spend_usd", help=tr("What the fleet costs a month today, at the price above."))
            s2.number_input(tr("GPUs (0: not stated)"), min_value=0, max_value=MAX_SPEND_GPUS, step=8, key="spend_gpus",
                            help=tr("The fleet's GPUs at the peak: the volume is also limited to what they serve."))
            st.caption(tr("The plan derives the volume this spend buys (Plan page)."))
        elif ss["volume_source"] == "profile" and has_volume:
            st.caption(tr("Using the trace's own {v} output tokens/month "
                       "({name}); pick 'the number I type' to plan another volume.", v=num.fmt_tokens(prof.monthly_output_tokens, en_spec=",.3g"), name=quoted(prof.name)))
        elif ss["volume_source"] == "profile":
            st.caption(tr("No traffic profile with a monthly volume is loaded (Traffic page): the number below "
                       "is used."))
        st.number_input(tr("Output tokens per month, billions"), min_value=0.0, max_value=1e7, step=1.0,
                        key="volume_b", disabled=(ss["volume_source"] == "profile" and has_volume)
                        or ss["volume_source"] == "spend")
        methods = [P.NO_SPEC] + list(cat.methods)
        no_spec = tr("none (no speculation)")
        st.selectbox(tr("Current method (today)"), methods, key="current",
                     format_func=lambda n: no_spec if n == P.NO_SPEC else cat.methods[n].label)
        disabled = prof is not None
        st.selectbox(tr("Workload"), list(cat.workloads), key="workload", disabled=disabled,
                     format_func=lambda n: cat.workloads[n].label)
        st.selectbox(tr("Traffic language"), list(cat.languages), key="language", disabled=disabled,
                     format_func=lambda n: cat.languages[n].label)
        if disabled:
            st.caption(tr("Workload and language come from the traffic profile {name}.", name=quoted(prof.name)))
        _prefix_cache_inputs(prof)
        st.checkbox(tr("Draft heads tuned on my domain (tuned alpha range)"), key="tuned",
                    help=tr("alpha: the probability that a drafted token is accepted by the target model (per token, "
                         "at draft position 1). Tuned heads use the seed article's tuned range."))
        st.number_input(tr("Sampling temperature"), min_value=0.0, max_value=2.0, step=0.1, key="temperature",
                        help=tr("0 = greedy. Sampled requests accept fewer drafts: library measurements at this "
                             "temperature where there are any, else the assumption the plan states."))
        with st.expander(tr("Cost assumptions")):
            st.number_input(tr("Engineering cost, $ per engineer-week"), min_value=0.0, max_value=1e6, step=500.0,
                            key="eng_week", help=_src(cat, "engineering_usd_per_week"))
            st.number_input(tr("Discount rate, % per year"), min_value=-49.0, max_value=100.0, step=1.0, key="disc_pct",
                            help=_src(cat, "annual_discount_rate"))
            st.number_input(tr("Horizon, months"), min_value=1, max_value=240, step=6, key="horizon",
                            help=_src(cat, "horizon_months"))
            st.caption(tr("Draft-training GPU-hours per method (at the training GPU's list price):"))
            for name, m in cat.methods.items():
                st.number_input(f"{m.label}", min_value=0.0, max_value=1e6, step=8.0, key=f"gpuh_{name}",
                                help=f"{m.setup_note} ({m.source.source}, {m.source.date})")


def _prefix_cache_inputs(prof: TrafficProfile | None) -> None:
    """The prefix-cache share: the trace's own (a Mooncake trace's hash_ids) or 0, unless the user sets one."""
    ss = st.session_state
    reuse = None if prof is None else prof.prefix_reuse
    st.checkbox(tr("Set the prefix-cache share myself"), key="prefix_set",
                help=tr("The share of prompt tokens served from the prefix cache (vLLM's automatic prefix caching): "
                     "they are not prefilled again, so prefill costs less GPU time. Off: a Mooncake trace's own "
                     "share (from its hash_ids), else 0 (every prompt prefilled in full)."))
    st.number_input(tr("Prefix-cache share, % of prompt tokens"), min_value=0.0, max_value=100.0, step=5.0,
                    key="prefix_pct", disabled=not ss["prefix_set"])
    if ss["prefix_set"]:
        st.caption(tr("Using {pct} % (entered)", pct=f"{float(ss['prefix_pct']):g}")
                   + (tr("; it replaces the trace's {pct} %.", pct=f"{reuse.share * 100:.1f}") if reuse is not None else "."))
    elif reuse is not None:
        st.caption(tr("Using the trace's {v} % ({source}; an upper bound: a cache "
                   "that keeps every earlier block).", v=f"{reuse.share * 100:.1f}", source=plain(reuse.source)))
    else:
        st.caption(tr("Using 0 %: no share entered and the traffic gives none."))


def _src(cat, key: str) -> str:
    src = cat.price_sources[key]
    return tr("Default {value} ({source}, {date}).", value=cat.prices[key], source=src.source, date=src.date)


def costs() -> P.CostAssumptions:
    cat = catalog()
    ss = st.session_state
    base = P.default_costs(cat)
    hours = tuple((name, float(ss[f"gpuh_{name}"])) for name, m in cat.methods.items()
                  if float(ss[f"gpuh_{name}"]) != m.setup_gpu_hours)
    return dataclasses.replace(base, engineering_usd_per_week=float(ss["eng_week"]),
                               annual_discount_rate=float(ss["disc_pct"]) / 100.0, horizon_months=int(ss["horizon"]),
                               setup_gpu_hours=hours)


def request(**changes) -> P.PlanRequest:
    """The sidebar and the traffic profile as one planner request (every page asks plan() with this), built by
    the one traffic-to-request adapter the CLI uses (profiles.request.request_from_traffic)."""
    ss = st.session_state
    cat = catalog()
    req = request_from_traffic(
        ss.get(PROFILE_KEY), volume=float(ss["volume_b"]) * 1e9, volume_typed=ss["volume_source"] == "manual",
        volume_label="entered in the sidebar", tpot_slo_ms=float(ss["slo"]), cap_batch=bool(ss.get("traffic_cap", True)),
        model=ss["model"], hardware=ss["hardware"], tp=int(ss["tp"]), dtype=ss["dtype"],
        attention_dp=bool(ss.get("attn_dp", False)) and bool(cat.models[ss["model"]].experts),
        kv_dtype=None if ss["kv"] == "auto" else ss["kv"],
        usd_per_gpu_hour=price_box.entered_price(),  # typed: entered, whatever its value
        workload=ss["workload"], language=ss["language"], current_method=ss["current"], tuned=bool(ss["tuned"]),
        costs=costs(), fleet=True, shape=arrival_shape(), price_range=bool(ss.get("mc_price", False)),
        billing=ss.get("billing", P.PlanRequest.billing), engine=ss.get("engine", P.PlanRequest.engine),
        prefix_cache_share=float(ss["prefix_pct"]) / 100.0 if ss.get("prefix_set") else None,
        prefix_cache_label="entered in the sidebar",
        temperature=float(ss.get("temperature", 0.0)), **acceptance_box.request_fields())
    if ss["volume_source"] == "spend":  # the planner derives the volume from the spend (planner.money.spend)
        gpus = int(ss["spend_gpus"])
        req = dataclasses.replace(req, spend_usd_per_month=float(ss["spend_usd"]), spend_gpus=gpus or None)
    # every page plans the same fleet by hour (the bill is the money number): the daily shape is part of the request
    return dataclasses.replace(req, **{**slo_box.request_fields(), **changes})


def _spend_volume(req: P.PlanRequest) -> spend.SpendVolume:
    return spend.volume_for_spend(req, catalog())


def at_spend_volume(req: P.PlanRequest) -> P.PlanRequest:
    """For the pages whose calls take a volume rather than a spend (levers, tornado, Monte Carlo): `req` at the volume
    its spend buys (planner.money.spend.request_for_spend, the plan's own derivation), the spend fields cleared; `req`
    itself without a spend."""
    if req.spend_usd_per_month is None:
        return req
    return dataclasses.replace(spend.request_for_spend(req, _spend_volume(req)), spend_usd_per_month=None,
                               spend_gpus=None)


def is_profile() -> bool:
    return st.session_state.get(PROFILE_KEY) is not None


def scenario_caption(req: P.PlanRequest) -> str:
    cat = catalog()
    hw = cat.hardware[req.hardware]
    price = price_box.price_of(req, hw)
    head = tr("{model} on {tp} x {gpu} ({dtype}) at {price}/GPU-hour, {slo}", model=cat.models[req.model].label,
              tp=req.tp, gpu=hw.label, dtype=req.dtype, price=num.fmt_usd(price, 2), slo=slo_box.tpot_phrase(req))
    if req.spend_usd_per_month is not None:
        gpus = tr(" on at most {n} GPUs", n=f"{req.spend_gpus:,}") if req.spend_gpus is not None else ""
        return head + slo_box.ttft_phrase(req) + tr(", the volume a spend of {spend}/month{gpus} serves (derived by the "
                                                    "plan).", spend=num.fmt_usd(req.spend_usd_per_month), gpus=gpus)
    return head + slo_box.ttft_phrase(req) + tr(", {volume} output tokens/month ({source}).",
                                                volume=num.fmt_tokens(req.monthly_output_tokens),
                                                source=plain_in(tr_known(req.volume_source), getattr(st.session_state.get(PROFILE_KEY), 'name', None)))


# ---------------------------------------------------------------------------------------------------
# Traffic profile
# ---------------------------------------------------------------------------------------------------

def load_sample(name: str) -> TrafficProfile:
    label, fname = SAMPLES[name]
    prof = _parse_cached(fname, (SAMPLES_DIR / fname).read_bytes())
    st.session_state[PROFILE_KEY] = prof
    st.session_state[PROFILE_ORIGIN_KEY] = f"sample:{name}"
    st.session_state["traffic"] = name
    st.session_state["profile"] = ""
    return prof


# A few parsed profiles per server (uploads, samples, links): st.cache_resource hands every session the same object
# (a TrafficProfile is frozen dataclasses and tuples, and no caller changes it) instead of a copy per call.
PROFILES_CACHED = 4


@st.cache_resource(max_entries=PROFILES_CACHED, show_spinner=False)
def _parse_cached(name: str, data: bytes, options: ParseOptions | None = None) -> TrafficProfile:
    return read_traffic(name, data, catalog(), options)  # in a child process, under the OS limits


class _NotKept(LookupError):
    """The store does not hold a link's profile (raised, not returned, so that st.cache_resource keeps no answer
    and a later upload of the file makes the link work)."""


@st.cache_resource(max_entries=PROFILES_CACHED, show_spinner=False)
def _kept_profile(store_url: str, digest: str) -> tuple[str, TrafficProfile]:
    """(file name, profile) of a kept upload in the store at `store_url`, read and parsed once per server however
    many sessions open its link at once (st.cache_resource computes a key once; the others wait for it); the bytes
    are dropped after the parse, never held by a session."""
    kept = kept_traffic.kept(digest)
    if kept is None:
        raise _NotKept(digest)
    name, data, opts = kept
    return name, _parse_cached(name, data, opts)


def load_upload(name: str, data: bytes, options: ParseOptions | None = None) -> TrafficProfile:
    """Parse an upload (with the Traffic page's reading options); the profile replaces the current one only
    when it fully validates: on error the previous profile stays (TrafficError propagates). A valid upload is
    kept in the store (calibration.storage.kept_traffic: the bytes once per file, under a quota), and the link carries
    the digest of its bytes and options (`profile=`), so a shared link reopens it."""
    prof = _parse_cached(name, data, options)
    digest = _keep_upload(name, data, options)
    st.session_state[PROFILE_KEY] = prof
    st.session_state[PROFILE_ORIGIN_KEY] = f"upload:{name}"
    st.session_state["traffic"] = ""
    st.session_state["profile"] = digest
    return prof


def _keep_upload(name: str, data: bytes, options: ParseOptions | None) -> str:
    """The upload kept in the store for shared links (calibration.storage.kept_traffic); a failure to keep it costs only
    the link, and says so."""
    try:  # charged to this visitor's share of the store (calibration.storage.kept_quota)
        return kept_traffic.keep(name, data, options, visitor=client_address())
    except kept_traffic.NotKept as exc:  # larger than the store's quota
        st.session_state["_profile_keep_error"] = f"Not kept for shared links: {plain(str(exc))}."
    except Exception as exc:  # the profile is in use either way
        st.session_state["_profile_keep_error"] = f"the profile could not be kept for shared links ({plain(str(exc))})"
    return ""


def _kept(digest: str) -> tuple[str, TrafficProfile] | None:
    """_kept_profile for this server's store; None when the store does not hold the link's profile."""
    try:
        return _kept_profile(default_url(), digest)
    except _NotKept:
        return None


def load_kept(digest: str) -> TrafficProfile | None:
    """The profile a link refers to, from the store; None (with a warning) when this server does not hold it."""
    try:
        kept = _kept(digest)
    except Exception as exc:
        st.session_state["_url_problems"].append(f"The traffic profile in this link could not be read ({plain(exc)}).")
        return None
    if kept is None:
        st.session_state["_url_problems"].append(
            f"The traffic profile in this link ({digest[:12]}...) is not in this server's store: the numbers below use "
            "no traffic profile. Upload the file again (Traffic page) to see what the sender saw.")
        st.session_state["profile"] = ""
        return None
    name, prof = kept
    kept_traffic.touch(digest)  # every open counts for the store's least-recently-used eviction (once a minute)
    st.session_state[PROFILE_KEY] = prof
    st.session_state[PROFILE_ORIGIN_KEY] = f"upload:{name}"
    return prof


def clear_profile() -> None:
    st.session_state[PROFILE_KEY] = None
    st.session_state[PROFILE_ORIGIN_KEY] = None
    st.session_state["traffic"] = ""
    st.session_state["profile"] = ""


def arrival_shape() -> str:
    """The daily shape chosen on the Traffic page for traces shorter than a day (profiles.traffic.SHAPES);
    pass it to TrafficProfile.hourly_arrivals()."""
    return st.session_state.get("fleet_shape", "flat")


__all__ = ["TrafficError"]


# ---------------------------------------------------------------------------------------------------
# Cached planner calls (keyed on the hashable request)
# ---------------------------------------------------------------------------------------------------

@st.cache_resource(max_entries=64, show_spinner=False, hash_funcs={P.PlanRequest: repr})
def _plan(req: P.PlanRequest) -> P.Plan:
    """Cached as a resource: a Plan is immutable (frozen dataclasses and tuples), so every rerun shares one object
    instead of unpickling a copy; the request is keyed by its repr (every field, floats exactly)."""
    return P.plan(req, catalog())


def plan(req: P.PlanRequest | None = None, *, levers: bool = False) -> P.Plan:
    req = req or request()
    return _plan(dataclasses.replace(req, levers_start="auto" if levers else None))


@st.cache_data(max_entries=16, show_spinner=False)
def _monte_carlo(req: P.PlanRequest, method: str, k: int, samples: int, seed: int, sample_price: bool,
                 sample_hw: bool) -> sens.MonteCarlo:
    return sens.monte_carlo(req, catalog(), method, k=k, samples=samples, seed=seed, sample_price=sample_price,
                            sample_hardware=sample_hw)


def monte_carlo(req: P.PlanRequest, method: str, k: int) -> sens.MonteCarlo:
    """planner.uncertainty.sensitivity.monte_carlo for `method` at K=`k` with the Sensitivity page's draws (samples,
    seed, what is sampled): the Sensitivity page and the report show this one call's numbers."""
    ss = st.session_state
    return _monte_carlo(req, method, k, int(ss["mc_samples"]), int(ss["mc_seed"]), bool(ss["mc_price"]),
                        bool(ss["mc_hw"]))


@st.cache_data(max_entries=16, show_spinner=False)
def batch_sweep(req: P.PlanRequest, method: str) -> sweeps.BatchSweep:
    return sweeps.batch_sweep(req, catalog(), method)


fmt_usd = num.fmt_usd  # in the reader's language (i18n.numbers)
fmt_cpm = num.fmt_cpm
fmt_months = num.fmt_months
fmt_pct = num.fmt_pct


def page_header(title: str) -> P.PlanRequest | None:
    """Title, the scenario caption and the input check every scenario page starts with; None when the inputs
    are invalid (the message names the field, the value and what is allowed)."""
    st.title(title)
    try:
        req = request()
        P.validate(req, catalog())
        if req.spend_usd_per_month is not None:  # a spend that buys no fleet is an input error too
            _spend_volume(req)
    except (ValueError, KeyError) as exc:
        st.error(tr("Check the inputs: {problem}", problem=plain(error_text(exc))))
        return None
    st.caption(scenario_caption(req))
    return req
