"""Job kinds and the job process entry point shared by every runner.

`python -m calibration.jobs --kind engine|microbench --run-id ID` runs one job and records its outcome in
the store. Everything else comes on stdin as one JSON object, `{"spec": ..., "store_url": ...,
"timeout_s": ...}`: the store URL (it can hold database credentials) and uploaded prompts never show up on
a command line (`ps`). Progress goes to stdout as lines ("PROGRESS i/n label" and free text), which the
local runner streams and the Ray runner relays through the store's run message.

The job looks after itself, whoever started it and whether or not that runner is still alive:
- it heartbeats every HEARTBEAT_S (every job kind), so a reader can tell a dead job from a working one;
- it enforces its own deadline: at `timeout_s` it records "timed_out" and kills itself and its engine
  children, so nothing outlives its timeout even when the runner (CLI or app) was SIGKILLed;
- it stops when its run is no longer active in the store (cancelled, timed out or marked dead by others);
- a runner that goes away (closed stdout) does not stop it: output to a closed pipe is dropped.
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
from dataclasses import asdict, dataclass
from typing import Any

from calibration.store import HEARTBEAT_S, Store

JOB_KINDS = ("engine", "microbench")
# A job without a timeout still ends: 6 hours is longer than any calibration this project runs.
MAX_JOB_S = 6 * 3600.0
# Process groups of the job's engine children (each its own session), killed with the job at its deadline.
_CHILD_GROUPS: set[int] = set()


def track_child_group(pgid: int) -> None:
    _CHILD_GROUPS.add(pgid)


def untrack_child_group(pgid: int) -> None:
    _CHILD_GROUPS.discard(pgid)


def _kill_everything(exit_code: int) -> None:
    """Kill the engine children's process groups, then this job's own group (it leads one when a runner
    started it), then exit without cleanup: a timed-out job must not linger in `finally` blocks."""
    for pgid in list(_CHILD_GROUPS):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
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


def execute(kind: str, spec: dict[str, Any], run_id: str, store_url: str,
            log: Callable[[str], None] = print, timeout_s: float | None = None) -> str:
    """Run one job to its end under its own heartbeat and deadline; returns the final state in the store."""
    if kind not in JOB_KINDS:
        raise ValueError(f"kind={kind!r} not allowed; allowed: {JOB_KINDS}")
    store = Store(store_url)
    if not store.set_status(run_id, "running", f"{kind} job started"):
        return store.get_run(run_id).status  # stopped before it started (e.g. cancelled while queued)
    guard = JobGuard(store, run_id, MAX_JOB_S if timeout_s is None else timeout_s, log=log)
    guard.start()
    try:
        if kind == "engine":
            from calibration.engine import JobSpec, run_job

            state, message = run_job(JobSpec.from_dict(spec), run_id, store_url, log=log)
        else:
            state, message = _microbench(MicrobenchSpec.from_dict(spec), run_id, store, log)
    except BaseException as e:
        guard.stop()
        store.set_status(run_id, "failed", f"{type(e).__name__}: {e}")
        raise
    guard.stop()
    store.set_status(run_id, state, message)
    return store.get_run(run_id).status


def _microbench(ms: MicrobenchSpec, run_id: str, store: Store, log: Callable[[str], None]) -> tuple[str, str]:
    from calibration.microbench import LayerShape, run_microbench
    from calibration.predict import model_spec

    m = model_spec(ms.model)
    # Intermediate size is not in ModelSpec: derive it from the per-layer params (attention 2h^2 + 2h*kv,
    # gated MLP 3*h*inter); matches SmolLM2-135M's 1536 to the rounding.
    h = m.hidden_size
    per_layer = (m.total_params_b * 1e9 - m.vocab_size * h) / m.layers
    attn = 2 * h * m.heads * m.head_dim + 2 * h * m.kv_heads * m.head_dim
    inter = max(1, int(round((per_layer - attn) / (3 * h) / 64.0)) * 64)
    shape = LayerShape(m.layers, h, m.heads, m.kv_heads, m.head_dim, inter, m.vocab_size)
    points = len(ms.batches) * len(ms.tokens_per_seq) * len(ms.contexts)
    store.heartbeat(run_id, f"microbenchmark {points} points")
    log(f"PROGRESS 0/1 microbench {asdict(shape)}")
    from calibration.engine import engine_dtype
    from calibration.registry import has_cuda

    # the engine's dtype on this machine (calibration.engine.engine_dtype), so that both fits see one format
    samples = run_microbench(shape, batches=ms.batches, tokens_per_seq=ms.tokens_per_seq,
                             contexts=ms.contexts, repeats=ms.repeats, dtype=engine_dtype(has_cuda()))
    store.add_step_samples(run_id, [{**s.to_dict(), "model": ms.model} for s in samples])
    for s in samples:
        log(f"b={s.batch} n={s.tokens_per_seq} ctx={s.context_tokens}: {s.step_time_s * 1e3:.2f} ms")
    log("PROGRESS 1/1 done")
    return "succeeded", f"{len(samples)} samples"


def job_payload(spec: dict[str, Any], store_url: str, timeout_s: float | None) -> str:
    """The job's stdin: what must not appear on its command line."""
    return json.dumps({"spec": spec, "store_url": store_url, "timeout_s": timeout_s})


def job_command(kind: str, run_id: str) -> list[str]:
    return [sys.executable, "-m", "calibration.jobs", "--kind", kind, "--run-id", run_id]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.jobs",
                                description="one calibration job; reads {spec, store_url, timeout_s} JSON on stdin")
    p.add_argument("--kind", required=True, choices=JOB_KINDS)
    p.add_argument("--run-id", required=True)
    a = p.parse_args(argv)
    payload = json.loads(sys.stdin.read())
    log = pipe_safe(lambda s: print(s, flush=True))
    state = execute(a.kind, payload["spec"], a.run_id, payload["store_url"], log=log,
                    timeout_s=payload.get("timeout_s"))
    return 0 if state == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
