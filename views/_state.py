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

from profiles import load_catalog
from profiles.traffic import TrafficError, TrafficProfile, parse_traffic
from views import _model as mdl

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "profiles" / "samples"
SAMPLES = {
    "bilingual_saas": ("Bilingual SaaS (English, Mandarin, Cantonese chat)", "bilingual_saas.csv"),
    "code_completion": ("Code-completion product", "code_completion.jsonl"),
    "rag_summarization": ("RAG summarization service", "rag_summarization.parquet"),
}
PROFILE_KEY = "traffic_profile"  # TrafficProfile | None (plain session key, not a widget)
PROFILE_ORIGIN_KEY = "traffic_origin"  # "sample:<name>" or "upload:<file name>"


CALIBRATED_PREFIX = "calibrated-"


@st.cache_resource
def _catalog_with(calibrated: tuple[tuple[str, float], ...]):
    """Shipped profiles plus each calibrated profile as a hardware entry 'calibrated-<name>' (cached per set
    of profile files and their modification times)."""
    from calibration.profiles_store import load_profile

    cat = load_catalog()
    extra = {}
    for name, _mtime in calibrated:
        try:
            prof = load_profile(name)
        except (OSError, ValueError, TypeError):
            continue  # a damaged file does not take the app down; the Calibrate page lists it
        hw = prof.hardware_spec()
        extra[CALIBRATED_PREFIX + name] = dataclasses.replace(
            hw, name=CALIBRATED_PREFIX + name,
            label=f"Calibrated: {name} ({hw.label}; fitted {prof.created}, held-out MAPE "
                  f"{prof.holdout_mape_pct:.1f} %)")
    return cat.with_hardware(extra) if extra else cat


def catalog():
    from calibration.profiles_store import calibrated_dir

    d = calibrated_dir()
    files = tuple(sorted((p.stem, p.stat().st_mtime) for p in d.glob("*.yaml"))) if d.is_dir() else ()
    return _catalog_with(files)


@dataclass(frozen=True)
class Param:
    default: Any
    parse: Callable[[str], Any]
    valid: Callable[[Any], bool] = lambda v: True


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def _finite(lo: float, hi: float) -> Callable[[Any], bool]:
    return lambda v: math.isfinite(v) and lo <= v <= hi


def _params() -> dict[str, Param]:
    cat = catalog()
    d = mdl.PlanInputs()
    return {
        "model": Param(d.model, str, lambda v: v in cat.models),
        "hardware": Param(d.hardware, str, lambda v: v in cat.hardware),
        "price": Param(cat.hardware[d.hardware].usd_per_gpu_hour_mid, float, _finite(0.0, 1000.0)),
        "tp": Param(d.tp, int, lambda v: v in (1, 2, 4, 8)),
        "dtype": Param(d.dtype, str, lambda v: v in ("bf16", "fp8")),
        "slo": Param(d.tpot_slo_ms, float, _finite(1.0, 60_000.0)),
        "volume_b": Param(d.monthly_output_tokens / 1e9, float, _finite(0.0, 1e7)),
        "volume_source": Param("manual", str, lambda v: v in ("manual", "profile")),
        "current": Param(d.current_method, str, lambda v: v == mdl.NO_SPEC or v in cat.methods),
        "workload": Param(d.workload, str, lambda v: v in cat.workloads),
        "language": Param(d.language, str, lambda v: v in cat.languages),
        "tuned": Param(d.tuned, _bool, lambda v: isinstance(v, bool)),
        "methods_alpha": Param("default", str, lambda v: v in ("default", "tuned")),
        "levers_start": Param("eagle3", str, lambda v: v in cat.methods),
        "levers_order": Param("article", str, lambda v: v in ("article", "return")),
        "sens_method": Param("auto", str, lambda v: v == "auto" or v in cat.methods),
        "sens_batch": Param(1, int, lambda v: 1 <= v <= 4096),
        "mc_samples": Param(400, int, lambda v: 50 <= v <= 5000),
        "mc_seed": Param(7, int, lambda v: 0 <= v <= 2**31 - 1),
        "mc_price": Param(True, _bool, lambda v: isinstance(v, bool)),
        "traffic_cap": Param(True, _bool, lambda v: isinstance(v, bool)),
        "traffic": Param("", str, lambda v: v == "" or v in SAMPLES),
    }


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
                problems.append(f"URL parameter {key}={raw!r} is not a valid value; using {p.default!r}")
                continue
            if not p.valid(val):
                problems.append(f"URL parameter {key}={raw!r} is out of range or unknown; using {p.default!r}")
                continue
            ss[key] = val
        if ss["traffic"]:
            load_sample(ss["traffic"])
        ss["_url_problems"] = problems
    else:
        for key in params:  # keep widget values alive across pages that do not draw them
            if key in ss:
                ss[key] = ss[key]
    return ss.get("_url_problems", [])


