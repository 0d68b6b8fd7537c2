"""Child processes never outlive their parent (calibration.harness.procs): a measuring child's process group dies when
the child exits, a child dies when its parent dies, and a process spawned by multiprocessing from a child's main
module dies with that child. The fake process trees here run in a second or two; one engine-marked test kills a
real engine child under a running job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from calibration.harness.procs import GroupChild, exit_description
from calibration.measure.spec import EngineConfig, JobSpec, MicrobenchSpec
from calibration.run.admission import MAX_RUNNING_JOBS_ENV, JobRefused
from calibration.run.jobs import job_env, run_engine_child
from calibration.run.runners import LocalRunner
from calibration.storage.store import Store

REPO = Path(__file__).resolve().parents[3]
# A grandchild as vLLM's engine core behaves: it ignores SIGTERM, does not notice its parent's death and holds
# the output pipe it inherited.
GRANDCHILD = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              "print('grandchild up', flush=True); time.sleep(600)")


def _alive(pid: int) -> bool:
    """Running (not a zombie, not gone)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ppid_and_group(pid: int) -> tuple[int, int] | None:
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[2])


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descendants(root: int) -> set[int]:
    """Every live process under `root` (by parent pid), from /proc."""
    parent_of: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (pg := _ppid_and_group(int(d.name))) is not None:
            parent_of[int(d.name)] = pg[0]
    out: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {p for p, pp in parent_of.items() if pp in frontier} - out
        out |= frontier
    return {p for p in out if _alive(p)}


