"""Every visitor file is read inside limits the operating system enforces: `run_bounded(fn, *args, refuse=...)` runs
a reader in a worker process (one of a small pool forked from a fork server that imported the readers once, so a
call costs milliseconds, not an import of pyarrow) whose address space (RLIMIT_AS, set when it starts) and CPU time
(RLIMIT_CPU, re-armed for each call) are capped before it receives a byte of the upload, and that the parent kills at
a wall-clock limit. A reader's forgotten guard then costs one clean refusal, not the server. The workers and their
limits: profiles.sandbox_worker.

- An argument wrapped in `Kept` (the catalogue) is pickled once per object, unpickled once in the fork server (keyed
  by its pickle's digest) and inherited by each worker it forks, or given once to a worker forked before it: a call
  pays neither (~30 ms). It must not change in place after its first call (a Catalog is frozen; with_models and
  with_hardware make new ones).
- What comes back is the reader's result, pickled (a TrafficProfile, a FileInfo, a list of values: compact by
  construction); the parent never holds the decoded file.
- An error raised in the worker comes back as the same type with the same fields (TrafficError's problems, total
  and at_least; a ModelConfigError's message). A worker that hits a limit (MemoryError, killed by SIGXCPU or SIGKILL,
  the wall clock) becomes `refuse(why)`: the caller's own error type, with `why` in product words; the next call
  gets a fresh worker.
- The worker dies with its parent, the fork server (PR_SET_PDEATHSIG); the server ends when the app's end of its
  control socket closes, however the app ends. At most `concurrency` calls run at once.

Limits are settings (environment variables, read per call): SPECPLAN_PARSE_MAX_MB (address space above the worker's
own baseline), SPECPLAN_PARSE_MAX_CPU_S, SPECPLAN_PARSE_MAX_WALL_S, SPECPLAN_PARSE_CONCURRENCY."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import signal
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from profiles.sandbox_io import memory_file, send_blobs
from profiles.sandbox_worker import MAX_KEPT, MAX_RESULT_BYTES, Blob, ChildUsage, KeptRef

T = TypeVar("T")

# Defaults, measured by running profiles.uploads.read_traffic under smaller bounds (on 2 shared CPU cores):
# a 1,000,000-row per-request CSV (45 MB) needs 256-384 MB above the child's baseline, the 2,000,000-row limit (90
# MB) under 512 MB and ~11 s, the same rows as Parquet under 256 MB, a 300,000-row xlsx under 256 MB but ~10 s.
# The memory bound leaves room for the readers' own budget (MAX_DECODED_BYTES: 512 MiB of decoded Parquet columns,
# decoded and copied once); CPU and wall leave room for a 2,000,000-row xlsx on a busy machine.
DEFAULT_MAX_MB = 1536
DEFAULT_MAX_CPU_S = 120
DEFAULT_MAX_WALL_S = 300.0
DEFAULT_CONCURRENCY = 2  # readers at once (and workers kept); each may take DEFAULT_MAX_MB

__all__ = ["MAX_KEPT", "MAX_RESULT_BYTES", "ChildUsage", "Kept", "ParseLimits", "last_usage", "limits_from_env",
           "prepare", "run_bounded", "start"]


@dataclass(frozen=True)
class ParseLimits:
    """What one reader may use: address space above the worker's baseline (MB), CPU seconds, wall seconds."""

    max_mb: int = DEFAULT_MAX_MB
    max_cpu_s: int = DEFAULT_MAX_CPU_S
    max_wall_s: float = DEFAULT_MAX_WALL_S
    concurrency: int = DEFAULT_CONCURRENCY


def _env_number(name: str, default: float, kind: type, low: float) -> Any:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return kind(default)
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a number >= {low:g}") from None
    if not value >= low:
        raise ValueError(f"{name}={raw!r}: expected a number >= {low:g}")
    return value


def limits_from_env() -> ParseLimits:
    """The limits set by SPECPLAN_PARSE_MAX_MB, SPECPLAN_PARSE_MAX_CPU_S, SPECPLAN_PARSE_MAX_WALL_S and
    SPECPLAN_PARSE_CONCURRENCY (defaults: 1536 MB, 120 s, 300 s, 2)."""
    return ParseLimits(max_mb=_env_number("SPECPLAN_PARSE_MAX_MB", DEFAULT_MAX_MB, int, 64),
                       max_cpu_s=_env_number("SPECPLAN_PARSE_MAX_CPU_S", DEFAULT_MAX_CPU_S, int, 1),
                       max_wall_s=_env_number("SPECPLAN_PARSE_MAX_WALL_S", DEFAULT_MAX_WALL_S, float, 0.1),
                       concurrency=_env_number("SPECPLAN_PARSE_CONCURRENCY", DEFAULT_CONCURRENCY, int, 1))


_last = threading.local()


