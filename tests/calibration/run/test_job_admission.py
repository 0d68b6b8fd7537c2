"""Job admission (calibration.run.admission): one running job per user (session or client address) and a server-wide
cap, counted in the store across sessions and processes; targets that do not fit the host's memory
(calibration.targets.memory_fit) refused by the runner, by the job itself and on the Calibrate page. No engine starts:
the runner path uses the same tiny microbenchmark job as test_runners.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.harness import machine_load
from calibration.measure.spec import EngineConfig, JobSpec, MicrobenchSpec
from calibration.run.admission import (
    MAX_RUNNING_JOBS_ENV,
    QUEUED_COUNTS_S,
    JobOwner,
    JobRefused,
    active_jobs,
    admit,
    max_running_jobs,
    own_job,
    refusal,
    store_active_jobs,
)
from calibration.run.jobs import JOB_KINDS, run_job
from calibration.run.runners import LocalRunner, live_handle
from calibration.storage.store import Store
from calibration.targets import memory_fit, registry
from calibration.targets.memory_fit import TargetTooLarge, target_memory_fit

REPO = Path(__file__).resolve().parents[3]
GIB = 2**30
TAB_1 = JobOwner.of(session_id="session-1", client="10.0.0.5")
TAB_2 = JobOwner.of(session_id="session-2", client="10.0.0.5")  # another session from the same client
OTHER = JobOwner.of(session_id="session-3", client="10.0.0.9")
LONG = MicrobenchSpec(batches=(1, 2, 4, 8, 16, 32), tokens_per_seq=(1, 4, 8), contexts=(256, 1024, 2048),
                      repeats=50)


@pytest.fixture(autouse=True)
def _default_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MAX_RUNNING_JOBS_ENV, raising=False)


def _running(store: Store, owner: JobOwner | None, kind: str = "engine") -> str:
    spec = {"owner": owner.to_dict()} if owner else {}
    return store.create_run(kind, spec, status="running")


def test_two_sessions_of_one_client_get_one_job_and_the_second_is_told_which(store: Store) -> None:
    rid = admit(store, "engine", {"model": "smollm2-135m"}, kinds=JOB_KINDS, owner=TAB_1, limit=8)
    with pytest.raises(JobRefused, match=f"you already have job {rid} \\(engine, queued\\): one job per user") as e:
        admit(store, "engine", {}, kinds=JOB_KINDS, owner=TAB_2, limit=8)
    assert e.value.run_id == rid
    store.set_status(rid, "running")
    same_session_new_address = JobOwner.of(session_id="session-1", client="10.0.0.77")
    with pytest.raises(JobRefused, match=f"job {rid}"):
        admit(store, "engine", {}, kinds=JOB_KINDS, owner=same_session_new_address, limit=8)
    assert [r.run_id for r in store.list_runs()] == [rid]  # a refused request records nothing
    assert store.get_run(rid).spec["owner"] == TAB_1.to_dict()
    assert "10.0.0.5" not in str(store.get_run(rid).spec)  # only digests of the address are stored
    store.set_status(rid, "succeeded")
    assert admit(store, "engine", {}, kinds=JOB_KINDS, owner=TAB_2, limit=8) != rid  # its own turn now


def test_the_server_cap_counts_jobs_of_other_users_and_processes(store: Store,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cli_job = _running(store, None, kind="microbench")  # a job the CLI started: no owner
    store.create_run("import", {}, status="running")  # not a job kind: holds no place
    with pytest.raises(JobRefused, match=f"at most 1 calibration job at a time .*job {cli_job} \\(microbench"):
        admit(store, "engine", {}, kinds=JOB_KINDS, owner=OTHER)
    monkeypatch.setenv(MAX_RUNNING_JOBS_ENV, "2")
    second = admit(store, "engine", {}, kinds=JOB_KINDS, owner=OTHER)
    with pytest.raises(JobRefused, match=f"at most 2 calibration jobs at a time .*job {cli_job} .* and 1 more"):
        admit(store, "engine", {}, kinds=JOB_KINDS, owner=TAB_1)
    store.set_status(second, "cancelled")
    assert admit(store, "serve", {}, kinds=JOB_KINDS, owner=TAB_1)


@pytest.mark.parametrize("raw", ["0", "-1", "two", "65"])
def test_the_cap_setting_is_validated(raw: str) -> None:
    with pytest.raises(ValueError, match=f"\\${MAX_RUNNING_JOBS_ENV}='{raw}' not allowed: an integer 1..64"):
        max_running_jobs({MAX_RUNNING_JOBS_ENV: raw})
    assert max_running_jobs({}) == 1 and max_running_jobs({MAX_RUNNING_JOBS_ENV: "3"}) == 3


def test_a_run_left_queued_by_a_dead_runner_stops_holding_a_place(store: Store) -> None:
    rid = store.create_run("engine", {"owner": TAB_1.to_dict()})  # queued; its runner never started it
    row = store.get_run(rid)
    assert [r.run_id for r in active_jobs([row], now=row.created_at + 1)] == [rid]
    assert active_jobs([row], now=row.created_at + QUEUED_COUNTS_S + 1) == []
    assert own_job(active_jobs([row], now=row.created_at + 1), TAB_2).run_id == rid
    assert own_job(active_jobs([row], now=row.created_at + 1), OTHER) is None
    assert refusal(active=[], owner=TAB_1, limit=1) is None


class RacingStore(Store):
    """A store where another process records a job between this one's check and its own record."""

    def create_run(self, kind: str, spec: dict, run_id: str | None = None, status: str = "queued") -> str:
        Store.create_run(self, "engine", {"owner": OTHER.to_dict()}, status="running")
        return super().create_run(kind, spec, run_id=run_id, status=status)


