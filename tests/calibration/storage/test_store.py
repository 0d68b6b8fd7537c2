"""The store: records, runs, fits and history on a SQLite file and on a real PostgreSQL server (any_store),
reading without writing, one-line errors, dead runs, two processes writing at once."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from calibration.storage.records import SCHEMA_VERSION, GroupRecord, SpecCounts
from calibration.storage.store import STALE_AFTER_S, Store, StoreError, runs
from tests.calibration.conftest import make_record

REPO = Path(__file__).resolve().parents[3]


def test_record_round_trips_through_dict_and_json() -> None:
    rec = make_record(per_pos=(5, 3, 1), drafts=9)
    back = GroupRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back == rec
    assert back.schema_version == SCHEMA_VERSION


def test_unknown_schema_version_is_rejected() -> None:
    d = make_record().to_dict()
    d["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match=f"schema_version={SCHEMA_VERSION + 1}"):
        GroupRecord.from_dict(d)


def test_record_validation_names_field_and_value() -> None:
    with pytest.raises(ValueError, match="method='eagle9'"):
        make_record(method="eagle9")
    with pytest.raises(ValueError, match="wall_time_s=nan"):
        dataclasses.replace(make_record(), wall_time_s=float("nan"))
    with pytest.raises(ValueError, match="num_drafts=-1"):
        SpecCounts(num_drafts=-1)


def test_acceptance_conventions_on_a_record() -> None:
    # 10 drafts, K=3, 14 accepted: tau = 1 + 14/10, vLLM draft acceptance rate = 14/30
    rec = make_record(per_pos=(8, 4, 2), drafts=10, output_tokens=40, num_prompts=1)
    assert rec.acceptance_length == pytest.approx(2.4)
    assert rec.counts.draft_acceptance_rate == pytest.approx(14 / 30)
    # 39 decode tokens (first from prefill), 14 came from accepted drafts -> 25 sequence steps
    assert rec.sequence_steps == 25
    assert rec.tokens_per_sequence_step == pytest.approx(39 / 25)
    assert rec.draft_coverage == pytest.approx(10 / 25)


def test_a_written_sqlite_store_uses_wal(store: Store) -> None:
    store.create_run("engine", {})
    with store.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_opening_and_reading_a_store_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "new" / "cal.db"
    s = Store(f"sqlite:///{path}")
    assert s.list_runs() == [] and s.history() == [] and s.fits() == [] and s.groups() == []
    assert not path.parent.exists()  # no file, no folder: a reader never creates the store
    s.create_run("engine", {})
    assert path.exists()


def test_groups_are_visible_to_another_process_view_at_once(any_store: Store) -> None:
    rid = any_store.create_run("engine", {"x": 1}, status="running")
    any_store.add_group(make_record(run_id=rid))
    other = Store(any_store.url)  # a second engine on the same store, like the app reading a running job
    assert [g.workload for g in other.groups([rid])] == ["code"]
    assert other.get_run(rid).status == "running"


def test_a_dead_running_run_is_marked_failed_by_the_next_reader(any_store: Store) -> None:
    rid = any_store.create_run("engine", {}, status="running")
    any_store.heartbeat(rid, "configuration 1/2: baseline")
    assert any_store.get_run(rid).status == "running"
    later = time.time() + STALE_AFTER_S + 1
    [row] = any_store.list_runs(now=later)
    assert row.status == "failed" and "no heartbeat" in row.message and "baseline" in row.message
    # recorded in the store, not only shown: a plain read by another process now finds it failed
    with any_store.engine.connect() as c:
        assert c.execute(select(runs.c.status).where(runs.c.run_id == rid)).scalar() == "failed"
    assert Store(any_store.url).get_run(rid).status == "failed"
    # the dead job cannot revive it: a late heartbeat tells it to stop, a late success is ignored
    assert any_store.heartbeat(rid) is False
    assert any_store.set_status(rid, "succeeded") is False
    assert any_store.get_run(rid).status == "failed"


def test_the_first_terminal_state_wins(any_store: Store) -> None:
    rid = any_store.create_run("engine", {}, status="running")
    assert any_store.set_status(rid, "timed_out", "deadline")
    assert not any_store.set_status(rid, "failed", "exit -9")
    row = any_store.get_run(rid, now=time.time() + 10 * STALE_AFTER_S)
    assert (row.status, row.message) == ("timed_out", "deadline")


def test_unknown_status_is_rejected(any_store: Store) -> None:
    rid = any_store.create_run("engine", {})
    with pytest.raises(ValueError, match="status='done'"):
        any_store.set_status(rid, "done")


def test_unknown_run_names_the_id(any_store: Store) -> None:
    any_store.create_run("engine", {})
    with pytest.raises(KeyError, match="nope"):
        any_store.get_run("nope")


def test_fits_and_history_persist(any_store_url: str) -> None:
    s = Store(any_store_url)
    s.save_fit("p1", "report", {"a": 1})
    s.add_history(series="m/ngram-k4", workload="code", run_id="r", acceptance_length=2.5, low=2.2, high=2.8,
                  regression=False, created_at=1.0)
    s.add_history(series="m/ngram-k4", workload="code", run_id="r2", acceptance_length=2.0, low=1.8, high=2.1,
                  regression=True, created_at=2.0)
    assert not s.add_history(series="m/ngram-k4", workload="code", run_id="r2", acceptance_length=2.0, low=1.8,
                             high=2.1, regression=True, created_at=3.0)  # the same run's point: not again
    again = Store(any_store_url)
    assert again.fits()[0]["result"] == {"a": 1}
    h = again.history("m/ngram-k4")
    assert [x["acceptance_length"] for x in h] == [2.5, 2.0]
    assert [x["regression"] for x in h] == [0, 1]


def test_store_url_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("SPECPLAN_STORE_URL", url)
    assert Store().url == url
    Store().create_run("engine", {})
    assert (tmp_path / "env.db").exists()


# ---- errors: one line, no password ------------------------------------------------------------------
def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not a database\n" * 200)


def _truncated(path: Path) -> None:
    s = Store(f"sqlite:///{path}")
    for i in range(60):
        rid = s.create_run("engine", {"i": i}, status="succeeded")
        s.add_group(make_record(run_id=rid))
    s.engine.dispose()  # last connection: checkpoints the WAL into the file
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


@pytest.mark.parametrize(("damage", "reason"), [(_garbage, "file is not a database"),
                                                (_truncated, "database disk image is malformed")])
def test_a_damaged_sqlite_store_is_one_clear_error(tmp_path: Path, damage, reason: str) -> None:
    path = tmp_path / "cal.db"
    damage(path)
    s = Store(f"sqlite:///{path}")
    for read in (s.list_runs, s.groups, s.history, s.fits):
        with pytest.raises(StoreError) as e:
            read()
        assert "\n" not in str(e.value)
        assert str(path) in str(e.value) and reason in str(e.value)
    with pytest.raises(StoreError, match=reason):
        s.create_run("engine", {})


def test_a_password_never_appears_in_store_errors(pg_url: str) -> None:
    u = make_url(pg_url)
    secret = u.password
    assert secret
    wrong = u.set(password="Wr0ngPassw0rd").render_as_string(hide_password=False)
    with pytest.raises(StoreError) as e:
        Store(wrong).list_runs()  # a real server refusing the login
    assert "Wr0ngPassw0rd" not in str(e.value) and "***" in str(e.value)
    assert "password authentication failed" in str(e.value)
    s = Store(pg_url)
    s.create_run("engine", {})
    with pytest.raises(KeyError) as k:
        s.get_run("missing")
    assert secret not in str(k.value) and "***" in str(k.value)
    assert secret not in s.display_url


def test_a_read_only_postgresql_role_lists_but_cannot_write(pg_url: str) -> None:
    from sqlalchemy import create_engine

    s = Store(pg_url)
    rid = s.create_run("engine", {}, status="succeeded")
    db = make_url(pg_url).database
    role = f"reader_{db[-8:]}"
    owner = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with owner.connect() as c:
        c.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD 'r3ad0nly'"))
        c.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"))
    try:
        reader = Store(make_url(pg_url).set(username=role, password="r3ad0nly")
                       .render_as_string(hide_password=False))
        assert [r.run_id for r in reader.list_runs()] == [rid]
        with pytest.raises(StoreError, match="permission denied") as e:
            reader.create_run("engine", {})
        assert "r3ad0nly" not in str(e.value)
        reader.engine.dispose()
    finally:
        with owner.connect() as c:  # roles are server-wide: drop its grants here, then the role
            c.execute(text(f"DROP OWNED BY {role}"))
            c.execute(text(f"DROP ROLE {role}"))
        owner.dispose()


def _cli(*args: str, url: str | None = None, env: dict[str, str] | None = None,
         prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    store = ("--store", url) if url else ()
    return subprocess.run([*prefix, sys.executable, "-m", "calibration", *store, *args], capture_output=True,
                          text=True, env=full_env, cwd=REPO, timeout=120)


def test_cli_store_errors_are_one_line(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "cal.db"
    _garbage(path)
    out = _cli("list", "runs", url=f"sqlite:///{path}")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert out.stderr.startswith("error: calibration store") and "file is not a database" in out.stderr
    # a PostgreSQL URL with a password, given the recommended way (environment), refused by the server
    wrong = make_url(pg_url).set(password="Wr0ngPassw0rd").render_as_string(hide_password=False)
    out = _cli("list", "runs", env={"SPECPLAN_STORE_URL": wrong})
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "Wr0ngPassw0rd" not in out.stderr + out.stdout and "***" in out.stderr


def test_cli_lists_a_read_only_sqlite_store(tmp_path: Path) -> None:
    """A store file this process may read but not write (0444 in a 0555 folder, read by a process without
    root's override of file permissions): listing works, writing is one clear error line."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) not installed")
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder / 'cal.db'}"
    s = Store(url)
    rid = s.create_run("engine", {}, status="succeeded")
    s.add_group(make_record(run_id=rid))
    s.engine.dispose()
    (folder / "cal.db").chmod(0o444)
    folder.chmod(0o555)
    no_override = (setpriv, "--inh-caps=-dac_override,-dac_read_search",
                   "--bounding-set=-dac_override,-dac_read_search") if os.geteuid() == 0 else ()
    try:
        out = _cli("--json", "list", "runs", url=url, prefix=no_override)
        assert out.returncode == 0, out.stderr
        assert [r["run_id"] for r in json.loads(out.stdout)] == [rid]
        out = _cli("import", "--bench-json", str(REPO / "tests/calibration/data/bench_ngram_k3.json"),
                   "--workload", "code", url=url, prefix=no_override)
        assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
        assert "readonly" in out.stderr
    finally:
        folder.chmod(0o755)


