"""Whether a calibration target fits this machine's memory before an engine is started for it.

A CPU engine holds the target's weights in host memory (float32 doubles a 16-bit checkpoint, see
calibration.harness.engine_settings.engine_dtype), plus the engine's own processes (machine_load.ENGINE_BASE_BYTES) and
a KV cache of at least one sequence of the engine's context (vLLM refuses to start with less:
vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory); a draft model adds its weights. All of it must fit
both the host's available memory and the share of its total memory the CPU engine reserves for weights and KV
cache (CPU_MEMORY_UTILIZATION: vllm/v1/worker/cpu_worker.py requested_cpu_memory). A GPU-sized target (7-8B
parameters: 15-16 GiB in bfloat16) on a CPU-only host would otherwise be downloaded and loaded for minutes
before the engine refuses it, or swap the machine. Sizes come from
the planner's catalogue (calibration.targets.catalog.model_spec of the registry target's planner model), never from
downloading the model; a GPU node is not checked here (its engine takes a fraction of the GPU's memory, see
vllm/v1/worker/gpu_worker.py). The Calibrate page asks before it offers the Run button, the runners before they
record a run, and the job itself on the node it runs on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GIB = 2**30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


class TargetTooLarge(ValueError):
    """A target whose weights and margins do not fit the host's available memory."""


@dataclass(frozen=True)
class MemoryFit:
    target: str
    fits: bool
    needed_bytes: int  # 0 when the size is unknown or the check does not apply
    available_bytes: int | None
    message: str  # why it fits or not, with the figures

    def refuse(self) -> None:
        if not self.fits:
            raise TargetTooLarge(self.message)


def needed_bytes(*, params_b: float, dtype: str, kv_bytes_per_token: float, context_tokens: int,
                 base_bytes: int, draft_params_b: float = 0.0) -> int:
    """Weights of the target (and its largest draft model) in `dtype`, the KV cache of one sequence of
    `context_tokens`, and the engine's own processes."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype={dtype!r} not allowed; allowed: {sorted(DTYPE_BYTES)}")
    if not params_b >= 0 or not draft_params_b >= 0 or context_tokens < 1:
        raise ValueError(f"params_b={params_b}, draft_params_b={draft_params_b}, context_tokens={context_tokens} "
                         "not allowed: sizes >= 0, context >= 1")
    weights = (params_b + draft_params_b) * 1e9 * DTYPE_BYTES[dtype]
    return int(weights + kv_bytes_per_token * context_tokens + base_bytes)


def fit_verdict(*, target: str, needed: int, available: int | None, total: int | None = None,
                engine_share: float = 1.0) -> MemoryFit:
    """`needed` against the available memory and against `engine_share` of the `total` memory (what a CPU engine
    reserves for itself), whichever is smaller."""
    if available is None:
        return MemoryFit(target, True, needed, None, f"target={target!r}: available memory unknown (no "
                         "/proc/meminfo); not checked")
    allowed = available if total is None else min(available, int(engine_share * total))
    fits = needed <= allowed
    verdict = "fits" if fits else "does not fit"
    msg = (f"target={target!r} {verdict} this host's memory: needs {needed / GIB:.1f} GiB (weights, KV cache and "
           f"engine processes), {available / GIB:.1f} GiB available")
    if total is not None:
        msg += (f", of which the CPU engine may reserve {allowed / GIB:.1f} GiB ({engine_share:.0%} of "
                f"{total / GIB:.1f} GiB)")
    if not fits:
        msg += ("; calibrate it on a GPU node (Ray runner) or pick a smaller target from the calibration "
                "registry")
    return MemoryFit(target, fits, needed, available, msg)


def _params_b(name: str) -> float | None:
    from calibration.targets.catalog import model_spec

    try:
        return float(model_spec(name).total_params_b)
    except (ValueError, KeyError):
        return None


def total_memory_bytes(meminfo: str | None = None) -> int | None:
    """MemTotal of /proc/meminfo, in bytes."""
    try:
        text = open("/proc/meminfo", encoding="ascii").read() if meminfo is None else meminfo
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["MemTotal:"] and len(parts) >= 2 and parts[1].isdigit():
            return int(parts[1]) * (1024 if parts[2:3] == ["kB"] else 1)
    return None


def target_memory_fit(model: str, *, drafts: tuple[str, ...] = (), available_bytes: int | None = None,
                      total_bytes: int | None = None, dtype: str | None = None,
                      on_gpu: bool | None = None) -> MemoryFit:
    """Whether `model` (a calibration registry target) with its largest named draft model fits this host's
    memory (MemAvailable and MemTotal unless given). Raises ValueError for a model the registry does not hold."""
    from calibration.harness import machine_load
    from calibration.harness.engine_settings import CPU_MEMORY_UTILIZATION, MAX_MODEL_LEN, engine_dtype
    from calibration.targets import registry
    from calibration.targets.catalog import model_spec

    entry = registry.load_registry().target(model)
    if on_gpu is None:
        on_gpu = registry.has_cuda()
    if on_gpu:
        return MemoryFit(model, True, 0, None, f"target={model!r}: a GPU node sizes its engine by the GPU's "
                         "memory fraction; not checked here")
    try:
        spec = model_spec(entry.planner_model)
    except ValueError:
        return MemoryFit(model, True, 0, None, f"target={model!r}: its size is not in the catalogue "
                         f"(planner model {entry.planner_model!r}); not checked")
    dtype = dtype or engine_dtype(False)
    kv_per_token = float(spec.kv_elements_per_token_per_layer) * spec.layers * DTYPE_BYTES.get(dtype, 4)
    draft_b = max((p for p in (_params_b(d) for d in drafts) if p is not None), default=0.0)
    need = needed_bytes(params_b=float(spec.total_params_b), dtype=dtype, kv_bytes_per_token=kv_per_token,
                        context_tokens=MAX_MODEL_LEN, base_bytes=machine_load.ENGINE_BASE_BYTES,
                        draft_params_b=draft_b)
    if available_bytes is None:
        available_bytes = machine_load.available_memory_bytes()
    if total_bytes is None:
        total_bytes = total_memory_bytes()
    return fit_verdict(target=model, needed=need, available=available_bytes, total=total_bytes,
                       engine_share=CPU_MEMORY_UTILIZATION)


def spec_memory_fit(kind: str, spec: dict[str, Any], *, available_bytes: int | None = None,
                    on_gpu: bool | None = None) -> MemoryFit | None:
    """The memory fit of an engine or serve job's spec (as submitted); None for a job that starts no engine."""
    from calibration.targets.model_assets import TARGET_NAME

    if kind == "engine":
        configs = list(spec.get("configs") or ())
    elif kind == "serve":
        configs = [spec.get("config") or {}]
    else:
        return None
    drafts = tuple(str(c.get("draft")) for c in configs
                   if isinstance(c, dict) and c.get("method") == "draft_model" and c.get("draft"))
    return target_memory_fit(str(spec.get("model") or TARGET_NAME), drafts=drafts, available_bytes=available_bytes,
                             on_gpu=on_gpu)