def test_two_processes_admitting_at_once_never_exceed_the_cap(tmp_path: Path) -> None:
    store = RacingStore(f"sqlite:///{tmp_path / 'race.db'}")
    with pytest.raises(JobRefused, match="at most 1 calibration job"):
        admit(store, "engine", {}, kinds=JOB_KINDS, owner=TAB_1)
    runs = {r.status: r for r in store.list_runs()}
    assert set(runs) == {"running", "cancelled"}  # the other job runs; this one withdrew
    assert runs["cancelled"].message.startswith("refused at start: the server runs at most 1")
    assert len(store_active_jobs(store, JOB_KINDS)) == 1


def test_the_local_runner_refuses_a_second_start_from_the_same_client(store: Store) -> None:
    first = LocalRunner(store.url, owner=TAB_1).submit("microbench", LONG.to_dict(), timeout_s=120)
    try:
        assert live_handle(first.run_id) is first  # another session of this user finds it
        with pytest.raises(JobRefused, match=f"you already have job {first.run_id}"):
            LocalRunner(store.url).submit("microbench", LONG.to_dict(), timeout_s=120, owner=TAB_2)
        with pytest.raises(JobRefused, match=f"at most 1 calibration job .*job {first.run_id}"):
            LocalRunner(store.url).submit("microbench", LONG.to_dict(), timeout_s=120)  # the CLI: no owner
        assert [r.run_id for r in store.list_runs()] == [first.run_id]
    finally:
        first.cancel()
    assert first.wait(30) == "cancelled"
    assert live_handle(first.run_id) is None
    assert refusal(active=store_active_jobs(store, JOB_KINDS), owner=TAB_2, limit=1) is None


# ---- memory fit ---------------------------------------------------------------------------------------------
# Llama-3.1-8B by its model card: 8.03B parameters, 32 layers, 8 KV heads of 128; bfloat16 is 2 bytes.
LLAMA_8B_NEED = 8.03e9 * 2 + 32 * 8 * 128 * 2 * 2 * 2048 + 2 * GIB  # weights + K and V of 2,048 tokens + engine


def test_a_gpu_sized_target_is_refused_on_a_cpu_host_naming_target_needed_and_available() -> None:
    fit = target_memory_fit("llama-3.1-8b", available_bytes=22 * GIB, total_bytes=24 * GIB, dtype="bfloat16",
                            on_gpu=False)
    assert not fit.fits
    assert fit.needed_bytes == int(LLAMA_8B_NEED)
    assert f"target='llama-3.1-8b' does not fit this host's memory: needs {LLAMA_8B_NEED / GIB:.1f} GiB" in fit.message
    assert "22.0 GiB available" in fit.message and "7.2 GiB (30% of 24.0 GiB)" in fit.message
    with pytest.raises(TargetTooLarge, match="llama-3.1-8b"):
        fit.refuse()
    # plenty available but a total whose engine share (30 %) is too small: refused all the same
    assert not target_memory_fit("llama-3.1-8b", available_bytes=60 * GIB, total_bytes=40 * GIB, dtype="bfloat16",
                                 on_gpu=False).fits
    assert target_memory_fit("llama-3.1-8b", available_bytes=60 * GIB, total_bytes=64 * GIB, dtype="bfloat16",
                             on_gpu=False).fits
    assert target_memory_fit("smollm2-135m", available_bytes=22 * GIB, total_bytes=24 * GIB, dtype="float32",
                             on_gpu=False).fits
    assert target_memory_fit("llama-3.1-8b", available_bytes=1 * GIB, on_gpu=True).fits  # a GPU node sizes itself