def last_usage() -> ChildUsage | None:
    """The usage of this thread's last run_bounded call whose worker answered (a result or an error; None: none, or
    it was stopped at a limit before it could say)."""
    return getattr(_last, "usage", None)


class Kept:
    """An argument many calls share (the catalogue), held by the fork server (module docstring); the reader gets it."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


def _rebuild(cls: type[BaseException], args: tuple, attrs: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(attrs)
    return exc


# --- the parent -----------------------------------------------------------------------------------------------

_lock = threading.Lock()
_server: Any = None  # (Popen, control socket, OrderedDict of the Kept digests it holds, least recently used first)
_kept_ids: dict[int, tuple[weakref.ref, str]] = {}  # id(a Kept value) -> (a weak reference to it, its pickle's digest)
_slots: dict[int, threading.BoundedSemaphore] = {}


def _control() -> Any:
    """The control socket of the running fork server (started on first use, again if it ended)."""
    global _server
    import socket
    import subprocess

    if _server is not None and _server[0].poll() is None:
        return _server[1]
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # one message per request, with its fds
    code = (f"import sys; sys.path[:0] = {[p for p in sys.path if p]!r}; "
            f"from profiles.sandbox_worker import serve; serve({theirs.fileno()})")
    proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
    theirs.close()
    _server = (proc, ours, OrderedDict())
    return ours


def start() -> None:
    """Start the fork server unless it runs; it imports and warms the readers (seconds) while the caller goes on."""
    if sys.platform == "linux":
        with _lock:
            _control()


def _send_kept(ctrl: Any, held: OrderedDict, kept: list[Any]) -> list[str]:
    """The Kept values' digests; each is sent to the server first unless it holds it (under _lock)."""
    import socket

    digests = []
    for value in kept:
        hit = _kept_ids.get(id(value))
        digest = hit[1] if hit is not None and hit[0]() is value else None
        if digest is None or digest not in held:
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            digest, key = hashlib.sha256(data).hexdigest(), id(value)
            with contextlib.suppress(TypeError):  # not weakly referable: pickled on each call, unpickled once
                _kept_ids[key] = (weakref.ref(value, lambda _r, key=key: _kept_ids.pop(key, None)), digest)
            if digest not in held:
                drop = [held.popitem(last=False)[0] for _ in range(len(held) - MAX_KEPT + 1)]
                fd = memory_file(pickle.dumps((digest, data, drop), protocol=pickle.HIGHEST_PROTOCOL))
                try:
                    socket.send_fds(ctrl, [pickle.dumps(("k",))], [fd])
                finally:
                    os.close(fd)
                held[digest] = None
        held.move_to_end(digest)
        digests.append(digest)
    return digests


def _slot(concurrency: int) -> threading.BoundedSemaphore:
    with _lock:
        return _slots.setdefault(concurrency, threading.BoundedSemaphore(concurrency))


def prepare() -> None:
    """Start the fork server now and wait until it serves (it imports and warms the readers once, a few seconds)
    instead of at the first upload."""
    run_bounded(len, b"", refuse=RuntimeError)


def _start_child(kept: list[Any], lim: ParseLimits) -> tuple[Connection, list[str]]:
    """A connection to a worker of the fork server (which sends its pid first), serving under `lim`, and the Kept
    values' digests."""
    import socket

    global _server
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with _lock:
        for attempt in range(2):
            try:
                ctrl = _control()
                digests = _send_kept(ctrl, _server[2], kept)
                call = ("c", lim.max_mb, lim.max_cpu_s, lim.concurrency, digests)
                socket.send_fds(ctrl, [pickle.dumps(call)], [theirs.fileno()])
                break
            except OSError:
                if attempt:
                    raise
                _server = None
    theirs.close()
    return Connection(ours.detach()), digests


def _mb(n: float) -> str:
    return f"{n:,.0f} MB"


def run_bounded(fn: Callable[..., T], *args: Any, refuse: Callable[[str], BaseException], what: str = "file",
                limits: ParseLimits | None = None, **kwargs: Any) -> T:
    """fn(*args, **kwargs) in a worker process under `limits` (default: limits_from_env()). Returns its result;
    re-raises its error as the same type with the same fields; raises refuse(why) when the worker needs more than a
    limit allows, where `why` reads e.g. "this traffic file needs more than 1,536 MB of memory to read (the server's
    bound, SPECPLAN_PARSE_MAX_MB)". `fn` must be importable by name (a module-level function)."""
    lim = limits or limits_from_env()
    blobs: list[bytes] = []
    kept: list[Any] = []

    def lift(v: Any) -> Any:
        if isinstance(v, (bytes, bytearray, memoryview)):
            blobs.append(v)
            return Blob(len(blobs) - 1)
        if isinstance(v, Kept):
            kept.append(v.value)
            return KeptRef(len(kept) - 1)
        return v

    args, kwargs = tuple(lift(a) for a in args), {k: lift(v) for k, v in kwargs.items()}
    sizes = [memoryview(b).nbytes for b in blobs]
    _last.usage = None
    with _slot(lim.concurrency):
        for _attempt in range(2):  # a worker that died before it took the call (killed while idle): the next one
            kind, value = _run((fn, args, kwargs, sizes), kept, blobs, lim)
            if kind != "unstarted":
                break
    if kind == "unstarted":
        kind = _death(value)
    if kind == "ok":
        return value
    if kind == "error":
        raise _rebuild(*value) from None
    if kind == "foreign":
        raise refuse(f"this {what} could not be read ({value[0]}: {value[1]})")
    raise refuse(_why(kind, what, lim))


