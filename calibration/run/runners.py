"""Runners: where a calibration job executes.

- `LocalRunner` (the embedded default): the job runs in its own process (`python -m calibration.run.jobs`)
  in a new session; stdout lines stream into the handle; cancel and timeout kill the whole process group.
- `RayRunner`: the same job as a Ray task on a cluster (`num_gpus` for GPU nodes); progress is relayed
  through the store's run message (the store URL must be reachable from the workers: a shared
  PostgreSQL, or the SQLite file when the cluster is this machine). It joins only the cluster it is asked
  for, and when an admin list of Ray addresses is configured (`$SPECPLAN_RAY_ADDRESSES`, or a file named
  by `$SPECPLAN_RAY_ADDRESSES_FILE`), only one on that list.

Job states: queued -> running -> succeeded | failed | cancelled | timed_out. The job process itself writes
succeeded / failed, and timed_out when it reaches its own deadline (calibration.run.jobs.JobGuard); the runner
writes cancelled / timed_out after stopping it. A job killed outside any runner stops heartbeating and is
marked failed by whoever reads its run next (calibration.storage.store). The job gets the store URL on stdin,
never on its command line.

Admission (calibration.run.admission): a runner records a run only while the server-wide cap on running jobs and the
one-job-per-user rule allow it (counted in the store), and the local runner only for a target that fits this
host's memory (calibration.targets.memory_fit; a Ray job's own process checks on its node). Submitted handles stay
reachable by run id in this process (`live_handle`), so another session of the same user can follow and cancel
the job.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from calibration.harness.procs import die_with_parent, exit_description, kill_group
from calibration.run.admission import JobOwner, admit
from calibration.run.jobs import JOB_KINDS, REPO_ROOT, job_command, job_env, job_payload
from calibration.storage.store import Store

TERMINAL = ("succeeded", "failed", "cancelled", "timed_out", "crashed")
# Grace between SIGTERM and SIGKILL when stopping a job.
STOP_GRACE_S = 3.0
# The runner's own timeout backs up the job's deadline: a little later, so the job records it first.
RUNNER_TIMEOUT_SLACK_S = 5.0
RAY_ADDRESSES_ENV = "SPECPLAN_RAY_ADDRESSES"
RAY_ADDRESSES_FILE_ENV = "SPECPLAN_RAY_ADDRESSES_FILE"
RAY_ADDRESS_RE = re.compile(r"^(ray://)?[A-Za-z0-9.\-]+:\d{1,5}$")


def check_ray_address(address: str) -> str:
    if not isinstance(address, str) or not RAY_ADDRESS_RE.match(address):
        raise ValueError(f"address={address!r} not allowed: give host:port or ray://host:port")
    return address


def allowed_ray_addresses() -> tuple[str, ...]:
    """The admin's list of Ray clusters jobs may go to: $SPECPLAN_RAY_ADDRESSES (comma-separated) plus the
    file named by $SPECPLAN_RAY_ADDRESSES_FILE (one address per line, '#' comments). Empty: none listed."""
    out: list[str] = []
    for item in os.environ.get(RAY_ADDRESSES_ENV, "").split(","):
        if item.strip():
            try:
                out.append(check_ray_address(item.strip()))
            except ValueError as e:
                raise ValueError(f"${RAY_ADDRESSES_ENV}: {e}") from None
    path = os.environ.get(RAY_ADDRESSES_FILE_ENV)
    if path:
        try:
            lines = Path(path).expanduser().read_text().splitlines()
        except OSError as e:
            raise ValueError(f"${RAY_ADDRESSES_FILE_ENV}={path!r}: cannot read it ({e.strerror})") from None
        for n, line in enumerate(lines, 1):
            item = line.split("#", 1)[0].strip()
            if item:
                try:
                    out.append(check_ray_address(item))
                except ValueError as e:
                    raise ValueError(f"{path}, line {n}: {e}") from None
    return tuple(dict.fromkeys(out))


def stored_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """What the store keeps of a job spec: uploaded prompt texts are replaced by their hash and count
    (prompt text from users' traffic is never persisted)."""
    from calibration.storage.records import prompt_set_hash

    out = {k: v for k, v in spec.items() if k != "custom_prompts"}
    if spec.get("custom_prompts"):
        out["custom_prompt_sets"] = {w: {"hash": prompt_set_hash(list(ps)), "prompts": len(ps)}
                                     for w, ps in spec["custom_prompts"].items()}
    return out


class JobHandle:
    """A submitted job: state, streamed lines, progress fraction, cancel, wait."""

    def __init__(self, run_id: str, store: Store) -> None:
        self.run_id = run_id
        self.store = store
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._stop_reason: str | None = None
        self._state = "queued"
        self._done = threading.Event()
        self.progress = 0.0

    # -- for subclasses / threads --
    def _add_line(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)
        if line.startswith("PROGRESS "):
            try:
                i, n = line.split()[1].split("/")
                self.progress = int(i) / max(int(n), 1)
            except ValueError:
                pass

    def _settle(self, no_result_message: str) -> None:
        """Record the job's final state: the runner's stop reason, else what the job stored, else failed."""
        try:
            if self._stop_reason:
                self.store.set_status(self.run_id, self._stop_reason, f"stopped by the runner: {self._stop_reason}")
            else:
                self.store.set_status(self.run_id, "failed", no_result_message)
            # The first terminal state wins: the job may have recorded its own (e.g. its deadline) first.
            self._finish(self.store.get_run(self.run_id).status)
        except Exception as e:  # noqa: BLE001 - a store error must not leave the handle waiting forever
            self._add_line(f"could not record the outcome: {e}")
            self._finish(self._stop_reason or "failed")

    def _finish(self, state: str) -> None:
        self._state = state
        self._done.set()
        with _live_lock:
            _live.pop(self.run_id, None)

    # -- public --
    @property
    def state(self) -> str:
        return self._state

    def lines(self, start: int = 0) -> list[str]:
        with self._lock:
            return self._lines[start:]

    def wait(self, timeout_s: float | None = None) -> str:
        self._done.wait(timeout_s)
        return self._state

    def cancel(self) -> None:
        raise NotImplementedError


# Handles of this process's jobs still running, by run id (another session of the same user finds its job here).
_live: dict[str, JobHandle] = {}
_live_lock = threading.Lock()


H = TypeVar("H", bound=JobHandle)


def _keep(handle: H) -> H:
    with _live_lock:
        if handle.state in ("queued", "running"):
            _live[handle.run_id] = handle
    return handle


def live_handle(run_id: str) -> JobHandle | None:
    """The handle of a job this process submitted and that has not ended, or None."""
    with _live_lock:
        return _live.get(run_id)


class LocalProcessHandle(JobHandle):
    def __init__(self, run_id: str, store: Store, cmd: list[str], timeout_s: float | None,
                 stdin_text: str = "") -> None:
        super().__init__(run_id, store)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=job_env(), cwd=str(REPO_ROOT), start_new_session=True)
        assert self.proc.stdin is not None
        self.proc.stdin.write(stdin_text)
        self.proc.stdin.close()
        self._state = "running"
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if timeout_s is not None:
            threading.Thread(target=self._watchdog, args=(timeout_s,), daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._add_line(line.rstrip())
        rc = self.proc.wait()
        self._kill_group(signal.SIGKILL)  # stragglers (engine workers) of a finished or killed job
        # The job process may die without writing its outcome (killed by a signal, out of memory...).
        self._settle(f"the job process {exit_description(rc)} without a result")

    def _kill_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _stop(self, reason: str) -> None:
        if self.proc.poll() is not None:
            return
        self._stop_reason = reason
        self._kill_group(signal.SIGTERM)
        try:
            self.proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._kill_group(signal.SIGKILL)

    def _watchdog(self, timeout_s: float) -> None:
        """A backstop: the job stops itself at `timeout_s`; this stops one that did not, a little later."""
        if not self._done.wait(timeout_s + RUNNER_TIMEOUT_SLACK_S):
            self._add_line(f"no result {RUNNER_TIMEOUT_SLACK_S:g} s after the job's deadline ({timeout_s:g} s): "
                           "stopping it")
            self._stop("timed_out")

    def cancel(self) -> None:
        self._stop("cancelled")


class LocalRunner:
    """Runs jobs in local processes; `owner` is the user its jobs are admitted for (calibration.run.admission)."""

    name = "local"

    def __init__(self, store_url: str | None = None, owner: JobOwner | None = None) -> None:
        self.store = Store(store_url)
        self.owner = owner

    def submit(self, kind: str, spec: dict[str, Any], *, timeout_s: float | None = None,
               run_id: str | None = None, owner: JobOwner | None = None) -> LocalProcessHandle:
        """Start a job here; raises ValueError (calibration.run.admission.JobRefused for a cap, TargetTooLarge for a
        target this host cannot hold) before anything is recorded or started."""
        from calibration.targets.memory_fit import spec_memory_fit

        if kind not in JOB_KINDS:
            raise ValueError(f"kind={kind!r} not allowed; allowed: {JOB_KINDS}")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s} not allowed: must be > 0")
        fit = spec_memory_fit(kind, spec)
        if fit is not None:
            fit.refuse()
        run_id = admit(self.store, kind, {**stored_spec(spec), "runner": self.name, "timeout_s": timeout_s},
                       kinds=JOB_KINDS, owner=owner or self.owner, run_id=run_id)
        try:
            handle = LocalProcessHandle(run_id, self.store, job_command(kind, run_id), timeout_s,
                                        stdin_text=job_payload(spec, self.store.url, timeout_s))
        except BaseException as e:  # the process did not start: the run must not hold a place
            self.store.set_status(run_id, "failed", f"the job process could not start: {type(e).__name__}: {e}"[:500])
            raise
        return _keep(handle)


