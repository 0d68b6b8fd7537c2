"""Job kinds and the job process entry point shared by every runner.

`python -m calibration.run.jobs --kind engine|serve|microbench --run-id ID` runs one job and records its outcome in
the store. Everything else comes on stdin as one JSON object, `{"spec": ..., "store_url": ...,
"timeout_s": ...}`: the store URL (it can hold database credentials) and uploaded prompts never show up on
a command line (`ps`). Progress goes to stdout as lines ("PROGRESS i/n label" and free text), which the
local runner streams and the Ray runner relays through the store's run message.

The job looks after itself, whoever started it and whether or not that runner is still alive:
- it heartbeats every HEARTBEAT_S (every job kind), so a reader can tell a dead job from a working one;
- it enforces its own deadline: at `timeout_s` it records "timed_out" and kills itself and its engine
  children, so nothing outlives its timeout even when the runner (CLI or app) was SIGKILLed;
- it stops when its run is no longer active in the store (cancelled, timed out or marked dead by others);
- it refuses, before any engine starts, a target whose weights do not fit the memory of the machine it runs on
  (calibration.targets.memory_fit);
- a runner that goes away (closed stdout) does not stop it: output to a closed pipe is dropped;
- a runner that stops it (SIGTERM) stops its measuring children too (each leads its own process group);
- a measuring child that dies (SIGKILL, out of memory) takes its process group with it, vLLM's engine core
  included (calibration.harness.procs.GroupChild): the run fails within seconds, naming the signal, and frees its
  place for the next job instead of holding it until its deadline.

Kinds: `engine` (one child process per configuration, calibration.measure.engine, or one for all of them with
`JobSpec.interleave`), `serve` (a `vllm serve` and a
load generator, calibration.measure.serve) and `microbench` (calibration.measure.microbench). They measure and record
groups or samples; the run's status, heartbeat and deadline are this module's alone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from calibration.harness.engine_settings import engine_dtype
from calibration.harness.procs import GroupChild, exit_description, kill_tracked_groups
from calibration.measure.engine import child_payload, engine_command
from calibration.measure.spec import JobSpec, MicrobenchSpec, ServeSpec
from calibration.storage.store import HEARTBEAT_S, Store
from calibration.targets import registry

JOB_KINDS = ("engine", "serve", "microbench")
# A job without a timeout still ends: 6 hours is longer than any calibration this project runs.
MAX_JOB_S = 6 * 3600.0
REPO_ROOT = Path(__file__).resolve().parents[2]


def _kill_everything(exit_code: int) -> None:
    """Kill the engine children's process groups, then this job's own group (it leads one when a runner
    started it), then exit without cleanup: a timed-out job must not linger in `finally` blocks."""
    kill_tracked_groups()
    if os.getpgid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os._exit(exit_code)


class JobGuard(threading.Thread):
    """The job's own heartbeat and deadline, in one daemon thread of the job process."""

    def __init__(self, store: Store, run_id: str, timeout_s: float,
                 log: Callable[[str], None] = print, on_expire: Callable[[int], None] = _kill_everything) -> None:
        super().__init__(daemon=True, name=f"job-guard-{run_id}")
        self.store, self.run_id, self.timeout_s, self.log = store, run_id, timeout_s, log
        self.deadline = time.monotonic() + timeout_s
        self.on_expire = on_expire
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while True:
            left = self.deadline - time.monotonic()
            if self._stop_event.wait(max(0.0, min(HEARTBEAT_S, left))):
                return
            if time.monotonic() >= self.deadline:
                msg = f"deadline: the job stopped itself after its timeout of {self.timeout_s:g} s"
                try:
                    self.store.set_status(self.run_id, "timed_out", msg)
                except Exception:  # noqa: BLE001 - stop regardless: the deadline outranks the store
                    pass
                self.log(msg)
                self.on_expire(124)
                return
            try:
                active = self.store.heartbeat(self.run_id)
            except Exception:  # noqa: BLE001 - a missed beat must not kill the job
                continue
            if not active and not self._stop_event.is_set():
                self.log("the run is no longer active in the store (stopped or marked dead): stopping")
                self.on_expire(1)
                return


