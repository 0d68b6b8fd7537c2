"""Child processes never outlive their parent: how a calibration job starts the children that measure.

Every child that measures (an engine configuration, a `vllm serve`, a head-training step) is a `GroupChild`:
- it leads its own session, so that it and the processes vLLM spawns under it (its engine core, workers) form
  one process group, killed as one;
- its parent-death signal is set (Linux prctl PR_SET_PDEATHSIG), so the kernel signals it when the job dies,
  however the job dies; the child's SIGTERM handler (`kill_own_group`) takes its group down with it;
- a watcher thread waits for the child's own exit and kills its group at once: vLLM's engine core does not
  notice its parent's death, and before this an engine child killed with SIGKILL left it running (7.4 GB
  resident) with the job waiting on the pipe the engine core still held, until the job's deadline;
- the job tracks the group, and at its deadline kills every tracked group, then its own.

Processes a child spawns with multiprocessing's spawn method (vLLM's engine core on a CPU) can carry their own
parent-death signal: `die_with_spawning_parent`, called at import of the child's main module.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any

# Process groups of the job's measuring children (each its own session), killed with the job at its deadline.
_CHILD_GROUPS: set[int] = set()
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# libc is loaded here, in the parent: a preexec_fn runs between fork and exec, where loading a library can
# deadlock on a lock another thread of the parent held at the fork.
try:
    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - not a Linux libc: no parent-death signal
    _LIBC = None


def track_child_group(pgid: int) -> None:
    _CHILD_GROUPS.add(pgid)


def untrack_child_group(pgid: int) -> None:
    _CHILD_GROUPS.discard(pgid)


def kill_group(pgid: int) -> None:
    """SIGKILL a process group; one that is gone already is no error."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tracked_groups() -> None:
    for pgid in list(_CHILD_GROUPS):
        kill_group(pgid)


def set_parent_death_signal(sig: int, parent_pid: int | None = None) -> bool:
    """Have the kernel send `sig` to this process when the thread that started it exits (prctl
    PR_SET_PDEATHSIG). A parent that died before this call sends nothing: with `parent_pid` given, an orphan
    (its parent is no longer `parent_pid`) sends `sig` to itself at once. False where the call is unavailable."""
    prctl = getattr(_LIBC, "prctl", None)
    if prctl is None or prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)
    return True


def parent_death_hook(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A preexec_fn that sets the child's parent-death signal to `sig`, for a child of this very process."""
    parent = os.getpid()

    def hook() -> None:
        set_parent_death_signal(sig, parent)

    return hook


def die_with_parent() -> None:
    """preexec_fn: SIGTERM this child when its parent dies, however it dies; the child's handler
    (`kill_own_group`) then takes vLLM's engine-core and worker processes down with it. SIGKILL here would
    orphan them when no one watches the group: they do not notice their parent's death."""
    set_parent_death_signal(signal.SIGTERM)


def die_with_spawning_parent(module_name: str) -> None:
    """Call at the top of a child's main module with its `__name__`: in a process that multiprocessing's spawn
    method started from it (`__mp_main__`: vLLM's engine core and workers on a CPU), SIGKILL this process when
    the process that spawned it dies. A no-op in the child itself and on import elsewhere."""
    # (multiprocessing names the parent only after this import, so a parent gone before it is not detected
    # here; the job's watch of the child's process group covers that instant.)
    if module_name == "__mp_main__":
        set_parent_death_signal(signal.SIGKILL)


def kill_own_group(_signum: int, _frame: Any) -> None:
    """SIGTERM handler of a child that leads its own process group (start_new_session), which also holds the
    engine-core and worker processes vLLM spawned: kill the whole group."""
    os.killpg(os.getpgid(0), signal.SIGKILL)


def exit_description(returncode: int) -> str:
    """A child's exit in words: 'exited (signal 9, SIGKILL)' or 'exited with code 1'."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        return f"exited (signal {-returncode}, {name})"
    return f"exited with code {returncode}"


class GroupChild:
    """A child process in its own session that dies with this process (parent-death signal `death_signal`),
    is killed with the job at its deadline (tracked), and whose whole process group is killed the moment the
    child itself exits, so nothing it spawned outlives it. Use as a context manager: leaving kills the group.

    `popen_kwargs` go to subprocess.Popen (stdin, stdout, env, ...)."""

    def __init__(self, cmd: Sequence[str], *, death_signal: int = signal.SIGTERM, track: bool = True,
                 **popen_kwargs: Any) -> None:
        self.proc = subprocess.Popen(list(cmd), start_new_session=True, preexec_fn=parent_death_hook(death_signal),
                                     **popen_kwargs)
        self.pid = self.proc.pid
        self._tracked = track
        if track:
            track_child_group(self.pid)
        self.exited = threading.Event()  # set once the child exited and its group was killed
        threading.Thread(target=self._watch, daemon=True, name=f"group-watch-{self.pid}").start()

    def _watch(self) -> None:
        """Wait for the child's exit without reaping it (WNOWAIT: the group id cannot be reused before the
        kill), then kill its group: the processes it left behind, whether it ended or was killed."""
        try:
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:  # already reaped by Popen.wait: the group may still hold its children
            pass
        kill_group(self.pid)
        self.exited.set()

    def close(self) -> None:
        """Kill the child's group (if still there), stop tracking it, reap the child."""
        kill_group(self.pid)
        if self._tracked:
            untrack_child_group(self.pid)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed process is reaped at once
            pass

    def __enter__(self) -> GroupChild:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
