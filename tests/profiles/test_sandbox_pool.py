"""profiles.sandbox's pool of workers (profiles.sandbox_worker): a worker serves call after call; a call past the CPU
or memory bound is refused in words and the next call gets a fresh worker; a worker killed between calls, or one
that keeps too much memory, is replaced; nothing of one call is left for the next; no worker outlives the fork
server or the app's process."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from profiles import sandbox as sb
from profiles import sandbox_worker
from profiles.sandbox import ParseLimits, last_usage, run_bounded
from profiles.traffic import Problem, TrafficError
from tests.profiles.test_sandbox import (  # noqa: F401 - no_busy_worker_left: the same autouse check
    allocate_3_gb,
    busy_workers,
    no_busy_worker_left,
    spin,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the limits rest on Linux (prctl, /proc)")

ROOT = Path(__file__).resolve().parents[2]
ONE_CPU_S = ParseLimits(max_cpu_s=1, max_wall_s=30)
SMALL = ParseLimits(max_mb=512, max_cpu_s=10, max_wall_s=30)


def _refuse(why: str) -> TrafficError:
    return TrafficError([Problem(None, None, None, f"a file the server can read within its bounds: {why}")])


# readers run in the worker (module-level: the worker imports them by name)
def worker_pid() -> int:
    return os.getpid()


def burn(cpu_s: float) -> int:
    start = time.process_time()
    while time.process_time() - start < cpu_s:
        pass
    return os.getpid()


_HOARD: list[bytearray] = []


def hoard(mb: int) -> int:
    """Keep `mb` MB (each page written) after the call: a reader that leaks."""
    _HOARD.append(bytearray(b"x") * (mb * 2**20))
    return os.getpid()


class Marker:
    """A call's object caught in a cycle (only the collector frees it)."""

    def __init__(self, data: bytes):
        self.data, self.me = data, self


def make_marker(data: bytes) -> int:
    return len(Marker(data).data)


def raise_with_marker(data: bytes) -> None:
    marker = Marker(data)  # noqa: F841 - held by the traceback's frame
    raise ValueError("no good")


def markers_left() -> tuple[int, int]:
    return os.getpid(), sum(isinstance(o, Marker) for o in gc.get_objects())


def _pid(limits: ParseLimits | None = None) -> int:
    return run_bounded(worker_pid, refuse=_refuse, limits=limits)