# ---------------------------------------------------------------------------------------------------
# Ray
# ---------------------------------------------------------------------------------------------------
def _ray_task(kind: str, spec: dict[str, Any], run_id: str, store_url: str, repo_root: str,
              timeout_s: float | None = None) -> str:
    """Body of the Ray task: the same job process as the local runner, on whichever node Ray picked."""
    env = job_env(repo_root)
    cmd = job_command(kind, run_id)
    # A force-cancelled task kills this worker without running `finally`: the job process gets SIGTERM
    # from the kernel (PR_SET_PDEATHSIG) and its engine child cleans up after it.
    proc = subprocess.Popen(cmd, env=env, cwd=repo_root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=die_with_parent)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(job_payload(spec, store_url, timeout_s))
        proc.stdin.close()
        store = Store(store_url)
        for line in proc.stdout:
            if line.startswith("PROGRESS") or line.startswith("["):
                store.heartbeat(run_id, line.strip()[:500])
        return "succeeded" if proc.wait() == 0 else "failed"
    finally:
        kill_group(proc.pid)


class RayJobHandle(JobHandle):
    def __init__(self, run_id: str, store: Store, ref: Any, timeout_s: float | None,
                 poll_s: float = 0.5) -> None:
        super().__init__(run_id, store)
        self.ref = ref
        self._state = "queued"  # until the job process on a worker marks the run "running"
        self._t0 = time.monotonic()
        self._timeout_s = timeout_s
        self._poll_s = poll_s
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        import ray

        last = ""
        while True:
            ready, _ = ray.wait([self.ref], timeout=self._poll_s)
            row = self.store.get_run(self.run_id)
            if row.status == "running" and self._state == "queued":
                self._state = "running"
            msg = row.message
            if msg and msg != last:
                self._add_line(msg)
                last = msg
            if ready:
                break
            if (self._timeout_s is not None
                    and time.monotonic() - self._t0 > self._timeout_s + RUNNER_TIMEOUT_SLACK_S):
                self._add_line(f"timeout after {self._timeout_s:g} s: cancelling the Ray task")
                self._stop_reason = "timed_out"
                ray.cancel(self.ref, force=True)
                break
        if self._stop_reason is None:
            try:
                ray.get(self.ref)
            except Exception as e:  # noqa: BLE001 - a cancelled or crashed task
                self._add_line(f"ray task ended: {type(e).__name__}")
        self._settle("Ray task ended without a result")

    def cancel(self) -> None:
        import ray

        self._stop_reason = "cancelled"
        ray.cancel(self.ref, force=True)