def pipe_safe(write: Callable[[str], None]) -> Callable[[str], None]:
    """A log function that survives its reader's death: once stdout is a closed pipe (the runner was
    killed), lines are dropped instead of raising BrokenPipeError into the job."""
    broken = False

    def log(line: str) -> None:
        nonlocal broken
        if broken:
            return
        try:
            write(line)
        except (BrokenPipeError, OSError, ValueError):
            broken = True
            try:  # keep the interpreter's final flush from raising too
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except OSError:
                pass

    return log


def run_job(kind: str, spec: dict[str, Any], run_id: str, store_url: str, *,
            log: Callable[[str], None] = print, timeout_s: float | None = None) -> str:
    """Run one job to its end under its own heartbeat and deadline; returns the final state in the store.

    The heartbeat runs in its own thread (JobGuard) for every kind, so a step that blocks for minutes (an
    engine or `vllm serve` start) keeps the run alive for readers."""
    if kind not in JOB_KINDS:
        raise ValueError(f"kind={kind!r} not allowed; allowed: {JOB_KINDS}")
    store = Store(store_url)
    if not store.set_status(run_id, "running", f"{kind} job started"):
        return store.get_run(run_id).status  # stopped before it started (e.g. cancelled while queued)
    guard = JobGuard(store, run_id, MAX_JOB_S if timeout_s is None else timeout_s, log=log)
    guard.start()
    try:
        too_large = _memory_refusal(kind, spec)
        if too_large:
            log(too_large)
            state, message = "failed", too_large
        elif kind == "engine":
            state, message = _engine_job(JobSpec.from_dict(spec), run_id, store_url, log)
        elif kind == "serve":
            state, message = _serve_job(ServeSpec.from_dict(spec), run_id, store_url, log)
        else:
            state, message = _microbench_job(MicrobenchSpec.from_dict(spec), run_id, store, log)
    except BaseException as e:
        guard.stop()
        store.set_status(run_id, "failed", f"{type(e).__name__}: {e}"[:500])
        raise
    guard.stop()
    store.set_status(run_id, state, message)
    return store.get_run(run_id).status


def _memory_refusal(kind: str, spec: dict[str, Any]) -> str:
    """Why this machine cannot hold the job's target (calibration.targets.memory_fit), or "": checked where the job
    runs, so a Ray job landing on a CPU node is refused there before any engine loads."""
    from calibration.targets.memory_fit import spec_memory_fit

    fit = spec_memory_fit(kind, spec)
    return "" if fit is None or fit.fits else f"refused before any engine started: {fit.message}"


def _engine_job(spec: JobSpec, run_id: str, store_url: str, log: Callable[[str], None]) -> tuple[str, str]:
    """Every configuration of `spec` in its own engine child process (calibration.measure.engine), one after another;
    with `spec.interleave` (CPU only), all in one child, measured group by group in turn."""
    store = Store(store_url)
    env = job_env()
    if spec.interleave and not registry.has_cuda():
        # one child, every configuration's engine in it, measured group by group in turn (calibration.measure.engine)
        labels = ", ".join(c.label for c in spec.configs)
        log(f"PROGRESS 0/1 interleaved: {labels}")
        store.heartbeat(run_id, f"{len(spec.configs)} configurations interleaved: {labels}")
        msg = run_engine_child(engine_command(None, run_id), spec, store_url, env, log, "interleaved")
        if msg:
            return "failed", msg
        log("PROGRESS 1/1 done")
        return "succeeded", f"{len(spec.configs)} configurations, interleaved"
    for i, config in enumerate(spec.configs):
        log(f"PROGRESS {i}/{len(spec.configs)} {config.label}")
        store.heartbeat(run_id, f"configuration {i + 1}/{len(spec.configs)}: {config.label}")
        msg = run_engine_child(engine_command(config, run_id), spec, store_url, env, log, config.label)
        if msg:
            return "failed", msg
    log(f"PROGRESS {len(spec.configs)}/{len(spec.configs)} done")
    return "succeeded", f"{len(spec.configs)} configurations"


