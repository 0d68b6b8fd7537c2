"""profiles.sandbox / profiles.uploads: a reader runs in a worker process under RLIMIT_AS, RLIMIT_CPU and a wall
clock; a worker past a limit becomes the reader's own error in product words, an error raised in the worker comes
back as itself, the parent's memory does not grow with the worker's, and no call leaves a worker busy or the pool
larger than its bound (the pool itself: test_sandbox_pool.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest

from profiles import load_catalog
from profiles import sandbox as sb
from profiles.measured_acceptance import MeasuredAcceptanceError
from profiles.model_config import ModelConfigError
from profiles.sandbox import ParseLimits, limits_from_env, run_bounded
from profiles.traffic import Problem, TrafficError, parse_traffic
from profiles.uploads import inspect_traffic, read_acceptance_file, read_model_config, read_traffic

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the limits rest on Linux (prctl, /proc)")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

SMALL = ParseLimits(max_mb=512, max_cpu_s=10, max_wall_s=30.0)


def _refuse(why: str) -> TrafficError:
    return TrafficError([Problem(None, None, None, f"a file the server can read within its bounds: {why}")])


# readers run in the child (module-level: the child imports them by name)
def allocate_3_gb() -> int:
    chunks = [bytearray(64 * 2**20) for _ in range(48)]  # 3 GiB, 64 MiB at a time, each page written
    return len(chunks)


def spin() -> None:
    while True:
        pass


def sleep() -> None:
    time.sleep(60)


def digest_of(*blobs: bytes) -> list[tuple[int, str]]:
    import hashlib

    return [(len(b), hashlib.sha256(b).hexdigest()) for b in blobs]


def raise_traffic_error() -> None:
    raise TrafficError([Problem(3, "prompt_tokens", "x" * 10, "a whole number of tokens", 4),
                        Problem(5, "output_tokens", -1, "a count >= 0", 6)], total=40, at_least=True)


def _vm_hwm_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _reset_peak() -> float:
    with open("/proc/self/clear_refs", "w") as fh:  # "5": the peak restarts from the current RSS
        fh.write("5")
    return _vm_hwm_mb()


@pytest.fixture(autouse=True)
def no_busy_worker_left():
    yield
    server = sb._server
    if server is not None and server[0].poll() is None:
        busy, workers = busy_workers(psutil.Process(server[0].pid))
        assert not busy, f"workers of the fork server still running after the call: {busy}"
        assert len(workers) <= sb.DEFAULT_CONCURRENCY, f"more workers than the pool's bound: {workers}"


def busy_workers(server: psutil.Process, wait_s: float = 5.0) -> tuple[list[psutil.Process], list[psutil.Process]]:
    """The server's workers (and any process under them) that still use CPU once those that answered have settled
    (a worker collects its call's garbage right after its answer, or exits when it retires: within a second, not
    never), and all of them."""
    deadline = time.monotonic() + wait_s
    while True:
        workers = server.children(recursive=True)
        before = {p.pid: _cpu(p) for p in workers}
        time.sleep(0.2)
        busy = [p for p in workers if _cpu(p) != before[p.pid]]
        if not busy or time.monotonic() > deadline:
            return busy, [p for p in workers if _cpu(p) >= 0]


def _cpu(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
        return t.user + t.system
    except psutil.NoSuchProcess:  # gone, or a zombie the server has not reaped yet
        return -1.0


def test_a_reader_that_allocates_3_gb_is_refused_and_the_parent_stays_small():
    run_bounded(len, b"warm", refuse=_refuse)  # the fork server is started before the peak is measured
    before = _reset_peak()
    with pytest.raises(TrafficError) as err:
        run_bounded(allocate_3_gb, refuse=_refuse, what="traffic file", limits=SMALL)
    assert str(err.value) == ("expected a file the server can read within its bounds: this traffic file needs more "
                              "than 512 MB of memory to read (the server's bound, SPECPLAN_PARSE_MAX_MB)")
    assert _vm_hwm_mb() - before < 40


def test_a_spinning_reader_is_stopped_by_the_cpu_limit():
    t = time.monotonic()
    with pytest.raises(TrafficError, match="needs more than 1 s of CPU time to read"):
        run_bounded(spin, refuse=_refuse, what="traffic file", limits=ParseLimits(max_cpu_s=1, max_wall_s=30))
    assert time.monotonic() - t < 25  # the CPU limit, not the wall clock, ended it


def test_a_sleeping_reader_is_stopped_by_the_wall_limit():
    t = time.monotonic()
    with pytest.raises(TrafficError, match=r"takes more than 1\.5 s to read \(the server's bound, "
                                           "SPECPLAN_PARSE_MAX_WALL_S\\)"):
        run_bounded(sleep, refuse=_refuse, what="traffic file", limits=ParseLimits(max_wall_s=1.5))
    assert 1.5 <= time.monotonic() - t < 15


def test_an_error_raised_in_the_child_comes_back_as_itself():
    with pytest.raises(TrafficError) as err:
        run_bounded(raise_traffic_error, refuse=_refuse)
    e = err.value
    assert type(e) is TrafficError
    assert e.problems == [Problem(3, "prompt_tokens", "x" * 10, "a whole number of tokens", 4),
                          Problem(5, "output_tokens", -1, "a count >= 0", 6)]
    assert (e.total, e.at_least) == (40, True)
    assert str(e) == "row 3 (line 4), column 'prompt_tokens': value 'xxxxxxxxxx': expected a whole number of tokens " \
                     "(and at least 39 more problems)"


def test_a_normal_traffic_file_parses_to_the_same_profile_as_in_process():
    from bench_app import make_requests_csv

    data = make_requests_csv(20_000, 3)
    cat = load_catalog()
    assert read_traffic("week.csv", data, cat) == parse_traffic("week.csv", data, cat)


def test_a_reader_refusal_is_the_same_through_the_gate():
    data = b"timestamp,workload,prompt_tokens,output_tokens\n1790000000,chat,abc,10\n"
    cat = load_catalog()
    with pytest.raises(TrafficError) as here:
        parse_traffic("bad.csv", data, cat)
    with pytest.raises(TrafficError) as there:
        read_traffic("bad.csv", data, cat)
    assert (there.value.problems, str(there.value)) == (here.value.problems, str(here.value))


def test_config_and_acceptance_errors_keep_their_types_and_words():
    with pytest.raises(ModelConfigError, match="config.json"):
        read_model_config(b"{not json")
    with pytest.raises(MeasuredAcceptanceError, match="^m.csv: "):
        read_acceptance_file("m.csv", b"nothing,here\n")
    with pytest.raises(ModelConfigError, match="^config.json: this config.json needs more than 512 MB of memory"):
        run_bounded(allocate_3_gb, refuse=lambda why: ModelConfigError(f"config.json: {why}"), what="config.json",
                    limits=SMALL)


def test_the_limits_are_settings(monkeypatch):
    monkeypatch.setenv("SPECPLAN_PARSE_MAX_MB", "700")
    monkeypatch.setenv("SPECPLAN_PARSE_MAX_CPU_S", "7")
    monkeypatch.setenv("SPECPLAN_PARSE_MAX_WALL_S", "9.5")
    assert limits_from_env() == ParseLimits(max_mb=700, max_cpu_s=7, max_wall_s=9.5)
    monkeypatch.setenv("SPECPLAN_PARSE_MAX_MB", "lots")
    with pytest.raises(ValueError, match="SPECPLAN_PARSE_MAX_MB='lots': expected a number >= 64"):
        limits_from_env()
    monkeypatch.setenv("SPECPLAN_PARSE_MAX_MB", "600")
    with pytest.raises(TrafficError, match="needs more than 600 MB of memory"):  # read per call
        run_bounded(allocate_3_gb, refuse=_refuse, what="traffic file")


def test_nested_xml_xlsx_is_refused_and_the_parent_stays_small(tmp_path):
    from bench_traffic_ingest import make_nested_xlsx

    data = make_nested_xlsx(tmp_path / "nested.xlsx").read_bytes()
    run_bounded(len, b"warm", refuse=_refuse)
    before = _reset_peak()
    with pytest.raises(TrafficError):
        inspect_traffic("nested.xlsx", data)
    assert _vm_hwm_mb() - before < 300


def test_the_child_dies_with_the_fork_server():
    import threading

    run_bounded(len, b"warm", refuse=_refuse)
    server = psutil.Process(sb._server[0].pid)
    assert not busy_workers(server)[0]
    done: list[BaseException] = []

    def call() -> None:
        try:
            run_bounded(sleep, refuse=_refuse, limits=ParseLimits(max_wall_s=30))
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion below
            done.append(exc)

    th = threading.Thread(target=call)
    th.start()
    time.sleep(1.0)  # the call reaches its worker (the warm one: the same bounds)
    children = server.children()
    assert children
    server.kill()
    server.wait(10)
    for child in children:
        child.wait(10)  # PR_SET_PDEATHSIG: killed with its parent, busy or idle
    th.join(10)
    assert isinstance(done[0], TrafficError) and "the server's bounds" in str(done[0])
    assert run_bounded(len, b"abc", refuse=_refuse) == 3  # a new fork server for the next call


def test_calibration_prompts_are_read_through_the_limits():
    from calibration.targets.traffic_prompts import prompts_from_upload

    good = b"prompt_text,workload\nwrite a sort in C,code\nhello there,chat\n"
    assert run_bounded(prompts_from_upload, "p.csv", good, per_workload=8, refuse=ValueError) == \
        prompts_from_upload("p.csv", good, per_workload=8)
    with pytest.raises(ValueError, match="no 'prompt_text' column"):
        run_bounded(prompts_from_upload, "p.csv", b"a,b\n1,2\n", per_workload=8, refuse=ValueError)


def _model_csv(model: str) -> bytes:
    rows = [f"{1790000000 + i},{model if i % 3 else 'other-model'},{100 + i},{20 + i % 7}" for i in range(60)]
    return ("timestamp,model,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n").encode()


def test_a_catalogue_with_an_uploaded_model_reads_a_file_naming_it_as_in_process():
    from profiles.traffic import ParseOptions
    from profiles.traffic.options import WorkloadRule

    base = load_catalog()
    parsed = read_model_config((ROOT / "tests/profiles/model_configs/Qwen--Qwen3-32B.json").read_bytes())
    cat = base.with_models({parsed.spec.name: parsed.spec})  # as the sidebar's "Your model" box and --model-config
    data = _model_csv(parsed.spec.name)
    opts = ParseOptions(workload=WorkloadRule(mode="rules", workload="chat",
                                              rules=(("model", parsed.spec.name, "code"),)))
    for c in (base, cat, base, cat):  # alternated: each call names the catalogue the fork server already holds
        got = read_traffic("by_model.csv", data, c, opts)
        assert got == parse_traffic("by_model.csv", data, c, options=opts)
    assert {s.workload for s in got.segments} == {"code", "chat"}


def test_catalogues_that_differ_read_differently_and_each_as_in_process():
    import dataclasses

    from profiles.catalog import NamedTable

    base = load_catalog()
    wl = base.workloads["chat"]
    # the same name, other typical lengths: a mix file's tokens come from the catalogue's workloads (mix.py)
    longer = dataclasses.replace(base, workloads=NamedTable("workload", {
        **base.workloads, "chat": dataclasses.replace(wl, prompt_tokens=wl.prompt_tokens * 3)}))
    data = b"workload,share\nchat,0.6\ncode,0.4\n"
    cats = [base, longer] + [dataclasses.replace(base) for _ in range(sb.MAX_KEPT)] + [longer, base]
    got = [read_traffic("mix.csv", data, c) for c in cats]  # more than the server holds: the first ones sent again
    assert got == [parse_traffic("mix.csv", data, c) for c in cats]
    assert got[0] != got[1] and got[-1] == got[0] and got[-2] == got[1]
    assert len(sb._server[2]) <= sb.MAX_KEPT


def test_bytes_arguments_arrive_whole_through_their_pipes():
    import os

    big, odd = os.urandom(5 * 2**20 + 3), bytearray(b"x" * 70_001)  # past the 1 MiB pipe, not a page multiple
    assert run_bounded(digest_of, big, b"", odd, memoryview(big)[7:], refuse=_refuse) == \
        digest_of(big, b"", bytes(odd), big[7:])


def test_an_upload_larger_than_the_memory_bound_is_refused_while_it_is_sent():
    data = b"y" * (160 * 2**20)  # the child cannot hold it under 64 MB: it stops reading, the parent stops writing
    with pytest.raises(TrafficError, match="more than 64 MB of memory"):
        run_bounded(digest_of, data, refuse=_refuse, what="traffic file", limits=ParseLimits(max_mb=64))
    assert run_bounded(len, b"abc", refuse=_refuse) == 3