@pytest.fixture
def small_cpu_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as a 16 GiB CPU-only host (the runner and the job read MemAvailable and MemTotal)."""
    monkeypatch.setattr(machine_load, "available_memory_bytes", lambda proc_dir=None: 15 * GIB)
    monkeypatch.setattr(memory_fit, "total_memory_bytes", lambda meminfo=None: 16 * GIB)
    monkeypatch.setattr(registry, "has_cuda", lambda: False)


def _llama_spec() -> dict:
    return JobSpec(model="llama-3.1-8b", configs=(EngineConfig("none"),), workloads=("code",)).to_dict()


def test_the_runner_refuses_a_target_too_large_before_recording_a_run(store: Store, small_cpu_host: None) -> None:
    with pytest.raises(TargetTooLarge, match="target='llama-3.1-8b' does not fit .* 15.0 GiB available"):
        LocalRunner(store.url).submit("engine", _llama_spec(), timeout_s=60, owner=TAB_1)
    assert store.list_runs() == []


def test_the_job_refuses_a_target_too_large_on_the_node_it_runs_on(store: Store, small_cpu_host: None) -> None:
    rid = store.create_run("engine", {})
    lines: list[str] = []
    assert run_job("engine", _llama_spec(), rid, store.url, log=lines.append, timeout_s=60) == "failed"
    row = store.get_run(rid)
    assert row.message.startswith("refused before any engine started: target='llama-3.1-8b' does not fit")
    assert lines == [row.message]


# ---- the Calibrate page ---------------------------------------------------------------------------------------
@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("SPECPLAN_STORE_URL", url)
    monkeypatch.setenv("SPECPLAN_CALIBRATE_TOKEN", "s3cret")
    monkeypatch.delenv("SPECPLAN_RAY_ADDRESSES", raising=False)
    monkeypatch.delenv("SPECPLAN_RAY_ADDRESSES_FILE", raising=False)
    st.cache_resource.clear()

    def open_page() -> AppTest:
        at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
        at.text_input(key="cal_token").set_value("s3cret").run()
        assert not at.exception
        return at

    return Store(url), open_page


# AppTest has no client address: every headless session is the client "unknown" (views/calibrate.py _client)
SAME_CLIENT_OTHER_TAB = JobOwner.of(session_id="a-tab-opened-earlier", client="unknown")


def _run_button(at):
    return next(b for b in at.button if b.key == "cal_submit")


def test_the_page_shows_the_users_running_job_with_cancel_and_disables_run(page) -> None:
    store, open_page = page
    rid = _running(store, SAME_CLIENT_OTHER_TAB)
    store.heartbeat(rid, "configuration 2/5: ngram-k2")
    at = open_page()
    assert _run_button(at).disabled
    assert any(f"you already have job {rid} (engine, running): one job per user" in w.value for w in at.warning)
    assert any(s.value == f"Job {rid}: running" for s in at.subheader)
    assert any("configuration 2/5: ngram-k2" in c.value for c in at.code)
    cancel = next(b for b in at.button if b.key == "cal_cancel")
    cancel.click().run()
    assert store.get_run(rid).status == "cancelled"
    at.run()  # the job ended: the Run button is back
    assert not _run_button(at).disabled
    assert not [b for b in at.button if b.key == "cal_cancel"]


def test_the_page_disables_run_while_another_users_job_holds_the_server(page) -> None:
    store, open_page = page
    rid = _running(store, OTHER)
    at = open_page()
    assert _run_button(at).disabled
    assert any("at most 1 calibration job at a time" in w.value and rid in w.value for w in at.warning)
    assert not [b for b in at.button if b.key == "cal_cancel"]  # not this user's job: no panel, no cancel


def test_the_page_refuses_a_target_too_large_before_offering_run(page, small_cpu_host: None) -> None:
    _store, open_page = page
    at = open_page()
    assert not _run_button(at).disabled
    at.selectbox(key="cal_model").set_value("llama-3.1-8b").run()
    assert _run_button(at).disabled
    assert any("target='llama-3.1-8b' does not fit this host's memory" in w.value and "15.0 GiB available" in w.value
               for w in at.warning)
