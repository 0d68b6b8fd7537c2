"""The child side of profiles.sandbox: the fork server and its pool of workers, each a long-lived process that reads
one visitor file at a time under the limits the operating system enforces.

- The fork server imports and warms the readers once, then forks at most `concurrency` workers (one per call while
  none is idle). A worker is reused across calls, so a call's heap is already mapped and faulted in (a fresh child
  first-touches each page of a ~125 MB heap on a 1,000,000-row CSV: the most of its overhead over an in-process parse).
- Its address space (RLIMIT_AS: its baseline + SPECPLAN_PARSE_MAX_MB) is set once when it starts, before any upload
  byte, and never raised; a worker serves only calls under that same bound (the server forks another for another
  bound). Its CPU limit (RLIMIT_CPU) is re-armed per call, before it reads the call: soft limit = the CPU it has used
  so far + SPECPLAN_PARSE_MAX_CPU_S, so SIGXCPU (whose default action ends the process) stops a call that spends more.
  The parent's wall limit kills the worker.
- A worker holds nothing of a call once it has answered, except what the server gave it (the imported modules and
  the kept catalogues): the call's arguments and result are released, its cycles collected. It retires (exits, the
  next call gets a fresh one) after a memory refusal, after MAX_CALLS calls, or when its resident memory stays more
  than WARM_MB above where it started after malloc_trim; a worker that died (a limit, a crash, killed) is replaced at
  the next call.
- A worker dies with the server (PR_SET_PDEATHSIG) and ends when the server's end of its socket closes; the server
  ends when the app's end of its control socket closes."""

from __future__ import annotations

import ctypes
import gc
import math
import os
import pickle
import resource
import selectors
import signal
import socket
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from profiles.sandbox_io import read_memory_file, receive_blobs

MAX_RESULT_BYTES = 256 * 1024 * 1024  # a pickled result larger than this is not a compact result: refused
# Kept values (catalogues) the fork server holds at once: a session with its own model or GPU has its own catalogue
# (views/sidebar/state.py caches up to 64); the least recently used beyond this is dropped and sent again when named
# again.
MAX_KEPT = 8
# Modules the fork server imports once, so that a worker starts with them loaded (a fork costs milliseconds, an
# import of pyarrow and pandas a second).
PRELOAD = ("profiles.sandbox", "profiles.traffic", "profiles.model_config", "profiles.measured_acceptance")
# A worker keeps up to this much resident memory above its start between calls (the heap a large trace reuses: a
# 1,000,000-row CSV leaves ~125 MB); above it, it trims its heap, and retires if that does not bring it back.
WARM_MB = 320
MAX_CALLS = 200  # calls one worker serves before it retires (a bound on what slow growth a reader could leave)
MESSAGE_BYTES = 64 * 1024  # the largest control message (a call's digests): a few hundred bytes

PR_SET_PDEATHSIG = 1  # linux/prctl.h
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc malloc.h
M_ARENA_MAX = -8  # glibc malloc.h: each arena reserves 64 MiB of address space (RLIMIT_AS counts it); at most 4


@dataclass(frozen=True)
class ChildUsage:
    """What a worker's call used (for benchmarks and tests): CPU seconds (all its threads, this call), peak RSS (MB,
    this call), the worker's address space when it started (MB), its pid, how many calls it has served and the page
    faults of this call (minor: a page first touched; a count a busy machine does not blur as it blurs time)."""

    cpu_s: float
    peak_mb: float
    baseline_mb: float
    pid: int = 0
    calls: int = 1
    page_faults: int = 0


class Blob:
    """Stands in the pickled call for the i-th bytes argument, which travels in a pipe (profiles.sandbox_io)."""

    def __init__(self, index: int):
        self.index = index


class KeptRef:
    """Stands in the pickled call for the i-th Kept value, which the fork server holds by the digest of its pickle."""

    def __init__(self, index: int):
        self.index, self.digest = index, ""


KEPT: dict[str, tuple[Any, Exception | None]] = {}  # in the fork server and its workers: digest -> (value, error)
_KEPT_FDS: dict[str, int] = {}  # in the fork server: digest -> the memory file it came in (sent on to workers)


