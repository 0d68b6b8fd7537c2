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

from calibration.measure.spec import EngineConfig, JobSpec, MicrobenchSpec
from calibration.run.runners import LocalRunner, RayRunner, allowed_ray_addresses
from calibration.storage.store import HEARTBEAT_S, STALE_AFTER_S, Store

REPO = Path(__file__).resolve().parents[3]

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


def _wait_for(cond, timeout_s: float, what: str, step_s: float = 0.3):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(step_s)
    pytest.fail(f"{what}: not within {timeout_s:g} s")


def _job_pids(run_id: str) -> list[int]:
    """Live job processes (`python -m calibration.run.jobs ... --run-id RUN_ID`) of one run."""
    return [pid for pid, _, st in _procs()
            if st != "Z" and "calibration.run.jobs" in _cmdline(pid) and run_id in _cmdline(pid)]


def _alive(pid: int) -> bool:
    return any(p == pid and st != "Z" for p, _, st in _procs())


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _cli_microbench(url: str, timeout_s: float) -> subprocess.Popen[str]:
    """The CLI as a user starts it: runner and job in their own processes; repeats make it run for hours."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPECPLAN_STORE_URL": url}
    return subprocess.Popen([sys.executable, "-m", "calibration", "microbench", "--repeats", "100000",
                             "--timeout-s", str(timeout_s)], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def _running_run(store: Store) -> str:
    return _wait_for(lambda: next((r.run_id for r in store.list_runs() if r.status == "running"), None), 60,
                     "the job marked its run running")


def test_a_job_enforces_its_own_deadline_when_its_cli_runner_is_killed(store: Store) -> None:
    """SIGKILL the CLI that runs a job: the job keeps heartbeating, then stops itself at its timeout and
    records timed_out (before: it ran on, unbounded, and died later of a BrokenPipeError)."""
    timeout_s = 8.0
    cli = _cli_microbench(store.url, timeout_s)
    rid = ""
    try:
        rid = _running_run(store)
        [job] = _wait_for(lambda: _job_pids(rid), 30, "the job process started")
        started = store.get_run(rid).created_at
        os.killpg(cli.pid, signal.SIGKILL)  # the runner dies (its session only: the job has its own)
        cli.wait(10)
        time.sleep(1.0)
        assert _alive(job), "the job died with its runner instead of finishing or timing out"
        _wait_for(lambda: not _alive(job), timeout_s + 20, "the job ended at its own deadline")
        ended = time.time()
        row = store.get_run(rid)
        assert row.status == "timed_out", (row.status, row.message)
        assert "deadline" in row.message
        assert ended - started < timeout_s + 15
        assert not _job_pids(rid)
    finally:
        _kill_group(cli.pid)
        for pid in _job_pids(rid) if rid else []:
            _kill_group(pid)  # only if the job outlived its deadline (the failure this test catches)


def test_a_microbench_job_heartbeats_while_it_works(store: Store) -> None:
    h = LocalRunner(store.url).submit("microbench", LONG.to_dict(), timeout_s=120)
    try:
        _wait_for(lambda: store.get_run(h.run_id).status == "running", 60, "job running")
        first = store.get_run(h.run_id).heartbeat_at
        time.sleep(2 * HEARTBEAT_S + 1)
        row = store.get_run(h.run_id)
        assert row.status == "running"
        assert row.heartbeat_at - first >= HEARTBEAT_S * 0.9, "no heartbeat while the microbenchmark works"
    finally:
        h.cancel()
    assert h.wait(30) == "cancelled"


def test_a_job_killed_with_its_runner_is_marked_failed_by_the_next_reader(store: Store) -> None:
    """kill -9 the CLI and then its job: nobody is left to record the outcome; the next reader does."""
    cli = _cli_microbench(store.url, 600)
    try:
        rid = _running_run(store)
        [job] = _wait_for(lambda: _job_pids(rid), 30, "the job process started")
        os.killpg(cli.pid, signal.SIGKILL)
        os.killpg(job, signal.SIGKILL)
        _wait_for(lambda: not _alive(job), 10, "the job died")
    finally:
        _kill_group(cli.pid)
    assert Store(store.url).get_run(rid).status == "running"  # not yet stale
    row = Store(store.url).get_run(rid, now=time.time() + STALE_AFTER_S + 1)
    assert row.status == "failed" and "no heartbeat" in row.message
    assert Store(store.url).list_runs()[0].status == "failed"  # recorded, not only shown


def test_the_store_url_is_never_on_a_job_command_line(any_store_url: str) -> None:
    """The job (and its store URL, which can hold a database password) is visible in `ps` to every user:
    the URL travels on stdin."""
    from sqlalchemy.engine import make_url

    h = LocalRunner(any_store_url).submit("microbench", LONG.to_dict(), timeout_s=120)
    try:
        _wait_for(lambda: Store(any_store_url).get_run(h.run_id).status == "running", 60, "job running")
        cmd = _cmdline(h.pid)
        assert "calibration.run.jobs" in cmd and h.run_id in cmd
        assert any_store_url not in cmd and "--store-url" not in cmd
        secret = make_url(any_store_url).password
        if secret:  # the PostgreSQL store: a real password
            assert secret not in cmd
            assert all(secret not in line for line in h.lines())
    finally:
        h.cancel()
    assert h.wait(30) == "cancelled"


@pytest.mark.engine
def test_sigkilled_engine_job_leaves_finished_groups_readable(store: Store, model_cache: dict) -> None:
    """Kill -9 the job (and with it the engine) after its first group committed: that group stays readable,
    the run is never marked succeeded and reads as crashed once its heartbeat is stale."""
    spec = JobSpec(configs=(EngineConfig("none"),), workloads=("code", "chat"), batch_sizes=(2,),
                   max_output_tokens=8, pause_after_group_s=120)
    h = LocalRunner(store.url).submit("engine", spec.to_dict(), timeout_s=600)
    deadline = time.monotonic() + 300
    while not store.groups([h.run_id]) and time.monotonic() < deadline:
        time.sleep(1)
    assert store.groups([h.run_id]), "no group committed within 300 s:\n" + "\n".join(h.lines()[-20:])
    engine_groups = {pgid for pid, pgid, _ in _procs() if h.run_id in _cmdline(pid)} - {h.pid}
    assert engine_groups, "the engine child process was not found"
    # neither the job nor its engine child carries the store URL on its command line
    assert not [pid for pid, _, _ in _procs() if h.run_id in _cmdline(pid) and store.url in _cmdline(pid)]
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
    cmd = [sys.executable, "-m", "calibration.run.ray_loopback", "start", "--head", "--block",
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


def test_ray_runner_refuses_a_cluster_other_than_the_one_this_process_joined(ray_head: str,
                                                                          tmp_path: Path) -> None:
    """Ray's driver connection is process-wide: a runner for another address must refuse, not submit to the
    cluster someone else connected to (before: the first address picked stuck for every session)."""
    url = f"sqlite:///{tmp_path / 'ray3.db'}"
    h = RayRunner(ray_head, store_url=url).submit("microbench", TINY.to_dict(), timeout_s=180)
    assert h.wait(200) == "succeeded", h.lines()
    other = f"127.0.0.1:{_free_port()}"
    with pytest.raises(ValueError, match=f"address='{other}' refused: this process is connected to"):
        RayRunner(other, store_url=url).submit("microbench", TINY.to_dict(), timeout_s=180)
    assert [r.run_id for r in Store(url).list_runs()] == [h.run_id]  # the refusal left no run behind


def test_ray_addresses_come_from_the_admin_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = tmp_path / "ray-clusters.txt"
    listed.write_text("# GPU pool\nray://gpu-head.internal:10001\n\n10.0.0.5:6379  # nightly\n")
    monkeypatch.setenv("SPECPLAN_RAY_ADDRESSES", "127.0.0.1:6379")
    monkeypatch.setenv("SPECPLAN_RAY_ADDRESSES_FILE", str(listed))
    assert allowed_ray_addresses() == ("127.0.0.1:6379", "ray://gpu-head.internal:10001", "10.0.0.5:6379")
    RayRunner("10.0.0.5:6379", store_url=f"sqlite:///{tmp_path / 'x.db'}")  # listed: accepted (no I/O yet)
    with pytest.raises(ValueError, match="address='203.0.113.9:6379' not allowed: not on the admin list"):
        RayRunner("203.0.113.9:6379")
    listed.write_text("10.0.0.5:6379\n10.0.0.6:6379; curl evil\n")
    with pytest.raises(ValueError, match=r"ray-clusters.txt, line 2: address='10.0.0.6:6379; curl evil'"):
        allowed_ray_addresses()
