from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from calibration.engine import EngineConfig, JobSpec
from calibration.jobs import MicrobenchSpec
from calibration.runners import LocalRunner, RayRunner
from calibration.store import STALE_AFTER_S, Store

# A microbenchmark small enough for a few seconds on 2 cores: a real job of the same runner path.
TINY = MicrobenchSpec(batches=(1, 2), tokens_per_seq=(1,), contexts=(32,), repeats=1)
# One that runs for minutes: for cancel and timeout.
LONG = MicrobenchSpec(batches=(1, 2, 4, 8, 16, 32), tokens_per_seq=(1, 4, 8), contexts=(256, 1024, 2048),
                      repeats=50)


def test_local_runner_runs_a_job_and_streams_progress(store: Store) -> None:
    h = LocalRunner(store.url).submit("microbench", TINY.to_dict(), timeout_s=120)
    assert h.wait(150) == "succeeded", h.lines()
    assert store.get_run(h.run_id).status == "succeeded"
    assert h.progress == 1.0
    assert any(line.startswith("PROGRESS 0/1") for line in h.lines())
    assert len(store.step_samples([h.run_id])) == 2


def test_local_runner_timeout_stops_and_marks_the_job(store: Store) -> None:
    t0 = time.monotonic()
    h = LocalRunner(store.url).submit("microbench", LONG.to_dict(), timeout_s=4)
    assert h.wait(60) == "timed_out"
    assert time.monotonic() - t0 < 30
    assert store.get_run(h.run_id).status == "timed_out"
    assert h.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(h.pid, 0)  # the whole process group is gone


def test_local_runner_cancel(store: Store) -> None:
    h = LocalRunner(store.url).submit("microbench", LONG.to_dict())
    time.sleep(2)
    h.cancel()
    assert h.wait(30) == "cancelled"
    assert store.get_run(h.run_id).status == "cancelled"


def test_submit_rejects_unknown_kind_and_bad_timeout(store: Store) -> None:
    with pytest.raises(ValueError, match="kind='shell'"):
        LocalRunner(store.url).submit("shell", {})
    with pytest.raises(ValueError, match="timeout_s=0"):
        LocalRunner(store.url).submit("microbench", TINY.to_dict(), timeout_s=0)


def _procs() -> list[tuple[int, int, str]]:
    """(pid, process group, state) of every process, from /proc/*/stat."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
            out.append((int(d.name), int(fields[2]), fields[0]))
    return out


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.engine
def test_sigkilled_engine_job_leaves_finished_groups_readable(store: Store, model_cache: dict) -> None:
    """Kill -9 the job (and with it the engine) after its first group committed: that group stays readable,
    the run is never marked succeeded and reads as crashed once its heartbeat is stale."""
    spec = JobSpec(configs=(EngineConfig("none"),), workloads=("code", "chat"), prompts_per_group=2,
                   max_output_tokens=8, pause_after_group_s=120)
    h = LocalRunner(store.url).submit("engine", spec.to_dict(), timeout_s=600)
    deadline = time.monotonic() + 300
    while not store.groups([h.run_id]) and time.monotonic() < deadline:
        time.sleep(1)
    assert store.groups([h.run_id]), "no group committed within 300 s:\n" + "\n".join(h.lines()[-20:])
    engine_groups = {pgid for pid, pgid, _ in _procs() if h.run_id in _cmdline(pid)} - {h.pid}
    assert engine_groups, "the engine child process was not found"
    os.killpg(h.pid, signal.SIGKILL)  # the job process group, as an OOM killer or `kill -9 -PGID` would
    h.proc.wait(30)
    # ...and the engine child, its engine-core and worker processes (own process group) go down with it
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(g in engine_groups and st != "Z" for _, g, st in _procs()):
        time.sleep(1)
    left = [(pid, _cmdline(pid)[:60]) for pid, g, st in _procs() if g in engine_groups and st != "Z"]
    assert not left, f"engine processes left running after the job was killed: {left}"
    groups = Store(store.url).groups([h.run_id])
    assert [(g.config_label, g.workload) for g in groups] == [("baseline", "code")]
    assert groups[0].output_tokens == 2 * 8
    row = Store(store.url).get_run(h.run_id, now=time.time() + STALE_AFTER_S + 1)
    assert row.status in ("crashed", "failed")  # the runner thread may record the exit first


# ---------------------------------------------------------------------------------------------------
# Ray on loopback
# ---------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Ray head on 127.0.0.1 started by this test (`ray start --block` in its own session), stopped by
    killing exactly that process group."""
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists() and not shutil.which("ray"):
        pytest.skip("ray CLI not installed")
    port = _free_port()
    tmp = Path("/tmp") / f"ray-specplan-{os.getpid()}"  # short: Ray's socket paths have a length limit
    # Ray's CLI with loopback kept as loopback (plain `ray start` would bind this machine's interface address)
    cmd = [sys.executable, "-m", "calibration.ray_loopback", "start", "--head", "--block",
           "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=1", "--num-gpus=0",
           "--include-dashboard=false", f"--temp-dir={tmp}", "--disable-usage-stats"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("Ray head did not start within 90 s")
    time.sleep(3)
    yield address
    import ray

    ray.shutdown()
    os.killpg(proc.pid, signal.SIGINT)  # `ray start --block` stops its processes on Ctrl-C
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    shutil.rmtree(tmp, ignore_errors=True)


def test_ray_runner_runs_the_same_job_on_a_loopback_cluster(ray_head: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ray.db'}"
    runner = RayRunner(ray_head, store_url=url)
    h = runner.submit("microbench", TINY.to_dict(), timeout_s=180)
    assert h.wait(200) == "succeeded", h.lines()
    store = Store(url)
    assert store.get_run(h.run_id).status == "succeeded"
    assert store.get_run(h.run_id).spec["runner"] == "ray"
    assert len(store.step_samples([h.run_id])) == 2
    import ray

    # the whole cluster stays on loopback: its node registered 127.0.0.1, not this machine's interface
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}


def test_ray_runner_timeout_cancels_the_task(ray_head: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ray2.db'}"
    h = RayRunner(ray_head, store_url=url).submit("microbench", LONG.to_dict(), timeout_s=5)
    assert h.wait(90) == "timed_out"
    assert Store(url).get_run(h.run_id).status == "timed_out"


def test_ray_runner_rejects_a_bad_address() -> None:
    with pytest.raises(ValueError, match="address='1.2.3.4:1 ; rm'"):
        RayRunner("1.2.3.4:1 ; rm")
