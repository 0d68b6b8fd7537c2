"""Every visitor file is read inside limits the operating system enforces: `run_bounded(fn, *args, refuse=...)` runs
a reader in a child process (forked from a fork server that imported the readers once, so a call costs milliseconds,
not an import of pyarrow) whose address space (RLIMIT_AS) and CPU time (RLIMIT_CPU) are capped before it receives a
byte of the upload, and that the parent kills at a wall-clock limit. A reader's forgotten guard then costs one clean
refusal, not the server.

- An argument wrapped in `Kept` (the catalogue) is pickled once per object, unpickled once in the fork server (keyed
  by its pickle's digest) and inherited by each child: a call pays neither (~30 ms in a fresh child). It must not
  change in place after its first call (a Catalog is frozen; with_models and with_hardware make new ones).
- What comes back is the reader's result, pickled (a TrafficProfile, a FileInfo, a list of values: compact by
  construction); the parent never holds the decoded file.
- An error raised in the child comes back as the same type with the same fields (TrafficError's problems, total
  and at_least; a ModelConfigError's message). A child that hits a limit (MemoryError, killed by SIGXCPU or SIGKILL,
  the wall clock) becomes `refuse(why)`: the caller's own error type, with `why` in product words.
- The child dies with its parent, the fork server (PR_SET_PDEATHSIG); the server ends when the app's end of its
  control socket closes, however the app ends. At most `concurrency` children run at once.

Limits are settings (environment variables, read per call): SPECPLAN_PARSE_MAX_MB (address space above the child's
own baseline), SPECPLAN_PARSE_MAX_CPU_S, SPECPLAN_PARSE_MAX_WALL_S, SPECPLAN_PARSE_CONCURRENCY."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import os
import pickle
import resource
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

from profiles.sandbox_io import memory_file, read_memory_file, receive_blobs, send_blobs

T = TypeVar("T")

# Defaults, measured by running profiles.uploads.read_traffic under smaller bounds (on 2 shared CPU cores):
# a 1,000,000-row per-request CSV (45 MB) needs 256-384 MB above the child's baseline, the 2,000,000-row limit (90
# MB) under 512 MB and ~11 s, the same rows as Parquet under 256 MB, a 300,000-row xlsx under 256 MB but ~10 s.
# The memory bound leaves room for the readers' own budget (MAX_DECODED_BYTES: 512 MiB of decoded Parquet columns,
# decoded and copied once); CPU and wall leave room for a 2,000,000-row xlsx on a busy machine.
DEFAULT_MAX_MB = 1536
DEFAULT_MAX_CPU_S = 120
DEFAULT_MAX_WALL_S = 300.0
DEFAULT_CONCURRENCY = 2  # readers at once; each may take DEFAULT_MAX_MB
MAX_RESULT_BYTES = 256 * 1024 * 1024  # a pickled result larger than this is not a compact result: refused
# Kept values (catalogues) the fork server holds at once: a session with its own model or GPU has its own catalogue
# (views/sidebar/state.py caches up to 64); the least recently used beyond this is dropped and sent again when named
# again.
MAX_KEPT = 8
# Modules the fork server imports once, so that a child starts with them loaded (a fork costs milliseconds, an import
# of pyarrow and pandas a second).
PRELOAD = ("profiles.sandbox", "profiles.traffic", "profiles.model_config", "profiles.measured_acceptance")

PR_SET_PDEATHSIG = 1  # linux/prctl.h
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc malloc.h
M_ARENA_MAX = -8  # glibc malloc.h: each arena reserves 64 MiB of address space (RLIMIT_AS counts it); at most 4


@dataclass(frozen=True)
class ParseLimits:
    """What one reader may use: address space above the child's baseline (MB), CPU seconds, wall seconds."""

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


@dataclass(frozen=True)
class ChildUsage:
    """What a child that answered used (for benchmarks): CPU seconds (all its threads), peak RSS (MB) and its address
    space before the call (MB)."""

    cpu_s: float
    peak_mb: float
    baseline_mb: float


_last = threading.local()


def last_usage() -> ChildUsage | None:
    """The usage of this thread's last run_bounded child that answered (a result or an error; None: none, or it was
    stopped at a limit before it could say)."""
    return getattr(_last, "usage", None)


# --- the child ------------------------------------------------------------------------------------------------


class _Blob:
    """Stands in the pickled call for the i-th bytes argument, which travels in a pipe (profiles.sandbox_io)."""

    def __init__(self, index: int):
        self.index = index