def write_url() -> None:
    """Call last in every run: the non-default parameters go to the URL query string."""
    params = _params()
    ss = st.session_state
    want = {}
    for key, p in params.items():
        v = ss.get(key, p.default)
        if v != p.default:
            want[key] = str(v).lower() if isinstance(v, bool) else str(v)
    current = st.query_params.to_dict()
    if current != want:
        st.query_params.from_dict(want)


# ---------------------------------------------------------------------------------------------------
# Sidebar: the shared scenario inputs
# ---------------------------------------------------------------------------------------------------

def _on_hardware_change() -> None:
    st.session_state["price"] = catalog().hardware[st.session_state["hardware"]].usd_per_gpu_hour_mid


def sidebar() -> None:
    cat = catalog()
    ss = st.session_state
    with st.sidebar:
        st.subheader("Scenario (all pages)")
        st.selectbox("Model", list(cat.models), key="model", format_func=lambda n: cat.models[n].label)
        st.selectbox("Hardware", list(cat.hardware), key="hardware", format_func=lambda n: cat.hardware[n].label,
                     on_change=_on_hardware_change)
        hw = cat.hardware[ss["hardware"]]
        st.number_input("Price, $/GPU-hour", min_value=0.0, max_value=1000.0, step=0.1, key="price",
                        help=f"Default: midpoint of the {hw.label} list range ${hw.usd_per_gpu_hour_low:.2f}-"
                             f"${hw.usd_per_gpu_hour_high:.2f} ({hw.price.source}, {hw.price.date}).")
        c1, c2 = st.columns(2)
        c1.selectbox("GPUs per replica (TP)", [1, 2, 4, 8], key="tp")
        c2.selectbox("Weights", ["bf16", "fp8"], key="dtype")
        st.number_input("TPOT SLO, ms per output token", min_value=1.0, max_value=60000.0, step=5.0, key="slo",
                        help="Every method is compared at its own best batch under this latency target.")
        prof: TrafficProfile | None = ss.get(PROFILE_KEY)
        has_volume = prof is not None and prof.monthly_output_tokens is not None
        st.radio("Monthly output-token volume", ["manual", "profile"], key="volume_source", horizontal=True,
                 format_func=lambda v: "enter it" if v == "manual" else "from my traffic profile")
        if ss["volume_source"] == "profile" and not has_volume:
            st.caption("No traffic profile with a monthly volume is loaded (Traffic page): the number below "
                       "is used.")
        st.number_input("Output tokens per month, billions", min_value=0.0, max_value=1e7, step=1.0,
                        key="volume_b", disabled=ss["volume_source"] == "profile" and has_volume)
        methods = [mdl.NO_SPEC] + list(cat.methods)
        st.selectbox("Current method (today)", methods, key="current",
                     format_func=lambda n: "none (no speculation)" if n == mdl.NO_SPEC else cat.methods[n].label)
        disabled = prof is not None
        st.selectbox("Workload", list(cat.workloads), key="workload", disabled=disabled,
                     format_func=lambda n: cat.workloads[n].label)
        st.selectbox("Language", list(cat.languages), key="language", disabled=disabled,
                     format_func=lambda n: cat.languages[n].label)
        if disabled:
            st.caption(f"Workload and language come from the traffic profile '{prof.name}'.")
        st.checkbox("Draft heads tuned on my domain (tuned alpha range)", key="tuned")


def inputs() -> mdl.PlanInputs:
    ss = st.session_state
    prof: TrafficProfile | None = ss.get(PROFILE_KEY)
    volume = float(ss["volume_b"]) * 1e9
    if ss["volume_source"] == "profile" and prof is not None and prof.monthly_output_tokens is not None:
        volume = float(prof.monthly_output_tokens)
    return mdl.PlanInputs(
        model=ss["model"], hardware=ss["hardware"], usd_per_gpu_hour=float(ss["price"]), tp=int(ss["tp"]),
        dtype=ss["dtype"], tpot_slo_ms=float(ss["slo"]), monthly_output_tokens=volume,
        current_method=ss["current"], workload=ss["workload"], language=ss["language"], tuned=bool(ss["tuned"]),
    )