def _why(kind: str, what: str, lim: ParseLimits) -> str:
    if kind == "memory":
        return (f"this {what} needs more than {_mb(lim.max_mb)} of memory to read (the server's bound, "
                "SPECPLAN_PARSE_MAX_MB)")
    if kind == "cpu":
        return (f"this {what} needs more than {lim.max_cpu_s:,} s of CPU time to read (the server's bound, "
                "SPECPLAN_PARSE_MAX_CPU_S)")
    if kind == "wall":
        return (f"this {what} takes more than {lim.max_wall_s:,g} s to read (the server's bound, "
                "SPECPLAN_PARSE_MAX_WALL_S)")
    if kind == "killed":
        return (f"this {what} was stopped by the server's bounds ({_mb(lim.max_mb)} of memory, {lim.max_cpu_s:,} s "
                "of CPU time)")
    if kind == "large":
        return f"this {what} reads into more than {_mb(MAX_RESULT_BYTES / 2**20)} (the largest result kept)"
    return f"this {what} stopped its reader ({kind}); nothing was read from it"


def _run(call: tuple, kept: list[Any], blobs: list[bytes], lim: ParseLimits) -> tuple[str, Any]:
    conn, digests = _start_child(kept, lim)
    for ref in (v for part in (call[1], call[2].values()) for v in part if isinstance(v, KeptRef)):
        ref.digest = digests[ref.index]
    pid = 0
    deadline = time.monotonic() + lim.max_wall_s
    try:
        try:
            conn.send_bytes(pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL))
            send_blobs(conn.fileno(), blobs, deadline)
        except (BrokenPipeError, ConnectionResetError):  # the worker died while receiving (its memory bound)
            pass
        result: tuple[str, Any] | None = None  # set when the parent stopped the worker: wait for its reaping
        while True:
            if not conn.poll(max(deadline - time.monotonic(), 0)):
                if result is not None:  # the server did not report the kill within 10 s: go on without it
                    return result
                result = ("wall", None)
                if pid:
                    os.kill(pid, signal.SIGKILL)  # not reaped yet: the server writes "exit" only after it reaps
                deadline = time.monotonic() + 10
                continue
            try:
                payload = conn.recv_bytes(MAX_RESULT_BYTES)
            except (EOFError, ConnectionError):  # the server is gone, and the worker with it
                return result or ("killed", None)
            except OSError:  # longer than MAX_RESULT_BYTES (the rest of that message is left unread)
                if pid:
                    os.kill(pid, signal.SIGKILL)
                return "large", None
            msg = pickle.loads(payload)
            if isinstance(msg, ChildUsage):  # sent just before its answer
                _last.usage = msg
                continue
            kind, value = msg
            if kind == "pid":
                pid = value
            elif kind == "exit":
                return result or ((_death(value), None) if pid else ("unstarted", value))
            elif result is None:  # the worker's own word: it goes on to the next call, or retires by itself
                return kind, value
    finally:
        conn.close()


def _death(exitcode: int | None) -> str:
    """Why a worker ended without sending a result: its CPU bound (SIGXCPU), else its memory bound (an allocation
    that failed where Python could not raise MemoryError: C++'s bad_alloc aborts), SIGKILL (the kernel's
    out-of-memory killer, or another process), else a crash."""
    if exitcode == -signal.SIGXCPU:
        return "cpu"
    if exitcode in (-signal.SIGABRT, 1):
        return "memory"
    if exitcode == -signal.SIGKILL:
        return "killed"
    return f"signal {-exitcode}" if exitcode is not None and exitcode < 0 else f"exit status {exitcode}"


if sys.platform != "linux":  # the limits below rest on Linux (prctl, /proc); elsewhere the reader runs as is
    def run_bounded(fn, *args, refuse, what="file", limits=None, **kwargs):  # type: ignore[no-redef]  # noqa: ARG001
        args = tuple(a.value if isinstance(a, Kept) else a for a in args)
        return fn(*args, **{k: v.value if isinstance(v, Kept) else v for k, v in kwargs.items()})