class Kept:
    """An argument many calls share (the catalogue), held by the fork server (module docstring); the reader gets it."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


class _KeptRef:
    """Stands in the pickled call for the i-th Kept value, which the fork server holds by the digest of its pickle."""

    def __init__(self, index: int):
        self.index, self.digest = index, ""


_KEPT: dict[str, tuple[Any, Exception | None]] = {}  # in the fork server and its children: digest -> (value, error)


def _unref(v: Any, blobs: list[bytes]) -> Any:
    if isinstance(v, _Blob):
        return blobs[v.index]
    if isinstance(v, _KeptRef):  # sent to the server before the call, on the same control socket (_start_child)
        value, exc = _KEPT[v.digest]
        if exc is not None:
            raise exc
        return value
    return v


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _die_with_parent(parent_pid: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        libc.mallopt(M_ARENA_MAX, 4)
        # A warm process serves large buffers from memory it already holds (glibc raises its mmap threshold after
        # the first frees); a fresh child would map and fault in every buffer over 128 KiB anew (~9x the page faults
        # of an in-process parse of the same file). Start it where a warm process ends up.
        libc.mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024)
        libc.mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024)
    except (OSError, AttributeError):  # not Linux/glibc: the wall limit and the rlimits still hold
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _child(conn: Connection, parent_pid: int) -> None:
    """Send its pid, set the limits, receive the call and its bytes, run it, send back ("ok", result) or the error."""
    _die_with_parent(parent_pid)
    conn.send_bytes(pickle.dumps(("pid", os.getpid())))
    max_mb, max_cpu_s = pickle.loads(conn.recv_bytes(1024))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    base = _status_kib("VmSize") * 1024  # address space of the interpreter and its imports, before any upload byte
    cap = base + max_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    # SIGXCPU at the soft limit (its default action ends the process); SIGKILL one second later if it is caught
    resource.setrlimit(resource.RLIMIT_CPU, (max_cpu_s, max_cpu_s + 1))
    try:
        fn, args, kwargs, sizes = pickle.loads(conn.recv_bytes())
        blobs = receive_blobs(conn.fileno(), sizes)
        args = tuple(_unref(a, blobs) for a in args)
        kwargs = {k: _unref(v, blobs) for k, v in kwargs.items()}
        del blobs
        result = fn(*args, **kwargs)
        del args, kwargs
        payload = pickle.dumps(("ok", result), protocol=pickle.HIGHEST_PROTOCOL)
    except MemoryError:
        payload = pickle.dumps(("memory", None))
    except BaseException as exc:  # noqa: BLE001 - every error goes back to the parent, as itself where it can
        payload = _pickled_error(exc)
    use = resource.getrusage(resource.RUSAGE_SELF)
    conn.send_bytes(pickle.dumps(ChildUsage(cpu_s=use.ru_utime + use.ru_stime, peak_mb=_status_kib("VmHWM") / 1024,
                                            baseline_mb=base / 2**20)))
    conn.send_bytes(payload)
    conn.close()


def _pickled_error(exc: BaseException) -> bytes:
    """The error as (its class, args, attributes), rebuilt without calling __init__ (TrafficError's takes problems,
    its args hold the message); an error that cannot be pickled comes back as its type's name and message."""
    try:
        return pickle.dumps(("error", (type(exc), exc.args, dict(vars(exc)))), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an unpicklable value in the error: its words still come back
        return pickle.dumps(("foreign", (type(exc).__name__, str(exc)[:2000])))


def _rebuild(cls: type[BaseException], args: tuple, attrs: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(attrs)
    return exc


# --- the server: a clean process with the readers imported, forking one child per call ---------------------------


def _serve(ctrl_fd: int) -> None:
    """The fork server's loop: each request on the control socket carries one socket for a call; a forked child
    runs the call on it, and the server writes ("exit", status) on it once the child is reaped. The server ends when
    the app does (end of file on the control socket); its children then die with it (PR_SET_PDEATHSIG)."""
    import importlib
    import selectors
    import socket

    for name in PRELOAD:
        importlib.import_module(name)
    _warm()
    # The collector would visit every preloaded object in each child and so copy the server's pages into it (copy on
    # write): the imported objects are set aside for good, as CPython's gc.freeze documents for pre-fork servers.
    gc.collect()
    gc.freeze()
    ctrl = socket.socket(fileno=ctrl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(ctrl, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    calls: dict[int, Connection] = {}
    while True:
        for key, _ in sel.select():
            if key.fileobj is ctrl:
                try:
                    msg, fds, _flags, _addr = socket.recv_fds(ctrl, 1, 1)
                except OSError:
                    msg, fds = b"", []
                if not msg:
                    os._exit(0)
                if not fds:
                    continue
                if msg == b"k":  # a Kept value: (digest, its pickle, the digests to drop), in a memory file
                    _keep(fds[0])
                    continue
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    ctrl.close()
                    os.close(wake_r)
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for c in calls.values():
                        c.close()
                    code = 1
                    try:
                        _child(Connection(fds[0]), os.getppid())
                        code = 0
                    finally:
                        os._exit(code)
                calls[pid] = Connection(fds[0])
            else:
                os.read(wake_r, 4096)
        while calls:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = calls.pop(pid, None)
            if conn is not None:
                try:
                    conn.send_bytes(pickle.dumps(("exit", os.waitstatus_to_exitcode(status))))
                except OSError:  # the app stopped waiting for this call
                    pass
                conn.close()


def _keep(fd: int) -> None:
    """In the fork server: hold a Kept value its children will inherit, and drop those the app no longer sends."""
    digest, data, drop = pickle.loads(read_memory_file(fd))
    for d in drop:
        _KEPT.pop(d, None)
    try:
        _KEPT[digest] = (pickle.loads(data), None)
    except Exception as exc:  # noqa: BLE001 - raised in each child that is given it, as unpickling there would
        _KEPT[digest] = (None, exc)
    if drop:  # let a dropped value's cycles be collected, then set the rest aside again
        gc.unfreeze()
        gc.collect()
    gc.freeze()  # out of the children's collections, as the preloaded modules are (_serve)


def _warm() -> None:
    """Do once in the server what each child would otherwise do again (~1 s a call): import the modules a pickled
    catalogue refers to (planner's, scipy through them) and the readers' lazy imports, by parsing the shipped
    samples. Arrow re-creates its thread pools in a forked child (its at-fork handlers)."""
    from pathlib import Path

    from profiles import load_catalog
    from profiles.traffic import TrafficError, inspect_upload, parse_traffic

    cat = load_catalog()
    for path in sorted((Path(__file__).resolve().parent / "samples").iterdir()):
        if path.suffix in (".csv", ".jsonl", ".parquet"):
            try:
                inspect_upload(path.name, path.read_bytes())
                parse_traffic(path.name, path.read_bytes(), cat)
            except (TrafficError, OSError):  # a sample that does not parse warms less, nothing more
                pass


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
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    code = (f"import sys; sys.path[:0] = {[p for p in sys.path if p]!r}; "
            f"from profiles.sandbox import _serve; _serve({theirs.fileno()})")
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
                    socket.send_fds(ctrl, [b"k"], [fd])
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


def _start_child(kept: list[Any]) -> tuple[Connection, list[str]]:
    """A connection to a new child of the fork server (which sends its pid first) and the Kept values' digests."""
    import socket

    global _server
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with _lock:
        for attempt in range(2):
            try:
                ctrl = _control()
                digests = _send_kept(ctrl, _server[2], kept)
                socket.send_fds(ctrl, [b"c"], [theirs.fileno()])
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
    """fn(*args, **kwargs) in a child process under `limits` (default: limits_from_env()). Returns its result;
    re-raises its error as the same type with the same fields; raises refuse(why) when the child needs more than a
    limit allows, where `why` reads e.g. "this traffic file needs more than 1,536 MB of memory to read (the server's
    bound, SPECPLAN_PARSE_MAX_MB)". `fn` must be importable by name (a module-level function)."""
    lim = limits or limits_from_env()
    blobs: list[bytes] = []
    kept: list[Any] = []

    def lift(v: Any) -> Any:
        if isinstance(v, (bytes, bytearray, memoryview)):
            blobs.append(v)
            return _Blob(len(blobs) - 1)
        if isinstance(v, Kept):
            kept.append(v.value)
            return _KeptRef(len(kept) - 1)
        return v

    args, kwargs = tuple(lift(a) for a in args), {k: lift(v) for k, v in kwargs.items()}
    sizes = [memoryview(b).nbytes for b in blobs]
    _last.usage = None
    with _slot(lim.concurrency):
        kind, value = _run((fn, args, kwargs, sizes), kept, blobs, lim)
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
    conn, digests = _start_child(kept)
    for ref in (v for part in (call[1], call[2].values()) for v in part if isinstance(v, _KeptRef)):
        ref.digest = digests[ref.index]
    pid = 0
    deadline = time.monotonic() + lim.max_wall_s
    try:
        conn.send_bytes(pickle.dumps((lim.max_mb, lim.max_cpu_s)))
        try:
            conn.send_bytes(pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL))
            send_blobs(conn.fileno(), blobs, deadline)
        except (BrokenPipeError, ConnectionResetError):  # the child died while receiving (its memory bound)
            pass
        result: tuple[str, Any] | None = None  # set when the parent stopped the child: wait for its reaping
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
            except (EOFError, ConnectionError):  # the server is gone, and the child with it
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
                return result or (_death(value), None)
            elif result is None:  # the child's own word: it exits by itself right after (os._exit, nothing to wait on)
                return kind, value
    finally:
        conn.close()


def _death(exitcode: int | None) -> str:
    """Why a child ended without sending a result: its CPU bound (SIGXCPU), else its memory bound (an allocation that
    failed where Python could not raise MemoryError: C++'s bad_alloc aborts), SIGKILL (the CPU hard limit, one
    second after SIGXCPU, or the kernel's out-of-memory killer), else a crash."""
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