def run_engine_child(cmd: list[str], spec: JobSpec, store_url: str, env: dict[str, str],
                      log: Callable[[str], None], what: str) -> str:
    """Run one engine child to its end, relaying its lines; returns "" or why it failed.

    The child leads its own process group (calibration.harness.procs.GroupChild): the moment it exits, however it
    exits, its group is killed, and with it vLLM's engine core, which held the child's output pipe open: an
    engine child killed with SIGKILL is a failed configuration within seconds, not a run that waits for its
    deadline with an orphaned engine core resident."""
    with GroupChild(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                    env=env) as child:
        proc = child.proc
        assert proc.stdin is not None
        try:
            proc.stdin.write(child_payload(spec, store_url))
            proc.stdin.close()
        except BrokenPipeError:  # the child died before it read its payload: its exit says why
            pass
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            tail = (tail + [line])[-40:]
            if line.startswith("[") or "Error" in line:
                log(line)
        rc = proc.wait()
    if rc != 0:
        msg = f"configuration {what} failed: {engine_exit_reason(rc)}"
        if tail:
            msg += "; last lines: " + " | ".join(t[:300] for t in tail[-8:])  # vLLM's config line alone is ~4 kB
        log(msg)
        return msg
    return ""


def engine_exit_reason(returncode: int) -> str:
    """Why an engine child ended without a result, in the run's words."""
    why = f"the engine process {exit_description(returncode)}"
    if returncode == -signal.SIGKILL:
        why += " (killed from outside the job: by a user, or by the system when memory ran out)"
    return why + "; its engine core and worker processes were stopped with it"


def _serve_job(spec: ServeSpec, run_id: str, store_url: str, log: Callable[[str], None]) -> tuple[str, str]:
    from calibration.measure.serve import run_serve

    log("PROGRESS 0/1 serve")
    state, message = run_serve(spec, run_id, store_url, log=log)
    log("PROGRESS 1/1 done")
    return state, message


def _microbench_job(ms: MicrobenchSpec, run_id: str, store: Store,
                    log: Callable[[str], None]) -> tuple[str, str]:
    from calibration.measure.microbench import layer_shape_of, run_microbench
    from calibration.targets.catalog import model_spec

    shape = layer_shape_of(model_spec(ms.model))
    points = len(ms.batches) * len(ms.tokens_per_seq) * len(ms.contexts)
    store.heartbeat(run_id, f"microbenchmark {points} points")
    log(f"PROGRESS 0/1 microbench {asdict(shape)}")
    # the engine's dtype on this machine, so that both fits see one format
    samples = run_microbench(shape, batches=ms.batches, tokens_per_seq=ms.tokens_per_seq,
                             contexts=ms.contexts, repeats=ms.repeats, dtype=engine_dtype(registry.has_cuda()))
    store.add_step_samples(run_id, [{**s.to_dict(), "model": ms.model} for s in samples])
    for s in samples:
        log(f"b={s.batch} n={s.tokens_per_seq} ctx={s.context_tokens}: {s.step_time_s * 1e3:.2f} ms")
    log("PROGRESS 1/1 done")
    return "succeeded", f"{len(samples)} samples"


def job_env(repo_root: str | None = None) -> dict[str, str]:
    """This environment with the repository on PYTHONPATH: what a job process and its children run in."""
    root = repo_root or str(REPO_ROOT)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def job_payload(spec: dict[str, Any], store_url: str, timeout_s: float | None) -> str:
    """The job's stdin: what must not appear on its command line."""
    return json.dumps({"spec": spec, "store_url": store_url, "timeout_s": timeout_s})


def job_command(kind: str, run_id: str) -> list[str]:
    return [sys.executable, "-m", "calibration.run.jobs", "--kind", kind, "--run-id", run_id]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.run.jobs",
                                description="one calibration job; reads {spec, store_url, timeout_s} JSON on stdin")
    p.add_argument("--kind", required=True, choices=JOB_KINDS)
    p.add_argument("--run-id", required=True)
    a = p.parse_args(argv)
    # A runner stops a job with SIGTERM to its process group; the measuring children (engines, a server) lead
    # their own sessions, so the job takes them down with it.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: _kill_everything(143))
    payload = json.loads(sys.stdin.read())
    log = pipe_safe(lambda s: print(s, flush=True))
    state = run_job(a.kind, payload["spec"], a.run_id, payload["store_url"], log=log,
                    timeout_s=payload.get("timeout_s"))
    return 0 if state == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