def mix_and_cap(inp: mdl.PlanInputs) -> tuple[mdl.Mix, float | None, bool]:
    """(mix, batch cap from the traffic's concurrency or None, whether the mix is a profile)."""
    prof: TrafficProfile | None = st.session_state.get(PROFILE_KEY)
    if prof is None:
        return mdl.default_mix(inp, catalog()), None, False
    cap = None
    if st.session_state.get("traffic_cap", True):
        cap = prof.concurrency(inp.tpot_slo_ms, quantile=0)
    return prof.mix_key(), cap, True


def scenario_caption(inp: mdl.PlanInputs) -> str:
    cat = catalog()
    hw = cat.hardware[inp.hardware]
    return (f"{cat.models[inp.model].label} on {inp.tp} x {hw.label} ({inp.dtype}) at ${inp.usd_per_gpu_hour:.2f}"
            f"/GPU-hour, TPOT SLO {inp.tpot_slo_ms:g} ms, {inp.monthly_output_tokens / 1e9:,.1f}B output "
            "tokens/month.")


def check_inputs(inp: mdl.PlanInputs) -> str | None:
    cat = catalog()
    hw = cat.hardware[inp.hardware]
    if inp.tp > hw.max_tp:
        return f"{hw.label} supports at most {hw.max_tp} GPUs per replica (TP); you chose {inp.tp}."
    return None


# ---------------------------------------------------------------------------------------------------
# Traffic profile
# ---------------------------------------------------------------------------------------------------

def load_sample(name: str) -> TrafficProfile:
    label, fname = SAMPLES[name]
    prof = _parse_cached(fname, (SAMPLES_DIR / fname).read_bytes())
    st.session_state[PROFILE_KEY] = prof
    st.session_state[PROFILE_ORIGIN_KEY] = f"sample:{name}"
    st.session_state["traffic"] = name
    return prof


@st.cache_data(max_entries=8, show_spinner=False)
def _parse_cached(name: str, data: bytes) -> TrafficProfile:
    return parse_traffic(name, data, catalog())


def load_upload(name: str, data: bytes) -> TrafficProfile:
    """Parse an upload; on error the previous profile stays (TrafficError propagates)."""
    prof = _parse_cached(name, data)
    st.session_state[PROFILE_KEY] = prof
    st.session_state[PROFILE_ORIGIN_KEY] = f"upload:{name}"
    st.session_state["traffic"] = ""
    return prof


def clear_profile() -> None:
    st.session_state[PROFILE_KEY] = None
    st.session_state[PROFILE_ORIGIN_KEY] = None
    st.session_state["traffic"] = ""


__all__ = ["TrafficError"]


# ---------------------------------------------------------------------------------------------------
# Cached planner calls (keyed on the hashable inputs)
# ---------------------------------------------------------------------------------------------------

@st.cache_data(max_entries=64, show_spinner=False)
def plan_summary(inp: mdl.PlanInputs, mix: mdl.Mix, cap: float | None, is_profile: bool) -> dict:
    return mdl.plan_summary(inp, mix, catalog(), cap=cap, mix_is_profile=is_profile)


@st.cache_data(max_entries=64, show_spinner=False)
def method_table(inp: mdl.PlanInputs, mix: mdl.Mix, cap: float | None, which: str, tuned: bool) -> list[dict]:
    return mdl.method_table(inp, mix, catalog(), cap=cap, which=which, tuned=tuned)


@st.cache_data(max_entries=32, show_spinner=False)
def lever_waterfall(inp: mdl.PlanInputs, mix: mdl.Mix, start: str, order: tuple[str, ...] | None) -> list[dict]:
    return mdl.lever_waterfall(inp, mix, catalog(), start_method=start, order=list(order) if order else None)


def fmt_usd(x: float, digits: int = 0) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"${x:,.{digits}f}"


def fmt_cpm(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"${x:,.3f}"


def replace(inp: mdl.PlanInputs, **kw) -> mdl.PlanInputs:
    return dataclasses.replace(inp, **kw)


def page_header(title: str):
    """Title, the scenario caption and the input check every scenario page starts with; None when the inputs
    are invalid (the error is shown)."""
    st.title(title)
    inp = inputs()
    st.caption(scenario_caption(inp))
    bad = check_inputs(inp)
    if bad:
        st.error(bad)
        return None
    return inp