def _gone(pid: int, wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_the_second_call_is_served_by_the_same_worker():
    run_bounded(len, b"a", refuse=_refuse)
    first = last_usage()
    assert run_bounded(len, b"bc", refuse=_refuse) == 2
    second = last_usage()
    assert (second.pid, second.calls) == (first.pid, first.calls + 1)


def test_the_cpu_limit_is_rearmed_for_each_call():
    # 4 x 0.4 s on one worker: more than its 1 s in all, under it in each call
    pids = {run_bounded(burn, 0.4, refuse=_refuse, limits=ONE_CPU_S) for _ in range(4)}
    assert len(pids) == 1


def test_a_call_past_the_cpu_limit_is_refused_and_the_next_gets_a_fresh_worker():
    before = _pid(ONE_CPU_S)
    with pytest.raises(TrafficError, match=r"this traffic file needs more than 1 s of CPU time to read \(the "
                                           "server's bound, SPECPLAN_PARSE_MAX_CPU_S\\)"):
        run_bounded(spin, refuse=_refuse, what="traffic file", limits=ONE_CPU_S)
    assert _gone(before)  # it was the worker that spun: SIGXCPU ended it
    after = _pid(ONE_CPU_S)
    assert after != before
    assert _pid(ONE_CPU_S) == after


def test_a_call_past_the_memory_limit_is_refused_and_the_next_gets_a_fresh_worker():
    before = _pid(SMALL)
    with pytest.raises(TrafficError, match=r"this traffic file needs more than 512 MB of memory to read"):
        run_bounded(allocate_3_gb, refuse=_refuse, what="traffic file", limits=SMALL)
    assert _gone(before)  # it answered, then retired (its heap may be left fragmented)
    after = _pid(SMALL)
    assert after != before
    assert _pid(SMALL) == after


@pytest.mark.parametrize("reaped", [False, True], ids=["at-once", "once-reaped"])
def test_a_worker_killed_between_calls_is_replaced(reaped):
    before = _pid()
    os.kill(before, signal.SIGKILL)
    if reaped:
        assert _gone(before)
    assert run_bounded(len, b"abc", refuse=_refuse) == 3  # the next call does not see it
    assert last_usage().pid != before


def test_a_worker_that_keeps_too_much_memory_retires_after_its_answer():
    before = run_bounded(hoard, sandbox_worker.WARM_MB + 64, refuse=_refuse, limits=SMALL)
    assert _gone(before)
    assert _pid(SMALL) != before


def test_nothing_of_a_call_is_left_for_the_next():
    run_bounded(make_marker, b"a visitor's bytes", refuse=_refuse)
    pid = last_usage().pid
    assert run_bounded(markers_left, refuse=_refuse) == (pid, 0)
    with pytest.raises(ValueError, match="no good"):
        run_bounded(raise_with_marker, b"another visitor's bytes", refuse=_refuse)
    assert run_bounded(markers_left, refuse=_refuse) == (pid, 0)


def test_workers_under_other_bounds_stay_within_the_pool():
    pids = [_pid(ParseLimits(max_mb=mb)) for mb in (512, 600, 700, 512)]
    assert len(set(pids[:3])) == 3  # each bound its own worker: RLIMIT_AS is set once, when a worker starts
    server = psutil.Process(sb._server[0].pid)
    assert len(busy_workers(server)[1]) <= sb.DEFAULT_CONCURRENCY


def test_concurrent_calls_run_on_separate_workers_at_once():
    lim = ParseLimits(max_wall_s=30, concurrency=2)
    run_bounded(len, b"warm", refuse=_refuse, limits=lim)
    got: list[int] = []

    def call() -> None:
        run_bounded(time.sleep, 1.0, refuse=_refuse, limits=lim)
        got.append(last_usage().pid)  # this thread's call

    t = time.monotonic()
    threads = [threading.Thread(target=call) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert len(set(got)) == 2
    assert time.monotonic() - t < 1.9  # both slept at once


def test_idle_and_busy_workers_die_with_the_fork_server():
    for mb in (512, 600):
        _pid(ParseLimits(max_mb=mb))
    server = psutil.Process(sb._server[0].pid)
    workers = server.children()
    assert len(workers) >= 2
    server.kill()
    server.wait(10)
    for w in workers:
        w.wait(10)  # PR_SET_PDEATHSIG
    assert run_bounded(len, b"abc", refuse=_refuse) == 3  # a new fork server for the next call


def test_no_worker_outlives_the_app_process():
    code = f"""
import sys, threading, time
sys.path[:0] = [{str(ROOT)!r}]
from profiles import sandbox as sb
from profiles.sandbox import ParseLimits, run_bounded
run_bounded(len, b"x", refuse=RuntimeError)  # an idle worker
threading.Thread(target=run_bounded, args=(time.sleep, 60), daemon=True,
                 kwargs=dict(refuse=RuntimeError, limits=ParseLimits(max_mb=600, max_wall_s=90))).start()
time.sleep(1.5)  # a busy one
print(sb._server[0].pid, flush=True)
time.sleep(60)
"""
    app = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        server = psutil.Process(int(app.stdout.readline()))
        workers = server.children()
        assert len(workers) >= 2
    finally:
        app.kill()  # as a crash would: no clean-up runs in it
        app.wait(10)
    assert _gone(server.pid)
    assert all(_gone(w.pid) for w in workers)


def sockets_and_fds() -> tuple[int, int]:
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor, closed once it was read
            pass
    return sum(link.startswith("socket:") for link in links), len(links)


def test_a_worker_holds_only_its_own_socket_and_the_call_it_serves():
    fresh = ParseLimits(max_mb=513)  # a bound no other test uses: a worker forked for this call
    first = run_bounded(sockets_and_fds, refuse=_refuse, limits=fresh)
    assert last_usage().calls == 1
    assert first[0] == 2  # its socket to the server and this call's: none inherited from the server's other calls
    for blob in (b"a" * 100, os.urandom((9 << 20) + 5)):  # the plain read, the huge-page read (whole, byte for
        assert run_bounded(digest, blob, refuse=_refuse, limits=fresh) == digest(blob)  # byte): their pipes closed
    assert run_bounded(sockets_and_fds, refuse=_refuse, limits=fresh) == first


def digest(data: bytes) -> tuple[int, str]:
    import hashlib

    return len(data), hashlib.sha256(data).hexdigest()