def _unref(v: Any, blobs: list[bytes]) -> Any:
    if isinstance(v, Blob):
        return blobs[v.index]
    if isinstance(v, KeptRef):  # given to the worker with the call, or inherited from the server (_Pool.dispatch)
        value, exc = KEPT[v.digest]
        if exc is not None:
            raise exc
        return value
    return v


def status_kib(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _libc() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _die_with_parent(parent_pid: int) -> None:
    libc = _libc()
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        libc.mallopt(M_ARENA_MAX, 4)
        # A warm process serves large buffers from memory it already holds (glibc raises its mmap threshold after
        # the first frees); a fresh worker would map and fault in every buffer over 128 KiB anew (~9x the page faults
        # of an in-process parse of the same file). Start it where a warm process ends up.
        libc.mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024)
        libc.mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024)
    except AttributeError:  # not Linux/glibc: the wall limit and the rlimits still hold
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _rearm_cpu(max_cpu_s: int) -> None:
    """SIGXCPU once this process has used `max_cpu_s` more CPU seconds than now (the hard limit stays: an
    unprivileged process cannot raise it again for the next call; SIGXCPU repeats each second past the soft one)."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(use.ru_utime + use.ru_stime) + max_cpu_s
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _worker(sock: socket.socket, server_pid: int, max_mb: int) -> None:
    """Set the address-space bound, then serve the calls the server hands over, one at a time, until it retires."""
    _die_with_parent(server_pid)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    base = status_kib("VmSize") * 1024  # address space of the interpreter and its imports, before any upload byte
    cap = base + max_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    base_rss_kib, calls, libc = status_kib("VmRSS"), 0, _libc()
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, MESSAGE_BYTES, MAX_KEPT + 1)
        except OSError:
            msg, fds = b"", []
        if not msg or not fds:  # the server closed its end: retired, or the server is gone
            os._exit(0)
        max_cpu_s, given, stale = pickle.loads(msg)
        _rearm_cpu(max_cpu_s)
        for digest in stale:
            KEPT.pop(digest, None)
        for digest, fd in zip(given, fds[:-1], strict=True):
            KEPT[digest] = _unpickle_kept(read_memory_file(fd))
        calls += 1
        conn = Connection(fds[-1])
        answer, keep = _call(conn, base, calls)
        del fds
        if keep and status_kib("VmRSS") - base_rss_kib > WARM_MB * 1024 and libc is not None:
            gc.collect()
            libc.malloc_trim(0)
        keep = keep and calls < MAX_CALLS and status_kib("VmRSS") - base_rss_kib <= WARM_MB * 1024
        try:
            sock.send(b"d" if keep else b"r")  # before the answer: the server may hand the next call over at once
            for part in answer:
                conn.send_bytes(part)
        except OSError:  # the caller stopped waiting: what it would have read is dropped with this worker
            keep = False
        conn.close()
        del answer, conn
        if not keep:
            os._exit(0)
        gc.collect()  # the call's cycles (an error's traceback holds its frames), off the caller's path


def _unpickle_kept(data: bytes) -> tuple[Any, Exception | None]:
    _digest, value, _drop = pickle.loads(data)
    try:
        return pickle.loads(value), None
    except Exception as exc:  # noqa: BLE001 - raised in each call that is given it, as unpickling there would
        return None, exc


def _call(conn: Connection, base: int, calls: int) -> tuple[list[bytes], bool]:
    """Receive one call and its bytes on `conn`, run it: the messages of its answer (its usage, then ("ok", result)
    or the error) and whether this worker may serve another call."""
    conn.send_bytes(pickle.dumps(("pid", os.getpid())))
    with open("/proc/self/clear_refs", "w") as fh:  # "5": the peak RSS restarts from the current RSS, for this call
        fh.write("5")
    before = resource.getrusage(resource.RUSAGE_SELF)
    keep = True
    try:
        fn, args, kwargs, sizes = pickle.loads(conn.recv_bytes())
        blobs = receive_blobs(conn.fileno(), sizes)
        args = tuple(_unref(a, blobs) for a in args)
        kwargs = {k: _unref(v, blobs) for k, v in kwargs.items()}
        del blobs
        result = fn(*args, **kwargs)
        del args, kwargs
        payload = pickle.dumps(("ok", result), protocol=pickle.HIGHEST_PROTOCOL)
        del result
        if len(payload) > MAX_RESULT_BYTES:
            payload = pickle.dumps(("large", None))
    except MemoryError:
        payload, keep = pickle.dumps(("memory", None)), False  # its heap may be left fragmented: a fresh worker next
    except BaseException as exc:  # noqa: BLE001 - every error goes back to the parent, as itself where it can
        payload = _pickled_error(exc)
        del exc
    use = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = use.ru_utime + use.ru_stime - before.ru_utime - before.ru_stime
    usage = ChildUsage(cpu_s=cpu_s, peak_mb=status_kib("VmHWM") / 1024, baseline_mb=base / 2**20, pid=os.getpid(),
                       calls=calls, page_faults=use.ru_minflt - before.ru_minflt)
    return [pickle.dumps(usage), payload], keep


def _pickled_error(exc: BaseException) -> bytes:
    """The error as (its class, args, attributes), rebuilt without calling __init__ (TrafficError's takes problems,
    its args hold the message); an error that cannot be pickled comes back as its type's name and message."""
    try:
        return pickle.dumps(("error", (type(exc), exc.args, dict(vars(exc)))), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an unpicklable value in the error: its words still come back
        return pickle.dumps(("foreign", (type(exc).__name__, str(exc)[:2000])))


# --- the fork server ------------------------------------------------------------------------------------------


@dataclass
class _Worker:
    pid: int
    sock: socket.socket  # the server's end of the worker's own socket
    max_mb: int
    has: set[str]  # the kept digests it holds
    call: Connection | None = None  # the server's copy of the call it serves: told ("exit", status) if it dies
    ended: bool = False  # its end of the socket closed: it is exiting (reap tells its call how it ended)


class _Pool:
    """The fork server's workers: hands each call to an idle worker under the same memory bound, else forks one (at
    most `concurrency` in all, idle ones of another bound retired first); reaps them and tells a call whose worker
    died how it ended."""

    def __init__(self, sel: Any, closed_in_worker: list[Any]):
        self.sel, self.closed_in_worker = sel, closed_in_worker
        self.workers: dict[int, _Worker] = {}

    def dispatch(self, max_mb: int, max_cpu_s: int, concurrency: int, digests: list[str], fd: int) -> None:
        for _attempt in range(3):
            w = next((w for w in self.workers.values() if w.call is None and not w.ended and w.max_mb == max_mb),
                     None)
            if w is None:
                for idle in [w for w in self.workers.values() if w.call is None and not w.ended]:
                    if sum(not x.ended for x in self.workers.values()) < concurrency:
                        break
                    self.retire(idle)
                w = self.fork(max_mb, fd)
            given = [d for d in dict.fromkeys(digests) if d not in w.has and d in _KEPT_FDS]
            stale = [d for d in w.has if d not in KEPT]
            try:
                socket.send_fds(w.sock, [pickle.dumps((max_cpu_s, given, stale))], [_KEPT_FDS[d] for d in given] + [fd])
            except OSError:  # it died between calls (killed, not reaped yet): another takes the call
                self.retire(w, kill=True)
                continue
            w.has = (w.has | set(given)) - set(stale)
            w.call = Connection(fd)
            return
        os.close(fd)  # the caller reads end of file: "killed"

    def fork(self, max_mb: int, call_fd: int) -> _Worker:
        """A new worker under `max_mb`; `call_fd` (the call about to be handed to it, on its socket) is not inherited:
        the worker holds only what it is handed, so the call's socket closes with its answer."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                self.sel.close()
                for thing in self.closed_in_worker + [w.sock for w in self.workers.values()] + [ours]:
                    thing.close()
                for w in self.workers.values():
                    if w.call is not None:
                        w.call.close()
                for inherited in [*_KEPT_FDS.values(), call_fd]:
                    os.close(inherited)
                _worker(theirs, server_pid, max_mb)
                code = 0
            finally:
                os._exit(code)
        theirs.close()
        w = _Worker(pid, ours, max_mb, set(KEPT))
        self.workers[pid] = w
        self.sel.register(ours, selectors.EVENT_READ, w)
        return w

    def retire(self, w: _Worker, kill: bool = False) -> None:
        """Out of the pool: its socket closed (it exits at end of file), killed when it may not read it."""
        if self.workers.pop(w.pid, None) is None:
            return
        if not w.ended:
            self.sel.unregister(w.sock)
        w.sock.close()
        if kill:
            try:
                os.kill(w.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if w.call is not None:
            w.call.close()

    def heard(self, w: _Worker) -> None:
        """A worker's word: "d" (answered, serves the next call), "r" (answered, retires), or its end closed."""
        try:
            word = w.sock.recv(16)
        except OSError:
            word = b""
        if word == b"d":
            if w.call is not None:
                w.call.close()
                w.call = None
            return
        if w.call is not None and word == b"r":
            w.call.close()
            w.call = None
        if word == b"r":
            self.retire(w)
        elif not word:  # it is exiting: out of the selector until reap() tells its call how it ended
            w.ended = True
            self.sel.unregister(w.sock)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            w = self.workers.get(pid)
            if w is None:
                continue
            call, w.call = w.call, None
            self.retire(w)
            if call is not None:
                try:
                    call.send_bytes(pickle.dumps(("exit", os.waitstatus_to_exitcode(status))))
                except OSError:  # the app stopped waiting for this call
                    pass
                call.close()


def serve(ctrl_fd: int) -> None:
    """The fork server's loop: each request on the control socket is ("k",) with a kept value's memory file, or
    ("c", max_mb, max_cpu_s, concurrency, digests) with one socket for a call, which a worker serves. The server ends
    when the app does (end of file on the control socket); its workers then die with it (PR_SET_PDEATHSIG)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    _warm()
    # The collector would visit every preloaded object in each worker and so copy the server's pages into it (copy on
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
    pool = _Pool(sel, [ctrl, _Fd(wake_r), _Fd(wake_w)])
    while True:
        # the workers' words first: a worker says it is done before it answers, so a request the answer led to finds
        # it idle, even when both arrived since the last select
        for key, _ in sorted(sel.select(), key=lambda event: event[0].fileobj is ctrl):
            if key.fileobj is ctrl:
                try:
                    msg, fds, _flags, _addr = socket.recv_fds(ctrl, MESSAGE_BYTES, 1)
                except OSError:
                    msg, fds = b"", []
                if not msg:
                    os._exit(0)
                if not fds:
                    continue
                req = pickle.loads(msg)
                if req[0] == "k":  # a Kept value: (digest, its pickle, the digests to drop), in a memory file
                    _keep(fds[0])
                else:
                    pool.dispatch(*req[1:], fds[0])
            elif key.fileobj == wake_r:
                os.read(wake_r, 4096)
            else:
                pool.heard(key.data)
        pool.reap()


class _Fd:
    def __init__(self, fd: int):
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)


def _keep(fd: int) -> None:
    """In the fork server: hold a Kept value (and its memory file, for workers forked before it came), and drop those
    the app no longer sends."""
    digest, data, drop = pickle.loads(read_memory_file(os.dup(fd)))
    for d in drop:
        KEPT.pop(d, None)
        old = _KEPT_FDS.pop(d, None)
        if old is not None:
            os.close(old)
    try:
        KEPT[digest] = (pickle.loads(data), None)
    except Exception as exc:  # noqa: BLE001 - raised in each call that is given it, as unpickling there would
        KEPT[digest] = (None, exc)
    if digest in _KEPT_FDS:
        os.close(_KEPT_FDS[digest])
    _KEPT_FDS[digest] = fd
    if drop:  # let a dropped value's cycles be collected, then set the rest aside again
        gc.unfreeze()
        gc.collect()
    gc.freeze()  # out of the workers' collections, as the preloaded modules are (serve)


def _warm() -> None:
    """Do once in the server what each worker would otherwise do again (~1 s): import the modules a pickled catalogue
    refers to (planner's, scipy through them) and the readers' lazy imports, by parsing the shipped samples. Arrow
    re-creates its thread pools in a forked worker (its at-fork handlers)."""
    from pathlib import Path

    from profiles import load_catalog
    from profiles.traffic import TrafficError, inspect_upload, parse_traffic
    from profiles.traffic.language import warm

    cat = load_catalog()
    warm()  # the language detector's model (~1-2 s): loaded once, shared by every worker forked after
    for path in sorted((Path(__file__).resolve().parent / "samples").iterdir()):
        if path.suffix in (".csv", ".jsonl", ".parquet"):
            try:
                inspect_upload(path.name, path.read_bytes())
                parse_traffic(path.name, path.read_bytes(), cat)
            except (TrafficError, OSError):  # a sample that does not parse warms less, nothing more
                pass