def _wait_for(cond: Callable[[], object], timeout_s: float, what: str, step_s: float = 0.05) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(step_s)
    pytest.fail(f"{what}: not within {timeout_s:g} s")


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_childs_process_group_dies_the_moment_the_child_is_killed() -> None:
    """SIGKILL the child: its grandchild (SIGTERM ignored, holding the child's output pipe) goes with it, and
    reading the child's output ends: the watch kills the group, nobody has to wait for a deadline."""
    code = (f"import subprocess, sys; g = subprocess.Popen([sys.executable, '-c', {GRANDCHILD!r}]); "
            "print(g.pid, flush=True); import time; time.sleep(600)")
    with GroupChild([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as child:
        assert child.proc.stdout is not None
        grandchild = int(child.proc.stdout.readline())
        assert child.proc.stdout.readline() == "grandchild up\n"
        assert _ppid_and_group(grandchild) == (child.pid, child.pid)  # in the child's group
        t0 = time.monotonic()
        os.kill(child.pid, signal.SIGKILL)
        assert child.exited.wait(5), "the group was not killed after the child exited"
        assert child.proc.stdout.read() == ""  # EOF: no process holds the pipe any more
        _wait_for(lambda: not _alive(grandchild), 5, "the grandchild died with its group")
        assert time.monotonic() - t0 < 3
        assert child.proc.wait(5) == -signal.SIGKILL


def test_a_child_dies_with_its_parent_and_takes_its_group_along() -> None:
    """SIGKILL the parent (as the out-of-memory killer would a job): the kernel sends the child its parent-death
    signal; the child's handler (calibration.harness.procs.kill_own_group) kills its group, grandchild included."""
    child_code = textwrap.dedent(f"""
        import os, signal, subprocess, sys, time
        from calibration.harness.procs import kill_own_group
        signal.signal(signal.SIGTERM, kill_own_group)
        g = subprocess.Popen([sys.executable, '-c', {GRANDCHILD!r}])
        print(os.getpid(), g.pid, flush=True)
        time.sleep(600)
    """)
    parent_code = textwrap.dedent(f"""
        import subprocess, sys, time
        from calibration.harness.procs import GroupChild
        child = GroupChild([sys.executable, '-c', {child_code!r}])
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True,
                              env=job_env(), start_new_session=True)
    tree: set[int] = set()
    try:
        assert parent.stdout is not None
        child, grandchild = map(int, parent.stdout.readline().split())
        tree = {child, grandchild}
        assert parent.stdout.readline() == "grandchild up\n"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(5)
        _wait_for(lambda: not any(_alive(p) for p in tree), 5, "the child and grandchild died with the parent")
    finally:
        _kill(tree | {parent.pid})


def test_a_process_spawned_from_a_childs_main_module_dies_with_the_child(tmp_path: Path) -> None:
    """vLLM's engine core on a CPU is a multiprocessing spawn of the engine child, importing the child's main
    module as __mp_main__; there `die_with_spawning_parent` sets its parent-death signal, so killing the child
    alone (not its group) still ends it."""
    (tmp_path / "spawner.py").write_text(textwrap.dedent("""
        import multiprocessing, os, time
        from calibration.harness.procs import die_with_spawning_parent
        die_with_spawning_parent(__name__)
        if __name__ == "__mp_main__":
            print("spawned", flush=True)

        if __name__ == "__main__":
            p = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,))
            p.start()
            print(p.pid, flush=True)
            time.sleep(600)
    """))
    env = {**job_env(), "PYTHONPATH": os.pathsep.join([str(tmp_path), job_env()["PYTHONPATH"]])}
    proc = subprocess.Popen([sys.executable, "-m", "spawner"], stdout=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    spawned = 0
    try:
        assert proc.stdout is not None
        spawned = int(proc.stdout.readline())
        assert proc.stdout.readline() == "spawned\n"  # its parent-death signal is set by now
        assert _alive(spawned)
        os.kill(proc.pid, signal.SIGKILL)  # the process only: its group (and the spawned process) is left
        proc.wait(5)
        _wait_for(lambda: not _alive(spawned), 5, "the spawned process died with the process that spawned it")
    finally:
        if spawned:
            _kill({spawned})
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_killed_engine_child_fails_its_configuration_within_seconds_naming_the_signal(store: Store) -> None:
    """The job's side (calibration.run.jobs): a fake engine child starts a grandchild that holds its output pipe,
    as vLLM's engine core does, then is killed with SIGKILL. Before, the job read that pipe until its deadline;
    now the configuration fails at once, with the reason, and the grandchild is gone."""
    code = textwrap.dedent(f"""
        import os, signal, subprocess, sys, time
        g = subprocess.Popen([sys.executable, '-c', {GRANDCHILD!r}])
        print(f'[fake] grandchild {{g.pid}}', flush=True)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    lines: list[str] = []
    t0 = time.monotonic()
    msg = run_engine_child([sys.executable, "-c", code], JobSpec(), store.url, job_env(), lines.append, "fake")
    elapsed = time.monotonic() - t0
    grandchild = int(next(line for line in lines if line.startswith("[fake]")).split()[-1])
    try:
        assert elapsed < 5, f"the configuration took {elapsed:.1f} s to fail"
        assert msg.startswith("configuration fake failed: the engine process exited (signal 9, SIGKILL)"), msg
        assert "its engine core and worker processes were stopped with it" in msg
        _wait_for(lambda: not _alive(grandchild), 5, "the grandchild died with the engine child")
    finally:
        _kill({grandchild})


def test_exit_description_names_the_signal_or_the_code() -> None:
    assert exit_description(-9) == "exited (signal 9, SIGKILL)"
    assert exit_description(-15) == "exited (signal 15, SIGTERM)"
    assert exit_description(3) == "exited with code 3"


def _engine_child_of(job_pid: int, run_id: str) -> int | None:
    return next((p for p in _descendants(job_pid)
                 if "calibration.measure.engine" in _cmdline(p) and run_id in _cmdline(p)), None)


def _engine_core_of(engine_pid: int) -> int | None:
    """vLLM's engine core, once it runs: the engine child's child spawned by multiprocessing, titled
    VLLM::EngineCore by vllm/utils/system_utils.py set_process_title (after it imported its main module)."""
    return next((p for p in _descendants(engine_pid) if "EngineCore" in _cmdline(p)), None)


@pytest.mark.engine
def test_a_sigkilled_engine_child_leaves_no_process_fails_the_run_and_frees_the_slot(
        store: Store, model_cache: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kill -9 a running job's engine child (as the out-of-memory killer would). Before,
    its EngineCore stayed resident under init, the run stayed "running" until its deadline and every other job was
    refused. Now, within seconds: no process of the job's tree is left, the run is failed with the reason, and
    the next job is admitted."""
    monkeypatch.delenv(MAX_RUNNING_JOBS_ENV, raising=False)  # one job at a time: the default
    runner = LocalRunner(store.url)
    spec = JobSpec(configs=(EngineConfig("none"),), workloads=("code",), batch_sizes=(2,), max_output_tokens=8)
    h = runner.submit("engine", spec.to_dict(), timeout_s=600)
    tree: set[int] = set()
    try:
        engine = int(_wait_for(lambda: _engine_child_of(h.pid, h.run_id), 60, "the engine child started"))
        core = int(_wait_for(lambda: _engine_core_of(engine), 120, "the engine core started", step_s=0.2))
        with pytest.raises(JobRefused, match="runs at most 1 calibration job"):  # the job holds the place
            runner.submit("microbench", MicrobenchSpec().to_dict(), timeout_s=60)
        tree = {h.pid, *_descendants(h.pid)}
        assert {engine, core} <= tree
        t0 = time.monotonic()
        os.kill(engine, signal.SIGKILL)
        assert h.wait(20) == "failed", "\n".join(h.lines()[-20:])
        _wait_for(lambda: not [p for p in tree if _alive(p)], 20 - (time.monotonic() - t0),
                  f"every process of the job's tree ended (left: {[(p, _cmdline(p)[:60]) for p in tree]})")
        elapsed = time.monotonic() - t0
        row = store.get_run(h.run_id)
        assert row.status == "failed"
        assert "the engine process exited (signal 9, SIGKILL)" in row.message, row.message
        nxt = runner.submit("microbench", MicrobenchSpec(batches=(1,), tokens_per_seq=(1,), contexts=(32,),
                                                          repeats=1).to_dict(), timeout_s=120)
        assert nxt.wait(150) == "succeeded", nxt.lines()
        print(f"\nengine child SIGKILLed -> run failed and {len(tree)} processes gone in {elapsed:.1f} s")
    finally:
        _kill({p for p in tree if _alive(p)})
        if h.proc.poll() is None:
            h.cancel()