# ---- two processes writing at once ------------------------------------------------------------------
WRITER = textwrap.dedent("""
    import sys, time
    from calibration.storage.store import Store
    from tests.calibration.conftest import make_record
    url, name, n, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    time.sleep(max(0.0, start - time.time()))  # both processes begin together, on a store with no schema yet
    s = Store(url)
    for i in range(n):
        rid = s.create_run("engine", {"writer": name, "i": i}, run_id=f"{name}-{i}", status="running")
        s.add_group(make_record(run_id=rid, workload="code"))
        s.heartbeat(rid, f"{name} {i}")
        s.set_status(rid, "succeeded", "done")
        # both processes add the same history point: exactly one may land
        s.add_history(series="m/ngram-k4", workload="code", run_id=f"shared-{i}", acceptance_length=2.0,
                      low=1.9, high=2.1, regression=False)
    print("ok")
""")


def test_two_processes_writing_at_once_lose_nothing(any_store_url: str) -> None:
    n = 25
    start = time.time() + 3.0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, any_store_url, name, str(n), str(start)], env=env,
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("a", "b")]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    s = Store(any_store_url)
    rows = s.list_runs(limit=1000)
    assert sorted(r.run_id for r in rows) == sorted(f"{w}-{i}" for w in "ab" for i in range(n))
    assert {r.status for r in rows} == {"succeeded"}
    assert sorted(g.run_id for g in s.groups()) == sorted(r.run_id for r in rows)
    assert sorted(h["run_id"] for h in s.history("m/ngram-k4")) == sorted(f"shared-{i}" for i in range(n))