# The cluster this process's Ray driver joined (ray.init is process-wide: one cluster per process).
_ray_lock = threading.Lock()
_ray_address: str | None = None


def _same_ray_address(a: str, b: str) -> bool:
    def norm(x: str) -> str:
        return x.strip().lower().replace("localhost", "127.0.0.1")

    return norm(a) == norm(b)


def connected_ray_address() -> str | None:
    """The address this process's Ray driver is connected to, or None."""
    import ray

    if not ray.is_initialized():
        return None
    if _ray_address:
        return _ray_address
    try:  # connected by someone else in this process (ray.init elsewhere)
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # noqa: BLE001 - a client-mode connection has no GCS address here
        return "(unknown)"


class RayRunner:
    """Submits jobs as Ray tasks to the cluster at `address` ("127.0.0.1:6379", "ray://host:10001").

    Ray's driver connection is process-wide: a runner connects to its own address, or refuses when this
    process is already connected to another cluster (it never submits to a cluster it was not asked for).
    When the admin list of Ray addresses (`allowed_ray_addresses`) is not empty, the address must be on it.
    """

    name = "ray"

    def __init__(self, address: str, store_url: str | None = None, num_gpus: float = 0.0,
                 num_cpus: float = 1.0, owner: JobOwner | None = None) -> None:
        check_ray_address(address)
        allowed = allowed_ray_addresses()
        if allowed and not any(_same_ray_address(address, a) for a in allowed):
            raise ValueError(f"address={address!r} not allowed: not on the admin list of Ray clusters "
                             f"({', '.join(allowed)})")
        self.address = address
        self.store = Store(store_url)
        self.num_gpus = num_gpus
        self.num_cpus = num_cpus
        self.owner = owner

    def _connect(self) -> None:
        global _ray_address
        import ray

        with _ray_lock:
            current = connected_ray_address()
            if current is not None:
                if _same_ray_address(current, self.address):
                    return
                raise ValueError(f"Ray address={self.address!r} refused: this process is connected to the Ray "
                                 f"cluster at {current!r}; one process joins one cluster (use a separate "
                                 "process, or shut the other runner down first)")
            host = self.address.removeprefix("ray://").rsplit(":", 1)[0]
            # A loopback cluster: keep the driver on loopback too (no other interface is involved).
            if host not in ("127.0.0.1", "localhost"):
                ray.init(address=self.address, log_to_driver=False, include_dashboard=False)
                _ray_address = self.address
                return
            # Ray rewrites a loopback bootstrap address to this machine's interface address
            # (ray._private.services.resolve_ip_for_localhost); for a loopback cluster keep every connection
            # on 127.0.0.1 by leaving the host as given while connecting.
            from ray._private import services

            from calibration.run.ray_loopback import keep_loopback

            original = services.resolve_ip_for_localhost
            keep_loopback()
            try:
                ray.init(address=self.address, log_to_driver=False, include_dashboard=False,
                         _node_ip_address="127.0.0.1")
            finally:
                services.resolve_ip_for_localhost = original
            _ray_address = self.address

    def submit(self, kind: str, spec: dict[str, Any], *, timeout_s: float | None = None,
               run_id: str | None = None, owner: JobOwner | None = None) -> RayJobHandle:
        import ray

        if kind not in JOB_KINDS:
            raise ValueError(f"kind={kind!r} not allowed; allowed: {JOB_KINDS}")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s} not allowed: must be > 0")
        self._connect()
        run_id = admit(self.store, kind, {**stored_spec(spec), "runner": self.name, "address": self.address},
                       kinds=JOB_KINDS, owner=owner or self.owner, run_id=run_id)
        task: Callable[..., Any] = ray.remote(num_cpus=self.num_cpus, num_gpus=self.num_gpus,
                                              max_retries=0)(_ray_task)
        try:
            ref = task.remote(kind, spec, run_id, self.store.url, str(REPO_ROOT), timeout_s)
        except BaseException as e:  # not submitted: the run must not hold a place
            why = f"the Ray task could not be submitted: {type(e).__name__}: {e}"
            self.store.set_status(run_id, "failed", why[:500])
            raise
        return _keep(RayJobHandle(run_id, self.store, ref, timeout_s))

    def shutdown(self) -> None:
        global _ray_address
        import ray

        with _ray_lock:
            if ray.is_initialized():
                ray.shutdown()
            _ray_address = None
