"""Process groups of a calibration job: every child that measures (an engine configuration, a `vllm serve`)
runs in its own session, so that it and the processes vLLM spawns under it can be killed as one group.

A job tracks its children's groups here; at its deadline it kills every tracked group, then its own.
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any

# Process groups of the job's measuring children (each its own session), killed with the job at its deadline.
_CHILD_GROUPS: set[int] = set()


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


def die_with_parent() -> None:
    """preexec_fn: SIGTERM this child when its parent dies, however it dies (Linux prctl PR_SET_PDEATHSIG);
    the child's handler (`kill_own_group`) then takes vLLM's engine-core and worker processes down with it.
    SIGKILL here would orphan them: they do not notice their parent's death."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except OSError:
        pass


def kill_own_group(_signum: int, _frame: Any) -> None:
    """SIGTERM handler of a child that leads its own process group (start_new_session), which also holds the
    engine-core and worker processes vLLM spawned: kill the whole group."""
    os.killpg(os.getpgid(0), signal.SIGKILL)
